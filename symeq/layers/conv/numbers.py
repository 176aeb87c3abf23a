"""The number layouts of the conv2d layer: exact rationals (python-flint) and floats (numpy).

The forward pass of both is the conv2d kind's one program (:class:`symeq.layers.conv.ConvProgram`:
an im2col gather through the tap index, then one kernel product) over the number backend each class
names (``backend``: :class:`symeq.backends.Exact`, :class:`symeq.backends.Float64`); the exact
polynomial activation is :func:`symeq.backends.poly_mat`.  What remains here is each number type's
layout and the small algorithms of :class:`symeq.layers.conv.ConvCore` around the program -- the
transformed kernels of theta^g, the bias of an input offset, the dense expansion and the folding of
average pooling.  The exact layer (:class:`symeq.layers.conv.ConvLayer`) runs on :class:`FlintNumbers`,
the float one (``symeq.layers.conv.floating.NumericConvLayer``) on :class:`NumpyNumbers`.  What stays per number
type is what must differ: the exact layer *decides* (canonical keys, enumerated bijections, exact
kernel identities), the float one *measures* (linear assignment with residuals and a margin).

Layouts: the exact backend keeps kernel rows as lists of ``fmpq`` and batches as ``fmpq_mat`` with
one column per point; the float backend keeps rows as a 2-d array and batches with one row per
point (numpy's convention).

>>> FlintNumbers.permute_taps([[1, 2, 3]], [2, 0, 1], [1, 1, -1])
[[2, -3, 1]]
>>> NumpyNumbers.permute_taps(np.array([[1., 2, 3]]), [2, 0, 1], [1, 1, -1]).tolist()
[[2.0, -3.0, 1.0]]
"""

from __future__ import annotations

import numpy as np
from flint import fmpq, fmpq_mat

from ...backends import EXACT, FLOAT64, Exact, poly_mat
from ...errors import InputError, ShapeError
from ...numbers import as_fmpq

__all__ = ["FlintNumbers", "NumpyNumbers"]


def flat_kernel(spec, kernel) -> list[list]:
    """Kernel rows, one per output channel, taps in (c, i, j) order; a kernel of the wrong shape is refused.

    Shared by the dense rows of ``symeq.layers.conv`` and the number back-ends below.
    """
    shape = (spec.out_channels, spec.in_channels, spec.kh, spec.kw)
    ok = (len(kernel) == shape[0]
          and all(len(k) == shape[1] for k in kernel)
          and all(len(r) == shape[2] for k in kernel for r in k)
          and all(len(row) == shape[3] for k in kernel for r in k for row in r))
    if not ok:
        raise ShapeError(f"conv2d: the kernel must have shape out_channels x in_channels x kh x kw = "
                         f"{'x'.join(map(str, shape))}")
    return [[kernel[o][c][i][j] for c in range(spec.in_channels) for i in range(spec.kh) for j in range(spec.kw)]
            for o in range(spec.out_channels)]


class FlintNumbers:
    """Exact rationals: rows are lists of ``fmpq``, a batch is an ``fmpq_mat`` (a column per point)."""

    name = "exact"
    backend = EXACT

    @staticmethod
    def ratio(p: int, q: int):
        return fmpq(p, q)

    @staticmethod
    def kernel(spec, kernel):
        """(nested kernel, rows) in this backend's numbers."""
        rows = [[as_fmpq(x) for x in r] for r in flat_kernel(spec, kernel)]
        return FlintNumbers.nested(spec, rows), rows

    @staticmethod
    def nested(spec, rows) -> list:
        kh, kw = spec.kh, spec.kw
        return [[[[rows[o][(c * kh + i) * kw + j] for j in range(kw)] for i in range(kh)]
                 for c in range(spec.in_channels)] for o in range(spec.out_channels)]

    @staticmethod
    def bias(spec, bias) -> list:
        if bias is None:
            return [fmpq(0)] * spec.out_channels
        if len(bias) != spec.out_channels:
            raise ShapeError(f"conv2d: bias has length {len(bias)}, expected out_channels = {spec.out_channels}")
        return [as_fmpq(b) for b in bias]

    @staticmethod
    def permute_taps(rows, perm, fac) -> list:
        """``U[o][perm[t]] = fac[t] * rows[o][t]`` (:meth:`symeq.backends.Backend.scatter_columns`)."""
        bk = FlintNumbers.backend
        return bk.scatter_columns(bk.asarray(rows), perm, fac).tolist() if rows else []

    @staticmethod
    def channel_constants(c_in, C: int, P: int):
        """The per-channel values of an input offset constant on each channel; () for no offset; None
        when it is not constant on a channel."""
        if c_in is None or all(x == 0 for x in c_in):
            return ()
        per = [c_in[c * P] for c in range(C)]
        if any(c_in[c * P + p] != per[c] for c in range(C) for p in range(P)):
            return None
        return per

    @staticmethod
    def add_row_products(bias, rows, per_tap) -> list:
        """``bias[o] + sum_t rows[o][t] per_tap[t]`` (:meth:`symeq.backends.Backend.add_products`)."""
        bk = FlintNumbers.backend
        return bk.add_products(bias, bk.asarray(rows), per_tap).tolist()

    @staticmethod
    def columns(X) -> np.ndarray:
        """A batch (``fmpq_mat``, a column per point) as the backend's array (in x N)."""
        return Exact.from_mat(X)

    @staticmethod
    def batch(H) -> fmpq_mat:
        return Exact.to_mat(H)

    @staticmethod
    def pre_activation(layer, X):
        """conv_K(X) + b: the kind's program (``symeq.layers.conv.ConvCore.pre_activation``)."""
        return FlintNumbers.batch(layer.forward_program().pre_activation(FlintNumbers.columns(X)))

    @staticmethod
    def activate(act, Z):
        if act is None:
            return Z
        if act.kind == "polynomial" and len(act.coeffs) > 1:
            return poly_mat(act.coeffs, Z)
        return fmpq_mat(Z.nrows(), Z.ncols(), [act(z) for z in Z.entries()])

    @staticmethod
    def dense(rows, in_dim: int):
        return fmpq_mat(rows) if rows else fmpq_mat(0, in_dim)


class NumpyNumbers:
    """Floats: rows are a 2-d ``float64`` array, a batch has one row per point."""

    name = "float"
    backend = FLOAT64

    @staticmethod
    def ratio(p: int, q: int):
        return p / q

    @staticmethod
    def kernel(spec, kernel):
        k = np.asarray(kernel, dtype=np.float64)
        if k.shape != (spec.out_channels, spec.in_channels, spec.kh, spec.kw):
            raise ShapeError(f"conv2d: the kernel has shape {k.shape}, expected "
                             f"{(spec.out_channels, spec.in_channels, spec.kh, spec.kw)}")
        if not np.all(np.isfinite(k)):
            raise InputError("a layer has NaN or infinite weights; numeric models need finite parameters")
        return k, k.reshape(spec.out_channels, -1)

    @staticmethod
    def nested(spec, rows):
        return np.asarray(rows, dtype=np.float64).reshape(spec.out_channels, spec.in_channels, spec.kh, spec.kw)

    @staticmethod
    def bias(spec, bias):
        b = np.zeros(spec.out_channels) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
        if b.shape != (spec.out_channels,):
            raise ShapeError(f"conv2d: bias has length {b.shape[0]}, expected {spec.out_channels}")
        if not np.all(np.isfinite(b)):
            raise InputError("a layer has NaN or infinite weights; numeric models need finite parameters")
        return b

    @staticmethod
    def permute_taps(rows, perm, fac):
        bk = NumpyNumbers.backend
        return bk.scatter_columns(bk.asarray(np.asarray(rows, dtype=np.float64)), perm, np.asarray(fac, dtype=np.float64))

    @staticmethod
    def channel_constants(c_in, C: int, P: int):
        if c_in is None:
            return ()
        off = np.asarray(c_in, dtype=np.float64)
        if not np.any(off != 0):
            return ()
        per = off.reshape(C, P)
        if np.any(per != per[:, :1]):
            return None
        return per[:, 0]

    @staticmethod
    def add_row_products(bias, rows, per_tap):
        bk = NumpyNumbers.backend
        return bk.add_products(np.asarray(bias, dtype=np.float64), rows, np.asarray(per_tap, dtype=np.float64))

    @staticmethod
    def columns(X) -> np.ndarray:
        """A batch (a row per point) as the backend's array (in x N: the transposed view)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ShapeError(f"a batch of inputs must be a matrix (a row per point), got shape {X.shape}")
        return X.T

    @staticmethod
    def batch(H) -> np.ndarray:
        return H.T

    @staticmethod
    def pre_activation(layer, X):
        """conv_K(X) + b without the float layer's torch path: the kind's program over float64."""
        return NumpyNumbers.batch(layer.forward_program().pre_activation(NumpyNumbers.columns(X)))

    @staticmethod
    def activate(act, Z):
        return Z if act is None else act(Z)

    @staticmethod
    def dense(rows, in_dim: int):
        return np.array(rows, dtype=np.float64).reshape(len(rows), in_dim)


def numbers_of(backend):
    """The conv2d algorithms' numbers for a layer's backend: :class:`FlintNumbers` over an exact one,
    :class:`NumpyNumbers` over float64."""
    return FlintNumbers if backend.exact else NumpyNumbers
