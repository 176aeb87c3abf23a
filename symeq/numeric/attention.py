"""Numeric twin of :mod:`symeq.attention`: lightning and softmax multi-head attention in floats.

The lightning layer is the exact one in float64 (or torch): f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h.
The softmax layer is the usual one, f(X) = sum_h softmax(X Q_h K_h^T X^T / sqrt(d_k)) X V_h O_h
(row-wise softmax), which is not polynomial and lives only here.  Both act on batches of shape
(N, T, d) and flatten by rows like the exact side (index t*d + c).  The latent space and group are
the same as for the exact layer: value spaces, prod_h GL(d_v) x| S_H on every token.

:func:`value_space_action` fits, by least squares, the action of a group element on the
concatenated value spaces (the paper's metric applied to the heads layer) and projects it to a
block-monomial matrix (a head permutation with GL(d_v) blocks), reporting both residuals — never
"verified".

Examples
--------
>>> from symeq.attention import random_equivariant_attention, scramble_attention
>>> exact = scramble_attention(random_equivariant_attention(rng=0), rng=1)
>>> layer = NumericAttention.from_exact(exact.layers[0])
>>> import numpy as np
>>> X = np.random.default_rng(0).integers(-3, 4, size=(5, 8)).astype(float)
>>> ref = exact([int(v) for v in X[0]])      # exact evaluation of the same point
>>> bool(np.allclose(layer(X)[0], [float(v) for v in ref]))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

__all__ = ["NumericAttention", "value_space_action"]


def _f(M) -> np.ndarray:
    return np.array([[float(int(x.p)) / float(int(x.q)) for x in row] for row in M.table()], dtype=float)


@dataclass
class NumericAttention:
    """Multi-head attention on ``tokens`` tokens; ``kind`` is "lightning" or "softmax"."""

    tokens: int
    query: list
    key: list
    value: list
    out: list
    kind: str = "lightning"

    def __post_init__(self):
        if self.kind not in ("lightning", "softmax"):
            raise InputError(f"attention kind must be 'lightning' or 'softmax', got {self.kind!r}")
        for name in ("query", "key", "value", "out"):
            mats = [np.asarray(m, dtype=float) for m in getattr(self, name)]
            if any(not np.all(np.isfinite(m)) for m in mats):
                raise InputError(f"attention {name} matrices contain NaN or infinite entries")
            setattr(self, name, mats)
        d = self.query[0].shape[0]
        for h, (q, k, v, o) in enumerate(zip(self.query, self.key, self.value, self.out)):
            if q.shape[0] != d or k.shape != q.shape or v.shape[0] != d or o.shape[0] != v.shape[1]:
                raise InputError(f"head {h}: query/key (d x d_k), value (d x d_v), out (d_v x d_out) shapes do not fit")

    @classmethod
    def from_exact(cls, layer, kind: str = "lightning") -> "NumericAttention":
        return cls(layer.tokens, [_f(h.query) for h in layer.heads], [_f(h.key) for h in layer.heads],
                   [_f(h.value) for h in layer.heads], [_f(h.out) for h in layer.heads], kind)

    @property
    def d(self) -> int:
        return self.query[0].shape[0]

    def _tokens(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        if X.ndim == 2:
            if X.shape[1] != self.tokens * self.d:
                raise InputError(f"inputs have {X.shape[1]} entries, expected T*d = {self.tokens * self.d}")
            X = X.reshape(X.shape[0], self.tokens, self.d)
        return X

    def scores(self, X: np.ndarray, h: int) -> np.ndarray:
        A = self.query[h] @ self.key[h].T
        S = np.einsum("ntc,cd,nsd->nts", X, A, X)
        if self.kind == "softmax":
            S = S / np.sqrt(self.query[h].shape[1])
            S = np.exp(S - S.max(axis=-1, keepdims=True))
            S = S / S.sum(axis=-1, keepdims=True)
        return S

    def heads(self, X: np.ndarray) -> np.ndarray:
        """The value-space outputs [Y_1 ... Y_H], shape (N, T, H d_v), Y_h = S_h X V_h."""
        X = self._tokens(X)
        return np.concatenate([self.scores(X, h) @ (X @ self.value[h]) for h in range(len(self.query))], axis=-1)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = self._tokens(X)
        Z = sum(self.scores(X, h) @ (X @ self.value[h]) @ self.out[h] for h in range(len(self.query)))
        return Z.reshape(Z.shape[0], -1)


def value_space_action(layer: NumericAttention, P: np.ndarray, C: np.ndarray, samples: int = 256, seed: int = 0) -> dict:
    """The action of a group element on the value spaces, fitted on Gaussian inputs.

    Two fits, both by least squares with heads(P X C^T) ~ P heads(X) R^T:

    * unconstrained R (the paper's metric on the heads layer): ``fit_error``;
    * block monomial: for every pair of heads (h, k) the best block B with
      Y_h(P X C^T) ~ P Y_k(X) B^T, then the head permutation minimising the total relative residual
      (linear assignment), giving ``projected`` and ``projected_error``.  The unconstrained fit is
      not unique when head outputs are linearly dependent (e.g. d_k = d, where heads can be
      mixed), so the projection is fitted blockwise rather than read off the unconstrained R.

    Residuals are medians of ||lhs - rhs|| / ||lhs|| over the sample rows; nothing is "verified".

    Parameters
    ----------
    P : token permutation (T x T); C : channel matrix (d x d)
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(samples, layer.tokens, layer.d))
    H, dv = len(layer.query), layer.value[0].shape[1]
    Y = layer.heads(X)
    Yg = layer.heads(np.einsum("ts,nsc,dc->ntd", P, X, C))
    PY = np.einsum("ts,nsk->ntk", P, Y)
    A = PY.reshape(-1, PY.shape[-1])
    B = Yg.reshape(-1, Yg.shape[-1])

    def rel(lhs, rhs):
        res = np.linalg.norm(lhs - rhs, axis=1) / np.maximum(np.linalg.norm(lhs, axis=1), 1e-300)
        return float(np.median(res))

    Rt, *_ = np.linalg.lstsq(A, B, rcond=None)
    blocks, cost = {}, np.zeros((H, H))
    for h in range(H):
        lhs = B[:, h * dv:(h + 1) * dv]
        for k in range(H):
            src = A[:, k * dv:(k + 1) * dv]
            Bt, *_ = np.linalg.lstsq(src, lhs, rcond=None)
            blocks[h, k] = Bt.T
            cost[h, k] = rel(lhs, src @ Bt)
    try:
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(cost)
        perm = [int(c) for _, c in sorted(zip(rows, cols))]
    except ImportError:  # greedy fallback
        perm = [int(np.argmin(cost[h])) for h in range(H)]
    Rp = np.zeros((H * dv, H * dv))
    for h, k in enumerate(perm):
        Rp[h * dv:(h + 1) * dv, k * dv:(k + 1) * dv] = blocks[h, k]
    return {"R": Rt.T, "projected": Rp, "head_permutation": perm,
            "fit_error": rel(B, A @ Rt), "projected_error": rel(B, A @ Rp.T)}
