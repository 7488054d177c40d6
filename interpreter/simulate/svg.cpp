// The SVG writer. Geometry is in pixels; time scales to a plot at least
// 960 pixels wide, and wider where that keeps every block's micro-batch
// label legible (up to a cap, beyond which labels shrink). Odd chunks use a
// lighter shade of their activity's colour, so the two directions of V and
// DualPipe schedules stand apart; an overlapped pair (FwdBwd) is one block
// labelled with both micro-batches.
#include "svg.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>

namespace pipevm {

namespace {

constexpr double kPlotWidth = 960;
constexpr double kRowHeight = 22;
constexpr double kRowGap = 4;
constexpr double kTop = 34;
constexpr double kCharWidth = 7;  // of the 12px sans-serif labels, roughly
constexpr double kFontSize = 12;
constexpr double kMinFontSize = 6;
constexpr double kMaxPlotWidth = 24000;  // wider than this, labels shrink instead

struct Shade {
  const char* solid;
  const char* light;  // odd chunks
  const char* text;
};

Shade shade_of(Activity activity) {
  switch (activity) {
    case Activity::forward:
      return {"#4c78a8", "#9ebcda", "#ffffff"};
    case Activity::backward:
      return {"#54a24b", "#a6d49f", "#ffffff"};
    case Activity::backward_input:
      return {"#2a9d8f", "#93d1c9", "#ffffff"};
    case Activity::backward_weight:
      return {"#e9a23b", "#f5d29c", "#000000"};
    case Activity::overlapped:
      return {"#7b5ea7", "#c2b3da", "#ffffff"};
    case Activity::recompute:
      return {"#72b7b2", "#b9dbd8", "#000000"};
    case Activity::data:
      return {"#b279a2", "#dcbfd3", "#ffffff"};
    case Activity::optimizer:
      return {"#e45756", "#f2aaa9", "#ffffff"};
    case Activity::communication:
      return {"#bab0ac", "#bab0ac", "#000000"};
    case Activity::host_copy:
      return {"#9d755d", "#9d755d", "#ffffff"};
    case Activity::held:
      return {"#f28e8c", "#f28e8c", "#000000"};
    case Activity::idle:
      break;
  }
  return {"#ffffff", "#ffffff", "#000000"};
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

// What a block says: its micro-batch; both, forward's first, for a pair.
std::string block_label(const Instruction& in) {
  if (is_pair(in.op)) {
    return std::to_string(first_cell(in).micro_batch) + "+" +
           std::to_string(second_cell(in).micro_batch);
  }
  return std::to_string(in.micro_batch);
}

bool labelled(const Instruction& in, Activity activity) {
  return operand_parts(in.op).micro_batch && !is_waiting(activity);
}

double label_width(const std::string& label, double font) {
  return kCharWidth * font / kFontSize * static_cast<double>(label.size()) + 2;
}

std::string row_label(const Config& config, int rank) {
  if (config.dp == 1) return "stage " + std::to_string(rank);
  return "rank " + std::to_string(rank) + " (s" + std::to_string(stage_of(config, rank)) + ", dp" +
         std::to_string(dp_rank_of(config, rank)) + ")";
}

}  // namespace

void write_svg(std::ostream& out, const Program& program, const Timeline& timeline,
               const std::string& title) {
  const Config& config = program.config;
  const int rows = program.ranks();
  double left = 0;
  for (int r = 0; r < rows; ++r) {
    left = std::max(left, kCharWidth * static_cast<double>(row_label(config, r).size()));
  }
  left += 16;
  // Pixels per time unit: enough for the narrowest labelled block's label
  // at full size, within the cap; past the cap the labels shrink.
  double wanted = 0;
  for (int r = 0; r < rows; ++r) {
    for (const Segment& segment : segments_of(program, timeline, r)) {
      const Instruction& in = program.code[segment.instruction];
      const double duration = segment.end - segment.begin;
      if (!labelled(in, segment.activity) || duration <= 0) continue;
      wanted = std::max(wanted, label_width(block_label(in), kFontSize) / duration);
    }
  }
  const double fit = timeline.makespan > 0 ? kPlotWidth / timeline.makespan : 0;
  const double most = timeline.makespan > 0 ? kMaxPlotWidth / timeline.makespan : 0;
  const double scale = std::max(fit, std::min(wanted, most));
  const double font =
      wanted > scale && wanted > 0 ? std::max(kMinFontSize, kFontSize * scale / wanted) : kFontSize;
  const double plot_width = timeline.makespan > 0 ? timeline.makespan * scale : kPlotWidth;
  const double rows_bottom = kTop + rows * (kRowHeight + kRowGap);
  const double axis_y = rows_bottom + 4;
  const double legend_y = axis_y + 36;
  const double width = left + plot_width + 20;
  const double height = legend_y + 28 + (config.chunks > 1 ? 22 : 0);

  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(width) << "\" height=\""
      << number(height) << "\" viewBox=\"0 0 " << number(width) << ' ' << number(height)
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out << "<text x=\"" << number(left) << "\" y=\"20\" font-size=\"14\">" << escape(title)
      << "</text>\n";

  std::array<bool, static_cast<std::size_t>(Activity::held) + 1> seen{};  // the last
  const std::vector<std::vector<std::size_t>> holds = holds_by_rank(program, timeline);
  for (int r = 0; r < rows; ++r) {
    const double y = kTop + r * (kRowHeight + kRowGap);
    out << "<text x=\"" << number(left - 8) << "\" y=\"" << number(y + kRowHeight / 2 + 4)
        << "\" text-anchor=\"end\">" << escape(row_label(config, r)) << "</text>\n";
    out << "<rect x=\"" << number(left) << "\" y=\"" << number(y) << "\" width=\""
        << number(plot_width) << "\" height=\"" << number(kRowHeight) << "\" fill=\"#f4f4f4\"/>\n";
    // Under the blocks: where the rank works, the work shows, as in the grid.
    for (const std::size_t h : holds[static_cast<std::size_t>(r)]) {
      const Hold* hold = &timeline.holds[h];
      seen[static_cast<std::size_t>(Activity::held)] = true;
      out << "<rect x=\"" << number(left + hold->begin * scale) << "\" y=\"" << number(y)
          << "\" width=\"" << number((hold->end - hold->begin) * scale) << "\" height=\""
          << number(kRowHeight) << "\" fill=\"" << shade_of(Activity::held).solid << "\"><title>"
          << escape("`" + disassemble(program.code[hold->held]) + "` held behind `" +
                    disassemble(program.code[hold->blocker]) + "` (posted order)")
          << "</title></rect>\n";
    }
    // The rank's host link: each copy as a line along the row's foot.
    for (const HostCopy& copy : timeline.copies) {
      if (copy.instruction < program.rank_begin[static_cast<std::size_t>(r)] ||
          copy.instruction >= program.rank_begin[static_cast<std::size_t>(r) + 1]) {
        continue;
      }
      seen[static_cast<std::size_t>(Activity::host_copy)] = true;
      out << "<rect x=\"" << number(left + copy.begin * scale) << "\" y=\""
          << number(y + kRowHeight * 0.85) << "\" width=\""
          << number((copy.end - copy.begin) * scale) << "\" height=\"" << number(kRowHeight * 0.15)
          << "\" fill=\"" << shade_of(Activity::host_copy).solid << "\"><title>"
          << escape("`" + disassemble(program.code[copy.instruction]) + "` on the host link")
          << "</title></rect>\n";
    }
    for (const Segment& segment : segments_of(program, timeline, r)) {
      const Instruction& in = program.code[segment.instruction];
      const Shade shade = shade_of(segment.activity);
      seen[static_cast<std::size_t>(segment.activity)] = true;
      const double x = left + segment.begin * scale;
      const double w = (segment.end - segment.begin) * scale;
      if (is_waiting(segment.activity)) {
        out << "<rect x=\"" << number(x) << "\" y=\"" << number(y + kRowHeight * 0.4)
            << "\" width=\"" << number(w) << "\" height=\"" << number(kRowHeight * 0.2)
            << "\" fill=\"" << shade.solid << "\"><title>" << escape(disassemble(in))
            << "</title></rect>\n";
        continue;
      }
      out << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(w)
          << "\" height=\"" << number(kRowHeight) << "\" fill=\""
          << (in.chunk % 2 == 1 ? shade.light : shade.solid)
          << "\" stroke=\"#ffffff\" stroke-width=\"0.5\"><title>" << escape(disassemble(in))
          << "</title></rect>\n";
      const std::string label = block_label(in);
      if (labelled(in, segment.activity) && w >= label_width(label, font) - 1e-9) {
        out << "<text x=\"" << number(x + w / 2) << "\" y=\"" << number(y + kRowHeight / 2 + 4)
            << "\" text-anchor=\"middle\"";
        if (font != kFontSize) out << " font-size=\"" << number(font) << "\"";
        out << " fill=\"" << (in.chunk % 2 == 1 ? "#000000" : shade.text) << "\">" << label
            << "</text>\n";
      }
    }
  }

  // Time axis: about ten ticks at round numbers.
  out << "<line x1=\"" << number(left) << "\" y1=\"" << number(axis_y) << "\" x2=\""
      << number(left + plot_width) << "\" y2=\"" << number(axis_y) << "\" stroke=\"#000000\"/>\n";
  if (timeline.makespan > 0) {
    const double step = nice_step(timeline.makespan / std::max(10.0, std::round(plot_width / 96)));
    for (double t = 0; t <= timeline.makespan * (1 + 1e-9); t += step) {
      const double x = left + t * scale;
      out << "<line x1=\"" << number(x) << "\" y1=\"" << number(axis_y) << "\" x2=\"" << number(x)
          << "\" y2=\"" << number(axis_y + 5) << "\" stroke=\"#000000\"/>\n";
      out << "<text x=\"" << number(x) << "\" y=\"" << number(axis_y + 18)
          << "\" text-anchor=\"middle\">" << format_time(t) << "</text>\n";
    }
  }
  out << "<text x=\"" << number(left + plot_width) << "\" y=\"" << number(axis_y + 32)
      << "\" text-anchor=\"end\">time (cost units: --cost keys; microseconds for measured "
         "costs)</text>\n";

  // Legend: only the activities that appear.
  double x = left;
  for (std::size_t a = 0; a < seen.size(); ++a) {
    if (!seen[a]) continue;
    const auto activity = static_cast<Activity>(a);
    const std::string label(name(activity));
    out << "<rect x=\"" << number(x) << "\" y=\"" << number(legend_y)
        << "\" width=\"14\" height=\"14\" fill=\"" << shade_of(activity).solid << "\"/>\n";
    out << "<text x=\"" << number(x + 20) << "\" y=\"" << number(legend_y + 11) << "\">" << label
        << "</text>\n";
    x += 34 + kCharWidth * static_cast<double>(label.size());
  }
  if (config.chunks > 1) {
    out << "<text x=\"" << number(left) << "\" y=\"" << number(legend_y + 34)
        << "\">lighter shade: odd chunk; label: micro-batch (a forward+backward pair: "
           "forward's+backward's)</text>\n";
  }
  out << "</svg>\n";
}

bool write_svg(const std::string& path, const Program& program, const Timeline& timeline,
               const std::string& title, std::string& error) {
  errno = 0;
  std::ofstream out(path);
  if (out) write_svg(out, program, timeline, title);
  if (!out) {
    error = "cannot write SVG file '" + path + "'" +
            (errno != 0 ? ": " + std::string(std::strerror(errno)) : "");
    return false;
  }
  return true;
}

}  // namespace pipevm
