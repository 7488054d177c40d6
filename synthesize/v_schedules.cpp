// V-ZB in closed form (v_schedules.hpp).
#include "v_schedules.hpp"

namespace pipevm::synthesis {

std::optional<ComputeOrder> v_zb_order(const Problem& problem) {
  const Config& c = problem.config;
  const int p = c.stages;
  const int m = c.micro_batches;
  if (problem.placement != Placement::v || c.chunks != 2 || m < 2 * p) return std::nullopt;
  const bool split = problem.split_backward;
  ComputeOrder order;
  order.placement = Placement::v;
  order.config = c;
  order.config.dp = 1;
  for (int s = 0; s < p; ++s) {
    auto& out = order.stages.emplace_back();
    const int d = p - 1 - s;
    const auto forward = [&](int chunk, int mb) { out.push_back({PassKind::forward, mb, chunk}); };
    const auto backward = [&](int chunk, int mb) {
      out.push_back({split ? PassKind::backward_input : PassKind::backward, mb, chunk});
    };
    const auto weight = [&](int chunk, int mb) {
      if (split) out.push_back({PassKind::backward_weight, mb, chunk});
    };
    for (int i = 0; i <= 2 * d; ++i) forward(0, i);
    for (int i = 0; i < s; ++i) {
      forward(1, i);
      forward(0, 2 * d + 1 + i);
    }
    forward(1, s);
    for (int j = 0; j + s + 1 < m; ++j) {
      backward(1, j);
      weight(1, j);
      if (j >= d) {
        if (j + p < m) forward(0, j + p);
        backward(0, j - d);
        weight(0, j - d);
      }
      forward(1, j + s + 1);
    }
    // The cool-down's weight passes in the order of their backwards: the
    // s + 1 last B and the p last b alternate, then the b go on alone.
    const auto pending_weight = [&](int q) {
      if (q < 2 * (s + 1)) {
        if (q % 2 == 0) {
          weight(1, m - 1 - s + q / 2);
        } else {
          weight(0, m - p + q / 2);
        }
      } else {
        weight(0, m - p + q - (s + 1));
      }
    };
    for (int i = 0; i < p; ++i) {
      if (i <= s) {
        backward(1, m - 1 - s + i);
      } else {
        pending_weight(i - (s + 1));
      }
      backward(0, m - p + i);
    }
    for (int q = p - s - 1; q < s + 1 + p; ++q) pending_weight(q);
  }
  if (!order_error(order).empty()) return std::nullopt;
  return order;
}

}  // namespace pipevm::synthesis
