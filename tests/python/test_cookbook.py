"""The mixing recipes of docs/cookbook.md run as a user copies them: the fenced blocks marked
"run by tests/python/test_cookbook.py (NAME)" are taken from the markdown, the shell block run
with `tarmac` on PATH and the Python block exec'd (given `epochs` and a `train_step` that keeps
the batches) in a folder holding small generated inputs of the names the recipe uses. What
the loop saw is then checked against what is computed here: OpenCV's decode and warp of the
stored bytes, numpy flips, the documented draws, and the per-set counts by largest remainder.
Needs TARMAC (the converter), TARMAC_LIB, PYTHONPATH=python/; skipped without torch."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fixtures as fx  # noqa: E402
from draw_oracle import dataset_seed, uniform  # noqa: E402

try:
    import torch  # noqa: F401
    import tarmac.torch  # noqa: F401
except ImportError:
    torch = None

COOKBOOK = os.path.join(HERE, "..", "..", "docs", "cookbook.md")
TARMAC = os.environ.get("TARMAC", "tarmac")
COCO_PAIRS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 16)]


def recipe(name):
    """[(language, text)] of the fenced blocks that follow a "run by tests/python/test_cookbook.py
    (name)" comment in the cookbook, in order."""
    with open(COOKBOOK) as f:
        lines = f.read().split("\n")
    blocks = []
    for n, line in enumerate(lines):
        if re.match(r"<!-- run by tests/python/test_cookbook\.py \(" + re.escape(name) + r"\)", line):
            fence = lines[n + 1]
            assert fence.startswith("```"), f"cookbook line {n + 2}: a fenced block must follow the marker"
            end = lines.index("```", n + 2)
            blocks.append((fence[3:].strip(), "\n".join(lines[n + 2:end]) + "\n"))
    return blocks


def check_stream(test, draws, n):
    """A dataset's samples in the order drawn, over the epochs: each run of n is all of them once
    (no repeat before the dataset is exhausted), and what follows has no repeat either."""
    for start in range(0, len(draws), n):
        window = draws[start:start + n]
        test.assertEqual(len(set(window)), len(window), (start, window))
        if len(window) == n:
            test.assertEqual(sorted(window), list(range(n)))


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def person(rng, w, h):
    """A person box (x, y, bw, bh) inside a w x h frame and 17 keypoints (x, y, v) in it."""
    bw, bh = rng.uniform(0.25, 0.45) * w, rng.uniform(0.4, 0.7) * h
    x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
    kp = np.zeros((17, 3))
    kp[:, 0] = rng.uniform(x, x + bw, 17).round(2)
    kp[:, 1] = rng.uniform(y, y + bh, 17).round(2)
    kp[:, 2] = rng.integers(0, 3, 17)
    return [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)], kp


@unittest.skipIf(torch is None, "torch is not installed")
class CookbookTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tarmac-cookbook-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        os.makedirs(os.path.join(self.tmp, "bin"))
        os.symlink(os.path.abspath(shutil.which(TARMAC) or TARMAC), os.path.join(self.tmp, "bin", "tarmac"))

    def run_recipe(self, name, epochs):
        """Runs the recipe's blocks in the temporary folder; returns the batches train_step got
        and the log lines of logger "tarmac"."""
        blocks = recipe(name)
        self.assertEqual([lang for lang, _ in blocks], ["sh", "python"], f"the blocks of recipe {name}")
        env = dict(os.environ, PATH=os.path.join(self.tmp, "bin") + os.pathsep + os.environ["PATH"])
        p = subprocess.run(["bash", "-e", "-c", blocks[0][1]], cwd=self.tmp, env=env, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        batches = []
        namespace = {"epochs": epochs, "train_step": batches.append, "__name__": "cookbook"}
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            with self.assertLogs("tarmac", "INFO") as logs:
                exec(compile(blocks[1][1], f"docs/cookbook.md ({name})", "exec"), namespace)
        finally:
            os.chdir(cwd)
        return batches, logs.output, namespace

    def test_hmr_agora_and_coco_mixed_with_flip_pairs_rotation_and_scale(self):
        rng = np.random.default_rng(26)
        # AGORA-like: 10 PNG frames, 4 persons each; one table row per person (mmhuman3d's layout).
        paths, boxes, kps = [], [], []
        for f in range(10):
            path = "images/train/ag_trainset_renderpeople_bfh_archviz_5_10_cam02_%05d_1280x720.png" % f
            os.makedirs(os.path.join(self.tmp, "AGORA", os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(self.tmp, "AGORA", path), "wb") as out:
                out.write(fx.png(fx.smooth_rgb(128, 96, seed=f)))
            for _ in range(4):
                box, kp = person(rng, 128, 96)
                paths.append(path)
                boxes.append(box + [1.0])
                kps.append(kp)
        np.savez_compressed(os.path.join(self.tmp, "agora_coco17.npz"), image_path=np.array(paths),
                            bbox_xywh=np.array(boxes), keypoints=np.array(kps))
        # COCO-like: 8 JPEG images of 3 persons in train2017.zip, person_keypoints_train2017.json.
        images, anns = [], []
        with zipfile.ZipFile(os.path.join(self.tmp, "train2017.zip"), "w") as z:
            for n in range(8):
                iid = 391895 + n
                z.writestr("train2017/%012d.jpg" % iid, fx.jpg(fx.smooth_rgb(112, 80, seed=100 + n), 95))
                images.append({"file_name": "%012d.jpg" % iid, "height": 80, "width": 112, "id": iid})
                for _ in range(3):
                    box, kp = person(rng, 112, 80)
                    kp[kp[:, 2] == 0, :2] = 0  # COCO writes an unlabelled joint as 0, 0, 0
                    anns.append({"keypoints": kp.ravel().tolist(), "num_keypoints": int((kp[:, 2] > 0).sum()),
                                 "bbox": box, "image_id": iid, "category_id": 1, "iscrowd": 0,
                                 "area": box[2] * box[3], "id": 900000 + len(anns), "segmentation": []})
        os.makedirs(os.path.join(self.tmp, "annotations"))
        with open(os.path.join(self.tmp, "annotations", "person_keypoints_train2017.json"), "w") as f:
            json.dump({"images": images, "annotations": anns,
                       "categories": [{"id": 1, "name": "person", "supercategory": "person"}]}, f)

        epochs = 2
        batches, logs, ns = self.run_recipe("hmr-mix", epochs)
        ref = [fx.Dataset(os.path.join(self.tmp, p)) for p in ("agora", "coco-pose")]
        sizes = [len(r.keys) for r in ref]
        self.assertEqual(sizes, [40, 24])
        # Weights 0.6, 0.4 of 64 samples: 38.4 and 25.6, by largest remainder 38 and 26.
        self.assertIn("38 of dataset 0", logs[0])
        self.assertIn("26 of dataset 1", logs[0])
        self.assertEqual(len(batches), epochs * 2)  # 64 an epoch, batches of 32
        seen = [[[], []] for _ in range(epochs)]
        for n, b in enumerate(batches):
            epoch = n // 2
            self.assertEqual(tuple(b["image"].shape), (32, 3, 224, 224))
            self.assertEqual(tuple(b["keypoints"].shape), (32, 17, 3))
            for j in range(32):
                k = int(b["__dataset__"][j])
                local = int(b["__index__"][j]) - (0, 40)[k]
                seen[epoch][k].append(local)
                m = b["__augment__"][j].numpy()
                flip = uniform(dataset_seed(0, k), epoch, local, 0) < 0.5
                self.assertEqual(bool(b["__flip__"][j]), flip)
                # M = A F C: C scales by 224 / the stored side, A rotates by the angle and zooms.
                side = (224, 256)[k]
                zoom = np.sqrt(abs(np.linalg.det(m[:, :2]))) * side / 224
                self.assertTrue(0.75 - 1e-9 <= zoom <= 1.25 + 1e-9, zoom)
                angle = np.degrees(np.arctan2(m[0, 1], -m[0, 0] if flip else m[0, 0]))
                self.assertAlmostEqual(angle, 30 * (2 * uniform(dataset_seed(0, k), epoch, local, 1) - 1), places=6)
                want = fx.apply_affine(m, ref[k].t["keypoints"][local])
                if flip:
                    for a, c in COCO_PAIRS:
                        want[[a, c]] = want[[c, a]]
                np.testing.assert_allclose(b["keypoints"][j].numpy(), want, rtol=0, atol=1e-6)
                stored = fx.decode_rgb(ref[k].blob(local))
                warped = cv2.warpAffine(stored, m, (224, 224), flags=cv2.INTER_LINEAR,
                                        borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                self.assertGreaterEqual(psnr(b["image"][j].permute(1, 2, 0).numpy(), warped), 40)
        for epoch in range(epochs):
            self.assertEqual([len(s) for s in seen[epoch]], [38, 26])
        for k, n in enumerate(sizes):  # the draws go on across epochs: AGORA's 40 in 38 + 2
            check_stream(self, sum((s[k] for s in seen), []), n)
        self.assertEqual(ns["mixed"].sizes, [40, 24])

    def test_marigold_hypersim_and_vkitti_mixed_with_rgb_and_depth_flipped_together(self):
        for name, n, (w, h) in (("hypersim", 18, (128, 96)), ("vkitti", 6, (200, 60))):
            members = []
            for k in range(n):
                members += [(f"{name}/{k:04d}.png", fx.png(fx.smooth_rgb(w, h, seed=10 * k + len(name)))),
                            (f"{name}/{k:04d}.depth.png", fx.png(fx.smooth_u16(w, h, seed=k) + 997 * k))]
            fx.write_tar(os.path.join(self.tmp, name + ".tar"), members)

        epochs = 3
        batches, logs, _ = self.run_recipe("marigold-mix", epochs)
        ref = [fx.Dataset(os.path.join(self.tmp, p)) for p in ("hypersim", "vkitti")]
        # Weights 0.9, 0.1 of 24 samples: 21.6 and 2.4, by largest remainder 22 and 2.
        self.assertIn("22 of dataset 0", logs[0])
        self.assertIn("2 of dataset 1", logs[0])
        self.assertEqual(len(batches), epochs * 3)
        seen = [[[], []] for _ in range(epochs)]
        flips = []
        for n, b in enumerate(batches):
            epoch = n // 3
            self.assertEqual(tuple(b["image"].shape), (8, 3, 360, 480))
            self.assertEqual(tuple(b["depth"].shape), (8, 360, 480))
            for j in range(8):
                k = int(b["__dataset__"][j])
                local = int(b["__index__"][j]) - (0, 18)[k]
                seen[epoch][k].append(local)
                flip = uniform(dataset_seed(0, k), epoch, local, 0) < 0.5
                self.assertEqual(bool(b["__flip__"][j]), flip)
                flips.append(flip)
                image = fx.decode_rgb(ref[k].blob(local))
                depth = fx.decode_unchanged(ref[k].blob(local, "__depth__"))
                self.assertEqual(depth.dtype, np.uint16)
                if flip:
                    image, depth = np.fliplr(image), np.fliplr(depth)
                np.testing.assert_array_equal(b["image"][j].permute(1, 2, 0).numpy(), image)
                np.testing.assert_array_equal(b["depth"][j].numpy(), depth)
                self.assertGreater(int(b["depth"][j].max()), 255)
        self.assertTrue(any(flips) and not all(flips))
        for epoch in range(epochs):
            self.assertEqual([len(s) for s in seen[epoch]], [22, 2])
        # Hypersim: 18 once each, then again; Virtual KITTI, 2 an epoch: its 6 once each in 3 epochs.
        for k, n in enumerate((18, 6)):
            check_stream(self, sum((s[k] for s in seen), []), n)


if __name__ == "__main__":
    unittest.main()
