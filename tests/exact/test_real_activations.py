"""Real activations, exactly (issue 20): layers proved by symmetry identities, refutations by
arb balls, both re-verified by the standalone checker with its own stdlib interval arithmetic.

The acceptance list: a scrambled real-tanh MLP equivariant under the mirror of 4x4 images
verifies (exit 0) and ``symeq check`` accepts its certificate; the same for GELU (permutations)
and the sigmoid (affine flips); the tanh network with one weight changed exits 1 with a ball
witness that the checker re-verifies; tampering with every new certificate field is rejected.
"""

from __future__ import annotations

import copy
import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from flint import fmpq

from symeq.activations import REAL_ACTIVATIONS, real
from symeq_check import check_certificate
from symeq.groups import builtin_group, global_sign
from symeq.io import model_from_json, model_to_json
from symeq.models import DenseLayer, Model, random_equivariant_model, scramble
from symeq.theorem import verify

sys.path.insert(0, str(Path(__file__).parents[1]))
from json_mutations import field_mutations  # noqa: E402

MIRROR = builtin_group("mirror:4x4")


def _net(name, latent=("regular*2", "regular"), seed=1, **params):
    m = random_equivariant_model(MIRROR, list(latent), real(name, **params), rng=seed)
    m2, _ = scramble(m, rng=seed + 1)
    return m2


def _roundtrip(cert):
    return json.loads(json.dumps(cert))


def _broken(model):
    data = model_to_json(model)
    w = data["layers"][0]["weight"]
    w[0][0] = str(fmpq(w[0][0]) + fmpq(1, 3))
    return data


@pytest.mark.parametrize("name", sorted(REAL_ACTIVATIONS))
def test_scrambled_real_mlp_verifies_and_checks(name):
    m = _net(name)
    v = verify(m)
    assert v.verdict == "layerwise-equivariant" and v.exit_code == 0
    assert v.equivariance.method == "layerwise" and v.equivariance.holds
    cert = _roundtrip(v.certificate())
    assert cert["equivariance"]["holds"] is True
    r = check_certificate(cert, model_to_json(m))
    assert r.accepted is True, r.reasons


def test_tanh_actions_are_signed_and_sigmoid_affine():
    """Scrambling flips signs: tanh actions have -1 factors, sigmoid actions carry offsets (1 - 2 y)."""
    t = verify(_net("tanh", seed=5))
    s = verify(_net("sigmoid", seed=5))
    g = verify(_net("gelu", seed=5))
    tf = [f for layer in t.certificate()["latent_actions"] for a in layer for f in a["factor"]]
    assert "-1" in tf and t.certificate()["latent_offsets"] is None
    sc = s.certificate()
    assert sc["latent_offsets"] is not None and any(x != "0" for l in sc["latent_offsets"] for o in l for x in o)
    gf = {f for layer in g.certificate()["latent_actions"] for a in layer for f in a["factor"]}
    assert gf == {"1"}  # GELU: permutations only
    assert g.certificate()["latent_groups"][0] == "permutations"


@pytest.mark.parametrize("name", ["tanh", "gelu", "sigmoid", "softplus", "elu", "leaky_relu"])
def test_one_weight_changed_is_refuted_by_a_ball_witness(name):
    data = _broken(_net(name))
    m = model_from_json(data)
    v = verify(m)
    assert v.verdict == "not-equivariant" and v.exit_code == 1
    w = v.equivariance.witness
    lo, hi = w.enclosures[w.output]
    assert not lo <= 0 <= hi
    cert = _roundtrip(v.certificate())
    assert cert["equivariance"]["witness"]["kind"] == "arb"
    r = check_certificate(cert, data)
    assert r.accepted is True, r.reasons


def _tanh_refutation():
    data = _broken(_net("tanh"))
    v = verify(model_from_json(data))
    return _roundtrip(v.certificate()), data


def _tamper_cases(cert):
    w = cert["equivariance"]["witness"]
    j = w["output"]
    lo, hi = w["enclosures"][j]
    other = next(i for i in range(len(w["enclosures"])) if i != j)
    cases = {
        "x": lambda w: w["x"].__setitem__(0, str(Fraction(w["x"][0]) + 7)),
        "precision_huge": lambda w: w.__setitem__("precision", 10 ** 6),
        "precision_bad": lambda w: w.__setitem__("precision", "64"),
        "output_contains_zero": lambda w: w.__setitem__("output", next(
            (i for i, (a, b) in enumerate(w["enclosures"]) if Fraction(a) <= 0 <= Fraction(b)), other)),
        "output_out_of_range": lambda w: w.__setitem__("output", len(w["enclosures"])),
        "enclosure_moved": lambda w: w["enclosures"].__setitem__(j, [str(-Fraction(hi) - 1), str(-Fraction(lo) - 1)]
                                                                 if Fraction(lo) > 0 else
                                                                 [str(-Fraction(hi) + 1), str(-Fraction(lo) + 1)]),
        "enclosure_other_moved": lambda w: w["enclosures"].__setitem__(other, ["1000", "1001"]),
        "enclosure_inverted": lambda w: w["enclosures"].__setitem__(j, [hi, lo]),
        "enclosures_short": lambda w: w["enclosures"].pop(),
        "generator": lambda w: w.__setitem__("generator", 1),
        "kind": lambda w: w.__setitem__("kind", "ball"),
        "unknown_key": lambda w: w.__setitem__("radius", "0"),
        "missing_precision": lambda w: w.pop("precision"),
    }
    return cases


@pytest.mark.parametrize("case", list(_tamper_cases({"equivariance": {"witness": {
    "output": 0, "enclosures": [["1", "2"], ["3", "4"]]}}})))
def test_tampered_ball_witness_is_rejected(case):
    from symeq_check import CheckError

    cert, data = _tanh_refutation()
    bad = copy.deepcopy(cert)
    _tamper_cases(cert)[case](bad["equivariance"]["witness"])
    try:
        r = check_certificate(bad, data)
    except CheckError:
        return  # malformed: exit 2
    assert r.accepted is not True, (case, r.checks[-2:])


def test_witness_precision_is_only_a_working_precision():
    """The checker recomputes at precision + 32 bits with its own intervals: a lowered precision
    field cannot make it accept anything false; the refutation is re-proved (or not) on its own."""
    cert, data = _tanh_refutation()
    bad = copy.deepcopy(cert)
    bad["equivariance"]["witness"]["precision"] = 2
    r = check_certificate(bad, data)
    assert r.accepted is True and any("stdlib intervals at 34 bits" in c for c in r.checks)


def test_tampered_real_activation_fields_are_rejected():
    """The activation of a layer (its name and parameter) binds the certificate: changed in the
    model file, the digest or the identity check refuses it."""
    from symeq_check import CheckError

    m = _net("leaky_relu")
    cert = _roundtrip(verify(m).certificate())
    for spec in ({"type": "leaky_relu", "slope": "1/7"}, {"type": "tanh"}, {"type": "elu"},
                 {"type": "leaky_relu", "slope": "1/100", "alpha": "1"}):
        data = model_to_json(m)
        data["layers"][0]["activation"] = spec
        try:
            r = check_certificate(copy.deepcopy(cert), data)
        except CheckError:
            continue
        assert r.accepted is not True, spec


def test_tampered_layer_identity_is_rejected():
    """A certificate whose action is changed (a sign flip where tanh needs none, or a sigmoid flip
    without its offset) is rejected by the identity table."""
    m = _net("sigmoid", seed=5)
    cert = _roundtrip(verify(m).certificate())
    bad = copy.deepcopy(cert)
    bad["latent_offsets"] = None
    assert check_certificate(bad, model_to_json(m)).accepted is not True
    g = _net("gelu", seed=5)
    cert = _roundtrip(verify(g).certificate())
    bad = copy.deepcopy(cert)
    bad["latent_actions"][0][0]["factor"][0] = "-1"
    assert check_certificate(bad, model_to_json(g)).accepted is not True


def test_undetermined_when_equivariant_without_action():
    """Two GELU clones with outgoing weights 1 and -1: f = 0 is odd, but GELU has no sign flip, so
    no action exists at theta, and no witness (the difference is exactly 0): undetermined, exit 3."""
    layers = [DenseLayer([[1], [1]], [0, 0], real("gelu")), DenseLayer([[1, -1]], [0], None)]
    v = verify(Model(1, layers, global_sign(1)), timeout=30)
    assert v.verdict == "undetermined" and v.exit_code == 3
    assert v.equivariance.holds is None and "arb" in v.equivariance.detail
    cert = _roundtrip(v.certificate())
    r = check_certificate(cert, model_to_json(Model(1, layers, global_sign(1))))
    assert r.accepted is None


@pytest.mark.parametrize("name", sorted(REAL_ACTIVATIONS))
def test_checker_intervals_enclose_arb(name):
    """The checker's stdlib intervals and flint's arb balls enclose the same values."""
    from flint import arb, ctx

    from symeq_check.intervals import _real_interval
    from symeq_check.real import _real_activation

    act = real(name)
    cact, _ = _real_activation(act.to_spec(), "test")
    old = ctx.prec
    ctx.prec = 128
    try:
        for t in [Fraction(-7, 2), Fraction(-1, 3), Fraction(0), Fraction(1, 7), Fraction(5, 2), Fraction(9)]:
            lo, hi = _real_interval(cact, (t, t), 64)
            assert lo <= hi and hi - lo < Fraction(1, 2 ** 40), (name, t)
            b = act.ball(arb(fmpq(t.numerator, t.denominator)))
            mid = b.mid().man_exp()
            m, e = int(mid[0]), int(mid[1])
            midq = Fraction(m) * Fraction(2) ** e
            assert lo - Fraction(1, 2 ** 60) <= midq <= hi + Fraction(1, 2 ** 60), (name, t, float(lo), float(midq))
    finally:
        ctx.prec = old


def test_checker_intervals_gelu_tanh_form():
    from symeq_check.intervals import _real_interval
    from symeq_check.real import _real_activation

    cact, _ = _real_activation({"type": "gelu", "approximate": "tanh"}, "test")
    lo, hi = _real_interval(cact, (Fraction(1), Fraction(1)), 64)
    ref = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
    assert float(lo) - 1e-12 <= ref <= float(hi) + 1e-12


def test_cli_verify_and_check_real_tanh(tmp_path, capsys):
    from symeq.cli import main

    model = tmp_path / "tanh.json"
    cert = tmp_path / "cert.json"
    model.write_text(json.dumps(model_to_json(_net("tanh"))))
    assert main(["verify", str(model), "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(model)]) == 0
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(_broken(_net("tanh"))))
    cert2 = tmp_path / "cert2.json"
    assert main(["verify", str(broken), "--certificate", str(cert2)]) == 1
    assert main(["check", str(cert2), str(broken)]) == 0
    out = capsys.readouterr().out
    assert "excludes 0" in out


def test_generate_activation_tanh_is_real(tmp_path):
    from symeq.cli import main

    out = tmp_path / "g.json"
    assert main(["generate", "--group", "mirror:2x2", "--activation", "tanh", "--scramble", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["layers"][0]["activation"] == {"type": "tanh"}
    out2 = tmp_path / "g3.json"
    assert main(["generate", "--group", "mirror:2x2", "--activation", "tanh3", "--out", str(out2)]) == 0
    assert json.loads(out2.read_text())["layers"][0]["activation"] == {"type": "tanh_series", "order": 3}


def test_relu_layers_first():
    """ReLU networks: layers first proves the premise without enumerating regions."""
    from symeq.activations import relu

    m = random_equivariant_model(MIRROR, ["regular*2"], relu(), rng=3)
    m2, _ = scramble(m, rng=4)
    v = verify(m2)
    assert v.verdict == "layerwise-equivariant" and v.equivariance.method == "layerwise"
    assert check_certificate(_roundtrip(v.certificate()), model_to_json(m2)).accepted is True


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_bench_real_quick(tmp_path):
    """benchmarks/bench_real.py --quick runs and writes its table (real tanh against tanh_series)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_real.py"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=120, cwd=script.parent)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((tmp_path / "real.json").read_text())
    assert {r["activation"] for r in res["rows"]} == {"tanh", "tanh_series(3)"}
    assert all(r["accepted"] for r in res["rows"])


@pytest.mark.parametrize("name", sorted(REAL_ACTIVATIONS))
def test_checker_intervals_on_huge_arguments_stay_small(name):
    """Saturated pre-activations (|t| = 10^9) are enclosed at once, without forming exp(10^9)."""
    import time

    from symeq_check.intervals import _real_interval
    from symeq_check.real import _real_activation

    cact, _ = _real_activation(real(name).to_spec(), "test")
    t0 = time.perf_counter()
    for t in (Fraction(-10 ** 9), Fraction(10 ** 9)):
        lo, hi = _real_interval(cact, (t, t), 64)
        assert lo <= hi and hi - lo <= abs(t) * Fraction(1, 2 ** 40) + Fraction(1, 2 ** 40), (name, t)
    assert time.perf_counter() - t0 < 2


def test_cli_undetermined_exit_3_and_explain(tmp_path, capsys):
    """The cancelling GELU clones: `symeq verify` exits 3 with the reason; explain says undecided."""
    from symeq.cli import main
    from symeq.explain import explain

    m = Model(1, [DenseLayer([[1], [1]], [0, 0], real("gelu")), DenseLayer([[1, -1]], [0], None)], global_sign(1))
    path = tmp_path / "clones.json"
    path.write_text(json.dumps(model_to_json(m)))
    assert main(["verify", str(path)]) == 3
    out = capsys.readouterr().out
    assert "UNDECIDED" in out and "arb balls" in out
    paths = explain(m, out_dir=tmp_path / "ex")
    assert "**Undecided**" in paths["markdown"].read_text()


@pytest.mark.parametrize("seed", range(6))
def test_verdicts_agree_with_the_float_twin(seed):
    """Random scrambled real networks (activation, group and widths drawn by the seed): a proof of
    equivariance comes with a float residual at rounding level; a one-weight change is refuted, and the
    float twin sees a residual of the size the ball witness encloses."""
    import random

    import numpy as np

    from symeq.numeric import from_exact

    rng = random.Random(seed)
    name = sorted(REAL_ACTIVATIONS)[seed % len(REAL_ACTIVATIONS)]
    group = builtin_group(rng.choice(["mirror:2x2", "rot:4", "shift:3"]) if name != "erf" else "mirror:2x2")
    m = random_equivariant_model(group, ["regular"] * rng.randint(1, 2), real(name), rng=seed)
    m, _ = scramble(m, rng=seed + 100)
    v = verify(m)
    assert v.verdict == "layerwise-equivariant"
    assert from_exact(m).equivariance_error(rng=0) < 1e-9
    data = _broken(m)
    bad = model_from_json(data)
    vb = verify(bad)
    assert vb.verdict == "not-equivariant"
    w = vb.equivariance.witness
    f = from_exact(bad)
    A, B = [np.array([[float(int(x.p)) / float(int(x.q)) for x in r] for r in M.tolist()])
            for M in bad.group.generators[w.generator_index]]
    x = np.array([float(int(t.p)) / float(int(t.q)) for t in w.x])
    diff = f.forward((A @ x)[None, :])[0] - B @ f.forward(x[None, :])[0]
    lo, hi = w.enclosures[w.output]
    assert float(lo) - 1e-9 <= diff[w.output] <= float(hi) + 1e-9
    assert check_certificate(_roundtrip(vb.certificate()), data).accepted is True


def _with_dead_neuron_and_clone(name, flip_clone=False):
    """A mirror-equivariant real network plus a dead neuron (zero outgoing weights, a row with no
    partner) and a clone of neuron 0 taking a third of its outgoing weights (for tanh/sigmoid
    optionally flipped: row and bias negated, tanh(-t) = -tanh(t), sigmoid(-t) = 1 - sigmoid(t))."""
    from symeq.numbers import mat_rows

    group = builtin_group("mirror:2x2")
    m = random_equivariant_model(group, ["regular*2"], real(name), rng=3)
    l1, l2 = m.layers
    W, b, V, c = mat_rows(l1.weight), list(l1.bias), mat_rows(l2.weight), list(l2.bias)
    W.append([fmpq(1), fmpq(2), fmpq(-1), fmpq(3)])
    b.append(fmpq(1, 2))
    V = [r + [fmpq(0)] for r in V]
    s = -1 if flip_clone else 1
    W.append([s * x for x in W[0]])
    b.append(s * b[0])
    third = [r[0] / 3 for r in V]
    if flip_clone and name == "sigmoid":  # y_clone = 1 - y_0: the clone's column pays the constant
        c = [ci + t for ci, t in zip(c, third)]
    V = [r + [s * t] for r, t in zip(V, third)]
    V = [[x - t if j == 0 else x for j, x in enumerate(r)] for r, t in zip(V, third)]
    return Model(4, [DenseLayer(W, b, l1.activation), DenseLayer(V, c, None)], group)


@pytest.mark.parametrize("name,flip", [("tanh", False), ("tanh", True), ("gelu", False), ("leaky_relu", False),
                                       ("sigmoid", False), ("erf", True)])
def test_dead_neurons_and_clones_lift_to_theta_prime(name, flip):
    """No action at theta (the dead neuron has no partner); the submodel route gives theta' with the
    same widths, and the checker re-proves f(theta') = f(theta) by the canonical form."""
    m = _with_dead_neuron_and_clone(name, flip)
    v = verify(m)
    assert v.verdict == "layerwise-equivariant" and v.reparametrized, v.report()
    cert = _roundtrip(v.certificate())
    r = check_certificate(cert, model_to_json(m))
    assert r.accepted is True, r.reasons
    assert any("canonical form" in line for line in r.checks)
    bad = copy.deepcopy(cert)
    w = bad["parameters"]["layers"][1]["weight"]
    w[0][0] = str(Fraction(w[0][0]) + 1)
    assert check_certificate(bad, model_to_json(m)).accepted is not True


def test_canonical_form_is_sound_on_a_float_check():
    """Networks the canonical form calls equal evaluate equal in floats (the flipped sigmoid clone
    needs its constant in the bias; without it the forms differ)."""
    import numpy as np

    from symeq_check.evaluate import _real_same_function_failure
    from symeq_check.model import _layers
    from symeq.numeric import from_exact

    m = _with_dead_neuron_and_clone("sigmoid", flip_clone=True)
    # the same network with the clone merged back by hand
    base = random_equivariant_model(builtin_group("mirror:2x2"), ["regular*2"], real("sigmoid"), rng=3)
    pad = model_to_json(base)
    data = model_to_json(m)
    la, lb = _layers(data["layers"], 4, "a"), _layers(pad["layers"], 4, "b")
    x = np.linspace(-1, 1, 8).reshape(2, 4)
    assert np.allclose(from_exact(m).forward(x), from_exact(base).forward(x), atol=1e-12)
    # widths differ, so compare through the canonical forms directly
    from symeq_check.evaluate import _real_canonical_form

    assert _real_canonical_form(la) == _real_canonical_form(lb)
    data["layers"][1]["bias"][0] = str(Fraction(data["layers"][1]["bias"][0]) + 1)
    assert _real_canonical_form(_layers(data["layers"], 4, "c")) != _real_canonical_form(lb)
    assert _real_same_function_failure(la, la) is None


@pytest.mark.parametrize("spec", [{"type": n} for n in sorted(REAL_ACTIVATIONS)]
                         + [{"type": "gelu", "approximate": "tanh"}, {"type": "elu", "alpha": "-3/2"},
                            {"type": "leaky_relu", "slope": "-1/3"}], ids=str)
def test_checker_intervals_meet_arb_balls_on_random_intervals(spec):
    """Both enclosures contain the true value, so they must meet: 40 seeded random intervals [a, b]
    (the checker's enclosure of sigma([a, b]) must meet arb's ball of sigma at a and at b)."""
    import random

    from flint import arb, ctx

    from symeq.activations import activation_from_spec
    from symeq_check.intervals import _real_interval
    from symeq_check.real import _real_activation

    act = activation_from_spec(spec)
    cact, _ = _real_activation(spec, "test")
    rng = random.Random(str(spec))
    old = ctx.prec
    ctx.prec = 96
    try:
        for _ in range(40):
            a = Fraction(rng.randint(-800, 800), rng.randint(1, 97))
            b = a + Fraction(rng.randint(0, 50), rng.randint(1, 31))
            lo, hi = _real_interval(cact, (a, b), 64)
            assert lo <= hi
            for t in (a, b):
                ball = act.ball(arb(fmpq(t.numerator, t.denominator)))
                bl, bh = (Fraction(int(m)) * Fraction(2) ** int(e) for m, e in
                          (ball.lower().man_exp(), ball.upper().man_exp()))
                assert not (bh < lo or hi < bl), (spec, a, b, t, float(lo), float(hi), float(bl))
    finally:
        ctx.prec = old


#: fields the checker does not rely on: reports and labels (it re-derives every verdict itself), and
#: for a layerwise certificate the premise section (layerwise equivariance proves it)
_REPORT_ONLY = (".checks", ".notes", ".versions", ".identifiability", ".model_name", ".theorem", ".latent_groups",
                ".group.label", ".group.generators[0].name", ".equivariance.detail", ".equivariance.method",
                ".equivariance.points", ".equivariance.error_bound", ".equivariance.probabilistic",
                ".equivariance.holds-removed", ".equivariance.witness.generator_name")
#: the certificate's own copy of theta: when it is left out (or its digest or the flag), the model
#: file's layers are checked, which is the same theta; the output layer's activation null may be omitted;
#: leaky ReLU's slope defaults to the model's 1/100
_SAME_THETA = (".parameters.layers-removed", ".parameters.layers_sha256-removed", ".parameters.reparametrized",
               ".parameters.layers[1].activation-removed", ".parameters.layers[0].activation.slope-removed")


def _arb_confirms(model, witness) -> bool:
    """symeq's own arb evaluation (256 bits) of the mutated witness: the claimed output's ball
    excludes 0 and lies inside the claimed enclosure, so the mutation is another true witness."""
    from flint import arb, ctx

    from symeq.equivariance import _ball_ends, _ball_forward
    from symeq.numbers import mat_rows

    A, B = (mat_rows(M) for M in model.group.generators[witness["generator"]])
    x = [fmpq(Fraction(v).numerator, Fraction(v).denominator) for v in witness["x"]]
    old = ctx.prec
    ctx.prec = 256
    try:
        fgx = _ball_forward(model, [sum((a * v for a, v in zip(row, x)), fmpq(0)) for row in A])
        fx = _ball_forward(model, x)
        j = witness["output"]
        d = fgx[j] - sum((arb(c) * v for c, v in zip(B[j], fx)), arb(0))
        lo, hi = _ball_ends(d)
    finally:
        ctx.prec = old
    clo, chi = (Fraction(v) for v in witness["enclosures"][j])
    return (lo > 0 or hi < 0) and clo <= Fraction(str(lo)) and Fraction(str(hi)) <= chi


@pytest.mark.slow
def test_every_field_of_the_real_certificates_is_tampered():
    """Every field of a sigmoid (affine flips), a leaky ReLU (positive scalings) and a refutation
    certificate is changed, removed, or gets a neighbour: the checker refuses each, unless the field
    is a report (listed above, with the reason) or the change leaves a true claim, and then the
    claim is confirmed here independently: a changed ball witness only by symeq's own arb at 256 bits."""
    from symeq_check import CheckError

    cases = {}
    for name in ("sigmoid", "leaky_relu"):
        m = _net(name, latent=("regular",), seed=3)
        cases[name] = (m, _roundtrip(verify(m).certificate()), model_to_json(m))
    bad = _broken(_net("tanh", latent=("regular",), seed=3))
    cases["refutation"] = (model_from_json(bad), _roundtrip(verify(model_from_json(bad)).certificate()), bad)
    for name, (model, cert, data) in cases.items():
        assert check_certificate(copy.deepcopy(cert), data).accepted is True, name
        n = rejected = 0
        for what, mutated in field_mutations(cert):
            n += 1
            try:
                r = check_certificate(_roundtrip(mutated), data)
            except CheckError:
                rejected += 1
                continue
            if r.accepted is not True:
                rejected += 1
            elif what.startswith(_REPORT_ONLY) or what in _SAME_THETA:
                pass
            elif name != "refutation" and what.startswith(".equivariance"):
                pass  # a layerwise certificate: the premise follows from the layer checks, re-done
            elif name == "refutation" and what.startswith(".equivariance.witness."):
                assert _arb_confirms(model, mutated["equivariance"]["witness"]), f"{name}: {what} accepted"
            elif name == "refutation" and what.startswith((".latent_", ".parameters-removed")):
                pass  # a refutation needs no actions, and theta is the model file's
            else:
                pytest.fail(f"{name}: tampered {what} accepted")
        assert n > 300 and rejected > n // 3, (name, n, rejected)


def test_refutation_whose_copy_of_theta_differs_is_refused():
    """The witness is re-proved on the model file; a certificate whose copy of theta is another
    network (digest kept: tampered, exit 1; digest dropped: another model's certificate) is refused."""
    bad = _broken(_net("tanh", latent=("regular",), seed=3))
    cert = _roundtrip(verify(model_from_json(bad)).certificate())
    assert check_certificate(copy.deepcopy(cert), bad).accepted is True
    cert["parameters"]["layers"][0]["weight"][0][0] = str(Fraction(cert["parameters"]["layers"][0]["weight"][0][0]) + 1)
    r = check_certificate(copy.deepcopy(cert), bad)
    assert r.accepted is False and not r.mismatch and any("copy of theta" in s for s in r.reasons)
    cert["parameters"].pop("layers_sha256", None)
    r = check_certificate(cert, bad)
    assert r.accepted is False and r.mismatch


@pytest.mark.parametrize("method", ["grid", "symbolic", "probabilistic"])
def test_method_option_is_reported_unused_for_real_activations(method):
    """--method chooses how a polynomial premise is decided; a real network says it was not used
    (and the verdict is the same as with auto)."""
    m = _net("tanh", latent=("regular",), seed=3)
    v = verify(m, method=method)
    assert v.verdict == verify(m).verdict == "layerwise-equivariant"
    assert any(f"method '{method}' was not used" in n and "arb balls" in n for n in v.notes)
    assert not any("was not used" in n for n in verify(m).notes)


def _leaky_pairs_model(slope=Fraction(1, 10)):
    """x -> (I + J) x on 2x2 images (the mirror) as sum_i v_i (sigma(w_i x) - sigma(-w_i x)) / (1 + a)
    over 4 integer rows w_i not closed under the mirror: f is equivariant, theta has no action."""
    from flint import fmpq_mat

    W = fmpq_mat([[1, -1, 2, 0], [0, 3, -1, 1], [2, 1, 1, -2], [-1, 0, 3, 1]])
    L = fmpq_mat([[1 + (i == j) for j in range(4)] for i in range(4)])
    V = L * W.inv() / fmpq((1 + slope).numerator, (1 + slope).denominator)
    w = [[W[i, j] for j in range(4)] for i in range(4)]
    v = [[V[i, j] for j in range(4)] for i in range(4)]
    act = real("leaky_relu", slope=str(slope))
    return Model(4, [DenseLayer(w + [[-x for x in r] for r in w], [0] * 8, act),
                     DenseLayer([r + [-x for x in r] for r in v], [0] * 4, None)], builtin_group("mirror:2x2"))


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_leaky_without_action_uses_the_piecewise_linear_machinery():
    """One hidden leaky ReLU layer, no action at theta: the premise is proved by canonical forms
    and the fibre-wide decision (reduction to the ReLU twin) gives theta' of the same width with an
    action; the checker cannot re-prove that equality of functions and says so (undetermined)."""
    from symeq.relu.leaky import leaky_canonical_form

    m = _leaky_pairs_model()
    assert [int(t) for t in m([1, 2, 3, 4])] == [11, 12, 13, 14]
    v = verify(m, timeout=120)
    assert v.verdict == "layerwise-equivariant" and v.exit_code == 0 and v.reparametrized
    assert v.equivariance.method == "leaky-canonical-form" and v.equivariance.holds is True
    assert leaky_canonical_form(v.model) == leaky_canonical_form(m)  # theta' computes f
    assert [l.out_dim for l in v.model.layers] == [8, 4]
    r = check_certificate(_roundtrip(v.certificate()), model_to_json(m))
    assert r.accepted is None and any("leaky ReLU" in c for c in r.checks)
    # as for ReLU the checker stops at the equality of functions: an altered theta' is never accepted
    cert = _roundtrip(v.certificate())
    cert["parameters"]["layers"][1]["weight"][0][0] = str(Fraction(cert["parameters"]["layers"][1]["weight"][0][0]) + 1)
    assert check_certificate(cert, model_to_json(m)).accepted is None
    # without the fibre search the old answer: undetermined, nothing refuted
    assert verify(m, fibre_search=False, timeout=60).verdict == "undetermined"


def test_leaky_width_four_identity_has_no_layerwise_parameter():
    """Bokman-Kahl's width-4 identity under the order-3 rotation with leaky ReLU (symeq/relu/leaky.py):
    f = id is equivariant, and no parameter of width 4 is layerwise equivariant (width 6 is needed)."""
    from symeq.relu.hunt import resolve_group
    from symeq.relu.leaky import leaky_model

    a = Fraction(1, 10)
    A, Ainv = [[2, 1], [1, 1]], [[1, -1], [-1, 2]]
    W1 = A + [[-x for x in r] for r in A]
    W2 = [[x / (1 + a) for x in Ainv[i] + [-y for y in Ainv[i]]] for i in range(2)]
    m = leaky_model([(W1, [0] * 4, a), (W2, [0, 0], False)], a, resolve_group("rot3"))
    v = verify(m, timeout=60)
    assert v.verdict == "no-layerwise-parameter" and v.equivariance.holds is True
    assert v.identifiability["status"] == "not-identifiable"
    assert any("6 > 4" in n for n in v.notes)
    assert check_certificate(_roundtrip(v.certificate()), model_to_json(m)).accepted is None


def test_leaky_one_hidden_layer_changed_weight_is_refuted():
    data = model_to_json(_leaky_pairs_model())
    data["layers"][0]["weight"][0][0] = "5"
    m = model_from_json(data)
    v = verify(m, timeout=60)
    assert v.verdict == "not-equivariant" and v.exit_code == 1 and v.equivariance.method == "arb-witness"
    assert check_certificate(_roundtrip(v.certificate()), data).accepted is True
