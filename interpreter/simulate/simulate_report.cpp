// What `pipevm simulate` prints: the terminal grid, the figures and the JSON
// summary. Pictures (SVG) and traces live in svg.cpp and trace.cpp; all of
// them read time through segments_of so they agree on what a rank was doing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "simulate.hpp"

namespace pipevm {

namespace {

constexpr std::size_t kNoPartner = static_cast<std::size_t>(-1);

std::string row_label(const Config& config, int rank) {
  if (config.dp == 1) return "stage " + std::to_string(rank);
  return "rank " + std::to_string(rank) + " (stage " + std::to_string(stage_of(config, rank)) +
         ", dp " + std::to_string(dp_rank_of(config, rank)) + ")";
}

// The time axis under the grid: a label every ten columns where it fits.
std::string axis_line(std::size_t indent, std::size_t columns, double slot) {
  std::string line(indent, ' ');
  for (std::size_t column = 0; column <= columns; column += 10) {
    const std::size_t at = indent + column;
    if (line.size() > at) continue;
    line.resize(at, ' ');
    line += format_time(static_cast<double>(column) * slot);
    line += ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// The columns of a row whose midpoint falls in one of its holds.
std::vector<bool> held_columns(const Timeline& timeline, const std::vector<std::size_t>& holds,
                               std::size_t columns, double slot) {
  std::vector<int> change(columns + 1, 0);
  for (const std::size_t h : holds) {
    const Hold& hold = timeline.holds[h];
    const auto first = static_cast<std::size_t>(std::max(0.0, std::ceil(hold.begin / slot - 0.5)));
    const auto last = static_cast<std::size_t>(std::max(0.0, std::ceil(hold.end / slot - 0.5)));
    if (first >= last || first >= columns) continue;
    ++change[first];
    --change[std::min(last, columns)];
  }
  std::vector<bool> held(columns, false);
  int depth = 0;
  for (std::size_t c = 0; c < columns; ++c) {
    depth += change[c];
    held[c] = depth > 0;
  }
  return held;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100);
  return text;
}

}  // namespace

double nice_step(double value) {
  if (!(value > 0)) return 1;
  const double decade = std::pow(10.0, std::floor(std::log10(value)));
  for (double multiple : {1.0, 2.0, 5.0, 10.0}) {
    // A little slack so that 0.1 / 1 does not round up to 0.2.
    if (multiple * decade >= value * (1 - 1e-9)) return multiple * decade;
  }
  return 10 * decade;
}

std::string format_time(double value) {
  char text[32];
  // Large times (measured microseconds) read better whole than as 1e+05, up
  // to 1e15: beyond, whole numbers are not exact and outgrow the buffer.
  const double size = std::fabs(value);
  std::snprintf(text, sizeof text, size >= 1e4 && size < 1e15 ? "%.0f" : "%.4g", value);
  return text;
}

std::vector<Segment> segments_of(const Program& program, const Timeline& timeline, int rank) {
  std::vector<Segment> segments;
  for (std::size_t i = program.rank_begin[static_cast<std::size_t>(rank)];
       i < program.rank_begin[static_cast<std::size_t>(rank) + 1]; ++i) {
    const InstructionTime& t = timeline.times[i];
    const Activity activity = activity_of(program.code[i].op);
    const double compute_end = t.started + t.busy;
    if (t.busy > 0) {
      segments.push_back({t.started, compute_end, activity, i});
    }
    if (t.ended > compute_end && (is_waiting(activity) || t.busy > 0)) {
      segments.push_back({compute_end, t.ended,
                          activity == Activity::host_copy ? activity : Activity::communication, i});
    }
  }
  return segments;
}

std::vector<std::vector<std::size_t>> holds_by_rank(const Program& program,
                                                    const Timeline& timeline) {
  std::vector<std::vector<std::size_t>> out(static_cast<std::size_t>(program.ranks()));
  if (timeline.holds.empty()) return out;
  const auto owner = [&](std::size_t i) {
    const auto after = std::upper_bound(program.rank_begin.begin(), program.rank_begin.end(), i);
    return static_cast<std::size_t>(after - program.rank_begin.begin()) - 1;
  };
  std::vector<std::size_t> partner(program.code.size(), kNoPartner);
  for (const MessageFlow& flow : timeline.flows) {
    partner[flow.send] = flow.recv;
    partner[flow.recv] = flow.send;
  }
  for (std::size_t h = 0; h < timeline.holds.size(); ++h) {
    const Hold& hold = timeline.holds[h];
    const std::size_t blocker_rank = owner(hold.blocker);
    out[blocker_rank].push_back(h);
    // A held send keeps its receiver waiting; a held receive's sender
    // need not wait (an eager send is done when posted).
    const std::size_t other = partner[hold.held];
    if (is_send(program.code[hold.held].op) && other != kNoPartner &&
        owner(other) != blocker_rank) {
      out[owner(other)].push_back(h);
    }
  }
  return out;
}

std::string render_grid(const Program& program, const Timeline& timeline, int width) {
  const std::vector<std::vector<std::size_t>> holds = holds_by_rank(program, timeline);
  const double slot = nice_step(timeline.makespan / std::max(width, 1));
  const auto columns = timeline.makespan > 0
                           ? static_cast<std::size_t>(std::ceil(timeline.makespan / slot - 1e-9))
                           : 0;
  std::vector<std::string> labels;
  std::size_t label_width = 0;
  for (int r = 0; r < program.ranks(); ++r) {
    labels.push_back(row_label(program.config, r));
    label_width = std::max(label_width, labels.back().size());
  }
  std::string out;
  for (int r = 0; r < program.ranks(); ++r) {
    const std::vector<Segment> segments = segments_of(program, timeline, r);
    // Each column shows the segment under its midpoint.
    constexpr std::size_t kIdle = static_cast<std::size_t>(-1);
    std::vector<std::size_t> owner(columns, kIdle);
    std::size_t k = 0;
    for (std::size_t c = 0; c < columns; ++c) {
      const double middle = (static_cast<double>(c) + 0.5) * slot;
      while (k < segments.size() && segments[k].end <= middle) ++k;
      if (k < segments.size() && segments[k].begin <= middle) owner[c] = k;
    }
    std::string row(columns, letter_of(Activity::idle));
    if (!timeline.holds.empty()) {
      const std::vector<bool> held =
          held_columns(timeline, holds[static_cast<std::size_t>(r)], columns, slot);
      for (std::size_t c = 0; c < columns; ++c) {
        if (held[c] && owner[c] == kIdle) row[c] = letter_of(Activity::held);
      }
    }
    for (std::size_t c = 0; c < columns;) {
      std::size_t run_end = c + 1;
      while (run_end < columns && owner[run_end] == owner[c]) ++run_end;
      if (owner[c] != kIdle) {
        const Segment& segment = segments[owner[c]];
        const Instruction& in = program.code[segment.instruction];
        char letter = letter_of(segment.activity);
        if (!is_waiting(segment.activity) && in.chunk % 2 == 1) {
          letter = static_cast<char>(letter - 'A' + 'a');
        }
        std::fill(row.begin() + static_cast<std::ptrdiff_t>(c),
                  row.begin() + static_cast<std::ptrdiff_t>(run_end), letter);
        const std::string digits = std::to_string(in.micro_batch);
        const bool numbered =
            operand_parts(in.op).micro_batch && !is_waiting(segment.activity);
        if (numbered && run_end - c >= 1 + digits.size()) {
          row.replace(c + 1, digits.size(), digits);
        }
      }
      c = run_end;
    }
    out += labels[static_cast<std::size_t>(r)];
    out.append(label_width - labels[static_cast<std::size_t>(r)].size(), ' ');
    out += " |" + row + "|\n";
  }
  out += axis_line(label_width + 2, columns, slot) + '\n';
  return out;
}

std::string render_text(const Program& program, const Simulation& simulation, const Costs& costs,
                        int width) {
  const Config& c = program.config;
  const Timeline& timeline = simulation.timeline;
  std::ostringstream out;
  out << program.name << ": " << c.stages << " stages, " << c.micro_batches << " micro-batches";
  if (c.chunks > 1) out << ", " << c.chunks << " chunks";
  if (c.dp > 1) out << ", dp " << c.dp;
  out << "; costs " << describe(costs) << '\n';
  const double slot = nice_step(timeline.makespan / std::max(width, 1));
  out << "one column = " << format_time(slot) << " time units\n\n";
  out << render_grid(program, timeline, width) << '\n';
  out << "F forward  B backward  I backward-input  W backward-weight  L load  O optimizer\n";
  const bool pairs = std::any_of(program.code.begin(), program.code.end(),
                                 [](const Instruction& in) { return is_pair(in.op); });
  if (pairs) out << "X forward+backward (its forward's micro-batch and chunk)\n";
  const bool policies =
      std::any_of(program.code.begin(), program.code.end(), [](const Instruction& in) {
        return in.op == Opcode::Recompute || is_host_copy(in.op);
      });
  if (policies) {
    out << "R recompute  H waiting for a copy to or from host memory (a late Reload stalls here)\n";
  }
  out << "- communication  . idle; digits: micro-batch; lowercase: odd chunk\n";
  if (!timeline.holds.empty()) {
    out << "# held in posted order: the rank's stream waits behind an operation posted earlier\n"
           "  (usually a receive), or the rank waits for a message held so on its sender's\n";
  }
  out << "\nmakespan " << format_time(timeline.makespan) << "   bubble "
      << percent(simulation.bubble_fraction) << " (idle / (ranks x makespan)); "
      << percent(simulation.bubble_rate_zb)
      << " as the Zero Bubble paper counts it (longest stage, first to last pass)\n";
  if (!timeline.holds.empty()) {
    out << timeline.holds.size() << (timeline.holds.size() == 1 ? " operation" : " operations")
        << " held behind an earlier one in posted order\n";
  }
  out << "\nstage      busy      idle  peak activations  first pass   last end\n";
  for (const StageFigures& s : simulation.stages) {
    char line[128];
    std::snprintf(line, sizeof line, "%5d %9s %9s %17d %11s %10s\n", s.stage,
                  format_time(s.busy).c_str(), format_time(s.idle).c_str(), s.peak_activations,
                  format_time(s.first_start).c_str(), format_time(s.last_end).c_str());
    out << line;
  }
  return out.str();
}

nlohmann::json to_json(const Simulation& simulation) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageFigures& s : simulation.stages) {
    stages.push_back({{"stage", s.stage},
                      {"busy", s.busy},
                      {"idle", s.idle},
                      {"peak_activations", s.peak_activations},
                      {"first_start", s.first_start},
                      {"last_end", s.last_end}});
  }
  return {{"makespan", simulation.timeline.makespan},
          {"bubble_fraction", simulation.bubble_fraction},
          {"bubble_rate_zb", simulation.bubble_rate_zb},
          {"held", simulation.timeline.holds.size()},
          {"per_stage", std::move(stages)}};
}

}  // namespace pipevm
