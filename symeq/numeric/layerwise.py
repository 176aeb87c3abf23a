"""Numeric layerwise analysis: the derivation of rho_i(g) in K_i over floats, and the paper's metric.

Two views of the same question, "does G act on every hidden layer, through K_i?":

1. **Derivation from the weights** (:func:`derive_latent_actions_numeric`), the twin of
   :func:`symeq.layerwise.derive_latent_actions`.  With rho_{i-1}(g) known (rho_0 = rho_in(g)),
   row j of [W_i rho_{i-1}(g) | b_i + W_i c_{i-1}(g) - s] must be alpha_j times a row k of
   [W_i | b_i - s] with alpha_j admissible for sigma (1; +-1 for odd/even sigma and for sigma odd
   up to a constant; any for monomials; > 0 for ReLU: the activation's
   :class:`~symeq.numeric.models.Scalings`, read off the exact activation where there is one).
   Where sigma(alpha t + s(1 - alpha)) = q sigma(t) + o with o != 0 (sigmoid: sigma(-t) =
   1 - sigma(t)) the action is affine, y -> rho_i(g) y + c_i(g) with c_i(g)_j = o(alpha_j), and
   the next layer's bias absorbs it (``MonomialAction.offset``; :attr:`NumericDerivation.offsets`).
   An attention model is walked as its chain (:meth:`NumericModel.chain`): on the heads layer,
   heads are matched by their score matrices up to a scalar and the value spaces by least
   squares (:func:`symeq.layers.attention.floating.match_heads_numeric`), giving a dense P (x) R.
   The exact path hashes canonical rows; here every pair (j, k) gets the relative residual
   ``min_alpha |u_j - alpha v_k| / |u_j|`` (one Gram matrix), the rows are matched by linear
   assignment on that cost (row-wise argmin when it is already a bijection, which is the common
   case and keeps width 4096 fast), and rho_i(g)[j, k] = q(alpha_j).  Cloned neurons (rows equal
   up to K_i within the tolerance, looked for only where a margin shows a tie and the plain
   matching fails) make the assignment ambiguous: they are resolved by their outgoing weights,
   from the last layer down (:class:`symeq.walk.TieWalk`, the same walk as the exact path's,
   over the float row matcher :class:`_FloatMatcher`); only rows that tie as multisets, with
   columns that cannot tell them apart, are searched, within ``max_tie_variants`` nodes, and
   running out is ``undetermined``.  The last layer is checked by
   |W_L rho_{L-1} - rho_out W_L| / |W_L| and the same for b_L.  What is reported is residuals
   and the *margin* (second-best cost minus best cost, smallest over neurons): a match is only as
   trustworthy as its margin is large compared with the residual.  Nothing is called "verified".

2. **The paper's metric** (:func:`paper_metric`): fit A_i by least squares with
   A_i F_i(x) ~ F_i(g x) on Gaussian noise inputs (F_i: the features after layer i), report the
   median of |F_i(g y) - A_i F_i(y)| / |F_i(y)| on held-out noise inputs (Shahverdi, Marchetti,
   Bokman, Kohn 2026, Section 5).  Then A_i is projected onto K_i (:func:`project_to_latent_group`)
   by linear assignment, and the same error is reported with the projected action: a small
   error there means the layer is equivariant through K_i, not merely through some linear map.

Examples
--------
>>> from symeq.groups import mirror
>>> from symeq.numeric.models import numeric_activation
>>> from symeq.numeric.generate import random_equivariant_numeric, scramble_numeric
>>> m = random_equivariant_numeric(mirror(2, 2), [8, 8], numeric_activation("tanh"), rng=0)
>>> s, _ = scramble_numeric(m, rng=1)
>>> d = derive_latent_actions_numeric(s)
>>> d.within_tolerance, d.max_residual < 1e-12
(True, True)
>>> r = paper_metric(s, layers=[1], n_fit=400, n_test=200, rng=0)[0]
>>> r.error < 1e-8 and r.projected_error < 1e-8
True
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..layers.base import NoPartner
from ..layers.registry import all_support, supports
from .models import NumericGroup, NumericModel, _as_group
from ..walk import ChainWalk, TieWalk, cayley_homomorphism
from .match import _fit, _input_bias, _latent_action, linear_assignment  # linear_assignment: re-exported
from .monomial import MonomialAction, as_action, left_multiply, right_multiply

__all__ = [
    "NumericDerivation",
    "LayerResidual",
    "derive_latent_actions_numeric",
    "compare_with_exact",
    "linear_assignment",
    "project_to_latent_group",
    "LayerMetric",
    "paper_metric",
    "projection_kind",
]

DEFAULT_TOL = 1e-6
#: a convolution whose geometry does not carry the action is matched on its dense rows up to this size
DENSE_FALLBACK_ENTRIES = 4_000_000
DENSE_FALLBACK_ROWS = 4096


# -- derivation from the weights ---------------------------------------------------------------

@dataclass
class LayerResidual:
    """How well generator g's action was matched on one layer (relative residuals)."""

    layer: int
    generator: str
    residual: float           # max over neurons of |u_j - alpha v_pi(j)| / |u_j| (last layer: Frobenius)
    median_residual: float
    margin: float | None      # min over neurons of (second-best cost - best cost); None on the last layer
    method: str

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class NumericDerivation:
    """Result of :func:`derive_latent_actions_numeric`.

    ``actions[i][g]`` is the MonomialAction rho_{i+1}(g) on hidden layer i+1 (best in K; always
    given; its ``offset`` is the constant part of an affine action, e.g. sigmoid sign flips; on
    attention value spaces a dense array P (x) R), ``residuals`` every layer/generator residual,
    ``within_tolerance`` whether every residual is <= ``tol`` and the homomorphism check passed
    within ``tol``.
    """

    actions: list
    residuals: list
    tol: float
    homomorphism_error: float | None
    seconds: float
    group_order: int | None = None
    notes: list = field(default_factory=list)
    undetermined: str | None = None  # why no verdict was reached (a search that ran out of budget)

    @property
    def status(self) -> str:
        """"within tolerance", "not within tolerance" or "undetermined" (numeric-check exit 0, 1, 3)."""
        if self.within_tolerance:
            return "within tolerance"
        return "undetermined" if self.undetermined or self.homomorphism_unchecked else "not within tolerance"

    @property
    def homomorphism_unchecked(self) -> bool:
        """The group's closure passed its size limit: the homomorphism of the actions was not checked, which
        decides nothing (not a failure)."""
        return self.homomorphism_error == float("inf")

    @property
    def why_undetermined(self) -> str | None:
        if self.undetermined:
            return self.undetermined
        if self.homomorphism_unchecked:
            return (f"the group has more than {self.group_order - 1 if self.group_order else 'its limit of'} elements "
                    "(NumericGroup.max_order): the homomorphism g -> rho_i(g) was not checked")
        return None

    @property
    def max_residual(self) -> float:
        return max((r.residual for r in self.residuals), default=0.0)

    @property
    def offsets(self) -> list | None:
        """``offsets[i][g]``: the constant parts c_i(g) of affine actions (arrays), or None when
        every action is linear (the twin of :attr:`symeq.layerwise.Derivation.offsets`)."""
        if not any(getattr(a, "offset", None) is not None for acts in self.actions for a in acts):
            return None
        return [[a.offset_or_zero if isinstance(a, MonomialAction) else None if a is None else np.zeros(a.shape[0])
                 for a in acts]
                for acts in self.actions]

    @property
    def min_margin(self) -> float | None:
        ms = [r.margin for r in self.residuals if r.margin is not None]
        return min(ms) if ms else None

    @property
    def within_tolerance(self) -> bool:
        hom_ok = self.homomorphism_error is None or self.homomorphism_error <= self.tol
        return self.max_residual <= self.tol and hom_ok

    def report(self) -> str:
        lines = [f"numeric derivation of the layerwise actions (tolerance {self.tol:g}; float64, not a proof)"]
        for r in self.residuals:
            m = "" if r.margin is None else f", margin {r.margin:.3g}"
            lines.append(f"  layer {r.layer}, {r.generator}: max residual {r.residual:.3g}, "
                         f"median {r.median_residual:.3g}{m} ({r.method})")
        if self.homomorphism_unchecked:
            lines.append(f"  homomorphism on the group's relations: not checked ({self.why_undetermined})")
        elif self.homomorphism_error is not None:
            lines.append(f"  homomorphism on the group's relations (order {self.group_order}): "
                         f"max deviation {self.homomorphism_error:.3g}")
        for i, acts in enumerate(self.actions, 1):
            lines.append(f"  rho_{i}: " + ", ".join(a.kind() if isinstance(a, MonomialAction) else
                                                    "not derived" if a is None else
                                                    "block monomial (attention value spaces)" for a in acts))
        lines += [f"  note: {n}" for n in self.notes]
        if self.status == "undetermined":
            lines.append(f"undetermined: {self.why_undetermined} (best max residual {self.max_residual:.3g}, "
                         f"tolerance {self.tol:g}); {self.seconds:.2f} s")
            return "\n".join(lines)
        verdict = "within" if self.within_tolerance else "NOT within"
        lines.append(f"every layer equivariant through K_i {verdict} tolerance {self.tol:g} "
                     f"(max residual {self.max_residual:.3g}); {self.seconds:.2f} s")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "tolerance": self.tol,
            "within_tolerance": self.within_tolerance,
            "status": self.status,
            "undetermined": self.why_undetermined,
            "max_residual": self.max_residual,
            "min_margin": self.min_margin,
            "homomorphism_error": None if self.homomorphism_unchecked else self.homomorphism_error,
            "homomorphism_checked": not self.homomorphism_unchecked,
            "group_order": self.group_order,
            "seconds": self.seconds,
            "residuals": [r.to_json() for r in self.residuals],
            "actions": [[_action_json(a) for a in acts] for acts in self.actions],
            "notes": self.notes,
        }


def _action_json(a) -> dict | None:
    if a is None:  # not derived (the derivation is undetermined there)
        return None
    if not isinstance(a, MonomialAction):
        return {"matrix": np.asarray(a).tolist()}
    out = {"cols": a.cols.tolist(), "vals": a.vals.tolist()}
    if a.offset is not None:
        out["offset"] = a.offset.tolist()
    return out


def _match_candidates(layer, prev, reference, i: int) -> list:
    """The layer's own matching of actions, with the dense fallback for a convolution whose geometry does
    not carry the action (see :meth:`_FloatRows.step`): a list of (rho, record)."""
    try:
        _, candidates = layer.match_action(prev, reference=reference, li=i)
    except NoPartner as e:
        if not supports(layer, "sparse-actions") or supports(layer, "parameter-free") \
                or layer.in_dim * layer.out_dim > DENSE_FALLBACK_ENTRIES \
                or layer.out_dim > DENSE_FALLBACK_ROWS:
            raise
        from .models import NumericDenseLayer

        dense = NumericDenseLayer(layer.weight, layer.bias, layer.activation)
        _, candidates = dense.match_action(prev, reference=dense.match_reference(), li=i)
        candidates = [(rho, (rec[0], rec[1], rec[2], f"{rec[3]}; on the dense rows, since the kernels' geometry "
                             f"does not carry the action ({e})")) for rho, rec in candidates]
    return candidates


def _commutator_residual(layer, prev, B) -> float:
    """|W P - B W| / |W| and the same for the bias (with P's offset): an affine layer's check, dense or
    (convolutions) on the sparse matrix."""
    Bm = as_action(B)
    if supports(layer, "sparse-actions") and isinstance(prev, MonomialAction) and isinstance(Bm, MonomialAction):
        from ..layers.conv.floating import sparse_commutator_residual  # no dense expansion of the convolution

        return sparse_commutator_residual(layer, prev, Bm)
    lhs = right_multiply(layer.weight, prev)
    rhs = left_multiply(Bm, layer.weight)
    rb = left_multiply(Bm, layer.bias[:, None])[:, 0]
    scale = max(np.linalg.norm(layer.weight), 1e-300)
    res_w = np.linalg.norm(lhs - rhs) / scale
    res_b = np.linalg.norm(_input_bias(layer, prev) - rb) / max(np.linalg.norm(layer.bias), scale)
    return float(max(res_w, res_b))


class _FloatRows:
    """The float row matcher of the chain walk (:class:`symeq.walk.ChainWalk`).

    Each step is the layer's own matching of actions (``match_action``, with theta's side computed
    once by ``match_reference``): a dense layer matches the rows of
    [W_i rho_{i-1}(g) | b_i + W_i c_{i-1}(g) - s] to theta's by linear assignment
    (:func:`symeq.numeric.match._match_layer`), attention heads by
    :func:`symeq.layers.attention.floating.match_heads_numeric`; each records (max residual, median
    residual, margin, method).
    ``close`` adds the last layer's residual: the result is (worst residual, chain, records).
    """

    def __init__(self, model: NumericModel):
        self.model = model
        self.hidden = model.depth - 1
        # theta's side of the matching (dense: the shifted rows) does not depend on g: build it once
        self.V = [layer.match_reference() for layer in model.layers[:-1]]

    def tick(self) -> None:
        pass  # one node per layer: the float chain never branches

    def start(self, A):
        return as_action(A)

    def step(self, i: int, prev) -> list:
        """The candidate (rho, record) on hidden layer i + 1: the layer's own matching of actions
        (``match_action`` of :func:`~symeq.layers.dense.floating.NumericDenseLayer`,
        :func:`~symeq.layers.conv.floating.NumericConvLayer` or :func:`~symeq.layers.attention.floating.NumericHeads`).

        A convolution whose geometry does not carry the input action (a stride 2 on an even grid under
        a rotation, an action that is not channel (x) pixel) is matched on its dense rows instead when
        they are small enough (:data:`DENSE_FALLBACK_ENTRIES`, at most :data:`DENSE_FALLBACK_ROWS`
        neurons): the residuals then say how far it is from equivariant, instead of no answer."""
        candidates = _match_candidates(self.model.layers[i], prev, self.V[i], i)
        return [((rho, record), rho) for rho, record in candidates]

    def close(self, prev, B, acc: list) -> tuple:
        res = [r for _, r in acc]
        return max([self.last_residual(prev, B)] + [r[0] for r in res]), [a for a, _ in acc], res

    def last_residual(self, prev, B) -> float:
        """|W_L rho_{L-1} - rho_out W_L| / |W_L| and the same for b_L: the last-layer check, in floats."""
        return _commutator_residual(self.model.layers[-1], prev, B)

    def evaluate(self, A, pis, margins, B, how) -> tuple:
        """(worst residual, chain, layer records) of given permutations per hidden layer (a tie walk result)."""
        prev, chain, res, worst = as_action(A), [], [], 0.0
        for i, pi in enumerate(pis):
            act = self.model.layers[i].activation
            U = np.hstack([right_multiply(self.model.layers[i].weight, prev),
                           (_input_bias(self.model.layers[i], prev) - act.shift)[:, None]])
            alpha, rel = _fit(U, self.V[i], pi, act)
            prev = _latent_action(act, pi, alpha)
            chain.append(prev)
            res.append((float(rel.max()), float(np.median(rel)), margins[i], f"{act.latent_group}, {how}"))
            worst = max(worst, float(rel.max()))
        return max(worst, self.last_residual(prev, B)), chain, res


def _deviation(x, y) -> float:
    """Max entrywise difference of two latent actions (1.0 for different permutations)."""
    if isinstance(x, MonomialAction) and isinstance(y, MonomialAction):
        if not np.array_equal(x.cols, y.cols):
            return 1.0
        return float(max(np.max(np.abs(x.vals - y.vals)), np.max(np.abs(x.offset_or_zero - y.offset_or_zero))))
    dx = x.to_dense() if isinstance(x, MonomialAction) else np.asarray(x)
    dy = y.to_dense() if isinstance(y, MonomialAction) else np.asarray(y)
    return float(np.max(np.abs(dx - dy)))


def _homomorphism_error(group: NumericGroup, chains: list) -> tuple[float, int]:
    """Max deviation of g -> (rho_i(g))_i from respecting the relations of G.

    The walk's Cayley search (:func:`symeq.walk.cayley_homomorphism`) over words on the input
    matrices; two words reaching the same input element must give the same latent actions
    (compared entrywise with their offsets, a permutation mismatch counts as 1; dense actions,
    e.g. on attention value spaces, entrywise).  Past ``group.max_order`` elements: infinity.
    """

    def identity(a):
        return MonomialAction.identity(a.n) if isinstance(a, MonomialAction) else np.eye(a.shape[0])

    def key(m):
        if isinstance(m, MonomialAction):
            return m.cols.tobytes() + np.round(m.vals, 6).tobytes()
        return NumericGroup._key(m, 1e-9)

    r = cayley_homomorphism([as_action(a) for a, _ in group.generators], chains, compose=lambda a, b: a @ b,
                            identity=identity, key=key, deviation=_deviation, max_order=group.max_order)
    return (float("inf") if r.too_large else float(r.worst)), r.order


# -- tied neurons: the float row matcher of the one walk (symeq.walk)

def _dist_one(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """|u_j - v_k| for all pairs of rows."""
    d2 = np.einsum("ij,ij->i", U, U)[:, None] + np.einsum("ij,ij->i", V, V)[None, :] - 2.0 * (U @ V.T)
    return np.sqrt(np.maximum(d2, 0.0))


def _dist_pos(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """min over alpha > 0 of |u_j - alpha v_k| for all pairs of rows."""
    G = U @ V.T
    proj = np.where(G > 0, G * G / np.maximum(np.einsum("ij,ij->i", V, V), 1e-300)[None, :], 0.0)
    return np.sqrt(np.maximum(np.einsum("ij,ij->i", U, U)[:, None] - proj, 0.0))


def _sorted_blocks(F: np.ndarray, groups) -> np.ndarray:
    """F with each row's entries sorted inside the column groups (invariant under permutations there)."""
    if not groups:
        return F
    F = F.copy()
    for grp in groups:
        F[:, grp] = np.sort(F[:, grp], axis=1)
    return F


def _invariant_cost(FU_plus: np.ndarray, FU_minus: np.ndarray, FV: np.ndarray, cls: str) -> np.ndarray:
    """min over admissible alpha of |u - alpha v| on invariant rows (FU_minus: those of -u)."""
    if cls == "one":
        return _dist_one(FU_plus, FV)
    if cls == "positive":
        return _dist_pos(FU_plus, FV)
    dist = _dist_one if cls == "sign" else _dist_pos
    return np.minimum(dist(FU_plus, FV), dist(FU_minus, FV))


def _fit_scale(u_plus: np.ndarray, u_minus: np.ndarray, v: np.ndarray, cls: str) -> float:
    """The admissible alpha with u ~ alpha v, from invariant rows (u_minus: that of -u)."""
    if cls == "one":
        return 1.0
    if cls == "sign":
        return 1.0 if np.linalg.norm(u_plus - v) <= np.linalg.norm(u_minus - v) else -1.0
    vv = max(float(v @ v), 1e-300)
    gp, gm = max(float(u_plus @ v) / vv, 1e-300), max(float(u_minus @ v) / vv, 1e-300)
    if cls == "positive":
        return gp
    return gp if np.linalg.norm(u_plus - gp * v) <= np.linalg.norm(u_minus - gm * v) else -gm


def _clusters(C: np.ndarray, tol: float) -> list[np.ndarray]:
    """Connected components of C[a, b] <= tol (C a distance matrix), each sorted."""
    n = C.shape[0]
    close = (C <= tol) | (C.T <= tol)
    seen, out = np.zeros(n, bool), []
    for a in range(n):
        if seen[a]:
            continue
        comp, stack = [a], [a]
        seen[a] = True
        while stack:
            x = stack.pop()
            for y in np.flatnonzero(close[x] & ~seen):
                seen[y] = True
                comp.append(int(y))
                stack.append(int(y))
        out.append(np.array(sorted(comp), dtype=np.int64))
    return out


class _FloatMatcher:
    """The float row matcher of the one walk (:class:`symeq.walk.TieWalk`) for a dense chain.

    Forward: rows are matched by linear assignment on rows made invariant under permutations
    inside the tie groups of the layer before (entries sorted per group, after multiplying out
    the admissible scales), which fixes each neuron's tie group and scale.  Backward
    (:meth:`pair`): inside each tie group the targets are assigned by linear assignment on the
    outgoing columns (W_{i+1} rho_i = rho_{i+1} W_{i+1}); interchangeable neurons (rows and
    columns equal within ``tol``) are paired in increasing order, which keeps g -> rho(g) a
    homomorphism; rows that agree only as multisets, with columns that cannot tell them apart,
    are the walk's real choices.  The walk yields the permutations per hidden layer, best guess
    first.
    """

    def __init__(self, model, tol: float):
        self.model, self.tol = model, tol
        self.L = model.depth
        self.hidden = self.L - 1
        self.acts = [l.activation for l in model.layers[:-1]]
        self.W = [l.weight for l in model.layers]
        self.btil = []  # centred biases b + c0 W 1 (c0 = sigma(s) where sign flips are affine)
        for li, l in enumerate(model.layers):
            c0 = self.acts[li - 1].scalings.constant if li > 0 else 0.0
            self.btil.append(l.bias + c0 * l.weight.sum(axis=1) if c0 else l.bias)
        self.choices = 0
        self.theta = []  # per hidden layer: invariant rows, tie groups, scales
        groups, qv = [], None
        for li in range(self.L - 1):
            F = self.W[li] if qv is None else self.W[li] * qv[None, :]
            b = (self.btil[li] - self.acts[li].shift)[:, None]
            FV = np.hstack([_sorted_blocks(F, groups), b])
            FVm = np.hstack([_sorted_blocks(-F, groups), -b])
            cls = self.acts[li].scalings.alphas
            vn = np.sqrt(np.maximum(np.einsum("ij,ij->i", FV, FV), 1e-300))
            C = _invariant_cost(FV, FVm, FV, cls) / np.maximum(vn[:, None], vn[None, :])
            tie = [c for c in _clusters(C, tol) if len(c) > 1]
            iota = np.ones(FV.shape[0])
            for grp in tie:  # scales relative to the group's first row
                for k in grp[1:]:
                    iota[k] = _fit_scale(FV[k], FVm[k], FV[grp[0]], cls)
            self.theta.append((FV, tie, iota))
            groups, qv = tie, self.acts[li].scalings.q(iota)

    @property
    def tie_groups(self) -> int:
        return sum(len(t[1]) for t in self.theta)

    def tick(self) -> None:
        pass  # the float walk is bounded by its node budget alone

    def forward(self, A) -> list:
        """Step 1 of the walk: each neuron's tie group and scale, by linear assignment."""
        self.choices = 0
        fwd = []
        prev_pi, prev_qu = None, None
        for li in range(self.L - 1):
            FV, tie, iota_v = self.theta[li]
            cls = self.acts[li].scalings.alphas
            if li == 0:
                F, groups = right_multiply(self.W[0], as_action(A)), []
            else:  # theta^g's column m sits at theta's column pi(m), times q of its scale
                F = np.zeros_like(self.W[li])
                F[:, prev_pi] = self.W[li] * prev_qu[None, :]
                groups = self.theta[li - 1][1]
            b = (self.btil[li] - self.acts[li].shift)[:, None]
            FUp = np.hstack([_sorted_blocks(F, groups), b])
            FUm = np.hstack([_sorted_blocks(-F, groups), -b])
            un = np.sqrt(np.maximum(np.einsum("ij,ij->i", FUp, FUp), 1e-300))
            pi = linear_assignment(_invariant_cost(FUp, FUm, FV, cls) / un[:, None])
            iota_u = np.array([_fit_scale(FUp[m], FUm[m], FV[pi[m]], cls) for m in range(len(pi))]) * iota_v[pi]
            fwd.append((pi, iota_u))
            prev_pi, prev_qu = pi, self.acts[li].scalings.q(iota_u)
        return fwd

    def top(self, B, fwd) -> np.ndarray:
        return left_multiply(as_action(B), self.W[-1])

    def result(self, acc: list) -> list:
        return list(acc)

    def pair(self, li: int, Y, fwd):
        """Step 2 on hidden layer li: targets inside each tie group by assignment on outgoing columns."""
        FV, tie, iota_v = self.theta[li]
        pi0, iota_u = fwd[li]
        act = self.acts[li]
        X = self.W[li + 1] * act.scalings.q(iota_u)[None, :]
        Yn = Y * act.scalings.q(iota_v)[None, :]
        scale = max(float(np.abs(X).max()), 1e-300)
        Vn = self.W[li] / iota_v[:, None]  # theta's rows in their group's normalisation
        vscale = max(float(np.abs(Vn).max()), 1e-300)
        pi = pi0.copy()
        choices = []
        for grp in tie:
            pos = np.flatnonzero(np.isin(pi0, grp))
            tgt = grp[linear_assignment(_dist_one(X[:, pos].T, Yn[:, grp].T) / scale)]
            for cc in _clusters(_dist_one(Yn[:, grp].T, Yn[:, grp].T) / scale, self.tol):
                ks = grp[cc]
                mine = np.sort(pos[np.isin(tgt, ks)])
                rows = _clusters(_dist_one(Vn[ks], Vn[ks]) / vscale, self.tol)
                if len(rows) == 1:  # assignment is a bijection onto grp: len(mine) == len(ks)
                    pi[mine] = ks
                else:
                    choices.append((list(mine), [list(ks[r]) for r in rows]))
        self.choices += len(choices)
        return pi, choices

    def descend(self, li: int, pi, picks: list, fwd):
        """The permutation of hidden layer li, and theta's rows below in theta^g's order."""
        if picks:
            pi = pi.copy()
            for m, k in picks:
                pi[m] = k
        _, iota_u = fwd[li]
        iota_v = self.theta[li][2]
        alpha = self.acts[li].scalings.snap(iota_u / iota_v[pi])
        return pi, (None if li == 0 else alpha[:, None] * self.W[li][pi])


def derive_latent_actions_numeric(model: NumericModel, group=None, *, tol: float = DEFAULT_TOL,
                                  check_homomorphism: bool = True, max_tie_variants: int = 720) -> NumericDerivation:
    """Derive rho_i(g) in K_i for every hidden layer and generator of a float model.

    The walk is the exact path's (:mod:`symeq.walk`) over float row matchers: the chain walk with
    :class:`_FloatRows` (linear assignment, residuals, margins) first; where a small margin shows
    tied neurons and the chain misses the tolerance, the tie walk with :class:`_FloatMatcher`.

    Parameters
    ----------
    model : NumericModel (see :func:`symeq.numeric.models.from_exact` for exact models)
    group : defaults to ``model.group`` (exact or numeric)
    tol : relative residual up to which a layer counts as equivariant through K_i
    max_tie_variants : node budget for tied neurons.  Cloned neurons (rows of a layer equal up
        to K_i within ``tol``) make the linear assignment ambiguous; they are resolved by their
        outgoing weights from the last layer down (:class:`symeq.walk.TieWalk`, polynomial in
        the widths), and only rows that agree as multisets but not as vectors, with columns that
        cannot tell them apart, are searched, within this many nodes.  A search that runs out
        is reported as ``undetermined`` (never as "not within tolerance").

    Returns
    -------
    NumericDerivation
        the best actions in prod K_i, with residuals, margins and the homomorphism deviation.

    References
    ----------
    Shahverdi, Marchetti, Bokman, Kohn, arXiv 2601.21645 (2026), Theorem 4.1 and its proof.
    """
    group = _as_group(group) if group is not None else model.group
    if group is None:
        raise InputError("no group given: put a \"group\" in the model file or pass one")
    model.check_group(group)
    t0 = time.perf_counter()
    model = model.chain()  # attention: heads (value spaces) + merged output projection
    residuals, chains = [], []
    L = model.depth
    rows = _FloatRows(model)
    chain_walk = ChainWalk(rows, max_nodes=L)  # one node per layer: it never branches
    ties = None
    undetermined = []
    tie_notes = []

    for gi, (A, B) in enumerate(group.generators):
        name = group.names[gi]
        found = list(chain_walk.run(A, B))
        if not found:  # a layer's matching gave no candidate (NoPartner): no verdict, the reason said
            why = chain_walk.failure or "no candidate action"
            undetermined.append(f"generator {name}: {why}")
            residuals.append(LayerResidual(min(max(chain_walk.nodes, 1), L), name, float("inf"), float("inf"), None,
                                           f"not matched: {why}"))
            chains.append([None] * (L - 1))
            continue
        ((worst, chain, res),) = found
        if worst > tol and any(r[2] is not None and r[2] <= 10 * tol for r in res) and \
                all_support(model.layers, "tie-walk"):  # the tie walk reads dense rows
            # (near) tied neurons: resolve them by their outgoing weights instead
            if ties is None:
                matcher = _FloatMatcher(model, tol)
                ties = TieWalk(matcher, max_tie_variants)
            margins = [r[2] for r in res]
            best = None
            tried = 0
            for pis in ties.run(A, B):
                tried += 1
                how = (f"tie groups resolved by outgoing weights ({matcher.tie_groups} groups, "
                       f"{tried} candidate(s) evaluated)")
                cand = rows.evaluate(A, pis, margins, B, how)
                if best is None or cand[0] < best[0]:
                    best = cand
                if best[0] <= tol:
                    break
            if best is not None and best[0] < worst:
                worst, chain, res = best
            if worst > tol and ties.capped:
                undetermined.append(f"generator {name}: the search over tied neurons ran out of its budget of "
                                    f"{max_tie_variants} nodes (max_tie_variants) before a matching within tolerance "
                                    f"was found; best max residual {worst:.3g}")
            tie_notes.append(f"generator {name}: {matcher.tie_groups} tie group(s) resolved by their outgoing weights "
                             f"({ties.nodes} search nodes, {matcher.choices} real choice(s), {tried} candidate(s) "
                             "evaluated)")
        for i, (mx, med, margin, how) in enumerate(res):
            residuals.append(LayerResidual(i + 1, name, mx, med, margin, how))
        r_last = rows.last_residual(chain[-1] if chain else as_action(A), B)
        residuals.append(LayerResidual(L, name, r_last, r_last, None, "|W rho - rho_out W| / |W| and the same for b"))
        chains.append(chain)
    hom, order = (None, None)
    if check_homomorphism and L > 1 and not any(a is None for c in chains for a in c):
        hom, order = _homomorphism_error(group, chains)
    actions = [[chains[gi][i] for gi in range(len(chains))] for i in range(L - 1)]
    notes = list(tie_notes)
    d = NumericDerivation(actions, residuals, tol, hom, time.perf_counter() - t0, order, notes)
    d.undetermined = "; ".join(undetermined) or None
    mm = d.min_margin
    if mm is not None and mm <= 10 * d.max_residual and not tie_notes:
        notes.append(f"the smallest margin {mm:.3g} is not clearly above the residual {d.max_residual:.3g}: "
                     "some neurons are (near) clones or the network is far from layerwise equivariant; "
                     "the matching of those neurons is ambiguous")
    return d


def compare_with_exact(numeric: NumericDerivation, exact, tol: float = 1e-9) -> list[dict]:
    """Compare numeric actions with exact ones (a :class:`symeq.layerwise.Derivation` or nested lists).

    Returns one record per hidden layer and generator: ``equal`` (same permutation and values
    within ``tol``; the offsets of affine actions too, from ``exact.offsets``) and
    ``max_deviation``.  Dense actions (attention value spaces) are compared entrywise.
    """
    exact_actions = exact.actions if hasattr(exact, "actions") else exact
    if exact_actions is None:
        raise InputError("the exact derivation found no actions to compare with")
    exact_offsets = getattr(exact, "offsets", None)
    out = []
    for i, (nacts, eacts) in enumerate(zip(numeric.actions, exact_actions), 1):
        for gi, (n, e) in enumerate(zip(nacts, eacts)):
            ea = as_action(e)
            if exact_offsets is not None and isinstance(ea, MonomialAction):
                ea.offset = np.array([float(int(x.p)) / float(int(x.q)) for x in exact_offsets[i - 1][gi]])
                ea.__post_init__()
            dev = _deviation(n, ea)
            same_perm = not (isinstance(n, MonomialAction) and isinstance(ea, MonomialAction)) or \
                bool(np.array_equal(n.cols, ea.cols))
            dev = dev if same_perm else float("inf")
            out.append({"layer": i, "generator": gi, "equal": same_perm and dev <= tol, "max_deviation": dev})
    return out


# -- the paper's metric ------------------------------------------------------------------------

def projection_kind(act) -> str:
    """Which subgroup of monomial matrices K_i is (its linear part), from the activation's
    admissible scalings (:class:`~symeq.numeric.models.Scalings`)."""
    return act.scalings.projection_kind


def project_to_latent_group(A: np.ndarray, kind: str) -> MonomialAction:
    """The Frobenius-nearest element of K to a square matrix A, by linear assignment.

    kind: "permutation" (maximise sum A[j, pi j]), "signed permutation" (sum |A[j, pi j]|, sign
    from the entry), "monomial" (sum A[j, pi j]^2, scale = the entry), "positive monomial"
    (sum max(A, 0)^2).  For a fixed permutation these are the optimal scalings, so the result is
    the nearest element of K.

    >>> A = np.array([[0.1, -0.9], [1.1, 0.0]])
    >>> p = project_to_latent_group(A, "signed permutation")
    >>> p.cols.tolist(), p.vals.tolist()
    ([1, 0], [-1.0, 1.0])
    """
    if kind == "permutation":
        score = A
    elif kind == "signed permutation":
        score = np.abs(A)
    elif kind == "monomial":
        score = A * A
    elif kind == "positive monomial":
        score = np.maximum(A, 0.0) ** 2
    else:
        raise InputError(f"unknown latent group kind {kind!r}")
    pi = linear_assignment(-score)
    entries = A[np.arange(A.shape[0]), pi]
    if kind == "permutation":
        vals = np.ones_like(entries)
    elif kind == "signed permutation":
        vals = np.where(entries >= 0, 1.0, -1.0)
    elif kind == "positive monomial":
        vals = np.maximum(entries, 1e-12)
    else:
        vals = entries
    return MonomialAction(pi, vals)


@dataclass
class LayerMetric:
    """The paper's metric for one layer and one group element."""

    layer: int
    generator: str
    error: float               # median |F(g y) - A F(y)| / |F(y)| with the least-squares A
    projected_error: float     # the same with A projected onto K_i
    kind: str                  # the K_i used for the projection
    width: int
    A: np.ndarray | None = None
    projected: MonomialAction | None = None

    def to_json(self) -> dict:
        return {"layer": self.layer, "generator": self.generator, "error": self.error,
                "projected_error": self.projected_error, "latent_group": self.kind, "width": self.width}


def paper_metric(model: NumericModel, group=None, *, layers=None, n_fit: int | None = None, n_test: int = 2000,
                 noise_scale: float = 1.0, rng=None, keep_matrices: bool = False, forward=None) -> list[LayerMetric]:
    """The paper's layerwise-equivariance metric on Gaussian noise inputs, per layer and generator.

    Parameters
    ----------
    model : NumericModel
    group : exact/numeric group or a list of ``(name, input matrix)`` pairs; default ``model.group``
    layers : hidden layers to measure (1-based; default all hidden layers)
    n_fit : fitting inputs (default max(4 * width, 2000)); ``n_test`` held-out inputs
    noise_scale : standard deviation of the i.i.d. Gaussian noise inputs
    forward : optional ``forward(X, upto)`` replacing ``model.forward`` (e.g. a torch one)

    References
    ----------
    Shahverdi, Marchetti, Bokman, Kohn, arXiv 2601.21645 (2026), Section 5 (median relative
    error over noise inputs; 0.029 tanh vs 0.40 GELU for the CIFAR10 autoencoder's first layer).
    """
    if group is None:
        group = model.group
    if group is None:
        raise InputError("no group given")
    if isinstance(group, list):
        gens = [(n, np.asarray(a, dtype=np.float64)) for n, a in group]
    else:
        group = _as_group(group)
        gens = [(n, a) for n, (a, _) in zip(group.names, group.generators)]
    for n, a in gens:
        if a.shape != (model.input_dim, model.input_dim):
            raise InputError(f"generator {n} acts on R^{a.shape[0]}, the model takes R^{model.input_dim}")
    layers = layers or list(range(1, model.depth))
    for i in layers:
        if not 1 <= i <= model.depth:
            raise InputError(f"layer {i} does not exist (the model has {model.depth} layers)")
    rng = np.random.default_rng(rng)
    forward = forward or model.forward
    out = []
    widths = model.widths
    nf = n_fit or max(4 * max(widths[i] for i in layers), 2000)
    Xf = noise_scale * rng.standard_normal((nf, model.input_dim))
    Xt = noise_scale * rng.standard_normal((n_test, model.input_dim))
    for name, A in gens:
        for i in layers:
            act = model.layers[i - 1].activation
            kind = projection_kind(act) if act is not None else "permutation"
            # affine sign flips (sigmoid: y -> 1 - y) act affinely: fit y -> A y + c
            affine = act is not None and act.scalings.affine
            F, Fg = forward(Xf, i), forward(Xf @ A.T, i)
            F1 = np.hstack([F, np.ones((F.shape[0], 1))]) if affine else F
            # A_i F(x) ~ F(g x)  <=>  F(x) A_i^T ~ F(g x) (rows are points)
            At, *_ = np.linalg.lstsq(F1, Fg, rcond=None)
            Ai = At[:F.shape[1]].T
            c = At[F.shape[1]] if affine else 0.0
            T, Tg = forward(Xt, i), forward(Xt @ A.T, i)
            norms = np.maximum(np.linalg.norm(T, axis=1), 1e-300)
            err = float(np.median(np.linalg.norm(Tg - T @ Ai.T - c, axis=1) / norms))
            P = project_to_latent_group(Ai, kind)
            if affine:  # the offset that goes with the projected linear part
                P.offset = np.mean(Fg - P.apply_rows(F), axis=0)
                P.__post_init__()
            perr = float(np.median(np.linalg.norm(Tg - P.apply_rows(T), axis=1) / norms))
            out.append(LayerMetric(i, name, err, perr, kind, widths[i],
                                   Ai if keep_matrices else None, P))
    return out
