#!/usr/bin/python3
"""Trains a small CNN to regress the 2D keypoints of a converted HMR-style dataset.

    ./scripts/make-sample-data.py raw/ --samples 512
    tarmac convert raw/part-*.tar.gz -o hmr/ --crop field:bbox_xywh --crop-scale 1.2 --square \\
        --size 224 --points keypoints2d --boxes bbox_xywh
    PYTHONPATH=python examples/train_keypoints.py hmr/ --steps 200 --workers 4

The crops and the keypoints were made once by `tarmac convert`: a step only decodes a JPEG
and copies a few labels, so the GPU should not wait. Prints samples/s, the fraction of each
step spent waiting for data, and GPU utilisation when a GPU is present.
"""
import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tarmac.torch as tt  # noqa: E402


def make_model(num_points):
    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, stride=2, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
    return nn.Sequential(block(3, 16), block(16, 32), block(32, 64), block(64, 128), block(128, 128),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_points * 2))


def gpu_utilisation():
    """The GPU's utilisation in percent from nvidia-smi, or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5)
        return int(out.stdout.split()[0]) if out.returncode == 0 else None
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    device = torch.device(a.device)
    ds = tt.TarmacDataset(a.dataset, fields=["keypoints2d"])
    sampler = tt.DistributedSampler(len(ds), seed=a.seed)  # rank/world from torch.distributed if set
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers,
                                         pin_memory=device.type == "cuda", drop_last=False,
                                         persistent_workers=a.workers > 0)
    first = ds[0]
    _, height, width = first["image"].shape
    num_points = first["keypoints2d"].shape[0]
    model = make_model(num_points).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    # Keypoints are in output pixel coordinates (the crop's affine already applied by tarmac):
    # normalise to [-1, 1] for the regression.
    scale = torch.tensor([width / 2, height / 2], device=device)

    step, epoch, samples, wait_total, t_start = 0, 0, 0, 0.0, time.perf_counter()
    while step < a.steps:
        sampler.set_epoch(epoch)
        t_wait = time.perf_counter()
        for batch in loader:
            t_ready = time.perf_counter()
            wait = t_ready - t_wait
            images = batch["image"].to(device, non_blocking=True).float().div_(255)
            kp = batch["keypoints2d"].to(device, non_blocking=True).float()
            target = (kp[..., :2] - scale) / scale
            conf = kp[..., 2:3]
            pred = model(images).view(-1, num_points, 2)
            loss = ((pred - target) ** 2 * conf).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            t_done = time.perf_counter()
            step += 1
            samples += images.shape[0]
            wait_total += wait
            util = gpu_utilisation() if device.type == "cuda" and step % 10 == 0 else None
            print(f"step {step:5d}  loss {loss.item():.4f}  data-wait {wait / (t_done - t_wait):5.1%}"
                  + (f"  gpu {util}%" if util is not None else ""), flush=True)
            if step >= a.steps:
                break
            t_wait = time.perf_counter()
        epoch += 1
    elapsed = time.perf_counter() - t_start
    print(f"{samples} samples in {elapsed:.2f} s: {samples / elapsed:.1f} samples/s, "
          f"data-wait {wait_total / elapsed:.1%} of the time", flush=True)


if __name__ == "__main__":
    main()
