"""Tests of the exact LP (symeq.relu.lp) and exact ReLU linear regions (symeq.relu.regions)."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
from flint import fmpq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symeq.relu.lp import LPIterationLimit, interior_point, solve_lp
from symeq.relu.regions import (
    EquivarianceDecision,
    Region,
    RegionLimitExceeded,
    _witness,
    count_regions,
    decide_equivariance,
    difference_network,
    evaluate,
    linear_regions,
)

Q = fmpq


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def matvec(M, v):
    return [sum((Q(a) * Q(b) for a, b in zip(row, v)), Q(0)) for row in M]


def width4_identity(A, Ainv):
    """W1 = [A; -A], W2 = [A^-1, -A^-1]: relu(Ax) - relu(-Ax) = Ax, so f = id."""
    W1 = [list(r) for r in A] + [[-v for v in r] for r in A]
    W2 = [list(Ainv[i]) + [-v for v in Ainv[i]] for i in range(2)]
    return [(W1, [0] * 4, True), (W2, [0, 0], False)]


R3 = [[0, -1], [1, -1]]  # order 3
R3_SQ = [[-1, 1], [-1, 0]]  # R3 @ R3


def sides_differ(layers, rho_in, rho_out, x):
    return evaluate(layers, matvec(rho_in, x)) != matvec(rho_out, evaluate(layers, x))


def random_net(rng, dims, lo=-2, hi=2):
    layers = []
    for i in range(1, len(dims)):
        W = [[rng.randint(lo, hi) for _ in range(dims[i - 1])] for _ in range(dims[i])]
        b = [rng.randint(lo, hi) for _ in range(dims[i])]
        layers.append((W, b, i < len(dims) - 1))
    return layers


def signed_perm(perm, signs):
    n = len(perm)
    return [[signs[i] if perm[i] == j else 0 for j in range(n)] for i in range(n)]


# ---------------------------------------------------------------------------
# the LP
# ---------------------------------------------------------------------------


def test_lp_basic_optimum():
    res = solve_lp([1, 1], [[1, 2], [3, 1]], [4, 6])
    assert res.status == "optimal"
    assert res.x == [Q(8, 5), Q(6, 5)] and res.value == Q(14, 5)
    assert all(isinstance(v, fmpq) for v in res.x)


def test_lp_infeasible_and_unbounded():
    assert solve_lp([1, 1], [[1, 1]], [-1]).status == "infeasible"  # x,y >= 0, x+y <= -1
    assert solve_lp([0, 0], A_eq=[[1, 1], [1, 1]], b_eq=[1, 2]).status == "infeasible"
    assert solve_lp([1, 0], [[0, 1]], [5]).status == "unbounded"
    assert solve_lp([-1], free=True).status == "unbounded"  # max -x, x free
    assert solve_lp([-1], [[-1]], [-3], free=True).value == -3  # x >= 3


def test_lp_phase_one_equalities_and_redundant_rows():
    # x + y = 2 (twice, redundant), x - y >= -1 written as -x + y <= 1, max y
    res = solve_lp([0, 1], [[-1, 1]], [1], A_eq=[[1, 1], [2, 2]], b_eq=[2, 4])
    assert res.status == "optimal"
    assert res.x == [Q(1, 2), Q(3, 2)] and res.value == Q(3, 2)
    # negative right-hand sides and free variables
    res = solve_lp([1, 1], [[1, 0], [0, 1], [-1, -1]], [-1, -2, 10], free=True)
    assert res.status == "optimal" and res.value == -3


def test_lp_accepts_fraction_and_strings_not_floats():
    res = solve_lp([Fraction(1, 2)], [["1/3"]], [1])
    assert res.x == [Q(3)] and res.value == Q(3, 2)
    with pytest.raises(TypeError):
        solve_lp([0.5], [[1]], [1])


# Degenerate problems that cycle under Dantzig's largest-coefficient rule.
CHVATAL = ([10, -57, -9, -24],
           [[Q(1, 2), Q(-11, 2), Q(-5, 2), 9], [Q(1, 2), Q(-3, 2), Q(-1, 2), 1], [1, 0, 0, 0]],
           [0, 0, 1], [Q(1), Q(0), Q(1), Q(0)], Q(1))
BEALE = ([Q(3, 4), -150, Q(1, 50), -6],
         [[Q(1, 4), -60, Q(-1, 25), 9], [Q(1, 2), -90, Q(-1, 50), 3], [0, 0, 1, 0]],
         [0, 0, 1], [Q(1, 25), Q(0), Q(1), Q(0)], Q(1, 20))


@pytest.mark.parametrize("problem", [CHVATAL, BEALE], ids=["chvatal", "beale"])
def test_lp_degenerate_cycling(problem):
    c, A, b, x_opt, v_opt = problem
    with pytest.raises(LPIterationLimit):
        solve_lp(c, A, b, rule="dantzig", max_iter=200)
    res = solve_lp(c, A, b)  # Bland's rule terminates
    assert res.status == "optimal"
    assert res.value == v_opt and res.x == x_opt
    assert res.pivots < 50


def _brute_box_lp(c, A, b, M):
    """max c.x on A x <= b, 0 <= x <= M (2 variables), by enumerating vertices."""
    lines = [(row, bi) for row, bi in zip(A, b)]
    lines += [([1, 0], 0), ([0, 1], 0), ([1, 0], M), ([0, 1], M)]
    best = None
    for (r1, s1), (r2, s2) in itertools.combinations(lines, 2):
        det = Q(r1[0]) * r2[1] - Q(r1[1]) * r2[0]
        if det == 0:
            continue
        x = [(Q(s1) * r2[1] - Q(s2) * r1[1]) / det, (Q(r1[0]) * s2 - Q(r2[0]) * s1) / det]
        if not (0 <= x[0] <= M and 0 <= x[1] <= M):
            continue
        if any(Q(r[0]) * x[0] + Q(r[1]) * x[1] > bi for r, bi in zip(A, b)):
            continue
        v = Q(c[0]) * x[0] + Q(c[1]) * x[1]
        if best is None or v > best:
            best = v
    return best


small = st.integers(-4, 4)


@settings(max_examples=60, deadline=None)
@given(st.lists(small, min_size=2, max_size=2),
       st.lists(st.tuples(small, small, small), min_size=1, max_size=4))
def test_lp_matches_vertex_enumeration(c, rows):
    A = [[r[0], r[1]] for r in rows]
    b = [r[2] for r in rows]
    res = solve_lp(c, A, b)
    boxed1 = _brute_box_lp(c, A, b, 1000)
    boxed2 = _brute_box_lp(c, A, b, 2000)
    if res.status == "infeasible":
        assert boxed1 is None
    elif res.status == "optimal":
        assert boxed1 == boxed2 == res.value
        assert all(v >= 0 for v in res.x)
        assert all(sum(Q(a) * x for a, x in zip(r, res.x)) <= bi for r, bi in zip(A, b))
    else:
        assert res.status == "unbounded"
        assert boxed1 is not None and boxed2 > boxed1


def test_interior_point():
    x, t = interior_point([[1, 0], [0, 1], [-1, -1]], [0, 0, 1])
    assert t > 0
    assert all(v > 0 for v in matvec([[1, 0], [0, 1], [-1, -1]], x)[:2]) and x[0] + x[1] < 1
    # a region given only by far-away constraints: point is found, slack capped at 1
    x, t = interior_point([[1, 0], [0, -1]], [-100, -50])
    assert x[0] > 100 and x[1] < -50 and t == 1
    # empty open sets: disjoint half-planes, and a line (not full-dimensional)
    assert interior_point([[1, 1], [-1, -1]], [0, -3]) is None
    assert interior_point([[1, 1], [-1, -1]], [0, 0]) is None
    assert interior_point([[0, 0]], [0]) is None
    assert interior_point([[0, 0]], [1]) == ([Q(0), Q(0)], Q(1))


# ---------------------------------------------------------------------------
# regions
# ---------------------------------------------------------------------------


def check_regions(layers, regions, n, rng=None):
    """Every region is valid: interior point strictly inside; f affine there."""
    patterns = set()
    for r in regions:
        assert isinstance(r, Region)
        assert r.pattern not in patterns
        patterns.add(r.pattern)
        x = r.point
        assert len(x) == n
        assert all(sum((a_k * x_k for a_k, x_k in zip(a, x)), Q(0)) + c > 0
                   for a, c in r.inequalities)
        A, c = r.affine
        assert evaluate(layers, x) == [v + ci for v, ci in zip(matvec(A, x), c)]


def test_literature_width4_identity_is_equivariant_under_order3_rotation():
    # R has order 3
    assert matvec(R3, matvec(R3, matvec(R3, [Q(2), Q(5)]))) == [Q(2), Q(5)]
    for A, Ainv in [([[1, 0], [0, 1]], [[1, 0], [0, 1]]),
                    ([[2, 1], [1, 1]], [[1, -1], [-1, 2]]),
                    ([[1, 2], [0, 1]], [[1, -2], [0, 1]])]:
        f = width4_identity(A, Ainv)
        for x in ([Q(3), Q(-7, 2)], [Q(-1), Q(0)], [Q(0), Q(0)]):
            assert evaluate(f, x) == x
        d = decide_equivariance(f, R3, R3)
        assert isinstance(d, EquivarianceDecision)
        assert d.holds and d.witness is None and d.method == "relu-regions"
        assert d.regions >= 4
        # but the identity does not intertwine R with R^2
        d = decide_equivariance(f, R3, R3_SQ)
        assert not d.holds
        assert sides_differ(f, R3, R3_SQ, d.witness)


def test_non_equivariant_random_net_gives_real_witness():
    rng = random.Random(1)
    f = random_net(rng, [2, 3, 3, 2])
    P = [[0, 1], [1, 0]]
    d = decide_equivariance(f, P, P)
    assert not d.holds
    w = d.witness
    assert all(isinstance(v, fmpq) for v in w)
    lhs = evaluate(f, matvec(P, w))
    rhs = matvec(P, evaluate(f, w))
    assert lhs != rhs
    assert d.difference == [a - b for a, b in zip(lhs, rhs)]
    assert d.regions >= 1


def symmetrized_net(rng, dims, perms):
    """Layers W = M + P_out M P_in (Reynolds operator for an involution)."""
    layers = []
    for i in range(1, len(dims)):
        P_in, P_out = perms[i - 1], perms[i]
        M = [[rng.randint(-3, 3) for _ in range(dims[i - 1])] for _ in range(dims[i])]
        PMP = [[M[P_out[r]][P_in[s]] for s in range(dims[i - 1])] for r in range(dims[i])]
        W = [[M[r][s] + PMP[r][s] for s in range(dims[i - 1])] for r in range(dims[i])]
        b0 = [rng.randint(-3, 3) for _ in range(dims[i])]
        b = [b0[r] + b0[P_out[r]] for r in range(dims[i])]
        layers.append((W, b, i < len(dims) - 1))
    return layers


def pair_swap(k):
    return [j ^ 1 if (j ^ 1) < k else j for j in range(k)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_swap_equivariant_by_construction(seed):
    rng = random.Random(seed)
    dims = [2, 4, 3, 2] if seed else [2, 4, 2]
    perms = [pair_swap(d) for d in dims]  # swaps (0 1)(2 3)..., fixes a last odd neuron
    f = symmetrized_net(rng, dims, perms)
    P = [[0, 1], [1, 0]]
    d = decide_equivariance(f, P, P)
    assert d.holds, d
    # and an honest exact spot check
    for _ in range(5):
        x = [Q(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(2)]
        assert not sides_differ(f, P, P, x)
    # breaking one weight breaks equivariance (generically); the witness is real
    W0, b0, r0 = f[0]
    W0 = [row[:] for row in W0]
    W0[0][0] += 1
    g = [(W0, b0, r0)] + f[1:]
    d = decide_equivariance(g, P, P)
    if not d.holds:
        assert sides_differ(g, P, P, d.witness)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 7])
def test_region_count_generic_arrangement(m):
    # lines y = k x + k^2 (k = 1..m): distinct slopes, and no three concurrent
    # since lines k, l, j meet at one point iff (j - k)(j - l) = 0.
    W1 = [[k, -1] for k in range(1, m + 1)]
    b1 = [k * k for k in range(1, m + 1)]
    f = [(W1, b1, True), ([[1] * m], [0], False)]
    regions = list(linear_regions(f))
    assert len(regions) == 1 + m + m * (m - 1) // 2
    assert count_regions(f) == len(regions)
    check_regions(f, regions, 2)


def test_regions_deep_net_are_valid_and_cover_samples():
    rng = random.Random(7)
    f = random_net(rng, [2, 4, 3, 1])
    regions = list(linear_regions(f))
    check_regions(f, regions, 2)
    # every sample point (off the bent hyperplanes) lies in exactly one region,
    # where f agrees with the region's affine map
    for _ in range(30):
        x = [Q(rng.randint(-40, 40), rng.randint(1, 7)) for _ in range(2)]
        inside = [r for r in regions
                  if all(sum((a * v for a, v in zip(ai, x)), Q(0)) + c > 0
                         for ai, c in r.inequalities)]
        assert len(inside) <= 1
        for r in inside:
            A, c = r.affine
            assert evaluate(f, x) == [v + ci for v, ci in zip(matvec(A, x), c)]


def test_constant_neurons_need_no_branch_and_limits():
    # second neuron has zero weights: constant pre-activation (+1 -> active, -1 -> inactive)
    f = [([[1, 0], [0, 0], [0, 0]], [0, 1, -1], True), ([[1, 1, 1]], [0], False)]
    regs = list(linear_regions(f))
    assert len(regs) == 2
    assert sorted(r.pattern[0] for r in regs) == [(False, True, False), (True, True, False)]
    with pytest.raises(RegionLimitExceeded):
        count_regions(f, limit=1)
    # extra constraints restrict the domain: x > 1 meets only the x > 0 region
    assert count_regions(f, extra_constraints=[([1, 0], -1)]) == 1
    assert count_regions(f, extra_constraints=[([1, 0], -1), ([-1, 0], 0)]) == 0


def test_single_layer_and_relu_last_layer():
    # purely affine f(x) = x on R: h(x) = 2x - x with rho_in = 2, rho_out = 1
    f = [([[1]], [0], False)]
    d = decide_equivariance(f, [[2]], [[1]])
    assert not d.holds and sides_differ(f, [[2]], [[1]], d.witness)
    assert decide_equivariance(f, [[2]], [[2]]).holds
    # last layer ReLU: relu is positively homogeneous, so equivariant under scaling by 3
    g = [([[1, -1], [2, 1]], [0, 0], True)]
    S3 = [[3, 0], [0, 3]]
    assert decide_equivariance(g, S3, S3).holds
    assert not decide_equivariance(g, [[-1, 0], [0, -1]], [[-1, 0], [0, -1]]).holds


def test_witness_steps_off_a_zero_of_the_affine_map():
    # region {x > 0, y > 0, 3 - x - y > 0}, map h(x, y) = x - y vanishes at (1, 1)
    reg = Region(pattern=((True,),),
                 inequalities=[([Q(1), Q(0)], Q(0)), ([Q(0), Q(1)], Q(0)), ([Q(-1), Q(-1)], Q(3))],
                 point=[Q(1), Q(1)], affine=([[Q(1), Q(-1)]], [Q(0)]))
    w = _witness(reg, 2)
    assert w != [Q(1), Q(1)]
    assert all(a[0] * w[0] + a[1] * w[1] + c > 0 for a, c in reg.inequalities)
    assert w[0] - w[1] != 0


def test_difference_network_and_input_validation():
    f = width4_identity([[1, 0], [0, 1]], [[1, 0], [0, 1]])
    h = difference_network(f, R3, R3_SQ)
    x = [Q(2), Q(-3)]
    assert evaluate(h, x) == [a - b for a, b in zip(matvec(R3, x), matvec(R3_SQ, x))]
    with pytest.raises(ValueError):
        decide_equivariance(f, [[1]], R3)
    with pytest.raises(ValueError):
        evaluate(f, [1, 2, 3])
    with pytest.raises(TypeError):
        evaluate(f, [0.5, 1])
    with pytest.raises(ValueError):
        list(linear_regions([([[1, 2]], [0, 1], True)]))


# ---------------------------------------------------------------------------
# property test
# ---------------------------------------------------------------------------


@st.composite
def nets(draw):
    n = draw(st.integers(1, 2))
    depth = draw(st.integers(1, 2))
    dims = [n] + [draw(st.integers(1, 3)) for _ in range(depth)] + [draw(st.integers(1, 2))]
    w = st.integers(-2, 2)
    layers = []
    for i in range(1, len(dims)):
        W = [[draw(w) for _ in range(dims[i - 1])] for _ in range(dims[i])]
        b = [draw(w) for _ in range(dims[i])]
        layers.append((W, b, i < len(dims) - 1))
    return layers, dims


@st.composite
def signed_perms(draw, k):
    perm = draw(st.permutations(list(range(k))))
    signs = [draw(st.sampled_from([-1, 1])) for _ in range(k)]
    return signed_perm(perm, signs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_identity_holds_and_witnesses_are_real(data):
    layers, dims = data.draw(nets())
    n, m = dims[0], dims[-1]
    I_n = signed_perm(list(range(n)), [1] * n)
    I_m = signed_perm(list(range(m)), [1] * m)
    d = decide_equivariance(layers, I_n, I_m)
    assert d.holds and d.witness is None and d.regions >= 1
    rho_in = data.draw(signed_perms(n))
    rho_out = data.draw(signed_perms(m))
    d = decide_equivariance(layers, rho_in, rho_out)
    if d.holds:
        for x in ([Q(1)] * n, [Q(-2, 3)] + [Q(5)] * (n - 1), [Q(7, 2)] + [Q(-1)] * (n - 1)):
            assert not sides_differ(layers, rho_in, rho_out, x)
    else:
        assert sides_differ(layers, rho_in, rho_out, d.witness)


def test_parallel_and_repeated_hyperplanes():
    # x, 2x - 0, -x, and x - 1, x - 2, x - 3 (parallel), y, y - 1, 3y - 3 (repeat)
    W1 = [[1, 0], [2, 0], [-1, 0], [1, 0], [1, 0], [1, 0], [0, 1], [0, 1], [0, 3]]
    b1 = [0, 0, 0, -1, -2, -3, 0, -1, -3]
    f = [(W1, b1, True), ([[1] * 9], [0], False)]
    regions = list(linear_regions(f))
    assert len(regions) == 5 * 3  # lines x = 0..3 and y = 0, 1
    check_regions(f, regions, 2)
    for r in regions:
        s = r.pattern[0]
        assert s[0] == s[1] != s[2]  # x, 2x agree; -x opposite
        assert s[7] == s[8]  # y - 1 and 3y - 3
        assert len(r.inequalities) <= 4  # redundant hyperplanes are not recorded


def test_internal_interior_point_warm_start_and_early_stop():
    from symeq.relu.lp import _interior_point

    A = [[Q(1), Q(0)], [Q(0), Q(1)], [Q(-1), Q(-1)], [Q(1), Q(-3)]]
    b = [Q(0), Q(0), Q(5), Q(-1)]
    for origin in (None, [Q(1), Q(1)], [Q(-7), Q(2)]):
        for early in (False, True):
            x, t = _interior_point(A, b, 2, origin=origin, early=early)
            slack = [sum((a * v for a, v in zip(row, x)), Q(0)) + bi for row, bi in zip(A, b)]
            assert t > 0 and min(slack) >= t
            if not early:
                assert t == interior_point(A, b)[1]  # the maximal margin does not depend on origin
    assert _interior_point(A + [[Q(-1), Q(0)]], b + [Q(0)], 2, origin=[Q(1), Q(1)], early=True) is None
