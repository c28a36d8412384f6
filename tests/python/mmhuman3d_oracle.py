"""mmhuman3d's own label transforms, as a test oracle run beside ours (never committed): the
functions of its mmhuman3d/data/datasets/pipelines/transforms.py, taken from the file that
MMHUMAN3D_TRANSFORMS names. To make that file:

    git --git-dir=$(fetch github:open-mmlab/mmhuman3d) show \\
        HEAD:mmhuman3d/data/datasets/pipelines/transforms.py > /tmp/mmh_transforms.py

Used by test_geometry.py and test_cookbook.py; without the variable their mmhuman3d cases skip
(CI has no network), their numpy and OpenCV re-derivations still run."""
import ast
import math
import os

import cv2
import numpy as np


def load_mmhuman3d():
    """mmhuman3d's transform functions from the file MMHUMAN3D_TRANSFORMS names (its module imports
    mmcv and mmhuman3d, which the functions do not use: they are taken from its source alone), or
    None."""
    path = os.environ.get("MMHUMAN3D_TRANSFORMS")
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = {"_construct_rotation_matrix", "_flip_smpl_pose", "_flip_smplx_pose", "_flip_axis_angle",
             "_flip_hand_pose", "_flip_keypoints", "_rotate_joints_3d", "_rotate_smpl_pose"}
    module = ast.Module(body=[n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names],
                        type_ignores=[])
    scope = {"np": np, "cv2": cv2, "math": math}
    exec(compile(module, path, "exec"), scope)  # noqa: S102  (another project's code, the oracle)
    missing = names - set(scope)
    if missing:
        raise AssertionError(f"{path} lacks {sorted(missing)}")
    return scope
