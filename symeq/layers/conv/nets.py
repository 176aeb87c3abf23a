"""Group-equivariant CNNs built the way escnn builds them: regular fields, lifting then group convolutions.

This builds exact :class:`symeq.layers.conv.ConvLayer` chains for the groups C4 and D4 acting on
square images, in **escnn's convention** (docs/conv.md):

* a group element acts on a filter (a kh x kw array) by ``L_g``; escnn's generator of C4 turns the
  array a quarter turn **counter-clockwise** (``numpy.rot90``), symeq's ``rot90`` turns images
  **clockwise** (docs/groups.md), so symeq's rot90 is escnn's ``rot^-1``;
* a regular field has one channel per group element, in escnn's order: C4 ``r = 0..3`` (``rot^r``),
  D4 ``4 f + r`` for ``rot^r flip^f`` (flip first; ``flip`` is the left-right mirror of the array);
* lifting: channel ``(c, h)`` has the filter ``L_h psi_c``; group convolution: the filter from
  ``(c, h)`` to ``(c', h')`` is ``L_h' phi_{c', c, h'^-1 h}``; biases are constant on a field;
* then the input transformed by ``L_t`` moves channel ``(c, h)`` to ``(c, t h)``: under symeq's rot90
  escnn's regular channel ``r`` goes to ``r - 1`` (C4).

The readout is invariant: the mean over pixels and over the channels of a field, times one weight
per field (a whole-image constant kernel, :meth:`ConvLayer.from_dense`), so rho_out is trivial.

Examples
--------
>>> from symeq.activations import tanh_series
>>> layers, group = regular_network("C4", 5, fields=1, hidden=1, activation=tanh_series(3), rng=0)
>>> [l.out_shape for l in layers], group.order()
([(4, 5, 5), (1, 1, 1)], 4)
"""

from __future__ import annotations

import random

from flint import fmpq

from ...groups import builtin_group
from . import ConvLayer, ConvShape, transform_pixels

__all__ = ["regular_network", "group_elements", "regular_channel_action"]

_ROT_CCW = (0, 1, -1, 0)   # numpy.rot90 as a pixel map of an array (escnn's generator)
_FLIP = (1, 0, 0, -1)      # left-right mirror of an array


def _mul(a, b):
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])


def group_elements(name: str) -> list[tuple]:
    """escnn's elements of C4 (``rot^r``) or D4 (``rot^r flip^f`` at index ``4 f + r``), each as the
    pixel map M_g of L_g (``L_g psi [u] = psi[M_g u + d]``; L_g L_h = L_gh has M_gh = M_h M_g)."""
    rots = [(1, 0, 0, 1)]
    for _ in range(3):
        rots.append(_mul(rots[-1], _ROT_CCW))
    if name == "C4":
        return rots
    if name == "D4":
        return rots + [_mul(_FLIP, m) for m in rots]  # L_{rot^r} L_flip: M = M_flip M_rot^r
    raise ValueError(f"unknown group {name!r}: C4 or D4")


def _table(els: list) -> list[list[int]]:
    """``table[g][h]``: the index of g h (M_gh = M_h M_g)."""
    index = {m: i for i, m in enumerate(els)}
    return [[index[_mul(els[h], els[g])] for h in range(len(els))] for g in range(len(els))]


def _apply(M, arr):
    k = len(arr)
    pix = transform_pixels(M, k, k)
    flat = [x for row in arr for x in row]
    return [[flat[pix[i * k + j]] for j in range(k)] for i in range(k)]


def regular_channel_action(name: str, fields: int, t: int) -> list[int]:
    """The channel permutation of escnn's element t on ``fields`` regular fields: ``source[c]`` with
    (M y)[c] = y[source[c]], channel (c, h) moving to (c, t h)."""
    els = group_elements(name)
    tab = _table(els)
    m = len(els)
    src = [0] * (fields * m)
    for c in range(fields):
        for h in range(m):
            src[c * m + tab[t][h]] = c * m + h
    return src


def regular_network(name: str, n: int, fields: int, hidden: int, activation, rng=None, k: int = 3,
                    denominator: int = 8):
    """(layers, group): a lifting conv and ``hidden - 1`` group convs on regular fields (k x k kernels,
    padding k // 2, exact rationals on the grid 1/denominator), then the invariant readout.

    ``group`` is symeq's C4 (``rot90:n``) or D4 (``dihedral:n``) with a trivial output action."""
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    els = group_elements(name)
    tab = _table(els)
    m = len(els)
    inv = [next(j for j in range(m) if tab[i][j] == 0) for i in range(m)]

    def rnd():
        return [[fmpq(rng.randint(-denominator, denominator), denominator) for _ in range(k)] for _ in range(k)]

    C = fields * m
    psi = [rnd() for _ in range(fields)]
    k1 = [[_apply(els[h], psi[c])] for c in range(fields) for h in range(m)]
    b1 = [b for b in (fmpq(rng.randint(-4, 4), 8) for _ in range(fields)) for _ in range(m)]  # one per field
    layers = [ConvLayer(ConvShape(1, C, n, n, k, k, 1, k // 2), k1, b1, activation)]
    for _ in range(hidden - 1):
        phi = [[[rnd() for _ in range(m)] for _ in range(fields)] for _ in range(fields)]
        kern = [[_apply(els[h2], phi[c2][c][tab[inv[h2]][h]]) for c in range(fields) for h in range(m)]
                for c2 in range(fields) for h2 in range(m)]
        b = [x for x in (fmpq(rng.randint(-4, 4), 8) for _ in range(fields)) for _ in range(m)]
        layers.append(ConvLayer(ConvShape(C, C, n, n, k, k, 1, k // 2), kern, b, activation))
    w = [fmpq(rng.randint(1, denominator), denominator) for _ in range(fields)]
    row = [w[c // m] / (m * n * n) for c in range(C) for _ in range(n * n)]
    layers.append(ConvLayer.from_dense([row], [fmpq(1, 2)], None, (C, n, n)))
    group = builtin_group(f"rot90:{n}" if name == "C4" else f"dihedral:{n}", output=1)
    return layers, group
