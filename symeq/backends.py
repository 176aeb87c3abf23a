"""Number backends, chosen once: exact (fmpq), float64 (numpy), torch and modular (residues mod p).

A layer kind writes its forward pass and its reverse-mode Jacobian once, over the few primitives a
:class:`Backend` gives (``asarray``, ``matmul``, ``add``, ``mul``, ``sum_last``, ``poly``, ...); the
caller picks the numbers by picking the backend (like the domains of sympy.polys):

* :class:`Exact` -- numpy object arrays of ``fmpq`` (2-D products by python-flint's ``fmpq_mat``);
* :class:`Float64` -- numpy float64 arrays;
* :class:`Torch` -- torch float64 tensors (torch imported on first use, with an install hint);
* :class:`Modular` -- residues modulo a prime ``p``: the Mersenne prime 2^61 - 1 (uint64 arrays,
  products by shifts and masks, 2-D matrix products by python-flint's ``nmod_mat``) or a prime below
  2^31 (int64 arrays: a product of two residues is below 2^62; matrix products in two 16-bit halves).
  A rational whose denominator ``p`` divides has no residue: :class:`Denominator` (a ZeroDivisionError).

The kinds' programs (``jacobian_program`` of symeq/layers/dense/__init__.py, conv.py, attention.py) use these
primitives only, so one forward pass and one Jacobian serve every backend; :func:`reverse_jacobian`
chains the programs of a model (docs/identifiability.md, "Local identifiability").

Examples
--------
>>> from flint import fmpq
>>> bk = Modular((1 << 61) - 1)
>>> int(bk.poly([bk.scalar(1), bk.scalar(fmpq(1, 2))], bk.asarray([[2]]))[0, 0])
2
>>> Exact().poly([fmpq(1), fmpq(1, 2)], Exact().asarray([[2]]))[0, 0]
2
>>> float(Float64().matmul(Float64().asarray([[1, 2]]), Float64().asarray([[3], [fmpq(1, 2)]]))[0, 0])
4.0
"""

from __future__ import annotations

import numpy as np
from flint import fmpq, fmpq_mat, fmpz, fmpz_mat, nmod_mat

__all__ = ["Backend", "Exact", "Float64", "Torch", "Modular", "Denominator", "NotPolynomial", "MERSENNE61",
           "reverse_jacobian", "run_forward", "EXACT", "FLOAT64", "poly_mat", "mulmod61", "addmod61", "to_nmod", "from_nmod"]

#: the Mersenne prime 2^61 - 1
MERSENNE61 = (1 << 61) - 1

_P = np.uint64(MERSENNE61)
_LO32 = np.uint64(0xFFFFFFFF)
_LO29 = np.uint64((1 << 29) - 1)
_S32, _S29, _S61, _S3 = np.uint64(32), np.uint64(29), np.uint64(61), np.uint64(3)


class Denominator(ZeroDivisionError):
    """A rational number whose denominator the prime divides: it has no residue modulo p."""


class NotPolynomial(ValueError):
    """An activation without polynomial coefficients where a backend needs them (say, modulo p)."""


def _q(x) -> fmpq:
    if isinstance(x, fmpq):
        return x
    num, den = getattr(x, "numerator", None), getattr(x, "denominator", None)
    if num is not None and den is not None and not isinstance(x, float):
        return fmpq(int(num), int(den))
    return fmpq(x)


# ----------------------------------------------------------------------------- arithmetic mod 2^61 - 1

def mulmod61(a, b):
    """a * b mod 2^61 - 1 entrywise for uint64 arrays with entries < p (broadcasting)."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    ah, al = a >> _S32, a & _LO32
    bh, bl = b >> _S32, b & _LO32
    mid = ah * bl + al * bh                 # < 2^62
    ll = al * bl                            # < 2^64
    # a b = ah bh 2^64 + mid 2^32 + ll and 2^61 = 1: 2^64 = 8, mid 2^32 = (mid >> 29) + (mid & (2^29-1)) 2^32
    r = ((ah * bh) << _S3) + (mid >> _S29) + ((mid & _LO29) << _S32) + (ll >> _S61) + (ll & _P)
    r = (r >> _S61) + (r & _P)
    return np.where(r >= _P, r - _P, r)


def addmod61(a, b):
    """a + b mod 2^61 - 1 entrywise (uint64, entries < p)."""
    s = np.asarray(a, dtype=np.uint64) + np.asarray(b, dtype=np.uint64)
    return np.where(s >= _P, s - _P, s)


def to_nmod(a: np.ndarray, p: int = MERSENNE61) -> nmod_mat:
    """A 2-D array of residues as an ``nmod_mat``."""
    a = np.asarray(a)
    if a.shape[0] == 0 or a.shape[1] == 0:
        return nmod_mat(a.shape[0], a.shape[1], p)
    return nmod_mat(a.tolist(), p)  # a list of rows: faster than a flat list in python-flint


def from_nmod(m: nmod_mat, dtype=np.uint64) -> np.ndarray:
    return np.array([int(x) for x in m.entries()], dtype=dtype).reshape(m.nrows(), m.ncols())


class _Operand:
    """A right operand prepared once for many products (the ``nmod_mat`` next to its array)."""

    __slots__ = ("array", "mat")

    def __init__(self, array, mat):
        self.array, self.mat = array, mat

    @property
    def shape(self):
        return self.array.shape


def poly_mat(coeffs, Z: fmpq_mat) -> fmpq_mat:
    """sum_k c_k Z^k entry by entry, exactly: with Z = N / D (one common denominator) and L the
    coefficients' common denominator, the numerator sum_k (L c_k) N^k D^(d-k) by Horner's rule on
    integers (a numpy object array of fmpz), over L D^d; the one canonicalisation is fmpq_mat's
    division at the end."""
    c = [_q(x) for x in coeffs]
    if len(c) < 2:
        return fmpq_mat(Z.nrows(), Z.ncols(), [c[0] if c else fmpq(0)] * (Z.nrows() * Z.ncols()))
    N, D = Z.numer_denom()
    L = fmpz(1)
    for x in c:
        L = L * x.denom() // L.gcd(x.denom())
    a = [x.numer() * (L // x.denom()) for x in c]
    d = len(a) - 1
    n = np.empty(Z.nrows() * Z.ncols(), dtype=object)
    n[:] = N.entries()
    acc, power = a[d] * n + a[d - 1] * D, D
    for k in range(d - 2, -1, -1):
        power = power * D
        acc = acc * n + a[k] * power
    return fmpq_mat(fmpz_mat(Z.nrows(), Z.ncols(), acc.tolist())) / (L * power)


class _LazyMat:
    """An exact right operand held as an array, an ``fmpq_mat`` or both, each side converted on first use
    (a weight given as an ``fmpq_mat`` is multiplied without a round trip through numpy objects)."""

    __slots__ = ("_array", "mat")

    def __init__(self, array=None, mat=None):
        self._array, self.mat = array, mat

    def get(self) -> fmpq_mat:
        if self.mat is None:
            self.mat = Exact.to_mat(self._array)
        return self.mat

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = Exact.from_mat(self.mat)
        return self._array

    @property
    def shape(self):
        return (self.mat.nrows(), self.mat.ncols()) if self._array is None else self._array.shape


# ----------------------------------------------------------------------------- backends

class Backend:
    """The primitives a kind's forward pass and Jacobian use (numpy arrays unless said otherwise)."""

    name = "backend"
    exact = False

    def scalar(self, x):
        """A rational (fmpq, Fraction, int) as a number of this backend."""
        raise NotImplementedError

    def asarray(self, rows, shape=None):
        """Nested lists (or an array, or an ``fmpq_mat``) of rationals as an array of this backend's numbers."""
        flat = Exact.from_mat(rows) if isinstance(rows, fmpq_mat) else np.asarray(rows, dtype=object)
        out = np.array([self.scalar(x) for x in flat.ravel()], dtype=self.dtype).reshape(flat.shape)
        return out if shape is None else out.reshape(shape)

    dtype = object

    def zeros(self, shape):
        return np.zeros(shape, dtype=self.dtype)

    def ones(self, shape):
        return np.ones(shape, dtype=self.dtype)

    def eye_rows(self, K: int, N: int):
        """N stacked K x K identities (the output cotangents of N points): (N K) x K."""
        return np.tile(np.eye(K, dtype=self.dtype), (N, 1))

    def operand(self, a):
        """``a`` prepared as the right factor of many ``matmul`` calls."""
        return a

    def weight_operands(self, rows, shape):
        """(W, W^T) as right factors, W from rows of rationals (or an ``fmpq_mat``) of the given shape."""
        if isinstance(rows, fmpq_mat):
            rows = [[rows[i, j] for j in range(shape[1])] for i in range(shape[0])]
        W = self.asarray(rows, shape) if shape[0] else self.zeros(shape)
        return self.operand(W), self.operand(self.permute(W, (1, 0)))

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return self.add(a, self.mul(b, self.scalar(-1)))

    def mul(self, a, b):
        return a * b

    def matmul(self, a, b):
        return a @ getattr(b, "array", b)

    def sum_last(self, a):
        """The sum over the last axis."""
        return a.sum(axis=-1)

    def affine(self, a, b, bias):
        """``a @ b + bias`` (bias added to every row): a batch through an affine map."""
        return self.add(self.matmul(a, b), bias[None, :])

    def affine_cols(self, a, b, bias):
        """``a @ b + bias`` (bias added to every column): a kernel applied to gathered columns."""
        a = getattr(a, "array", a)
        return self.add(self.matmul(a, b), bias[:, None])

    def permute(self, a, axes):
        return a.transpose(axes)

    def scatter_columns(self, a, perm, fac):
        """``U[:, perm[t]] = fac[t] * a[:, t]``: the columns of a 2-D array moved and scaled (the group
        acting on a kernel's taps: theta -> theta^g, symeq/layers/conv/__init__.py ``transformed_rows``)."""
        f = self.asarray(list(fac), (len(fac),))
        U = self.zeros(a.shape)
        U[:, np.asarray(perm, dtype=np.int64)] = self.mul(a, f[None, :])
        return U

    def add_products(self, bias, a, v):
        """``bias + a @ v`` for a 2-D ``a`` and vectors ``bias``, ``v`` (a bias moved by an input offset)."""
        v = self.asarray(list(v), (len(v),))
        return self.add(self.asarray(list(bias), (len(bias),)), self.sum_last(self.mul(a, v[None, :])))

    def concat(self, arrays, axis: int = 0):
        return np.concatenate(arrays, axis=axis)

    def take(self, a, index):
        """``a[index]`` with an integer numpy index array on the first axis."""
        return a[index]

    def window_max(self, a, index):
        """The maximum over each window: ``out[j, t] = max_w a[index[j, w], t]`` (index: out x window
        width, integer numpy; a maximum of exact rationals is exact)."""
        return self.take(a, index).max(axis=1)

    def where(self, cond, a, b):
        """``a`` where the (numpy bool) ``cond`` holds, else ``b`` (two numbers of this backend)."""
        out = np.where(cond, a, b)
        return out if self.dtype is object else out.astype(self.dtype)

    def poly(self, coeffs, Z):
        """sum_k coeffs[k] Z^k entrywise (Horner), coefficients already of this backend."""
        acc = self.zeros(Z.shape)
        for c in reversed(coeffs):
            acc = self.add(self.mul(acc, Z), c)
        return acc

    def carries(self, act) -> bool:
        """Whether a program over this backend evaluates ``act`` itself (a polynomial, by its coefficients)."""
        return act is not None and bool(getattr(act, "is_polynomial", False))

    def entrywise(self, act):
        """``Z -> sigma(Z)`` entrywise, for an activation a program does not carry (see :func:`run_forward`)."""
        return act

    def activation(self, act, forward_only: bool = False):
        """(sigma's coefficients, sigma''s coefficients) as numbers of this backend; None for an affine layer
        (and, with ``forward_only``, for an activation that is no polynomial: :func:`run_forward` applies it)."""
        if act is None or (forward_only and not self.carries(act)):
            return None
        if not getattr(act, "is_polynomial", False):
            raise NotPolynomial(f"activation {act.name} is not a polynomial")
        coeffs = [_q(c) for c in act.coeffs]
        return [self.scalar(c) for c in coeffs], [self.scalar(k * c) for k, c in enumerate(coeffs)][1:] or \
            [self.scalar(0)]

    def to_numpy(self, a) -> np.ndarray:
        return np.asarray(a)

    # -- a layer's numbers in this backend (the layer classes hold their parameters in one backend) --------

    def batch_in(self, X):
        """A batch as a layer of this backend takes it, as the program's columns (in x N)."""
        raise NotImplementedError(f"layers do not hold their numbers in the {self.name} backend")

    def batch_out(self, H):
        """The program's columns (out x N) as a batch of a layer of this backend (:meth:`batch_in`'s layout)."""
        raise NotImplementedError(f"layers do not hold their numbers in the {self.name} backend")

    def vector(self, values):
        """A layer's vector (a bias, say) of this backend from numbers (rationals, or floats for a float backend)."""
        raise NotImplementedError(f"layers do not hold their numbers in the {self.name} backend")

    def __repr__(self) -> str:
        return self.name


class _MatArray(np.ndarray):
    """A read-only numpy object array of ``fmpq`` made from an ``fmpq_mat`` by :meth:`Exact.from_mat`, which
    remembers that matrix (``_mat``) so that :meth:`Exact.to_mat` hands it back instead of converting the
    entries again (a layer's pre-activations go to the activation and the result back to python-flint).
    Read-only, so that the two cannot disagree; an array derived from it (a view, a copy, a sum) does not
    remember the matrix."""

    _mat = None

    def __array_finalize__(self, obj):
        self._mat = None


class Exact(Backend):
    """Exact rationals: numpy object arrays of ``fmpq``; 2-D products by ``fmpq_mat``."""

    name, exact, dtype = "exact", True, object

    def scalar(self, x):
        return _q(x)

    def asarray(self, rows, shape=None):
        if isinstance(rows, fmpq_mat):  # the entries as they are (no conversion per entry)
            out = self.from_mat(rows)
            return out if shape is None else out.reshape(shape)
        return super().asarray(rows, shape)

    def poly(self, coeffs, Z):
        """sum_k c_k Z^k entrywise, exactly (:func:`poly_mat` on one row)."""
        if len(coeffs) < 2 or Z.size == 0:
            return super().poly(coeffs, Z)
        if getattr(Z, "_mat", None) is not None and Z.ndim == 2:  # entrywise: on the matrix it remembers
            return self.from_mat(poly_mat(coeffs, self.to_mat(Z)))
        return self.from_mat(poly_mat(coeffs, fmpq_mat(1, Z.size, Z.ravel().tolist()))).reshape(Z.shape)

    def zeros(self, shape):
        out = np.empty(shape, dtype=object)
        out.fill(fmpq(0))
        return out

    def ones(self, shape):
        out = np.empty(shape, dtype=object)
        out.fill(fmpq(1))
        return out

    def eye_rows(self, K: int, N: int):
        out = self.zeros((N * K, K))
        for n in range(N):
            for k in range(K):
                out[n * K + k, k] = fmpq(1)
        return out

    @staticmethod
    def from_mat(M: fmpq_mat) -> np.ndarray:
        """An ``fmpq_mat`` as this backend's array (numpy objects, the same shape; read-only, remembering M)."""
        out = np.empty(M.nrows() * M.ncols(), dtype=object)
        out[:] = M.entries()
        out = out.reshape(M.nrows(), M.ncols()).view(_MatArray)
        out._mat = M
        out.flags.writeable = False
        return out

    @staticmethod
    def to_mat(a) -> fmpq_mat:
        """A 2-D array of this backend as an ``fmpq_mat`` (the matrix it was made from, when it remembers one)."""
        M = getattr(a, "_mat", None)
        if M is not None and a.ndim == 2 and a.shape == (M.nrows(), M.ncols()):
            return M
        return fmpq_mat(a.shape[0], a.shape[1], a.ravel().tolist())

    def operand(self, a):
        if a.ndim == 2 and a.size:
            return _LazyMat(a)  # converted once, on the first product
        return a

    def weight_operands(self, rows, shape):
        if isinstance(rows, fmpq_mat) and rows.nrows() and rows.ncols():
            return _LazyMat(mat=rows), _LazyMat(mat=rows.transpose())
        return super().weight_operands(rows, shape)

    def permute(self, a, axes):
        out = np.transpose(a, axes)
        M = getattr(a, "_mat", None)
        if M is not None and tuple(axes) == (1, 0):  # the transpose remembers the transposed matrix
            out._mat = M.transpose()
        return out

    def entrywise(self, act):
        f = np.frompyfunc(act, 1, 1)
        return lambda Z: f(Z) if Z.size else Z

    def _mat(self, b):
        return b.get() if isinstance(b, _LazyMat) else self.to_mat(b)

    def matmul(self, a, b):
        shape = b.shape
        if a.ndim > 2 and len(shape) == 2:  # a batch times one matrix: one product in python-flint
            return self.matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + shape[1:])
        if a.ndim == 2 and len(shape) == 2 and a.size and shape[0] * shape[1]:
            return self.from_mat(self.to_mat(a) * self._mat(b))
        if a.shape[-1] == 0:
            return self.zeros(a.shape[:-1] + shape[-1:])
        return np.matmul(a, getattr(b, "array", b))

    def affine_cols(self, a, b, bias):
        if not (a.shape[0] * a.shape[1]) or not b.size:
            return super().affine_cols(a, b, bias)
        r, c = a.shape[0], b.shape[1]
        B = fmpq_mat(r, c, [x for x in bias for _ in range(c)])
        return self.from_mat(self._mat(a) * self.to_mat(b) + B)

    def affine(self, a, b, bias):
        shape = b.shape
        if a.ndim != 2 or not a.size or not shape[0] * shape[1]:
            return super().affine(a, getattr(b, "array", b), bias)
        r, c = a.shape[0], shape[1]
        M = self.to_mat(a) * self._mat(b) + fmpq_mat(r, c, list(bias) * r)  # the sum in python-flint too
        return self.from_mat(M)

    def sum_last(self, a):
        out = self.zeros(a.shape[:-1])
        for k in range(a.shape[-1]):
            out = out + a[..., k]
        return out

    def batch_in(self, X):
        """An exact layer's batch is an ``fmpq_mat`` with one column per point."""
        return self.from_mat(X)

    def batch_out(self, H):
        return self.to_mat(H)

    def vector(self, values) -> list:
        """A list of ``fmpq`` (an exact layer's bias)."""
        return [_q(v) for v in values]


class Float64(Backend):
    """numpy float64."""

    name, dtype = "float64", np.float64

    def asarray(self, rows, shape=None):
        if isinstance(rows, np.ndarray) and rows.dtype.kind in "fiu":  # float arrays as they are (no copy)
            out = rows.astype(np.float64, copy=False)
            return out if shape is None else out.reshape(shape)
        return super().asarray(rows, shape)

    def scalar(self, x):
        if isinstance(x, float):
            return x
        q = _q(x)
        return int(q.p) / int(q.q)

    def batch_in(self, X):
        """A float layer's batch is an array with one row per point (numpy's and torch's layout)."""
        return np.asarray(X, dtype=np.float64).T

    def batch_out(self, H):
        return H.T

    def vector(self, values) -> np.ndarray:
        return np.asarray(values, dtype=np.float64).reshape(-1)

    def affine_cols(self, a, b, bias):
        # numpy's einsum loop, not BLAS: for these thin products (a kernel's few rows) OpenBLAS's threads
        # cost up to 20x on a loaded machine, and the conv layers' forward measured before used einsum
        return np.einsum("ot,tq->oq", a, b) + bias[:, None]


class Modular(Backend):
    """Residues modulo a prime p: 2^61 - 1 (uint64) or a prime below 2^31 (int64)."""

    exact = True

    def __init__(self, p: int = MERSENNE61):
        p = int(p)
        if p == MERSENNE61:
            self.dtype, self._mersenne = np.uint64, True
        elif 2 < p < (1 << 31):
            self.dtype, self._mersenne = np.int64, False
        else:
            raise ValueError(f"the modular backend takes 2^61 - 1 or a prime below 2^31, got {p}")
        self.p = p
        self.name = f"mod {p}"

    def scalar(self, x) -> int:
        x = _q(x)
        num, den = int(x.p), int(x.q)
        if den % self.p == 0:
            raise Denominator(str(x))
        return num % self.p * pow(den, -1, self.p) % self.p

    def eye_rows(self, K: int, N: int):
        return np.tile(np.eye(K, dtype=self.dtype), (N, 1))

    def operand(self, a):
        if self._mersenne and a.ndim == 2:
            return _Operand(a, to_nmod(a, self.p))
        return a

    def add(self, a, b):
        if self._mersenne:
            return addmod61(a, b)
        return (np.asarray(a, dtype=np.int64) + b) % self.p

    def mul(self, a, b):
        if self._mersenne:
            return mulmod61(a, b)
        return np.asarray(a, dtype=np.int64) * b % self.p

    def sub(self, a, b):
        return self.add(a, (self.p - np.asarray(b, dtype=self.dtype)) % self.p)

    def matmul(self, a, b):
        mat = getattr(b, "mat", None)
        b = getattr(b, "array", b)
        if a.ndim == 2 and b.ndim == 2:
            if a.shape[0] == 0 or a.shape[1] == 0:
                return np.zeros((a.shape[0], b.shape[1]), dtype=self.dtype)
            if self._mersenne:
                return from_nmod(to_nmod(a) * (mat if mat is not None else to_nmod(b)))
        if self._mersenne:  # batched: Python integers (object arrays), small models only
            return ((a.astype(object) @ b.astype(object)) % self.p).astype(np.uint64)
        if a.shape[-1] == 0:
            return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=np.int64)
        hi, lo = b >> 16, b & 0xFFFF  # residues < 2^31: A @ halves stays below 2^63 for inner sizes < 2^16
        return ((a @ hi) % self.p * 65536 + (a @ lo) % self.p) % self.p

    def window_max(self, a, index):
        raise TypeError("a maximum has no meaning modulo p (pooling has no Jacobian program)")

    def sum_last(self, a):
        if not self._mersenne:
            return a.sum(axis=-1) % self.p  # < 2^31 each: no overflow below 2^32 terms
        flat = a.reshape(-1, a.shape[-1])
        ones = _Operand(np.ones((a.shape[-1], 1), dtype=np.uint64), nmod_mat(a.shape[-1], 1, [1] * a.shape[-1], self.p))
        return self.matmul(flat, ones).reshape(a.shape[:-1])


class Torch(Backend):
    """torch float64 tensors (CPU unless ``device``); torch is imported here, on first use."""

    name = "torch"

    def __init__(self, device=None):
        try:
            import torch
        except ImportError:  # pragma: no cover - the extra is missing
            raise ImportError("the torch backend needs PyTorch: pip install 'symeq[torch]' (or pip install torch)") \
                from None
        self.torch, self.device = torch, device
        self.dtype = torch.float64

    def scalar(self, x):
        return Float64.scalar(self, x)

    def asarray(self, rows, shape=None):
        arr = Float64().asarray(rows, shape)
        return self.torch.as_tensor(arr, dtype=self.dtype, device=self.device)

    def zeros(self, shape):
        return self.torch.zeros(shape, dtype=self.dtype, device=self.device)

    def ones(self, shape):
        return self.torch.ones(shape, dtype=self.dtype, device=self.device)

    def eye_rows(self, K: int, N: int):
        return self.torch.eye(K, dtype=self.dtype, device=self.device).repeat(N, 1)

    def matmul(self, a, b):
        return self.torch.matmul(a, getattr(b, "array", b))

    def permute(self, a, axes):
        return a.permute(*axes)

    def concat(self, arrays, axis: int = 0):
        return self.torch.cat(list(arrays), dim=axis)

    def window_max(self, a, index):
        return self.take(a, index).amax(dim=1)

    def take(self, a, index):
        return a[self.torch.as_tensor(np.array(index), device=a.device)]  # a copy: the index may be read-only

    def where(self, cond, a, b):
        c = self.torch.as_tensor(np.asarray(cond), device=self.device)
        return self.torch.where(c, self.torch.tensor(a, dtype=self.dtype), self.torch.tensor(b, dtype=self.dtype))

    def to_numpy(self, a) -> np.ndarray:
        return a.detach().cpu().numpy()


# ----------------------------------------------------------------------------- running a program

EXACT = Exact()
"""The exact backend every exact layer holds its numbers in (``backend`` of a layer class)."""

FLOAT64 = Float64()
"""The float64 backend of the float layers (the float twins of :mod:`symeq.numeric`)."""


def run_forward(program, H, activation=None):
    """A kind program's forward values at the batch H (columns, backend numbers): ``activation`` (the
    layer's), when the program does not carry it (no polynomial: a ReLU, a float tanh), is applied
    entrywise by the backend; the one forward pass of the exact and the float layers of a kind."""
    bk, carried = program.bk, getattr(program, "act", None)
    if carried is not None:
        pointwise = lambda Z: (bk.poly(carried[0], Z), None)  # noqa: E731 - values only, no derivatives
    elif activation is not None:
        f = bk.entrywise(activation)
        pointwise = lambda Z: (f(Z), None)  # noqa: E731
    else:
        pointwise = None
    return program.forward(H, pointwise)[0]


# ----------------------------------------------------------------------------- the chain rule over programs

def reverse_jacobian(programs, X, bk: Backend, check=None, pointwise=None, keep: dict | None = None):
    """J (N K x P, rows point-major: point n, output k) of the chain of kind programs at the points X
    (columns, in backend numbers): one forward pass, then the output cotangents backwards.

    Each program gives ``n_params``, ``out_dim``, ``forward(H, pointwise) -> (H', cache)`` and
    ``backward(cache, D, J, col, need_input) -> D'``; ``pointwise[i]`` (optional) replaces layer i's
    activation by a function of its pre-activations returning (values, derivatives) (say, the known
    slopes of a ReLU at the points).  ``check(what)`` is called between the steps (a deadline).
    ``keep`` receives ``caches``, the per-layer forward caches, and ``cols``, each layer's first column."""
    H, caches = X, []
    for i, prog in enumerate(programs):
        if check is not None:
            check("the forward pass")
        H, cache = prog.forward(H, None if pointwise is None else pointwise[i])
        caches.append(cache)
    N, K = X.shape[1], programs[-1].out_dim
    P = sum(prog.n_params for prog in programs)
    J = bk.zeros((N * K, P))
    D = bk.eye_rows(K, N)
    cols, c = [], 0
    for prog in programs:
        cols.append(c)
        c += prog.n_params
    for i in range(len(programs) - 1, -1, -1):
        if check is not None:
            check("the backward pass")
        D = programs[i].backward(caches[i], D, J, cols[i], need_input=i > 0)
    if keep is not None:
        keep["caches"], keep["cols"], keep["output"] = caches, cols, H
    return J
