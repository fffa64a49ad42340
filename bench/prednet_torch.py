#!/usr/bin/python3
"""PyTorch side of bench/prednet-vs-torch.sh: the PredNet of models/prednet.hpp, layer for layer (Lotter et
al. 2017), trained with Adam on batches of `--batch` sequences of `--nt` frames;
prints one JSON line with milliseconds per training step (forward and backward through time, one update).

Per step t, top-down: R_l(t) = ConvLSTM_l([E_l(t-1), upsample2(R_{l+1}(t))], R_l(t-1)) with hard-sigmoid
gates clip(0.2x + 0.5, 0, 1) (Keras) and tanh, four biased 3x3 convolutions (here one convolution with
4 x the channels: the same arithmetic), no peepholes; bottom-up: Ahat_l = relu(conv(R_l)) (layer 0 also
min(., 1)), E_l = [relu(Ahat_l - A_l), relu(A_l - Ahat_l)], A_{l+1} = maxpool2(relu(conv(E_l))). Loss: the
mean of E_0 at every step but the first, weighted 1/(nt - 1). Frames are uniform random pixels: the cost
of dense convolutions does not depend on them."""
import argparse, json, time

import torch
import torch.nn as nn
import torch.nn.functional as F


def hard_sigmoid(x):
    return torch.clamp(0.2 * x + 0.5, 0.0, 1.0)


class PredNet(nn.Module):
    def __init__(self, stacks, filt=3):
        super().__init__()
        self.stacks = stacks
        L = len(stacks)
        self.cell = nn.ModuleList()
        self.ahat = nn.ModuleList()
        self.a = nn.ModuleList()
        for l, s in enumerate(stacks):
            cin = 2 * s + (stacks[l + 1] if l + 1 < L else 0) + s  # E_l(t-1), upsampled R_{l+1}, R_l(t-1)
            self.cell.append(nn.Conv2d(cin, 4 * s, filt, padding=filt // 2))
            self.ahat.append(nn.Conv2d(s, s, filt, padding=filt // 2))
            if l + 1 < L:
                self.a.append(nn.Conv2d(2 * s, stacks[l + 1], filt, padding=filt // 2))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, frames):  # frames: nt x N x C x H x W
        nt, n, _, h, w = frames.shape
        L = len(self.stacks)
        shape = [(self.stacks[l], h >> l, w >> l) for l in range(L)]
        r = [frames.new_zeros(n, *shape[l]) for l in range(L)]
        c = [frames.new_zeros(n, *shape[l]) for l in range(L)]
        e = [frames.new_zeros(n, 2 * shape[l][0], *shape[l][1:]) for l in range(L)]
        loss = 0.0
        for t in range(nt):
            for l in reversed(range(L)):
                parts = [e[l], r[l]]
                if l + 1 < L:
                    parts.insert(1, F.interpolate(r[l + 1], scale_factor=2, mode="nearest"))
                z = self.cell[l](torch.cat(parts, 1))
                zi, zf, zo, zg = torch.chunk(z, 4, 1)
                c[l] = hard_sigmoid(zf) * c[l] + hard_sigmoid(zi) * torch.tanh(zg)
                r[l] = hard_sigmoid(zo) * torch.tanh(c[l])
            a = frames[t]
            for l in range(L):
                ahat = F.relu(self.ahat[l](r[l]))
                if l == 0:
                    ahat = torch.clamp(ahat, max=1.0)
                e[l] = torch.cat([F.relu(ahat - a), F.relu(a - ahat)], 1)
                if l + 1 < L:
                    a = F.max_pool2d(F.relu(self.a[l](e[l])), 2)
            if t > 0:
                loss = loss + e[0].mean() / (nt - 1)
        return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--deterministic", type=int, default=1)
    ap.add_argument("--config", choices=["quick", "paper"], default="quick")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(bool(a.deterministic))
    torch.manual_seed(1)
    if a.config == "quick":
        stacks, h, w = (1, 16, 32, 64), 64, 64
    else:
        stacks, h, w = (3, 48, 96, 192), 128, 160
    nt, batch = 10, 4
    model = PredNet(stacks)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    frames = torch.rand(nt, batch, stacks[0], h, w)
    losses, t0 = [], None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(frames)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    print(json.dumps({"version": torch.__version__, "threads": a.threads, "deterministic": bool(a.deterministic),
                      "config": a.config, "ms_per_step": ms, "first_loss": losses[0], "last_loss": losses[-1]}))


if __name__ == "__main__":
    main()
