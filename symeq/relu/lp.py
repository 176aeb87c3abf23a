"""Exact linear programming over the rationals.

A small dense two-phase primal simplex method on a condensed (Tucker)
tableau of python-flint ``fmpq`` numbers.  Every number is an exact rational; no floating point is
used anywhere, so the verdicts ("optimal", "infeasible", "unbounded") and the
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

Time budget.  Both take a :class:`~symeq.budget.Deadline` (``deadline=``); a caller that runs
LPs deep inside other code (region enumeration, the fibre decisions) opens
:func:`deadline_scope` instead, and every LP started inside the scope checks that deadline too.
The simplex checks them every :data:`CHECK_EVERY` pivots and while building its tableau, and
raises :class:`~symeq.errors.BudgetExceeded` (exit 3: undetermined) past the budget.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple, Sequence

from flint import fmpq, fmpz

from ..errors import InputError, NotExactError


class InexactInput(NotExactError, TypeError):
    """A float or other non-rational number given to the exact LP (also a TypeError, as before)."""

__all__ = [
    "LPResult",
    "LPIterationLimit",
    "solve_lp",
    "interior_point",
    "as_fmpq",
    "deadline_scope",
    "scoped",
    "CHECK_EVERY",
]

#: the simplex checks its deadlines every this many pivots (a pivot is O(rows x nonzeros))
CHECK_EVERY = 8

_SCOPE: list = []  # the deadlines of the open deadline_scope blocks (innermost last)


@contextmanager
def deadline_scope(deadline):
    """Make every LP started inside the block check ``deadline`` (None: the block does nothing).

    For callers that reach the LP through code that takes no deadline of its own.

    >>> from symeq.budget import Deadline
    >>> from symeq.errors import BudgetExceeded
    >>> with deadline_scope(Deadline(0)):
    ...     try:
    ...         solve_lp([1, 1], [[1, 2], [3, 1]], [4, 6])
    ...     except BudgetExceeded as e:
    ...         print("stopped")
    stopped
    >>> solve_lp([1, 1], [[1, 2], [3, 1]], [4, 6]).status      # outside: no budget
    'optimal'
    """
    if deadline is None:
        yield
        return
    _SCOPE.append(deadline)
    try:
        yield
    finally:
        _SCOPE.remove(deadline)


def scoped(iterator, deadline):
    """Iterate ``iterator`` with ``deadline`` in scope while it computes each item (a generator).

    >>> list(scoped(iter([1, 2]), None))
    [1, 2]
    """
    it = iter(iterator)
    while True:
        with deadline_scope(deadline):
            try:
                item = next(it)
            except StopIteration:
                return
        yield item


def _deadlines(deadline) -> tuple:
    """The deadlines an LP checks: its own and those of the open scopes."""
    if deadline is None:
        return tuple(_SCOPE)
    return (deadline, *_SCOPE)


def _check(deadlines: tuple, what: str) -> None:
    for d in deadlines:
        d.check(what)

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
        ``"optimal"``, ``"infeasible"`` or ``"unbounded"`` (internally also
        ``"feasible"``: a feasible vertex from an early-stopped phase 2).
    x : list of fmpq or None
        An optimal vertex (``None`` unless ``"optimal"``/``"feasible"``).
    value : fmpq or None
        Its value ``c.x``.
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
        raise InexactInput("floats are not accepted by the exact LP; use fmpq/Fraction/int")
    # other exact types (e.g. sympy Rational) expose numerator/denominator
    num = getattr(v, "numerator", None)
    den = getattr(v, "denominator", None)
    if num is not None and den is not None and not isinstance(v, float):
        num = num() if callable(num) else num
        den = den() if callable(den) else den
        return fmpq(int(num), int(den))
    raise InexactInput(f"cannot convert {type(v).__name__} to an exact rational")


def _vec(v) -> list:
    return [as_fmpq(a) for a in v]


def _mat(M) -> list:
    return [_vec(row) for row in M]


# --------------------------------------------------------------------------
# tableau machinery (condensed / Tucker form)
#
# Each row r is the equation  x_{B(r)} + sum_s T[r][s] x_{N(s)} = beta[r]  for
# the basic variable labelled row_lab[r]; the columns are the nonbasic
# variables, labelled col_lab[s].  The last row is the objective, written as
# z + sum_s D[s] x_{N(s)} = Z, which is *minimised*: a column may enter when
# D[s] > 0.  Only nonbasic columns are stored, so a pivot costs
# O(rows * nonbasic) -- for the LPs of region enumeration that is
# O(constraints * dimension) rather than O(constraints^2).
# --------------------------------------------------------------------------


def _pivot(T: list, beta: list, row_lab: list, col_lab: list, r: int, s: int) -> None:
    """Exchange basic variable of row ``r`` with nonbasic variable of column ``s``."""
    row = T[r]
    inv = _ONE / row[s]
    if inv != _ONE:
        row = [v * inv if v else v for v in row]
    row[s] = inv
    br = beta[r] * inv
    nz = [j for j, v in enumerate(row) if v and j != s]
    for i, Ti in enumerate(T):
        if i == r:
            continue
        f = Ti[s]
        if f:
            for j in nz:
                Ti[j] = Ti[j] - f * row[j]
            Ti[s] = -f * inv
            if br:
                beta[i] = beta[i] - f * br
    T[r] = row
    beta[r] = br
    row_lab[r], col_lab[s] = col_lab[s], row_lab[r]


def _simplex(T: list, beta: list, row_lab: list, col_lab: list, live: list,
             rule: str, max_iter: int, count: list, on_pivot=None, stop_below=None,
             deadlines: tuple = ()) -> str:
    """Minimise the objective (last row of ``T``).  Returns "optimal"/"unbounded".

    ``live[s]`` False excludes column ``s`` from entering.  ``count[0]``
    accumulates pivots.  ``on_pivot(s)`` is called after each pivot.  With
    ``stop_below``, returns "stopped" as soon as the objective value is
    ``< stop_below`` (a feasible, not necessarily optimal, vertex).
    ``deadlines`` are checked every :data:`CHECK_EVERY` pivots.
    """
    D = T[-1]
    m = len(T) - 1
    while True:
        if deadlines and count[0] % CHECK_EVERY == 0:
            _check(deadlines, f"solving an exact LP ({len(T) - 1} rows, {len(D)} columns, "
                              f"{count[0]} pivots so far)")
        if stop_below is not None and beta[-1] < stop_below:
            return "stopped"
        s = -1
        if rule == "bland":  # smallest label among improving columns
            best_lab = None
            for k, dk in enumerate(D):
                if dk > 0 and live[k] and (best_lab is None or col_lab[k] < best_lab):
                    s, best_lab = k, col_lab[k]
        else:  # dantzig: largest coefficient, ties -> smallest label
            best = _ZERO
            for k, dk in enumerate(D):
                if live[k] and (dk > best or (s >= 0 and dk == best and col_lab[k] < col_lab[s])):
                    s, best = k, dk
        if s < 0:
            return "optimal"
        # ratio test; ties -> smallest basic label (Bland)
        r = -1
        best_ratio = None
        for i in range(m):
            a = T[i][s]
            if a > 0:
                ratio = beta[i] / a
                if (best_ratio is None or ratio < best_ratio
                        or (ratio == best_ratio and row_lab[i] < row_lab[r])):
                    best_ratio, r = ratio, i
        if r < 0:
            return "unbounded"
        if count[0] >= max_iter:
            raise LPIterationLimit(f"simplex exceeded {max_iter} pivots (rule={rule!r})")
        _pivot(T, beta, row_lab, col_lab, r, s)
        D = T[-1]
        count[0] += 1
        if on_pivot is not None:
            on_pivot(s)


def solve_lp(c: Sequence, A_ub: Sequence | None = None, b_ub: Sequence | None = None,
             A_eq: Sequence | None = None, b_eq: Sequence | None = None,
             free: bool | Sequence[bool] = False, rule: str = "bland",
             max_iter: int = 100000, deadline=None) -> LPResult:
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
    deadline : :class:`~symeq.budget.Deadline`, optional
        Checked every :data:`CHECK_EVERY` pivots (as are those of open :func:`deadline_scope`
        blocks).

    Returns
    -------
    LPResult
        ``status`` is ``"optimal"`` (with an optimal vertex ``x`` and its
        ``value``), ``"infeasible"`` or ``"unbounded"``.

    Raises
    ------
    LPIterationLimit
        If more than ``max_iter`` pivots are needed.
    BudgetExceeded
        Past a deadline's budget.

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
        raise InputError("rule must be 'bland' or 'dantzig'")
    c = _vec(c)
    n = len(c)
    A_ub = _mat(A_ub) if A_ub is not None else []
    b_ub = _vec(b_ub) if b_ub is not None else []
    A_eq = _mat(A_eq) if A_eq is not None else []
    b_eq = _vec(b_eq) if b_eq is not None else []
    if len(A_ub) != len(b_ub) or len(A_eq) != len(b_eq):
        raise InputError("constraint matrix and right-hand side lengths differ")
    for row in A_ub + A_eq:
        if len(row) != n:
            raise InputError("constraint row length differs from len(c)")
    if isinstance(free, bool):
        free_mask = [free] * n
    else:
        free_mask = [bool(f) for f in free]
        if len(free_mask) != n:
            raise InputError("free mask length differs from len(c)")
    return _solve(c, A_ub, b_ub, A_eq, b_eq, free_mask, rule, max_iter, deadline=deadline)


def _solve(c: list, A_ub: list, b_ub: list, A_eq: list, b_eq: list, free_mask: list,
           rule: str = "bland", max_iter: int = 100000, stop_above=None, deadline=None) -> LPResult:
    """:func:`solve_lp` on already converted (fmpq) data.

    With ``stop_above``, phase 2 stops at the first vertex whose value exceeds
    it; the status is then "feasible" (the vertex need not be optimal).
    ``deadline`` (and those of open :func:`deadline_scope` blocks) are checked before the
    tableau is built and every :data:`CHECK_EVERY` pivots.
    """
    deadlines = _deadlines(deadline)
    n = len(c)
    if deadlines:
        _check(deadlines, f"setting up an exact LP ({len(A_ub) + len(A_eq)} constraints, {n} variables)")
    tab = _Tableau.build(A_ub, b_ub, A_eq, b_eq, free_mask[:n])
    count = [0]
    if tab.n_art and not _phase_one(tab, rule, max_iter, count, deadlines):
        return LPResult("infeasible", None, None, count[0])
    return _phase_two(tab, c, rule, max_iter, count, stop_above, deadlines)


@dataclass
class _Tableau:
    """The simplex tableau of :func:`_solve`: rows ``T`` with right-hand sides ``beta``, the labels of the
    basic variables (``row_lab``) and of the columns (``col_lab``, ``live`` the columns that may enter).

    Labels: structural 0..nstruct-1 (a free variable j has two, p and q for its negative part: ``col_of``),
    the slack of ub row i is nstruct + i, artificials from ``art0`` = nstruct + m_ub on (they only ever
    leave the basis)."""

    col_of: list
    nstruct: int
    art0: int
    n_art: int
    T: list
    beta: list
    row_lab: list
    col_lab: list
    live: list

    @property
    def ncols(self) -> int:
        return len(self.col_lab)

    @classmethod
    def build(cls, A_ub: list, b_ub: list, A_eq: list, b_eq: list, free_mask: list) -> "_Tableau":
        col_of: list[tuple[int, int | None]] = []
        nstruct = 0
        for free in free_mask:
            col_of.append((nstruct, nstruct + 1) if free else (nstruct, None))
            nstruct += 2 if free else 1
        m_ub, m_eq = len(A_ub), len(A_eq)
        art0 = nstruct + m_ub
        col_lab = list(range(nstruct))
        slack_col = {}
        for i in (i for i in range(m_ub) if b_ub[i] < 0):
            slack_col[i] = len(col_lab)
            col_lab.append(nstruct + i)
        ncols = len(col_lab)

        def expand(row, sign):
            out = [_ZERO] * ncols
            for j, v in enumerate(row):
                if v:
                    p, q = col_of[j]
                    out[p] = v if sign > 0 else -v
                    if q is not None:
                        out[q] = -out[p]
            return out

        T, beta, row_lab, n_art = [], [], [], 0
        for i in range(m_ub):
            if b_ub[i] < 0:  # -a x - s_i + art = -b
                row = expand(A_ub[i], -1)
                row[slack_col[i]] = -_ONE
                T.append(row)
                beta.append(-b_ub[i])
                row_lab.append(art0 + n_art)
                n_art += 1
            else:  # a x + s_i = b
                T.append(expand(A_ub[i], 1))
                beta.append(b_ub[i])
                row_lab.append(nstruct + i)
        for i in range(m_eq):
            sign = -1 if b_eq[i] < 0 else 1
            T.append(expand(A_eq[i], sign))
            beta.append(b_eq[i] if sign > 0 else -b_eq[i])
            row_lab.append(art0 + n_art)
            n_art += 1
        return cls(col_of, nstruct, art0, n_art, T, beta, row_lab, col_lab, [True] * ncols)


def _phase_one(tab: _Tableau, rule: str, max_iter: int, count: list, deadlines) -> bool:
    """Phase 1 of :func:`_solve`: minimise the sum of the artificials, then drive the remaining (zero) ones
    out of the basis and drop their columns.  False when the LP is infeasible."""
    T, beta, row_lab, col_lab, live, art0, ncols = tab.T, tab.beta, tab.row_lab, tab.col_lab, tab.live, tab.art0, \
        tab.ncols
    D = [_ZERO] * ncols
    Z = _ZERO
    for r, lab in enumerate(row_lab):
        if lab >= art0:
            Z += beta[r]
            for k, v in enumerate(T[r]):
                if v:
                    D[k] += v
    T.append(D)
    beta.append(Z)

    def kill(s):  # an artificial that leaves the basis never comes back
        if col_lab[s] >= art0:
            live[s] = False

    _simplex(T, beta, row_lab, col_lab, live, rule, max_iter, count, kill, deadlines=deadlines)
    if beta[-1] > 0:
        return False
    T.pop()
    beta.pop()
    r = 0
    while r < len(T):
        if row_lab[r] >= art0:
            s = next((k for k in range(ncols) if live[k] and T[r][k]), -1)
            if s < 0:  # redundant equation: drop it
                del T[r], beta[r], row_lab[r]
                continue
            _pivot(T, beta, row_lab, col_lab, r, s)
            live[s] = False
        r += 1
    keep = [k for k in range(ncols) if live[k]]
    if len(keep) < ncols:
        tab.T = [[row[k] for k in keep] for row in T]
        tab.col_lab = [col_lab[k] for k in keep]
        tab.live = [True] * len(keep)
    return True


def _phase_two(tab: _Tableau, c: list, rule: str, max_iter: int, count: list, stop_above, deadlines) -> LPResult:
    """Phase 2 of :func:`_solve`: minimise -c.x from the feasible basis, then read x off the tableau."""
    T, beta, row_lab, col_lab, col_of, nstruct = tab.T, tab.beta, tab.row_lab, tab.col_lab, tab.col_of, tab.nstruct
    cost: dict = {}
    for j, v in enumerate(c):
        if v:
            p, q = col_of[j]
            cost[p] = -v
            if q is not None:
                cost[q] = v
    D = [-cost.get(lab, _ZERO) for lab in col_lab]
    Z = _ZERO
    for r, lab in enumerate(row_lab):
        cb = cost.get(lab)
        if cb:
            Z += cb * beta[r]
            for k, v in enumerate(T[r]):
                if v:
                    D[k] += cb * v
    T.append(D)
    beta.append(Z)
    status = _simplex(T, beta, row_lab, col_lab, tab.live, rule, max_iter, count,
                      stop_below=None if stop_above is None else -stop_above, deadlines=deadlines)
    if status == "unbounded":
        return LPResult("unbounded", None, None, count[0])
    val = [_ZERO] * nstruct
    for r, lab in enumerate(row_lab):
        if lab < nstruct:
            val[lab] = beta[r]
    x = []
    for p, q in col_of:
        x.append(val[p] - val[q] if q is not None else val[p])
    value = _ZERO
    for cj, xj in zip(c, x):
        if cj and xj:
            value += cj * xj
    return LPResult("feasible" if status == "stopped" else "optimal", x, value, count[0])


def interior_point(A: Sequence, b: Sequence, n: int | None = None, deadline=None
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
    deadline : :class:`~symeq.budget.Deadline`, optional
        Checked while the LP runs (see :func:`solve_lp`).

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
        raise InputError("A and b have different numbers of rows")
    if n is None:
        if not A:
            raise InputError("n is required when A has no rows")
        n = len(A[0])
    for row in A:
        if len(row) != n:
            raise InputError("rows of A must all have length n")
    return _interior_point(A, b, n, deadline=deadline)


def _interior_point(A: list, b: list, n: int, origin: list | None = None,
                    early: bool = False, deadline=None) -> tuple[list, fmpq] | None:
    """:func:`interior_point` on fmpq data (no conversion, no checks).

    ``origin``: a point to start the simplex from (the problem is solved in
    the shifted variable ``x - origin``); a good guess saves pivots.
    ``early``: stop at the first vertex with ``t > 0`` instead of maximising.
    """
    if not A:
        return ([_ZERO] * n if origin is None else list(origin)), _ONE
    if origin is not None:
        b = [bi + sum((a * o for a, o in zip(row, origin) if a and o), _ZERO)
             for row, bi in zip(A, b)]
    # Substitute t = u + s with s = min(0, min b): then x = 0, u = 0 is a
    # feasible basic solution (all right-hand sides >= 0, so no phase 1), and
    # u >= 0 loses nothing because t = min(min b, 1) >= s is feasible at x = 0.
    s = min(min(b), _ZERO)
    A_ub = [[-v for v in row] + [_ONE] for row in A]
    b_ub = [bi - s for bi in b]
    A_ub.append([_ZERO] * n + [_ONE])
    b_ub.append(_ONE - s)
    res = _solve([_ZERO] * n + [_ONE], A_ub, b_ub, [], [], [True] * n + [False],
                 stop_above=-s if early else None, deadline=deadline)
    if res.status == "unbounded":  # pragma: no cover - bounded by construction
        raise RuntimeError("internal error: unexpected unbounded LP")
    t = res.x[n] + s
    if t <= 0:
        return None
    x = res.x[:n]
    if origin is not None:
        x = [xi + o for xi, o in zip(x, origin)]
    return x, t
