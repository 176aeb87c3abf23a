"""Exact linear programming over the rationals.

A small dense two-phase primal simplex method on a tableau of python-flint
``fmpq`` numbers.  Every number is an exact rational; no floating point is
used anywhere, so the verdicts ("feasible", "infeasible", "unbounded") and the
optimal points are exact.  Termination on degenerate problems is guaranteed by
Bland's smallest-index rule (Bland 1977); the textbook largest-coefficient rule
is also available for comparison and may cycle.

The routine is meant for the small problems that arise when enumerating the
linear regions of a ReLU network (tens of variables and constraints): it is
dense, written in pure Python, and makes no attempt at numerical or sparse
efficiency.

Two entry points:

* :func:`solve_lp` -- maximise ``c.x`` subject to ``A_ub x <= b_ub``,
  ``A_eq x = b_eq`` and ``x >= 0`` (or ``x`` free).
* :func:`interior_point` -- decide whether an open polyhedron
  ``{x : A x + b > 0}`` is non-empty and return a point well inside it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple, Sequence

from flint import fmpq, fmpz

__all__ = [
    "LPResult",
    "LPIterationLimit",
    "solve_lp",
    "interior_point",
    "as_fmpq",
]

_ZERO = fmpq(0)
_ONE = fmpq(1)


class LPIterationLimit(RuntimeError):
    """Raised when the simplex method exceeds ``max_iter`` pivots.

    With Bland's rule (the default) this only happens if ``max_iter`` is set
    below the number of pivots the problem really needs; with
    ``rule="dantzig"`` it is how cycling shows up.
    """


class LPResult(NamedTuple):
    """Outcome of :func:`solve_lp`.

    Attributes
    ----------
    status : str
        ``"optimal"``, ``"infeasible"`` or ``"unbounded"``.
    x : list of fmpq or None
        An optimal vertex (only for ``"optimal"``).
    value : fmpq or None
        The optimal value ``c.x`` (only for ``"optimal"``).
    pivots : int
        Number of simplex pivots performed (both phases).
    """

    status: str
    x: list | None
    value: fmpq | None
    pivots: int = 0


def as_fmpq(v) -> fmpq:
    """Convert an exact scalar to ``fmpq``; floats are refused.

    Accepts ``fmpq``, ``fmpz``, ``int``, ``fractions.Fraction`` and strings
    such as ``"3/4"``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> as_fmpq(Fraction(3, 4)), as_fmpq("-2/6"), as_fmpq(5)
    (3/4, -1/3, 5)
    """
    if isinstance(v, fmpq):
        return v
    if isinstance(v, bool):
        return fmpq(int(v))
    if isinstance(v, (int, fmpz)):
        return fmpq(v)
    if isinstance(v, Fraction):
        return fmpq(v.numerator, v.denominator)
    if isinstance(v, str):
        return fmpq(v.strip())
    if isinstance(v, float):
        raise TypeError("floats are not accepted by the exact LP; use fmpq/Fraction/int")
    # other exact types (e.g. sympy Rational) expose numerator/denominator
    num = getattr(v, "numerator", None)
    den = getattr(v, "denominator", None)
    if num is not None and den is not None and not isinstance(v, float):
        num = num() if callable(num) else num
        den = den() if callable(den) else den
        return fmpq(int(num), int(den))
    raise TypeError(f"cannot convert {type(v).__name__} to an exact rational")


def _vec(v) -> list:
    return [as_fmpq(a) for a in v]


def _mat(M) -> list:
    return [_vec(row) for row in M]


# --------------------------------------------------------------------------
# tableau machinery
# --------------------------------------------------------------------------


def _pivot(T: list, obj: list, basis: list, r: int, j: int) -> None:
    """Pivot the tableau ``T`` (rows incl. rhs) and objective row on (r, j)."""
    row = T[r]
    piv = row[j]
    if piv != _ONE:
        inv = _ONE / piv
        row = [v * inv if v else v for v in row]
        T[r] = row
    nz = [k for k, v in enumerate(row) if v]
    for i in range(len(T)):
        if i == r:
            continue
        other = T[i]
        f = other[j]
        if f:
            new = other[:]
            for k in nz:
                new[k] = other[k] - f * row[k]
            T[i] = new
    f = obj[j]
    if f:
        for k in nz:
            obj[k] = obj[k] - f * row[k]
    basis[r] = j


def _simplex(T: list, obj: list, basis: list, ncols: int, rule: str, max_iter: int,
             count: list) -> str:
    """Minimise with reduced-cost row ``obj`` (``obj[-1] = -z``).

    Returns ``"optimal"`` or ``"unbounded"``.  ``count[0]`` accumulates pivots.
    """
    while True:
        # entering column
        j = -1
        if rule == "bland":
            for k in range(ncols):
                if obj[k] < 0:
                    j = k
                    break
        else:  # dantzig: most negative reduced cost, ties -> smallest index
            best = _ZERO
            for k in range(ncols):
                if obj[k] < best:
                    best = obj[k]
                    j = k
        if j < 0:
            return "optimal"
        # leaving row: min ratio, ties -> smallest basic variable index
        r = -1
        best_ratio = None
        for i, row in enumerate(T):
            a = row[j]
            if a > 0:
                ratio = row[-1] / a
                if (best_ratio is None or ratio < best_ratio
                        or (ratio == best_ratio and basis[i] < basis[r])):
                    best_ratio = ratio
                    r = i
        if r < 0:
            return "unbounded"
        if count[0] >= max_iter:
            raise LPIterationLimit(
                f"simplex exceeded {max_iter} pivots (rule={rule!r})")
        _pivot(T, obj, basis, r, j)
        count[0] += 1


def solve_lp(c: Sequence, A_ub: Sequence | None = None, b_ub: Sequence | None = None,
             A_eq: Sequence | None = None, b_eq: Sequence | None = None,
             free: bool | Sequence[bool] = False, rule: str = "bland",
             max_iter: int = 100000) -> LPResult:
    """Solve ``max c.x  s.t.  A_ub x <= b_ub,  A_eq x = b_eq,  x >= 0`` exactly.

    A two-phase dense primal simplex method over ``fmpq``.  Variables marked
    free are split as ``x = x+ - x-`` internally.

    Parameters
    ----------
    c : sequence of rationals
        Objective (maximised).  Its length is the number of variables.
    A_ub, b_ub : matrix and vector of rationals, optional
        Inequality constraints ``A_ub x <= b_ub``.
    A_eq, b_eq : matrix and vector of rationals, optional
        Equality constraints ``A_eq x = b_eq``.
    free : bool or sequence of bool, default False
        ``True`` makes every variable free; a sequence marks them one by one.
        Non-free variables are constrained to be ``>= 0``.
    rule : {"bland", "dantzig"}, default "bland"
        Pivoting rule.  Bland's smallest-index rule never cycles; Dantzig's
        largest-coefficient rule can cycle on degenerate problems (then
        :class:`LPIterationLimit` is raised after ``max_iter`` pivots).
    max_iter : int, default 100000
        Bound on the total number of pivots.

    Returns
    -------
    LPResult
        ``status`` is ``"optimal"`` (with an optimal vertex ``x`` and its
        ``value``), ``"infeasible"`` or ``"unbounded"``.

    Raises
    ------
    LPIterationLimit
        If more than ``max_iter`` pivots are needed.

    Examples
    --------
    Maximise ``x + y`` on ``x + 2y <= 4, 3x + y <= 6``:

    >>> res = solve_lp([1, 1], [[1, 2], [3, 1]], [4, 6])
    >>> res.status, res.x, res.value
    ('optimal', [8/5, 6/5], 14/5)
    >>> solve_lp([1, 0], [[-1, 0]], [-1], free=True).status    # x >= 1, max x
    'unbounded'
    >>> solve_lp([1], [[1]], [-1]).status                      # 0 <= x <= -1
    'infeasible'
    """
    if rule not in ("bland", "dantzig"):
        raise ValueError("rule must be 'bland' or 'dantzig'")
    c = _vec(c)
    n = len(c)
    A_ub = _mat(A_ub) if A_ub is not None else []
    b_ub = _vec(b_ub) if b_ub is not None else []
    A_eq = _mat(A_eq) if A_eq is not None else []
    b_eq = _vec(b_eq) if b_eq is not None else []
    if len(A_ub) != len(b_ub) or len(A_eq) != len(b_eq):
        raise ValueError("constraint matrix and right-hand side lengths differ")
    for row in A_ub + A_eq:
        if len(row) != n:
            raise ValueError("constraint row length differs from len(c)")
    if isinstance(free, bool):
        free_mask = [free] * n
    else:
        free_mask = [bool(f) for f in free]
        if len(free_mask) != n:
            raise ValueError("free mask length differs from len(c)")

    # structural columns: original variable j -> one column (or two if free)
    col_of: list[tuple[int, int | None]] = []
    nstruct = 0
    for j in range(n):
        if free_mask[j]:
            col_of.append((nstruct, nstruct + 1))
            nstruct += 2
        else:
            col_of.append((nstruct, None))
            nstruct += 1

    def expand(row):
        out = [_ZERO] * nstruct
        for j, v in enumerate(row):
            if v:
                p, q = col_of[j]
                out[p] = v
                if q is not None:
                    out[q] = -v
        return out

    m_ub, m_eq = len(A_ub), len(A_eq)
    m = m_ub + m_eq
    rows: list[list] = []
    rhs: list = []
    signs: list[int] = []  # +1 or -1: sign the row was multiplied by
    for i in range(m_ub):
        s = -1 if b_ub[i] < 0 else 1
        e = expand(A_ub[i])
        slack = [_ZERO] * m_ub
        slack[i] = fmpq(s)
        rows.append([v * s if s < 0 else v for v in e] + slack)
        rhs.append(b_ub[i] * s if s < 0 else b_ub[i])
        signs.append(s)
    for i in range(m_eq):
        s = -1 if b_eq[i] < 0 else 1
        e = expand(A_eq[i])
        rows.append([v * s if s < 0 else v for v in e] + [_ZERO] * m_ub)
        rhs.append(b_eq[i] * s if s < 0 else b_eq[i])
        signs.append(s)

    nreal = nstruct + m_ub
    basis: list[int] = [-1] * m
    need_art = []
    for i in range(m):
        if i < m_ub and signs[i] > 0:
            basis[i] = nstruct + i  # slack with +1 and rhs >= 0
        else:
            need_art.append(i)
    n_art = len(need_art)
    ncols = nreal + n_art
    T = []
    for i in range(m):
        T.append(rows[i] + [_ZERO] * n_art + [rhs[i]])
    for a, i in enumerate(need_art):
        T[i][nreal + a] = _ONE
        basis[i] = nreal + a

    count = [0]

    # ---------------- phase 1 ----------------
    if n_art:
        obj = [_ZERO] * nreal + [_ONE] * n_art + [_ZERO]
        for i in need_art:
            row = T[i]
            for k in range(ncols + 1):
                if row[k]:
                    obj[k] = obj[k] - row[k]
        _simplex(T, obj, basis, ncols, rule, max_iter, count)
        if -obj[-1] > 0:
            return LPResult("infeasible", None, None, count[0])
        # drive artificial variables out of the basis (they are all at 0)
        keep = []
        for i in range(len(T)):
            if basis[i] >= nreal:
                k = next((k for k in range(nreal) if T[i][k]), -1)
                if k < 0:
                    continue  # redundant row; drop it
                _pivot(T, obj, basis, i, k)
            keep.append(i)
        T = [T[i][:nreal] + [T[i][-1]] for i in keep]
        basis = [basis[i] for i in keep]
        ncols = nreal

    # ---------------- phase 2 ----------------
    cost = [_ZERO] * (nreal + 1)  # minimise -c.x
    for j, v in enumerate(c):
        if v:
            p, q = col_of[j]
            cost[p] = -v
            if q is not None:
                cost[q] = v
    obj = cost[:]
    for i, b in enumerate(basis):
        cb = cost[b]
        if cb:
            row = T[i]
            for k in range(nreal + 1):
                if row[k]:
                    obj[k] = obj[k] - cb * row[k]
    status = _simplex(T, obj, basis, ncols, rule, max_iter, count)
    if status == "unbounded":
        return LPResult("unbounded", None, None, count[0])
    colval = [_ZERO] * nreal
    for i, b in enumerate(basis):
        colval[b] = T[i][-1]
    x = []
    for j in range(n):
        p, q = col_of[j]
        x.append(colval[p] - colval[q] if q is not None else colval[p])
    value = sum((cj * xj for cj, xj in zip(c, x) if cj), _ZERO)
    return LPResult("optimal", x, value, count[0])


def interior_point(A: Sequence, b: Sequence, n: int | None = None
                   ) -> tuple[list, fmpq] | None:
    """Find a point of the open polyhedron ``{x : A x + b > 0}``, exactly.

    Solves ``max t  s.t.  A x + b >= t * 1,  t <= 1`` with ``x`` free.  The
    open polyhedron is non-empty iff the optimum ``t*`` is positive; the
    returned ``x`` then satisfies every inequality with slack at least
    ``t*`` (a "most interior" point, capped at slack 1).

    Parameters
    ----------
    A : matrix of rationals (list of rows)
        Linear parts of the strict inequalities ``a_i . x + b_i > 0``.
    b : vector of rationals
        Constant parts.
    n : int, optional
        Dimension of ``x``; needed only when ``A`` has no rows.

    Returns
    -------
    (x, t) or None
        ``x`` (list of fmpq) with ``min_i (A x + b)_i >= t > 0``, or ``None``
        when the open polyhedron is empty.

    Examples
    --------
    The open triangle ``x > 0, y > 0, x + y < 1``:

    >>> x, t = interior_point([[1, 0], [0, 1], [-1, -1]], [0, 0, 1])
    >>> x, t
    ([1/3, 1/3], 1/3)
    >>> interior_point([[1, 0], [-1, 0]], [0, 0]) is None    # x > 0 and x < 0
    True
    >>> interior_point([], [], n=2)
    ([0, 0], 1)
    """
    A = _mat(A)
    b = _vec(b)
    if len(A) != len(b):
        raise ValueError("A and b have different numbers of rows")
    if n is None:
        if not A:
            raise ValueError("n is required when A has no rows")
        n = len(A[0])
    for row in A:
        if len(row) != n:
            raise ValueError("rows of A must all have length n")
    if not A:
        return [_ZERO] * n, _ONE
    # Substitute t = u + s with s = min(0, min b) so that x = 0, u = 0 is a
    # feasible basic solution (all right-hand sides >= 0; no phase 1 needed).
    s = min(min(b), _ZERO)
    A_ub = [[-v for v in row] + [_ONE] for row in A]
    b_ub = [bi - s for bi in b]
    A_ub.append([_ZERO] * n + [_ONE])
    b_ub.append(_ONE - s)
    res = solve_lp([_ZERO] * n + [_ONE], A_ub, b_ub, free=True)
    if res.status != "optimal":  # pragma: no cover - bounded and feasible by construction
        raise RuntimeError(f"unexpected LP status {res.status}")
    x = res.x[:n]
    t = res.x[n] + s
    if t <= 0:
        return None
    return x, t
