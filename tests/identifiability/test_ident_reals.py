"""Issue 25, Deliver 1: identifiability statements are about real parameters by default.

sigma(t) = t + t^4 (no shift): the per-neuron scalings of the tensor method solve lambda^3 = 1, whose
non-real roots (lambda^2 + lambda + 1) are fibre points over C only.  Over R the fibre of (3, 3, 3) is the
orbit of 3! = 6 points (identifiable, exit 0) with the complex count 162 = 3! 3^3 beside it; ``--field C``
gives the complex answer (not identifiable, exit 1).  The Gröbner comparison of the (2, 2, 1) version
counts 18 complex points, 2 of them real: the real fibre is the orbit.
"""

import json
import random
from fractions import Fraction

import pytest
from flint import fmpq_poly

from symeq.activations import polynomial, tanh_series
from symeq.cli import main
from symeq.fibre.decide import decide_identifiability
from symeq.fibre.orbit import compare_with_orbit
from symeq.fibre.reals import real_root_count
from symeq.fibre.tensor import tensor_identifiability
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model

T4 = polynomial([0, 1, 0, 0, 1])  # t + t^4
W1 = [[1, 2, 0], [0, 1, -1], [3, -1, 1]]
W2 = [[2, -1, 1], [1, 1, 3], [1, 0, 2]]


def _t4(bias: bool, outputs: int = 3) -> Model:
    return Model(3, [DenseLayer(W1, [1, -2, 3] if bias else None, T4),
                     DenseLayer(W2[:outputs], [1] * outputs if bias else None, None)])


def _write(tmp_path, model, name="m.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(model_to_json(model)))
    return str(path)


# ----------------------------------------------------------------------------- Sturm counts

def test_sturm_counts_against_constructed_roots():
    """Products of distinct rational linear factors and positive-definite quadratics: the real root
    count is the number of linear factors (multiplicities ignored), never anything float-decided."""
    rng = random.Random(25)
    x = fmpq_poly([0, 1])
    for _ in range(60):
        roots = sorted({Fraction(rng.randint(-20, 20), rng.randint(1, 5)) for _ in range(rng.randint(0, 5))})
        p = fmpq_poly([rng.randint(1, 4)])
        for r in roots:
            p *= (x - fmpq_poly([0]) - int(r.numerator) * fmpq_poly([1]) / int(r.denominator)) ** rng.randint(1, 3)
        for _ in range(rng.randint(0, 3)):  # x^2 + c x + e with c^2 < 4 e: no real root
            c = rng.randint(-3, 3)
            p *= x * x + c * x + (c * c // 4 + rng.randint(1, 5))
        assert real_root_count(p) == len(roots)
        assert real_root_count(p, nonzero=True) == len([r for r in roots if r != 0])
    assert real_root_count([1, 1, 1]) == 0 and real_root_count(["-1", "0", "1"]) == 2
    assert real_root_count(["-2", "0", "1"]) == 2  # +-sqrt 2: irrational, real
    with pytest.raises(ValueError):
        real_root_count([0])


# ----------------------------------------------------------------------------- the tensor method

@pytest.mark.parametrize("bias,outputs", [(False, 3), (True, 3), (False, 1), (True, 1)])
def test_t_plus_t4_identifiable_over_R(bias, outputs):
    m = _t4(bias, outputs)
    t = tensor_identifiability(m)
    assert (t.status, t.over, t.orbit_size, t.fibre_points) == ("identifiable", "R", 6, 6), t.reason
    assert t.complex_fibre_points == 162 and t.real_fibre_points == 6
    assert "over C the fibre has 162 points" in t.reason
    assert t.complex_witness is not None and t.complex_witness["real_roots"] == 0
    c = tensor_identifiability(m, field="C")
    assert (c.status, c.over) == ("not-identifiable", "C")
    assert c.witness["minimal_polynomial"] == ["1", "1", "1"] and c.witness["real"] is False


def test_identifiable_over_C_is_identifiable_over_R():
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], tanh_series(3)),
                  DenseLayer([[2, -1], [1, 1]], [1, 0], None)])
    r, c = tensor_identifiability(m), tensor_identifiability(m, field="C")
    assert r.status == c.status == "identifiable" and r.fibre_points == c.fibre_points == 8
    assert r.complex_fibre_points == 8 and r.certificate is not None


def test_field_is_checked():
    from symeq.errors import InputError

    with pytest.raises(InputError):
        tensor_identifiability(_t4(False), field="Q")
    with pytest.raises(InputError):
        decide_identifiability(_t4(False), field="reals")


# ----------------------------------------------------------------------------- the command line

@pytest.mark.parametrize("bias,outputs", [(False, 3), (True, 3), (False, 1)])
def test_cli_fibre_over_R_and_C(tmp_path, capsys, bias, outputs):
    path = _write(tmp_path, _t4(bias, outputs))
    assert main(["fibre", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["status"], d["over"], d["method"], d["fibre_points"]) == ("identifiable", "R", "tensor", 6)
    assert d["complex_fibre_points"] == 162
    assert main(["fibre", path]) == 0
    out = capsys.readouterr().out
    assert "fibre: 6 points over R (162 over C)" in out and "identifiable (over R)" in out
    assert main(["fibre", path, "--json", "--field", "C"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert (d["status"], d["over"]) == ("not-identifiable", "C")


# ----------------------------------------------------------------------------- the Gröbner comparison

def _t4_221() -> Model:
    return Model(2, [DenseLayer([[1, 2], [3, -1]], None, T4), DenseLayer([[2, -1]], None, None)])


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_groebner_221_real_fibre_is_the_orbit():
    m = _t4_221()
    c = compare_with_orbit(m, field="C", timeout=60)
    assert (c.status, c.distinct_points, c.real_points, c.orbit_size) == ("not-identifiable", 18, 2, 2)
    r = compare_with_orbit(m, timeout=60)
    assert (r.status, r.over, r.complex_status) == ("identifiable", "R", "not-identifiable"), r.reason
    assert "the real fibre is the orbit" in r.reason and "18 distinct complex points" in r.reason
    # the tensor method, by another route, counts the same: 2 real points, 18 complex
    t = tensor_identifiability(m)
    assert (t.status, t.fibre_points, t.complex_fibre_points) == ("identifiable", 2, 18)


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_cli_groebner_221(tmp_path, capsys):
    path = _write(tmp_path, _t4_221())
    assert main(["fibre", path, "--method", "groebner", "--json", "--timeout", "60"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["status"], d["over"], d["real_points"], d["distinct_points"]) == ("identifiable", "R", 2, 18)
    assert d["complex_status"] == "not-identifiable"
    assert main(["fibre", path, "--method", "groebner", "--field", "C", "--timeout", "60"]) == 1
    assert "18 distinct complex points (2 real)" in capsys.readouterr().out


def test_real_reading_keeps_real_witnesses_and_opens_complex_only_ones():
    """A positive-dimensional fibre with a real line stays not identifiable over R; a verdict resting on
    complex points only becomes "unknown" over R, with the complex status beside it."""
    import dataclasses

    from symeq.activations import monomial
    from symeq.fibre.orbit import real_reading

    m = Model(2, [DenseLayer([[1, 2], [3, -1]], None, monomial(2)), DenseLayer([[2, -1]], None, None)])
    c = compare_with_orbit(m, engine="sympy", structural=False, field="C")
    assert c.status == "not-identifiable" and c.witness_real is True
    assert real_reading(m, c).status == "not-identifiable"
    hidden = dataclasses.replace(c, witness_real=None)
    r = real_reading(m, hidden)
    assert (r.status, r.over, r.complex_status) == ("unknown", "R", "not-identifiable")


# ----------------------------------------------------------------------------- certificates and the checker

def _check(cert, model):
    from symeq_check import check_certificate

    return check_certificate(json.loads(json.dumps(cert)), json.loads(json.dumps(model_to_json(model))))


def _refused(cert, model) -> bool:
    """The checker refuses: a rejection, or a malformed certificate (CheckError, exit 2)."""
    from symeq_check import CheckError

    try:
        return _check(cert, model).accepted is False
    except CheckError:
        return True


@pytest.mark.parametrize("bias", [False, True])
def test_real_claim_certificate_is_rechecked_by_sturm(bias):
    import copy

    m = _t4(bias)
    cert = tensor_identifiability(m).certificate
    assert cert["over"] == "R" and [n["real_solutions"] for n in cert["neurons"]] == [1, 1, 1]
    assert [n["solutions"] for n in cert["neurons"]] == [3, 3, 3]
    r = _check(cert, m)
    assert r.accepted is True and any("real solutions (Sturm" in c for c in r.checks)
    assert any("fibre = orbit over R: 6 points" in c for c in r.checks)
    tampered = []
    for value in (3, 0, 2, "all", None):
        bad = copy.deepcopy(cert)
        bad["neurons"][1]["real_solutions"] = value
        tampered.append(bad)
    no_over = copy.deepcopy(cert)
    del no_over["over"]  # real_solutions is then an unknown key
    bare = copy.deepcopy(no_over)
    for n in bare["neurons"]:
        del n["real_solutions"]  # the complex claim: 3 solutions for 1 latent scaling
    other = copy.deepcopy(cert)
    other["over"] = "C"
    tampered += [no_over, bare, other]
    for bad in tampered:
        assert _refused(bad, m)


def test_complex_witness_certificate_says_over_C_and_a_real_claim_is_refused():
    import copy

    m = _t4(False)
    cert = tensor_identifiability(m, field="C").certificate
    assert "over" not in cert and "real_roots" not in cert["witness"]
    r = _check(cert, m)
    assert r.accepted is True and any("over C only" in c for c in r.checks)
    claim = copy.deepcopy(cert)
    claim["over"] = "R"
    claim["witness"]["real_roots"] = 0  # no real root: not a real fibre point
    assert _refused(claim, m)
    claim["witness"]["real_roots"] = 2
    assert _refused(claim, m)


def test_checker_sturm_count_agrees_with_the_prover():
    from symeq_check.identifiability.tensor import _real_roots_count

    rng = random.Random(7)
    for _ in range(200):
        p = [Fraction(rng.randint(-6, 6), rng.randint(1, 3)) for _ in range(rng.randint(2, 7))]
        if p[-1] == 0:
            p[-1] = Fraction(1)
        assert _real_roots_count(p) == real_root_count([str(c) for c in p])


def test_verify_identifiability_over_R_and_C():
    from symeq.groups import trivial_group
    from symeq.theorem import verify

    m = _t4(False).with_group(trivial_group(3, 3))
    v = verify(m, method="grid", identifiability=True)
    assert v.identifiability["status"] == "identifiable" and "over R" in v.identifiability["detail"]
    c = verify(m, method="grid", identifiability=True, identifiability_field="C")
    assert c.identifiability["status"] == "not-identifiable" and "over C" in c.identifiability["detail"]
