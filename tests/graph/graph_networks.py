"""Hand-built graph model files for tests/graph/ (docs/graphs.md): small equivariant networks built from
random integer weights projected onto the equivariant maps (``symeq.models.reynolds``), a hidden space
scrambled by a monomial matrix S (the function is unchanged, the action becomes S rho S^-1), and their
broken twins."""

from __future__ import annotations

import random

from flint import fmpq, fmpq_mat

from symeq.groups import FiniteGroup
from symeq.models import reynolds
from symeq.numbers import format_matrix, identity, mat_rows, matrix

SWAP = matrix([[0, 1], [1, 0]])
#: the action on the stem's 4 neurons before scrambling: (0 1)(2 3)
Q4 = matrix([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])


def rand_mat(rng, rows: int, cols: int) -> fmpq_mat:
    return fmpq_mat(rows, cols, [rng.randint(-3, 3) for _ in range(rows * cols)])


def equivariant(rng, P, Q) -> fmpq_mat:
    """A random W with W P = Q W (P, Q involutions)."""
    W = rand_mat(rng, Q.nrows(), P.nrows())
    return reynolds(W, [identity(P.nrows()), P], [identity(Q.nrows()), Q])


def dense(W, act, bias=None) -> dict:
    return {"type": "dense", "weight": format_matrix(W), "bias": None if bias is None else [str(b) for b in bias],
            "activation": act}


def swap_group(out_matrix) -> dict:
    return FiniteGroup([(SWAP, out_matrix)], ["swap"]).to_json()


def scramble_matrix(scales: str) -> fmpq_mat:
    """A monomial S moving neurons (0 2 1 3): with positive scales (``"positive"``, ReLU), signs
    (``"signs"``, odd activations) or none (``"none"``)."""
    S = fmpq_mat(4, 4)
    c = {"positive": (2, fmpq(1, 3), 1), "signs": (-1, 1, -1), "none": (1, 1, 1)}[scales]
    for i, (j, v) in enumerate([(2, c[0]), (0, 1), (3, c[1]), (1, c[2])]):
        S[i, j] = v
    return S


def residual(act: dict, seed: int = 1, scales: str = "positive", broken: bool = False) -> dict:
    """input(2) -> stem (4, act) -> block (4 act, 4 affine) ; sum = act(stem + block) ; head (2, affine).

    Equivariant under the swap of the inputs (and of the outputs) with the stem's action S Q4 S^-1."""
    rng = random.Random(seed)
    Ws, Wb1, Wb2, Wh = (equivariant(rng, SWAP, Q4), equivariant(rng, Q4, Q4), equivariant(rng, Q4, Q4),
                        equivariant(rng, Q4, SWAP))
    S = scramble_matrix(scales)
    Si = S.inv()
    Ws, Wb1, Wb2, Wh = S * Ws, Wb1 * Si, S * Wb2, Wh * Si
    if broken:  # the block's affine layer moved on its first input neuron: the addition's actions disagree
        for i in range(4):
            Wb2[i, 0] += i + 1
    return {"format": "symeq-model/1", "name": "residual block", "input_dim": 2,
            "graph": [{"name": "stem", "input": "input", "layers": [dense(Ws, act)]},
                      {"name": "block", "input": "stem", "layers": [dense(Wb1, act), dense(Wb2, None)]},
                      {"name": "sum", "add": ["stem", "block"], "activation": act},
                      {"name": "head", "input": "sum", "layers": [dense(Wh, None)]}],
            "output": "head", "group": swap_group(SWAP)}


def concat_net(act: dict, seed: int = 2) -> dict:
    """Two branches of the input (4 and 2 neurons), concatenated, then a head to one invariant output."""
    rng = random.Random(seed)
    Q2 = SWAP
    W1, W2 = equivariant(rng, SWAP, Q4), equivariant(rng, SWAP, Q2)
    Wh = equivariant(rng, _block(Q4, Q2), identity(1))
    return {"format": "symeq-model/1", "name": "two branches", "input_dim": 2,
            "graph": [{"name": "left", "input": "input", "layers": [dense(W1, act)]},
                      {"name": "right", "input": "input", "layers": [dense(W2, act)]},
                      {"name": "both", "concat": ["left", "right"], "activation": act},
                      {"name": "head", "input": "both", "layers": [dense(Wh, None)]}],
            "group": swap_group(identity(1))}


def _block(A, B) -> fmpq_mat:
    n, m = A.nrows(), B.nrows()
    M = fmpq_mat(n + m, n + m)
    for i in range(n):
        for j in range(n):
            M[i, j] = A[i, j]
    for i in range(m):
        for j in range(m):
            M[n + i, n + j] = B[i, j]
    return M


def chain_file(act: dict, seed: int = 3) -> tuple[dict, dict]:
    """The same chain as a "layers" file and as a one-segment "graph" file."""
    rng = random.Random(seed)
    S = scramble_matrix("positive")
    W1 = S * equivariant(rng, SWAP, Q4)
    W2 = equivariant(rng, Q4, SWAP) * S.inv()
    layers = [dense(W1, act, [0, 0, 0, 0]), dense(W2, None)]
    chain = {"format": "symeq-model/1", "name": "chain", "input_dim": 2, "layers": layers, "group": swap_group(SWAP)}
    graph = {"format": "symeq-model/1", "name": "chain", "input_dim": 2,
             "graph": [{"name": "net", "input": "input", "layers": layers}], "group": swap_group(SWAP)}
    return chain, graph


def mirror_kernel(k):
    return [list(reversed(row)) for row in k]


def conv_residual(seed: int = 4) -> dict:
    """A residual conv net on 1x4x4 images, equivariant under the mirror; the stem's two channels are
    each other's mirror (the action swaps them and mirrors the pixels)."""
    rng = random.Random(seed)
    k = [[rng.randint(-2, 2) for _ in range(3)] for _ in range(3)]
    stem = {"type": "conv2d", "input_shape": [1, 4, 4], "kernel": [[k], [mirror_kernel(k)]], "bias": ["1", "1"],
            "padding": 1, "activation": {"type": "relu"}}
    a, b = ([[rng.randint(-2, 2) for _ in range(3)] for _ in range(3)] for _ in range(2))
    block = {"type": "conv2d", "kernel": [[a, b], [mirror_kernel(b), mirror_kernel(a)]], "bias": None,
             "padding": 1, "activation": None}
    w = [rng.randint(-2, 2) for _ in range(16)]
    wm = [w[4 * i + 3 - j] for i in range(4) for j in range(4)]  # channel 1 reads the mirror of channel 0's weights
    head = {"type": "dense", "weight": [[str(v) for v in w + wm]], "bias": None, "activation": None}
    from symeq.groups import builtin_group
    g = builtin_group("mirror:4x4")
    P = g.generators[0][0]
    return {"format": "symeq-model/1", "name": "residual conv", "input_dim": 16,
            "graph": [{"name": "stem", "input": "input", "layers": [stem]},
                      {"name": "block", "input": "stem", "layers": [block]},
                      {"name": "sum", "add": ["stem", "block"], "activation": {"type": "relu"}},
                      {"name": "head", "input": "sum", "layers": [head]}],
            "group": FiniteGroup([(P, identity(1))], ["mirror"]).to_json()}


def rows(M) -> list:
    return [[str(x) for x in r] for r in mat_rows(M)]
