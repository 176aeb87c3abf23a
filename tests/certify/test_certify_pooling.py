"""``symeq certify`` through the parameter-free kinds maxpool2d and group_pool (docs/certify.md, "Pooling"):
escnn-style C4 and D4 networks (lifting conv -> ReLU -> max pooling -> group conv -> ReLU -> group pooling ->
linear readout), built equivariant and then given float noise, are certified (exit 0) at a distance within
3x the noise, and ``symeq check`` accepts theta-bar's certificate; the same from an ONNX export of the
torch module; a pooling whose windows the rotation does not map onto windows gets an honest
"undetermined" (exit 3); ``--conv dense`` refuses pooling by name (exit 2)."""
from __future__ import annotations

import json
import random
from fractions import Fraction

import numpy as np
import pytest
from flint import fmpq

from symeq.activations import relu
from symeq.cli import main
from symeq.groups import builtin_group
from symeq.io import model_to_json
from symeq.layers.conv import ConvAction, ConvLayer
from symeq.layers.conv.nets import regular_network
from symeq.layers.pooling import GroupPoolLayer, MaxPool2dLayer
from symeq.models import Model

PARAMETER_KEYS = ("kernel", "bias", "weight")


def _invariant_readout(C: int, n: int, seed: int) -> ConvLayer:
    """One output neuron, a weight per orbit of the quarter turns and the mirror on the n x n grid (the same
    on every channel): invariant under C4 and D4."""
    rot = ConvAction.rot90_pixels(n)
    orbit, rng = {}, random.Random(seed)
    for p in range(n * n):
        if p not in orbit:
            w, todo = fmpq(rng.randint(1, 8), 8 * n * n), [p]
            while todo:
                q = todo.pop()
                if q not in orbit:
                    orbit[q] = w
                    todo += [rot[q], (q // n) * n + n - 1 - q % n]
    return ConvLayer.from_dense([[orbit[p] for _ in range(C) for p in range(n * n)]], [fmpq(1, 2)], None, (C, n, n))


def _pool_net(group: str = "C4", n: int = 8, pool: tuple = (2, 2, 0), seed: int = 3) -> Model:
    """conv (relu) on n x n -> maxpool2d -> group conv (relu) -> group_pool -> invariant readout, exactly
    equivariant (regular fields; the group's output action trivial)."""
    m = 4 if group == "C4" else 8
    pooled = MaxPool2dLayer((m, n, n), *pool)
    h = pooled.out_shape[1]
    l1 = regular_network(group, n, fields=1, hidden=1, activation=relu(), rng=seed)[0][0]
    l2 = regular_network(group, h, fields=1, hidden=2, activation=relu(), rng=seed + 1)[0][1]
    g = builtin_group(f"rot90:{n}" if group == "C4" else f"dihedral:{n}", output=1)
    return Model(n * n, [l1, pooled, l2, GroupPoolLayer((m, h, h), m), _invariant_readout(1, h, seed)], g,
                 name=f"{group} pooling net")


def _noisy_file(model: Model, eps: float, seed: int = 0) -> tuple[dict, float]:
    """The model file in floats with relative Gaussian noise ``eps`` on every parameter, and the noise's
    relative size ||theta - theta_clean|| / ||theta|| on those parameters."""
    data = json.loads(json.dumps(model_to_json(model)))
    rng = np.random.default_rng(seed)
    num = den = 0.0

    def noisy(v):
        nonlocal num, den
        if isinstance(v, list):
            return [noisy(x) for x in v]
        x = float(Fraction(v))
        y = x + eps * rng.standard_normal() * max(abs(x), 0.125)
        num, den = num + (y - x) ** 2, den + y ** 2
        return y

    for layer in data["layers"]:
        for k in PARAMETER_KEYS:
            if k in layer:
                layer[k] = noisy(layer[k])
    return data, (num / den) ** 0.5


def _certify_and_check(tmp_path, capsys, net_path, noise, extra=(), windows=True):
    bar, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    capsys.readouterr()
    code = main(["certify", str(net_path), *extra, "--out", str(bar), "--certificate", str(cert), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    report = json.loads(out)
    assert report["status"] == "certified" and report["verified"]
    assert 0 < report["distances"]["distance"] <= 3 * noise, (report["distances"]["distance"], noise)
    written = bar.read_text()
    assert '"maxpool2d"' in written and '"group_pool"' in written  # theta-bar keeps the pooling layers
    assert main(["check", str(cert), str(bar)]) == 0
    checked = capsys.readouterr().out
    assert "result: accepted" in checked, checked
    assert not windows or "verified on the windows" in checked, checked  # (a graph's checker: per node)
    return report, json.loads(cert.read_text())


@pytest.mark.parametrize("group,eps", [("C4", 1e-6), ("D4", 1e-6), ("C4", 1e-2)])
def test_certify_a_noisy_pooling_net(group, eps, tmp_path, capsys):
    """1e-2 noise: a field's fitted ReLU factors spread by about that much, and still read as one."""
    data, noise = _noisy_file(_pool_net(group), eps)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    report, cert = _certify_and_check(tmp_path, capsys, path, noise)
    assert cert["verdict"] == "layerwise-equivariant"
    # the pooled spaces carry the induced actions: the maxpool's output turns with the 4x4 grid, the
    # group pooling's output has one channel that every generator fixes
    pooled = cert["latent_actions"][1][0]
    assert pooled["kind"] == "channel-pixel" and pooled["height"] == 4
    for gen in cert["latent_actions"][3]:
        assert gen["channels"]["source"] == [0] and gen["pixels"] != list(range(16))


def test_a_clean_pooling_net_certifies_at_distance_zero(tmp_path, capsys):
    data, _ = _noisy_file(_pool_net("C4"), 0.0)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["certify", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["distances"]["distance"] < 1e-12


def _torch_net(torch, model: Model):
    """``model`` (of :func:`_pool_net`) as torch modules: Conv2d, ReLU, MaxPool2d, Conv2d, ReLU, a
    MaxPoolChannels (escnn's GroupPooling on regular fields), Flatten, Linear."""
    l1, mp, l2, gp, ro = model.layers
    f = lambda v: torch.tensor(np.vectorize(lambda x: int(x.p) / int(x.q))(np.asarray(v, dtype=object)).astype(float))  # noqa: E731

    class MaxPoolChannels(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.field_size = n

        def forward(self, x):
            b, c, h, w = x.shape
            return x.view(b, c // self.field_size, self.field_size, h, w).amax(dim=2)

    convs = [torch.nn.Conv2d(l.shape.in_channels, l.shape.out_channels, l.shape.kh, padding=l.shape.padding) for l in (l1, l2)]
    lin = torch.nn.Linear(ro.in_dim, 1)
    with torch.no_grad():
        for c, l in zip(convs, (l1, l2)):
            c.weight.copy_(f(l.kernel)), c.bias.copy_(f(l.channel_bias))
        lin.weight.copy_(f(ro.kernel).reshape(1, -1)), lin.bias.copy_(f(ro.channel_bias))
    return torch.nn.Sequential(convs[0], torch.nn.ReLU(), torch.nn.MaxPool2d(mp.kernel_size, mp.stride), convs[1],
                               torch.nn.ReLU(), MaxPoolChannels(gp.field_size), torch.nn.Flatten(), lin).eval()


@pytest.mark.parametrize("group", ["C4", "D4"])
def test_certify_a_torch_pooling_net_from_onnx(group, tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("onnx", reason="needs onnx: pip install 'symeq[onnx]'")
    import warnings

    from symeq.numeric.onnx_io import load_onnx

    model = _pool_net(group)
    net = _torch_net(torch, model)
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((3, 64)))
    with torch.no_grad():  # the torch module computes the exact model
        assert np.allclose(net.double()(x.reshape(3, 1, 8, 8)).numpy(), _float(model, x.numpy()), atol=1e-9)
        gen = torch.Generator().manual_seed(5)  # then float noise on every parameter
        clean = [p.detach().clone() for p in net.parameters()]
        for p in net.parameters():
            p.add_(1e-6 * torch.randn(p.shape, generator=gen, dtype=p.dtype) * p.abs().clamp(min=0.125))
        num = sum(float(((p - c) ** 2).sum()) for p, c in zip(net.parameters(), clean))
        den = sum(float((p ** 2).sum()) for p in net.parameters())
    path = tmp_path / "net.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net.float(), (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False)
    assert [l.kind for l in load_onnx(path).layers] == ["conv2d", "maxpool2d", "conv2d", "group_pool", "dense"]
    # float32 in the file: the noise is at least float32's rounding
    _certify_and_check(tmp_path, capsys, path, max((num / den) ** 0.5, 1e-7),
                       ["--group", "rot90:8" if group == "C4" else "dihedral:8", "--group-output", "1"])


def _float(model: Model, X) -> np.ndarray:
    from symeq.numeric import from_exact

    return from_exact(model)(X)


def test_a_pooling_grid_the_rotation_breaks_is_undetermined(tmp_path, capsys):
    """k3 s2 on 8x8: 8 - 3 is not a multiple of 2, so a quarter turn maps no window onto a window."""
    data, _ = _noisy_file(_pool_net("C4", pool=(3, 2, 0)), 1e-6)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    code = main(["certify", str(path)])
    err = capsys.readouterr()
    assert code == 3, err
    assert "pooling windows" in err.out + err.err


def test_conv_dense_refuses_pooling_by_name(tmp_path, capsys):
    data, _ = _noisy_file(_pool_net("C4"), 1e-6)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["certify", str(path), "--conv", "dense"]) == 2
    assert "maxpool2d layers do not support certify --conv dense" in capsys.readouterr().err


def test_certify_a_residual_graph_with_pooling_from_onnx(tmp_path, capsys):
    """The graph road (symeq/certify_graph.py) keeps a pooling node as it is, as the chain's road does."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("onnx", reason="needs onnx: pip install 'symeq[onnx]'")
    import warnings

    ls, _ = regular_network("C4", 8, fields=1, hidden=3, activation=relu(), rng=3)
    ro = _invariant_readout(1, 4, 3)
    f = lambda v: torch.tensor(np.vectorize(lambda x: int(x.p) / int(x.q))(np.asarray(v, dtype=object)).astype(float)).float()  # noqa: E731

    class Net(torch.nn.Module):  # relu(c0 x) -> + c2 relu(c1 .) -> relu -> maxpool -> group pooling -> linear
        def __init__(self):
            super().__init__()
            self.c = torch.nn.ModuleList([torch.nn.Conv2d(l.shape.in_channels, l.shape.out_channels, 3, padding=1)
                                          for l in ls[:3]])
            self.lin, self.mp = torch.nn.Linear(16, 1), torch.nn.MaxPool2d(2)
            gen = torch.Generator().manual_seed(2)
            with torch.no_grad():
                for c, l in zip(self.c, ls[:3]):
                    c.weight.copy_(f(l.kernel) + 1e-6 * torch.randn(c.weight.shape, generator=gen))
                    c.bias.copy_(f(l.channel_bias))
                self.lin.weight.copy_(f(ro.kernel).reshape(1, -1)), self.lin.bias.copy_(f(ro.channel_bias))
                clean = [f(l.kernel) for l in ls[:3]]
                self.noise = (sum(float(((c.weight - k) ** 2).sum()) for c, k in zip(self.c, clean)) /
                              sum(float((p ** 2).sum()) for p in self.parameters())) ** 0.5

        def forward(self, x):
            a = torch.relu(self.c[0](x))
            y = self.mp(torch.relu(a + self.c[2](torch.relu(self.c[1](a)))))
            b, c, h, w = y.shape
            return self.lin(y.view(b, c // 4, 4, h, w).amax(dim=2).flatten(1))

    path, net = tmp_path / "res.onnx", Net().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False)
    _, cert = _certify_and_check(tmp_path, capsys, path, max(net.noise, 1e-7),
                                 ["--group", "rot90:8", "--group-output", "1"], windows=False)
    assert cert["verdict"] == "layerwise-equivariant"


def test_the_float_group_pooling_reads_a_fields_nearly_equal_factors_as_one():
    """Fitted ReLU factors are 1 only up to the noise: within FIELD_FACTOR_TOL they are one factor (the
    spread is the residual); a field with factors 1 and 2 induces no action (the exact rule)."""
    from symeq.layers.base import NoPartner
    from symeq.numeric.monomial import MonomialAction
    from symeq.backends import FLOAT64
    from symeq.layers.pooling.floating import FIELD_FACTOR_TOL

    layer = GroupPoolLayer((4, 1, 1), 2).on(FLOAT64)
    near = MonomialAction(np.array([1, 0, 3, 2]), np.array([1.0, 1.0 + 2e-7, 3.0, 3.0]))
    _, [(rho, rec)] = layer.match_action(near)
    assert rho.cols.tolist() == [0, 1] and np.allclose(rho.vals, [1.0 + 1e-7, 3.0])
    assert 0 < rec[0] < FIELD_FACTOR_TOL
    far = MonomialAction(np.array([1, 0, 3, 2]), np.array([1.0, 2.0, 1.0, 1.0]))
    with pytest.raises(NoPartner, match="whole block with one factor"):
        layer.match_action(far)


def test_metric_data_on_a_pooling_net_is_refused_by_name(tmp_path, capsys):
    data, _ = _noisy_file(_pool_net("C4"), 1e-6)
    path, xs = tmp_path / "net.json", tmp_path / "d.npz"
    path.write_text(json.dumps(data))
    np.savez(xs, x=np.random.default_rng(0).standard_normal((20, 64)), y=np.arange(20) % 2)
    capsys.readouterr()
    assert main(["certify", str(path), "--metric", "data", "--data", str(xs), "--task", "classifier"]) == 2
    assert "--metric data is not available" in capsys.readouterr().err


def test_no_homomorphism_on_a_pooling_net_is_undetermined_with_its_reason(tmp_path, capsys, monkeypatch):
    import symeq.numeric.project as project

    monkeypatch.setattr(project, "is_homomorphism", lambda group, acts: (False, "rho(g)^4 != 1 (forced here)"))
    data, _ = _noisy_file(_pool_net("C4"), 1e-6)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["certify", str(path)]) == 3
    err = capsys.readouterr().err
    assert "not a homomorphism (rho(g)^4 != 1 (forced here)), and a network with pooling" in err, err


def test_certify_takes_the_torch_module_itself():
    """symeq.certify on an nn.Sequential with MaxPool2d and a MaxPoolChannels (from_torch reads both)."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    import symeq

    model = _pool_net("C4")
    net = _torch_net(torch, model).double()
    with torch.no_grad():
        gen = torch.Generator().manual_seed(7)
        for p in net.parameters():
            p.add_(1e-6 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    c = symeq.certify(net, builtin_group("rot90:8", output=1), input_shape=(1, 8, 8))
    assert c.status == "certified", c.reason
    assert [l.kind for l in c.model.layers] == ["conv2d", "maxpool2d", "conv2d", "group_pool", "conv2d"]
    assert 0 < c.distance < 1e-5
