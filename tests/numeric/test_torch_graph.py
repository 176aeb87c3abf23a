"""torch modules with residual additions and concatenations read by torch.fx tracing into float graph models
(symeq/numeric/torch_graph.py, docs/graphs.md), and the float derivation along them."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")

from symeq.errors import InputError  # noqa: E402
from symeq.groups import builtin_group  # noqa: E402
from test_onnx_graph import _Concat, _ResNet  # noqa: E402  (the networks are written there)

MIRROR = builtin_group("mirror:8x8", output=3)


def _read(net):
    from symeq.numeric.models import from_torch

    return from_torch(net.eval(), input_shape=(1, 8, 8))


def _torch_out(net, x):
    with torch.no_grad():
        return net(torch.from_numpy(x).float().reshape(len(x), 1, 8, 8)).double().numpy()


def test_a_residual_module_reads_as_a_graph_with_its_batchnorms_folded():
    from symeq.graph import GraphModel
    from symeq.numeric.graph import derive_graph_numeric

    net = _ResNet()
    g = _read(net)
    assert isinstance(g, GraphModel) and not g.exact
    assert [n.op for n in g.nodes if n.is_join] == ["add", "add"]
    assert next(p for p in net.parameters()).dtype == torch.float32  # the caller's module is left as it was
    x = np.random.default_rng(0).standard_normal((4, 64))
    assert np.max(np.abs(g(x) - _torch_out(net, x))) < 1e-5
    assert any("BatchNorm2d (eval) folded exactly" in n for n in g.meta["reader_notes"])
    d = derive_graph_numeric(g, MIRROR, tol=1e-5)
    assert d.status == "within tolerance" and d.homomorphism_error is not None
    assert d.spaces == [s.name for s in g.hidden_spaces()] and all(a is not None for acts in d.actions for a in acts)


def test_a_broken_block_shows_at_its_node():
    from symeq.numeric.graph import derive_graph_numeric

    net = _ResNet()
    with torch.no_grad():
        net.blocks[0].c1.weight[2, 1, 1, 0] += 0.4
    d = derive_graph_numeric(_read(net), MIRROR, tol=1e-5)
    worst = max(d.residuals, key=lambda r: r.residual)
    assert d.status == "not within tolerance" and worst.residual > 0.01 and worst.space.startswith("blocks_0_c1")


def test_concatenation_module():
    from symeq.numeric.graph import derive_graph_numeric

    net = _Concat()
    g = _read(net)
    assert [n.op for n in g.nodes if n.is_join] == ["concat"]
    x = np.random.default_rng(2).standard_normal((3, 64))
    assert np.max(np.abs(g(x) - _torch_out(net, x))) < 1e-5
    assert derive_graph_numeric(g, MIRROR, tol=1e-5).status == "within tolerance"


class _Chain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


class _Bad(torch.nn.Module):
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
            return self.h(u + 1.0)
        if self.how == "view":
            return self.h((u + v).view(-1, 4))
        if self.how == "branchy":
            return self.h(u) if x.sum() > 0 else self.h(v)
        return self.h(torch.cat([u, v], dim=0))


def test_a_traced_chain_is_left_to_the_chain_reader():
    from types import SimpleNamespace

    from symeq.numeric.torch_graph import from_torch_graph

    assert from_torch_graph(_Chain().eval(), SimpleNamespace(torch=torch)) is None


@pytest.mark.parametrize("how, want", [("mul", "a product of two branches"), ("sub", "a difference of two branches"),
                                       ("constant", "not a layer's bias"), ("view", "x.view"),
                                       ("branchy", "torch.fx cannot trace"), ("cat0", "along dim 1")])
def test_what_is_not_read_is_refused_by_name(how, want):
    from symeq.numeric.models import from_torch

    with pytest.raises(InputError) as e:
        from_torch(_Bad(how).eval())
    assert want in str(e.value), str(e.value)
    assert how == "branchy" or "traced node" in str(e.value)


def test_training_mode_is_refused():
    from symeq.numeric.models import from_torch

    with pytest.raises(InputError, match="training mode"):
        from_torch(_ResNet().train(), input_shape=(1, 8, 8))


def test_from_torch_reads_modules_by_tracing_and_sequentials_as_before():
    from symeq.graph import GraphModel
    from symeq.numeric.models import NumericModel, from_torch

    g = from_torch(_ResNet().eval(), input_shape=(1, 8, 8))
    assert isinstance(g, GraphModel) and [n.op for n in g.nodes if n.is_join] == ["add", "add"]
    net = _Chain().eval()
    chain = from_torch(net)  # a module of its own whose trace is a chain: its NumericModel
    assert isinstance(chain, NumericModel) and chain.widths == [4, 4, 2]
    x = np.random.default_rng(3).standard_normal((2, 4))
    with torch.no_grad():
        assert np.max(np.abs(chain(x) - net(torch.from_numpy(x).float()).double().numpy())) < 1e-6
    seq = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Sequential(torch.nn.Linear(3, 2)))
    assert isinstance(from_torch(seq), NumericModel)


class _CatThenRelu(torch.nn.Module):
    """relu(cat(conv_a(x), bn(conv_b(x)))): the concatenation's inputs are affine, its activation after it."""

    def __init__(self, seed=0, broken=False):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.a, self.b = torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.Conv2d(1, 3, 1)
        self.bn, self.head = torch.nn.BatchNorm2d(3), torch.nn.Linear(5, 3)
        with torch.no_grad():
            for m in (self.a, self.b):
                m.weight.copy_((lambda w: (w + w.flip(-1)) / 2)(torch.randn(m.weight.shape, generator=gen)))
            self.bn.running_var.copy_(0.5 + torch.rand(3, generator=gen))
            if broken:
                self.a.weight[1, 0, 2, 0] += 0.5

    def forward(self, x):
        return self.head(torch.relu(torch.cat([self.a(x), self.bn(self.b(x))], dim=1)).mean(dim=(2, 3)))


def test_a_concatenation_of_affine_branches_forces_their_actions():
    from symeq.numeric.graph import derive_graph_numeric

    d = derive_graph_numeric(_read(_CatThenRelu()), MIRROR, tol=1e-5)
    assert d.status == "within tolerance", d.report()
    assert "matched as one layer on their inputs' direct sum" in d.report() and "forced by the concatenation" in \
        d.report()
    d = derive_graph_numeric(_read(_CatThenRelu(broken=True)), MIRROR, tol=1e-5)
    worst = max(d.residuals, key=lambda r: r.residual)
    assert d.status == "not within tolerance" and worst.residual > 0.01
