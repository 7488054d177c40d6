// The actions of a torch.distributed.pipelining schedule table, as
// PyTorch's `_Action.from_str` reads them and `str(_Action)` writes them:
// STAGE TYPE [MICROBATCH], e.g. `0F3`, `2SEND_F0`, `1UNSHARD`, and the
// overlapped pair `(0F7;7B3)OVERLAP_F_B`. STAGE is the global stage index.
// This file knows the words only; tables are table.hpp, what the actions
// mean for pipevm is torch_csv.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "source.hpp"

namespace pipevm::pytorch {

// PyTorch's _ComputationType, under its own spellings.
enum class ActionType : std::uint8_t {
  F,            // forward
  I,            // backward, input gradient only
  W,            // backward, weight gradient only
  B,            // full backward
  SEND_F,       // send an activation to the next stage
  RECV_F,       // receive an activation from the previous stage
  SEND_B,       // send a gradient to the previous stage
  RECV_B,       // receive a gradient from the next stage
  UNSHARD,      // FSDP: gather a stage's parameters
  RESHARD,      // FSDP: free them again
  REDUCE_GRAD,  // reduce a stage's gradients over data parallelism
  OVERLAP_F_B,  // a forward and a backward run as one step (sub-actions)
};

std::string_view name(ActionType type);
// F, I, W, B and OVERLAP_F_B: what PyTorch's `is_compute_op` accepts.
bool is_compute(ActionType type);
bool is_comm(ActionType type);  // SEND_F, RECV_F, SEND_B, RECV_B

struct Action {
  int stage = -1;  // -1 for an OVERLAP_F_B container
  ActionType type = ActionType::F;
  int micro_batch = -1;             // -1: none written
  std::vector<Action> sub_actions;  // OVERLAP_F_B only
  SourceRange range;                // where the cell is in its file (zero when built)

  // Equal actions: the same type, stage, micro-batch and sub-actions.
  bool same(const Action& other) const;
};

// PyTorch's spelling of an action: `0F3`, `(0F7;7B3)OVERLAP_F_B`.
std::string to_string(const Action& action);

// A failure to read a cell: the message and the byte offset in the cell.
struct ActionError {
  std::string message;
  std::uint32_t offset = 0;
};

// Reads one cell (surrounding blanks ignored); nullopt with `cell` empty for
// an idle cell. `base` is the cell's byte offset in its file: ranges of
// the result are file offsets. Sets `error` and returns nullopt on bad text.
std::optional<Action> parse_action(std::string_view cell, std::uint32_t base,
                                   std::optional<ActionError>& error);

}  // namespace pipevm::pytorch
