// The SVG writer. Geometry is in pixels of a fixed-width plot; time scales to
// fit it. Odd chunks use a lighter shade of their activity's colour, so the
// two directions of V and DualPipe schedules stand apart.
#include "svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>

namespace pipevm {

namespace {

constexpr double kPlotWidth = 960;
constexpr double kRowHeight = 22;
constexpr double kRowGap = 4;
constexpr double kTop = 34;
constexpr double kCharWidth = 7;  // of the 12px sans-serif labels, roughly

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
    case Activity::data:
      return {"#b279a2", "#dcbfd3", "#ffffff"};
    case Activity::optimizer:
      return {"#e45756", "#f2aaa9", "#ffffff"};
    case Activity::communication:
      return {"#bab0ac", "#bab0ac", "#000000"};
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
  const double scale = timeline.makespan > 0 ? kPlotWidth / timeline.makespan : 0;
  const double rows_bottom = kTop + rows * (kRowHeight + kRowGap);
  const double axis_y = rows_bottom + 4;
  const double legend_y = axis_y + 36;
  const double width = left + kPlotWidth + 20;
  const double height = legend_y + 28 + (config.chunks > 1 ? 22 : 0);

  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(width) << "\" height=\""
      << number(height) << "\" viewBox=\"0 0 " << number(width) << ' ' << number(height)
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out << "<text x=\"" << number(left) << "\" y=\"20\" font-size=\"14\">" << escape(title)
      << "</text>\n";

  std::array<bool, static_cast<std::size_t>(Activity::communication) + 1> seen{};  // the last
  for (int r = 0; r < rows; ++r) {
    const double y = kTop + r * (kRowHeight + kRowGap);
    out << "<text x=\"" << number(left - 8) << "\" y=\"" << number(y + kRowHeight / 2 + 4)
        << "\" text-anchor=\"end\">" << escape(row_label(config, r)) << "</text>\n";
    out << "<rect x=\"" << number(left) << "\" y=\"" << number(y) << "\" width=\""
        << number(kPlotWidth) << "\" height=\"" << number(kRowHeight) << "\" fill=\"#f4f4f4\"/>\n";
    for (const Segment& segment : segments_of(program, timeline, r)) {
      const Instruction& in = program.code[segment.instruction];
      const Shade shade = shade_of(segment.activity);
      seen[static_cast<std::size_t>(segment.activity)] = true;
      const double x = left + segment.begin * scale;
      const double w = (segment.end - segment.begin) * scale;
      if (segment.activity == Activity::communication) {
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
      const std::string label = std::to_string(in.micro_batch);
      if (operand_parts(in.op).micro_batch &&
          w >= kCharWidth * static_cast<double>(label.size()) + 2) {
        out << "<text x=\"" << number(x + w / 2) << "\" y=\"" << number(y + kRowHeight / 2 + 4)
            << "\" text-anchor=\"middle\" fill=\"" << (in.chunk % 2 == 1 ? "#000000" : shade.text)
            << "\">" << label << "</text>\n";
      }
    }
  }

  // Time axis: about ten ticks at round numbers.
  out << "<line x1=\"" << number(left) << "\" y1=\"" << number(axis_y) << "\" x2=\""
      << number(left + kPlotWidth) << "\" y2=\"" << number(axis_y) << "\" stroke=\"#000000\"/>\n";
  if (timeline.makespan > 0) {
    const double step = nice_step(timeline.makespan / 10);
    for (double t = 0; t <= timeline.makespan * (1 + 1e-9); t += step) {
      const double x = left + t * scale;
      out << "<line x1=\"" << number(x) << "\" y1=\"" << number(axis_y) << "\" x2=\"" << number(x)
          << "\" y2=\"" << number(axis_y + 5) << "\" stroke=\"#000000\"/>\n";
      out << "<text x=\"" << number(x) << "\" y=\"" << number(axis_y + 18)
          << "\" text-anchor=\"middle\">" << format_time(t) << "</text>\n";
    }
  }
  out << "<text x=\"" << number(left + kPlotWidth) << "\" y=\"" << number(axis_y + 32)
      << "\" text-anchor=\"end\">time</text>\n";

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
        << "\">lighter shade: odd chunk; label: micro-batch</text>\n";
  }
  out << "</svg>\n";
}

bool write_svg(const std::string& path, const Program& program, const Timeline& timeline,
               const std::string& title, std::string& error) {
  std::ofstream out(path);
  if (out) write_svg(out, program, timeline, title);
  if (!out) {
    error = "cannot write SVG file '" + path + "'";
    return false;
  }
  return true;
}

}  // namespace pipevm
