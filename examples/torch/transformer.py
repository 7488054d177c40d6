"""A small transformer in plain PyTorch, cut into pipeline stages by pipevm.

The model is a list of pieces (an input projection, attention and MLP
blocks, a head), the form torch.distributed.pipelining splits at. pipevm
measures each piece on one micro-batch (pipevm.profile_torch), chooses
where to cut it into stages together with the schedule
(pipevm.synthesize), and writes the schedule as the CSV that PyTorch's
pipelining runtime loads (``_load_csv(path, format="compute_comms")``).
Runs on the CPU in a few seconds:

    python3 examples/torch/transformer.py --stages 2 --micro-batches 4 --out /tmp/tf

writes costs.yaml, schedule.pipe and schedule.csv there and prints the cut.
What it leaves out: training with the schedule (that is PyTorch's runtime's
job) and GPUs (profile_torch times on the example's device).
"""

import argparse
import pathlib

import torch

import pipevm

TOKENS, WIDTH, HEADS = 8, 64, 4


class Embed(torch.nn.Module):
    """Features of each token to the model width."""

    def __init__(self, features):
        super().__init__()
        self.project = torch.nn.Linear(features, WIDTH)

    def forward(self, x):
        return self.project(x)


class Attention(torch.nn.Module):
    """Pre-norm self-attention with its residual."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.attention = torch.nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)

    def forward(self, x):
        y = self.norm(x)
        return x + self.attention(y, y, y, need_weights=False)[0]


class Mlp(torch.nn.Module):
    """Pre-norm Linear-ReLU-Linear with its residual; `wide` sets its hidden width."""

    def __init__(self, wide):
        super().__init__()
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.up = torch.nn.Linear(WIDTH, wide * WIDTH)
        self.down = torch.nn.Linear(wide * WIDTH, WIDTH)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Head(torch.nn.Module):
    """Mean over tokens, then the classes."""

    def __init__(self, classes):
        super().__init__()
        self.out = torch.nn.Linear(WIDTH, classes)

    def forward(self, x):
        return self.out(x.mean(dim=1))


def pieces(blocks=3, features=32, classes=10):
    """The model's pipeline-able pieces in order: MLPs of growing width make
    the pieces uneven, so an even cut by count is not an even cut by time."""
    torch.manual_seed(0)
    model = [Embed(features)]
    for block in range(blocks):
        model += [Attention(), Mlp(wide=2 + 2 * block)]
    return model + [Head(classes)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--memory-limit", default=None, help="bytes per stage, e.g. 2MB")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."))
    args = parser.parse_args()

    torch.set_num_threads(1)
    example = torch.randn(args.micro_batch_size, TOKENS, 32)
    profile = pipevm.profile_torch(pieces(), example, repeats=5, warmup=2)
    args.out.mkdir(parents=True, exist_ok=True)
    profile.write(args.out / "costs.yaml")

    best = pipevm.synthesize(stages=args.stages, micro_batches=args.micro_batches,
                             costs=profile, memory_limit=args.memory_limit, time_limit=1)
    (args.out / "schedule.pipe").write_text(best.text)
    (args.out / "schedule.csv").write_text(best.to_torch_csv())
    print(f"{len(profile.layers)} pieces on {profile.device}; cut {best.cut} into "
          f"{args.stages} stages; predicted makespan {best.makespan:.0f} us "
          f"(bubble {100 * best.bubble_fraction:.1f}%); peak bytes per stage {best.peak_bytes}")
    for line in best.text.splitlines():
        if line.startswith("# cut:"):
            print(line)


if __name__ == "__main__":
    main()
