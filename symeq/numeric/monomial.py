"""Monomial matrices stored as (column of each row's nonzero, its value): the elements of K_i.

Width-4096 latent actions would be 16M-entry dense matrices; stored this way they cost two
vectors, and products, inverses and actions on weight matrices are index operations.

Examples
--------
>>> import numpy as np
>>> r = MonomialAction(np.array([1, 0]), np.array([2.0, -1.0]))
>>> r.to_dense().tolist()
[[0.0, 2.0], [-1.0, 0.0]]
>>> (r @ r.inverse()).to_dense().tolist()
[[1.0, 0.0], [0.0, 1.0]]
>>> MonomialAction.from_dense(r.to_dense()).cols.tolist()
[1, 0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MonomialAction", "as_action"]


@dataclass(eq=False)
class MonomialAction:
    """The n x n matrix with entry ``vals[j]`` at ``(j, cols[j])``, optionally affine.

    With an ``offset`` c it is the affine map y -> rho y + c (the affine sign flips of
    activations that are odd up to a constant, e.g. sigmoid: y -> 1 - y).  Products compose
    affine maps; :meth:`left` and :meth:`right` use the linear part (they act on weight matrices).
    """

    cols: np.ndarray
    vals: np.ndarray
    offset: np.ndarray | None = None

    def __post_init__(self):
        self.cols = np.asarray(self.cols, dtype=np.int64)
        self.vals = np.asarray(self.vals, dtype=np.float64)
        if self.offset is not None:
            self.offset = np.asarray(self.offset, dtype=np.float64)
            if not np.any(self.offset != 0.0):
                self.offset = None

    @property
    def n(self) -> int:
        return self.cols.shape[0]

    @property
    def offset_or_zero(self) -> np.ndarray:
        return np.zeros(self.n) if self.offset is None else self.offset

    @classmethod
    def identity(cls, n: int) -> "MonomialAction":
        return cls(np.arange(n), np.ones(n))

    @classmethod
    def from_dense(cls, m: np.ndarray, tol: float = 0.0) -> "MonomialAction | None":
        """The monomial form of a dense matrix, or None if it is not monomial (|entries| <= tol are 0)."""
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            return None
        nz = np.abs(m) > tol
        if not np.all(nz.sum(axis=1) == 1):
            return None
        cols = nz.argmax(axis=1)
        if np.unique(cols).shape[0] != cols.shape[0]:
            return None
        return cls(cols, m[np.arange(m.shape[0]), cols])

    def to_dense(self) -> np.ndarray:
        """The linear part as a dense matrix."""
        m = np.zeros((self.n, self.n))
        m[np.arange(self.n), self.cols] = self.vals
        return m

    def inverse(self) -> "MonomialAction":
        cols = np.empty_like(self.cols)
        cols[self.cols] = np.arange(self.n)
        inv = MonomialAction(cols, 1.0 / self.vals[cols])
        if self.offset is not None:  # y = rho^-1 (y' - c)
            inv.offset = -inv.left(self.offset)
        return inv

    def __matmul__(self, other):
        if isinstance(other, MonomialAction):
            out = MonomialAction(other.cols[self.cols], self.vals * other.vals[self.cols])
            if self.offset is not None or other.offset is not None:  # rho (rho' y + c') + c
                out = MonomialAction(out.cols, out.vals, self.left(other.offset_or_zero) + self.offset_or_zero)
            return out
        return self.left(other)

    def left(self, M: np.ndarray) -> np.ndarray:
        """rho @ M (rows of M permuted and scaled; the linear part)."""
        return self.vals.reshape((-1,) + (1,) * (M.ndim - 1)) * M[self.cols]

    def right(self, M: np.ndarray) -> np.ndarray:
        """M @ rho (columns permuted and scaled; the linear part)."""
        out = np.empty_like(M)
        out[:, self.cols] = M * self.vals
        return out

    def apply_rows(self, X: np.ndarray) -> np.ndarray:
        """(rho x + c) for each row x of X, i.e. X @ rho.T + c."""
        Y = X[:, self.cols] * self.vals
        return Y if self.offset is None else Y + self.offset

    def allclose(self, other: "MonomialAction", tol: float = 1e-9) -> bool:
        return bool(np.array_equal(self.cols, other.cols) and np.allclose(self.vals, other.vals, rtol=tol, atol=tol)
                    and np.allclose(self.offset_or_zero, other.offset_or_zero, rtol=tol, atol=tol))

    def kind(self) -> str:
        """'permutation', 'signed permutation', 'positive monomial' or 'monomial' (+ ', affine')."""
        if np.all(self.vals == 1.0):
            k = "permutation"
        elif np.all(np.abs(self.vals) == 1.0):
            k = "signed permutation"
        else:
            k = "positive monomial" if np.all(self.vals > 0) else "monomial"
        return k if self.offset is None else k + ", affine"

    def __repr__(self) -> str:
        return f"MonomialAction(n={self.n}, {self.kind()})"


def to_float_matrix(m) -> np.ndarray:
    """An ``fmpq_mat`` (or nested list / array) as a float64 array.

    >>> to_float_matrix([[1, 2]]).tolist()
    [[1.0, 2.0]]
    """
    if hasattr(m, "nrows") and hasattr(m, "numer_denom"):  # integer numerators over one denominator: no fmpq per entry
        num, den = m.numer_denom()
        d = int(den)
        out = np.zeros(m.nrows() * m.ncols())
        for i, x in enumerate(num.entries()):
            if x:
                out[i] = int(x) / d  # correctly rounded, as int(q.p) / int(q.q) of the reduced entry
        return out.reshape(m.nrows(), m.ncols())
    if hasattr(m, "nrows") and hasattr(m, "entries"):
        vals = [int(q.p) / int(q.q) for q in m.entries()]
        return np.array(vals, dtype=np.float64).reshape(m.nrows(), m.ncols())
    return np.asarray(m, dtype=np.float64)


def as_action(m):
    """A MonomialAction if ``m`` is (or stores) a monomial matrix, else the dense float array."""
    if isinstance(m, MonomialAction):
        return m
    if hasattr(m, "nrows"):
        m = to_float_matrix(m)
    mono = MonomialAction.from_dense(m)
    return mono if mono is not None else np.asarray(m, dtype=np.float64)


def right_multiply(M: np.ndarray, rho) -> np.ndarray:
    """M @ rho for a MonomialAction or a dense matrix."""
    return rho.right(M) if isinstance(rho, MonomialAction) else M @ rho


def left_multiply(rho, M: np.ndarray) -> np.ndarray:
    """rho @ M for a MonomialAction or a dense matrix."""
    return rho.left(M) if isinstance(rho, MonomialAction) else rho @ M


def apply_rows(rho, X: np.ndarray) -> np.ndarray:
    """X @ rho.T: rho applied to every row of X."""
    return rho.apply_rows(X) if isinstance(rho, MonomialAction) else X @ rho.T
