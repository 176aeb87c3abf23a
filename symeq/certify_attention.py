"""certify's road for softmax attention: the nearest layerwise-equivariant attention layer, proven exactly.

For a float network of one softmax attention layer (read from torch, ONNX or a model file) and a
group of order 2, {e, g}, acting by X -> P X C^T on the input and X -> P X C_out^T on the output
(P a token permutation, C and C_out signed permutations; g^2 = e), a layerwise-equivariant layer has
a head involution pi and per-head blocks (docs/attention.md):

* a swapped pair h <-> k: in a gauge of head k (Q_k M, K_k M^-T; V_k N, N^-1 O_k: the same
  function) C Q_h = Q_k, C K_h = K_k, C V_h = V_k, O_k = O_h C_out, C b_h = b_k;
* a head mapped to itself: C Q_h = Q_h T, C K_h = K_h T, C V_h = V_h S, S O_h = O_h C_out, C b_h = b_h,
  with T and S involutions, in a gauge diagonal: the inner sign actions;
* the output bias: C_out c = c.

Score biases of torch's form b_h = K_h b_q[h] are projected through b_q (a pair: b_q[h] = b_q[k]
in the gauge; a head mapped to itself: T b_q = b_q), so theta-bar is again an
``nn.MultiheadAttention``; other score biases are averaged directly (C b_h = b_pi(h)).

**Blocks**: M, N (or the self-maps) are least-squares fits (C Q_h ~ Q_k M, C V_h ~ V_k N), a
self-map is projected to the nearest involution by its eigenvalues (rounded to +-1; the
eigenvectors give the gauge).  **Head permutation**: every involution pi of the H heads is scored
by the distance of its projection (the pair and single costs add up, so all of them are compared,
exactly once each: the nearest for these blocks, up to H = :data:`MAX_EXHAUSTIVE_HEADS`).
**Projection**: the gauged parameters are rounded to the grid 10^-D and averaged over {e, g} in
exact rationals, so theta-bar satisfies the conditions above exactly; theta-bar then goes through
:func:`symeq.verify`, whose certificate ``symeq check`` re-checks.

Any other finite group (acting by token permutations (x) signed permutations) takes the bounded
search :func:`_certify_bounded`: heads in their SVD gauge, per group element a head permutation
by linear assignment and sign blocks, the exact Reynolds average over the group (labelled "not
proven nearest").

Distances are taken in the coordinates the function depends on (A_h = Q_h K_h^T, b_h, V_h O_h, c),
which no gauge moves: ||theta - theta-bar|| / ||theta|| there, and the function distance on Gaussian
noise (and on data when given).
"""

from __future__ import annotations

import math
import time

import numpy as np

from .errors import InputError
from .layers.registry import supports

__all__ = ["certify_attention", "MAX_EXHAUSTIVE_HEADS"]

MAX_EXHAUSTIVE_HEADS = 12
"""Up to this many heads every head involution is compared (140 152 for 12 heads)."""


def _signed_perm_involution(M: np.ndarray, what: str) -> np.ndarray:
    if not (np.all(np.isin(M, (-1.0, 0.0, 1.0))) and np.all(np.abs(M).sum(axis=1) == 1)
            and np.all(np.abs(M).sum(axis=0) == 1)):
        raise InputError(f"certify (attention): the group's {what} must be a signed permutation")
    if not np.array_equal(M @ M, np.eye(M.shape[0])):
        raise InputError(f"certify (attention): the group's {what} must be an involution (g^2 = e)")
    return M


def _gauge_involution(F: np.ndarray):
    """(U, s): F ~ U diag(s) U^-1 with s = +-1 (the nearest involution by eigenvalues), or None
    when F has complex eigenvalues far from the real axis or a singular eigenbasis."""
    lam, U = np.linalg.eig(F)
    if np.max(np.abs(lam.imag)) > 1e-6 * max(1.0, np.max(np.abs(lam))) or np.any(np.abs(lam.real) < 1e-12):
        return None
    U = U.real
    if abs(np.linalg.det(U)) < 1e-12:
        return None
    return U, np.where(lam.real > 0, 1.0, -1.0)


def _lstsq(A, B):
    return np.linalg.lstsq(A, B, rcond=None)[0]


def _invariants(Q, K, V, O, sb, c):
    """The coordinates f depends on, per head: A_h, b_h, V_h O_h; and c."""
    parts = []
    for h in range(len(Q)):
        parts += [(Q[h] @ K[h].T).ravel(), sb[h], (V[h] @ O[h]).ravel()]
    parts.append(c)
    return np.concatenate(parts)


class _Heads:
    """Float parameters of a softmax layer, per head (score bias and output bias as zero vectors when absent)."""

    def __init__(self, layer):
        self.Q = [q.copy() for q in layer.query]
        self.K = [k.copy() for k in layer.key]
        self.V = [v.copy() for v in layer.value]
        self.O = [o.copy() for o in layer.out]
        d = self.Q[0].shape[0]
        self.sb = [np.zeros(d) if layer.score_bias is None or layer.score_bias[h] is None else layer.score_bias[h].copy()
                   for h in range(len(self.Q))]
        self.c = np.zeros(self.O[0].shape[1]) if layer.bias is None else layer.bias.copy()
        # the query bias behind each score bias (b_h = K_h b_q[h], as torch's attention has it): projected
        # instead of b_h when every b_h is of that form, so theta-bar stays an nn.MultiheadAttention
        self.bq = [_lstsq(K, b) for K, b in zip(self.K, self.sb)]
        self.mha = all(np.linalg.norm(K @ q - b) <= 1e-9 * max(np.linalg.norm(b), 1e-300) or not np.any(b)
                       for K, q, b in zip(self.K, self.bq, self.sb))


def _pair(P: _Heads, h: int, k: int, C, Co):
    """The gauged pair (h, k) and its projection: (cost, gauged (Q_k, K_k, V_k, O_k)), or None."""
    M = _lstsq(P.Q[k], C @ P.Q[h])
    N = _lstsq(P.V[k], C @ P.V[h])
    if abs(np.linalg.det(M)) < 1e-12 or abs(np.linalg.det(N)) < 1e-12:
        return None
    Qk, Kk = P.Q[k] @ M, P.K[k] @ np.linalg.inv(M).T
    Vk, Ok = P.V[k] @ N, np.linalg.solve(N, P.O[k])
    bqk = M.T @ P.bq[k]
    Qh = (P.Q[h] + C @ Qk) / 2
    Kh = (P.K[h] + C @ Kk) / 2
    Vh = (P.V[h] + C @ Vk) / 2
    Oh = (P.O[h] + Ok @ Co) / 2
    bh = Kh @ ((P.bq[h] + bqk) / 2) if P.mha else (P.sb[h] + C @ P.sb[k]) / 2
    cost = 0.0
    for (q, kk, v, o, b), (Q0, K0, V0, O0, b0) in (((Qh, Kh, Vh, Oh, bh), (P.Q[h], P.K[h], P.V[h], P.O[h], P.sb[h])),
                                                  ((C @ Qh, C @ Kh, C @ Vh, Oh @ Co, C @ bh),
                                                   (P.Q[k], P.K[k], P.V[k], P.O[k], P.sb[k]))):
        cost += (np.sum((q @ kk.T - Q0 @ K0.T) ** 2) + np.sum((v @ o - V0 @ O0) ** 2) + np.sum((b - b0) ** 2))
    return cost, (Qk, Kk, Vk, Ok, bqk)


def _single(P: _Heads, h: int, C, Co):
    """The head mapped to itself: (cost, gauged (Q, K, V, O), T signs, S signs), or None."""
    gq = _gauge_involution(_lstsq(P.Q[h], C @ P.Q[h]))
    gv = _gauge_involution(_lstsq(P.V[h], C @ P.V[h]))
    if gq is None or gv is None:
        return None
    (U, t), (W, s) = gq, gv
    Q, K = P.Q[h] @ U, P.K[h] @ np.linalg.inv(U).T
    V, O = P.V[h] @ W, np.linalg.solve(W, P.O[h])
    bq = U.T @ P.bq[h]
    T, S = np.diag(t), np.diag(s)
    Qb, Kb = (Q + C @ Q @ T) / 2, (K + C @ K @ T) / 2
    Vb, Ob = (V + C @ V @ S) / 2, (O + S @ O @ Co) / 2
    bb = Kb @ ((bq + T @ bq) / 2) if P.mha else (P.sb[h] + C @ P.sb[h]) / 2
    cost = (np.sum((Qb @ Kb.T - P.Q[h] @ P.K[h].T) ** 2) + np.sum((Vb @ Ob - P.V[h] @ P.O[h]) ** 2)
            + np.sum((bb - P.sb[h]) ** 2))
    return cost, (Q, K, V, O, bq), t, s


def _involutions(H: int):
    """Every involution of range(H) as a list pi (pi[pi[h]] = h)."""
    def rec(rest):
        if not rest:
            yield {}
            return
        h, tail = rest[0], rest[1:]
        for sub in rec(tail):
            yield {**sub, h: h}
        for j, k in enumerate(tail):
            for sub in rec(tail[:j] + tail[j + 1:]):
                yield {**sub, h: k, k: h}
    for m in rec(list(range(H))):
        yield [m[h] for h in range(H)]


def _q(x: float, D: int):
    from flint import fmpq

    return fmpq(int(round(float(x) * 10 ** D)), 10 ** D)


def _qm(M: np.ndarray, D: int):
    from flint import fmpq_mat

    M = np.atleast_2d(M)
    return fmpq_mat(M.shape[0], M.shape[1], [_q(x, D) for x in M.ravel()])


def certify_attention(model, ngroup, egroup, *, result, relative, digits: int | None = None, data=None,
                      max_distance: float | None = None, timeout: float | None = 600.0, noise_points: int = 2000,
                      seed: int = 0, t0=None):
    """The nearest layerwise-equivariant softmax attention layer to ``model`` (one attention layer),
    proven exactly (see the module docstring).

    Called by :func:`symeq.certification.certify`, which passes the float and exact groups, the
    result class (``result``: :class:`symeq.certification.Certification`) and its relative function
    distance (``relative``), so that this module does not import it back."""
    Certification, _relative = result, relative
    t0 = time.perf_counter() if t0 is None else t0
    if len(model.layers) != 1 or not supports(model.layers[0], "splits-in-chain"):  # one attention layer
        raise InputError("certify (attention): the road covers one attention layer (an attention model with "
                         "token-wise layers after it is not certified yet)")
    layer = model.layers[0]
    if layer.scoring != "softmax":
        raise InputError("certify (attention): the road covers softmax attention (lightning attention has a free "
                         "score scalar between A_h and V_h that this projection does not use)")
    if digits is not None and not (isinstance(digits, int) and 1 <= digits <= 30):
        raise InputError(f"--digits must be an integer from 1 to 30, got {digits!r}")
    T, d, do = layer.tokens, layer.d, layer.d_out
    from .layers.attention.floating import factor_kron_numeric

    A, B = ngroup.generators[0]
    if len(ngroup.generators) != 1 or egroup.order() != 2:  # not {e, g}: the bounded search
        return _certify_bounded(model, ngroup, egroup, result=result, relative=relative, digits=digits, data=data,
                                max_distance=max_distance, timeout=timeout, noise_points=noise_points, seed=seed,
                                t0=t0)
    fin, fout = factor_kron_numeric(A, T, d), factor_kron_numeric(B, T, do)
    if fin is None or fout is None or not np.array_equal(fin[0], fout[0]):
        raise InputError("certify (attention): the group must act as one token permutation (x) channel matrices on "
                         "input and output")
    Pt = fin[0]
    if not np.array_equal(Pt @ Pt, np.eye(T)):
        raise InputError("certify (attention): the token permutation must be an involution (g^2 = e)")
    C = _signed_perm_involution(fin[1], "channel action C")
    Co = _signed_perm_involution(fout[1], "output channel action C_out")
    P = _Heads(layer)
    H = len(P.Q)
    if H > MAX_EXHAUSTIVE_HEADS:
        raise InputError(f"certify (attention): {H} heads; every head involution is compared up to "
                         f"{MAX_EXHAUSTIVE_HEADS} heads")
    singles = [_single(P, h, C, Co) for h in range(H)]
    pairs = {(h, k): _pair(P, h, k, C, Co) for h in range(H) for k in range(H) if h < k}
    cost, pi, n_tried = _nearest_head_involution(singles, pairs, H)
    heads, cb, D, signs = _exact_average(P, pi, singles, pairs, cost, C, Co, digits)
    swaps = [(h + 1, pi[h] + 1) for h in range(H) if h < pi[h]]
    fixed = [h + 1 for h in range(H) if pi[h] == h]
    method = (f"head involution by exhaustive comparison of all {n_tried} involutions of {H} heads (swapped pairs "
              f"{swaps or 'none'}, heads mapped to themselves {fixed or 'none'}); per-head blocks: least-squares fits, "
              "self-maps projected to the nearest involution (inner sign actions)")
    notes = ["distances in the coordinates f depends on (A_h = Q_h K_h^T, b_h, V_h O_h, c), which the per-head "
             "gauges do not move",
             "the head permutation is the nearest among all involutions for these blocks; the blocks themselves are "
             "least-squares fits, so a nearer layerwise-equivariant layer with other blocks may exist"]
    actions = {"head_permutation": [pi[h] + 1 for h in range(H)],
               "inner_signs": {str(h + 1): {"query_key": [int(x) for x in signs[h][0]],
                                            "value_out": [int(x) for x in signs[h][1]]} for h in signs}}
    return _finish(model, heads, list(cb.entries()), egroup, ngroup, P, D, method, notes, actions, result=Certification,
                   relative=_relative, data=data, seed=seed, noise_points=noise_points, timeout=timeout, t0=t0,
                   max_distance=max_distance)


def _nearest_head_involution(singles: list, pairs: dict, H: int):
    """``(cost, pi, number tried)``: the involution pi of the H heads of least summed block cost (a head
    mapped to itself costs its ``singles`` fit, a swapped pair its ``pairs`` fit), over all of them."""
    best, n_tried = None, 0
    for pi in _involutions(H):
        n_tried += 1
        cost, ok = 0.0, True
        for h in range(H):
            k = pi[h]
            part = singles[h] if k == h else (pairs[(h, k)] if h < k else None)
            if k < h:
                continue
            if part is None:
                ok = False
                break
            cost += part[0]
        if ok and (best is None or cost < best[0]):
            best = (cost, pi)
    if best is None:
        raise InputError("certify (attention): no head involution has invertible per-head blocks (degenerate heads)")
    return best[0], best[1], n_tried


def _exact_average(P, pi, singles: list, pairs: dict, cost: float, C, Co, digits):
    """``(heads, cb, D, signs)``: the gauged float heads for the involution pi, rounded to D digits (``digits``,
    else from the deviation and the scale) and averaged exactly over {e, g}; ``cb`` the averaged output
    bias, ``signs`` the inner sign actions of the heads mapped to themselves."""
    H = len(P.Q)
    # the gauged float parameters, then the grid and the exact average over {e, g}
    Q, K, V, O, BQ = list(P.Q), list(P.K), list(P.V), list(P.O), list(P.bq)
    signs = {}
    for h in range(H):
        k = pi[h]
        if k == h:
            _, (Q[h], K[h], V[h], O[h], BQ[h]), t, s = singles[h]
            signs[h] = (t, s)
        elif h < k:
            _, (Q[k], K[k], V[k], O[k], BQ[k]) = pairs[(h, k)]
    theta = _invariants(P.Q, P.K, P.V, P.O, P.sb, P.c)
    scale = float(np.max(np.abs(np.concatenate([m.ravel() for m in Q + K + V + O]))))
    dev = math.sqrt(cost) / max(np.linalg.norm(theta), 1e-300)
    D = digits if digits is not None else min(12, max(4, int(math.ceil(-math.log10(max(dev, 1e-12)))) + 3
                                                      + max(0, int(math.ceil(math.log10(max(scale, 1.0)))))))
    Ce, Coe = _qm(C, 0), _qm(Co, 0)
    half = lambda X, Y: (X + Y) / 2  # noqa: E731
    heads = [None] * H
    for h in range(H):
        k = pi[h]
        qh, kh, vh, oh, bh = _qm(Q[h], D), _qm(K[h], D), _qm(V[h], D), _qm(O[h], D), _qm(P.sb[h][:, None], D)
        bqh = _qm(BQ[h][:, None], D)
        if k == h:
            t, s = signs[h]
            Te, Se = _qm(np.diag(t), 0), _qm(np.diag(s), 0)
            kb = half(kh, Ce * kh * Te)
            bb = kb * half(bqh, Te * bqh) if P.mha else half(bh, Ce * bh)
            heads[h] = (half(qh, Ce * qh * Te), kb, half(vh, Ce * vh * Se), half(oh, Se * oh * Coe), bb)
        elif h < k:
            qk, kk, vk, ok = _qm(Q[k], D), _qm(K[k], D), _qm(V[k], D), _qm(O[k], D)
            bk, bqk = _qm(P.sb[k][:, None], D), _qm(BQ[k][:, None], D)
            qb, kb, vb, ob = half(qh, Ce * qk), half(kh, Ce * kk), half(vh, Ce * vk), half(oh, ok * Coe)
            bb = kb * half(bqh, bqk) if P.mha else half(bh, Ce * bk)
            heads[h] = (qb, kb, vb, ob, bb)
            heads[k] = (Ce * qb, Ce * kb, Ce * vb, ob * Coe, Ce * bb)
    ce = _qm(P.c[:, None], D)
    cb = half(ce, Coe * ce)
    return heads, cb, D, signs


def _finish(model, heads, cb, egroup, ngroup, P, D, method, notes, actions, *, result, relative, data, seed,
            noise_points, timeout, t0, max_distance):
    """theta-bar from its exact heads (Q, K, V, O, b as fmpq_mat) and output bias: distances, the exact
    verification, and the result."""
    from .layers.attention import AttentionLayer, Head
    from .models import Model
    from .layers.attention.floating import from_exact as float_attention
    from .numeric.models import NumericModel
    from .theorem import verify

    layer = model.layers[0]
    T, d, do, H = layer.tokens, layer.d, layer.d_out, len(heads)
    exact_heads = [Head(q, k_, v, o, list(b.entries())) for q, k_, v, o, b in heads]
    exact_scale = None
    if layer.scale is not None:
        from fractions import Fraction

        from flint import fmpq

        f = Fraction(float(layer.scale))
        exact_scale = fmpq(f.numerator, f.denominator)
    att = AttentionLayer(T, exact_heads, None, "softmax", exact_scale, cb)
    exact = Model(T * d, [att], egroup, (model.name or "attention") + " (theta-bar)")
    fbar = NumericModel(T * d, [float_attention(att)], ngroup, exact.name)
    ft = fbar.layers[0]
    theta = _invariants(P.Q, P.K, P.V, P.O, P.sb, P.c)
    bar = _invariants(ft.query, ft.key, ft.value, ft.out,
                      [np.zeros(d) if ft.score_bias is None or ft.score_bias[h] is None else ft.score_bias[h]
                       for h in range(H)], np.zeros(do) if ft.bias is None else ft.bias)
    dist = float(np.linalg.norm(theta - bar) / max(np.linalg.norm(theta), 1e-300))
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((noise_points, T * d))
    fdist = {"noise": relative(model(Z), fbar(Z))}
    if data is not None:
        x = np.asarray(data[0] if isinstance(data, tuple) else data, dtype=float)
        fdist["data"] = relative(model(x), fbar(x))
    left = None if timeout is None else max(1.0, timeout - (time.perf_counter() - t0))
    v = verify(exact, egroup, timeout=left)
    cert = result("undetermined", [dist], fdist, None, [D], method, False,
                  [{"method": method, "distance": dist}], v, exact, fbar, max_distance, notes,
                  distance=dist, metric="parameters")
    cert.actions = actions
    if v.verdict != "layerwise-equivariant" or v.reparametrized:
        cert.reason = f"the exact verification of theta-bar says {v.verdict}, not layerwise-equivariant at theta-bar"
    elif max_distance is not None and dist > max_distance:
        cert.status = "too far"
    else:
        cert.status = "certified"
    cert.seconds = time.perf_counter() - t0
    return cert



def _svd_gauge(P: _Heads) -> None:
    """Each head in its SVD gauge (in place): A_h = U S W^T gives Q_h = U S^1/2, K_h = W S^1/2 (d_k columns)
    and V_h O_h = U' S' W'^T gives V_h = U' S'^1/2, O_h = S'^1/2 W'^T (d_v): the function is unchanged, and
    an equivariance with signed-permutation channel actions maps these bases onto each other up to signs
    (where the singular values are distinct)."""
    for h in range(len(P.Q)):
        dk, dv = P.Q[h].shape[1], P.V[h].shape[1]
        U, s, Wt = np.linalg.svd(P.Q[h] @ P.K[h].T)
        r = np.sqrt(s[:dk])
        P.Q[h], P.K[h] = U[:, :dk] * r, Wt[:dk].T * r
        U, s, Wt = np.linalg.svd(P.V[h] @ P.O[h])
        r = np.sqrt(s[:dv])
        P.V[h], P.O[h] = U[:, :dv] * r, (Wt[:dv].T * r).T


def _signs(F: np.ndarray) -> np.ndarray:
    return np.where(np.diag(F) >= 0, 1.0, -1.0)


def _certify_bounded(model, ngroup, egroup, *, result, relative, digits, data, max_distance, timeout, noise_points,
                     seed, t0):
    """Any finite group acting by a token permutation (x) signed permutations: a bounded search, not a proof of
    nearness.  The heads are put in their SVD gauge; for every group element its head permutation is the
    linear assignment of the invariant coordinates and its blocks are the signs of the gauged bases; the
    exact Reynolds average over the group with these actions is theta-bar (layerwise equivariant when the
    actions compose as the group does: checked in floats first, then proved by verify)."""
    from .numbers import mat_rows
    from .layers.attention.floating import _assign, factor_kron_numeric

    layer = model.layers[0]
    T, d, do = layer.tokens, layer.d, layer.d_out
    P = _Heads(layer)
    H = len(P.Q)
    _svd_gauge(P)
    elems = []
    for e in egroup.elements():
        A, B = (np.array([[int(x.p) / int(x.q) for x in row] for row in mat_rows(m)]) for m in e.mats[:2])
        fin, fout = factor_kron_numeric(A, T, d), factor_kron_numeric(B, T, do)
        if fin is None or fout is None or not np.array_equal(fin[0], fout[0]):
            raise InputError("certify (attention): every group element must act as one token permutation (x) "
                             "channel matrices on input and output")
        C = fin[1]
        Co = fout[1]
        for M, what in ((C, "channel action"), (Co, "output channel action")):
            if not (np.all(np.isin(M, (-1.0, 0.0, 1.0))) and np.array_equal(np.abs(M) @ np.abs(M).T, np.eye(len(M)))):
                raise InputError(f"certify (attention): the group's {what} must be signed permutations")
        At = [C.T @ P.Q[h] @ P.K[h].T @ C for h in range(H)]
        Bt = [C.T @ P.V[h] @ P.O[h] @ Co for h in range(H)]
        cost = np.array([[(np.linalg.norm(At[h] - P.Q[k] @ P.K[k].T) + np.linalg.norm(Bt[h] - P.V[k] @ P.O[k])
                           + np.linalg.norm(C.T @ P.sb[h] - P.sb[k]))
                          / max(np.linalg.norm(At[h]) + np.linalg.norm(Bt[h]), 1e-300) for k in range(H)]
                         for h in range(H)])
        pi = [int(k) for k in _assign(cost)]
        t = [_signs(np.linalg.lstsq(P.Q[pi[h]], C.T @ P.Q[h], rcond=None)[0]) for h in range(H)]
        sv = [_signs(np.linalg.lstsq(P.V[pi[h]], C.T @ P.V[h], rcond=None)[0]) for h in range(H)]
        elems.append((e, C, Co, pi, t, sv, float(max(cost[h, pi[h]] for h in range(H)))))

    def act(Q, K, V, O, b, c, el):  # g . theta, head h -> pi(h)
        _, C, Co, pi, t, sv, _ = el
        out = [None] * H
        for h in range(H):
            T_, S_ = np.diag(t[h]), np.diag(sv[h])
            out[pi[h]] = (C.T @ Q[h] @ T_, C.T @ K[h] @ T_, C.T @ V[h] @ S_, S_ @ O[h] @ Co, C.T @ b[h])
        return [list(z) for z in zip(*out)] + [Co.T @ c]

    n = len(elems)
    parts = [act(P.Q, P.K, P.V, P.O, P.sb, P.c, el) for el in elems]
    avg = [[sum(p[i][h] for p in parts) / n for h in range(H)] for i in range(5)] + [sum(p[5] for p in parts) / n]
    bad = 0.0
    for el in elems:
        moved = act(*avg, el)
        bad = max(bad, max(np.linalg.norm(moved[i][h] - avg[i][h]) for i in range(5) for h in range(H)))
    scale = max(1.0, max(np.linalg.norm(m) for i in range(5) for m in avg[i]))
    if bad > 1e-8 * scale:
        raise InputError(f"certify (attention): the head actions matched per group element do not compose as the "
                         f"group does (the average moves by {bad:.3g} under the group): no theta-bar from this bounded "
                         "search; the network is far from layerwise equivariant under this group")
    theta = _invariants(P.Q, P.K, P.V, P.O, P.sb, P.c)
    bar_f = _invariants(*avg)
    dev = float(np.linalg.norm(theta - bar_f) / max(np.linalg.norm(theta), 1e-300))
    D = digits if digits is not None else min(12, max(4, int(math.ceil(-math.log10(max(dev, 1e-12)))) + 3))
    # exact: the gauged parameters on the grid, then the Reynolds average with the exact matrices
    from flint import fmpq_mat

    ex = [[_qm(M, D) for M in P.Q], [_qm(M, D) for M in P.K], [_qm(M, D) for M in P.V], [_qm(M, D) for M in P.O],
          [_qm(b[:, None], D) for b in P.sb]]
    ce = _qm(P.c[:, None], D)
    acc = [[fmpq_mat(m.nrows(), m.ncols()) for m in ex[i]] for i in range(5)]
    cacc = fmpq_mat(do, 1)
    for e, C, Co, pi, t, sv, _ in elems:
        Ce, Coe = _qm(C, 0), _qm(Co, 0)
        Cet = Ce.transpose()
        for h in range(H):
            Te, Se = _qm(np.diag(t[h]), 0), _qm(np.diag(sv[h]), 0)
            k = pi[h]
            acc[0][k] += Cet * ex[0][h] * Te
            acc[1][k] += Cet * ex[1][h] * Te
            acc[2][k] += Cet * ex[2][h] * Se
            acc[3][k] += Se * ex[3][h] * Coe
            acc[4][k] += Cet * ex[4][h]
        cacc += Coe.transpose() * ce
    heads = [tuple(acc[i][h] / n for i in range(5)) for h in range(H)]
    cb = list((cacc / n).entries())
    worst = max(el[-1] for el in elems)
    method = (f"bounded search over the {n} elements of the group: heads in their SVD gauge, per element the head "
              f"permutation by linear assignment and sign blocks (largest matching residual {worst:.3g}); not "
              "proven nearest")
    notes = ["distances in the coordinates f depends on (A_h = Q_h K_h^T, b_h, V_h O_h, c), which the per-head "
             "gauges do not move",
             "a bounded search: the latent actions are head permutations with sign blocks in the heads' SVD gauge, "
             "a subgroup of the heads' latent group; a nearer layerwise-equivariant layer may exist"]
    gens = [el for el in elems if len(el[0].word) == 1]
    actions = {"head_permutation_per_generator": {egroup.names[el[0].word[0]]: [k + 1 for k in el[3]] for el in gens}}
    return _finish(model, heads, cb, egroup, ngroup, P, D, method, notes, actions, result=result, relative=relative,
                   data=data, seed=seed, noise_points=noise_points, timeout=timeout, t0=t0, max_distance=max_distance)
