"""Real clients of issue 27: pre-activation residual networks (ResNet v2: ``x + conv(relu(bn(conv(relu(bn(x))))))``,
then ``relu(bn(x))`` before the head), where a BatchNorm has no linear layer to fold into: it reads an
addition, or ends a branch.  Such a BatchNorm is kept as a layer of its own (a per-channel 1x1
convolution, exactly; docs/graphs.md "BatchNorm and pooling that do not fold"), and an addition with one
input of known action (the identity skip) may be read by the next block's layers.

Each network is built in torch the way a user writes it (mirror-symmetric kernels, trained-looking
BatchNorm statistics), exported by ``torch.onnx.export(dynamo=False)`` and also read by ``symeq.from_torch``
(torch.fx): verified exactly (``verify --exact-floats``) and checked; a broken kernel is refuted with a
witness that ``symeq check`` re-proves; with float noise it certifies within 3x the noise, ``check`` accepts,
and ``export --onnx`` of theta-bar is invariant to 1e-9 in onnx's reference evaluator.

Every test skips without torch and onnx (the core-only CI phase).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from symeq.cli import main
from test_resnet_clients import MIRROR, NOISE, _export, _mirror, _perturb, _torch  # the same clients' helpers


def _preact(torch, channels: int = 4, blocks: int = 2, seed: int = 0, branch_bn: bool = False):
    """A stem conv-ReLU, ``blocks`` pre-activation blocks x + c2(relu(bn2(c1(relu(bn1(x)))))), a final
    relu(bn(x)) and a linear head on the flattened image (the head averaged with its mirror image, so the
    logits are mirror invariant).  With ``branch_bn`` each block's branch ends with a BatchNorm after a
    ReLU (x + bn3(relu(c2(...)))), a BatchNorm at the end of a branch."""
    nn = torch.nn
    torch.manual_seed(seed)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.b1, self.c1 = nn.BatchNorm2d(channels), nn.Conv2d(channels, channels, 3, padding=1)
            self.b2, self.c2 = nn.BatchNorm2d(channels), nn.Conv2d(channels, channels, 3, padding=1)
            self.b3 = nn.BatchNorm2d(channels) if branch_bn else None

        def forward(self, x):
            y = self.c2(torch.relu(self.b2(self.c1(torch.relu(self.b1(x))))))
            return x + (self.b3(torch.relu(y)) if self.b3 is not None else y)

    class PreAct(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(1, channels, 3, padding=1)
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.bn = nn.BatchNorm2d(channels)
            self.head = nn.Linear(channels * 64, 3)

        def forward(self, x):
            x = self.blocks(torch.relu(self.stem(x)))
            return self.head(torch.relu(self.bn(x)).flatten(1))

    net = PreAct()
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, nn.Conv2d):
                mod.weight.copy_((mod.weight + mod.weight.flip(-1)) / 2)
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.3, 0.3)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.3, 0.3)
        W = net.head.weight.view(3, channels, 8, 8)
        net.head.weight.copy_(((W + W.flip(-1)) / 2).reshape(3, -1))
    return net.eval()


@pytest.mark.parametrize("branch_bn", [False, True], ids=["bn-after-add", "bn-at-branch-end"])
def test_preact_verified_refuted_and_checked(tmp_path, capsys, branch_bn):
    torch = _torch()
    net = _preact(torch, branch_bn=branch_bn)
    x = torch.randn(16, 1, 8, 8)
    with torch.no_grad():
        assert float((net(x) - net(x.flip(-1))).abs().max()) < 1e-5  # invariant as built
    clean, broken = tmp_path / "clean.onnx", tmp_path / "broken.onnx"
    _export(torch, net, clean, (1, 8, 8))
    capsys.readouterr()
    cert = tmp_path / "C.json"
    assert main(["verify", str(clean), "--exact-floats", *MIRROR, "--certificate", str(cert)]) == 0
    capsys.readouterr()
    assert main(["numeric-check", str(clean), *MIRROR]) == 0
    assert "kept as a layer of its own" in capsys.readouterr().err  # the reader says how each BatchNorm was read
    assert main(["check", str(cert), str(clean), *MIRROR]) == 0
    with torch.no_grad():
        net.blocks[1].c1.weight[0, 0, 1, 0] += 0.5  # one kernel not symmetric
    _export(torch, net, broken, (1, 8, 8))
    cert = tmp_path / "R.json"
    assert main(["verify", str(broken), "--exact-floats", *MIRROR, "--certificate", str(cert)]) == 1
    doc = json.loads(cert.read_text())
    assert doc["verdict"] == "not-equivariant" and doc["equivariance"]["witness"] is not None
    assert main(["check", str(cert), str(broken), *MIRROR]) == 0  # the witness, re-proved by the checker


def test_preact_certified_checked_and_exported(tmp_path, capsys):
    torch = _torch()
    net = _preact(torch)
    rel = _perturb(torch, net, NOISE)
    path = tmp_path / "noisy.onnx"
    _export(torch, net, path, (1, 8, 8))
    cert, out, bar = tmp_path / "C.json", tmp_path / "bar.json", tmp_path / "bar.onnx"
    capsys.readouterr()
    code = main(["certify", str(path), *MIRROR, "--points", "100", "--out", str(out), "--certificate", str(cert),
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
    with torch.no_grad():
        theta = net(torch.tensor(X.reshape(-1, 1, 8, 8), dtype=torch.float32)).double().numpy()
    assert np.max(np.abs(Y - theta)) < 1e-2 * max(1.0, float(np.max(np.abs(theta))))  # and near theta


def test_from_torch_reads_the_same_graph(tmp_path):
    """symeq.from_torch (torch.fx) reads the module itself: the same nodes' float function as torch, and the
    float derivation's actions hold with residual 0 (exactly symmetric weights in float64)."""
    torch = _torch()
    import symeq
    from symeq.numeric.graph import derive_graph_numeric

    net = _preact(torch, branch_bn=True)
    gm = symeq.from_torch(net, input_shape=(1, 8, 8))
    notes = " ".join(gm.meta.get("reader_notes", []))
    assert "kept as a layer of its own" in notes
    X = np.random.default_rng(2).standard_normal((8, 64))
    with torch.no_grad():
        ref = net.double()(torch.tensor(X.reshape(-1, 1, 8, 8))).numpy()
    assert np.max(np.abs(gm(X) - ref)) < 1e-10
    from symeq.groups import mirror

    res = derive_graph_numeric(gm, mirror(8, 8, output=3))
    assert res.max_residual < 1e-9, res
