#!/usr/bin/python3
"""Trains a small CNN to regress the 2D keypoints of a converted HMR-style dataset.

    ./scripts/make-sample-data.py raw/ --samples 512
    tarmac convert raw/part-*.tar.gz -o hmr/ --crop field:bbox_xywh --crop-scale 1.2 --square \\
        --size 224 --points keypoints2d --boxes bbox_xywh
    PYTHONPATH=python examples/train_keypoints.py hmr/ --steps 200 --workers 4
    PYTHONPATH=python examples/train_keypoints.py s3://bucket/hmr/ --cache /scratch/tarmac-cache --cache-size 10G

The crops and the keypoints were made once by `tarmac convert`: a step only decodes a JPEG
and copies a few labels, so the GPU should not wait. Prints the steady state's samples/s, the
fraction of the time spent waiting for data, and GPU utilisation when a GPU is present.
--mode synthetic (no loader) and --mode loader (no model) give the two ceilings: the loader
keeps the GPU busy when its rate is above the GPU's.
"""
import argparse
import os
import subprocess
import sys
import threading
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tarmac  # noqa: E402
import tarmac.torch as tt  # noqa: E402


def make_model(name, num_points):
    if name != "small":
        import torchvision
        return getattr(torchvision.models, name)(num_classes=num_points * 2)

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, stride=2, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
    return nn.Sequential(block(3, 16), block(16, 32), block(32, 64), block(64, 128), block(128, 128),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_points * 2))


class GpuUtilisation:
    """Samples the GPU's utilisation (percent) in a background thread, so that asking never
    stalls the training loop (an nvidia-smi call takes tens of milliseconds)."""

    def __init__(self, period=0.2):
        self.samples, self._stop = [], threading.Event()
        self._query = self._nvml() or self._smi
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self._thread.start()

    @staticmethod
    def _nvml():
        try:
            import pynvml
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
            return lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
        except Exception:  # no pynvml, or no NVML: fall back to nvidia-smi
            return None

    @staticmethod
    def _smi():
        out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5)
        return int(out.stdout.split()[0])

    def _run(self, period):
        while not self._stop.wait(period):
            try:
                self.samples.append(self._query())
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                return

    def mark(self):
        """Forget what was sampled so far (the warm-up)."""
        self.samples = []

    def mean(self):
        self._stop.set()
        return sum(self.samples) / len(self.samples) if self.samples else None


def synthetic_batches(first, batch_size, device):
    """The same batch on the GPU, forever: the GPU's own ceiling, with no loader at all."""
    images = first["image"].unsqueeze(0).repeat(batch_size, 1, 1, 1).to(device)
    kp = first["keypoints2d"].unsqueeze(0).repeat(batch_size, 1, 1).to(device)
    while True:
        yield {"image": images, "keypoints2d": kp}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20,
                    help="steps left out of the steady-state figures (workers starting, cuDNN tuning)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--loader", choices=["batched", "per-sample"], default="batched",
                    help="batched: each worker decodes a whole batch in one call into shared memory; "
                         "per-sample: one __getitem__ per sample and torch's collate")
    ap.add_argument("--model", choices=["small", "resnet18", "resnet50"], default="small",
                    help="small: 5 conv layers; resnet18/50 from torchvision (channels-last)")
    ap.add_argument("--amp", action="store_true", help="bf16 autocast on the GPU")
    ap.add_argument("--mode", choices=["train", "synthetic", "loader"], default="train",
                    help="synthetic: one batch kept on the GPU (the GPU's ceiling); loader: batches to "
                         "the GPU, no model (the loader's ceiling)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0, help="the sampler's order and the model's initial weights")
    ap.add_argument("--log-every", type=int, default=50)
    tarmac.cache_flags.add_cache_arguments(ap)
    a = ap.parse_args()

    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.manual_seed(a.seed)
    ds = tt.TarmacDataset(a.dataset, fields=["keypoints2d"], **tarmac.cache_flags.cache_options(ap, a, a.dataset))
    sampler = tt.ShardedSampler(len(ds), seed=a.seed)  # rank/world from torch.distributed if set
    if a.loader == "batched":
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=a.workers, pin_memory=cuda, persistent_workers=a.workers > 0,
            sampler=torch.utils.data.BatchSampler(sampler, a.batch_size, drop_last=False))
    else:
        loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers,
                                             pin_memory=cuda, drop_last=False, persistent_workers=a.workers > 0)
    first = ds[0]
    _, height, width = first["image"].shape
    num_points = first["keypoints2d"].shape[0]
    model = make_model(a.model, num_points).to(device)
    if a.model != "small":
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    # Keypoints are in output pixel coordinates (the crop's affine already applied by tarmac):
    # normalise to [-1, 1] for the regression.
    scale = torch.tensor([width / 2, height / 2], device=device)

    def batches():
        if a.mode == "synthetic":
            yield from synthetic_batches(first, a.batch_size, device)
        epoch = 0
        while True:
            sampler.set_epoch(epoch)
            yield from loader
            epoch += 1

    util = GpuUtilisation() if cuda else None
    warmup = min(a.warmup, a.steps - 1)
    samples = waited = 0.0
    it = batches()
    t_start = t_steady = time.perf_counter()
    for step in range(1, a.steps + 1):
        t_wait = time.perf_counter()
        batch = next(it)
        wait = time.perf_counter() - t_wait
        images = batch["image"].to(device, non_blocking=True)
        kp = batch["keypoints2d"].to(device, non_blocking=True).float()
        if a.mode != "loader":
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.amp and cuda):
                x = images.float().div_(255)
                if a.model != "small":
                    x = x.contiguous(memory_format=torch.channels_last)
                pred = model(x).view(-1, num_points, 2).float()
            target = (kp[..., :2] - scale) / scale
            loss = ((pred - target) ** 2 * kp[..., 2:3]).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if step == warmup:  # the steady state starts after this step has finished on the GPU
            if cuda:
                torch.cuda.synchronize()
            t_steady, samples, waited = time.perf_counter(), 0, 0.0
            if util:
                util.mark()
        elif step > warmup:
            samples += images.shape[0]
            waited += wait
        if step % a.log_every == 0 or step == a.steps:
            shown = f"loss {loss.item():.4f}" if a.mode != "loader" else f"batch {tuple(images.shape)}"
            print(f"step {step:5d}  {shown}  data-wait {wait * 1e3:6.1f} ms", flush=True)
    if cuda:
        torch.cuda.synchronize()
    t_end = time.perf_counter()
    steady = t_end - t_steady
    gpu = util.mean() if util else None
    print(f"{a.mode}, model {a.model}{' bf16' if a.amp else ''}, {a.loader} loader, {a.workers} workers, "
          f"batch {a.batch_size}: all {a.steps} steps in {t_end - t_start:.2f} s", flush=True)
    print(f"steady state (steps {warmup + 1}-{a.steps}): {samples / steady:.1f} samples/s, "
          f"data-wait {waited / steady:.1%} of the time"
          + (f", GPU utilisation {gpu:.0f}%" if gpu is not None else ""), flush=True)


if __name__ == "__main__":
    main()
