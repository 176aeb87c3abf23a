"""symeq certify with data (issue 28): distances weighted by the data reaching each layer, the symmetrised
second moment that makes the Reynolds average the orthogonal projection, inputs the data never use, noise
inputs at the data's scale, the paper's metric beside the K-restricted one with the units that explain the
gap, --metric data, and the search at depth with its lower bound (checked against a brute force).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from symeq.certification import _noise_inputs, certify
from symeq.cli import main
from symeq.groups import mirror
from symeq.numeric.generate import random_equivariant_numeric, scramble_numeric
from symeq.numeric.models import NumericDenseLayer, NumericModel, group_from_exact, numeric_activation, save_npz
from symeq.numeric.monomial import MonomialAction
from symeq.numeric.project import (element_actions, involution_lower_bound, layer_diagnostics, layer_inputs,
                                   nearest_involution_actions, reynolds_float, second_moments, symmetrised_moment,
                                   unused_inputs, weighted_distances)


def far_net(widths=(8, 8), noise=0.3, seed=0, side=4):
    G = mirror(side, side)
    net = random_equivariant_numeric(G, list(widths), numeric_activation("tanh"), rng=seed)
    net, _ = scramble_numeric(net, rng=seed + 1)
    th = net.parameters()
    return G, net.with_parameters(th * (1.0 + noise * np.random.default_rng(seed + 2).standard_normal(th.shape)))


def test_weighted_distance_is_the_relative_change_of_the_pre_activation_on_the_data():
    G, net = far_net()
    x = np.random.default_rng(3).standard_normal((200, 16)) * np.linspace(0.1, 2.0, 16)
    acts = nearest_involution_actions(net, net.group).actions
    proj = reynolds_float(net, element_actions(net.group, acts))
    per, whole = weighted_distances(net, proj, second_moments(net, x))
    nums = dens = 0.0
    for l, (W, b), Y in zip(net.layers, proj, layer_inputs(net, x)):
        num = np.mean(np.sum((Y @ (l.weight - W).T + (l.bias - b)) ** 2, axis=1))
        den = np.mean(np.sum((Y @ l.weight.T + l.bias) ** 2, axis=1))
        nums, dens = nums + num, dens + den
        assert per.pop(0) == pytest.approx(np.sqrt(num / den), rel=1e-9)
    assert whole == pytest.approx(np.sqrt(nums / dens), rel=1e-9)


def test_reynolds_is_the_nearest_point_in_the_symmetrised_data_metric():
    """With Sigma-bar = mean_g rho(g) Sigma rho(g)^T the Reynolds average is the orthogonal projection in
    <A, B> = tr(A Sigma-bar B^T): no other layerwise-equivariant point (same actions) is nearer, and
    Pythagoras holds.  With the raw Sigma of skewed data a nearer point exists (the reason for symmetrising)."""
    G, net = far_net()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((300, 16)) * np.linspace(0.05, 3.0, 16) + np.linspace(-1, 2, 16)  # not mirror-symmetric
    chains = element_actions(net.group, nearest_involution_actions(net, net.group).actions)
    proj = reynolds_float(net, chains)
    moments = second_moments(net, x)
    sym = [symmetrised_moment(S, chains, li) for li, S in enumerate(moments)]
    for S, chain_li in zip(sym, range(len(sym))):
        for chain in chains:  # every rho~(g) keeps Sigma-bar
            r = MonomialAction(np.append(chain[chain_li].cols, S.shape[0] - 1), np.append(chain[chain_li].vals, 1.0))
            assert np.allclose(r.left(r.left(S).T).T, S, atol=1e-10)

    def sq(a, b, M):
        return sum(float(np.sum((np.hstack([W1 - W2, (b1 - b2)[:, None]]) @ S) * np.hstack([W1 - W2, (b1 - b2)[:, None]])))
                   for (W1, b1), (W2, b2), S in zip(a, b, M))

    theta = [(l.weight, l.bias) for l in net.layers]
    best = sq(theta, proj, sym)
    for k in range(5):  # other points of the same subspace: Reynolds averages of random parameters
        other = reynolds_float(net.with_parameters(rng.standard_normal(net.n_params)), chains)
        mixed = [(Wp + 0.3 * Wo, bp + 0.3 * bo) for (Wp, bp), (Wo, bo) in zip(proj, other)]
        d = sq(theta, mixed, sym)
        assert d >= best
        assert d == pytest.approx(best + sq(proj, mixed, sym), rel=1e-8)  # Pythagoras


def test_unused_inputs_are_named_from_1(tmp_path, capsys):
    G, net = far_net()
    save_npz(net, tmp_path / "net.npz")
    x = np.random.default_rng(5).standard_normal((50, 16))
    x[:, [0, 7]] = 0.0   # never used
    x[:, 12] = 0.25      # constant
    np.savez(tmp_path / "d.npz", x=x)
    assert unused_inputs(x) == {"zero": [1, 8], "constant": [13]}
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--data", str(tmp_path / "d.npz"),
                 "--restarts", "0"]) == 0
    text = capsys.readouterr().out
    assert "inputs the data never use (zero on every data point; numbered from 1): 1, 8" in text
    assert "never vary" in text and ": 13" in text
    assert "weighted by the data reaching it" in text


def test_noise_inputs_follow_the_data():
    G, net = far_net()
    x = 5.0 + 0.01 * np.random.default_rng(6).standard_normal((400, 16))
    X, how = _noise_inputs(net, x, 3000, 0)
    assert "data's per-feature mean" in how
    assert np.allclose(X.mean(axis=0), 5.0, atol=0.01) and np.allclose(X.std(axis=0), 0.01, rtol=0.1)
    X0, how0 = _noise_inputs(net, None, 3000, 0)
    assert "N(0, 1)" in how0 and abs(float(X0.std()) - 1.0) < 0.05


def test_paper_metric_beside_k_and_the_units_that_explain_the_gap():
    """A hand-made layer: units 1-2 near-linear (tiny weights), unit 3 dead (zero weights), units 4 and 5
    clones (the same row), unit 6 saturated; each is named in the diagnostics."""
    rng = np.random.default_rng(7)
    W1 = rng.standard_normal((6, 4)) * 2.0
    W1[0:2] *= 1e-3
    W1[2] = 0.0
    W1[4] = W1[3]
    b1 = np.zeros(6)
    b1[2] = 0.3
    tanh = numeric_activation("tanh")
    net = NumericModel(4, [NumericDenseLayer(W1, b1, tanh), NumericDenseLayer(rng.standard_normal((4, 6)), np.zeros(4), None)])
    G = group_from_exact(mirror(2, 2))
    x = rng.standard_normal((300, 4))
    acts = [[MonomialAction.identity(6)]]
    (d,) = layer_diagnostics(net, x, G, acts)
    assert d["layer"] == 1 and d["width"] == 6
    assert {1, 2} <= set(d["near_linear"]) and 3 in d["near_dead"] and (4, 5) in d["near_clones"]
    assert 6 not in d["near_linear"]
    assert d["paper_metric"] < d["k_metric"]  # the least-squares A mixes what the identity cannot


def test_metric_data_chooses_and_judges_by_the_data(tmp_path, capsys):
    G, net = far_net()
    save_npz(net, tmp_path / "net.npz")
    x = np.random.default_rng(8).standard_normal((100, 16))
    x[:, :4] = 0.0
    np.savez(tmp_path / "d.npz", x=x)
    args = ["certify", str(tmp_path / "net.npz"), "--group", "mirror:4x4", "--data", str(tmp_path / "d.npz"),
            "--metric", "data", "--restarts", "2", "--json"]
    assert main(args) == 0
    r = json.loads(capsys.readouterr().out)
    d = r["distances"]
    assert d["metric"] == "data" and "weighted least-squares projection" in d["metric_description"]
    for c in r["actions"]["candidates"]:  # each theta-bar is nearer on the data than the Reynolds average
        assert c["data_weighted"] <= c["reynolds_data_weighted"] * (1 + 1e-9) and c["cg_residual"] < 1e-6
    assert d["distance"] == pytest.approx(min(c["distance"] for c in r["actions"]["candidates"]), rel=1e-3)
    assert not r["actions"]["proven_nearest"]  # proven nearest is a statement in the parameter metric
    assert any("weighted by the data" in c["method"] for c in r["actions"]["candidates"]) or \
        any("weighted by the data" in m for c in r["actions"]["candidates"] for m in c["also_found_by"])
    assert main(args[:-1] + ["--max-distance", str(d["distance"] * 0.99)]) == 1


def _signed_involutions(n):
    """Every involution of {0..n-1} with a sign per cycle (a 2-cycle's two entries share it)."""
    out = []

    def pairings(rest):
        if not rest:
            yield []
            return
        a = rest[0]
        for tail in pairings(rest[1:]):  # a fixed
            yield [(a,)] + tail
        for k in range(1, len(rest)):
            for tail in pairings(rest[1:k] + rest[k + 1:]):
                yield [(a, rest[k])] + tail

    for cycles in pairings(list(range(n))):
        for signs in itertools.product([1.0, -1.0], repeat=len(cycles)):
            cols, vals = np.arange(n), np.ones(n)
            for c, s in zip(cycles, signs):
                if len(c) == 2:
                    cols[c[0]], cols[c[1]] = c[1], c[0]
                vals[list(c)] = s
            out.append(MonomialAction(cols, vals))
    return out


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_lower_bound_and_search_at_depth_against_brute_force():
    """Two hidden layers of 4 tanh units on 2x2 images: the optimum over every pair of signed involutions
    lies between the lower bound and the best found, and with restarts the search reaches it."""
    G = mirror(2, 2)
    base = random_equivariant_numeric(G, [4, 4], numeric_activation("tanh"), rng=1)
    th = base.parameters()
    net = base.with_parameters(th * (1 + 0.4 * np.random.default_rng(2).standard_normal(th.shape)))
    ng = net.group
    den = sum(float(np.sum(l.weight ** 2) + np.sum(l.bias ** 2)) for l in net.layers)
    invs = _signed_involutions(4)
    best = min(sum(float(np.sum((l.weight - W) ** 2) + np.sum((l.bias - b) ** 2))
                   for l, (W, b) in zip(net.layers, reynolds_float(net, element_actions(ng, [[a], [c]]))))
               for a in invs for c in invs)
    lb, how = involution_lower_bound(net, ng)
    assert lb is not None and lb <= best * (1 + 1e-9)
    c = certify(net, G, restarts=6, seed=0)
    opt = float(np.sqrt(best / den))
    assert c.search["lower_bound"] <= opt + 1e-12 <= c.distance + 2e-4  # the written theta-bar is rounded
    assert c.distance == pytest.approx(opt, rel=1e-3)
    assert c.search["line"].startswith(("within", "optimal"))
    assert c.search["restarts"] == 6


@pytest.mark.slow  # the dynamo exporter takes 3-11 s here
def test_torch_default_dynamo_exporter_file_certifies(tmp_path, capsys):
    """torch.onnx.export without dynamo=False (the onnx extra brings onnxscript) gives a file certify reads."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("onnx", reason="needs onnx: pip install 'symeq[onnx]'")
    pytest.importorskip("onnxscript", reason="torch's default exporter needs onnxscript: pip install 'symeq[onnx]'")
    G, net = far_net(widths=(8,), noise=1e-3)
    path = tmp_path / "net.onnx"
    torch.onnx.export(net.to_torch(dtype=torch.float32).eval(), (torch.zeros(1, 16),), str(path))
    capsys.readouterr()  # the exporter's own progress lines
    assert main(["certify", str(path), "--group", "mirror:4x4", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["status"] == "certified" and r["distances"]["parameters_max"] < 1e-2


def test_digits_dead_pixels_are_named_and_weigh_nothing(tmp_path, capsys):
    """scikit-learn's digits (raw 0..16 values): pixels 1, 33 and 40 are zero in every image.  A tanh
    autoencoder 64-8-64 whose weights on those pixels are large: the report names them, and the data-weighted
    first-layer distance does not count them while the parameter distance does."""
    datasets = pytest.importorskip("sklearn.datasets", reason="needs scikit-learn: pip install 'symeq[numeric]'")
    x = datasets.load_digits().data / 16.0
    G = mirror(8, 8)
    net = random_equivariant_numeric(G, [8], numeric_activation("tanh"), rng=0)
    th = net.parameters()
    net = net.with_parameters(th * (1.0 + 0.05 * np.random.default_rng(1).standard_normal(th.shape)))
    W = net.layers[0].weight.copy()
    W[:, [0, 32, 39]] += 3.0 * np.random.default_rng(2).standard_normal((8, 3))  # untrained weights on dead pixels
    net.layers[0].weight = W
    save_npz(net, tmp_path / "net.npz")
    np.savez(tmp_path / "d.npz", x=x)
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:8x8", "--data", str(tmp_path / "d.npz"),
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["data"]["unused_inputs"]["zero"] == [1, 33, 40]
    p1, w1 = r["distances"]["parameters_per_layer"][0], r["distances"]["data_weighted_per_layer"][0]
    assert p1 > 0.3  # the parameter metric counts the dead pixels' weights
    # the Reynolds average moves half of a dead pixel's weight onto its live mirror image, which the data see;
    # --metric data's weighted least-squares projection does not
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:8x8", "--data", str(tmp_path / "d.npz"),
                 "--metric", "data", "--json"]) == 0
    rd = json.loads(capsys.readouterr().out)
    wd1 = rd["distances"]["data_weighted_per_layer"][0]
    assert wd1 < 0.5 * w1, (w1, wd1)
    assert rd["status"] == "certified"
    assert main(["certify", str(tmp_path / "net.npz"), "--group", "mirror:8x8", "--data", str(tmp_path / "d.npz")]) == 0
    assert "inputs the data never use (zero on every data point; numbered from 1): 1, 33, 40" in capsys.readouterr().out


def test_lower_bound_when_the_matching_is_bounded_uses_the_assignment(monkeypatch):
    """A bounded matching (wide layers) still gives a bound: cost = C - w/2 for every involution, and no
    involution weighs more than the optimal assignment.  Forced here on a small net: the bound stays below
    the brute-force optimum and equals the exact one when the assignment is an involution."""
    pytest.importorskip("scipy", reason="the assignment relaxation needs scipy: pip install 'symeq[numeric]'")
    import symeq.numeric.project as project

    G = mirror(2, 2)
    base = random_equivariant_numeric(G, [4, 4], numeric_activation("tanh"), rng=3)
    th = base.parameters()
    net = base.with_parameters(th * (1 + 0.5 * np.random.default_rng(4).standard_normal(th.shape)))
    exact, _ = involution_lower_bound(net, net.group)
    original = project._best_involution

    def bounded(S, d, signs):
        cols, vals, _ = original(S, d, signs)
        return cols, vals, False

    monkeypatch.setattr(project, "_best_involution", bounded)
    lb, how = involution_lower_bound(net, net.group)
    assert "assignment relaxation" in how and lb <= exact + 1e-12
    invs = _signed_involutions(4)
    best = min(sum(float(np.sum((l.weight - W) ** 2) + np.sum((l.bias - b) ** 2))
                   for l, (W, b) in zip(net.layers, reynolds_float(net, element_actions(net.group, [[a], [c]]))))
               for a in invs for c in invs)
    assert lb <= best * (1 + 1e-9)
