// FNV-1a (64-bit): the one digest pipevm prints and records (the model
// digest of `pipevm run`, the digests of checkpoint pieces). It detects
// accidental change (a truncated or rewritten file, replicas that drifted);
// it is no defence against deliberate tampering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace pipevm::runtime {

inline constexpr std::uint64_t kFnv1aBasis = 0xcbf29ce484222325ULL;

// The digest of `bytes`, continuing from `hash` (the basis to start afresh).
inline std::uint64_t fnv1a_bytes(std::span<const std::byte> bytes,
                                 std::uint64_t hash = kFnv1aBasis) {
  for (const std::byte b : bytes) {
    hash ^= static_cast<std::uint64_t>(b);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace pipevm::runtime
