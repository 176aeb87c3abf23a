"""Exact reduction modulo a Gröbner basis over Q: normal forms, multiplication matrices, Hermite counts."""

from __future__ import annotations

from flint import fmpq

from .result import GroebnerResult, standard_monomials


def grevlex_key(e: tuple):
    return (sum(e), tuple(-x for x in reversed(e)))


def normal_form(p: dict, basis: list[dict], lead: list[tuple]) -> dict:
    p = {k: v for k, v in p.items() if v != 0}
    out: dict = {}
    while p:
        m = max(p, key=_grevlex_key)
        c = p.pop(m)
        for g, lm in zip(basis, lead):
            if all(a >= b for a, b in zip(m, lm)):
                q = tuple(a - b for a, b in zip(m, lm))
                f = c / g[lm]
                for e, gc in g.items():
                    if e == lm:
                        continue
                    e2 = tuple(a + b for a, b in zip(e, q))
                    v = p.get(e2, fmpq(0)) - f * gc
                    if v == 0:
                        p.pop(e2, None)
                    else:
                        p[e2] = v
                break
        else:
            out[m] = c
    return out


def _sign_changes(coeffs) -> int:
    signs = [1 if c > 0 else -1 for c in coeffs if c != 0]
    return sum(1 for a, b in zip(signs, signs[1:]) if a != b)


def multiplication_matrices(result: GroebnerResult):
    """(standard monomials, their index, multiplication matrices M_i of each variable on Q[x]/I,
    lead monomials, basis) from an exact reduced Gröbner basis of a zero-dimensional ideal."""
    from flint import fmpq_mat

    n = len(result.variables)
    basis = result.basis
    lead = [max(g, key=_grevlex_key) for g in basis]
    std = standard_monomials(lead, n)
    if std is None:
        return None, None, None, lead, basis
    index = {b: i for i, b in enumerate(std)}
    D = len(std)
    mats = []
    for i in range(n):
        M = fmpq_mat(D, D)
        for k, b in enumerate(std):
            e = list(b)
            e[i] += 1
            for m, c in _normal_form({tuple(e): fmpq(1)}, basis, lead).items():
                M[index[m], k] = c
        mats.append(M)
    return std, index, mats, lead, basis


def trace_form(std, index, mats):
    """Hermite's trace form T[k, l] = Tr(M_{b_k b_l}) on the standard monomials b_k."""
    from flint import fmpq_mat

    D = len(std)
    prods = [None] * D  # M_{b_k}, built up one variable at a time
    for k, b in enumerate(std):
        if not any(b):
            P = fmpq_mat(D, D)
            for j in range(D):
                P[j, j] = 1
        else:
            i = next(i for i, e in enumerate(b) if e)
            prev = list(b)
            prev[i] -= 1
            P = mats[i] * prods[index[tuple(prev)]]
        prods[k] = P
    tvec = fmpq_mat(1, D, [sum((P[j, j] for j in range(D)), fmpq(0)) for P in prods])
    return fmpq_mat(D, D, [x for P in prods for x in (tvec * P).entries()])


def hermite_counts(result: GroebnerResult, max_degree: int = 400) -> tuple[int, int] | None:
    """(distinct complex points, distinct real points) of a zero-dimensional ideal, exactly.

    Hermite's theorem: on Q[x]/I the trace form (f, g) -> Tr(M_fg) has rank equal to the number
    of distinct complex points of V(I) and signature equal to the number of distinct real points.
    The signature is read off the characteristic polynomial (real-rooted, so Descartes' rule of
    signs is exact).  Needs the exact reduced basis over Q (the sympy engine); returns None when it
    is missing, the ideal is not zero-dimensional, or its degree exceeds ``max_degree``.

    >>> from flint import fmpq
    >>> from symeq.fibre.groebner import groebner
    >>> x2 = {(2, 0): fmpq(1)}                                  # x^2 = 0: a double point
    >>> y2 = {(0, 2): fmpq(1), (0, 0): fmpq(1)}                 # y^2 = -1: two complex points
    >>> r = groebner((["x", "y"], [x2, y2]), engine="sympy")
    >>> r.degree, hermite_counts(r)
    (4, (2, 0))
    """
    if result.basis is None or result.dimension != 0 or result.degree is None or result.degree > max_degree:
        return None
    std, index, mats, _, _ = multiplication_matrices(result)
    if std is None:  # pragma: no cover - degree was enumerated above
        return None
    T = trace_form(std, index, mats)
    rank = T.rank()
    cp = [fmpq(c) for c in T.charpoly().coeffs()]  # constant term first
    pos = _sign_changes(cp)
    neg = _sign_changes([c * (-1) ** k for k, c in enumerate(cp)])
    return rank, pos - neg


_grevlex_key = grevlex_key  # the earlier private name, for callers not yet moved to the public one


_normal_form = normal_form  # the earlier private name, for callers not yet moved to the public one
