"""The one derivation walk (symeq/walk.py) behind the exact and the float derivation.

The network is made the way a user makes a C4-equivariant net: the weights are shared by the
regular representation of C4 (a group convolution written as dense layers), drawn at random and
rounded more and more coarsely until neurons tie; the torch version is an ``nn.Sequential``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from flint import fmpq, fmpq_mat

import symeq.layerwise as exact_layerwise
import symeq.numeric.layerwise as numeric_layerwise
import symeq.walk as walk
from symeq.activations import monomial, polynomial, relu, sigmoid_series, tanh_series
from symeq.groups import cyclic_shift
from symeq.layerwise import canonical_rows, derive_latent_actions
from symeq.models import DenseLayer, Model, scramble
from symeq.numbers import mat_rows
from symeq.numeric import compare_with_exact, derive_latent_actions_numeric, from_exact

COEFFS = [0.0, 1.0, 0.0, -0.25]  # t - t^3/4: odd, so K_i is the signed permutations; dyadic, so exact in floats


def c4_arrays(seed: int, step: float, channels: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    """(W, b) per layer of a C4-equivariant net 4 - 4c - 4c - 4, weights rounded to multiples of ``step``.

    C4 shifts the 4 input (and output) coordinates; each hidden layer is ``channels`` copies of
    C4's regular representation.  Row (c, t) of W1 is filter c shifted t times,
    W2[(c', t'), (c, t)] = K[c', c][t - t' mod 4], column (c, t) of W3 is h_c shifted t times;
    hidden biases are constant per channel, the output bias is constant.
    """
    rng = np.random.default_rng(seed)
    P = np.asarray([[float(x) for x in row] for row in mat_rows(cyclic_shift(4).generators[0][0])])
    shift = [np.linalg.matrix_power(P, t) for t in range(4)]

    def draw(*shape):
        return np.round(rng.normal(0.0, 0.6, shape) / step) * step

    filt = draw(channels, 4)
    for c in range(channels):  # a zero filter would be a dead channel: no filter is zero
        if not filt[c].any():
            filt[c, c % 4] = step
    K, h = draw(channels, channels, 4), draw(channels, 4)
    W1 = np.array([filt[c] @ shift[t].T for c in range(channels) for t in range(4)])
    W2 = np.array([[K[c2, c, (t - t2) % 4] for c in range(channels) for t in range(4)]
                   for c2 in range(channels) for t2 in range(4)])
    W3 = np.array([shift[t] @ h[c] for c in range(channels) for t in range(4)]).T
    b1, b2 = np.repeat(draw(channels), 4), np.repeat(draw(channels), 4)
    b3 = np.full(4, step)
    return [(W1, b1), (W2, b2), (W3, b3)]


def exact_model(arrays, activation=None) -> Model:
    """The exact model of the float weights (multiples of a power of two: no rounding)."""
    def q(x):
        f = Fraction(float(x))
        return fmpq(f.numerator, f.denominator)

    hidden = activation or polynomial([str(Fraction(c)) for c in COEFFS])
    layers = []
    for i, (W, b) in enumerate(arrays):
        act = hidden if i < len(arrays) - 1 else None
        layers.append(DenseLayer(fmpq_mat(W.shape[0], W.shape[1], [q(x) for x in W.ravel()]), [q(x) for x in b], act))
    return Model(4, layers, cyclic_shift(4), name="C4 group convolution, rounded until neurons tie")


def tie_groups(model) -> int:
    n = 0
    for layer in model.layers[:-1]:
        keys, _ = canonical_rows(mat_rows(layer.weight), layer.bias, layer.activation, affine=True)
        n += len(keys) - len(set(keys))
    return n


def rounded_until_ties(seed: int = 5, activation=None):
    """Round more and more coarsely (1/8, 1/4, 1/2, 1) until some hidden neurons tie (up to the
    activation's latent group); the next seed if none do."""
    for s in range(seed, seed + 20):
        for step in (0.125, 0.25, 0.5, 1.0):
            arrays = c4_arrays(s, step)
            model = exact_model(arrays, activation)
            if tie_groups(model) > 0:
                return arrays, model
    raise AssertionError("no tie at any rounding")


@pytest.fixture
def spy(monkeypatch):
    """Record which matcher each TieWalk / ChainWalk run was given (the one class, patched once)."""
    seen = []
    for cls in (walk.TieWalk, walk.ChainWalk):
        original = cls.run

        def run(self, A, B, _original=original, _cls=cls):
            seen.append((_cls.__name__, type(self.matcher).__name__))
            yield from _original(self, A, B)

        monkeypatch.setattr(cls, "run", run)
    return seen


def test_both_derivations_go_through_the_one_walk(spy):
    _, model = rounded_until_ties()
    model, _ = scramble(model, rng=1)  # hide the channels by a random signed permutation
    assert tie_groups(model) > 0
    d = derive_latent_actions(model)
    assert d.found and d.homomorphism and d.group_order == 4
    exact_runs = list(spy)
    num = derive_latent_actions_numeric(from_exact(model))
    numeric_runs = spy[len(exact_runs):]
    assert num.status == "within tolerance"
    assert ("TieWalk", "_ExactMatcher") in exact_runs
    assert ("TieWalk", "_FloatMatcher") in numeric_runs
    assert ("ChainWalk", "_FloatRows") in numeric_runs
    # the homomorphism along the Cayley graph is the walk's, in both
    assert exact_layerwise.cayley_homomorphism is walk.cayley_homomorphism
    assert numeric_layerwise.cayley_homomorphism is walk.cayley_homomorphism
    assert all(r["equal"] for r in compare_with_exact(num, d))


def test_untied_networks_take_the_chain_walk_in_both(spy):
    arrays = c4_arrays(seed=3, step=1 / 64)
    model = exact_model(arrays)
    assert tie_groups(model) == 0
    assert derive_latent_actions(model).found
    assert derive_latent_actions_numeric(from_exact(model)).status == "within tolerance"
    assert [m for _, m in spy] == ["_ExactRows", "_FloatRows"]


def test_exact_and_float_matchers_agree_on_a_torch_network():
    """The user's nn.Sequential (weights shared by C4's regular representation, rounded until
    neurons tie): the float walk on the torch module and the exact walk on its rational weights
    give the same latent actions, the regular representation on each channel."""
    torch = pytest.importorskip("torch", reason="pip install symeq[numeric] (torch)")
    from symeq.numeric import from_torch
    from symeq.numeric.torch_backend import Polynomial

    arrays, model = rounded_until_ties()
    mods = []
    for i, (W, b) in enumerate(arrays):
        lin = torch.nn.Linear(W.shape[1], W.shape[0]).double()
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W))
            lin.bias.copy_(torch.from_numpy(b))
        mods.append(lin)
        if i < len(arrays) - 1:
            mods.append(Polynomial(COEFFS))
    seq = torch.nn.Sequential(*mods)
    x = torch.randn(5, 4, dtype=torch.float64)
    P = torch.from_numpy(np.asarray([[float(v) for v in r] for r in mat_rows(cyclic_shift(4).generators[0][0])]))
    assert torch.allclose(seq(x @ P.T), seq(x) @ P.T)  # the user's net is C4-equivariant
    num = derive_latent_actions_numeric(from_torch(seq, group=cyclic_shift(4)))
    d = derive_latent_actions(model)
    assert d.found and num.status == "within tolerance" and num.max_residual < 1e-12
    assert all(r["equal"] for r in compare_with_exact(num, d))
    # k(g) is unique (the ties are resolved by outgoing weights): on every hidden layer it is the
    # regular representation on each channel, (rho y)[(c, t)] = y[(c, t - 1)], written here directly
    assert d.unique
    regular = fmpq_mat(12, 12, [1 if k == 4 * (j // 4) + (j - 1) % 4 else 0 for j in range(12) for k in range(12)])
    assert all(rho[0] == regular for rho in d.actions)
    assert all(list(a[0].cols) == [4 * (j // 4) + (j - 1) % 4 for j in range(12)] for a in num.actions)


@pytest.mark.parametrize("act", [relu(), monomial(3), polynomial([0, 1, 1]), sigmoid_series(3), tanh_series(3)],
                         ids=lambda a: a.symmetry)
def test_both_matchers_agree_under_every_latent_group(act, spy):
    """Positive and arbitrary scalings, affine gauges, affine sign flips, signs: ties under each
    activation's own latent group, the structure hidden by a scramble."""
    _, model = rounded_until_ties(activation=act)
    model, _ = scramble(model, rng=1)
    assert tie_groups(model) > 0
    d = derive_latent_actions(model)
    num = derive_latent_actions_numeric(from_exact(model))
    assert d.found and d.homomorphism and num.status == "within tolerance"
    assert all(r["equal"] for r in compare_with_exact(num, d))
    assert ("TieWalk", "_ExactMatcher") in spy


def test_node_budget_is_undetermined_in_both():
    _, model = rounded_until_ties()
    model, _ = scramble(model, rng=1)
    d = derive_latent_actions(model, max_nodes=1)
    assert not d.found and not d.exhaustive
    assert "node budget" in d.failure and "not a proof" in d.failure
    num = derive_latent_actions_numeric(from_exact(model), max_tie_variants=1)
    assert num.status == "undetermined" and not num.within_tolerance
    assert "budget of 1 nodes" in num.undetermined
    assert num.to_json()["status"] == "undetermined"
    # with the default budget both reach a verdict
    assert derive_latent_actions(model).found
    assert derive_latent_actions_numeric(from_exact(model)).status == "within tolerance"


def test_multiset_assignments_is_the_walks_only_search():
    assert not hasattr(exact_layerwise, "_multiset_assignments")
    assert not hasattr(numeric_layerwise, "_multiset_orders")
    assert len(list(walk.multiset_assignments([2, 2], 4))) == 6  # 4! / (2! 2!)
