"""Every declared geometric kind follows the augmentation (issue #38, the reader's side): 3D points,
axis-angle poses (SMPL, SMPL-X, MANO hands, a root), cameras, ragged boxes clipped with NAME.valid;
strings in batches; flip_pairs checked; undeclared geometric fields refused; uint64 fields through
tarmac.torch (#35 item 10).

The datasets are written by tests/data/datasets/make_datasets.py's independent writer, never by
tarmac. Oracles: numpy and OpenCV re-derivations that always run (cv2.Rodrigues: a flipped pose's
matrices are S R S, a rotated root Rz R; projecting the augmented 3D points with the augmented K
gives the augmented 2D points within 1e-3 px; K' = A K G^T by numpy), and mmhuman3d's own
transforms.py functions run beside ours when the file is given (never committed):

    git --git-dir=$(fetch github:open-mmlab/mmhuman3d) show \\
        HEAD:mmhuman3d/data/datasets/pipelines/transforms.py > /tmp/mmh_transforms.py
    MMHUMAN3D_TRANSFORMS=/tmp/mmh_transforms.py TARMAC_LIB=build/lib/read/libtarmac_c.so \\
        PYTHONPATH=python python3 tests/python/test_geometry.py

Without MMHUMAN3D_TRANSFORMS (CI has no network) those cases skip. Run with /usr/bin/python3;
needs TARMAC_LIB and PYTHONPATH=python/."""
import json
import math
import os
import sys
import tempfile
import unittest

import cv2
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "datasets"))
import make_datasets as mk  # noqa: E402  (the independent writer)

import tarmac  # noqa: E402
from draw_oracle import uniform  # noqa: E402
from mmhuman3d_oracle import load_mmhuman3d  # noqa: E402

try:
    import torch
    import tarmac.torch as tt
except ImportError:  # the torch cases skip
    torch = None

N, W, H = 12, 64, 48
J = 24
# SMPL's joint-level left/right pairs (root first), as mmhuman3d's _flip_smpl_pose permutes them.
SMPL_PAIRS = [(1, 2), (4, 5), (7, 8), (10, 11), (13, 14), (16, 17), (18, 19), (20, 21), (22, 23)]
BODY_PAIRS = [(a - 1, b - 1) for a, b in SMPL_PAIRS]  # smpl-body: SMPL's 23 joints after the root
SMPLX_BODY_PAIRS = [p for p in BODY_PAIRS if max(p) < 21]  # SMPL-X's 21 body joints
S = np.diag([-1.0, 1.0, 1.0])
FX, FY = 52.0, 47.0  # K: fx != fy; the [4] camera has square pixels
F4 = 50.0

GEOMETRY = {
    "kp2d": {"kind": "points"},
    "kp3d": {"kind": "points3d"},
    "K": {"kind": "camera", "convention": "centers", "layout": "K"},
    "K_edges": {"kind": "camera", "convention": "edges", "layout": "K"},
    "cam4": {"kind": "camera", "convention": "centers", "layout": "fxfycxcy"},
    "smpl.global_orient": {"kind": "axis_angle", "layout": "root", "joints": 1, "pairs": []},
    "smpl.body_pose": {"kind": "axis_angle", "layout": "smpl-body", "joints": 23,
                       "pairs": [list(p) for p in BODY_PAIRS]},
    "pose": {"kind": "axis_angle", "layout": "smpl", "joints": 24, "pairs": [list(p) for p in SMPL_PAIRS]},
    "smplx.body_pose": {"kind": "axis_angle", "layout": "smplx-body", "joints": 21,
                        "pairs": [list(p) for p in SMPLX_BODY_PAIRS]},
    "smplx.left_hand_pose": {"kind": "axis_angle", "layout": "mano-left", "joints": 15, "pairs": [],
                             "partner": "smplx.right_hand_pose"},
    "smplx.right_hand_pose": {"kind": "axis_angle", "layout": "mano-right", "joints": 15, "pairs": [],
                              "partner": "smplx.left_hand_pose"},
    "boxes": {"kind": "boxes", "box_format": "xywh", "convention": "centers"},
    "segmentation": {"kind": "polygons"},
    "poly": {"kind": "polygons"},  # a fixed-shape one: 4 vertices a sample
}


def rodrigues(w):
    return cv2.Rodrigues(np.asarray(w, np.float64).reshape(3, 1))[0]


def rz(angle):
    """The in-plane rotation of the camera frame whose xy block is the image rotation's
    (cv2.getRotationMatrix2D(angle)'s [[c, s], [-s, c]])."""
    t = math.radians(angle)
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, s, 0], [-s, c, 0], [0, 0, 1.0]])


def sample(k):
    """Sample k's labels, from a generator seeded by k."""
    rng = np.random.default_rng(100 + k)
    cx, cy = 30.0 + k % 5, 22.0 - k % 3
    K = np.array([[FX, 0, cx], [0, FY, cy], [0, 0, 1]])
    xyz = np.stack([rng.uniform(-1, 1, J), rng.uniform(-0.8, 0.8, J), rng.uniform(3, 6, J)], 1)
    uv = (xyz @ K.T)[:, :2] / xyz[:, 2:3]
    conf = (np.arange(J) % 4 != 0).astype(np.float64)
    K_edges = K.copy()
    K_edges[:2, 2] += 0.5  # the same camera, its principal point in pixel-edge coordinates
    boxes = np.array([[5.0, 6.0, 20.0, 10.0], [-30.0 - k, 10.0, 8.0, 8.0], [50.0, 40.0, 30.0, 20.0]])
    return {
        "kp2d": np.concatenate([uv, conf[:, None]], 1),
        "kp3d": np.concatenate([xyz, conf[:, None]], 1),
        "K": K, "K_edges": K_edges, "cam4": np.array([F4, F4, cx, cy]),
        "smpl.global_orient": rng.uniform(-2, 2, 3),
        "smpl.body_pose": rng.uniform(-1, 1, (23, 3)),
        "pose": rng.uniform(-1.5, 1.5, 72),
        "smplx.body_pose": rng.uniform(-1, 1, 63),
        "smplx.left_hand_pose": rng.uniform(-1, 1, (15, 3)),
        "smplx.right_hand_pose": rng.uniform(-1, 1, (15, 3)),
        "boxes": boxes[: 1 + k % 3],
        "poly": np.array([3.0 + k, 4.0, 40.0, 4.5, 41.0, 30.0, 2.0, 29.0]),
        "txt": f"a caption of sample {k}",
        "meta": {"gender": ["female", "male", "neutral"][k % 3], "k": k},
        "segmentation": ("json", [[1.0 + k, 2.0, 30.5, 4.0, 20.0, 40.0], [50.0, 5.0, 60.0, 5.0, 60.0, 15.0, 50.0, 15.0]]
                         [: 1 + k % 2]),
        "__phash__": np.uint64((0xF0E1D2C3B4A59687 + k * 0x1000000000000001) % 2**64),
    }


def pixels(k):
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([(x * 3 + k) % 256, (y * 5) % 256, (x + y) % 256], -1).astype(np.uint8)


def write(out, n=N, geometry=None, extra=None, drop=()):
    """A dataset of samples 0..n-1 written by the independent writer, with `geometry` declared
    (default: GEOMETRY) and `extra(k)` more labels; `drop`: fields left out."""
    samples = []
    for k in range(n):
        lab = {f: v for f, v in sample(k).items() if f not in drop}
        lab.update(extra(k) if extra else {})
        labels = []
        for name, v in lab.items():
            if isinstance(v, str):
                labels.append((name, "json", "string", "U8", np.frombuffer(v.encode(), np.uint8)))
            elif isinstance(v, (dict, tuple)):
                text = json.dumps(v[1] if isinstance(v, tuple) else v).encode()
                labels.append((name, "json", "json", "U8", np.frombuffer(text, np.uint8)))
            elif isinstance(v, np.uint64):
                labels.append((name, "dedup", "numeric", "U64", v))
            else:
                labels.append((name, "json", "numeric", "F64", np.asarray(v, np.float64)))
        img = mk.png(pixels(k))
        samples.append({"key": f"s/{k:04d}", "blobs": [("png", img, W, H)], "labels": labels,
                        "inputs": [("png", img)]})
    geometry = GEOMETRY if geometry is None else geometry
    mk.write_dataset(out, samples, shard_size=1 << 20, blob_kinds=["__image__"], options={},
                     command_line=["tarmac", "convert"], input_name="in.tar",
                     geometry={f: g for f, g in geometry.items() if f not in drop})
    return out


def draw(aug, i, seed=0, epoch=0):
    """(flip, angle) of sample i's draw (docs/reader.md, Determinism)."""
    u = lambda k: uniform(seed, epoch, i, k)  # noqa: E731
    return u(0) < aug.flip, aug.rotate * (2 * u(1) - 1)


def a3(m):
    return np.vstack([m, [0, 0, 1.0]])


ALL = list(GEOMETRY) + ["txt", "meta"]
FIXED = [f for f in GEOMETRY if f not in ("boxes", "segmentation")]


class Geometry(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = write(os.path.join(cls.tmp.name, "geo"))
        cls.ds = tarmac.Dataset(cls.path)
        cls.aug = tarmac.Augment((H, W), flip=0.5, flip_pairs=SMPL_PAIRS, rotate=40)
        _, cls.out = cls.ds.batch(range(N), fields=ALL, augment=cls.aug, seed=3)
        cls.draws = [draw(cls.aug, i, seed=3) for i in range(N)]
        flips = [f for f, _ in cls.draws]
        assert any(flips) and not all(flips), "the seed must draw both flipped and unflipped samples"

    @classmethod
    def tearDownClass(cls):
        cls.ds.close()
        cls.tmp.cleanup()

    def src(self, name, i):
        return np.asarray(sample(i)[name], np.float64)

    # ------------------------------------------------------------------ always-run re-derivations

    def test_draws_match_the_documented_stream(self):
        for i, (flip, _) in enumerate(self.draws):
            self.assertEqual(bool(self.out["__flip__"][i]), flip)

    def test_flipped_pose_matrices_are_mirrored(self):
        """Joint j of a flipped pose is S R S of its partner's stored rotation (root rotated after)."""
        for i, (flip, angle) in enumerate(self.draws):
            for name, pairs, joints in (("smpl.body_pose", BODY_PAIRS, 23), ("smplx.body_pose", SMPLX_BODY_PAIRS, 21),
                                        ("pose", SMPL_PAIRS, 24)):
                src = self.src(name, i).reshape(joints, 3)
                got = np.asarray(self.out[name][i], np.float64).reshape(joints, 3)
                perm = list(range(joints))
                if flip:
                    for a, b in pairs:
                        perm[a], perm[b] = b, a
                for j in range(joints):
                    want = rodrigues(src[perm[j]])
                    if flip:
                        want = S @ want @ S
                    if name == "pose" and j == 0:
                        want = rz(angle) @ want
                    np.testing.assert_allclose(rodrigues(got[j]), want, atol=1e-9, err_msg=f"{name} {i} {j}")

    def test_rotated_root_is_rz_times_r(self):
        for i, (flip, angle) in enumerate(self.draws):
            r = rodrigues(self.src("smpl.global_orient", i))
            want = rz(angle) @ (S @ r @ S if flip else r)
            np.testing.assert_allclose(rodrigues(self.out["smpl.global_orient"][i]), want, atol=1e-9)

    def test_hands_exchange_on_flip(self):
        for i, (flip, _) in enumerate(self.draws):
            for name, other in (("smplx.left_hand_pose", "smplx.right_hand_pose"),
                                ("smplx.right_hand_pose", "smplx.left_hand_pose")):
                src = self.src(other if flip else name, i)
                want = src * ([1, -1, -1] if flip else 1)
                np.testing.assert_allclose(self.out[name][i], want, atol=1e-12)

    def test_projection_of_3d_points_with_augmented_camera_is_augmented_2d(self):
        """Project the augmented 3D points with the augmented K: the augmented 2D points, <= 1e-3 px;
        in pixel-edge coordinates with the edges camera; and with the [4] camera (square pixels)."""
        for i in range(N):
            xyz = np.asarray(self.out["kp3d"][i][:, :3], np.float64)
            uv = np.asarray(self.out["kp2d"][i][:, :2], np.float64)
            for name, shift in (("K", 0.0), ("K_edges", 0.5)):
                p = xyz @ np.asarray(self.out[name][i]).T
                np.testing.assert_allclose(p[:, :2] / p[:, 2:3], uv + shift, atol=1e-3, err_msg=f"{name} {i}")
            fx, fy, cx, cy = self.out["cam4"][i]
            src = np.asarray(sample(i)["kp3d"])[:, :3]
            flip, angle = self.draws[i]
            g = rz(angle) @ (S if flip else np.eye(3))
            np.testing.assert_allclose(xyz, src[self.perm(flip)] @ g.T, atol=1e-9)
            uv4 = np.stack([fx * xyz[:, 0] / xyz[:, 2] + cx, fy * xyz[:, 1] / xyz[:, 2] + cy], 1)
            src_uv4 = F4 * src[:, :2] / src[:, 2:3] + self.src("cam4", i)[2:]
            m = self.out["__augment__"][i]
            np.testing.assert_allclose(uv4, (src_uv4 @ m[:, :2].T + m[:, 2])[self.perm(flip)], atol=1e-3)

    def perm(self, flip):
        p = list(range(J))
        if flip:
            for a, b in SMPL_PAIRS:
                p[a], p[b] = b, a
        return p

    def test_camera_is_a_k_gt_by_numpy(self):
        for i, (flip, angle) in enumerate(self.draws):
            g = rz(angle) @ (S if flip else np.eye(3))
            a = a3(self.out["__augment__"][i])
            np.testing.assert_allclose(self.out["K"][i], a @ self.src("K", i) @ g.T, atol=1e-9)

    def test_scale_translate_crop_move_only_the_camera(self):
        """No flip, no rotation: K' = A K exactly; 3D points and poses as stored."""
        aug = tarmac.Augment((40, 50), scale=(0.6, 1.4), translate=0.2, crop=(0.3, 1.0))
        _, out = self.ds.batch(range(N), fields=FIXED, augment=aug, seed=1)
        for i in range(N):
            a = a3(out["__augment__"][i])
            np.testing.assert_allclose(out["K"][i], a @ self.src("K", i), atol=1e-9)
            t = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1.0]])
            np.testing.assert_allclose(out["K_edges"][i], t @ a @ np.linalg.inv(t) @ self.src("K_edges", i),
                                       atol=1e-9)
            for name in ("kp3d", "pose", "smpl.global_orient", "smpl.body_pose", "smplx.left_hand_pose"):
                np.testing.assert_array_equal(out[name][i], self.src(name, i))

    def test_flip_alone_mirrors_the_principal_point(self):
        aug = tarmac.Augment((H, W), flip=1.0)
        _, out = self.ds.batch(range(N), fields=["K", "cam4"], augment=aug)
        for i in range(N):
            k = self.src("K", i)
            want = k.copy()
            want[0, 2] = W - 1 - k[0, 2]  # pixel centres: x' = W - 1 - x
            np.testing.assert_allclose(out["K"][i], want, atol=1e-12)
            np.testing.assert_allclose(out["cam4"][i][2], W - 1 - self.src("cam4", i)[2], atol=1e-12)

    # ------------------------------------------------------------------ mmhuman3d's own code

    def test_matches_mmhuman3d(self):
        mm = load_mmhuman3d()
        if mm is None:
            self.skipTest("MMHUMAN3D_TRANSFORMS does not name mmhuman3d's transforms.py (see the docstring)")
        for i, (flip, angle) in enumerate(self.draws):
            s = {k: np.asarray(v, np.float64).copy() for k, v in sample(i).items()
                 if isinstance(v, np.ndarray)}
            orient, body = s["smpl.global_orient"], s["smpl.body_pose"].reshape(-1)
            pose, kp3d = s["pose"], s["kp3d"]
            xbody, lh, rh = s["smplx.body_pose"], s["smplx.left_hand_pose"], s["smplx.right_hand_pose"]
            if flip:  # RandomHorizontalFlip
                kp3d = mm["_flip_keypoints"](kp3d, SMPL_PAIRS)
                both = mm["_flip_smpl_pose"](np.concatenate([orient, body]))
                orient, body = both[:3], both[3:]
                pose = mm["_flip_smpl_pose"](pose)
                xbody = mm["_flip_smplx_pose"](xbody)
                rh, lh = mm["_flip_hand_pose"](rh, lh)
            # MeshAffine's rotation (its image rotation has the sign of ours: counter-clockwise)
            kp3d = kp3d.copy()
            kp3d[:, :3] = mm["_rotate_joints_3d"](kp3d[:, :3], angle)
            pose = mm["_rotate_smpl_pose"](pose, angle)
            orient = mm["_rotate_smpl_pose"](orient, angle)
            got = self.out
            np.testing.assert_allclose(got["kp3d"][i], kp3d, atol=1e-4, err_msg=f"kp3d {i}")
            for name, want in (("pose", pose), ("smpl.global_orient", orient), ("smpl.body_pose", body),
                               ("smplx.body_pose", xbody), ("smplx.left_hand_pose", lh),
                               ("smplx.right_hand_pose", rh)):
                np.testing.assert_allclose(np.asarray(got[name][i]).reshape(-1), np.asarray(want).reshape(-1),
                                           atol=1e-5, err_msg=f"{name} {i}")

    # ------------------------------------------------------------------ ragged boxes, strings

    def test_ragged_boxes_clipped_with_valid(self):
        aug = tarmac.Augment((H, W), translate=0.3, rotate=10, flip=0.5)
        _, out = self.ds.batch(range(N), fields=["boxes"], augment=aug, seed=5)
        self.assertIsInstance(out["boxes"], list)
        saw_invalid = False
        for i in range(N):
            src = self.src("boxes", i)
            m = out["__augment__"][i]
            got, valid = out["boxes"][i], out["boxes.valid"][i]
            self.assertEqual(got.shape, src.shape)  # every row kept
            for r, (x, y, w, h) in enumerate(src):
                corners = np.array([[x, y], [x + w, y], [x, y + h], [x + w, y + h]]) @ m[:, :2].T + m[:, 2]
                lo = np.clip(corners.min(0), -0.5, [W - 0.5, H - 0.5])
                hi = np.clip(corners.max(0), -0.5, [W - 0.5, H - 0.5])
                ok = bool((hi > lo).all())
                self.assertEqual(bool(valid[r]), ok, f"sample {i} box {r}")
                saw_invalid |= not ok
                np.testing.assert_allclose(got[r], [lo[0], lo[1], hi[0] - lo[0], hi[1] - lo[1]], atol=1e-9)
        self.assertTrue(saw_invalid, "a box pushed off the canvas was expected")

    def test_polygons_follow_the_map(self):
        for i in range(N):
            m = self.out["__augment__"][i]
            want = [(np.asarray(p).reshape(-1, 2) @ m[:, :2].T + m[:, 2]).reshape(-1)
                    for p in sample(i)["segmentation"][1]]
            got = self.out["segmentation"][i]
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, atol=1e-9)
            poly = self.src("poly", i).reshape(-1, 2) @ m[:, :2].T + m[:, 2]
            np.testing.assert_allclose(self.out["poly"][i], poly.reshape(-1), atol=1e-9)

    def test_polygon_of_odd_length_is_a_bad_sample(self):
        with tempfile.TemporaryDirectory() as tmp:
            extra = lambda k: {"segmentation": ("json", [[1.0, 2.0, 3.0]] if k == 1 else [[1.0, 2.0]])}  # noqa
            path = write(os.path.join(tmp, "odd"), n=2, extra=extra)
            with tarmac.Dataset(path) as ds:
                with self.assertRaisesRegex(tarmac.DataError, r"sample 1 field 'segmentation'.*3 coordinates"):
                    ds.batch([0, 1], fields=["segmentation"], augment=tarmac.Augment((H, W), flip=1.0))

    def test_strings_in_batches(self):
        _, out = self.ds.batch(range(4), fields=["txt", "meta", "kp2d"])
        self.assertEqual(out["txt"], [f"a caption of sample {k}" for k in range(4)])
        self.assertEqual([m["gender"] for m in out["meta"]], ["female", "male", "neutral", "female"])

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_strings_through_torch_collate(self):
        """TarmacDataset(fields=["txt"]) raised torch's TypeError (numpy.str_) on the first sample."""
        ds = tt.TarmacDataset(self.path, fields=["txt", "meta", "kp2d"])
        batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=3)))
        self.assertEqual(batch["txt"], [f"a caption of sample {k}" for k in range(3)])
        self.assertEqual(batch["meta"]["gender"], ["female", "male", "neutral"])  # collate's dict of lists
        sampler = torch.utils.data.BatchSampler(range(N), batch_size=5, drop_last=False)
        aug = tarmac.Augment((H, W), flip=0.5, flip_pairs=SMPL_PAIRS)
        ds = tt.TarmacDataset(self.path, fields=["txt", "kp3d", "boxes"], augment=aug)
        batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler)))
        self.assertEqual(batch["txt"], [f"a caption of sample {k}" for k in range(5)])
        self.assertEqual(len(batch["boxes"]), 5)
        self.assertTrue(torch.is_tensor(batch["boxes"][0]))
        one = ds[2]
        self.assertEqual(one["txt"], "a caption of sample 2")

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_strings_through_mixed_dataset(self):
        with tempfile.TemporaryDirectory() as tmp:
            other = write(os.path.join(tmp, "other"), n=3, drop=("meta",))
            mixed = tt.MixedDataset([self.path, other], fields=["txt", "meta", "kp2d"])
            batch = mixed[[0, N, N + 2, 1]]
            self.assertEqual(batch["txt"], ["a caption of sample 0", "a caption of sample 0",
                                            "a caption of sample 2", "a caption of sample 1"])
            self.assertEqual([m and m["k"] for m in batch["meta"]], [0, None, None, 1])
            self.assertEqual(mixed[N + 1]["txt"], "a caption of sample 1")
            aug = tarmac.Augment((H, W), translate=0.3)
            mixed = tt.MixedDataset([self.path, other], fields=["txt", "boxes", "kp2d"], augment=aug, seed=4)
            batch = mixed[[N, 1]]
            self.assertEqual(batch["txt"], ["a caption of sample 0", "a caption of sample 1"])
            self.assertEqual([len(b) for b in batch["boxes"]], [1, 2])
            self.assertEqual([len(v) for v in batch["boxes.valid"]], [1, 2])
            self.assertFalse(bool(batch["boxes.valid"][1][1]))  # sample 1's second box lies off the canvas
            one = mixed[1]
            self.assertEqual(one["boxes"].shape, (2, 4))
            torch.testing.assert_close(one["boxes"], batch["boxes"][1])

    # ------------------------------------------------------------------ refused input

    def test_flip_pairs_naming_an_index_twice(self):
        with self.assertRaisesRegex(ValueError, r"\(2, 3\).*index 2"):
            tarmac.Augment((H, W), flip=0.5, flip_pairs=[(1, 2), (2, 3)])
        with self.assertRaisesRegex(ValueError, r"\(4, 4\)"):
            tarmac.Augment((H, W), flip=0.5, flip_pairs=[(4, 4)])

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_flip_pairs_out_of_range_before_any_batch(self):
        aug = tarmac.Augment((H, W), flip=0.5, flip_pairs=[(1, 2), (3, 30)])
        with self.assertRaisesRegex(ValueError, r"\(3, 30\).*'kp2d' of 24"):
            tt.TarmacDataset(self.path, fields=["kp2d"], augment=aug)
        with self.assertRaisesRegex(ValueError, r"\(3, 30\).*points3d field 'kp3d'"):
            self.ds.batch([], fields=["kp3d"], augment=aug)

    def test_layout_pairs_naming_a_joint_twice(self):
        with tempfile.TemporaryDirectory() as tmp:
            geo = dict(GEOMETRY)
            geo["pose"] = {"kind": "axis_angle", "layout": "pairs", "joints": 24, "pairs": [[1, 2], [2, 3]]}
            path = write(os.path.join(tmp, "bad"), n=2, geometry=geo)
            # refused when the dataset opens (the format's parse of the schema) or at the first
            # augmented batch (the reader's): never a batch with the joints cycled
            with self.assertRaisesRegex(tarmac.TarmacError, r"'pose'.*(\[2,3\].*twice|two pairs: \[2,3\])"):
                with tarmac.Dataset(path) as ds:
                    ds.batch([0], fields=["pose"], augment=tarmac.Augment((H, W), flip=1.0))
            geo["pose"] = {"kind": "axis_angle", "layout": "smpl", "joints": 24}  # no pairs: unpermuted
            path = write(os.path.join(tmp, "nopairs"), n=2, geometry=geo)
            with self.assertRaisesRegex(tarmac.TarmacError, r"'pose'.*(without its 'pairs'|no 'pairs' array)"):
                with tarmac.Dataset(path) as ds:
                    ds.batch([0], fields=["pose"], augment=tarmac.Augment((H, W), flip=1.0))

    def test_undeclared_geometric_field_refused_unless_passthrough(self):
        with tempfile.TemporaryDirectory() as tmp:
            extra = lambda k: {"bbox_raw": [1.0 + k, 2.0, 3.0, 4.0], "smpl.Global_Orient2": [0.1, 0.2, 0.3]}  # noqa
            path = write(os.path.join(tmp, "undeclared"), n=3, extra=extra)
            aug = tarmac.Augment((H, W), flip=1.0)
            with tarmac.Dataset(path) as ds:
                with self.assertRaisesRegex(ValueError, r"'bbox_raw'.*passthrough=\['bbox_raw'\]"):
                    ds.batch([0], fields=["kp2d", "bbox_raw"], augment=aug)
                with self.assertRaisesRegex(ValueError, r"'smpl.Global_Orient2'"):
                    ds.batch([0], fields=["smpl.Global_Orient2"], augment=aug)
                ds.batch([0], fields=["kp2d"], augment=aug)  # left out of fields=: accepted
                ok = tarmac.Augment((H, W), flip=1.0, passthrough=["bbox_raw"])
                _, out = ds.batch([1], fields=["bbox_raw"], augment=ok)
                np.testing.assert_array_equal(out["bbox_raw"][0], [2.0, 2.0, 3.0, 4.0])  # as stored
                ds.batch([0], fields=["bbox_raw"])  # no augmentation: nothing to refuse
            if torch is not None:
                with self.assertRaisesRegex(ValueError, "'bbox_raw'"):
                    tt.TarmacDataset(path, fields=["bbox_raw"], augment=aug)

    def test_geometry_of_an_unknown_kind_is_not_augmented(self):
        """A later version's kind: the dataset opens and reads (the format ignores the key), but
        an augmentation that cannot move the field refuses it rather than pass it as stored."""
        with tempfile.TemporaryDirectory() as tmp:
            geo = dict(GEOMETRY)
            geo["kp2d"] = {"kind": "quaternion"}
            path = write(os.path.join(tmp, "unknown"), n=2, geometry=geo)
            aug = tarmac.Augment((H, W), flip=1.0)
            with tarmac.Dataset(path) as ds:
                with self.assertRaisesRegex(ValueError, r"'kp2d'.*quaternion"):
                    ds.batch([0], fields=["kp2d"], augment=aug)
                ds.batch([0], fields=["kp3d"], augment=aug)  # left out of fields=: accepted
                _, out = ds.batch([0], fields=["kp2d"])  # no augmentation: as stored
                np.testing.assert_array_equal(out["kp2d"][0], sample(0)["kp2d"])

    def test_axis_angle_of_wrong_size_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            geo = dict(GEOMETRY)
            geo["pose"] = {"kind": "axis_angle", "layout": "smpl-body", "joints": 23,
                           "pairs": [list(p) for p in BODY_PAIRS]}  # a 72-value field is 24 joints
            path = write(os.path.join(tmp, "size"), n=2, geometry=geo)
            with tarmac.Dataset(path) as ds, self.assertRaisesRegex(ValueError, r"'pose'.*\[72\].*smpl-body"):
                ds.batch([0], fields=["pose"], augment=tarmac.Augment((H, W), flip=1.0))

    def test_augment_parameters_finite_and_in_range(self):
        """Augment(rotate=1e308) passed validation and gave NaN __augment__ and keypoints."""
        for kwargs in ({"rotate": 1e308}, {"rotate": float("nan")}, {"rotate": float("inf")}, {"rotate": 181},
                       {"scale": (1, 1e308)}, {"scale": (1, float("inf"))}, {"translate": 1e308},
                       {"translate": float("nan")}, {"ratio": (1e-308, 1)}, {"ratio": (1, 1e308)},
                       {"crop": (float("nan"), 1)}, {"fill": float("inf")}, {"flip": float("nan")}):
            with self.assertRaises(ValueError, msg=str(kwargs)):
                tarmac.Augment((H, W), **kwargs)
        tarmac.Augment((H, W), rotate=180, scale=(0.5, 64), translate=8, ratio=(1 / 64, 64))

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_phash_uint64_through_torch(self):
        """tarmac.torch raised on every --dedup dataset: __phash__ is uint64, which torch 1.13 lacks.
        It comes as int64 holding the same 64 bits."""
        ds = tt.TarmacDataset(self.path, fields=["__phash__"])
        want = np.array([sample(k)["__phash__"] for k in range(N)], dtype=np.uint64)
        self.assertTrue((want >= 2**63).any())
        one = ds[3]["__phash__"]
        self.assertEqual(one.dtype, torch.int64)
        self.assertEqual(one.numpy().view(np.uint64), want[3])
        batch = ds[list(range(N))]["__phash__"]
        np.testing.assert_array_equal(batch.numpy().view(np.uint64), want)


if __name__ == "__main__":
    unittest.main()
