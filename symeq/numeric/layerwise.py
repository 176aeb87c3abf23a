"""Numeric layerwise analysis: the derivation of rho_i(g) in K_i over floats, and the paper's metric.

Two views of the same question, "does G act on every hidden layer, through K_i?":

1. **Derivation from the weights** (:func:`derive_latent_actions_numeric`), the twin of
   :func:`symeq.layerwise.derive_latent_actions`.  With rho_{i-1}(g) known (rho_0 = rho_in(g)),
   row j of [W_i rho_{i-1}(g) | b_i - s] must be alpha_j times a row k of [W_i | b_i - s] with
   alpha_j admissible for sigma (1; +-1 for odd/even sigma; any for monomials; > 0 for ReLU).
   The exact path hashes canonical rows; here every pair (j, k) gets the relative residual
   ``min_alpha |u_j - alpha v_k| / |u_j|`` (one Gram matrix), the rows are matched by linear
   assignment on that cost (row-wise argmin when it is already a bijection, which is the common
   case and keeps width 4096 fast), and rho_i(g)[j, k] = q(alpha_j).  Cloned neurons (rows equal
   up to K_i within the tolerance, looked for only where a margin shows a tie) make the
   assignment ambiguous: the permutations of their targets are tried depth first, each judged
   by the worst residual of the later layers (the twin of the exact path's backtracking; at most
   ``max_tie_variants`` in all).  The last layer is checked
   by |W_L rho_{L-1} - rho_out W_L| / |W_L| and the same for b_L.  What is reported is residuals
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

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .models import NumericGroup, NumericModel, _as_group
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


# -- linear assignment -------------------------------------------------------------------------

def linear_assignment(cost: np.ndarray) -> np.ndarray:
    """The permutation pi minimising sum_j cost[j, pi(j)] (scipy's LAPJV), as an array.

    When the row-wise argmin is already a bijection it is optimal and is returned directly.
    Without scipy, a greedy assignment is used (optimal only for clear-cut costs) and a
    warning says so.

    >>> linear_assignment(np.array([[1.0, 0.0], [0.0, 1.0]])).tolist()
    [1, 0]
    """
    arg = cost.argmin(axis=1)
    if np.unique(arg).shape[0] == arg.shape[0]:
        return arg
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        import warnings

        warnings.warn("scipy is not installed: greedy assignment (install symeq[numeric] for the optimal one)")
        n = cost.shape[0]
        order = np.argsort(cost, axis=None)
        pi, used_r, used_c = np.full(n, -1), np.zeros(n, bool), np.zeros(n, bool)
        for flat in order:
            r, c = divmod(int(flat), n)
            if not used_r[r] and not used_c[c]:
                pi[r], used_r[r], used_c[c] = c, True, True
        return pi
    rows, cols = linear_sum_assignment(cost)
    pi = np.empty(cost.shape[0], dtype=np.int64)
    pi[rows] = cols
    return pi


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
    given), ``residuals`` every layer/generator residual, ``within_tolerance`` whether every
    residual is <= ``tol`` and the homomorphism check passed within ``tol``.
    """

    actions: list
    residuals: list
    tol: float
    homomorphism_error: float | None
    seconds: float
    group_order: int | None = None
    notes: list = field(default_factory=list)

    @property
    def max_residual(self) -> float:
        return max((r.residual for r in self.residuals), default=0.0)

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
        if self.homomorphism_error is not None:
            lines.append(f"  homomorphism on the group's relations (order {self.group_order}): "
                         f"max deviation {self.homomorphism_error:.3g}")
        for i, acts in enumerate(self.actions, 1):
            lines.append(f"  rho_{i}: " + ", ".join(a.kind() for a in acts))
        lines += [f"  note: {n}" for n in self.notes]
        verdict = "within" if self.within_tolerance else "NOT within"
        lines.append(f"every layer equivariant through K_i {verdict} tolerance {self.tol:g} "
                     f"(max residual {self.max_residual:.3g}); {self.seconds:.2f} s")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "tolerance": self.tol,
            "within_tolerance": self.within_tolerance,
            "max_residual": self.max_residual,
            "min_margin": self.min_margin,
            "homomorphism_error": self.homomorphism_error,
            "group_order": self.group_order,
            "seconds": self.seconds,
            "residuals": [r.to_json() for r in self.residuals],
            "actions": [[{"cols": a.cols.tolist(), "vals": a.vals.tolist()} for a in acts] for acts in self.actions],
            "notes": self.notes,
        }


def _match_layer(U: np.ndarray, V: np.ndarray, act, chunk: int = 2048):
    """Match rows of U to rows of V up to the activation's admissible scalings.

    Returns (pi, alpha, rel, margin): U_j ~ alpha_j V_pi(j), rel[j] the relative residual.
    """
    sym = act.symmetry
    un = np.sqrt(np.maximum(np.einsum("ij,ij->i", U, U), 1e-300))
    cost = _row_distances(U, V, sym) / un[:, None]
    pi = linear_assignment(cost)
    alpha, rel = _fit(U, V, pi, sym)
    if cost.shape[1] > 1:
        part = np.partition(cost, 1, axis=1)[:, :2]
        margin = float(np.min(part[:, 1] - part[:, 0]))
    else:
        margin = float("inf")
    return pi, alpha, rel, margin


def _row_distances(U: np.ndarray, V: np.ndarray, sym: str) -> np.ndarray:
    """min over admissible alpha of |U_j - alpha V_k|, for all pairs (j, k)."""
    un2 = np.einsum("ij,ij->i", U, U)
    vn2 = np.einsum("ij,ij->i", V, V)
    G = U @ V.T
    if sym in ("odd", "even"):
        d2 = un2[:, None] + vn2[None, :] - 2.0 * np.abs(G)
    elif sym in ("monomial", "relu"):
        proj = G * G / np.maximum(vn2, 1e-300)[None, :]
        if sym == "relu":
            proj = np.where(G > 0, proj, 0.0)
        d2 = un2[:, None] - proj
    else:  # alpha = 1 only
        d2 = un2[:, None] + vn2[None, :] - 2.0 * G
    return np.sqrt(np.maximum(d2, 0.0))


def _fit(U: np.ndarray, V: np.ndarray, pi: np.ndarray, sym: str):
    """The admissible scalings alpha_j and relative residuals for the matching U_j ~ alpha_j V_pi(j)."""
    Vp = V[pi]
    g = np.einsum("ij,ij->i", U, Vp)
    if sym in ("odd", "even"):
        alpha = np.where(g >= 0, 1.0, -1.0)
    elif sym in ("monomial", "relu"):
        alpha = g / np.maximum(np.einsum("ij,ij->i", Vp, Vp), 1e-300)
    else:
        alpha = np.ones(U.shape[0])
    un = np.sqrt(np.maximum(np.einsum("ij,ij->i", U, U), 1e-300))
    return alpha, np.linalg.norm(U - alpha[:, None] * Vp, axis=1) / un


def _tie_groups(V: np.ndarray, act, tol: float) -> list[np.ndarray]:
    """Groups of rows of V equal up to an admissible scaling (cloned neurons), of size >= 2."""
    n = V.shape[0]
    if n < 2:
        return []
    vn = np.sqrt(np.maximum(np.einsum("ij,ij->i", V, V), 1e-300))
    close = _row_distances(V, V, act.symmetry) <= tol * vn[:, None]
    close = close & close.T
    seen, groups = np.zeros(n, bool), []
    for j in np.flatnonzero(close.sum(axis=1) > 1):
        if not seen[j]:
            grp = np.flatnonzero(close[j])
            seen[grp] = True
            groups.append(grp)
    return groups


def _homomorphism_error(group: NumericGroup, chains: list) -> tuple[float, int]:
    """Max deviation of g -> (rho_i(g))_i from respecting the relations of G.

    BFS over words on the input matrices; two words reaching the same input element must give
    the same latent monomials (compared entrywise, permutation mismatch counts as 1).
    """
    gens = [as_action(a) for a, _ in group.generators]
    first = gens[0]
    ident = MonomialAction.identity(first.n) if isinstance(first, MonomialAction) else np.eye(first.shape[0])
    L = len(chains[0])
    start = (ident, [MonomialAction.identity(a.n) for a in chains[0]])

    def key(m):
        if isinstance(m, MonomialAction):
            return m.cols.tobytes() + np.round(m.vals, 6).tobytes()
        return NumericGroup._key(m, 1e-9)

    seen = {key(start[0]): start[1]}
    frontier = [start]
    worst = 0.0
    while frontier:
        nxt = []
        for m, lat in frontier:
            for gi, a in enumerate(gens):
                m2 = m @ a
                lat2 = [lat[i] @ chains[gi][i] for i in range(L)]
                k = key(m2)
                if k in seen:
                    for x, y in zip(seen[k], lat2):
                        worst = max(worst, 1.0 if not np.array_equal(x.cols, y.cols) else float(np.max(np.abs(x.vals - y.vals))))
                else:
                    seen[k] = lat2
                    nxt.append((m2, lat2))
                    if len(seen) > group.max_order:
                        return float("inf"), len(seen)
        frontier = nxt
    return worst, len(seen)


def derive_latent_actions_numeric(model: NumericModel, group=None, *, tol: float = DEFAULT_TOL,
                                  check_homomorphism: bool = True, max_tie_variants: int = 720) -> NumericDerivation:
    """Derive rho_i(g) in K_i for every hidden layer and generator of a float model.

    Parameters
    ----------
    model : NumericModel (see :func:`symeq.numeric.models.from_exact` for exact models)
    group : defaults to ``model.group`` (exact or numeric)
    tol : relative residual up to which a layer counts as equivariant through K_i
    max_tie_variants : cloned neurons (rows of a layer equal up to K_i within ``tol``) make the
        linear assignment ambiguous; the permutations of their targets are tried depth first,
        each judged by the worst residual of the layers after it, up to this many in all

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
    residuals, chains = [], []
    L = model.depth
    # theta's shifted rows do not depend on g: build them once
    V = []
    for l in model.layers[:-1]:
        V.append(np.hstack([l.weight, (l.bias - l.activation.shift)[:, None]]))
    tie_cache: dict = {}
    budget = [0]

    def ties_of(i):   # computed only where a margin says two neurons are (near) tied
        if i not in tie_cache:
            tie_cache[i] = _tie_groups(V[i], model.layers[i].activation, tol)
        return tie_cache[i]

    def last_residual(prev, B):
        last = model.layers[-1]
        Bm = as_action(B)
        lhs = right_multiply(last.weight, prev)
        rhs = left_multiply(Bm, last.weight)
        rb = left_multiply(Bm, last.bias[:, None])[:, 0]
        scale = max(np.linalg.norm(last.weight), 1e-300)
        res_w = np.linalg.norm(lhs - rhs) / scale
        res_b = np.linalg.norm(last.bias - rb) / max(np.linalg.norm(last.bias), scale)
        return float(max(res_w, res_b))

    def tie_variants(pi, groups):
        """pi with the targets inside each tie group permuted, identity first (capped)."""
        yield pi
        slots = [(np.flatnonzero(np.isin(pi, grp)), pi[np.isin(pi, grp)]) for grp in groups]
        slots = [(pos, tgt) for pos, tgt in slots if len(pos) > 1]
        for combo in itertools.islice(itertools.product(*[itertools.permutations(range(len(pos)))
                                                          for pos, _ in slots]), 1, max_tie_variants):
            alt = pi.copy()
            for (pos, tgt), perm in zip(slots, combo):
                alt[pos] = tgt[list(perm)]
            yield alt

    def best_chain(i, prev, B):
        """(worst residual, chain, layer residuals) from layer i on, trying tie variants depth first."""
        if i == L - 1:
            return last_residual(prev, B), [], []
        layer = model.layers[i]
        act = layer.activation
        U = np.hstack([right_multiply(layer.weight, prev), (layer.bias - act.shift)[:, None]])
        pi0, alpha0, rel0, margin = _match_layer(U, V[i], act)
        groups = ties_of(i) if margin <= 10 * tol else []
        best = None
        for k, pi in enumerate(tie_variants(pi0, groups)):
            if k and budget[0] >= max_tie_variants:
                break
            budget[0] += k > 0
            alpha, rel = (alpha0, rel0) if k == 0 else _fit(U, V[i], pi, act.symmetry)
            q = np.array([act.admissible(a) for a in alpha]) if act.symmetry not in ("monomial", "relu") else \
                (alpha ** act.degree if act.symmetry == "monomial" else alpha)
            if act.symmetry == "relu" and np.any(alpha <= 0):
                q = np.where(alpha > 0, alpha, np.nan)
            rho = MonomialAction(pi, q)
            worst, chain, res = best_chain(i + 1, rho, B)
            worst = max(worst, float(rel.max()))
            if best is None or worst < best[0]:
                how = f"{act.latent_group}, linear assignment" + \
                      (f", tie groups searched ({k + 1} variants tried)" if groups else "")
                best = (worst, [rho] + chain, [(float(rel.max()), float(np.median(rel)), margin, how)] + res)
            if best[0] <= tol:
                break
        return best

    for gi, (A, B) in enumerate(group.generators):
        name = group.names[gi]
        _, chain, res = best_chain(0, as_action(A), B)
        for i, (mx, med, margin, how) in enumerate(res):
            residuals.append(LayerResidual(i + 1, name, mx, med, margin, how))
        r_last = last_residual(chain[-1] if chain else as_action(A), B)
        residuals.append(LayerResidual(L, name, r_last, r_last, None, "|W rho - rho_out W| / |W| and the same for b"))
        chains.append(chain)
    hom, order = (None, None)
    if check_homomorphism and L > 1:
        hom, order = _homomorphism_error(group, chains)
    actions = [[chains[gi][i] for gi in range(len(chains))] for i in range(L - 1)]
    notes = []
    d = NumericDerivation(actions, residuals, tol, hom, time.perf_counter() - t0, order, notes)
    mm = d.min_margin
    if mm is not None and mm <= 10 * d.max_residual:
        notes.append(f"the smallest margin {mm:.3g} is not clearly above the residual {d.max_residual:.3g}: "
                     "some neurons are (near) clones or the network is far from layerwise equivariant; "
                     "the matching of those neurons is ambiguous")
    return d


def compare_with_exact(numeric: NumericDerivation, exact, tol: float = 1e-9) -> list[dict]:
    """Compare numeric actions with exact ones (a :class:`symeq.layerwise.Derivation` or nested lists).

    Returns one record per hidden layer and generator: ``equal`` (same permutation and values
    within ``tol``) and ``max_deviation``.
    """
    exact_actions = exact.actions if hasattr(exact, "actions") else exact
    if exact_actions is None:
        raise InputError("the exact derivation found no actions to compare with")
    out = []
    for i, (nacts, eacts) in enumerate(zip(numeric.actions, exact_actions), 1):
        for gi, (n, e) in enumerate(zip(nacts, eacts)):
            ea = as_action(e)
            same_perm = bool(np.array_equal(n.cols, ea.cols))
            dev = float(np.max(np.abs(n.vals - ea.vals))) if same_perm else float("inf")
            out.append({"layer": i, "generator": gi, "equal": same_perm and dev <= tol, "max_deviation": dev})
    return out


# -- the paper's metric ------------------------------------------------------------------------

def projection_kind(act) -> str:
    """Which subgroup of monomial matrices K_i is, from the activation's symmetry."""
    return {"odd": "signed permutation", "monomial": "monomial", "relu": "positive monomial"}.get(
        act.symmetry, "permutation")


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
            F, Fg = forward(Xf, i), forward(Xf @ A.T, i)
            # A_i F(x) ~ F(g x)  <=>  F(x) A_i^T ~ F(g x) (rows are points)
            At, *_ = np.linalg.lstsq(F, Fg, rcond=None)
            Ai = At.T
            T, Tg = forward(Xt, i), forward(Xt @ A.T, i)
            norms = np.maximum(np.linalg.norm(T, axis=1), 1e-300)
            err = float(np.median(np.linalg.norm(Tg - T @ Ai.T, axis=1) / norms))
            P = project_to_latent_group(Ai, kind)
            perr = float(np.median(np.linalg.norm(Tg - P.apply_rows(T), axis=1) / norms))
            out.append(LayerMetric(i, name, err, perr, kind, widths[i],
                                   Ai if keep_matrices else None, P))
    return out
