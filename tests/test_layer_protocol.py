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
    want = {"dense": "dense", "affine": "dense", "conv2d": "conv2d", "attention": "attention",
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
    assert layers["conv2d"].label == "conv2d 9->36 (1x3x3->4x3x3, k3x3 s1 p1) tanh_series(3)"  # kernels, not expanded
    assert layers["conv2d"].latent_group_name == tanh_series(3).latent_group
    heads = layers["heads"]
    assert heads.hidden_label == f"attention heads ({heads.heads} heads, d_v = {heads.dv}, {heads.tokens} tokens)"
    assert "GL(d_v)" in heads.latent_group_name
    assert _rounded_dense(relu()).latent_group_name == relu().latent_group
    assert _rounded_dense(monomial(2)).hidden_label == "monomial(2)"


def test_dense_layer_is_still_importable_from_models():
    assert ReexportedDenseLayer is DenseLayer


def test_every_float_layer_satisfies_the_float_protocol():
    from symeq.errors import InputError
    from symeq.numeric.models import from_exact

    exact = random_equivariant_attention(rng=0, dense=[tanh_series(3)])
    n = from_exact(exact)
    layers = list(n.layers) + [n.chain().layers[0]]
    assert {type(l).__name__ for l in layers} == {"AttentionLayer", "DenseLayer", "HeadsLayer"}  # each kind: one class
    for layer, ex in zip(layers, list(exact.layers) + [exact.chain().layers[0]]):
        assert isinstance(layer, LayerBase)
        assert not layer.backend.exact and ex.backend.exact
        if hasattr(layer, "check_action"):   # float layers report errors, they never decide
            with pytest.raises(InputError, match="decides no action"):
                layer.check_action(None, None)
        _assert_kind_is_a_class_attribute(layer)
        assert layer.kind == ex.kind
        assert (layer.in_dim, layer.out_dim) == (ex.in_dim, ex.out_dim)
        assert layer.latent_group_name == ex.latent_group_name
        X = np.random.default_rng(0).standard_normal((2, layer.in_dim))
        assert np.asarray(layer.forward(X)).reshape(2, -1).shape == (2, layer.out_dim)
    assert n.chain().layers[0].label.startswith("lightning heads")
    from symeq.layers.attention.floating import NumericAttention

    soft = NumericAttention(n.layers[0].tokens, n.layers[0].query, n.layers[0].key, n.layers[0].value,
                            n.layers[0].out, "softmax")
    assert soft.kind == "attention" and soft.scoring == "softmax" and soft.label.startswith("softmax attention")
    assert soft.heads_layer().kind == "heads" and soft.heads_layer().scoring == "softmax"


def test_torch_conv_net_reads_into_conv_layers():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    from symeq.numeric.models import from_torch

    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.Tanh(),
                              torch.nn.Flatten(), torch.nn.Linear(36, 1)).double()
    model = from_torch(net, builtin_group("rot90:3", output=1), input_shape=(1, 3, 3))
    assert [l.kind for l in model.layers] == ["conv2d", "conv2d"]   # kernels, never expanded
    assert [l.label for l in model.layers] == ["conv2d 9->36 (1x3x3->4x3x3, k3x3 s1 p1) tanh",
                                               "conv2d 36->1 (4x3x3->1x1x1, k3x3 s1 p0) affine"]
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
    assert not ok and detail.startswith("neuron 1:") and not _agrees_pointwise(layer, swap, wrong)
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


# -- the matching of actions: match_reference / match_action --------------------------------

def _shared_dense(act, n=4, denom=4, seed=7, bias="1/4"):
    """A dense layer whose rows are the n cyclic shifts of one rounded row: weights shared by the
    regular representation of the cyclic group C_n (as a user builds a C_n-equivariant layer)."""
    rng = np.random.default_rng(seed)
    w = [fmpq(int(round(x * denom)), denom) for x in rng.standard_normal(n)]
    W = matrix([[w[(c - r) % n] for c in range(n)] for r in range(n)])
    return DenseLayer(W, [fmpq(1, 4) if bias == "1/4" else fmpq(0)] * n, act)


def _float_layers():
    from symeq.numeric.models import from_exact

    exact = random_equivariant_attention(rng=0, dense=[tanh_series(3)])
    n = from_exact(exact)
    return list(n.layers) + [n.chain().layers[0]]


def test_match_action_is_part_of_the_protocol_for_every_layer_class():
    floats = _float_layers()
    for layer in list(_exact_layers().values()) + floats:
        assert callable(layer.match_action) and callable(layer.match_reference), type(layer)
    assert {type(l).__name__ for l in floats} == {"AttentionLayer", "DenseLayer", "HeadsLayer"}

    class NoMatching:   # every other member of the protocol, but no matching of actions
        kind = "dense"
        in_dim = out_dim = 1
        label = hidden_label = "x"
        latent_group_name = None
        backend = None

        def forward(self, X):
            return X

        def check_action(self, P_in, Q_out, c_in=None, c_out=None):
            return True, ""

    assert not isinstance(NoMatching(), Layer) and not isinstance(NoMatching(), LayerBase)
    NoMatching.match_reference = lambda self, affine=False: None
    NoMatching.match_action = lambda self, P_in, c_in=None, **kw: (False, iter(()))
    assert isinstance(NoMatching(), Layer)


def test_no_partner_lives_in_the_layer_protocol_and_the_walk_re_exports_it():
    from symeq.layers.base import NoPartner
    from symeq.walk import NoPartner as WalkNoPartner

    assert WalkNoPartner is NoPartner


def test_dense_match_action_finds_the_known_permutation_of_a_group_shared_layer():
    layer = _shared_dense(tanh_series(3))
    n = layer.in_dim
    for step in range(1, n):
        P = _channel_shift(n, step)
        # the permutation of the rows, found independently: the one shift with W P = Q W
        known = [Q for Q in (_channel_shift(n, s) for s in range(n)) if Q * layer.weight == layer.weight * P]
        assert len(known) == 1
        tied, candidates = layer.match_action(P, reference=layer.match_reference())
        candidates = list(candidates)
        assert not tied and len(candidates) == 1
        rho, offset = candidates[0]
        assert rho == known[0] and offset is None
        assert layer.check_action(P, rho)[0] and _agrees_pointwise(layer, P, rho)
        # without a precomputed reference the layer computes its own
        assert [r for r, _ in layer.match_action(P)[1]] == known


def test_dense_match_action_rejects_a_wrong_input_action():
    from symeq.layers.base import NoPartner

    layer = _shared_dense(tanh_series(3))
    swap = permutation_matrix([1, 0, 2, 3])   # not in C_4: the rows of W P are no rows of W
    assert not any(layer.check_action(swap, Q)[0] for Q in (_channel_shift(4, s) for s in range(4)))
    with pytest.raises(NoPartner, match="hidden layer 3") as err:
        layer.match_action(swap, li=2)
    assert not err.value.inconclusive   # a proof that no partner exists, not a capped search
    with pytest.raises(ShapeError):
        layer.match_action(identity(3))
    from symeq.errors import InputError

    with pytest.raises(InputError, match="affine"):
        _rounded_dense(None).match_action(identity(3))


def test_dense_match_action_enumerates_clones_that_rounding_made_equal():
    """Two neurons whose weights differ by less than the rounding grid tie after rounding: both
    bijections of the clone pair are candidates, and each one is a valid action."""
    W = np.array([[0.501, -0.249], [0.499, -0.251], [1.25, 0.75]])
    Wr = matrix([[fmpq(int(round(x * 4)), 4) for x in row] for row in W])
    layer = DenseLayer(Wr, ["1/4", "1/4", "-1/2"], tanh_series(3))
    tied, candidates = layer.match_action(identity(2))
    candidates = list(candidates)
    assert tied and len(candidates) == 2
    assert {tuple(r.entries()) for r, _ in candidates} == {tuple(identity(3).entries()),
                                                           tuple(permutation_matrix([1, 0, 2]).entries())}
    assert all(layer.check_action(identity(2), r)[0] for r, _ in candidates)


def test_dense_match_action_affine_sign_flips_carry_offsets():
    """sigmoid(-t) = 1 - sigmoid(t): with affine actions allowed, x -> -x is matched by y -> -y + 1."""
    from symeq.layers.base import NoPartner

    layer = _rounded_dense(sigmoid_series(3), seed=3, bias=False)
    P = -identity(layer.in_dim)
    with pytest.raises(NoPartner):
        layer.match_action(P, affine=False)
    tied, candidates = layer.match_action(P, affine=True, reference=layer.match_reference(affine=True))
    [(rho, offset)] = list(candidates)
    assert not tied and offset is not None and any(x != 0 for x in offset)
    assert layer.check_action(P, rho, None, offset)[0] and _agrees_pointwise(layer, P, rho, None, offset)


def test_float_dense_match_action_agrees_with_the_exact_one_on_a_torch_layer():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    from symeq.numeric.models import from_torch

    exact = _shared_dense(tanh_series(3))
    lin, out = torch.nn.Linear(4, 4).double(), torch.nn.Linear(4, 1).double()
    with torch.no_grad():   # the user copies the group-shared weights into torch
        lin.weight.copy_(torch.tensor([[float(x) for x in row] for row in exact.weight.tolist()], dtype=torch.float64))
        lin.bias.fill_(0.25)
    layer = from_torch(torch.nn.Sequential(lin, torch.nn.Tanh(), out)).layers[0]
    for step in range(4):
        P = _channel_shift(4, step)
        _, [(rho_exact, _)] = exact.match_action(P)
        tied, [(rho, (worst, median, margin, how))] = layer.match_action(np.array(P.tolist(), dtype=float),
                                                                          reference=layer.match_reference())
        assert not tied
        assert np.array_equal(rho.to_dense(), np.array(rho_exact.tolist(), dtype=float))
        assert worst < 1e-12 and median <= worst and margin > 0.1 and "linear assignment" in how
    swap = np.eye(4)[[1, 0, 2, 3]]
    _, [(_, (worst, *_))] = layer.match_action(swap)
    assert worst > 1e-3   # a float match reports its error; it does not decide


def test_heads_match_action_agrees_with_match_heads():
    from symeq.layers.base import NoPartner

    model = random_equivariant_attention(rng=0, dense=[tanh_series(3)])
    heads = model.chain().layers[0]
    assert heads.match_reference() is None
    for P_in, _ in model.group.generators:
        actions, failure = match_heads(heads, P_in)
        tied, candidates = heads.match_action(P_in)
        got = list(candidates)
        assert failure is None and [r for r, _ in got] == actions and all(o is None for _, o in got)
        assert tied == (len(actions) > 1)
    P_in = model.group.generators[0][0]
    bad = permutation_matrix([1, 0] + list(range(2, heads.in_dim)))   # not a token permutation (x) channels
    assert match_heads(heads, bad)[1] is not None
    with pytest.raises(NoPartner, match="attention heads") as err:
        heads.match_action(bad)
    assert not err.value.inconclusive
    with pytest.raises(NoPartner, match="affine") as err:
        heads.match_action(P_in, [fmpq(1)] + [fmpq(0)] * (heads.in_dim - 1))
    assert err.value.inconclusive


def test_numeric_heads_match_action_agrees_with_match_heads_numeric():
    from symeq.errors import InputError
    from symeq.layers.attention.floating import match_heads_numeric
    from symeq.numeric.models import from_exact
    from symeq.numeric.monomial import MonomialAction

    model = from_exact(random_equivariant_attention(rng=0, dense=[tanh_series(3)]))
    heads = model.chain().layers[0]
    for P_in, _ in model.group.generators:
        rho, rel, margin, why = match_heads_numeric(heads, P_in)
        tied, [(got, (worst, median, m, how))] = heads.match_action(P_in)
        assert why is None and not tied
        assert np.array_equal(got.to_dense() if isinstance(got, MonomialAction) else got, rho)
        assert (worst, median, m) == (float(rel.max()), float(np.median(rel)), margin) and "heads" in how
        assert worst < 1e-9
    bad = np.eye(heads.in_dim)[[1, 0] + list(range(2, heads.in_dim))]
    with pytest.raises(InputError, match="attention heads"):
        heads.match_action(bad)


def test_whole_attention_layers_are_matched_through_their_chain():
    from symeq.errors import InputError

    exact = _exact_layers()["attention"]
    with pytest.raises(InputError, match="chain"):
        exact.match_action(identity(exact.in_dim))
    numeric = _float_layers()[0]
    assert numeric.kind == "attention"
    with pytest.raises(InputError, match="chain"):
        numeric.match_action(np.eye(numeric.in_dim))


def _kind_attributes(func: ast.FunctionDef) -> list[int]:
    """Lines in a function that read ``.kind`` (a layer kind told apart)."""
    return [n.lineno for n in ast.walk(func) if isinstance(n, ast.Attribute) and n.attr == "kind"]


def _method(path: Path, cls: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize("rel, cls", [("symeq/layerwise.py", "_ExactRows"), ("symeq/numeric/layerwise.py", "_FloatRows")])
def test_chain_matchers_do_not_tell_layer_kinds_apart(rel, cls):
    for name in ("__init__", "step"):
        method = _method(ROOT / rel, cls, name)
        assert not _kind_attributes(method), f"{rel}: {cls}.{name} reads layer.kind; call layer.match_action"
    assert "match_action" in ast.unparse(_method(ROOT / rel, cls, "step"))


def test_the_kind_attribute_finder_finds_one():
    f = ast.parse('def step(self, i, prev):\n    if self.layers[i].kind == "heads":\n        return 1\n').body[0]
    assert _kind_attributes(f) == [2]
