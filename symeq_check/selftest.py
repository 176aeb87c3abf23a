"""The self-test of the checker's axioms: every row of the identity table :data:`symeq_check.real.REAL_SYMMETRY_TABLE`
re-proved numerically at several rational points with this package's own interval arithmetic.

A row (alpha, beta, q, c) of an activation sigma claims sigma(alpha t + beta) = q sigma(t) + c for every real t;
at each point t the enclosures of both sides (outward-rounded Fraction intervals, :mod:`symeq_check.intervals`)
must meet, and a row that fails at one point is not an identity.  ``"positive"`` (leaky ReLU) claims
sigma(a t) = a sigma(t) for every a > 0, tested at several a.  This cannot prove a row (finitely many points),
but it refutes a wrong one: ``gelu: (-1, 0, -1, 0)`` fails at t = 1/2, since gelu(-t) = gelu(t) - t.
``python -m symeq_check --self-test`` runs it (exit 0 when every row holds at every point, else 1).
"""
from __future__ import annotations

from fractions import Fraction

from . import real
from .intervals import _real_interval
from .real import _Real

#: the rational points, nonzero (t = 0 satisfies every odd identity), both signs, several scales
POINTS = tuple(Fraction(p) for p in ("-3", "-1", "-1/3", "1/5", "1/2", "1", "5/2"))
#: the scalings a > 0 of leaky ReLU's positive family
POSITIVE = tuple(Fraction(p) for p in ("1/3", "2", "7/2"))
#: every parameter form of each activation the table covers (the rows must hold for each)
VARIANTS = {"gelu": (None, "tanh"), "elu": (Fraction(1), Fraction(2)), "leaky_relu": (Fraction(1, 100), Fraction(-2))}
BITS = 64


def _dec(x: Fraction) -> str:
    """x to 6 decimals, rounded down, by integer arithmetic (no float)."""
    scaled = x.numerator * 10 ** 6 // x.denominator
    sign, scaled = ("-", -scaled) if scaled < 0 else ("", scaled)
    return f"{sign}{scaled // 10 ** 6}.{scaled % 10 ** 6:06d}"


def _meet(a, b) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _value(act: _Real, t: Fraction):
    return _real_interval(act, (t, t), BITS)


def _row_failure(act: _Real, row) -> str | None:
    alpha, beta, q, c = (Fraction(x) for x in row)
    for t in POINTS:
        lhs = _value(act, alpha * t + beta)
        s = _value(act, t)
        rhs = tuple(sorted((q * s[0] + c, q * s[1] + c)))
        if not _meet(lhs, rhs):
            return (f"{act.name}{'' if act.param is None else f'({act.param})'}: row {tuple(row)} fails at t = {t}: "
                    f"sigma({alpha} t + {beta}) is in [{_dec(lhs[0])}, {_dec(lhs[1])}], "
                    f"{q} sigma(t) + {c} in [{_dec(rhs[0])}, {_dec(rhs[1])}]")
    return None


def self_test(table=None) -> tuple[list[str], int]:
    """(failures, rows x points tested) of ``table`` (default: the checker's own table, read at call time)."""
    table = real.REAL_SYMMETRY_TABLE if table is None else table
    failures, tested = [], 0
    for name, rows in table.items():
        for param in VARIANTS.get(name, (None,)):
            act = _Real(name, param)
            if rows == "positive":
                rows_here = [(a, 0, a, 0) for a in POSITIVE]
            else:
                rows_here = rows
            for row in rows_here:
                tested += len(POINTS)
                why = _row_failure(act, row)
                if why:
                    failures.append(why)
    return failures, tested


def main() -> int:
    """Print the self-test's outcome; 0 when every row holds at every point, 1 otherwise."""
    failures, tested = self_test()
    for line in failures:
        print(f"FAILED: {line}")
    print(f"self-test: {len(real.REAL_SYMMETRY_TABLE)} activations, {tested} (row, point) pairs, "
          f"{len(failures)} failed" + ("" if failures else ": every identity of the table holds"))
    return 1 if failures else 0
