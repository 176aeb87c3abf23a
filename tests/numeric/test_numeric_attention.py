"""Numeric twin of attention: lightning agrees with the exact layer; softmax is token-permutation
equivariant; the value-space action is recovered with its head permutation (issue: attention)."""

import numpy as np
import pytest

from symeq.attention import factor_kron, head_permutation, patch_mirror, random_equivariant_attention, scramble_attention
from symeq.errors import InputError
from symeq.numbers import fmpq
from symeq.layers.attention.floating import NumericAttention, from_exact, value_space_action


def _float(M):
    return np.array([[float(int(x.p)) / float(int(x.q)) for x in r] for r in M.table()])


@pytest.fixture
def exact():
    return scramble_attention(random_equivariant_attention(patch_mirror(2, 4, 1, 2), tokens=4,
                                                           head_perms=[[1, 0, 2, 3]], rng=3), rng=4)


def test_lightning_matches_exact(exact):
    layer = from_exact(exact.layers[0])
    X = np.random.default_rng(1).integers(-3, 4, size=(3, 8)).astype(float)
    for row, out in zip(X, layer(X)):
        ref = [float(v) for v in exact([fmpq(int(v)) for v in row])]
        assert np.allclose(out, ref, rtol=1e-12, atol=1e-9)


def test_softmax_is_token_permutation_equivariant(exact):
    layer = from_exact(exact.layers[0], scoring="softmax")
    X = np.random.default_rng(2).normal(size=(4, 4, 2))
    perm = [2, 0, 3, 1]
    P = np.eye(4)[perm]
    lhs = layer(np.einsum("ts,nsc->ntc", P, X)).reshape(4, 4, -1)
    rhs = np.einsum("ts,nsc->ntc", P, layer(X).reshape(4, 4, -1))
    assert np.allclose(lhs, rhs)


def test_value_space_action_recovers_the_exact_one(exact):
    import symeq

    v = symeq.verify(exact)
    (M,) = v.actions[0]
    A, _ = exact.group.generators[0]
    P, C = factor_kron(A, 4, 2)
    res = value_space_action(from_exact(exact.layers[0]), _float(P), _float(C))
    assert res["head_permutation"] == head_permutation(M, 4, 4, 2)
    assert res["fit_error"] < 1e-9 and res["projected_error"] < 1e-9
    _, R = factor_kron(M, 4, 8)
    assert np.allclose(res["projected"], _float(R), atol=1e-8)


def test_bad_numeric_attention():
    with pytest.raises(InputError):
        NumericAttention(2, [np.eye(2)], [np.eye(2)], [np.eye(2)], [np.eye(3)])
    with pytest.raises(InputError, match="NaN"):
        NumericAttention(2, [np.full((2, 2), np.nan)], [np.eye(2)], [np.eye(2)], [np.eye(2)])
    with pytest.raises(InputError):
        NumericAttention(2, [np.eye(2)], [np.eye(2)], [np.eye(2)], [np.eye(2)], scoring="cosine")
