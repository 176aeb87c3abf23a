"""The native conv2d layer kind (symeq.layers.conv.ConvLayer): kernels, never expanded.

Everything is compared with the dense expansion (``ConvLayer.dense``), which stays the reference:
forward, the geometry of the pixel action (conv_K(P y) = Pi' conv_K'(y)), and the exact check."""

from __future__ import annotations

import itertools
import random

import pytest
from flint import fmpq, fmpq_mat

from symeq.activations import tanh_series
from symeq.layers.base import Layer, NoPartner
from symeq.layers.conv import (_PLANE, ConvAction, ConvLayer, ConvShape, as_conv_action, grid_transform,
                               transform_pixels)


def _rand_layer(rng, shape, act=None):
    kernel = [[[[fmpq(rng.randint(-4, 4), 4) for _ in range(shape.kw)] for _ in range(shape.kh)]
               for _ in range(shape.in_channels)] for _ in range(shape.out_channels)]
    bias = [fmpq(rng.randint(-3, 3), 2) for _ in range(shape.out_channels)]
    return ConvLayer(shape, kernel, bias, act)


def _rand_channel_action(rng, C, R, h, w):
    src = list(range(C))
    rng.shuffle(src)
    fac = [fmpq(rng.choice([-1, 1])) for _ in range(C)]
    return ConvAction(tuple(src), tuple(fac), tuple(transform_pixels(R, h, w)), (h, w))


GEOMETRIES = [  # (C_in, C_out, H, W, k, stride, padding, mode)
    (2, 3, 5, 5, 3, 1, 1, "zeros"), (1, 2, 6, 6, 3, 1, 0, "zeros"), (2, 2, 7, 7, 3, 2, 1, "zeros"),
    (2, 2, 5, 5, 3, 1, 1, "circular"), (1, 2, 4, 6, 3, 1, 1, "zeros"), (2, 1, 6, 6, 2, 2, 0, "zeros"),
    (1, 2, 6, 6, 3, 2, 1, "zeros"), (2, 2, 4, 4, 3, 1, 2, "circular"),
]


@pytest.mark.parametrize("geom", GEOMETRIES)
def test_forward_matches_dense_expansion(geom):
    rng = random.Random(str(geom))
    Ci, Co, H, W, k, s, p, mode = geom
    layer = _rand_layer(rng, ConvShape(Ci, Co, H, W, k, k, s, p, mode), tanh_series(3))
    X = fmpq_mat(layer.in_dim, 3, [fmpq(rng.randint(-5, 5), 3) for _ in range(layer.in_dim * 3)])
    assert layer.forward(X) == layer.dense().forward(X)
    assert isinstance(layer, Layer) and layer.kind == "conv2d"


def test_forward_matches_torch_circular():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    import numpy as np

    rng = random.Random(1)
    layer = _rand_layer(rng, ConvShape(2, 3, 5, 6, 3, 3, 1, 2, "circular"))
    conv = torch.nn.Conv2d(2, 3, 3, padding=2, padding_mode="circular").double()
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([[[[float(x) for x in r] for r in c] for c in o] for o in layer.kernel]))
        conv.bias.copy_(torch.tensor([float(b) for b in layer.channel_bias]))
    x = np.random.default_rng(0).integers(-4, 5, size=(1, 2, 5, 6)).astype(float)
    want = conv(torch.tensor(x)).detach().numpy().ravel()
    got = layer.forward(fmpq_mat(layer.in_dim, 1, [fmpq(int(v)) for v in x.ravel()])).entries()
    assert np.allclose([float(v) for v in got], want, atol=1e-12, rtol=0)


def test_grid_transforms_are_the_plane_symmetries():
    for R in _PLANE:
        pix = transform_pixels(R, 4, 4)
        assert sorted(pix) == list(range(16)) and grid_transform(pix, 4, 4) == R
    assert transform_pixels((0, -1, 1, 0), 3, 4) is None  # a quarter turn of a non-square grid
    # symeq's rot90 (docs/groups.md): the pixel at row r, column c moves to row c, column n-1-r
    from symeq.groups import image_rotation
    R = image_rotation(3).generators[0][0]
    assert as_conv_action(R, 1, 3, 3).transform == (0, -1, 1, 0)


@pytest.mark.parametrize("geom", GEOMETRIES)
def test_pixel_geometry_identity_against_dense(geom):
    """Where output_pixels says the geometry fits: W P = Pi' W' (W' the transformed kernels), on the dense
    expansion; where it says it does not, the identity fails for a random kernel."""
    rng = random.Random("g" + str(geom))
    Ci, Co, H, W, k, s, p, mode = geom
    layer = _rand_layer(rng, ConvShape(Ci, Co, H, W, k, k, s, p, mode))
    oh, ow = layer.shape.out_hw
    for R in _PLANE:
        if transform_pixels(R, H, W) is None:
            continue
        P = _rand_channel_action(rng, Ci, R, H, W)
        pix = layer.output_pixels(R)
        if pix is None:
            continue
        U = layer.transformed_rows(P, R)
        kern = [[[[U[o][(c * k + i) * k + j] for j in range(k)] for i in range(k)] for c in range(Ci)]
                for o in range(Co)]
        other = ConvLayer(layer.shape, kern, layer.channel_bias)
        Pi = ConvAction(tuple(range(Co)), (fmpq(1),) * Co, pix, (oh, ow))
        assert layer.weight * P.to_matrix() == Pi.to_matrix() * other.weight, (geom, R)


def test_stride_two_on_even_image_breaks_rotation():
    layer = _rand_layer(random.Random(0), ConvShape(1, 2, 6, 6, 3, 3, 2, 1), tanh_series(3))
    assert layer.output_pixels((0, -1, 1, 0)) is None
    assert layer.output_pixels((1, 0, 0, 1)) is not None
    P = ConvAction((0,), (fmpq(1),), tuple(transform_pixels((0, -1, 1, 0), 6, 6)), (6, 6))
    with pytest.raises(NoPartner, match="stride 2") as e:
        layer.match_action(P)
    assert e.value.inconclusive


def _c4_layers(rng, K=2, N=5, act=tanh_series(3)):
    """A lifting conv (1 -> 4K) and a group conv (4K -> 4K) built on C4's regular representation in
    symeq's convention: the hidden action is (c, r, p) -> (c, r + 1, rot p) (channel 4c + r)."""
    def rot(a, t):
        for _ in range(t % 4):  # symeq's rot90: clockwise; new[i][j] = a[n-1-j][i]
            n = len(a)
            a = [[a[n - 1 - j][i] for j in range(n)] for i in range(n)]
        return a

    def rnd():
        return [[fmpq(rng.randint(-4, 4), 4) for _ in range(3)] for _ in range(3)]
    base1 = [rnd() for _ in range(K)]
    base2 = [[[rnd() for _ in range(4)] for _ in range(K)] for _ in range(K)]
    k1 = [[rot(base1[c], r)] for c in range(K) for r in range(4)]
    k2 = [[rot(base2[c2][c][(r - r2) % 4], r2) for c in range(K) for r in range(4)] for c2 in range(K) for r2 in range(4)]
    b1 = [fmpq(1 + c, 8) for c in range(K) for _ in range(4)]
    b2 = [fmpq(-c, 4) for c in range(K) for _ in range(4)]
    l1 = ConvLayer(ConvShape(1, 4 * K, N, N, 3, 3, 1, 1), k1, b1, act)
    l2 = ConvLayer(ConvShape(4 * K, 4 * K, N, N, 3, 3, 1, 1), k2, b2, act)
    return l1, l2


def test_c4_match_and_check_against_dense():
    rng = random.Random(3)
    K, N = 2, 5
    l1, l2 = _c4_layers(rng, K, N)
    rot = tuple(transform_pixels((0, -1, 1, 0), N, N))
    A = ConvAction((0,), (fmpq(1),), rot, (N, N))
    tied, cands = l1.match_action(A)
    (h1, off), = list(cands)
    # channel (c, r) moves to (c, r + 1): (M y)[4c + r] reads y[4c + r - 1]
    want = ConvAction(tuple(4 * c + (r - 1) % 4 for c in range(K) for r in range(4)), (fmpq(1),) * 4 * K, rot, (N, N))
    assert not tied and off is None and h1 == want
    assert l1.check_action(A, h1) == (True, l1.check_action(A, h1)[1])
    (h2, _), = list(l2.match_action(h1)[1])
    assert h2 == want
    # the native check agrees with the dense check, for the right action and for wrong ones
    d1, d2 = l1.dense(), l2.dense()
    for P, Q, layer, dense in ((A, h1, l1, d1), (h1, h2, l2, d2), (A, h1 * h1, l1, d1), (h1, h1.identity(), l2, d2)):
        assert layer.check_action(P, Q)[0] == dense.check_action(P.to_matrix(), Q.to_matrix())[0]
    # a wrong pixel part goes to the sparse neuron check, which agrees with the dense one
    bad = ConvAction(want.source, want.factor, tuple(range(N * N)), (N, N))
    assert l1.check_action(A, bad)[0] is False is d1.check_action(A.to_matrix(), bad.to_matrix())[0]


def test_neuron_check_agrees_with_dense_on_random_monomials():
    rng = random.Random(7)
    layer = _rand_layer(rng, ConvShape(1, 1, 3, 3, 3, 3, 1, 1), None)
    # a kernel symmetric under every plane symmetry, with an invariant bias: affine layer, equivariant
    sym = [[[[fmpq(1), fmpq(2), fmpq(1)], [fmpq(2), fmpq(5), fmpq(2)], [fmpq(1), fmpq(2), fmpq(1)]]]]
    layer = ConvLayer(ConvShape(1, 1, 3, 3, 3, 3, 1, 1), sym, [fmpq(1)], None)
    for R in _PLANE:
        P = ConvAction((0,), (fmpq(1),), tuple(transform_pixels(R, 3, 3)), (3, 3))
        assert layer.check_action(P, P)[0]
        assert layer._neuron_check(P, P, None, None)[0]
        assert layer.dense().check_action(P.to_matrix(), P.to_matrix())[0]
    for _ in range(5):
        perm = list(range(9))
        rng.shuffle(perm)
        P = ConvAction((0,), (fmpq(1),), tuple(perm), (3, 3))
        Q = ConvAction((0,), (fmpq(1),), tuple(transform_pixels((0, -1, 1, 0), 3, 3)), (3, 3))
        got = layer.check_action(P, Q)[0]
        assert got == layer.dense().check_action(P.to_matrix(), Q.to_matrix())[0]


def test_conv_action_algebra():
    rng = random.Random(2)
    for R1, R2 in itertools.product(_PLANE[:4], _PLANE[4:]):
        a = _rand_channel_action(rng, 3, R1, 3, 3)
        b = _rand_channel_action(rng, 3, R2, 3, 3)
        assert (a * b).to_matrix() == a.to_matrix() * b.to_matrix()
        assert as_conv_action(a.to_matrix(), 3, 3, 3) == a
    assert as_conv_action(fmpq_mat([[0, 1], [1, 0]]), 1, 1, 2).pixel == (1, 0)
    assert as_conv_action(fmpq_mat([[1, 1], [0, 1]]), 1, 1, 2) is None


# -- whole networks: escnn's convention, geometry that breaks equivariance, the model file -------------

def _escnn_model(name, n=5, fields=1, hidden=2, seed=1):
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model

    layers, group = regular_network(name, n, fields, hidden, tanh_series(3), rng=seed)
    return Model(n * n, layers, group, f"{name} regular fields")


@pytest.mark.parametrize("name, fields", [("C4", 2), ("D4", 1)])
def test_escnn_style_networks_verify_with_the_regular_actions(name, fields):
    """symeq's rot90 is escnn's rot^-1 = rot^3 (index 3), symeq's mirror escnn's flip (index 4, D4)."""
    import symeq
    from symeq.layers.conv.nets import regular_channel_action

    model = _escnn_model(name, fields=fields)
    v = symeq.verify(model)
    assert v.verdict == "layerwise-equivariant", v.report()
    escnn_element = {"rot90": 3, "mirror": 4}
    for layer_actions in v.actions:
        for gname, a in zip(v.group.names, layer_actions):
            assert isinstance(a, ConvAction)
            assert list(a.source) == regular_channel_action(name, fields, escnn_element[gname])
            assert all(f == 1 for f in a.factor)
            assert a.transform == ((0, -1, 1, 0) if gname == "rot90" else (1, 0, 0, -1))
    # C4: escnn's regular channel r goes to r - 1 under symeq's rot90 ((M y)[r] reads y[r + 1])
    if name == "C4":
        assert list(v.actions[0][0].source[:4]) == [1, 2, 3, 0]


def test_stride_two_on_an_even_image_is_not_equivariant_with_a_witness(tmp_path):
    """A C4-symmetric lifting kernel with stride 2 on 4 x 4 images: the sampling grid is not symmetric,
    f is not invariant, and verify says so with an exact witness (exit 1), which the checker confirms."""
    import json
    from symeq.cli import main
    from symeq.io import model_to_json
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model

    layers, group = regular_network("C4", 4, 1, 1, tanh_series(3), rng=2)
    l1, readout = layers
    strided = ConvLayer(ConvShape(1, 4, 4, 4, 3, 3, 2, 1), l1.kernel, l1.channel_bias, l1.activation)
    assert strided.output_pixels((0, -1, 1, 0)) is None
    row = [fmpq(1, 16)] * (4 * 4)
    model = Model(16, [strided, ConvLayer.from_dense([row], [fmpq(0)], None, (4, 2, 2))], group, "stride 2")
    path = tmp_path / "s2.json"
    path.write_text(json.dumps(model_to_json(model)))
    cert = tmp_path / "s2.cert.json"
    assert main(["verify", str(path), "--certificate", str(cert)]) == 1
    data = json.loads(cert.read_text())
    assert data["verdict"] == "not-equivariant" and data["equivariance"]["witness"]["x"]
    assert main(["check", str(cert), str(path)]) == 0
    # the same network with stride 1 is invariant
    ok = Model(16, layers, group)
    import symeq
    assert symeq.verify(ok).verdict == "layerwise-equivariant"


def _file_with(layers_json, n=25, group="rot90:5"):
    from symeq.groups import builtin_group

    return {"format": "symeq-model/1", "name": "t", "input_dim": n, "layers": layers_json,
            "group": None if group is None else builtin_group(group, output=1).to_json()}


def test_model_file_round_trip_and_strict_keys(tmp_path):
    import json
    from symeq.cli import main
    from symeq.errors import InputError
    from symeq.io import model_from_json, model_to_json

    model = _escnn_model("C4", hidden=1)
    data = model_to_json(model)
    assert [l["type"] for l in data["layers"]] == ["conv2d", "conv2d"]
    back = model_from_json(data)
    assert back.parameters_equal(model) and back.layers[0].kind == "conv2d"
    for key, value, match in (("paddding", 1, 'unknown key "paddding"'), ("dilation", 2, "dilation"),
                              ("groups", 2, "groups"), ("padding_mode", "reflect", "padding_mode")):
        bad = json.loads(json.dumps(data))
        bad["layers"][0][key] = value
        with pytest.raises(InputError, match=match):
            model_from_json(bad)
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(bad))
        assert main(["verify", str(path)]) == 2
    bad = json.loads(json.dumps(data))
    del bad["layers"][0]["bias"]
    with pytest.raises(InputError, match="bias"):
        model_from_json(bad)
    bad = json.loads(json.dumps(data))
    bad["layers"].insert(1, {"type": "group_maxpool"})  # the older spelling: pointed to group_pool
    with pytest.raises(InputError, match="group_pool"):
        model_from_json(bad)


def test_pooling_folds_exactly():
    """conv -> avgpool2d -> conv (padding 0) and conv -> global_avgpool -> dense read as native conv layers
    computing the same function as the pooling done by hand on the dense expansion."""
    from symeq.io import model_from_json

    rng = random.Random(5)
    l1 = _rand_layer(rng, ConvShape(1, 2, 6, 6, 3, 3, 1, 1), tanh_series(3))
    l2 = _rand_layer(rng, ConvShape(2, 1, 3, 3, 2, 2, 1, 0), None)

    def js(l):
        return [[[[str(x) for x in r] for r in kc] for kc in ko] for ko in l.kernel]
    act = {"type": "tanh_series", "order": 3}
    data = _file_with([
        {"type": "conv2d", "input_shape": [1, 6, 6], "kernel": js(l1), "bias": [str(b) for b in l1.channel_bias],
         "padding": 1, "activation": act},
        {"type": "avgpool2d", "kernel_size": 2},
        {"type": "conv2d", "kernel": js(l2), "bias": [str(b) for b in l2.channel_bias], "activation": None},
    ], n=36, group=None)
    model = model_from_json(data)
    assert [l.kind for l in model.layers] == ["conv2d", "conv2d"] and model.layers[1].shape.stride == 2
    X = fmpq_mat(36, 2, [fmpq(rng.randint(-3, 3), 2) for _ in range(72)])
    H = l1.forward(X)
    pooled = []  # 2 x 3 x 3 averages of 2 x 2 blocks, by hand
    for c in range(2):
        for y in range(3):
            for x in range(3):
                pooled.append([sum((H[c * 36 + (2 * y + i) * 6 + 2 * x + j, pt] for i in range(2) for j in range(2)),
                                   fmpq(0)) / 4 for pt in range(2)])
    P = fmpq_mat(18, 2, [v for row in pooled for v in row])
    assert model.forward(X) == l2.forward(P)
    gap = _file_with([
        {"type": "conv2d", "input_shape": [1, 6, 6], "kernel": js(l1), "bias": [str(b) for b in l1.channel_bias],
         "padding": 1, "activation": act},
        {"type": "global_avgpool"}, {"type": "dense", "weight": [["1", "-1/2"]], "bias": ["1/4"], "activation": None},
    ], n=36, group="rot90:6")
    g = model_from_json(gap)
    means = [sum((H[c * 36 + p, pt] for p in range(36)), fmpq(0)) / 36 for c in range(2) for pt in range(2)]
    want = [means[pt] - means[2 + pt] / 2 + fmpq(1, 4) for pt in range(2)]
    assert g.forward(X).entries() == want


# -- the float twin: torch modules, npz, numeric-check -----------------------------------------------

def _torch_from_layers(torch, layers, act=None):
    """An nn.Sequential with the kernels of exact conv layers (the last one, a whole-image kernel, as
    Flatten + Linear): an escnn-style network as torch Conv2d modules."""
    mods = []
    for l in layers[:-1]:
        s = l.shape
        conv = torch.nn.Conv2d(s.in_channels, s.out_channels, s.kh, stride=s.stride, padding=s.padding,
                               padding_mode=s.padding_mode).double()
        with torch.no_grad():
            conv.weight.copy_(torch.tensor([[[[float(x) for x in r] for r in kc] for kc in ko] for ko in l.kernel]))
            conv.bias.copy_(torch.tensor([float(b) for b in l.channel_bias]))
        mods += [conv, (act or torch.nn.Tanh)()]
    last = layers[-1]
    lin = torch.nn.Linear(last.in_dim, last.shape.out_channels).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[float(x) for x in r] for r in last.rows]))
        lin.bias.copy_(torch.tensor([float(b) for b in last.channel_bias]))
    return torch.nn.Sequential(*mods, torch.nn.Flatten(), lin)


@pytest.mark.parametrize("name, fields", [("C4", 2), ("D4", 1)])
def test_escnn_style_torch_networks_float_twin(name, fields, tmp_path):
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    import numpy as np
    from symeq.cli import main
    from symeq.layers.conv.nets import regular_channel_action, regular_network
    from symeq.numeric.layerwise import derive_latent_actions_numeric
    from symeq.numeric.models import from_torch, load_npz, save_npz

    n = 5
    layers, group = regular_network(name, n, fields, 2, tanh_series(3), rng=4)
    net = _torch_from_layers(torch, layers)
    model = from_torch(net, group, input_shape=(1, n, n))
    assert [l.kind for l in model.layers] == ["conv2d"] * 3
    x = np.random.default_rng(0).standard_normal((4, n * n))
    assert np.allclose(model.forward(x), net(torch.tensor(x.reshape(4, 1, n, n))).detach().numpy(), atol=1e-12)
    d = derive_latent_actions_numeric(model)
    assert d.within_tolerance, d.report()
    escnn_element = {"rot90": 3, "mirror": 4}
    npix = n * n
    for acts in d.actions:
        for gname, a in zip(group.names, acts):
            src = regular_channel_action(name, fields, escnn_element[gname])
            R = (0, -1, 1, 0) if gname == "rot90" else (1, 0, 0, -1)
            pix = transform_pixels(R, n, n)
            assert a.cols.tolist() == [src[c] * npix + pix[p] for c in range(len(src)) for p in range(npix)]
            assert np.allclose(a.vals, 1.0)
    path = tmp_path / "net.npz"
    save_npz(model, path)
    with np.load(path) as z:
        assert "conv_0" in z.files and "weight_0" not in z.files   # kernels, not the expanded matrix
    assert np.allclose(load_npz(path).forward(x), model.forward(x))
    assert main(["numeric-check", str(path)]) == 0


def test_numeric_check_reads_the_exact_conv_file(tmp_path):
    import json
    from symeq.cli import main
    from symeq.io import model_to_json

    path = tmp_path / "c4.json"
    path.write_text(json.dumps(model_to_json(_escnn_model("C4"))))
    assert main(["numeric-check", str(path)]) == 0


def test_from_torch_circular_padding_average_pooling_and_max_pooling():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    import numpy as np
    from symeq.errors import InputError
    from symeq.numeric.models import from_torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, padding=1, padding_mode="circular"), torch.nn.ELU(),
                              torch.nn.AvgPool2d(2), torch.nn.Conv2d(3, 2, 2), torch.nn.Tanh(),
                              torch.nn.Flatten(), torch.nn.Linear(2 * 2 * 2, 1)).double()
    model = from_torch(net, None, input_shape=(1, 6, 6))
    assert [l.kind for l in model.layers] == ["conv2d"] * 3 and model.layers[1].shape.stride == 2
    x = np.random.default_rng(1).standard_normal((3, 36))
    assert np.allclose(model.forward(x), net(torch.tensor(x.reshape(3, 1, 6, 6))).detach().numpy(), atol=1e-12)
    gap = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.Tanh(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(3, 2)).double()
    g = from_torch(gap, None, input_shape=(1, 6, 6))
    assert [l.kind for l in g.layers] == ["conv2d"] * 2 and g.layers[1].shape.kh == 6
    assert np.allclose(g.forward(x), gap(torch.tensor(x.reshape(3, 1, 6, 6))).detach().numpy(), atol=1e-12)
    with pytest.raises(InputError, match="ceil_mode"):  # MaxPool2d is read (tests/exact/test_pooling_kinds.py)
        from_torch(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Tanh(), torch.nn.MaxPool2d(2, ceil_mode=True),
                                       torch.nn.Flatten(), torch.nn.Linear(2, 1)), None, input_shape=(1, 6, 6))


def test_relu_conv_network_premise_from_proven_layers():
    """ReLU at size: the layers are derived and checked first; they prove the premise (no regions)."""
    import symeq
    from symeq.activations import relu
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model

    layers, group = regular_network("C4", 12, 2, 2, relu(), rng=1)
    v = symeq.verify(Model(144, layers, group), timeout=60)
    assert v.verdict == "layerwise-equivariant", v.report()
    assert v.equivariance.method != "relu-regions" and all(c.holds for c in v.derivation.layer_checks)


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_cloned_channels_are_enumerated_and_reduced():
    """Two identical regular fields: the channel matching ties, the chain walk tries the bijections inside
    the tie classes; the actions found are checked exactly; the submodel reduction merges the clones."""
    import symeq
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model
    from symeq.submodels import reduce_model

    layers, group = regular_network("C4", 5, 1, 1, tanh_series(3), rng=3)
    l1, out = layers
    k = l1.kernel + l1.kernel
    clone = ConvLayer(ConvShape(1, 8, 5, 5, 3, 3, 1, 1), k, l1.channel_bias * 2, l1.activation)
    row = [x / 2 for x in out.rows[0]] * 2
    model = Model(25, [clone, ConvLayer.from_dense([row], out.channel_bias, None, (8, 5, 5))], group)
    red = reduce_model(model)
    assert red.merged == [(1, 4, 0), (1, 5, 1), (1, 6, 2), (1, 7, 3)] and red.model.layers[0].shape.out_channels == 4
    X = fmpq_mat(25, 2, [fmpq(i % 7 - 3, 4) for i in range(50)])
    assert red.model.forward(X) == model.forward(X)
    v = symeq.verify(model)
    assert v.verdict == "layerwise-equivariant" and not v.derivation.unique, v.report()


@pytest.mark.slow
def test_bench_conv_quick(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_conv.py"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "conv-quick.json").read_text())["rows"]
    assert len(rows) == 2 and all(r["verdict"] == "layerwise-equivariant" for r in rows)
    assert all(r["verify_exit"] == r["check_exit"] == r["numeric_check_exit"] == 0 for r in rows)
    assert all(r["verify_mb"] > 0 for r in rows)


def test_explain_report_names_the_channel_pixel_action(tmp_path):
    pytest.importorskip("matplotlib", reason="the report's picture needs matplotlib: pip install 'symeq[plot]'")
    import json
    from symeq.cli import main
    from symeq.io import model_to_json

    path = tmp_path / "c4.json"
    path.write_text(json.dumps(model_to_json(_escnn_model("C4", hidden=1))))
    assert main(["explain", str(path), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "channel action times a pixel permutation" in text and "quarter turn clockwise" in text


@pytest.mark.parametrize("name, spec", [("C4", "rot90:5"), ("D4", "dihedral:5")])
def test_escnn_style_networks_from_onnx_verify_exactly(name, spec, tmp_path, capsys):
    """torch Conv2d modules -> ONNX -> symeq verify --exact-floats: the regular actions, exactly (the
    real tanh's layers prove the premise)."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("onnx", reason="pip install 'symeq[onnx]'")
    import json
    import warnings
    from symeq.cli import main
    from symeq.layers.conv.nets import regular_channel_action, regular_network

    layers, _ = regular_network(name, 5, 1, 2, tanh_series(3), rng=4)
    net = _torch_from_layers(torch, layers)
    path = tmp_path / "net.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, torch.randn(1, 1, 5, 5, dtype=torch.float64), str(path), dynamo=False)
    cert = tmp_path / "cert.json"
    assert main(["verify", str(path), "--exact-floats", "--group", spec, "--group-output", "1",
                 "--certificate", str(cert)]) == 0
    actions = json.loads(cert.read_text())["latent_actions"]
    for per_layer in actions:
        for t, a in zip((3, 4), per_layer):   # rot90 = escnn rot^3, mirror = escnn flip
            assert a["kind"] == "channel-pixel" and a["channels"]["source"] == regular_channel_action(name, 1, t)


def test_dense_after_conv_becomes_a_whole_image_kernel():
    from symeq.models import DenseLayer, Model

    l1 = _rand_layer(random.Random(0), ConvShape(1, 2, 3, 3, 3, 3, 1, 1), tanh_series(3))
    dense = DenseLayer(fmpq_mat(1, 18, [fmpq(i - 9, 4) for i in range(18)]), [fmpq(1, 2)], None)
    m = Model(9, [l1, dense])
    assert [l.kind for l in m.layers] == ["conv2d", "conv2d"] and m.layers[1].out_shape == (1, 1, 1)
    X = fmpq_mat(9, 2, [fmpq(i % 5 - 2) for i in range(18)])
    assert m.forward(X) == dense.forward(l1.forward(X))


def test_relu_conv_network_refuted_by_an_exact_witness_not_regions():
    """Stride 2 on a 12 x 12 image with ReLU: the layers do not prove the premise, and a random rational
    point refutes it at once (the linear regions of 288 ReLUs are out of reach)."""
    import symeq
    from symeq.activations import relu
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model

    layers, group = regular_network("C4", 12, 2, 1, relu(), rng=2)
    l1 = layers[0]
    st = ConvLayer(ConvShape(1, 8, 12, 12, 3, 3, 2, 1), l1.kernel, l1.channel_bias, l1.activation)
    row = [fmpq(1, 36)] * (8 * 36)
    model = Model(144, [st, ConvLayer.from_dense([row], [fmpq(0)], None, (8, 6, 6))], group)
    v = symeq.verify(model, timeout=60)
    assert v.verdict == "not-equivariant" and v.exit_code == 1
    w = v.equivariance.witness
    A, B = group.generators[w.generator_index]
    X = fmpq_mat(144, 1, list(w.x))
    assert model.forward(A * X) != B * model.forward(X)


@pytest.mark.parametrize("name, fields, hidden, n", [("C4", 1, 2, 5), ("D4", 1, 1, 3)])
def test_dense_path_and_native_path_agree(name, fields, hidden, n):
    """Today's dense path (every conv expanded, ConvLayer.dense) and the native path: same verdict,
    the same actions as matrices, and the same end-to-end function."""
    import symeq
    from symeq.models import Model

    model = _escnn_model(name, n=n, fields=fields, hidden=hidden)
    dense = Model(model.input_dim, [l.dense() for l in model.layers], model.group)
    v, vd = symeq.verify(model), symeq.verify(dense)
    assert v.verdict == vd.verdict == "layerwise-equivariant"
    for a, b in zip(v.actions, vd.actions):
        assert [x.to_matrix() for x in a] == list(b)
    X = fmpq_mat(model.input_dim, 2, [fmpq(i % 7 - 3, 2) for i in range(2 * model.input_dim)])
    assert model.forward(X) == dense.forward(X)


def test_checker_refuses_malformed_and_wrong_channel_pixel_actions(tmp_path):
    import json
    from symeq_check import CheckError, check_certificate
    from symeq.io import model_to_json

    model = _escnn_model("C4", hidden=1)
    import symeq
    v = symeq.verify(model)
    cert, data = v.certificate(), model_to_json(model)
    assert check_certificate(json.loads(json.dumps(cert)), data).accepted
    bad = json.loads(json.dumps(cert))
    bad["latent_actions"][0][0]["pixels"] = list(range(25))          # identity pixels: wrong for rot90
    assert check_certificate(bad, data).accepted is False
    bad = json.loads(json.dumps(cert))
    bad["latent_actions"][0][0]["pixel"] = bad["latent_actions"][0][0].pop("pixels")
    with pytest.raises(CheckError, match='unknown key "pixel"'):
        check_certificate(bad, data)
    bad = json.loads(json.dumps(cert))
    bad["latent_actions"][0][0]["channels"]["factor"][0] = "-1"       # a sign that tanh allows, but wrong here
    assert check_certificate(bad, data).accepted is False


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_fully_convolutional_network_image_to_image():
    """The output is an image too (rho_out = rot90 on the output pixels): a lifting convolution, then a
    convolution from the regular field back to one channel with filters L_h phi."""
    import symeq
    from symeq.groups import builtin_group
    from symeq.layers.conv.nets import _apply, group_elements, regular_network
    from symeq.models import Model

    layers, _ = regular_network("C4", 5, 1, 1, tanh_series(3), rng=6)
    els = group_elements("C4")
    phi = [[fmpq(v, 4) for v in row] for row in ((1, -2, 0), (3, 1, -1), (0, 2, 1))]
    out = ConvLayer(ConvShape(4, 1, 5, 5, 3, 3, 1, 1), [[_apply(els[h], phi) for h in range(4)]], [fmpq(1, 3)], None)
    model = Model(25, [layers[0], out], builtin_group("rot90:5"))
    v = symeq.verify(model)
    assert v.verdict == "layerwise-equivariant", v.report()
    assert v.actions[0][0].source == (1, 2, 3, 0)


def test_dead_channels_are_matched_through_their_tie_class():
    """A field whose kernels are zero (4 constant channels): the matching ties them, the chain walk tries
    the bijections inside the class, and the next layer's kernels pick the regular one."""
    import symeq
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model

    layers, group = regular_network("C4", 5, 2, 2, tanh_series(3), rng=3)
    l1 = layers[0]
    zero = [[[fmpq(0)] * 3 for _ in range(3)]]
    dead = ConvLayer(l1.shape, [kk if o < 4 else zero for o, kk in enumerate(l1.kernel)], l1.channel_bias,
                     l1.activation)
    v = symeq.verify(Model(25, [dead] + layers[1:], group))
    assert v.verdict == "layerwise-equivariant", v.report()
    assert list(v.actions[0][0].source) == [1, 2, 3, 0, 5, 6, 7, 4]


def test_circular_padding_network_verifies_and_is_checked(tmp_path):
    """The same escnn-style C4 network with circular padding: rotations still act on the wrapped grid."""
    import json
    import symeq
    from symeq.cli import main
    from symeq.io import model_to_json
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model

    layers, group = regular_network("C4", 5, 1, 2, tanh_series(3), rng=8)
    circ = [ConvLayer(ConvShape(l.shape.in_channels, l.shape.out_channels, 5, 5, 3, 3, 1, 1, "circular"), l.kernel,
                      l.channel_bias, l.activation) for l in layers[:-1]] + [layers[-1]]
    model = Model(25, circ, group)
    v = symeq.verify(model)
    assert v.verdict == "layerwise-equivariant" and list(v.actions[1][0].source) == [1, 2, 3, 0]
    path, cert = tmp_path / "circ.json", tmp_path / "circ.cert.json"
    path.write_text(json.dumps(model_to_json(model)))
    assert json.loads(path.read_text())["layers"][0]["padding_mode"] == "circular"
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(path)]) == 0


def test_numeric_check_prints_channel_pixel_actions(tmp_path, capsys):
    import json
    from symeq.cli import main
    from symeq.numeric.models import from_exact, save_npz

    path = tmp_path / "d4.npz"
    save_npz(from_exact(_escnn_model("D4", hidden=1)), path)
    assert main(["numeric-check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "channels (1 4 3 2)(5 8 7 6) (x) pixels: quarter turn clockwise of the 5x5 grid" in out
    assert main(["numeric-check", str(path), "--json"]) == 0
    text = capsys.readouterr().out
    data = json.loads(text[text.index("{"):])
    found = [a for a in json.dumps(data).split('"channel_pixel"')[1:]]
    assert found, "the JSON carries the channel-pixel form"
    cp = {(a["layer"], a["generator"]): a["channel_pixel"] for a in data["actions"]}
    rot = cp[(1, "rot90")]  # the npz keeps the generator names (group_names)
    assert rot["cycles"] == "(1 4 3 2)(5 8 7 6)" and rot["transform"] == "quarter turn clockwise"
    assert len(rot["source"]) == 8 and len(rot["pixels"]) == 25 and (rot["height"], rot["width"]) == (5, 5)
    assert all("source" in a and "cycles" in a for a in data["actions"])  # the whole-space keys are kept


def test_checker_leaves_dense_before_conv_unverified_not_rejected():
    """A dense layer before the first convolution: verify handles the mixed chain; the checker's conv
    section does not check it and says so (accepted None), it never rejects a correct certificate."""
    import symeq
    from symeq_check import check_certificate
    from symeq.io import model_to_json
    from symeq.layers.conv.nets import regular_network
    from symeq.models import DenseLayer, Model

    layers, group = regular_network("C4", 3, 1, 1, tanh_series(3), rng=1)
    first = DenseLayer(fmpq_mat([[fmpq(int(i == j)) for j in range(9)] for i in range(9)]), [fmpq(0)] * 9,
                       tanh_series(3))
    model = Model(9, [first] + layers, group)
    v = symeq.verify(model)
    assert v.verdict == "layerwise-equivariant", v.report()
    report = check_certificate(v.certificate(), model_to_json(model))
    assert report.accepted is None and not report.reasons


def test_verify_refuses_an_npz_with_a_specific_message(tmp_path, capsys):
    """symeq verify reads model files and ONNX; the float .npz layout gets exit 2 naming the commands that read it."""
    import numpy as np
    from symeq.cli import main

    path = tmp_path / "net.npz"
    np.savez(path, weight_0=np.ones((1, 2)))
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert "float weights" in err and "numeric-check" in err and "certify" in err
