"""Exact lightning (polynomial) multi-head attention models: generators, submodels, dimensions.

The layer itself (heads, the check and the matching of latent actions, the flattening
conventions) is :mod:`symeq.layers.attention`; this module holds what builds on it: random
equivariant attention models and their scrambling, head clones and their reduction and lifting
(weak identifiability), and the dimension counts of Henry, Marchetti, Kohn (ICLR 2025).

For the derivation a model [attention, token-wise dense ...] is seen as the *chain*
[heads layer (value spaces), dense (I_T (x) W_1 O^T), dense ...]: the output projection O merges
into the next token-wise layer (or is the last, affine layer).

Examples
--------
>>> m = random_equivariant_attention(rng=0)            # 4 tokens of a 2x4 image, 4 heads
>>> s = scramble_attention(m, rng=1)
>>> import symeq
>>> v = symeq.verify(s)
>>> v.verdict
'layerwise-equivariant'
>>> p = head_permutation(v.actions[0][0], tokens=4, heads=4, dv=2)   # two heads swap, two are fixed
>>> sorted(sum(1 for h in range(4) if p[h] == h) for _ in [0]), sorted(p[p[h]] == h for h in range(4))
([2], [True, True, True, True])
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from flint import fmpq, fmpq_mat

from .errors import InputError
from .groups import FiniteGroup
from .groups.tokens import attention_group, patch_mirror, token_permutations
from .layers.attention import (  # the layer itself; re-exported here for existing imports
    LATENT_GROUP,
    AttentionLayer,
    Head,
    HeadsLayer,
    _canonical_scores,
    block_monomial_parts,
    score_key,
    check_heads_layer,
    factor_kron,
    head_permutation,
    match_heads,
    tokenwise,
)
from .numbers import identity, kron, mat_rows

__all__ = [
    "check_heads_layer",
    "match_heads",
    "Head",
    "AttentionLayer",
    "HeadsLayer",
    "kron",
    "factor_kron",
    "tokenwise",
    "attention_group",
    "patch_mirror",
    "token_permutations",
    "random_equivariant_attention",
    "scramble_attention",
    "softmax_mirror_attention",
    "head_permutation",
    "block_monomial_parts",
    "LATENT_GROUP",
    "head_clones",
    "jacobian_rank",
    "expected_dimension",
    "symmetry_dimension",
]

# -- random equivariant attention models and scrambling ----------------------------------------

MAX_REDRAWS = 200
"""Draws of :func:`random_equivariant_attention` before it says no such model comes out."""

def _rand(rng, r, c, lo=-5, hi=5) -> fmpq_mat:
    return fmpq_mat(r, c, [rng.randint(lo, hi) for _ in range(r * c)])


def _project(group_elems, head_perms, mats0, transform):
    """Average T_g over the group: (T_g M)_{pi_g(h)} = transform(g, M_h); fixed points satisfy
    transform(g, M_h) = M_{pi_g(h)} for every g."""
    H = len(mats0)
    acc = [fmpq_mat(mats0[0].nrows(), mats0[0].ncols()) for _ in range(H)]
    for g, perm in zip(group_elems, head_perms):
        for h in range(H):
            acc[perm[h]] += transform(g, mats0[h])
    return [a / len(group_elems) for a in acc]


def _element_actions(group: FiniteGroup, facs: list, T: int, d: int, d_out: int, head_perms, H: int):
    """``(Cs, perms)``: every group element's channel actions (C, C_out) and head permutation, composed along
    its Cayley-graph word from the generators' (``facs``: each generator's P (x) C factors)."""
    elems = []
    for e in group.elements():
        C = identity(d)
        Co = identity(d_out)
        perm = list(range(H))
        for gi in e.word:
            P_g, C_g = facs[gi]
            Co_g = factor_kron(group.generators[gi][1], T, d_out)[1]
            C = C * C_g
            Co = Co * Co_g
            perm = [head_perms[gi][p] for p in perm]
        elems.append((C, Co, perm))
    return [(C, Co) for C, Co, _ in elems], [p for _, _, p in elems]


def _tokenwise_layers(rng, dense, Couts: list, d_out: int, T: int) -> list:
    """Token-wise layers X -> sigma(X W^T + b) after the attention, one per activation of ``dense`` and an
    affine one last, each equivariant with the channel action C_out on both sides (Reynolds averages over
    the elements' ``Couts``; a signed permutation, as for the built-in patch mirror)."""
    from .models import DenseLayer

    if any(not _is_signed_perm(Co) for Co in Couts):
        raise InputError("token-wise dense layers after attention need a (signed) permutation channel action")
    layers = []
    for act in list(dense) + [None]:
        W0 = _rand(rng, d_out, d_out)
        W = sum((Co.inv() * W0 * Co for Co in Couts), fmpq_mat(d_out, d_out)) / len(Couts)
        b0 = _rand(rng, d_out, 1)
        b = (sum((Co.inv() * b0 for Co in Couts), fmpq_mat(d_out, 1)) / len(Couts)).entries()
        layers.append(DenseLayer(tokenwise(W, T), b * T, act, T))
    return layers


def random_equivariant_attention(
    group: FiniteGroup | None = None,
    tokens: int = 4,
    head_perms=None,
    dk: int | None = None,
    dv: int | None = None,
    dense=None,
    rng=None,
    name: str = "lightning attention (layerwise equivariant)",
    scoring: str = "lightning",
    scale=None,
):
    """A random attention model whose heads transform as prescribed under the group.

    Parameters
    ----------
    group : acts by P (x) C on inputs (default: :func:`patch_mirror` of a 2x4 image, 4 tokens, d = 2)
    head_perms : per generator, the permutation of heads (default for 4 heads: heads 0 and 1 swap,
        heads 2 and 3 fixed)
    dk, dv : query/key and value dimensions (default d; this generator needs d_k = d_v = d)
    dense : optional list of activations: token-wise dense layers of width d_out after the
        attention, each equivariant with the channel action as its latent action, followed by a
        token-wise affine output layer

    The score matrices, values and outputs are Reynolds projections of random integer matrices;
    queries and keys factor A_h = Q_h K_h^T through a random invertible matrix.
    """
    from .models import Model

    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    group = group if group is not None else patch_mirror()
    T = tokens
    facs = [factor_kron(a, T, a.nrows() // T) for a, _ in group.generators]
    if any(f is None for f in facs):
        raise InputError("the group must act on inputs as a token permutation (x) a channel matrix")
    d = group.generators[0][0].nrows() // T
    d_out = group.generators[0][1].nrows() // T
    dk = d if dk is None else dk
    dv = d if dv is None else dv
    head_perms = head_perms if head_perms is not None else [[1, 0, 2, 3]] * len(group.generators)
    H = len(head_perms[0])
    Cs, perms = _element_actions(group, facs, T, d, d_out, head_perms, H)
    # condition C^T A_h C = A_{pi(h)} for every element: average (T_g A)_{pi_g(h)} := C_g^T A_h C_g over G
    for _ in range(MAX_REDRAWS):  # redraw until no two heads have proportional scores (no clones of heads)
        A = _project(Cs, perms, [_rand(rng, d, d) for _ in range(H)], lambda g, M: g[0].transpose() * M * g[0])
        if len({_canonical_scores(a)[0] for a in A}) == H and all(a != 0 for a in A):
            break
    else:  # e.g. heads swapped by an element whose channel action is the identity: their scores must be equal
        raise InputError(f"no draw of {MAX_REDRAWS} gives heads with distinct score matrices under these head "
                         "permutations (an element that permutes heads while fixing the channels forces clones)")
    # The value space of each head carries the channel action too (d_v = d): C^T V_h C = V_{pi(h)},
    # i.e. C^T V_h = V_{pi(h)} N with N = C^-1 invertible (an invariant V would be rank deficient).
    if dv != d:
        raise InputError("this generator uses d_v = d (the value spaces carry the channel action)")
    for _ in range(MAX_REDRAWS):
        V = _project(Cs, perms, [_rand(rng, d, dv) for _ in range(H)], lambda g, M: g[0].transpose() * M * g[0])
        if all((Vh.transpose() * Vh).det() != 0 for Vh in V):
            break
    else:
        raise InputError(f"no draw of {MAX_REDRAWS} gives invertible value maps under this group (the averaged "
                         "values are rank deficient)")
    # outputs: f(gX) = P sum_h Y_pi(h) N O_h must equal P f(X) C_out^T:  O_{pi(h)} = C^-1 O_h C_out^-T
    O = _project(Cs, perms, [_rand(rng, dv, d_out) for _ in range(H)],
                 lambda g, M: g[0].inv() * M * g[1].inv().transpose())
    heads = []
    for Ah, Vh, Oh in zip(A, V, O):
        M = _rand(rng, dk, dk, -2, 2)
        while M.det() == 0:
            M = _rand(rng, dk, dk, -2, 2)
        # A = Q K^T with Q = A_cols... take Q = A (d x d) when dk = d, else a random factorization
        if dk != d:
            raise InputError("this generator uses d_k = d")
        Q = Ah * M
        K = M.inv().transpose()
        heads.append(Head(Q, K, Vh, Oh))
    layers = [AttentionLayer(T, heads, None, scoring, scale)]
    if dense:
        layers += _tokenwise_layers(rng, dense, [Co for _, Co in Cs], d_out, T)
    model = Model(T * d, layers, group, name)
    return model


def softmax_mirror_attention(perturb: bool = False, scale=None):
    """A softmax attention model on a 2x4 image (4 tokens of 1x2 patches, d = d_k = d_v = d_out = 2,
    :func:`patch_mirror`) that is layerwise equivariant by construction: under the mirror heads 1
    and 2 swap and head 3 maps to itself with the inner sign action diag(1, -1) on its value
    space (V_3 has the columns (1, 1) and (1, -1), which the pixel swap C fixes and negates).

    ``perturb=True`` changes one entry of head 3's output matrix (O_3[1][1]: 2 -> 5), which
    breaks equivariance; ``scale``: a rational softmax scale (default 1/sqrt(2), torch's).

    >>> import symeq
    >>> v = symeq.verify(softmax_mirror_attention())
    >>> v.verdict, head_permutation(v.actions[0][0], tokens=4, heads=3, dv=2)
    ('layerwise-equivariant', [1, 0, 2])
    """
    from .models import Model
    from .numbers import matrix

    group = patch_mirror()
    C = matrix([[0, 1], [1, 0]])
    A1, V1, O1 = matrix([[1, -1], [0, 2]]), matrix([[2, 1], [-1, 1]]), matrix([[1, 0], [2, -1]])
    A3, V3 = matrix([[1, 2], [2, 1]]), matrix([[1, 1], [1, -1]])
    # head 2 = head 1 seen through the mirror: A_2 = C^T A_1 C, V_2 = C^T V_1, O_2 = O_1 C
    A2, V2, O2 = C.transpose() * A1 * C, C.transpose() * V1, O1 * C
    O3 = matrix([[5 if perturb else 2, 2], [3, -3]])  # diag(1, -1) O_3 = O_3 C when unperturbed
    M = matrix([[1, 1], [0, 1]])                         # a query/key factorisation A = (A M) (M^-T)^T
    heads = [Head(A * M, M.inv().transpose(), V, O) for A, V, O in ((A1, V1, O1), (A2, V2, O2), (A3, V3, O3))]
    name = "softmax attention, mirror: heads 1 and 2 swap, head 3 signs" + (" (O_3 perturbed)" if perturb else "")
    return Model(8, [AttentionLayer(4, heads, None, "softmax", scale)], group, name)


def _is_signed_perm(M: fmpq_mat) -> bool:
    from .numbers import monomial_parts

    parts = monomial_parts(M)
    return parts is not None and all(v in (1, -1) for v in parts[1])


def scramble_attention(model, rng=None):
    """Hide the structure: random head permutation, random GL(d_v) per head, random query/key
    matrices.  The function does not change."""
    from .models import Model

    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    att = model.layers[0]
    H = len(att.heads)
    order = list(range(H))
    rng.shuffle(order)
    heads = []
    for h in order:
        hd = att.heads[h]
        dv, dk = hd.value.ncols(), hd.query.ncols()
        N = _rand(rng, dv, dv, -2, 2)
        while N.det() == 0:
            N = _rand(rng, dv, dv, -2, 2)
        M = _rand(rng, dk, dk, -2, 2)
        while M.det() == 0:
            M = _rand(rng, dk, dk, -2, 2)
        heads.append(Head(hd.query * M, hd.key * M.inv().transpose(), hd.value * N, N.inv() * hd.out))
    layers = [att.with_heads(heads)] + [l.copy() for l in model.layers[1:]]
    return Model(model.input_dim, layers, model.group, model.name + " (scrambled)", dict(model.meta))


def head_clones(layer: AttentionLayer) -> list[list[int]]:
    """Classes of heads whose score matrices Q_h K_h^T are proportional (clones of heads).

    Such heads only enter f through the combination sum (X A X^T) X V_h O_h of their value and
    output maps: the model is then a submodel in the paper's sense (heads can be merged when
    the combined V O has rank <= d_v), and its latent action is not unique at theta.

    >>> m = random_equivariant_attention(rng=0)
    >>> head_clones(m.layers[0])
    []
    """
    classes: dict = {}
    for h, head in enumerate(layer.heads):
        key, _ = score_key(head.scores, layer.scoring, head.score_bias)
        classes.setdefault(key, []).append(h)
    return [hs for hs in classes.values() if len(hs) > 1]


# -- dimension counts (Henry, Marchetti, Kohn, ICLR 2025) -------------------------------------

def _rank_variety_dim(m: int, n: int, r: int) -> int:
    """Dimension of the m x n matrices of rank <= r."""
    r = min(r, m, n)
    return r * (m + n - r)


def _head_mixing(layer: AttentionLayer) -> int:
    """H^2 - H when heads can be mixed: f = sum_h (X A_h X^T) X B_h is unchanged by
    (A_h) -> (A_h) M, (B_h) -> M^-1 (B_h) for M in GL(H), and the mixed A_h, B_h stay admissible
    exactly when no rank constraint binds (d_k >= d and d_v >= min(d, d_out) for every head)."""
    d, H = layer.d, len(layer.heads)
    free = all(h.query.ncols() >= d and h.value.ncols() >= min(d, h.out.ncols()) for h in layer.heads)
    return H * H - H if free else 0


def symmetry_dimension(layer: AttentionLayer) -> int:
    """Dimension of the symmetries of one lightning attention layer's parameters: per head
    GL(d_k) on the query/key factorisation, GL(d_v) on the value/output factorisation, and the
    scalar lambda exchanged between the score matrix A and the values (A -> lambda A,
    V -> V / lambda); plus GL(H) mixing of heads when no rank constraint binds."""
    return sum(h.query.ncols() ** 2 + h.value.ncols() ** 2 + 1 for h in layer.heads) + _head_mixing(layer)


def expected_dimension(layer: AttentionLayer) -> int:
    """Henry-Marchetti-Kohn count of the functional dimension: each head contributes the
    matrices A = Q K^T of rank <= d_k and B = V O of rank <= d_v, minus the scalar between them,
    minus the head mixing when no rank constraint binds."""
    d = layer.d
    return sum(_rank_variety_dim(d, d, h.query.ncols()) + _rank_variety_dim(d, h.out.ncols(), h.value.ncols()) - 1
               for h in layer.heads) - _head_mixing(layer)


def jacobian_rank(layer: AttentionLayer, points: int | None = None, rng=None) -> tuple[int, int]:
    """Exact rank of the Jacobian of theta -> (f_theta(X_j))_j at the layer's parameters.

    f is linear in each of Q_h, K_h, V_h, O_h separately, so the derivative along a unit matrix
    E in one factor is f with that factor replaced by E (exact, no differentiation needed).
    Returns (rank, number of parameters); #params - rank is the dimension of the fibre's tangent
    space at theta, which bounds the fibre's dimension near theta from above.

    Examples
    --------
    >>> rng = random.Random(1)
    >>> def rnd(r, c): return fmpq_mat(r, c, [rng.randint(-50, 50) for _ in range(r * c)])
    >>> layer = AttentionLayer(3, [Head(rnd(2, 1), rnd(2, 1), rnd(2, 1), rnd(1, 2)) for _ in range(2)])
    >>> rank, n = jacobian_rank(layer, rng=2)
    >>> rank == expected_dimension(layer), n - rank == symmetry_dimension(layer)
    (True, True)
    """
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    T, d = layer.tokens, layer.d
    n_params = layer.n_params
    points = points if points is not None else max(4, 2 * n_params // (T * layer.d_out) + 2)
    Xs = [fmpq_mat(T, d, [rng.randint(-6, 6) for _ in range(T * d)]) for _ in range(points)]
    cols = []

    def unit(r, c, i, j):
        E = fmpq_mat(r, c)
        E[i, j] = 1
        return E

    for h in layer.heads:
        Q, K, V, O = h.query, h.key, h.value, h.out
        factors = [("Q", Q), ("K", K), ("V", V), ("O", O)]
        for name, M in factors:
            for i in range(M.nrows()):
                for j in range(M.ncols()):
                    E = unit(M.nrows(), M.ncols(), i, j)
                    q, k, v, o = (E if name == "Q" else Q, E if name == "K" else K,
                                  E if name == "V" else V, E if name == "O" else O)
                    col = []
                    for X in Xs:
                        col.extend(((X * q * k.transpose() * X.transpose()) * X * v * o).entries())
                    cols.append(col)
    J = fmpq_mat(len(cols[0]), len(cols), [cols[c][r] for r in range(len(cols[0])) for c in range(len(cols))])
    return J.rank(), n_params


# -- submodels of attention: clones of heads ----------------------------------------------------

@dataclass
class HeadReduction:
    """Heads with proportional score matrices merged (f unchanged).

    ``groups[j]`` lists (original head, lambda) merged into reduced head j, with
    A_original = lambda A_j.
    """

    model: object
    groups: list
    changed: bool


def _rank_factor(B: fmpq_mat, r: int):
    """(V, O) with V O = B, V of shape d x r, when rank B <= r; else None (exact, from the rref)."""
    rref, rank = B.transpose().rref()
    if rank > r:
        return None
    rows = mat_rows(rref)[:rank]
    # B^T = M R with R the rank nonzero rows of the rref (a basis of the row space of B^T)
    pivots = [next(j for j, x in enumerate(row) if x != 0) for row in rows]
    Bt = B.transpose()
    M = fmpq_mat(Bt.nrows(), max(rank, 1), [Bt[i, p] for i in range(Bt.nrows()) for p in pivots] if rank else
                 [0] * Bt.nrows())
    R = fmpq_mat(max(rank, 1), Bt.ncols(), [x for row in rows for x in row] if rank else [0] * Bt.ncols())
    # B = R^T M^T: V = R^T padded to r columns, O = M^T padded to r rows
    V = fmpq_mat(B.nrows(), r)
    O = fmpq_mat(r, B.ncols())
    for k in range(rank):
        for i in range(B.nrows()):
            V[i, k] = R[k, i]
        for j in range(B.ncols()):
            O[k, j] = M[j, k]
    return V, O


def reduce_heads(model) -> HeadReduction:
    """Merge clones of heads (proportional score matrices) when the merged value/output map
    B = sum lambda_k V_k O_k still has rank <= d_v; the function does not change."""
    from .models import Model

    att = model.layers[0]
    classes: dict = {}
    for h, head in enumerate(att.heads):
        key, s = score_key(head.scores, att.scoring, head.score_bias)  # softmax: equal scores only (lambda = 1)
        classes.setdefault(key, []).append((h, s))
    heads, groups = [], []
    for key, members in classes.items():
        h0, s0 = members[0]
        if len(members) == 1 or key is None:
            for h, s in members:
                heads.append(att.heads[h].copy() if hasattr(att.heads[h], "copy") else att.heads[h])
                groups.append([(h, fmpq(1))])
            continue
        B = fmpq_mat(att.d, att.d_out)
        lams = []
        for h, s in members:
            lam = s / s0
            lams.append((h, lam))
            B += lam * (att.heads[h].value * att.heads[h].out)
        fac = _rank_factor(B, att.dv)
        if fac is None:  # not mergeable at this d_v: keep them apart
            for h, _ in members:
                heads.append(att.heads[h])
                groups.append([(h, fmpq(1))])
            continue
        V, O = fac
        base = att.heads[h0]
        heads.append(Head(base.query, base.key, V, O, base.score_bias))
        groups.append(lams)
    changed = len(heads) < len(att.heads)
    red = Model(model.input_dim, [att.with_heads(heads)] + [l.copy() for l in model.layers[1:]],
                model.group, model.name + " (heads merged)", dict(model.meta))
    return HeadReduction(red, groups, changed)


def lift_heads(original, reduction: HeadReduction, actions):
    """theta' with the original number of heads, the same function and layerwise-equivariant
    actions, from actions on the reduced model (heads of an orbit get the same number of copies,
    outputs split equally; remaining heads inactive: zero scores, identity values, zero outputs)."""
    from .models import Model
    from .submodels import _orbits

    red = reduction.model
    att, ratt = original.layers[0], red.layers[0]
    T, H, Hr, dv = att.tokens, len(att.heads), len(ratt.heads), att.dv
    ngen = len(actions[0])
    blocks = []  # per generator: (P, [(k, B)] per reduced head)
    for g in range(ngen):
        P, R = factor_kron(actions[0][g], T, Hr * dv)
        blocks.append((P, block_monomial_parts(R, Hr, dv)))
    perms = []
    for P, parts in blocks:
        perm = [0] * Hr
        for h, (k, _) in enumerate(parts):
            perm[k] = h
        perms.append(perm)
    cnt = [len(gr) for gr in reduction.groups]
    per = [1] * Hr
    for orbit in _orbits(perms, Hr):
        m = min(cnt[j] for j in orbit)
        for j in orbit:
            per[j] = m
    heads, index = [], []
    for j, hd in enumerate(ratt.heads):
        index.append(list(range(len(heads), len(heads) + per[j])))
        for _ in range(per[j]):
            heads.append(Head(hd.query, hd.key, hd.value, hd.out / per[j], hd.score_bias))
    n_inactive = H - len(heads)
    if n_inactive < 0:  # pragma: no cover - copies never exceed the original heads
        raise AssertionError("more head copies than heads")
    if n_inactive and dv != att.d:
        return None  # the inactive heads use V = I (d_v = d); otherwise not lifted
    zero_q = fmpq_mat(att.d, att.heads[0].query.ncols())
    for _ in range(n_inactive):
        heads.append(Head(zero_q, fmpq_mat(zero_q), identity(att.d), fmpq_mat(dv, att.d_out)))
    lifted = Model(original.input_dim, [att.with_heads(heads)] + [l.copy() for l in original.layers[1:]],
                   original.group, original.name + " (re-parametrized)", dict(original.meta))
    new_actions = [list(a) for a in actions]
    for g, (P, parts) in enumerate(blocks):
        R = fmpq_mat(H * dv, H * dv)
        for j, (k, B) in enumerate(parts):
            for a, b in zip(index[j], index[k]):
                for x in range(dv):
                    for y in range(dv):
                        R[a * dv + x, b * dv + y] = B[x, y]
        fin = factor_kron(original.group.generators[g][0], T, att.d)
        C = fin[1]
        for t in range(len(heads) - n_inactive, len(heads)):
            # inactive head: A = 0, V = I: lambda C^T V = V B^T holds with lambda = 1, B = C
            for x in range(dv):
                for y in range(dv):
                    R[t * dv + x, t * dv + y] = C[x, y]
        new_actions[0][g] = kron(P, R)
    return lifted, new_actions
