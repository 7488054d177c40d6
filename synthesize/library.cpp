// The shipped schedules as compute orders (library.hpp).
#include "library.hpp"

#include <memory>
#include <string>

#include "compile.hpp"

namespace pipevm::synthesis {

std::vector<NamedOrder> shipped_orders(const Problem& problem) {
  std::vector<NamedOrder> orders;
  Config config = problem.config;
  config.dp = 1;
  for (const ShippedSchedule& shipped : shipped_schedules()) {
    const std::string path = "schedules/" + std::string(shipped.name) + ".pipe";
    Diagnostics diagnostics;
    const auto program = compile(std::make_shared<const SourceFile>(path, std::string(shipped.text)),
                                 config, diagnostics);
    if (!program || program->placement != problem.placement) continue;
    std::string error;
    auto order = compute_order_of(*program, error);
    if (!order) continue;
    orders.push_back({path, with_backwards(*order, problem.split_backward)});
  }
  return orders;
}

}  // namespace pipevm::synthesis
