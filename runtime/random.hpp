// The runtime's one random generator: SplitMix64, chosen because its output
// is fully specified (the standard library's distributions are not), so
// initial weights, epoch orders and synthetic data are the same on every
// platform. Not for anything that needs statistical strength beyond that.
#pragma once

#include <cstdint>

namespace pipevm::runtime {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  // A generator for stream `stream` of `seed`: streams of one seed are unrelated.
  SplitMix64(std::uint64_t seed, std::uint64_t stream)
      : state_(SplitMix64(seed ^ (stream * 0xD1B54A32D192ED03ULL)).next()) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 24 random bits.
  float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }
  // Uniform in [0, bound), bound > 0 (multiply-shift; the bias is below 2^-32).
  std::uint32_t below(std::uint32_t bound) {
    return static_cast<std::uint32_t>(((next() >> 32) * bound) >> 32);
  }

 private:
  std::uint64_t state_;
};

}  // namespace pipevm::runtime
