"""Networks as people export them (issue 27): BatchNorm, Dropout, pooling, depthwise convolutions,
softmax heads, external data, and what the readers refuse by name (symeq/numeric/onnx_io.py,
symeq/numeric/models.py: from_torch, symeq/layers/conv/floating.py: the exact folds).

The clients are torch modules exported with ``torch.onnx.export(..., dynamo=False)`` (and one with the
dynamo exporter when onnxscript is installed): an MLP with BatchNorm1d, Dropout and LogSoftmax, a small
C4 CNN with BatchNorm2d, average pooling before a padded convolution, global average pooling and a
softmax head, and an escnn-style C4 net at 28x28 (kernels rotated by hand, noise 1e-6).  Each is
numeric-checked (and certified where that is fast, or proved by verify --exact-floats), each with a
deliberately broken variant that is flagged.  Also: the refusals by name, the exact folds (pooling
before a padded conv, BatchNorm on either side, a mean over fields, two linear layers in a row), the
residual block's float twin, external data, the dtype tolerance, conv nets at 28x28 without dense
expansion, and arb balls through conv kernels.  Needs the onnx extra and torch; skipped without them.
"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX tests need onnx: pip install 'symeq[onnx]'")
torch = pytest.importorskip("torch", reason="exporting from torch needs torch: pip install 'symeq[numeric]'")

from symeq.cli import main  # noqa: E402
from symeq.errors import InputError  # noqa: E402
from symeq.groups import mirror  # noqa: E402
from symeq.numeric.models import from_torch, numeric_activation  # noqa: E402
from symeq.numeric.onnx_io import load_onnx, load_onnx_exact  # noqa: E402


def _export(net, shape, path, dtype=torch.float32, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(*shape, dtype=dtype),), str(path), dynamo=False, **kw)


# -- C4 by hand: kernels rotated (escnn's regular fields, 4 channels each) -----------------------

def _lift(K0):
    """(F, 1, k, k) -> (4F, 1, k, k): channel 4f + r is rot^r of K0[f] (a lifting convolution)."""
    return torch.stack([torch.rot90(K0, r, dims=(-2, -1)) for r in range(4)], 1).reshape(-1, *K0.shape[1:])


def _regular(K0):
    """(F, E, 4, k, k) -> (4F, 4E, k, k): K[4f + r, 4e + s] = rot^r K0[f, e, (s - r) mod 4] (a group convolution)."""
    F, E = K0.shape[:2]
    out = torch.zeros(4 * F, 4 * E, *K0.shape[-2:], dtype=K0.dtype)
    for r in range(4):
        for s in range(4):
            out[r::4, s::4] = torch.rot90(K0[:, :, (s - r) % 4], r, dims=(-2, -1))
    return out


def _field_bn(bn, F, gen):
    """BatchNorm2d statistics constant on each field (escnn's InnerBatchNorm)."""
    with torch.no_grad():
        for t, lo, hi in ((bn.weight, .5, 1.5), (bn.bias, -.3, .3), (bn.running_mean, -.2, .2), (bn.running_var, .5, 2.)):
            t.copy_((lo + (hi - lo) * torch.rand(F, generator=gen)).repeat_interleave(4))


def _c4_cnn(n, F=2, k1=3, k2=3, classes=3, head=None, broken=False, seed=0):
    """conv (lifting) -> BatchNorm2d -> ReLU -> AvgPool2d(2) -> conv (padded, regular) -> BatchNorm2d -> ReLU ->
    global average pooling -> Linear (invariant) [-> head], nested Sequentials; rot90-invariant logits."""
    gen = torch.Generator().manual_seed(seed)
    c1, c2 = torch.nn.Conv2d(1, 4 * F, k1, padding=k1 // 2), torch.nn.Conv2d(4 * F, 4 * F, k2, padding=k2 // 2)
    b1, b2 = torch.nn.BatchNorm2d(4 * F), torch.nn.BatchNorm2d(4 * F)
    lin = torch.nn.Linear(4 * F, classes)
    with torch.no_grad():
        c1.weight.copy_(_lift(torch.randn(F, 1, k1, k1, generator=gen) / k1))
        c1.bias.copy_(0.1 * torch.randn(F, generator=gen).repeat_interleave(4))
        c2.weight.copy_(_regular(torch.randn(F, F, 4, k2, k2, generator=gen) / (k2 * F)))
        c2.bias.copy_(0.1 * torch.randn(F, generator=gen).repeat_interleave(4))
        lin.weight.copy_(torch.randn(classes, F, generator=gen).repeat_interleave(4, dim=1))
        if broken:  # one kernel not symmetric
            c2.weight[0, 0, 0, 0] += 0.2
    _field_bn(b1, F, gen)
    _field_bn(b2, F, gen)
    mods = [torch.nn.Sequential(c1, b1, torch.nn.ReLU()), torch.nn.AvgPool2d(2),
            torch.nn.Sequential(c2, b2, torch.nn.ReLU()), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), lin]
    return torch.nn.Sequential(*mods, *([head] if head is not None else [])).eval()


def _rot_invariance_error(net, n):
    x = torch.randn(3, 1, n, n, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return float((net(x) - net(torch.rot90(x, 1, dims=(-2, -1)))).abs().max())


def _logits_of(net, x):
    body = net[:-1] if isinstance(net, torch.nn.Sequential) and isinstance(net[-1], (torch.nn.Softmax,
                                                                                  torch.nn.LogSoftmax)) else net
    with torch.no_grad():
        return body(x).double().numpy()


# -- the MLP with BatchNorm1d, Dropout and LogSoftmax ---------------------------------------------

def _mirror_mlp(broken=False):
    """Linear -> BatchNorm1d -> ReLU -> Dropout -> BatchNorm1d -> Linear -> LogSoftmax, mirror-equivariant:
    the BatchNorm statistics are invariant under the hidden permutation (one broken channel if asked)."""
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.layerwise import derive_latent_actions_numeric

    G = mirror(4, 4)
    m = random_equivariant_numeric(G, [12], numeric_activation("relu"), rng=0)
    pi = derive_latent_actions_numeric(m).actions[0][0].cols  # the hidden permutation (an involution)
    rng = np.random.default_rng(3)

    def invariant(lo, hi):
        v = lo + (hi - lo) * rng.random(12)
        return torch.tensor((v + v[pi]) / 2, dtype=torch.float32)

    l1, l2 = torch.nn.Linear(16, 12), torch.nn.Linear(12, 16)
    bn1, bn2 = torch.nn.BatchNorm1d(12), torch.nn.BatchNorm1d(12)
    with torch.no_grad():
        for lin, layer in ((l1, m.layers[0]), (l2, m.layers[1])):
            lin.weight.copy_(torch.from_numpy(layer.weight))
            lin.bias.copy_(torch.from_numpy(layer.bias))
        for bn in (bn1, bn2):
            bn.weight.copy_(invariant(.5, 1.5))
            bn.bias.copy_(invariant(-.3, .3))
            bn.running_mean.copy_(invariant(-.2, .2))
            bn.running_var.copy_(invariant(.5, 2.))
        if broken:
            bn1.weight[int(np.flatnonzero(pi != np.arange(12))[0])] += 0.3
    return torch.nn.Sequential(l1, bn1, torch.nn.ReLU(), torch.nn.Dropout(0.3), bn2, l2,
                               torch.nn.LogSoftmax(dim=1)).eval()


def test_mlp_with_batchnorm_dropout_logsoftmax_reads_checks_and_certifies(tmp_path, capsys):
    net = _mirror_mlp()
    _export(net, (2, 16), tmp_path / "mlp.onnx")
    m = load_onnx(tmp_path / "mlp.onnx")
    notes = "\n".join(m.meta["reader_notes"])
    assert m.widths == [16, 12, 16] and m.meta["output_op"]["type"] == "log_softmax"
    # both folds: into the outputs of the first Gemm and into the inputs of the second; the Dropout is gone
    assert "folded exactly into the outputs" in notes and "folded exactly into the inputs" in notes
    assert "float64 value converted exactly to a rational" in notes
    x = np.random.default_rng(0).standard_normal((5, 16))
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float()))) < 1e-5
    # the exact path applies the same folds exactly: equal to the float twin up to float64 rounding
    e = load_onnx_exact(tmp_path / "mlp.onnx")
    from flint import fmpq

    xq = [[fmpq(int(v * 256), 256) for v in row] for row in x]
    ye = np.array([[float(int(v.p)) / float(int(v.q)) for v in e(r)] for r in xq])
    assert np.max(np.abs(ye - m(np.array([[float(v.p) / float(v.q) for v in r] for r in xq])))) < 1e-12
    from_module = from_torch(net)
    assert from_module.meta["output_op"]["type"] == "log_softmax"
    assert np.max(np.abs(from_module(x) - m(x))) < 1e-5
    capsys.readouterr()
    assert main(["numeric-check", str(tmp_path / "mlp.onnx"), "--group", "mirror:4x4"]) == 0
    out, err = capsys.readouterr()
    assert "tolerance 1.52588e-05 (the default for float32 weights" in err, err
    assert "log_softmax" in out and "commutes with the output permutations" in out
    bar, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    assert main(["certify", str(tmp_path / "mlp.onnx"), "--group", "mirror:4x4", "--out", str(bar),
                 "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(bar)]) == 0


def test_mlp_with_one_broken_batchnorm_channel_is_flagged(tmp_path, capsys):
    _export(_mirror_mlp(broken=True), (2, 16), tmp_path / "bad.onnx")
    assert main(["numeric-check", str(tmp_path / "bad.onnx"), "--group", "mirror:4x4"]) == 1
    assert "NOT within tolerance" in capsys.readouterr().out


def test_softmax_head_needs_a_permutation_output_action(tmp_path, capsys):
    _export(_mirror_mlp(), (2, 16), tmp_path / "mlp.onnx")
    for command in ("numeric-check", "certify"):
        assert main([command, str(tmp_path / "mlp.onnx"), "--group", "sign:16"]) == 2
        err = capsys.readouterr().err
        assert "log_softmax" in err and "commutes with permutations of its inputs only" in err


# -- the small C4 CNN: BatchNorm2d, pooling before a padded conv, global pooling, softmax ---------------

def test_small_c4_cnn_reads_checks_and_certifies(tmp_path, capsys):
    net = _c4_cnn(8, head=torch.nn.Softmax(dim=1))
    assert _rot_invariance_error(net, 8) < 1e-6
    _export(net, (1, 1, 8, 8), tmp_path / "cnn.onnx")
    m = load_onnx(tmp_path / "cnn.onnx")
    assert [l.kind for l in m.layers] == ["conv2d", "conv2d", "dense"]
    # 2x2 pooling before the 3x3 conv with padding 1 on 4x4: one 6x6 conv, stride 2, padding 2, on 8x8
    s = m.layers[1].shape
    assert (s.kh, s.stride, s.padding, s.height) == (6, 2, 2, 8)
    x = np.random.default_rng(0).standard_normal((4, 64))
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float().reshape(4, 1, 8, 8)))) < 1e-5
    mt = from_torch(net, input_shape=(1, 8, 8))
    assert mt.widths == m.widths and np.max(np.abs(mt(x) - m(x))) < 1e-5
    capsys.readouterr()
    assert main(["numeric-check", str(tmp_path / "cnn.onnx"), "--group", "rot90:8", "--group-output", "3"]) == 0
    bar, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    assert main(["certify", str(tmp_path / "cnn.onnx"), "--group", "rot90:8", "--group-output", "3", "--out", str(bar),
                 "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(bar)]) == 0


def test_small_c4_cnn_with_one_kernel_not_symmetric_is_flagged(tmp_path, capsys):
    net = _c4_cnn(8, head=torch.nn.Softmax(dim=1), broken=True)
    _export(net, (1, 1, 8, 8), tmp_path / "bad.onnx")
    assert main(["numeric-check", str(tmp_path / "bad.onnx"), "--group", "rot90:8", "--group-output", "3"]) == 1
    out = capsys.readouterr().out
    assert "layer 2, rot90: max residual" in out and "NOT within tolerance" in out


@pytest.mark.parametrize("client", ["mlp", "cnn"])
def test_exact_floats_proves_the_folded_exports_and_refutes_the_broken_ones(tmp_path, capsys, client):
    """The folds are exact: verify --exact-floats reads the float32 export with BatchNorm (its scale as the float64
    rational), pooling and the softmax head folded, proves it layerwise equivariant, and refutes the broken variant;
    it says how it read them."""
    for broken, code in ((False, 0), (True, 1)):
        path = tmp_path / f"{client}{int(broken)}.onnx"
        if client == "mlp":
            _export(_mirror_mlp(broken=broken), (2, 16), path)
            group = ["--group", "mirror:4x4"]
        else:
            _export(_c4_cnn(8, head=torch.nn.Softmax(dim=1), broken=broken), (1, 1, 8, 8), path)
            group = ["--group", "rot90:8", "--group-output", "3"]
        assert main(["verify", str(path), *group, "--exact-floats"]) == code
    out, err = capsys.readouterr()
    assert "Verdict: not-equivariant" in out and "  read: " in err
    if client == "mlp":
        assert "float64 value converted exactly to a rational" in err


def test_depthwise_conv_and_global_pooling_from_onnx_equal_torch(tmp_path):
    """A depthwise conv (group = channels, antialiased pooling's form) reads as its block-diagonal kernel."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.Tanh(),
                              torch.nn.Conv2d(4, 4, 3, padding=1, groups=4, stride=2), torch.nn.Tanh(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 2)).eval()
    _export(net, (1, 1, 6, 6), tmp_path / "dw.onnx")
    m = load_onnx(tmp_path / "dw.onnx")
    assert any("depthwise" in n for n in m.meta["reader_notes"])
    K = m.layers[1].kernel
    assert np.all(K[np.arange(4)[:, None] != np.arange(4)[None, :]] == 0)  # off the diagonal blocks: exact zeros
    x = np.random.default_rng(0).standard_normal((3, 36))
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float().reshape(3, 1, 6, 6)))) < 1e-5
    mt = from_torch(net, input_shape=(1, 6, 6))
    assert np.max(np.abs(mt(x) - m(x))) < 1e-5


def test_batchnorm_after_an_activation_and_pooling_after_a_conv_fold_exactly_on_both_paths(tmp_path):
    """BatchNorm2d after a ReLU folds into the next (unpadded) conv's inputs, AvgPool2d right after a conv into
    its outputs; the exact path does the same folds in rationals (equal to the float twin to 1e-15)."""
    from flint import fmpq

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.ReLU(), torch.nn.BatchNorm2d(3),
                              torch.nn.Conv2d(3, 4, 3), torch.nn.AvgPool2d(2), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(36, 2)).eval()
    with torch.no_grad():
        bn = net[2]
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.uniform_(0.5, 2), bn.bias.uniform_(-1, 1)
    _export(net, (1, 1, 8, 8), tmp_path / "f.onnx")
    m, e = load_onnx(tmp_path / "f.onnx"), load_onnx_exact(tmp_path / "f.onnx")
    notes = " ".join(m.meta["reader_notes"])
    assert "folded exactly into the inputs" in notes and "folded exactly into the outputs of the convolution" in notes
    x = np.random.default_rng(0).integers(-8, 8, (2, 64)) / 8
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float().reshape(2, 1, 8, 8)))) < 1e-5
    ye = np.array([[float(int(v.p)) / float(int(v.q)) for v in e([fmpq(int(v * 8), 8) for v in r])] for r in x])
    assert np.max(np.abs(ye - m(x))) < 1e-13
    assert np.max(np.abs(from_torch(net, input_shape=(1, 8, 8))(x) - m(x))) < 1e-5
    # the same BatchNorm before a zero-padded conv does not fold exactly (its shift is not the padding's 0)
    net2 = torch.nn.Sequential(*net[:3], torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(256, 2)).eval()
    _export(net2, (1, 1, 8, 8), tmp_path / "g.onnx")
    with pytest.raises(InputError, match="does not fold exactly"):
        load_onnx(tmp_path / "g.onnx")
    with pytest.raises(InputError, match="does not fold exactly"):
        from_torch(net2, input_shape=(1, 8, 8))


@pytest.mark.parametrize("case", ["dense_dense", "conv_conv", "conv_dense"])
def test_two_linear_layers_in_a_row_compose_exactly(tmp_path, case):
    from flint import fmpq

    torch.manual_seed(0)
    nn = torch.nn
    shape = (1, 6) if case == "dense_dense" else (1, 1, 6, 6)
    net = {"dense_dense": nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2)),
           "conv_conv": nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, stride=2), nn.Conv2d(3, 2, 2), nn.ReLU(),
                                      nn.Flatten(), nn.Linear(8, 2)),
           "conv_dense": nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Conv2d(2, 2, 3), nn.Flatten(),
                                       nn.Linear(32, 3), nn.ReLU(), nn.Linear(3, 2))}[case].eval()
    _export(net, shape, tmp_path / "c.onnx")
    m, e = load_onnx(tmp_path / "c.onnx"), load_onnx_exact(tmp_path / "c.onnx")
    assert any("composed exactly into one" in n for n in m.meta["reader_notes"])
    n = int(np.prod(shape))
    x = np.random.default_rng(0).integers(-8, 8, (3, n)) / 8
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float().reshape(3, *shape[1:])))) < 1e-5
    ye = np.array([[float(int(v.p)) / float(int(v.q)) for v in e([fmpq(int(v * 8), 8) for v in r])] for r in x])
    assert np.max(np.abs(ye - m(x))) < 1e-12


def test_a_padded_conv_right_after_a_conv_is_refused_with_the_reason(tmp_path):
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.Conv2d(2, 2, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(72, 2)).eval()
    _export(net, (1, 1, 6, 6), tmp_path / "p.onnx")
    with pytest.raises(InputError, match="only when the second has padding 0"):
        load_onnx(tmp_path / "p.onnx")


# -- D4 (escnn's regular fields of the dihedral group, 8 channels each) -------------------------------

def _d4():
    """D4 as (r, f): x -> rot^r(flip^f(x)) on the last two axes; its multiplication table from a test image."""
    ops = [(r, f) for f in (0, 1) for r in range(4)]
    def T(g, x):
        r, f = g
        return torch.rot90(torch.flip(x, dims=(-1,)) if f else x, r, dims=(-2, -1))
    probe = torch.arange(9.0).reshape(3, 3) ** 1.5
    imgs = [T(g, probe) for g in ops]
    def index(x):
        return next(i for i, y in enumerate(imgs) if torch.equal(x, y))
    mul = [[index(T(a, T(b, probe))) for b in ops] for a in ops]
    inv = [next(b for b in range(8) if mul[a][b] == 0) for a in range(8)]
    return ops, T, mul, inv

def _d4_lift(K0):  # (F, 1, k, k) -> (8F, 1, k, k): channel 8f + a = T_a K0[f]
    ops, T, _, _ = _d4()
    return torch.stack([T(g, K0) for g in ops], 1).reshape(-1, *K0.shape[1:])

def _d4_regular(K0):  # (F, E, 8, k, k) -> (8F, 8E, k, k): K[8f + a, 8e + b] = T_a K0[f, e, a^-1 b]
    ops, T, mul, inv = _d4()
    F, E = K0.shape[:2]
    out = torch.zeros(8 * F, 8 * E, *K0.shape[-2:])
    for a in range(8):
        for b in range(8):
            out[a::8, b::8] = T(ops[a], K0[:, :, mul[inv[a]][b]])
    return out

def _d4_cnn(n=8, F=1, broken=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    c1, c2 = torch.nn.Conv2d(1, 8 * F, 3, padding=1), torch.nn.Conv2d(8 * F, 8 * F, 3, padding=1)
    b1, b2 = torch.nn.BatchNorm2d(8 * F), torch.nn.BatchNorm2d(8 * F)
    lin = torch.nn.Linear(8 * F, 3)
    with torch.no_grad():
        c1.weight.copy_(_d4_lift(torch.randn(F, 1, 3, 3, generator=gen) / 3))
        c1.bias.copy_(0.1 * torch.randn(F, generator=gen).repeat_interleave(8))
        c2.weight.copy_(_d4_regular(torch.randn(F, F, 8, 3, 3, generator=gen) / (3 * F)))
        c2.bias.copy_(0.1 * torch.randn(F, generator=gen).repeat_interleave(8))
        lin.weight.copy_(torch.randn(3, F, generator=gen).repeat_interleave(8, dim=1))
        if broken:
            c2.weight[0, 0, 0, 0] += 0.2
    for bn in (b1, b2):
        with torch.no_grad():
            for t, lo, hi in ((bn.weight, .5, 1.5), (bn.bias, -.3, .3), (bn.running_mean, -.2, .2), (bn.running_var, .5, 2.)):
                t.copy_((lo + (hi - lo) * torch.rand(F, generator=gen)).repeat_interleave(8))
    return torch.nn.Sequential(torch.nn.Sequential(c1, b1, torch.nn.ReLU()), torch.nn.AvgPool2d(2),
                               torch.nn.Sequential(c2, b2, torch.nn.ReLU()), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), lin, torch.nn.Softmax(dim=1)).eval()


def test_d4_cnn_reads_checks_verifies_and_a_broken_kernel_is_flagged(tmp_path, capsys):
    net = _d4_cnn()
    x = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for g in (lambda t: torch.rot90(t, 1, dims=(-2, -1)), lambda t: torch.flip(t, dims=(-1,))):
            assert float((net(x) - net(g(x))).abs().max()) < 1e-6
    _export(net, (1, 1, 8, 8), tmp_path / "d4.onnx")
    group = ["--group", "dihedral:8", "--group-output", "3"]
    assert main(["numeric-check", str(tmp_path / "d4.onnx"), *group]) == 0
    assert main(["verify", str(tmp_path / "d4.onnx"), *group, "--exact-floats"]) == 0
    _export(_d4_cnn(broken=True), (1, 1, 8, 8), tmp_path / "bad.onnx")
    assert main(["numeric-check", str(tmp_path / "bad.onnx"), *group]) == 1


def test_d4_cnn_certifies_and_checks(tmp_path):
    _export(_d4_cnn(), (1, 1, 8, 8), tmp_path / "d4.onnx")
    bar, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    assert main(["certify", str(tmp_path / "d4.onnx"), "--group", "dihedral:8", "--group-output", "3", "--out", str(bar),
                 "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(bar)]) == 0


# -- the escnn-style C4 net at 28x28, noise 1e-6 --------------------------------------------------

def _noisy(net, eps=1e-6, seed=2):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(eps * torch.randn(p.shape, generator=gen))
    return net


def test_escnn_style_c4_net_at_28x28_numeric_check(tmp_path, capsys):
    """5x5 convolutions, 4 regular fields, AvgPool2d(2) before the padded 5x5 conv: read as one 10x10 conv with
    stride 2 and padding 4 (the exact fold of docs/onnx.md); noise 1e-6 on every weight gives residuals ~3e-5."""
    net = _noisy(_c4_cnn(28, F=4, k1=5, k2=5, classes=10))
    _export(net, (1, 1, 28, 28), tmp_path / "c4.onnx")
    m = load_onnx(tmp_path / "c4.onnx")
    s = m.layers[1].shape
    assert (s.kh, s.kw, s.stride, s.padding, s.height) == (10, 10, 2, 4, 28)
    capsys.readouterr()
    assert main(["numeric-check", str(tmp_path / "c4.onnx"), "--group", "rot90:28", "--group-output", "10",
                 "--tol", "1e-4", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert 1e-7 < r["derivation"]["max_residual"] < 1e-4
    bad = _c4_cnn(28, F=4, k1=5, k2=5, classes=10, broken=True)
    _export(bad, (1, 1, 28, 28), tmp_path / "bad.onnx")
    assert main(["numeric-check", str(tmp_path / "bad.onnx"), "--group", "rot90:28", "--group-output", "10",
                 "--tol", "1e-4"]) == 1


@pytest.mark.slow
def test_escnn_style_c4_net_at_28x28_certifies_and_checks(tmp_path, capsys):
    """About 25 s: certify the noisy 28x28 net from its .onnx, symeq check accepts."""
    net = _noisy(_c4_cnn(28, F=4, k1=5, k2=5, classes=10))
    _export(net, (1, 1, 28, 28), tmp_path / "c4.onnx")
    bar, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    assert main(["certify", str(tmp_path / "c4.onnx"), "--group", "rot90:28", "--group-output", "10", "--out",
                 str(bar), "--certificate", str(cert), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["status"] == "certified"
    assert main(["check", str(cert), str(bar)]) == 0


# -- no exit 70; conv nets at width; the tolerance follows the dtype ------------------------------

def test_stride_two_on_an_even_grid_gets_residuals_not_exit_70(tmp_path, capsys):
    torch.manual_seed(0)
    conv, lin = torch.nn.Conv2d(1, 8, 3, stride=2, padding=1), torch.nn.Linear(8, 2)
    with torch.no_grad():
        conv.weight.copy_(_lift(torch.randn(2, 1, 3, 3)))
        lin.weight.copy_(torch.randn(2, 2).repeat_interleave(4, dim=1))
    net = torch.nn.Sequential(conv, torch.nn.Tanh(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), lin).eval()
    _export(net, (1, 1, 28, 28), tmp_path / "s2.onnx")
    assert main(["numeric-check", str(tmp_path / "s2.onnx"), "--group", "rot90:28", "--group-output", "2"]) == 1
    out = capsys.readouterr().out
    assert "on the dense rows, since the kernels' geometry does not carry the action" in out
    assert "N + 2p - k = 27 is not a multiple of the stride" in out


def test_stride_two_too_large_for_the_dense_rows_is_undetermined_with_the_reason(tmp_path, capsys):
    torch.manual_seed(0)
    conv, lin = torch.nn.Conv2d(1, 24, 3, stride=2, padding=1), torch.nn.Linear(24, 2)  # 24 x 14 x 14 = 4704 neurons
    net = torch.nn.Sequential(conv, torch.nn.Tanh(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), lin).eval()
    _export(net, (1, 1, 28, 28), tmp_path / "big.onnx")
    assert main(["numeric-check", str(tmp_path / "big.onnx"), "--group", "rot90:28", "--group-output", "2"]) == 3
    out = capsys.readouterr().out
    assert "undetermined" in out and "does not map this convolution's sampling grid onto itself" in out


def test_image_to_image_c4_net_at_28x28_without_dense_expansion(tmp_path, capsys):
    """Lifting conv (2 fields) -> tanh -> conv to one invariant channel: the output conv would be a dense
    784 x 6272 matrix (4.9 M entries, over the expansion limit); its check runs on the sparse form."""
    torch.manual_seed(0)
    c1, c2 = torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.Conv2d(8, 1, 3, padding=1)
    with torch.no_grad():
        c1.weight.copy_(_lift(torch.randn(2, 1, 3, 3)))
        c1.bias.copy_(torch.randn(2).repeat_interleave(4))
        K0 = torch.randn(2, 3, 3)
        c2.weight.copy_(torch.stack([torch.rot90(K0, r, dims=(-2, -1)) for r in range(4)], 1).reshape(1, 8, 3, 3))
    net = torch.nn.Sequential(c1, torch.nn.Tanh(), c2).double().eval()
    x = torch.randn(2, 1, 28, 28, dtype=torch.float64)
    with torch.no_grad():  # equivariant: rotating the input rotates the output image
        assert float((net(torch.rot90(x, 1, dims=(-2, -1))) - torch.rot90(net(x), 1, dims=(-2, -1))).abs().max()) < 1e-12
    _export(net, (1, 1, 28, 28), tmp_path / "i2i.onnx", dtype=torch.float64)
    assert main(["numeric-check", str(tmp_path / "i2i.onnx"), "--group", "rot90:28"]) == 0
    out, err = capsys.readouterr()
    assert "tolerance 1e-06 (the default for float64 weights)" in err and "layer 2, rot90: max residual" in out
    with torch.no_grad():
        c2.weight[0, 3, 0, 0] += 0.1  # one kernel not symmetric
    _export(net, (1, 1, 28, 28), tmp_path / "bad.onnx", dtype=torch.float64)
    assert main(["numeric-check", str(tmp_path / "bad.onnx"), "--group", "rot90:28"]) == 1


@pytest.mark.slow
def test_four_channel_image_to_image_c4_net_at_28x28(tmp_path, capsys):
    """The issue's case (about 10 s): 4 -> 16 -> 16 -> 4 channels at 28x28; the output conv's dense matrix would
    have 3136 x 12544 = 39 M entries.  numeric-check runs on the kernels and the sparse form."""
    import time

    torch.manual_seed(0)
    F = 4
    c1, c2, c3 = (torch.nn.Conv2d(4, 4 * F, 3, padding=1), torch.nn.Conv2d(4 * F, 4 * F, 3, padding=1),
                  torch.nn.Conv2d(4 * F, 4, 3, padding=1))
    with torch.no_grad():
        K0 = torch.randn(F, 4, 3, 3)
        c1.weight.copy_(torch.stack([torch.rot90(K0, r, dims=(-2, -1)) for r in range(4)], 1).reshape(4 * F, 4, 3, 3))
        c1.bias.copy_(torch.randn(F).repeat_interleave(4))
        c2.weight.copy_(_regular(torch.randn(F, F, 4, 3, 3) / 10))
        c2.bias.copy_(torch.randn(F).repeat_interleave(4))
        K1 = torch.randn(4, F, 3, 3)
        c3.weight.copy_(torch.stack([torch.rot90(K1, r, dims=(-2, -1)) for r in range(4)], 2).reshape(4, 4 * F, 3, 3))
    net = torch.nn.Sequential(c1, torch.nn.Tanh(), c2, torch.nn.Tanh(), c3).double().eval()
    _export(net, (1, 4, 28, 28), tmp_path / "i2i.onnx", dtype=torch.float64)
    t0 = time.perf_counter()
    assert main(["numeric-check", str(tmp_path / "i2i.onnx"), "--group", "rot90:28x4"]) == 0
    assert time.perf_counter() - t0 < 60


def test_default_tolerance_follows_the_weights_dtype(tmp_path, capsys):
    """A float32 export whose residuals (~3e-6) exceed float64's 1e-6 passes by default, fails with --tol 1e-6."""
    net = _mirror_mlp()
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(1 + 2e-6 * torch.randn(p.shape, generator=gen))
    _export(net, (2, 16), tmp_path / "m.onnx")
    assert main(["numeric-check", str(tmp_path / "m.onnx"), "--group", "mirror:4x4", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["tolerance"]["value"] == pytest.approx(256 * 2.0 ** -24) and 1e-6 < r["derivation"]["max_residual"] < 1.5e-5
    assert main(["numeric-check", str(tmp_path / "m.onnx"), "--group", "mirror:4x4", "--tol", "1e-6"]) == 1


def test_verify_exact_floats_refutes_an_elu_conv_net_with_arb_balls(tmp_path, capsys):
    """A real-activation conv net: proved layerwise when equivariant; when one kernel entry is off, the ball
    evaluation now runs through the conv kernels and gives the witness (it refused conv2d before)."""
    from symeq.equivariance import refute_with_balls
    from symeq.groups import builtin_group

    def net_for(broken):
        c1, lin = torch.nn.Conv2d(1, 8, 3, padding=1).double(), torch.nn.Linear(200, 2).double()
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            c1.weight.copy_(_lift(torch.randint(-4, 5, (2, 1, 3, 3), generator=gen).double() / 4))
            c1.bias.copy_(torch.tensor([0.5, -0.25], dtype=torch.float64).repeat_interleave(4))
            W = torch.randint(-3, 4, (2, 2, 5, 5), generator=gen).double() / 8
            lin.weight.copy_(torch.stack([torch.rot90(W, r, dims=(-2, -1)) for r in range(4)], 2).reshape(2, -1))
            if broken:
                c1.weight[0, 0, 0, 0] += 0.25
        return torch.nn.Sequential(c1, torch.nn.ELU(), torch.nn.Flatten(), lin)

    for broken, code in ((False, 0), (True, 1)):
        path = tmp_path / f"elu{int(broken)}.onnx"
        _export(net_for(broken), (1, 1, 5, 5), path, dtype=torch.float64)
        assert main(["verify", str(path), "--group", "rot90:5", "--group-output", "2", "--exact-floats"]) == code
    exact = load_onnx_exact(tmp_path / "elu1.onnx")
    r = refute_with_balls(exact, builtin_group("rot90:5", output=2))
    assert r is not None and r.holds is False and r.method == "arb-witness"


# -- residual additions: refused by the chain readers, the float twin for numeric-check ----------------

class _C4ResNet(torch.nn.Module):
    """stem conv -> BN -> ReLU -> relu(x + bn(conv(relu(bn(conv(x)))))) -> global mean -> Linear -> softmax."""

    def __init__(self, F=2, broken=False, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.stem, self.bn0 = torch.nn.Conv2d(1, 4 * F, 3, padding=1), torch.nn.BatchNorm2d(4 * F)
        self.c1, self.bn1 = torch.nn.Conv2d(4 * F, 4 * F, 3, padding=1), torch.nn.BatchNorm2d(4 * F)
        self.c2, self.bn2 = torch.nn.Conv2d(4 * F, 4 * F, 3, padding=1), torch.nn.BatchNorm2d(4 * F)
        self.lin = torch.nn.Linear(4 * F, 3)
        with torch.no_grad():
            self.stem.weight.copy_(_lift(torch.randn(F, 1, 3, 3, generator=gen) / 3))
            for c in (self.c1, self.c2):
                c.weight.copy_(_regular(torch.randn(F, F, 4, 3, 3, generator=gen) / (3 * F)))
            for c in (self.stem, self.c1, self.c2):
                c.bias.copy_(0.1 * torch.randn(F, generator=gen).repeat_interleave(4))
            self.lin.weight.copy_(torch.randn(3, F, generator=gen).repeat_interleave(4, dim=1))
            if broken:  # one kernel of the block's second conv not symmetric
                self.c2.weight[0, 0, 0, 0] += 0.2
        for bn in (self.bn0, self.bn1, self.bn2):
            _field_bn(bn, F, gen)

    def forward(self, x):
        x = torch.relu(self.bn0(self.stem(x)))
        x = torch.relu(x + self.bn2(self.c2(torch.relu(self.bn1(self.c1(x))))))
        return torch.softmax(self.lin(x.mean(dim=(2, 3))), dim=1)


def test_residual_block_float_twin_for_numeric_check_and_refusal_elsewhere(tmp_path, capsys):
    from symeq.numeric.onnx_graph import load_onnx_graph

    net = _C4ResNet().eval()
    assert _rot_invariance_error(net, 8) < 1e-6
    _export(net, (1, 1, 8, 8), tmp_path / "res.onnx")
    twin = load_onnx_graph(tmp_path / "res.onnx")  # the float graph model (docs/graphs.md)
    x = np.random.default_rng(0).standard_normal((3, 64))
    with torch.no_grad():
        logp = torch.log(net(torch.from_numpy(x).float().reshape(3, 1, 8, 8))).double().numpy()
    z = twin(x)
    assert np.max(np.abs(z - np.log(np.exp(z).sum(axis=1, keepdims=True)) - logp)) < 1e-5
    capsys.readouterr()
    group = ["--group", "rot90:8", "--group-output", "3"]
    assert main(["numeric-check", str(tmp_path / "res.onnx"), *group]) == 0
    out, err = capsys.readouterr()
    assert "Add read as the addition of stem_Conv, c1_Conv, then relu" in err
    assert "the action forced by the addition Add" in out and "float derivation along the graph" in out
    assert "homomorphism on the group's relations (order 4): max deviation 0" in out
    # certify reads the graph too (tests/numeric/test_resnet_clients.py, docs/certify.md "Graph networks")
    _export(_C4ResNet(broken=True).eval(), (1, 1, 8, 8), tmp_path / "bad.onnx")
    assert main(["numeric-check", str(tmp_path / "bad.onnx"), *group]) == 1
    out = capsys.readouterr().out
    assert "largest at node c1_Conv" in out and "NOT within tolerance" in out


# -- what the readers refuse, by name --------------------------------------------------------------

class _GroupPool(torch.nn.Module):
    """escnn's GroupPooling as it exports: a Reshape to 5-d and a max over each field's channels."""

    def __init__(self, keepdim=False):
        super().__init__()
        self.c, self.l = torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.Linear(2 * 16, 2)
        self.keepdim = keepdim

    def forward(self, x):
        y = torch.relu(self.c(x))
        return self.l(y.view(-1, 2, 4, 4, 4).amax(dim=2, keepdim=self.keepdim).flatten(1))


@pytest.mark.parametrize("case", ["group_pool", "layer_norm", "max_pool", "dropout_training",
                                  "softmax_inside"])  # a residual Add is read as a graph (tests/numeric/test_onnx_graph.py)  # group_pool, max_pool: the variants still refused
def test_unsupported_operators_are_refused_by_name_node_and_reason(tmp_path, capsys, case):
    path = tmp_path / f"{case}.onnx"
    shape, group = (1, 4), "sign:4"
    if case == "group_pool":
        net, shape, group = _GroupPool(keepdim=True).eval(), (1, 1, 4, 4), "rot90:4"  # (read: tests/exact/test_pooling_kinds.py)
        want = ("ReduceMax", "keepdims=0")
    elif case == "layer_norm":
        net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        want = ("LayerNormalization", "breaks the monomial latent groups")
    elif case == "max_pool":
        net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.MaxPool2d(2), torch.nn.ReLU(),
                                  torch.nn.Flatten(), torch.nn.Linear(8, 2))  # before the activation: refused
        shape, group, want = (1, 1, 4, 4), "rot90:4", ("MaxPool", "after an activation only")
    elif case == "dropout_training":
        net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))
        net.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, (torch.zeros(*shape),), str(path), dynamo=False,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        want = ("/Dropout)", "Dropout in training mode")
    else:
        net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Softmax(dim=1), torch.nn.Linear(3, 2))
        want = ("Softmax", "read only at the output")
    if case != "dropout_training":
        _export(net.eval() if hasattr(net, "eval") else net, shape, path)
    args = ["numeric-check", str(path), "--group", group] + (["--group-output", "2"] if group == "rot90:4" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "node " in err and all(w in err for w in want) and "Traceback" not in err, err


class _FieldMean(torch.nn.Module):
    """GroupPooling replaced by a mean over each field's 4 channels (the rewrite the issue's users made)."""

    def __init__(self, after_activation=True, F=2, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.after = after_activation
        self.c = torch.nn.Conv2d(1, 4 * F, 3, padding=1)
        self.c2 = torch.nn.Conv2d(F, F, 3, padding=1)
        self.l = torch.nn.Linear(F, 2)
        with torch.no_grad():
            self.c.weight.copy_(_lift(torch.randn(F, 1, 3, 3, generator=gen)))
            self.c.bias.copy_(torch.randn(F, generator=gen).repeat_interleave(4))
            K = torch.randn(F, F, 3, 3, generator=gen)
            self.c2.weight.copy_(sum(torch.rot90(K, r, dims=(-2, -1)) for r in range(4)) / 4)  # rotation-invariant

    def forward(self, x):
        y = self.c(x)
        b, _, h, w = y.shape
        if self.after:
            y = torch.relu(y).view(b, -1, 4, h, w).mean(2)
            y = torch.tanh(self.c2(y))
        else:
            y = torch.tanh(y.view(b, -1, 4, h, w).mean(2))
        return self.l(y.mean(dim=(2, 3)))


@pytest.mark.parametrize("after_activation", [True, False])
def test_a_mean_over_each_field_is_read_and_a_max_refused(tmp_path, capsys, after_activation):
    """(the max, escnn's GroupPooling, is refused in test_unsupported_operators_are_refused_by_name_node_and_reason)"""
    net = _FieldMean(after_activation).eval()
    assert _rot_invariance_error(net, 6) < 1e-6
    _export(net, (1, 1, 6, 6), tmp_path / "f.onnx")
    m = load_onnx(tmp_path / "f.onnx")
    side = "inputs" if after_activation else "outputs"
    assert any(f"a mean over each field's 4 channels folded exactly into the {side}" in n for n in m.meta["reader_notes"])
    x = np.random.default_rng(0).integers(-8, 8, (3, 36)) / 8
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float().reshape(3, 1, 6, 6)))) < 1e-5
    assert load_onnx_exact(tmp_path / "f.onnx").widths == m.widths  # (tanh is not evaluated exactly: shapes only)
    assert main(["numeric-check", str(tmp_path / "f.onnx"), "--group", "rot90:6", "--group-output", "2"]) == 0


@pytest.mark.parametrize("case", ["layer_norm", "max_pool", "dropout_training", "batchnorm_training"])
def test_from_torch_refuses_by_name(case):
    if case == "layer_norm":
        net, want = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2)), "LayerNorm"
    elif case == "max_pool":
        net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2, ceil_mode=True),
                                  torch.nn.Flatten(), torch.nn.Linear(2, 2))
        want = "ceil_mode"  # MaxPool2d itself is read (tests/exact/test_pooling_kinds.py)
    elif case == "dropout_training":
        net, want = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Dropout(0.5),
                                        torch.nn.Linear(4, 2)).train(), "Dropout in training mode"
    else:
        net, want = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Tanh(),
                                        torch.nn.Linear(4, 2)).train(), "BatchNorm1d in training mode"
    with pytest.raises(InputError, match=want):
        from_torch(net, input_shape=(1, 6, 6) if case == "max_pool" else None)


def test_a_dropout_node_in_eval_mode_is_dropped_and_in_training_mode_refused(tmp_path, capsys):
    """torch's exporter leaves eval-mode Dropout out; other exporters write the node (ratio, training_mode)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def write(training):
        inits = [numpy_helper.from_array(rng.standard_normal((3, 4)), "w1"), numpy_helper.from_array(np.zeros(3), "b1"),
                 numpy_helper.from_array(rng.standard_normal((2, 3)), "w2"), numpy_helper.from_array(np.zeros(2), "b2"),
                 numpy_helper.from_array(np.array(0.5), "ratio")]
        ins = ["z", "ratio"]
        if training is not None:
            inits.append(numpy_helper.from_array(np.array(training), "mode"))
            ins.append("mode")
        nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["z"], transB=1, name="gemm1"),
                 helper.make_node("Dropout", ins, ["d"], name="drop"),
                 helper.make_node("Tanh", ["d"], ["t"]), helper.make_node("Gemm", ["t", "w2", "b2"], ["y"], transB=1)]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [None, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [None, 2])], inits)
        path = tmp_path / f"drop{training}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return path

    for training in (None, False):
        m = load_onnx(write(training))
        assert m.widths == [4, 3, 2] and any("Dropout (eval mode: the identity) dropped" in n for n in m.meta["reader_notes"])
    assert main(["numeric-check", str(write(True)), "--group", "sign:4", "--group-output", "2"]) == 2
    err = capsys.readouterr().err
    assert "node 2 (drop): Dropout in training mode" in err


# -- the exact pooling rule ------------------------------------------------------------------------

def test_pooling_before_a_padded_conv_folds_exactly_when_the_windows_tile_the_image():
    from flint import fmpq

    from symeq.layers.conv import ConvLayer, ConvShape
    from symeq.layers.conv.floating import ExactFold, fold_pool_into_kernel, pool_before_conv

    nx = ConvShape(2, 3, 14, 14, 5, 5, stride=1, padding=2)
    s = pool_before_conv((2, 2, 2, 2, (2, 28, 28)), nx)
    assert (s.kh, s.kw, s.stride, s.padding, s.out_hw) == (10, 10, 2, 4, (14, 14))
    for pool, shape in (((3, 3, 2, 2, (2, 29, 29)), ConvShape(2, 3, 14, 14, 5, 5, padding=2)),  # overlapping windows
                        ((2, 2, 2, 2, (2, 29, 29)), ConvShape(2, 3, 14, 14, 5, 5, padding=2))):  # a remainder row
        with pytest.raises(InputError, match="does not fold exactly"):
            pool_before_conv(pool, shape)
    # exactly: pooling then the padded conv equals the folded conv, in rationals, on a small case
    rng = np.random.default_rng(0)
    pool = (2, 2, 2, 2, (1, 4, 4))
    small = ConvShape(1, 1, 2, 2, 3, 3, padding=1)
    K = rng.integers(-3, 4, (1, 1, 3, 3)).astype(float)
    folded = ConvLayer(pool_before_conv(pool, small), fold_pool_into_kernel(ExactFold.arr(K), ExactFold, pool).tolist(),
                       [fmpq(1, 3)], None)
    plain = ConvLayer(small, ExactFold.arr(K).tolist(), [fmpq(1, 3)], None)
    x = [fmpq(int(v), 7) for v in rng.integers(-9, 10, 16)]
    pooled = [sum(x[(2 * i + a) * 4 + 2 * j + b] for a in range(2) for b in range(2)) / 4 for i in range(2) for j in range(2)]
    assert folded(x) == plain(pooled)


def test_model_files_fold_pooling_before_a_padded_conv_by_the_same_rule():
    """symeq.layers.conv.fold_average_pool (the model-file reader's avgpool2d) folds the tiling case too, with
    the same kernel as symeq.layers.conv.floating; overlapping windows before a padded conv stay refused."""
    from flint import fmpq

    from symeq.layers.conv import ConvLayer, ConvShape, fold_average_pool
    from symeq.layers.conv.floating import ExactFold, fold_pool_into_kernel, pool_before_conv

    rng = np.random.default_rng(1)
    K = rng.integers(-3, 4, (2, 1, 3, 3)).astype(float)
    nxt = ConvLayer(ConvShape(1, 2, 3, 3, 3, 3, padding=1), ExactFold.arr(K).tolist(), [fmpq(1), fmpq(-1)], None)
    folded = fold_average_pool(2, 2, (1, 6, 6), nxt)
    pool = (2, 2, 2, 2, (1, 6, 6))
    assert folded.shape == pool_before_conv(pool, nxt.shape)
    assert folded.kernel == fold_pool_into_kernel(ExactFold.arr(K), ExactFold, pool).tolist()
    with pytest.raises(InputError, match="does not fold exactly"):
        fold_average_pool(3, 2, (1, 7, 7), ConvLayer(ConvShape(1, 2, 3, 3, 3, 3, padding=1), ExactFold.arr(K).tolist(),
                                                     None, None))


# -- external data: beside the file, never the current directory ---------------------------------

def _external(net, directory, stem="net"):
    from onnx import external_data_helper

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.onnx"
    _export(net, (1, 4), path)
    proto = onnx.load(str(path))
    external_data_helper.convert_model_to_external_data(proto, all_tensors_to_one_file=True,
                                                        location=f"{stem}.onnx.data", size_threshold=0)
    onnx.save_model(proto, str(path))
    assert (directory / f"{stem}.onnx.data").is_file()
    return path


def _mlp4(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2)).eval()


def test_external_data_is_read_beside_the_file_from_another_directory(tmp_path, monkeypatch):
    net = _mlp4(0)
    path = _external(net, tmp_path / "models")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    m = load_onnx(path)
    x = np.random.default_rng(0).standard_normal((3, 4))
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float()))) < 1e-6


def test_a_stray_data_file_in_the_current_directory_is_never_read(tmp_path, monkeypatch, capsys):
    mine, other = _mlp4(0), _mlp4(1)
    path = _external(mine, tmp_path / "models")
    _external(other, tmp_path / "cwd")  # cwd/net.onnx.data holds another network's weights
    monkeypatch.chdir(tmp_path / "cwd")
    x = np.random.default_rng(0).standard_normal((3, 4))
    assert np.max(np.abs(load_onnx(path)(x) - _logits_of(mine, torch.from_numpy(x).float()))) < 1e-6
    # with the data file missing beside the model, the one in the current directory is still not used
    os.remove(tmp_path / "models" / "net.onnx.data")
    assert main(["numeric-check", str(path), "--group", "sign:4", "--group-output", "2"]) == 2
    err = capsys.readouterr().err
    assert "not beside the .onnx file" in err and str(tmp_path / "models") in err


def test_external_data_outside_the_model_directory_is_refused(tmp_path):
    from onnx import external_data_helper

    path = _external(_mlp4(0), tmp_path / "models")
    proto = onnx.load(str(path), load_external_data=False)
    for t in external_data_helper._get_all_tensors(proto):
        for e in t.external_data:
            if e.key == "location":
                e.value = "../net.onnx.data"
    onnx.save_model(proto, str(path))
    with pytest.raises(InputError, match="only from a relative path beside the .onnx file"):
        load_onnx(path)


def test_dynamo_exporter_output_reads_like_the_torchscript_one(tmp_path):
    """torch >= 2.9's default exporter (needs onnxscript) writes ReduceMean and NAME.onnx.data."""
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript: pip install 'symeq[onnx]'")
    net = _c4_cnn(8, head=torch.nn.Softmax(dim=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            torch.onnx.export(net, (torch.zeros(1, 1, 8, 8),), str(tmp_path / "d.onnx"), dynamo=True)
    m = load_onnx(tmp_path / "d.onnx")
    x = np.random.default_rng(0).standard_normal((3, 64))
    assert np.max(np.abs(m(x) - _logits_of(net, torch.from_numpy(x).float().reshape(3, 1, 8, 8)))) < 1e-5
    assert m.meta["output_op"]["type"] == "softmax"
