"""tarmac.Augment: the random geometry the batch decode applies (docs/reader.md, "Augmentation")."""
from __future__ import annotations

import ctypes
import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._library import AugmentStruct
from .errors import ArgumentError

__all__ = ["Augment"]


def _number(name: str, given: object, lo: Optional[float] = None, hi: Optional[float] = None,
            lo_open: bool = False) -> float:
    """`given` as a finite float in range, else ArgumentError (a ValueError) naming the argument."""
    if isinstance(given, bool) or not isinstance(given, numbers.Real) or not math.isfinite(given):
        raise ArgumentError(f"{name} must be a finite number, not {given!r}")
    v = float(given)
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ArgumentError(f"{name} must be {'>' if lo_open else '>='} {lo}, not {v}")
    if hi is not None and v > hi:
        raise ArgumentError(f"{name} must be <= {hi}, not {v}")
    return v


def _range(name: str, v: Any, lo: float = 0.0, hi: Optional[float] = None, lo_open: bool = True) -> Tuple[float, float]:
    """A (min, max) pair with lo < min <= max (<= hi), else ArgumentError (a ValueError) naming the argument."""
    try:
        a, b = v
    except (TypeError, ValueError):
        raise ArgumentError(f"{name} must be a pair (min, max), not {v!r}") from None
    a, b = _number(name, a, lo, hi, lo_open=lo_open), _number(name, b, lo, hi, lo_open=lo_open)
    if a > b:
        raise ArgumentError(f"{name} must be (min, max) with min <= max, not {v!r}")
    return a, b


class Augment:
    """Random geometry drawn per sample and applied in the batch decode, on the native threads:
    the stored image is decoded then warped once (bilinear, border `fill`) to `size`, and the
    points, boxes and dense maps of the batch follow (docs/reader.md, "Augmentation").

    size=(H, W): the output; flip: probability of a horizontal flip; flip_pairs: pairs of point
    indices (0-based) swapped after a flip, in every points field; rotate: degrees, uniform in
    [-rotate, rotate]; scale=(min, max): uniform; translate: fraction of the output size, uniform
    in [-translate, translate] on each axis; crop=(smin, smax) with ratio=(rmin, rmax):
    torchvision's random resized crop (area fraction, aspect ratio; 10 tries, then the centre),
    resized to size; fill: the image's border value (0..255; dense maps: 0).
    passthrough: names of fields that look geometric (bbox*, *pose*, K, cam*, ...) but are not,
    and come through as stored (a field so named and declared as no kind is refused otherwise).
    Every parameter is finite and in range: flip [0, 1], rotate [0, 180], scale within (0, 64],
    translate [0, 8], crop within (0, 1], ratio within [1/64, 64], fill [0, 255]; flip_pairs name
    each index at most once.
    Sample i's draw is a pure function of (seed, epoch, i) given to Dataset.batch."""

    def __init__(self, size: Tuple[int, int], flip: float = 0.0,
                 flip_pairs: Optional[Sequence[Tuple[int, int]]] = None, rotate: float = 0.0,
                 scale: Tuple[float, float] = (1.0, 1.0), translate: float = 0.0,
                 crop: Optional[Tuple[float, float]] = None, ratio: Tuple[float, float] = (3 / 4, 4 / 3),
                 fill: float = 0, passthrough: Optional[Sequence[str]] = None) -> None:
        try:
            h, w = size
        except (TypeError, ValueError):
            raise ArgumentError(f"size must be (height, width), not {size!r}") from None
        for v in (h, w):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0 or v > 2**15:
                raise ArgumentError(f"size must be (height, width) of integers in 1..32768, not {size!r}")
        self.size = (int(h), int(w))
        self.flip = _number("flip", flip, 0.0, 1.0)
        pairs: List[Tuple[int, int]] = []
        seen: Dict[int, Any] = {}
        for p in flip_pairs or ():
            try:
                i, j = p
            except (TypeError, ValueError):
                raise ArgumentError(f"flip_pairs must hold pairs of point indices, not {p!r}") from None
            for v in (i, j):
                if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < 2**31:
                    raise ArgumentError(f"flip_pairs holds {p!r}: indices are integers >= 0 (0-based)")
            if i == j:
                raise ArgumentError(f"flip_pairs holds {p!r}: a point paired with itself")
            for v in (i, j):
                if v in seen:
                    raise ArgumentError(f"flip_pairs holds {p!r}, which names index {v} again (also in "
                                        f"{seen[v]!r}): each point is in one pair at most")
                seen[v] = p
            pairs.append((int(i), int(j)))
        self.flip_pairs = tuple(pairs)
        self.rotate = _number("rotate", rotate, 0.0, 180.0)
        self.scale = _range("scale", scale, 0.0, 64.0)
        self.translate = _number("translate", translate, 0.0, 8.0)
        self.crop = None if crop is None else _range("crop", crop, 0.0, 1.0)
        self.ratio = _range("ratio", ratio, 1 / 64, 64.0, lo_open=False)
        self.fill = _number("fill", fill, 0.0, 255.0)
        if isinstance(passthrough, str) or not all(isinstance(n, str) for n in passthrough or ()):
            raise ArgumentError(f"passthrough must be a list of field names, not {passthrough!r}")
        self.passthrough = tuple(passthrough or ())

    def _key(self) -> Tuple[Any, ...]:
        return (self.size, self.flip, self.flip_pairs, self.rotate, self.scale, self.translate, self.crop,
                self.ratio, self.fill, self.passthrough)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Augment) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Augment(size={self.size}, flip={self.flip}, flip_pairs={list(self.flip_pairs)}, "
                f"rotate={self.rotate}, scale={self.scale}, translate={self.translate}, crop={self.crop}, "
                f"ratio={self.ratio}, fill={self.fill}, passthrough={list(self.passthrough)})")

    def _c(self, points: Optional[Sequence[str]], boxes: Optional[Sequence[str]]) -> AugmentStruct:
        """The C struct; the arrays it points to are kept on it (alive while it is)."""
        a = AugmentStruct()
        a.height, a.width = self.size
        a.flip, a.rotate, a.translate, a.fill = self.flip, self.rotate, self.translate, self.fill
        pairs = (ctypes.c_int32 * max(2 * len(self.flip_pairs), 1))(*[v for p in self.flip_pairs for v in p])
        a.flip_pairs, a.nflip_pairs = pairs, len(self.flip_pairs)
        a.scale_min, a.scale_max = self.scale
        if self.crop is not None:
            a.crop, (a.crop_min, a.crop_max) = 1, self.crop
        a.ratio_min, a.ratio_max = self.ratio
        keep: List[Any] = [pairs]
        for attr, names in (("points", points), ("boxes", boxes)):
            if names is not None:
                arr = (ctypes.c_char_p * max(len(names), 1))(*[n.encode() for n in names])
                keep.append(arr)
                setattr(a, attr, ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)))
                setattr(a, "n" + attr, len(names))
        a._keep = keep
        return a

