"""Exact matrix algebra on Fractions: dense products, Kronecker products, invertibility; sparse rows
(monomial actions applied as column permutations and scalings, never dense products); the closure of the
generators' tuples and the homomorphism check; and the nonzero-minor tests of the identifiability checks.
"""
from __future__ import annotations

from fractions import Fraction
from math import gcd

from ._numbers import Matrix, Sparse
from .report import CheckReport


def _kron(a: Matrix, b: Matrix) -> Matrix:
    return tuple(tuple(x * y for x in ra for y in rb) for ra in a for rb in b)


def _transpose(a: Matrix) -> Matrix:
    return tuple(zip(*a))


# ----------------------------------------------------------------------------- exact algebra

def _matmul(a: Matrix, b: Matrix) -> Matrix:
    cols = tuple(zip(*b))
    return tuple(tuple(sum(x * y for x, y in zip(row, col)) for col in cols) for row in a)


def _matvec(a: Matrix, x) -> tuple[Fraction, ...]:
    return tuple(sum(w * v for w, v in zip(row, x)) for row in a)


def _identity(n: int) -> Matrix:
    return tuple(tuple(Fraction(int(i == j)) for j in range(n)) for i in range(n))


def _invertible(a: Matrix) -> bool:
    nonzero = [[c for c, x in enumerate(r) if x] for r in a]
    if all(len(c) == 1 for c in nonzero) and len({c[0] for c in nonzero}) == len(a):
        return True  # monomial (e.g. a permutation of pixels): no elimination needed
    rows = [list(r) for r in a]
    for c in range(len(rows)):
        pivot = next((r for r in range(c, len(rows)) if rows[r][c]), None)
        if pivot is None:
            return False
        rows[c], rows[pivot] = rows[pivot], rows[c]
        for r in range(c + 1, len(rows)):
            f = rows[r][c] / rows[c][c]
            rows[r] = [x - f * y for x, y in zip(rows[r], rows[c])]
    return True


# ----------------------------------------------------------------------------- sparse algebra
# A sparse matrix is a tuple of rows, each a tuple of (column, nonzero value) sorted by column: a
# canonical form, so that == and hashing compare matrices. A monomial matrix has one pair per row.

def _sparse(a: Matrix) -> Sparse:
    """The sparse rows of a dense matrix.

    Examples
    --------
    >>> _sparse(((Fraction(0), Fraction(2)), (Fraction(-1), Fraction(0))))
    (((1, Fraction(2, 1)),), ((0, Fraction(-1, 1)),))
    """
    return tuple(tuple((c, x) for c, x in enumerate(row) if x) for row in a)


def _sparse_identity(n: int) -> Sparse:
    one = Fraction(1)
    return tuple(((j, one),) for j in range(n))


def _smul(a: Sparse, b: Sparse) -> Sparse:
    """The product a b; a row of a with a single entry (monomial) costs one scaled row of b."""
    out = []
    for row in a:
        if len(row) == 1:
            k, x = row[0]
            out.append(b[k] if x == 1 else tuple((c, x * y) for c, y in b[k]))
            continue
        acc: dict = {}
        for k, x in row:
            for c, y in b[k]:
                acc[c] = acc.get(c, 0) + x * y
        out.append(tuple((c, v) for c, v in sorted(acc.items()) if v))
    return tuple(out)


def _smatvec(a: Sparse, x) -> tuple[Fraction, ...]:
    zero = Fraction(0)
    return tuple(sum((v * x[c] for c, v in row), zero) for row in a)


def _times_sparse(w: Matrix, p: Sparse) -> Matrix:
    """W P for dense W and sparse P; for a monomial P a permutation and scaling of W's columns."""
    cols: list = [[] for _ in range(len(p))]  # column c of P as (row, value) pairs
    for k, row in enumerate(p):
        for c, x in row:
            cols[c].append((k, x))
    if all(len(col) == 1 for col in cols):
        src = [col[0][0] for col in cols]
        fac = [col[0][1] for col in cols]
        if all(f == 1 for f in fac):
            return tuple(tuple(r[k] for k in src) for r in w)
        return tuple(tuple(r[k] if f == 1 else r[k] * f for k, f in zip(src, fac)) for r in w)
    zero = Fraction(0)
    return tuple(tuple(sum((r[k] * x for k, x in col), zero) for col in cols) for r in w)


def _sparse_times(q: Sparse, w: Matrix) -> Matrix:
    """Q W for sparse Q and dense W; for a monomial Q a permutation and scaling of W's rows."""
    out, zero, width = [], Fraction(0), len(w[0])
    for row in q:
        if len(row) == 1:
            k, x = row[0]
            out.append(w[k] if x == 1 else tuple(x * y for y in w[k]))
        else:
            out.append(tuple(sum((x * w[k][c] for k, x in row), zero) for c in range(width)))
    return tuple(out)


# ----------------------------------------------------------------------------- verification

def _monomial_failure(m: Sparse, relu: bool) -> str | None:
    """Why the square sparse matrix m is not monomial (positive for relu), or None."""
    seen = set()
    for r, row in enumerate(m):
        if len(row) != 1:
            return f"row {r + 1} has {len(row)} nonzero entries (a monomial matrix needs exactly 1)"
        c, x = row[0]
        if relu and x < 0:
            return f"row {r + 1} has a negative entry (a relu layer needs a positive monomial matrix)"
        if c in seen:
            return f"column {c + 1} does not have exactly 1 nonzero entry (not a monomial matrix)"
        seen.add(c)
    return None


def _close_tuples(report: CheckReport, tuples: list[tuple], identity: tuple, mul, cap: int) -> dict | None:
    """The tuples the generators ``tuples`` generate under the factor-wise product ``mul`` (breadth first).

    Returns the elements as dict keys, or None after appending a reason when there are more than ``cap``.
    Shared by the dense/sparse and the channel-pixel homomorphism checks.
    """
    seen, frontier = {identity: None}, [identity]
    while frontier:
        nxt = []
        for t in frontier:
            for g in tuples:
                prod = tuple(mul(a, b) for a, b in zip(t, g))
                if prod not in seen:
                    seen[prod] = None
                    if len(seen) > max(cap, 1):
                        report.reasons.append(f"homomorphism: the group generated by the actions has "
                                              f"more than max_group_size={cap} elements")
                        return None
                    nxt.append(prod)
        frontier = nxt
    return seen


def _homomorphism(report: CheckReport, tuples: list[tuple[Sparse, ...]], cap: int) -> None:
    """Enumerate the group the tuples generate (sparse products) and check that rho_in is injective."""
    if not tuples:
        report.checks.append("homomorphism: trivial group (no generators)")
        return
    n_layers = len(tuples[0]) - 1
    seen = _close_tuples(report, tuples, tuple(_sparse_identity(len(m)) for m in tuples[0]), _smul, cap)
    if seen is None:
        return
    by_input: dict[Sparse, tuple] = {}
    for t in seen:
        other = by_input.setdefault(t[0], t)
        if other != t:
            i = next(i for i in range(1, n_layers + 1) if other[i] != t[i])
            where = "the output" if i == n_layers else f"hidden layer {i}"
            report.reasons.append(f"homomorphism: two group elements with the same input matrix act "
                                  f"differently on {where}; the actions do not respect a relation of "
                                  f"the group")
            return
    report.checks.append(f"homomorphism: group of order {len(seen)}, all {max(n_layers - 1, 0)} "
                         f"latent actions consistent")


def _int_columns(cols):
    """Columns of Fractions scaled to integers (a nonzero column scaling keeps every minor's zeroness)."""
    out = []
    for col in cols:
        den = 1
        for x in col:
            den = den * x.denominator // gcd(den, x.denominator)
        out.append([int(x * den) for x in col])
    return out


def _bareiss_nonzero(m) -> bool:
    """det(m) != 0 for a square integer matrix (fraction-free elimination, exact)."""
    a = [list(r) for r in m]
    n, prev = len(a), 1
    for k in range(n):
        piv = next((r for r in range(k, n) if a[r][k] != 0), None)
        if piv is None:
            return False
        a[k], a[piv] = a[piv], a[k]
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                a[i][j] = (a[i][j] * a[k][k] - a[i][k] * a[k][j]) // prev
        prev = a[k][k]
    return True


def _minor_nonzero(m) -> bool:
    """det(m) != 0 for a square integer matrix: first modulo the prime 2^61 - 1 (a nonzero residue
    proves a nonzero determinant, and is fast), else exactly by Bareiss elimination."""
    p = 2305843009213693951
    a = [[x % p for x in r] for r in m]
    n = len(a)
    for k in range(n):
        piv = next((r for r in range(k, n) if a[r][k]), None)
        if piv is None:
            return _bareiss_nonzero(m)
        a[k], a[piv] = a[piv], a[k]
        inv = pow(a[k][k], -1, p)
        for i in range(k + 1, n):
            f = a[i][k] * inv % p
            if f:
                rk, ri = a[k], a[i]
                a[i] = [(ri[j] - f * rk[j]) % p for j in range(n)]
    return True
