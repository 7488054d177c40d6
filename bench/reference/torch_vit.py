#!/usr/bin/env python3
"""pipevm's ViT in PyTorch: the equality check, and the speed reference.

The network of runtime/vit_model.hpp: 7 x 7 patches of Fashion-MNIST's
28 x 28 images (16 tokens), a linear patch embedding plus learned positions,
pre-norm blocks (LayerNorm, multi-head self-attention, residual, LayerNorm,
GELU MLP (erf form), residual), a final LayerNorm, the mean over tokens and
a linear head; tensor names as pipevm writes them (`pipevm run --save`).

    torch_vit.py check DUMP_TOOL     run DUMP_TOOL (tests/runtime's
                                     runtime_vit_torch_dump) for one batch of
                                     pipevm, redo it in PyTorch (float64), and
                                     compare logits and every gradient:
                                     exit 0 within 1e-5 relative, 1 beyond,
                                     77 where torch cannot be imported
    torch_vit.py time [--epochs N]   train on one thread, Adam lr 1e-3, batch
                                     128, cross-entropy, pipevm's preprocessing
                                     (51,000 training images scaled to [-1, 1]);
                                     prints the BLAS, one line per epoch
                                     "epoch N wall_s cpu_s test_accuracy"

Relative difference of a tensor: max |pipevm - torch| / max |torch|.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import numpy as np
    import torch
except ImportError as error:  # the test skips where PyTorch is missing
    print(f"torch_vit.py: skipped, {error}")
    sys.exit(77)

# The MLP reference's data reading and BLAS probes (same folder).
from torch_mlp import blas_in_use, find, matmul_rate, read_idx  # noqa: E402

TOLERANCE = 1e-5


class Block(torch.nn.Module):
    def __init__(self, width, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc1 = torch.nn.Linear(width, hidden)
        self.fc2 = torch.nn.Linear(hidden, width)

    def attention(self, x):
        batch, tokens, width = x.shape
        head_width = width // self.heads
        q, k, v = self.qkv(x).split(width, dim=-1)

        def by_head(t):
            return t.reshape(batch, tokens, self.heads, head_width).transpose(1, 2)

        scores = by_head(q) @ by_head(k).transpose(-2, -1) / head_width ** 0.5
        context = torch.softmax(scores, dim=-1) @ by_head(v)
        return self.proj(context.transpose(1, 2).reshape(batch, tokens, width))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class Vit(torch.nn.Module):
    def __init__(self, image_side=28, patch=7, width=64, blocks=4, heads=4, hidden=256,
                 classes=10):
        super().__init__()
        self.image_side, self.patch = image_side, patch
        tokens = (image_side // patch) ** 2
        self.patch_embedding = torch.nn.Linear(patch * patch, width)
        self.positions = torch.nn.Parameter(torch.zeros(tokens, width))
        self.blocks = torch.nn.ModuleList(Block(width, heads, hidden) for _ in range(blocks))
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, classes)

    def forward(self, images):
        side, p = self.image_side, self.patch
        per_side = side // p
        patches = (images.reshape(-1, per_side, p, per_side, p).permute(0, 1, 3, 2, 4)
                   .reshape(-1, per_side * per_side, p * p))
        x = self.patch_embedding(patches) + self.positions
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))

    def named_as_pipevm(self):
        """pipevm's tensor name -> this model's parameter."""
        names = {"embed.patch.weight": self.patch_embedding.weight,
                 "embed.patch.bias": self.patch_embedding.bias,
                 "embed.positions": self.positions,
                 "norm.weight": self.norm.weight, "norm.bias": self.norm.bias,
                 "head.weight": self.head.weight, "head.bias": self.head.bias}
        for i, block in enumerate(self.blocks):
            for name, parameter in block.named_parameters():
                names[f"blocks.{i}.{name}"] = parameter
        return names


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        assert entry["dtype"] == "F32", name
        begin, end = entry["data_offsets"]
        values = np.frombuffer(data, np.float32, (end - begin) // 4, 8 + length + begin)
        tensors[name] = torch.from_numpy(values.copy()).reshape(entry["shape"])
    return tensors, metadata


def relative(ours, theirs):
    return float((ours.double() - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30))


def check(dump_tool):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "batch.safetensors")
        subprocess.run([dump_tool, path], check=True)
        tensors, metadata = read_safetensors(path)
    sizes = {key: int(metadata[key]) for key in
             ("image_side", "patch", "width", "blocks", "heads", "hidden", "classes")}
    model = Vit(**sizes).double()
    parameters = model.named_as_pipevm()
    with torch.no_grad():
        for name, parameter in parameters.items():
            parameter.copy_(tensors[name])
    images = tensors["input"].double()
    labels = tensors["labels"].long()
    logits = model(images)
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()
    worst = relative(tensors["logits"], logits.detach())
    report = [("logits", worst)]
    for name, parameter in parameters.items():
        difference = relative(tensors["grad." + name], parameter.grad)
        report.append(("grad." + name, difference))
        worst = max(worst, difference)
    loss_difference = abs(float(metadata["loss"]) - loss.item()) / abs(loss.item())
    report.append(("loss", loss_difference))
    worst = max(worst, loss_difference)
    for name, difference in report:
        print(f"{name:32s} {difference:.2e}")
    print(f"largest relative difference {worst:.2e} (tolerance {TOLERANCE:g}) over "
          f"{len(report)} tensors, torch {torch.__version__} in float64")
    return 0 if worst <= TOLERANCE else 1


def train(epochs):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    images = read_idx(find("train-images-idx3-ubyte")).reshape(-1, 784)[:51000]
    labels = read_idx(find("train-labels-idx1-ubyte"))[:51000]
    test_images = read_idx(find("t10k-images-idx3-ubyte")).reshape(-1, 784)
    test_labels = torch.from_numpy(read_idx(find("t10k-labels-idx1-ubyte")).astype(np.int64))
    pixels = torch.from_numpy(images.copy()).float() * (2.0 / 255.0) - 1.0
    test_pixels = torch.from_numpy(test_images.copy()).float() * (2.0 / 255.0) - 1.0
    targets = torch.from_numpy(labels.astype(np.int64))
    model = Vit()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"blas libraries mapped: {blas_in_use()}", flush=True)
    print(f"torch matmul 128x784 by 784x128: {matmul_rate():.1f} GFLOP/s", flush=True)
    print(torch.__config__.show(), flush=True)
    batch = 128
    for epoch in range(epochs):
        order = torch.randperm(pixels.shape[0], generator=torch.Generator().manual_seed(epoch))
        wall, cpu = time.perf_counter(), time.process_time()
        for b in range(pixels.shape[0] // batch):
            index = order[b * batch:(b + 1) * batch]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(pixels[index]), targets[index])
            loss.backward()
            optimizer.step()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        with torch.no_grad():
            correct = sum(int((model(test_pixels[i:i + 1000]).argmax(1) ==
                               test_labels[i:i + 1000]).sum()) for i in range(0, 10000, 1000))
        print(f"epoch {epoch} {wall:.3f} {cpu:.3f} {correct / 10000:.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    check_parser = commands.add_parser("check")
    check_parser.add_argument("dump_tool")
    time_parser = commands.add_parser("time")
    time_parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    if args.command == "check":
        sys.exit(check(args.dump_tool))
    train(args.epochs)


if __name__ == "__main__":
    main()
