"""certify's noise points on wide networks (symeq/certification.py): the forward passes run a block
of points at a time with the same outputs, fewer points are drawn where one network's forward pass
on them would pass NOISE_WORK multiply-adds (the report says how many), and the median comes with
its 95 % order-statistic interval."""

from __future__ import annotations

import numpy as np

import symeq.certification as cm
from symeq.certification import certify
from symeq.groups import mirror
from symeq.numeric import numeric_activation, random_equivariant_numeric, scramble_numeric


def _net(width=8, noise=1e-3):
    G = mirror(4, 4)
    m = random_equivariant_numeric(G, [width, width], numeric_activation("tanh"), rng=0)
    s, _ = scramble_numeric(m, rng=1)
    th = s.parameters()
    return G, s.with_parameters(th * (1.0 + noise * np.random.default_rng(2).standard_normal(th.shape)))


def test_outputs_in_blocks_equal_one_pass(monkeypatch):
    _, net = _net()
    X = np.random.default_rng(0).standard_normal((37, net.input_dim))
    monkeypatch.setattr(cm, "FORWARD_BLOCK", 5 * max(net.widths))  # blocks of 5 points
    got, ref = cm._outputs(net, X), net(X)
    assert got.shape == ref.shape and np.allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_work_per_point_counts_dense_multiply_adds():
    _, net = _net()
    assert cm._work_per_point(net) == sum(a * b for a, b in zip(net.widths[:-1], net.widths[1:]))


def test_noise_points_capped_by_work(monkeypatch):
    G, net = _net()
    w = cm._work_per_point(net)
    monkeypatch.setattr(cm, "NOISE_WORK", 100 * w)
    c = certify(net, G, timeout=120, noise_points=500)
    fd = c.function_distance["noise"]
    assert fd["points"] == 100 and "100 of the 500 points" in c.data_info["noise"]
    lo, hi = fd["median_interval_95"]
    assert lo <= fd["median"] <= hi <= fd["max"]
    c2 = certify(net, G, timeout=120, noise_points=50)  # below the cap: as asked, no note
    assert c2.function_distance["noise"]["points"] == 50 and "asked for" not in c2.data_info["noise"]


def test_noise_cap_keeps_a_minimum(monkeypatch):
    _, net = _net()
    monkeypatch.setattr(cm, "NOISE_WORK", 1)
    assert cm._noise_count(net, 2000) == cm.MIN_NOISE_POINTS
    assert cm._noise_count(net, 10) == 10


def test_median_interval_brackets_the_median():
    rng = np.random.default_rng(1)
    F = rng.standard_normal((401, 3))
    r = cm._relative(F, F * (1 + 0.01 * rng.standard_normal(F.shape)))
    lo, hi = r["median_interval_95"]
    assert lo < r["median"] < hi and r["points"] == 401


def _reference_exact_forward(layer, X):
    """The exact conv layer's forward pass entry by entry (the former loop form), the reference."""
    from flint import fmpq, fmpq_mat

    npts, n, src = X.ncols(), X.nrows(), layer.sources
    xe = X.entries() + [fmpq(0)] * npts
    ent = [xe[(r if r >= 0 else n) * npts + pt] for st in src for r in st for pt in range(npts)]
    npix = len(src[0])
    patches = fmpq_mat(len(src), npix * npts, ent)
    K = fmpq_mat(layer.shape.out_channels, layer.shape.taps, [x for r in layer.rows for x in r])
    Z = (K * patches).entries()
    per = npix * npts
    pre = [z + layer.channel_bias[i // per] for i, z in enumerate(Z)]
    act = layer.activation
    return fmpq_mat(layer.out_dim, npts, pre if act is None else [act(z) for z in pre])


def test_exact_conv_forward_equals_entrywise_reference():
    """The exact conv layer's gather by index and Horner's rule on object arrays give the same
    rationals as the entry-by-entry loops, on zero and circular padding, strides and no activation."""
    import random

    from flint import fmpq, fmpq_mat

    from symeq.activations import tanh_series
    from symeq.layers.conv import ConvLayer, ConvShape

    rng = random.Random(4)
    for shape, act in [(ConvShape(2, 3, 5, 5, 3, 3, 1, 1), tanh_series(3)),
                       (ConvShape(3, 2, 6, 5, 3, 3, 2, 1), tanh_series(5)),
                       (ConvShape(1, 2, 4, 4, 3, 3, 1, 1, "circular"), tanh_series(3)),
                       (ConvShape(2, 2, 4, 4, 2, 2, 1, 0), None)]:
        k = [[[[fmpq(rng.randint(-9, 9), rng.randint(1, 7)) for _ in range(shape.kw)] for _ in range(shape.kh)]
              for _ in range(shape.in_channels)] for _ in range(shape.out_channels)]
        layer = ConvLayer(shape, k, [fmpq(rng.randint(-5, 5), 3) for _ in range(shape.out_channels)], act)
        X = fmpq_mat(layer.in_dim, 3, [fmpq(rng.randint(-10**9, 10**9), rng.randint(1, 99))
                                       for _ in range(layer.in_dim * 3)])
        got, ref = layer.forward(X), _reference_exact_forward(layer, X)
        assert got == ref and got.nrows() == layer.out_dim and got.ncols() == 3


def _reference_sources(S):
    """ConvShape.sources by loops (the former form), the reference."""
    oh, ow = S.out_hw
    out = []
    for c in range(S.in_channels):
        for i in range(S.kh):
            for j in range(S.kw):
                row = []
                for y in range(oh):
                    for x in range(ow):
                        yy, xx = S.stride * y + i - S.padding, S.stride * x + j - S.padding
                        if S.padding_mode == "circular":
                            yy, xx = yy % S.height, xx % S.width
                        ok = 0 <= yy < S.height and 0 <= xx < S.width
                        row.append((c * S.height + yy) * S.width + xx if ok else -1)
                out.append(row)
    return out


def test_sources_by_arrays_equal_loops():
    from symeq.layers.conv import ConvShape

    for S in [ConvShape(2, 3, 5, 5, 3, 3, 1, 1), ConvShape(3, 2, 6, 5, 3, 3, 2, 1), ConvShape(1, 1, 4, 7, 2, 3, 1, 0),
              ConvShape(2, 1, 4, 4, 3, 3, 1, 1, "circular"), ConvShape(1, 2, 5, 5, 5, 5, 2, 2),
              ConvShape(2, 2, 3, 3, 3, 3, 1, 2, "circular")]:
        assert S.sources() == _reference_sources(S)
