"""Hunting ReLU networks with two hidden layers: every status the hunt reports is re-checked here
by an independent recomputation (plain Fraction forward passes, the exact region decision, a
fresh derivation of the actions), and the first-layer orbit bound is checked against the
one-hidden-layer fibre decision."""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction

import pytest

from symeq.layerwise import check_layerwise, derive_latent_actions
from symeq.numbers import matrix
from symeq.relu.deep import classify_deep, deep_model, first_layer_bound, layers_from_json
from symeq.relu.hunt import build_layers, generate_candidate, hunt, read_records, verify_candidate
from symeq.relu.regions import decide_equivariance, linear_regions
from symeq.submodels import reduce_model

R3 = [[0, -1], [1, -1]]
F = Fraction


def _F(x):
    return F(str(x))  # fmpq, int, str -> Fraction without trusting symeq's conversions


def _fr(layers):
    return [([[F(str(x)) for x in r] for r in W], [F(str(x)) for x in b], relu) for W, b, relu in layers]


def _forward(layers, x):
    """A plain Fraction forward pass, independent of symeq's evaluator."""
    h = [_F(v) for v in x]
    for W, b, relu in _fr(layers):
        h = [sum((w * v for w, v in zip(r, h)), F(0)) + c for r, c in zip(W, b)]
        if relu:
            h = [max(v, F(0)) for v in h]
    return h


def _mv(M, v):
    return [sum((_F(a) * x for a, x in zip(r, v)), F(0)) for r in M]


def _equivariant_at(layers, R, x):
    return _forward(layers, _mv(R, x)) == _mv(R, _forward(layers, x))


def _jacobian_rank(layers, d):
    """Rank of the Jacobian of the network at d (exact; d off every kink), from the activation
    pattern: J = W_L D_{L-1} W_{L-1} ... D_1 W_1."""
    import sympy

    h = [_F(v) for v in d]
    J = sympy.eye(len(d))
    for W, b, relu in _fr(layers):
        pre = [sum((w * v for w, v in zip(r, h)), F(0)) + c for r, c in zip(W, b)]
        assert all(p != 0 for p in pre) or not relu
        M = sympy.Matrix([[sympy.Rational(w.numerator, w.denominator) for w in r] for r in W])
        if relu:
            D = sympy.diag(*[1 if p > 0 else 0 for p in pre])
            M = D * M
            h = [max(p, F(0)) for p in pre]
        else:
            h = pre
        J = M * J
    return J.rank()


def test_two_hidden_layer_hunt_every_status_rechecked(tmp_path):
    out = tmp_path / "deep.jsonl"
    s = hunt("2,4,4,2", "rot3", out, budget=24, lag=8)
    assert s["complete"] and s["total"] == 24
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["arch"] == [2, 4, 4, 2]
    assert [r["index"] for r in lines[1:]] == list(range(24))  # in order, none lost or doubled
    rng = random.Random(0)
    statuses = set()
    for r in lines[1:]:
        st = r["status"]
        statuses.add(st)
        assert r["depth"] == 2
        if st == "skipped":
            continue
        layers = layers_from_json(r["model"])
        if st == "not-equivariant":
            w = [F(v) for v in r["equivariance"]["witness"]]
            assert not _equivariant_at(layers, R3, w)
            continue
        assert st != "undetermined", r.get("reason")
        # exact end-to-end equivariance, recomputed: regions, then Fraction samples
        assert decide_equivariance(layers, R3, R3).holds
        for _ in range(5):
            assert _equivariant_at(layers, R3, [F(rng.randint(-20, 20), rng.randint(1, 7)) for _ in range(2)])
        model = deep_model(layers, "rot3")
        der = derive_latent_actions(model)
        if st == "layerwise-at-theta":
            assert der.found
            checks, hom, _, _ = check_layerwise(model, model.group, der.actions)
            assert hom and all(c.holds for c in checks)
            # and the stored actions are themselves an action (not just the re-derived ones)
            stored = [[matrix(M) for M in a] for a in r["actions"]]
            checks, hom, _, _ = check_layerwise(model, model.group, stored)
            assert hom and all(c.holds for c in checks)
            continue
        # every other status claims: no action at theta, proven by an exhaustive search
        assert not der.found and der.exhaustive
        if st == "layerwise-at-reduced":
            lifted = layers_from_json(r["lifted"])
            for _ in range(5):
                x = [F(rng.randint(-20, 20), rng.randint(1, 7)) for _ in range(2)]
                assert _forward(lifted, x) == _forward(layers, x)
            continue
        red = reduce_model(model)
        der2 = derive_latent_actions(red.model)
        assert not der2.found
        if st == "no-action-at-reduced":
            assert der2.exhaustive
        fd = r["functional_dimension"]
        if "rank" in fd:  # the exact functional dimension: a proven lower bound against #params - dim T
            assert "a proof" in fd["label"] and fd["bound"] == fd["params"] - fd["dim_T"]
            assert fd["rank"] <= fd["bound"] and fd["locally_identifiable"] == (fd["rank"] == fd["bound"]
                                                                               and not fd["zero_neurons"])
        else:
            assert fd["undetermined"]
        if st == "counterexample":
            # the first-layer orbit bound, recomputed: rot3 acts freely with orbits of 3 rays,
            # h1 = 4 < 6, and the bias-free network has rank 2 on every open region ...
            assert r["first_layer_bound"]["h1"] == 4 and r["first_layer_bound"]["k"] == 3
            bias_free = [(W, [0] * len(b), relu) for W, b, relu in layers]
            ranks = set()
            for region in linear_regions(bias_free):
                A, _ = region.affine
                ranks.add(_jacobian_rank(bias_free, region.point))
                assert _jacobian_rank(bias_free, region.point) == matrix(A).rank()
            assert ranks == {2}
        else:
            assert not r.get("first_layer_bound", {}).get("holds")
    assert {"counterexample", "layerwise-at-theta", "not-equivariant"} <= statuses
    assert statuses & {"no-action-at-reduced", "no-action-at-theta"}


@pytest.mark.parametrize("arch", [(2, 4, 2), (2, 5, 2)])
def test_first_layer_bound_agrees_with_the_one_hidden_layer_decision(arch):
    """On one hidden layer the fibre decision is exact: the bound proves exactly its
    counterexamples, and never fires on a layerwise-equivariant network."""
    seen = {True: 0, False: 0}
    for i in range(60):
        kind, rec = generate_candidate(arch, "rot3", 5, i)
        lay = build_layers(rec, "rot3")
        if lay is None or len(lay[0][0]) != arch[1]:
            continue
        st = verify_candidate(arch, "rot3", 5, i, (), False)["status"]
        if st == "not-equivariant":
            continue
        b = first_layer_bound(lay, "rot3")
        assert b["holds"] == (st == "counterexample"), (i, st, b)
        seen[b["holds"]] += 1
    assert seen[True] >= 5 and seen[False] >= 5


def test_first_layer_bound_scope():
    lay = [([[1, 0], [0, 1], [-1, 0], [0, -1]], [0] * 4, True), ([[1, 0, -1, 0], [0, 1, 0, -1]], [0, 0], False)]
    assert first_layer_bound(lay, "rot4")["holds"] is None        # order 4: rays 90 degrees apart
    six = [([[1, 0]] * 6, [0] * 6, True), ([[1] * 6, [0] * 6], [0, 0], False)]
    assert first_layer_bound(six, "rot3")["holds"] is None        # two orbits fit in width 6
    assert first_layer_bound(lay, "rot3")["holds"] is True         # the width-4 identity


def _regular_rep_net(split=None):
    """A (2,3,3,2) network whose weights are shared through the regular representation of C3
    (rows a R^-j, circulant middle layer, output columns R^j u) -- layerwise equivariant by
    construction.  ``split``: duplicate the first layer's orbit (width 6) and split the
    outgoing weights of the copies unevenly, as training does once rounding makes neurons tie."""
    R = matrix(R3)
    Ri = R.inv()
    a = matrix([[2, 1]])
    rows = [[str(x) for x in (a * Ri ** j).entries()] for j in range(3)]
    C = [[3, -1, 2], [2, 3, -1], [-1, 2, 3]]  # circulant: commutes with the cyclic shift
    u = matrix([[1], [-2]])
    V = [[str((R ** j * u)[r, 0]) for j in range(3)] for r in range(2)]
    if split is None:
        return [(rows, [1, 1, 1], True), (C, [-1, -1, -1], True), (V, [0, 0], False)]
    # copy 1 of neuron j sends p_j of its weight on, copy 2 sends 1 - p_j
    C2 = [[F(c) * p for c, p in zip(r, split)] + [F(c) * (1 - p) for c, p in zip(r, split)] for r in C]
    return [(rows + rows, [1] * 6, True), (C2, [-1, -1, -1], True), (V, [0, 0], False)]


def test_user_made_deep_networks():
    d = classify_deep(_regular_rep_net(), "rot3")
    assert d["status"] == "layerwise-at-theta"
    # tied neurons with uneven outgoing weights: no action at theta, one after merging the clones
    d = classify_deep(_regular_rep_net([F(1, 3), F(1, 2), F(1, 4)]), "rot3")
    assert d["status"] == "layerwise-at-reduced" and d["reduced"]["merged"] == 3
    assert d["at_theta"]["exhaustive"]
    lifted = layers_from_json(d["lifted"])
    for x in ([F(1), F(-2)], [F(7, 3), F(1, 5)], [F(-4), F(9, 2)]):
        assert _forward(lifted, x) == _forward(_regular_rep_net([F(1, 3), F(1, 2), F(1, 4)]), x)
    # an even split is layerwise equivariant at theta already (the copies form two orbits)
    assert classify_deep(_regular_rep_net([F(1, 3)] * 3), "rot3")["status"] == "layerwise-at-theta"
    # a non-equivariant edit is caught with a witness
    bad = _regular_rep_net()
    bad[0][0][0] = ["3", "1"]
    d = classify_deep(bad, "rot3")
    assert d["status"] == "not-equivariant"
    assert not _equivariant_at(bad, R3, [F(v) for v in d["equivariance"]["witness"]])


def test_deep_hunt_is_the_same_on_two_workers(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    hunt("2,3,4,2", "rot3", a, budget=12, lag=4)
    hunt("2,3,4,2", "rot3", b, budget=12, lag=4, workers=2)
    assert a.read_text().splitlines()[1:] == b.read_text().splitlines()[1:]
    assert len(read_records(b)[1]) == 12


def _cli(argv):
    import argparse

    from symeq.cli.hunt import register

    p = argparse.ArgumentParser(prog="symeq")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


def test_cli_deep_hunt_report_and_picture(tmp_path, capsys, monkeypatch):
    out = tmp_path / "deep.jsonl"
    assert _cli(["hunt", "--arch", "2,4,4,2", "--group", "rot3", "--budget", "12", "--lag", "4",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    pic = tmp_path / "find.svg"
    assert _cli(["hunt", "--report", str(out), "--picture", str(pic)]) == 0
    text = capsys.readouterr().out
    assert "depth 2 (2 hidden layers)" in text and "architecture 2,4,4,2, group rot:3: 12 candidates" in text
    assert "smallest proven find" in text and "first-layer orbit bound" in text
    assert "functional dimension (exact lower bound" in text  # exact, not float evidence
    svg = pic.read_text()
    assert svg.startswith("<svg") and svg.count("<line") >= 2 and "r: H1->" in svg
    # the picture's action, recomputed: rot3 sends some first-layer hyperplane off the arrangement
    from symeq.relu.catalogue import find_layers, hyperplane_action

    best = [r for r in read_records(out)[1] if r["status"] == "counterexample"][0]
    act = hyperplane_action(find_layers(best), "rot3")
    assert None in act["images"]["r"]
    # without matplotlib a .png request falls back to the hand-written SVG
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert _cli(["hunt", "--report", str(out), "--picture", str(tmp_path / "find.png")]) == 0
    assert "matplotlib is missing" in capsys.readouterr().out and (tmp_path / "find.svg").exists()


@pytest.mark.parametrize("arch", ["2,4", "2,0,2", "2,x,2", "2,4,4,4,4,4,4,2"])
def test_bad_architectures_are_input_errors(tmp_path, arch):
    from symeq.errors import InputError

    with pytest.raises(InputError):
        hunt(arch, "rot3", tmp_path / "h.jsonl", budget=1)


def test_torch_module_as_users_make_it():
    """A torch nn.Sequential with two hidden ReLU layers, its float32 weights read exactly
    (every float is a dyadic rational): the composed width-4 identity blocks are a proven
    counterexample; nudging one weight by float32 rounding breaks equivariance, with a witness."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4), torch.nn.ReLU(),
                              torch.nn.Linear(4, 2))
    W1 = [[1, -2], [-1, 2], [2, -1], [-2, 1]]
    W2 = [[1, -1, -2, 2], [-1, 1, 2, -2], [1, -1, 0, 0], [-1, 1, 0, 0]]
    W3 = [[0.5, -0.5, 1.5, -1.5], [-0.5, 0.5, 1.5, -1.5]]
    with torch.no_grad():
        for lin, W, b in ((net[0], W1, [0] * 4), (net[2], W2, [-1, 1, 0, 0]), (net[4], W3, [0.5, -0.5])):
            lin.weight.copy_(torch.tensor(W, dtype=torch.float32))
            lin.bias.copy_(torch.tensor(b, dtype=torch.float32))

    def exact(module):
        lins = [m for m in module if isinstance(m, torch.nn.Linear)]
        return [([[F(float(v)) for v in row] for row in m.weight.detach().tolist()],
                 [F(float(v)) for v in m.bias.detach().tolist()], i < len(lins) - 1) for i, m in enumerate(lins)]

    d = classify_deep(exact(net), "rot3")
    assert d["status"] == "counterexample" and d["first_layer_bound"]["min_rank"] == 2
    with torch.no_grad():
        net[0].weight[0, 0] = torch.tensor(1 / 3, dtype=torch.float32)
    d = classify_deep(exact(net), "rot3")
    assert d["status"] == "not-equivariant"
    assert not _equivariant_at(exact(net), R3, [F(v) for v in d["equivariance"]["witness"]])


def test_region_limit_gives_undetermined_not_a_verdict(monkeypatch):
    import symeq.relu.deep as deep

    lay = [([[1, -2], [-1, 2], [2, -1], [-2, 1]], [0] * 4, True),
           ([[1, -1, -2, 2], [-1, 1, 2, -2], [1, -1, 0, 0], [-1, 1, 0, 0]], [-1, 1, 0, 0], True),
           ([["1/2", "-1/2", "3/2", "-3/2"], ["-1/2", "1/2", "3/2", "-3/2"]], ["1/2", "-1/2"], False)]
    assert classify_deep(lay, "rot3")["status"] == "counterexample"
    monkeypatch.setattr(deep, "REGION_LIMIT", 2)
    d = classify_deep(lay, "rot3")
    assert d["status"] == "undetermined" and "regions" in d["reason"]
