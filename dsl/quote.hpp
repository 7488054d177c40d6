// 'name' for messages. Built by appending: GCC 12 warns (-Wrestrict, a false
// positive) on `"'" + std::string(x)` when inlined.
#pragma once

#include <string>
#include <string_view>

namespace pipevm {

inline std::string quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '\'';
  out += text;
  out += '\'';
  return out;
}

}  // namespace pipevm
