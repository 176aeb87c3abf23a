"""conv_tap_maps (symeq/numeric/project.py) computes each element's tap map from the channel and
pixel parts of the actions, without a loop over channels: it must equal the map read off every
position of the dense matrix, one output channel at a time (the former implementation, kept here
as the reference), on small convolutions of every geometry: rotations and mirrors of square
images, channel permutations with signs, strides, zero and circular padding, and actions that
do not respect the grid (both say None)."""

from __future__ import annotations

import numpy as np
import pytest

from symeq.layers.conv import ConvShape
from symeq.numeric.monomial import MonomialAction
from symeq.numeric.project import _conv_positions, _grid_actions, _tap_of, conv_tap_maps


def reference_tap_maps(shape, chains, li):
    """The map read off every dense position, one output channel at a time."""
    S = shape
    n_taps = S.out_channels * S.in_channels * S.kh * S.kw
    oh, ow = S.out_hw
    if not _grid_actions(S, chains, li):
        return None
    out = []
    for chain in chains:
        P_in, P_out = chain[li], chain[li + 1]
        inv = P_out.inverse()
        cin_inv = np.empty_like(P_in.cols)
        cin_inv[P_in.cols] = np.arange(P_in.n)
        tmap, tsign = np.full(n_taps, -1), np.zeros(n_taps)
        for o in range(S.out_channels):
            rows, cols, taps = _conv_positions(S, o)
            j = cin_inv[cols]
            t2 = _tap_of(S, inv.cols[rows], j)
            sign = inv.vals[rows] * P_in.vals[j]
            if np.any(t2 < 0):
                return None
            first = np.full(n_taps, -1)
            first[taps[::-1]] = np.arange(len(taps))[::-1]
            rep = first[taps]
            if np.any(t2 != t2[rep]) or np.any(sign != sign[rep]):
                return None
            seen = np.unique(taps)
            tmap[seen], tsign[seen] = t2[first[seen]], sign[first[seen]]
        cmap, csign = np.empty(S.out_channels, dtype=np.int64), np.empty(S.out_channels)
        for o in range(S.out_channels):
            r = o * oh * ow + np.arange(oh * ow)
            ch = inv.cols[r] // (oh * ow)
            if np.any(ch != ch[0]) or np.any(inv.vals[r] != inv.vals[r][0]):
                return None
            cmap[o], csign[o] = ch[0], inv.vals[r][0]
        out.append((tmap, tsign, cmap, csign))
    return out


def pixel_perm(h, w, kind, rng):
    """source pixel of each pixel: a rotation, a mirror, the identity, or a random permutation."""
    y, x = np.divmod(np.arange(h * w), w)
    if kind == "rot":
        return (x * w + (h - 1 - y)) if h == w else np.arange(h * w)
    if kind == "mirror":
        return y * w + (w - 1 - x)
    if kind == "random":
        return rng.permutation(h * w)
    return np.arange(h * w)


def action(channels, h, w, pix, rng, signs):
    src = rng.permutation(channels)
    fac = rng.choice([-1.0, 1.0], channels) if signs else np.ones(channels)
    cols = (src[:, None] * (h * w) + pix[None, :]).ravel()
    return MonomialAction(cols, np.repeat(fac, h * w))


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return len(a) == len(b) and all(np.array_equal(x, y) for u, v in zip(a, b) for x, y in zip(u, v))


CASES = [  # (shape, pixel kind)
    (ConvShape(2, 3, 5, 5, 3, 3, 1, 1), "rot"),
    (ConvShape(3, 2, 4, 4, 3, 3, 1, 1), "mirror"),
    (ConvShape(2, 2, 6, 6, 3, 3, 2, 1), "rot"),
    (ConvShape(1, 4, 5, 5, 3, 3, 1, 1, "circular"), "rot"),
    (ConvShape(2, 3, 5, 5, 2, 2, 1, 0), "rot"),
    (ConvShape(2, 2, 4, 6, 3, 3, 1, 1), "mirror"),
    (ConvShape(2, 2, 5, 5, 3, 3, 1, 1), "identity"),
    (ConvShape(2, 2, 4, 4, 3, 3, 1, 1), "random"),
    (ConvShape(2, 2, 3, 3, 5, 5, 1, 2), "rot"),
    (ConvShape(2, 2, 2, 2, 5, 5, 1, 2), "rot"),   # the outer taps have no position: -1 with sign 0
    (ConvShape(2, 2, 2, 2, 3, 3, 1, 1, "circular"), "rot"),
]


@pytest.mark.parametrize("signs", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_vectorised_equals_positions(case, signs):
    S, kind = CASES[case]
    rng = np.random.default_rng(case + 10 * signs)
    oh, ow = S.out_hw
    chains = []
    for _ in range(3):
        pin = pixel_perm(S.height, S.width, kind, rng)
        pout = pixel_perm(oh, ow, kind, rng) if (oh, ow) != (S.height, S.width) or kind == "random" else pin
        chains.append([action(S.in_channels, S.height, S.width, pin, rng, signs),
                       action(S.out_channels, oh, ow, pout, rng, signs)])
    ref = reference_tap_maps(S, chains, 0)
    got = conv_tap_maps(S, chains, 0)
    assert same(ref, got)
    if S.height == 2 and S.kh == 5:
        assert got is not None and all(np.any(t < 0) and np.all(s[t < 0] == 0) for t, s, _, _ in got)
    if kind in ("rot", "mirror", "identity") and (oh, ow) == (S.height, S.width) and S.stride == 1:
        assert got is not None  # the cases meant to respect the grid do, so the maps themselves were compared


def test_not_a_channel_pixel_product():
    S = ConvShape(2, 2, 3, 3, 3, 3, 1, 1)
    rng = np.random.default_rng(0)
    P = MonomialAction(rng.permutation(18), np.ones(18))  # mixes channels and pixels
    Q = action(2, 3, 3, np.arange(9), rng, False)
    assert conv_tap_maps(S, [[P, Q]], 0) is None and reference_tap_maps(S, [[P, Q]], 0) is None


def test_regular_network_maps():
    """The C4 actions of an escnn-style network (the float twin's) give the same maps both ways."""
    from symeq.activations import tanh_series
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model
    from symeq.numeric.layerwise import derive_latent_actions_numeric
    from symeq.numeric.models import from_exact
    from symeq.numeric.project import element_actions

    layers, group = regular_network("C4", 5, 2, 2, tanh_series(3), rng=1)
    net = from_exact(Model(25, layers, group, "c4"))
    der = derive_latent_actions_numeric(net)
    chains = element_actions(net.group, der.actions)
    for li in range(2):
        got = conv_tap_maps(net.layers[li].shape, chains, li)
        assert got is not None and same(reference_tap_maps(net.layers[li].shape, chains, li), got)
        assert len(got) == 4 and any(not np.array_equal(t, np.arange(len(t))) for t, _, _, _ in got)


@pytest.mark.parametrize("shape", [ConvShape(3, 4, 6, 6, 3, 3, 1, 1), ConvShape(2, 3, 7, 5, 3, 3, 2, 1),
                                   ConvShape(2, 2, 5, 5, 3, 3, 1, 2, "circular"), ConvShape(1, 2, 6, 6, 2, 2, 1, 0)])
def test_torch_conv_forward_equals_numpy(shape, monkeypatch):
    """The float conv layer's torch path (large batches) gives numpy's im2col result to rounding."""
    pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    import symeq.layers.conv.floating as nc
    from symeq.layers.conv.numbers import NumpyNumbers
    from symeq.numeric.models import numeric_activation

    rng = np.random.default_rng(3)
    k = rng.standard_normal((shape.out_channels, shape.in_channels, shape.kh, shape.kw))
    layer = nc.NumericConvLayer(shape, k, rng.standard_normal(shape.out_channels), numeric_activation("tanh"))
    X = rng.standard_normal((9, layer.in_dim))
    ref = NumpyNumbers.pre_activation(layer, X)
    monkeypatch.setattr(nc, "TORCH_MIN_WORK", 0)
    monkeypatch.setattr(nc, "TORCH_BLOCK", 2 * layer.out_dim)  # several blocks
    got = layer.pre_activation(X)
    assert got.shape == ref.shape and np.max(np.abs(got - ref)) <= 1e-12 * max(1.0, np.max(np.abs(ref)))
    assert np.allclose(layer.forward(X), np.tanh(ref), rtol=0, atol=1e-12)
