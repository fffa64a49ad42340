#!/usr/bin/python3
"""PyTorch side of bench/ae-vs-torch.sh: the autoencoder of models/autoencoder.hpp, layer for layer,
trained with Adam on Fashion-MNIST batches of 64; prints one JSON line with milliseconds per step."""
import argparse, gzip, json, struct, time

import numpy as np
import torch
import torch.nn as nn


def load_images(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 0x803, f"{path}: bad magic {magic:#x}"
        return np.frombuffer(f.read(n * rows * cols), dtype=np.uint8).reshape(n, 1, rows, cols)


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Flatten(), nn.Linear(1568, 32))
        self.dec_fc = nn.Sequential(nn.Linear(32, 1568), nn.ReLU())
        self.dec = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(),
                                 nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(16, 1, 3, padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.dec(self.dec_fc(self.enc(x)).view(-1, 32, 7, 7))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--deterministic", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(bool(a.deterministic))
    torch.manual_seed(1)
    images = torch.from_numpy(load_images(a.data).astype(np.float32) / 255.0)
    model = Autoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = nn.MSELoss()
    perm = torch.randperm(images.shape[0])
    losses = []
    t0 = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            t0 = time.perf_counter()
        idx = perm[(step * 64) % (images.shape[0] - 64):][:64]
        x = images[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), x)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    assert np.isfinite(losses).all() and np.mean(losses[-5:]) < np.mean(losses[:5]), "PyTorch loss did not decrease"
    print(json.dumps({"impl": "pytorch", "version": torch.__version__, "threads": a.threads,
                      "deterministic": bool(a.deterministic), "ms_per_step": ms, "steps": a.steps,
                      "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
