// The text form of an expanded program (expand_text.hpp).
#include "expand_text.hpp"

#include <sstream>

#include "layer_costs.hpp"
#include "topology.hpp"

namespace pipevm::api {

std::string expanded_text(const Program& program, int only_rank, bool from_table,
                          const HostView* hosts) {
  std::ostringstream out;
  const Config& c = program.config;
  out << "# " << program.name << " expanded for stages=" << c.stages
      << " micro_batches=" << c.micro_batches << " chunks=" << c.chunks << " dp=" << c.dp << "\n";
  if (hosts != nullptr) {
    for (const std::string& line : hosts->placement.lines) out << "# " << line << '\n';
  }
  out << "placement " << name(program.placement) << "\n";
  if (!program.cut.empty()) out << "cut " << cut_text(program.cut) << "\n";
  if (program.topology) out << "topology " << program.topology->name << "\n";
  for (const Opcode op : program.carried) out << "carry " << name(op) << "\n";
  // The configuration the streams are for, so that `pipevm check` needs no flags.
  out << "check stages " << c.stages << " micro_batches " << c.micro_batches << " dp " << c.dp
      << " chunks " << c.chunks << "\n";
  for (int r = 0; r < program.ranks(); ++r) {
    if (only_rank >= 0 && r != only_rank) continue;
    if (from_table) {
      out << "# rank " << r << ": row " << r + 1 << " of " << program.file->name() << "\n";
    }
    if (hosts == nullptr) {
      out << disassemble_rank(program, r);
      continue;
    }
    // The rank's block, each instruction that crosses hosts with a comment.
    const RankBlock block = rank_block(c, r);
    out << "# rank " << r << " (dp_rank " << dp_rank_of(c, r) << ") on host " << hosts->host(r)
        << '\n'
        << block.open;
    const std::size_t begin = program.rank_begin[static_cast<std::size_t>(r)];
    for (std::size_t i = begin; i < program.rank_begin[static_cast<std::size_t>(r) + 1]; ++i) {
      out << block.indent << disassemble(program.code[i]);
      const std::string crossing = hosts->crossing(program, i);
      if (!crossing.empty()) out << "  # across hosts: " << crossing;
      out << '\n';
    }
    out << block.close;
  }
  return out.str();
}

}  // namespace pipevm::api
