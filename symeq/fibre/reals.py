"""Exact real-root counting over Q: Sturm sequences (no floats decide anything).

Identifiability statements are about real parameters by default (docs/identifiability.md, "Over R and
over C"): a fibre point counts against identifiability only when it is real.  The tensor method's
per-neuron scalings lambda are the roots of a univariate polynomial over Q; how many of them are
real is the number of sign changes of its Sturm sequence between -infinity and +infinity (Sturm
1829), computed here with exact rationals.  ``symeq check`` re-runs the same count with
:class:`fractions.Fraction` (the checker's copy).

Examples
--------
>>> real_root_count([1, 1, 1])          # lambda^2 + lambda + 1: no real root
0
>>> real_root_count([-1, 0, 0, 1])      # lambda^3 - 1: one real root (lambda = 1)
1
>>> real_root_count([0, -1, 0, 1])      # lambda^3 - lambda: -1, 0, 1
3
>>> real_root_count([1, -2, 1])         # (lambda - 1)^2: one distinct real root
1
"""

from __future__ import annotations

from flint import fmpq, fmpq_poly

__all__ = ["real_root_count", "sturm_sequence", "sign_changes"]


def _poly(p) -> fmpq_poly:
    if isinstance(p, fmpq_poly):
        return p
    return fmpq_poly([fmpq(x) if not isinstance(x, str) else _parse(x) for x in p])


def _parse(s: str) -> fmpq:
    """A rational written "p" or "p/q" (never evaluated as an expression)."""
    num, _, den = s.strip().partition("/")
    return fmpq(int(num), int(den) if den else 1)


def sturm_sequence(p) -> list:
    """The Sturm sequence p_0 = p / gcd(p, p'), p_1 = p_0', p_{k+1} = -rem(p_{k-1}, p_k) (squarefree first,
    so that it counts distinct roots)."""
    p = _poly(p)
    if p == 0:
        raise ValueError("the zero polynomial has no finite root count")
    if p.degree() <= 0:
        return [p]
    g = p.gcd(p.derivative())
    p0 = p // g
    seq = [p0, p0.derivative()]
    while seq[-1] != 0 and seq[-1].degree() > 0:
        r = seq[-2] % seq[-1]
        if r == 0:
            break
        seq.append(-r)
    return [q for q in seq if q != 0]


def sign_changes(signs) -> int:
    """Sign changes in a sequence of -1, 0, 1 (zeros skipped)."""
    s = [x for x in signs if x != 0]
    return sum(1 for a, b in zip(s, s[1:]) if a != b)


def _sign_at_infinity(q: fmpq_poly, positive: bool) -> int:
    lead = q.coeffs()[-1]
    sign = 1 if lead > 0 else -1
    if not positive and q.degree() % 2 == 1:
        sign = -sign
    return sign


def real_root_count(p, *, nonzero: bool = False) -> int:
    """Number of distinct real roots of the nonzero polynomial ``p`` over Q (coefficients from degree 0 up:
    a list of ints / fmpq / "p/q" strings, or an ``fmpq_poly``); ``nonzero``: not counting the root 0.

    >>> real_root_count([0, 0, 1, 1], nonzero=True)   # lambda^2 (lambda + 1): only -1 is a nonzero root
    1
    """
    p = _poly(p)
    if nonzero:
        x = fmpq_poly([0, 1])
        while p != 0 and p(0) == 0:
            p = p // x
    seq = sturm_sequence(p)
    minus = sign_changes(_sign_at_infinity(q, False) for q in seq)
    plus = sign_changes(_sign_at_infinity(q, True) for q in seq)
    return minus - plus
