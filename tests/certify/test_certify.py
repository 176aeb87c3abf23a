"""symeq certify: float network -> nearest layerwise-equivariant theta-bar -> exact certificate.

The acceptance cases of issue 22: a tanh (and GELU) MLP layerwise equivariant under the mirror
of 4x4 images, perturbed by relative noise 1e-3, saved as .npz (and as .onnx exported by torch in
tests/numeric/test_onnx.py), certifies with exit 0, a certificate that `symeq check` accepts, and a
parameter distance within 3x the noise; a network far from equivariant still gets a certified
theta-bar; the matching is the nearest involution (brute force on a small case).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from symeq.cli import main
from symeq.errors import InputError
from symeq.groups import mirror
from symeq.numeric.generate import random_equivariant_numeric, scramble_numeric
from symeq.numeric.models import numeric_activation, save_npz
from symeq.numeric.monomial import MonomialAction


def noisy_mlp(act, noise=1e-3, widths=(16, 16), seed=0):
    """A scrambled layerwise-equivariant MLP on 4x4 images with relative noise on every parameter."""
    G = mirror(4, 4)
    net = random_equivariant_numeric(G, list(widths), numeric_activation(act), rng=seed)
    net, _ = scramble_numeric(net, rng=seed + 1)
    th = net.parameters()
    rng = np.random.default_rng(seed + 2)
    return G, net, net.with_parameters(th * (1.0 + noise * rng.standard_normal(th.shape)))


@pytest.mark.parametrize("act", ["tanh", "gelu", {"type": "tanh_series", "order": 3}])
def test_noisy_mlp_npz_certifies_within_three_times_the_noise(tmp_path, capsys, act):
    G, clean, noisy = noisy_mlp(act)
    net = tmp_path / "net.npz"
    save_npz(noisy, net)
    out, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    code = main(["certify", str(net), "--group", "mirror:4x4", "--out", str(out), "--certificate", str(cert),
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["status"] == "certified" and report["verdict"] == "layerwise-equivariant"
    d = report["distances"]
    assert len(d["parameters_per_layer"]) == 3
    assert d["parameters_max"] <= 3e-3          # within 3x the relative noise 1e-3
    assert d["parameters_max"] > 1e-5           # and not zero: theta-bar is not theta
    assert d["function"]["noise"]["median"] < 1e-2
    assert main(["check", str(cert), str(out)]) == 0
    assert "accepted" in capsys.readouterr().out.lower()


def test_certificate_is_for_the_written_model_only(tmp_path, capsys):
    G, clean, noisy = noisy_mlp("tanh")
    net = tmp_path / "net.npz"
    save_npz(noisy, net)
    out, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    assert main(["certify", str(net), "--group", "mirror:4x4", "--out", str(out), "--certificate", str(cert)]) == 0
    text = capsys.readouterr().out
    assert text.index("relative parameter distance") < text.index("certified")  # distances first
    assert "rho_1(mirror): (" in text and "rho_2(mirror): (" in text  # theta-bar's proven actions, as cycles
    data = json.loads(out.read_text())
    data["layers"][0]["weight"][0][0] = "12345/7"  # tamper with theta-bar
    out.write_text(json.dumps(data))
    assert main(["check", str(cert), str(out)]) != 0


def test_max_distance_exit_1_and_text(tmp_path, capsys):
    G, clean, noisy = noisy_mlp("tanh")
    net = tmp_path / "net.npz"
    save_npz(noisy, net)
    code = main(["certify", str(net), "--group", "mirror:4x4", "--max-distance", "1e-6"])
    text = capsys.readouterr().out
    assert code == 1 and "above --max-distance" in text


def test_far_network_still_certified_with_distances(tmp_path, capsys):
    """Noise of the size of the weights: the float twin's actions are not a homomorphism (or miss the
    tolerance by far), and the matching still gives a certified theta-bar with its distances."""
    G, clean, noisy = noisy_mlp("tanh", noise=1.0, widths=(8,), seed=3)
    from symeq.certification import certify

    c = certify(noisy, G)
    assert c.status == "certified"
    assert c.verification.verdict == "layerwise-equivariant"
    assert 0.05 < c.max_distance < 1.0
    assert "matching" in c.method and c.proven_nearest  # one hidden layer: the nearest homomorphism
    # theta-bar is exactly equivariant as a float network too, up to rounding
    assert c.float_model.equivariance_error(rng=0) < 1e-9


def test_deeper_far_network_labelled_not_proven(tmp_path):
    G, clean, noisy = noisy_mlp("tanh", noise=1.0, widths=(8, 8), seed=4)
    from symeq.certification import certify

    c = certify(noisy, G)
    assert c.status == "certified"
    assert not c.proven_nearest and "not proven nearest" in c.report()


def _brute_force_involution(model, layer_act_signs):
    """min over all involutions rho_1(g) in K_1 of ||theta - theta-bar||^2 (one hidden layer)."""
    from symeq.numeric.project import element_actions, reynolds_float

    n = model.widths[1]
    best = np.inf
    for perm in itertools.permutations(range(n)):
        if any(perm[perm[j]] != j for j in range(n)):
            continue
        for s in itertools.product([1, -1] if layer_act_signs else [1], repeat=n):
            if any(s[j] != s[perm[j]] for j in range(n)):
                continue
            a = MonomialAction(np.array(perm), np.array(s, dtype=float))
            proj = reynolds_float(model, element_actions(model.group, [[a]]))
            best = min(best, sum(np.sum((l.weight - W) ** 2) + np.sum((l.bias - b) ** 2)
                                 for l, (W, b) in zip(model.layers, proj)))
    return best


@pytest.mark.parametrize("act,signs", [("tanh", True), ("gelu", False)])
def test_matching_is_the_nearest_involution_by_brute_force(act, signs):
    from symeq.numeric.project import element_actions, nearest_involution_actions, reynolds_float

    G = mirror(2, 2)
    m = random_equivariant_numeric(G, [6], numeric_activation(act), rng=0)
    for seed in (1, 2):
        noisy = m.perturbed(0.7, rng=seed)
        a = nearest_involution_actions(noisy, noisy.group)
        assert a.proven_nearest
        proj = reynolds_float(noisy, element_actions(noisy.group, a.actions))
        found = sum(np.sum((l.weight - W) ** 2) + np.sum((l.bias - b) ** 2) for l, (W, b) in zip(noisy.layers, proj))
        assert found == pytest.approx(_brute_force_involution(noisy, signs), rel=1e-12, abs=1e-12)


def test_exactly_equivariant_float_network_projects_to_itself():
    from symeq.certification import certify

    G, clean, _ = noisy_mlp("tanh")
    c = certify(clean, G)
    assert c.status == "certified"
    assert c.max_distance < 1e-11


def test_data_distances_and_task_loss(tmp_path, capsys):
    G, clean, noisy = noisy_mlp("tanh")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 16))
    np.savez(tmp_path / "data.npz", x=x)  # no labels, output = input dimension: autoencoder loss
    save_npz(noisy, tmp_path / "net.npz")
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--data", str(tmp_path / "data.npz"),
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["distances"]["function"]["data"]["points"] == 50
    assert "reconstruction" in r["distances"]["task_loss"]["kind"]
    np.savez(tmp_path / "bad.npz", x=x, Y=np.zeros(50))
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--data", str(tmp_path / "bad.npz")]) == 2
    assert 'unknown array "Y"' in capsys.readouterr().err


def _invariant_net(act, outputs):
    """A noisy one-hidden-layer net on 4x4 images whose outputs are mirror-invariant, and 40 inputs."""
    from symeq.groups import builtin_group

    G = builtin_group("mirror:4x4", output=outputs)
    net = random_equivariant_numeric(G, [8], numeric_activation(act), rng=0).perturbed(1e-3, rng=1)
    return G, net, np.random.default_rng(0).standard_normal((40, 16))


def test_classifier_labels_give_cross_entropy():
    from symeq.certification import certify

    G, net, x = _invariant_net("tanh", 3)
    y = np.arange(40) % 3
    c = certify(net, G, data=(x, y))
    assert c.status == "certified"
    assert c.task_loss["kind"].startswith("cross-entropy") and 0 <= c.task_loss["accuracy_theta_bar"] <= 1


def test_labels_that_do_not_fit_the_outputs_are_refused_before_the_work(tmp_path, capsys):
    """Labels 0..19 for 16 outputs were once skipped without a word: now exit 2, naming the range."""
    G, clean, noisy = noisy_mlp("tanh")
    save_npz(noisy, tmp_path / "net.npz")
    x = np.random.default_rng(0).standard_normal((30, 16))
    np.savez(tmp_path / "d.npz", x=x, y=np.arange(30) % 20)
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--data", str(tmp_path / "d.npz"),
                 "--task", "classifier"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("error: ") and "labels run from 0 to 19" in err and "16 outputs" in err, err
    from symeq.certification import certify

    with pytest.raises(InputError, match="labels run from -1"):
        certify(noisy, G, data=(x, np.arange(30) % 3 - 1), task="classifier")


def test_one_output_with_labels_0_1_gives_binary_cross_entropy():
    from symeq.certification import certify

    G, net, x = _invariant_net("gelu", 1)
    y = (net(x)[:, 0] > 0).astype(int)  # the labels theta predicts
    c = certify(net, G, data=(x, y))
    assert c.status == "certified"
    tl = c.task_loss
    assert tl["kind"].startswith("binary cross-entropy") and tl["accuracy_theta"] == 1.0
    z = net(x)[:, 0]
    assert abs(tl["theta"] - float(np.mean(np.logaddexp(0, z) - y * z))) < 1e-12
    with pytest.raises(InputError, match="labels 0 and 1"):
        certify(net, G, data=(x, y + 1))


def test_budget_is_the_commands_default_and_its_line_comes_after_the_input(tmp_path, capsys):
    """certify's budget is its entry in symeq.budget.DEFAULT_BUDGETS, like every command's; the budget
    line comes once the network, the group file and the data are read (bad input: one error line)."""
    from symeq.budget import DEFAULT_BUDGETS

    G, clean, noisy = noisy_mlp("tanh")
    save_npz(noisy, tmp_path / "net.npz")
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4",
                 "--data", str(tmp_path / "missing.npz")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "missing.npz" in err[0], err
    assert main(["certify", str(tmp_path / "net.npz"), "--group-file", str(tmp_path / "missing.json")]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4"]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first == f"symeq certify: budget {DEFAULT_BUDGETS['certify']:g} s (default; --timeout to change)"
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--timeout", "77"]) == 0
    assert capsys.readouterr().err.splitlines()[0] == "symeq certify: budget 77 s (--timeout)"


def test_group_file_and_bad_input(tmp_path, capsys):
    from symeq.groups import builtin_group

    G, clean, noisy = noisy_mlp("tanh")
    save_npz(noisy.with_group(None), tmp_path / "net.npz")  # no group in the file
    (tmp_path / "g.json").write_text(json.dumps(builtin_group("mirror:4x4").to_json()))
    assert main(["certify", str(tmp_path / "net.npz"), "--group-file", str(tmp_path / "g.json")]) == 0
    capsys.readouterr()
    assert main(["certify", str(tmp_path / "net.npz")]) == 2          # no group anywhere
    assert "no group" in capsys.readouterr().err
    assert main(["certify", str(tmp_path / "missing.npz"), "--group", "mirror:4x4"]) == 2
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--digits", "0"]) == 2


def test_timeout_zero_is_undetermined(tmp_path, capsys):
    G, clean, noisy = noisy_mlp("tanh")
    save_npz(noisy, tmp_path / "net.npz")
    out = tmp_path / "bar.json"
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--timeout", "0",
                 "--out", str(out)]) == 3
    assert "undetermined" in capsys.readouterr().out
    assert not out.exists()


def test_public_api_exports():
    import symeq

    assert callable(symeq.certify) and callable(symeq.from_torch)


@pytest.mark.parametrize("act", ["relu", "sigmoid"])
def test_subgroup_of_k_for_relu_and_sigmoid_is_said(act):
    """ReLU (positive scalings) and sigmoid (affine flips): permutations only, and the report says so."""
    from symeq.certification import certify

    G = mirror(4, 4)
    net = random_equivariant_numeric(G, [8], numeric_activation(act), rng=0).perturbed(1e-4, rng=1)
    c = certify(net, G)
    assert c.status == "certified"
    assert c.max_distance < 1e-2
    assert any("subgroup of K_i" in n for n in c.notes)


def test_mirror_experiment_saves_networks_and_certifies_them(tmp_path, monkeypatch, capsys):
    """symeq experiment mirror (tiny: 2 epochs, narrow): the networks are saved (.npz, .onnx), each gets
    a certified nearest layerwise-equivariant network whose certificate `symeq check` accepts, and a
    missing matplotlib is said before training, with the table and results still written."""
    pytest.importorskip("torch", reason="the experiment needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("sklearn", reason="the digits need scikit-learn: pip install 'symeq[numeric]'")
    import sys

    from symeq.certification import certify_mirror_run
    from symeq.numeric.experiment import run_mirror_experiment

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    res = run_mirror_experiment(("tanh", "gelu"), "autoencoder", epochs=2, out=tmp_path, progress=False,
                                certifier=lambda m, d, t: certify_mirror_run(m, d, t, finetune=False),  # fine-tuning:
                                widths=(8, 8, 8), n_fit=300, n_test=100)  # tests/certify/test_finetune.py
    assert "figures skipped" in capsys.readouterr().err and "figures_skipped" in res
    from symeq.numeric.experiment import written_summary

    said = written_summary(res, tmp_path)  # what `symeq experiment --out` prints: no "figures written"
    assert "figures skipped" in said and "figure(s)" not in said and "table.md" in said
    assert (tmp_path / "table.md").is_file() and (tmp_path / "results.json").is_file()
    assert "Certified nearest layerwise-equivariant network" in res["table"]
    for act in ("tanh", "gelu"):
        stem = tmp_path / f"net_{act}_autoencoder"
        assert (tmp_path / f"{stem.name}.npz").is_file()
        try:
            import onnx  # noqa: F401
        except ImportError:
            pass
        else:
            assert (tmp_path / f"{stem.name}.onnx").is_file()
        run = next(r for r in res["runs"] if r["activation"] == act)
        assert run["certified"]["status"] == "certified", run["certified"]
        assert 0 < run["certified"]["parameter_distance_max"] < 2
        assert run["certified"]["task_loss"]["kind"].startswith("reconstruction")
        assert main(["check", f"{stem}_certificate.json", f"{stem}_certified.json"]) == 0
    json.loads((tmp_path / "results.json").read_text())  # plain JSON


def test_mirror_experiment_without_onnx_says_so_before_training(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch", reason="the experiment needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("sklearn", reason="the digits need scikit-learn: pip install 'symeq[numeric]'")
    import sys

    from symeq.numeric import experiment

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx -> ImportError
    said_before = []
    real_run = experiment.run_mirror
    monkeypatch.setattr(experiment, "run_mirror", lambda *a, **k: (said_before.append(capsys.readouterr().err),
                                                                   real_run(*a, **k))[1])
    res = experiment.run_mirror_experiment(("tanh",), "autoencoder", epochs=1, out=tmp_path, progress=False,
                                           widths=(8, 8, 8), n_fit=200, n_test=50)
    assert "onnx is not installed" in said_before[0] and "pip install 'symeq[onnx]'" in said_before[0]
    assert "onnx_skipped" in res and not list(tmp_path.glob("*.onnx")) and (tmp_path / "net_tanh_autoencoder.npz").is_file()
    said = experiment.written_summary(res, tmp_path)
    assert "1 network file(s)" in said and "onnx is not installed" in said and "figures skipped" in said


def test_larger_group_best_found_not_proven():
    """The Klein four-group of both mirrors: a bounded search, labelled as such, still certified."""
    from symeq.certification import certify
    from symeq.groups import FiniteGroup, vertical_mirror

    h, v = mirror(4, 4).generators[0], vertical_mirror(4, 4).generators[0]
    G = FiniteGroup([h, v], ["h", "v"], "both mirrors of 4x4 images")
    net = random_equivariant_numeric(G, [8], numeric_activation("tanh"), rng=0)
    c = certify(net.perturbed(1e-3, rng=1), G)
    assert c.status == "certified" and not c.proven_nearest
    assert c.max_distance < 0.05
    assert any("not proven nearest" in n for n in c.notes)
    far = certify(net.perturbed(1.0, rng=2), G)
    assert far.status == "certified" and {x["method"].split(" (")[0] for x in far.candidates} >= {"the trivial action"}


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_bench_certify_quick(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_certify.py"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=300, cwd=script.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "certify-quick.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["certified", "certified"]


@pytest.mark.slow
def test_trained_autoencoder_greedy_not_a_homomorphism_still_certified():
    """Issue 22 acceptance on a trained network (the paper's recipe on digits, a few minutes): the
    float twin's greedy actions are no homomorphism, and certify still returns a certified theta-bar
    with its distances and task loss."""
    pytest.importorskip("torch", reason="the experiment needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("sklearn", reason="the digits need scikit-learn: pip install 'symeq[numeric]'")
    from symeq.certification import certify_mirror_run
    from symeq.numeric.experiment import run_mirror

    run = run_mirror("tanh", "autoencoder", progress=False, certifier=certify_mirror_run)
    c = run.certified
    assert c["status"] == "certified" and c["verdict"] == "layerwise-equivariant"
    assert any("not a homomorphism" in n for n in c["notes"]), c["notes"]
    assert len(c["parameter_distance_per_layer"]) == 4 and c["task_loss"]["theta_bar"] >= 0


def test_cyclic_group_repairs_the_twin_cycles():
    """C4 on 4x4 images, a far network: the twin's actions break g^4 = e; fixing the offending cycles gives
    a homomorphism (checked exactly), never farther than the trivial action."""
    from symeq.certification import certify
    from symeq.groups import builtin_group
    from symeq.numeric.models import group_from_exact
    from symeq.numeric.project import is_homomorphism, repair_cyclic

    G = builtin_group("rot90:4")
    bad = [[MonomialAction(np.array([1, 2, 0, 3, 5, 4]), np.array([1.0, 1.0, 1.0, -1.0, 1.0, 1.0]))]]
    fixed, n = repair_cyclic(bad, 4)
    assert n == 3 and fixed[0][0].cols.tolist() == [0, 1, 2, 3, 5, 4]  # the 3-cycle fixed
    assert fixed[0][0].vals.tolist() == [1.0, 1.0, 1.0, -1.0, 1.0, 1.0]  # (-1)^4 = 1: that sign may stay
    odd, n2 = repair_cyclic([[MonomialAction(np.array([1, 0]), np.array([-1.0, 1.0]))]], 2)
    assert n2 == 2 and odd[0][0].cols.tolist() == [0, 1]  # the 2-cycle with sign product -1 squares to -1
    net = random_equivariant_numeric(G, [8], numeric_activation("tanh"), rng=0).perturbed(0.3, rng=1)
    c = certify(net, G)
    assert c.status == "certified"
    trivial = next(x for x in c.candidates if x["method"].startswith("the trivial"))
    assert c.distance <= trivial["distance"] + 1e-12
    for x in c.candidates:
        assert x["distance"] >= min(y["distance"] for y in c.candidates)
    ng = group_from_exact(G)
    twin_like = [[MonomialAction(np.array([1, 2, 0, 3, 4, 5, 6, 7]), np.ones(8))]]  # a 3-cycle: breaks g^4 = e
    assert not is_homomorphism(ng, twin_like)[0]
    assert is_homomorphism(ng, repair_cyclic(twin_like, 4)[0])[0]


@pytest.mark.parametrize("signs", [True, False])
def test_involution_solvers_against_brute_force(signs):
    """Both exact solvers (the assignment relaxation when it returns an involution, the matching always)
    reach the brute-force optimum of sum_fixed |d_j| + sum_pairs |S_jk| over involutions."""
    from symeq.numeric.project import _best_involution, _matching_involution

    rng = np.random.default_rng(7 if signs else 8)
    n = 7
    for _ in range(5):
        A = rng.standard_normal((n, n))
        S, d = A + A.T, rng.standard_normal(n)
        fix, pair = (np.abs(d), np.abs(S)) if signs else (d, S)

        def value(cols):
            return sum(fix[j] if cols[j] == j else pair[j, cols[j]] / 2 for j in range(n))

        best = -np.inf
        for perm in itertools.permutations(range(n)):
            if all(perm[perm[j]] == j for j in range(n)):
                best = max(best, value(perm))
        cols, vals, exact = _best_involution(S, d, signs)
        assert exact and value(cols) == pytest.approx(best, abs=1e-12)
        m, ok = _matching_involution(fix, pair.copy())
        assert ok and value(m) == pytest.approx(best, abs=1e-12)


def test_bounded_matching_is_an_involution_and_says_not_exact(monkeypatch):
    import symeq.numeric.project as project

    monkeypatch.setattr(project, "MAX_FULL_MATCHING", 3)
    rng = np.random.default_rng(3)
    n = 12
    A = rng.standard_normal((n, n))
    S = np.abs(A + A.T)
    fix = np.abs(rng.standard_normal(n)) * 0.1
    pi = project._assignment(fix, S)
    cols, exact = project._matching_involution(fix, S, pi)
    assert not exact
    assert np.array_equal(cols[cols], np.arange(n))


def test_group_file_with_an_output_that_changes_sign(tmp_path, capsys):
    """--group-file covers actions no built-in spelling does: the mirror on the input, -1 on the output."""
    from symeq.groups import FiniteGroup
    from symeq.numbers import matrix

    P = mirror(4, 4).generators[0][0]
    G = FiniteGroup([(P, matrix([[-1]]))], ["odd mirror"], "mirror in, sign out")
    net = random_equivariant_numeric(G, [8], numeric_activation("tanh"), rng=0).perturbed(1e-3, rng=1)
    save_npz(net.with_group(None), tmp_path / "net.npz")
    (tmp_path / "g.json").write_text(json.dumps(G.to_json()))
    out, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    assert main(["certify", str(tmp_path / "net.npz"), "--group-file", str(tmp_path / "g.json"), "--out", str(out),
                 "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(out)]) == 0
    (tmp_path / "bad.json").write_text(json.dumps({"label": "x", "generatorz": []}))
    assert main(["certify", str(tmp_path / "net.npz"), "--group-file", str(tmp_path / "bad.json")]) == 2
    assert "generatorz" in capsys.readouterr().err


def test_fold_conv_recovers_a_kernel_and_refuses_a_non_convolution():
    from symeq.layers.conv import ConvShape, conv_bias, dense_rows
    from symeq.numeric.project import fold_conv

    shape = ConvShape(2, 3, 4, 4, 3, 3, stride=1, padding=1)
    K = np.random.default_rng(0).integers(-5, 6, (3, 2, 3, 3))
    W = np.array(dense_rows(shape, K.tolist(), 0), dtype=np.int64)
    b = np.array(conv_bias(shape, [1, -2, 3]), dtype=np.int64)
    k2, cb = fold_conv(W, b, shape)
    assert np.array_equal(np.array(k2), K) and cb == [1, -2, 3]
    W2 = W.copy()
    W2[5, 0] += 1  # one shared weight differs at one position (or a zero off the taps is not zero)
    assert fold_conv(W2, b, shape) is None
    b2 = b.copy()
    b2[0] += 1
    assert fold_conv(W, b2, shape) is None
