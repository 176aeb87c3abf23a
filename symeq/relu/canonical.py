"""Canonical form of a one-hidden-layer ReLU network (a continuous piecewise-linear map).

A network ``f(x) = V relu(W x + b) + c`` from ``R^n`` to ``R^m`` is, as a *function*, determined
by a finite list of kink hyperplanes with their gradient jumps, plus an affine part::

    f(x) = sum_H  J_H relu(a_H . x + beta_H)  +  M x + c0

where every ``H = {a_H . x + beta_H = 0}`` is written in a normal form (``a_H`` a primitive
integer vector whose first nonzero entry is positive, ``beta_H`` rational), ``J_H`` is a nonzero
vector of ``Q^m``, and the hyperplanes are pairwise distinct.  This is :class:`CanonicalForm`.

Reduction (how a network is brought to this form; every step preserves the function):

* a neuron with zero outgoing column ``v_j = 0`` contributes nothing and is dropped;
* a neuron with zero incoming row ``w_j = 0`` is constant, ``v_j relu(b_j)``: it goes to ``c0``;
* otherwise ``(w_j, b_j) = lam (a, beta)`` with ``(a, beta)`` the normal form of its kink and
  ``lam != 0``.  For ``lam > 0`` the neuron is ``lam v_j relu(a.x + beta)``; for ``lam < 0`` it is
  ``|lam| v_j relu(-(a.x + beta)) = |lam| v_j relu(a.x + beta) - |lam| v_j (a.x + beta)``
  (because ``relu(-z) = relu(z) - z``), so it adds ``|lam| v_j`` to ``J_H`` and an affine term
  to ``(M, c0)``.  Neurons with the same (or opposite, i.e. parallel *and* equal) kink merge by
  adding their jumps; hyperplanes whose jumps cancel (``J_H = 0``, e.g. the pair
  ``relu(z) - relu(-z) = z``) disappear, leaving only their affine contribution.

Uniqueness (why two networks compute the same function iff their canonical forms are equal):
for one hidden layer every kink is a *full* affine hyperplane of ``R^n``.  Take a point ``x*`` of
``H`` on no other kink hyperplane (possible: finitely many distinct hyperplanes, none contains
``H``).  Near ``x*`` all other terms are affine, and crossing ``H`` in the direction ``a_H``
changes the Jacobian of ``f`` by exactly ``J_H a_H^T``.  So the set of hyperplanes with
``J_H != 0`` (the non-differentiability locus of ``f``) and each ``J_H`` (from the jump of the
Jacobian, ``a_H`` being fixed by the normal form) are determined by ``f``; subtracting
``sum J_H relu(...)`` leaves an affine function, which determines ``M`` and ``c0``.  Hence
``f == g`` on ``R^n`` iff ``canonical_form(f) == canonical_form(g)``: an exact decision of
function equality with no region enumeration (cf. the two-layer characterisation of
Petzka-Trimmel-Sminchisescu 2020; for the jump argument see also Grigsby-Lindsey-Rolnick 2023).

Examples
--------
The width-4 identity of Bökman-Kahl 2023 (docs/theory.md; ``W1 = [A; -A]``,
``W2 = [A^-1, -A^-1]``) has no kink at all: its canonical form is the identity matrix.

>>> A, Ainv = [[2, 1], [1, 1]], [[1, -1], [-1, 2]]
>>> W1 = A + [[-v for v in r] for r in A]
>>> W2 = [Ainv[i] + [-v for v in Ainv[i]] for i in range(2)]
>>> cf = canonical_form([(W1, [0] * 4, True), (W2, [0, 0], False)])
>>> cf.kinks, cf.linear, cf.constant
((), ((1, 0), (0, 1)), (0, 0))
>>> cf2 = canonical_form([([[2]], [-2], True), ([[3]], [1], False)])   # 3 relu(2x - 2) + 1
>>> cf2.kinks[0]
Kink(normal=(1,), offset=-1, jump=(6,))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from flint import fmpq

from ..errors import InputError
from .lp import as_fmpq

__all__ = [
    "Kink",
    "CanonicalForm",
    "canonical_form",
    "plain_layers",
    "hyperplane_key",
    "same_function",
]

_ZERO = fmpq(0)


@dataclass(frozen=True)
class Kink:
    """One kink hyperplane ``normal . x + offset = 0`` with its jump vector ``J``.

    ``normal`` is a primitive integer vector (as fmpq) whose first nonzero entry is positive.
    """

    normal: tuple
    offset: fmpq
    jump: tuple

    def to_json(self) -> dict:
        return {"normal": [str(v) for v in self.normal], "offset": str(self.offset),
                "jump": [str(v) for v in self.jump]}


@dataclass(frozen=True)
class CanonicalForm:
    """``f(x) = sum_k kinks[k].jump * relu(kinks[k].normal . x + kinks[k].offset) + linear x + constant``.

    Kinks are sorted by ``(normal, offset)`` and pairwise distinct with nonzero jumps, so equal
    functions have equal (``==``) canonical forms.
    """

    n: int
    m: int
    kinks: tuple
    linear: tuple
    constant: tuple

    def __call__(self, x: Sequence) -> list:
        x = [as_fmpq(v) for v in x]
        out = [sum((a * b for a, b in zip(row, x)), _ZERO) + c for row, c in zip(self.linear, self.constant)]
        for k in self.kinks:
            z = sum((a * b for a, b in zip(k.normal, x)), _ZERO) + k.offset
            if z > 0:
                out = [o + j * z for o, j in zip(out, k.jump)]
        return out

    @property
    def n_kinks(self) -> int:
        return len(self.kinks)

    def is_affine(self) -> bool:
        return not self.kinks

    def to_json(self) -> dict:
        return {"n": self.n, "m": self.m, "kinks": [k.to_json() for k in self.kinks],
                "linear": [[str(v) for v in r] for r in self.linear],
                "constant": [str(v) for v in self.constant]}

    def summary(self) -> str:
        lines = [f"{len(self.kinks)} kink hyperplane(s)"]
        for k in self.kinks:
            lines.append(f"  {list(map(str, k.normal))}.x + {k.offset} = 0, jump {list(map(str, k.jump))}")
        lines.append(f"  affine part: {[list(map(str, r)) for r in self.linear]} x + {list(map(str, self.constant))}")
        return "\n".join(lines)


def hyperplane_key(w: Sequence, b) -> tuple[tuple, fmpq, fmpq]:
    """Normal form of the hyperplane ``w . x + b = 0`` (``w != 0``).

    Returns ``(a, beta, lam)`` with ``w = lam * a``, ``b = lam * beta``, ``a`` primitive integer
    with first nonzero entry positive.

    >>> hyperplane_key([fmpq(-2), fmpq(4)], fmpq(3))
    ((1, -2), -3/2, -2)
    """
    w = [as_fmpq(v) for v in w]
    den = 1
    for v in w:
        if v:
            den = math.lcm(den, int(v.q))
    nums = [int(v.p) * (den // int(v.q)) for v in w]
    g = 0
    for t in nums:
        g = math.gcd(g, t)
    if g == 0:
        raise InputError("hyperplane_key needs a nonzero normal")
    first = next(t for t in nums if t)
    if first < 0:
        g = -g
    a = tuple(fmpq(t // g) for t in nums)
    lam = fmpq(g, den)
    return a, as_fmpq(b) / lam, lam


def plain_layers(model) -> list:
    """``[(W rows, b, relu), ...]`` with fmpq entries, from a :class:`~symeq.models.Model` or plain data."""
    if hasattr(model, "layers") and hasattr(model, "input_dim"):
        from ..numbers import mat_rows

        out = []
        for l in model.layers:
            if l.activation is not None and l.activation.kind != "relu":
                raise InputError("only ReLU models are piecewise linear")
            out.append((mat_rows(l.weight), list(l.bias), l.activation is not None))
        return out
    out = []
    for W, b, r in model:
        out.append(([[as_fmpq(v) for v in row] for row in W], [as_fmpq(v) for v in b], bool(r)))
    return out


def canonical_form(model) -> CanonicalForm:
    """The canonical form of a one-hidden-layer ReLU network (Model or plain layers).

    Raises ``ValueError`` unless the network is ``relu`` layer followed by an affine layer.
    """
    layers = plain_layers(model)
    if len(layers) != 2 or not layers[0][2] or layers[1][2]:
        raise InputError("canonical_form needs exactly one hidden ReLU layer followed by an affine layer")
    (W, b, _), (V, c, _) = layers
    n = len(W[0])
    m = len(V)
    linear = [[_ZERO] * n for _ in range(m)]
    const = list(c)
    jumps: dict = {}
    for j, (w, bj) in enumerate(zip(W, b)):
        v = [V[i][j] for i in range(m)]
        if not any(v):
            continue
        if not any(w):
            if bj > 0:
                const = [ci + vi * bj for ci, vi in zip(const, v)]
            continue
        a, beta, lam = hyperplane_key(w, bj)
        s = abs(lam)
        key = (a, beta)
        acc = jumps.get(key)
        add = [s * vi for vi in v]
        jumps[key] = add if acc is None else [x + y for x, y in zip(acc, add)]
        if lam < 0:
            for i in range(m):
                if add[i]:
                    for k in range(n):
                        if a[k]:
                            linear[i][k] -= add[i] * a[k]
                    const[i] -= add[i] * beta
    kinks = tuple(Kink(a, beta, tuple(J)) for (a, beta), J in sorted(jumps.items(), key=lambda kv: (kv[0][0], kv[0][1]))
                  if any(J))
    return CanonicalForm(n, m, kinks, tuple(tuple(r) for r in linear), tuple(const))


def same_function(f, g) -> bool:
    """Exact equality of two one-hidden-layer ReLU networks as functions on ``R^n``."""
    return canonical_form(f) == canonical_form(g)
