"""symeq.expand: the one forward polynomial expansion (model maps, fibre ideals, fibre-search equations)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from flint import fmpq, fmpq_mat, fmpq_mpoly_ctx

from symeq.activations import monomial, polynomial, tanh_series
from symeq.budget import Deadline
from symeq.errors import BudgetExceeded, InputError, MonomialLimit
from symeq.expand import expand_forward
from symeq.layers.attention import AttentionLayer, Head
from symeq.models import DenseLayer, Model
from symeq.numbers import mat_rows
from symeq.sizes import limits


def _theta_callbacks(model):
    rows = [mat_rows(l.weight) for l in model.layers]
    calls = []

    def weight(l, j, k):
        calls.append((l, j, k))
        c = rows[l - 1][j][k]
        return c if c != 0 else None

    def bias(l, j):
        c = model.layers[l - 1].bias[j]
        return c if c != 0 else None

    return weight, bias, calls


def _expand(model):
    ctx = fmpq_mpoly_ctx.get(("x", model.input_dim), "degrevlex")
    weight, bias, _ = _theta_callbacks(model)
    return ctx, expand_forward(model, ctx.from_dict({}), list(ctx.gens()), weight, bias)


def _agrees_with_forward(model, points=5, seed=1):
    """The expanded polynomials, evaluated exactly, equal the model's exact forward pass."""
    ctx, f = _expand(model)
    rng = random.Random(seed)
    for _ in range(points):
        x = [fmpq(rng.randint(-7, 7), rng.randint(1, 5)) for _ in range(model.input_dim)]
        want = model.forward(fmpq_mat(model.input_dim, 1, x)).entries()
        got = [p(*x) for p in f]
        assert got == want, (x, got, want)
    return f


def test_expansion_of_a_torch_network_rounded_to_rationals():
    torch = pytest.importorskip("torch", reason="pip install torch")
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))  # sigma between them below
    layers = []
    for i, lin in enumerate(net):
        # weights rounded to two decimals, the way a user makes a float network exact
        W = [[Fraction(round(float(v), 2)).limit_denominator(100) for v in row] for row in lin.weight.detach()]
        b = [Fraction(round(float(v), 2)).limit_denominator(100) for v in lin.bias.detach()]
        layers.append(DenseLayer(W, b, tanh_series(3) if i == 0 else None))
    model = Model(3, layers)
    f = _agrees_with_forward(model)
    assert [p.total_degree() for p in f] == [3, 3]


@pytest.mark.parametrize("act", [monomial(2), polynomial([0, 1, 1]), tanh_series(5)])
def test_expansion_matches_forward_and_polynomial_map(act):
    model = Model(2, [DenseLayer([[1, -2], [3, 0], [0, "1/2"]], [1, 0, -1], act),
                      DenseLayer([[2, -1, 1], [0, 1, 1]], ["1/3", 0], act),
                      DenseLayer([[1, 1]], [0], None)])
    f = _agrees_with_forward(model)
    assert f == model.polynomial_map()


def test_structural_zeros_are_skipped_and_bias_free_means_no_bias():
    model = Model(2, [DenseLayer([[1, 0], [0, 2]], [5, 5], monomial(2)), DenseLayer([[1, 1]], [7], None)])
    ctx = fmpq_mpoly_ctx.get(("x", 2), "degrevlex")
    x, y = ctx.gens()
    weight, bias, calls = _theta_callbacks(model)
    f = expand_forward(model, ctx.from_dict({}), [x, y], weight, None)  # bias=None: a bias-free theta
    assert f == [x ** 2 + 4 * y ** 2]
    assert len(calls) == 2 * 2 + 2  # every entry asked once; the zeros returned None and cost nothing


def test_size_guard_refuses_before_any_weight_is_asked_for():
    model = Model(3, [DenseLayer([[1, 2, 3]] * 4, None, tanh_series(7)), DenseLayer([[1] * 4], None, None)])
    ctx = fmpq_mpoly_ctx.get(("x", 3), "degrevlex")
    weight, bias, calls = _theta_callbacks(model)
    with limits(monomials=20):
        with pytest.raises(MonomialLimit, match="my expansion.*--max-monomials"):
            expand_forward(model, ctx.from_dict({}), list(ctx.gens()), weight, bias, what="my expansion")
    assert calls == []


def test_deadline_is_checked():
    model = Model(2, [DenseLayer([[1, 2], [3, 4]], [1, 1], tanh_series(3)), DenseLayer([[1, 1]], [0], None)])
    ctx = fmpq_mpoly_ctx.get(("x", 2), "degrevlex")
    weight, bias, _ = _theta_callbacks(model)
    with pytest.raises(BudgetExceeded, match="expanding here"):
        expand_forward(model, ctx.from_dict({}), list(ctx.gens()), weight, bias, deadline=Deadline(0),
                       what="expanding here")


def test_attention_and_wrong_inputs_are_clear_errors():
    att = Model(2, [AttentionLayer(2, [Head([[1]], [[1]], [[1]], [[1]])]), DenseLayer([[1, 1]], [0], None)])
    ctx = fmpq_mpoly_ctx.get(("x", 2), "degrevlex")
    with pytest.raises(InputError, match="layer 1 is not a dense layer"):
        expand_forward(att, ctx.from_dict({}), list(ctx.gens()), lambda *a: None)
    dense = Model(2, [DenseLayer([[1, 1]], [0], None)])
    with pytest.raises(InputError, match="takes 2 inputs, got 1"):
        expand_forward(dense, ctx.from_dict({}), [ctx.gens()[0]], lambda *a: 1)


def test_one_expansion_in_the_fibre_code():
    """The fibre ideal and the fibre-wide search expand through symeq.expand, not their own loops."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "symeq"
    for rel in ("fibre/ideal.py", "fibre/search.py"):
        text = (root / rel).read_text()
        assert ".compose(" not in text and "expand_forward(" in text, rel
