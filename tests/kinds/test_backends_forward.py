"""The kinds' one forward pass (issue 26, "number backends chosen once"): the exact and the float layer
of each kind run the kind's program (symeq/layers/*.py) over symeq/backends.py; here each is compared
with a reference written out independently in the test (loops over pixels, one point at a time, the
textbook softmax), so a wrong program, a wrong layout conversion or a wrong backend primitive fails."""

from __future__ import annotations

import numpy as np
import pytest
from flint import fmpq, fmpq_mat

from symeq.activations import relu, tanh_series
from symeq.layers.attention import AttentionLayer, Head
from symeq.layers.conv import ConvLayer, ConvProgram, ConvShape
from symeq.layers.dense import DenseLayer
from symeq.layers.attention.floating import NumericAttention, from_exact, score_scale
from symeq.layers.conv.floating import NumericConvLayer, float_twin
from symeq.numeric.models import NumericDenseLayer, numeric_activation


def _q(rng, *shape, den=3):
    return np.array([fmpq(int(v), den) for v in rng.integers(-4, 5, size=int(np.prod(shape)))],
                    dtype=object).reshape(shape)


def _conv_reference(shape: ConvShape, K, b, x):
    """conv_K(x) + b at one point, by loops over output pixels and taps (symeq's (c, h, w) layout)."""
    C, H, W = shape.in_channels, shape.height, shape.width
    oh, ow = shape.out_hw
    img = np.asarray(x, dtype=object).reshape(C, H, W)
    out = np.empty((shape.out_channels, oh, ow), dtype=object)
    for o in range(shape.out_channels):
        for y in range(oh):
            for z in range(ow):
                acc = b[o]
                for c in range(C):
                    for i in range(shape.kh):
                        for j in range(shape.kw):
                            yy, zz = shape.stride * y + i - shape.padding, shape.stride * z + j - shape.padding
                            if shape.padding_mode == "circular":
                                yy, zz = yy % H, zz % W
                            elif not (0 <= yy < H and 0 <= zz < W):
                                continue
                            acc = acc + K[o, c, i, j] * img[c, yy, zz]
                out[o, y, z] = acc
    return out.ravel()


SHAPES = [ConvShape(2, 3, 5, 4, 3, 3, 1, 1), ConvShape(2, 2, 5, 5, 3, 3, 2, 1, "circular"),
          ConvShape(1, 2, 4, 6, 2, 2, 1, 0)]


@pytest.mark.parametrize("shape", SHAPES)
def test_conv_forward_exact_and_float_equal_the_loops(shape):
    rng = np.random.default_rng(1)
    K = _q(rng, shape.out_channels, shape.in_channels, shape.kh, shape.kw)
    b = _q(rng, shape.out_channels)
    act = tanh_series(3)
    layer = ConvLayer(shape, K.tolist(), list(b), act)
    pts = [_q(rng, layer.in_dim, den=5) for _ in range(3)]
    X = fmpq_mat(layer.in_dim, 3, [pts[c][i] for i in range(layer.in_dim) for c in range(3)])
    got = layer.forward(X)
    for c, x in enumerate(pts):
        ref = [act(z) for z in _conv_reference(shape, K, b, x)]
        assert [got[i, c] for i in range(layer.out_dim)] == ref
    flt = float_twin(layer, numeric_activation({"type": "tanh_series", "order": 3}))
    Xf = np.array([[float(v) for v in x] for x in pts])
    ref = np.array([[float(v) for v in _conv_reference(shape, K, b, x)] for x in pts])
    assert np.allclose(flt.pre_activation(Xf), ref, rtol=0, atol=1e-12)
    assert np.allclose(flt.forward(Xf), np.array([[float(got[i, c]) for i in range(layer.out_dim)] for c in range(3)]),
                       rtol=0, atol=1e-9)


def test_conv_program_blocks_of_points_equal_one_block(monkeypatch):
    """The bounded-memory forward (blocks of points) gives the one-block values, in order."""
    rng = np.random.default_rng(2)
    shape = SHAPES[1]
    layer = NumericConvLayer(shape, rng.standard_normal((2, 2, 3, 3)), rng.standard_normal(2), None)
    X = rng.standard_normal((7, layer.in_dim))
    whole = layer.pre_activation(X)
    monkeypatch.setattr(ConvProgram, "BLOCK", 2 * shape.taps * layer.out_dim // shape.out_channels)  # 2 points
    assert np.array_equal(layer.pre_activation(X), whole)
    ref = np.array([_conv_reference(shape, layer.kernel, layer.channel_bias, x) for x in X], dtype=float)
    assert np.allclose(whole, ref, rtol=0, atol=1e-12)


def test_dense_forward_non_polynomial_activation_entrywise():
    """A ReLU has no polynomial program: the exact forward applies it entrywise after the program's W x + b."""
    rng = np.random.default_rng(3)
    W, b = _q(rng, 4, 3), _q(rng, 4)
    layer = DenseLayer(fmpq_mat(W.tolist()), list(b), relu())
    x = _q(rng, 3, den=7)
    got = layer(list(x))
    ref = [max(fmpq(0), sum((W[i, j] * x[j] for j in range(3)), b[i])) for i in range(4)]
    assert got == ref
    assert any(v == 0 for v in got) and any(v > 0 for v in got)  # the ReLU cuts and passes here
    flt = NumericDenseLayer(W.astype(float), b.astype(float), numeric_activation("relu"))
    assert np.allclose(flt.forward(x.astype(float)[None])[0], np.array(ref, dtype=float), rtol=0, atol=1e-12)


def _heads(rng, d=3, dk=2, dv=2, do=3, H=2):
    return [Head(fmpq_mat(_q(rng, d, dk).tolist()), fmpq_mat(_q(rng, d, dk).tolist()),
                 fmpq_mat(_q(rng, d, dv).tolist()), fmpq_mat(_q(rng, dv, do).tolist())) for _ in range(H)]


def _attention_reference(layer, x):
    """sum_h (X Q K^T X^T) X V O at one point, with fmpq_mat products (T x d tokens)."""
    X = fmpq_mat(layer.tokens, layer.d, list(x))
    Z = fmpq_mat(layer.tokens, layer.d_out)
    for h in layer.heads:
        Z += (X * h.query * h.key.transpose() * X.transpose()) * X * h.value * h.out
    return Z.entries()


def test_attention_forward_exact_heads_and_float_equal_the_formula():
    rng = np.random.default_rng(4)
    T = 3
    layer = AttentionLayer(T, _heads(rng))
    pts = [_q(rng, T * layer.d, den=2) for _ in range(2)]
    X = fmpq_mat(layer.in_dim, 2, [pts[c][i] for i in range(layer.in_dim) for c in range(2)])
    got = layer.forward(X)
    for c, x in enumerate(pts):
        assert [got[i, c] for i in range(layer.out_dim)] == _attention_reference(layer, x)
    heads = layer.heads_layer().forward(X)
    for c, x in enumerate(pts):  # [Y_1 ... Y_H] token-major: entry t * H dv + h dv + j
        Xm = fmpq_mat(T, layer.d, list(x))
        Ys = [(Xm * h.scores * Xm.transpose()) * Xm * h.value for h in layer.heads]
        ref = [Ys[k][t, j] for t in range(T) for k in range(len(Ys)) for j in range(Ys[k].ncols())]
        assert [heads[i, c] for i in range(heads.nrows())] == ref
    flt = from_exact(layer)
    Xf = np.array([[float(v) for v in x] for x in pts])
    exact = np.array([[float(got[i, c]) for i in range(layer.out_dim)] for c in range(2)])
    assert np.allclose(flt(Xf), exact, rtol=1e-12, atol=1e-9)
    assert np.allclose(flt.heads_layer().forward(Xf),
                       np.array([[float(heads[i, c]) for i in range(heads.nrows())] for c in range(2)]),
                       rtol=1e-12, atol=1e-9)


def _softmax_reference(layer, x):
    """The textbook softmax attention at one point (numpy, one head at a time, a loop over tokens)."""
    T, d = layer.tokens, layer.d
    X = x.reshape(T, d)
    out = np.zeros((T, layer.d_out))
    for h in range(len(layer.query)):
        S = X @ layer.query[h] @ layer.key[h].T @ X.T
        if layer.score_bias is not None and layer.score_bias[h] is not None:
            S = S + (X @ layer.score_bias[h])[None, :]
        S = S * score_scale(layer)
        for t in range(T):
            w = np.exp(S[t] - S[t].max())
            out[t] += (w / w.sum()) @ X @ layer.value[h] @ layer.out[h]
    if layer.bias is not None:
        out = out + layer.bias
    return out.ravel()


def test_float_softmax_attention_is_the_program_with_the_softmax_hook():
    rng = np.random.default_rng(5)
    T, d, H = 4, 3, 2
    mats = lambda r, c: [rng.standard_normal((r, c)) for _ in range(H)]  # noqa: E731
    layer = NumericAttention(T, mats(d, 2), mats(d, 2), mats(d, 2), mats(2, 3), "softmax", 0.7,
                             [rng.standard_normal(d), None], rng.standard_normal(3))
    X = rng.standard_normal((5, T * d))
    assert np.allclose(layer(X), np.array([_softmax_reference(layer, x) for x in X]), rtol=1e-12, atol=1e-12)
    heads = layer.heads_layer()
    assert heads.kind == "heads" and not heads.backend.exact
    Y = heads.forward(X)
    assert Y.shape == (5, T * H * 2)
    O = np.vstack(layer.out)  # the value-space outputs times the stacked O_h (+ bias) are the layer
    Z = Y.reshape(5, T, H * 2) @ O + layer.bias
    assert np.allclose(Z.reshape(5, -1), layer(X), rtol=1e-12, atol=1e-12)


def _maxpool_reference(C, H, W, k, s, p, x):
    """torch's MaxPool2d at one point by loops over output pixels and window taps (positions outside the
    image ignored, as torch's -inf padding does)."""
    img = np.asarray(x, dtype=object).reshape(C, H, W)
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    out = []
    for c in range(C):
        for y in range(oh):
            for z in range(ow):
                taps = [img[c, s * y + i - p, s * z + j - p] for i in range(k) for j in range(k)
                        if 0 <= s * y + i - p < H and 0 <= s * z + j - p < W]
                out.append(max(taps))
    return out


@pytest.mark.parametrize("geometry", [(2, 4, 4, 2, 2, 0), (1, 5, 5, 3, 2, 1), (3, 3, 4, 2, 1, 1)])
def test_pooling_forward_exact_float_and_torch_equal_the_loops(geometry):
    """The pooling kinds' one program (PoolProgram over the backends): the exact layer, its float twin
    and the torch backend against the loops, and group pooling against a max over each field."""
    from symeq.backends import Exact, Float64, Modular
    from symeq.layers.pooling import GroupPoolLayer, MaxPool2dLayer, PoolProgram
    from symeq.numeric.models import float_twin

    C, H, W, k, s, p = geometry
    rng = np.random.default_rng(2)
    layer = MaxPool2dLayer((C, H, W), k, s, p)
    pts = [_q(rng, layer.in_dim, den=5) for _ in range(3)]
    X = fmpq_mat(layer.in_dim, 3, [pts[t][i] for i in range(layer.in_dim) for t in range(3)])
    Y = layer.forward(X)
    for t in range(3):
        assert [Y[j, t] for j in range(layer.out_dim)] == _maxpool_reference(C, H, W, k, s, p, pts[t])
    F = float_twin(layer).forward(np.array([[int(v.p) / int(v.q) for v in x] for x in pts]))
    assert np.array_equal(F, np.array([[int(v.p) / int(v.q) for v in _maxpool_reference(C, H, W, k, s, p, x)]
                                       for x in pts]))
    Xf = np.array([[int(v.p) / int(v.q) for v in x] for x in pts]).T  # columns, as programs take them
    assert np.array_equal(PoolProgram(Float64(), layer.window_index()).forward(Xf)[0], F.T)
    with pytest.raises(TypeError, match="modulo p"):
        PoolProgram(Modular(), layer.window_index()).forward(np.zeros((layer.in_dim, 1), dtype=np.uint64))
    import importlib.util

    if importlib.util.find_spec("torch") is not None:  # torch missing: the backends above cover the program
        import torch

        from symeq.backends import Torch

        torch_bk = Torch()
        got = PoolProgram(torch_bk, layer.window_index()).forward(torch.tensor(Xf))[0]
        assert np.array_equal(got.numpy(), F.T)
    group = GroupPoolLayer((4, 2, 2), 2)
    x = _q(rng, group.in_dim, den=7)
    Yg = group.forward(fmpq_mat(group.in_dim, 1, list(x))).entries()
    img = x.reshape(2, 2, 2, 2)  # fields x field channels x H x W
    assert Yg == [max(img[f, c, y, z] for c in range(2)) for f in range(2) for y in range(2) for z in range(2)]
    assert Exact().window_max(Exact.from_mat(fmpq_mat(2, 1, [fmpq(1, 3), fmpq(-2)])),
                              np.array([[0, 1]])).tolist() == [[fmpq(1, 3)]]
