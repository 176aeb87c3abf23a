"""The exact functional dimension of ReLU networks (symeq/relu/fdim.py): ranks recomputed by an
independent Fraction Jacobian, the bound #params - dim T, the Bona-Pellissier-Bachoc-Malgouyres
reduced condition, explained shortfalls (dead neurons, clones), hidden symmetries, the size guard,
and agreement with the float estimate of symeq/numeric/fdim.py."""

from __future__ import annotations

import random
from fractions import Fraction as F

import pytest

from symeq.errors import InputError, LimitExceeded
from symeq.relu.fdim import _jacobian_mod, _jacobian_q, _exact_forward, relu_functional_dimension as fdim
from symeq.relu.hunt import identity_example

GENERIC = [([[1, 2], [3, -1], [-2, 1]], [1, -1, 2], True), ([[1, -1, 2]], [0], False)]


def _rand_net(widths, seed, slope=True, bias=9):
    rng = random.Random(seed)
    out = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        W = [[F(rng.randint(-9, 9), rng.randint(1, 5)) for _ in range(a)] for _ in range(b)]
        out.append((W, [F(rng.randint(-bias, bias), rng.randint(1, 5) * 9) for _ in range(b)],
                    slope if i < len(widths) - 2 else False))
    return out


def _fraction_jacobian(layers, x):
    """Jacobian d f / d theta at x by exact finite differences in Fractions: f is polynomial in
    theta on the activation pattern at x, and affine in each single parameter there, so a tiny
    rational step (not crossing a kink) gives the derivative exactly."""
    flat = [v for W, b, _ in layers for v in [e for r in W for e in r] + list(b)]

    def f(theta):
        k, h = 0, [F(v) for v in x]
        for W, b, act in layers:
            r, c = len(W), len(W[0])
            Wt = [theta[k + i * c:k + (i + 1) * c] for i in range(r)]
            k += r * c
            bt = theta[k:k + r]
            k += r
            h = [sum((w * v for w, v in zip(row, h)), F(0)) + bb for row, bb in zip(Wt, bt)]
            if act is not False:
                a = F(0) if act is True else F(act)
                h = [v if v > 0 else a * v for v in h]
        return h

    base = f([F(v) for v in flat])
    eps = F(1, 10**12)
    cols = []
    for i in range(len(flat)):
        th = [F(v) for v in flat]
        th[i] += eps
        cols.append([(u - v) / eps for u, v in zip(f(th), base)])
    return [[cols[j][k] for j in range(len(flat))] for k in range(len(base))]


@pytest.mark.parametrize("slope", [True, F(1, 10)])
def test_jacobian_mod_p_and_over_q_match_fraction_differences(slope):
    net = _rand_net([3, 4, 3, 2], 5, slope=slope)
    from symeq.relu.fdim import network_slopes

    lay = network_slopes(net)
    X = [[F(1, 3), F(-2), F(5, 7)], [F(-1), F(1, 2), F(2)]]
    from flint import fmpq

    Xq = [[fmpq(v.numerator, v.denominator) for v in x] for x in X]
    signs, bad = _exact_forward(lay, Xq)
    assert not bad
    p = 2147483647
    J = _jacobian_mod(lay, Xq, signs, p)
    for j, x in enumerate(X):
        Jf = _fraction_jacobian(net, x)
        Jq = _jacobian_q(lay, Xq[j], [None if S is None else [r[j] for r in S] for S in signs])
        assert [[F(int(v.p), int(v.q)) for v in row] for row in Jq] == Jf
        for k, row in enumerate(Jf):
            assert [int(J[j * 2 + k, c]) for c in range(len(row))] == [
                v.numerator * pow(v.denominator, -1, p) % p for v in row]


def test_generic_net_reaches_the_bound():
    for sample in ("regions", "random", "auto"):
        r = fdim(GENERIC, sample=sample)
        assert (r.params, r.orbit_dim, r.bound) == (13, 3, 10)
        assert r.rank == 10 and r.exact and r.locally_identifiable
        assert r.reduced["holds"] and r.reduced["columns"] == 10
        assert "locally identifiable" in r.summary()
    deep = _rand_net([3, 5, 4, 2], 1)
    r = fdim(deep)
    assert r.bound == r.params - 9 and r.locally_identifiable and r.reduced["holds"]


def test_reduced_condition_agrees_with_the_bound():
    seen = set()
    for seed in range(8):
        net = _rand_net([2, 3, 3, 1], seed)
        r = fdim(net, sample="regions")
        assert r.reduced["holds"] == (r.rank == r.bound)
        seen.add(r.rank == r.bound)
    assert True in seen


def test_dead_neuron_falls_short_and_is_explained():
    # first layer: neuron 3 has zero incoming weights and a negative bias: dead everywhere
    net = [([[1, 2], [3, -1], [0, 0]], [1, -1, -2], True), ([[1, -1, 2]], [0], False)]
    r = fdim(net)
    assert r.bound == 10 and r.rank == 7 and r.exact and not r.locally_identifiable
    sf = r.shortfall
    assert sf["size"] == 3 and sf["explained"] == 3 and sf["unexplained"] == 0 and sf["fully_explained"]
    assert [c["cause"] for c in sf["causes"]] == ["inactive"] and sf["causes"][0]["neuron"] == 3
    assert "inactive on all of R^n" in r.summary()
    assert not r.reduced["holds"]
    # a deeper dead neuron: z = -h1 - h2 - 1 < 0 on all of R^2
    net2 = [([[1, 2], [3, -1]], [1, -1], True), ([[1, -1], [-1, -1]], [1, -1], True), ([[1, 1]], [0], False)]
    r2 = fdim(net2, sample="regions")
    assert r2.shortfall["causes"][0] == {"cause": "inactive", "layer": 2, "neuron": 2,
                                         "text": "neuron 2 of hidden layer 2 is inactive on all of R^n "
                                                 "(every linear region sampled)"}
    assert r2.shortfall["fully_explained"] and r2.exact and r2.rank == 8 and r2.skipped == 0
    # with bias 0 instead of 1, neuron 1 of layer 2 has pre-activation constant 0 where h = 0: that
    # region has no point where theta -> f_theta(x) is differentiable, and is skipped
    net3 = [([[1, 2], [3, -1]], [1, -1], True), ([[1, -1], [-1, -1]], [0, -1], True), ([[1, 1]], [0], False)]
    r3 = fdim(net3, sample="regions")
    assert r3.skipped > 0 and r3.exact and r3.rank == 7


def test_clone_falls_short_and_is_explained():
    net = [([[1, 2], [3, -1], [2, 4]], [1, -1, 2], True), ([[1, -1, 2]], [0], False)]
    r = fdim(net)
    # the clone merges into one neuron of width-2 network: 9 - 2 = 7
    assert r.rank == 7 and r.bound == 10 and r.exact
    sf = r.shortfall
    assert sf["causes"][0]["cause"] == "clone" and sf["causes"][0]["neurons"] == [1, 3]
    assert sf["explained"] == 3 and sf["fully_explained"]
    # two outputs with non-parallel outgoing columns: only the outgoing trade (2 directions)
    net2 = [([[1, 2], [3, -1], [2, 4]], [1, -1, 2], True), ([[1, -1, 2], [2, 0, 1]], [0, 1], False)]
    r2 = fdim(net2)
    assert r2.bound - r2.rank == 2 and r2.shortfall["explained"] == 2 and r2.exact


def test_hidden_symmetries_of_the_width4_identity():
    # relu(z) - relu(-z) = z: the rank falls short with no dead neuron and no clone; the two cancelled
    # pairs are an affine map: 2 bias shifts (absorbed by the output bias) and GL(2) off the diagonal
    r = fdim(identity_example())
    assert r.exact and r.sample == "regions" and r.regions == 4
    assert (r.params, r.bound, r.rank) == (22, 18, 14)
    sf = r.shortfall
    assert [c["cause"] for c in sf["causes"]] == ["pairs"] and sf["causes"][0]["pairs"] == [[1, 3], [2, 4]]
    assert sf["explained"] == 4 and sf["unexplained"] == 0 and sf["fully_explained"]
    # the same weights in a leaky network (sigma(z) - sigma(-z) = (1 + a) z): the same explanation
    from symeq.relu.canonical import plain_layers

    (W1, b1, _), (W2, b2, _) = plain_layers(identity_example())
    rl = fdim([(W1, b1, F(1, 10)), (W2, b2, False)])
    assert rl.rank == 14 and rl.shortfall["fully_explained"]
    # a pair whose outgoing columns do not cancel is no affine map: no such explanation
    W2b = [list(r) for r in W2]
    W2b[0][0] += 1
    rb = fdim([(W1, b1, True), (W2b, b2, False)])
    assert all(c["cause"] != "pairs" or [1, 3] not in c["pairs"] for c in rb.shortfall.get("causes", []))


def test_zero_neurons_are_removed_and_said():
    net = [([[1, 2], [3, -1], [0, 0]], [1, -1, 0], True), ([[1, -1, 2]], [0], False)]
    r = fdim(net)
    assert r.zero_neurons == [(1, 3)] and r.params == 9 and r.rank == r.bound == 7
    assert not r.locally_identifiable and "no local claim" in r.summary()


def test_size_guard_and_bad_input():
    with pytest.raises(LimitExceeded) as e:
        fdim(GENERIC, max_params=5)
    assert e.value.exit_code == 2 and "parameters" in str(e.value)
    with pytest.raises(LimitExceeded):
        fdim(GENERIC, max_entries=100)
    with pytest.raises(InputError):
        fdim([([[1.5]], [0], True), ([[1]], [0], False)])  # floats are refused
    with pytest.raises(InputError, match="slope"):
        fdim([([[1]], [0], F(-1)), ([[1]], [0], False)])
    with pytest.raises(InputError, match="slope"):
        fdim([([[1]], [0], F(1)), ([[1]], [0], False)])
    with pytest.raises(InputError, match="sample"):
        fdim(GENERIC, sample="grid")


def test_model_input_and_the_float_estimate_agree():
    """symeq/numeric/fdim.py (numpy backend, always available) on the float twin agrees with the
    exact rank on generic networks and on a dead neuron's shortfall."""
    from symeq.activations import relu
    from symeq.models import DenseLayer, Model
    from symeq.numbers import matrix
    from symeq.numeric.fdim import functional_dimension
    from symeq.numeric.models import from_exact

    for net in (_rand_net([2, 4, 3, 2], 3, bias=3), [([[1, 2], [3, -1], [0, 0]], [1, -1, -2], True),
                                             ([[1, -1, 2]], [0], False)]):
        m = Model(2, [DenseLayer(matrix(W), b, relu() if a else None) for W, b, a in net])
        ex = fdim(m)
        fl = functional_dimension(from_exact(m, None), rng=0, n_points=400)
        assert ex.exact and fl.rank == ex.rank, (fl.rank, ex.rank)


def test_torch_float_estimate_agrees():
    pytest.importorskip("torch", reason="the torch backend needs torch: pip install 'symeq[torch]'")
    from symeq.activations import relu
    from symeq.models import DenseLayer, Model
    from symeq.numbers import matrix
    from symeq.numeric.fdim import functional_dimension
    from symeq.numeric.models import from_exact

    net = _rand_net([2, 4, 3, 2], 3, bias=3)
    m = Model(2, [DenseLayer(matrix(W), b, relu() if a else None) for W, b, a in net])
    ex = fdim(m)
    fl = functional_dimension(from_exact(m, None), rng=0, n_points=400, backend="torch")
    assert ex.exact and fl.rank == ex.rank


def test_report_says_locally_identifiable():
    from symeq.relu.catalogue import _fdim_lines

    recs = [{"functional_dimension": fdim(GENERIC).to_json()},
            {"functional_dimension": fdim(identity_example()).to_json()}]
    text = "\n".join(_fdim_lines(recs))
    assert "locally identifiable (rank = #params - dim T, proven): 1" in text
    assert "short of #params - dim T: 1 (1 with the exact functional dimension" in text
    assert "1 fully explained by exact kernel directions" in text
