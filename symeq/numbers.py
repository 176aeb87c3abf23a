"""Exact scalars, vectors and matrices over the rationals (python-flint ``fmpq``/``fmpq_mat``).

Numbers from files are JSON integers or strings ``"p/q"``, ``"-3"``, ``"0.25"``, ``"1.5e-3"``;
they are parsed by a small regular grammar, never by ``eval`` or ``sympify``.  A JSON float
is refused: binary floats are not the numbers the user meant.

Examples
--------
>>> parse_number("-2/6")
-1/3
>>> parse_number("0.25")
1/4
>>> parse_number(0.5)
Traceback (most recent call last):
...
symeq.errors.NotExactError: 0.5 is a float; write exact numbers as strings such as "1/2" or "0.5" (at number)
>>> format_number(fmpq(-4, 6))
'-2/3'
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Iterable, Sequence

from flint import fmpq, fmpq_mat, fmpz

from .errors import InputError, NotExactError, ShapeError

__all__ = [
    "fmpq",
    "fmpq_mat",
    "parse_number",
    "format_number",
    "parse_vector",
    "parse_matrix",
    "format_vector",
    "format_matrix",
    "as_fmpq",
    "matrix",
    "identity",
    "zeros",
    "mat_key",
    "mat_rows",
    "is_monomial",
    "monomial_parts",
    "monomial_matrix",
    "block_diag",
    "kron",
    "nullspace",
    "solve_unique",
]

# the exact number syntax of every file (the checker, symeq_check/_numbers.py, reads the same one;
# tests/checker/test_schema_agreement.py): "p/q", an integer or a decimal with an optional exponent, no spaces
_NUMBER = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<p>\d+)/(?P<q>\d+)|(?P<int>\d+)(?:\.(?P<frac>\d*))?"
    r"|\.(?P<frac2>\d+))(?:[eE](?P<exp>[+-]?\d+))?"
)
MAX_EXPONENT = 1000  # the largest decimal exponent read (the checker's too)


def parse_number(value, where: str = "number") -> fmpq:
    """Parse an exact rational from a JSON value (int or string); refuse floats."""
    if isinstance(value, bool):
        raise InputError(f"{value!r} is a boolean, not a number (at {where})")
    if isinstance(value, int):
        return fmpq(value)
    if isinstance(value, fmpq):
        return value
    if isinstance(value, Fraction):
        return fmpq(value.numerator, value.denominator)
    if isinstance(value, fmpz):
        return fmpq(value)
    if isinstance(value, float):
        raise NotExactError(
            f"{value!r} is a float; write exact numbers as strings such as "
            f'"1/2" or "{value!r}" (at {where})'
        )
    if isinstance(value, str):
        m = _NUMBER.fullmatch(value)
        if not m or (m["exp"] is not None and m["p"] is not None):
            raise InputError(f"cannot read {value!r} as an exact number; use \"p/q\", \"-3\" or \"0.25\" (at {where})")
        sign = -1 if m["sign"] == "-" else 1
        if m["p"] is not None:
            q = int(m["q"])
            if q == 0:
                raise InputError(f"zero denominator in {value!r} (at {where})")
            return fmpq(sign * int(m["p"]), q)
        digits = (m["int"] or "") + (m["frac"] or m["frac2"] or "")
        scale = len(m["frac"] or m["frac2"] or "")
        exp = int(m["exp"] or 0) - scale
        if abs(exp) > MAX_EXPONENT:
            raise InputError(f"exponent too large in {value!r} (at {where})")
        n = sign * int(digits or "0")
        return fmpq(n * 10**exp) if exp >= 0 else fmpq(n, 10**-exp)
    raise InputError(f"expected a number, got {type(value).__name__} {value!r} (at {where})")


def as_fmpq(value) -> fmpq:
    """Convert Python ints, Fractions, fmpz/fmpq or exact strings to ``fmpq``."""
    return parse_number(value, "value")


def format_number(q) -> str:
    """Write a rational as the string ``"p/q"`` (or ``"p"`` for integers)."""
    return str(fmpq(q) if not isinstance(q, fmpq) else q)


def parse_vector(values, where: str = "vector", length: int | None = None) -> list[fmpq]:
    if not isinstance(values, (list, tuple)):
        raise InputError(f"expected a list of numbers at {where}, got {type(values).__name__}")
    if length is not None and len(values) != length:
        raise ShapeError(f"{where} has length {len(values)}, expected {length}")
    return [parse_number(v, f"{where}[{i}]") for i, v in enumerate(values)]


def parse_matrix(rows, where: str = "matrix", shape: tuple[int | None, int | None] | None = None) -> fmpq_mat:
    """Parse a list of rows into an ``fmpq_mat``, checking it is rectangular (and its shape)."""
    if not isinstance(rows, (list, tuple)) or not rows:
        raise InputError(f"expected a non-empty list of rows at {where}")
    width = None
    entries = []
    for i, row in enumerate(rows):
        vec = parse_vector(row, f"{where}[{i}]")
        if width is None:
            width = len(vec)
        elif len(vec) != width:
            raise ShapeError(f"{where} is not rectangular: row {i} has {len(vec)} entries, row 0 has {width}")
        entries.extend(vec)
    if width == 0:
        raise ShapeError(f"{where} has empty rows")
    if shape is not None:
        r, c = shape
        if (r is not None and len(rows) != r) or (c is not None and width != c):
            raise ShapeError(
                f"{where} has shape {len(rows)}x{width}, expected {r if r is not None else '?'}x{c if c is not None else '?'}"
            )
    return fmpq_mat(len(rows), width, entries)


def format_vector(v: Iterable) -> list[str]:
    return [format_number(x) for x in v]


def format_matrix(m: fmpq_mat) -> list[list[str]]:
    return [[format_number(x) for x in row] for row in mat_rows(m)]


def matrix(rows: Sequence[Sequence]) -> fmpq_mat:
    """Build an exact matrix from nested sequences of ints, Fractions or exact strings.

    >>> matrix([[1, "1/2"], [0, -1]])
    [1, 1/2]
    [0,  -1]
    """
    return parse_matrix([list(r) for r in rows], "matrix")


def identity(n: int) -> fmpq_mat:
    m = fmpq_mat(n, n)
    for i in range(n):
        m[i, i] = 1
    return m


def zeros(r: int, c: int) -> fmpq_mat:
    return fmpq_mat(r, c)


def mat_rows(m: fmpq_mat) -> list[list[fmpq]]:
    c = m.ncols()
    e = m.entries()
    return [e[i * c:(i + 1) * c] for i in range(m.nrows())]


def mat_key(m: fmpq_mat) -> tuple:
    """A hashable key of an exact matrix (its shape and entries): the integer numerators over the
    common denominator (python ints hash ~10x faster than fmpq entries, which matters for the
    784 x 784 pixel matrices of 28 x 28 images)."""
    num, den = m.numer_denom()
    return (m.nrows(), m.ncols(), int(den), tuple(int(x) for x in num.entries()))


def monomial_parts(m: fmpq_mat) -> tuple[list[int], list[fmpq]] | None:
    """For a monomial matrix return (column of each row's nonzero, its value); else None.

    >>> monomial_parts(matrix([[0, 2], [-1, 0]]))
    ([1, 0], [2, -1])
    >>> monomial_parts(matrix([[1, 1], [0, 1]])) is None
    True
    """
    parts = getattr(m, "parts", None)  # a MonomialMatrix remembers them (monomial_matrix)
    if parts is not None:
        return list(parts[0]), list(parts[1])
    n = m.nrows()
    if n != m.ncols():
        return None
    e = m.entries()
    nz = [i for i, x in enumerate(e) if x]  # row-major: one nonzero per row, in distinct columns
    if len(nz) != n:
        return None
    cols = [i % n for i in nz]
    if [i // n for i in nz] != list(range(n)) or len(set(cols)) != n:
        return None
    return cols, [e[i] for i in nz]


def is_monomial(m: fmpq_mat) -> bool:
    return monomial_parts(m) is not None


class MonomialMatrix(fmpq_mat):
    """An exact matrix built by :func:`monomial_matrix`, which remembers its monomial ``parts``
    ``(columns, values)`` so that :func:`monomial_parts` does not scan its n^2 entries again (a
    1024 x 1024 latent action: 0.4 s a scan).  ``parts`` is None when the entries do not make it
    monomial (a zero value, a repeated column) or once an entry is set afterwards."""

    __slots__ = ("parts",)

    def __setitem__(self, key, value):
        self.parts = None
        fmpq_mat.__setitem__(self, key, value)


def monomial_matrix(cols: Sequence[int], vals: Sequence) -> fmpq_mat:
    """The matrix with entry ``vals[i]`` at ``(i, cols[i])``.

    >>> m = monomial_matrix([1, 0], [2, -1])
    >>> m.parts, monomial_parts(m) == monomial_parts(fmpq_mat(m))
    (([1, 0], [2, -1]), True)
    """
    n = len(cols)
    m = MonomialMatrix(n, n)
    for i, (j, v) in enumerate(zip(cols, vals)):
        fmpq_mat.__setitem__(m, (i, j), v)
    cols = [int(j) for j in cols]
    vals = [m[i, j] for i, j in enumerate(cols)]
    m.parts = (cols, vals) if len(set(cols)) == n and all(vals) else None
    return m


def block_diag(*blocks: fmpq_mat) -> fmpq_mat:
    r = sum(b.nrows() for b in blocks)
    c = sum(b.ncols() for b in blocks)
    m = fmpq_mat(r, c)
    i0 = j0 = 0
    for b in blocks:
        for i in range(b.nrows()):
            for j in range(b.ncols()):
                x = b[i, j]
                if x != 0:
                    m[i0 + i, j0 + j] = x
        i0 += b.nrows()
        j0 += b.ncols()
    return m


def kron(A: fmpq_mat, B: fmpq_mat) -> fmpq_mat:
    """The Kronecker product A (x) B (built from the nonzero entries only).

    >>> kron(identity(2), matrix([[1, 2]])).nrows(), kron(identity(2), matrix([[1, 2]])).ncols()
    (2, 4)
    """
    ra, ca, rb, cb = A.nrows(), A.ncols(), B.nrows(), B.ncols()
    M = fmpq_mat(ra * rb, ca * cb)
    cB = B.ncols()
    nzb = [(i // cB, i % cB, x) for i, x in enumerate(B.entries()) if x != 0]
    cA = A.ncols()
    for t, a in enumerate(A.entries()):
        if a == 0:
            continue
        i, j = t // cA, t % cA
        for k, l, b in nzb:
            M[i * rb + k, j * cb + l] = a * b
    return M


def nullspace(m: fmpq_mat) -> list[list[fmpq]]:
    """A basis of {v : m v = 0} over the rationals, from the reduced row echelon form.

    >>> nullspace(matrix([[1, 2], [2, 4]]))
    [[-2, 1]]
    """
    rref, rank = m.rref()
    ncols = m.ncols()
    rows = mat_rows(rref)[:rank]
    pivots = []
    for row in rows:
        for j, x in enumerate(row):
            if x != 0:
                pivots.append(j)
                break
    free = [j for j in range(ncols) if j not in set(pivots)]
    basis = []
    for f in free:
        v = [fmpq(0)] * ncols
        v[f] = fmpq(1)
        for row, p in zip(rows, pivots):
            v[p] = -row[f] / row[p]
        basis.append(v)
    return basis


def solve_unique(a: fmpq_mat, b: fmpq_mat) -> fmpq_mat | None:
    """Solve ``a X = b`` exactly when ``a`` is square and invertible; None when singular."""
    if a.nrows() != a.ncols():
        raise ShapeError("solve_unique needs a square matrix")
    try:
        return a.solve(b)
    except ZeroDivisionError:
        return None


# ------------------------------------------------------------ the checker's accelerator (symeq check only)
#
# symeq_check imports only the standard library; ``symeq check`` (symeq/cli/verify.py) installs these two as
# its rank step's accelerator (symeq_check/accel.py, docs/certificates.md).

#: FLINT threads for the checker's elimination (the prover's default, symeq/fibre/jacobian.py)
CHECK_RANK_THREADS = 2


def _with_threads(fn):
    import flint

    old = flint.ctx.threads
    try:
        flint.ctx.threads = CHECK_RANK_THREADS
        return fn()
    finally:
        flint.ctx.threads = old


def nmod_rank(rows, q: int) -> int:
    """Rank modulo the prime q < 2^64 of rows (lists of residues in [0, q)) by python-flint's ``nmod_mat``."""
    from flint import nmod_mat

    if not rows:
        return 0
    return _with_threads(lambda: nmod_mat(rows, q).rank())


def nmod_reduced_rank(C, A, K: int, q: int) -> tuple[int, int]:
    """``(rank C, rank of [Q A_1; ...; Q A_K])`` modulo the prime q by python-flint's ``nmod_mat``.

    C: N rows of the last layer's columns (its input at each point, and 1 for its bias), A: N rows of the
    other columns, the K outputs of a point side by side (row n = A_1[n], ..., A_K[n]).  Q is the left null
    space basis e_n - sum_i g_ni e_{S_i} of C read off the echelon form of C^T (S its pivot columns):
    Q A = A[rest] - g A[S], one product, then the rows n of the result cut into K rows of len(A[0]) / K
    (docs/identifiability.md, the structured rank)."""
    from flint import nmod_mat

    def run() -> tuple[int, int]:
        N, m = len(C), len(C[0])
        E, rc = nmod_mat([[C[n][i] for n in range(N)] for i in range(m)], q).rref()
        S, j = [], 0
        for i in range(rc):
            while int(E[i, j]) == 0:
                j += 1
            S.append(j)
            j += 1
        inS = set(S)
        rest = [n for n in range(N) if n not in inS]
        if not rest:
            return rc, 0
        g = nmod_mat([[int(E[i, n]) for i in range(rc)] for n in rest], q)
        R = nmod_mat([A[n] for n in rest], q) - g * nmod_mat([A[n] for n in S], q)
        width = len(A[0]) // K
        return rc, nmod_mat(len(rest) * K, width, R.entries(), q).rank()

    return _with_threads(run)


def install_check_accelerator(install) -> None:
    """Hand :func:`nmod_rank` and :func:`nmod_reduced_rank` to the checker's hook ``install``
    (``symeq_check.accel.install``; passed in, so that this module does not import the checker)."""
    install(nmod_rank, nmod_reduced_rank, name="python-flint's nmod_mat")
