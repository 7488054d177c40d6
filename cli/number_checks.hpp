// Range checks of numeric options whose errors read as words ("--rank: must
// be ≥ 0, got -1") instead of CLI11's "not in range 0.000000 to 1.79e308".
// What each option means and its default are where it is declared.
#pragma once

#include <CLI/CLI.hpp>

namespace pipevm::cli {

// A number ≥ `least`.
CLI::Validator at_least(double least);
// A number > `bound`.
CLI::Validator above(double bound);
// A number from `least` to `most`, both included.
CLI::Validator in_range(double least, double most);

}  // namespace pipevm::cli
