// Planning a sweep and checking a file (check_run.hpp).
#include "check_run.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "ast.hpp"
#include "check.hpp"
#include "read_file.hpp"
#include "torch_csv.hpp"

namespace pipevm::api {

namespace {

std::string range_text(const ValueRange& range) {
  return range.first == range.last
             ? std::to_string(range.first)
             : std::to_string(range.first) + ".." + std::to_string(range.last);
}

std::uint64_t count_of(const ValueRange& range) {
  return static_cast<std::uint64_t>(range.last) - static_cast<std::uint64_t>(range.first) + 1;
}

// Saturating product of the four ranges' sizes.
std::uint64_t sweep_size(const DeclaredSweep& s) {
  std::uint64_t size = 1;
  for (const ValueRange& range : {s.stages, s.micro_batches, s.dp, s.chunks}) {
    const std::uint64_t n = count_of(range);
    size = size > std::numeric_limits<std::uint64_t>::max() / n
               ? std::numeric_limits<std::uint64_t>::max()
               : size * n;
  }
  return size;
}

bool all_require_failed(const std::vector<Diagnostic>& diagnostics) {
  return !diagnostics.empty() &&
         std::all_of(diagnostics.begin(), diagnostics.end(),
                     [](const Diagnostic& d) { return d.kind == DiagnosticKind::RequireFailed; });
}

// A flat program's first `stage N` block that `stages` leaves out, else its
// last block (more stages than blocks).
SourceRange stage_block_for(const Schedule& schedule, int stages) {
  SourceRange last;
  for (std::uint32_t i = schedule.top.begin; i < schedule.top.end; ++i) {
    const Stmt& st = schedule.stmts[schedule.block_items[i]];
    if (st.kind != StmtKind::stage_only) continue;
    if (st.stage >= stages) return st.range;
    last = st.range;
  }
  return last;
}

}  // namespace

SweepPlan plan_sweep(const Schedule& schedule, const SweepRequest& request) {
  SweepPlan plan;
  std::vector<DeclaredSweep> sweeps = declared_sweeps(schedule);
  const bool declared = !sweeps.empty();
  if (!declared) sweeps.push_back(DeclaredSweep{});
  const int flat = implied_stages(schedule);
  plan.skip_unsupported = request.skip_unsupported;
  std::set<std::tuple<int, int, int, int>> seen;
  std::uint64_t total = 0;
  const auto one = [](const std::optional<ValueRange>& r) { return r && r->first == r->last; };
  // --stages and --micro-batches of one value each name one configuration:
  // an axis not given is its default (1; the declared range's first value
  // when the range leaves 1 out), not the declared sweep. Ranges sweep.
  const bool one_configuration = one(request.stages) && one(request.micro_batches) &&
                                 (!request.dp || one(request.dp)) &&
                                 (!request.chunks || one(request.chunks));
  const auto default_of = [](const ValueRange& range) {
    const int value = range.first <= 1 && 1 <= range.last ? 1 : range.first;
    return ValueRange{value, value};
  };
  for (DeclaredSweep s : sweeps) {
    if (one_configuration) {
      s.dp = default_of(s.dp);
      s.chunks = default_of(s.chunks);
    }
    // A declared range skips the configurations the schedule's requires rule out.
    if (declared && !one_configuration &&
        !(request.stages && request.micro_batches && request.dp && request.chunks)) {
      plan.skip_unsupported = true;
    }
    if (request.stages) s.stages = *request.stages;
    if (request.micro_batches) s.micro_batches = *request.micro_batches;
    if (request.dp) s.dp = *request.dp;
    if (request.chunks) s.chunks = *request.chunks;
    if (s.stages.first == 0 && flat > 0) s.stages = {flat, flat};
    if (s.stages.first == 0 || s.micro_batches.first == 0) {
      const std::string missing = s.stages.first == 0 && s.micro_batches.first == 0
                                      ? "--stages and --micro-batches"
                                  : s.stages.first == 0 ? "--stages"
                                                        : "--micro-batches";
      plan.usage_error = "no configuration to check: give " + missing +
                         ", or declare one in the schedule (`check stages 2..8 micro_batches "
                         "1..16`, docs/checker.md#declared-configurations)";
      plan.configurations.clear();
      return plan;
    }
    const std::uint64_t size = sweep_size(s);
    total = size > std::numeric_limits<std::uint64_t>::max() - total
                ? std::numeric_limits<std::uint64_t>::max()
                : total + size;
    if (total > request.max_configurations) {
      const std::string count = total == std::numeric_limits<std::uint64_t>::max()
                                    ? "more than 2^64 - 1"
                                    : std::to_string(total);
      plan.usage_error = "the sweep --stages " + range_text(s.stages) + " --micro-batches " +
                         range_text(s.micro_batches) + " --dp " + range_text(s.dp) + " --chunks " +
                         range_text(s.chunks) + " has " + count +
                         " configurations, over the limit of " +
                         std::to_string(request.max_configurations) +
                         ": narrow the ranges or raise the limit with --max-configurations";
      plan.configurations.clear();
      return plan;
    }
    for (int p = s.stages.first; p <= s.stages.last; ++p) {
      for (int m = s.micro_batches.first; m <= s.micro_batches.last; ++m) {
        for (int d = s.dp.first; d <= s.dp.last; ++d) {
          for (int v = s.chunks.first; v <= s.chunks.last; ++v) {
            if (!seen.emplace(p, m, d, v).second) continue;
            plan.configurations.push_back(
                Config{.stages = p, .micro_batches = m, .chunks = v, .dp = d});
          }
        }
      }
    }
  }
  return plan;
}

std::shared_ptr<const SourceFile> read_schedule_file(const std::string& path, std::string& error) {
  std::string text;
  if (!read_input_file(path, kMaxScheduleBytes, "schedules", text, error)) {
    error = "cannot read '" + path + "': " + error;
    return nullptr;
  }
  return std::make_shared<const SourceFile>(path, std::move(text));
}

namespace {

// A PyTorch table carries its configuration: one check, no sweep.
FileReport check_table(std::shared_ptr<const SourceFile> file, const SweepRequest& request,
                       const CheckOptions& options) {
  FileReport report;
  report.name = file->name();
  report.file = file;
  if (request.stages || request.micro_batches || (request.dp && request.dp->last > 1) ||
      (request.chunks && request.chunks->last > 1)) {
    report.usage_error =
        "a PyTorch table (.csv) gives its own stages, micro-batches and chunks: drop --stages, "
        "--micro-batches, --dp and --chunks";
    return report;
  }
  FindingFolder folder;
  Diagnostics diagnostics;
  const std::optional<Program> program = pytorch::load_csv(file, diagnostics);
  if (!program) {
    folder.add_unconfigured(diagnostics.all());
    report.failing = 1;
    report.findings = folder.take();
    return report;
  }
  report.configurations = 1;
  const CheckResult result = check(*program, options);
  report.checked = 1;
  report.instructions = result.instructions;
  report.suppressed = result.suppressed;
  if (!result.ok()) report.failing = 1;
  report.memory = result.memory;
  report.bytes = peak_bytes(*program, memory_shape(request.model, program->config));
  std::vector<Diagnostic> found = diagnostics.all();
  found.insert(found.end(), result.diagnostics.begin(), result.diagnostics.end());
  folder.add(program->config, found);
  report.findings = folder.take();
  return report;
}

}  // namespace

FileReport check_file(std::shared_ptr<const SourceFile> file, const SweepRequest& request) {
  CheckOptions options;
  // The folder needs every diagnostic to fold; the cap only guards against floods.
  options.max_diagnostics_per_kind = 4096;
  options.p2p_posted_order = request.p2p_posted_order;
  options.layer_widths = request.model.layer_widths;
  if (request.table || pytorch::is_csv_path(file->name()))
    return check_table(file, request, options);
  FileReport report;
  report.name = file->name();
  report.file = file;
  FindingFolder folder;
  Diagnostics diagnostics;
  const auto schedule = parse(file, diagnostics);
  if (!schedule) {
    folder.add_unconfigured(diagnostics.all());
    report.findings = folder.take();
    return report;
  }
  const SweepPlan plan = plan_sweep(*schedule, request);
  report.usage_error = plan.usage_error;
  report.configurations = plan.configurations.size();
  report.sweep = plan.configurations.size() > 1;
  const int flat = implied_stages(*schedule);
  const bool stages_declared = !declared_sweeps(*schedule).empty() && !request.stages;
  for (const Config& config : plan.configurations) {
    Diagnostics found;
    // Fewer stages than the blocks ignores some; more leaves ranks empty,
    // which a declaration may mean (`pipevm expand --rank` writes one rank).
    if (flat > 0 && (config.stages < flat || (config.stages > flat && !stages_declared))) {
      found.report(DiagnosticKind::FlatStagesMismatch,
                   "this program's stage blocks are for " + std::to_string(flat) +
                       (flat == 1 ? " stage" : " stages") +
                       ", not stages=" + std::to_string(config.stages) +
                       " (leave --stages out to use the program's own)",
                   Location{file, stage_block_for(*schedule, config.stages), -1, -1});
      folder.add(config, found.all());
      ++report.checked;
      ++report.failing;
      continue;
    }
    const std::optional<Program> program = expand(*schedule, config, found, request.expand);
    if (!program) {
      if (plan.skip_unsupported && all_require_failed(found.all())) {
        ++report.skipped;
        continue;
      }
      ++report.checked;
      ++report.failing;
      folder.add(config, found.all());
      continue;
    }
    CheckResult result = check(*program, options);
    ++report.checked;
    report.instructions += result.instructions;
    report.suppressed += result.suppressed;
    if (!result.ok()) ++report.failing;
    if (plan.configurations.size() == 1) {
      report.memory = std::move(result.memory);
      report.bytes = peak_bytes(*program, memory_shape(request.model, config));
    }
    folder.add(config, result.diagnostics);
  }
  if (!plan.configurations.empty() && report.checked == 0) {
    const auto& sweeps = declared_sweeps(*schedule);
    Location where{file, {0, 0}, -1, -1};
    if (!sweeps.empty()) where.range = sweeps.front().range;
    Diagnostic d;
    d.kind = DiagnosticKind::NothingChecked;
    d.message = "every one of the " + std::to_string(plan.configurations.size()) +
                " configurations is skipped (a `require` fails): nothing was checked";
    d.location = where;
    folder.add_unconfigured({d});
    report.failing = 1;
  }
  report.findings = folder.take();
  return report;
}

}  // namespace pipevm::api
