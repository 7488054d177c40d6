// The shipped schedules as compute orders (library.hpp).
#include "library.hpp"

#include <memory>
#include <string>

#include "compile.hpp"

namespace pipevm::synthesis {

namespace {

struct Parsed {
  std::string path;
  std::shared_ptr<const Schedule> schedule;
};

// Every shipped schedule parsed once (a file that does not parse is left
// out); each problem then only expands them.
const std::vector<Parsed>& parsed_schedules() {
  static const std::vector<Parsed> parsed = [] {
    std::vector<Parsed> all;
    for (const ShippedSchedule& shipped : shipped_schedules()) {
      const std::string path = "schedules/" + std::string(shipped.name) + ".pipe";
      Diagnostics diagnostics;
      auto schedule = parse(std::make_shared<const SourceFile>(path, std::string(shipped.text)), diagnostics);
      if (schedule) all.push_back({path, std::move(schedule)});
    }
    return all;
  }();
  return parsed;
}

}  // namespace

std::vector<NamedOrder> shipped_orders(const Problem& problem) {
  std::vector<NamedOrder> orders;
  Config config = problem.config;
  config.dp = 1;
  for (const Parsed& shipped : parsed_schedules()) {
    if (placement_of(*shipped.schedule) != problem.placement) continue;
    Diagnostics diagnostics;
    const auto program = expand(*shipped.schedule, config, diagnostics);
    if (!program) continue;
    std::string error;
    auto order = compute_order_of(*program, error);
    if (!order) continue;
    orders.push_back({shipped.path, with_backwards(*order, problem.split_backward)});
  }
  return orders;
}

}  // namespace pipevm::synthesis
