// Line tables for SourceFile.
#include "source.hpp"

#include <algorithm>

namespace pipevm {

SourceFile::SourceFile(std::string name, std::string text)
    : name_(std::move(name)), text_(std::move(text)) {
  line_starts_.push_back(0);
  for (std::uint32_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
}

LineColumn SourceFile::position(std::uint32_t offset) const {
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  const auto line = static_cast<std::uint32_t>(it - line_starts_.begin());
  return {line, offset - line_starts_[line - 1] + 1};
}

LineColumn SourceFile::position(std::uint32_t offset, ColumnUnit unit) const {
  LineColumn p = position(offset);
  if (unit == ColumnUnit::bytes) return p;
  const std::uint32_t begin = line_starts_[p.line - 1];
  const std::uint32_t end =
      std::min<std::uint32_t>(offset, static_cast<std::uint32_t>(text_.size()));
  std::uint32_t column = 1;
  for (std::uint32_t i = begin; i < end;) {
    const auto lead = static_cast<unsigned char>(text_[i]);
    std::uint32_t length = lead < 0x80    ? 1
                           : lead >= 0xF0 ? 4
                           : lead >= 0xE0 ? 3
                           : lead >= 0xC0 ? 2
                                          : 1;
    if (i + length > text_.size()) length = 1;
    for (std::uint32_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text_[i + k]) & 0xC0) != 0x80) length = 1;
    }
    column += unit == ColumnUnit::utf16 && length == 4 ? 2 : 1;
    i += length;
  }
  p.column = column;
  return p;
}

std::string_view SourceFile::line(std::uint32_t line) const {
  if (line == 0 || line > line_starts_.size()) return {};
  const std::uint32_t begin = line_starts_[line - 1];
  std::uint32_t end = line < line_starts_.size() ? line_starts_[line] - 1
                                                 : static_cast<std::uint32_t>(text_.size());
  if (end > begin && text_[end - 1] == '\r') --end;
  return std::string_view(text_).substr(begin, end - begin);
}

}  // namespace pipevm
