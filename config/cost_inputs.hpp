// Where a command's costs come from, and which wins: the run
// configuration's `costs` section, then a cost file (`--costs`), then keys
// given one by one (`--cost k=v,...`, or Python's dict), then the transfer
// model (`--transfer`); the textbook default when none of them sets a key.
// Also the progress models' names (`--p2p-order`). One definition for
// simulate, synthesize and the Python module; the command line's options
// for them are cli/cost_options.hpp. Returns errors, never prints.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "costs.hpp"
#include "run_config.hpp"

namespace pipevm::config {

struct CostInputs {
  std::string file;   // a YAML cost file (cost_files.hpp); empty: none
  std::string flags;  // "fwd=1,bwd=2"; empty: none
  std::string text;   // a cost file's YAML text (Python's TorchProfile); empty: none
  // Keys given as numbers, applied as flags are (Python's dict); nullopt:
  // none given (an empty dict is given: no keys, not the default).
  std::optional<std::vector<std::pair<std::string, double>>> values;
  std::string transfer;  // a TransferModel's name over the costs'; empty: the costs'
};

// The costs `inputs` and the configuration's `configured` keys give, or
// false with `error`: "FILE:line:col: costs: ..." for a configured key,
// the cost file's or the flags' own message otherwise.
bool compose_costs(const CostInputs& inputs, const std::vector<CostSetting>& configured,
                   Costs& costs, std::string& error);

// The cost keys `inputs` and `configured` name (a cost file's top-level and
// per-stage keys, the flags', the values'); empty when none is given, so
// the textbook default applies. Read after compose_costs succeeded.
std::vector<std::string> given_cost_keys(const CostInputs& inputs,
                                         const std::vector<CostSetting>& configured);

// The transfer models' names, as --transfer and the cost key take them.
inline constexpr std::array<std::string_view, 3> kTransferModels = {"auto", "eager", "rendezvous"};

// The progress models of point-to-point operations: `independent` (also
// `any`: each send and receive progresses on its own, as MPI's) and
// `posted` (a rank's operations one at a time in the order posted, as
// NCCL's).
inline constexpr std::array<std::string_view, 3> kP2pOrders = {"independent", "any", "posted"};
// True for posted order, false for the independent one, nullopt for a name
// not in kP2pOrders.
std::optional<bool> posted_order(std::string_view name);

}  // namespace pipevm::config
