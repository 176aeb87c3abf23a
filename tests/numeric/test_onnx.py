"""ONNX in and out (symeq/numeric/onnx_io.py), and certify on networks exported by torch.

Needs the onnx extra (and torch for the export tests); skipped without them.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX tests need onnx: pip install 'symeq[onnx]'")

from symeq.cli import main  # noqa: E402
from symeq.groups import mirror  # noqa: E402
from symeq.numeric.generate import random_equivariant_numeric, scramble_numeric  # noqa: E402
from symeq.numeric.models import NumericDenseLayer, NumericModel, numeric_activation, save_npz  # noqa: E402
from symeq.numeric.onnx_io import export_onnx, load_onnx  # noqa: E402


def _torch():
    return pytest.importorskip("torch", reason="exporting from torch needs torch: pip install 'symeq[numeric]'")


def _export(torch, net, shape, path, opset=17):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(*shape, dtype=next(net.parameters()).dtype),), str(path), dynamo=False,
                          opset_version=opset)


def _mlp(acts, seed=0):
    rng = np.random.default_rng(seed)
    widths = [5, 4, 3, 2]
    layers = [NumericDenseLayer(rng.standard_normal((widths[i + 1], widths[i])), rng.standard_normal(widths[i + 1]),
                                None if i == len(widths) - 2 else numeric_activation(acts[i]))
              for i in range(len(widths) - 1)]
    return NumericModel(5, layers)


@pytest.mark.parametrize("acts", [("tanh", "gelu"), ("sigmoid", "relu"),
                                  ({"type": "polynomial", "coeffs": ["1/2", "1", "0", "-1/3"]}, "tanh"),
                                  ("silu", "softplus"), ({"type": "elu", "alpha": "1/2"}, "erf"),
                                  ({"type": "leaky_relu", "slope": "1/5"}, {"type": "gelu", "approximate": "tanh"})])
@pytest.mark.parametrize("float32", [False, True])
def test_export_read_back_with_onnx_reference_and_symeq(tmp_path, acts, float32):
    from onnx.reference import ReferenceEvaluator

    m = _mlp(acts)
    p = tmp_path / "m.onnx"
    export_onnx(m, p, float32=float32)
    onnx.checker.check_model(onnx.load(str(p)))
    x = np.random.default_rng(1).standard_normal((9, 5))
    ref = ReferenceEvaluator(str(p)).run(None, {"x": x.astype(np.float32 if float32 else np.float64)})[0]
    tol = 1e-5 if float32 else 1e-12
    # onnx's reference Erf is not accurate to float64 (~1e-8): the reference run gets 1e-6
    assert np.max(np.abs(ref - m(x))) < max(tol, 1e-6) * max(1.0, np.max(np.abs(m(x))))
    back = load_onnx(p)
    assert back.widths == m.widths
    for a, b in zip(back.layers[:-1], m.layers[:-1]):  # polynomials come back with dyadic coefficients
        assert a.activation.spec == b.activation.spec or a.activation.spec["type"] == b.activation.spec["type"]
    assert np.max(np.abs(back(x) - m(x))) < tol * max(1.0, np.max(np.abs(m(x))))


def test_export_runs_in_torch(tmp_path):
    torch = _torch()
    m = _mlp(("tanh", "gelu"))
    export_onnx(m, tmp_path / "m.onnx")
    back = load_onnx(tmp_path / "m.onnx")
    x = np.random.default_rng(2).standard_normal((7, 5))
    with torch.no_grad():
        y = back.to_torch()(torch.from_numpy(x)).numpy()
    assert np.max(np.abs(y - m(x))) < 1e-12


@pytest.mark.parametrize("opset", [17, 20])  # 17: the erf pattern for GELU; 20: the Gelu operator
def test_torch_export_reads_as_from_torch(tmp_path, opset):
    torch = _torch()
    from symeq.numeric.models import from_torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.GELU(), torch.nn.Linear(4, 3), torch.nn.Tanh(),
                              torch.nn.Linear(3, 2)).double()
    _export(torch, net, (1, 5), tmp_path / "t.onnx", opset)
    a, b = load_onnx(tmp_path / "t.onnx"), from_torch(net)
    assert [l.activation.name if l.activation else None for l in a.layers] == ["gelu", "tanh", None]
    for la, lb in zip(a.layers, b.layers):
        assert np.array_equal(la.weight, lb.weight) and np.array_equal(la.bias, lb.bias)


def test_torch_conv_export(tmp_path):
    torch = _torch()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.Tanh(), torch.nn.Flatten(),
                              torch.nn.Linear(32, 3)).double()
    _export(torch, net, (1, 1, 4, 4), tmp_path / "c.onnx")
    m = load_onnx(tmp_path / "c.onnx")
    assert m.widths == [16, 32, 3]
    x = np.random.default_rng(0).standard_normal((6, 16))
    with torch.no_grad():
        y = net(torch.from_numpy(x).reshape(6, 1, 4, 4)).numpy()
    assert np.max(np.abs(m(x) - y)) < 1e-12


def test_unsupported_operator_exits_2_and_names_it(tmp_path, capsys):
    torch = _torch()
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Softmax(dim=1), torch.nn.Linear(3, 2))
    _export(torch, net, (1, 4), tmp_path / "s.onnx")
    assert main(["numeric-check", str(tmp_path / "s.onnx"), "--group", "global-sign:4"]) == 2
    err = capsys.readouterr().err
    assert "Softmax" in err and "node" in err and "Traceback" not in err


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_truncated_or_corrupted_onnx_exits_2(tmp_path, capsys, damage):
    export_onnx(_mlp(("tanh", "tanh")), tmp_path / "m.onnx")
    raw = (tmp_path / "m.onnx").read_bytes()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes({"truncate": raw[:len(raw) // 3], "garbage": bytes(range(256)) * 4, "empty": b""}[damage])
    for cmd in (["numeric-check", str(bad), "--group", "mirror:1x5"],
                ["certify", str(bad), "--group", "mirror:1x5"]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert "bad.onnx" in err and "Traceback" not in err


def test_verify_reads_onnx_only_with_exact_floats(tmp_path, capsys):
    from symeq.activations import tanh_series
    from symeq.models import random_equivariant_model

    G = mirror(2, 2)
    exact = random_equivariant_model(G, ["regular*2"], tanh_series(3), rng=0)
    export_onnx(exact, tmp_path / "e.onnx")  # small integers: exact in float64
    assert main(["verify", str(tmp_path / "e.onnx"), "--group", "mirror:2x2"]) == 2
    assert "--exact-floats" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "e.onnx"), "--group", "mirror:2x2", "--exact-floats"]) == 0


def test_export_command(tmp_path, capsys):
    from symeq.examples import builtin_example
    from symeq.io import save_model

    save_model(builtin_example(), tmp_path / "m.json")
    assert main(["export", str(tmp_path / "m.json"), "--onnx", str(tmp_path / "m.onnx")]) == 0
    m = load_onnx(tmp_path / "m.onnx")
    assert m.widths == builtin_example().widths
    assert main(["export", str(tmp_path / "m.json")]) == 2


@pytest.mark.parametrize("act,module", [("tanh", "Tanh"), ("gelu", "GELU")])
def test_torch_exported_noisy_mlp_certifies(tmp_path, capsys, act, module):
    """Issue 22 acceptance: the noisy mirror-equivariant MLP exported by torch certifies (exit 0),
    `symeq check` accepts, distance within 3x the noise, and the .onnx gives the same result as the module."""
    torch = _torch()
    import symeq

    G = mirror(4, 4)
    net = random_equivariant_numeric(G, [16, 16], numeric_activation(act), rng=0)
    net, _ = scramble_numeric(net, rng=1)
    th = net.parameters()
    noisy = net.with_parameters(th * (1.0 + 1e-3 * np.random.default_rng(2).standard_normal(th.shape)))
    tnet = noisy.to_torch()
    assert isinstance(tnet[1], getattr(torch.nn, module))
    _export(torch, tnet, (1, 16), tmp_path / "net.onnx")
    out, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    code = main(["certify", str(tmp_path / "net.onnx"), "--group", "mirror:4x4", "--out", str(out),
                 "--certificate", str(cert), "--json"])
    r = json.loads(capsys.readouterr().out)
    assert code == 0 and r["status"] == "certified"
    assert r["distances"]["parameters_max"] <= 3e-3
    assert main(["check", str(cert), str(out)]) == 0
    from_module = symeq.certify(tnet, G)
    assert from_module.status == "certified"
    assert from_module.layer_distances == pytest.approx(r["distances"]["parameters_per_layer"], rel=1e-12)
    save_npz(noisy, tmp_path / "net.npz")
    from_npz = symeq.certify(str(tmp_path / "net.npz"), G)
    assert from_npz.layer_distances == pytest.approx(from_module.layer_distances, rel=1e-12)


def test_escnn_style_conv_net_certifies_to_its_equivariant_neighbour(tmp_path):
    """A conv net whose two channels are the mirror images of each other (the regular representation
    of the mirror on channels), perturbed by float noise 1e-7, certifies at distance ~1e-7."""
    torch = _torch()
    import symeq

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(1, 2, 3, padding=1).double()
    lin = torch.nn.Linear(32, 16).double()
    P_in = np.eye(16)[np.array([r * 4 + (3 - c) for r in range(4) for c in range(4)])]
    P_hid = np.kron(np.array([[0.0, 1.0], [1.0, 0.0]]), P_in)  # swap channels and mirror pixels
    with torch.no_grad():
        k = conv.weight[0, 0].clone()
        conv.weight[1, 0] = torch.flip(k, dims=[1])  # channel 1 = the mirror image of channel 0
        conv.bias[1] = conv.bias[0]
        W = lin.weight.numpy()
        lin.weight.copy_(torch.from_numpy((W + P_in.T @ W @ P_hid) / 2))
        lin.bias.copy_(torch.from_numpy((lin.bias.numpy() + P_in.T @ lin.bias.numpy()) / 2))
        for p in (conv.weight, conv.bias, lin.weight, lin.bias):
            p.add_(1e-7 * torch.randn_like(p))
    net = torch.nn.Sequential(conv, torch.nn.Tanh(), torch.nn.Flatten(), lin)
    c = symeq.certify(net, mirror(4, 4), input_shape=(1, 4, 4))
    assert c.status == "certified"
    assert 1e-9 < c.max_distance < 1e-6
    assert c.model.layers[0].kind == "conv2d"  # the average is again a convolution: kernels kept
    from symeq_check import check_files
    from symeq.io import model_to_json, write_json

    write_json(model_to_json(c.model), tmp_path / "bar.json")
    write_json(c.certificate(), tmp_path / "cert.json")
    assert check_files(tmp_path / "cert.json", tmp_path / "bar.json").accepted


def test_exact_floats_reads_conv_natively_and_verifies(tmp_path, capsys):
    """A conv net with small integer weights, mirror-equivariant by construction (channel 1 is the mirror
    image of channel 0), exported by torch: `verify --exact-floats` proves it (conv2d kind, kernels kept)."""
    torch = _torch()
    from symeq.numeric.onnx_io import load_onnx_exact

    conv = torch.nn.Conv2d(1, 2, 3, padding=1)
    lin = torch.nn.Linear(32, 16)
    P_in = np.eye(16)[np.array([r * 4 + (3 - c) for r in range(4) for c in range(4)])]
    P_hid = np.kron(np.array([[0.0, 1.0], [1.0, 0.0]]), P_in)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        k = torch.from_numpy(rng.integers(-3, 4, (3, 3)).astype(np.float32))
        conv.weight[0, 0], conv.weight[1, 0] = k, torch.flip(k, dims=[1])
        conv.bias.copy_(torch.tensor([1.0, 1.0]))
        W = rng.integers(-3, 4, (16, 32)).astype(np.float64)
        lin.weight.copy_(torch.from_numpy(W + P_in.T @ W @ P_hid).float())
        b = rng.integers(-3, 4, 16).astype(np.float64)
        lin.bias.copy_(torch.from_numpy(b + P_in.T @ b).float())
    net = torch.nn.Sequential(conv, torch.nn.Tanh(), torch.nn.Flatten(), lin)
    _export(torch, net, (1, 1, 4, 4), tmp_path / "c.onnx")
    assert load_onnx_exact(tmp_path / "c.onnx").layers[0].kind == "conv2d"
    assert main(["verify", str(tmp_path / "c.onnx"), "--group", "mirror:4x4", "--exact-floats"]) == 0


def test_numeric_check_reads_torch_onnx(tmp_path, capsys):
    torch = _torch()
    G = mirror(2, 2)
    net = random_equivariant_numeric(G, [4], numeric_activation("tanh"), rng=0)
    _export(torch, net.to_torch(), (1, 4), tmp_path / "n.onnx")
    assert main(["numeric-check", str(tmp_path / "n.onnx"), "--group", "mirror:2x2"]) == 0
    assert "within tolerance" in capsys.readouterr().out


def test_escnn_style_c4_conv_net_certifies_to_its_equivariant_neighbour():
    """C4 (quarter turns of 4x4 images): four channels holding the rotated copies of one kernel (the
    regular representation of C4 on channels, as escnn builds them), the last layer made equivariant by
    its Reynolds average; float noise 1e-7 on every weight; certify finds the exactly equivariant neighbour."""
    torch = _torch()
    import symeq
    from symeq.groups import builtin_group
    from symeq.numeric.layerwise import derive_latent_actions_numeric
    from symeq.numeric.models import from_torch, group_from_exact
    from symeq.numeric.project import element_actions, reynolds_float

    G = builtin_group("rot90:4")
    torch.manual_seed(1)
    conv, lin = torch.nn.Conv2d(1, 4, 3, padding=1).double(), torch.nn.Linear(64, 16).double()
    with torch.no_grad():
        k = conv.weight[0, 0].clone()
        for r in range(4):  # channel r: the kernel turned r quarter turns
            conv.weight[r, 0] = torch.rot90(k, -r, dims=(0, 1))
            conv.bias[r] = conv.bias[0]
    net = torch.nn.Sequential(conv, torch.nn.Tanh(), torch.nn.Flatten(), lin)
    m = from_torch(net, input_shape=(1, 4, 4))
    ng = group_from_exact(G)
    d = derive_latent_actions_numeric(m, ng)
    assert d.residuals[0].residual < 1e-12  # the conv layer is equivariant by construction
    from symeq.numeric.models import NumericDenseLayer, NumericModel

    dense = NumericModel(16, [NumericDenseLayer(l.weight, l.bias, l.activation) for l in m.layers], ng)
    W, b = reynolds_float(dense, element_actions(ng, d.actions))[-1]
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(W))
        lin.bias.copy_(torch.from_numpy(b))
        for p in net.parameters():
            p.add_(1e-7 * torch.randn_like(p))
    c = symeq.certify(net, G, input_shape=(1, 4, 4))
    assert c.status == "certified" and c.verification.verdict == "layerwise-equivariant"
    assert 1e-9 < c.max_distance < 1e-5
    assert c.model.layers[0].kind == "conv2d"


def test_export_stores_the_group_and_certify_needs_no_group_option(tmp_path, capsys):
    G = mirror(4, 4)
    net = random_equivariant_numeric(G, [8], numeric_activation("tanh"), rng=0).perturbed(1e-3, rng=1)
    export_onnx(net, tmp_path / "g.onnx")
    back = load_onnx(tmp_path / "g.onnx")
    assert back.group is not None and np.array_equal(back.group.generators[0][0], net.group.generators[0][0])
    assert main(["certify", str(tmp_path / "g.onnx")]) == 0
    # a tampered group in the metadata is read with strict keys
    proto = onnx.load(str(tmp_path / "g.onnx"))
    proto.metadata_props[0].value = json.dumps({"label": "g", "generators": [{"inptu": [[1]], "output": [[1]]}]})
    onnx.save(proto, str(tmp_path / "bad.onnx"))
    assert main(["certify", str(tmp_path / "bad.onnx")]) == 2
    assert "inptu" in capsys.readouterr().err


@pytest.mark.parametrize("name,spec", [("LeakyReLU", {"type": "leaky_relu", "slope": "1/5"}),
                                       ("ELU", {"type": "elu", "alpha": "1"}), ("Softplus", {"type": "softplus"}),
                                       ("SiLU", {"type": "silu"}), ("Sigmoid", {"type": "sigmoid"}),
                                       ("GELU-tanh", {"type": "gelu", "approximate": "tanh"}),
                                       ("ReLU", {"type": "relu"})])
@pytest.mark.parametrize("opset", [17, 20])
def test_torch_activations_read_from_onnx(tmp_path, name, spec, opset):
    torch = _torch()
    act = {"LeakyReLU": lambda: torch.nn.LeakyReLU(0.2), "GELU-tanh": lambda: torch.nn.GELU(approximate="tanh")}.get(
        name, lambda: getattr(torch.nn, name)())()
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), act, torch.nn.Linear(3, 2)).double()
    _export(torch, net, (1, 4), tmp_path / "a.onnx", opset)
    m = load_onnx(tmp_path / "a.onnx")
    assert m.layers[0].activation.spec == spec
    x = np.random.default_rng(0).standard_normal((5, 4))
    with torch.no_grad():
        assert np.max(np.abs(m(x) - net(torch.from_numpy(x)).numpy())) < 1e-12


@pytest.mark.parametrize("group", ["rot90:4", "mirror:4x4"])
def test_conv_averaged_on_kernels_equals_the_dense_fold(group):
    """The kernel-level Reynolds average (for convolutions too large for their dense matrix) gives exactly
    the theta-bar of the dense average folded back, on escnn-style nets with float noise: same kernels."""
    torch = _torch()
    import symeq
    from symeq.groups import builtin_group

    G = builtin_group(group)
    torch.manual_seed(2)
    rot = group.startswith("rot")

    def g_pow(k, r):  # the group element r applied to a kernel (C4: r quarter turns; mirror: r mod 2 flips)
        return torch.rot90(k, -r, dims=(-2, -1)) if rot else (torch.flip(k, dims=[-1]) if r % 2 else k)

    c1, c2 = torch.nn.Conv2d(1, 4, 3, padding=1).double(), torch.nn.Conv2d(4, 4, 3, padding=1).double()
    mods = [c1, torch.nn.Tanh()]
    with torch.no_grad():
        k = c1.weight[0, 0].clone()
        for r in range(4):
            c1.weight[r, 0] = g_pow(k, r) if rot else g_pow(c1.weight[r - r % 2, 0].clone(), r)
            c1.bias[r] = c1.bias[0]
        if rot:  # a group convolution on the regular representation: K[o, c] = g^o B[c - o]
            B = c2.weight[0].clone()
            for o in range(4):
                for c in range(4):
                    c2.weight[o, c] = g_pow(B[(c - o) % 4], o)
                c2.bias[o] = c2.bias[0]
            mods += [c2, torch.nn.Tanh()]
        for p in list(c1.parameters()) + list(c2.parameters()):
            p.add_(1e-7 * torch.randn_like(p))
    net = torch.nn.Sequential(*mods, torch.nn.Flatten(), torch.nn.Linear(64, 16).double())
    from symeq.numeric.layerwise import derive_latent_actions_numeric
    from symeq.numeric.models import NumericDenseLayer, NumericModel, from_torch, group_from_exact
    from symeq.numeric.project import conv_tap_maps, element_actions, reynolds_conv_exact, reynolds_exact

    m = from_torch(net, group_from_exact(G), input_shape=(1, 4, 4))
    chains = element_actions(m.group, derive_latent_actions_numeric(m).actions)
    dense = NumericModel(16, [NumericDenseLayer(l.weight, l.bias, l.activation) for l in m.layers], m.group)
    folded = reynolds_exact(dense, chains, 9, [l.shape for l in m.layers])
    for li, l in enumerate(m.layers[:-1]):  # the hidden convolutions: same kernels both ways, exactly
        maps = conv_tap_maps(l.shape, chains, li)
        assert maps is not None and folded[li][4] is not None
        Kq, cbq, _, _ = reynolds_conv_exact(l, maps, 9)
        assert Kq == folded[li][4][0] and cbq == folded[li][4][1]
    kern = symeq.certify(net, G, input_shape=(1, 4, 4), conv="kernels")
    assert kern.status == "certified" and all(l.kind == "conv2d" for l in kern.model.layers)
    assert max(kern.layer_distances[:-1]) < 1e-6  # the hidden convolutions were equivariant up to the noise


@pytest.mark.slow
def test_large_escnn_style_c4_net_is_averaged_on_its_kernels():
    """A C4 net on 16x16 images with 32 channels (8 regular fields): its second convolution's dense matrix
    would have 6.7e7 entries, so certify (conv="auto") averages on the kernels; float noise 1e-7."""
    torch = _torch()
    import symeq
    from symeq.groups import builtin_group

    N, C = 16, 8

    def rot(k, r):
        return torch.rot90(k, -r, dims=(-2, -1))

    torch.manual_seed(0)
    c1 = torch.nn.Conv2d(1, 4 * C, 3, padding=1).double()
    c2 = torch.nn.Conv2d(4 * C, 4 * C, 3, padding=1).double()
    with torch.no_grad():
        for f in range(C):
            k = c1.weight[4 * f, 0].clone()
            for r in range(4):
                c1.weight[4 * f + r, 0] = rot(k, r)
                c1.bias[4 * f + r] = c1.bias[4 * f]
        for fo in range(C):
            for fi in range(C):
                B = c2.weight[4 * fo, 4 * fi: 4 * fi + 4].clone()
                for o in range(4):
                    for c in range(4):
                        c2.weight[4 * fo + o, 4 * fi + c] = rot(B[(c - o) % 4], o)
            for o in range(4):
                c2.bias[4 * fo + o] = c2.bias[4 * fo]
        for p in list(c1.parameters()) + list(c2.parameters()):
            p.add_(1e-7 * torch.randn_like(p))
    net = torch.nn.Sequential(c1, torch.nn.Tanh(), c2, torch.nn.Tanh(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * C * N * N, 10).double())
    c = symeq.certify(net, builtin_group(f"rot90:{N}", output=10), input_shape=(1, N, N))
    assert c.status == "certified" and all(l.kind == "conv2d" for l in c.model.layers)
    assert max(c.layer_distances[:2]) < 1e-5
    assert any("averaged on their kernels" in n for n in c.notes)
