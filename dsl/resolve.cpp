// Name resolution: scopes, procedures, recursion and use-before-definition
// checks. See resolve.hpp for the rules.
#include "resolve.hpp"

#include <algorithm>
#include <string>

#include "nearest_name.hpp"
#include "quote.hpp"

namespace pipevm {

namespace {
// Longest chain of procedure calls; bounds the evaluator's recursion.
constexpr std::size_t kMaxCallDepth = 256;

std::optional<std::uint32_t> builtin_slot(std::string_view name) {
  for (std::uint32_t i = 0; i < kBuiltinCount; ++i) {
    if (name == kBuiltinNames[i]) return i;
  }
  return std::nullopt;
}
}  // namespace

Resolver::Resolver(Schedule& schedule, Diagnostics& diagnostics) : s_(schedule), d_(diagnostics) {
  scopes_.emplace_back();
}

std::string_view Resolver::text(SourceRange range) const {
  return std::string_view(s_.file->text()).substr(range.begin, range.end - range.begin);
}

void Resolver::error(DiagnosticKind kind, std::string message, SourceRange range) {
  d_.report(kind, std::move(message), Location{s_.file, range, -1, -1});
}

std::uint32_t Resolver::new_slot() {
  return s_.slot_count++;
}

bool Resolver::check_bindable(SourceRange name) {
  const std::string_view word = text(name);
  if (builtin_slot(word)) {
    error(DiagnosticKind::Redefinition, quote(word) + " is a built-in name and cannot be redefined",
          name);
    return false;
  }
  const auto it = visible_.find(word);
  if (it != visible_.end() && !it->second.empty() &&
      it->second.back().depth + 1 == scopes_.size()) {
    error(DiagnosticKind::Redefinition, quote(word) + " is already defined in this scope", name);
    return false;
  }
  return true;
}

void Resolver::bind(std::string_view name, std::uint32_t slot) {
  visible_[name].push_back(Binding{slot, static_cast<std::uint32_t>(scopes_.size() - 1)});
  scopes_.back().push_back(name);
}

void Resolver::declare_procedure(SourceRange name, const std::vector<SourceRange>& params) {
  const std::string_view word = text(name);
  Procedure procedure;
  procedure.name = std::string(word);
  procedure.range = name;
  for (std::size_t i = 0; i < params.size(); ++i) procedure.params.push_back(new_slot());
  const auto index = static_cast<std::uint32_t>(s_.procedures.size());
  if (!procedure_index_.emplace(word, index).second) {
    const Procedure& first = s_.procedures[procedure_index_[word]];
    Diagnostic& d = d_.report(DiagnosticKind::Redefinition,
                              "procedure '" + std::string(word) + "' is defined twice",
                              Location{s_.file, name, -1, -1});
    d.notes.push_back(Note{"first defined here", Location{s_.file, first.range, -1, -1}});
  }
  s_.procedures.push_back(std::move(procedure));
  facts_.emplace_back();
}

void Resolver::declare_global(SourceRange name) {
  const std::string_view word = text(name);
  const std::uint32_t slot = new_slot();
  const auto order = static_cast<std::uint32_t>(global_slots_.size());
  global_slots_.push_back(slot);
  if (builtin_slot(word)) {
    error(DiagnosticKind::Redefinition, quote(word) + " is a built-in name and cannot be redefined",
          name);
    return;
  }
  const auto [it, inserted] = globals_.emplace(word, Global{order, slot, name});
  if (!inserted) {
    Diagnostic& d = d_.report(DiagnosticKind::Redefinition,
                              quote(word) + " is already defined at the top level",
                              Location{s_.file, name, -1, -1});
    d.notes.push_back(Note{"first defined here", Location{s_.file, it->second.range, -1, -1}});
  }
}

void Resolver::enter_procedure(std::uint32_t procedure) {
  current_procedure_ = procedure;
  push_scope();
}

void Resolver::bind_parameter(std::uint32_t procedure, std::size_t position, SourceRange name) {
  if (check_bindable(name)) bind(text(name), s_.procedures[procedure].params[position]);
}

void Resolver::leave_procedure() {
  pop_scope();
  current_procedure_.reset();
}

std::uint32_t Resolver::define_global(SourceRange name) {
  const std::uint32_t slot = global_slots_[globals_defined_++];
  bind(text(name), slot);
  return slot;
}

void Resolver::push_scope() {
  scopes_.emplace_back();
}

void Resolver::pop_scope() {
  for (const std::string_view name : scopes_.back()) {
    auto it = visible_.find(name);
    it->second.pop_back();
    if (it->second.empty()) visible_.erase(it);
  }
  scopes_.pop_back();
}

std::uint32_t Resolver::bind_local(SourceRange name) {
  const std::uint32_t slot = new_slot();
  if (check_bindable(name)) bind(text(name), slot);
  return slot;
}

std::uint32_t Resolver::lookup(SourceRange name) {
  const std::string_view word = text(name);
  if (const auto it = visible_.find(word); it != visible_.end()) return it->second.back().slot;
  if (const auto builtin = builtin_slot(word)) return *builtin;
  if (const auto it = globals_.find(word); it != globals_.end()) {
    if (current_procedure_) {
      GlobalUse& use = facts_[*current_procedure_].direct;
      if (it->second.order + 1 > use.needed) use = GlobalUse{it->second.order + 1, name};
      return it->second.slot;
    }
    const LineColumn defined = s_.file->position(it->second.range.begin);
    Diagnostic& d =
        d_.report(DiagnosticKind::UnknownName, quote(word) + " is used before its definition",
                  Location{s_.file, name, -1, -1});
    d.notes.push_back(Note{"defined here, line " + std::to_string(defined.line),
                           Location{s_.file, it->second.range, -1, -1}});
    return it->second.slot;
  }
  // The nearest name in scope or built in, for a "did you mean".
  std::vector<std::string_view> names = {"stage", "stages", "micro_batches", "chunks",   "dp_rank",
                                         "dp",    "layers", "layer_begin",   "layer_end"};
  for (const auto& [visible, bindings] : visible_) {
    if (!bindings.empty()) names.push_back(visible);
  }
  for (const auto& [global, definition] : globals_) names.push_back(global);
  std::sort(names.begin(), names.end());
  const std::string_view nearest = nearest_name(word, names);
  error(DiagnosticKind::UnknownName,
        "unknown name '" + std::string(word) + "'" +
            (nearest.empty() ? "" : "; did you mean '" + std::string(nearest) + "'?") +
            " (built-in names: stage, stages, micro_batches, chunks, dp_rank, dp, layers, "
            "layer_begin, layer_end)",
        name);
  return 0;
}

std::optional<std::uint32_t> Resolver::call(SourceRange name, SourceRange statement,
                                            std::size_t arguments) {
  const std::string_view word = text(name);
  const auto it = procedure_index_.find(word);
  if (it == procedure_index_.end()) {
    error(DiagnosticKind::UnknownProcedure, "unknown procedure '" + std::string(word) + "'", name);
    return std::nullopt;
  }
  const Procedure& procedure = s_.procedures[it->second];
  if (procedure.params.size() != arguments) {
    const auto expected = procedure.params.size();
    Diagnostic& d = d_.report(DiagnosticKind::WrongArgumentCount,
                              quote(word) + " takes " + std::to_string(expected) +
                                  (expected == 1 ? " argument, " : " arguments, ") +
                                  std::to_string(arguments) + " given",
                              Location{s_.file, statement, -1, -1});
    d.notes.push_back(Note{"defined here", Location{s_.file, procedure.range, -1, -1}});
    return std::nullopt;
  }
  const CallSite site{it->second, name, globals_defined_};
  if (current_procedure_) {
    facts_[*current_procedure_].calls.push_back(site);
  } else {
    top_calls_.push_back(site);
  }
  return it->second;
}

// Depth-first over the call graph: finds cycles and each procedure's
// transitive reads of top-level lets. state: 0 new, 1 on the path, 2 done.
void Resolver::visit(std::uint32_t procedure, std::vector<std::uint32_t>& path,
                     std::vector<std::uint8_t>& state) {
  state[procedure] = 1;
  path.push_back(procedure);
  ProcedureFacts& facts = facts_[procedure];
  facts.total = facts.direct;
  for (std::size_t c = 0; c < facts.calls.size(); ++c) {
    const CallSite site = facts_[procedure].calls[c];
    if (state[site.callee] == 1) {
      const auto start = std::find(path.begin(), path.end(), site.callee);
      const std::string& callee = s_.procedures[site.callee].name;
      std::string message = "procedure '" + callee + "' calls itself";
      if (start + 1 != path.end())
        message += ", through '" + s_.procedures[*(start + 1)].name + "'";
      Diagnostic& d = d_.report(DiagnosticKind::RecursiveProcedure, std::move(message),
                                Location{s_.file, site.range, -1, -1});
      for (auto p = start; p != path.end(); ++p) {
        const std::uint32_t next = p + 1 != path.end() ? *(p + 1) : site.callee;
        // the call from *p to next
        for (const CallSite& edge : facts_[*p].calls) {
          if (edge.callee != next) continue;
          d.notes.push_back(
              Note{quote(s_.procedures[*p].name) + " calls '" + s_.procedures[next].name + "' here",
                   Location{s_.file, edge.range, -1, -1}});
          break;
        }
      }
      continue;
    }
    if (state[site.callee] == 0) {
      if (path.size() >= kMaxCallDepth) {
        error(DiagnosticKind::NestingTooDeep,
              "procedure calls nested more than " + std::to_string(kMaxCallDepth) + " deep",
              site.range);
        continue;
      }
      visit(site.callee, path, state);
    }
    const GlobalUse& callee_use = facts_[site.callee].total;
    ProcedureFacts& here = facts_[procedure];
    here.height = std::max(here.height, facts_[site.callee].height + 1);
    if (callee_use.needed > here.total.needed) here.total = callee_use;
  }
  path.pop_back();
  state[procedure] = 2;
}

void Resolver::finish() {
  std::vector<std::uint8_t> state(facts_.size(), 0);
  std::vector<std::uint32_t> path;
  for (std::uint32_t p = 0; p < facts_.size(); ++p) {
    if (state[p] == 0) visit(p, path, state);
  }
  for (std::uint32_t p = 0; p < facts_.size(); ++p) {
    if (facts_[p].height > kMaxCallDepth) {
      error(DiagnosticKind::NestingTooDeep,
            "procedure '" + s_.procedures[p].name + "' leads to calls nested more than " +
                std::to_string(kMaxCallDepth) + " deep",
            s_.procedures[p].range);
      break;
    }
  }
  for (const CallSite& site : top_calls_) {
    const GlobalUse& use = facts_[site.callee].total;
    if (use.needed <= site.globals_defined) continue;
    const std::string_view global = text(use.range);
    Diagnostic& d = d_.report(DiagnosticKind::UnknownName,
                              quote(s_.procedures[site.callee].name) + " reads '" +
                                  std::string(global) + "', which is defined after this call",
                              Location{s_.file, site.range, -1, -1});
    d.notes.push_back(Note{"read here", Location{s_.file, use.range, -1, -1}});
  }
}

}  // namespace pipevm
