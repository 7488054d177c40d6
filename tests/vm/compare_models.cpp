// compare_models A.safetensors B.safetensors TOLERANCE: exits 0 when both
// files hold the same tensors with the same shapes and the largest absolute
// difference, relative to B's largest magnitude, is at most TOLERANCE.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "safetensors.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: compare_models A.safetensors B.safetensors TOLERANCE\n");
    return 2;
  }
  try {
    const auto a = pipevm::runtime::read_safetensors(argv[1]);
    const auto b = pipevm::runtime::read_safetensors(argv[2]);
    const double tolerance = std::stod(argv[3]);
    if (a.tensors.size() != b.tensors.size()) {
      std::fprintf(stderr, "different tensor counts: %zu and %zu\n", a.tensors.size(),
                   b.tensors.size());
      return 1;
    }
    double worst = 0.0;
    double scale = 0.0;
    for (const auto& [name, tensor] : b.tensors) {
      const auto other = a.tensors.find(name);
      if (other == a.tensors.end() || other->second.shape != tensor.shape) {
        std::fprintf(stderr, "tensor %s is missing or shaped differently\n", name.c_str());
        return 1;
      }
      for (std::size_t i = 0; i < tensor.data.size(); ++i) {
        const double x = static_cast<double>(other->second.data[i]);
        const double y = static_cast<double>(tensor.data[i]);
        worst = std::max(worst, std::abs(x - y));
        scale = std::max(scale, std::abs(y));
      }
    }
    const double relative = scale > 0.0 ? worst / scale : worst;
    std::printf("%zu tensors, largest relative difference %.3g (tolerance %.3g)\n",
                b.tensors.size(), relative, tolerance);
    return relative <= tolerance ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "compare_models: %s\n", error.what());
    return 2;
  }
}
