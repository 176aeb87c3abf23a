"""Identifiability of real tanh / sigmoid networks by Sussmann 1992 and Fefferman 1994: verdicts,
exact witnesses, certificates and their stdlib re-check (symeq/fibre/classical.py, symeq_check/,
docs/identifiability.md)."""

from __future__ import annotations

import json
import math
import random
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from symeq.activations import real, tanh_series
from symeq_check import CheckError, check_certificate
from symeq.cli import main
from symeq.fibre import classical
from symeq.fibre.classical import (apply_changes, classical_identifiability, fefferman_conditions, in_orbit,
                                   same_function, sigmoid_to_tanh, sussmann_conditions)
from symeq.io import model_to_json, save_model
from symeq.models import DenseLayer, Model
from symeq.numbers import mat_rows

sys.path.insert(0, str(Path(__file__).parents[1]))
from json_mutations import field_mutations  # noqa: E402

ACT = {"tanh": math.tanh, "sigmoid": lambda t: 1 / (1 + math.exp(-t))}


def _model(W1, b1, W2, b2, act="tanh"):
    return Model(len(W1[0]), [DenseLayer(W1, b1, real(act)), DenseLayer(W2, b2, None)])


# a one-hidden-layer net (2, 3, 2): unit 2 is the -clone of unit 0, (w_2, b_2) = -(w_0, b_0)
CLONE = ([[1, 2], [3, -1], [-1, -2]], [1, -2, -1], [[2, -1, 3], [1, 1, -2]], [1, 0])
# the same net without the clone
PLAIN = ([[1, 2], [3, -1]], [1, -2], [[2, -1], [1, 1]], [1, 0])


def _theta(m):
    return [(mat_rows(l.weight), list(l.bias)) for l in m.layers]


def _float_f(theta, act, x, terms=(), layer=None):
    """f at x in floats (a sanity check only: the proof is the exact identity); ``terms`` (c, a) are
    added to the bias of layer ``layer + 1``."""
    for l, (W, b) in enumerate(theta, 1):
        z = [sum(float(w) * xi for w, xi in zip(row, x)) + float(bi) for row, bi in zip(W, b)]
        if l == (layer or 0) + 1:
            for c, a in terms:
                z = [zi + float(ci) * ACT[act](float(a)) for zi, ci in zip(z, c)]
        x = z if l == len(theta) else [ACT[act](t) for t in z]
    return x


def _check(d, m):
    return check_certificate(json.loads(json.dumps(d.certificate)), json.loads(json.dumps(model_to_json(m))))


def _witness_is_exact(d, m, act):
    theta = _theta(m)
    layer = d.witness["layer"]
    theta2, terms = apply_changes(theta, d.witness)
    assert same_function(theta, theta2, act, layer, terms)
    assert not in_orbit(theta, theta2, act, (layer + 1,) if terms else ())
    rng = random.Random(1)
    for _ in range(5):  # floats agree too (not the proof)
        x = [rng.uniform(-3, 3) for _ in range(m.input_dim)]
        assert _float_f(theta2, act, x, terms, layer) == pytest.approx(_float_f(theta, act, x), abs=1e-12)
    return theta2


# ----------------------------------------------------------------------------- Sussmann

@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_clone_pair_is_not_identifiable_with_an_exact_witness(act):
    m = _model(*CLONE, act=act)
    d = classical_identifiability(m)
    assert d.status == "not-identifiable" and d.method == "sussmann"
    assert d.condition == "Sussmann: R3 fails"
    assert d.witness["condition"] == "R3" and d.witness["units"] == [0, 2] and d.witness["sign"] == -1
    theta2 = _witness_is_exact(d, m, act)
    assert all(row[2] == 0 for row in theta2[1][0])  # all output weight moved to unit 0
    assert [c["holds"] for c in d.conditions] == [True, True, False]
    assert _check(d, m).accepted is True


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_without_the_clone_identifiable_by_sussmann(act):
    m = _model(*PLAIN, act=act)
    d = classical_identifiability(m)
    assert d.status == "identifiable" and d.method == "sussmann"
    assert d.orbit_size == 2 ** 2 * 2 and d.fibre_points == 8
    assert d.certificate["group"] == ("signed permutations" if act == "tanh" else "affine flips")
    assert d.certificate["orbit_size"] == "8" and d.certificate["orbit_formula"] == "2^2 2!"
    assert _check(d, m).accepted is True
    j = d.to_json()
    assert j["method"] == "sussmann" and [c["name"] for c in j["conditions"]] == ["R1", "R2", "R3"]
    json.dumps(j)


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
@pytest.mark.parametrize("case", ["dead", "constant", "constant-zero-bias", "clone+", "dead-half"])
def test_reducible_units_give_exact_witnesses(act, case):
    W1, b1, W2, b2 = [[1, 2], [3, -1], [2, 5]], [1, -2, 3], [[2, -1, 4]], [1]
    if case == "dead":
        W2 = [[2, 0, 4]]
    elif case == "dead-half":  # b_j = -1/2: the witness must not map the unit to its own flip
        W1, b1, W2 = [[0, 0], [3, -1], [2, 5]], ["-1/2", -2, 3], [[0, -1, 4]]
    elif case == "constant":
        W1 = [[1, 2], [0, 0], [2, 5]]
    elif case == "constant-zero-bias":
        W1, b1 = [[1, 2], [0, 0], [2, 5]], [1, 0, 3]
    else:
        W1, b1 = [[1, 2], [3, -1], [1, 2]], [1, -2, 1]
    m = _model(W1, b1, W2, b2, act)
    d = classical_identifiability(m)
    assert d.status == "not-identifiable"
    want = {"dead": "R1", "dead-half": "R1", "constant": "R2", "constant-zero-bias": "R2", "clone+": "R3"}[case]
    assert d.witness["condition"] == want
    _witness_is_exact(d, m, act)
    r = _check(d, m)
    assert r.accepted is True, r.reasons


def test_many_failures_are_counted_and_the_first_listed():
    n = 25  # 25 dead units: R1 fails 25 times, the certificate lists the first 20
    W1 = [[j + 1, 2 * j + 3] for j in range(n + 1)]
    b1 = [j + 1 for j in range(n + 1)]
    m = _model(W1, b1, [[0] * n + [1]], [0])
    d = classical_identifiability(m)
    r1 = d.conditions[0]
    assert r1["count"] == n and r1["failing"] == list(range(20)) and d.witness["units"] == [0]
    assert _check(d, m).accepted is True
    bad = json.loads(json.dumps(d.certificate))
    bad["conditions"][0]["count"] = 20
    assert check_certificate(bad, model_to_json(m)).accepted is False


def test_condition_functions_on_rationals():
    from flint import fmpq

    Q = lambda rows: [[fmpq(x) for x in r] for r in rows]  # noqa: E731
    c = sussmann_conditions(Q([[1, 2], [0, 0], [-2, -4], [1, 2]]), [fmpq(1), fmpq(3), fmpq(-2), fmpq(1)],
                            Q([[1, 0, 1, 1]]))
    assert [x["failing"] for x in c] == [[1], [1], [[0, 3, 1]]]
    c = sussmann_conditions(Q([[1, 2], [-1, -2]]), [fmpq(1), fmpq(-1)], Q([[1, 1]]))
    assert c[2]["failing"] == [[0, 1, -1]]
    # F4: 1/3 has Q = 3 <= 100 D; 1000/1001 passes with D = 2 (Q, |P| > 200)
    lay = [(Q([[1], [3]]), [fmpq(1), fmpq(2)])]
    assert fefferman_conditions(lay, 1)[3]["failing"] == [[1, 0, 0, 1, 1, 3]]
    lay = [(Q([["1000/7"], ["1001/7"]]), [fmpq(1), fmpq(2)])]
    assert fefferman_conditions(lay, 1)[3]["holds"] is True
    lay = [(Q([[1, 0]]), [fmpq(0)]), (Q([[1]]), [fmpq(1)])]
    f = fefferman_conditions(lay, 2)
    assert f[0]["failing"] == [[1, 0]] and f[2]["failing"] == [[1, 0, 1]]
    lay = [(Q([[1], [2]]), [fmpq(3), fmpq(-3)])]
    assert fefferman_conditions(lay, 1)[1]["failing"] == [[1, 0, 1]]


def test_sigmoid_to_tanh_has_the_same_function():
    from flint import fmpq

    rng = random.Random(3)
    rows = [([[fmpq(rng.randint(-9, 9), 7) for _ in range(2)] for _ in range(3)],
             [fmpq(rng.randint(-9, 9), 5) for _ in range(3)]),
            ([[fmpq(rng.randint(-9, 9), 3) for _ in range(3)] for _ in range(3)], [fmpq(1, 3)] * 3),
            ([[fmpq(rng.randint(-9, 9), 2) for _ in range(3)]], [fmpq(2)])]
    tanh_rows = sigmoid_to_tanh(rows)

    def run(layers, act, x):
        for l, (W, b) in enumerate(layers):
            z = [sum(float(w) * xi for w, xi in zip(row, x)) + float(bi) for row, bi in zip(W, b)]
            x = z if l == len(layers) - 1 else [ACT[act](t) for t in z]
        return x

    for _ in range(5):
        x = [rng.uniform(-2, 2) for _ in range(2)]
        assert run(tanh_rows, "tanh", x) == pytest.approx(run(rows, "sigmoid", x), abs=1e-12)


# ----------------------------------------------------------------------------- Fefferman

def _rounded_model(widths, act="tanh", seed=0):
    """Weights and biases rounded from float normals: Fraction(x).limit_denominator(10**6)."""
    np = pytest.importorskip("numpy", reason="numpy is a core dependency: pip install numpy")
    rng = np.random.default_rng(seed)
    q = lambda x: Fraction(float(x)).limit_denominator(10 ** 6)  # noqa: E731
    layers = []
    for l in range(1, len(widths)):
        W = [[q(x) for x in row] for row in rng.normal(size=(widths[l], widths[l - 1]))]
        b = [q(x) for x in rng.normal(size=widths[l])]
        layers.append(DenseLayer(W, b, real(act) if l < len(widths) - 1 else None))
    return Model(widths[0], layers)


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_deep_net_rounded_from_floats_identifiable_by_fefferman(act):
    m = _rounded_model([3, 5, 4, 2], act)
    d = classical_identifiability(m)
    assert [c["holds"] for c in d.conditions] == [True] * 4
    assert d.status == "identifiable" and d.method == "fefferman"
    assert d.orbit_size == 2 ** 5 * math.factorial(5) * 2 ** 4 * math.factorial(4)
    assert "satisfying Fefferman's conditions" in d.scope
    assert _check(d, m).accepted is True


def test_failing_fefferman_condition_is_undetermined():
    m = _rounded_model([3, 4, 4, 2])
    base = model_to_json(m)
    for what, edit, cond in [
            ("zero bias", lambda j: j["layers"][1]["bias"].__setitem__(0, "0"), "F1"),
            ("equal |bias|", lambda j: j["layers"][0]["bias"].__setitem__(1, str(-Fraction(j["layers"][0]["bias"][0]))),
             "F2"),
            ("zero weight", lambda j: j["layers"][2]["weight"][0].__setitem__(0, "0"), "F3"),
            ("small ratio", lambda j: j["layers"][1]["weight"][1].__setitem__(
                2, str(3 * Fraction(j["layers"][1]["weight"][0][2]))), "F4")]:
        j = json.loads(json.dumps(base))
        edit(j)
        from symeq.io import model_from_json

        d = classical_identifiability(model_from_json(j))
        assert d.status == "undetermined", what
        assert d.certificate is None and d.method == "fefferman"
        failed = [c["name"] for c in d.conditions if not c["holds"]]
        assert cond in failed and cond in d.condition, what


@pytest.mark.parametrize("case", ["clone", "dead", "constant", "constant-last"])
def test_reducible_deep_tanh_net_is_not_identifiable_with_an_exact_witness(case):
    m = _rounded_model([3, 4, 4, 2])
    j = model_to_json(m)
    L1, L2 = j["layers"][0], j["layers"][1]
    if case == "clone":  # unit 3 of hidden layer 2 = -(unit 1)
        L2["weight"][3] = [str(-Fraction(x)) for x in L2["weight"][1]]
        L2["bias"][3] = str(-Fraction(L2["bias"][1]))
    elif case == "dead":  # unit 2 of hidden layer 1 has no outgoing weight
        for row in L2["weight"]:
            row[2] = "0"
    elif case == "constant":  # unit 0 of hidden layer 1 is constant: its tanh(b) moves into a hidden bias
        L1["weight"][0] = ["0"] * 3
    else:  # unit 1 of hidden layer 2 is constant: into the output bias
        L2["weight"][1] = ["0"] * 4
    from symeq.io import model_from_json

    m = model_from_json(j)
    d = classical_identifiability(m)
    assert d.status == "not-identifiable" and d.method == "fefferman", d.reason
    want = {"clone": ("R3", 2), "dead": ("R1", 1), "constant": ("R2", 1), "constant-last": ("R2", 2)}[case]
    assert (d.witness["condition"], d.witness["layer"]) == want
    assert any(not c["holds"] for c in d.conditions[:4])  # Fefferman's conditions fail too
    _witness_is_exact(d, m, "tanh")
    r = _check(d, m)
    assert r.accepted is True, r.reasons


def test_integer_weights_fail_f4_and_decide_nothing():
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], real("tanh")),
                  DenseLayer([[2, -1], [1, 5]], [3, 4], real("tanh")), DenseLayer([[1, 1]], [1], None)])
    d = classical_identifiability(m)
    assert d.status == "undetermined" and "F4" in d.condition and "decides nothing" in d.reason


# ----------------------------------------------------------------------------- not applicable, budgets

@pytest.mark.parametrize("name", ["gelu", "silu", "softplus", "elu", "erf"])
def test_activations_without_a_theorem_are_not_applicable(name):
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], real(name)), DenseLayer([[2, -1]], [1], None)])
    d = classical_identifiability(m)
    assert d.status == "not-applicable" and name in d.reason and "no identifiability theorem" in d.reason


def test_polynomial_and_mixed_networks_are_not_applicable():
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], tanh_series(3)), DenseLayer([[2, -1]], [1], None)])
    assert classical_identifiability(m).status == "not-applicable"
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], real("tanh")),
                  DenseLayer([[2, -1], [1, 1]], [1, 2], real("sigmoid")), DenseLayer([[2, -1]], [1], None)])
    d = classical_identifiability(m)
    assert d.status == "not-applicable" and d.condition == "one activation"


def test_budget_and_size_guard_give_undetermined(monkeypatch):
    d = classical_identifiability(_model(*PLAIN), timeout=0)
    assert d.status == "undetermined" and d.condition == "budget"
    d = classical_identifiability(_rounded_model([3, 4, 4, 2]), timeout=0)
    assert d.status == "undetermined" and d.condition == "budget"
    monkeypatch.setattr(classical, "MAX_RATIO_PAIRS", 10)
    d = classical_identifiability(_rounded_model([3, 4, 4, 2]))
    assert d.status == "undetermined" and d.condition == "size guard"


# ----------------------------------------------------------------------------- tampering


def _all_certificates():
    out = {}
    for name, theta, act in [("sussmann-identifiable", PLAIN, "tanh"), ("sussmann-clone", CLONE, "tanh"),
                             ("sussmann-clone-sigmoid", CLONE, "sigmoid")]:
        m = _model(*theta, act=act)
        out[name] = (classical_identifiability(m), m)
    m = _model([[1, 2], [0, 0]], [1, -2], [[2, -1]], [1])
    out["sussmann-constant"] = (classical_identifiability(m), m)
    m = _model([[1, 2], [3, -1]], [1, -2], [[2, 0]], [1])
    out["sussmann-dead"] = (classical_identifiability(m), m)
    for act in ("tanh", "sigmoid"):
        m = _rounded_model([2, 3, 3, 2], act, seed=5)
        out[f"fefferman-{act}"] = (classical_identifiability(m), m)
    m = Model(2, [DenseLayer([[1, 2], [0, 0]], [1, "1/3"], real("tanh")),
                  DenseLayer([[2, -1], [1, 1]], [1, 2], real("tanh")), DenseLayer([[1, 3]], [1], None)])
    out["fefferman-constant"] = (classical_identifiability(m), m)
    m = Model(2, [DenseLayer([[1, 2], [3, 1]], [1, 2], real("tanh")),
                  DenseLayer([[2, -1], [-2, 1]], [1, -1], real("tanh")), DenseLayer([[1, 3]], [1], None)])
    out["fefferman-clone"] = (classical_identifiability(m), m)
    return out


#: mutations that leave a valid proof: any new bias of a dead unit is a witness (checked by the no-op below)
STILL_VALID = {("sussmann-dead", ".witness.changes[0].value")}


def test_every_field_of_every_certificate_is_tampered_and_rejected():
    for name, (d, m) in _all_certificates().items():
        assert d.certificate is not None, name
        mj = json.loads(json.dumps(model_to_json(m)))
        cert = json.loads(json.dumps(d.certificate))
        assert check_certificate(cert, mj).accepted is True, name
        n = 0
        for what, bad in field_mutations(cert):
            n += 1
            try:
                r = check_certificate(json.loads(json.dumps(bad)), mj)
            except CheckError:
                continue
            if (name, what) in STILL_VALID:  # another valid witness: break it the way that matters
                bad["witness"]["changes"][0]["value"] = mj["layers"][0]["bias"][1]  # a no-op change
                r = check_certificate(json.loads(json.dumps(bad)), mj)
            assert r.accepted is not True, f"{name}: tampered {what} accepted"
        assert n > 20, name
        # the model changed under the certificate
        m2 = json.loads(json.dumps(mj))
        m2["layers"][0]["weight"][0][0] = str(Fraction(m2["layers"][0]["weight"][0][0]) + 1)
        assert check_certificate(cert, m2).accepted is False, name


def test_certificate_from_another_method_or_activation_is_refused():
    d = classical_identifiability(_model(*PLAIN))
    m = _model(*PLAIN, act="sigmoid")
    assert _check(d, m).accepted is False
    cert = dict(d.certificate, method="fefferman")
    cert.pop("witness", None)
    r = check_certificate(json.loads(json.dumps(cert)), model_to_json(_model(*PLAIN)))
    assert r.accepted is False  # the conditions listed are Sussmann's


# ----------------------------------------------------------------------------- the command line checker

def test_symeq_check_accepts_and_rejects(tmp_path, capsys):
    m = _model(*CLONE)
    d = classical_identifiability(m)
    save_model(m, tmp_path / "m.json")
    (tmp_path / "c.json").write_text(json.dumps(d.certificate))
    assert main(["check", str(tmp_path / "c.json"), str(tmp_path / "m.json")]) == 0
    bad = json.loads(json.dumps(d.certificate))
    bad["witness"]["changes"][0]["value"] = "5"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["check", str(tmp_path / "bad.json"), str(tmp_path / "m.json")]) == 1
    bad = dict(d.certificate, surprise=1)
    (tmp_path / "bad2.json").write_text(json.dumps(bad))
    assert main(["check", str(tmp_path / "bad2.json"), str(tmp_path / "m.json")]) == 2
    assert "surprise" in capsys.readouterr().err


# ----------------------------------------------------------------------------- symeq fibre (decide_identifiability)

@pytest.mark.parametrize("theta, code", [(CLONE, 1), (PLAIN, 0)])
def test_symeq_fibre_decides_by_sussmann_and_its_certificate_checks(tmp_path, capsys, theta, code):
    save_model(_model(*theta), tmp_path / "m.json")
    assert main(["fibre", str(tmp_path / "m.json"), "--certificate", str(tmp_path / "c.json"), "--json"]) == code
    out = json.loads(capsys.readouterr().out)
    assert out["theorem"] == "sussmann" and out["status"] == ("not-identifiable" if code else "identifiable")
    assert [c["name"] for c in out["conditions"]] == ["R1", "R2", "R3"]
    assert json.loads((tmp_path / "c.json").read_text())["method"] == "sussmann"
    assert main(["check", str(tmp_path / "c.json"), str(tmp_path / "m.json")]) == 0


def test_symeq_fibre_deep_tanh_by_fefferman(tmp_path, capsys):
    save_model(_rounded_model([3, 5, 4, 2]), tmp_path / "m.json")
    assert main(["fibre", str(tmp_path / "m.json"), "--certificate", str(tmp_path / "c.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["theorem"] == "fefferman" and out["status"] == "identifiable"
    assert main(["check", str(tmp_path / "c.json"), str(tmp_path / "m.json")]) == 0


def test_verify_identifiability_says_sussmann_holds_over_the_reals():
    """verify --identifiability names the field of the deciding theorem: Sussmann's fibre is real."""
    import symeq
    from symeq.activations import activation_from_spec
    from symeq.models import random_equivariant_model, scramble

    m = random_equivariant_model(symeq.mirror(2, 2), ["regular*2"], activation_from_spec({"type": "tanh"}), rng=0)
    m, _ = scramble(m, rng=1)
    v = symeq.verify(m, identifiability=True, timeout=60)
    assert v.verdict == "layerwise-equivariant" and v.identifiability["status"] == "identifiable"
    assert "(over R; decided by sussmann" in v.identifiability["detail"]


def test_fefferman_gives_the_premise_only_for_signed_permutation_actions():
    """Fefferman's uniqueness holds among networks satisfying F1-F4; theta^g satisfies them when G
    acts by signed permutations, so verify --identifiability takes it as the premise only then."""
    from types import SimpleNamespace

    from symeq.numbers import matrix
    from symeq.theorem import Verification, _acts_by_signed_permutations, _decide_identifiability

    eye3, eye2 = matrix([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), matrix([[1, 0], [0, 1]])
    flip = matrix([[0, -1, 0], [1, 0, 0], [0, 0, 1]])
    reflect = matrix([["3/5", "4/5", 0], ["4/5", "-3/5", 0], [0, 0, 1]])
    assert _acts_by_signed_permutations(SimpleNamespace(generators=[(flip, eye2)]))
    assert not _acts_by_signed_permutations(SimpleNamespace(generators=[(reflect, eye2)]))
    assert not _acts_by_signed_permutations(None)
    m = _rounded_model([3, 5, 4, 2])
    for group, status in ((SimpleNamespace(generators=[(eye3, eye2)]), "identifiable"),
                          (SimpleNamespace(generators=[(reflect, eye2)]), "undetermined")):
        v = Verification.__new__(Verification)
        v.identifiability, v.notes = {"status": "unknown"}, []
        _decide_identifiability(v, m, 30, group)
        assert v.identifiability["status"] == status, v.identifiability
        assert v.identifiability["method"] == "fefferman"
