// The shortest decimal text that reads back as the same floating-point value
// (std::to_chars without a precision): a float prints as a float, a double
// as a double.
#pragma once

#include <charconv>
#include <string>
#include <type_traits>

namespace pipevm {

template <typename Real>
  requires std::is_floating_point_v<Real>
std::string shortest_text(Real value) {
  char text[64];
  const std::to_chars_result end = std::to_chars(text, text + sizeof text, value);
  return std::string(text, end.ptr);
}

}  // namespace pipevm
