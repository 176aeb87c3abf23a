"""Leaky ReLU in the exact piecewise-linear machinery (regions, canonical form, the one-hidden-layer
fibre decision by reduction to the ReLU twin, the exact functional dimension), each claim
recomputed independently (plain Fraction forward passes, the ReLU decision on the twin)."""

from __future__ import annotations

import random
from fractions import Fraction as F

import pytest
from flint import fmpq, fmpq_mat

from symeq.errors import InputError
from symeq.relu.canonical import canonical_form
from symeq.relu.fibre import decide_fibre
from symeq.relu.hunt import build_layers, generate_candidate, identity_example, resolve_group
from symeq.relu.leaky import decide_fibre_leaky, equivariant_leaky, leaky_canonical_form, relu_twin
from symeq.relu.regions import decide_equivariance, evaluate, linear_regions

SLOPES = [F(1, 100), F(1, 3), F(-1, 2), F(5, 2)]


def _forward(layers, x):
    h = [F(str(v)) for v in x]
    for W, b, a in layers:
        h = [sum((F(str(w)) * v for w, v in zip(r, h)), F(0)) + F(str(c)) for r, c in zip(W, b)]
        if a is not False:
            s = F(0) if a is True else F(str(a))
            h = [v if v > 0 else s * v for v in h]
    return h


def _rand(widths, seed, a):
    rng = random.Random(seed)
    out = []
    for i, (p, q) in enumerate(zip(widths[:-1], widths[1:])):
        out.append(([[F(rng.randint(-6, 6), rng.randint(1, 3)) for _ in range(p)] for _ in range(q)],
                    [F(rng.randint(-6, 6), rng.randint(1, 3)) for _ in range(q)], a if i < len(widths) - 2 else False))
    return out


def _pts(n, k, seed):
    rng = random.Random(seed)
    return [[F(rng.randint(-40, 40), rng.randint(1, 7)) for _ in range(n)] for _ in range(k)]


@pytest.mark.parametrize("a", SLOPES)
def test_regions_and_evaluation(a):
    net = _rand([2, 4, 3, 2], 1, a)
    for x in _pts(2, 10, 2):
        assert [F(str(v)) for v in evaluate(net, x)] == _forward(net, x)
    count = 0
    for reg in linear_regions(net):
        count += 1
        A, c = reg.affine
        x = reg.point
        assert [F(str(sum((u * v for u, v in zip(r, x)), fmpq(0)) + ci)) for r, ci in zip(A, c)] == _forward(net, x)
    assert count >= 2


@pytest.mark.parametrize("a", SLOPES)
def test_canonical_form_and_the_relu_twin(a):
    for seed in range(4):
        net = _rand([2, 5, 2], seed, a)
        cf = leaky_canonical_form(net)
        for x in _pts(2, 8, seed):
            assert [F(str(v)) for v in cf(x)] == _forward(net, x)
        # the bijection: the ReLU network with the same neurons and output bias c / (1 + a)
        # computes the twin
        (W, b, _), (V, c, _) = net
        relu_net = [(W, b, True), (V, [ci / (1 + a) for ci in c], False)]
        assert canonical_form(relu_net) == relu_twin(cf, fmpq(a.numerator, a.denominator))


def test_identity_example_leaky():
    a = F(1, 10)
    from symeq.relu.canonical import plain_layers

    (W1, b1, _), (W2, b2, _) = plain_layers(identity_example())
    W2 = [[x / (1 + a) for x in r] for r in [[F(str(v)) for v in row] for row in W2]]
    net = [(W1, b1, a), (W2, b2, False)]
    G = resolve_group("rot3")
    assert decide_equivariance(net, [[0, -1], [1, -1]], [[0, -1], [1, -1]]).holds
    assert equivariant_leaky(net, G) == (True, None)
    d = decide_fibre_leaky(net, G)
    assert d.verdict == "no-layerwise-parameter" and d.exit_code == 1 and d.smallest_equivariant_width == 6
    # the width-6 realisation: a leaky model computing the same function, layerwise equivariant
    from symeq.layerwise import check_layerwise
    from symeq.numbers import mat_rows

    real = d.realisation
    assert real.layers[0].activation.to_spec() == {"type": "leaky_relu", "slope": "1/10"}
    lay = [(mat_rows(l.weight), list(l.bias), a if l.activation is not None else False) for l in real.layers]
    for x in _pts(2, 10, 5):
        assert _forward(lay, x) == _forward(net, x)
    checks, hom, _, _ = check_layerwise(real, G, [d.realisation_actions])
    assert hom and all(c.holds for c in checks)
    assert "leaky ReLU (slope 1/10) reduced to ReLU" in d.proof["lines"][0]


def test_not_equivariant_leaky_has_a_witness():
    net = _rand([2, 3, 2], 7, F(1, 5))
    G = resolve_group("rot3")
    d = decide_fibre_leaky(net, G)
    assert d.verdict == "not-equivariant"
    x = d.witness
    R = [[0, -1], [1, -1]]
    Rx = [sum((F(r) * F(str(v)) for r, v in zip(row, x)), F(0)) for row in R]
    fx = _forward(net, x)
    assert _forward(net, Rx) != [sum((F(r) * v for r, v in zip(row, fx)), F(0)) for row in R]


def test_leaky_decision_matches_the_relu_decision_on_the_twin():
    """Hunt candidates (ReLU, one hidden layer): the leaky network with the same neurons and output
    bias (1 + a) c has that ReLU network as its twin, so both decisions must agree."""
    G = resolve_group("rot3")
    a = F(1, 7)
    seen = set()
    for index in range(40):
        _, recipe = generate_candidate((2, 4, 2), "rot3", 0, index, ())
        lay = build_layers(recipe, "rot3")
        if lay is None:
            continue
        (W, b, _), (V, c, _) = lay
        dr = decide_fibre([(W, b, True), (V, c, False)], G, check_theta=False)
        dl = decide_fibre_leaky([(W, b, a), (V, [(1 + a) * F(str(x)) for x in c], False)], G, check_theta=False)
        if dr.verdict == "not-equivariant":
            continue
        assert (dl.verdict, dl.smallest_equivariant_width) == (dr.verdict, dr.smallest_equivariant_width)
        seen.add(dl.verdict)
    assert "no-layerwise-parameter" in seen


def test_exact_functional_dimension_of_leaky_networks():
    from symeq.relu.fdim import _region_points, network_slopes, relu_functional_dimension

    net = _rand([2, 3, 3, 1], 3, F(1, 4))
    r = relu_functional_dimension(net, sample="regions")
    assert r.exact and r.bound == r.params - 6
    # independent: the rank of Fraction difference-quotient Jacobians at the same region points
    from test_relu_fdim import _fraction_jacobian

    X, _ = _region_points(network_slopes(net), 2000)
    rows = [row for x in X for row in _fraction_jacobian(net, [F(str(v)) for v in x])]
    M = fmpq_mat(len(rows), len(rows[0]), [fmpq(v.numerator, v.denominator) for r_ in rows for v in r_])
    assert M.rank() == r.rank
    # a leaky neuron with zero incoming weights is not dead (sigma(b) = a b): no "inactive" cause
    dead = [([[1, 2], [3, -1], [0, 0]], [1, -1, -2], F(1, 4)), ([[1, -1, 2]], [0], False)]
    rd = relu_functional_dimension(dead)
    assert all(c["cause"] != "inactive" for c in rd.shortfall.get("causes", []))


def test_leaky_refusals():
    from symeq.relu.deep import first_layer_bound

    net = _rand([2, 4, 4, 2], 1, F(1, 10))
    assert first_layer_bound(net, "rot3")["holds"] is None
    with pytest.raises(InputError):
        decide_fibre_leaky(_rand([2, 3, 3, 2], 1, F(1, 10)), resolve_group("rot3"))
    with pytest.raises(InputError, match="slope of 1"):
        evaluate([([[1]], [0], F(1)), ([[1]], [0], False)], [1])


def test_leaky_hunt_one_hidden_layer(tmp_path):
    """Every leaky counterexample of a hunt, recomputed: the fibre decision again, and the stored
    realisation (a leaky model) computes f (Fraction forward passes) and is layerwise equivariant."""
    from symeq.io import model_from_json
    from symeq.layerwise import check_layerwise
    from symeq.numbers import mat_rows
    from symeq.relu.candidates import read_records
    from symeq.relu.hunt import hunt

    out = tmp_path / "leaky.jsonl"
    hunt("2,4,2", "rot3", out, budget=24, lag=4, activation={"type": "leaky_relu", "slope": "1/10"})
    header, recs = read_records(out)
    assert header["activation"] == {"type": "leaky_relu", "slope": "1/10"}
    a = F(1, 10)
    G = resolve_group("rot3")
    finds = [r for r in recs if r["status"] == "counterexample"]
    assert finds
    for r in finds:
        m = r["model"]
        net = [(m["W1"], m["b1"], a), (m["W2"], m["b2"], False)]
        d = decide_fibre_leaky(net, G, check_theta=False)
        assert d.verdict == "no-layerwise-parameter"
        cert = r["certificate"]
        assert cert["fibre"]["smallest_equivariant_width"] == d.smallest_equivariant_width > 4
        real = model_from_json(cert["realisation"])
        lay = [(mat_rows(l.weight), list(l.bias), a if l.activation is not None else False) for l in real.layers]
        for x in _pts(2, 6, r["index"]):
            assert _forward(lay, x) == _forward(net, x)
        from symeq.numbers import matrix

        acts = [matrix(M) for M in cert["realisation_actions"]]
        checks, hom, _, _ = check_layerwise(real.with_group(G), G, [acts])
        assert hom and all(c.holds for c in checks)
        assert "rank" in r["functional_dimension"]


def test_leaky_hunt_deep_and_resume(tmp_path, capsys):
    from symeq.cli import main
    from symeq.relu.candidates import read_records
    from symeq.relu.hunt import hunt

    out = tmp_path / "deep.jsonl"
    hunt("2,4,4,2", "rot3", out, budget=16, lag=4, activation={"type": "leaky_relu", "slope": "1/10"})
    _, recs = read_records(out)
    statuses = {r["status"] for r in recs}
    assert "counterexample" not in statuses and "no-action-at-reduced" not in statuses
    for r in recs:
        if r["status"] == "no-action-at-theta":
            assert r["first_layer_bound"]["holds"] is None and "leaky" in r["first_layer_bound"]["scope"]
            assert r["activation"]["slope"] == "1/10"
        if r["status"] == "not-equivariant" and "witness" in r["equivariance"]:
            x = [F(v) for v in r["equivariance"]["witness"]]
            net = [(d["W"], d["b"], F(1, 10) if d["relu"] else False) for d in r["model"]]
            R = [[0, -1], [1, -1]]
            Rx = [sum((F(c) * v for c, v in zip(row, x)), F(0)) for row in R]
            fx = _forward(net, x)
            assert _forward(net, Rx) != [sum((F(c) * v for c, v in zip(row, fx)), F(0)) for row in R]
    # resuming with another activation is refused (exit 2), and only piecewise-linear ones are taken
    assert main(["hunt", "--arch", "2,4,4,2", "--group", "rot3", "--budget", "20", "--lag", "4",
                 "--out", str(out)]) == 2
    assert "--activation leaky_relu:1/10" in capsys.readouterr().err
    assert main(["hunt", "--arch", "2,4,2", "--group", "rot3", "--budget", "2", "--out", str(tmp_path / "t.jsonl"),
                 "--activation", "tanh"]) == 2
    assert main(["hunt", "--report", str(out), "--no-picture"]) == 0
    assert "activation leaky_relu 1/10" in capsys.readouterr().out


def test_leaky_model_input_and_the_float_estimate_agree():
    """A leaky Model (the activation asked for its slope): the exact rank equals the float estimate
    of symeq/numeric/fdim.py on the float twin."""
    from symeq.numeric.fdim import functional_dimension
    from symeq.numeric.models import from_exact
    from symeq.relu.fdim import relu_functional_dimension
    from symeq.relu.leaky import leaky_model

    rng = random.Random(3)

    def rnd(r, c):
        return [[F(rng.randint(-5, 5), rng.randint(1, 3)) for _ in range(c)] for _ in range(r)]

    lay = [(rnd(4, 2), [F(rng.randint(-3, 3), 9) for _ in range(4)], True),
           (rnd(3, 4), [F(rng.randint(-3, 3), 9) for _ in range(3)], True), (rnd(2, 3), [0, 0], False)]
    m = leaky_model(lay, F(1, 5))
    r = relu_functional_dimension(m)
    fl = functional_dimension(from_exact(m, None), rng=0, n_points=400)
    assert r.exact and r.rank == fl.rank == r.bound == 35 - 7
