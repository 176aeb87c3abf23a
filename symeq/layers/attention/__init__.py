"""The exact lightning (polynomial) multi-head attention layer, its latent group, and the check
and matching of latent actions on it.

A lightning attention layer on T tokens with d channels (no softmax, so polynomial of degree 3)::

    f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h,        X in Q^{T x d}

(Henry, Marchetti, Kohn, ICLR 2025).  Its latent space is the concatenation of the heads' value
spaces, Y = [Y_1 ... Y_H] with Y_h = (X A_h X^T) X V_h and A_h = Q_h K_h^T; the latent group is
prod_h GL(d_v) x| S_H (acting on every token alike), and the query/key freedom
Q_h -> Q_h M, K_h -> K_h M^-T is internal to the layer (it does not change A_h).

Vectors are flattened row-major: x = vec(X) with index t*d + c, so the action X -> P X C^T of a
token permutation P and a channel matrix C is the Kronecker product P (x) C, and a token-wise
dense layer X -> sigma(X W^T + b) is the dense layer with weight I_T (x) W.

For a generator acting by P (x) C, head h is matched to the head k with C^T A_h C = lambda A_k
(canonical forms of the score matrices up to scalars) and V_k N = C^T V_h is solved exactly for N
in GL(d_v); the action on the value spaces is P (x) R with block (h, k) of R equal to lambda N^T.
Models, generators, submodels and dimension counts of attention live in :mod:`symeq.attention`.

Softmax attention (``scoring="softmax"``, docs/attention.md)::

    f(X) = sum_h softmax_rows(s X Q_h K_h^T X^T) X V_h O_h,    s = 1/sqrt(d_k) (torch) or a rational

is not rational-valued, but its layer checks are algebraic: softmax commutes with permuting rows
and columns alike, so under X -> P X C^T a head h goes to a head k when C^T A_h C = A_k *exactly*
(no free scalar: softmax(c S) != softmax(S) for c != 1) and C^T V_h = V_k N.  The scale s is the
same for every head (one d_k, or one rational ``scale``), so it drops out of these conditions and
is kept exactly as what it is (never rounded): ``scale=None`` means 1/sqrt(d_k), which is only
ever evaluated in arb balls (:meth:`AttentionLayer.ball_forward`) for refutation witnesses.

>>> tokenwise(identity(2), 3).nrows()
6
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from flint import fmpq, fmpq_mat, fmpq_mpoly_ctx

from ...canonical import Form, plain_form
from ...backends import EXACT, Backend, run_forward
from ...errors import InputError, ShapeError
from ...numbers import identity, kron, mat_rows, matrix
from ...sizes import check_monomials, monomials_upto
from ..base import NoPartner

_EXACT = EXACT

__all__ = [
    "Head",
    "AttentionLayer",
    "AttentionShape",
    "HeadsShape",
    "HeadsLayer",
    "factor_kron",
    "tokenwise",
    "head_permutation",
    "block_monomial_parts",
    "check_heads_layer",
    "match_heads",
    "LATENT_GROUP",
    "SCORINGS",
    "score_key",
    "transformed_scores",
    "softmax_scale_ball",
]

SCORINGS = ("lightning", "softmax")
"""The scorings of an attention layer: lightning (polynomial, the default) and softmax."""

LATENT_GROUP = "per-head GL(d_v) x head permutations (block monomial), on every token"


def _nonzeros(M: fmpq_mat) -> list:
    c = M.ncols()
    return [(i // c, i % c, x) for i, x in enumerate(M.entries()) if x != 0]


def factor_kron(M: fmpq_mat, T: int, d: int) -> tuple[fmpq_mat, fmpq_mat] | None:
    """(P, C) with M = P (x) C and P a permutation matrix (T x T), or None."""
    if M.nrows() != T * d or M.ncols() != T * d:
        return None
    blocks = {}
    for r, c, _ in _nonzeros(M):
        blocks.setdefault(r // d, set()).add(c // d)
    if sorted(blocks) != list(range(T)) or any(len(v) != 1 for v in blocks.values()):
        return None
    target = {t: next(iter(v)) for t, v in blocks.items()}
    if sorted(target.values()) != list(range(T)):
        return None
    P = fmpq_mat(T, T)
    for t, s_ in target.items():
        P[t, s_] = 1
    s0 = target[0]
    C = fmpq_mat(d, d, [M[a, s0 * d + b] for a in range(d) for b in range(d)])
    if kron(P, C) != M:
        return None
    return P, C


def tokenwise(W: fmpq_mat, T: int) -> fmpq_mat:
    """The flattened weight I_T (x) W of a token-wise linear map."""
    return kron(identity(T), W)


@dataclass(eq=False)
class Head:
    """One head: query, key (d x d_k), value (d x d_v), out (d_v x d_out), held in a number backend (exact:
    ``fmpq_mat`` and rationals; float64: arrays)."""

    query: fmpq_mat
    key: fmpq_mat
    value: fmpq_mat
    out: fmpq_mat
    score_bias: object = None  # softmax only: b in S_ts = x_t^T Q K^T x_s + b^T x_s (a list of d rationals)
    backend: Backend = field(default=EXACT, repr=False)

    def __post_init__(self):
        if not self.backend.exact:  # float64: arrays, finite (the layer checks the shapes, naming the head)
            for name in ("query", "key", "value", "out"):
                m = np.asarray(getattr(self, name), dtype=float)
                if not np.all(np.isfinite(m)):
                    raise InputError(f"attention {name} matrices contain NaN or infinite entries")
                setattr(self, name, m)
            return
        for name in ("query", "key", "value", "out"):
            m = getattr(self, name)
            if not isinstance(m, fmpq_mat):
                setattr(self, name, matrix(m))
        d = self.query.nrows()
        if self.score_bias is not None:
            self.score_bias = [fmpq(v) for v in self.score_bias]
            if len(self.score_bias) != d:
                raise ShapeError(f"score_bias must have d = {d} entries, got {len(self.score_bias)}")
            if all(v == 0 for v in self.score_bias):
                self.score_bias = None
        if self.key.nrows() != d or self.value.nrows() != d:
            raise ShapeError(f"query, key and value must have d = {d} rows (got {self.key.nrows()}, {self.value.nrows()})")
        if self.key.ncols() != self.query.ncols():
            raise ShapeError(f"query and key must have the same number of columns d_k ({self.query.ncols()} vs {self.key.ncols()})")
        if self.out.nrows() != self.value.ncols():
            raise ShapeError(f"out must have d_v = {self.value.ncols()} rows, got {self.out.nrows()}")

    @property
    def scores(self):
        """A = Q K^T (d x d)."""
        if not self.backend.exact:
            return self.query @ self.key.T
        return self.query * self.key.transpose()

    def copy(self) -> "Head":
        if not self.backend.exact:
            return Head(self.query.copy(), self.key.copy(), self.value.copy(), self.out.copy(),
                        None if self.score_bias is None else self.score_bias.copy(), self.backend)
        return Head(fmpq_mat(self.query), fmpq_mat(self.key), fmpq_mat(self.value), fmpq_mat(self.out),
                    None if self.score_bias is None else list(self.score_bias))


def _tokens(x_col: list, T: int, d: int) -> fmpq_mat:
    return fmpq_mat(T, d, x_col)


def _head_outputs(X: fmpq_mat, A_list, V_list) -> list[fmpq_mat]:
    XT = X.transpose()
    return [(X * A * XT) * (X * V) for A, V in zip(A_list, V_list)]


def _linear(coeffs, xs, zero):
    """sum_j coeffs[j] xs[j], skipping zero coefficients (xs: fmpq or fmpq_mpoly entries)."""
    return sum((c * x for c, x in zip(coeffs, xs) if c != 0), zero)


def _check_scoring(scoring, scale, dks: list):
    """The exact scale of a layer with this scoring (None: 1/sqrt(d_k)), or InputError."""
    if scoring not in SCORINGS:
        raise InputError(f"attention scoring must be one of {', '.join(map(repr, SCORINGS))}, got {scoring!r}")
    if scoring == "lightning":
        if scale is not None:
            raise InputError("a scale belongs to softmax attention only (lightning attention has a free score scalar)")
        return None
    if scale is None:
        if len(set(dks)) > 1:
            raise InputError(f"softmax attention with the default scale 1/sqrt(d_k) needs one d_k in every head "
                             f"(got {sorted(set(dks))}); give a rational \"scale\" instead")
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, fmpq)):
        raise InputError(f"the softmax scale must be an exact rational, got {scale!r}")
    scale = fmpq(scale)
    if scale <= 0:
        raise InputError(f"the softmax scale must be positive, got {scale}")
    return scale


def softmax_scale_ball(scale, dk: int):
    """The scale s as an arb ball: the rational itself, or 1/sqrt(d_k) enclosed by arb."""
    from flint import arb

    return arb(scale) if scale is not None else 1 / arb(dk).sqrt()


def _softmax_ball(S: list) -> list:
    """softmax of a row of arb balls, rigorously: exp(S_u - m) / sum_w exp(S_w - m), m = mid of the max."""
    from flint import arb

    m = max((v.mid() for v in S), key=lambda v: float(v)) if S else arb(0)
    e = [(v - m).exp() for v in S]
    z = sum(e, arb(0))
    return [v / z for v in e]


def _rational_only(scoring: str) -> None:
    if scoring == "softmax":
        from ...errors import NotExactError

        raise NotExactError("softmax attention is not rational-valued: it is checked algebraically and "
                            "evaluated only in arb balls (ball_forward), never exactly at a point")


def score_key(A: fmpq_mat, scoring: str = "lightning", bias=None):
    """(key, scalar) under which score matrices are matched: up to a scalar for lightning
    (:func:`_canonical_scores`), entry by entry for softmax (scalar 1: no free score scalar),
    together with the score bias b (softmax: S_ts = x_t^T A x_s + b^T x_s)."""
    if scoring == "softmax":
        b = bias if bias is not None else [0] * A.ncols()
        return tuple((int(x.p), int(x.q)) for x in list(A.entries()) + [fmpq(v) for v in b]), fmpq(1)
    return _canonical_scores(A)


def transformed_scores(A: fmpq_mat, bias, C: fmpq_mat) -> tuple:
    """(C^T A C, C^T b): the score matrix and score bias of a head seen through X -> X C^T."""
    Ct = C.transpose()
    if bias is None:
        return Ct * A * C, None
    return Ct * A * C, list((Ct * fmpq_mat(len(bias), 1, list(bias))).entries())


def _check_softmax_layer(layer, P_in, Q_out, c_in, c_out) -> tuple[bool, str]:
    """A sufficient exact condition for f(P x) = Q f(x) on a whole softmax layer: P_in = P (x) C,
    Q_out = P (x) C_out, and for every score matrix M the heads h with C^T A_h C = M carry
    sum_h C^T V_h O_h = (sum_{k: A_k = M} V_k O_k) C_out^T (softmax(P S P^T) = P softmax(S) P^T)."""
    if any(v != 0 for v in (c_in or [])) or any(v != 0 for v in (c_out or [])):
        return False, "affine actions are not supported on softmax attention"
    T, d, do = layer.tokens, layer.d, layer.d_out
    fin, fout = factor_kron(P_in, T, d), factor_kron(Q_out, T, do)
    if fin is None or fout is None or fin[0] != fout[0]:
        return False, ("sufficient condition not met: the actions are not one token permutation (x) channel "
                       "matrices")
    (_, C), (_, Co) = fin, fout
    Ct = C.transpose()
    sums: dict = {}
    for h in layer.heads:
        At, bt = transformed_scores(h.scores, h.score_bias, C)
        key = score_key(At, "softmax", bt)[0]
        sums.setdefault(key, [fmpq_mat(d, do), fmpq_mat(d, do)])[0] += Ct * h.value * h.out
    for h in layer.heads:
        key = score_key(h.scores, "softmax", h.score_bias)[0]
        sums.setdefault(key, [fmpq_mat(d, do), fmpq_mat(d, do)])[1] += h.value * h.out * Co.transpose()
    for i, (lhs, rhs) in enumerate(sums.values()):
        if lhs != rhs:
            return False, ("sufficient condition not met: for some score matrix the heads' C^T V O and "
                           "V O C_out^T differ (the layer may still be equivariant; not decided here)")
    c = layer.bias if layer.bias is not None else [fmpq(0)] * do
    if [sum((Co[i, j] * c[j] for j in range(do)), fmpq(0)) for i in range(do)] != c:
        return False, "the output bias c is not fixed by C_out (C_out c != c): f(P x) != Q f(x) at x = 0"
    return True, (f"softmax(P S P^T) = P softmax(S) P^T, and the {len(layer.heads)} heads' score matrices and "
                  "V O products correspond exactly under C and C_out: f(P x) = Q f(x) for all x, exactly")


class _Scoring:
    """What the scoring makes of an attention kind (asked by symeq.layers.base.polynomial_layer and
    real_valued_layer): lightning attention is a polynomial map, softmax attention is not (exp) and its
    values are real, decided on balls."""

    @property
    def polynomial_map(self) -> bool:
        return self.scoring != "softmax" and (self.activation is None or self.activation.is_polynomial)

    @property
    def real_valued(self) -> bool:
        return self.scoring == "softmax"


class AttentionShape:
    """The dimensions and latent group of a whole attention layer, from its ``tokens``, ``d`` (the
    token width) and ``d_out``, exact or float alike (:class:`AttentionLayer`)."""

    kind: ClassVar[str] = "attention"
    #: what the kind can do (symeq.layers.registry.CAPABILITIES)
    capabilities: ClassVar[frozenset] = frozenset({
        "token-mixing", "last-layer", "splits-in-chain", "neuron-reduction", "ball-evaluation", "jacobian-rank",
        "rank-certificate"})
    schema: ClassVar[dict] = {
        "attention": (("type", "tokens", "heads", "scoring", "scale", "bias"), ("type", "tokens", "heads")),
        "head": (("query", "key", "value", "out", "score_bias"), ("query", "key", "value", "out")),
    }

    @classmethod
    def head_keys(cls) -> tuple:
        """The allowed and required keys of one head object (the readers of model files, exact and float)."""
        return cls.schema["head"]

    @property
    def in_dim(self) -> int:
        return self.tokens * self.d

    @property
    def out_dim(self) -> int:
        return self.tokens * self.d_out

    @property
    def latent_group_name(self) -> str:
        """The group of the value spaces inside the layer (the hidden space of its chain)."""
        return LATENT_GROUP


@dataclass(eq=False)
class AttentionLayer(AttentionShape, _Scoring):
    """Multi-head attention on ``tokens`` tokens (flattened input T*d, output T*d_out), lightning or softmax.

    Implements :class:`symeq.layers.base.Layer` (kind ``"attention"``); in a model's chain it splits
    into a :class:`HeadsLayer` and a token-wise dense layer (``symeq.models.Model.chain``).  The kind's one
    class, exact or float by ``backend``: over ``EXACT`` (the default) the heads hold ``fmpq_mat`` and a batch
    is an ``fmpq_mat`` with a column per point; over ``FLOAT64`` (the float twin,
    :func:`symeq.layers.attention.floating.NumericAttention`) float64 arrays, a row per point, softmax
    evaluated in floats.  Only an exact layer decides an action.
    """

    #: the kind's float side (symeq.numeric.models.float_class): its float twin, reading and forward
    float_module: ClassVar[str] = "symeq.layers.attention.floating"
    #: the kind's readers of a whole file or module (``read_onnx_model``, ``read_torch_model``;
    #: symeq.numeric.models.kind_model_readers): torch's exported subgraph and torch's attention modules
    reader_modules: ClassVar[tuple] = ("symeq.layers.attention.onnx", "symeq.layers.attention.torch_modules")

    tokens: int
    heads: list
    activation: object = None
    scoring: str = "lightning"
    scale: object = None  # softmax only: a rational scale s, or None for torch's 1/sqrt(d_k)
    bias: object = None   # softmax only: the output bias c (d_out rationals), added to every token
    #: where the layer's numbers live (symeq.backends; LayerBase): EXACT or FLOAT64
    backend: Backend = field(default=EXACT, repr=False)
    #: the model-file types the float side reads with floats allowed (symeq.numeric.models.model_from_json)
    json_types: ClassVar[tuple] = ("attention",)

    def __post_init__(self):
        if not isinstance(self.tokens, int) or self.tokens < 1:
            raise InputError(f"tokens must be a positive integer, got {self.tokens!r}")
        if not self.heads:
            raise InputError("an attention layer needs at least one head")
        if not self.backend.exact:
            self._float_unit().float_parameters(self)
            return
        self.heads = [h if isinstance(h, Head) else Head(**h) for h in self.heads]
        h0 = self.heads[0]
        for i, h in enumerate(self.heads):
            if h.query.nrows() != h0.query.nrows() or h.out.ncols() != h0.out.ncols() or h.value.ncols() != h0.value.ncols():
                raise ShapeError(f"head {i + 1} has other shapes than head 1 (all heads need the same d, d_v, d_out)")
        self.scale = _check_scoring(self.scoring, self.scale, [h.query.ncols() for h in self.heads])
        if self.bias is not None:
            self.bias = [fmpq(v) for v in self.bias]
            if len(self.bias) != self.d_out:
                raise ShapeError(f"the attention bias must have d_out = {self.d_out} entries, got {len(self.bias)}")
            if all(v == 0 for v in self.bias):
                self.bias = None
        if self.scoring == "lightning" and (self.bias is not None or any(h.score_bias is not None for h in self.heads)):
            raise InputError("score biases and an output bias belong to softmax attention only (lightning "
                             "attention is the polynomial f(X) = sum_h (X Q_h K_h^T X^T) X V_h O_h)")

    @classmethod
    def _float_unit(cls):
        """The kind's float side (``float_module``), imported by its name when asked: it sits above the exact
        layers (symeq.layers.registry.float_unit)."""
        from ..registry import float_unit

        return float_unit(cls.kind)

    @classmethod
    def float_twin(cls, layer, activation=None) -> "AttentionLayer":
        """The float twin of an exact attention layer (its scoring and scale)."""
        return cls._float_unit().from_exact(layer)

    @classmethod
    def from_float_json(cls, spec: dict, ctx, at: str) -> "AttentionLayer":
        """An attention layer of a model file with floats allowed, over float64 (the kind's float side)."""
        return cls._float_unit().from_float_json(spec, ctx, at)

    def on(self, backend) -> "AttentionLayer":
        """This layer with its numbers in ``backend`` (an exact layer's float twin: ``on(FLOAT64)``)."""
        if backend is self.backend:
            return self
        if not backend.exact:
            return self._float_unit().from_exact(self)
        raise InputError("a float attention layer is made exact by rounding its matrices; on(EXACT) does not "
                         "choose a rounding")

    # the per-head matrices as lists (the float side's and the readers' view of the heads)
    @property
    def query(self) -> list:
        return [h.query for h in self.heads]

    @property
    def key(self) -> list:
        return [h.key for h in self.heads]

    @property
    def value(self) -> list:
        return [h.value for h in self.heads]

    @property
    def out(self) -> list:
        return [h.out for h in self.heads]

    @property
    def score_bias(self) -> list | None:
        """Every head's score bias b_h (None where it has none), or None when no head has one."""
        sb = [h.score_bias for h in self.heads]
        return None if all(b is None for b in sb) else sb

    @property
    def dk(self) -> int:
        return _cols(self.heads[0].query)

    def with_heads(self, heads: list) -> "AttentionLayer":
        """The same kind of layer (tokens, scoring, scale, output bias, backend) with other heads."""
        return AttentionLayer(self.tokens, heads, None, self.scoring, self.scale,
                              None if self.bias is None else list(self.bias), self.backend)

    def heads_layer(self) -> "HeadsLayer":
        """The first layer of the chain (``symeq.models.Model.chain``): the heads' value spaces (the
        output bias goes with the output projection into the next layer)."""
        if not self.backend.exact:
            return self._float_unit().heads_layer(self)
        sb = [h.score_bias for h in self.heads]
        return HeadsLayer(self.tokens, [h.scores for h in self.heads], [h.value for h in self.heads], None,
                          self.scoring, self.scale, self.dk, None if all(b is None for b in sb) else sb)

    @property
    def d(self) -> int:
        return _rows(self.heads[0].query)

    @property
    def dv(self) -> int:
        return _cols(self.heads[0].value)

    @property
    def d_out(self) -> int:
        return _cols(self.heads[0].out)

    @property
    def n_params(self) -> int:
        return sum(_rows(h.query) * _cols(h.query) * 2 + _rows(h.value) * _cols(h.value)
                   + _rows(h.out) * _cols(h.out) for h in self.heads)

    def out_stack(self):
        """O stacked over heads (H d_v x d_out)."""
        if not self.backend.exact:
            return np.vstack(self.out)
        rows = [r for h in self.heads for r in mat_rows(h.out)]
        return fmpq_mat(len(rows), self.d_out, [x for r in rows for x in r])

    def forward(self, Xb):
        """The layer on a batch: the kind's program over the layer's backend (exact: a column per point,
        lightning only: softmax has no rational value, see :meth:`ball_forward`; float64: a row per point,
        softmax in floats, the float side's ``forward``)."""
        if not self.backend.exact:
            return self._float_unit().forward(self, Xb)
        _rational_only(self.scoring)
        return _EXACT.to_mat(run_forward(AttentionProgram(_EXACT, self), _EXACT.from_mat(Xb)))

    def __call__(self, X):
        """The layer on a batch, as :meth:`forward` (a float layer: ``layer(X)`` as a torch module is called)."""
        return self.forward(X)

    def copy(self) -> "AttentionLayer":
        return self.with_heads([h.copy() for h in self.heads])

    def parameter_counts(self) -> tuple:
        """(Q_h, K_h, V_h, O_h of every head, no biases) in the rank method's parameter vector."""
        return self.n_params, 0

    def jacobian_program(self, bk, bias: bool = False) -> "AttentionProgram":
        """This layer's forward pass and Jacobian over the backend ``bk`` (:class:`AttentionProgram`)."""
        return AttentionProgram(bk, self)

    @property
    def hidden_label(self) -> str:
        return f"{self.scoring} attention ({len(self.heads)} heads, d_v = {self.dv}, {self.tokens} tokens)"

    @property
    def label(self) -> str:
        kind = "attention" if self.scoring == "lightning" and self.backend.exact else f"{self.scoring} attention"
        return f"{kind} {self.in_dim}->{self.out_dim} ({len(self.heads)} heads, d_v = {self.dv}, {self.tokens} tokens)"

    def ball_forward(self, x: list) -> list:
        """f at one point, every entry an arb ball (``flint.arb``; x rationals or balls) at the
        context's precision: a rigorous enclosure for both scorings (softmax: arb's exp, and the
        scale 1/sqrt(d_k) as a ball when it is not a given rational)."""
        from flint import arb

        T, d, do = self.tokens, self.d, self.d_out
        y = [v if isinstance(v, arb) else arb(v) for v in x]
        X = [y[t * d:(t + 1) * d] for t in range(T)]
        zero = arb(0)
        s = softmax_scale_ball(self.scale, self.dk) if self.scoring == "softmax" else None
        out = [[arb(0) for _ in range(do)] for _ in range(T)]
        for h in self.heads:
            A, VO = mat_rows(h.scores.transpose()), mat_rows((h.value * h.out).transpose())
            XA = [[_linear(col, X[t], zero) for col in A] for t in range(T)]
            XVO = [[_linear(col, X[u], zero) for col in VO] for u in range(T)]
            xb = [_linear(h.score_bias, X[u], zero) if h.score_bias is not None else zero for u in range(T)]
            for t in range(T):
                S = [sum((a * b for a, b in zip(XA[t], X[u])), arb(0)) + xb[u] for u in range(T)]
                if s is not None:
                    S = _softmax_ball([s * v for v in S])
                for k in range(do):
                    out[t][k] += sum((S[u] * XVO[u][k] for u in range(T)), arb(0))
        if self.bias is not None:
            for t in range(T):
                for k in range(do):
                    out[t][k] += arb(self.bias[k])
        return [v for row in out for v in row]

    def _forward_entries(self, x: list, zero) -> list:
        """f at one point given as a flat list of scalars (``fmpq`` or ``fmpq_mpoly``), the
        formula of :meth:`forward` written out entrywise so that it also expands polynomials."""
        T, d, do = self.tokens, self.d, self.d_out
        X = [x[t * d:(t + 1) * d] for t in range(T)]
        out = [[zero] * do for _ in range(T)]
        for h in self.heads:
            A, VO = mat_rows(h.scores.transpose()), mat_rows((h.value * h.out).transpose())
            XA = [[_linear(col, X[t], zero) for col in A] for t in range(T)]       # (X A)[t]
            XVO = [[_linear(col, X[s], zero) for col in VO] for s in range(T)]    # (X V O)[s]
            for t in range(T):
                S = [_linear(XA[t], X[s], zero) for s in range(T)]               # (X A X^T)[t, s]
                for k in range(do):
                    out[t][k] += _linear(S, [XVO[s][k] for s in range(T)], zero)
        return [v for row in out for v in row]

    def check_action(self, P_in: fmpq_mat, Q_out: fmpq_mat, c_in=None, c_out=None) -> tuple[bool, str]:
        """Decide f(P_in x + c_in) = Q_out f(x) + c_out for all real x, exactly.

        f is a cubic polynomial map, so both sides are expanded as polynomials in the T*d inputs
        (``fmpq_mpoly``) and compared: necessary and sufficient, for any matrices P_in, Q_out.
        The expansion is refused before it starts when it would exceed the monomial limit
        (:func:`symeq.sizes.check_monomials`).

        >>> from symeq.numbers import identity
        >>> layer = AttentionLayer(2, [Head([[1]], [[1]], [[1]], [[1]])])
        >>> swap = matrix([[0, 1], [1, 0]])
        >>> layer.check_action(swap, swap)[0], layer.check_action(swap, identity(2))[0]
        (True, False)
        """
        _exact_only(self)
        n, m = self.in_dim, self.out_dim
        if (P_in.nrows(), P_in.ncols()) != (n, n) or (Q_out.nrows(), Q_out.ncols()) != (m, m):
            raise ShapeError(f"an action on a {n}->{m} attention layer needs {n}x{n} and {m}x{m} matrices, got "
                             f"{P_in.nrows()}x{P_in.ncols()} and {Q_out.nrows()}x{Q_out.ncols()}")
        if self.scoring == "softmax":
            return _check_softmax_layer(self, P_in, Q_out, c_in, c_out)
        # each output entry is a cubic in n variables: at most C(n + 3, 3) terms, m of them per side
        check_monomials(2 * m * monomials_upto(n, 3), "checking an action on an attention layer")
        ctx = fmpq_mpoly_ctx.get(("x", n), "degrevlex")
        xs, zero = list(ctx.gens()), ctx.from_dict({})
        y = [_linear(row, xs, zero) + (c_in[i] if c_in is not None else 0) for i, row in enumerate(mat_rows(P_in))]
        lhs = self._forward_entries(y, zero)
        fx = self._forward_entries(xs, zero)
        for i, row in enumerate(mat_rows(Q_out)):
            rhs = _linear(row, fx, zero) + (c_out[i] if c_out is not None else 0)
            if lhs[i] != rhs:
                return False, f"output {i}: f(P x + c)_i and (Q f(x) + c')_i differ as polynomials"
        return True, f"f(P x + c) = Q f(x) + c' as cubic polynomials in the {n} inputs ({len(self.heads)} heads), exactly"

    def match_reference(self, affine: bool = False) -> None:
        """Nothing: a whole attention layer is matched through its chain (see :meth:`match_action`)."""
        return None

    def match_action(self, P_in: fmpq_mat, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """Not matched as a whole: its latent space is the heads' value spaces, so the derivation
        matches the model's chain (``symeq.models.Model.chain``: :meth:`HeadsLayer.match_action`,
        then the token-wise dense layer); this raises :class:`~symeq.errors.InputError` saying so."""
        raise InputError("an attention layer is matched through its chain (Model.chain): the heads layer, "
                         "then the token-wise dense layer; match those layers instead")


def _exact_only(layer) -> None:
    """A float layer decides no action: InputError saying so."""
    if not layer.backend.exact:
        raise InputError(f"a float {layer.kind} layer decides no action (a float result reports its error); check "
                         "the exact layer")


def _rows(M) -> int:
    """Rows of a matrix stored exactly (``fmpq_mat``) or as floats (numpy)."""
    return M.nrows() if isinstance(M, fmpq_mat) else M.shape[0]


def _cols(M) -> int:
    return M.ncols() if isinstance(M, fmpq_mat) else M.shape[1]


class AttentionProgram:
    """Attention's forward pass and reverse-mode Jacobian over a number backend (symeq/backends.py):
    f(X) = sum_h S_h(X) X V_h O_h on a batch (columns of T d entries, token-major), S_h = X Q_h K_h^T X^T
    (lightning), the parameters Q_h, K_h, V_h, O_h of every head, row-major, head by head; a model's
    first layer (the Jacobian does not pass cotangents to an input).

    The one forward of the kind's exact and float layers and of their heads layers
    (:meth:`from_matrices`: ``out`` None gives the value-space outputs [Y_1 ... Y_H], token-major; ``key``
    None reads S_h = X A_h X^T from the scores A_h given as ``query``).  ``score(S, Xs, h)`` replaces the
    lightning scores of head h (the float softmax of symeq/layers/attention/floating.py: exp has no polynomial
    program and no rational value, so the exact softmax layer is evaluated in balls only,
    :meth:`AttentionLayer.ball_forward`); the Jacobian is the lightning one's."""

    affine_plain = False
    bias = False

    def __init__(self, bk, layer):
        from ...backends import NotPolynomial

        if getattr(layer, "scoring", "lightning") != "lightning":  # exp has no polynomial program (docs/attention.md)
            raise NotPolynomial("softmax attention is not polynomial: the Jacobian rank modulo a prime covers "
                                "lightning attention only")
        self._setup(bk, layer.tokens, [h.query for h in layer.heads], [h.key for h in layer.heads],
                    [h.value for h in layer.heads], [h.out for h in layer.heads])
        self.layer = layer

    @classmethod
    def from_matrices(cls, bk, tokens: int, query, key, value, out=None, score=None, out_bias=None):
        """A forward program from per-head matrices (``fmpq_mat`` or float arrays; see the class)."""
        prog = cls.__new__(cls)
        prog._setup(bk, tokens, query, key, value, out, score, out_bias)
        prog.layer = None
        return prog

    def _setup(self, bk, tokens, query, key, value, out, score=None, out_bias=None):
        def arr(M):
            if M is None:
                return None
            if isinstance(M, fmpq_mat):
                return bk.asarray(M)
            return bk.asarray(np.asarray(M), np.shape(M))

        n = len(query)
        keys = key if key is not None else [None] * n
        outs = out if out is not None else [None] * n
        self.bk, self.T, self.score = bk, int(tokens), score
        self.heads = [(arr(Q), arr(K), arr(V), arr(O)) for Q, K, V, O in zip(query, keys, value, outs)]
        Q0, V0 = self.heads[0][0], self.heads[0][2]
        self.d, self.dv = Q0.shape[0], V0.shape[1]
        self.do = self.heads[0][3].shape[1] if out is not None else n * self.dv
        self.inp, self.out_dim = self.T * self.d, self.T * self.do
        self.out_bias = None if out_bias is None else arr(np.asarray(out_bias).reshape(1, -1)).reshape(-1)
        self.act = None

    @property
    def n_params(self) -> int:
        return self.layer.n_params

    def values(self) -> list:
        return [x for h in self.layer.heads for M in (h.query, h.key, h.value, h.out) for r in mat_rows(M) for x in r]

    def forward(self, H, pointwise=None):
        bk, N = self.bk, H.shape[1]
        Xs = bk.permute(H, (1, 0)).reshape(N, self.T, self.d)
        mm = bk.matmul
        cache, parts, Y = [], [], None
        for h, (Q, Kk, V, O) in enumerate(self.heads):
            XQ = mm(Xs, Q)
            XK = Xs if Kk is None else mm(Xs, Kk)
            S = mm(XQ, bk.permute(XK, (0, 2, 1)))               # N x T x T
            if self.score is not None:
                S = self.score(S, Xs, h)
            U = mm(Xs, V)                                        # N x T x dv
            if O is None:                                        # a heads layer: the value-space outputs
                parts.append(mm(S, U))
                continue
            W = mm(U, O)                                         # N x T x do
            Y = mm(S, W) if Y is None else bk.add(Y, mm(S, W))
            cache.append((XQ, XK, S, U, W))
        if parts:
            Y = bk.concat(parts, axis=2)                         # N x T x (H dv), token-major
        if self.out_bias is not None:
            Y = bk.add(Y, self.out_bias[None, None, :])
        return bk.permute(Y.reshape(N, self.T * self.do), (1, 0)), (Xs, cache)

    def backward(self, cache, D, J, col: int, need_input: bool):
        if need_input:  # pragma: no cover - attention is a model's first layer
            raise ValueError("attention after another layer")
        bk, mm, (Xs, caches) = self.bk, self.bk.matmul, cache
        N = Xs.shape[0]
        K = D.shape[0] // N
        G = D.reshape(N, K, self.T, self.do)
        XT = bk.permute(Xs, (0, 2, 1))[:, None]                  # N x 1 x d x T
        tr = lambda A: bk.permute(A, (0, 1, 3, 2))  # noqa: E731
        c = col
        for (Q, Kk, V, O), (XQ, XK, S, U, W) in zip(self.heads, caches):
            S4, U4, W4 = S[:, None], U[:, None], W[:, None]
            dS = mm(G, tr(W4))                                   # N x K x T x T
            dQ = mm(mm(XT, dS), XK[:, None])                     # X^T dS X K
            dK = mm(mm(XT, tr(dS)), XQ[:, None])
            dU = mm(mm(tr(S4), G), bk.permute(O, (1, 0)))
            dV = mm(XT, dU)
            dO = mm(tr(mm(S4, U4)), G)
            for M in (dQ, dK, dV, dO):
                w = M.shape[2] * M.shape[3]
                J[:, c:c + w] = M.reshape(N * K, w)
                c += w
        return None


class HeadsShape:
    """The shapes and names of a heads layer, read from its stored ``tokens``, ``scores`` (the
    d x d matrices A_h) and ``values`` (d x d_v), exact or float alike (:class:`HeadsLayer`)."""

    kind: ClassVar[str] = "heads"
    #: what the kind can do (symeq.layers.registry.CAPABILITIES): only in a model's chain, never in a file
    capabilities: ClassVar[frozenset] = frozenset({"token-mixing", "head-blocks", "neuron-reduction"})
    schema: ClassVar[dict] = {}

    @property
    def d(self) -> int:
        return _rows(self.scores[0])

    @property
    def dv(self) -> int:
        return _cols(self.values[0])

    @property
    def heads(self) -> int:
        return len(self.scores)

    @property
    def in_dim(self) -> int:
        return self.tokens * self.d

    @property
    def out_dim(self) -> int:
        return self.tokens * self.heads * self.dv

    @property
    def hidden_label(self) -> str:
        return f"attention heads ({self.heads} heads, d_v = {self.dv}, {self.tokens} tokens)"

    @property
    def label(self) -> str:
        return f"{self.scoring} heads {self.in_dim}->{self.out_dim} ({self.heads} heads, d_v = {self.dv}, {self.tokens} tokens)"

    @property
    def latent_group_name(self) -> str:
        return LATENT_GROUP

    def match_reference(self, affine: bool = False) -> None:
        """Nothing to precompute: heads are matched by their score matrices per generator."""
        return None


@dataclass(eq=False)
class HeadsLayer(HeadsShape, _Scoring):
    """The first layer of the chain: X -> [Y_1 ... Y_H], Y_h = (X A_h X^T) X V_h (flattened).

    Implements :class:`symeq.layers.base.Layer` (kind ``"heads"``).  The kind's one class, exact or float by
    ``backend`` (float64: the float twin, scores and values as arrays, matched by linear assignment with its
    record, :func:`symeq.layers.attention.floating.match_heads_numeric`).
    """

    #: the kind's float side (symeq.numeric.models.float_class): its float twin, forward and matching
    float_module: ClassVar[str] = "symeq.layers.attention.floating"
    #: the kind's readers of a whole file or module (``read_onnx_model``, ``read_torch_model``;
    #: symeq.numeric.models.kind_model_readers): torch's exported subgraph and torch's attention modules
    reader_modules: ClassVar[tuple] = ("symeq.layers.attention.onnx", "symeq.layers.attention.torch_modules")

    tokens: int
    scores: list
    values: list
    activation: object = None
    scoring: str = "lightning"
    scale: object = None  # softmax only: a rational scale, or None for 1/sqrt(dk)
    dk: int | None = None  # softmax only: d_k of the heads (the default scale 1/sqrt(d_k))
    score_biases: list | None = None  # softmax only: per head b_h (or None), S_ts = x_t^T A_h x_s + b_h^T x_s
    #: where the layer's numbers live (symeq.backends; LayerBase): EXACT or FLOAT64
    backend: Backend = field(default=EXACT, repr=False)

    def bias_of(self, h: int):
        return None if self.score_biases is None else self.score_biases[h]

    @classmethod
    def _float_unit(cls):
        """The kind's float side (``float_module``), imported by its name when asked (see AttentionLayer)."""
        from ..registry import float_unit

        return float_unit(cls.kind)

    @classmethod
    def float_twin(cls, layer, activation=None) -> "HeadsLayer":
        """The float twin of an exact heads layer (its score and value matrices in float64)."""
        return cls._float_unit().heads_float_twin(layer)

    def __post_init__(self):
        if not self.backend.exact:  # float64: the float side's forward reads scale and d_k as they are
            return
        if self.scoring == "softmax" and self.scale is None and self.dk is None:
            raise InputError("a softmax heads layer needs d_k (for its scale 1/sqrt(d_k)) or a rational scale")
        self.scale = _check_scoring(self.scoring, self.scale, [self.dk] if self.dk is not None else [])
        if self.scoring == "lightning" and self.score_biases is not None and any(b is not None for b in self.score_biases):
            raise InputError("score biases belong to softmax heads only")

    def check_action(self, P_in: fmpq_mat, Q_out: fmpq_mat, c_in=None, c_out=None) -> tuple[bool, str]:
        """f(P_in x) = Q_out f(x) for Q_out = P (x) R block monomial (:func:`check_heads_layer`,
        a sufficient condition); affine actions (offsets) are not supported on heads."""
        _exact_only(self)
        if c_in is not None or c_out is not None:
            return False, "affine actions are not supported on attention heads"
        return check_heads_layer(self, P_in, Q_out)

    def match_action(self, P_in: fmpq_mat, c_in=None, *, reference=None, affine: bool = False, li: int = 0):
        """The candidate actions (P (x) R, None) on the value spaces given P_in on the tokens
        (:func:`match_heads`): ``(tied, candidates)``, tied when heads tie (several candidates).

        Raises :class:`~symeq.layers.base.NoPartner` when no head matching exists, inconclusive
        where :func:`match_heads` could not decide (a degenerate head) or the input action is
        affine (not supported on heads).

        >>> layer = HeadsLayer(2, [matrix([[1]])], [matrix([[1]])])
        >>> tied, cands = layer.match_action(matrix([[0, 1], [1, 0]]))
        >>> tied, [(rho.entries(), off) for rho, off in cands]
        (False, [([0, 1, 1, 0], None)])

        A float layer returns one candidate with its record (the float side's ``match_heads_action``).
        """
        if not self.backend.exact:
            return self._float_unit().match_heads_action(self, P_in)
        if c_in is not None and any(x != 0 for x in c_in):
            raise NoPartner("attention heads: affine actions (offsets) are not supported on attention heads",
                            inconclusive=True)
        actions, why = match_heads(self, P_in)
        if why:
            raise NoPartner(f"attention heads: {why}", inconclusive="INCONCLUSIVE" in why)
        return len(actions) > 1, iter([(rho, None) for rho in actions])

    def forward(self, Xb):
        """[Y_1 ... Y_H] on a batch: the attention kind's program over the layer's backend with the scores A_h
        and no output matrices (exact: a column per point, lightning only; float64: a row per point)."""
        if not self.backend.exact:
            return self._float_unit().heads_forward(self, Xb)
        _rational_only(self.scoring)
        prog = AttentionProgram.from_matrices(_EXACT, self.tokens, self.scores, None, self.values)
        return _EXACT.to_mat(run_forward(prog, _EXACT.from_mat(Xb)))


# -- the exact check and the derivation for the heads layer ----------------------------------

def block_monomial_parts(R: fmpq_mat, H: int, dv: int):
    """For a block-monomial R (H x H blocks of size dv, one invertible block per block row and
    column) return [(k, B)] per block row h: the block column k and the block B; else None."""
    if R.nrows() != H * dv or R.ncols() != H * dv:
        return None
    out, used = [], set()
    for h in range(H):
        found = []
        for k in range(H):
            B = fmpq_mat(dv, dv, [R[h * dv + a, k * dv + b] for a in range(dv) for b in range(dv)])
            if any(x != 0 for x in B.entries()):
                found.append((k, B))
        if len(found) != 1 or found[0][0] in used or found[0][1].det() == 0:
            return None
        used.add(found[0][0])
        out.append(found[0])
    return out


def head_permutation(M: fmpq_mat, tokens: int, heads: int, dv: int) -> list[int]:
    """The head permutation of a value-space action P (x) R: head h -> block column k."""
    fac = factor_kron(M, tokens, heads * dv)
    if fac is None:
        raise InputError("not a token-wise block-monomial action")
    parts = block_monomial_parts(fac[1], heads, dv)
    if parts is None:
        raise InputError("not a block-monomial action on the value spaces")
    return [k for k, _ in parts]


def _canonical_scores(A: fmpq_mat):
    e = A.entries()
    first = next((x for x in e if x != 0), None)
    if first is None:
        return None, fmpq(0)
    return tuple((int((x / first).p), int((x / first).q)) for x in e), first


def check_heads_layer(layer: HeadsLayer, P_in: fmpq_mat, Q: fmpq_mat) -> tuple[bool, str]:
    """Decide f(P_in x) = Q f(x) for the heads layer, for Q = P (x) R block monomial (sufficient).

    With P_in = P (x) C (P a permutation), block (h, k) = B of R: it suffices that
    C^T A_h C = lambda A_k and lambda C^T V_h = V_k B^T, since then
    Y_h(P X C^T) = P (X A_k X^T) X V_k B^T / ... = P Y_k(X) B^T.
    """
    T, d, H, dv = layer.tokens, layer.d, layer.heads, layer.dv
    fin = factor_kron(P_in, T, d)
    if fin is None:
        return False, "the input action is not a token permutation (x) a channel matrix"
    fout = factor_kron(Q, T, H * dv)
    if fout is None:
        return False, "the latent action is not a token permutation (x) a value-space matrix"
    P, C = fin
    P2, R = fout
    if P2 != P:
        return False, "the latent action permutes tokens differently from the input action"
    parts = block_monomial_parts(R, H, dv)
    if parts is None:
        return False, "the latent action is not block monomial (one invertible d_v x d_v block per head)"
    Ct = C.transpose()
    soft = layer.scoring == "softmax"
    for h, (k, B) in enumerate(parts):
        At, bt = transformed_scores(layer.scores[h], layer.bias_of(h), C)
        Ak = layer.scores[k]
        key_t, s_t = score_key(At, layer.scoring, bt)
        key_k, s_k = score_key(Ak, layer.scoring, layer.bias_of(k))
        if key_t != key_k:
            return False, (f"head {h + 1}: C^T A_h C is not equal to A_{k + 1} (softmax: no free score scalar)" if soft
                           else f"head {h + 1}: C^T A_h C is not a multiple of A_{k + 1}")
        lam = s_t / s_k if s_k != 0 else fmpq(1)
        if lam * (Ct * layer.values[h]) != layer.values[k] * B.transpose():
            return False, f"head {h + 1}: lambda C^T V_h != V_{k + 1} B^T"
    if soft:
        return True, (f"C^T A_h C = A_pi(h) and C^T V_h = V_pi(h) B_h^T for all {H} heads, so softmax(P S P^T) = "
                      "P softmax(S) P^T gives Y_h(P X C^T) = P Y_pi(h)(X) B_h, exactly")
    return True, f"Y_h(P X C^T) = P Y_pi(h)(X) B_h for all {H} heads, exactly"


def match_heads(layer: HeadsLayer, P_in: fmpq_mat):
    """All value-space actions P (x) R making the heads layer equivariant, or a failure message.

    Returns (list of actions, failure or None).  Heads whose score matrices are proportional tie;
    every bijection inside a tie class is returned (the next layers decide).
    """
    import itertools

    T, d, H, dv = layer.tokens, layer.d, layer.heads, layer.dv
    fin = factor_kron(P_in, T, d)
    if fin is None:
        return [], "the group does not act as a token permutation (x) a channel matrix"
    P, C = fin
    Ct = C.transpose()
    index: dict = {}
    base = []
    for k, A in enumerate(layer.scores):
        key, s = score_key(A, layer.scoring, layer.bias_of(k))
        base.append((key, s))
        index.setdefault(key, []).append(k)
    transformed = []
    classes: dict = {}
    for h in range(H):
        At, bt = transformed_scores(layer.scores[h], layer.bias_of(h), C)
        key, s = score_key(At, layer.scoring, bt)
        transformed.append((key, s))
        classes.setdefault(key, []).append(h)
    for key, hs in classes.items():
        if len(index.get(key, [])) != len(hs):
            what = "equal to" if layer.scoring == "softmax" else "a multiple of"
            return [], (f"head {hs[0] + 1}: after the channel action its score matrix C^T A C is not {what} "
                        f"any head's A (or the multiplicities differ): no head permutation exists")
    tied = [(hs, index[key]) for key, hs in classes.items() if len(hs) > 1]
    fixed = {hs[0]: index[key][0] for key, hs in classes.items() if len(hs) == 1}
    results = []
    for combo in itertools.product(*[list(itertools.permutations(ks)) for _, ks in tied]):
        target = dict(fixed)
        for (hs, _), ks in zip(tied, combo):
            target.update(zip(hs, ks))
        R = fmpq_mat(H * dv, H * dv)
        ok = True
        for h in range(H):
            k = target[h]
            lam = transformed[h][1] / base[k][1] if base[k][1] != 0 else fmpq(1)
            Vk = layer.values[k]
            rhs = Ct * layer.values[h]
            G = Vk.transpose() * Vk
            if G.det() == 0:
                return [], (f"head {k + 1}: its value matrix does not have full column rank d_v (a degenerate head); "
                            "INCONCLUSIVE")
            N = G.solve(Vk.transpose() * rhs)
            if Vk * N != rhs:
                ok = False
                break
            B = (lam * N).transpose()
            for a in range(dv):
                for b in range(dv):
                    R[h * dv + a, k * dv + b] = B[a, b]
        if ok:
            results.append(kron(P, R))
    if not results:
        return [], "no head matching solves V_k N = C^T V_h (the value spaces do not correspond)"
    return results, None


# -- the kind's declarations for symeq.layers.registry: the chain split and the model file ------------

#: the refusal of a layer after attention that is not token-wise (the chain needs I_T (x) W and b repeated)
NOT_TOKENWISE = "the layer after attention must be token-wise (weight I_T (x) W, bias repeated per token)"


def _token_block(layer, T: int) -> tuple:
    """(W, b) of one token of the layer after attention, over the layer's backend; an InputError when its
    weight is not I_T (x) W or its bias not b repeated T times (a layer built as token-wise is by its
    construction)."""
    if layer.tokens == T:
        return layer.token_weight, layer.token_bias
    r, q = divmod(layer.out_dim, T)
    s, q2 = divmod(layer.in_dim, T)
    if q or q2 or layer.tokens is not None:
        raise InputError(NOT_TOKENWISE)
    if layer.backend.exact:
        W = fmpq_mat(r, s, [layer.weight[i, j] for i in range(r) for j in range(s)])
        b = list(layer.bias[:r])
        same = layer.weight == tokenwise(W, T) and list(layer.bias) == b * T
    else:
        W, b = layer.weight[:r, :s], layer.bias[:r]
        same = np.array_equal(layer.weight, np.kron(np.eye(T), W)) and np.array_equal(layer.bias, np.tile(b, T))
    if not same:
        raise InputError(NOT_TOKENWISE)
    return W, b


def split_chain(first: AttentionLayer, rest: list) -> list:
    """The chain layers of ``[first] + rest`` (``LayeredShape.chain``, exact or float alike): the heads
    (value spaces, a latent space) and the output projection, merged into the next layer, which must be
    token-wise (or the last, affine layer)."""
    from ..dense import DenseLayer

    bk, T = first.backend, first.tokens
    heads = first.heads_layer()  # lightning or softmax (scoring and scale carried)
    c = getattr(first, "bias", None)  # softmax attention's output bias (None: none)
    if bk.exact:
        Ot = first.out_stack().transpose()  # d_out x H d_v
        stack, repeat = (lambda W: tokenwise(W, T)), (lambda v: list(v) * T)
    else:
        Ot = first.out_stack().T
        stack, repeat = (lambda W: np.kron(np.eye(T), W)), (lambda v: np.tile(v, T))
    if not rest:
        return [heads, DenseLayer(stack(Ot), None if c is None else repeat(c), None, T, backend=bk)]
    l1 = rest[0]
    W1, b1 = _token_block(l1, T)
    if c is not None:  # W1 (O x + c) + b1: the output bias moves into the next layer's bias
        b1 = [b + sum((w * v for w, v in zip(row, c)), 0) for row, b in zip(mat_rows(W1), b1)] if bk.exact \
            else b1 + W1 @ c
    nxt = DenseLayer(stack(W1 * Ot if bk.exact else W1 @ Ot), repeat(b1), l1.activation, T, backend=bk)
    return [heads, nxt] + [l.copy() for l in rest[1:]]


def attention_to_json(l: AttentionLayer, declared_bias: bool = False) -> dict:
    """The model-file object of an attention layer (lightning files stay as they were, the digest too)."""
    from ...numbers import format_matrix, format_number, format_vector

    out = {"type": "attention", "tokens": l.tokens, "heads": [
        {"query": format_matrix(h.query), "key": format_matrix(h.key),
         "value": format_matrix(h.value), "out": format_matrix(h.out)} for h in l.heads]}
    if l.scoring != "lightning":
        out["scoring"] = l.scoring
        if l.scale is not None:
            out["scale"] = format_number(l.scale)
        if l.bias is not None:
            out["bias"] = format_vector(l.bias)
        for spec, h in zip(out["heads"], l.heads):
            if h.score_bias is not None:
                spec["score_bias"] = format_vector(h.score_bias)
    return out


def attention_parameters_key(l: AttentionLayer) -> tuple:
    """What two attention layers must share to be equal (``Model.parameters_equal``)."""
    return ("attention", l.tokens, l.scoring, l.scale, None if l.bias is None else tuple(l.bias),
            tuple((h.query, h.key, h.value, h.out, None if h.score_bias is None else tuple(h.score_bias))
                  for h in l.heads))


def heads_neuron_moves(layer, M):
    """How an action M on a heads layer's output moves its (token, head) nodes, numbered t * H + h:
    a list of (source, target, d_v x d_v block), or None when M is not a token permutation times a
    block-monomial R (``symeq.display.neuron_moves``)."""
    H, dv, T = layer.heads, layer.dv, layer.tokens
    fac = factor_kron(M, T, H * dv)
    if fac is None:
        return None
    P, R = fac
    parts = block_monomial_parts(R, H, dv)
    if parts is None:
        return None
    moves = []
    for t in range(T):
        s = next(s for s in range(T) if P[t, s] != 0)
        for h, (k, B) in enumerate(parts):
            moves.append((s * H + k, t * H + h, B))
    return moves


AttentionLayer.to_json = attention_to_json
HeadsShape.neuron_moves = heads_neuron_moves
AttentionLayer.split_chain = split_chain
AttentionLayer.parameters_key = attention_parameters_key


def attention_scoring(spec: dict, at: str):
    """``"scoring"`` ("lightning", the default, or "softmax") and the softmax ``"scale"`` (an exact
    rational; absent: torch's 1/sqrt(d_k), kept exact, docs/attention.md)."""
    from ...numbers import parse_number

    scoring = spec.get("scoring", "lightning")
    if scoring not in ("lightning", "softmax"):
        raise InputError(f"{at}.scoring: must be \"lightning\" or \"softmax\", got {scoring!r}")
    if "scale" not in spec or spec["scale"] is None:
        return scoring, None
    if scoring != "softmax":
        raise InputError(f"{at}.scale: a scale belongs to softmax attention only (\"scoring\": \"softmax\")")
    v = spec["scale"]
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise InputError(f"{at}.scale: an exact rational (an integer or a string such as \"1/2\"), got {v!r}; "
                         "leave it out for 1/sqrt(d_k)")
    return scoring, parse_number(v, f"{at}.scale")


def attention_from_json(spec: dict, input_dim: int, at: str) -> AttentionLayer:
    """An ``"attention"`` object of a model file (the first layer, on ``input_dim`` = T d inputs)."""
    from ...numbers import parse_matrix, parse_vector
    from ...schema import check_keys

    keys = AttentionShape.schema
    check_keys(spec, at, *keys["attention"], error=InputError)
    T = spec.get("tokens")
    if not isinstance(T, int) or isinstance(T, bool) or T < 1:
        raise InputError(f"{at}: \"tokens\" must be a positive integer (the number of tokens T)")
    if input_dim % T:
        raise ShapeError(f"{at}: input_dim {input_dim} is not a multiple of {T} tokens (inputs are T x d, flattened by rows)")
    d = input_dim // T
    heads = spec.get("heads")
    if not isinstance(heads, list) or not heads:
        raise InputError(f"{at}: \"heads\" must be a non-empty list of {{query, key, value, out}}")
    parsed = []
    for h, hs in enumerate(heads):
        if not isinstance(hs, dict):
            raise InputError(f"{at}.heads[{h}] must be an object with \"query\", \"key\", \"value\" and \"out\" matrices")
        check_keys(hs, f"{at}.heads[{h}]", *keys["head"], error=InputError)
        q = parse_matrix(hs["query"], f"{at}.heads[{h}].query", shape=(d, None))
        k = parse_matrix(hs["key"], f"{at}.heads[{h}].key", shape=(d, q.ncols()))
        v = parse_matrix(hs["value"], f"{at}.heads[{h}].value", shape=(d, None))
        o = parse_matrix(hs["out"], f"{at}.heads[{h}].out", shape=(v.ncols(), None))
        sb = hs.get("score_bias")
        sb = None if sb is None else parse_vector(sb, f"{at}.heads[{h}].score_bias", d)
        parsed.append(Head(q, k, v, o, sb))
    scoring, scale = attention_scoring(spec, at)
    bias = spec.get("bias")
    bias = None if bias is None else parse_vector(bias, f"{at}.bias", parsed[0].out.ncols())
    try:
        return AttentionLayer(T, parsed, None, scoring, scale, bias)
    except InputError as e:
        raise InputError(f"{at}: {e}") from None


def read_attention(spec: dict, ctx, at: str) -> AttentionLayer:
    """The registry's reader: an attention layer must be the first; after it, dense layers are token-wise."""
    if ctx.index != 0:
        raise InputError(f"{at}: an attention layer must be the first layer")
    layer = attention_from_json(spec, ctx.input_dim, at)
    ctx.tokens, ctx.n = layer.tokens, layer.d_out
    return layer


LAYER_KINDS = (AttentionLayer, HeadsLayer)
JSON_READERS = {"attention": read_attention}
JSON_ADVERTISED = ("attention",)


# -- the digest form (docs/certificates.md "Digests"; symeq.digest asks the registry) ---------------------

def attention_digest_form(spec: dict, shape):
    """An attention layer without "scoring": "lightning", and without softmax's null output bias and scale
    or null or zero heads' score_bias."""
    layer, _ = plain_form(spec, shape)
    if layer.get("scoring") == "lightning":
        del layer["scoring"]
    for key in ("bias", "scale"):  # softmax's output bias and scale: absent, null and zeros alike
        if key in layer and layer[key] is None:
            del layer[key]
    for head in layer.get("heads", []):
        if isinstance(head, dict) and "score_bias" in head and (
                head["score_bias"] is None or all(b == "0" for b in head["score_bias"])):
            del head["score_bias"]
    return layer, shape


DIGEST_FORMS = {"attention": Form(attention_digest_form)}
