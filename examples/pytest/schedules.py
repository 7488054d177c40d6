"""A PyTorch-style project's schedules, built as torch.distributed.pipelining's
custom schedules are: a `pipeline_order` dictionary {rank: [action or None]}
with actions spelled as PyTorch prints them ("0F3": stage 0 forward of
micro-batch 3; "1B0": stage 1 full backward; "2I1"/"2W1": input and weight
halves). Plain Python: no torch needed to build or to check them."""


def gpipe(num_stages, n_microbatches):
    """All forwards, then all backwards; stage s on rank s."""
    order = {}
    for rank in range(num_stages):
        idle = [None] * rank
        forwards = [f"{rank}F{mb}" for mb in range(n_microbatches)]
        backwards = [f"{rank}B{mb}" for mb in reversed(range(n_microbatches))]
        order[rank] = idle + forwards + idle + backwards
    return order


def warm_up(rank, num_stages, n_microbatches):
    """A rank's idle steps and first forwards: one per stage after it (and its own)."""
    forwards = min(num_stages - rank, n_microbatches)
    return [None] * rank + [f"{rank}F{mb}" for mb in range(forwards)], forwards


def one_f_one_b(num_stages, n_microbatches):
    """Warm-up forwards, then one forward and one backward in turn, then the rest."""
    order = {}
    for rank in range(num_stages):
        actions, forward = warm_up(rank, num_stages, n_microbatches)
        backward = 0
        while backward < n_microbatches:
            actions.append(f"{rank}B{backward}")
            backward += 1
            if forward < n_microbatches:
                actions.append(f"{rank}F{forward}")
                forward += 1
        order[rank] = actions
    return order


def zero_bubble_h1(num_stages, n_microbatches):
    """1F1B with each backward split into input (I) and weight (W) halves,
    the weight halves deferred to fill the cool-down's bubbles."""
    order = {}
    for rank in range(num_stages):
        actions, forward = warm_up(rank, num_stages, n_microbatches)
        backward, weight = 0, 0
        while backward < n_microbatches:
            actions.append(f"{rank}I{backward}")
            backward += 1
            if forward < n_microbatches:
                actions.append(f"{rank}F{forward}")
                forward += 1
            elif weight < backward:
                actions.append(f"{rank}W{weight}")
                weight += 1
            if backward > rank and weight < backward - rank and forward < n_microbatches:
                actions.append(f"{rank}W{weight}")
                weight += 1
        actions += [f"{rank}W{mb}" for mb in range(weight, n_microbatches)]
        order[rank] = actions
    return order


SCHEDULES = {"gpipe": gpipe, "1f1b": one_f_one_b, "zb-h1": zero_bubble_h1}
