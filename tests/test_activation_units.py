"""One generic test body over every activation unit (issue 26, items 3 and 8).

The cases come from the registry (:mod:`symeq.activations.registry`: every unit, each of its
``example_specs``), so a new activation is under these tests as soon as it is registered, without
editing this file.  For each: the spec reads back to the same spec and unit; the arb ball at
rational points contains the float value and every rational exact value; sigma' agrees with a
central difference; the symmetry identities hold at rational points (the real units' rows, and
each polynomial's admissible scalings, exactly), and a sign flip that is *not* declared fails
somewhere; the torch module computes the numpy function and reads back; an exported ONNX layer
reads back as the same activation.
"""

from __future__ import annotations

import numpy as np
import pytest
from flint import arb, fmpq

from symeq.activations import ACTIVATION_NAMES, ALIASES, REAL_SYMMETRIES, activation_from_spec
from symeq.activations.registry import (UNITS, float_functions, spec_from_torch, torch_activation_classes,
                                        torch_module, units)
from symeq.errors import InputError, NotExactError

CASES = [pytest.param(spec, id=f"{u.name}-{i}") for u in units() for i, spec in enumerate(u.example_specs())]
POINTS = [fmpq(p, q) for p, q in ((-3, 1), (-7, 5), (-1, 3), (1, 5), (1, 2), (5, 2))]


def _fq(t) -> float:
    return int(t.p) / int(t.q)


def test_the_registry_is_the_list_of_names():
    assert ACTIVATION_NAMES == tuple(u.name for u in units())
    assert set(UNITS) == set(ACTIVATION_NAMES)
    for alias, name in ALIASES.items():
        assert alias not in UNITS and name in UNITS
        assert activation_from_spec({"type": alias} if not UNITS[name].required else
                                    dict(UNITS[name].example_specs()[0], type=alias)).name == name
    assert set(REAL_SYMMETRIES) == {u.name for u in units("real")}


@pytest.mark.parametrize("spec", CASES)
def test_spec_round_trip_and_unit(spec):
    act = activation_from_spec(spec)
    assert act.unit is UNITS[spec["type"]] and act.kind == act.unit.kind
    again = activation_from_spec(act.to_spec())
    assert again.to_spec() == act.to_spec() and again.unit is act.unit
    assert isinstance(act.latex(), str) and act.latex()


@pytest.mark.parametrize("spec", CASES)
def test_ball_contains_the_float_value_and_the_exact_value(spec):
    act = activation_from_spec(spec)
    f, _ = float_functions(act)
    for t in POINTS + [fmpq(0)]:
        ball = act.ball(arb(t))
        value = float(f(np.array([_fq(t)]))[0])
        assert ball.overlaps(arb(value, 1e-12 * max(1.0, abs(value)))), (t, ball, value)
        try:
            exact = act(t)
        except NotExactError:
            continue
        assert ball.overlaps(arb(exact)) and abs(_fq(fmpq(exact)) - value) <= 1e-12 * max(1.0, abs(value)), (t, exact)


@pytest.mark.parametrize("spec", CASES)
def test_derivative_matches_a_central_difference(spec):
    act = activation_from_spec(spec)
    f, fp = float_functions(act)
    t = np.array([-2.3, -0.7, 0.4, 1.9])  # away from the kinks at 0
    h = 1e-6
    fd = (f(t + h) - f(t - h)) / (2 * h)
    assert np.allclose(fp(t), fd, rtol=1e-5, atol=1e-6), (fp(t), fd)


def _identity_holds_on_balls(act, alpha, beta, q, c) -> bool:
    """False when some rational point's balls exclude sigma(alpha t + beta) = q sigma(t) + c."""
    for t in POINTS:
        lhs = act.ball(arb(fmpq(alpha) * t + fmpq(beta)))
        rhs = arb(fmpq(q)) * act.ball(arb(t)) + arb(fmpq(c))
        if not lhs.overlaps(rhs):
            return False
    return True


SIGN_FLIPS = [(-1, 0, -1, 0), (-1, 0, 1, 0), (-1, 0, -1, 1)]


@pytest.mark.parametrize("spec", CASES)
def test_symmetry_identities_hold_and_undeclared_sign_flips_fail(spec):
    act = activation_from_spec(spec)
    if act.is_real:
        rows = act.unit.identities
        rows = [(a, 0, a, 0) for a in (fmpq(1, 3), fmpq(2))] if rows == "positive" else rows
        for row in rows:
            assert act.symmetry_holds(*row) and _identity_holds_on_balls(act, *row), row
        for row in SIGN_FLIPS:
            if not act.symmetry_holds(*row):  # not declared: the balls must refute it somewhere
                assert not _identity_holds_on_balls(act, *row), row
        return
    # polynomials and ReLU: every admissible scaling (with the offset the next bias absorbs), exactly
    s = act.shift
    for alpha in [fmpq(a) for a in act.finite_scalings(True)] + ([fmpq(2), fmpq(1, 3)] if act.continuous(True) else []):
        q, o = act.affine_admissible(alpha)
        for t in POINTS:
            assert act(alpha * t + s * (1 - alpha)) == q * act(t) + o, (alpha, t)
    if act.affine_admissible(-1) is None and act.symmetry != "relu":  # no flip declared: none holds
        for t in POINTS:
            if act(-t + 2 * s) != -act(t) + 2 * act(s) and act(-t + 2 * s) != act(t):
                break
        else:
            pytest.fail("an undeclared sign flip holds at every point")


@pytest.mark.parametrize("spec", CASES)
def test_torch_module_computes_the_float_function_and_reads_back(spec):
    torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install 'symeq[numeric]')")
    act = activation_from_spec(spec)
    if act.unit.torch is None:
        with pytest.raises(InputError, match="torch"):
            torch_module(act)
        return
    mod = torch_module(act)
    f, _ = float_functions(act)
    t = np.linspace(-4.0, 4.0, 41)
    with torch.no_grad():
        got = mod(torch.tensor(t, dtype=torch.float64)).numpy()
    assert np.allclose(got, f(t), rtol=1e-12, atol=1e-12), np.max(np.abs(got - f(t)))
    kind = type(mod).__name__
    assert kind in torch_activation_classes()
    back = activation_from_spec(spec_from_torch(mod, kind, "1"))
    assert np.allclose(float_functions(back)[0](t), f(t), rtol=1e-12, atol=1e-12)
    if not act.is_polynomial:
        assert back.to_spec() == act.to_spec()


@pytest.mark.parametrize("spec", CASES)
def test_onnx_export_reads_back_as_the_same_activation(spec, tmp_path):
    pytest.importorskip("onnx", reason="the ONNX tests need onnx: pip install 'symeq[onnx]'")
    from symeq.numeric.models import NumericDenseLayer, NumericModel, numeric_activation
    from symeq.numeric.onnx_io import export_onnx, load_onnx

    act = activation_from_spec(spec)
    assert act.symmetry not in ("affine", "constant")  # the float path refuses those; no example is one
    rng = np.random.default_rng(0)
    m = NumericModel(2, [NumericDenseLayer(rng.standard_normal((3, 2)), rng.standard_normal(3), numeric_activation(spec)),
                         NumericDenseLayer(rng.standard_normal((2, 3)), rng.standard_normal(2), None)])
    path = tmp_path / "net.onnx"
    export_onnx(m, path)
    read = load_onnx(path).layers[0].activation
    t = np.linspace(-4.0, 4.0, 41)
    assert np.allclose(read(t), m.layers[0].activation(t), rtol=1e-12, atol=1e-12)
    if not act.is_polynomial:
        assert read.spec == act.to_spec()
