"""Builders of networks with tied (cloned) neurons, made the way a user makes them.

:func:`d4_tied_network` writes a D4-equivariant dense network on n x n images directly by group
convolution (hidden layers = ``channels`` copies of D4's regular representation), rounds its
random weights coarsely so that many neurons tie, and hides the structure with a random signed
permutation (:func:`symeq.models.scramble`).  :func:`clone_pairs_network` appends exact clone
pairs to a random equivariant model.  Both are used by tests/exact/test_ties.py.
"""

from __future__ import annotations

import random

from flint import fmpq, fmpq_mat

from symeq.activations import tanh_series
from symeq.groups import dihedral
from symeq.models import DenseLayer, Model, scramble


def _perm_of(P: fmpq_mat) -> list[int]:
    """The permutation p with (P x)[i] = x[p[i]] of a permutation matrix P."""
    n = P.nrows()
    return [next(j for j in range(n) if P[i, j] != 0) for i in range(n)]


def d4_elements(n: int) -> list[list[int]]:
    """The 8 pixel permutations of D4 on n x n images (as in :func:`symeq.groups.dihedral`).

    ``g[i]`` is the pixel that the element moves to pixel i: ``(P_g x)[i] = x[g[i]]``; the list
    starts with the identity and is closed under composition.
    """
    gens = [_perm_of(A) for A, _ in dihedral(n).generators]
    ident = list(range(n * n))
    els, frontier = [ident], [ident]
    while frontier:
        new = []
        for e in frontier:
            for s in gens:
                c = [e[s[i]] for i in range(n * n)]  # P_e P_s
                if c not in els:
                    els.append(c)
                    new.append(c)
        frontier = new
    assert len(els) == 8
    return els


def _coarse(rng: random.Random, sigma: float, step: fmpq) -> fmpq:
    """A Gaussian weight rounded coarsely to a multiple of ``step`` (mostly 0, +-step)."""
    return fmpq(round(rng.gauss(0.0, sigma))) * step


def d4_tied_network(channels: int = 50, n: int = 5, seed: int = 37, sigma: float = 0.27,
                    bias_sigma: float = 0.28, scrambled: bool = True, clone_channel: bool = False) -> Model:
    """A D4-equivariant dense network n^2 - 8c - 8c - n^2 with coarsely rounded weights.

    Row (c, g) of W1 is filter c moved by g; W2[(c, g), (c', h)] = a_{c,c'}(g^-1 h); the output
    layer moves filter c' by g back to pixels.  Hidden biases are constant per channel, the output
    bias is constant.  The weights are Gaussians rounded to multiples of 1/2 (most of them 0), so
    that many neurons tie; tanh_series(3) activations.  With ``scrambled`` the hidden neurons are
    then permuted and sign-flipped at random.  With ``clone_channel`` channel 1 of the first hidden
    layer repeats channel 0 (filter, bias and outgoing weights): 8 pairs of interchangeable neurons.
    """
    rng = random.Random(seed)
    els = d4_elements(n)
    npx, G = n * n, len(els)
    # the group law P_{ab} = P_a P_b, i.e. pixel maps compose as i -> b[a[i]]; inverses
    key = {tuple(e): i for i, e in enumerate(els)}
    inv = [key[tuple(sorted(range(npx), key=lambda i: e[i]))] for e in els]
    comp = [[key[tuple(els[b][els[a][i]] for i in range(npx))] for b in range(G)] for a in range(G)]
    half = fmpq(1, 2)
    filt = []
    while len(filt) < channels:  # a zero filter would be a dead channel: draw again
        f = [_coarse(rng, sigma, half) for _ in range(npx)]
        if any(x != 0 for x in f):
            filt.append(f)
    beta1 = [_coarse(rng, bias_sigma, half) for _ in range(channels)]
    a = [[[_coarse(rng, 0.35, half) for _ in range(G)] for _ in range(channels)] for _ in range(channels)]
    beta2 = [_coarse(rng, sigma, half) for _ in range(channels)]
    out = [[_coarse(rng, sigma, half) for _ in range(npx)] for _ in range(channels)]
    if clone_channel:
        filt[1], beta1[1] = list(filt[0]), beta1[0]
        for c in range(channels):
            a[c][1] = list(a[c][0])
    width = channels * G

    def moved(f, g):  # (P_g f)[i] = f[g[i]]
        return [f[els[g][i]] for i in range(npx)]

    W1 = [moved(filt[c], g) for c in range(channels) for g in range(G)]
    b1 = [beta1[c] for c in range(channels) for _ in range(G)]
    W2 = [[a[c][c2][comp[inv[g]][h]] for c2 in range(channels) for h in range(G)]
          for c in range(channels) for g in range(G)]
    b2 = [beta2[c] for c in range(channels) for _ in range(G)]
    cols = [moved(out[c], g) for c in range(channels) for g in range(G)]
    W3 = [[cols[j][i] for j in range(width)] for i in range(npx)]
    b3 = [fmpq(1, 2)] * npx
    act = tanh_series(3)

    def mat(rows):
        return fmpq_mat(len(rows), len(rows[0]), [x for r in rows for x in r])

    model = Model(npx, [DenseLayer(mat(W1), b1, act), DenseLayer(mat(W2), b2, act), DenseLayer(mat(W3), b3)],
                  dihedral(n), name=f"D4 group convolution, {channels} regular channels, coarsely rounded")
    if scrambled:
        model, _ = scramble(model, rng=seed + 1)
        model.name += " (scrambled)"
    return model


def clone_pairs_network(pairs: int, seed: int = 0, perturb: bool = False, activation=None) -> Model:
    """A mirror-equivariant tanh network (widths 6-(16+2p)-(16+2p)-6) with clone pairs in each hidden layer.

    For ``pairs`` = p, p neurons of each hidden layer and their mirror images are duplicated:
    a clone copies the incoming row and bias and takes 1/3 of the outgoing column (the original
    keeps 2/3), so the function and the equivariance are unchanged and clones differ only by
    their outgoing columns.  The result is scrambled by a random signed permutation.
    ``perturb`` adds 1 to one outgoing weight of one clone (a negative control: no latent action
    exists at theta, and the network is not equivariant).
    """
    from symeq.groups import mirror
    from symeq.layerwise import derive_latent_actions
    from symeq.models import random_equivariant_model
    from symeq.numbers import monomial_parts

    base = random_equivariant_model(mirror(2, 3), ["regular*8", "regular*8"], activation or tanh_series(3), rng=seed)
    d = derive_latent_actions(base)
    assert d.found
    layers = [DenseLayer(l.weight, list(l.bias), l.activation) for l in base.layers]
    for li in range(len(layers) - 1):
        cols, _ = monomial_parts(d.actions[li][0])
        chosen: list[int] = []
        for k in range(len(cols)):
            if len(chosen) >= 2 * pairs:
                break
            if k not in chosen and cols[k] not in chosen:
                chosen += [k] if cols[k] == k else [k, cols[k]]
        cur, nxt = layers[li], layers[li + 1]
        W = [[cur.weight[i, j] for j in range(cur.weight.ncols())] for i in range(cur.weight.nrows())]
        b = list(cur.bias)
        X = [[nxt.weight[i, j] for j in range(nxt.weight.ncols())] for i in range(nxt.weight.nrows())]
        for k in chosen:
            W.append(list(W[k]))
            b.append(b[k])
            for row in X:
                v = row[k]
                row[k] = 2 * v / 3
                row.append(v / 3)
        if perturb and li == len(layers) - 2:
            X[0][-1] += 1
        layers[li] = DenseLayer(fmpq_mat(len(W), len(W[0]), [x for r in W for x in r]), b, cur.activation)
        layers[li + 1] = DenseLayer(fmpq_mat(len(X), len(X[0]), [x for r in X for x in r]), list(nxt.bias),
                                    nxt.activation)
    model = Model(base.input_dim, layers, base.group, f"mirror network with {pairs} clone pairs per layer")
    model, _ = scramble(model, rng=seed + 7)
    return model


def multiset_tie_network(seed: int = 0, sign_symmetric: bool = False) -> Model:
    """A mirror-equivariant tanh network with a real ambiguity that only a search can settle.

    Two clones c0, c1 are added to hidden layer 1 (the same mirror-invariant row and bias) with
    different outgoing weights, and two neurons a, b to hidden layer 2 whose rows read (x, y) and
    (y, x) on (c0, c1): a and b tie only as multisets.  a and b have the same outgoing column, so
    their columns cannot tell them apart; swapping (c0, c1) and (a, b) together is a symmetry of
    theta, and one of two choices must be made (both lead to valid actions).  Scrambled.
    With ``sign_symmetric`` the rows of a and b are (0, 1, -1) and (0, -1, 1) with zero bias: each
    is its own negative up to the order of (c0, c1), so its sign is not fixed by its row.
    """
    from symeq.groups import mirror
    from symeq.layerwise import derive_latent_actions
    from symeq.models import random_equivariant_model

    base = random_equivariant_model(mirror(2, 3), ["regular*3", "regular*3"], tanh_series(3), rng=seed)
    d = derive_latent_actions(base)
    assert d.found
    (A, B), = base.group.generators
    rho1 = d.actions[0][0]
    rng = random.Random(seed)

    def rnd(n):
        return fmpq_mat(1, n, [rng.randint(-3, 3) for _ in range(n)])

    e0 = fmpq_mat(1, base.input_dim, [1] + [0] * (base.input_dim - 1))
    r = (e0 + e0 * A).entries()                          # r A = r: c0, c1 are fixed by the mirror
    v = rnd(rho1.nrows())
    w = (v + v * rho1).entries()                         # w rho_1 = w: a, b are fixed too
    u = fmpq_mat(base.output_dim, 1, [rng.randint(-3, 3) for _ in range(base.output_dim)])
    z = (u + B * u).entries()                            # B z = z
    x, y = (fmpq(1), fmpq(-1)) if sign_symmetric else (fmpq(2), fmpq(-1))
    if sign_symmetric:
        w = [fmpq(0)] * len(w)
    l1, l2, l3 = base.layers

    def rows(m):
        return [[m[i, j] for j in range(m.ncols())] for i in range(m.nrows())]

    W1 = rows(l1.weight) + [list(r), list(r)]
    b1 = list(l1.bias) + [fmpq(1, 2), fmpq(1, 2)]
    W2 = [row + [fmpq(0), fmpq(0)] for row in rows(l2.weight)] + [list(w) + [x, y], list(w) + [y, x]]
    b2 = list(l2.bias) + ([fmpq(0), fmpq(0)] if sign_symmetric else [fmpq(1, 3), fmpq(1, 3)])
    W3 = [row + [z[i], z[i]] for i, row in enumerate(rows(l3.weight))]

    def mat(rs):
        return fmpq_mat(len(rs), len(rs[0]), [q for row in rs for q in row])

    act = l1.activation
    model = Model(base.input_dim, [DenseLayer(mat(W1), b1, act), DenseLayer(mat(W2), b2, act),
                                   DenseLayer(mat(W3), list(l3.bias))], base.group,
                  "mirror network with neurons tied only as multisets")
    model, _ = scramble(model, rng=seed + 3)
    return model
