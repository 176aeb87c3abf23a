"""Tests of the ReLU counterexample hunter: canonical forms, the fibre-wide decision, the hunt
(JSONL resume, process pool, dask.distributed), the catalogue and the CLI."""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from flint import fmpq

from symeq.layerwise import check_layerwise
from symeq.numbers import mat_rows
from symeq.relu.canonical import canonical_form, same_function
from symeq.relu.fibre import decide_fibre
from symeq.relu.hunt import (build_layers, generate_candidate, hunt, identity_example, read_records, report,
                             resolve_group, verify_candidate)
from symeq.relu.regions import decide_equivariance, evaluate
from symeq.theorem import verify

Q = fmpq
R3 = [[0, -1], [1, -1]]


def _records(path):
    return sorted(json.dumps(r, sort_keys=True) for r in read_records(path)[1])


# -- canonical form -------------------------------------------------------------------------------

def _random_net(rng, n, N, m, lo=-3, hi=3):
    W = [[rng.randint(lo, hi) for _ in range(n)] for _ in range(N)]
    b = [rng.randint(lo, hi) for _ in range(N)]
    V = [[rng.randint(lo, hi) for _ in range(N)] for _ in range(m)]
    c = [rng.randint(lo, hi) for _ in range(m)]
    return [(W, b, True), (V, c, False)]


def test_canonical_form_evaluates_like_the_network():
    rng = random.Random(1)
    for _ in range(30):
        net = _random_net(rng, 2, 5, 2)
        cf = canonical_form(net)
        for _ in range(10):
            x = [Q(rng.randint(-20, 20), rng.randint(1, 5)) for _ in range(2)]
            assert cf(x) == evaluate(net, x)


def test_canonical_form_is_invariant_under_K_and_merges_parallel_neurons():
    rng = random.Random(2)
    for _ in range(20):
        (W, b, _), (V, c, _) = _random_net(rng, 2, 4, 2)
        perm = list(range(4))
        rng.shuffle(perm)
        scale = [Q(rng.randint(1, 5), rng.randint(1, 5)) for _ in range(4)]
        W2 = [[scale[j] * x for x in W[j]] for j in perm]
        b2 = [scale[j] * b[j] for j in perm]
        V2 = [[V[r][j] / scale[j] for j in perm] for r in range(2)]
        assert same_function([(W, b, True), (V, c, False)], [(W2, b2, True), (V2, c, False)])
    # two neurons on the same kink merge; a pair relu(z) - relu(-z) leaves only its affine part
    cf = canonical_form([([[1, 1], [2, 2], [1, 0], [-1, 0]], [1, 2, 0, 0], True),
                         ([[1, 1, 3, -3]], [0], False)])
    assert len(cf.kinks) == 1 and cf.kinks[0].jump == (Q(3),)
    assert cf.linear == ((Q(3), Q(0)),)
    # different functions have different forms
    assert not same_function([([[1]], [0], True), ([[1]], [0], False)], [([[1]], [1], True), ([[1]], [-1], False)])


# -- acceptance: the width-4 identity under rot3 ---------------------------------------------------

@pytest.mark.parametrize("A", [((2, 1), (1, 1)), ((1, 0), (0, 1)), ((1, 2), (-1, 3))])
def test_width4_identity_has_no_layerwise_parameter(A):
    G = resolve_group("rot3")
    model = identity_example(A)
    layers = [(mat_rows(l.weight), l.bias, l.activation is not None) for l in model.layers]
    assert decide_equivariance(layers, R3, R3).holds
    v = verify(model)
    assert v.verdict == "no-layerwise-parameter" and v.identifiability["status"] == "not-identifiable"
    d = decide_fibre(model, G)
    assert d.verdict == "no-layerwise-parameter" and d.exit_code == 1
    assert d.at_theta is False
    assert d.smallest_equivariant_width == 6 and d.lower_bound == 6
    real = d.realisation
    assert real.widths == [2, 6, 2]
    assert same_function(real, model)
    assert verify(real).verdict == "layerwise-equivariant"
    checks, hom, _, _ = check_layerwise(real, G, [d.realisation_actions])
    assert hom and all(c.holds for c in checks)
    assert "6" in d.report()


def test_non_equivariant_model_gets_a_real_witness():
    layers = [([[1, 2], [0, 1]], [0, 1], True), ([[1, 0], [0, 1]], [0, 0], False)]
    d = decide_fibre(layers, resolve_group("rot3"))
    assert d.verdict == "not-equivariant" and d.exit_code == 1
    x = d.witness
    lhs = evaluate(layers, [sum((Q(a) * t for a, t in zip(row, x)), Q(0)) for row in R3])
    fx = evaluate(layers, x)
    rhs = [sum((Q(a) * t for a, t in zip(row, fx)), Q(0)) for row in R3]
    assert lhs != rhs


def test_layerwise_equivariant_model_is_verified_with_actions():
    # the width-6 realisation itself: layerwise at theta, exit 0
    d6 = decide_fibre(identity_example(), resolve_group("rot3"))
    d = decide_fibre(d6.realisation, resolve_group("rot3"))
    assert d.verdict == "layerwise-parameter" and d.exit_code == 0 and d.at_theta
    assert d.parameter is d6.realisation and d.actions is not None
    assert verify(d6.realisation).exit_code == 0


def test_reparametrisation_in_the_fibre_is_built_and_checked():
    # width 6 through three pairs: not layerwise at theta, but a theta' of width 6 is
    rec = {"A": [[1, 0], [0, 1], [1, 1]], "L": [1, 0], "beta": [0, 0, 0], "cfix": [], "dead": 0}
    layers = build_layers(rec, "rot3")
    G = resolve_group("rot3")
    d = decide_fibre(layers, G)
    assert d.at_theta is False
    assert d.verdict == "layerwise-parameter" and d.smallest_equivariant_width == 6
    assert d.parameter.widths == [2, 6, 2] and same_function(d.parameter, layers)
    checks, hom, _, _ = check_layerwise(d.parameter, G, [d.actions])
    assert hom and all(c.holds for c in checks)


@pytest.mark.parametrize("arch,spec", [((2, 4, 2), "rot3"), ((2, 4, 2), "rot4"), ((2, 4, 2), "sign:2"),
                                       ((3, 6, 3), "shift:3"), ((1, 3, 1), "sign:1"), ((2, 5, 2), "mirror:1x2")])
def test_fibre_decision_is_sound_on_layerwise_models(arch, spec):
    """Networks layerwise equivariant by construction are never declared counterexamples, and
    every realisation returned computes the same function (checked inside decide_fibre)."""
    G = resolve_group(spec)
    seen = 0
    for i in range(40):
        kind, rec = generate_candidate(arch, spec, 7, i)
        if kind != "symmetrised":
            continue
        layers = build_layers(rec, spec)
        if layers is None:
            continue
        d = decide_fibre(layers, G)
        assert d.verdict == "layerwise-parameter", (i, rec, d.lower_bound, d.upper_bound)
        assert d.smallest_equivariant_width is not None and d.smallest_equivariant_width <= arch[1]
        seen += 1
    assert seen >= 3


def test_deeper_networks_are_undetermined():
    layers = [([[1, 0], [0, 1]], [0, 0], True), ([[1, 0], [0, 1]], [0, 0], True), ([[1, 1]], [0], False)]
    assert decide_fibre(layers, resolve_group("sym:2")).verdict == "undetermined"


# -- the hunter ------------------------------------------------------------------------------------

def test_hunter_finds_the_identity_kind_by_itself(tmp_path):
    out = tmp_path / "h.jsonl"
    s = hunt("2,4,2", "rot3", out, budget=16)
    assert s["finds"] >= 1
    header, recs = read_records(out)
    assert header["arch"] == [2, 4, 2] and header["group"] == "rot3"
    finds = [r for r in recs if r["status"] == "counterexample"]
    assert finds
    r = finds[0]
    cert = r["certificate"]
    assert cert["verdict"] == "no-layerwise-parameter"
    assert cert["end_to_end"]["holds"] and not cert["at_theta"]["actions_found"]
    assert cert["fibre"]["smallest_equivariant_width"] == 6
    assert cert["realisation"]["layers"][0]["weight"].__len__() == 6
    # the minimised network is still a counterexample, with small integer first layer
    m = r["minimised"]["model"]
    assert r["minimised"]["width"] == 4
    assert all(abs(int(x)) <= 2 for row in m["W1"] for x in row)
    layers = [(m["W1"], m["b1"], True), (m["W2"], m["b2"], False)]
    assert decide_fibre(layers, resolve_group("rot3")).verdict == "no-layerwise-parameter"
    assert len({rec["index"] for rec in recs}) == len(recs) == 16


def test_resume_after_interruption_gives_the_same_records(tmp_path):
    full = tmp_path / "full.jsonl"
    hunt("2,4,2", "rot3", full, budget=60, batch=16)
    part = tmp_path / "part.jsonl"
    hunt("2,4,2", "rot3", part, budget=60, batch=16, seconds=0.0)  # stops after the first record
    assert 0 < len(read_records(part)[1]) < 60
    with open(part, "a") as f:  # a torn line, as left by a kill during a write
        f.write('{"type": "candidate", "index": 5')
    hunt("2,4,2", "rot3", part, budget=60, batch=16)
    assert _records(part) == _records(full)


@pytest.mark.parametrize("workers,resume_workers", [(1, 2), pytest.param(2, 1, marks=pytest.mark.slow)])
def test_killed_hunt_resumes_without_loss_or_duplicates(tmp_path, workers, resume_workers):
    """SIGKILL halfway (a subprocess, killed once its file has some lines), resume with another
    worker count, compare line by line with an uninterrupted run: same finds, same order, none
    lost or doubled."""
    budget = 160
    full = tmp_path / "full.jsonl"
    hunt("2,4,2", "rot3", full, budget=budget, lag=32, minimise_finds=False)
    out = tmp_path / "killed.jsonl"
    code = ("from symeq.relu.hunt import hunt; "
            f"hunt('2,4,2', 'rot3', {str(out)!r}, budget={budget}, lag=32, workers={workers}, minimise_finds=False)")
    proc = subprocess.Popen([sys.executable, "-c", code])
    t0 = time.time()
    while time.time() - t0 < 120:
        if out.exists() and out.read_text().count("\n") >= 20:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    n_killed = len(read_records(out)[1])
    assert 19 <= n_killed < budget  # killed halfway, not after the end
    s = hunt("2,4,2", "rot3", out, budget=budget, workers=resume_workers, minimise_finds=False)
    assert s["verified"] == budget - n_killed and s["complete"]
    lines = out.read_text().splitlines()
    assert lines == full.read_text().splitlines()
    idx = [json.loads(x)["index"] for x in lines[1:]]
    assert idx == list(range(budget))
    assert any(json.loads(x)["status"] == "counterexample" for x in lines[1:])


def test_resuming_a_finished_hunt_prints_one_line(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    argv = ["hunt", "--arch", "2,4,2", "--group", "rot3", "--budget", "8", "--out", str(out)]
    assert _cli(argv) == 0
    before = out.read_text()
    capsys.readouterr()
    assert _cli(argv) == 0
    cap = capsys.readouterr()
    assert cap.out.count("\n") == 1 and "already complete" in cap.out and cap.err == ""
    assert out.read_text() == before


def test_work_units_are_sized_by_measured_cost():
    from symeq.relu.hunt import _ChunkSizer

    z = _ChunkSizer(slots=2, target=1.0)
    assert z.size(None, 10**6) == 4  # nothing measured yet
    for _ in range(5):
        z.record(100, 0.5)  # 5 ms a candidate
    assert 150 <= z.size(None, 10**6) <= 250
    assert z.size(40, 10**6) == 10  # the end of a hunt spreads over the workers
    assert z.size(None, 64) == 16   # several units fit in the lag window
    for _ in range(20):
        z.record(10, 2.0)  # got slower: 200 ms a candidate
    assert z.size(None, 10**6) <= 6


def test_old_hunt_files_are_refused_for_resume_but_reported(tmp_path):
    from symeq.errors import InputError

    out = tmp_path / "old.jsonl"
    out.write_text(json.dumps({"type": "header", "format": "symeq-hunt/1", "arch": [2, 4, 2], "group": "rot3",
                               "seed": 0}) + "\n")
    with pytest.raises(InputError, match="older hunter"):
        hunt("2,4,2", "rot3", out, budget=2)
    assert "architecture 2,4,2" in report(out)


def test_process_pool_gives_the_same_records(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    hunt("2,4,2", "rot3", a, budget=48, workers=1, batch=16)
    hunt("2,4,2", "rot3", b, budget=48, workers=2, batch=16)
    assert _records(a) == _records(b)


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_dask_cluster_gives_the_same_records(tmp_path):
    distributed = pytest.importorskip("distributed", reason="needs dask.distributed: pip install 'symeq[distributed]'")
    a, b = tmp_path / "pool.jsonl", tmp_path / "dask.jsonl"
    c, d = tmp_path / "deep.jsonl", tmp_path / "deep-dask.jsonl"
    hunt("2,4,2", "rot3", a, budget=40, workers=2, batch=16)
    hunt("2,3,4,2", "rot3", c, budget=8, lag=4)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        hunt("2,4,2", "rot3", b, budget=40, scheduler=cluster.scheduler_address, batch=16)
        hunt("2,3,4,2", "rot3", d, budget=8, lag=4, scheduler=cluster.scheduler_address)
    # in order, line by line
    assert a.read_text().splitlines() == b.read_text().splitlines()
    assert c.read_text().splitlines() == d.read_text().splitlines()


def test_mismatched_resume_is_refused(tmp_path):
    from symeq.errors import InputError

    out = tmp_path / "h.jsonl"
    hunt("2,4,2", "rot3", out, budget=2)
    with pytest.raises(InputError):
        hunt("2,4,2", "rot3", out, budget=2, seed=1)
    with pytest.raises(InputError):
        hunt("3,4,3", "rot3", tmp_path / "x.jsonl", budget=2)


def test_candidates_are_deterministic():
    for i in range(10):
        assert generate_candidate((2, 4, 2), "rot3", 3, i) == generate_candidate((2, 4, 2), "rot3", 3, i)
        assert verify_candidate((2, 4, 2), "rot3", 3, i, (), False) == verify_candidate((2, 4, 2), "rot3", 3, i, (), False)


# -- catalogue and CLI ------------------------------------------------------------------------------

def _cli(argv):
    from symeq.cli.hunt import register

    p = argparse.ArgumentParser(prog="symeq")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


def test_cli_hunt_and_report(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert _cli(["hunt", "--arch", "2,4,2", "--group", "rot3", "--budget", "12", "--out", str(out)]) == 0
    assert "counterexample" in capsys.readouterr().out
    assert _cli(["hunt", "--report", str(out)]) == 0
    text = capsys.readouterr().out
    # the command line writes the canonical spelling of the alias rot3 (symeq.groups.builtins.GROUP_ALIASES)
    assert "architecture 2,4,2, group rot:3" in text and "smallest equivariant width: 6" in text
    assert "counterexamples:" in report(out)


def test_probe_flags_hidden_symmetries():
    from symeq.relu.probe import functional_dimension

    r = functional_dimension(identity_example())
    assert r["hidden_symmetry"] and r["params"] == 22 and r["bound"] == 22 - 4
    d6 = decide_fibre(identity_example(), resolve_group("rot3")).realisation
    r6 = functional_dimension(d6)
    assert r6["rank"] <= r6["bound"]
