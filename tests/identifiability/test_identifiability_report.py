"""Issue 21 / 18 close-out: ReLU models in the identifiability dispatcher, a model no method covers
(exit 3), the theorem's name as the method, the structured Jacobian rank, text numbered from 1."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

import symeq.fibre.jacobian as jm
from symeq.activations import monomial, real, relu, tanh_series
from symeq.cli import main
from symeq.fibre.decide import decide_identifiability, relu_local_identifiability
from symeq.fibre.orbit import one_based
from symeq.io import save_model
from symeq.models import DenseLayer, Model


def _mlp(widths, act, seed=1, last=None):
    rng = random.Random(seed)
    layers = []
    for i in range(len(widths) - 1):
        W = [[rng.randint(-5, 5) for _ in range(widths[i])] for _ in range(widths[i + 1])]
        b = [rng.randint(-5, 5) for _ in range(widths[i + 1])]
        layers.append(DenseLayer(W, b, last if i == len(widths) - 2 else act))
    return Model(widths[0], layers)


def _fibre_json(tmp_path, model, capsys, *extra):
    path = tmp_path / "m.json"
    save_model(model, path)
    code = main(["fibre", str(path), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


# ----------------------------------------------------------------------------- ReLU in the dispatcher

@pytest.mark.parametrize("widths,act", [((2, 4, 2), relu()), ((3, 4, 3, 2), relu()),
                                        ((2, 3, 1), real("leaky_relu", slope="1/10"))])
def test_relu_models_get_the_exact_local_answer(tmp_path, capsys, widths, act):
    code, d = _fibre_json(tmp_path, _mlp(widths, act), capsys)
    assert code == 3 and d["status"] == "locally-identifiable" and d["method"] == "jacobian-rank"
    fd = d["functional_dimension"]
    assert fd["rank"] == fd["bound"] == d["rank"] == d["upper_bound"] and fd["locally_identifiable"]
    assert d["parameters"] - d["orbit_dimension"] == d["rank"]
    assert [t["method"] for t in d["tried"]][-2:] == ["jacobian-rank", "groebner"]


def test_relu_rank_short_of_the_bound_is_not_called_locally_identifiable():
    # neuron 2 never active on the inputs (w = 0, b < 0): its weights are free, the rank misses the bound
    m = Model(2, [DenseLayer([[1, 2], [0, 0], [3, -1]], [1, -1, 2], relu()), DenseLayer([[1, 1, -2]], [0], None)])
    r = decide_identifiability(m)
    assert r.status == "unknown" and r.method is None and r.exit_code == 3
    assert "not a proof" in r.local.reason and r.local.fdim.rank < r.local.fdim.bound
    assert relu_local_identifiability(m).status == "unknown"


def test_relu_local_answer_past_its_budget_is_undetermined():
    import time

    from symeq.budget import Deadline

    d = Deadline(1e-6)
    time.sleep(0.01)
    r = relu_local_identifiability(_mlp((2, 4, 2), relu()), deadline=d)
    assert r.status == "undetermined" and "budget" in r.reason


def test_verify_identifiability_reports_the_relu_local_answer(tmp_path, capsys):
    path = tmp_path / "relu.json"
    assert main(["generate", "--group", "rot:3", "--activation", "relu", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["verify", str(path), "--identifiability", "--json"]) == 3  # the global premise stays open
    d = json.loads(capsys.readouterr().out)
    ident = d["identifiability"]
    assert ident["status"] == "locally-identifiable" and ident["method"] == "jacobian-rank", ident
    assert ident["rank"] == ident["parameters"] - ident["orbit_dimension"]


# ----------------------------------------------------------------------------- no method: exit 3, not 2

def test_gelu_model_is_open_not_bad_input(tmp_path, capsys):
    code, d = _fibre_json(tmp_path, _mlp((2, 3, 1), real("gelu")), capsys)
    assert code == 3 and d["status"] == "unknown" and d["decided_by"] is None
    assert "no identifiability method covers this model" in d["reason"] and "gelu" in d["reason"]
    assert all(t["status"] == "not-applicable" for t in d["tried"])
    assert not any(t["reason"].startswith("jacobian-rank:") for t in d["tried"])  # no doubled prefix
    path = tmp_path / "m.json"
    assert main(["fibre", str(path)]) == 3
    out = capsys.readouterr().out
    assert "method: none decided" in out and "condition: \n" not in out


# ----------------------------------------------------------------------------- the theorem names the method

def test_classical_decision_names_the_theorem(tmp_path, capsys):
    code, d = _fibre_json(tmp_path, _mlp((2, 3, 1), real("tanh")), capsys)
    assert code == 0 and d["status"] == "identifiable"
    assert d["method"] == d["decided_by"] == "sussmann" and d["tried"][0]["method"] == "classical"


# ----------------------------------------------------------------------------- the structured rank

def _full_rank(J):
    return jm._to_nmod(J).rank()


def test_matmul_mod_blas_is_exact():
    rng = np.random.default_rng(3)
    G = rng.integers(0, jm.PRIME, size=(7, 1500), dtype=np.uint64)
    B = rng.integers(0, jm.PRIME, size=(1500, 9), dtype=np.uint64)
    G[0, :] = jm.PRIME - 1
    B[:, 0] = jm.PRIME - 1
    got = jm._matmul_mod_blas(G, B, chunk=4)
    want = [[sum(int(a) * int(b) for a, b in zip(G[i], B[:, j])) % jm.PRIME for j in range(9)] for i in range(7)]
    assert got.tolist() == want


def _models():
    clones = Model(2, [DenseLayer([[1, 2], [1, 2], [3, -1]], [1, 1, 0], tanh_series(3)),
                       DenseLayer([[2, -1, 1], [1, 1, 0]], [1, 0], None)])
    dead = Model(2, [DenseLayer([[1, 2], [0, 0], [3, -1]], [1, 2, 0], tanh_series(3)),
                     DenseLayer([[2, -1, 1], [1, 1, 0]], [1, 0], None)])
    rot = _mlp((3, 5, 5, 2, 1), tanh_series(3), seed=3)
    rot.layers[-2] = DenseLayer(rot.layers[-2].weight, rot.layers[-2].bias, monomial(2))
    rot.layers[-1] = DenseLayer([[1, 1]], [0], None)
    return [_mlp((3, 4, 4, 3), tanh_series(3)), _mlp((4, 6, 5, 2), tanh_series(3), seed=2), clones, dead, rot,
            _mlp((2, 3, 3, 2), monomial(2), seed=4)]


@pytest.mark.parametrize("model", _models(), ids=["full", "narrow", "clones", "dead", "rotation", "square"])
@pytest.mark.parametrize("extra", [0, 3, -2])
def test_structured_rank_equals_the_full_elimination(model, extra):
    bias = True
    twins = jm._twins(model, bias)
    P = sum(t.n_params for t in twins)
    K = model.layers[-1].out_dim
    N = max(1, -(-P // K) + extra)
    keep: dict = {}
    J = jm._jacobian(twins, jm._points_mod(jm._points(model.input_dim, N, 0)), jm.Deadline(None), keep)
    assert jm._affine_last(twins)
    r = jm._structured_rank(J, keep["last_input"], keep["last_col"], K, bias)
    assert r == _full_rank(J)
    # repeated points: C = [H^T, 1] loses rank, the identity still holds
    pts = jm._points(model.input_dim, max(1, N // 2), 1)
    keep = {}
    J = jm._jacobian(twins, jm._points_mod(pts + pts), jm.Deadline(None), keep)
    assert jm._structured_rank(J, keep["last_input"], keep["last_col"], K, bias) == _full_rank(J)


def test_structured_path_gives_the_same_decision(monkeypatch):
    m = _mlp((6, 12, 12, 6), tanh_series(3), seed=5)
    monkeypatch.setattr(jm, "STRUCTURED_MIN_PARAMS", 1)
    a = jm.jacobian_identifiability(m)
    monkeypatch.setattr(jm, "STRUCTURED", False)
    b = jm.jacobian_identifiability(m)
    assert (a.status, a.rank, a.points) == (b.status, b.rank, b.points) == ("locally-identifiable", a.n_params, b.points)
    assert a.certificate["rows"] == b.certificate["rows"]


# ----------------------------------------------------------------------------- text numbered from 1

def test_one_based_renames_only_unknowns():
    assert one_based("w2_0_1=3, b1_2=1, w_1, b_2, x1_0") == "w2_1_2=3, b1_3=1, w_1, b_2, x1_0"


def test_fibre_text_numbers_from_one_json_from_zero(tmp_path, capsys):
    m = Model(2, [DenseLayer([[1, 2], [0, 0]], [1, 1], monomial(2)), DenseLayer([[2, -1]], [0], None)])
    path = tmp_path / "dead.json"
    save_model(m, path)
    assert main(["fibre", str(path), "--method", "groebner"]) == 1
    cap = capsys.readouterr()
    assert "neuron 2 of hidden layer 1 is dead" in cap.out and "w2_1_2:1" in cap.out
    assert "numbered from 1" in cap.out
    names = set(re.findall(r"\b[wb]\d+_\d+(?:_\d+)?\b", cap.out))
    assert "w2_0_1" not in names and "b2_0" not in names
    assert main(["fibre", str(path), "--method", "groebner", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert "w2_0_1" in json.dumps(d)  # the JSON keeps the names with rows and columns from 0


def test_hunt_report_numbers_candidates_from_one(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["hunt", "--arch", "2,4,2", "--group", "rot3", "--budget", "12", "--out", str(out)]) == 0
    capsys.readouterr()
    recs = [json.loads(line) for line in out.read_text().splitlines()[1:]]
    assert main(["hunt", "--report", str(out), "--no-picture"]) == 0
    text = capsys.readouterr().out
    m = re.search(r"smallest proven find: candidate (\d+)", text)
    assert m, text
    finds = {r["index"] for r in recs if r.get("status") == "counterexample"}
    assert int(m.group(1)) - 1 in finds and "numbered from 1" in text
