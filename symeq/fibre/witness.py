"""Exact witnesses of non-identifiability: fibre points outside the orbit, tangent directions, lines.

Zero-dimensional ideals
-----------------------
From an exact Gröbner basis over Q (Singular, giac, flint or sympy) the quotient Q[v]/I has the
standard monomials as a basis and each variable acts on it by a multiplication matrix M_i.  For a
linear form l = sum c_i v_i that separates the points, the eigenvalues of M_l are the values l(xi)
at the points xi, and the *left* eigenvector for l(xi) is the evaluation (xi^b)_b at the standard
monomials b (Stickelberger).  So :func:`zero_dimensional_points` factors the characteristic
polynomial of M_l over Q: a linear factor gives a rational point, read off its left eigenvector
and checked to be a zero of every generator; an irreducible factor of degree > 1 gives that many
conjugate algebraic points, reported by the minimal polynomial of l on them and how many of its
roots are real (Sturm, exact).

Positive-dimensional ideals
---------------------------
:func:`tangent_directions` returns a basis of the kernel of the Jacobian of the generators at theta
(exact over Q); after gauge fixing the orbit is finite, so its tangent space in the slice is 0 and
every kernel vector is a direction not tangent to the orbit (a Zariski tangent vector of the
fibre; when theta is a smooth point of a positive-dimensional component it is a true tangent).
:func:`line_in_fibre` checks whether the whole line theta + s v lies in the fibre (an explicit
rational curve).  :func:`slice_points` cuts the fibre with ``dimension`` hyperplanes v_j = a_j
(variables independent modulo the leading ideal, so the cut is finite) and returns its points:
points of the fibre that are not in the finite orbit.

Examples
--------
>>> from flint import fmpq
>>> from symeq.fibre.groebner import groebner
>>> x2_2 = {(2, 0): fmpq(1), (0, 0): fmpq(-2)}          # x^2 = 2
>>> y_x = {(0, 1): fmpq(1), (1, 0): fmpq(-1)}            # y = x
>>> r = groebner((["x", "y"], [x2_2, y_x]), engine="sympy")
>>> [p.kind for p in zero_dimensional_points(r)]
['algebraic']
>>> zero_dimensional_points(r)[0].real_roots
2
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from flint import fmpq, fmpq_mat, fmpq_poly

from ..numbers import nullspace
from .groebner import multiplication_matrices, trace_form
from .groebner.normal import _normal_form

__all__ = ["FibrePoint", "zero_dimensional_points", "tangent_directions", "line_in_fibre", "slice_points",
           "independent_variables", "MAX_POINT_DEGREE"]

#: build multiplication matrices only up to this many standard monomials
MAX_POINT_DEGREE = 400


@dataclass
class FibrePoint:
    """One point (kind "rational") or one Galois orbit of conjugate points (kind "algebraic").

    values : ``{variable: fmpq}`` for a rational point (checked to be a zero of the ideal)
    linear_form : ``{variable: int}`` the separating form l used
    minimal_polynomial : coefficients (constant first, as strings "p/q") of the minimal
        polynomial of l on these points (degree 1 for a rational point)
    degree : number of conjugate points
    real_roots : how many of them are real
    multiplicity : multiplicity of each point in the ideal (1 when radical there)
    in_orbit : True when the point is a point of the orbit (rational points only; None unknown)
    """

    kind: str
    linear_form: dict
    minimal_polynomial: list
    degree: int
    real_roots: int
    multiplicity: int
    values: dict | None = None
    in_orbit: bool | None = None
    notes: list = field(default_factory=list)

    @property
    def is_real(self) -> bool:
        return self.real_roots > 0

    def to_json(self) -> dict:
        out = {"kind": self.kind, "degree": self.degree, "real_roots": self.real_roots,
               "multiplicity": self.multiplicity}
        if self.minimal_polynomial:
            out["linear_form"] = {k: int(v) for k, v in self.linear_form.items()}
            out["minimal_polynomial"] = [str(c) for c in self.minimal_polynomial]
            out["minimal_polynomial_text"] = _poly_str(self.minimal_polynomial)
        if self.values is not None:
            out["values"] = {k: str(v) for k, v in self.values.items()}
        if self.in_orbit is not None:
            out["in_orbit"] = self.in_orbit
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def describe(self) -> str:
        if self.kind == "rational":
            vals = ", ".join(f"{k}={v}" for k, v in (self.values or {}).items())
            return f"rational point ({vals})" + (" [in the orbit]" if self.in_orbit else "")
        form = " + ".join(f"{c}*{v}" for v, c in self.linear_form.items() if c)
        return (f"{self.degree} conjugate algebraic point(s), {self.real_roots} real: l = {form} is a root of "
                f"{_poly_str(self.minimal_polynomial)}")


def _poly_str(coeffs) -> str:
    terms = []
    for k in range(len(coeffs) - 1, -1, -1):
        c = fmpq(coeffs[k]) if not isinstance(coeffs[k], str) else fmpq(*map(int, (coeffs[k].split("/") + ["1"])[:2]))
        if c == 0:
            continue
        mon = "" if k == 0 else ("l" if k == 1 else f"l^{k}")
        terms.append(f"({c})*{mon}" if mon and c != 1 else (mon or str(c)))
    return " + ".join(terms) or "0"


def _real_root_count(p: fmpq_poly) -> int:
    """Distinct real roots of p (exact: sympy's Sturm-based count)."""
    import sympy

    x = sympy.Symbol("l")
    coeffs = [sympy.Rational(int(c.p), int(c.q)) for c in p.coeffs()]
    return int(sympy.Poly(list(reversed(coeffs)), x).count_roots())


def zero_dimensional_points(result, *, orbit: list | None = None, max_degree: int = MAX_POINT_DEGREE,
                            seed: int = 0, tries: int = 12) -> list[FibrePoint] | None:
    """The points of a zero-dimensional ideal from its exact basis (see the module docstring).

    Returns None when there is no exact basis, the ideal is not zero-dimensional, its degree exceeds
    ``max_degree``, or no separating linear form was found.  ``orbit`` (points as dicts) marks the
    rational points that belong to it.
    """
    if result.basis is None or result.dimension != 0 or result.degree is None or result.degree > max_degree:
        return None
    variables = list(result.variables)
    n = len(variables)
    std, index, mats, lead, basis = multiplication_matrices(result)
    D = len(std)
    one = index.get(tuple([0] * n))
    if one is None:  # pragma: no cover - the ideal is (1)
        return []
    rng = random.Random(seed)
    # how many distinct points: the degree of the squarefree part of charpoly(M_l) for generic l
    best = None
    for t in range(tries):
        coeffs = [1] * n if t == 0 else [rng.randint(-9, 9) or 1 for _ in range(n)]
        M = fmpq_mat(D, D)
        for c, Mi in zip(coeffs, mats):
            M += Mi * c
        cp = M.charpoly()
        sqfree = cp // cp.gcd(cp.derivative())
        distinct = sqfree.degree()
        if best is None or distinct > best[0]:
            best = (distinct, coeffs, M, cp)
        # separating as soon as two different forms give the same count (a cheap, sound upper bound
        # would need the radical; the maximum over a few random forms is generic with high probability)
        if t >= 2 and distinct == best[0] and distinct == _hermite_rank(std, index, mats):
            break
    distinct, coeffs, M, cp = best
    if distinct != _hermite_rank(std, index, mats):
        return None
    form = {v: c for v, c in zip(variables, coeffs)}
    nf_vars = [_normal_form({tuple(1 if k == i else 0 for k in range(n)): fmpq(1)}, basis, lead) for i in range(n)]
    Mt = M.transpose()
    orbit_keys = {tuple(fmpq(p[v]) for v in variables) for p in (orbit or [])}
    out = []
    _, factors = cp.factor()
    for fac, mult in factors:
        fac = fac / fac.coeffs()[-1]
        if fac.degree() == 1:
            r = -fac.coeffs()[0]
            A = Mt - fmpq_mat([[r if i == j else 0 for j in range(D)] for i in range(D)])
            ker = nullspace(A)
            pt = FibrePoint("rational", form, list(fac.coeffs()), 1, 1, mult)
            if len(ker) == 1 and ker[0][one] != 0:
                u = [x / ker[0][one] for x in ker[0]]
                vals = {}
                for i, v in enumerate(variables):
                    vals[v] = sum((c * u[index[m]] for m, c in nf_vars[i].items()), fmpq(0))
                pt.values = vals
                if not _vanishes(result, vals):  # pragma: no cover - a bug
                    raise AssertionError("a computed fibre point is not a zero of the ideal")
                pt.in_orbit = tuple(vals[v] for v in variables) in orbit_keys if orbit is not None else None
            else:
                pt.notes.append("multiple point: l-value rational, coordinates not resolved")
            out.append(pt)
        else:
            out.append(FibrePoint("algebraic", form, list(fac.coeffs()), fac.degree(), _real_root_count(fac),
                                  mult, in_orbit=False if orbit is not None else None))
    return out


def _hermite_rank(std, index, mats) -> int:
    """Number of distinct complex points (rank of the trace form); cached on the matrices' identity."""
    key = id(mats)
    if _HERMITE_CACHE.get("key") == key:
        return _HERMITE_CACHE["rank"]
    rank = trace_form(std, index, mats).rank()
    _HERMITE_CACHE.update(key=key, rank=rank, mats=mats)
    return rank


_HERMITE_CACHE: dict = {}


def _vanishes(result, vals) -> bool:
    xs = [vals[v] for v in result.variables]
    for g in result.basis:
        s = fmpq(0)
        for e, c in g.items():
            t = c
            for x, k in zip(xs, e):
                if k:
                    t *= x ** k
            s += t
        if s != 0:
            return False
    return True


# -- positive-dimensional fibres -------------------------------------------------------------------

def jacobian_at(ideal, point: dict | None = None) -> fmpq_mat:
    """The Jacobian of the generators of a FibreIdeal at ``point`` (default theta), exactly."""
    point = ideal.point if point is None else point
    vals = [fmpq(point[v]) for v in ideal.variables]
    n = len(ideal.variables)
    rows = [[g.derivative(i)(*vals) for i in range(n)] for g in ideal.generators]
    return fmpq_mat(rows) if rows else fmpq_mat(0, n)


def tangent_directions(ideal, point: dict | None = None) -> list[dict]:
    """A basis of ker J(theta) over Q, as ``{variable: fmpq}`` (see the module docstring)."""
    J = jacobian_at(ideal, point)
    if J.nrows() == 0:
        return [{v: fmpq(1 if i == j else 0) for j, v in enumerate(ideal.variables)} for i in range(len(ideal.variables))]
    return [{v: x for v, x in zip(ideal.variables, vec)} for vec in nullspace(J)]


def line_in_fibre(ideal, direction: dict, point: dict | None = None) -> bool:
    """True when theta + s * direction lies in the fibre for every s (checked exactly).

    Each generator restricted to the line is a polynomial in s of degree <= its total degree, so
    it vanishes identically when it vanishes at total degree + 1 values of s.
    """
    point = ideal.point if point is None else point
    deg = max((g.total_degree() for g in ideal.generators), default=0)
    for s in range(1, deg + 2):
        q = {v: fmpq(point[v]) + s * fmpq(direction.get(v, 0)) for v in ideal.variables}
        if not ideal.vanishes_at(q):
            return False
    return True


def independent_variables(lms, nvars: int, dimension: int, limit: int = 200_000) -> list[int] | None:
    """Indices of ``dimension`` variables such that no leading monomial lives on them alone.

    Setting them to generic values leaves a zero-dimensional ideal.  None if none was found
    within ``limit`` candidate sets.
    """
    sups = [frozenset(i for i, e in enumerate(m) if e) for m in lms]
    for count, S in enumerate(itertools.combinations(range(nvars), dimension)):
        if count > limit:
            return None
        s = set(S)
        if not any(sup <= s for sup in sups):
            return list(S)
    return None


def slice_points(ideal, result, *, engine: str, timeout: float | None, offsets=(1, 2, -1, 3),
                 orbit: list | None = None, max_degree: int = 120) -> tuple[dict, list[FibrePoint]] | None:
    """Points of the fibre on the slice {v_j = theta_j + a} for independent variables v_j.

    Returns ``(fixed values, points)`` (points as :class:`FibrePoint`, in the coordinates of
    ``ideal.variables``, with the fixed ones included for rational points), or None when nothing
    was found (no independent set, budget, or the slice is empty or not finite).
    """
    from ..errors import BudgetExceeded
    from .groebner import groebner

    n = len(ideal.variables)
    S = independent_variables(result.leading_monomials, n, result.dimension)
    if S is None:
        return None
    import time

    polys = ideal.polynomial_dicts()
    deadline = None if timeout is None else time.perf_counter() + timeout
    for a in offsets:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0.05:
            return None
        fixed = {ideal.variables[j]: fmpq(ideal.point[ideal.variables[j]]) + a for j in S}
        cut = list(polys)
        for j in S:
            e = tuple(1 if k == j else 0 for k in range(n))
            cut.append({e: fmpq(1), tuple([0] * n): -fixed[ideal.variables[j]]})
        try:
            r = groebner((ideal.variables, cut), engine=engine, timeout=left)
        except BudgetExceeded:
            return None
        if r.dimension != 0:
            continue
        pts = zero_dimensional_points(r, orbit=orbit, max_degree=max_degree)
        if pts:
            for p in pts:
                if p.values is not None and not ideal.vanishes_at(p.values):  # pragma: no cover - a bug
                    raise AssertionError("a slice point is not in the fibre")
            return fixed, pts
    return None
