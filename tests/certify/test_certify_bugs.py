"""symeq certify: the bugs of issue 28, each through the command line (exit 2 with a message, or the right answer).

Empty data, unwritable output paths (checked before the work), float and NaN labels, NaN inputs,
labels with an autoencoder-shaped network (refused without --task), --timeout that runs out (no
"distance to the nearest ... found" for an unverified candidate, and the budget named as given),
one metric for theta-bar and --max-distance, no duplicate candidates with one hidden layer, theta-bar's
rho_i in --json, and --max-width.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from symeq.cli import main
from symeq.groups import mirror
from symeq.numeric.generate import random_equivariant_numeric, scramble_numeric
from symeq.numeric.models import numeric_activation, save_npz


def far_mlp(tmp_path, widths=(16, 16), noise=0.3, seed=0):
    """A scrambled layerwise-equivariant tanh MLP on 4x4 images with large relative noise, as .npz."""
    G = mirror(4, 4)
    net = random_equivariant_numeric(G, list(widths), numeric_activation("tanh"), rng=seed)
    net, _ = scramble_numeric(net, rng=seed + 1)
    th = net.parameters()
    net = net.with_parameters(th * (1.0 + noise * np.random.default_rng(seed + 2).standard_normal(th.shape)))
    path = tmp_path / "net.npz"
    save_npz(net, path)
    return net, path


def _err(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


def _certify(path, *extra):
    return main(["certify", str(path), "--group", "mirror:4x4", *map(str, extra)])


@pytest.mark.parametrize("arrays, needle", [
    ({"x": np.zeros((0, 16))}, "no inputs"),
    ({"x": np.full((5, 16), np.nan)}, "NaN or infinite"),
    ({"x": np.ones((5, 16)), "y": np.array([0.5, 1.2, 0.0, 1.0, 0.0])}, "whole numbers"),
    ({"x": np.ones((5, 16)), "y": np.array([0.0, np.nan, 0.0, 1.0, 0.0])}, "NaN"),
    ({"x": np.ones((5, 16)), "y": np.array(["a", "b", "c", "d", "e"])}, "not numbers"),
    ({"x": np.ones((5, 16)) * (1 + 1j)}, "not real numbers"),
    ({"x": np.array(5.0)}, "no inputs"),
    ({"x": np.ones((5, 16)), "y": np.array([0, 1, 0, 1, 0])}, "--task"),  # labels, output = input size
])
def test_bad_data_exit_2_with_a_message(tmp_path, capsys, arrays, needle):
    _, net = far_mlp(tmp_path)
    np.savez(tmp_path / "d.npz", **arrays)
    assert _certify(net, "--data", tmp_path / "d.npz") == 2
    err = _err(capsys)
    assert err.startswith("error: ") and needle in err, err
    assert "internal error" not in err


def test_whole_number_float_labels_are_read_with_task_classifier(tmp_path, capsys):
    _, net = far_mlp(tmp_path)
    x = np.random.default_rng(0).standard_normal((40, 16))
    np.savez(tmp_path / "d.npz", x=x, y=(np.arange(40) % 16).astype(np.float64))
    assert _certify(net, "--data", tmp_path / "d.npz", "--task", "classifier", "--json", "--restarts", 0) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["distances"]["task_loss"]["task"] == "classifier"
    assert r["distances"]["task_loss"]["task_source"] == "--task classifier"


def test_labels_with_task_autoencoder_are_not_used(tmp_path, capsys):
    _, net = far_mlp(tmp_path)
    x = np.random.default_rng(0).standard_normal((40, 16))
    np.savez(tmp_path / "d.npz", x=x, y=np.arange(40) % 16)
    assert _certify(net, "--data", tmp_path / "d.npz", "--task", "autoencoder", "--json", "--restarts", 0) == 0
    tl = json.loads(capsys.readouterr().out)["distances"]["task_loss"]
    assert tl["task"] == "autoencoder" and tl["kind"].startswith("reconstruction")
    assert "labels y are not used" in tl["task_source"]
    assert "accuracy_theta" not in tl


@pytest.mark.parametrize("option", ["--out", "--certificate"])
def test_unwritable_output_paths_exit_2_before_the_work(tmp_path, capsys, option):
    _, net = far_mlp(tmp_path)
    other = "--certificate" if option == "--out" else "--out"
    good = tmp_path / "good.json"
    assert _certify(net, option, "/nonexistent/dir/m.json", other, good) == 2
    err = _err(capsys)
    assert option in err and "does not exist" in err and "nothing was computed" in err
    assert not good.exists()  # nothing half-written
    assert _certify(net, option, tmp_path) == 2  # a folder
    assert "is a folder" in _err(capsys)
    import os
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # not a regular file (like /dev/full): the rename into place would replace it
    assert _certify(net, option, fifo) == 2
    assert "not a regular file" in _err(capsys) and fifo.exists() and not fifo.is_file()
    assert _certify(net, "--out", good, "--certificate", good) == 2
    assert "same file" in _err(capsys)


def test_timeout_that_runs_out_says_unverified_and_names_the_budget(tmp_path, capsys, monkeypatch):
    """A budget that runs out mid-way exits 3 and says so. The clock is made to advance 1 s per reading, so
    the budget runs out whatever the machine's speed (on a fast machine the whole run fits in 0.01 s)."""
    import itertools

    import symeq.budget

    _, net = far_mlp(tmp_path)
    ticks = itertools.count()
    monkeypatch.setattr(symeq.budget.time, "monotonic", lambda: float(next(ticks)))
    out = tmp_path / "bar.json"
    assert _certify(net, "--timeout", "0.01", "--out", out) == 3
    text = capsys.readouterr().out
    assert "distance to the nearest layerwise-equivariant network found" not in text
    assert "NOT verified" in text.splitlines()[0]
    last = text.strip().splitlines()[-1]
    assert last.startswith("undetermined:") and "0.01 s" in last and "budget of 0 s" not in text
    assert not out.exists()


def test_one_metric_chooses_theta_bar_and_judges_max_distance(tmp_path, capsys):
    """theta-bar is the candidate of least distance in the metric the report names, and --max-distance judges
    that same number: just above it exits 0, just below exits 1 (never a candidate below a refused theta-bar)."""
    _, net = far_mlp(tmp_path)
    assert _certify(net, "--json", "--restarts", 2) == 0
    r = json.loads(capsys.readouterr().out)
    d = r["distances"]
    assert d["metric"] == "parameters" and "whole-network" in d["metric_description"]
    cands = r["actions"]["candidates"]
    assert cands and all(c["distance"] >= d["distance"] * (1 - 1e-3) for c in cands)
    least = min(c["distance"] for c in cands)
    assert d["distance"] == pytest.approx(least, rel=1e-3)  # the written theta-bar is rounded to its grid
    assert _certify(net, "--json", "--restarts", 2, "--max-distance", d["distance"] * 1.01) == 0
    capsys.readouterr()
    assert _certify(net, "--restarts", 2, "--max-distance", d["distance"] * 0.99) == 1
    text = capsys.readouterr().out
    assert "parameters distance" in text and "above --max-distance" in text
    assert "metric (chooses theta-bar, judges --max-distance)" in text


def test_one_hidden_layer_lists_each_candidate_once_and_json_has_the_actions(tmp_path, capsys):
    _, net = far_mlp(tmp_path, widths=(12,), noise=0.2)
    assert _certify(net, "--json") == 0
    r = json.loads(capsys.readouterr().out)
    cands = r["actions"]["candidates"]
    keys = [json.dumps(c["parameters_per_layer"]) for c in cands]
    assert len(set(keys)) == len(keys), cands  # no candidate twice
    assert r["actions"]["proven_nearest"] and r["actions"]["search"]["optimal"]
    acts = r["actions"]["theta_bar"]
    assert [a["layer"] for a in acts] == [1] and acts[0]["generator"] == "mirror"
    src, signs = acts[0]["source"], acts[0]["signs"]
    assert sorted(src) == list(range(1, 13)) and set(signs) <= {-1, 1}  # a signed permutation, from 1
    assert all(src[src[j] - 1] == j + 1 for j in range(12))  # an involution
    assert _certify(net) == 0
    text = capsys.readouterr().out
    assert text.count("  candidate ") == len(cands)


def test_max_width_is_an_option_of_certify(tmp_path, capsys):
    _, net = far_mlp(tmp_path)
    assert _certify(net, "--max-width", 8) == 2
    err = _err(capsys)
    assert "--max-width" in err
    assert _certify(net, "--max-width", 16, "--restarts", 0) == 0


def test_bad_options_exit_2(tmp_path, capsys):
    _, net = far_mlp(tmp_path)
    assert _certify(net, "--metric", "data") == 2
    assert "--data" in _err(capsys)
    assert _certify(net, "--finetune-steps", 3) == 2
    assert "go with --finetune" in _err(capsys)
    assert _certify(net, "--finetune") == 2
    import importlib.util

    # without torch the missing extra is named first; with it, the missing --data
    assert ("--data" if importlib.util.find_spec("torch") else "pip install 'symeq[numeric]'") in _err(capsys)
    assert _certify(net, "--restarts", -1) == 2
    assert "--restarts" in _err(capsys)
