// The cost options (cost_options.hpp).
#include "cost_options.hpp"

#include <algorithm>
#include <vector>

namespace pipevm::cli {

namespace {

template <std::size_t N>
CLI::IsMember one_of(const std::array<std::string_view, N>& names) {
  return CLI::IsMember(std::vector<std::string>(names.begin(), names.end()));
}

}  // namespace

void add_p2p_order_option(CLI::App& app, std::string& p2p_order) {
  app.add_option("--p2p-order", p2p_order,
                 "independent (or any): each send and receive progresses on its own (MPI); "
                 "posted: a rank's sends and receives run one at a time in the order posted "
                 "(NCCL)")
      ->check(one_of(config::kP2pOrders))
      ->capture_default_str();
}

void add_cost_options(CLI::App& app, config::CostInputs& inputs, std::string& p2p_order) {
  app.add_option("--cost", inputs.flags,
                 "Costs as key=value pairs, e.g. fwd=1,bwd=2,send=0.1; over --costs and the "
                 "costs of --config");
  app.add_option("--costs", inputs.file,
                 "A YAML file of costs (key: value; compute per stage under stages:, per chunk "
                 "under a stage's chunks:, as run --profile writes it); over the costs of "
                 "--config");
  app.add_option("--transfer", inputs.transfer,
                 "When a message moves: auto (default) as the runtime's MPI, eager up to the "
                 "eager limits and rendezvous above; eager: it leaves when sent; rendezvous: "
                 "when both sides have posted (the cost key `transfer`)")
      ->check(one_of(config::kTransferModels));
  add_p2p_order_option(app, p2p_order);
}

std::string cost_keys_help() {
  std::string text = "Cost keys (--cost k=v,... and --costs YAML files; unset keys cost 0):\n";
  for (const CostKey& key : cost_keys()) {
    text += "  " + std::string(key.name) +
            std::string(22 - std::min<std::size_t>(key.name.size(), 21), ' ') +
            std::string(key.doc) + "\n";
  }
  return text;
}

}  // namespace pipevm::cli
