"""The theorem's chain of an attention network is written once (``LayeredShape.chain`` and the attention
kind's ``split_chain``, over the model's numbers): the exact model and its float twin split into the same
heads and the same merged token-wise layer; a layer after attention that is not token-wise is refused by
name in both (the exact model used to fail with a shape error deep in flint), and a full-size layer that
is I_T (x) W with its bias repeated is read as the token-wise layer it is."""

from __future__ import annotations

import numpy as np
import pytest
from flint import fmpq

from symeq.activations import tanh_series
from symeq.errors import InputError
from symeq.layers.attention import NOT_TOKENWISE, AttentionLayer, Head
from symeq.layers.dense import DenseLayer
from symeq.models import Model
from symeq.numeric.models import from_exact
from symeq.numbers import identity, kron, matrix

T, D = 3, 2


def _attention(scoring="lightning", bias=None):
    heads = [Head([[1, 2], [0, 1]], [[1, 0], [1, 1]], [[2, 1], [1, 0]], [[1, -1], [0, 2]]),
             Head([[0, 1], [1, 0]], [[1, 1], [0, 1]], [[1, 0], [0, 3]], [[1, 0], [1, 1]])]
    kw = {} if scoring == "lightning" else {"scoring": scoring, "bias": bias}
    return AttentionLayer(T, heads, **kw)


def _big(W) -> list:
    big = kron(identity(T), matrix(W))
    return [[big[i, j] for j in range(big.ncols())] for i in range(big.nrows())]


def _tokenwise(W, b, act):
    """A token-wise layer: I_T (x) W and b repeated, declared so (``tokens``)."""
    return DenseLayer(_big(W), list(b) * T, act, T)


def _full(W, b, act):
    """The same layer without ``tokens``: the chain must find its structure."""
    return DenseLayer(_big(W), list(b) * T, act)


def _model(after, scoring="lightning", bias=None):
    out = DenseLayer([[1] * (T * D)], [0], None)
    return Model(T * D, [_attention(scoring, bias), after, out])


W1, B1 = [[1, 2], [3, -1]], [fmpq(1, 2), -1]


@pytest.mark.parametrize("scoring, bias", [("lightning", None), ("softmax", [fmpq(1, 3), 2])])
def test_exact_and_float_chains_are_one_split(scoring, bias):
    exact = _model(_tokenwise(W1, B1, tanh_series(3)), scoring, bias)
    ce, cf = exact.chain(), from_exact(exact).chain()
    assert [l.kind for l in ce.layers] == [l.kind for l in cf.layers] == ["heads", "dense", "dense"]
    merged_e, merged_f = ce.layers[1], cf.layers[1]
    assert merged_e.tokens == merged_f.tokens == T
    np.testing.assert_allclose(np.array([[float(v) for v in row] for row in merged_e.weight.tolist()]),
                               merged_f.weight, rtol=0, atol=1e-12)
    np.testing.assert_allclose([float(v) for v in merged_e.bias], merged_f.bias, rtol=0, atol=1e-12)
    x = [fmpq(k - 2, 3) for k in range(T * D)]
    if scoring == "lightning":  # a polynomial: the chain is the same function, exactly
        assert ce(x) == exact(x)
    np.testing.assert_allclose(cf(np.array([float(v) for v in x])), from_exact(exact)(np.array([float(v) for v in x])),
                               rtol=1e-12, atol=1e-12)


def test_a_full_size_token_wise_layer_splits_as_the_token_wise_one():
    a = _model(_tokenwise(W1, B1, tanh_series(3))).chain()
    b = _model(_full(W1, B1, tanh_series(3))).chain()
    assert a.layers[1].weight == b.layers[1].weight and list(a.layers[1].bias) == list(b.layers[1].bias)
    fa, fb = from_exact(_model(_tokenwise(W1, B1, tanh_series(3)))).chain(), \
        from_exact(_model(_full(W1, B1, tanh_series(3)))).chain()
    np.testing.assert_array_equal(fa.layers[1].weight, fb.layers[1].weight)


@pytest.mark.parametrize("breaks", ["weight", "bias"])
def test_a_layer_after_attention_that_is_not_token_wise_is_refused_by_name(breaks):
    layer = _full(W1, B1, tanh_series(3))
    if breaks == "weight":
        layer.weight[0, T * D - 1] = 5  # the first token reads the last one
    else:
        layer.bias[-1] = fmpq(7)  # one token's bias differs
    exact = _model(layer)
    with pytest.raises(InputError, match=NOT_TOKENWISE.replace("(", r"\(").replace(")", r"\)")):
        exact.chain()
    with pytest.raises(InputError, match="must be token-wise"):
        from_exact(exact).chain()
