"""Numeric twin of :mod:`symeq.attention`: lightning and softmax multi-head attention in floats.

The lightning layer is the exact one in float64 (or torch): f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h.
The softmax layer is the usual one, f(X) = sum_h softmax(X Q_h K_h^T X^T / sqrt(d_k)) X V_h O_h
(row-wise softmax), which is not polynomial and lives only here.  Both act on batches of shape
(N, T, d) and flatten by rows like the exact side (index t*d + c).  The latent space and group are
the same as for the exact layer: value spaces, prod_h GL(d_v) x| S_H on every token.

For the derivation of the actions a model is walked as its chain, like the exact one: the
:class:`NumericHeads` layer (value spaces) and the output projection merged into the next
token-wise layer.  :func:`match_heads_numeric` is the float twin of
:func:`symeq.attention.match_heads`: heads matched by their score matrices up to a scalar
(exactly equal for softmax), value maps solved by least squares, giving P (x) R.

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
from typing import ClassVar

import numpy as np

from ...backends import FLOAT64, run_forward
from ...errors import InputError
from . import AttentionProgram, AttentionShape, HeadsShape
from ...numeric.monomial import MonomialAction, as_action

__all__ = ["scoring_from_json", "NumericAttention", "NumericHeads", "value_space_action", "factor_kron_numeric", "match_heads_numeric"]


def _f(M) -> np.ndarray:
    return np.array([[float(int(x.p)) / float(int(x.q)) for x in row] for row in M.table()], dtype=float)


def scoring_from_json(spec: dict, at: str) -> tuple:
    """(scoring, scale, score biases, output bias) of an attention layer of a model file, floats
    allowed: ``"scoring"`` ("lightning", the default, or "softmax"), the softmax ``"scale"``
    (absent: 1/sqrt(d_k)), the heads' ``"score_bias"`` and the layer's ``"bias"``."""
    scoring = spec.get("scoring", "lightning")
    if scoring not in ("lightning", "softmax"):
        raise InputError(f"{at}.scoring: must be \"lightning\" or \"softmax\", got {scoring!r}")
    v = spec.get("scale")
    heads = spec.get("heads") or []
    sb = [None if not isinstance(hs, dict) or hs.get("score_bias") is None else
          np.array([_float(x, f"{at}.heads[{h}].score_bias") for x in _list(hs["score_bias"], f"{at}.heads[{h}].score_bias")])
          for h, hs in enumerate(heads)]
    sb = None if all(b is None for b in sb) else sb
    bias = spec.get("bias")
    bias = None if bias is None else np.array([_float(x, f"{at}.bias") for x in _list(bias, f"{at}.bias")])
    if v is None:
        return scoring, None, sb, bias
    if scoring != "softmax":
        raise InputError(f"{at}.scale: a scale belongs to softmax attention only (\"scoring\": \"softmax\")")
    q = _float(v, f"{at}.scale")
    if not q > 0:
        raise InputError(f"{at}.scale: must be positive, got {v!r}")
    return scoring, q, sb, bias


def _list(v, where: str) -> list:
    if not isinstance(v, list):
        raise InputError(f"{where}: expected a list of numbers, got {type(v).__name__}")
    return v


def _float(v, where: str) -> float:
    """A finite float from a JSON number or an exact "p/q" string."""
    from ...numbers import parse_number

    if isinstance(v, float):
        if not np.isfinite(v):
            raise InputError(f"{where}: {v!r} is not finite")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise InputError(f"{where}: expected a number, got {v!r}")
    q = parse_number(v, where)
    return float(int(q.p)) / float(int(q.q))


_FLOAT64 = FLOAT64


def softmax_scores(scale: float, score_bias=None):
    """The softmax score hook of :class:`symeq.layers.attention.AttentionProgram` over float64:
    S_h -> softmax_rows(scale (S_h + 1 (X b_h)^T)), b_h the head's score bias (None: none)."""
    def score(S, Xs, h):
        if score_bias is not None and score_bias[h] is not None:
            S = S + (Xs @ score_bias[h])[:, None, :]
        S = S * scale
        S = np.exp(S - S.max(axis=-1, keepdims=True))
        return S / S.sum(axis=-1, keepdims=True)
    return score


@dataclass
class NumericAttention(AttentionShape):
    """Multi-head attention on ``tokens`` tokens; ``scoring`` is "lightning" or "softmax".

    A float layer of kind ``"attention"`` (:class:`symeq.layers.base.LayerBase`).
    """

    #: where the layer's numbers live (symeq.backends; LayerBase)
    backend = FLOAT64

    tokens: int
    query: list
    key: list
    value: list
    out: list
    scoring: str = "lightning"
    scale: float | None = None  # softmax: the score scale s (None: torch's 1/sqrt(d_k))
    score_bias: list | None = None  # softmax: per head b_h (d) or None, S_ts = x_t^T A_h x_s + b_h^T x_s
    bias: object = None  # softmax: the output bias c (d_out), added to every token

    def __post_init__(self):
        if self.scoring not in ("lightning", "softmax"):
            raise InputError(f"attention scoring must be 'lightning' or 'softmax', got {self.scoring!r}")
        if self.scale is not None and (self.scoring != "softmax" or not float(self.scale) > 0):
            raise InputError(f"a scale belongs to softmax attention and must be positive, got {self.scale!r}")
        for name in ("query", "key", "value", "out"):
            mats = [np.asarray(m, dtype=float) for m in getattr(self, name)]
            if any(not np.all(np.isfinite(m)) for m in mats):
                raise InputError(f"attention {name} matrices contain NaN or infinite entries")
            setattr(self, name, mats)
        d = self.query[0].shape[0]
        for h, (q, k, v, o) in enumerate(zip(self.query, self.key, self.value, self.out)):
            if q.shape[0] != d or k.shape != q.shape or v.shape[0] != d or o.shape[0] != v.shape[1]:
                raise InputError(f"head {h + 1}: query/key (d x d_k), value (d x d_v), out (d_v x d_out) shapes do not fit")
        if self.score_bias is not None:
            self.score_bias = [None if b is None else np.asarray(b, dtype=float).reshape(d) for b in self.score_bias]
            if all(b is None or not np.any(b) for b in self.score_bias):
                self.score_bias = None
        if self.bias is not None:
            self.bias = np.asarray(self.bias, dtype=float).reshape(self.out[0].shape[1])
        if self.scoring == "lightning" and (self.score_bias is not None or self.bias is not None):
            raise InputError("score biases and an output bias belong to softmax attention only")

    #: the model-file types this float class reads with floats allowed (numeric.models.model_from_json)
    json_types: ClassVar[tuple] = ("attention",)

    @classmethod
    def from_float_json(cls, spec: dict, ctx, at: str) -> "NumericAttention":
        """An attention layer of the model file format on ``ctx.n`` inputs, floats allowed (the exact
        kind's keys, :mod:`symeq.io`); sets the reader's token count and width for the layers after it."""
        from ...errors import ShapeError
        from ..registry import kind_class
        from ...schema import check_keys
        from ...numeric.floats import float_matrix

        exact = kind_class(cls.kind)
        check_keys(spec, at, *exact.schema[spec["type"]], error=InputError)
        T = spec.get("tokens")
        if not isinstance(T, int) or isinstance(T, bool) or T < 1:
            raise InputError(f"{at}: \"tokens\" must be a positive integer (the number of tokens T)")
        if ctx.n % T:
            raise ShapeError(f"{at}: input_dim {ctx.n} is not a multiple of {T} tokens "
                             "(inputs are T x d, flattened by rows)")
        d = ctx.n // T
        heads = spec.get("heads")
        if not isinstance(heads, list) or not heads:
            raise InputError(f"{at}: \"heads\" must be a non-empty list of {{query, key, value, out}}")
        mats = {"query": [], "key": [], "value": [], "out": []}
        for h, hs in enumerate(heads):
            if not isinstance(hs, dict):
                raise InputError(f"{at}.heads[{h}] must be an object with \"query\", \"key\", \"value\" and \"out\" "
                                 "matrices")
            check_keys(hs, f"{at}.heads[{h}]", *exact.head_keys(), error=InputError)
            for k in mats:
                m = float_matrix(hs[k], f"{at}.heads[{h}].{k}")
                rows = mats["value"][-1].shape[1] if k == "out" else d
                if m.shape[0] != rows:
                    raise ShapeError(f"{at}.heads[{h}].{k} has {m.shape[0]} rows, expected {rows}")
                mats[k].append(m)
        try:
            att = cls(T, mats["query"], mats["key"], mats["value"], mats["out"], *scoring_from_json(spec, at))
        except InputError as e:
            raise InputError(f"{at}: {e}") from None
        ctx.tokens, ctx.n = att.tokens, att.d_out
        return att

    @classmethod
    def float_twin(cls, layer, activation=None) -> "NumericAttention":
        """The float twin of an exact attention layer (its scoring and scale)."""
        return cls.from_exact(layer)

    @classmethod
    def from_exact(cls, layer, scoring: str | None = None) -> "NumericAttention":
        """The float twin of an exact :class:`symeq.layers.attention.AttentionLayer` (its scoring
        and scale unless ``scoring`` is given)."""
        scoring = scoring if scoring is not None else getattr(layer, "scoring", "lightning")
        scale = getattr(layer, "scale", None)
        scale = float(int(scale.p)) / float(int(scale.q)) if scale is not None and scoring == "softmax" else None
        fl = lambda v: None if v is None else np.array([float(int(x.p)) / float(int(x.q)) for x in v])  # noqa: E731
        sb = [fl(getattr(h, "score_bias", None)) for h in layer.heads]
        return cls(layer.tokens, [_f(h.query) for h in layer.heads], [_f(h.key) for h in layer.heads],
                   [_f(h.value) for h in layer.heads], [_f(h.out) for h in layer.heads], scoring, scale,
                   None if all(b is None for b in sb) else sb, fl(getattr(layer, "bias", None)))

    def score_scale(self) -> float:
        """The factor s in softmax(s X A X^T): the given scale, else 1/sqrt(d_k) (as torch)."""
        return float(self.scale) if self.scale is not None else 1.0 / np.sqrt(self.query[0].shape[1])

    activation = None  # a layer of a NumericModel: no pointwise activation after it

    @property
    def d(self) -> int:
        return self.query[0].shape[0]

    @property
    def d_out(self) -> int:
        return self.out[0].shape[1]

    @property
    def hidden_label(self) -> str:
        return f"{self.scoring} attention ({len(self.query)} heads, d_v = {self.value[0].shape[1]}, {self.tokens} tokens)"

    @property
    def label(self) -> str:
        return (f"{self.scoring} attention {self.in_dim}->{self.out_dim} ({len(self.query)} heads, "
                f"d_v = {self.value[0].shape[1]}, {self.tokens} tokens)")

    @property
    def n_params(self) -> int:
        return sum(m.size for name in ("query", "key", "value", "out") for m in getattr(self, name))

    def forward(self, X: np.ndarray) -> np.ndarray:
        """Apply the layer to a batch of flattened inputs (one row per point)."""
        return self(X)

    def match_reference(self, affine: bool = False) -> None:
        """Nothing: a whole attention layer is matched through its chain (see :meth:`match_action`)."""
        return None

    def match_action(self, P_in, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """Not matched as a whole: the derivation matches the model's chain (``NumericModel.chain``:
        :meth:`NumericHeads.match_action`, then the token-wise dense layer); raises
        :class:`~symeq.errors.InputError` saying so."""
        raise InputError("an attention layer is matched through its chain (NumericModel.chain): the heads "
                         "layer, then the token-wise dense layer; match those layers instead")

    def copy(self) -> "NumericAttention":
        return NumericAttention(self.tokens, [m.copy() for m in self.query], [m.copy() for m in self.key],
                                [m.copy() for m in self.value], [m.copy() for m in self.out], self.scoring,
                                self.scale, None if self.score_bias is None else
                                [None if b is None else b.copy() for b in self.score_bias],
                                None if self.bias is None else self.bias.copy())

    def heads_layer(self) -> "NumericHeads":
        """The first layer of the chain: the value spaces (see :func:`symeq.models.Model.chain`)."""
        return NumericHeads(self.tokens, [q @ k.T for q, k in zip(self.query, self.key)], list(self.value),
                            self.scoring, self.query[0].shape[1], self.scale, self.score_bias)

    def out_stack(self) -> np.ndarray:
        """O stacked over heads (H d_v x d_out)."""
        return np.vstack(self.out)

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
        if self.score_bias is not None and self.score_bias[h] is not None:
            S = S + (X @ self.score_bias[h])[:, None, :]
        if self.scoring == "softmax":
            S = S * self.score_scale()
            S = np.exp(S - S.max(axis=-1, keepdims=True))
            S = S / S.sum(axis=-1, keepdims=True)
        return S

    def program(self, heads_only: bool = False) -> AttentionProgram:
        """The attention kind's one program (symeq/layers/attention/__init__.py) over float64 on these matrices,
        softmax scoring as its score hook; ``heads_only``: the value-space outputs (no O_h, no bias)."""
        score = softmax_scores(self.score_scale(), self.score_bias) if self.scoring == "softmax" else None
        return AttentionProgram.from_matrices(_FLOAT64, self.tokens, self.query, self.key, self.value,
                                              None if heads_only else self.out, score,
                                              None if heads_only else self.bias)

    def heads(self, X: np.ndarray) -> np.ndarray:
        """The value-space outputs [Y_1 ... Y_H], shape (N, T, H d_v), Y_h = S_h X V_h."""
        X = self._tokens(X)
        N = X.shape[0]
        return run_forward(self.program(True), X.reshape(N, -1).T).T.reshape(N, self.tokens, -1)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        X = self._tokens(X)
        N = X.shape[0]
        return np.ascontiguousarray(run_forward(self.program(), X.reshape(N, -1).T).T)


def _assign(cost: np.ndarray) -> list:
    """The head permutation minimising the total cost (H is small: exhaustive up to 7 heads)."""
    import itertools

    H = cost.shape[0]
    arg = cost.argmin(axis=1)
    if len(set(arg.tolist())) == H:
        return arg.tolist()
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        if H > 7:  # greedy fallback, optimal only for clear-cut costs
            return [int(np.argmin(cost[h])) for h in range(H)]
        return list(min(itertools.permutations(range(H)), key=lambda p: sum(cost[h, p[h]] for h in range(H))))
    rows, cols = linear_sum_assignment(cost)
    return [int(c) for _, c in sorted(zip(rows, cols))]


@dataclass
class NumericHeads(HeadsShape):
    """X -> [Y_1 ... Y_H] with Y_h = S_h(X) X V_h (flattened t * H d_v + h d_v + j, as the exact
    :class:`symeq.attention.HeadsLayer`); S_h the lightning scores X A_h X^T or their softmax
    (``scoring``).  Shapes and names come from :class:`symeq.layers.attention.HeadsShape`."""

    #: where the layer's numbers live (symeq.backends; LayerBase)
    backend = FLOAT64

    tokens: int
    scores: list
    values: list
    scoring: str = "lightning"
    dk: int = 1
    scale: float | None = None  # softmax: the score scale (None: 1/sqrt(dk))
    score_biases: list | None = None  # softmax: per head b_h or None
    activation = None

    @classmethod
    def float_twin(cls, layer, activation=None) -> "NumericHeads":
        """The float twin of an exact heads layer (its score and value matrices in float64)."""
        from ...numeric.monomial import to_float_matrix

        return cls(layer.tokens, [to_float_matrix(a) for a in layer.scores], [to_float_matrix(v) for v in layer.values])

    def forward(self, X: np.ndarray) -> np.ndarray:
        """[Y_1 ... Y_H] on a batch (a row per point): the attention kind's program over float64 with the
        scores A_h (S_h = X A_h X^T, or its softmax) and no output matrices."""
        X = np.asarray(X, dtype=float).reshape(-1, self.tokens * self.d)
        score = None
        if self.scoring == "softmax":
            score = softmax_scores(float(self.scale) if self.scale is not None else 1.0 / np.sqrt(self.dk),
                                   self.score_biases)
        prog = AttentionProgram.from_matrices(_FLOAT64, self.tokens, self.scores, None, self.values, None, score)
        return np.ascontiguousarray(run_forward(prog, X.T).T)

    def match_action(self, P_in, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """The value-space action P (x) R given P_in = P (x) C on the tokens
        (:func:`match_heads_numeric`), with its record: ``(False, [(rho, (max residual, median
        residual, margin, how))])``.  One candidate: a float match does not enumerate tied heads.

        Raises :class:`~symeq.errors.InputError` when P_in is not of the form P (x) C (the
        question is not posed for this layer), as the float derivation always has.

        >>> layer = NumericHeads(2, [np.eye(1)], [np.eye(1)])
        >>> _, [(rho, rec)] = layer.match_action(np.array([[0.0, 1.0], [1.0, 0.0]]))
        >>> rho.cols.tolist(), rec[0] < 1e-12
        ([1, 0], True)
        """
        P = P_in.to_dense() if isinstance(P_in, MonomialAction) else P_in
        rho, rel, margin, why = match_heads_numeric(self, P)
        if why:  # the input action is not of the form the heads layer allows: a question not posed
            raise InputError(f"attention heads: {why}")
        how = f"{self.heads} heads matched by linear assignment on their score matrices, values by least squares"
        return False, [(as_action(rho), (float(rel.max()), float(np.median(rel)), margin, how))]


def factor_kron_numeric(M: np.ndarray, T: int, d: int, tol: float = 1e-9):
    """(P, C) with M = P (x) C for a T x T permutation P, or None (the float twin of
    :func:`symeq.attention.factor_kron`).

    >>> P, C = np.eye(2)[[1, 0]], np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> f = factor_kron_numeric(np.kron(P, C), 2, 2)
    >>> bool(np.allclose(f[0], P) and np.allclose(f[1], C))
    True
    """
    M = np.asarray(M, dtype=float)
    if M.shape != (T * d, T * d):
        return None
    blocks = M.reshape(T, d, T, d).transpose(0, 2, 1, 3)  # blocks[t, s] = M[t d:(t+1) d, s d:(s+1) d]
    norms = np.linalg.norm(blocks, axis=(2, 3))
    scale = max(float(norms.max()), 1e-300)
    nz = norms > tol * scale
    if not np.all(nz.sum(axis=1) == 1) or not np.all(nz.sum(axis=0) == 1):
        return None
    cols = nz.argmax(axis=1)
    C = blocks[0, cols[0]]
    if any(not np.allclose(blocks[t, cols[t]], C, atol=tol * scale, rtol=0) for t in range(T)):
        return None
    return np.eye(T)[cols], C


def match_heads_numeric(layer: NumericHeads, P_in: np.ndarray):
    """The value-space action P (x) R making the heads layer equivariant under P_in = P (x) C.

    The float twin of :func:`symeq.attention.match_heads`: head h is matched to the head k with
    C^T A_h C ~ lambda A_k (lambda = 1 for softmax scores, whose score biases are matched too:
    C^T b_h ~ b_k) by linear assignment on the relative residuals, V_k N ~ C^T V_h is solved by least squares, and block (h, k) of R is
    (lambda N)^T.  Returns (action, residuals per head, margin, failure or None).
    """
    T, H, dv = layer.tokens, layer.heads, layer.dv
    fin = factor_kron_numeric(P_in, T, layer.d)
    if fin is None:
        return None, np.full(H, np.inf), 0.0, "the group does not act as a token permutation (x) a channel matrix"
    P, C = fin
    sb = getattr(layer, "score_biases", None)
    zero = np.zeros(layer.d)

    def stack(A, b):  # softmax: the score bias is matched with the score matrix, [A; b^T]
        return A if sb is None else np.vstack([A, b[None, :]])

    At = [stack(C.T @ A @ C, C.T @ (zero if sb is None or sb[h] is None else sb[h]))
          for h, A in enumerate(layer.scores)]
    Ak_all = [stack(A, zero if sb is None or sb[k] is None else sb[k]) for k, A in enumerate(layer.scores)]
    cost = np.zeros((H, H))
    lam = np.ones((H, H))
    for h in range(H):
        nh = max(np.linalg.norm(At[h]), 1e-300)
        for k in range(H):
            Ak = Ak_all[k]
            if layer.scoring != "softmax":  # lightning scores are trilinear: a scalar moves into V
                lam[h, k] = float(np.sum(At[h] * Ak) / max(np.sum(Ak * Ak), 1e-300))
            cost[h, k] = np.linalg.norm(At[h] - lam[h, k] * Ak) / nh
    perm = _assign(cost)
    part = np.sort(cost, axis=1)
    margin = float(np.min(part[:, 1] - part[:, 0])) if H > 1 else float("inf")
    R = np.zeros((H * dv, H * dv))
    res = np.zeros(H)
    for h in range(H):
        k = int(perm[h])
        Vk, rhs = layer.values[k], C.T @ layer.values[h]
        N, *_ = np.linalg.lstsq(Vk, rhs, rcond=None)
        res_v = np.linalg.norm(Vk @ N - rhs) / max(np.linalg.norm(rhs), 1e-300)
        res[h] = max(cost[h, k], res_v)
        R[h * dv:(h + 1) * dv, k * dv:(k + 1) * dv] = (lam[h, k] * N).T
    return np.kron(P, R), res, margin, None


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
    perm = [int(k) for k in _assign(cost)]
    Rp = np.zeros((H * dv, H * dv))
    for h, k in enumerate(perm):
        Rp[h * dv:(h + 1) * dv, k * dv:(k + 1) * dv] = blocks[h, k]
    return {"R": Rt.T, "projected": Rp, "head_permutation": perm,
            "fit_error": rel(B, A @ Rt), "projected_error": rel(B, A @ Rp.T)}


FLOAT_LAYERS = (NumericAttention, NumericHeads)

