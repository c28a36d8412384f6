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
from mmhuman3d_oracle import load_mmhuman3d  # noqa: E402

try:
    import torch  # noqa: F401
    import tarmac.torch  # noqa: F401
except ImportError:
    torch = None

COOKBOOK = os.path.join(HERE, "..", "..", "docs", "cookbook.md")
TARMAC = os.environ.get("TARMAC", "tarmac")
COCO_PAIRS = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 16)]
# SMPL's joint-level left/right pairs (root first, as mmhuman3d's _flip_smpl_pose permutes them),
# then those of SMPL's 23 body joints (smpl-body) and of SMPL-X's 21 (smplx-body).
SMPL_PAIRS = [(1, 2), (4, 5), (7, 8), (10, 11), (13, 14), (16, 17), (18, 19), (20, 21), (22, 23)]
SMPL_BODY_PAIRS = [(a - 1, b - 1) for a, b in SMPL_PAIRS]
SMPLX_BODY_PAIRS = [p for p in SMPL_BODY_PAIRS if max(p) < 21]


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


def rodrigues(w):
    return cv2.Rodrigues(np.asarray(w, np.float64).reshape(3, 1))[0]


def rz(angle):
    """The camera-frame rotation about z whose xy block is the image rotation's
    (cv2.getRotationMatrix2D(angle)'s [[c, s], [-s, c]])."""
    t = np.radians(angle)
    return np.array([[np.cos(t), np.sin(t), 0], [-np.sin(t), np.cos(t), 0], [0, 0, 1.0]])


def flip_perm(n, pairs):
    p = list(range(n))
    for a, b in pairs:
        p[a], p[b] = b, a
    return p


def ns_gender(tmp):
    """AGORA's meta.gender by table row, read back from the npz the test wrote."""
    with np.load(os.path.join(tmp, "agora_coco17.npz"), allow_pickle=True) as z:
        return z["meta"].item()["gender"]


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
        """Issue #38: the HMR recipe moves the 3D joints and the SMPL-X and SMPL poses as
        mmhuman3d's RandomHorizontalFlip + MeshAffine do: checked by numpy and cv2.Rodrigues
        re-derivations always, and by mmhuman3d's own functions when MMHUMAN3D_TRANSFORMS names its
        transforms.py (mmhuman3d_oracle.py)."""
        rng = np.random.default_rng(26)
        # AGORA-like: 10 PNG frames, 4 persons each; one HumanData row per person, with COCO's 17
        # joints in 2D and 3D and the pickled smplx and meta dicts.
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
        n = len(paths)
        kp3d = np.concatenate([rng.uniform(-0.8, 0.8, (n, 17, 2)), rng.uniform(3, 8, (n, 17, 1)),
                               rng.integers(0, 2, (n, 17, 1))], axis=2)
        smplx = {"global_orient": rng.uniform(-2, 2, (n, 3)).astype(np.float32),
                 "body_pose": rng.uniform(-1, 1, (n, 21, 3)).astype(np.float32),
                 "left_hand_pose": rng.uniform(-1, 1, (n, 15, 3)).astype(np.float32),
                 "right_hand_pose": rng.uniform(-1, 1, (n, 15, 3)).astype(np.float32),
                 "betas": rng.standard_normal((n, 10)).astype(np.float32)}
        meta = {"gender": np.array(rng.choice(["male", "female"], n))}
        np.savez_compressed(os.path.join(self.tmp, "agora_coco17.npz"), image_path=np.array(paths),
                            bbox_xywh=np.array(boxes), keypoints=np.array(kps), keypoints3d=kp3d,
                            smplx=np.array(smplx, dtype=object), meta=np.array(meta, dtype=object))
        # COCO-EFT-like: 8 JPEG images of 3 persons under coco/train2014/, EFT's SMPL fits.
        paths, boxes, kps = [], [], []
        for i in range(8):
            path = "train2014/COCO_train2014_%012d.jpg" % (44474 + i)
            os.makedirs(os.path.join(self.tmp, "coco", "train2014"), exist_ok=True)
            with open(os.path.join(self.tmp, "coco", path), "wb") as out:
                out.write(fx.jpg(fx.smooth_rgb(112, 80, seed=100 + i), 95))
            for _ in range(3):
                box, kp = person(rng, 112, 80)
                paths.append(path)
                boxes.append(box + [1.0])
                kps.append(kp)
        m = len(paths)
        smpl = {"global_orient": rng.uniform(-2, 2, (m, 3)).astype(np.float32),
                "body_pose": rng.uniform(-1, 1, (m, 23, 3)).astype(np.float32),
                "betas": rng.standard_normal((m, 10)).astype(np.float32)}
        np.savez_compressed(os.path.join(self.tmp, "eft_coco17.npz"), image_path=np.array(paths),
                            bbox_xywh=np.array(boxes), keypoints=np.array(kps),
                            smpl=np.array(smpl, dtype=object))
        source = [{"keypoints3d": kp3d, **{"smplx." + k: v for k, v in smplx.items()}},
                  {"smpl." + k: v for k, v in smpl.items()}]

        epochs = 2
        batches, logs, ns = self.run_recipe("hmr-mix", epochs)
        ref = [fx.Dataset(os.path.join(self.tmp, p)) for p in ("agora", "coco-eft")]
        sizes = [len(r.keys) for r in ref]
        self.assertEqual(sizes, [40, 24])
        # The stored rows are the table's, in order (__row__): the source arrays index them.
        rows = [ref[k].t["__row__"].astype(int) for k in range(2)]
        # Weights 0.6, 0.4 of 64 samples: 38.4 and 25.6, by largest remainder 38 and 26.
        self.assertIn("38 of dataset 0", logs[0])
        self.assertIn("26 of dataset 1", logs[0])
        self.assertEqual(len(batches), epochs * 2)  # 64 an epoch, batches of 32
        mm = load_mmhuman3d()
        gender = ns_gender(self.tmp)
        seen = [[[], []] for _ in range(epochs)]
        checked = {"flipped": 0, "mmhuman3d": 0}
        for n, b in enumerate(batches):
            epoch = n // 2
            self.assertEqual(tuple(b["image"].shape), (32, 3, 224, 224))
            self.assertEqual(tuple(b["keypoints"].shape), (32, 17, 3))
            self.assertEqual(len(b["meta.gender"]), 32)
            for j in range(32):
                k = int(b["__dataset__"][j])
                local = int(b["__index__"][j]) - (0, 40)[k]
                row = rows[k][local]
                seen[epoch][k].append(local)
                m = b["__augment__"][j].numpy()
                flip = uniform(dataset_seed(0, k), epoch, local, 0) < 0.5
                self.assertEqual(bool(b["__flip__"][j]), flip)
                checked["flipped"] += flip
                # M = A F C: C scales by 224 / the stored side, A rotates by the angle and zooms.
                side = (224, 256)[k]
                zoom = np.sqrt(abs(np.linalg.det(m[:, :2]))) * side / 224
                self.assertTrue(0.75 - 1e-9 <= zoom <= 1.25 + 1e-9, zoom)
                angle = 30 * (2 * uniform(dataset_seed(0, k), epoch, local, 1) - 1)
                got_angle = np.degrees(np.arctan2(m[0, 1], -m[0, 0] if flip else m[0, 0]))
                self.assertAlmostEqual(got_angle, angle, places=6)
                want = fx.apply_affine(m, ref[k].t["keypoints"][local])
                if flip:
                    for a, c in COCO_PAIRS:
                        want[[a, c]] = want[[c, a]]
                np.testing.assert_allclose(b["keypoints"][j].numpy(), want, rtol=0, atol=1e-6)
                stored = fx.decode_rgb(ref[k].blob(local))
                warped = cv2.warpAffine(stored, m, (224, 224), flags=cv2.INTER_LINEAR,
                                        borderMode=cv2.BORDER_CONSTANT, borderValue=0)
                self.assertGreaterEqual(psnr(b["image"][j].permute(1, 2, 0).numpy(), warped), 40)
                # The other set's fields: zeros, NAME.valid False; the string a None.
                theirs = source[k]
                for name in source[1 - k]:
                    if name in b:
                        self.assertFalse(bool(b[name + ".valid"][j]), name)
                        self.assertFalse(b[name][j].any(), name)
                    else:
                        self.assertNotIn(name, ns["fields"], name)
                for name in theirs:
                    if name + ".valid" in b:
                        self.assertTrue(bool(b[name + ".valid"][j]), name)
                self.assertEqual(b["meta.gender"][j], str(gender[row]) if k == 0 else None)
                got = {name: b[name][j].numpy().astype(np.float64) for name in theirs if name in b}
                src = {name: np.asarray(v[row], np.float64) for name, v in theirs.items()}
                self.check_geometry(k, flip, angle, src, got)
                if mm is not None:
                    self.check_mmhuman3d(mm, k, flip, angle, src, got)
                    checked["mmhuman3d"] += 1
        self.assertGreater(checked["flipped"], 10)
        self.assertLess(checked["flipped"], 4 * 32 - 10)
        if mm is not None:
            self.assertEqual(checked["mmhuman3d"], 4 * 32)
        for epoch in range(epochs):
            self.assertEqual([len(s) for s in seen[epoch]], [38, 26])
        for k, n in enumerate(sizes):  # the draws go on across epochs: AGORA's 40 in 38 + 2
            check_stream(self, sum((s[k] for s in seen), []), n)
        self.assertEqual(ns["mixed"].sizes, [40, 24])

    def check_geometry(self, k, flip, angle, src, got):
        """The labels re-derived with numpy and cv2.Rodrigues: a flip mirrors each rotation matrix
        (S R S) after permuting the joints by the layout's pairs, exchanges the hands and negates
        the 3D joints' x after swapping them by the flip pairs; a rotation by θ is Rz(θ) on the 3D
        joints and the root orientation (Rz R). Betas are as stored."""
        mirror = np.diag([-1.0, 1.0, 1.0])
        r = rz(angle)
        if k == 0:
            xyz = src["keypoints3d"].copy()
            if flip:
                xyz = xyz[flip_perm(17, COCO_PAIRS)]
                xyz[:, 0] *= -1
            xyz[:, :3] = xyz[:, :3] @ r.T
            np.testing.assert_allclose(got["keypoints3d"], xyz, atol=1e-9)
        prefix = ("smplx.", "smpl.")[k]
        body_pairs = (SMPLX_BODY_PAIRS, SMPL_BODY_PAIRS)[k]
        orient = rodrigues(src[prefix + "global_orient"])
        if flip:
            orient = mirror @ orient @ mirror
        np.testing.assert_allclose(rodrigues(got[prefix + "global_orient"]), r @ orient, atol=1e-5)
        body, gbody = src[prefix + "body_pose"], got[prefix + "body_pose"]
        perm = flip_perm(len(body), body_pairs) if flip else list(range(len(body)))
        for joint in range(len(body)):
            want = rodrigues(body[perm[joint]])
            if flip:
                want = mirror @ want @ mirror
            np.testing.assert_allclose(rodrigues(gbody[joint]), want, atol=1e-5, err_msg=f"body joint {joint}")
        if k == 0:
            for hand, other in (("left", "right"), ("right", "left")):
                want = src["smplx.%s_hand_pose" % (other if flip else hand)] * ([1, -1, -1] if flip else 1)
                np.testing.assert_allclose(got["smplx.%s_hand_pose" % hand], want, atol=1e-6)
        np.testing.assert_array_equal(got[prefix + "betas"], src[prefix + "betas"])

    def check_mmhuman3d(self, mm, k, flip, angle, src, got):
        """What mmhuman3d's RandomHorizontalFlip then MeshAffine's rotation give (their code, run
        here): <= 1e-5 rad, 1e-4 m."""
        s = {name: v.copy() for name, v in src.items()}
        pairs = [list(p) for p in COCO_PAIRS]
        if k == 0:
            kp3d, orient = s["keypoints3d"], s["smplx.global_orient"]
            body, lh, rh = s["smplx.body_pose"].reshape(-1), s["smplx.left_hand_pose"], s["smplx.right_hand_pose"]
            if flip:
                kp3d = mm["_flip_keypoints"](kp3d, pairs)
                orient = mm["_flip_axis_angle"](orient)
                body = mm["_flip_smplx_pose"](body)
                rh, lh = mm["_flip_hand_pose"](rh, lh)
            kp3d = kp3d.copy()
            kp3d[:, :3] = mm["_rotate_joints_3d"](kp3d[:, :3], angle)
            orient = mm["_rotate_smpl_pose"](orient, angle)
            np.testing.assert_allclose(got["keypoints3d"], kp3d, atol=1e-4)
            want = {"smplx.global_orient": orient, "smplx.body_pose": body, "smplx.left_hand_pose": lh,
                    "smplx.right_hand_pose": rh}
        else:
            pose = np.concatenate([s["smpl.global_orient"], s["smpl.body_pose"].reshape(-1)])
            if flip:
                pose = mm["_flip_smpl_pose"](pose)
            pose = mm["_rotate_smpl_pose"](pose, angle)
            want = {"smpl.global_orient": pose[:3], "smpl.body_pose": pose[3:]}
        for name, w in want.items():
            np.testing.assert_allclose(got[name].reshape(-1), np.asarray(w).reshape(-1), atol=1e-5, err_msg=name)

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
