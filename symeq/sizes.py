"""Size estimates and the guards that refuse a computation *before* it starts.

Expanding a polynomial map, building a fibre ideal, enumerating an orbit or the linear regions of
a ReLU network can each grow past any memory: the number of monomials of a polynomial of degree
``D`` in ``n`` variables is up to ``C(n + D, D)``, and a fibre ideal's unknowns enter with degree
growing layer by layer.  Every such routine first *estimates* its size here (an upper bound, cheap
to compute from degrees and widths) and raises a :class:`~symeq.errors.LimitExceeded` subclass
(exit code 2) naming the limit, the estimate and the option that raises it.  The work itself then
runs inside the time budget (:class:`~symeq.budget.Deadline`).

The limits
----------
======================  =====================================  ========================  =========
limit                   what it bounds                         option                    default
======================  =====================================  ========================  =========
``degree``              an activation's degree or Taylor order ``--max-degree``          1000
``total_degree``        degree of a model's polynomial map f   ``--max-total-degree``    10^6
``width``               neurons of one layer, a model's inputs ``--max-width``           100000
``monomials``           terms of one expansion (estimated)     ``--max-monomials``       250000
``orbit``               elements of the finite latent group    ``--max-orbit``           200000
memory                  bytes of one expansion (estimated)     ``--memory GB``           75 % of RAM
======================  =====================================  ========================  =========

The memory guard
----------------
A raised ``--max-monomials`` lets an expansion through that the machine cannot hold: the address
space cap of :mod:`symeq.procs` covers engine child processes only, and the expansion runs inside
symeq.  :func:`guard_expansion` therefore also estimates the bytes the expansion needs
(:func:`expansion_bytes`, measured: a fibre ideal, whose generators are read through exponent
dictionaries, costs up to about 93 bytes per term and variable of the ring at its peak, a
numeric-weight expansion that stays inside flint about 7) and refuses it with
:class:`~symeq.errors.MemoryLimit` (exit 2, like every size limit) when that exceeds the memory
budget of :func:`symeq.procs.memory_cap` (``--memory GB``, default 75 % of the physical memory,
lowered by an inherited ``ulimit -v``).

The current limits live in :data:`LIMITS` (process-wide; the command line sets them from its
``--max-*`` options, a program can use :func:`limits` as a context manager).

How the number of monomials is bounded
--------------------------------------
A pre-activation ``z = sum_j w_j y_j + b`` with ``t`` terms, raised to the power ``k``, has at
most ``C(t + k - 1, k)`` terms (the multisets of ``k`` terms of ``z``), and never more than the
number of monomials of its degree in the variables of the ring, ``C(v + k deg z, k deg z)``.
:func:`expansion_size` propagates these bounds through the layers: with symbolic weights (the
fibre ideal) the degree grows by one per layer in the unknowns before the activation multiplies it,
``deg_l = d_l (deg_{l-1} + 1)``; with numeric weights only the ``x`` variables count.

Examples
--------
>>> monomials_upto(6, 9)          # monomials of degree <= 9 in 6 variables
5005
>>> power_terms(7, 3, 13, 2)      # (7 independent terms)^3
84
>>> from symeq.examples import builtin_example
>>> est = expansion_size(builtin_example(), symbolic=True)
>>> est.max_terms > LIMITS.monomials   # the built-in example's fibre ideal is far too large
True
>>> expansion_size(builtin_example(), symbolic=False).max_terms <= monomials_upto(6, 9)
True
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, fields, replace
from math import comb

from .errors import DegreeLimit, LimitExceeded, MemoryLimit, MonomialLimit, OrbitLimit
from .procs import memory_cap

__all__ = ["Limits", "LIMITS", "limits", "set_limits", "monomials_upto", "power_terms", "activation_terms",
           "ExpansionSize", "expansion_size", "check_degree", "check_total_degree", "check_width", "check_monomials",
           "check_orbit", "expansion_bytes", "check_memory", "guard_expansion", "add_limit_options",
           "apply_limit_options"]


@dataclass
class Limits:
    """The size limits in force (see the module docstring for their meaning and options)."""

    degree: int = 1000
    total_degree: int = 1_000_000
    width: int = 100_000
    monomials: int = 250_000
    orbit: int = 200_000


#: the limits in force for this process; the CLI sets them from ``--max-*`` options
LIMITS = Limits()

#: option that raises each limit
OPTIONS = {"degree": "--max-degree", "total_degree": "--max-total-degree", "width": "--max-width", "monomials": "--max-monomials",
           "orbit": "--max-orbit"}


def set_limits(**values) -> Limits:
    """Change the limits in force (``None`` keeps a value); return the previous ones.

    >>> old = set_limits(degree=50); LIMITS.degree
    50
    >>> _ = set_limits(**vars(old)); LIMITS.degree
    1000
    """
    old = replace(LIMITS)
    names = {f.name for f in fields(Limits)}
    for k, v in values.items():
        if k not in names:
            raise TypeError(f"unknown limit {k!r}; known: {', '.join(sorted(names))}")
        if v is not None:
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise LimitExceeded(f"{OPTIONS[k]} must be a positive integer, got {v!r}")
            setattr(LIMITS, k, v)
    return old


@contextlib.contextmanager
def limits(**values):
    """Context manager: the given limits inside the ``with`` block, the old ones after it.

    >>> with limits(monomials=10):
    ...     LIMITS.monomials
    10
    """
    old = set_limits(**values)
    try:
        yield LIMITS
    finally:
        set_limits(**vars(old))


# -- counting ------------------------------------------------------------------------------------

def monomials_upto(nvars: int, degree: int) -> int:
    """The number of monomials of total degree <= ``degree`` in ``nvars`` variables: C(n + D, D)."""
    return comb(nvars + degree, degree)


def _capped_comb(n: int, k: int, cap: int) -> int:
    """min(C(n, k), cap + 1) without computing a huge binomial when k is large."""
    k = min(k, n - k)
    if k < 0:
        return 0
    acc = 1
    for i in range(1, k + 1):
        acc = acc * (n - k + i) // i
        if acc > cap:
            return cap + 1
    return acc


_CAP = 10 ** 30  # estimates are reported up to this size; larger ones are "more than 10^30"


def power_terms(terms: int, k: int, nvars: int, degree: int) -> int:
    """Upper bound on the terms of p^k when p has ``terms`` terms of degree <= ``degree`` in ``nvars`` variables."""
    if k == 0:
        return 1
    return min(_capped_comb(terms + k - 1, k, _CAP), _capped_comb(nvars + k * degree, k * degree, _CAP))


def activation_terms(activation, terms: int, nvars: int, degree: int) -> tuple[int, int]:
    """(terms, degree) bound of sigma(z) for a polynomial activation and z with ``terms`` terms of ``degree``."""
    coeffs = activation.coeffs
    total = 0
    for k, c in enumerate(coeffs):
        if c != 0:
            total += power_terms(terms, k, nvars, degree)
    d = (len(coeffs) - 1) * degree
    return min(total, _capped_comb(nvars + d, d, _CAP), _CAP), d


@dataclass(frozen=True)
class ExpansionSize:
    """Estimated size of a polynomial map's expansion (upper bounds).

    Attributes
    ----------
    max_terms : terms of the largest polynomial built (a pre-activation or an output)
    total_terms : terms of all outputs together (roughly the memory of the result)
    degree : total degree of the outputs in all variables of the ring
    nvars : variables of the ring
    """

    max_terms: int
    total_terms: int
    degree: int
    nvars: int


def expansion_size(model, *, symbolic: bool, bias: bool = True, nvars: int | None = None,
                   weight_terms: int = 1, input_terms: int = 1) -> ExpansionSize:
    """Bound the size of ``model``'s polynomial map, expanded by :mod:`flint` ``fmpq_mpoly`` arithmetic.

    Parameters
    ----------
    model : a polynomial :class:`~symeq.models.Model` (its widths and activations are used)
    symbolic : True when every weight is an unknown (the fibre ideal), False for numeric weights
    bias : whether biases are present (symbolic: one more term per pre-activation)
    nvars : variables of the ring (default: inputs, plus every parameter when symbolic)
    weight_terms : terms of each symbolic weight (a linear form in ``weight_terms`` unknowns)
    input_terms : terms of each input coordinate (``n`` for f(A x) with a dense A)

    Returns
    -------
    ExpansionSize
    """
    n = model.input_dim
    if nvars is None:
        nvars = n + (model.n_params if symbolic else 0)
    terms, deg = min(input_terms, n), 1
    biggest = terms
    width = n
    for layer in model.layers:
        width = layer.out_dim
        if symbolic:
            t = layer.in_dim * weight_terms * terms + (weight_terms if bias else 0)
            deg = deg + 1
        else:
            t = layer.in_dim * terms + 1
        t = min(t, _capped_comb(nvars + deg, deg, _CAP))
        biggest = max(biggest, t)
        act = layer.activation
        if act is not None and act.is_polynomial:
            t, deg = activation_terms(act, t, nvars, deg)
        biggest = max(biggest, t)
        terms = t
    return ExpansionSize(min(biggest, _CAP), min(terms * width, _CAP), deg, nvars)


# -- guards --------------------------------------------------------------------------------------

def _fmt(v: int) -> str:
    return "more than 10^30" if v >= _CAP else (f"~{v:.3g}" if v >= 10 ** 6 else str(v))


def check_degree(value: int, what: str) -> None:
    """Refuse a degree (or Taylor order) above ``LIMITS.degree`` (:class:`DegreeLimit`, exit 2).

    >>> check_degree(10**9, "a monomial activation")
    Traceback (most recent call last):
    ...
    symeq.errors.DegreeLimit: a monomial activation: degree 1000000000 exceeds the limit 1000; raise it with --max-degree
    """
    if value > LIMITS.degree:
        raise DegreeLimit(value=value, maximum=LIMITS.degree, option=OPTIONS["degree"], what=what)


def check_total_degree(value: int, what: str) -> None:
    """Refuse a model whose polynomial map has degree above ``LIMITS.total_degree`` (exact numbers
    evaluated through it grow with the degree: a product of per-layer degrees, e.g. 3^13 > 10^6)."""
    if value > LIMITS.total_degree:
        raise DegreeLimit(limit="total degree", value=value, maximum=LIMITS.total_degree,
                          option=OPTIONS["total_degree"], what=what)


def check_width(value: int, what: str) -> None:
    """Refuse a layer width (or input dimension) above ``LIMITS.width`` (exit 2)."""
    if value > LIMITS.width:
        raise LimitExceeded(limit="width", value=value, maximum=LIMITS.width, option=OPTIONS["width"], what=what)


def check_monomials(value: int, what: str, hint: str = "") -> None:
    """Refuse an expansion estimated at more than ``LIMITS.monomials`` terms (:class:`MonomialLimit`)."""
    if value > LIMITS.monomials:
        msg = (f"{what}: too large, {_fmt(value)} monomials estimated > limit {LIMITS.monomials}; "
               f"raise it with {OPTIONS['monomials']}" + (f" ({hint})" if hint else ""))
        raise MonomialLimit(msg, value=value, maximum=LIMITS.monomials, option=OPTIONS["monomials"], what=what)


def check_orbit(value: int, what: str) -> None:
    """Refuse to enumerate more than ``LIMITS.orbit`` group elements (:class:`OrbitLimit`)."""
    if value > LIMITS.orbit:
        raise OrbitLimit(value=value, maximum=LIMITS.orbit, option=OPTIONS["orbit"], what=what)


#: bytes per term of an expansion: (fixed part, per variable of the ring), for symbolic weights
#: (a fibre ideal: flint's terms plus the exponent tuples its generators are read through;
#: measured 43-93 bytes per term and variable at the peak on (3,3,3) ... (8,8,8) and (2,4,4,2)
#: tanh_3/tanh_5 models) and numeric ones (flint only: 160-330 bytes per term with 10-60
#: variables); the constants leave a margin above the largest measurement
EXPANSION_BYTES = {True: (64, 112), False: (96, 8)}


def expansion_bytes(est: ExpansionSize, symbolic: bool = True) -> int:
    """Estimated peak bytes of building an expansion of size ``est`` in this process.

    >>> est = ExpansionSize(max_terms=1000, total_terms=4000, degree=7, nvars=10)
    >>> expansion_bytes(est), expansion_bytes(est, symbolic=False)
    (4736000, 704000)
    """
    terms = max(est.max_terms, est.total_terms)
    fixed, per_variable = EXPANSION_BYTES[bool(symbolic)]
    return terms * (fixed + per_variable * est.nvars)


def check_memory(nbytes: int, what: str, hint: str = "") -> None:
    """Refuse an in-process computation estimated at more than the memory budget (:class:`MemoryLimit`, exit 2).

    The budget is :func:`symeq.procs.memory_cap`: ``--memory GB`` when given, else 75 % of the
    physical memory (and never above an inherited ``ulimit -v``); no budget, no check.

    >>> check_memory(10**40, "expanding a polynomial")   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symeq.errors.MemoryLimit: expanding a polynomial: about 9.31e+30 GB estimated > the memory budget of ... GB ...
    """
    cap = memory_cap()
    if cap is None or nbytes <= cap:
        return
    gb, cap_gb = nbytes / 2**30, cap / 2**30
    msg = (f"{what}: about {gb:.3g} GB estimated > the memory budget of {cap_gb:.3g} GB (--memory GB; "
           f"default 75% of the RAM); lower {OPTIONS['monomials']}, use a smaller model, or raise it with "
           "--memory GB" + (f" ({hint})" if hint else ""))
    raise MemoryLimit(msg, value=round(gb, 3), maximum=round(cap_gb, 3), what=what)


def guard_expansion(model, what: str, *, symbolic: bool, hint: str = "", **kw) -> ExpansionSize:
    """Estimate ``model``'s expansion (:func:`expansion_size`) and refuse it past the monomial limit
    or past the memory budget (:func:`check_memory`), before any of it is built."""
    est = expansion_size(model, symbolic=symbolic, **kw)
    check_monomials(max(est.max_terms, est.total_terms), what, hint)
    check_memory(expansion_bytes(est, symbolic), what, hint)
    return est


# -- command-line options ------------------------------------------------------------------------

def add_limit_options(parser, which=("degree", "total_degree", "width", "monomials", "orbit")) -> None:
    """Add ``--max-degree`` etc. to an argparse parser (defaults: the current limits)."""
    helps = {"degree": "largest activation degree / Taylor order accepted in a model file",
             "total_degree": "largest degree of a model's polynomial map (product over the layers)",
             "width": "largest layer width accepted in a model file",
             "monomials": "largest expansion (estimated number of monomials) built in memory",
             "orbit": "largest latent group enumerated for the orbit"}
    for k in which:
        parser.add_argument(OPTIONS[k], dest=f"max_{k}", type=int, default=None, metavar="N",
                            help=f"{helps[k]} (default {getattr(Limits, k)})")


def apply_limit_options(args) -> Limits:
    """Set :data:`LIMITS` from the parsed ``--max-*`` options; an option not given gets its default.

    Every limit is reset, so one command's options never leak into the next call of
    :func:`symeq.cli.main` in the same process; the previous limits are returned (``main`` puts
    them back when the command ends).
    """
    return set_limits(**{k: getattr(args, f"max_{k}", None) or getattr(Limits, k) for k in OPTIONS})
