"""Local identifiability of a graph model, certified and re-checked (symeq/fibre/graph_rank.py writes the
certificate, symeq_check/identifiability/graph_rank.py re-verifies it by its own reverse mode along the
graph): the checker's rows are the prover's Jacobian rows entry by entry; ``symeq fibre --certificate`` on a
residual and a concatenating graph writes a certificate that ``symeq check`` and the bare checker accept;
another model (a changed weight) is exit 2; a forged full rank of a rank-deficient graph is rejected; a
graph with a conv2d layer is not re-verified (exit 3); ``"bias": null`` layers have no bias parameters."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
import subprocess
import sys

import pytest

from graph_networks import concat_net, residual
from symeq.cli import main
from symeq.fibre.graph_rank import _programs, graph_jacobian_identifiability, graph_reverse_jacobian
from symeq.fibre.jacobian import PRIME, _points, _points_mod
from symeq.io import model_from_json
from symeq_check import check_certificate
from symeq_check.graph import read_graph_model
from symeq_check.identifiability import graph_rank as checker

T3 = {"type": "tanh_series", "order": 3}


def branches(seed: int = 1) -> dict:
    """Two branches of the input (3 and 2 neurons, the second bias-free), concatenated under an activation,
    then a head with two outputs: random integer weights, locally identifiable."""
    import random

    rng = random.Random(seed)
    mat = lambda r, c: [[str(rng.randint(-3, 3)) for _ in range(c)] for _ in range(r)]  # noqa: E731
    vec = lambda r: [str(rng.randint(-2, 2)) for _ in range(r)]  # noqa: E731
    dense = lambda W, b, act: {"type": "dense", "weight": W, "bias": b, "activation": act}  # noqa: E731
    return {"format": "symeq-model/1", "name": "branches", "input_dim": 3, "graph": [
        {"name": "left", "input": "input", "layers": [dense(mat(3, 3), vec(3), T3)]},
        {"name": "right", "input": "input", "layers": [dense(mat(2, 3), None, T3)]},
        {"name": "both", "concat": ["left", "right"], "activation": T3},
        {"name": "head", "input": "both", "layers": [dense(mat(2, 5), vec(2), None)]}]}


def _certified(model: dict) -> dict:
    d = graph_jacobian_identifiability(model_from_json(model))
    assert d.status == "locally-identifiable" and d.certificate is not None, d.reason
    return d.certificate


@pytest.mark.parametrize("build", [lambda: residual(T3), lambda: concat_net(T3), branches])
def test_the_checkers_rows_are_the_provers_jacobian(build):
    model = build()
    gm = model_from_json(model)
    pts = _points(gm.input_dim, 3, 7)
    J = graph_reverse_jacobian(gm, _programs(gm), _points_mod(pts))  # N K x P, point-major, mod 2^61 - 1
    cgm = read_graph_model(model)
    report = checker.CheckReport(None, "x")
    segments = checker._segments(report, cgm, model)
    offsets = checker._offsets(segments)
    P = J.shape[1]
    K = gm.output_dim
    for n, pt in enumerate(pts):
        _, cache = checker._forward(cgm, segments, [Fraction(x) for x in pt], PRIME)
        for k in range(K):
            row = checker._row(cgm, segments, cache, offsets, P, k, PRIME)
            assert row == [int(v) for v in J[n * K + k]], (n, k)


@pytest.mark.parametrize("build", [lambda: residual(T3), branches])
def test_symeq_fibre_writes_a_graph_certificate_that_both_checkers_accept(build, tmp_path, capsys):
    path, cert = tmp_path / "g.json", tmp_path / "c.json"
    path.write_text(json.dumps(build()))
    assert main(["fibre", str(path), "--certificate", str(cert)]) == 3  # locally identifiable: the global question open
    assert f"certificate: {cert} (check with: symeq check {cert} {path})" in capsys.readouterr().out
    data = json.loads(cert.read_text())
    assert data["method"] == "jacobian-rank" and data["rank"] == data["parameters"] and "graph_sha256" in data
    capsys.readouterr()
    assert main(["check", str(cert), str(path)]) == 0
    out = capsys.readouterr().out
    assert "rows of the Jacobian along the graph" in out and "result: accepted" in out
    bare = subprocess.run([sys.executable, "-I", "-m", "symeq_check", str(cert), str(path)], capture_output=True,
                          text=True, timeout=120, cwd=str(tmp_path), env={"PYTHONPATH": str(checker.__file__).rsplit(
                              "/symeq_check/", 1)[0]})
    assert bare.returncode == 0 and "standard library" in bare.stdout, bare.stdout + bare.stderr


def test_a_changed_weight_is_another_model():
    model = residual(T3)
    cert = _certified(model)
    other = copy.deepcopy(model)
    other["graph"][0]["layers"][0]["weight"][0][0] = "7"
    report = check_certificate(cert, other)
    assert report.exit_code == 2 and "graph_sha256" in " ".join(report.reasons)


def test_a_forged_full_rank_of_a_rank_deficient_graph_is_rejected():
    model = residual(T3)
    cert = _certified(model)
    # two equal neurons in the stem (a clone): the rows lose rank, whatever the certificate claims
    deficient = copy.deepcopy(model)
    stem = deficient["graph"][0]["layers"][0]
    stem["weight"][1] = list(stem["weight"][0])
    d = graph_jacobian_identifiability(model_from_json(deficient))
    assert d.status != "locally-identifiable" and d.rank < d.n_params
    forged = dict(cert, graph_sha256=checker.graph_digest(read_graph_model(deficient)))
    report = check_certificate(forged, deficient)
    assert report.exit_code == 1 and "not the" in " ".join(report.reasons), report.lines()


def test_too_few_rows_and_a_wrong_parameter_count_are_rejected():
    model = residual(T3)
    cert = _certified(model)
    assert check_certificate(dict(cert, rows=cert["rows"][:cert["parameters"] - 1]), model).exit_code == 1
    assert check_certificate(dict(cert, parameters=cert["parameters"] + 1, rank=cert["rank"] + 1),
                             model).exit_code == 1


def test_bias_null_layers_have_no_bias_parameters():
    model = residual(T3)
    with_bias = copy.deepcopy(model)
    with_bias["graph"][1]["layers"][1]["bias"] = ["0"] * 4  # zeros declared: four more parameters
    a, b = _certified(model), _certified(with_bias)
    assert b["parameters"] == a["parameters"] + 4
    assert check_certificate(a, model).exit_code == 0 and check_certificate(b, with_bias).exit_code == 0
    wrong = check_certificate(b, model)  # the declared biases are part of the parameter space
    assert wrong.exit_code == 1 and f"has {a['parameters']} parameters" in wrong.reasons[0]


def conv_branches() -> dict:
    """A residual conv net on 1 x 3 x 3 images (tanh_series): a 2 x 2 convolution to two channels, a 1 x 1
    convolution of those, their sum under the activation, a dense head with two outputs."""
    import random

    rng = random.Random(2)
    q = lambda: str(rng.randint(-2, 2) or 1)  # noqa: E731
    stem = {"type": "conv2d", "input_shape": [1, 3, 3], "kernel": [[[[q(), q()], [q(), q()]]] for _ in range(2)],
            "bias": ["1", "-1"], "activation": T3}
    mix = {"type": "conv2d", "kernel": [[[[q()]], [[q()]]] for _ in range(2)], "bias": None, "activation": None}
    head = {"type": "dense", "weight": [[q() for _ in range(8)] for _ in range(2)], "bias": None, "activation": None}
    return {"format": "symeq-model/1", "name": "conv residual", "input_dim": 9, "graph": [
        {"name": "stem", "input": "input", "layers": [stem]},
        {"name": "mix", "input": "stem", "layers": [mix]},
        {"name": "sum", "add": ["stem", "mix"], "activation": T3},
        {"name": "head", "input": "sum", "layers": [head]}]}


def test_a_conv_graph_certificate_is_not_re_verified():
    model = conv_branches()
    d = graph_jacobian_identifiability(model_from_json(model))
    assert d.status == "locally-identifiable" and d.certificate is not None, d.reason
    report = check_certificate(d.certificate, model)
    assert report.exit_code == 3 and report.accepted is None
    assert any("nothing this checker can re-verify" in c for c in report.checks), report.lines()


def test_a_graph_certificate_against_a_chain_file_is_refused():
    from symeq_check import CheckError

    cert = _certified(residual(T3))
    chain = {"format": "symeq-model/1", "input_dim": 2, "layers": [
        {"type": "dense", "weight": [["1", "0"], ["0", "1"]], "bias": None, "activation": None}]}
    with pytest.raises(CheckError, match="give the graph model"):
        check_certificate(cert, chain)
