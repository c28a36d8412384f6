"""What the derived-column benchmarks share (column_read.py, derive_overhead.py, derive_reuse.py):
the SDXL-shaped latents of three 512²-class buckets, the benchmark encoder, and timing helpers.

The encoder is an SD-VAE encoder in miniature: 3 stride-2 convolutions to a 4-channel latent at
1/8 the size, float32, random weights with a fixed seed; an image of H×W gives a latent of
4×H/8×W/8, so the three buckets' images (IMAGE_SIZES) give exactly SHAPES.

`encode` is that encoder as derive's FUNC (`--fn latents:encode` with scripts/bench on
PYTHONPATH), one sample at a time through the network: batched, oneDNN's convolutions give a
sample's latent bits that depend on its batch-mates (up to 3e-8 apart here), and a reused output
is checked bit for bit against a recomputed one in another batch. With $TARMAC_BENCH_CALLS set,
every call appends the batch's sample indices to that file, one line a call, so a benchmark can
count FUNC's calls.
"""
import os
import time

import numpy as np

SHAPES = [(4, 64, 64), (4, 48, 80), (4, 80, 48)]  # float32 latents: 62,805 B a sample on average
IMAGE_SIZES = [(8 * h, 8 * w) for _, h, w in SHAPES]  # (height, width) of the images that give them


def latent(i):
    """Sample i's latent: deterministic, different for every sample."""
    shape = SHAPES[i % len(SHAPES)]
    return np.random.default_rng(i).standard_normal(shape, dtype=np.float32)


def encoder():
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2, padding=1), torch.nn.SiLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.SiLU(),
        torch.nn.Conv2d(64, 128, 3, stride=2, padding=1), torch.nn.SiLU(),
        torch.nn.Conv2d(128, 4, 1)).eval()


def encode_with(net, batch):
    """net's latents [B, 4, H/8, W/8] of derive's batch (uint8 images [B, H, W, 3] scaled to [-1, 1])."""
    import torch
    x = batch["image"].permute(0, 3, 1, 2).float().div_(127.5).sub_(1.0)
    with torch.no_grad():
        return net(x)


_net = None


def encode(batch):
    """derive's FUNC: the benchmark encoder (built on first use), sample by sample."""
    import torch
    global _net
    if _net is None:
        _net = encoder()
    calls = os.environ.get("TARMAC_BENCH_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write(" ".join(str(int(i)) for i in batch["__index__"]) + "\n")
    images = batch["image"]
    return torch.cat([encode_with(_net, {"image": images[j:j + 1]}) for j in range(len(images))])


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def drop_caches():
    """Drops the page cache (as root); False where this process may not."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
