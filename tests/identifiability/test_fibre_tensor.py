"""The tensor method (Kruskal certificates) for identifiability: verdicts, certificates, the checker,
agreement with Gröbner bases, the CLI (symeq/fibre/tensor.py, docs/identifiability.md)."""

from __future__ import annotations

import copy
import json
import math
import random
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from symeq.activations import polynomial, sigmoid_series, tanh_series
from symeq_check import check_certificate
from symeq.cli import main
from symeq.fibre.tensor import decide, tensor_identifiability
from symeq.io import model_to_json, save_model
from symeq.models import DenseLayer, Model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_fibre import make_model  # noqa: E402


def _random_model(widths, act, bias=True, seed=0, den=1):
    """Random rational theta (entries p/den, p nonzero in [-9, 9]), the way a user draws one."""
    rng = random.Random(seed)
    layers = []
    for l in range(1, len(widths)):
        W = [[Fraction(rng.choice([x for x in range(-9, 10) if x]), den) for _ in range(widths[l - 1])]
             for _ in range(widths[l])]
        b = [Fraction(rng.randint(-9, 9), den) if bias else 0 for _ in range(widths[l])]
        layers.append(DenseLayer(W, b, act if l < len(widths) - 1 else None))
    return Model(widths[0], layers)


def _check(t, m):
    return check_certificate(json.loads(json.dumps(t.certificate)), json.loads(json.dumps(model_to_json(m))))


@pytest.mark.parametrize("n", [4, 16])
def test_square_tanh_with_biases_identifiable_and_certified(n):
    m = _random_model((n, n, n), tanh_series(3), seed=n, den=3)
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert t.orbit_size == math.factorial(n) * 2 ** n == t.fibre_points
    r = _check(t, m)
    assert r.accepted is True, r.reasons


def test_scalar_output_and_no_bias():
    m = make_model((3, 3, 1), "tanh3", True, "random")
    t = tensor_identifiability(m)
    assert (t.status, t.orbit_size) == ("identifiable", 48)
    assert _check(t, m).accepted is True
    m0 = make_model((3, 3, 1), "tanh3", False, "random")
    t0 = tensor_identifiability(m0)
    assert (t0.status, t0.orbit_size) == ("identifiable", 48)
    assert _check(t0, m0).accepted is True


def test_monomial_torus_orbit():
    m = make_model((2, 2, 2), "t^2", True, "random")
    t = tensor_identifiability(m)
    assert t.status == "identifiable" and t.orbit_size is None and t.orbit_dimension == 2
    assert _check(t, m).accepted is True


def test_sigmoid_affine_sign_flips():
    m = _random_model((3, 3, 2), sigmoid_series(3), seed=5)
    t = tensor_identifiability(m)
    assert (t.status, t.orbit_size) == ("identifiable", 6 * 8)
    assert _check(t, m).accepted is True


def test_not_identifiable_complex_witness_certified():
    # sigma = t + t^4 without biases: lambda^3 = 1, three complex scalings per neuron, K has one; over C
    # (field="C") that is a fibre point outside the orbit; over R (the default) theta is identifiable
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], polynomial([0, 1, 0, 0, 1])),
                  DenseLayer([[2, -1], [1, 1]], [0, 0], None)])
    assert tensor_identifiability(m).status == "identifiable"
    t = tensor_identifiability(m, field="C")
    assert t.status == "not-identifiable" and t.fibre_points == 2 * 3 * 3
    assert t.witness["minimal_polynomial"] == ["1", "1", "1"]
    assert _check(t, m).accepted is True
    bad = copy.deepcopy(t.certificate)
    bad["witness"]["minimal_polynomial"] = ["-1", "0", "1"]  # lambda = +-1: latent scalings
    assert check_certificate(bad, model_to_json(m)).accepted is False


def test_clones_not_applicable_and_auto_falls_back():
    # two cloned neurons (same incoming row and bias): Kruskal fails, never "not identifiable"
    m = Model(2, [DenseLayer([[1, 2], [1, 2], [3, -1]], [1, 1, -2], tanh_series(3)),
                  DenseLayer([[2, -1, 1]], [1], None)])
    t = tensor_identifiability(m)
    assert t.status == "not-applicable" and "Kruskal" in t.reason
    td, c = decide(m, method="auto", engine="sympy", timeout=60)
    assert td.status == "not-applicable" and c is not None and c.status in ("not-identifiable", "unknown")


def test_verify_identifiability_weak_via_tensor_on_reduced_model():
    from symeq.groups.builtins import builtin_group
    from symeq.theorem import verify

    # bias-free odd activation: f(-x) = -f(x); neurons 0 and 1 are clones
    m = Model(2, [DenseLayer([[1, 2], [1, 2], [3, -1]], [0, 0, 0], tanh_series(3)),
                  DenseLayer([[2, -1, 1], [1, 1, 3]], [0, 0], None)])
    v = verify(m, builtin_group("sign:2"), identifiability=True, timeout=60)
    ident = v.identifiability
    assert ident["status"] == "weakly-identifiable", ident
    assert ident["method"] == "tensor" and ident["reduced_status"] == "identifiable"


def test_torch_rounded_weights():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    torch.manual_seed(0)
    lin1, lin2 = torch.nn.Linear(5, 5), torch.nn.Linear(5, 3)
    rnd = lambda x: [[Fraction(round(float(v) * 8), 8) for v in row] for row in x]  # noqa: E731
    W1, W2 = rnd(lin1.weight.detach()), rnd(lin2.weight.detach())
    b1, b2 = rnd([lin1.bias.detach()])[0], rnd([lin2.bias.detach()])[0]
    m = Model(5, [DenseLayer(W1, b1, tanh_series(3)), DenseLayer(W2, b2, None)])
    t = tensor_identifiability(m)
    assert t.status == "identifiable", t.reason
    assert _check(t, m).accepted is True


# ----------------------------------------------------------------------------- tampering

def _tampered(cert):
    """(what, tampered certificate) for every part of an identifiable certificate."""
    out = []
    c = copy.deepcopy(cert); c["rank_one_terms"][1]["w"][0] = str(Fraction(c["rank_one_terms"][1]["w"][0]) + 1)
    out.append(("rank-one term", c))
    c = copy.deepcopy(cert)
    mode = c["kruskal"]["modes"][0]
    assert mode["kind"] == "full-column-rank"
    mode["rows"][1] = list(mode["rows"][0])  # a repeated row: the minor is zero
    out.append(("minor rows", c))
    c = copy.deepcopy(cert); c["kruskal"]["k_lower"][2] += 1
    out.append(("claimed k-rank", c))
    c = copy.deepcopy(cert); c["neurons"][0]["polynomials"][0][1][0] = "5"
    out.append(("per-neuron polynomial", c))
    c = copy.deepcopy(cert); c["neurons"][2]["solutions"] = 3
    out.append(("solution count", c))
    c = copy.deepcopy(cert); c["neurons"][1]["latent"] = ["1"]
    out.append(("latent scalings", c))
    c = copy.deepcopy(cert); c["orbit_size"] = str(int(c["orbit_size"]) * 2)
    out.append(("orbit size", c))
    c = copy.deepcopy(cert); c["independence"] = [e for e in c["independence"] if e["degree"] != 2]
    out.append(("independence", c))
    c = copy.deepcopy(cert); c["neurons"][0]["b"] = "7/5"
    out.append(("neuron bias", c))
    return out


def test_tampering_rejected():
    m = _random_model((4, 4, 4), tanh_series(3), seed=2)
    t = tensor_identifiability(m)
    mj = model_to_json(m)
    assert check_certificate(t.certificate, mj).accepted is True
    for what, c in _tampered(t.certificate):
        r = check_certificate(json.loads(json.dumps(c)), mj)
        assert r.accepted is False, what
    # the model changed under the certificate
    m2 = json.loads(json.dumps(mj)); m2["layers"][0]["bias"][0] = "101"
    assert check_certificate(t.certificate, m2).accepted is False


# ----------------------------------------------------------------------------- agreement with Gröbner

SAMPLE = [((2, 2, 1), "tanh3", True, "random"), ((2, 2, 2), "t+t^2", False, "random"),
          ((3, 3, 1), "t^3", False, "random"), ((2, 2, 2), "tanh3", False, "equivariant")]
ARCHS = [(2, 2, 1), (2, 2, 2), (2, 3, 1), (3, 3, 1), (2, 3, 2), (3, 3, 3), (2, 2, 2, 1)]
FULL = [(a, s, b, k) for a in ARCHS for s in ("t^2", "t^3", "t+t^2", "tanh3") for b in (False, True)
        for k in ("random", "equivariant")]


def _engine():
    from symeq.fibre.engines import available_engines

    fast = [e for e in ("singular", "giac") if e in available_engines()]
    if not fast:
        pytest.skip("no fast exact Gröbner engine: pip install --no-deps passagemath-singular passagemath-giac")
    return fast[0]


def _agree(case, engine, timeout):
    from symeq.fibre.orbit import compare_with_orbit

    m = make_model(*case)
    t = tensor_identifiability(m)
    if t.status not in ("identifiable", "not-identifiable"):
        return None
    c = compare_with_orbit(m, engine=engine, timeout=timeout)
    if c.status == "unknown":
        return None
    assert c.status == t.status, (case, t.reason, c.reason)
    if t.fibre_points is not None and c.dimension == 0:
        assert t.fibre_points == (c.distinct_points if c.distinct_points is not None else c.degree), case
    if t.status == "identifiable" and t.orbit_size is not None:
        assert t.orbit_size == c.orbit_size, case
    return True


@pytest.mark.parametrize("case", SAMPLE, ids=str)
def test_agrees_with_groebner_sample(case):
    _agree(case, _engine(), 30)


@pytest.mark.slow
def test_agrees_with_groebner_full_suite():
    # the whole suite of benchmarks/FIBRE.md; giac settles (3,3,3) tanh3 with biases in 20-40 s
    from symeq.fibre.engines import available_engines

    engine = _engine()
    big = "giac" if "giac" in available_engines() else engine
    decided = [c for c in FULL if _agree(c, big if c[0] == (3, 3, 3) else engine, 120)]
    assert len(decided) >= 40


# ----------------------------------------------------------------------------- the commands

def test_cli_fibre_tensor_certificate_and_check(tmp_path, capsys):
    m = _random_model((6, 6, 6), tanh_series(3), seed=7)
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    save_model(m, path)
    assert main(["fibre", str(path), "--method", "tensor", "--certificate", str(cert), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "tensor" and out["status"] == "identifiable" and "Kruskal" in out["condition"]
    assert out["orbit_size"] == math.factorial(6) * 2 ** 6 and out["dimension"] == 0
    assert main(["check", str(cert), str(path)]) == 0
    data = json.loads(cert.read_text()); data["neurons"][3]["gcd"] = None; data["neurons"][3]["solutions"] = "all"
    cert.write_text(json.dumps(data))
    assert main(["check", str(cert), str(path)]) == 1


def test_cli_tensor_not_applicable_exit_3(tmp_path, capsys):
    m = Model(2, [DenseLayer([[1, 2], [1, 2]], [1, 1], tanh_series(3)), DenseLayer([[2, -1]], [1], None)])
    path = tmp_path / "m.json"
    save_model(m, path)
    assert main(["fibre", str(path), "--method", "tensor", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["status"] == "not-applicable"


def test_deep_not_applicable():
    m = _random_model((2, 2, 2, 1), tanh_series(3), seed=1)
    t = tensor_identifiability(m)
    assert t.status == "not-applicable" and "hidden layer" in t.reason


def test_all_minors_wider_hidden_layer():
    # (3,4,3): V and W have 3 rows for 4 columns; k-rank 3 needs all four 3x3 minors nonzero
    m = _random_model((3, 4, 3), tanh_series(3), seed=3, den=3)
    t = tensor_identifiability(m)
    assert (t.status, t.orbit_size) == ("identifiable", 24 * 16), t.reason
    assert [p["kind"] for p in t.certificate["kruskal"]["modes"][:2]] == ["all-minors", "all-minors"]
    assert _check(t, m).accepted is True
    # V with three dependent columns: the same proof must fail in the checker
    from symeq_check.identifiability.tensor import _KProof

    V = [[Fraction(x) for x in c] for c in ([1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1])]
    W = [[Fraction(x) for x in c] for c in ([1, 2, 0], [0, 1, 5], [3, 1, 1], [1, 0, 1])]
    assert _KProof(V, W, 4).bound({"factors": "V", "kind": "all-minors", "k": 3}, "V", "test") == -1
    assert _KProof(V, W, 4).bound({"factors": "W", "kind": "all-minors", "k": 3}, "W", "test") == 3


@pytest.mark.parametrize("coeffs", [[0, 1, 0, -Fraction(1, 3)], [1, 0, 1], [0, 0, 1], [1, 0, 0, 1], [2, 0, 0, 0, 1],
                                    [0, 1, 1], [1, 2, 1], [0, 1, 0, 0, 1], [0, 1, 1, 1], [5, 0, -2, 0, 1],
                                    [Fraction(1, 2), Fraction(1, 4), 0, -Fraction(1, 48)]])
def test_checker_derives_the_same_latent_scalings(coeffs):
    # the checker's own rule (symeq_check/) must match Activation.continuous / finite_scalings
    from symeq_check.identifiability.tensor import _latent_scalings

    act = polynomial(coeffs)
    for bias in (False, True):
        mine = _latent_scalings([Fraction(c) for c in coeffs], bias, len(coeffs) - 1)
        theirs = "all" if act.continuous(bias) else [Fraction(int(a.p), int(a.q)) for a in act.finite_scalings(bias)]
        assert mine == theirs, (coeffs, bias)


def _paths(o, p=()):
    if p:
        yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, p + (i,))


@pytest.mark.parametrize("which", ["identifiable", "witness"])
def test_every_field_is_checked(which):
    """Replace every field of a certificate by other values: the checker never accepts the change
    (only the free-text description of a witness is not checked)."""
    from symeq_check import CheckError, parse_number

    if which == "identifiable":
        m = _random_model((3, 3, 3), tanh_series(3), seed=1, den=3)
    else:
        m = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], polynomial([0, 1, 0, 0, 1])),
                      DenseLayer([[2, -1], [1, 1]], [0, 0], None)])
    base = json.loads(json.dumps(tensor_identifiability(m, field="C").certificate))
    mj = json.loads(json.dumps(model_to_json(m)))
    assert check_certificate(base, mj).accepted is True

    def same(a, b):
        try:
            return parse_number(a) == parse_number(b)
        except Exception:
            return type(a) is type(b) and a == b

    for p in _paths(base):
        if p[-1] == "text":
            continue
        for repl in (None, "x", 7, [], {}, True, 2, "3/2", -1, "1", 0):
            c = copy.deepcopy(base)
            o = c
            for k in p[:-1]:
                o = o[k]
            if same(o[p[-1]], repl):
                continue
            o[p[-1]] = repl
            try:
                accepted = check_certificate(c, mj).accepted
            except CheckError:
                accepted = False
            assert accepted is False, (p, repl)


def test_bench_tensor_quick(tmp_path):
    import subprocess

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_tensor.py"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--no-groebner", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((tmp_path / "tensor-quick.json").read_text())
    rows = {r["arch"]: r for r in res["widths"]}
    assert rows["(4,4,4)"]["verdict"] == "identifiable" and rows["(4,4,4)"]["check"] == "accepted"
    assert rows["(4,4,4,2)"]["verdict"] == "not-applicable"


def test_readme_command_16_wide(tmp_path, capsys):
    """docs/examples.md's first three commands: generate a (16,16,16) tanh_series(3) network with biases whose weights
    are shared by the cyclic group's regular representation, prove it identifiable, check the certificate."""
    m, c = tmp_path / "m.json", tmp_path / "c.json"
    assert main(["generate", "--group", "shift:16", "--activation", "tanh_series:3", "--latent", "regular",
                 "--seed", "1", "--out", str(m)]) == 0
    assert main(["fibre", str(m), "--certificate", str(c)]) == 0
    out = capsys.readouterr().out
    assert "verdict: identifiable" in out and f"orbit size: {math.factorial(16) * 2 ** 16}" in out
    assert main(["check", str(c), str(m)]) == 0
    assert "result: accepted" in capsys.readouterr().out
