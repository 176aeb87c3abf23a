"""Average pooling as symeq reads it (docs/conv.md): ``avgpool2d`` (kernel k, stride s, no padding) and
``global_avgpool`` make no layer of their own; each is folded exactly into the next conv2d or dense layer,
which the checker then reads (and digests) as the one layer the prover writes in its certificate:

* ``avgpool2d`` then a conv2d (kernel K, stride t, padding p): the conv2d on the image before the pooling
  with kernel K'[s a + u][s b + v] = sum K[a][b] / k^2 (0 <= u, v < k), stride s t, padding 0, or k p when
  the windows tile the image (s = k, sides divisible by k); a dense layer after it is first the conv2d with
  a whole-image kernel on the pooled image;
* ``global_avgpool`` then a dense layer W: the dense layer with W[o][c] / (H W) at every pixel of channel c,
  as the conv2d with a whole-image kernel on the image before the pooling.

Anything else after a pooling (another pooling, max pooling, the end of the layers) is refused, as symeq
refuses it.
"""
from __future__ import annotations

from fractions import Fraction

from ._numbers import CheckError, _count, _matrix
from .conv import _conv_layer
from .layer import Kind
from .pooling import _input_shape
from .schema import DENSE_KEYS, check_keys

AVG_KEYS = {"avgpool2d": (("type", "kernel_size", "stride", "input_shape"), ("type", "kernel_size")),
            "global_avgpool": (("type", "input_shape"), ("type",))}


def _text(x: Fraction) -> str:
    return f"{x.numerator}/{x.denominator}"


class _AvgPoolKind(Kind):
    """``"avgpool2d"`` / ``"global_avgpool"``: read, and left pending (``Reading.pending``) for the next layer."""

    makes_layer, reads_image = False, True

    def __init__(self, name: str):
        self.name = name

    def read(self, spec: dict, r) -> None:
        check_keys(spec, r.at, *AVG_KEYS[self.name])
        if r.pending is not None:
            raise CheckError(f"{r.name}: two pooling layers in a row are not supported")
        C, H, W = shape = _input_shape(spec, r.shape, r.width, r.name, self.name)
        if self.name == "global_avgpool":
            r.pending, out = _Fold(None, None, shape), (C, 1, 1)
        else:
            k = _count(spec.get("kernel_size"), f"{r.name} kernel_size", 1)
            s = _count(spec.get("stride", k), f"{r.name} stride", 1)
            if k > min(H, W):
                raise CheckError(f"{r.name}: a {k}x{k} pooling does not fit {H}x{W} images")
            r.pending, out = _Fold(k, s, shape), (C, (H - k) // s + 1, (W - k) // s + 1)
        r.shape, r.width, r.spec = out, out[0] * out[1] * out[2], None  # folded: not a layer of the digest

    def canonical(self, spec: dict, shape, normal) -> tuple:  # pragma: no cover - never in the declared layers
        raise CheckError(f"{self.name}: folded into the next layer before the digest")


class _Fold:
    """A pending average pooling (k, s; None, None: global) on images of ``shape``; called by the next layer's
    kind with its spec, it returns the folded spec (and whether it is still read as a dense layer)."""

    def __init__(self, k, s, shape):
        self.k, self.s, self.shape = k, s, shape

    def __call__(self, spec: dict, r, dense: bool) -> tuple:
        C, H, W = self.shape
        r.pending = None
        if self.k is None:  # global: the mean over the pixels, then W
            if not dense:
                raise CheckError(f"{r.name}: a global average pooling must be followed by a dense layer")
            check_keys(spec, r.at, *DENSE_KEYS)
            weight = _matrix(spec.get("weight"), f"{r.name} weight", cols=C)
            r.shape, r.width = self.shape, C * H * W  # the whole-image conv2d of the spread weights
            return _as_conv(dict(spec, weight=[[_text(x / (H * W)) for x in row for _ in range(H * W)]
                                               for row in weight]), r), False
        k, s = self.k, self.s
        spec = _as_conv(spec, r) if dense else spec
        conv = _conv_layer(spec, r.shape, r.width, r.name, r.at, r.last)
        pad = 0
        if conv.padding:
            if not (s == k and H % k == 0 and W % k == 0):
                raise CheckError(f"{r.name}: average pooling (kernel {k}, stride {s}) on {H}x{W} before a convolution "
                                 f"with padding {conv.padding} does not fold exactly (only windows that tile the image)")
            pad = k * conv.padding
        kh2, kw2 = s * (conv.kh - 1) + k, s * (conv.kw - 1) + k
        if ((H + 2 * pad - kh2) // (s * conv.stride) + 1, (W + 2 * pad - kw2) // (s * conv.stride) + 1) != conv.out_hw:
            raise CheckError(f"{r.name}: average pooling folded into the next convolution changes the output size")
        kernel = []
        for row in conv.rows:
            grids = [[[Fraction(0)] * kw2 for _ in range(kh2)] for _ in range(C)]
            for t, w in enumerate(row):
                c, a, b = t // (conv.kh * conv.kw), t // conv.kw % conv.kh, t % conv.kw
                for u in range(k):
                    for v in range(k):
                        grids[c][s * a + u][s * b + v] += w / (k * k)
            kernel.append([[[_text(x) for x in line] for line in g] for g in grids])
        r.shape, r.width = self.shape, C * H * W
        return {"type": "conv2d", "input_shape": list(self.shape), "kernel": kernel, "bias": spec.get("bias"),
                "stride": s * conv.stride, "padding": pad, "padding_mode": conv.mode,
                "activation": spec.get("activation")}, False


def _as_conv(spec: dict, r) -> dict:
    """A dense layer on the pooled image (C, h, w) as the conv2d with a whole-image kernel."""
    check_keys(spec, r.at, *DENSE_KEYS)
    C, h, w = r.shape
    weight = _matrix(spec.get("weight"), f"{r.name} weight", cols=C * h * w)
    kernel = [[[[_text(x) for x in row[(c * h + i) * w:(c * h + i + 1) * w]] for i in range(h)] for c in range(C)]
              for row in weight]
    return {"type": "conv2d", "input_shape": list(r.shape), "kernel": kernel, "bias": spec.get("bias"),
            "activation": spec.get("activation")}


AVGPOOL2D, GLOBAL_AVGPOOL = _AvgPoolKind("avgpool2d"), _AvgPoolKind("global_avgpool")
