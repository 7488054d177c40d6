// PyTorch's pipeline_order as a table file, and lowering (pipeline_order.hpp).
#include "pipeline_order.hpp"

#include <algorithm>

#include "lower.hpp"

namespace pipevm::api {

std::shared_ptr<const SourceFile> pipeline_order_file(const PipelineOrder& order,
                                                      const std::string& name, std::string& error) {
  std::string text;
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    for (std::size_t step = 0; step < order[rank].size(); ++step) {
      if (step > 0) text += ',';
      const std::optional<std::string>& cell = order[rank][step];
      if (!cell) continue;
      if (cell->find_first_of(",\"\r\n") != std::string::npos) {
        error = "rank " + std::to_string(rank) + ", step " + std::to_string(step) + ": '" + *cell +
                "' is not an action (a comma, quote or line break in it)";
        return nullptr;
      }
      text += *cell;
    }
    text += '\n';
  }
  return std::make_shared<const SourceFile>(name, std::move(text));
}

TableCell cell_at(const SourceFile& file, std::uint32_t offset) {
  TableCell cell;
  const LineColumn at = file.position(offset);
  cell.rank = static_cast<int>(at.line) - 1;
  const std::string_view line = file.line(at.line);
  const std::size_t column = std::min<std::size_t>(at.column - 1, line.size());
  std::size_t begin = 0;
  for (std::size_t i = 0; i < column; ++i) {
    if (line[i] != ',') continue;
    ++cell.step;
    begin = i + 1;
  }
  const std::size_t end = line.find(',', begin);
  cell.action = std::string(line.substr(begin, end == std::string_view::npos ? end : end - begin));
  return cell;
}

std::optional<pytorch::Layout> table_layout(const std::shared_ptr<const SourceFile>& file,
                                            Diagnostics& diagnostics) {
  const auto table = pytorch::read_table(file, diagnostics);
  if (!table) return std::nullopt;
  return pytorch::infer_layout(*table, file, diagnostics);
}

std::optional<std::string> lower_table(const std::shared_ptr<const SourceFile>& file,
                                       Diagnostics& diagnostics) {
  const auto table = pytorch::read_table(file, diagnostics);
  if (!table) return std::nullopt;
  const auto layout = pytorch::infer_layout(*table, file, diagnostics);
  if (!layout) return std::nullopt;
  if (!pytorch::compute_only(*table)) return pytorch::write_table(*table);
  const auto lowered =
      pytorch::add_send_recv(pytorch::merge_backwards(*table), *layout, file, diagnostics);
  if (!lowered) return std::nullopt;
  return pytorch::write_table(*lowered);
}

}  // namespace pipevm::api
