// Shared by the ViT's tests: random inputs, and a gradient checked against
// central finite differences of an objective (a double, computed in float).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "random.hpp"

namespace pipevm::runtime::gradient_check {

inline std::vector<float> random_values(std::size_t count, std::uint64_t seed, float low = -1.0f,
                                        float high = 1.0f) {
  SplitMix64 random(seed);
  std::vector<float> values(count);
  for (float& value : values) value = low + (high - low) * random.uniform();
  return values;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  }
  return sum;
}

// Central differences of objective() with respect to every element of x.
inline std::vector<double> numeric_gradient(std::vector<float>& x,
                                            const std::function<double()>& objective,
                                            float step) {
  std::vector<double> gradient(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float original = x[i];
    x[i] = original + step;
    const double up = objective();
    x[i] = original - step;
    const double down = objective();
    x[i] = original;
    gradient[i] = (up - down) / (2.0 * static_cast<double>(step));
  }
  return gradient;
}

// Expects `analytic` to be the gradient of objective() with respect to x,
// element by element, within tolerance x (1 + |numeric|).
inline void expect_gradient(const std::vector<float>& analytic, std::vector<float>& x,
                            const std::function<double()>& objective, double tolerance = 2e-3) {
  ASSERT_EQ(analytic.size(), x.size());
  const std::vector<double> numeric_all = numeric_gradient(x, objective, 1e-2f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double numeric = numeric_all[i];
    EXPECT_NEAR(static_cast<double>(analytic[i]), numeric, tolerance * (1.0 + std::abs(numeric)))
        << "element " << i;
  }
}

}  // namespace pipevm::runtime::gradient_check
