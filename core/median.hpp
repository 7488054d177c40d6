// The median of a list of measurements: what every profile and probe of
// pipevm reports, so that one slow outlier (the machine is shared) moves no
// figure.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace pipevm {

// The middle value, the mean of the middle two for an even count; 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (values.size() % 2 == 1) return *middle;
  const double upper = *middle;
  const double lower = *std::max_element(values.begin(), middle);
  return (lower + upper) / 2;
}

}  // namespace pipevm
