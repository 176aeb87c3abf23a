"""The float matching of rows up to admissible scalings, below the float layers that use it.

Row j of [W_i rho_{i-1}(g) | b_i + W_i c_{i-1}(g) - s] is matched to a row k of theta's
[W_i | b_i - s] up to an admissible scaling alpha (the activation's
:class:`~symeq.numeric.models.Scalings`): every pair gets the relative residual
``min_alpha |u_j - alpha v_k| / |u_j|`` (one Gram matrix), the rows are matched by linear assignment
on that cost (row-wise argmin when it is already a bijection), and rho_i(g)[j, k] = q(alpha_j)
(Shahverdi, Marchetti, Bokman, Kohn 2026, Theorem 4.1; ``docs/theory.md``).  The float layers'
matching of actions (``NumericDenseLayer.match_action``) and the tie walk's float matcher
(``symeq.numeric.layerwise``) both use these helpers; they live here so that the layers need not
import the derivation.

Examples
--------
>>> import numpy as np
>>> from symeq.numeric.models import numeric_activation
>>> V = np.array([[1.0, 2.0, 0.5], [3.0, -1.0, 0.0]])
>>> pi, alpha, rel, margin = _match_layer(-V[::-1], V, numeric_activation("tanh"))
>>> pi.tolist(), alpha.tolist(), float(rel.max()) < 1e-12
([1, 0], [-1.0, -1.0], True)
"""

from __future__ import annotations

import numpy as np

from .monomial import MonomialAction

__all__ = ["linear_assignment"]


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


# -- rows up to admissible scalings ------------------------------------------------------------

def _match_layer(U: np.ndarray, V: np.ndarray, act, chunk: int = 2048):
    """Match rows of U to rows of V up to the activation's admissible scalings.

    Returns (pi, alpha, rel, margin): U_j ~ alpha_j V_pi(j), rel[j] the relative residual.
    """
    un = np.sqrt(np.maximum(np.einsum("ij,ij->i", U, U), 1e-300))
    cost = _row_distances(U, V, act) / un[:, None]
    pi = linear_assignment(cost)
    alpha, rel = _fit(U, V, pi, act)
    if cost.shape[1] > 1:
        part = np.partition(cost, 1, axis=1)[:, :2]
        margin = float(np.min(part[:, 1] - part[:, 0]))
    else:
        margin = float("inf")
    return pi, alpha, rel, margin


def _alpha_class(act) -> str:
    """Which alpha are admissible ("one", "sign", "positive", "nonzero"), from the activation's
    :class:`~symeq.numeric.models.Scalings` (read off the exact activation where there is one)."""
    # a Scalings has ``alphas``; an activation carries its Scalings (duck-typed: Scalings lives in
    # symeq.numeric.models, above this module)
    sc = act if hasattr(act, "alphas") else getattr(act, "scalings", None)
    if sc is None or not hasattr(sc, "alphas"):
        raise TypeError(f"expected a NumericActivation or Scalings, got {act!r}")
    return sc.alphas


def _row_distances(U: np.ndarray, V: np.ndarray, act) -> np.ndarray:
    """min over admissible alpha of |U_j - alpha V_k|, for all pairs (j, k)."""
    cls = _alpha_class(act)
    un2 = np.einsum("ij,ij->i", U, U)
    vn2 = np.einsum("ij,ij->i", V, V)
    G = U @ V.T
    if cls == "sign":
        d2 = un2[:, None] + vn2[None, :] - 2.0 * np.abs(G)
    elif cls in ("nonzero", "positive"):
        proj = G * G / np.maximum(vn2, 1e-300)[None, :]
        if cls == "positive":
            proj = np.where(G > 0, proj, 0.0)
        d2 = un2[:, None] - proj
    else:  # alpha = 1 only
        d2 = un2[:, None] + vn2[None, :] - 2.0 * G
    return np.sqrt(np.maximum(d2, 0.0))


def _fit(U: np.ndarray, V: np.ndarray, pi: np.ndarray, act):
    """The admissible scalings alpha_j and relative residuals for the matching U_j ~ alpha_j V_pi(j)."""
    cls = _alpha_class(act)
    Vp = V[pi]
    g = np.einsum("ij,ij->i", U, Vp)
    if cls == "sign":
        alpha = np.where(g >= 0, 1.0, -1.0)
    elif cls in ("nonzero", "positive"):
        alpha = g / np.maximum(np.einsum("ij,ij->i", Vp, Vp), 1e-300)
        if cls == "positive":  # the best alpha >= 0; 0 is the limit, not admissible (below)
            alpha = np.maximum(alpha, 0.0)
    else:
        alpha = np.ones(U.shape[0])
    un = np.sqrt(np.maximum(np.einsum("ij,ij->i", U, U), 1e-300))
    rel = np.linalg.norm(U - alpha[:, None] * Vp, axis=1) / un
    # no admissible alpha fits (ReLU rows pointing apart): the residual |U_j| / |U_j| = 1 says so;
    # alpha = 1 stands in so that the later layers are still matched and reported
    return np.where(alpha == 0.0, 1.0, alpha), rel


def _input_bias(layer, prev) -> np.ndarray:
    """b + W c when the action on the layer's input is affine (y -> rho y + c), else b."""
    off = getattr(prev, "offset", None)
    return layer.bias if off is None else layer.bias + layer.weight @ off


def _latent_action(act, pi: np.ndarray, alpha: np.ndarray) -> MonomialAction:
    """rho_i(g) from the matching U_j ~ alpha_j V_pi(j): entry q(alpha_j) at (j, pi(j)), and the
    offsets o(alpha_j) of affine sign flips (NaN entries where alpha_j is not admissible)."""
    return MonomialAction(pi, act.scalings.q(alpha), act.scalings.offset(alpha) if act.scalings.affine else None)
