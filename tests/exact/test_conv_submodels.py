"""Submodels of conv networks (issue 19): dead and cloned channels, reduction and lift, and the
checker's canonical form of a re-parametrized conv theta'."""

from __future__ import annotations

import json

from flint import fmpq, fmpq_mat

import symeq
from symeq.activations import tanh_series
from symeq_check import check_certificate
from symeq.cli import main
from symeq.io import model_to_json
from symeq.layers.conv import ConvLayer, ConvShape
from symeq.layers.conv.nets import regular_network
from symeq.models import Model
from symeq.submodels import lift, reduce_model

ZERO = [[fmpq(0)] * 3 for _ in range(3)]
JUNK = [[[fmpq(1), fmpq(2), fmpq(0)], [fmpq(0), fmpq(0), fmpq(3)], [fmpq(-1), fmpq(0), fmpq(0)]]]


def _points(n, k=3):
    return fmpq_mat(n, k, [fmpq((7 * i) % 11 - 5, 4) for i in range(n * k)])


def _same_function(a, b, n=25):
    X = _points(n)
    return a.forward(X) == b.forward(X)


def _dead_model(padding2=1):
    """A C4 regular net plus a fifth channel with a kernel no rotation maps to a channel (no action at
    theta) and zero outgoing kernels."""
    layers, group = regular_network("C4", 5, 1, 2, tanh_series(3), rng=3)
    l1, l2, out = layers
    d1 = ConvLayer(ConvShape(1, 5, 5, 5, 3, 3, 1, 1), l1.kernel + [JUNK], l1.channel_bias + [fmpq(1, 3)], l1.activation)
    d2 = ConvLayer(ConvShape(5, 4, 5, 5, 3, 3, 1, padding2), [ko + [ZERO] for ko in l2.kernel], l2.channel_bias,
                   l2.activation)
    return Model(25, [d1, d2, out], group), layers


def test_dead_channel_is_removed_and_the_lift_is_proven_and_checked(tmp_path):
    model, layers = _dead_model()
    r = reduce_model(model)
    assert r.removed == [(1, 4, "inactive channel (zero outgoing kernels)")]
    assert [l.shape.out_channels for l in r.model.layers] == [4, 4, 1]
    assert _same_function(r.model, model)
    v = symeq.verify(model)
    assert v.verdict == "layerwise-equivariant", v.report()
    assert "reduced submodel, lifted back" in v.derivation.method
    theta2 = v.model
    assert [l.shape.out_channels for l in theta2.layers] == [5, 4, 1] and _same_function(theta2, model)
    assert list(v.actions[0][0].source) == [1, 2, 3, 0, 4]  # the inactive channel is fixed
    path, cert = tmp_path / "dead.json", tmp_path / "dead.cert.json"
    path.write_text(json.dumps(model_to_json(model)))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(path)]) == 0
    # a tampered theta' (one kernel entry of the kept channels changed) is not accepted
    c = json.loads(cert.read_text())
    layer0 = c["parameters"]["layers"][0]
    layer0["kernel"][0][0][0][0] = "7/3" if layer0["kernel"][0][0][0][0] != "7/3" else "1/3"
    rep = check_certificate(c, json.loads(path.read_text()))
    assert rep.accepted is not True


def test_constant_channel_folds_only_where_the_next_layer_reads_the_whole_kernel():
    layers, group = regular_network("C4", 5, 1, 2, tanh_series(3), rng=5)
    l1, l2, out = layers
    for padding, folds in ((1, False), (0, True)):
        # channel 4: zero kernel, bias 1/2: the constant tanh_series(3)(1/2) != 0 at every pixel
        d1 = ConvLayer(ConvShape(1, 5, 5, 5, 3, 3, 1, 1), l1.kernel + [[ZERO]], l1.channel_bias + [fmpq(1, 2)],
                       l1.activation)
        k2 = [ko + [[[fmpq(1, 4)] * 3 for _ in range(3)]] for ko in l2.kernel]
        d2 = ConvLayer(ConvShape(5, 4, 5, 5, 3, 3, 1, padding), k2, l2.channel_bias, l2.activation)
        oh = d2.shape.out_hw[0]
        row = [fmpq(1, 4 * oh * oh)] * (4 * oh * oh)
        m = Model(25, [d1, d2, ConvLayer.from_dense([row], [0], None, (4, oh, oh))], group)
        r = reduce_model(m)
        assert r.changed is folds
        if folds:
            assert r.removed == [(1, 4, "inactive channel (zero incoming kernel)")]
            assert _same_function(r.model, m)


def test_sign_clone_is_merged_with_its_factor_and_lifted():
    """For the odd tanh_series(3), a channel with the negated kernel and bias outputs minus the other."""
    layers, group = regular_network("C4", 5, 1, 1, tanh_series(3), rng=3)
    l1, out = layers
    neg = [[[[-x for x in r] for r in kc] for kc in ko] for ko in l1.kernel]
    c1 = ConvLayer(ConvShape(1, 8, 5, 5, 3, 3, 1, 1), l1.kernel + neg, l1.channel_bias + [-b for b in l1.channel_bias],
                   l1.activation)
    w = out.rows[0]
    row = [x / 3 for x in w] + [-x / 2 for x in w]  # y_{4+c} = -y_c: the net sees (1/3 + 1/2) y_c
    model = Model(25, [c1, ConvLayer.from_dense([row], out.channel_bias, None, (8, 5, 5))], group)
    r = reduce_model(model)
    assert r.merged == [(1, 4, 0), (1, 5, 1), (1, 6, 2), (1, 7, 3)]
    assert [q for _, q in r.groups[0][0]] == [1, -1]
    assert _same_function(r.model, model)
    d = symeq.theorem.derive_latent_actions(r.model, group)
    assert d.found
    theta2, acts = lift(model, r, d.actions)
    assert [l.shape.out_channels for l in theta2.layers] == [8, 1] and _same_function(theta2, model)
    from symeq.layerwise import check_layerwise
    checks, hom, _, msg = check_layerwise(theta2, group, acts)
    assert all(c.holds for c in checks) and hom, msg


def test_mixed_dense_conv_chains_are_left_alone():
    from symeq.models import DenseLayer
    from symeq.numbers import matrix
    layers, group = regular_network("C4", 3, 1, 1, tanh_series(3), rng=3)
    l1, out = layers
    m = Model(9, [DenseLayer(matrix([[1] * 9] * 9), [0] * 9, tanh_series(3)), l1, out])
    assert not reduce_model(m).changed


def test_relu_conv_with_a_dead_channel_is_proven_by_the_submodel_before_regions(tmp_path):
    """ReLU at size: with a junk channel no action exists at theta; the region enumeration would run out of
    its budget, the reduced model's proven layers (lifted back) prove premise and conclusion at once."""
    import time
    from symeq.activations import relu
    layers, group = regular_network("C4", 5, 1, 2, relu(), rng=3)
    l1, l2, out = layers
    d1 = ConvLayer(ConvShape(1, 5, 5, 5, 3, 3, 1, 1), l1.kernel + [JUNK], l1.channel_bias + [fmpq(1, 3)], l1.activation)
    d2 = ConvLayer(ConvShape(5, 4, 5, 5, 3, 3, 1, 1), [ko + [ZERO] for ko in l2.kernel], l2.channel_bias,
                   l2.activation)
    model = Model(25, [d1, d2, out], group)
    t0 = time.monotonic()
    v = symeq.verify(model, timeout=60)
    assert v.verdict == "layerwise-equivariant", v.report()
    assert v.equivariance.method == "layerwise" and time.monotonic() - t0 < 10
    assert _same_function(v.model, model)
    path, cert = tmp_path / "relu.json", tmp_path / "relu.cert.json"
    path.write_text(json.dumps(model_to_json(model)))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(path)]) == 0


def test_relu_scaled_clone_and_dead_channel_checked_by_canonical_forms(tmp_path):
    """ReLU: a field cloned with factor 2 (relu(2z) = 2 relu(z)) plus a junk channel: the lifted theta' is
    accepted by symeq check through the canonical forms (the scaled clone merged with its factor)."""
    from symeq.activations import relu
    layers, group = regular_network("C4", 5, 1, 2, relu(), rng=6)
    l1, l2, out = layers
    two = [[[[2 * x for x in r] for r in kc] for kc in ko] for ko in l1.kernel]
    d1 = ConvLayer(ConvShape(1, 9, 5, 5, 3, 3, 1, 1), l1.kernel + two + [JUNK],
                   l1.channel_bias + [2 * b for b in l1.channel_bias] + [fmpq(1)], l1.activation)
    half = lambda kc, f: [[x * f for x in r] for r in kc]  # noqa: E731
    k2 = [[half(kc, fmpq(1, 2)) for kc in ko] + [half(kc, fmpq(1, 4)) for kc in ko] + [ZERO] for ko in l2.kernel]
    d2 = ConvLayer(ConvShape(9, 4, 5, 5, 3, 3, 1, 1), k2, l2.channel_bias, l2.activation)
    model = Model(25, [d1, d2, out], group)
    assert _same_function(model, Model(25, layers, group))
    path, cert = tmp_path / "m.json", tmp_path / "m.cert.json"
    path.write_text(json.dumps(model_to_json(model)))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    c = json.loads(cert.read_text())
    assert c["parameters"].get("reparametrized") is True
    assert main(["check", str(cert), str(path)]) == 0
