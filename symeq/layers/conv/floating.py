"""The float side of the conv2d kind: its float twin, torch modules, and the float matching of actions.

A float conv layer is the kind's one class, :class:`symeq.layers.conv.ConvLayer`, over float64
(``backend=FLOAT64``, built by :func:`NumericConvLayer`; numpy numbers, :mod:`symeq.layers.conv.numbers`):
the forward pass, the dense expansion, the grid geometry of an action, the transformed kernels of
theta^g, the offset bias and pooling are written once there.  Its
actions are :class:`symeq.numeric.monomial.MonomialAction` on the whole space (C x H x W entries,
linear memory); matching compares the C_out transformed kernels with theta's by linear assignment,
with residuals and a margin, as a float dense layer compares its rows.  A float result reports its
error; it never decides.

Below the layer: the exact folds of average pooling into a neighbouring convolution (written once over
:class:`FloatFold` and :class:`ExactFold`, so the ONNX reader and ``from_torch`` fold the same way on the
float and the exact path; the rule for a padded convolution is at :func:`pool_before_conv`), and the
convolution's matrix in sparse form (:func:`sparse_weight`, :func:`sparse_commutator_residual`: the
last-layer check of an output convolution without the dense expansion).

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

from typing import NamedTuple

import numpy as np

from ...backends import FLOAT64
from ...errors import InputError
from ..base import NoPartner
from . import ConvLayer, ConvShape, fold_average_pool
from ...numeric.match import _latent_action, _match_layer
from ...numeric.monomial import MonomialAction, as_action

__all__ = ["NumericConvLayer", "FLOAT_LAYERS", "float_twin", "joint", "match_action", "match_reference",
           "pre_activation", "torch_modules", "channel_pixel_parts", "fold_average_pool_float", "FloatFold", "ExactFold",
           "pool_before_conv", "pool_after_conv", "fold_pool_into_kernel", "fold_pool_after_kernel",
           "fold_pool_into_dense", "sparse_entries", "sparse_weight", "sparse_commutator_residual"]


def _transform_name(R) -> str:
    from . import _NAMES

    return _NAMES.get(R, "a pixel permutation")


def _channel_cycles(source, factor) -> str | None:
    """The channel action as cycles (symeq/notation.py; factors to 4 digits), None if not a permutation."""
    from ...notation import format_cycles

    fac = [1 if v == 1 else -1 if v == -1 else f"{v:.4g}" for v in (float(x) for x in factor)]
    try:
        return format_cycles([int(c) for c in source], fac)
    except ValueError:
        return None


class _Channels(NamedTuple):
    """The channel part of an input action (what :meth:`ConvCore.transformed_rows` reads)."""

    source: list
    factor: list


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


def NumericConvLayer(shape: ConvShape, kernel, channel_bias=None, activation=None) -> ConvLayer:  # noqa: N802
    """x -> sigma(conv_K(x) + b) over float64: the kind's one class, :class:`symeq.layers.conv.ConvLayer`, with
    ``backend=FLOAT64`` (float kernels K, C_out x C_in x kh x kw, per-channel bias b; ``activation`` a float
    unit, None for affine).  The name is the float model's (symeq.numeric) constructor."""
    return ConvLayer(shape, kernel, channel_bias, activation, backend=FLOAT64)


def float_activation(act):
    """The float unit of an exact activation (None stays None)."""
    from ...activations.floating import activation_from_exact

    return None if act is None else activation_from_exact(act)


def float_twin(layer, activation) -> ConvLayer:
    """The float twin of an exact conv2d layer: kernels stay kernels (``activation``: its float unit)."""
    k = np.array([[[[float(x) for x in r] for r in kc] for kc in ko] for ko in layer.kernel])
    return NumericConvLayer(layer.shape, k, np.array([float(x) for x in layer.channel_bias]), activation)


def torch_modules(layer, torch, dtype) -> list:
    """torch modules computing a float conv layer on flat inputs: its dense matrix as a Linear, then the
    activation (NumericModel.to_torch)."""
    from ...numeric.torch_backend import linear_torch_modules

    return linear_torch_modules(layer, torch, dtype)


def joint(layers: list, act, where: str, stacked: bool = False) -> ConvLayer:
    """sum_i K_i * x_i + b (or, ``stacked``, every K_i * x_i + b_i one under the other: a concatenation) of
    float conv layers as one convolution over the concatenated channels, the kernels placed in one common
    window; with the activation ``act`` (a graph's join node, symeq/numeric/graph.py; docs/graphs.md)."""
    from ...sizes import check_memory

    sh = [l.shape for l in layers]
    if len({(s.stride, s.height, s.width, s.padding_mode, s.out_hw) + (() if stacked else (s.out_channels,))
            for s in sh}) != 1 or sh[0].padding_mode != "zeros":
        raise NoPartner(f"node {where}: the convolutions joined differ in stride, grid, channels or padding mode")
    P = max(s.padding for s in sh)
    kh, kw = P + max(s.kh - 1 - s.padding for s in sh) + 1, P + max(s.kw - 1 - s.padding for s in sh) + 1
    out = sum(s.out_channels for s in sh) if stacked else sh[0].out_channels
    shape = ConvShape(sum(s.in_channels for s in sh), out, sh[0].height, sh[0].width, kh, kw,
                      stride=sh[0].stride, padding=P)
    if shape.out_hw != sh[0].out_hw:
        raise NoPartner(f"node {where}: the convolutions joined read windows that do not line up")
    check_memory(8 * shape.out_channels * shape.in_channels * kh * kw,
                 f"node {where}: the joint kernels of its inputs")
    K, at, ot = np.zeros((shape.out_channels, shape.in_channels, kh, kw)), 0, 0
    for l, s in zip(layers, sh):
        o = P - s.padding
        rows = slice(ot, ot + s.out_channels) if stacked else slice(None)
        K[rows, at:at + s.in_channels, o:o + s.kh, o:o + s.kw] = l.kernel
        at, ot = at + s.in_channels, ot + (s.out_channels if stacked else 0)
    bias = np.concatenate([l.channel_bias for l in layers]) if stacked else sum(l.channel_bias for l in layers)
    return NumericConvLayer(shape, K, bias, act)


def pre_activation(layer, X, numpy_pre_activation):
    """conv_K(X) + b of a float layer on a batch (a row per point): torch's conv2d in float64 when torch is
    importable and the batch is large (:data:`TORCH_MIN_WORK` multiply-adds), else the numpy im2col product
    ``numpy_pre_activation`` (:class:`symeq.layers.conv.numbers.NumpyNumbers`).  Both are float64; they agree
    to rounding (their summation orders differ; tests/numeric/test_vectorised_taps.py)."""
    X = np.asarray(X, dtype=np.float64)
    work = X.shape[0] * layer.out_dim * layer.shape.taps if X.ndim == 2 else 0
    if work < TORCH_MIN_WORK or X.shape[1] != layer.in_dim:
        return numpy_pre_activation(X)
    try:
        import torch
    except ImportError:
        return numpy_pre_activation(X)
    return conv_forward_torch(torch, layer, X)


# -- matching ------------------------------------------------------------------------------------

def match_reference(layer):
    """theta's kernel rows [K_o | b_o - s] as one array (None for an affine layer)."""
    if layer.activation is None:
        return None
    return np.hstack([layer.rows, (layer.channel_bias - layer.activation.shift)[:, None]])


def match_action(layer, P_in, c_in=None, *, reference=None):
    """The action on a float conv layer's output given y -> P_in y + c_in, with its record: theta^g's
    transformed kernels matched to theta's by linear assignment, the pixels from the geometry.

    Returns ``(False, [(rho, (max residual, median residual, margin, how))])``."""
    act = layer.activation
    if act is None:
        raise InputError("an affine layer's output is acted on by the group itself: there is nothing to match")
    P = as_action(P_in)
    if not isinstance(P, MonomialAction):
        raise NoPartner(f"{layer.label}: the action on its input is not monomial", inconclusive=True)
    parts = channel_pixel_parts(P, *layer.in_shape)
    if parts is None:
        raise NoPartner(f"{layer.label}: the action on its input is not a channel action times a pixel "
                        "permutation", inconclusive=True)
    source, factor, pixel = parts
    R, pix = layer.input_geometry(pixel.tolist())
    U = layer.transformed_rows(_Channels(source.tolist(), factor.tolist()), R)
    bias = layer._offset_bias(P.offset if c_in is None else c_in)
    V = match_reference(layer) if reference is None else reference
    pi, alpha, rel, margin = _match_layer(np.hstack([U, (bias - act.shift)[:, None]]), V, act)
    ch = _latent_action(act, pi, alpha)
    npix = len(pix)
    pixa = np.array(pix, dtype=np.int64)
    cols = (pi[:, None] * npix + pixa[None, :]).ravel()
    rho = MonomialAction(cols, np.repeat(ch.vals, npix), None if ch.offset is None else np.repeat(ch.offset, npix))
    # the sparse form for reports: channel action (x) pixel permutation (docs/conv.md)
    rho.channel_pixel = {"source": [int(c) for c in pi], "factor": [float(v) for v in ch.vals],
                         "pixels": list(pix), "height": layer.shape.out_hw[0], "width": layer.shape.out_hw[1],
                         "transform": _transform_name(R), "cycles": _channel_cycles(pi, ch.vals)}
    how = f"{act.latent_group} of channels (x) pixel permutation, linear assignment on kernels"
    return False, [(rho, (float(rel.max()), float(np.median(rel)), margin, how))]


TORCH_MIN_WORK = 20_000_000
"""Multiply-adds of a batch from which a float convolution runs in torch (below: numpy)."""

TORCH_BLOCK = 16_000_000
"""Floats of one block of points' outputs in :func:`conv_forward_torch` (bounded memory)."""


def conv_forward_torch(torch, layer, X: np.ndarray) -> np.ndarray:
    """conv_K(X) + b of a float conv layer in torch (float64), a block of points at a time; the
    layout is symeq's (channel, row, column), circular padding by wrapping as the layer's sources do."""
    S = layer.shape
    F = torch.nn.functional
    K = torch.from_numpy(np.ascontiguousarray(layer.kernel, dtype=np.float64))
    b = torch.from_numpy(np.ascontiguousarray(layer.channel_bias, dtype=np.float64))
    out = np.empty((X.shape[0], layer.out_dim))
    step = max(1, TORCH_BLOCK // max(layer.out_dim + layer.in_dim * S.kh * S.kw, 1))
    with torch.no_grad():
        for a in range(0, X.shape[0], step):
            x = torch.from_numpy(np.ascontiguousarray(X[a:a + step])).reshape(-1, S.in_channels, S.height, S.width)
            if S.padding_mode == "circular" and S.padding:
                x = F.pad(x, (S.padding,) * 4, mode="circular")
                z = F.conv2d(x, K, b, stride=S.stride)
            else:
                z = F.conv2d(x, K, b, stride=S.stride, padding=S.padding)
            out[a:a + step] = z.reshape(z.shape[0], -1).numpy()
    return out


def fold_average_pool_float(k: int, stride: int, in_shape: tuple, layer) -> ConvLayer:
    """Average pooling (k x k, the given stride, no padding) on ``in_shape`` followed by ``layer`` as one
    convolution in floats: :func:`symeq.layers.conv.fold_average_pool` on the float layer."""
    return fold_average_pool(k, stride, in_shape, layer)


# -- exact folds of average pooling and per-channel affine maps into convolutions ----------------
#
# Written once over two number kinds (the float twin's float64, the exact path's python-flint
# rationals in numpy object arrays), so that the ONNX reader and from_torch fold the same way on
# both paths.  Average pooling (kernel kh x kw, stride sh x sw, no padding of its own) is linear:
#
# * before a convolution (kernel k, stride s, padding p): the composite reads input pixel
#   s_p (s t + ...) ..., i.e. the kernel K'[v] = sum_{s_p t + u = v} K[t] / (kh kw) of size
#   s_p (k - 1) + k_p and stride s_p s.  With p = 0 that is exact on any grid.  With p > 0 the
#   pooled grid's zero padding must be the average of input pixels that are all padding: exact iff
#   the windows tile the image (stride = kernel, H and W divisible by it); then the composite has
#   padding k_p p.  Example: a 2 x 2 pooling (stride 2) before a 5 x 5 convolution with padding 2 on
#   28 x 28 is one 10 x 10 convolution with stride 2 and padding 4.  Overlapping windows
#   (stride < kernel) or a remainder row would average real pixels into what must be padding: refused.
# * after a convolution (before its activation): K'[v] = sum_{s u + t = v} K[t] / (kh kw), size
#   k + s (k_p - 1), stride s s_p, the same padding: always exact (every pooled pixel is a real output).

class FloatFold:
    """float64 numbers of a fold (the float twin)."""

    exact = False

    @staticmethod
    def arr(x):
        return np.array(x, dtype=np.float64)

    @staticmethod
    def ratio(a: int, b: int):
        return a / b

    @staticmethod
    def zeros(shape):
        return np.zeros(shape)


class ExactFold:
    """Exact numbers of a fold: every float read as the dyadic rational it is (python-flint fmpq in
    numpy object arrays)."""

    exact = True

    @staticmethod
    def arr(x):
        from fractions import Fraction

        from flint import fmpq

        a = np.asarray(x)
        if a.dtype == object:
            return a.copy()

        def q(v):
            f = Fraction(float(v))  # exact: every float is a dyadic rational
            return fmpq(f.numerator, f.denominator)

        out = np.empty(a.shape, dtype=object)
        flat = out.reshape(-1)
        for i, v in enumerate(a.reshape(-1).tolist()):
            flat[i] = q(v)
        return out

    @staticmethod
    def ratio(a: int, b: int):
        from flint import fmpq

        return fmpq(a, b)

    @staticmethod
    def zeros(shape):
        from flint import fmpq

        return np.full(shape, fmpq(0), dtype=object)


def _spread(K, N, axis: int, stride_k: int, step: int, count: int):
    """R[..., stride_k t + step a, ...] += K[..., t, ...] for a < count, along ``axis``."""
    n = K.shape[axis]
    size = stride_k * (n - 1) + step * (count - 1) + 1
    shape = list(K.shape)
    shape[axis] = size
    R = N.zeros(tuple(shape))
    for a in range(count):
        idx = [slice(None)] * K.ndim
        idx[axis] = slice(step * a, step * a + stride_k * (n - 1) + 1, stride_k)
        R[tuple(idx)] = R[tuple(idx)] + K
    return R


def pool_before_conv(pool: tuple, nx: ConvShape) -> ConvShape:
    """The geometry of average pooling ``pool = (kh, kw, sh, sw, (C, H, W))`` followed by the convolution
    ``nx`` as one convolution, or :class:`~symeq.errors.InputError` saying why no exact fold exists."""
    from ...errors import ShapeError

    kh, kw, sh, sw, (C, H, W) = pool
    ph, pw = (H - kh) // sh + 1, (W - kw) // sw + 1
    if (nx.in_channels, nx.height, nx.width) != (C, ph, pw):
        raise ShapeError(f"the layer after the average pooling expects {nx.in_channels}x{nx.height}x{nx.width}, "
                         f"the pooling gives {C}x{ph}x{pw}")
    if sh != sw:
        raise InputError(f"average pooling with strides {sh}x{sw} before a convolution: the folded convolution "
                         "would need unequal strides, which symeq's conv2d layer does not have")
    pad = 0
    if nx.padding:
        if not (kh == kw == sh == sw and H % kh == 0 and W % kw == 0):
            raise InputError(f"average pooling (kernel {kh}x{kw}, stride {sh}x{sw}) on {H}x{W} before a convolution "
                             f"with padding {nx.padding} does not fold exactly: the pooled grid's padding is the "
                             "average of input pixels only when the windows tile the image (stride = kernel, "
                             "sides divisible by it)")
        pad = kh * nx.padding
    shape = ConvShape(C, nx.out_channels, H, W, sh * (nx.kh - 1) + kh, sw * (nx.kw - 1) + kw,
                      stride=sh * nx.stride, padding=pad, padding_mode=nx.padding_mode)
    if shape.out_hw != nx.out_hw:  # cannot happen by the rule above; a guard, not a branch
        raise ShapeError("average pooling folded into the next convolution changes the output size")
    return shape


def fold_pool_into_kernel(K, N, pool: tuple):
    """The kernel of :func:`pool_before_conv` (``K`` in the numbers ``N``)."""
    kh, kw, sh, sw, _ = pool
    R = _spread(_spread(K, N, 2, sh, 1, kh), N, 3, sw, 1, kw)
    return R * N.ratio(1, kh * kw)


def pool_after_conv(conv: ConvShape, pool: tuple) -> ConvShape:
    """The geometry of the convolution ``conv`` followed (before its activation) by average pooling
    ``pool = (kh, kw, sh, sw, (C, H, W))``: always exact (every pooled pixel is a real output)."""
    from ...errors import ShapeError

    kh, kw, sh, sw, _ = pool
    if sh != sw:
        raise InputError(f"average pooling with strides {sh}x{sw} after a convolution: the folded convolution "
                         "would need unequal strides")
    oh, ow = conv.out_hw
    shape = ConvShape(conv.in_channels, conv.out_channels, conv.height, conv.width, conv.kh + conv.stride * (kh - 1),
                      conv.kw + conv.stride * (kw - 1), stride=conv.stride * sh, padding=conv.padding,
                      padding_mode=conv.padding_mode)
    if shape.out_hw != ((oh - kh) // sh + 1, (ow - kw) // sw + 1):
        raise ShapeError("average pooling folded into the convolution before it changes the output size")
    return shape


def fold_pool_after_kernel(K, N, conv: ConvShape, pool: tuple):
    """The kernel of :func:`pool_after_conv`."""
    kh, kw, _, _, _ = pool
    R = _spread(_spread(K, N, 2, 1, conv.stride, kh), N, 3, 1, conv.stride, kw)
    return R * N.ratio(1, kh * kw)


def fold_pool_into_dense(Wt, N, pool: tuple):
    """A dense weight (out x C*ph*pw, channel-major) after average pooling as one on (C, H, W): exact
    (rows and columns beyond the last window read nothing)."""
    kh, kw, sh, sw, (C, H, W) = pool
    ph, pw = (H - kh) // sh + 1, (W - kw) // sw + 1
    out = Wt.shape[0]
    if Wt.shape[1] != C * ph * pw:
        raise InputError(f"a dense layer with {Wt.shape[1]} inputs after an average pooling to {C}x{ph}x{pw}")
    R = fold_pool_into_kernel(Wt.reshape(out, C, ph, pw), N, pool)
    full = N.zeros((out, C, H, W))
    full[:, :, :R.shape[2], :R.shape[3]] = R
    return full.reshape(out, C * H * W)


def sparse_entries(layer):
    """The convolution's matrix in coordinate form ``(rows, cols, values, shape)`` (out_dim x in_dim,
    nnz = C_out x taps x output pixels at most), from the same index map as the forward pass: no dense
    expansion, and numpy only (no scipy)."""
    src = layer._srca                                   # taps x output pixels, -1 for padding
    rows_k = np.asarray(layer.rows, dtype=np.float64)   # C_out x taps (tap t = (c, i, j))
    O, T = rows_k.shape
    Q = src.shape[1]
    keep = src >= 0
    t_idx, q_idx = np.nonzero(keep)
    cols = src[t_idx, q_idx]
    r = (np.arange(O)[:, None] * Q + q_idx[None, :]).ravel()
    c = np.broadcast_to(cols, (O, cols.size)).ravel()
    v = rows_k[:, t_idx].ravel()
    return r, c, v, (O * Q, layer.in_dim)


def sparse_weight(layer):
    """The convolution's matrix as a scipy CSR matrix (the numeric extra), from :func:`sparse_entries`."""
    from scipy import sparse

    r, c, v, shape = sparse_entries(layer)
    return sparse.csr_matrix((v, (r, c)), shape=shape)


def sparse_commutator_residual(layer, P, B) -> float:
    """|W P - B W|_F / |W|_F and |b + W c - B b| / max(|b|, |W|_F) for monomial actions P (on the
    input, offset c) and B (on the output) and the convolution's matrix W in sparse form: the
    last-layer check of a conv layer at any size (the dense one would expand W).  numpy only: the
    entries of W P and B W are summed by their (row, column) keys."""
    r, c, v, (n_out, n_in) = sparse_entries(layer)
    # (W P)[:, cols[j]] = W[:, j] vals[j];  (B W)[j, :] = vals_B[j] W[cols_B[j], :]
    inv = np.empty(n_out, dtype=np.int64)
    inv[B.cols] = np.arange(n_out)
    keys = np.concatenate([r * n_in + P.cols[c], inv[r] * n_in + c])
    vals = np.concatenate([v * P.vals[c], -(v * B.vals[inv[r]])])
    _, where = np.unique(keys, return_inverse=True)
    d = np.bincount(where.ravel(), weights=vals)
    scale = max(float(np.sqrt(np.sum(v ** 2))), 1e-300)
    res_w = float(np.sqrt(np.sum(d ** 2))) / scale
    b = np.asarray(layer.bias, dtype=np.float64)
    lb = b if P.offset is None else b + np.bincount(r, weights=v * np.asarray(P.offset)[c], minlength=n_out)
    rb = B.vals * b[B.cols]
    res_b = float(np.linalg.norm(lb - rb)) / max(float(np.linalg.norm(b)), scale)
    return max(res_w, res_b)


FLOAT_LAYERS = (ConvLayer,)
"""The class of the conv2d kind's float layers: the kind's own, over float64."""
