// The options of every command that takes costs (simulate, synthesize), one
// definition for all: --cost, --costs, --transfer and --p2p-order (which
// check takes too). What they mean, and which wins, is
// config/cost_inputs.hpp's.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cost_inputs.hpp"

namespace pipevm::cli {

// Adds --cost, --costs, --transfer and --p2p-order to `app`.
void add_cost_options(CLI::App& app, config::CostInputs& inputs, std::string& p2p_order);
// Adds --p2p-order alone (check).
void add_p2p_order_option(CLI::App& app, std::string& p2p_order);

// The --help text listing every cost key.
std::string cost_keys_help();

}  // namespace pipevm::cli
