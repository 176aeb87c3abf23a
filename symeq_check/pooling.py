"""maxpool2d (torch's MaxPool2d, -inf padding) and group_pool (escnn's GroupPooling: the maximum over each
field's channels), docs/conv.md "Pooling": y[j] = max over window(j) of x, windows re-derived here.  For
channel-pixel actions, max(P x) = Q max(x) holds for all real x exactly when, for every output neuron j, P
maps window(j) onto the window of Q's column of j with all its factors equal to Q's factor of j, positive on
a window of more than one entry.  Necessary: an indicator input on an index in the symmetric difference of
the two windows, or on one whose factor differs, tells the sides apart (a negative factor on a wider window
is not accepted: symeq never certifies one).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ._numbers import CheckError, _count
from .layer import Kind, Layer
from .schema import check_keys

POOL_KEYS = {"maxpool2d": (("type", "kernel_size", "stride", "padding", "input_shape"), ("type", "kernel_size")),
             "group_pool": (("type", "field_size", "input_shape"), ("type", "field_size"))}
POOL_KINDS = tuple(POOL_KEYS)


@dataclass(frozen=True)
class _Pool(Layer):
    """y[j] = max_{i in windows[j]} x[i] on channel-major (C, H, W) images (digest form 1: its str)."""

    image = pools = True

    kind: str
    in_shape: tuple
    out_shape: tuple
    windows: tuple
    label: str = field(compare=False, default="pooling")
    act: object = "max"

    @property
    def out_dim(self) -> int:
        c, h, w = self.out_shape
        return c * h * w

    def forward(self, x) -> tuple:
        return tuple(max(x[i] for i in win) for win in self.windows)


class _PoolKind(Kind):
    """``"maxpool2d"`` and ``"group_pool"``: read on the shape before them, which they carry on."""

    reads_image = True

    def __init__(self, name: str):
        self.name = name

    def read(self, spec: dict, r) -> _Pool:
        pool = _pool_layer(spec, r.shape, r.width, r.name, r.at)
        r.shape, r.width = pool.out_shape, pool.out_dim
        return pool

    def canonical(self, spec: dict, shape, normal) -> tuple:
        """input_shape, kernel_size, stride (default: the kernel size), padding (0), or field_size written."""
        layer = normal(spec)
        if spec.get("input_shape") is not None:
            shape = [int(v) for v in spec["input_shape"]]
        C, H, W = shape
        if self.name == "group_pool":
            n = int(spec["field_size"])
            layer.update(input_shape=[str(v) for v in shape], field_size=str(n))
            return layer, [C // n, H, W]
        k = int(spec["kernel_size"])
        s = int(spec["stride"]) if spec.get("stride") is not None else k
        p = int(spec.get("padding", 0))
        layer.update(input_shape=[str(v) for v in shape], kernel_size=str(k), stride=str(s), padding=str(p))
        return layer, [C, (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1]


MAXPOOL2D, GROUP_POOL = _PoolKind("maxpool2d"), _PoolKind("group_pool")


def _input_shape(spec: dict, shape, width: int, name: str, kind: str) -> tuple:
    """The (C, H, W) an image layer reads: its ``input_shape``, equal to the previous layer's if both are known."""
    given = spec.get("input_shape")
    if given is not None:
        if not isinstance(given, list) or len(given) != 3:
            raise CheckError(f"{name}: input_shape must be [channels, height, width]")
        given = tuple(_count(v, f"{name} input_shape", 1) for v in given)
        if shape is not None and given != shape:
            raise CheckError(f"{name}: input_shape {list(given)} differs from the previous layer's {list(shape)}")
        shape = given
    if shape is None:
        raise CheckError(f"{name}: a {kind} layer needs input_shape")
    C, H, W = shape
    if C * H * W != width:
        raise CheckError(f"{name}: input_shape {list(shape)} has {C * H * W} entries, the input has {width}")
    return shape


def _pool_layer(spec: dict, shape, width: int, name: str, at: str) -> _Pool:
    """A maxpool2d or group_pool layer of a model file (shape: the (C, H, W) before it, or None)."""
    kind = spec.get("type")
    check_keys(spec, at, *POOL_KEYS[kind])
    C, H, W = shape = _input_shape(spec, shape, width, name, kind)
    if kind == "group_pool":
        n = _count(spec.get("field_size"), f"{name} field_size", 1)
        if C % n:
            raise CheckError(f"{name}: {C} channels are not whole fields of {n}")
        P = H * W
        wins = tuple(tuple((f * n + i) * P + q for i in range(n)) for f in range(C // n) for q in range(P))
        return _Pool(kind, shape, (C // n, H, W), wins, f"group_pool (fields of {n})")
    k = _count(spec.get("kernel_size"), f"{name} kernel_size", 1)
    s = k if spec.get("stride") is None else _count(spec.get("stride"), f"{name} stride", 1)
    p = _count(spec.get("padding", 0), f"{name} padding", 0)
    if p > k // 2:
        raise CheckError(f"{name}: padding {p} exceeds half the kernel size {k}")
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    if min(oh, ow) < 1:
        raise CheckError(f"{name}: the pooling window does not fit the padded image")
    wins = tuple(tuple((c * H + i) * W + j for i in range(s * y - p, s * y - p + k) if 0 <= i < H
                       for j in range(s * x - p, s * x - p + k) if 0 <= j < W)
                 for c in range(C) for y in range(oh) for x in range(ow))
    return _Pool(kind, shape, (C, oh, ow), wins, f"maxpool2d (k{k} s{s} p{p})")


def _pool_failure(layer: _Pool, p: tuple, q: tuple) -> str | None:
    """Why max(P x) == Q max(x) fails for channel-pixel actions p, q (source, factor, pixels), or None."""
    (ps, pf, pp), (qs, qf, qp) = p, q
    _, H, W = layer.in_shape
    P = H * W
    _, oh, ow = layer.out_shape
    npix = oh * ow
    for j, win in enumerate(layer.windows):
        c, px = divmod(j, npix)
        target = layer.windows[qs[c] * npix + qp[px]]
        f = qf[c]
        if sorted(ps[i // P] * P + pp[i % P] for i in win) != sorted(target):
            return f"neuron {j + 1}: P does not map its window onto the window of Q's neuron"
        if {pf[i // P] for i in win} != {f}:
            return f"neuron {j + 1}: the factors of P on its window differ from Q's factor {f}"
        if (len(win) > 1 or len(target) > 1) and not f > 0:
            return f"neuron {j + 1}: a non-positive factor {f} on a window of {len(win)} (a maximum needs positive ones)"
    return None


__all__ = ["GROUP_POOL", "MAXPOOL2D", "POOL_KEYS", "POOL_KINDS", "_Pool", "_input_shape", "_pool_layer", "_pool_failure"]
