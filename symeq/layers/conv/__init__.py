"""Two-dimensional convolutions as a layer kind of their own: kernels, never expanded.

A convolution ``Conv2d(C_in, C_out, (kh, kw), stride, padding)`` on images of shape ``(C_in, H, W)``
computes ``z[o, y, x] = sum_{c, i, j} K[o, c, i, j] in[c, s*y + i - p, s*x + j - p] + b[o]``
(cross-correlation as in torch), where a position outside the image reads 0 (``padding_mode``
``"zeros"``) or wraps around (``"circular"``).  Pixels are stored channel-major, then row-major
(index ``(c*H + y)*W + x``), which is exactly torch's ``Flatten`` of a ``(C, H, W)`` tensor and the
pixel order of symeq's image groups (``docs/groups.md``).

:class:`ConvLayer` (kind ``"conv2d"``) implements the Layer protocol (:mod:`symeq.layers.base`) on
its kernels.  The group acts on a hidden space ``(C, H, W)`` by a :class:`ConvAction`, a channel
action (a monomial matrix on the C channels) times a pixel permutation,
``(M y)[c, p] = factor[c] * y[source[c], pixel[p]]``.  The pixel permutation of a layer's output
follows from the one on its input and the geometry of the layer (:func:`grid_transform`,
:meth:`ConvLayer.output_pixels`): a symmetry ``u -> R u + d`` of the input grid (quarter turns,
mirrors, D4) maps the output grid the same way exactly when every reflected coordinate satisfies
``(N + 2p - k) % s == 0`` (docs/conv.md); then ``conv_K(P y) = Pi' conv_{K'}(y)`` with the kernel
``K'[o, source[c], R_k t] = factor[c] K[o, c, t]`` (``R_k``: R about the kernel's centre).
Matching an action (:meth:`ConvLayer.match_action`) therefore compares the C_out transformed
kernels with theta's, up to the activation's scalings, as a dense layer compares its rows; the
exact check (:meth:`ConvLayer.check_action`) compares the kernel identities and, when they do not
apply, decides neuron by neuron on the sparse rows of the convolution (linear in
kernel size x channels^2 x pixels, never (C H W)^2).

Flatten and a dense layer after a convolution are a convolution with a kernel covering the whole
image (:meth:`ConvLayer.from_dense`), and global average pooling followed by a linear layer is one
with a constant kernel (:func:`fold_average_pool`): the readers fold them, exactly.  Max pooling and
escnn's group pooling are layer kinds of their own (:mod:`symeq.layers.pooling`).

The dense expansion (:func:`dense_rows`, :meth:`ConvLayer.dense`) stays available to compare
against in tests and for the algorithms that read dense rows (the symbolic expansion and the fibre
ideal), within a size guard; submodels reduce chains of conv2d layers on their channels.

Examples
--------
>>> spec = ConvShape(1, 1, 3, 3, 2, 2, stride=1, padding=0)
>>> spec.out_hw
(2, 2)
>>> dense_rows(spec, [[[[1, 2], [3, 4]]]], zero=0)[0]
[1, 2, 0, 3, 4, 0, 0, 0, 0]
>>> grid_transform(ConvAction.rot90_pixels(3), 3, 3)
(0, -1, 1, 0)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np
from flint import fmpq, fmpq_mat

from ...backends import EXACT, Backend
from ...canonical import Form, drop_form, plain_form
from ...activations import Activation
from ...errors import InputError, LimitExceeded, ShapeError
from ...numbers import as_fmpq, format_number, monomial_matrix, monomial_parts
from ..base import NoPartner
from .numbers import FlintNumbers, flat_kernel, numbers_of

__all__ = ["ConvShape", "dense_rows", "conv_bias", "ConvAction", "ConvGeometry", "ConvCore", "ConvLayer", "as_conv_action", "grid_transform",
           "transform_pixels", "tap_permutation", "output_pixels", "geometry_failure", "fold_average_pool",
           "PADDING_MODES", "DENSE_EXPANSION_LIMIT"]

PADDING_MODES = ("zeros", "circular")

DENSE_EXPANSION_LIMIT = 4_000_000
"""At most this many entries (out_dim x in_dim) in a conv layer's dense expansion (``ConvLayer.weight``)."""

# the 8 signed permutation matrices of the plane, row-major (a, b, c, d) = [[a, b], [c, d]]
_PLANE = ((1, 0, 0, 1), (0, -1, 1, 0), (-1, 0, 0, -1), (0, 1, -1, 0),
          (-1, 0, 0, 1), (1, 0, 0, -1), (0, 1, 1, 0), (0, -1, -1, 0))
_NAMES = {(1, 0, 0, 1): "identity", (0, -1, 1, 0): "quarter turn clockwise", (-1, 0, 0, -1): "half turn",
          (0, 1, -1, 0): "quarter turn counter-clockwise", (-1, 0, 0, 1): "vertical mirror (top-bottom)",
          (1, 0, 0, -1): "mirror (left-right)", (0, 1, 1, 0): "transpose", (0, -1, -1, 0): "anti-transpose"}


def _posint(v, name: str) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise InputError(f"conv2d: {name} must be a positive integer, got {v!r}")


@dataclass(frozen=True)
class ConvShape:
    """The shape data of a 2-d convolution on ``(in_channels, height, width)`` images."""

    in_channels: int
    out_channels: int
    height: int
    width: int
    kh: int
    kw: int
    stride: int = 1
    padding: int = 0
    padding_mode: str = "zeros"

    def __post_init__(self):
        for name in ("in_channels", "out_channels", "height", "width", "kh", "kw", "stride"):
            _posint(getattr(self, name), name)
        if not isinstance(self.padding, int) or isinstance(self.padding, bool) or self.padding < 0:
            raise InputError(f"conv2d: padding must be a non-negative integer, got {self.padding!r}")
        if self.padding_mode not in PADDING_MODES:
            raise InputError(f"conv2d: padding_mode must be one of {', '.join(map(repr, PADDING_MODES))}, "
                             f"got {self.padding_mode!r}")
        if self.padding_mode == "circular" and self.padding > min(self.height, self.width):
            raise InputError(f"conv2d: circular padding {self.padding} exceeds the image size "
                             f"{self.height}x{self.width}")
        oh, ow = self.out_hw
        if oh < 1 or ow < 1:
            raise ShapeError(f"conv2d: a {self.kh}x{self.kw} kernel with padding {self.padding} does not fit "
                             f"{self.height}x{self.width} images")

    @property
    def out_hw(self) -> tuple[int, int]:
        oh = (self.height + 2 * self.padding - self.kh) // self.stride + 1
        ow = (self.width + 2 * self.padding - self.kw) // self.stride + 1
        return oh, ow

    @property
    def in_dim(self) -> int:
        return self.in_channels * self.height * self.width

    @property
    def out_dim(self) -> int:
        oh, ow = self.out_hw
        return self.out_channels * oh * ow

    @property
    def taps(self) -> int:
        """Entries of one output channel's kernel: C_in x kh x kw."""
        return self.in_channels * self.kh * self.kw

    def sources(self) -> list[list[int]]:
        """``src[t][q]``: the input index read by tap t = (c, i, j) at output pixel q, or -1 (padding).

        Linear in taps x output pixels; the one index map of forward, checks and dense expansion."""
        return self.source_array().tolist()

    def source_array(self) -> np.ndarray:
        """:meth:`sources` as an int64 array (taps x output pixels), by array arithmetic."""
        H, W, p, s = self.height, self.width, self.padding, self.stride
        oh, ow = self.out_hw
        c, i, j, y, x = np.meshgrid(np.arange(self.in_channels), np.arange(self.kh), np.arange(self.kw),
                                    np.arange(oh), np.arange(ow), indexing="ij")
        yy, xx = s * y + i - p, s * x + j - p
        if self.padding_mode == "circular":
            yy, xx = yy % H, xx % W
        src = (c * H + yy) * W + xx
        src[(yy < 0) | (yy >= H) | (xx < 0) | (xx >= W)] = -1
        return src.reshape(self.in_channels * self.kh * self.kw, oh * ow)


def dense_rows(spec: ConvShape, kernel, zero) -> list[list]:
    """The rows of the dense matrix of the convolution (``out_dim`` rows of length ``in_dim``).

    ``kernel[o][c][i][j]`` are the weights (any scalar type); ``zero`` fills the other entries.
    With circular padding taps that wrap onto the same pixel add up.
    """
    rows_k = flat_kernel(spec, kernel)
    src = spec.sources()
    npix = len(src[0]) if src else 0
    rows = []
    for o in range(spec.out_channels):
        ko = rows_k[o]
        for q in range(npix):
            row = [zero] * spec.in_dim
            for t, st in enumerate(src):
                r = st[q]
                if r >= 0:
                    row[r] = row[r] + ko[t] if spec.padding_mode == "circular" else ko[t]
            rows.append(row)
    return rows


def conv_bias(spec: ConvShape, bias) -> list:
    """The dense bias: each channel's bias repeated over its output pixels."""
    if len(bias) != spec.out_channels:
        raise ShapeError(f"conv2d: bias has length {len(bias)}, expected out_channels = {spec.out_channels}")
    oh, ow = spec.out_hw
    return [b for b in bias for _ in range(oh * ow)]


# -- the group on the pixel grid ----------------------------------------------------------------

def transform_pixels(R: tuple, h: int, w: int) -> list[int] | None:
    """The pixel permutation ``pixel[p]`` of the grid symmetry u -> R u + d of an h x w grid.

    ``(M y)[p] = y[pixel[p]]`` with pixel(y, x) = R (y, x) + d, d chosen so that the grid maps to
    itself; None if R swaps the axes of a non-square grid.

    >>> transform_pixels((1, 0, 0, -1), 2, 3)   # left-right mirror
    [2, 1, 0, 5, 4, 3]
    """
    a, b, c, d = R
    if (b != 0) and h != w:
        return None
    d0 = (h - 1) if (a < 0 or b < 0) else 0
    d1 = (w - 1) if (c < 0 or d < 0) else 0
    out = []
    for y in range(h):
        for x in range(w):
            yy, xx = a * y + b * x + d0, c * y + d * x + d1
            out.append(yy * w + xx)
    return out


def grid_transform(pixels: Sequence[int], h: int, w: int) -> tuple | None:
    """The plane symmetry R with ``transform_pixels(R, h, w) == pixels``, or None."""
    pixels = list(pixels)
    for R in _PLANE:
        if transform_pixels(R, h, w) == pixels:
            return R
    return None


def tap_permutation(shape: ConvShape, source: Sequence[int], R: tuple) -> list[int]:
    """Where each kernel tap t = (c, i, j) goes in theta^g's kernel: (source[c], R_k (i, j)), R_k being
    the grid symmetry R about the kernel's centre.  One index map for the exact and the float layer.

    >>> tap_permutation(ConvShape(1, 1, 3, 3, 2, 2), [0], (1, 0, 0, -1))   # a mirror swaps the columns
    [1, 0, 3, 2]
    """
    kh, kw = shape.kh, shape.kw
    a, b, c, d = R
    e0 = (kh - 1) if (a < 0 or b < 0) else 0
    e1 = (kw - 1) if (c < 0 or d < 0) else 0
    perm = [0] * shape.taps
    for ci in range(shape.in_channels):
        for i in range(kh):
            for j in range(kw):
                perm[(ci * kh + i) * kw + j] = (source[ci] * kh + a * i + b * j + e0) * kw + c * i + d * j + e1
    return perm


def output_pixels(shape: ConvShape, R: tuple) -> tuple | None:
    """The output grid's pixel permutation for the input grid symmetry R, or None where the conv's
    geometry (stride, padding, size) breaks it: a reflected coordinate needs ``(N + 2 p - k) % s == 0``
    (docs/conv.md).  One rule for the exact and the float layer.

    >>> output_pixels(ConvShape(1, 1, 6, 6, 3, 3, stride=2, padding=1), (0, -1, 1, 0)) is None
    True
    """
    s = shape
    a, b, c, d = R
    if b != 0 and (s.height != s.width or s.kh != s.kw):
        return None
    dims = ((s.height, s.kh), (s.width, s.kw))
    for row in ((a, b), (c, d)):
        src = 0 if row[0] else 1  # the input coordinate this output coordinate reads
        n, k = dims[src]
        if row[src] < 0 and (n + 2 * s.padding - k) % s.stride:
            return None
    pix = transform_pixels(R, *s.out_hw)
    return None if pix is None else tuple(pix)


def geometry_failure(label: str, s: ConvShape, R: tuple) -> str:
    """Why the grid symmetry R does not carry over this convolution's geometry (a sentence)."""
    return (f"{label}: the input grid's symmetry ({_NAMES.get(R, R)}) does not map this convolution's "
            f"sampling grid onto itself (stride {s.stride}, padding {s.padding}, kernel {s.kh}x{s.kw} on "
            f"{s.height}x{s.width} images: N + 2p - k = {s.height + 2 * s.padding - s.kh} is not a multiple "
            "of the stride), so symeq derives no action for it (inconclusive: not a proof that none exists)")


@dataclass(frozen=True, eq=False)
class ConvAction:
    """A channel action times a pixel permutation on ``(C, H, W)``: the monomial matrix with
    ``(M y)[c, p] = factor[c] * y[source[c], pixel[p]]`` (index ``c*H*W + p``).

    Composition is ``*`` (as matrices), equality and :meth:`key` compare the factors; the sizes
    are those of the whole space (``nrows()``), the storage is C + H W numbers.

    >>> a = ConvAction((1, 0), (fmpq(1), fmpq(-1)), tuple(ConvAction.rot90_pixels(2)), (2, 2))
    >>> (a * a * a * a) == a.identity(), a.nrows()
    (True, 8)
    """

    source: tuple
    factor: tuple
    pixel: tuple
    hw: tuple

    @staticmethod
    def rot90_pixels(n: int) -> list[int]:
        """symeq's rot90 (clockwise) on an n x n grid as a pixel permutation."""
        return transform_pixels((0, -1, 1, 0), n, n)

    @property
    def channels(self) -> int:
        return len(self.source)

    @property
    def pixels(self) -> int:
        return len(self.pixel)

    def nrows(self) -> int:
        return self.channels * self.pixels

    ncols = nrows

    def __mul__(self, other: "ConvAction") -> "ConvAction":
        if not isinstance(other, ConvAction):
            return NotImplemented
        if (self.channels, self.pixels) != (other.channels, other.pixels):
            raise ShapeError(f"cannot compose actions on {self.channels}x{self.hw} and {other.channels}x{other.hw}")
        s, v = self.source, self.factor
        return ConvAction(tuple(other.source[s[c]] for c in range(len(s))),
                          tuple(v[c] * other.factor[s[c]] for c in range(len(s))),
                          tuple(other.pixel[p] for p in self.pixel), self.hw)

    def key(self) -> tuple:
        return (self.hw, self.source, tuple((int(x.p), int(x.q)) if isinstance(x, fmpq) else (x, 1) if isinstance(x, int)
                                            else x for x in self.factor), self.pixel)

    def __eq__(self, other) -> bool:
        if isinstance(other, ConvAction):
            return self.key() == other.key()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key())

    def identity(self) -> "ConvAction":
        one = fmpq(1) if not self.factor or isinstance(self.factor[0], fmpq) else 1.0
        return ConvAction(tuple(range(self.channels)), (one,) * self.channels, tuple(range(self.pixels)), self.hw)

    def monomial(self) -> tuple[list[int], list]:
        """(column of each row's nonzero, its value) on the whole space, as :func:`symeq.numbers.monomial_parts`."""
        P = self.pixels
        cols = [self.source[c] * P + self.pixel[p] for c in range(self.channels) for p in range(P)]
        vals = [self.factor[c] for c in range(self.channels) for _ in range(P)]
        return cols, vals

    def to_matrix(self) -> fmpq_mat:
        """The dense matrix (size-guarded: for tests and small models)."""
        n = self.nrows()
        if n * n > DENSE_EXPANSION_LIMIT:
            raise LimitExceeded(f"a {n}x{n} dense matrix of a conv action exceeds {DENSE_EXPANSION_LIMIT} entries; "
                                "conv actions stay in their sparse form (channel action (x) pixel permutation)")
        cols, vals = self.monomial()
        return monomial_matrix(cols, [as_fmpq(v) for v in vals])

    def entries(self) -> list:
        """The dense matrix's entries, row-major (size-guarded: lets small actions pass where an fmpq_mat
        is read, e.g. dense certificates)."""
        return self.to_matrix().entries()

    @property
    def transform(self) -> tuple | None:
        return grid_transform(self.pixel, *self.hw)

    def describe(self) -> str:
        R = self.transform
        return _NAMES.get(R, "a pixel permutation that is no grid symmetry") if R is not None else \
            "a pixel permutation that is no grid symmetry"

    def to_json(self) -> dict:
        """The sparse form: ``{"kind": "channel-pixel", "channels": {"source", "factor"}, "height", "width",
        "pixels"}`` with ``(M y)[c, p] = factor[c] y[source[c], pixels[p]]``."""
        return {"kind": "channel-pixel", "height": self.hw[0], "width": self.hw[1],
                "channels": {"source": list(self.source), "factor": [format_number(as_fmpq(x)) for x in self.factor]},
                "pixels": list(self.pixel)}


def as_conv_action(M, channels: int, h: int, w: int) -> ConvAction | None:
    """``M`` (an fmpq_mat, a :class:`ConvAction` or (cols, vals)) as a channel action times a pixel
    permutation on ``(channels, h, w)``; None if it is not of that form."""
    if isinstance(M, ConvAction):
        return M if (M.channels, M.hw) == (channels, (h, w)) else None
    if isinstance(M, tuple):
        cols, vals = M
    else:
        if M.nrows() != channels * h * w:
            return None
        parts = monomial_parts(M)
        if parts is None:
            return None
        cols, vals = parts
    P = h * w
    if len(cols) != channels * P:
        return None
    source, factor = [], []
    pixel = [c % P for c in cols[:P]]
    for c in range(channels):
        sc = cols[c * P] // P
        fc = vals[c * P]
        for p in range(P):
            i = c * P + p
            if cols[i] != sc * P + pixel[p] or vals[i] != fc:
                return None
        source.append(sc)
        factor.append(fc)
    return ConvAction(tuple(source), tuple(factor), tuple(pixel), (h, w))


# -- the layer ------------------------------------------------------------------------------------

class ConvGeometry:
    """What the exact :class:`ConvLayer` and the float ``symeq.layers.conv.floating.NumericConvLayer`` share: one
    implementation of shapes, names, the index map and the pixel geometry (only the numbers differ).
    A subclass has ``shape`` (:class:`ConvShape`) and ``activation``."""

    _src = None

    @property
    def in_shape(self) -> tuple:
        return (self.shape.in_channels, self.shape.height, self.shape.width)

    @property
    def out_shape(self) -> tuple:
        return (self.shape.out_channels,) + self.shape.out_hw

    @property
    def in_dim(self) -> int:
        return self.shape.in_dim

    @property
    def out_dim(self) -> int:
        return self.shape.out_dim

    @property
    def n_params(self) -> int:
        return self.shape.out_channels * self.shape.taps + self.shape.out_channels

    @property
    def hidden_label(self) -> str:
        act = self.activation
        if act is None:
            return "affine"
        spec = act.spec
        arg = spec.get("order", spec.get("degree"))
        return spec.get("type", act.name) + (f"({arg})" if arg is not None else "")

    @property
    def label(self) -> str:
        s = self.shape
        C, H, W = self.in_shape
        Co, oh, ow = self.out_shape
        mode = "" if s.padding_mode == "zeros" else f" {s.padding_mode}"
        return (f"conv2d {self.in_dim}->{self.out_dim} ({C}x{H}x{W}->{Co}x{oh}x{ow}, k{s.kh}x{s.kw} s{s.stride} "
                f"p{s.padding}{mode}) {self.hidden_label}")

    @property
    def latent_group_name(self) -> str | None:
        return None if self.activation is None else self.activation.latent_group

    @property
    def sources(self) -> list[list[int]]:
        """:meth:`ConvShape.sources`, computed once."""
        if self._src is None:
            self._src = self.shape.sources()
        return self._src

    def output_pixels(self, R: tuple) -> tuple | None:
        """:func:`output_pixels` of this layer's geometry."""
        return output_pixels(self.shape, R)

    def geometry_failure(self, R: tuple) -> str:
        return geometry_failure(self.label, self.shape, R)


class ConvCore(ConvGeometry):
    """The conv2d algorithms, written once over a number backend (:mod:`symeq.layers.conv.numbers`).

    The layer's ``backend`` chooses its ``numbers`` (:class:`~symeq.layers.conv.numbers.FlintNumbers` over
    ``EXACT``, :class:`~symeq.layers.conv.numbers.NumpyNumbers` over ``FLOAT64``); a subclass has ``shape``,
    ``kernel``, ``channel_bias`` and ``activation``.  Here: the kernel and bias in the backend's numbers, the forward pass, the
    dense expansion (size-guarded), the grid geometry of an input action, the transformed kernels
    of theta^g, the bias of an input offset, and (:func:`fold_average_pool`) pooling folded into
    a convolution.  Matching: exact (canonical kernel rows) or float (linear assignment, in the kind's
    float side); only an exact layer decides.
    """

    @property
    def numbers(self):
        """The conv2d algorithms' numbers for the layer's backend (exact: python-flint; float64: numpy)."""
        return numbers_of(self.backend)

    def _init_numbers(self) -> None:
        self.kernel, self.rows = self.numbers.kernel(self.shape, self.kernel)
        self.channel_bias = self.numbers.bias(self.shape, self.channel_bias)

    @classmethod
    def from_dense(cls, weight_rows, bias, activation, in_shape: tuple):
        """A dense layer on (C, H, W) inputs (after a Flatten) as the convolution with one kernel
        covering the whole image per neuron (output 1 x 1): the same function, exactly."""
        C, H, W = in_shape
        rows = [list(r) for r in weight_rows]
        shape = ConvShape(C, len(rows), H, W, H, W)
        return cls(shape, FlintNumbers.nested(shape, rows), bias, activation)

    def dense_weight(self):
        """The dense matrix of the convolution in the backend's numbers (size-guarded)."""
        n = self.in_dim * self.out_dim
        if n > DENSE_EXPANSION_LIMIT:
            raise LimitExceeded(f"expanding the {self.label} layer to a dense {self.out_dim}x{self.in_dim} matrix "
                                f"({n} entries) exceeds {DENSE_EXPANSION_LIMIT}; this step is written for dense "
                                "layers only and is not available for convolutions at this size")
        return self.numbers.dense(dense_rows(self.shape, self.kernel, self.numbers.ratio(0, 1)), self.in_dim)

    # -- forward ------------------------------------------------------------------------------
    def forward_program(self) -> "ConvProgram":
        """The conv2d kind's program over this layer's backend (``numbers.backend``: exact or float64),
        forward only (an activation that is no polynomial is applied by the backend)."""
        return ConvProgram(self.numbers.backend, self, True, forward_only=True)

    def pre_activation(self, X):
        """conv_K(X) + b on a batch (exact: an ``fmpq_mat`` with a column per point; float: a row per
        point): the kind's program (:meth:`ConvProgram.pre_activation`) over the layer's backend."""
        nb = self.numbers
        H = nb.columns(X)
        if H.shape[0] != self.in_dim:
            raise ShapeError(f"{self.label}: inputs of size {H.shape[0]}, expected {self.in_dim}")
        return nb.batch(self.forward_program().pre_activation(H))

    def forward(self, X):
        """Apply the layer to a batch."""
        return self.numbers.activate(self.activation, self.pre_activation(X))

    def parameter_counts(self) -> tuple:
        """(kernel taps, channel biases) in the rank method's parameter vector."""
        return self.shape.out_channels * self.shape.taps, self.shape.out_channels

    def jacobian_program(self, bk, bias: bool) -> "ConvProgram":
        """This layer's forward pass and Jacobian over the backend ``bk`` (:class:`ConvProgram`)."""
        return ConvProgram(bk, self, bias)

    # -- the group on the grids ---------------------------------------------------------------
    def input_geometry(self, pixel) -> tuple:
        """(R, output pixels) for a pixel permutation of the input grid; :class:`NoPartner` (inconclusive)
        when it is not a grid symmetry or the layer's geometry breaks it (stride, padding, size)."""
        H, W = self.shape.height, self.shape.width
        R = grid_transform(list(pixel), H, W)
        if R is None:
            raise NoPartner(f"{self.label}: the pixel action on its input is not a symmetry of the {H}x{W} grid",
                            inconclusive=True)
        pix = self.output_pixels(R)
        if pix is None:
            raise NoPartner(self.geometry_failure(R), inconclusive=True)
        return R, pix

    def transformed_rows(self, P, R: tuple):
        """Kernel rows of theta^g's layer: K'[o, source[c], R_k t] = factor[c] K[o, c, t] (``P`` has
        ``source`` and ``factor``, the channel part of the input action)."""
        perm = tap_permutation(self.shape, list(P.source), R)
        per = self.shape.kh * self.shape.kw
        fac = [P.factor[t // per] for t in range(self.shape.taps)]
        return self.numbers.permute_taps(self.rows, perm, fac)

    def _offset_bias(self, c_in):
        """The per-channel bias b + conv_K(c) for a per-neuron input offset c (constant per channel and,
        for zero padding, only with padding 0: then every output pixel sees the whole kernel)."""
        C, H, W = self.in_shape
        per = self.numbers.channel_constants(c_in, C, H * W)
        if isinstance(per, tuple) and not per:
            return self.channel_bias.copy()
        if per is None:
            raise NoPartner(f"{self.label}: an input offset that is not constant on each channel", inconclusive=True)
        if self.shape.padding and self.shape.padding_mode == "zeros":
            raise NoPartner(f"{self.label}: affine latent actions (offsets of activations odd up to a constant) "
                            "through a zero-padded convolution are not supported", inconclusive=True)
        kk = self.shape.kh * self.shape.kw
        return self.numbers.add_row_products(self.channel_bias, self.rows,
                                             [per[t // kk] for t in range(self.shape.taps)])


@functools.lru_cache(maxsize=64)
def _tap_index(shape: ConvShape) -> tuple:
    """(index, valid) of a conv shape's taps x output pixels (read-only): the input row each tap reads at
    each output pixel, the padding reading the zero row ``in_dim`` appended to a batch."""
    src = shape.source_array()
    idx, valid = np.where(src < 0, shape.in_dim, src), src >= 0
    idx.flags.writeable = valid.flags.writeable = False
    return idx, valid


class ConvProgram:
    """The conv2d kind's forward pass and reverse-mode Jacobian over a number backend (symeq/backends.py).

    The parameters are the kernel taps (one row per output channel, taps in (c, i, j) order), then the
    per-channel biases; the input index of every tap at every output pixel is the layer's ``sources``
    map (padding reads a zero row).  Batches are columns (in x N)."""

    def __init__(self, bk, layer, bias: bool, forward_only: bool = False):
        self.bk, self.bias = bk, bool(bias)
        self.inp, self.out_dim = layer.in_dim, layer.out_dim
        self.co, self.taps = layer.shape.out_channels, layer.shape.taps
        self.npix = self.out_dim // self.co
        self.rows, self.bias_values = layer.rows, layer.channel_bias  # lists of rationals, or float arrays
        self.K, self.KT = bk.weight_operands(self.rows, (self.co, self.taps))
        self.b = bk.asarray(self.bias_values, (self.co,))
        self.idx, self.valid = _tap_index(layer.shape)
        self.act = bk.activation(layer.activation, forward_only)

    affine_plain = False
    #: gathered entries of one block of points in :meth:`pre_activation` (bounded memory)
    BLOCK = 2_000_000

    @property
    def n_params(self) -> int:
        return self.co * self.taps + (self.co if self.bias else 0)

    def values(self) -> list:
        return [x for r in self.rows for x in r] + (list(self.bias_values) if self.bias else [])

    def _product(self, H):
        """(the gathered taps X: taps x npix x N, conv_K(H) + b: out x N): im2col, then one product."""
        bk, N = self.bk, H.shape[1]
        X = bk.take(bk.concat([H, bk.zeros((1, N))], axis=0), self.idx)  # taps x npix x N
        Z = bk.affine_cols(self.K, X.reshape(self.taps, self.npix * N), self.b)  # co x (npix N)
        return X, Z.reshape(self.co * self.npix, N)

    def pre_activation(self, H):
        """conv_K(H) + b on the batch H (in x N), a block of points at a time (:data:`BLOCK`)."""
        N = H.shape[1]
        step = max(1, self.BLOCK // max(self.idx.size, 1))
        if N <= step:
            return self._product(H)[1]
        return self.bk.concat([self._product(H[:, a:a + step])[1] for a in range(0, N, step)], axis=1)

    def forward(self, H, pointwise=None):
        X, Z = self._product(H)
        if pointwise is not None:
            out, S = pointwise(Z)
            return out, (X, S)
        if self.act is None:
            return Z, (X, None)
        c, dc = self.act
        return self.bk.poly(c, Z), (X, self.bk.poly(dc, Z))

    def backward(self, cache, D, J, col: int, need_input: bool):
        bk, (X, S) = self.bk, cache
        N = X.shape[2]
        K = D.shape[0] // N
        D3 = D.reshape(N, K, self.out_dim)
        if S is not None:
            D3 = bk.mul(D3, bk.permute(S, (1, 0))[:, None, :])
        D4 = D3.reshape(N, K, self.co, self.npix)
        width = self.co * self.taps
        for n in range(N):  # d/dK[o, t] = sum_q D[n, k, o, q] X[t, q, n]
            blk = bk.matmul(D4[n].reshape(K * self.co, self.npix), bk.permute(X[:, :, n], (1, 0)))
            J[n * K:(n + 1) * K, col:col + width] = blk.reshape(K, width)
        if self.bias:
            J[:, col + width:col + width + self.co] = bk.sum_last(D4.reshape(N * K * self.co, self.npix)) \
                .reshape(N * K, self.co)
        if not need_input:
            return None
        G = bk.matmul(bk.permute(D4, (0, 1, 3, 2)).reshape(N * K * self.npix, self.co), self.K)  # (N K npix) x taps
        G = G.reshape(N * K, self.npix, self.taps)
        Din = bk.zeros((N * K, self.inp + 1))
        for t in range(self.taps):
            q = np.nonzero(self.valid[t])[0]
            idx = self.idx[t, q]
            if len(np.unique(idx)) != len(idx):  # pragma: no cover - one tap reads each pixel once
                raise ValueError("a tap reads one input pixel twice")
            Din[:, idx] = bk.add(Din[:, idx], G[:, q, t])
        return Din[:, :self.inp]


@dataclass(eq=False)
class ConvLayer(ConvCore):
    """x -> sigma(conv_K(x) + b) with kernels K (C_out x C_in x kh x kw) and per-channel bias b.

    Implements :class:`symeq.layers.base.Layer` (kind ``"conv2d"``).  ``kernel`` is given as a
    nested list (or an array); ``channel_bias`` has one entry per output channel (None: zero).  ``bias``
    and ``weight`` are the dense expansion (per neuron), the latter size-guarded
    (:data:`DENSE_EXPANSION_LIMIT`).  The kind's one class, exact or float by ``backend``: over ``EXACT``
    (the default) the numbers are rationals and a batch an ``fmpq_mat`` with a column per point; over
    ``FLOAT64`` (the float twin, :func:`symeq.layers.conv.floating.NumericConvLayer`) float64 arrays with a
    row per point, matched by linear assignment with its record (a float result never decides).

    >>> from symeq.activations import tanh_series
    >>> layer = ConvLayer(ConvShape(1, 1, 3, 3, 3, 3, padding=1), [[[[0, 1, 0], [1, 2, 1], [0, 1, 0]]]], [1],
    ...                   tanh_series(3))
    >>> a = ConvAction((0,), (fmpq(1),), tuple(ConvAction.rot90_pixels(3)), (3, 3))
    >>> layer.check_action(a, a)[0], layer.label
    (True, 'conv2d 9->9 (1x3x3->1x3x3, k3x3 s1 p1) tanh_series(3)')
    """

    kind: ClassVar[str] = "conv2d"
    #: the kind's float unit (symeq.numeric.models.float_class): its float twin and torch modules
    float_module: ClassVar[str] = "symeq.layers.conv.floating"
    #: what the kind can do (symeq.layers.registry.CAPABILITIES)
    capabilities: ClassVar[frozenset] = frozenset({
        "last-layer", "image-output", "sparse-actions", "channel-reduction", "ball-evaluation", "jacobian-rank",
        "rank-certificate", "dense-expansion", "onnx-export",
        "npz-layout"})
    schema: ClassVar[dict] = {
        "conv2d": (("type", "kernel", "bias", "stride", "padding", "padding_mode", "input_shape", "activation",
                    "dilation", "groups"), ("kernel", "bias")),
        "avgpool2d": (("type", "kernel_size", "stride", "input_shape"), ("type", "kernel_size")),
        "global_avgpool": (("type", "input_shape"), ("type",)),
        "flatten": (("type",), ("type",)),
    }

    shape: ConvShape
    kernel: list
    channel_bias: list | None = None
    activation: Activation | None = None
    # the declared parameter space (symeq.layers.base.declared_biases): False when the layer was given no
    # bias (None): no bias parameters; True: bias parameters (a model file's vector); None: as the model decides
    has_bias: bool | None = None
    #: where the layer's numbers live (symeq.backends; LayerBase): EXACT or FLOAT64
    backend: Backend = field(default=EXACT, repr=False)

    def __post_init__(self):
        if self.channel_bias is None and self.has_bias is None and self.backend.exact:
            self.has_bias = False
        self._init_numbers()

    def on(self, backend) -> "ConvLayer":
        """This layer with its numbers in ``backend`` (an exact layer's float twin: ``on(FLOAT64)``)."""
        if backend is self.backend:
            return self
        if not backend.exact:
            unit = self._float_unit()
            return unit.float_twin(self, unit.float_activation(self.activation))
        raise InputError("a float conv2d layer is made exact by rounding its kernels; on(EXACT) does not choose a "
                         "rounding")

    @classmethod
    def float_twin(cls, layer, activation) -> "ConvLayer":
        """The float twin of an exact conv2d layer: kernels stay kernels (``activation``: its float unit)."""
        return cls._float_unit().float_twin(layer, activation)

    @classmethod
    def _float_unit(cls):
        """The kind's float side (``float_module``), imported by its name when asked: it sits above the exact
        layers (symeq.layers.registry.float_unit)."""
        from ..registry import float_unit

        return float_unit(cls.kind)

    @property
    def bias(self):
        """The dense bias (one entry per output neuron)."""
        if not self.backend.exact:
            return np.repeat(self.channel_bias, self.out_dim // self.shape.out_channels)
        return conv_bias(self.shape, self.channel_bias)

    @property
    def weight(self):
        """The dense expansion (size-guarded): for the dense-only algorithms and tests."""
        if not self.backend.exact:
            return self.dense_weight()
        return self.dense().weight

    def dense(self):
        """The same layer expanded to a :class:`symeq.layers.dense.DenseLayer` (size-guarded)."""
        from ..dense import DenseLayer

        return DenseLayer(self.dense_weight(), self.bias, self.activation, has_bias=self.has_bias)

    def copy(self) -> "ConvLayer":
        if not self.backend.exact:
            return ConvLayer(self.shape, self.kernel.copy(), self.channel_bias.copy(), self.activation,
                             backend=self.backend)
        return ConvLayer(self.shape, self.kernel, list(self.channel_bias), self.activation, self.has_bias)

    def pre_activation(self, X):
        """conv_K(X) + b on a batch (:meth:`ConvCore.pre_activation`); a float layer's large batch runs in
        torch when it is importable (the kind's float side, ``pre_activation``)."""
        if not self.backend.exact:
            return self._float_unit().pre_activation(self, X, super().pre_activation)
        return super().pre_activation(X)

    def torch_modules(self, torch, dtype) -> list:
        """torch modules computing this float layer on flat inputs (NumericModel.to_torch)."""
        return self._float_unit().torch_modules(self, torch, dtype)

    @classmethod
    def joint(cls, layers: list, act, where: str, stacked: bool = False) -> "ConvLayer":
        """Float conv layers joined into one convolution over the concatenated channels (a graph's join node;
        :func:`symeq.layers.conv.floating.joint`)."""
        return cls._float_unit().joint(layers, act, where, stacked)

    _src_array = None

    @property
    def _srca(self) -> np.ndarray:
        """The taps' sources as one array (taps x output pixels, -1 for padding)."""
        if self._src_array is None:
            self._src_array = self.shape.source_array()
        return self._src_array

    def parameters_key(self) -> tuple:
        return (self.shape, tuple(tuple(r) for r in self.rows), tuple(self.channel_bias))

    def __call__(self, x: Sequence) -> list:
        return self.forward(fmpq_mat(len(x), 1, [as_fmpq(v) for v in x])).entries()

    def sparse_action(self, M, side: str):
        """M as a :class:`ConvAction` on the layer's input (``side="in"``) or output, when it is one."""
        return as_conv_action(M, *(self.in_shape if side == "in" else self.out_shape))

    @classmethod
    def from_dense_layer(cls, layer, in_shape: tuple) -> "ConvLayer":
        """A dense layer after a convolution as the convolution with one whole-image kernel per neuron
        (the same function; the declared parameter space stays the layer's)."""
        from ...numbers import mat_rows

        out = cls.from_dense(mat_rows(layer.weight), list(layer.bias), layer.activation, in_shape)
        out.has_bias = layer.has_bias
        return out

    def ball_forward(self, y: list) -> list:
        """The layer on arb balls, through the kernels (sparse rows from the index map, no dense expansion)."""
        from flint import arb

        oh, ow = self.shape.out_hw
        z = []
        for krow, b in zip(self.rows, self.channel_bias):
            taps = [(arb(w), src) for w, src in zip(krow, self.sources) if w != 0]
            for q in range(oh * ow):
                acc = arb(b)
                for w, src in taps:
                    if src[q] >= 0:
                        acc += w * y[src[q]]
                z.append(acc)
        return z if self.activation is None else [self.activation.ball(t) for t in z]

    def to_json(self, declared_bias: bool) -> dict:
        """The model-file object (``symeq.io``): the kernels, never the expansion."""
        from ...numbers import format_vector

        s = self.shape
        return {"type": "conv2d", "input_shape": list(self.in_shape),
                "kernel": [[[format_vector(r) for r in kc] for kc in ko] for ko in self.kernel],
                "bias": format_vector(self.channel_bias) if declared_bias else None, "stride": s.stride,
                "padding": s.padding, "padding_mode": s.padding_mode,
                "activation": None if self.activation is None else self.activation.to_spec()}

    # -- the group on the grids -------------------------------------------------------------
    def _in_action(self, M, what: str = "input") -> ConvAction:
        a = as_conv_action(M, *self.in_shape)
        if a is None:
            raise InputError(f"{self.label}: the action on its {what} is not a channel action times a pixel "
                             f"permutation of {self.in_shape[1]}x{self.in_shape[2]} images; conv2d layers need a "
                             "group acting on images by (signed) permutations of channels and pixels")
        return a

    # -- matching -------------------------------------------------------------------------------
    def match_reference(self, affine: bool = False):
        """theta's side: (canonical keys, scales, {key: [channels]}) of its kernel rows [K_o | b_o - s] (a
        float layer: the rows as one array, the float side's)."""
        from ..dense import canonical_rows

        if self.activation is None:
            return None
        if not self.backend.exact:
            return self._float_unit().match_reference(self)
        keys, scales = canonical_rows(self.rows, self.channel_bias, self.activation, affine=affine)
        index: dict = {}
        for k, key in enumerate(keys):
            index.setdefault(key, []).append(k)
        return keys, scales, index

    def match_action(self, P_in, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """The candidate actions (ConvAction, offset) on the layer's output given y -> P_in y + c_in.

        The pixel part is fixed by the geometry (:meth:`output_pixels`); the channel part matches
        the transformed kernels of theta^g (:meth:`transformed_rows`) with theta's, up to the
        activation's scalings (canonical keys, as :meth:`symeq.layers.dense.DenseLayer.match_action`
        does with rows).  Returns ``(tied, candidates)``; raises :class:`NoPartner`.  A float layer returns
        one candidate with its record (:func:`symeq.layers.conv.floating.match_action`).
        """
        from ..dense import _bijections, _partner_classes, canonical_rows

        if not self.backend.exact:
            return self._float_unit().match_action(self, P_in, c_in, reference=reference)

        if self.activation is None:
            raise InputError("an affine layer's output is acted on by the group itself: check the action "
                             "(check_action), there is nothing to match")
        P = self._in_action(P_in)
        R, pix = self.input_geometry(P.pixel)
        act = self.activation
        U = self.transformed_rows(P, R)
        bias = self._offset_bias(c_in)
        ukeys, uscales = canonical_rows(U, bias, act, affine=affine)
        vkeys, vscales, index = reference if reference is not None else self.match_reference(affine)
        try:
            classes = _partner_classes(ukeys, index, li, "")
        except NoPartner as e:
            raise NoPartner(f"{self.label} (hidden layer {li + 1}): an output channel of theta^g has no partner "
                            f"among theta's channels ({e})") from None
        tied = [(js, index[key]) for key, js in classes.items() if len(js) > 1]
        base = {js[0]: index[key][0] for key, js in classes.items() if len(js) == 1}
        oh, ow = self.shape.out_hw
        npix = oh * ow

        def wrap():
            for rho, offs in _bijections(act, len(U), base, tied, uscales, vscales):
                cols, vals = monomial_parts(rho)
                a = ConvAction(tuple(cols), tuple(vals), pix, (oh, ow))
                yield a, (None if offs is None else [o for o in offs for _ in range(npix)])

        return bool(tied), wrap()

    # -- the exact check ----------------------------------------------------------------------
    def check_action(self, P_in, Q_out, c_in=None, c_out=None) -> tuple[bool, str]:
        """Decide f(P_in x + c_in) = Q_out f(x) + c_out for all real x, exactly.

        Fast path: P_in a grid symmetry times a channel action, Q_out with the output pixels the
        geometry gives; then the identity is one relation per output channel between transformed
        kernels (sufficient).  Otherwise, or when a kernel relation fails, the decision is made
        neuron by neuron on the sparse rows (:meth:`_neuron_check`, necessary and sufficient, as the
        dense check)."""
        if not self.backend.exact:
            raise InputError("a float conv2d layer decides no action (a float result reports its error); check "
                             "the exact layer")
        P = as_conv_action(P_in, *self.in_shape)
        Q = as_conv_action(Q_out, *self.out_shape)
        if P is not None and Q is not None and (c_in is None or self._offsets_fit(c_in)):
            R = P.transform
            pix = None if R is None else self.output_pixels(R)
            if pix is not None and pix == Q.pixel:
                why = self._kernel_check(P, R, Q, c_in, c_out)
                if why is None:
                    C = self.shape.out_channels
                    form = "an affine map of the channels" if self.activation is None else "sigma(K' * x + b)"
                    return True, (f"kernel identities K'[o] = q K[rho(o)] for {C} output channels (transformed "
                                  f"by {P.describe()}), {form}, exactly")
        return self._neuron_check(P_in, Q_out, c_in, c_out)

    def _offsets_fit(self, c_in) -> bool:
        try:
            self._offset_bias(c_in)
            return True
        except NoPartner:
            return False

    def _kernel_check(self, P: ConvAction, R, Q: ConvAction, c_in, c_out) -> str | None:
        from ..dense import neuron_relation

        U = self.transformed_rows(P, R)
        bu = self._offset_bias(c_in)
        npix = Q.pixels
        for o in range(self.shape.out_channels):
            k, q = Q.source[o], Q.factor[o]
            off = [c_out[o * npix + p] for p in range(npix)] if c_out is not None else [0]
            if any(x != off[0] for x in off):
                return "an output offset that is not constant on a channel"
            if self.activation is None:
                if any(x != q * y for x, y in zip(U[o], self.rows[k])) or bu[o] != q * self.channel_bias[k] + off[0]:
                    return f"channel {o}: K'[o] != q K[rho(o)] or b"
                continue
            why = neuron_relation(self.activation, U[o], bu[o], self.rows[k], self.channel_bias[k], q, off[0])
            if why:
                return f"channel {o}: {why}"
        return None

    def _neuron_check(self, P_in, Q_out, c_in, c_out) -> tuple[bool, str]:
        """The decision neuron by neuron on sparse rows (cost: taps x output neurons)."""
        from ..dense import neuron_relation

        n, m = self.in_dim, self.out_dim
        pp = (P_in.monomial() if isinstance(P_in, ConvAction) else
              monomial_parts(P_in) if isinstance(P_in, fmpq_mat) and P_in.nrows() == n else None)
        if pp is None:
            return False, f"{self.label}: the action on its input is not a monomial {n}x{n} matrix"
        qq = (Q_out.monomial() if isinstance(Q_out, ConvAction) else
              monomial_parts(Q_out) if isinstance(Q_out, fmpq_mat) and Q_out.nrows() == m else None)
        if qq is None:
            return False, f"{self.label}: the latent action on its output is not a monomial {m}x{m} matrix"
        pcols, pvals = pp
        qcols, qvals = qq
        if len(pcols) != n or len(qcols) != m:
            return False, f"{self.label}: actions of the wrong size"
        src = self.sources
        npix = len(src[0]) if src else 0
        cin = None if c_in is None or all(x == 0 for x in c_in) else c_in

        def row(j):
            o, q = divmod(j, npix)
            r = {}
            for t, x in enumerate(self.rows[o]):
                s = src[t][q]
                if s >= 0 and x != 0:
                    r[s] = r.get(s, fmpq(0)) + x
            return r

        act = self.activation
        for j in range(m):
            u = row(j)
            bu = self.channel_bias[j // npix] + (sum((x * cin[s] for s, x in u.items()), fmpq(0)) if cin else 0)
            u = {pcols[s]: x * pvals[s] for s, x in u.items()}  # row j of W P: column cols(s) gets W[j, s] vals(s)
            k, qv = qcols[j], qvals[j]
            v = row(k)
            bv = self.channel_bias[k // npix]
            o = c_out[j] if c_out is not None else 0
            keys = sorted(set(u) | set(v))
            uu = [u.get(x, fmpq(0)) for x in keys] or [fmpq(0)]
            vv = [v.get(x, fmpq(0)) for x in keys] or [fmpq(0)]
            if act is None:
                if any(a != qv * b for a, b in zip(uu, vv)) or bu != qv * bv + o:
                    return False, f"neuron {j}: W rho_in != rho_out W or the bias differs"
                continue
            why = neuron_relation(act, uu, bu, vv, bv, qv, o)
            if why:
                return False, f"neuron {j} (channel {j // npix}, pixel {j % npix}): {why}"
        return True, f"sigma(W rho(g) x + b) = rho'(g) sigma(W x + b), {m} neurons on sparse rows, exactly"


def fold_average_pool(kernel_size: int, stride: int | None, in_shape: tuple, next_layer: ConvCore) -> ConvCore:
    """Average pooling (kernel k, stride s, no padding) followed by a convolution as one convolution:
    kernel K'[v] = sum_{s t + u = v} K[t] / k^2, stride s * s_next; padding 0, or k p when the next
    convolution has padding p and the windows tile the image (s = k, sides divisible by k).  Exact for the
    exact layer; the float layer gets the same kernel in floats (the layer's own backend)."""
    k = kernel_size
    sp = k if stride is None else stride
    _posint(k, "pooling kernel_size")
    _posint(sp, "pooling stride")
    nx = next_layer.shape
    C, H, W = in_shape
    pad = 0
    if nx.padding != 0:  # exact only when the windows tile the image: the pooled padding is then padding (docs/onnx.md)
        if not (sp == k and H % k == 0 and W % k == 0):
            raise InputError(f"average pooling (kernel {k}, stride {sp}) on {H}x{W} before a convolution with padding "
                             f"{nx.padding} does not fold exactly: only windows that tile the image (stride = kernel, "
                             "sides divisible by it) keep the pooled padding an average of padding")
        pad = k * nx.padding
    ph, pw = (H - k) // sp + 1, (W - k) // sp + 1
    if (nx.in_channels, nx.height, nx.width) != (C, ph, pw):
        raise ShapeError(f"the layer after the average pooling expects {nx.in_channels}x{nx.height}x{nx.width}, "
                         f"the pooling gives {C}x{ph}x{pw}")
    kh2, kw2 = sp * (nx.kh - 1) + k, sp * (nx.kw - 1) + k
    inv = next_layer.numbers.ratio(1, k * k)
    zero = next_layer.numbers.ratio(0, 1)
    kernel = []
    for o in range(nx.out_channels):
        ko = []
        for c in range(C):
            grid = [[zero] * kw2 for _ in range(kh2)]
            for ti in range(nx.kh):
                for tj in range(nx.kw):
                    w = next_layer.kernel[o][c][ti][tj]
                    if w == 0:
                        continue
                    for ui in range(k):
                        for uj in range(k):
                            grid[sp * ti + ui][sp * tj + uj] += w * inv
            ko.append(grid)
        kernel.append(ko)
    # the pooled grid must be covered the same way: rows beyond the last pooling window are unread
    shape = ConvShape(C, nx.out_channels, H, W, kh2, kw2, stride=sp * nx.stride, padding=pad, padding_mode=nx.padding_mode)
    if shape.out_hw != nx.out_hw:
        raise ShapeError("average pooling folded into the next convolution changes the output size")
    out = type(next_layer)(shape, kernel, next_layer.channel_bias.copy(), next_layer.activation)
    if hasattr(next_layer, "has_bias"):  # the declared parameter space is the next layer's
        out.has_bias = next_layer.has_bias
    return out


# -- the model file (symeq.layers.registry.read_layers) ----------------------------------------------

def _image_shape(spec: dict, n: int, shape, at: str) -> tuple:
    given = spec.get("input_shape")
    if given is not None:
        if (not isinstance(given, list) or len(given) != 3
                or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in given)):
            raise InputError(f"{at}.input_shape must be [channels, height, width] (positive integers)")
        if shape is not None and tuple(given) != tuple(shape):
            raise ShapeError(f"{at}.input_shape {given} differs from the previous layer's output shape {list(shape)}")
        shape = tuple(given)
    if shape is None:
        raise InputError(f"{at}: a {spec.get('type')} layer needs \"input_shape\": [channels, height, width]")
    C, H, W = shape
    if C * H * W != n:
        raise ShapeError(f"{at}.input_shape {[C, H, W]} has {C * H * W} entries, but the layer's input has {n}")
    return shape


def read_flatten(spec: dict, ctx, at: str):
    """``"flatten"``: (C, H, W) is stored flattened already (channel-major, row-major): nothing to read."""
    from ...schema import check_keys

    check_keys(spec, at, *ConvLayer.schema["flatten"], error=InputError)
    return None


def read_image_layer(spec: dict, ctx, at: str):
    """A layer on images (``conv2d``, pooling, or a dense layer after a convolution) as a native
    :class:`ConvLayer` (kernels kept, never expanded); updates ``ctx`` (shape, size, pending pooling).

    Average pooling is folded exactly into the next layer (:func:`fold_average_pool`); a dense layer
    after a convolution (after a ``flatten``) is the convolution with a whole-image kernel
    (:meth:`ConvLayer.from_dense`); max pooling is a kind of its own (:mod:`symeq.layers.pooling`).
    """
    if ctx.tokens is not None:
        raise InputError(f"{at}: a {spec['type']} layer cannot follow an attention layer")
    layer, ctx.shape, ctx.pool = _read_image(spec, ctx.n, ctx.shape, at, ctx.pool)
    ctx.takes_over["dense"] = read_image_layer  # a dense layer after it: a whole-image kernel per neuron
    ctx.n = ctx.shape[0] * ctx.shape[1] * ctx.shape[2]  # after a pooling: the pooled size
    return layer


def _read_image(spec: dict, n: int, shape, at: str, pool=None):
    from ...activations import activation_from_spec
    from ...numbers import mat_rows, parse_matrix, parse_vector
    from ...schema import check_keys
    from ...sizes import check_width

    keys = ConvLayer.schema
    kind = spec.get("type", "dense")
    if kind == "group_maxpool":
        raise InputError(f"{at}: \"group_maxpool\" is spelled {{\"type\": \"group_pool\", \"field_size\": n}} "
                         "(escnn's GroupPooling over regular fields of n channels; docs/conv.md)")
    if pool is not None and pool[0] == "global" and kind != "dense":
        raise InputError(f"{at}: a global average pooling must be followed by a dense layer")
    if kind == "avgpool2d":
        check_keys(spec, at, *keys["avgpool2d"], error=InputError)
        shape = _image_shape(spec, n, shape, at)
        k, st = spec.get("kernel_size"), spec.get("stride", spec.get("kernel_size"))
        for name, v in (("kernel_size", k), ("stride", st)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InputError(f"{at}.{name} must be a positive integer, got {v!r}")
        if pool is not None:
            raise InputError(f"{at}: two pooling layers in a row are not supported")
        C, H, W = shape
        if k > min(H, W):
            raise ShapeError(f"{at}: a {k}x{k} pooling does not fit {H}x{W} images")
        return None, (C, (H - k) // st + 1, (W - k) // st + 1), ("avg", k, st, shape)
    if kind == "global_avgpool":
        check_keys(spec, at, *keys["global_avgpool"], error=InputError)
        shape = _image_shape(spec, n, shape, at)
        if pool is not None:
            raise InputError(f"{at}: two pooling layers in a row are not supported")
        return None, (shape[0], 1, 1), ("global", shape)
    act = None
    if kind == "dense":  # after a convolution: a whole-image kernel per neuron
        from ..dense import DenseLayer

        check_keys(spec, at, *DenseLayer.schema["dense"], error=InputError)
        C, H, W = shape
        if isinstance(spec["weight"], list):
            check_width(len(spec["weight"]), f"{at}.weight (neurons)")
        Wm = parse_matrix(spec["weight"], f"{at}.weight", shape=(None, C * H * W))
        bias = spec.get("bias")
        b = None if bias is None else parse_vector(bias, f"{at}.bias", length=Wm.nrows())
        act = activation_from_spec(spec.get("activation"), f"{at}.activation")
        rows = mat_rows(Wm)
        if pool is not None and pool[0] == "global":  # mean over pixels, then W: W[o, c] / (H W) at every pixel
            C, H, W = pool[1]
            rows = [[x / (H * W) for x in r for _ in range(H * W)] for r in rows]
            shape, pool = pool[1], None
        layer = ConvLayer.from_dense(rows, b, act, shape)
        layer.has_bias = b is not None
    else:
        check_keys(spec, at, *keys["conv2d"], error=InputError)
        shape = _image_shape(spec, n, shape, at)
        for name in ("dilation", "groups"):
            v = spec.get(name, 1)
            if v not in (1, [1, 1]):
                raise InputError(f"{at}.{name} = {v!r}: only {name} 1 is supported for conv2d layers")
        C, H, W = shape
        kernel = spec.get("kernel")
        if (not isinstance(kernel, list) or not kernel or not isinstance(kernel[0], list) or not kernel[0]
                or not isinstance(kernel[0][0], list) or not kernel[0][0] or not isinstance(kernel[0][0][0], list)):
            raise InputError(f"{at}.kernel must be a nested list out_channels x in_channels x kh x kw")
        conv = ConvShape(C, len(kernel), H, W, len(kernel[0][0]), len(kernel[0][0][0]),
                         stride=spec.get("stride", 1), padding=spec.get("padding", 0),
                         padding_mode=spec.get("padding_mode", "zeros"))
        oh, ow = conv.out_hw
        check_width(conv.out_channels * oh * ow, f"{at}: conv2d output (channels x height x width)")
        parsed = []
        for o, ko in enumerate(kernel):
            if not isinstance(ko, list) or len(ko) != C:
                raise ShapeError(f"{at}.kernel[{o}] must have {C} input channels")
            parsed.append([mat_rows(parse_matrix(kc, f"{at}.kernel[{o}][{c}]", shape=(conv.kh, conv.kw)))
                           for c, kc in enumerate(ko)])
        bias = spec.get("bias")
        b = None if bias is None else parse_vector(bias, f"{at}.bias", length=conv.out_channels)
        act = activation_from_spec(spec.get("activation"), f"{at}.activation")
        layer = ConvLayer(conv, parsed, b, act, has_bias=b is not None)
    if pool is not None:  # ("avg", k, stride, shape before pooling)
        try:
            layer = fold_average_pool(pool[1], pool[2], pool[3], layer)
        except InputError as e:
            raise InputError(f"{at}: {e}") from None
    return layer, layer.out_shape, None


LAYER_KINDS = (ConvLayer,)
JSON_READERS = {"conv2d": read_image_layer, "avgpool2d": read_image_layer, "global_avgpool": read_image_layer,
                "group_maxpool": read_image_layer, "flatten": read_flatten}
JSON_ADVERTISED = ("conv2d", "flatten")


# -- the digest form (docs/certificates.md "Digests"; symeq.digest asks the registry) ---------------------

def conv_digest_form(spec: dict, shape):
    """A conv2d: input_shape, stride, padding and padding_mode written, dilation/groups of 1 dropped."""
    layer, _ = plain_form(spec, shape)
    if spec.get("input_shape") is not None:
        shape = [int(v) for v in spec["input_shape"]]
    stride, padding = int(spec.get("stride", 1)), int(spec.get("padding", 0))
    for key in ("dilation", "groups"):
        if layer.get(key) in ("1", ["1", "1"]):
            del layer[key]
    layer.update(input_shape=[str(v) for v in shape], stride=str(stride), padding=str(padding),
                 padding_mode=spec.get("padding_mode", "zeros"))
    kh, kw = len(spec["kernel"][0][0]), len(spec["kernel"][0][0][0])
    return layer, [len(spec["kernel"]), (shape[1] + 2 * padding - kh) // stride + 1,
                   (shape[2] + 2 * padding - kw) // stride + 1]


def dense_after_image_digest_form(spec: dict, shape):
    """A dense layer after an image: the convolution with a whole-image kernel (conv2d's reading of it)."""
    C, H, W = shape
    conv = {"type": "conv2d", "input_shape": shape, "bias": spec.get("bias"),
            "kernel": [[[row[(c * H + i) * W:(c * H + i + 1) * W] for i in range(H)] for c in range(C)]
                       for row in spec["weight"]],
            "stride": 1, "padding": 0, "padding_mode": "zeros", "activation": spec.get("activation")}
    return conv_digest_form(conv, shape)


DIGEST_FORMS = {"conv2d": Form(conv_digest_form, image=True), "flatten": Form(drop_form)}
DIGEST_AFTER_IMAGE = {"dense": Form(dense_after_image_digest_form)}
