"""Exact linear regions of ReLU networks and an exact equivariance decision.

A ReLU network is a continuous piecewise-linear map.  This module enumerates
its open, full-dimensional linear regions exactly (rational arithmetic with
python-flint ``fmpq`` and the exact simplex method of :mod:`symeq.relu.lp`),
and uses them to *decide* end-to-end equivariance ``f(rho_in x) = rho_out
f(x)`` for all real ``x`` -- not just test it on samples.

This matters because, for ReLU, end-to-end equivariance does not imply
layerwise equivariance in general (Bökman & Kahl 2023): the identity on R^2
written with width 4 as ``W1 = [A; -A]``, ``W2 = [A^-1, -A^-1]`` (because
``relu(t) - relu(-t) = t``) is equivariant under the order-3 matrix
``R = [[0, -1], [1, -1]]``, yet no width-4 parameter is layerwise equivariant
(see docs/theory.md, "Small exact facts").  Exact decisions like this one are
what such counterexamples rest on.

Network representation (plain data, no other symeq module needed)::

    layers = [(W, b, relu), ...]

where ``W`` is a list of rows (lists of rationals), ``b`` a list of
rationals, and ``relu`` a bool: layer ``i`` maps ``R^{n_{i-1}} -> R^{n_i}``
by ``x -> max(0, W x + b)`` if ``relu`` else ``x -> W x + b``.  Entries may be
``fmpq``, ``int``, ``fractions.Fraction`` or strings like ``"1/3"``; floats
are refused.  A leaky ReLU layer (``t -> t`` for ``t > 0``, ``a t`` for
``t <= 0``) gives its slope ``a`` (a rational, not a bool) in place of
``relu``: the regions are the cells of its activation patterns as for ReLU
(the sign of each pre-activation), only the affine map on the negative side
is ``a z`` instead of 0.  Slope 0 is ReLU; slope 1 (linear) is refused.

Method.  Depth first, layer by layer: on the current region (an open
polyhedron given by strict inequalities, with a known interior point) the
pre-activation of every neuron of the next ReLU layer is affine.  For each
neuron whose pre-activation is not constant on the region we branch on its
sign (``> 0`` or ``< 0``) and prune empty branches with an exact LP
(:func:`symeq.relu.lp.interior_point`).  Shortcuts, all exact: the side
containing the current interior point needs no LP; if the interior point lies
on the hyperplane, both sides are non-empty and the point is nudged to each
side; a hyperplane shown to miss the region is not recorded as an inequality
(it is redundant) but kept as a bound ``lo < a.x < hi`` per primitive
direction ``a``, which settles repeated and parallel hyperplanes without an
LP.  Neurons whose pre-activation is constant need no branch.  Regions of
lower dimension (points where some pre-activation vanishes) are ignored: the
maps are continuous, so agreement on every open full-dimensional region -- a
dense set -- is agreement everywhere.

The work is one small LP per (region, hyperplane that might cut it), so the
cost grows with the number of regions, which is exponential in depth and
polynomial of degree ``n`` in width; this is for small networks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence

from flint import fmpq

from ..errors import BudgetExceeded, InputError, RegionLimit
from .lp import _interior_point, as_fmpq, scoped

__all__ = [
    "Region",
    "RegionLimitExceeded",
    "EquivarianceDecision",
    "evaluate",
    "linear_regions",
    "count_regions",
    "difference_network",
    "decide_equivariance",
]

_ZERO = fmpq(0)
_ONE = fmpq(1)


class RegionLimitExceeded(RegionLimit, BudgetExceeded):
    """Raised when an enumeration would produce more than ``limit`` regions.

    Both a :class:`~symeq.errors.RegionLimit` (the limit's name, value and how to raise it) and a
    :class:`~symeq.errors.BudgetExceeded`: the limit is met *during* the enumeration, so the
    question stays open and the command line exits 3 (undetermined), not 2.

    Attributes
    ----------
    maximum : int
        The limit that was exceeded (``limit`` is its name, "regions").
    """

    exit_code = 3

    def __init__(self, limit: int, option: str = "the `limit` argument"):
        super().__init__(f"more than {limit} linear regions; raise `limit` to continue", value=limit + 1,
                         maximum=limit, option=option)


class Region(NamedTuple):
    """One open, full-dimensional linear region of a ReLU network.

    Attributes
    ----------
    pattern : tuple
        One entry per layer: for a ReLU layer a tuple of bools (``True`` =
        neuron active, i.e. pre-activation ``> 0`` on the region; ``False`` =
        pre-activation ``< 0``, or constant ``<= 0``); ``None`` for an affine
        layer.
    inequalities : list of (a, c)
        Strict inequalities ``a . x + c > 0`` (``a`` a list of fmpq, ``c`` an
        fmpq, scaled to primitive integers) whose intersection, together with
        any ``extra_constraints``, is the region.  Some may be redundant.
    point : list of fmpq
        An interior point: every inequality holds strictly there.
    affine : (A, c)
        The network equals ``x -> A x + c`` on the region (``A`` a list of
        rows of fmpq, ``c`` a list of fmpq).
    """

    pattern: tuple
    inequalities: list
    point: list
    affine: tuple


@dataclass(frozen=True)
class EquivarianceDecision:
    """Exact verdict of :func:`decide_equivariance`.

    Attributes
    ----------
    holds : bool
        Whether ``f(rho_in x) == rho_out f(x)`` for every real ``x``.
    witness : list of fmpq or None
        When ``holds`` is False, a rational ``x`` where the two sides differ
        (re-checked by exact evaluation); otherwise ``None``.
    regions : int
        Number of linear regions of the difference map examined (all of them
        when ``holds`` is True; up to the first failing one otherwise).
    method : str
        ``"relu-regions"``.
    difference : list of fmpq or None
        ``f(rho_in w) - rho_out f(w)`` at the witness ``w`` (nonzero), or
        ``None``.
    """

    holds: bool
    witness: list | None
    regions: int
    method: str = "relu-regions"
    difference: list | None = None


# --------------------------------------------------------------------------
# small exact linear algebra on lists of fmpq
# --------------------------------------------------------------------------


def _dot(u: Sequence, v: Sequence) -> fmpq:
    s = _ZERO
    for a, b in zip(u, v):
        if a and b:
            s += a * b
    return s


def _matvec(M: Sequence, v: Sequence) -> list:
    return [_dot(row, v) for row in M]


def _matmul(M: Sequence, N: Sequence, ncols: int) -> list:
    out = []
    for row in M:
        acc = [_ZERO] * ncols
        for k, a in enumerate(row):
            if a:
                for j, b in enumerate(N[k]):
                    if b:
                        acc[j] += a * b
        out.append(acc)
    return out


def _square(M, n: int, name: str) -> list:
    M = [[as_fmpq(v) for v in row] for row in M]
    if len(M) != n or any(len(row) != n for row in M):
        raise InputError(f"{name} must be a {n}x{n} matrix")
    return M


def _check_layers(layers) -> tuple[list, int, int]:
    """Convert a network to fmpq and check shapes; return (layers, n_in, n_out)."""
    layers = list(layers)
    if not layers:
        raise InputError("a network needs at least one layer")
    out = []
    n_prev = None
    for i, layer in enumerate(layers):
        try:
            W, b, relu = layer
        except (TypeError, ValueError):
            raise InputError(f"layer {i + 1} must be a triple (W, b, relu)") from None
        W = [[as_fmpq(v) for v in row] for row in W]
        b = [as_fmpq(v) for v in b]
        relu = _activation_flag(relu, i + 1)
        if len(W) != len(b):
            raise InputError(f"layer {i + 1}: W has {len(W)} rows but b has {len(b)} entries")
        if not W:
            raise InputError(f"layer {i + 1} has no neurons")
        width_in = len(W[0])
        if any(len(row) != width_in for row in W):
            raise InputError(f"layer {i + 1}: rows of W have different lengths")
        if n_prev is not None and width_in != n_prev:
            raise InputError(f"layer {i + 1} expects input of size {width_in}, previous layer gives {n_prev}")
        if width_in == 0:
            raise InputError(f"layer {i + 1} has input dimension 0")
        out.append((W, b, relu))
        n_prev = len(W)
    return out, len(out[0][0][0]), len(out[-1][0])


def _activation_flag(relu, i: int):
    """``False`` (affine), ``True`` (ReLU) or a nonzero rational slope (leaky ReLU)."""
    if relu is None or isinstance(relu, bool):
        return bool(relu)
    a = as_fmpq(relu)
    if a == 0:
        return True
    if a == 1:
        raise InputError(f"layer {i + 1}: a leaky ReLU slope of 1 is the identity; make the layer affine instead")
    return a


def _negative_side(relu, t):
    """The activation's value at a pre-activation ``t <= 0``: 0 for ReLU, ``a t`` for leaky ReLU."""
    return _ZERO if relu is True else relu * t


def _normalize(a: Sequence, c) -> tuple[list, fmpq, tuple]:
    """Scale ``a.x + c > 0`` by a positive rational to primitive integers."""
    vals = list(a) + [c]
    den = 1
    for v in vals:
        if v:
            den = math.lcm(den, int(v.q))
    nums = [int(v.p) * (den // int(v.q)) for v in vals]
    g = 0
    for m in nums:
        g = math.gcd(g, m)
    if g == 0:
        g = 1
    nums = [m // g for m in nums]
    return [fmpq(m) for m in nums[:-1]], fmpq(nums[-1]), tuple(nums)


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------


def evaluate(layers, x: Sequence) -> list:
    """Exact forward pass of a ReLU network.

    Parameters
    ----------
    layers : list of (W, b, relu)
        The network (see the module docstring).
    x : sequence of rationals
        Input point.

    Returns
    -------
    list of fmpq
        The output ``f(x)``.

    Examples
    --------
    The width-4 identity on R^2 of Bökman-Kahl (docs/theory.md): ``relu(x) -
    relu(-x) = x`` coordinatewise.

    >>> I, mI = [[1, 0], [0, 1]], [[-1, 0], [0, -1]]
    >>> net = [(I + mI, [0] * 4, True), ([[1, 0, -1, 0], [0, 1, 0, -1]], [0, 0], False)]
    >>> evaluate(net, ["3/2", -7])
    [3/2, -7]
    """
    layers, n, _ = _check_layers(layers)
    v = [as_fmpq(t) for t in x]
    if len(v) != n:
        raise InputError(f"input has size {len(v)}, the network expects {n}")
    for W, b, relu in layers:
        v = [_dot(row, v) + bi for row, bi in zip(W, b)]
        if relu is not False:
            v = [t if t > 0 else _negative_side(relu, t) for t in v]
    return v


def linear_regions(layers, extra_constraints=None, limit: int = 100000) -> Iterator[Region]:
    """Enumerate the open full-dimensional linear regions of a ReLU network.

    Parameters
    ----------
    layers : list of (W, b, relu)
        The network (see the module docstring).
    extra_constraints : list of (a, c), optional
        Strict inequalities ``a . x + c > 0`` restricting the input domain
        (e.g. to a cone or a box); only regions meeting this open set are
        produced, intersected with it.
    limit : int, default 100000
        Maximal number of regions to produce.

    Yields
    ------
    Region
        ``(pattern, inequalities, point, affine)``; see :class:`Region`.
        Distinct yielded regions are disjoint, and their union is the domain
        minus finitely many hyperplanes.  Two regions may carry the same affine
        map (the enumeration follows activation patterns, it does not merge).

    Raises
    ------
    RegionLimitExceeded
        When a ``limit + 1``-st region is reached (raised during iteration).

    Examples
    --------
    Two ReLUs along the lines ``x = 0`` and ``y = 0`` cut the plane into the
    four quadrants:

    >>> net = [([[1, 0], [0, 1]], [0, 0], True), ([[1, 1]], [0], False)]
    >>> regs = list(linear_regions(net))
    >>> len(regs)
    4
    >>> sorted(r.pattern[0] for r in regs)
    [(False, False), (False, True), (True, False), (True, True)]
    >>> r = next(r for r in regs if r.pattern[0] == (True, False))
    >>> r.affine            # f(x, y) = x on {x > 0, y < 0}
    ([[1, 0]], [0])
    >>> list(linear_regions(net, extra_constraints=[([1, 1], -10)]))[0].pattern
    ((True, True), None)
    """
    layers, n, _ = _check_layers(layers)
    if limit < 0:
        raise InputError("limit must be non-negative")
    cons: list = []
    for item in extra_constraints or ():
        a, c = item
        a = [as_fmpq(v) for v in a]
        if len(a) != n:
            raise InputError(f"extra constraint has {len(a)} coefficients, expected {n}")
        cons.append((a, as_fmpq(c)))
    return _enumerate(layers, n, cons, limit)


def _direction(p: list, q) -> tuple[tuple, fmpq, bool]:
    """Write ``p.x + q = lam * (a.x - h)`` with ``a`` a primitive integer vector
    whose first nonzero entry is positive and ``lam != 0``.

    Returns ``(a, h, up)`` where ``up = lam > 0``, so that ``p.x + q > 0`` iff
    ``a.x > h`` (``up``) or ``a.x < h`` (not ``up``).
    """
    den = 1
    for v in p:
        if v:
            den = math.lcm(den, int(v.q))
    nums = [int(v.p) * (den // int(v.q)) for v in p]
    g = 0
    for m in nums:
        g = math.gcd(g, m)
    first = next(m for m in nums if m)
    if first < 0:
        g = -g
    a = tuple(m // g for m in nums)
    lam = fmpq(g, den)  # p = lam * a
    return a, -q / lam, lam > 0


def _add_bound(bounds: dict, key: tuple, h, above: bool) -> dict:
    """Copy of ``bounds`` with ``a.x > h`` (``above``) or ``a.x < h`` added."""
    lo, hi = bounds.get(key, (None, None))
    if above:
        lo = h if lo is None or h > lo else lo
    else:
        hi = h if hi is None or h < hi else hi
    out = dict(bounds)
    out[key] = (lo, hi)
    return out


def _tighten(cons: list, entry: tuple) -> list:
    """``cons`` plus ``entry``, dropping parallel same-side inequalities that
    ``entry`` makes redundant (or ``entry`` itself if one implies it)."""
    _, _, key, above, h = entry
    out = []
    for e in cons:
        if e[2] == key and e[3] == above:
            if (e[4] >= h) if above else (e[4] <= h):
                return cons  # e implies entry
            continue  # entry implies e
        out.append(e)
    out.append(entry)
    return out


def _start_region(extra: list, n: int):
    """``(cons, bounds, x0)`` of :func:`_enumerate`'s starting region, the inequalities ``extra`` (a x + c > 0)
    recorded and an interior point x0, or None when the region is empty."""
    cons: list = []
    bounds: dict = {}
    for a, c in extra:
        if not any(a):
            if c > 0:
                continue
            return None
        an, cn, _ = _normalize(a, c)
        key, h, up = _direction(a, c)
        cons = _tighten(cons, (an, cn, key, up, h))
        bounds = _add_bound(bounds, key, h, up)
    if not cons:
        return cons, bounds, [_ZERO] * n
    res = _interior_point([e[0] for e in cons], [e[1] for e in cons], n)
    return None if res is None else (cons, bounds, res[0])


def _enter_layer(layers, n: int, li: int, A, c, cons, bounds, x0, pattern) -> tuple:
    """The stack item of :func:`_enumerate` for layer ``li`` on a region where the map so far is x -> A x + c:
    its neurons to settle (a ReLU layer), or the next layer (an affine one)."""
    W, b, relu = layers[li]
    P = _matmul(W, A, n)
    q = [_dot(row, c) + bi for row, bi in zip(W, b)]
    if relu is not False:
        info = [(_direction(p, qk) + (_normalize(p, qk)[:2],)) if any(p) else None for p, qk in zip(P, q)]
        return ("neuron", li, P, q, info, 0, cons, bounds, x0, pattern, ())
    return ("layer", li + 1, P, q, cons, bounds, x0, pattern + (None,))


def _activated(slope, P, q, signs, zero_row):
    """The map (A, c) after a (leaky, ``slope`` not True) ReLU layer with pre-activation x -> P x + q, given
    each neuron's sign on the region."""
    if slope is True:
        return ([P[i] if sgn else zero_row for i, sgn in enumerate(signs)],
                [q[i] if sgn else _ZERO for i, sgn in enumerate(signs)])
    # leaky ReLU: a z on the negative side
    return ([P[i] if sgn else [slope * x for x in P[i]] for i, sgn in enumerate(signs)],
            [q[i] if sgn else slope * q[i] for i, sgn in enumerate(signs)])


def _enumerate(layers, n: int, extra: list, limit: int) -> Iterator[Region]:
    # ``cons``: the recorded strict inequalities (normalised); ``bounds``: for
    # each primitive direction a, known bounds lo < a.x < hi valid on the
    # region (from recorded inequalities and from hyperplanes shown by LP to
    # miss the region), used to settle repeated and parallel hyperplanes
    # without an LP.
    # Entries of ``cons`` are (a, c, key, above, h): the inequality a.x + c > 0,
    # equivalent to key.x > h (above) or key.x < h (not above).
    start = _start_region(extra, n)
    if start is None:
        return
    cons, bounds, x0 = start
    count = 0
    L = len(layers)
    zero_row = [_ZERO] * n
    identity = [[_ONE if i == j else _ZERO for j in range(n)] for i in range(n)]
    # Explicit depth-first stack (no recursion, so wide/deep nets do not hit
    # Python's recursion limit).  Items:
    #   ("layer", li, A, c, cons, bounds, x0, pattern)  -- map x -> A x + c so far
    #   ("neuron", li, P, q, info, k, cons, bounds, x0, pattern, signs)
    # where info[k] = (key, h, up, normalised (a, c)) for the pre-activation
    # of neuron k, or None when it is constant on the region.
    stack: list = [("layer", 0, identity, [_ZERO] * n, cons, bounds, x0, ())]
    while stack:
        item = stack.pop()
        if item[0] == "layer":
            _, li, A, c, cons, bounds, x0, pattern = item
            if li == L:
                count += 1
                if count > limit:
                    raise RegionLimitExceeded(limit)
                yield Region(pattern, [(e[0], e[1]) for e in cons], x0, (A, c))
                continue
            stack.append(_enter_layer(layers, n, li, A, c, cons, bounds, x0, pattern))
            continue

        _, li, P, q, info, k, cons, bounds, x0, pattern, signs = item
        # neurons whose sign is settled without branching are handled in place
        while k < len(P):
            p, qk = P[k], q[k]
            if info[k] is None:  # constant on the region: no hyperplane, no branch
                signs += (qk > 0,)
                k += 1
                continue
            key, h, up, pos = info[k]
            lo, hi = bounds.get(key, (None, None))
            if (lo is not None and h <= lo) or (hi is not None and h >= hi):
                # a known parallel (or equal) hyperplane settles the sign:
                # a.x > lo >= h or a.x < hi <= h on the whole region
                above = lo is not None and h <= lo
                signs += (above == up,)
                k += 1
                continue
            val = _dot(p, x0) + qk
            if val == 0:
                break
            here = val > 0
            a, cc = ([-v for v in pos[0]], -pos[1]) if here else pos
            res = _interior_point([e[0] for e in cons] + [a], [e[1] for e in cons] + [cc], n,
                                  origin=x0, early=True)
            if res is not None:
                break
            # the hyperplane misses the region: the sign is forced and the
            # inequality is redundant, so it is only remembered as a bound
            bounds = _add_bound(bounds, key, h, here == up)
            signs += (here,)
            k += 1
        if k == len(P):
            A, c = _activated(layers[li][2], P, q, signs, zero_row)
            stack.append(("layer", li + 1, A, c, cons, bounds, x0, pattern + (signs,)))
            continue
        # neuron k's hyperplane cuts the region: branch
        neg = ([-v for v in pos[0]], -pos[1])
        if val == 0:
            # x0 is interior and on the hyperplane: both sides are non-empty;
            # nudge x0 exactly to either side instead of solving LPs.
            branches = [(True, _nudge(cons, x0, p, 1)), (False, _nudge(cons, x0, p, -1))]
        else:
            branches = [(here, x0), (not here, res[0])]
            if not here:
                branches.reverse()
        for active, x1 in reversed(branches):  # push so that "active" is explored first
            a, cc = pos if active else neg
            above = active == up
            stack.append(("neuron", li, P, q, info, k + 1, _tighten(cons, (a, cc, key, above, h)),
                          _add_bound(bounds, key, h, above), x1, pattern, signs + (active,)))


def count_regions(layers, limit: int = 100000, extra_constraints=None) -> int:
    """Number of open full-dimensional linear regions found by :func:`linear_regions`.

    This counts activation regions (cells of the arrangement of bent
    hyperplanes), which is an upper bound for the number of maximal pieces on
    which the function is affine.

    Parameters
    ----------
    layers : list of (W, b, relu)
        The network.
    limit : int, default 100000
        Raise :class:`RegionLimitExceeded` beyond this many regions.
    extra_constraints : list of (a, c), optional
        Restrict the domain to ``{x : a . x + c > 0 for all}``.

    Returns
    -------
    int

    Examples
    --------
    Three lines in general position cut the plane into ``1 + 3 + 3 = 7``
    regions:

    >>> net = [([[1, 0], [0, 1], [1, 1]], [0, 0, -1], True), ([[1, 1, 1]], [0], False)]
    >>> count_regions(net)
    7
    >>> count_regions(net, limit=5)
    Traceback (most recent call last):
    ...
    symeq.relu.regions.RegionLimitExceeded: more than 5 linear regions; raise `limit` to continue
    """
    return sum(1 for _ in linear_regions(layers, extra_constraints=extra_constraints, limit=limit))


def difference_network(layers, rho_in, rho_out) -> list:
    """A ReLU network computing ``h(x) = f(rho_in x) - rho_out f(x)``.

    The hidden layers are the two copies of ``f`` side by side: first layer
    ``[W1 rho_in; W1]`` with bias ``[b1; b1]``, then block-diagonal layers;
    the final affine layer is ``[W_L, -rho_out W_L]`` with bias
    ``b_L - rho_out b_L`` (if the last layer of ``f`` is a ReLU layer, an
    affine layer ``[I, -rho_out]`` is appended instead).

    Parameters
    ----------
    layers : list of (W, b, relu)
        The network ``f : R^n -> R^m``.
    rho_in : n x n matrix of rationals
    rho_out : m x m matrix of rationals

    Returns
    -------
    list of (W, b, relu)
        A network ``R^n -> R^m`` (entries fmpq).

    Examples
    --------
    >>> f = [([[1, 0], [0, 1]], [0, 0], True), ([[1, -1]], [0], False)]
    >>> h = difference_network(f, [[0, 1], [1, 0]], [[-1]])
    >>> evaluate(h, [2, 5]) == [0]       # f(y, x) = relu(y) - relu(x) = -f(x, y)
    True
    """
    layers, n, m = _check_layers(layers)
    R_in = _square(rho_in, n, "rho_in")
    R_out = _square(rho_out, m, "rho_out")
    out = []
    for i, (W, b, relu) in enumerate(layers):
        k = len(W[0])
        if i == 0:
            top = _matmul(W, R_in, n)
            W2 = top + [row[:] for row in W]
        else:
            W2 = ([row + [_ZERO] * k for row in W]
                  + [[_ZERO] * k + row for row in W])
        out.append((W2, b + b, relu))
    W2, b2, relu = out[-1]
    if relu:
        eye = [[_ONE if i == j else _ZERO for j in range(m)] for i in range(m)]
        negR = [[-v for v in row] for row in R_out]
        out.append(([eye[i] + negR[i] for i in range(m)], [_ZERO] * m, False))
    else:
        top, bottom = W2[:m], W2[m:]
        width = len(W2[0])
        RB = _matmul(R_out, bottom, width)
        Wf = [[a - r for a, r in zip(top[i], RB[i])] for i in range(m)]
        bf = [b2[i] - _dot(R_out[i], b2[m:]) for i in range(m)]
        out[-1] = (Wf, bf, False)
    return out


def _nudge(cons: list, x0: list, p: list, sign: int) -> list:
    """Move the interior point ``x0`` along ``sign * p`` while keeping every
    inequality of ``cons`` strict (each keeps at least half its slack)."""
    d = [v if sign > 0 else -v for v in p]
    eps = _ONE
    for a, c, *_ in cons:
        slope = _dot(a, d)
        if slope < 0:
            bound = (_dot(a, x0) + c) / (-2 * slope)
            if bound < eps:
                eps = bound
    return [xi + eps * di for xi, di in zip(x0, d)]


def _witness(region: Region, n: int) -> list:
    """A rational point of ``region`` where its affine map is nonzero."""
    A, c = region.affine
    x0 = list(region.point)
    if any(_dot(row, x0) + ci for row, ci in zip(A, c)):
        return x0
    # h(x0) = 0 but A != 0: step along a coordinate k with a nonzero column.
    k = next(k for k in range(n) if any(row[k] for row in A))
    slack = [(_dot(a, x0) + d) for a, d in region.inequalities]
    t = min(slack) if slack else _ONE
    big = max((abs(a[k]) for a, _ in region.inequalities), default=_ZERO)
    step = t / (2 * big) if big else _ONE
    x = x0[:]
    x[k] = x[k] + step
    # every inequality keeps slack >= t - step*|a_k| >= t/2 > 0
    for a, d in region.inequalities:
        if not _dot(a, x) + d > 0:  # pragma: no cover - guaranteed by the step size
            raise RuntimeError("internal error: witness step left the region")
    return x


def _defect(layers, R_in, R_out, x) -> list:
    """``f(R_in x) - R_out f(x)``, by exact evaluation of ``f`` itself."""
    lhs = evaluate(layers, _matvec(R_in, x))
    rhs = _matvec(R_out, evaluate(layers, x))
    return [u - v for u, v in zip(lhs, rhs)]


def decide_equivariance(layers, rho_in, rho_out, limit: int = 100000, deadline=None) -> EquivarianceDecision:
    """Decide exactly whether ``f(rho_in x) == rho_out f(x)`` for all real ``x``.

    Builds the difference network ``h(x) = f(rho_in x) - rho_out f(x)``
    (:func:`difference_network`), enumerates its open full-dimensional linear
    regions (:func:`linear_regions`), and checks that the affine map of each
    is identically zero.  Since ``h`` is continuous and these regions are
    dense, this is equivalent to ``h == 0`` on all of ``R^n``.  Otherwise a
    rational witness is returned and re-checked by exact evaluation of ``f``
    (the nearest integer point is preferred when it fails too).  The search
    stops at the first region where ``h`` is not identically zero.

    For ReLU networks end-to-end equivariance does not imply layerwise
    equivariance (Bökman & Kahl 2023), so it must be decided on the function
    itself, as here.

    Parameters
    ----------
    layers : list of (W, b, relu)
        The network ``f : R^n -> R^m``.
    rho_in : n x n matrix of rationals
        Action on the input.
    rho_out : m x m matrix of rationals
        Action on the output.
    limit : int, default 100000
        Raise :class:`RegionLimitExceeded` beyond this many regions of ``h``.
    deadline : :class:`~symeq.budget.Deadline`, optional
        Checked once per region (:class:`~symeq.errors.BudgetExceeded` past it).

    Returns
    -------
    EquivarianceDecision
        ``holds``, ``witness``, ``regions``, ``method="relu-regions"``,
        ``difference``.

    Examples
    --------
    The width-4 ReLU identity on R^2 (``W1 = [A; -A]``, ``W2 = [A^-1, -A^-1]``,
    docs/theory.md) is equivariant under the order-3 rotation
    ``R = [[0, -1], [1, -1]]``, although no width-4 parameter is layerwise
    equivariant:

    >>> A, Ainv = [[2, 1], [1, 1]], [[1, -1], [-1, 2]]
    >>> W1 = A + [[-v for v in row] for row in A]
    >>> W2 = [Ainv[i] + [-v for v in Ainv[i]] for i in range(2)]
    >>> f = [(W1, [0] * 4, True), (W2, [0, 0], False)]
    >>> R = [[0, -1], [1, -1]]
    >>> d = decide_equivariance(f, R, R)
    >>> d.holds, d.witness, d.method
    (True, None, 'relu-regions')

    A single ReLU is not equivariant under ``x -> -x`` (on both sides):

    >>> d = decide_equivariance([([[1]], [0], True), ([[1]], [0], False)], [[-1]], [[-1]])
    >>> d.holds, d.witness, d.difference
    (False, [-1], [1])
    """
    layers, n, m = _check_layers(layers)
    R_in = _square(rho_in, n, "rho_in")
    R_out = _square(rho_out, m, "rho_out")
    h = difference_network(layers, R_in, R_out)
    count = 0
    for region in scoped(linear_regions(h, limit=limit), deadline):  # each LP checks the deadline
        count += 1
        if deadline is not None:
            deadline.check(f"enumerating ReLU linear regions ({count} so far)")
        A, c = region.affine
        if not any(c) and not any(any(row) for row in A):
            continue
        w = _witness(region, n)
        diff = _defect(layers, R_in, R_out, w)
        if not any(diff):  # pragma: no cover - would be an internal error
            raise RuntimeError("internal error: witness does not separate the two sides")
        # prefer a simpler witness: the nearest integer point, if it also fails
        w_int = [fmpq((v + fmpq(1, 2)).floor()) for v in w]
        if w_int != w:
            d_int = _defect(layers, R_in, R_out, w_int)
            if any(d_int):
                w, diff = w_int, d_int
        return EquivarianceDecision(False, w, count, "relu-regions", diff)
    return EquivarianceDecision(True, None, count, "relu-regions", None)
