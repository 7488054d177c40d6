#!/usr/bin/env python3
"""PyTorch on one thread, the recipe of pipevm's sequential run, for bench/run.

The MLP 784-128-127-126-125-124-123-10 with ReLU, Fashion-MNIST's first
51,000 training images scaled to [-1, 1], batch 128 as 4 micro-batches of 32
whose gradients accumulate before one step, and either ShallowSpeed's recipe
(SGD lr 0.006, softmax then squared error against the one-hot label, summed
over classes) or pipevm's defaults (Adam lr 1e-3, cross-entropy). Prints the
BLAS that torch calls and its rate on the first layer's shape (a reference
BLAS would make any comparison meaningless), then one line per epoch:
"epoch N wall_s cpu_s". Leaves out evaluation: pipevm's s/epoch excludes it.

    python3 bench/reference/torch_mlp.py [--epochs 3] [--recipe sgd-mse|adam-ce]
"""
import argparse
import gzip
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
SIZES = [784, 128, 127, 126, 125, 124, 123, 10]


def read_idx(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(stem):
    for path in (f"{DATA}/{stem}.gz", f"{DATA}/{stem}"):
        if os.path.exists(path):
            return path
    raise SystemExit(f"torch_mlp.py: {DATA}/{stem}[.gz] not found (dataset-fashion-mnist)")


def blas_in_use():
    with open("/proc/self/maps") as maps:
        names = {line.split()[-1] for line in maps if "blas" in line.lower()}
    return ", ".join(sorted(names)) or "none mapped"


def matmul_rate():
    a = torch.randn(128, 784)
    w = torch.randn(128, 784)
    start = time.process_time()
    runs = 0
    while time.process_time() - start < 0.3:
        torch.mm(a, w.t())
        runs += 1
    return 2 * 128 * 784 * 128 * runs / (time.process_time() - start) / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--recipe", choices=["sgd-mse", "adam-ce"], default="sgd-mse")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    images = read_idx(find("train-images-idx3-ubyte")).reshape(-1, 784)[:51000]
    labels = read_idx(find("train-labels-idx1-ubyte"))[:51000]
    pixels = torch.from_numpy(images.copy())
    targets = torch.from_numpy(labels.astype(np.int64))
    one_hot = torch.eye(SIZES[-1])

    layers = [torch.nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    params = [p for layer in layers for p in layer.parameters()]
    if args.recipe == "sgd-mse":
        optimizer = torch.optim.SGD(params, lr=0.006)
    else:
        optimizer = torch.optim.Adam(params, lr=1e-3)

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"blas libraries mapped: {blas_in_use()}", flush=True)
    print(f"torch matmul 128x784 by 784x128: {matmul_rate():.1f} GFLOP/s", flush=True)

    batch, micro = 128, 32
    for epoch in range(args.epochs):
        order = torch.randperm(pixels.shape[0], generator=torch.Generator().manual_seed(epoch))
        wall, cpu = time.perf_counter(), time.process_time()
        for b in range(pixels.shape[0] // batch):
            optimizer.zero_grad(set_to_none=False)
            rows = order[b * batch:(b + 1) * batch]
            for m in range(batch // micro):
                index = rows[m * micro:(m + 1) * micro]
                h = pixels[index].float() * (2.0 / 255.0) - 1.0
                for k, layer in enumerate(layers):
                    h = layer(h)
                    if k + 1 < len(layers):
                        h = torch.relu(h)
                if args.recipe == "sgd-mse":
                    loss = ((torch.softmax(h, dim=1) - one_hot[targets[index]]) ** 2).sum() / batch
                else:
                    loss = torch.nn.functional.cross_entropy(h, targets[index], reduction="sum") / batch
                loss.backward()
            optimizer.step()
        print(f"epoch {epoch} {time.perf_counter() - wall:.3f} {time.process_time() - cpu:.3f}",
              flush=True)


if __name__ == "__main__":
    main()
