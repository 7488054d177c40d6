// What traces draw between instructions, read off the link: each message
// from its send to its receive, and each request to the wait that
// completes it.
#include "link.hpp"
#include "simulate.hpp"

namespace pipevm {

std::vector<std::size_t> completing_instructions(const Program& program) {
  const Link linked = link(program);
  std::vector<std::size_t> completer(program.code.size(), static_cast<std::size_t>(-1));
  for (std::size_t i = 0; i < program.code.size(); ++i) {
    if (info(program.code[i].op).cls != OpClass::wait) continue;
    const std::uint32_t w = linked.to[i];
    for (std::uint32_t q = linked.completes_begin[w]; q < linked.completes_begin[w + 1]; ++q) {
      completer[linked.completed[q]] = i;
    }
  }
  return completer;
}

std::vector<MessageFlow> pair_messages(const Program& program,
                                       std::vector<std::size_t>* unmatched) {
  const Link linked = link(program);
  std::vector<MessageFlow> flows;
  for (std::size_t i = 0; i < program.code.size(); ++i) {
    const Opcode op = program.code[i].op;
    if (info(op).cls != OpClass::p2p) continue;
    if (linked.to[i] == kNoLink) {
      if (unmatched != nullptr) unmatched->push_back(i);
    } else if (is_send(op)) {
      flows.push_back({i, linked.to[i]});
    }
  }
  return flows;
}

}  // namespace pipevm
