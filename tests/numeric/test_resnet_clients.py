"""Real clients of issue 27: torch networks exported by ``torch.onnx.export(dynamo=False)``, certified,
checked, refuted and exported back, the way a user runs them (docs/certify.md, docs/graphs.md).

* a small ResNet on 8 x 8 images, mirror-equivariant by construction (every kernel symmetric under
  the left-right flip, BatchNorm folded by the exporter, global average pooling, a softmax head) plus
  float noise: ``symeq certify`` exits 0 with a parameter distance within 3x the weight noise,
  ``symeq check`` accepts its certificate, and ``symeq export --onnx`` of theta-bar runs in
  ``onnx.reference.ReferenceEvaluator`` and is invariant to 1e-9;
* the same ResNet with one broken block (a kernel that is not symmetric): refuted on the exact path
  (``verify --exact-floats``: not-equivariant, with a witness that ``symeq check`` re-proves), and
  certify reports the broken block as the one that moves;
* an MLP with BatchNorm1d and LogSoftmax (a chain): certified and checked.

Every test skips without torch and onnx (the core-only CI phase).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from symeq.cli import main
from symeq.cli.loader import has_extra

MIRROR = ["--group", "mirror:8x8", "--group-output", "3"]
NOISE = 1e-4


def _torch():
    if not has_extra("onnx"):
        pytest.skip("the ONNX client tests need onnx: pip install 'symeq[onnx]'")
    if not has_extra("torch"):
        pytest.skip("the client networks are torch networks: pip install 'symeq[numeric]'")
    import torch

    return torch


def _resnet(torch, channels: int = 4, blocks: int = 2, classes: int = 3, seed: int = 0, bn1d: bool = False,
            softmax: bool = True):
    """Post-activation residual blocks (conv-BN-ReLU-conv-BN, add, ReLU) after a conv-BN-ReLU stem, global
    average pooling and a linear softmax head (with ``bn1d``: Linear-BatchNorm1d-ReLU-Linear; without
    ``softmax``: the logits); every kernel symmetric under the left-right flip (the pooled features are
    mirror invariant, so the head is free)."""
    nn = torch.nn
    torch.manual_seed(seed)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels)
            self.c2, self.b2 = nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels)

        def forward(self, x):
            return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = nn.Conv2d(1, channels, 3, padding=1), nn.BatchNorm2d(channels)
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.head = nn.Sequential(nn.Linear(channels, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, classes)) \
                if bn1d else nn.Linear(channels, classes)

        def forward(self, x):
            x = self.blocks(torch.relu(self.bn(self.stem(x))))
            y = self.head(x.mean((2, 3)))
            return torch.softmax(y, -1) if softmax else y

    net = ResNet()
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, nn.Conv2d):
                mod.weight.copy_((mod.weight + mod.weight.flip(-1)) / 2)
            if isinstance(mod, (nn.BatchNorm2d, nn.BatchNorm1d)):  # trained-looking statistics (folded on reading)
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return net.eval()


def _perturb(torch, net, noise: float, seed: int = 1) -> float:
    """Add N(0, noise^2) to every weight and bias; the relative size of the noise, ||noise|| / ||theta||."""
    g = torch.Generator().manual_seed(seed)
    num = den = 0.0
    with torch.no_grad():
        for p in net.parameters():
            d = noise * torch.randn(p.shape, generator=g, dtype=p.dtype)
            den += float((p ** 2).sum())
            p.add_(d)
            num += float((d ** 2).sum())
    return (num / den) ** 0.5


def _export(torch, net, path, shape) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, *shape),), str(path), dynamo=False)


def _mirror(x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1, 8, 8)[..., ::-1].reshape(x.shape[0], -1)


# -- the MLP with BatchNorm1d and LogSoftmax (a chain) -------------------------------------------------

def _bn_mlp(torch, hidden: int = 8, seed: int = 0):
    """Linear(16, H) -> BatchNorm1d -> Tanh -> Linear(H, 3) -> LogSoftmax, invariant under the mirror of
    4 x 4 images: the mirror swaps hidden neurons 2i and 2i+1 (rows, BatchNorm statistics and columns)."""
    nn = torch.nn
    torch.manual_seed(seed)
    P = torch.arange(16).reshape(4, 4).flip(-1).reshape(-1)
    net = nn.Sequential(nn.Linear(16, hidden), nn.BatchNorm1d(hidden), nn.Tanh(), nn.Linear(hidden, 3),
                        nn.LogSoftmax(-1))
    with torch.no_grad():
        net[0].weight[1::2] = net[0].weight[0::2][:, P]
        net[0].bias[1::2] = net[0].bias[0::2]
        bn = net[1]
        for t, lo, hi in ((bn.running_mean, -0.2, 0.2), (bn.running_var, 0.5, 1.5), (bn.weight, 0.5, 1.5),
                          (bn.bias, -0.2, 0.2)):
            t.uniform_(lo, hi)
            t[1::2] = t[0::2]
        net[3].weight[:, 1::2] = net[3].weight[:, 0::2]
    return net.eval()


def test_batchnorm_logsoftmax_mlp_certified_and_checked(tmp_path, capsys):
    torch = _torch()
    net = _bn_mlp(torch)
    rel = _perturb(torch, net, NOISE)
    x = torch.randn(64, 16)
    P = torch.arange(16).reshape(4, 4).flip(-1).reshape(-1)
    with torch.no_grad():
        assert float((net(x) - net(x[:, P])).abs().max()) > 0  # the noise breaks the invariance in floats
    onnx_path, cert, out = tmp_path / "mlp.onnx", tmp_path / "C.json", tmp_path / "bar.json"
    _export(torch, net, onnx_path, (16,))
    capsys.readouterr()
    code = main(["certify", str(onnx_path), "--group", "mirror:4x4", "--group-output", "3", "--out", str(out),
                 "--certificate", str(cert), "--points", "200", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["verdict"] == "layerwise-equivariant"
    assert report["distances"]["parameters_max"] <= 3 * rel + 1e-9
    assert main(["check", str(cert), str(out)]) == 0


# -- the ResNet on 8 x 8 mirror images (a graph) ---------------------------------------------------------

def _break(torch, net) -> None:
    """One kernel of the first block's second convolution made asymmetric under the flip."""
    with torch.no_grad():
        net.blocks[0].c2.weight[0, 0, 1, 0] += 0.5


def _resnet_onnx(torch, tmp_path, broken: bool = False, bn1d: bool = False):
    net = _resnet(torch, bn1d=bn1d)
    rel = _perturb(torch, net, NOISE)
    if broken:
        _break(torch, net)
    path = tmp_path / ("broken.onnx" if broken else "resnet.onnx")
    _export(torch, net, path, (1, 8, 8))
    return path, rel


@pytest.mark.parametrize("bn1d", [False, True], ids=["linear-head", "batchnorm1d-head"])
def test_resnet_certified_checked_and_exported(tmp_path, capsys, bn1d):
    torch = _torch()
    path, rel = _resnet_onnx(torch, tmp_path, bn1d=bn1d)
    cert, out, bar = tmp_path / "C.json", tmp_path / "bar.json", tmp_path / "bar.onnx"
    capsys.readouterr()
    code = main(["certify", str(path), *MIRROR, "--points", "200", "--out", str(out), "--certificate", str(cert),
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["verdict"] == "layerwise-equivariant"
    assert 0 < report["distances"]["distance"] <= 3 * rel
    assert main(["check", str(cert), str(out)]) == 0
    assert main(["export", str(out), "--onnx", str(bar)]) == 0
    from onnx.reference import ReferenceEvaluator

    ev = ReferenceEvaluator(str(bar))
    X = np.random.default_rng(0).standard_normal((16, 64))
    Y, Ym = ev.run(None, {"x": X})[0], ev.run(None, {"x": np.ascontiguousarray(_mirror(X))})[0]
    assert np.max(np.abs(Y - Ym)) < 1e-9  # theta-bar's logits are mirror invariant
    theta = ReferenceEvaluator(str(path)).run(None, {"input.1": X.reshape(-1, 1, 8, 8).astype(np.float32)})[0]
    assert np.max(np.abs(_log_softmax(Y) - np.log(theta))) < 1e-2  # near theta (its softmax is the output op)


def _log_softmax(Y):
    Z = Y - Y.max(axis=1, keepdims=True)
    return Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))


@pytest.mark.slow
def test_broken_block_refuted_on_the_exact_path(tmp_path):
    """Without noise the exported weights are exactly symmetric (BatchNorm scales each output channel): the
    exact path proves the network layerwise equivariant; one asymmetric kernel, and it refutes it with a
    witness that the checker re-proves."""
    torch = _torch()
    net = _resnet(torch)
    clean, broken = tmp_path / "clean.onnx", tmp_path / "broken.onnx"
    _export(torch, net, clean, (1, 8, 8))
    _break(torch, net)
    _export(torch, net, broken, (1, 8, 8))
    assert main(["verify", str(clean), "--exact-floats", *MIRROR]) == 0
    cert = tmp_path / "R.json"
    assert main(["verify", str(broken), "--exact-floats", *MIRROR, "--certificate", str(cert)]) == 1
    doc = json.loads(cert.read_text())
    assert doc["verdict"] == "not-equivariant"
    assert doc["equivariance"]["witness"] is not None
    assert main(["check", str(cert), str(tmp_path / "R.model.json")]) == 0  # the witness, re-proved
    assert main(["check", str(cert), str(broken), *MIRROR]) == 0  # and against the ONNX file, read by symeq


def test_certify_reports_the_broken_block(tmp_path, capsys):
    torch = _torch()
    path, _ = _resnet_onnx(torch, tmp_path, broken=True)
    capsys.readouterr()
    assert main(["certify", str(path), *MIRROR, "--points", "100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    per = report["distances"]["parameters_per_layer"]
    names = report["actions"]["candidates"][0]["layer_nodes"]
    assert len(names) == len(per)
    assert names[int(np.argmax(per))].startswith("blocks_blocks_0")  # the broken block moves most
    assert max(per) > 100 * sorted(per)[-2]


def test_conv_dense_and_restarts_are_refused_by_name_on_the_resnet(tmp_path, capsys):
    """A graph's convolutions are averaged on their kernels: --conv dense and --restarts N name themselves (exit 2),
    before any work; --conv kernels is the road taken."""
    torch = _torch()
    path, rel = _resnet_onnx(torch, tmp_path)
    capsys.readouterr()
    assert main(["certify", str(path), *MIRROR, "--conv", "dense"]) == 2
    err = capsys.readouterr().err
    assert "--conv dense" in err and "conv2d" in err
    assert main(["certify", str(path), *MIRROR, "--restarts", "4"]) == 2
    assert "--restarts 4" in capsys.readouterr().err
    cert = tmp_path / "C.json"
    assert main(["certify", str(path), *MIRROR, "--conv", "kernels", "--restarts", "0", "--points", "50",
                 "--json", "--certificate", str(cert)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert 0 < report["distances"]["distance"] <= 3 * rel
    assert report["actions"]["proven_nearest"] is False
    # the spec's space names (docs/graphs.md: segment N's last space is N) in every report: numeric-check's,
    # certify's theta-bar actions and the exact certificate's spaces agree
    spaces = json.loads(cert.read_text())["spaces"]
    assert main(["numeric-check", str(path), *MIRROR, "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["derivation"]["spaces"] == spaces
    assert [a["space"] for a in report["actions"]["theta_bar"]] == spaces  # one generator
    assert not any(n.endswith(".2") for n in spaces)  # two-layer segments: N.1 and N


def test_a_torch_resnet_module_is_certified_from_python(tmp_path):
    """symeq.certify(module, ...): the traced module (torch.fx) is a float graph model; a softmax in the forward
    is refused by name (the logits are certified)."""
    torch = _torch()
    from symeq.certification import certify
    from symeq.errors import InputError
    from symeq.groups import mirror

    with pytest.raises(InputError, match="softmax"):
        certify(_resnet(torch), mirror(8, 8, 1, output=3), input_shape=(1, 8, 8))
    net = _resnet(torch, softmax=False)
    rel = _perturb(torch, net, NOISE)
    c = certify(net, mirror(8, 8, 1, output=3), input_shape=(1, 8, 8), noise_points=50, timeout=300)
    assert c.status == "certified", c.reason
    assert not c.model.is_chain and any(n.op == "add" for n in c.model.nodes)
    assert 0 < c.distance <= 3 * rel
    X = np.random.default_rng(1).standard_normal((8, 64))
    with torch.no_grad():
        theta = net(torch.from_numpy(X.reshape(-1, 1, 8, 8)).float()).double().numpy()
    assert np.max(np.abs(c.float_model(X) - theta)) < 1e-2  # theta-bar is near the module's function
    assert np.max(np.abs(c.float_model(_mirror(X)) - c.float_model(X))) < 1e-9  # and mirror invariant
