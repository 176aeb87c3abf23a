"""The Layer protocol (symeq/layers/base.py): every layer class, exact and float, says its kind,
dimensions, label and latent group the same way; exact layers check an action on themselves; and no
code outside the derivation walks tells layer kinds apart by ``getattr(layer, "kind", ...)``.

The layers are made the way users make them: dense layers written with rounded weights, a C4
lifting convolution read from a model file and from a torch ``nn.Sequential``, and lightning
attention from the generator of equivariant attention models."""

from __future__ import annotations

import ast
import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest
from flint import fmpq, fmpq_mat

from symeq.activations import monomial, relu, sigmoid_series, tanh_series
from symeq.attention import random_equivariant_attention
from symeq.errors import ShapeError
from symeq.groups import builtin_group, image_rotation, permutation_matrix
from symeq.io import model_from_json
from symeq.layers.attention import AttentionLayer, HeadsLayer, match_heads
from symeq.layers.base import KINDS, Layer, LayerBase
from symeq.layers.dense import DenseLayer
from symeq.models import DenseLayer as ReexportedDenseLayer
from symeq.numbers import identity, kron, matrix

ROOT = Path(__file__).resolve().parent.parent


# -- layers as users make them -------------------------------------------------------------

def _rounded_dense(act, seed=0, n=3, m=4, denom=4, bias=True):
    """A dense layer with float weights rounded to a 1/denom grid (as a user rounds a trained net)."""
    rng = np.random.default_rng(seed)
    W = np.round(rng.standard_normal((m, n)) * denom) / denom
    b = np.round(rng.standard_normal(m) * denom) / denom if bias else np.zeros(m)
    return DenseLayer(matrix([[fmpq(int(x * denom), denom) for x in row] for row in W]),
                      [fmpq(int(x * denom), denom) for x in b], act)


def _c4_lifting_file(N=3, denom=8, seed=1) -> dict:
    """A C4 lifting convolution (4 rotated copies of one 3x3 kernel) on N x N images, in the model
    file format: conv2d -> tanh_series(3) -> flatten -> dense."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-denom, denom + 1, size=(3, 3))
    kernel = [[[[f"{int(v)}/{denom}" for v in row] for row in np.rot90(base, -r)]] for r in range(4)]
    lin = rng.integers(-denom, denom + 1, size=(N, N))
    weight = [f"{int(v)}/{denom}" for r in range(4) for v in np.rot90(lin, -r).ravel()]
    return {
        "format": "symeq-model/1", "name": "C4 lifting conv", "input_dim": N * N,
        "layers": [
            {"type": "conv2d", "input_shape": [1, N, N], "kernel": kernel, "padding": 1,
             "bias": ["1/4"] * 4, "activation": {"type": "tanh_series", "order": 3}},
            {"type": "flatten"},
            {"type": "dense", "weight": [weight], "bias": ["1/2"], "activation": None},
        ],
        "group": builtin_group(f"rot90:{N}", output=1).to_json(),
    }


def _channel_shift(channels: int, step: int) -> fmpq_mat:
    """The permutation matrix moving channel r to channel r + step (mod channels)."""
    return permutation_matrix([(r + step) % channels for r in range(channels)])


def _exact_layers():
    conv = model_from_json(_c4_lifting_file())
    att = random_equivariant_attention(rng=0, dense=[tanh_series(3)])
    chain = att.chain()
    return {
        "dense": _rounded_dense(tanh_series(3)),
        "affine": _rounded_dense(None),
        "conv2d": conv.layers[0],
        "attention": att.layers[0],
        "heads": chain.layers[0],
        "token-wise": chain.layers[1],
    }


def _rational_points(n, count=3, seed=0) -> fmpq_mat:
    rng = random.Random(seed)
    return fmpq_mat(n, count, [fmpq(rng.randint(-5, 5), rng.randint(1, 4)) for _ in range(n * count)])


# -- the protocol ---------------------------------------------------------------------------

def _assert_kind_is_a_class_attribute(layer):
    cls = type(layer)
    assert cls.kind == layer.kind and layer.kind in KINDS
    # a plain class attribute, not a constructor argument a caller could set to anything
    assert "kind" not in {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("name", ["dense", "affine", "conv2d", "attention", "heads", "token-wise"])
def test_every_exact_layer_satisfies_the_protocol(name):
    layer = _exact_layers()[name]
    assert isinstance(layer, Layer)
    _assert_kind_is_a_class_attribute(layer)
    want = {"dense": "dense", "affine": "dense", "conv2d": "dense", "attention": "attention",
            "heads": "heads", "token-wise": "dense"}[name]
    assert layer.kind == want
    X = _rational_points(layer.in_dim)
    Y = layer.forward(X)
    assert (Y.nrows(), Y.ncols()) == (layer.out_dim, X.ncols())
    assert f"{layer.in_dim}->{layer.out_dim}" in layer.label
    assert isinstance(layer.hidden_label, str) and layer.hidden_label
    if name == "affine":
        assert layer.latent_group_name is None and layer.hidden_label == "affine"
    else:
        assert isinstance(layer.latent_group_name, str) and layer.latent_group_name


def test_labels_and_latent_groups_say_the_mathematics():
    layers = _exact_layers()
    assert layers["dense"].label == "dense 3->4 tanh_series(3)"
    assert layers["dense"].latent_group_name == tanh_series(3).latent_group
    assert layers["conv2d"].label == "dense 9->36 tanh_series(3)"   # a conv is a dense layer with shared weights
    heads = layers["heads"]
    assert heads.hidden_label == f"attention heads ({heads.heads} heads, d_v = {heads.dv}, {heads.tokens} tokens)"
    assert "GL(d_v)" in heads.latent_group_name
    assert _rounded_dense(relu()).latent_group_name == relu().latent_group
    assert _rounded_dense(monomial(2)).hidden_label == "monomial(2)"


def test_dense_layer_is_still_importable_from_models():
    assert ReexportedDenseLayer is DenseLayer


def test_every_float_layer_satisfies_the_float_protocol():
    from symeq.numeric.attention import NumericAttention, NumericHeads
    from symeq.numeric.models import NumericDenseLayer, from_exact

    exact = random_equivariant_attention(rng=0, dense=[tanh_series(3)])
    n = from_exact(exact)
    layers = list(n.layers) + [n.chain().layers[0]]
    assert {type(l) for l in layers} == {NumericAttention, NumericDenseLayer, NumericHeads}
    for layer, ex in zip(layers, list(exact.layers) + [exact.chain().layers[0]]):
        assert isinstance(layer, LayerBase)
        assert not hasattr(layer, "check_action")   # float layers report errors, they never decide
        _assert_kind_is_a_class_attribute(layer)
        assert layer.kind == ex.kind
        assert (layer.in_dim, layer.out_dim) == (ex.in_dim, ex.out_dim)
        assert layer.latent_group_name == ex.latent_group_name
        X = np.random.default_rng(0).standard_normal((2, layer.in_dim))
        assert np.asarray(layer.forward(X)).reshape(2, -1).shape == (2, layer.out_dim)
    assert n.chain().layers[0].label.startswith("lightning heads")
    soft = NumericAttention(n.layers[0].tokens, n.layers[0].query, n.layers[0].key, n.layers[0].value,
                            n.layers[0].out, "softmax")
    assert soft.kind == "attention" and soft.scoring == "softmax" and soft.label.startswith("softmax attention")
    assert soft.heads_layer().kind == "heads" and soft.heads_layer().scoring == "softmax"


def test_torch_conv_net_reads_into_dense_layers():
    torch = pytest.importorskip("torch")
    from symeq.numeric.models import from_torch

    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.Tanh(),
                              torch.nn.Flatten(), torch.nn.Linear(36, 1)).double()
    model = from_torch(net, builtin_group("rot90:3", output=1), input_shape=(1, 3, 3))
    assert [l.kind for l in model.layers] == ["dense", "dense"]
    assert [l.label for l in model.layers] == ["dense 9->36 tanh", "dense 36->1 affine"]
    assert model.layers[0].latent_group_name == "signed permutations" and model.layers[1].latent_group_name is None
    for layer in model.layers:
        assert isinstance(layer, LayerBase)


# -- check_action: accepts a known action, rejects a wrong one ------------------------------

def _agrees_pointwise(layer, P, Q, c_in=None, c_out=None, seed=0) -> bool:
    """f(P x + c_in) = Q f(x) + c_out at a few exact rational points (an independent spot check)."""
    X = _rational_points(layer.in_dim, 4, seed)
    shift_in = fmpq_mat(layer.in_dim, X.ncols(), [c for c in (c_in or [0] * layer.in_dim) for _ in range(X.ncols())])
    shift_out = fmpq_mat(layer.out_dim, X.ncols(), [c for c in (c_out or [0] * layer.out_dim) for _ in range(X.ncols())])
    return layer.forward(P * X + shift_in) == Q * layer.forward(X) + shift_out


def test_dense_check_action_on_an_equivariant_layer():
    """x -> tanh_series(3)(W x + b) with W, b shared by the swap of two coordinates."""
    W = matrix([["1/2", "-3/4"], ["-3/4", "1/2"], ["5/4", "5/4"]])
    layer = DenseLayer(W, ["1/4", "1/4", "-1/2"], tanh_series(3))
    swap = permutation_matrix([1, 0])
    Q = permutation_matrix([1, 0, 2])
    ok, detail = layer.check_action(swap, Q)
    assert ok and "exactly" in detail and _agrees_pointwise(layer, swap, Q)
    wrong = permutation_matrix([0, 1, 2])
    ok, detail = layer.check_action(swap, wrong)
    assert not ok and detail.startswith("neuron 0") and not _agrees_pointwise(layer, swap, wrong)
    ok, detail = layer.check_action(swap, fmpq_mat(3, 3, [1] * 9))
    assert not ok and "monomial" in detail
    with pytest.raises(ShapeError):
        layer.check_action(identity(3), Q)


@pytest.mark.parametrize("act, q, c_out, holds", [
    (tanh_series(3), -1, None, True),            # odd: sigma(-t) = -sigma(t)
    (tanh_series(3), 1, None, False),
    (sigmoid_series(3), -1, 1, True),            # sigma(-t) = 1 - sigma(t): an affine action
    (sigmoid_series(3), -1, None, False),
    (relu(), -1, None, False),                    # relu admits only positive scalings
])
def test_dense_check_action_sign_flips(act, q, c_out, holds):
    layer = _rounded_dense(act, seed=3, bias=False)
    P, Q = -identity(layer.in_dim), q * identity(layer.out_dim)
    c = None if c_out is None else [fmpq(c_out)] * layer.out_dim
    ok, _ = layer.check_action(P, Q, None, c)
    assert ok == holds
    assert _agrees_pointwise(layer, P, Q, None, c) == holds


def test_dense_check_action_positive_scaling_for_relu():
    layer = _rounded_dense(relu(), seed=2, bias=False)
    two = 2 * identity(layer.in_dim)
    assert layer.check_action(two, 2 * identity(layer.out_dim))[0]
    assert not layer.check_action(two, 3 * identity(layer.out_dim))[0]


def test_affine_check_action_with_offsets():
    layer = DenseLayer(matrix([[1, 1]]), ["1/2"], None)
    swap = permutation_matrix([1, 0])
    assert layer.check_action(swap, identity(1))[0]
    # x -> x + (1, 0) moves the output by +1
    assert layer.check_action(identity(2), identity(1), [fmpq(1), fmpq(0)], [fmpq(1)])[0]
    assert not layer.check_action(identity(2), identity(1), [fmpq(1), fmpq(0)], None)[0]


def test_conv_check_action_is_the_regular_representation():
    """Rotating the image rotates every feature map and shifts the 4 rotated channels by one."""
    layer = model_from_json(_c4_lifting_file()).layers[0]
    R = image_rotation(3).generators[0][0]
    assert layer.check_action(R, kron(_channel_shift(4, 1), R))[0]
    assert _agrees_pointwise(layer, R, kron(_channel_shift(4, 1), R))
    ok, detail = layer.check_action(R, kron(_channel_shift(4, 3), R))
    assert not ok and detail.startswith("neuron")
    assert not layer.check_action(R, kron(identity(4), R))[0]


def test_heads_check_action_accepts_matched_actions_and_rejects_wrong_ones():
    model = random_equivariant_attention(rng=0, dense=[tanh_series(3)])
    heads = model.chain().layers[0]
    assert isinstance(heads, HeadsLayer)
    for P_in, _ in model.group.generators:
        actions, failure = match_heads(heads, P_in)
        assert failure is None and actions
        for Q in actions:
            ok, detail = heads.check_action(P_in, Q)
            assert ok, detail
            assert _agrees_pointwise(heads, P_in, Q)
            ok, detail = heads.check_action(P_in, 2 * Q)   # lambda C^T V_h != V_k B^T
            assert not ok and "head" in detail
        ok, detail = heads.check_action(P_in, actions[0], [fmpq(0)] * heads.in_dim, None)
        assert not ok and "affine" in detail


def test_attention_check_action_decides_the_polynomial_identity():
    model = random_equivariant_attention(rng=1)
    layer = model.layers[0]
    assert isinstance(layer, AttentionLayer) and len(model.layers) == 1
    for P_in, P_out in model.group.generators:
        ok, detail = layer.check_action(P_in, P_out)
        assert ok, detail
        assert _agrees_pointwise(layer, P_in, P_out)
        ok, _ = layer.check_action(P_in, identity(layer.out_dim))
        assert not ok and not _agrees_pointwise(layer, P_in, identity(layer.out_dim))
    with pytest.raises(ShapeError):
        layer.check_action(identity(2), identity(layer.out_dim))
    # the entrywise formula the check expands is the layer's forward map
    X = _rational_points(layer.in_dim, 1, seed=5)
    assert layer._forward_entries(X.entries(), fmpq(0)) == layer.forward(X).entries()


def test_attention_check_action_refuses_a_too_large_expansion_before_it_starts():
    from symeq.errors import MonomialLimit
    from symeq.sizes import limits

    layer = random_equivariant_attention(rng=1).layers[0]
    P = identity(layer.in_dim)
    with limits(monomials=100), pytest.raises(MonomialLimit, match="attention"):
        layer.check_action(P, P)


def test_layerwise_check_layer_is_the_protocol_call():
    from symeq.layerwise import check_layer

    layer = _rounded_dense(tanh_series(3), seed=3, bias=False)
    P, Q = -identity(layer.in_dim), -identity(layer.out_dim)
    assert check_layer(layer, P, Q) == layer.check_action(P, Q)


# -- no hand-made kind switches -------------------------------------------------------------

# no file is exempt: every layer kind is told apart by ``layer.kind``
WALKS: set = set()


def _kind_lookups(path: Path) -> list[int]:
    """Lines with getattr(x, "kind", ...) or hasattr(x, "kind"): a layer kind told apart by hand."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "kind":
            lines.append(node.lineno)
    return lines


def test_no_getattr_kind_switches_outside_the_walks():
    bad = []
    for path in sorted((ROOT / "symeq").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in WALKS:
            bad += [f"{rel}:{line}" for line in _kind_lookups(path)]
    assert not bad, "use layer.kind (symeq/layers/base.py) instead of getattr(layer, 'kind', ...): " + ", ".join(bad)


def test_the_kind_lookup_finder_finds_one(tmp_path):
    f = tmp_path / "x.py"
    f.write_text('def f(layer):\n    return getattr(layer, "kind", "dense") == "heads"\n')
    assert _kind_lookups(f) == [2]
