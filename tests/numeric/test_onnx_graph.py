"""ONNX graphs that are not chains (docs/graphs.md, docs/onnx.md): residual additions, channel concatenation
and a tensor read twice, read into float graph models and checked by ``symeq numeric-check`` along the graph.

The networks are written here: a residual CNN on 8x8 images, mirror-equivariant by construction (every kernel
averaged with its left-right flip, so each channel maps to itself under the mirror), exported by torch's
TorchScript exporter; a broken copy (one kernel of one block not symmetric); a concatenation network; and
graphs symeq refuses, by operator and node.
"""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
pytest.importorskip("onnx", reason="needs onnx: pip install 'symeq[onnx]'")

from symeq.cli import main  # noqa: E402

GROUP = ["--group", "mirror:8x8", "--group-output", "3"]


def _symmetric(w):
    return (w + w.flip(-1)) / 2


class _Block(torch.nn.Module):
    """relu(skip(x) + bn(conv(relu(bn(conv(x)))))), skip the identity or a 1x1 convolution."""

    def __init__(self, C, projection=False):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(C, C, 3, padding=1), torch.nn.BatchNorm2d(C)
        self.c2, self.b2 = torch.nn.Conv2d(C, C, 3, padding=1), torch.nn.BatchNorm2d(C)
        self.skip = torch.nn.Conv2d(C, C, 1) if projection else None

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu((x if self.skip is None else self.skip(x)) + y)


class _ResNet(torch.nn.Module):
    def __init__(self, seed=0, projection=False, noise=0.0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.stem = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.blocks = torch.nn.Sequential(_Block(4), _Block(4, projection))
        self.head = torch.nn.Linear(4, 3)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, torch.nn.Conv2d):
                    m.weight.copy_(_symmetric(torch.randn(m.weight.shape, generator=gen) / 3))
                    m.weight.add_(noise * torch.randn(m.weight.shape, generator=gen))
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.copy_(0.2 * torch.randn(4, generator=gen))
                    m.running_var.copy_(0.5 + torch.rand(4, generator=gen))
                    m.weight.copy_(0.5 + torch.rand(4, generator=gen))
                    m.bias.copy_(0.2 * torch.randn(4, generator=gen))

    def forward(self, x):
        return self.head(self.blocks(torch.relu(self.stem(x))).mean(dim=(2, 3)))


class _Concat(torch.nn.Module):
    """relu(conv_a(x)) and relu(conv_b(x)) concatenated on channels (x read by both), then a conv and a head."""

    def __init__(self, seed=0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.a, self.b = torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.Conv2d(1, 3, 3, padding=1)
        self.c, self.head = torch.nn.Conv2d(5, 4, 3, padding=1), torch.nn.Linear(4, 3)
        with torch.no_grad():
            for m in (self.a, self.b, self.c):
                m.weight.copy_(_symmetric(torch.randn(m.weight.shape, generator=gen)))

    def forward(self, x):
        y = torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], dim=1)
        return self.head(torch.tanh(self.c(y)).mean(dim=(2, 3)))


def _export(net, path, fold=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net.eval(), (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False, do_constant_folding=fold)
    return path


def _check(capsys, path, *extra):
    capsys.readouterr()
    code = main(["numeric-check", str(path), *GROUP, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_residual_cnn_reads_as_a_graph_and_checks_along_it(tmp_path, capsys):
    from symeq.graph import GraphModel
    from symeq.numeric.onnx_graph import load_onnx_graph

    net = _ResNet()
    path = _export(net, tmp_path / "res.onnx", fold=False)  # the BatchNorms stay nodes: folded by symeq
    g = load_onnx_graph(path)
    assert isinstance(g, GraphModel) and not g.exact and not g.is_chain
    assert [n.op for n in g.nodes if n.is_join] == ["add", "add"]
    x = np.random.default_rng(0).standard_normal((4, 64))
    with torch.no_grad():
        want = net(torch.from_numpy(x).float().reshape(4, 1, 8, 8)).double().numpy()
    assert np.max(np.abs(g(x) - want)) < 1e-5
    notes = " ".join(g.meta["reader_notes"])
    assert "BatchNormalization (eval) folded exactly into the outputs" in notes and "read as the addition of" in notes
    code, out, err = _check(capsys, path)
    assert code == 0, out + err
    assert "every node equivariant through K within tolerance" in out and "homomorphism" in out
    assert "the action forced by the addition" in out and "relu admits it" in out
    assert "verified" not in out
    # --json: one action per hidden space, named
    code, out, _ = _check(capsys, path, "--json")
    import json

    r = json.loads(out)
    spaces = [s.name for s in g.hidden_spaces()]
    assert code == 0 and r["derivation"]["spaces"] == spaces
    assert [a["layer"] for a in r["actions"]] == spaces and all(a["kind"] == "monomial" for a in r["actions"])


def test_float_noise_shows_as_residuals(tmp_path, capsys):
    path = _export(_ResNet(noise=1e-4), tmp_path / "noisy.onnx")
    code, out, _ = _check(capsys, path)
    assert code == 1 and "NOT within tolerance" in out
    code, out, _ = _check(capsys, path, "--tol", "0.05")
    assert code == 0, out


def test_a_broken_block_has_a_large_residual_at_that_block(tmp_path, capsys):
    from symeq.numeric.graph import derive_graph_numeric
    from symeq.numeric.onnx_graph import load_onnx_graph
    from symeq.groups import builtin_group

    net = _ResNet()
    with torch.no_grad():
        net.blocks[1].c2.weight[0, 0, 0, 0] += 0.3  # the second block's second kernel, no longer symmetric
    path = _export(net, tmp_path / "bad.onnx")
    code, out, _ = _check(capsys, path)
    assert code == 1 and "NOT within tolerance" in out
    d = derive_graph_numeric(load_onnx_graph(path), builtin_group("mirror:8x8", output=3), tol=1e-5)
    worst = max(d.residuals, key=lambda r: r.residual)
    assert worst.residual > 0.01 and "blocks_1" in worst.space and "forced by the addition" in worst.method
    assert all(r.residual < 1e-5 for r in d.residuals if "blocks_1" not in r.space)


def test_a_projection_skip_is_matched_as_one_layer_on_both_inputs(tmp_path, capsys):
    """relu(P x + W y), both inputs affine: the float twin matches the sum as one layer, then forces it on each."""
    net = _ResNet(projection=True)
    code, out, _ = _check(capsys, _export(net, tmp_path / "proj.onnx"))
    assert code == 0 and "the addition's affine inputs matched as one layer on their inputs' direct sum" in out, out
    with torch.no_grad():
        net.blocks[1].c2.weight[1, 2, 0, 0] += 0.3
    code, out, _ = _check(capsys, _export(net, tmp_path / "proj_bad.onnx"))
    assert code == 1 and "largest at node blocks_blocks_1_" in out, out


def test_concatenation_and_a_tensor_read_twice(tmp_path, capsys):
    from symeq.numeric.onnx_graph import load_onnx_graph

    net = _Concat()
    path = _export(net, tmp_path / "cat.onnx")
    g = load_onnx_graph(path)
    assert [n.op for n in g.nodes if n.is_join] == ["concat"]
    assert [n.inputs for n in g.nodes if not n.is_join][:2] == [("input",), ("input",)]
    x = np.random.default_rng(1).standard_normal((3, 64))
    with torch.no_grad():
        want = net(torch.from_numpy(x).float().reshape(3, 1, 8, 8)).double().numpy()
    assert np.max(np.abs(g(x) - want)) < 1e-5
    code, out, _ = _check(capsys, path)
    assert code == 0 and "block sum of the inputs' actions" in out, out
    with torch.no_grad():
        net.b.weight[1, 0, 0, 2] += 0.5
    code, out, _ = _check(capsys, _export(net, tmp_path / "cat_bad.onnx"))
    assert code == 1, out


def test_chains_still_read_as_chains(tmp_path):
    from symeq.numeric.models import NumericModel
    from symeq.numeric.onnx_graph import read_onnx_graph
    from symeq.numeric.onnx_io import load_onnx

    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.SiLU(), torch.nn.Flatten(),
                              torch.nn.Linear(128, 3))
    path = _export(net, tmp_path / "chain.onnx")
    assert read_onnx_graph(path) is None  # SiLU's x * sigmoid(x) reads x twice: an activation, not a branch
    assert isinstance(load_onnx(path), NumericModel)


class _Two(torch.nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.a, self.b, self.h = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

    def forward(self, x):
        u, v = torch.relu(self.a(x)), torch.relu(self.b(x))
        if self.how == "mul":
            return self.h(u * v)
        if self.how == "sub":
            return self.h(u - v)
        if self.how == "constant":
            return self.h(u + v + torch.arange(4.0))
        return self.h(torch.cat([u, v], dim=0)[:1])


@pytest.mark.parametrize("how, want", [("mul", "Mul"), ("sub", "Sub"), ("constant", "an activation acts elementwise")])
def test_unsupported_joins_are_refused_by_name_and_node(tmp_path, capsys, how, want):
    path = tmp_path / f"{how}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Two(how).eval(), (torch.zeros(1, 4),), str(path), dynamo=False)
    capsys.readouterr()
    assert main(["numeric-check", str(path), "--group", "sign:4", "--group-output", "2"]) == 2
    err = capsys.readouterr().err
    assert "node " in err and want in err and "Traceback" not in err, err


@pytest.mark.slow
def test_the_dynamo_exporter_reads_the_same(tmp_path, capsys):
    """torch >= 2.9's default exporter (onnxscript): other node names and ops, the same graph and verdicts."""
    pytest.importorskip("onnxscript", reason="needs onnxscript: pip install 'symeq[onnx]'")
    net = _ResNet(projection=True).eval()
    path = tmp_path / "dyn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=True)
    code, out, _ = _check(capsys, path)
    assert code == 0 and "pixels: mirror (left-right) of the 8x8 grid" in out, out


def test_chain_only_options_are_refused_on_graphs(tmp_path, capsys):
    path = _export(_Concat(), tmp_path / "cat.onnx")
    for flag in ("--metric", "--fdim"):
        code, _, err = _check(capsys, path, flag)
        assert code == 2 and "cover chains of layers" in err and "Traceback" not in err
