#!/usr/bin/env python3
"""`python -m tarmac.derive` on a GPU (issue #15): an encoder the size of Stable Diffusion's VAE
encoder (the AutoencoderKL layout SD 1.x/2.x/XL use: 128-256-512-512 channels, two residual
blocks per level, three stride-2 downsamplings, self-attention at 1/8 resolution, 8 output
channels of which the first 4 are the latent mean; ~34 M parameters, random weights with a fixed
seed: no weights can be downloaded) over a bucketed dataset (`--resize bucket --size 1024`).

Measured, in one run:
  ceiling   the encoder on batches decoded beforehand and held in memory, outputs copied to
            the host as derive does: what the GPU can do with no loader at all
  derive T  tarmac.derive.run with T native decoding threads: samples/s, the fraction of its
            time spent waiting for the next batch (data_wait), the GPU's utilisation (NVML or
            nvidia-smi, sampled in a background thread)
  loader T  the same with a FUNC that does nothing (one byte per sample, no model, no GPU): the
            loader's own rate, i.e. the headroom left for a faster model or GPU

and the fewest threads that keep derive within 95 % of the ceiling. With --tarmac, the last
run's column is merged and verified (`tarmac column merge`, `tarmac verify`).

usage: derive_gpu.py DATASET [--device cuda] [--batch-size 8] [--threads 1 2 4 8 16]
                     [--loader-threads 1 2 4 8 16]
                     [--tarmac PATH] [--json OUT.json]
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import tarmac
import tarmac.derive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
from train_keypoints import GpuUtilisation  # noqa: E402

SDXL_SCALING = 0.13025  # SDXL's latent scaling factor


class ResBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(32, cin, eps=1e-6), nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2, self.conv2 = nn.GroupNorm(32, cout, eps=1e-6), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        return self.skip(x) + self.conv2(F.silu(self.norm2(h)))


class SelfAttention(nn.Module):
    """One head over every position (at 1024² input: 128² = 16,384 of them)."""

    def __init__(self, c):
        super().__init__()
        self.norm, self.qkv, self.out = nn.GroupNorm(32, c, eps=1e-6), nn.Linear(c, 3 * c), nn.Linear(c, c)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x).flatten(2).transpose(1, 2)).chunk(3, dim=-1)
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]
        else:  # torch < 2.0 (Debian's 1.13): fine for the small images of a CPU trial
            o = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(c), dim=-1) @ v
        return x + self.out(o).transpose(1, 2).reshape(b, c, h, w)


class Downsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, stride=2)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1)))


def sd_vae_encoder(channels=(128, 256, 512, 512)):
    torch.manual_seed(0)
    layers, cin = [nn.Conv2d(3, channels[0], 3, padding=1)], channels[0]
    for i, c in enumerate(channels):
        layers += [ResBlock(cin, c), ResBlock(c, c)]
        cin = c
        if i + 1 < len(channels):
            layers.append(Downsample(c))
    layers += [ResBlock(cin, cin), SelfAttention(cin), ResBlock(cin, cin),
               nn.GroupNorm(32, cin, eps=1e-6), nn.SiLU(), nn.Conv2d(cin, 8, 3, padding=1), nn.Conv2d(8, 8, 1)]
    return nn.Sequential(*layers).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--loader-threads", type=int, nargs="+", default=[1, 2, 4, 8, 16],
                    help="also run derive with a FUNC that does nothing: the loader's own rate")
    ap.add_argument("--tarmac", help="tarmac binary: merge and verify the last run's column")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    torch.backends.cudnn.benchmark = True
    net = sd_vae_encoder().to(dev, memory_format=torch.channels_last)
    out_dtype = torch.bfloat16 if cuda else torch.float32

    def encode(batch):
        x = batch["image"].to(dev, non_blocking=True).permute(0, 3, 1, 2).float().div_(127.5).sub_(1.0)
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            moments = net(x.contiguous(memory_format=torch.channels_last))
        return (moments[:, :4].float() * SDXL_SCALING).to(out_dtype)

    ds = tarmac.Dataset(a.dataset)
    n = len(ds)
    batches = tarmac.derive._batches(ds, np.arange(n, dtype=np.int64), a.batch_size)
    t0 = time.perf_counter()
    decoded = [{"image": torch.from_numpy(ds.batch(idx, fields=[])[0]), "__index__": torch.from_numpy(idx)}
               for idx in batches]
    decode_s = time.perf_counter() - t0
    sizes = sorted({tuple(b["image"].shape[1:3]) for b in decoded})
    params = sum(p.numel() for p in net.parameters())
    print(f"{n} samples, {len(batches)} batches of up to {a.batch_size}, {len(sizes)} bucket sizes "
          f"({', '.join(f'{w}x{h}' for h, w in sizes)}); encoder {params / 1e6:.1f} M parameters on {dev}"
          f"{' (' + torch.cuda.get_device_name(dev) + ')' if cuda else ''}; {os.cpu_count()} cores; "
          f"decoding everything beforehand took {decode_s:.1f} s", flush=True)
    seen = set()
    for b in decoded:  # warm-up: cuDNN picks its algorithms once per shape
        if tuple(b["image"].shape) not in seen:
            seen.add(tuple(b["image"].shape))
            encode(b).cpu()

    util = GpuUtilisation() if cuda else None
    t0 = time.perf_counter()
    for b in decoded:
        encode(b).cpu()
    ceiling_s = time.perf_counter() - t0
    ceiling = {"samples_per_s": n / ceiling_s, "gpu_utilisation": util.mean() if util else None}
    del decoded
    print(f"ceiling (decoded beforehand): {ceiling['samples_per_s']:.1f} samples/s, GPU "
          f"{ceiling['gpu_utilisation'] if ceiling['gpu_utilisation'] is not None else '-'} %", flush=True)

    # The loader alone: derive with a FUNC that returns one byte per sample, no model, no GPU. Its
    # rate over the encoder's is the headroom left for a faster model or GPU.
    loader = []
    for threads in a.loader_threads:
        shutil.rmtree(os.path.join(a.dataset, "columns"), ignore_errors=True)
        r = tarmac.derive.run(a.dataset, "loader", lambda b: b["image"][:, 0, 0, :1].clone(),
                              batch_size=a.batch_size, rank=0, world=1, threads=threads, log=lambda msg: None)
        loader.append({"threads": threads, "samples_per_s": r["computed"] / r["seconds"]})
        print(f"loader alone, {threads:2d} threads: {loader[-1]['samples_per_s']:.0f} samples/s "
              f"({loader[-1]['samples_per_s'] / ceiling['samples_per_s']:.1f}x the encoder's ceiling)", flush=True)

    rows = []
    for threads in a.threads:
        shutil.rmtree(os.path.join(a.dataset, "columns"), ignore_errors=True)
        util = GpuUtilisation() if cuda else None
        r = tarmac.derive.run(a.dataset, "latents", encode, batch_size=a.batch_size, rank=0, world=1,
                              threads=threads, log=lambda msg: None)
        row = {"threads": threads, "samples_per_s": r["computed"] / r["seconds"], "data_wait": r["data_wait"],
               "fn_seconds": r["fn_seconds"], "seconds": r["seconds"],
               "gpu_utilisation": util.mean() if util else None}
        row["of_ceiling"] = row["samples_per_s"] / ceiling["samples_per_s"]
        rows.append(row)
        print(f"derive, {threads:2d} threads: {row['samples_per_s']:.1f} samples/s ({row['of_ceiling']:.0%} of the "
              f"ceiling), waiting for data {row['data_wait']:.1%}, GPU "
              f"{row['gpu_utilisation'] if row['gpu_utilisation'] is not None else '-'} %", flush=True)
    enough = next((r["threads"] for r in rows if r["of_ceiling"] >= 0.95), None)
    print(f"fewest threads within 95 % of the ceiling: {enough if enough is not None else 'none measured'}")

    print("\n| derive threads | samples/s | of the ceiling | waiting for data | GPU utilisation |")
    print("|---|---|---|---|---|")
    print(f"| ceiling (decoded beforehand) | {ceiling['samples_per_s']:.1f} | 100 % | – | "
          f"{'%.0f %%' % ceiling['gpu_utilisation'] if ceiling['gpu_utilisation'] is not None else '–'} |")
    for r in rows:
        gpu = "%.0f %%" % r["gpu_utilisation"] if r["gpu_utilisation"] is not None else "–"
        print(f"| {r['threads']} | {r['samples_per_s']:.1f} | {r['of_ceiling']:.0%} | {r['data_wait']:.1%} | {gpu} |")
    if loader:
        print("\n| loader alone, threads | samples/s | × the encoder's ceiling |")
        print("|---|---|---|")
        for r in loader:
            x = r["samples_per_s"] / ceiling["samples_per_s"]
            print(f"| {r['threads']} | {r['samples_per_s']:.0f} | {x:.1f} |")

    if a.tarmac:
        for cmd in ([a.tarmac, "column", "merge", "-q", a.dataset, "latents"], [a.tarmac, "verify", "-q", a.dataset]):
            subprocess.run(cmd, check=True)
        print("merged and verified: tarmac column merge + tarmac verify passed")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"samples": n, "batch_size": a.batch_size, "sizes": sizes, "params": params,
                       "device": str(dev), "ceiling": ceiling, "derive": rows, "loader": loader,
                       "threads_needed": enough}, f, indent=1)


if __name__ == "__main__":
    main()
