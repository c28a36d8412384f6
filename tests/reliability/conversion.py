"""What the reliability tests share: an archive of small JPEG samples whose conversion takes a
second or two, the command that converts it (two threads, small shards: a reorder window to
drain and a shard closed -- a checkpoint -- every hundred samples or so), and comparisons with
an uninterrupted run."""
import filecmp
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402


def write_archive(path, samples):
    """`samples` JPEG + JSON samples in one tar (17 distinct 256x192 images, repeated)."""
    jpgs = [fx.jpg(fx.smooth_rgb(256, 192, seed=s), quality=90) for s in range(17)]
    members = []
    for i in range(samples):
        key = "k/%05d" % i
        members.append((key + ".jpg", jpgs[i % len(jpgs)]))
        members.append((key + ".json", fx.js({"id": i, "box": [i % 7, 2.5, 30, 40]})))
    return fx.write_tar(path, members)


def command(archive, out, *extra):
    return [fx.TARMAC, "convert", archive, "-o", out, "--crop", "center", "--size", "128",
            "--shard-size", "512K", "--threads", "2", "-q", *extra]


def outputs(out):
    """The files that make up the dataset (the manifest records a command line with `out`)."""
    return sorted(n for n in os.listdir(out) if n == "labels.safetensors" or n.startswith("shard-"))


def resumed_samples(out):
    """The samples a resumed run found converted (its manifest), None if it did not resume."""
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f).get("resumed", {}).get("samples")


def checkpoint(out):
    """The checkpoint an interrupted run left in `out`, or None."""
    try:
        with open(os.path.join(out, ".tarmac-partial", "checkpoint.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def assert_same_dataset(test, out, ref):
    names = outputs(out)
    test.assertEqual(names, outputs(ref))
    _, mismatch, errors = filecmp.cmpfiles(out, ref, names, shallow=False)
    test.assertEqual((mismatch, errors), ([], []), "differs from an uninterrupted run")
