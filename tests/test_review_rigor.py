"""Review of the exact paths for real activations, convolutions and certify (rigor checks).

* certify: "proven nearest" only where the search covered all of K_i (ReLU's positive scalings and
  the sigmoid's affine flips are not searched, so a one-hidden-layer matching is not a proof there);
* the checker's stdlib interval functions enclose the true values (python-flint arb at 600 bits as
  the reference) at adversarial points: large |x|, x near 0, negative x, and on intervals;
* the conv kernel fast path (symeq.layers.conv and the checker's own) never accepts an action that
  the dense expansion's exact check rejects (odd/even sizes, strides, paddings, circular mode).
"""

from __future__ import annotations

import random
from fractions import Fraction as F

import pytest
from flint import arb, ctx, fmpq

from symeq_check.conv import _Conv, _conv_failure
from symeq_check.intervals import _exp_bounds, _interval_apply
from symeq_check.real import _Real


# -- certify: proven nearest only over all of K_i ------------------------------------------------

@pytest.mark.parametrize("act, proven", [("relu", False), ("sigmoid", False), ("tanh", True)])
def test_one_hidden_layer_proven_nearest_only_where_k_is_searched(act, proven):
    from symeq.certification import certify
    from symeq.groups import mirror
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.models import numeric_activation

    G = mirror(2, 2)
    net = random_equivariant_numeric(G, [4], numeric_activation(act), rng=0).perturbed(1e-4, rng=1)
    c = certify(net, G)
    assert c.status == "certified"
    assert c.proven_nearest is proven
    assert c.to_json()["actions"]["proven_nearest"] is proven
    assert ("not proven nearest" in c.report()) is (not proven)


# -- stdlib interval evaluation against arb ------------------------------------------------------

def _arb(x: F):
    return arb(fmpq(x.numerator, x.denominator))


def _reference(name, param, x: F):
    a = _arb(x)
    if name == "tanh":
        return a.tanh()
    if name == "erf":
        return a.erf()
    if name == "sigmoid":
        return 1 / (1 + (-a).exp())
    if name == "silu":
        return a / (1 + (-a).exp())
    if name == "softplus":
        return a.exp().log1p()
    if name == "gelu" and param == "tanh":
        k = (arb(2) / arb.pi()).sqrt()
        return a / 2 * (1 + (k * (a + arb(fmpq(44715, 1000000)) * a * a * a)).tanh())
    if name == "gelu":
        return a / 2 * (1 + (a / arb(2).sqrt()).erf())
    assert name == "elu"
    return a if x >= 0 else _arb(param) * a.expm1()


ACTS = [("tanh", None), ("erf", None), ("sigmoid", None), ("silu", None), ("softplus", None), ("gelu", None),
        ("gelu", "tanh"), ("elu", F(1)), ("elu", F(-3, 2))]
POINTS = [F(0), F(1, 10 ** 30), F(-1, 10 ** 30), F(1, 3), F(-7, 2), F(59, 10), F(-61, 10), F(6), F(-20), F(100),
          F(-1000), F(10 ** 6), F(-10 ** 6), F(355, 113), F(-3, 1000), F(2002)]


def _encloses(lo, hi, r) -> bool:
    """Not certainly outside [lo, hi], and a point enclosure only for an exact value."""
    return not (_arb(hi) < r) and not (_arb(lo) > r) and (lo != hi or r.is_exact())


@pytest.mark.parametrize("bits", [40, pytest.param(200, marks=pytest.mark.slow)])
def test_stdlib_intervals_enclose_the_true_values(bits):
    old = ctx.prec
    ctx.prec = 600
    try:
        for name, param in ACTS:
            act = _Real(name, param)
            for x in POINTS:
                lo, hi = _interval_apply(act, (x, x), bits)
                assert lo <= hi
                assert _encloses(lo, hi, _reference(name, param, x)), (name, param, x, bits)
    finally:
        ctx.prec = old


def test_stdlib_intervals_enclose_on_intervals():
    rng = random.Random(2)
    old = ctx.prec
    ctx.prec = 300
    try:
        for _ in range(12):
            a = F(rng.randint(-300, 300), rng.choice([1, 7, 64]))
            b = a + F(rng.randint(0, 300), rng.choice([1, 7, 64]))
            for name, param in ACTS:
                lo, hi = _interval_apply(_Real(name, param), (a, b), 60)
                for k in range(5):
                    r = _reference(name, param, a + (b - a) * F(k, 4))
                    assert not (_arb(hi) < r) and not (_arb(lo) > r), (name, param, a, b, k)
    finally:
        ctx.prec = old


def test_exp_bounds_far_left_and_moderate_right():
    for r in (F(-10 ** 9), F(-105), F(-104), F(-1, 3), F(0), F(1, 7), F(50)):
        lo, hi = _exp_bounds(r, 40)
        e = _arb(r).exp()
        assert not (_arb(hi) < e) and not (_arb(lo) > e), r


# -- conv geometry: the kernel fast path against the dense expansion -------------------------------

def _orbits(perm):
    seen, out = [False] * len(perm), []
    for i in range(len(perm)):
        o, j = [], i
        while not seen[j]:
            seen[j] = True
            o.append(j)
            j = perm[j]
        if o:
            out.append(o)
    return out


def test_conv_fast_paths_agree_with_the_dense_check():
    from symeq.activations import tanh_series
    from symeq.layers.conv import _PLANE, ConvAction, ConvLayer, ConvShape, output_pixels, tap_permutation, \
        transform_pixels

    rng = random.Random(3)
    act = tanh_series(3)
    act_t = tuple(F(int(c.p), int(c.q)) for c in act.coeffs)
    accepted = 0
    for H, W, k, s, p, mode in [(3, 3, 3, 1, 1, "zeros"), (4, 4, 2, 2, 0, "zeros"), (5, 5, 3, 2, 1, "zeros"),
                                (4, 5, 1, 3, 1, "zeros"), (4, 4, 3, 1, 1, "circular"), (5, 5, 2, 3, 2, "circular"),
                                (4, 4, 3, 2, 2, "zeros"), (3, 4, 2, 1, 0, "circular")]:
        shape = ConvShape(1, 1, H, W, k, k, stride=s, padding=p, padding_mode=mode)
        oh, ow = shape.out_hw
        for R in _PLANE:
            pin = transform_pixels(R, H, W)
            if pin is None:
                continue
            for sym in (True, False):
                flat = [fmpq(rng.randint(-3, 3)) for _ in range(k * k)]
                if sym:  # a kernel invariant under R's tap permutation
                    for o in _orbits(tap_permutation(shape, [0], R)):
                        for t in o:
                            flat[t] = flat[o[0]]
                layer = ConvLayer(shape, [[[flat[i * k:(i + 1) * k] for i in range(k)]]], [fmpq(1)], act)
                dense = layer.dense()
                guessed = output_pixels(shape, R)
                for qpix in ([guessed] if guessed else []) + [tuple(rng.sample(range(oh * ow), oh * ow))]:
                    P = ConvAction((0,), (fmpq(1),), tuple(pin), (H, W))
                    Q = ConvAction((0,), (fmpq(1),), tuple(qpix), (oh, ow))
                    ref = dense.check_action(P.to_matrix(), Q.to_matrix())[0]
                    assert layer.check_action(P, Q)[0] == ref, (H, W, k, s, p, mode, R, sym)
                    cl = _Conv((1, H, W), k, k, s, p, mode, (tuple(F(int(x.p), int(x.q)) for x in flat),), (F(1),),
                                 act_t)
                    why = _conv_failure(cl, ((0,), (F(1),), tuple(pin)), ((0,), (F(1),), tuple(qpix)))
                    assert (why is None) == ref, (H, W, k, s, p, mode, R, sym, why)
                    accepted += ref
    assert accepted > 10  # the symmetric kernels are accepted: the comparison is not vacuous


def test_certify_claims_theta_bar_only_when_the_actions_hold_at_theta_bar(monkeypatch):
    """A verification whose actions hold at a re-parametrized theta' (not the theta-bar written) does
    not certify theta-bar as layerwise equivariant: undetermined, with the reason."""
    import symeq.theorem as theorem
    from symeq.certification import certify
    from symeq.groups import mirror
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.models import numeric_activation

    real_verify = theorem.verify

    def reparametrized(model, *args, **kwargs):
        v = real_verify(model, *args, **kwargs)
        v.original = model  # as the submodel routes set it: the actions are claimed at v.model, not at model
        return v

    G = mirror(2, 2)
    net = random_equivariant_numeric(G, [4], numeric_activation("tanh"), rng=0).perturbed(1e-4, rng=1)
    assert certify(net, G).status == "certified"
    monkeypatch.setattr(theorem, "verify", reparametrized)
    c = certify(net, G)
    assert c.status == "undetermined" and c.exit_code == 3
    assert "re-parametrized" in c.reason and "not proven" in c.reason


def test_geometry_refusal_does_not_claim_impossibility():
    """Circular padding 2 on 3x3 images, kernel 2x2, stride 2: N + 2p - k = 5 is odd, so symeq's pixel
    rule refuses the mirror, yet a mirror-symmetric kernel is equivariant (output columns 0 and 1
    swapped: the wrapped windows read columns (1, 2), (0, 1), (2, 0)), as the dense check shows; the
    refusal must read as inconclusive, not as "cannot be equivariant"."""
    from symeq.activations import tanh_series
    from symeq.layers.conv import ConvAction, ConvLayer, ConvShape, output_pixels, transform_pixels

    R = (1, 0, 0, -1)  # left-right mirror
    shape = ConvShape(1, 1, 3, 3, 2, 2, stride=2, padding=2, padding_mode="circular")
    layer = ConvLayer(shape, [[[[1, 1], [2, 2]]]], [1], tanh_series(3))
    assert output_pixels(shape, R) is None
    P = ConvAction((0,), (fmpq(1),), tuple(transform_pixels(R, 3, 3)), (3, 3))
    Q = ConvAction((0,), (fmpq(1),), tuple(3 * y + (1, 0, 2)[x] for y in range(3) for x in range(3)), (3, 3))
    assert layer.dense().check_action(P.to_matrix(), Q.to_matrix())[0]
    why = layer.geometry_failure(R)
    assert "cannot be equivariant" not in why and "inconclusive" in why
