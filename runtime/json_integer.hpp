// Reading an integer out of a JSON value without undefined behaviour:
// nlohmann's get<int>() on 1e30 or on 2^63 (stored as a double, or as an
// unsigned) converts out of range, which UBSan reports and which yields
// garbage. The readers of files (safetensors headers, checkpoint manifests)
// take integers through this. Leaves out the error message: the caller
// knows the file and the field.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

namespace pipevm::runtime {

// The value as a T when it is a JSON integer within T's range; else empty
// (a float, a string, or an integer T cannot hold).
template <std::integral T>
std::optional<T> json_integer(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const auto number = value.get<std::uint64_t>();
    if (std::in_range<T>(number)) return static_cast<T>(number);
  } else if (value.is_number_integer()) {
    const auto number = value.get<std::int64_t>();
    if (std::in_range<T>(number)) return static_cast<T>(number);
  }
  return std::nullopt;
}

}  // namespace pipevm::runtime
