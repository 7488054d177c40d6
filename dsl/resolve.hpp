// Name resolution for the parser: turns every name into a slot of the one
// flat array the evaluator reads, and every call into a procedure index.
//
// Scoping (docs/language.md): blocks nest scopes; a `let` binds in the
// current scope and may shadow an outer name, but not a built-in name or a
// name of the same scope. Procedures can be called anywhere (also before
// their definition) and see their parameters, their own lets, the built-in
// names and the top-level lets; a call is an error when the procedure
// (directly or through the procedures it calls) reads a top-level let that
// is defined after the call. Since a procedure may not call itself, directly
// or indirectly, each procedure's variables have fixed slots.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ast.hpp"
#include "diagnostics.hpp"

namespace pipevm {

class Resolver {
 public:
  Resolver(Schedule& schedule, Diagnostics& diagnostics);

  // Before any body: every procedure and every top-level let, in text order.
  void declare_procedure(SourceRange name, const std::vector<SourceRange>& params);
  void declare_global(SourceRange name);

  // Procedure bodies.
  void enter_procedure(std::uint32_t procedure);
  void bind_parameter(std::uint32_t procedure, std::size_t position, SourceRange name);
  void leave_procedure();

  // Top-level code: the next top-level let (declared earlier) becomes visible.
  std::uint32_t define_global(SourceRange name);

  void push_scope();
  void pop_scope();
  std::uint32_t bind_local(SourceRange name);
  // The slot `name` refers to here; reports PV1003 and returns 0 if none.
  std::uint32_t lookup(SourceRange name);
  // The procedure called; reports PV1004/PV1005 and returns nothing on error.
  std::optional<std::uint32_t> call(SourceRange name, SourceRange statement, std::size_t arguments);

  // After every body: recursion (PV1006) and top-level lets read too early (PV1003).
  void finish();

 private:
  struct Binding {
    std::uint32_t slot;
    std::uint32_t depth;
  };
  struct Global {
    std::uint32_t order;
    std::uint32_t slot;
    SourceRange range;
  };
  struct CallSite {
    std::uint32_t callee;
    SourceRange range;
    std::uint32_t globals_defined;  // top-level code: lets defined before the call
  };
  struct GlobalUse {
    std::uint32_t needed = 0;  // 1 + the order of the latest top-level let read
    SourceRange range;         // where it is read
  };
  struct ProcedureFacts {
    std::vector<CallSite> calls;
    GlobalUse direct;
    GlobalUse total;         // including the procedures it calls
    std::size_t height = 1;  // longest chain of calls starting here
  };

  std::string_view text(SourceRange range) const;
  void error(DiagnosticKind kind, std::string message, SourceRange range);
  bool check_bindable(SourceRange name);
  std::uint32_t new_slot();
  void bind(std::string_view name, std::uint32_t slot);
  void visit(std::uint32_t procedure, std::vector<std::uint32_t>& path,
             std::vector<std::uint8_t>& state);

  Schedule& s_;
  Diagnostics& d_;
  std::unordered_map<std::string_view, std::uint32_t> procedure_index_;
  std::vector<ProcedureFacts> facts_;
  std::unordered_map<std::string_view, Global> globals_;
  std::vector<std::uint32_t> global_slots_;  // by order of definition
  std::uint32_t globals_defined_ = 0;
  std::unordered_map<std::string_view, std::vector<Binding>> visible_;
  std::vector<std::vector<std::string_view>> scopes_;
  std::optional<std::uint32_t> current_procedure_;
  std::vector<CallSite> top_calls_;
};

}  // namespace pipevm
