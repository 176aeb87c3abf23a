"""Convolutional networks the way users build them: torch Conv2d/Flatten/Linear with weights shared
by C4's regular representation (a lifting convolution, then a group convolution), read by the numeric
twin (``from_torch``) and, rounded to rationals, by the exact reader (``conv2d`` layers in a model file).
Both must recover the regular representation on the hidden layers."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from symeq.cli import main
from symeq.layers.conv import ConvAction, ConvShape, dense_rows
from symeq.errors import InputError, ShapeError
from symeq.groups import builtin_group, image_rotation
from symeq.io import model_from_json
from symeq.numbers import mat_rows

N = 5          # 5 x 5 images
K = 2          # base channels; each becomes 4 rotated copies (C4's regular representation)


def rot(a, k=1):
    """symeq's rot90: a quarter turn clockwise (numpy's rot90 turns counter-clockwise)."""
    return np.rot90(a, -k, axes=(-2, -1))


def c4_kernels(rng, denom=8):
    """Lifting kernels (4K x 1 x 3 x 3) and group-conv kernels (4K x 4K x 3 x 3), rational grid 1/denom.

    Channel (c, r) sits at index 4c + r.  Lifting: psi_{c,r} = rot^r(psi_c).  Group convolution:
    weight[(c', r'), (c, r)] = rot^r'(phi_{c', c, r - r' mod 4}).  Then the input rotation acts on
    the hidden channels by (c, r, p) -> (c, r + 1, rot p): the regular representation of C4 times
    the pixel rotation.
    """
    base1 = rng.integers(-denom, denom + 1, size=(K, 3, 3)) / denom
    base2 = rng.integers(-denom, denom + 1, size=(K, K, 4, 3, 3)) / denom
    k1 = np.zeros((4 * K, 1, 3, 3))
    k2 = np.zeros((4 * K, 4 * K, 3, 3))
    for c in range(K):
        for r in range(4):
            k1[4 * c + r, 0] = rot(base1[c], r)
    for c2 in range(K):
        for r2 in range(4):
            for c in range(K):
                for r in range(4):
                    k2[4 * c2 + r2, 4 * c + r] = rot(base2[c2, c, (r - r2) % 4], r2)
    u = rng.integers(-denom, denom + 1, size=(K, N, N)) / denom
    lin = np.zeros((1, 4 * K * N * N))
    for c in range(K):
        for r in range(4):
            lin[0, (4 * c + r) * N * N:(4 * c + r + 1) * N * N] = rot(u[c], r).ravel()
    return k1, k2, lin


def hidden_action():
    """The expected action of rot90 on a hidden layer (4K channels x N x N) as a permutation list."""
    R = image_rotation(N).generators[0][0]
    pix = [next(i for i in range(N * N) if R[i, j] == 1) for j in range(N * N)]   # pixel j -> pix[j]
    perm = []
    for c in range(K):
        for r in range(4):
            for p in range(N * N):
                perm.append((4 * c + (r + 1) % 4) * N * N + pix[p])
    return perm


def perm_of(M) -> list[int] | None:
    """The permutation j -> i of a permutation matrix with M[i, j] = 1 (None if it is not one)."""
    rows = mat_rows(M)
    n = len(rows)
    out = [None] * n
    for i in range(n):
        for j in range(n):
            v = rows[i][j]
            if v != 0:
                if abs(float(v) - 1) > 1e-6 or out[j] is not None:
                    return None
                out[j] = i
    return out


def test_conv_shape_matches_torch_index_map():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    rng = np.random.default_rng(0)
    for stride, pad in ((1, 0), (1, 1), (2, 1), (2, 0)):
        conv = torch.nn.Conv2d(2, 3, (3, 2), stride=stride, padding=pad, bias=False).double()
        x = torch.tensor(rng.standard_normal((1, 2, 6, 5)))
        want = conv(x).detach().numpy().ravel()
        spec = ConvShape(2, 3, 6, 5, 3, 2, stride=stride, padding=pad)
        W = np.array(dense_rows(spec, conv.weight.detach().numpy(), 0.0))
        assert W.shape == (spec.out_dim, spec.in_dim)
        assert np.allclose(W @ x.numpy().ravel(), want, rtol=0, atol=1e-12)


def test_conv_shape_errors():
    with pytest.raises(ShapeError):
        ConvShape(1, 1, 2, 2, 3, 3)          # kernel larger than the padded image
    with pytest.raises(InputError):
        ConvShape(1, 1, 4, 4, 3, 3, stride=0)
    with pytest.raises(ShapeError):
        dense_rows(ConvShape(1, 1, 4, 4, 3, 3), [[[[1, 2], [3, 4]]]], 0)


def _torch_net(torch, k1, k2, lin):
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4 * K, 3, padding=1), torch.nn.Tanh(),
        torch.nn.Conv2d(4 * K, 4 * K, 3, padding=1), torch.nn.Tanh(),
        torch.nn.Flatten(), torch.nn.Linear(4 * K * N * N, 1),
    ).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor(k1))
        net[0].bias.copy_(torch.tensor([0.125 * (1 + c // 4) for c in range(4 * K)]))
        net[2].weight.copy_(torch.tensor(k2))
        net[2].bias.copy_(torch.tensor([-0.25 * (c // 4) for c in range(4 * K)]))
        net[5].weight.copy_(torch.tensor(lin))
        net[5].bias.fill_(0.5)
    return net


def test_torch_c4_conv_net_numeric_check_recovers_regular_representation(tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    from symeq.numeric.layerwise import derive_latent_actions_numeric
    from symeq.numeric.models import from_torch, save_npz

    k1, k2, lin = c4_kernels(np.random.default_rng(3))
    net = _torch_net(torch, k1, k2, lin)
    x = torch.tensor(np.random.default_rng(4).standard_normal((3, 1, N, N)))
    # the torch net is rotation invariant (a sanity check of the construction, in floats)
    assert torch.allclose(net(x), net(torch.rot90(x, -1, dims=(-2, -1))), atol=1e-12, rtol=0)
    group = builtin_group(f"rot90:{N}", output=1)
    model = from_torch(net, group, input_shape=(1, N, N))
    assert np.allclose(model.forward(x.numpy().reshape(3, -1)).ravel(), net(x).detach().numpy().ravel(),
                       atol=1e-12, rtol=0)
    d = derive_latent_actions_numeric(model)
    assert d.within_tolerance, d.report()
    want = hidden_action()
    for layer in d.actions:
        a = layer[0]   # MonomialAction: entry vals[j] at (j, cols[j]), so cols[j] -> j
        assert np.allclose(a.vals, 1.0, atol=1e-9, rtol=0)
        got = [0] * a.n
        for j, c in enumerate(a.cols):
            got[c] = j
        assert got == want
    # through the command line, the way a user runs it on a saved network
    path = tmp_path / "c4.npz"
    save_npz(model, path)
    assert main(["numeric-check", str(path)]) == 0


def _exact_file(k1, k2, lin) -> dict:
    def q(v):
        return str(Fraction(v).limit_denominator(64))

    def nested(a):
        return [nested(b) for b in a] if isinstance(a, np.ndarray) and a.ndim else q(a)

    act = {"type": "tanh_series", "order": 3}
    return {
        "format": "symeq-model/1", "name": "C4 conv net", "input_dim": N * N,
        "layers": [
            {"type": "conv2d", "input_shape": [1, N, N], "kernel": nested(k1), "padding": 1,
             "bias": [q(0.125 * (1 + c // 4)) for c in range(4 * K)], "activation": act},
            {"type": "conv2d", "kernel": nested(k2), "padding": 1,
             "bias": [q(-0.25 * (c // 4)) for c in range(4 * K)], "activation": act},
            {"type": "flatten"},
            {"type": "dense", "weight": [[q(v) for v in lin[0]]], "bias": ["1/2"], "activation": None},
        ],
        "group": builtin_group(f"rot90:{N}", output=1).to_json(),
    }


def test_exact_conv_file_verify_recovers_regular_representation(tmp_path, capsys):
    import symeq

    k1, k2, lin = c4_kernels(np.random.default_rng(3))
    data = _exact_file(k1, k2, lin)
    model = model_from_json(data)
    assert model.widths == [N * N, 4 * K * N * N, 4 * K * N * N, 1]
    v = symeq.verify(model)
    assert v.verdict == "layerwise-equivariant", v.report()
    want = hidden_action()
    for layer in v.actions:   # sparse: channel action (x) pixel permutation
        assert isinstance(layer[0], ConvAction) and perm_of(layer[0].to_matrix()) == want
    # today's dense path (every conv expanded) and the native path agree
    dense = dense_model(model)
    vd = symeq.verify(dense)
    assert vd.verdict == v.verdict
    for a, b in zip(v.actions, vd.actions):
        assert a[0].to_matrix() == b[0]
    path = tmp_path / "c4.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 0
    cert = tmp_path / "c4.cert.json"
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    assert json.loads(cert.read_text())["latent_actions"][0][0]["kind"] == "channel-pixel"
    # the standalone checker reads the user's own conv2d file and checks the kernels
    assert main(["check", str(cert), str(path)]) == 0
    bad = json.loads(cert.read_text())
    src = bad["latent_actions"][0][0]["channels"]["source"]
    src[0], src[1] = src[1], src[0]
    tampered = tmp_path / "bad.cert.json"
    tampered.write_text(json.dumps(bad))
    assert main(["check", str(tampered), str(path)]) == 1


def dense_model(model):
    """The model with every conv2d layer expanded to its dense layer (today's dense path, to compare with)."""
    from symeq.models import Model

    return Model(model.input_dim, [l.dense() if l.kind == "conv2d" else l for l in model.layers], model.group,
                 model.name)


def test_conv_file_errors(tmp_path):
    k1, k2, lin = c4_kernels(np.random.default_rng(5))
    data = _exact_file(k1, k2, lin)
    bad = json.loads(json.dumps(data))
    del bad["layers"][0]["input_shape"]
    with pytest.raises(InputError, match="input_shape"):
        model_from_json(bad)
    bad = json.loads(json.dumps(data))
    bad["layers"][0]["input_shape"] = [2, N, N]
    with pytest.raises(ShapeError):
        model_from_json(bad)
    bad = json.loads(json.dumps(data))
    bad["layers"][1]["kernel"][0] = bad["layers"][1]["kernel"][0][:3]
    with pytest.raises(ShapeError):
        model_from_json(bad)
    path = tmp_path / "bad.json"
    bad = json.loads(json.dumps(data))
    bad["layers"][0]["stride"] = 0
    path.write_text(json.dumps(bad))
    assert main(["verify", str(path)]) == 2
