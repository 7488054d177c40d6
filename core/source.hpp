// Source text and positions in it. A SourceRange is two byte offsets; line
// and column are computed only when a diagnostic is printed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pipevm {

struct SourceRange {
  std::uint32_t begin = 0;  // byte offset of the first character
  std::uint32_t end = 0;    // byte offset one past the last character
};

struct LineColumn {
  std::uint32_t line = 1;    // 1-based
  std::uint32_t column = 1;  // 1-based, in bytes
};

// What a column counts: bytes, Unicode characters (code points, what a user
// and SARIF count) or UTF-16 code units (what the Language Server Protocol
// counts). Malformed UTF-8 counts a byte per character.
enum class ColumnUnit : std::uint8_t { bytes, characters, utf16 };

class SourceFile {
 public:
  SourceFile(std::string name, std::string text);

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  LineColumn position(std::uint32_t offset) const;
  // The same position with its column counted in `unit` (1-based).
  LineColumn position(std::uint32_t offset, ColumnUnit unit) const;
  // The text of 1-based line `line`, without its line break.
  std::string_view line(std::uint32_t line) const;

 private:
  std::string name_;
  std::string text_;
  std::vector<std::uint32_t> line_starts_;
};

}  // namespace pipevm
