"""Local identifiability by the exact Jacobian rank mod p (symeq/fibre/jacobian.py), its certificate and
checker (symeq_check/, "jacobian-rank"), and the one identifiability report (symeq/fibre/decide.py) that
``symeq fibre``, ``symeq verify --identifiability`` and ``symeq explain`` share."""

from __future__ import annotations

import copy
import json
import random
import time
from fractions import Fraction

import pytest
from flint import fmpq, fmpq_mat

import symeq_check as check
from symeq_check.identifiability import rank
from symeq_check.identifiability.rank import _CHECK_PRIMES, _jac_is_prime, _jac_rank, _jac_rank_small
from symeq.activations import monomial, polynomial, relu, tanh_series
from symeq.cli import main
from symeq.examples import builtin_example
from symeq.fibre import jacobian as jm
from symeq.fibre.decide import decide_identifiability
from symeq.io import model_to_json, save_model
from symeq.models import DenseLayer, Model


def _rand(widths, acts, seed=3, bias=True, lo=-5, hi=5):
    rng = random.Random(seed)
    layers = []
    for i in range(len(widths) - 1):
        W = [[rng.randint(lo, hi) for _ in range(widths[i])] for _ in range(widths[i + 1])]
        b = [rng.randint(lo, hi) for _ in range(widths[i + 1])] if bias else None
        layers.append(DenseLayer(W, b, acts[i] if i < len(widths) - 2 else None))
    return Model(widths[0], layers)


def _rotation_net():
    """A deep net ending in a sum of two squares: x -> u1^2 + u2^2 of two hidden units (a hidden rotation)."""
    m = _rand([3, 5, 5, 2, 1], [tanh_series(3), tanh_series(3), monomial(2)])
    m.layers[-1] = DenseLayer([[1, 1]], [0], None)
    return m


# ----------------------------------------------------------------------------- the Jacobian itself

class _Dual:
    """a + b eps with eps^2 = 0, exact: the derivative of f along one parameter, for the cross-check."""

    def __init__(self, a, b=0):
        self.a, self.b = fmpq(a), fmpq(b)

    def __add__(self, o):
        o = o if isinstance(o, _Dual) else _Dual(o)
        return _Dual(self.a + o.a, self.b + o.b)

    __radd__ = __add__

    def __mul__(self, o):
        o = o if isinstance(o, _Dual) else _Dual(o)
        return _Dual(self.a * o.a, self.a * o.b + self.b * o.a)

    __rmul__ = __mul__


def _dual_forward(model, theta, x):
    h, k = [_Dual(fmpq(v.numerator, v.denominator)) for v in x], 0
    for layer in model.layers:
        W = [[theta[k + a * layer.in_dim + b] for b in range(layer.in_dim)] for a in range(layer.out_dim)]
        k += layer.in_dim * layer.out_dim
        bias = theta[k:k + layer.out_dim]
        k += layer.out_dim
        z = [sum((W[a][b] * h[b] for b in range(layer.in_dim)), _Dual(0)) + bias[a] for a in range(layer.out_dim)]
        if layer.activation is not None:
            out = []
            for zz in z:
                acc = _Dual(0)
                for c in reversed(layer.activation.coeffs):
                    acc = acc * zz + c
                out.append(acc)
            z = out
        h = z
    return h


def test_modular_jacobian_equals_the_exact_derivative():
    m = _rand([3, 4, 3, 2], [tanh_series(3), polynomial([1, -2, 0, 1])])
    twins = jm._twins(m, True)
    pts = jm._points(3, 4, 7)
    J = jm._jacobian(twins, jm._points_mod(pts), jm.Deadline(None))
    values = [x for t in twins for x in t.values()]
    for k in range(len(values)):
        theta = [_Dual(v, 1 if i == k else 0) for i, v in enumerate(values)]
        for n, x in enumerate(pts):
            for o, y in enumerate(_dual_forward(m, theta, x)):
                assert jm._mod(y.b) == int(J[n * 2 + o, k]), (k, n, o)


def test_mulmod_matches_python():
    import numpy as np

    rng = random.Random(1)
    a = [rng.randrange(jm.PRIME) for _ in range(2000)] + [jm.PRIME - 1, 0, 1]
    b = [rng.randrange(jm.PRIME) for _ in range(2000)] + [jm.PRIME - 1, jm.PRIME - 1, 1]
    got = jm._mulmod(np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64))
    assert [int(g) for g in got] == [x * y % jm.PRIME for x, y in zip(a, b)]


# ----------------------------------------------------------------------------- verdicts

def test_builtin_example_locally_identifiable_fast_with_certificate():
    m = builtin_example()
    t = time.perf_counter()
    r = jm.jacobian_identifiability(m)
    assert time.perf_counter() - t < 1.0
    assert (r.status, r.rank, r.n_params, r.orbit_dimension) == ("locally-identifiable", 152, 152, 0)
    rep = check.check_certificate(json.loads(json.dumps(r.certificate)), json.loads(json.dumps(model_to_json(m))))
    assert rep.accepted is True, rep.reasons


def test_monomial_orbit_dimension_is_computed():
    m = _rand([3, 4, 4, 2], [monomial(2), monomial(3)])
    r = jm.jacobian_identifiability(m)
    assert r.orbit_dimension == 8 and r.status == "locally-identifiable" and r.rank == r.n_params - 8
    # a neuron with a zero incoming row and zero bias has a zero scaling direction except its outgoing column
    cert = json.loads(json.dumps(r.certificate))
    assert check.check_certificate(cert, json.loads(json.dumps(model_to_json(m)))).accepted is True


def test_monomial_plus_constant_moves_the_next_bias():
    # t^2 + 1 with biases: the scalings' offsets go into the next bias (orbit tangent with a bias part)
    m = _rand([3, 3, 3, 2], [polynomial([1, 0, 1]), tanh_series(3)])
    r = jm.jacobian_identifiability(m)
    assert r.orbit_dimension == 3 and r.status == "locally-identifiable"
    assert check.check_certificate(r.certificate, model_to_json(m)).accepted is True


def test_clones_dead_and_constant_neurons_are_proven():
    m = Model(2, [DenseLayer([[1, 2], [1, 2], [3, -1]], [1, 1, 2], tanh_series(3)),
                  DenseLayer([[2, -1, 1], [1, 1, -2]], [1, 0], None)])
    r = jm.jacobian_identifiability(m)
    assert r.status == "not-identifiable" and r.families[0]["kind"] == "clones" and r.dimension_lower_bound == 2
    dead = Model(2, [DenseLayer([[1, 2], [3, -1], [2, 5]], [1, -2, 1], tanh_series(3)),
                     DenseLayer([[2, -1, 0], [1, 1, 0]], [1, 0], None)])
    r = jm.jacobian_identifiability(dead)
    assert r.status == "not-identifiable" and r.families[0]["kind"] == "dead-neuron" and r.dimension_lower_bound == 3
    const = Model(2, [DenseLayer([[1, 2], [3, -1], [0, 0]], [1, -2, 1], tanh_series(3)),
                      DenseLayer([[2, -1, 3], [1, 1, 1]], [1, 0], None)])
    r = jm.jacobian_identifiability(const)
    assert r.status == "not-identifiable" and "constant-neuron" in [f["kind"] for f in r.families]


def test_hidden_rotation_is_not_identifiable_with_a_proven_curve():
    m = _rotation_net()
    r = jm.jacobian_identifiability(m)
    P = r.n_params
    assert r.orbit_dimension == 2 and r.rank == P - 2 - 1
    assert r.status == "not-identifiable" and r.dimension_lower_bound == 1
    fam = r.families[0]
    assert fam["kind"] == "rotation" and fam["neurons"] == [1, 2]
    # the curve: theta(t) has the same function as theta for several rational t, exactly, and moves theta
    X = fmpq_mat(3, 5, [fmpq(random.Random(k).randint(-9, 9), 4) for k in range(15)])
    for t in (fmpq(1), fmpq(-2, 3), fmpq(5)):
        j1, j2, mu1, mu2 = fam["curves"][0]
        new, R = jm._rotate(m, True, fam["layer"] - 1, j1, j2, mu1, mu2, fam["centre"], t)
        assert new.forward(X) == m.forward(X)
        assert not new.parameters_equal(m)


def test_rotation_needs_proportional_columns():
    m = _rotation_net()
    m.layers[-1] = DenseLayer([[1, 2]], [0], None)      # mu = (1, 2): an isometry of u1^2 + 2 u2^2
    r = jm.jacobian_identifiability(m)
    assert r.status == "not-identifiable" and r.families[0]["kind"] == "rotation"
    m.layers[-1] = DenseLayer([[1, 2], [1, 3]], [0, 0], None)  # columns not proportional: no rotation
    m.layers[-2] = DenseLayer([[1, 2, -1, 3, 1], [2, -1, 1, 1, -2]], [1, 1], monomial(2))
    r = jm.jacobian_identifiability(m)
    assert "rotation" not in [f["kind"] for f in r.families]


def test_rank_deficit_without_a_family_is_evidence_only():
    # bias-free 1-3-1 tanh_series(3): f = a x + b x^3 has 2 functional dimensions, 6 parameters, K finite
    m = Model(1, [DenseLayer([[1], [2], [-3]], None, tanh_series(3)), DenseLayer([[1, 2, 1]], None, None)])
    r = jm.jacobian_identifiability(m)
    assert r.status == "unknown" and r.rank == 2 and r.evidence["stable"] is True
    assert "evidence (not a proof)" in r.reason and r.certificate is None


def test_not_applicable_models():
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], relu()), DenseLayer([[2, -1]], [1], None)])
    r = jm.jacobian_identifiability(m)
    assert r.status == "not-applicable" and "polynomial" in r.reason


def test_size_guard_before_work(monkeypatch):
    monkeypatch.setattr(jm, "MAX_PARAMS", 10)
    r = jm.jacobian_identifiability(builtin_example())
    assert r.status == "not-applicable" and "size guard" in r.reason and r.rank is None


# ----------------------------------------------------------------------------- the certificate

@pytest.fixture(scope="module")
def cert_and_model():
    m = _rand([3, 4, 3, 2], [monomial(2), tanh_series(3)], seed=11)
    r = jm.jacobian_identifiability(m)
    assert r.status == "locally-identifiable" and r.orbit_dimension == 4
    return json.loads(json.dumps(r.certificate)), json.loads(json.dumps(model_to_json(m)))


def _tamper(cert, key, value):
    c = copy.deepcopy(cert)
    c[key] = value
    return c


def test_certificate_accepted(cert_and_model):
    cert, model = cert_and_model
    rep = check.check_certificate(cert, model)
    assert rep.accepted is True and rep.exit_code == 0 and any("rank" in c for c in rep.checks)


@pytest.mark.parametrize("key,change", [
    ("points", lambda c: [c["points"][0]] * len(c["points"])),
    ("points", lambda c: [["0"] * len(c["points"][0])] * len(c["points"])),
    ("rows", lambda c: c["rows"][:-1] + [len(c["points"]) * 2]),
    ("rows", lambda c: c["rows"][:-1] + [True]),
    ("rows", lambda c: [0] * len(c["rows"])),
    ("rows", lambda c: c["rows"][:c["rank"] - 1]),
    ("rows", lambda c: c["rows"][:c["rank"] - 1] + [c["rows"][0]]),
    ("rank", lambda c: c["rank"] + 1),
    ("rank", lambda c: c["rank"] - 1),
    ("rank", lambda c: "12"),
    ("prime", lambda c: "2305843009213693967"),
    ("orbit_dimension", lambda c: c["orbit_dimension"] + 1),
    ("widths", lambda c: c["widths"][:-1] + [3]),
    ("bias", lambda c: False),
    ("parameters", lambda c: c["parameters"] + 1),
    ("layers_sha256", lambda c: "0" * 64),
])
def test_every_field_is_checked(cert_and_model, key, change):
    cert, model = cert_and_model
    bad = _tamper(cert, key, change(cert))
    try:
        rep = check.check_certificate(bad, model)
    except check.CheckError:
        return
    assert rep.accepted is False, (key, rep.lines())


@pytest.mark.parametrize("edit", ["unknown", "missing", "verdict"])
def test_strict_keys_and_verdict(cert_and_model, edit):
    cert, model = cert_and_model
    bad = copy.deepcopy(cert)
    if edit == "unknown":
        bad["pivots"] = []
    elif edit == "missing":
        del bad["rows"]
    else:
        bad["verdict"] = "identifiable"
    with pytest.raises(check.CheckError):
        check.check_certificate(bad, model)


def test_other_points_are_another_proof(cert_and_model):
    """The points are part of the proof, not of the claim: moved points that still give the rank prove it too."""
    cert, model = cert_and_model
    moved = _tamper(cert, "points", [[str(Fraction(x) + 1) for x in p] for p in cert["points"]])
    rep = check.check_certificate(moved, model)
    assert rep.accepted in (True, False) and (rep.accepted or "rank" in rep.reasons[0])


def test_certificate_of_another_model_is_a_mismatch(cert_and_model):
    cert, model = cert_and_model
    other = copy.deepcopy(model)
    other["layers"][0]["weight"][0][0] = "7"
    rep = check.check_certificate(cert, other)
    assert rep.accepted is False and rep.mismatch


def test_checker_size_limit_says_so(cert_and_model, monkeypatch):
    cert, model = cert_and_model
    monkeypatch.setattr(rank, "MAX_JACOBIAN_WORK", 10)
    rep = check.check_certificate(cert, model)
    assert rep.accepted is None and rep.exit_code == 3 and "size limit" in rep.reasons[0]


def test_packed_rank_matches_flint():
    from flint import nmod_mat

    rng = random.Random(4)
    for r, c, rank in ((6, 9, 4), (10, 10, 10), (12, 7, 5)):
        A = [[rng.randrange(50) for _ in range(rank)] for _ in range(r)]
        B = [[rng.randrange(50) for _ in range(c)] for _ in range(rank)]
        M = [[sum(a * b for a, b in zip(row, col)) % jm.PRIME for col in zip(*B)] for row in A]
        want = nmod_mat(M, jm.PRIME).rank()
        assert _jac_rank(M, c) == want
    big = [[rng.randrange(jm.PRIME) for _ in range(40)] for _ in range(40)]  # many folds
    assert _jac_rank(big, 40) == nmod_mat(big, jm.PRIME).rank()


# ----------------------------------------------------------------------------- one report

def test_decide_reports_every_method_and_only_useful_hints():
    r = decide_identifiability(builtin_example())
    assert (r.status, r.method, r.exit_code) == ("locally-identifiable", "jacobian-rank", 3)
    why = {t["method"]: t for t in r.tried}
    assert list(why) == ["classical", "tensor", "jacobian-factors", "jacobian-rank", "groebner"]
    assert "one hidden layer needed, this model has 2" in why["tensor"]["reason"]
    assert "equal hidden widths" in why["jacobian-factors"]["reason"]
    assert why["groebner"]["status"] == "refused"
    assert not any(h.startswith("--max-monomials") for h in r.hints)      # it would be refused for memory
    assert not r.notes                                                     # the Gröbner step never started


def test_decide_rotation_net_is_not_identifiable():
    r = decide_identifiability(_rotation_net(), timeout=30)
    assert r.status == "not-identifiable" and r.exit_code == 1
    assert r.method in ("jacobian-rank", "groebner")


def test_decide_single_method():
    r = decide_identifiability(builtin_example(), method="tensor")
    assert r.status == "not-applicable" and r.exit_code == 3
    r = decide_identifiability(builtin_example(), method="jacobian-rank")
    assert r.status == "locally-identifiable" and [t["method"] for t in r.tried] == ["jacobian-rank"]


def test_cli_fibre_verify_explain_agree(tmp_path, capsys):
    ex, cert = tmp_path / "ex.json", tmp_path / "c.json"
    assert main(["example", "--out", str(ex)]) == 0
    capsys.readouterr()
    t = time.perf_counter()
    assert main(["fibre", str(ex), "--json", "--certificate", str(cert)]) == 3
    assert time.perf_counter() - t < 5
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    assert d["status"] == "locally-identifiable" and d["method"] == "jacobian-rank" and d["rank"] == 152
    assert [t["method"] for t in d["tried"]][-1] == "groebner"
    assert "Gröbner engine" not in cap.err and "note:" not in cap.err
    assert main(["check", str(cert), str(ex)]) == 0
    capsys.readouterr()
    assert main(["verify", str(ex), "--identifiability", "--json"]) == 3
    v = json.loads(capsys.readouterr().out)
    assert v["verdict"] == "layerwise-equivariant" and v["identifiability"]["status"] == "locally-identifiable"
    assert v["identifiability"]["method"] == "jacobian-rank"


@pytest.mark.slow
def test_explain_agrees_with_fibre(tmp_path, capsys):
    ex = tmp_path / "ex.json"
    assert main(["example", "--out", str(ex)]) == 0
    assert main(["explain", str(ex), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "locally-identifiable" in md and "jacobian-rank: locally-identifiable" in md


def test_explain_report_identifiability_agrees():
    """The report's identifiability (without writing files): the decision fibre prints."""
    from symeq.explain import report_identifiability
    from symeq.theorem import verify

    m = builtin_example()
    v = verify(m)
    assert v.identifiability["status"] == "unknown"
    ident = report_identifiability(v, m)
    assert ident["status"] == "locally-identifiable" and ident["method"] == "jacobian-rank"
    assert v.identifiability["status"] == "unknown" and v.exit_code == 0   # the verification is unchanged


def test_cli_fibre_text_and_relu_refusal(tmp_path, capsys):
    path = tmp_path / "rot.json"
    save_model(_rotation_net(), path)
    assert main(["fibre", str(path), "--method", "jacobian-rank"]) == 1
    out = capsys.readouterr().out
    assert "family: rotation" in out and "verdict: not-identifiable" in out
    relu_m = tmp_path / "relu.json"
    save_model(Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], relu()), DenseLayer([[2, -1]], [1], None)]), relu_m)
    # ReLU: the exact functional dimension (symeq.relu.fdim) gives the local answer (exit 3)
    assert main(["fibre", str(relu_m)]) == 3
    assert "verdict: locally-identifiable" in capsys.readouterr().out


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_engine_note_only_when_groebner_runs(monkeypatch):
    import importlib

    registry = importlib.import_module("symeq.fibre.groebner")
    monkeypatch.setattr(registry, "available_engines", lambda: ["flint", "sympy"])
    one_hidden = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], tanh_series(3)),
                           DenseLayer([[2, -1], [1, 1]], [1, 0], None)])
    r = decide_identifiability(one_hidden)
    assert r.method == "tensor" and r.status == "identifiable" and not r.notes     # decided before Gröbner
    tiny = Model(2, [DenseLayer([[1, 2], [3, -1]], None, monomial(3)), DenseLayer([[2, -1]], None, None)])
    r = decide_identifiability(tiny, method="groebner", timeout=30)
    assert any("no Gröbner engine installed" in n for n in r.notes)


def test_bench_local_ident_quick(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_local_ident.py"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((tmp_path / "local_ident-quick.json").read_text())
    assert [r["status"] for r in res["rows"]] == ["locally-identifiable"] * 2
    assert all(r["check"] == "accepted" and r["rank"] == r["bound"] for r in res["rows"])
    assert "| network |" in proc.stdout


def _conv_model(seed=2):
    from symeq.layers.conv import ConvLayer, ConvShape

    rng = random.Random(seed)
    k = [[[[rng.randint(-3, 3) for _ in range(3)] for _ in range(3)] for _ in range(1)] for _ in range(2)]
    conv = ConvLayer(ConvShape(1, 2, 4, 4, 3, 3, padding=1), k, [1, -2], tanh_series(3))
    dense = DenseLayer([[rng.randint(-3, 3) for _ in range(32)] for _ in range(3)], [1, 0, 2], None)
    return Model(16, [conv, dense])


def test_conv_twin_equals_the_dense_expansion_with_shared_weights():
    import numpy as np

    m = _conv_model()
    conv = m.layers[0]
    dense_m = Model(16, [DenseLayer(conv.weight, conv.bias, conv.activation), m.layers[1]])
    pts = jm._points(16, 3, 1)
    X = jm._points_mod(pts)
    Jc = jm._jacobian(jm._twins(m, True), X, jm.Deadline(None))
    Jd = jm._jacobian(jm._twins(dense_m, True), X, jm.Deadline(None))
    src = conv.sources
    npix, taps = 16, 9
    for o in range(2):
        for t in range(taps):
            want = np.zeros(Jd.shape[0], dtype=object)
            for q in range(npix):
                if src[t][q] >= 0:
                    want = want + Jd[:, (o * npix + q) * 16 + src[t][q]].astype(object)
            assert [int(w) % jm.PRIME for w in want] == [int(v) for v in Jc[:, o * taps + t]]
        bias_cols = [int(sum(int(Jd[r, 2 * npix * 16 + o * npix + q]) for q in range(npix)) % jm.PRIME)
                     for r in range(Jd.shape[0])]
        assert bias_cols == [int(v) for v in Jc[:, 2 * taps + o]]
    assert (Jc[:, -3 * 33:] == Jd[:, -3 * 33:]).all()        # the dense readout's block is the same


def test_conv_model_gets_a_local_answer_with_certificate():
    """(More conv certificate tests, tampering included: tests/identifiability/test_local_ident_conv.py.)"""
    m = _conv_model()
    r = jm.jacobian_identifiability(m)
    assert r.n_params == 2 * 9 + 2 + 3 * 32 + 3
    assert r.status == "locally-identifiable" and r.certificate is not None
    rep = check.check_certificate(json.loads(json.dumps(r.certificate)), json.loads(json.dumps(model_to_json(m))))
    assert rep.accepted is True, rep.reasons


def _attention_model(T=3, d=2, dk=2, dv=1, H=2, seed=5, tail=True):
    from symeq.layers.attention import AttentionLayer, Head, tokenwise

    rng = random.Random(seed)

    def rnd(r, c):
        return fmpq_mat(r, c, [rng.randint(-9, 9) for _ in range(r * c)])

    att = AttentionLayer(T, [Head(rnd(d, dk), rnd(d, dk), rnd(d, dv), rnd(dv, d)) for _ in range(H)])
    if not tail:
        return Model(T * d, [att])
    W1, W2 = rnd(3, d), rnd(2, 3)
    return Model(T * d, [att, DenseLayer(tokenwise(W1, T), [1, -1, 2] * T, tanh_series(3), T),
                         DenseLayer(tokenwise(W2, T), [0, 1] * T, None, T)])


def test_attention_rank_matches_symeq_attention():
    from symeq.attention import expected_dimension, symmetry_dimension

    m = _attention_model(tail=False)
    r = jm.jacobian_identifiability(m)
    layer = m.layers[0]
    assert r.rank == expected_dimension(layer) and r.n_params - r.rank == symmetry_dimension(layer)
    assert r.status == "locally-identifiable" and r.certificate is not None  # tests/identifiability/test_local_ident_attention.py


def test_attention_with_token_wise_layers_and_exact_jacobian():
    m = _attention_model()
    twins = jm._twins(m, True)
    assert [t.n_params for t in twins] == [2 * (2 * 4 + 2 + 2), 3 * 2 + 3, 2 * 3 + 2]
    pts = jm._points(6, 2, 3)
    J = jm._jacobian(twins, jm._points_mod(pts), jm.Deadline(None))
    # against exact directional derivatives: f(theta + eps e_k) by dual numbers through the model's own formula
    from symeq.layers.attention import AttentionLayer, Head, tokenwise

    values = [x for t in twins for x in t.values()]

    def rebuild(th):
        c, heads = 0, []
        for h in m.layers[0].heads:
            mats = []
            for M in (h.query, h.key, h.value, h.out):
                n = M.nrows() * M.ncols()
                mats.append((M.nrows(), M.ncols(), th[c:c + n]))
                c += n
            heads.append(mats)
        return heads, th[c:]

    for k in range(0, len(values), 3):
        th = [_Dual(v, 1 if i == k else 0) for i, v in enumerate(values)]
        heads, rest = rebuild(th)
        for n, x in enumerate(pts):
            X = [[_Dual(fmpq(v.numerator, v.denominator)) for v in x[t * 2:(t + 1) * 2]] for t in range(3)]

            def mm(A, B):
                return [[sum((A[i][l] * B[l][j] for l in range(len(B))), _Dual(0)) for j in range(len(B[0]))]
                        for i in range(len(A))]

            def mat(spec):
                r, c_, e = spec
                return [e[i * c_:(i + 1) * c_] for i in range(r)]
            Y = [[_Dual(0)] * 2 for _ in range(3)]
            for Q, K_, V, O in heads:
                Q, K_, V, O = mat(Q), mat(K_), mat(V), mat(O)
                S = mm(mm(X, Q), [list(r) for r in zip(*mm(X, K_))])
                Z = mm(S, mm(mm(X, V), O))
                Y = [[Y[i][j] + Z[i][j] for j in range(2)] for i in range(3)]
            W1, b1, W2, b2 = rest[:6], rest[6:9], rest[9:15], rest[15:17]
            out = []
            for t in range(3):
                h = [sum((W1[a * 2 + j] * Y[t][j] for j in range(2)), _Dual(0)) + b1[a] for a in range(3)]
                h = [z + (-fmpq(1, 3)) * z * z * z for z in h]
                out += [sum((W2[a * 3 + j] * h[j] for j in range(3)), _Dual(0)) + b2[a] for a in range(2)]
            for o, y in enumerate(out):
                assert jm._mod(y.b) == int(J[n * 6 + o, k]), (k, n, o)
    r = jm.jacobian_identifiability(m)
    assert r.status == "locally-identifiable" and r.orbit_dimension == 2 * (1 + 4 + 1) + 2 * 2


def test_small_prime_rank_matches_flint():
    from flint import nmod_mat

    rng = random.Random(6)
    for q in _CHECK_PRIMES:
        assert _jac_is_prime(q) and q < 2 ** 30
        for r, c, rank in ((6, 9, 4), (12, 7, 5), (40, 40, 40), (30, 50, 17)):
            A = [[rng.randrange(q) for _ in range(rank)] for _ in range(r)]
            B = [[rng.randrange(q) for _ in range(c)] for _ in range(rank)]
            M = [[sum(a * b for a, b in zip(row, col)) % q for col in zip(*B)] for row in A]
            assert _jac_rank_small(M, c, q) == nmod_mat(M, q).rank()


def _family_cert(m):
    r = jm.jacobian_identifiability(m)
    assert r.status == "not-identifiable" and r.certificate is not None
    return json.loads(json.dumps(r.certificate)), json.loads(json.dumps(model_to_json(m)))


def test_family_certificates_accepted():
    dead = Model(2, [DenseLayer([[1, 2], [3, -1], [2, 5]], [1, -2, 1], tanh_series(3)),
                     DenseLayer([[2, -1, 0], [1, 1, 0]], [1, 0], None)])
    const = Model(2, [DenseLayer([[1, 2], [3, -1], [0, 0]], [1, -2, 1], tanh_series(3)),
                      DenseLayer([[2, -1, 3], [1, 1, 1]], [1, 0], None)])
    clones = Model(2, [DenseLayer([[1, 2], [1, 2], [3, -1]], [1, 1, 2], tanh_series(3)),
                       DenseLayer([[2, -1, 1], [1, 1, -2]], [1, 0], None)])
    for m in (dead, const, clones, _rotation_net()):
        cert, model = _family_cert(m)
        rep = check.check_certificate(cert, model)
        assert rep.accepted is True, (cert["family"], rep.reasons)


@pytest.mark.parametrize("edit", [
    lambda c: c["family"].update(kind="clones"),
    lambda c: c["family"].update(neurons=[1, 3]),
    lambda c: c["family"].update(neurons=[1]),
    lambda c: c["family"].update(layer=1),
    lambda c: c["family"].update(layer=9),
    lambda c: c.update(dimension_lower_bound=2),
    lambda c: c.update(dimension_lower_bound=0),
    lambda c: c.update(orbit_dimension=1),
    lambda c: c.update(parameters=1),
    lambda c: c.update(layers_sha256="0" * 64),
])
def test_family_certificate_tampering(edit):
    cert, model = _family_cert(_rotation_net())
    edit(cert)
    try:
        rep = check.check_certificate(cert, model)
    except check.CheckError:
        return
    assert rep.accepted is False, rep.lines()


def test_family_certificate_strict_keys():
    cert, model = _family_cert(_rotation_net())
    cert["family"]["mu"] = [1, 1]
    with pytest.raises(check.CheckError):
        check.check_certificate(cert, model)


def test_cli_rotation_certificate(tmp_path, capsys):
    path, cert = tmp_path / "rot.json", tmp_path / "c.json"
    save_model(_rotation_net(), path)
    assert main(["fibre", str(path), "--method", "jacobian-rank", "--certificate", str(cert)]) == 1
    assert main(["check", str(cert), str(path)]) == 0


def test_rank_refused_before_it_starts_when_it_cannot_fit(monkeypatch):
    monkeypatch.setattr(jm, "RANK_SECONDS_PER_OP", 1.0)
    r = jm.jacobian_identifiability(builtin_example(), timeout=30)
    assert r.status == "undetermined" and "raise --timeout" in r.reason and r.rank is None
