"""The float twin of the conv2d layer: the same kernels, geometry and matching, in numpy.

:class:`NumericConvLayer` (kind ``"conv2d"``) is :class:`symeq.layers.conv.ConvLayer` over floats: both
derive from :class:`symeq.layers.conv.ConvGeometry` (shapes, names, the index map, the pixel geometry),
and the index maps (``ConvShape.sources``, :func:`symeq.layers.conv.tap_permutation`,
:func:`symeq.layers.conv.output_pixels`) are the exact layer's; only the arithmetic differs.  Its
actions are :class:`symeq.numeric.monomial.MonomialAction` on the whole space (C x H x W entries,
linear memory); matching compares the C_out transformed kernels with theta's by linear assignment,
with residuals and a margin, as a float dense layer compares its rows.  A float result reports its
error; it never decides.

Examples
--------
>>> from symeq.layers.conv import ConvShape
>>> from symeq.numeric.models import numeric_activation
>>> k = np.array([[[[0., 1, 0], [1, 2, 1], [0, 1, 0]]]])
>>> layer = NumericConvLayer(ConvShape(1, 1, 3, 3, 3, 3, padding=1), k, np.ones(1), numeric_activation("tanh"))
>>> rot = MonomialAction(np.array([6, 3, 0, 7, 4, 1, 8, 5, 2]), np.ones(9))
>>> _, [(rho, rec)] = layer.match_action(rot)
>>> rho.cols.tolist() == rot.cols.tolist(), rec[0] < 1e-12
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import InputError, LimitExceeded, ShapeError
from ..layers.base import NoPartner
from ..layers.conv import (DENSE_EXPANSION_LIMIT, ConvGeometry, ConvShape, dense_rows, geometry_failure,
                           grid_transform, output_pixels, tap_permutation)
from .match import _latent_action, _match_layer
from .monomial import MonomialAction, as_action

__all__ = ["NumericConvLayer", "channel_pixel_parts", "fold_average_pool_float"]


def _transform_name(R) -> str:
    from ..layers.conv import _NAMES

    return _NAMES.get(R, "a pixel permutation")


def channel_pixel_parts(P: MonomialAction, channels: int, h: int, w: int):
    """(source, factor, pixel) of a monomial action that is a channel action times a pixel
    permutation on (channels, h, w), else None."""
    npix = h * w
    if P.n != channels * npix:
        return None
    cols = P.cols.reshape(channels, npix)
    vals = P.vals.reshape(channels, npix)
    pixel = cols[0] % npix
    source = cols[:, 0] // npix
    if not np.array_equal(cols, source[:, None] * npix + pixel[None, :]) or np.any(vals != vals[:, :1]):
        return None
    return source, vals[:, 0], pixel


@dataclass(eq=False)
class NumericConvLayer(ConvGeometry):
    """x -> sigma(conv_K(x) + b) with float kernels K (C_out x C_in x kh x kw) and per-channel bias b.

    A float layer of kind ``"conv2d"`` (:class:`symeq.layers.base.LayerBase`).  ``bias`` and ``weight``
    are the dense expansion (per neuron; ``weight`` size-guarded)."""

    kind: ClassVar[str] = "conv2d"

    shape: ConvShape
    kernel: np.ndarray
    channel_bias: np.ndarray | None = None
    activation: object = None

    def __post_init__(self):
        s = self.shape
        self.kernel = np.asarray(self.kernel, dtype=np.float64)
        if self.kernel.shape != (s.out_channels, s.in_channels, s.kh, s.kw):
            raise ShapeError(f"conv2d: the kernel has shape {self.kernel.shape}, expected "
                             f"{(s.out_channels, s.in_channels, s.kh, s.kw)}")
        self.channel_bias = (np.zeros(s.out_channels) if self.channel_bias is None
                             else np.asarray(self.channel_bias, dtype=np.float64).reshape(-1))
        if self.channel_bias.shape != (s.out_channels,):
            raise ShapeError(f"conv2d: bias has length {self.channel_bias.shape[0]}, expected {s.out_channels}")
        if not (np.all(np.isfinite(self.kernel)) and np.all(np.isfinite(self.channel_bias))):
            raise InputError("a layer has NaN or infinite weights; numeric models need finite parameters")
        self.rows = self.kernel.reshape(s.out_channels, -1)

    @classmethod
    def from_dense(cls, W: np.ndarray, b, activation, in_shape: tuple) -> "NumericConvLayer":
        """A dense layer on (C, H, W) inputs as the convolution with a whole-image kernel (output 1 x 1)."""
        C, H, Wd = in_shape
        W = np.asarray(W, dtype=np.float64)
        return cls(ConvShape(C, W.shape[0], H, Wd, H, Wd), W.reshape(W.shape[0], C, H, Wd), b, activation)

    @classmethod
    def from_exact(cls, layer, activation) -> "NumericConvLayer":
        k = np.array([[[[float(x) for x in r] for r in kc] for kc in ko] for ko in layer.kernel])
        return cls(layer.shape, k, np.array([float(x) for x in layer.channel_bias]), activation)

    _src_array = None

    @property
    def _srca(self) -> np.ndarray:
        if self._src_array is None:
            self._src_array = np.array(self.sources, dtype=np.int64)
        return self._src_array

    @property
    def bias(self) -> np.ndarray:
        return np.repeat(self.channel_bias, self.out_dim // self.shape.out_channels)

    @property
    def weight(self) -> np.ndarray:
        n = self.in_dim * self.out_dim
        if n > DENSE_EXPANSION_LIMIT:
            raise LimitExceeded(f"expanding the {self.label} layer to a dense matrix ({n} entries) exceeds "
                                f"{DENSE_EXPANSION_LIMIT}; this step is written for dense layers only")
        return np.array(dense_rows(self.shape, self.kernel, 0.0), dtype=np.float64)

    def copy(self) -> "NumericConvLayer":
        return NumericConvLayer(self.shape, self.kernel.copy(), self.channel_bias.copy(), self.activation)

    # -- forward -------------------------------------------------------------------------------
    def pre_activation(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        n = X.shape[1]
        if n != self.in_dim:
            raise ShapeError(f"{self.label}: inputs of size {n}, expected {self.in_dim}")
        src = np.where(self._srca >= 0, self._srca, n)  # the padding reads an appended zero
        out = np.empty((X.shape[0], self.out_dim))
        step = max(1, 2_000_000 // max(src.size, 1))  # bounded memory: points per block
        for a in range(0, X.shape[0], step):
            Xp = np.concatenate([X[a:a + step], np.zeros((X[a:a + step].shape[0], 1))], axis=1)
            Z = np.einsum("ot,ntq->noq", self.rows, Xp[:, src]) + self.channel_bias[None, :, None]
            out[a:a + step] = Z.reshape(Z.shape[0], -1)
        return out

    def forward(self, X: np.ndarray) -> np.ndarray:
        """Apply the layer to a batch (one row per point)."""
        Z = self.pre_activation(X)
        return Z if self.activation is None else self.activation(Z)

    # -- matching ------------------------------------------------------------------------------
    def match_reference(self, affine: bool = False):
        if self.activation is None:
            return None
        return np.hstack([self.rows, (self.channel_bias - self.activation.shift)[:, None]])

    def match_action(self, P_in, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """The action on the layer's output given y -> P_in y + c_in, with its record: theta^g's
        transformed kernels matched to theta's by linear assignment, the pixels from the geometry.

        Returns ``(False, [(rho, (max residual, median residual, margin, how))])``."""
        act = self.activation
        if act is None:
            raise InputError("an affine layer's output is acted on by the group itself: there is nothing to match")
        P = as_action(P_in)
        if not isinstance(P, MonomialAction):
            raise NoPartner(f"{self.label}: the action on its input is not monomial", inconclusive=True)
        parts = channel_pixel_parts(P, *self.in_shape)
        if parts is None:
            raise NoPartner(f"{self.label}: the action on its input is not a channel action times a pixel "
                            "permutation", inconclusive=True)
        source, factor, pixel = parts
        R = grid_transform(pixel.tolist(), self.shape.height, self.shape.width)
        if R is None:
            raise NoPartner(f"{self.label}: the pixel action on its input is not a symmetry of the grid",
                            inconclusive=True)
        pix = output_pixels(self.shape, R)
        if pix is None:
            raise NoPartner(geometry_failure(self.label, self.shape, R), inconclusive=True)
        perm = np.array(tap_permutation(self.shape, source.tolist(), R))
        per = self.shape.kh * self.shape.kw
        fac = np.repeat(factor, per)
        U = np.zeros_like(self.rows)
        U[:, perm] = self.rows * fac[None, :]
        bias = self.channel_bias.copy()
        off = P.offset if c_in is None else np.asarray(c_in, dtype=np.float64)
        if off is not None and np.any(off != 0):
            per_ch = off.reshape(self.shape.in_channels, -1)
            if np.any(per_ch != per_ch[:, :1]) or (self.shape.padding and self.shape.padding_mode == "zeros"):
                raise NoPartner(f"{self.label}: affine latent actions through a zero-padded convolution are not "
                                "supported", inconclusive=True)
            bias = bias + self.rows @ np.repeat(per_ch[:, 0], per)
        V = self.match_reference() if reference is None else reference
        pi, alpha, rel, margin = _match_layer(np.hstack([U, (bias - act.shift)[:, None]]), V, act)
        ch = _latent_action(act, pi, alpha)
        npix = len(pix)
        pixa = np.array(pix, dtype=np.int64)
        cols = (pi[:, None] * npix + pixa[None, :]).ravel()
        rho = MonomialAction(cols, np.repeat(ch.vals, npix), None if ch.offset is None else np.repeat(ch.offset, npix))
        # the sparse form for reports: channel action (x) pixel permutation (docs/conv.md)
        rho.channel_pixel = {"source": [int(c) for c in pi], "factor": [float(v) for v in ch.vals],
                             "pixels": list(pix), "height": self.shape.out_hw[0], "width": self.shape.out_hw[1],
                             "transform": _transform_name(R)}
        how = f"{act.latent_group} of channels (x) pixel permutation, linear assignment on kernels"
        return False, [(rho, (float(rel.max()), float(np.median(rel)), margin, how))]


def fold_average_pool_float(k: int, stride: int, in_shape: tuple, layer) -> NumericConvLayer:
    """Average pooling (k x k, the given stride, no padding) on ``in_shape`` followed by ``layer`` (a conv
    with padding 0, or a whole-image kernel) as one convolution, in floats (as
    :func:`symeq.layers.conv.fold_average_pool` does exactly)."""
    nx = layer.shape
    if nx.padding != 0:
        raise InputError("average pooling before a padded convolution is not supported (only padding 0 folds exactly)")
    C, H, W = in_shape
    kh2, kw2 = stride * (nx.kh - 1) + k, stride * (nx.kw - 1) + k
    K = np.zeros((nx.out_channels, C, kh2, kw2))
    for ti in range(nx.kh):
        for tj in range(nx.kw):
            K[:, :, stride * ti:stride * ti + k, stride * tj:stride * tj + k] += layer.kernel[:, :, ti:ti + 1, tj:tj + 1] / (k * k)
    shape = ConvShape(C, nx.out_channels, H, W, kh2, kw2, stride=stride * nx.stride, padding=0)
    if shape.out_hw != nx.out_hw:
        raise ShapeError("average pooling folded into the next convolution changes the output size")
    return NumericConvLayer(shape, K, layer.channel_bias, layer.activation)
