// The VM's dispatch: one switch over the Opcode enum of isa.def, with no
// default, so an opcode added to the table and not handled here is a
// compiler warning (an error in CI). Every state the runtime cannot go on
// from is a VmError at the instruction, never a silent skip. Not here: the
// reductions and parameter averages (vm_reductions.cpp), sharded weights
// (vm_shards.cpp).
#include "vm.hpp"

#include <algorithm>
#include <chrono>

#include "topology.hpp"
#include "vm_step.hpp"

namespace pipevm {

namespace {

std::size_t to_size(int value) {
  return static_cast<std::size_t>(value);
}

// BwdAllReduce reduces finished layers together until they hold this many
// bytes (PyTorch DDP's first bucket): each all-reduce costs rounds in which
// both replicas must be inside MPI, and on one host a rank's own copies are
// the transfer, so splitting a small model per layer bought no overlap.
constexpr std::size_t kReductionBucketBytes = std::size_t{1} << 20;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Diagnostic to_diagnostic(const VmError& error, const Program& program, int rank) {
  Diagnostic diagnostic;
  diagnostic.kind = error.kind();
  diagnostic.message = error.what();
  diagnostic.location.rank = rank;
  diagnostic.location.stage = stage_of(program.config, rank);
  const auto stream = program.rank(rank);
  if (error.instruction() < stream.size()) {
    diagnostic.location.file = program.file;
    diagnostic.location.range = program.source_of(stream[error.instruction()]);
  }
  return diagnostic;
}

std::vector<runtime::LayerRange> model_split(const Program& program, const MachineOptions& options) {
  const int pieces = model_pieces(program.placement, program.config);
  if (!options.split.empty()) {
    if (static_cast<int>(options.split.size()) != pieces) {
      throw std::invalid_argument("the model is cut into " + std::to_string(options.split.size()) +
                                  " pieces, the schedule needs " + std::to_string(pieces));
    }
    return options.split;
  }
  if (std::vector<LayerRange> cut = cut_for_model(program, options.model.sizes); !cut.empty()) return cut;
  return runtime::split_layers(options.model.sizes, pieces);
}

Machine::Machine(const Program& program, int rank, runtime::Comm& comm,
                 const MachineOptions& options)
    : program_(&program),
      rank_(rank),
      stage_(stage_of(program.config, rank)),
      dp_rank_(dp_rank_of(program.config, rank)),
      comm_(comm),
      tags_(program.placement, program.config),
      rows_(0),
      loss_scale_(0.0F) {
  const Config& config = program.config;
  if (comm.world_size() != config.ranks() || comm.stages() != config.stages ||
      comm.world_rank() != rank) {
    throw std::invalid_argument("the communicator's world does not match the program's " +
                                std::to_string(config.stages) + " stages x " +
                                std::to_string(config.dp) + " data-parallel replicas");
  }
  const int split = config.dp * config.micro_batches;
  if (options.global_batch <= 0 || options.global_batch % split != 0) {
    throw std::invalid_argument(
        "the batch size " + std::to_string(options.global_batch) +
        " is not a multiple of dp x micro-batches = " + std::to_string(config.dp) + " x " +
        std::to_string(config.micro_batches));
  }
  rows_ = options.global_batch / split;
  loss_scale_ = 1.0F / static_cast<float>(options.global_batch);
  // Gossip: no gradient is summed over the replicas, so each replica's
  // gradient is the mean over its own share of the batch (Decent-DP's
  // local step); its loss is reported at the global batch's scale.
  if (program.topology) {
    loss_scale_ *= static_cast<float>(config.dp);
    loss_report_scale_ = 1.0 / static_cast<double>(config.dp);
  }

  const int pieces = model_pieces(program.placement, config);
  const int layers = runtime::layer_count(options.model.sizes);
  if (pieces > layers) {
    throw std::invalid_argument("the schedule cuts the model into " + std::to_string(pieces) +
                                " pieces, but it has only " + std::to_string(layers) + " layers");
  }
  const std::vector<runtime::LayerRange> split_ranges = model_split(program, options);
  const bool names_layers =
      std::any_of(program.code.begin(), program.code.end(),
                  [](const Instruction& in) { return layer_of(in) != kNoLayer; });
  if (names_layers && program.layer_split != split_ranges) {
    throw std::invalid_argument(
        "the program was expanded for another model or cut of it into pieces than the run's "
        "(its `layer` operands would name other layers)");
  }
  model_ = options.model;
  const int chunk_count = chunks_per_rank(program.placement, config);
  const std::size_t micro_batches = to_size(config.micro_batches);
  chunks_.reserve(to_size(chunk_count));
  for (int c = 0; c < chunk_count; ++c) {
    const PipelinePosition where = position_of(program.placement, config, stage_, c);
    const runtime::LayerRange range = split_ranges[to_size(piece_at(where))];
    std::vector<Layer> held = layers_of(c, range);
    const bool bound =
        std::any_of(held.begin(), held.end(), [](const Layer& l) { return l.sharded; });
    runtime::Piece piece =
        bound ? runtime::Piece(options.model, range, pool_, runtime::Piece::BoundWeights{})
              : runtime::Piece(options.model, range, &pool_);
    if (bound) {
      // Each layer's own floats, from the same initial weights as a whole model's.
      for (Layer& l : held) {
        std::vector<float> whole(piece.layer_size(l.index));
        runtime::initialize_layer(whole, options.model, l.index);
        l.own.assign(whole.begin() + static_cast<std::ptrdiff_t>(l.offset),
                     whole.begin() + static_cast<std::ptrdiff_t>(l.offset + l.count));
        l.own.resize(l.stored, 0.0F);
        ledger_.add(runtime::MemoryCategory::weights, l.own.size() * sizeof(float));
        if (!l.sharded) piece.bind_weights(l.index, l.own);
      }
    }
    std::size_t own = 0;
    for (const Layer& l : held) own += l.stored;
    Chunk chunk{where,
                std::move(piece),
                runtime::Optimizer(options.optimizer, own),
                std::move(held),
                bound,
                {},
                {}};
    ledger_.add(runtime::MemoryCategory::optimizer, chunk.optimizer.state_bytes());
    chunk.piece.reserve(config.micro_batches, rows_);
    if (chunk.piece.is_last()) chunk.labels.resize(micro_batches * to_size(rows_));
    chunk.flags.resize(micro_batches);
    chunks_.push_back(std::move(chunk));
  }
  pending_.reserve(4 * micro_batches * to_size(chunk_count) + 16);
  posted_sends_.reserve(micro_batches * to_size(chunk_count));
  wait_requests_ = wait_requests(program, rank);
  reductions_.reserve(to_size(layers) * 2);
  // Every rank splits, in the same order, or MPI waits forever: the groups
  // a placement implies are made whether this rank's program uses them or not.
  if (program.placement == Placement::mirror) {
    mirror_group_ = comm.split(group_instance(Group::mirror, program.placement, config, rank), rank);
  }
  if (program.topology) {
    const Topology& topology = *program.topology;
    std::vector<int> members;
    for (int round = 0; round < topology.round_count(); ++round) {
      const int instance = gossip_instance(topology, config, rank, round);
      gossip_members(topology, config, instance, members);
      // A round that leaves the rank out (the checker refuses it) makes a group of one.
      gossip_groups_.push_back(comm.split(
          instance >= 0 ? instance : gossip_instance_count(topology, config) + rank, rank));
      gossip_sizes_.push_back(std::max<int>(1, static_cast<int>(members.size())));
    }
    for (Chunk& chunk : chunks_) gossip_buffers_.emplace_back(chunk.piece.parameters().size());
  }
}

void Machine::complete_posted_send(Chunk& chunk, std::uint32_t micro_batch) {
  const auto chunk_index = static_cast<std::uint16_t>(&chunk - chunks_.data());
  const auto match = std::find_if(
      posted_sends_.begin(), posted_sends_.end(), [&](const PendingMessage& message) {
        return message.chunk == chunk_index && message.micro_batch == micro_batch;
      });
  if (match == posted_sends_.end()) return;
  finish_posted_send(*match);
  posted_sends_.erase(match);
}

void Machine::finish_posted_send(const PendingMessage& message) {
  comm_.wait(message.request);
  chunks_[message.chunk].piece.end_output_send(static_cast<int>(message.micro_batch));
}

std::span<std::uint8_t> Machine::label_buffer(Chunk& chunk, std::uint32_t micro_batch) {
  return std::span<std::uint8_t>(chunk.labels)
      .subspan(micro_batch * to_size(rows_), to_size(rows_));
}

StepResult Vm::run(const Program& program, Machine& machine, VmObserver* observer) {
  VmStep step(program, machine);
  return step.run(observer);
}

StepResult VmStep::run(VmObserver* observer) {
  for (Chunk& chunk : m_.chunks_) std::fill(chunk.flags.begin(), chunk.flags.end(), 0);
  m_.pending_.clear();
  // The first step waits for an exchange of the initial parameters (which
  // every replica holds alike), as if a step before it had started one.
  if (!program_.carried.empty() && m_.steps_run_ == 0 && m_.gossip_round_ < 0 &&
      program_.topology) {
    m_.start_gossip(round_of_step(*program_.topology, 0));
  }
  m_.ledger_.sample();
  for (index_ = 0; index_ < code_.size(); ++index_) {
    in_ = &code_[index_];
    try {
      if (observer == nullptr) {
        execute(*in_);
      } else {
        const std::int64_t start = now_ns();
        timed_ = true;
        split_ns_ = -1;
        execute(*in_);
        const std::int64_t end = now_ns();
        if (split_ns_ >= 0) observer->on_backward_split(m_.rank_, index_, split_ns_);
        observer->on_instruction(m_.rank_, index_, start, end);
      }
    } catch (const runtime::CommError& error) {
      fail(DiagnosticKind::RuntimeComm, error.what());
    } catch (const std::logic_error& error) {
      // The model's own checks (a slot used out of order, a size mismatch).
      unsupported(error.what());
    }
    m_.ledger_.sample();
  }
  finish_step();
  ++m_.steps_run_;
  return result_;
}

void VmStep::execute(const Instruction& in) {
  switch (in.op) {
    case Opcode::LoadInput:
      load_input(in);
      return;
    case Opcode::LoadTarget:
      load_target(in);
      return;
    case Opcode::Fwd:
      forward(in);
      return;
    case Opcode::Bwd:
      backward_input(in);
      if (timed_) split_ns_ = now_ns();
      backward_weight(in, false);
      return;
    case Opcode::BwdInput:
      backward_input(in);
      return;
    case Opcode::BwdWeight:
      backward_weight(in, false);
      return;
    case Opcode::BwdAllReduce:
      backward_input(in);
      backward_weight(in, m_.comm_.dp() > 1);
      return;
    case Opcode::AllReduce:
      all_reduce(group_of(in), layer_of(in));
      return;
    case Opcode::Send:
    case Opcode::ISend:
      send(in);
      return;
    case Opcode::Recv:
    case Opcode::IRecv:
      receive(in);
      return;
    case Opcode::Wait:
      wait(in);
      return;
    case Opcode::WaitAll:
      wait_all();
      return;
    case Opcode::ZeroGrad:
      m_.drop_gradients();
      return;
    case Opcode::OptimizerStep:
      optimizer_step();
      return;
    case Opcode::FwdBwd:
      // The forward, then the backward: requests posted before it (sends
      // of earlier steps, receives for later ones) stay in flight through
      // both halves.
      execute(half(in, 0));
      execute(half(in, 1));
      return;
    case Opcode::AllGather:
      if (group_of(in) != Group::dp) unsupported("weights sharded over every rank (over world)");
      gather_or_release(in, true);
      return;
    case Opcode::Release:
      gather_or_release(in, false);
      return;
    case Opcode::ReduceScatter:
      if (group_of(in) != Group::dp) unsupported("gradients sharded over every rank (over world)");
      reduce_scatter(in);
      return;
    case Opcode::BwdReduceScatter:
      backward_input(in);
      backward_weight(in, false);
      reduce_scatter(in);
      return;
    case Opcode::ShardStep:
      require_no_pending();
      refuse_held_weight_gradients(kNoLayer, "shard step");
      m_.step(true);
      return;
    case Opcode::GossipStart:
      if (!program_.topology) unsupported("no topology: name one with `topology` or --topology");
      if (m_.gossip_round_ >= 0) unsupported("an exchange is already in flight: GossipWait first");
      // Waited for in the next step (carried) or in this one.
      m_.start_gossip(
          round_of_step(*program_.topology, m_.steps_run_ + (program_.carried.empty() ? 0 : 1)));
      return;
    case Opcode::GossipWait:
      if (!m_.wait_gossip()) unsupported("no gossip exchange is in flight");
      return;
    case Opcode::GlobalAverage:
      m_.global_average();
      return;
    case Opcode::Hold:
    case Opcode::Drop:
      hold_or_drop(in, in.op == Opcode::Hold);
      return;
    case Opcode::FwdCheckpoint:
      forward_checkpoint(in);
      return;
    case Opcode::Recompute:
      recompute(in);
      return;
    case Opcode::Offload:
    case Opcode::Reload:
      start_host_copy(in);
      return;
    case Opcode::WaitOffload:
    case Opcode::WaitReload:
      wait(in);
      return;
  }
  unsupported("unknown opcode " + std::to_string(static_cast<int>(in.op)));
}

Machine::Chunk& VmStep::chunk_at(const Instruction& in) {
  if (in.chunk >= m_.chunks_.size()) {
    unsupported("this rank holds " + std::to_string(m_.chunks_.size()) + " chunk(s), not chunk " +
                std::to_string(in.chunk));
  }
  return m_.chunks_[in.chunk];
}

Machine::Chunk& VmStep::chunk_of(const Instruction& in) {
  Chunk& chunk = chunk_at(in);
  if (in.micro_batch >= static_cast<std::uint32_t>(program_.config.micro_batches)) {
    unsupported("micro-batch " + std::to_string(in.micro_batch) + " is out of range (" +
                std::to_string(program_.config.micro_batches) + " micro-batches)");
  }
  return chunk;
}

runtime::LayerRange VmStep::layers_of(const Chunk& chunk, const Instruction& in) const {
  const runtime::LayerRange held = chunk.piece.layers();
  const int layer = layer_of(in);
  if (layer == kNoLayer) return held;
  if (layer < held.begin || layer >= held.end) {
    unsupported("layer " + std::to_string(layer) + " is not held by chunk " +
                std::to_string(in.chunk) + " (layers " + std::to_string(held.begin) + " .. " +
                std::to_string(held.end - 1) + ")");
  }
  return {layer, layer + 1};
}

Machine::Chunk& VmStep::weights_of(const Instruction& in) {
  Chunk& chunk = chunk_of(in);
  const runtime::LayerRange layers = layers_of(chunk, in);
  for (const Machine::Layer& l : chunk.layers) {
    if (l.index >= layers.begin && l.index < layers.end && l.sharded && l.gathered.empty()) {
      unsupported("computes with layer " + std::to_string(l.index) + " of chunk " +
                  std::to_string(in.chunk) + ", whose weights are not gathered (AllGather first)");
    }
  }
  return chunk;
}

int VmStep::peer_of(const Instruction& in) const {
  // At the turn of a V placement the peer may be this very rank (an ISend
  // and a Recv, the older form of vm_turn.cpp's hand-over; the checker
  // rejects a blocking self-send).
  if (!peer_in_pipeline(program_.placement, program_.config, m_.stage_, in)) {
    unsupported("peer stage " + std::to_string(in.peer) + " is not another stage of the " +
                std::to_string(program_.config.stages) + "-stage pipeline");
  }
  return in.peer;
}

void VmStep::load_input(const Instruction& in) {
  Chunk& chunk = chunk_of(in);
  std::uint16_t& flags = chunk.flags[in.micro_batch];
  if (!chunk.piece.is_first()) {
    unsupported("only the chunk holding the model's first layer loads inputs");
  }
  if (m_.batcher_ == nullptr) fail(DiagnosticKind::RuntimeData, "this rank has no data loaded");
  if (flags & (dataflow::input_pending | dataflow::forwarded)) {
    unsupported("the micro-batch's input buffer is in use");
  }
  m_.batcher_->input(m_.batch_, m_.dp_rank_, static_cast<int>(in.micro_batch),
                     chunk.piece.take_input(static_cast<int>(in.micro_batch), m_.rows_));
  flags |= dataflow::input_loaded;
}

void VmStep::load_target(const Instruction& in) {
  Chunk& chunk = chunk_of(in);
  if (!chunk.piece.is_last()) {
    unsupported("only the chunk holding the model's last layer loads targets");
  }
  if (m_.batcher_ == nullptr) fail(DiagnosticKind::RuntimeData, "this rank has no data loaded");
  m_.batcher_->labels(m_.batch_, m_.dp_rank_, static_cast<int>(in.micro_batch),
                      m_.label_buffer(chunk, in.micro_batch));
  chunk.flags[in.micro_batch] |= dataflow::target_loaded;
}

void VmStep::forward(const Instruction& in) {
  Chunk& chunk = weights_of(in);
  std::uint16_t& flags = chunk.flags[in.micro_batch];
  const runtime::LayerRange layers = layers_of(chunk, in);
  const runtime::LayerRange held = chunk.piece.layers();
  if (flags & dataflow::forwarded) unsupported("the micro-batch was already forwarded");
  if (layers.begin == held.begin) {
    if (flags & dataflow::input_pending) {
      unsupported("its input is still being received: wait for the IRecv first");
    }
    if (!(flags & dataflow::present(Value::input, ends(chunk))) &&
        !take_input_on_rank(chunk, in)) {
      unsupported("its input was neither loaded nor received");
    }
  }
  for (int layer = layers.begin; layer < layers.end; ++layer) {
    chunk.piece.forward_layer(static_cast<int>(in.micro_batch), layer);
  }
  if (layers.end == held.end) flags |= dataflow::forwarded;
  if (m_.comm_.pending() > 0) m_.comm_.progress();
}

void VmStep::backward_input(const Instruction& in) {
  Chunk& chunk = weights_of(in);
  std::uint16_t& flags = chunk.flags[in.micro_batch];
  const int slot = static_cast<int>(in.micro_batch);
  const runtime::LayerRange layers = layers_of(chunk, in);
  const runtime::LayerRange held = chunk.piece.layers();
  if (!(flags & dataflow::forwarded)) unsupported("backward before the micro-batch's forward");
  if (flags & dataflow::input_gradient_done) unsupported("the input gradient was already computed");
  require_stash(chunk, in);
  if (layers.end == held.end) {
    // The output's last use is this backward: a Send of it has completed by
    // now (its receiver's forward made the gradient this backward takes).
    m_.complete_posted_send(chunk, in.micro_batch);
    // The top layer first: the gradient at the piece's top.
    if (chunk.piece.is_last()) {
      if (!(flags & dataflow::target_loaded)) unsupported("the loss needs LoadTarget first");
      const runtime::LossResult loss =
          chunk.piece.loss(slot, m_.label_buffer(chunk, in.micro_batch), m_.loss_scale_);
      result_.loss += static_cast<double>(loss.loss) * m_.loss_report_scale_;
      result_.correct += loss.correct;
      result_.rows += m_.rows_;
    } else {
      if (flags & dataflow::output_gradient_pending) {
        unsupported("its output gradient is still being received: wait for the IRecv first");
      }
      if (!(flags & dataflow::output_gradient_received) &&
          !take_output_gradient_on_rank(chunk, in)) {
        unsupported("its output gradient was not received");
      }
    }
  }
  for (int layer = layers.end - 1; layer >= layers.begin; --layer) {
    chunk.piece.backward_input_layer(slot, layer);
  }
  if (layers.begin == held.begin) flags |= dataflow::input_gradient_done;
  if (m_.comm_.pending() > 0) m_.comm_.progress();
}

void VmStep::backward_weight(const Instruction& in, bool reduce_per_layer) {
  Chunk& chunk = chunk_of(in);
  std::uint16_t& flags = chunk.flags[in.micro_batch];
  const runtime::LayerRange layers = layers_of(chunk, in);
  const runtime::LayerRange held = chunk.piece.layers();
  if (flags & dataflow::weight_gradient_done) unsupported("the weight gradients were already accumulated");
  require_stash(chunk, in);
  const int slot = static_cast<int>(in.micro_batch);
  runtime::LayerHook hook;
  Machine* machine = &m_;
  // Layers finish last first; a piece keeps their gradients in one area in
  // layer order, so finished layers not yet reduced are one span that grows
  // downwards (a layer elsewhere starts a new bucket).
  std::span<float> bucket;
  const auto reduce = [machine, &bucket] {
    machine->reductions_.push_back(machine->comm_.iallreduce_sum(bucket));
    machine->comm_.progress();
    bucket = {};
  };
  if (reduce_per_layer) {
    hook = [&bucket, &reduce](int, std::span<float> layer_gradients) {
      if (!bucket.empty() && layer_gradients.data() + layer_gradients.size() != bucket.data()) {
        reduce();
      }
      bucket = std::span<float>(layer_gradients.data(), layer_gradients.size() + bucket.size());
      if (bucket.size_bytes() >= kReductionBucketBytes) reduce();
    };
  }
  for (int layer = layers.end - 1; layer >= layers.begin; --layer) {
    chunk.piece.backward_weight_layer(slot, layer, hook);
  }
  if (!bucket.empty()) reduce();
  for (const runtime::Comm::Request request : m_.reductions_) m_.comm_.wait(request);
  m_.reductions_.clear();
  if (layers.begin == held.begin) flags |= dataflow::weight_gradient_done;
  if (m_.comm_.pending() > 0) m_.comm_.progress();
}

void VmStep::gather_or_release(const Instruction& in, bool gather) {
  // A layer names itself; a chunk names its layers.
  const int layer = layer_of(in);
  bool any = false;
  for (Chunk& chunk : m_.chunks_) {
    const runtime::LayerRange held = chunk.piece.layers();
    if (layer == kNoLayer ? &chunk != &chunk_at(in) : layer < held.begin || layer >= held.end) {
      continue;
    }
    for (Machine::Layer& l : chunk.layers) {
      if (layer != kNoLayer && l.index != layer) continue;
      any = true;
      gather ? m_.gather(chunk, l) : m_.release(chunk, l);
    }
  }
  if (!any) unsupported("no chunk of this rank holds layer " + std::to_string(layer));
}

void VmStep::send(const Instruction& in) {
  Chunk& chunk = chunk_of(in);
  const std::uint16_t flags = chunk.flags[in.micro_batch];
  const int peer = peer_of(in);
  const int slot = static_cast<int>(in.micro_batch);
  const bool act = in.kind == MessageKind::act;
  std::span<const float> data;
  if (act) {
    if (!(flags & dataflow::forwarded)) unsupported("sends an activation not yet computed");
    data = chunk.piece.output(slot);
    if (data.empty()) unsupported("the micro-batch's output is gone (its backward freed it)");
  } else {
    if (!(flags & dataflow::input_gradient_done)) unsupported("sends a gradient not yet computed");
    data = chunk.piece.input_gradient(slot);
    if (data.empty()) unsupported("the micro-batch has no input gradient to send");
  }
  const int tag = tag_of(in);
  const bool blocking = !posts_request(in.op);
  if (blocking && !act) {
    // A gradient's buffer has no later use to complete its send before, so
    // the Send waits and gives the buffer back at once, as the memory model
    // counts it.
    m_.comm_.send(peer, tag, data);
    chunk.piece.end_input_gradient_send(slot);
    return;
  }
  if (blocking && chunk.piece.stash_state(slot) == runtime::StashState::input_only) {
    // Nor has a checkpointed forward's output.
    m_.comm_.send(peer, tag, data);
    chunk.piece.begin_output_send(slot);
    chunk.piece.end_output_send(slot);
    return;
  }
  act ? chunk.piece.begin_output_send(slot) : chunk.piece.begin_input_gradient_send(slot);
  // A blocking Send of an activation returns once posted, and completes
  // before the output's last use (backward_input) or at the end of the step.
  // MPI lets a standard send return before its receive is posted, and the
  // checker proved the program free of deadlock with no buffering at all, so
  // this adds no hang. Open MPI's shared-memory transport completes a send of
  // more than 256 bytes only once the receiver took it: a sender waiting for
  // it would wait for the receiver to be scheduled, with more ranks than
  // cores for the rest of another rank's time slice.
  (blocking ? m_.posted_sends_ : m_.pending_)
      .push_back({WaitDirection::send, in.kind, in.micro_batch, in.chunk,
                  m_.comm_.isend(peer, tag, data), index_});
}

void VmStep::receive(const Instruction& in) {
  Chunk& chunk = chunk_of(in);
  std::uint16_t& flags = chunk.flags[in.micro_batch];
  const int peer = peer_of(in);
  const bool act = in.kind == MessageKind::act;
  const std::uint16_t busy =
      act ? dataflow::input_loaded | dataflow::input_received | dataflow::input_pending |
                dataflow::forwarded
          : dataflow::output_gradient_received | dataflow::output_gradient_pending;
  if (flags & busy) unsupported("its buffer already holds or awaits this micro-batch's value");
  if (act && chunk.piece.is_first()) unsupported("the model's first piece takes no activation");
  if (!act && chunk.piece.is_last()) unsupported("the model's last piece takes no gradient");
  const int slot = static_cast<int>(in.micro_batch);
  const std::span<float> into =
      act ? chunk.piece.take_input(slot, m_.rows_) : chunk.piece.take_output_gradient(slot);
  const int tag = tag_of(in);
  const Value value = message_value(in.kind, false);
  if (!posts_request(in.op)) {
    m_.comm_.recv(peer, tag, into);
    flags |= dataflow::produced(value, OpClass::p2p);
    return;
  }
  flags |= dataflow::pending(value);
  m_.pending_.push_back({WaitDirection::recv, in.kind, in.micro_batch, in.chunk,
                         m_.comm_.irecv(peer, tag, into), index_});
}

void VmStep::complete(const Machine::PendingMessage& message) {
  if (is_host_copy(code_[message.instruction].op)) {
    finish_host_copy(message);
    return;
  }
  m_.comm_.wait(message.request);
  Chunk& chunk = m_.chunks_[message.chunk];
  const int slot = static_cast<int>(message.micro_batch);
  if (message.direction == WaitDirection::send) {
    // The send no longer reads its value.
    if (message.kind == MessageKind::act) {
      chunk.piece.end_output_send(slot);
    } else {
      chunk.piece.end_input_gradient_send(slot);
    }
    return;
  }
  std::uint16_t& flags = chunk.flags[message.micro_batch];
  const Value value = message_value(message.kind, false);
  flags = static_cast<std::uint16_t>((flags & ~dataflow::pending(value)) |
                                     dataflow::produced(value, OpClass::p2p));
}

void VmStep::wait(const Instruction& /*in*/) {
  const std::uint32_t request = m_.wait_requests_[index_];
  const auto match =
      std::find_if(m_.pending_.begin(), m_.pending_.end(),
                   [&](const Machine::PendingMessage& p) { return p.instruction == request; });
  if (request == kNoLink || match == m_.pending_.end()) unsupported("no such request is pending");
  const Machine::PendingMessage message = *match;
  m_.pending_.erase(match);
  complete(message);
}

void VmStep::wait_all() {
  // Request by request: a gossip exchange in flight is GossipWait's.
  for (const Machine::PendingMessage& message : m_.pending_) complete(message);
  m_.pending_.clear();
}

void VmStep::require_no_pending() const {
  // A host copy touches no parameter: one never waited for is finish_step's.
  const auto message = std::find_if(
      m_.pending_.begin(), m_.pending_.end(),
      [&](const Machine::PendingMessage& p) { return !is_host_copy(code_[p.instruction].op); });
  if (message != m_.pending_.end()) {
    unsupported("requests are still pending (" + disassemble(code_[message->instruction]) +
                "); their buffers may still change");
  }
}

void VmStep::optimizer_step() {
  require_no_pending();
  refuse_held_weight_gradients(kNoLayer, "optimizer step");
  m_.step(false);
}

void VmStep::finish_step() {
  for (const Machine::PendingMessage& message : m_.posted_sends_) {
    index_ = message.instruction;
    in_ = &code_[index_];
    try {
      m_.finish_posted_send(message);
    } catch (const runtime::CommError& error) {
      fail(DiagnosticKind::RuntimeComm, error.what());
    }
  }
  m_.posted_sends_.clear();
  if (!m_.pending_.empty()) {
    index_ = m_.pending_.front().instruction;
    in_ = &code_[index_];
    fail(DiagnosticKind::RuntimeComm, "the request is never waited for");
  }
  // A forward-only program leaves its slots forwarded: free them for the next step.
  for (Chunk& chunk : m_.chunks_) {
    for (std::size_t mb = 0; mb < chunk.flags.size(); ++mb) {
      const std::uint16_t flags = chunk.flags[mb];
      if ((flags & dataflow::forwarded) && !(flags & dataflow::input_gradient_done)) {
        chunk.piece.release(static_cast<int>(mb));
      }
    }
  }
  // Held values never dropped go now, after the last instruction's sample.
  for (Chunk& chunk : m_.chunks_) {
    try {
      chunk.piece.end_holds();
    } catch (const std::logic_error& error) {
      if (code_.empty()) throw;
      index_ = code_.size() - 1;
      in_ = &code_[index_];
      unsupported(error.what());
    }
  }
}

}  // namespace pipevm
