"""The geometric kinds a dataset declares for its fields (the schema's "geometry" key, docs/format.md;
the manifest's --points / --boxes for datasets written before it), the refusal of undeclared
geometric-looking fields under an augmentation, and the label math of ragged fields, which the
native loader does not batch (docs/reader.md, "Augmentation")."""
from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

from . import _format
from .errors import ArgumentError, DataError

if TYPE_CHECKING:  # dataset imports this module
    from .dataset import Dataset

# Names that look geometric (the last dotted component, case-insensitive): a field so named but
# declared as no kind would be stored, then augmented, untransformed.
_GEOMETRIC = re.compile(r"^(bbox.*|box.*|keypoints.*|kp.*|joints.*|segmentation|.*pose.*|.*orient.*|k|"
                        r"intrinsics|cam.*)$", re.IGNORECASE)

# The flags that would have declared each kind at conversion, for the refusal's message.
_FLAGS = "--points, --points3d, --boxes, --axis-angle, --camera or --polygons"


def looks_geometric(name: str) -> bool:
    return bool(_GEOMETRIC.match(name.rsplit(".", 1)[-1]))


def declared(ds: Dataset) -> Dict[str, Dict[str, Any]]:
    """{field: geometry object} for `ds`: the schema's "geometry" keys, then the manifest's
    --points ({"kind": "points"}) and --boxes ({"kind": "boxes", "box_format", "convention"})
    for fields without one. Read once per opened Dataset (kept on it)."""
    cached = getattr(ds, "_declared", None)
    if cached is None:
        cached = ds._declared = _read_declared(ds)
    return cached


def _read_declared(ds: Dataset) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    try:
        schema = json.loads(ds.metadata.get("schema", "{}"))
    except ValueError:
        schema = {}
    for name, entry in (schema.items() if isinstance(schema, dict) else ()):
        if isinstance(entry, dict) and isinstance(entry.get("geometry"), dict):
            out[name] = entry["geometry"]
    try:
        with open(os.path.join(ds.path, _format.MANIFEST), encoding="utf-8") as f:
            options = json.load(f).get("output_options", {})
    except (OSError, ValueError, AttributeError):
        options = {}
    if not isinstance(options, dict):
        return out
    edges = options.get("--box-convention") == "edges"
    for name in options.get("--points") or ():
        if isinstance(name, str):
            out.setdefault(name, {"kind": "points"})
    for spec in options.get("--boxes") or ():
        if isinstance(spec, str):
            name, fmt = (spec[:-5], spec[-4:]) if spec.endswith((":xywh", ":xyxy")) else (spec, "xywh")
            out.setdefault(name, {"kind": "boxes", "box_format": fmt,
                                  "convention": "edges" if edges else "centers"})
    return out


def check_undeclared(ds: Dataset, fields: Iterable[str], passthrough: Sequence[str],
                     named: Iterable[str]) -> None:
    """ArgumentError (a ValueError) for the first field among `fields` whose name looks geometric but which `ds`
    declares as no kind, `named` (the points= and boxes= given) does not name, and
    `passthrough` does not list."""
    kinds = declared(ds)
    named = {n.split(":", 1)[0] for n in named}
    for name in fields:
        if name in kinds or name in named or name in passthrough or name.startswith("__"):
            continue
        if looks_geometric(name):
            raise ArgumentError(
                f"augment: field '{name}' of '{ds.path}' looks geometric but was declared as no geometric "
                f"kind, so an augmentation would leave it as stored while the image moves. Declare it at "
                f"conversion ({_FLAGS}), leave it out of fields=, or say it is not geometric: "
                f"tarmac.Augment(..., passthrough=['{name}'])")


def _map(m: NDArray[Any], xy: NDArray[Any]) -> NDArray[Any]:
    """Points [..., 2] (float64) mapped by the 2x3 matrix m."""
    mapped: NDArray[Any] = xy @ m[:, :2].T + m[:, 2]
    return mapped


def ragged_points(value: NDArray[Any], m: NDArray[Any], flip: bool,
                  pairs: Sequence[Tuple[int, int]]) -> NDArray[Any]:
    """One sample's ragged points [n, ..., >=2]: x, y mapped, other columns kept; after a flip the
    pairs swapped along the joint axis when the value has one besides the ragged axis."""
    out = np.array(value, dtype=value.dtype)
    out[..., :2] = _map(m, out[..., :2].astype(np.float64))
    if flip and out.ndim >= 3 and pairs:
        src = list(range(out.shape[-2]))
        for i, j in pairs:
            src[i], src[j] = src[j], src[i]
        out = out[..., src, :]
    return out


def ragged_boxes(value: NDArray[Any], m: NDArray[Any], xyxy: bool, edges: bool, width: int,
                 height: int) -> Tuple[NDArray[Any], NDArray[np.bool_]]:
    """One sample's ragged boxes [n, >=4] under m: the axis-aligned box of the four mapped corners,
    clipped to the canvas (in the boxes' convention: [-0.5, W - 0.5] for pixel centres, [0, W] for
    edges); (boxes, valid) with valid False where no area is left."""
    b = np.array(value, dtype=np.float64).reshape(-1, value.shape[-1] if value.ndim else 4)
    half = 0.5 if edges else 0.0
    x0, y0 = b[:, 0] - half, b[:, 1] - half
    x1 = (b[:, 2] if xyxy else b[:, 0] + b[:, 2]) - half
    y1 = (b[:, 3] if xyxy else b[:, 1] + b[:, 3]) - half
    corners = np.stack([np.stack([x0, y0], -1), np.stack([x1, y0], -1), np.stack([x0, y1], -1),
                        np.stack([x1, y1], -1)], 1)
    mapped = _map(m, corners) + half
    lo, hi = mapped.min(1), mapped.max(1)
    lo_edge = -0.5 + half
    lo[:, 0], hi[:, 0] = np.clip(lo[:, 0], lo_edge, width + lo_edge), np.clip(hi[:, 0], lo_edge, width + lo_edge)
    lo[:, 1], hi[:, 1] = np.clip(lo[:, 1], lo_edge, height + lo_edge), np.clip(hi[:, 1], lo_edge, height + lo_edge)
    valid = (hi[:, 0] > lo[:, 0]) & (hi[:, 1] > lo[:, 1])
    b[:, 0], b[:, 1] = lo[:, 0], lo[:, 1]
    b[:, 2], b[:, 3] = (hi[:, 0], hi[:, 1]) if xyxy else (hi[:, 0] - lo[:, 0], hi[:, 1] - lo[:, 1])
    return b.astype(value.dtype).reshape(value.shape), valid


def polygons(value: Any, m: NDArray[Any], bad: Callable[[str], DataError]) -> Any:
    """One sample's polygons (lists of x0, y0, x1, y1, ... as JSON lists, or a numeric array
    [..., 2k] / [..., 2]) with every vertex mapped by m; `bad(reason)` makes the DataError."""
    if isinstance(value, np.ndarray):
        flat = value.astype(np.float64).reshape(-1)
        if flat.size % 2:
            raise bad(f"holds {flat.size} coordinates, an odd number (polygons are x0, y0, x1, y1, ...)")
        return _map(m, flat.reshape(-1, 2)).reshape(value.shape).astype(value.dtype)
    if isinstance(value, dict):
        raise bad("is a run-length mask (RLE), not polygons: convert it with --masks to warp it with the image")
    if not isinstance(value, list):
        raise bad(f"is {type(value).__name__}, not a list of polygons")
    if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        if len(value) % 2:
            raise bad(f"has a polygon of {len(value)} coordinates, an odd number")
        return _map(m, np.asarray(value, np.float64).reshape(-1, 2)).reshape(-1).tolist()
    return [polygons(v, m, bad) for v in value]


def ragged_values(ds: Dataset, name: str, idx: Sequence[int], geometry: Optional[Dict[str, Any]],
                  matrices: Optional[NDArray[Any]], flips: Optional[NDArray[Any]],
                  pairs: Sequence[Tuple[int, int]], size: Tuple[int, int]) -> Tuple[List[Any], Optional[List[Any]]]:
    """Field `name` of samples idx as a list (str, parsed JSON, arrays; None where a nullable field
    has no value); with matrices (an augmentation) a declared points, boxes or polygons field
    follows it. (values, per-box valid list for boxes else None)."""
    values = [ds.value(name, i) for i in idx]
    geometry = geometry or {}
    kind = geometry.get("kind")
    if matrices is None or kind is None or kind == "mask":
        return values, None
    w, h = size
    out: List[Any] = []
    valid: List[NDArray[np.bool_]] = []  # boxes only
    for j, (i, v) in enumerate(zip(idx, values)):
        def bad(reason: str, i: int = i) -> DataError:
            return DataError(f"dataset '{ds.path}': sample {i} field '{name}' {reason}")
        m = matrices[j]
        if v is None:
            out.append(None)
            if kind == "boxes":
                valid.append(np.zeros(0, dtype=bool))
        elif kind == "points":
            assert flips is not None  # the augmentation's matrices and flips come together (Dataset.batch)
            out.append(ragged_points(v, m, bool(flips[j]), pairs))
        elif kind == "boxes":
            if v.ndim == 0 or v.shape[-1] < 4:
                raise bad(f"has boxes of shape {v.shape}: they need 4 values a row")
            b, ok = ragged_boxes(v, m, geometry.get("box_format") == "xyxy", geometry.get("convention") == "edges",
                                 w, h)
            out.append(b)
            valid.append(ok)
        elif kind == "polygons":
            out.append(polygons(v, m, bad))
        else:
            raise ArgumentError(f"augment: field '{name}' of '{ds.path}' is a ragged {kind} field; only fixed-shape "
                                f"{kind} fields are augmented (leave it out of fields=)")
    return out, (valid if kind == "boxes" else None)
