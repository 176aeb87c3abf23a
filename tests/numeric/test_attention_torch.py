"""Attention in (issue 29, docs/attention.md): nn.MultiheadAttention and the hand-written block read
by from_torch, and torch's exported ONNX attention subgraph read by load_onnx."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch attention needs torch: pip install 'symeq[numeric]'")
pytest.importorskip("onnx", reason="ONNX files need onnx: pip install 'symeq[onnx]'")
pytest.importorskip("onnxruntime", reason="the ONNX attention reader checks with onnxruntime: pip install onnxruntime")

from symeq.errors import InputError  # noqa: E402
from symeq.numeric.models import from_torch  # noqa: E402
from symeq.numeric.onnx_io import load_onnx  # noqa: E402
from symeq.layers.attention.torch_modules import TokenAttention, read_torch_attention  # noqa: E402


def from_torch_attention(module, tokens=None):
    layer, _ = read_torch_attention(module, tokens=tokens)
    return layer


class Block(torch.nn.Module):
    """The common hand-written attention block (Linear q, k, v, scaled dot product, softmax, out)."""

    def __init__(self, d, heads, tokens, bias=True, factor=1.0):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(d, d, bias=bias) for _ in range(3))
        self.o = torch.nn.Linear(d, d, bias=bias)
        self.num_heads, self.tokens, self.factor = heads, tokens, factor

    def forward(self, x):
        x = x.reshape(x.shape[0], self.tokens, -1)
        N, T, d = x.shape
        H = self.num_heads
        hd = d // H

        def split(t):
            return t.view(N, T, H, hd).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        a = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5, -1)
        return (self.factor * self.o((a @ v).transpose(1, 2).reshape(N, T, d))).reshape(N, -1)


def _export(module, n, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (torch.randn(2, n),), str(path), dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_read_and_exported(tmp_path, batch_first, bias):
    torch.manual_seed(3)
    m = TokenAttention(4, 6, 3, bias=bias, batch_first=batch_first).eval()
    if bias:  # torch starts the biases at 0: make them matter
        with torch.no_grad():
            m.attn.in_proj_bias.normal_()
            m.attn.out_proj.bias.normal_()
    read = from_torch(m)                      # the hook in from_torch
    layer = read.layers[0]
    assert layer.scoring == "softmax" and len(layer.query) == 3 and layer.tokens == 4
    assert (layer.score_bias is not None) == bias and (layer.bias is not None) == bias
    X = np.random.default_rng(0).standard_normal((7, 24))
    with torch.no_grad():
        ref = m.double()(torch.tensor(X)).numpy()
    m.float()
    assert np.max(np.abs(read(X) - ref)) < 1e-12
    # the bare module, with the number of tokens given
    assert np.max(np.abs(from_torch_attention(m.attn, tokens=4)(X) - ref)) < 1e-12
    f = tmp_path / "mha.onnx"
    _export(m, 24, f)
    onnx_read = load_onnx(f)
    assert "3 heads" in onnx_read.meta["reader_notes"][0]
    assert np.max(np.abs(onnx_read(X) - read(X))) < 1e-5 * max(1.0, np.abs(ref).max())


def test_hand_written_block_read_and_exported(tmp_path):
    torch.manual_seed(4)
    b = Block(6, 2, 5).eval()
    read = from_torch_attention(b)
    X = np.random.default_rng(1).standard_normal((4, 30))
    with torch.no_grad():
        ref = b.double()(torch.tensor(X)).numpy()
    b.float()
    assert np.max(np.abs(read(X) - ref)) < 1e-12
    f = tmp_path / "block.onnx"
    _export(b, 30, f)
    assert np.max(np.abs(load_onnx(f)(X) - read(X))) < 1e-5


def test_refusals(tmp_path):
    torch.manual_seed(5)
    with pytest.raises(InputError, match="does not compute standard softmax"):
        from_torch_attention(Block(6, 2, 5, factor=1.5))        # forward is not the weights' attention
    with pytest.raises(InputError, match="kdim or vdim"):
        from_torch_attention(torch.nn.MultiheadAttention(4, 2, kdim=3, vdim=3), tokens=2)
    with pytest.raises(InputError, match="add_bias_kv"):
        from_torch_attention(torch.nn.MultiheadAttention(4, 2, add_bias_kv=True), tokens=2)
    with pytest.raises(InputError, match="number of tokens"):
        from_torch_attention(torch.nn.MultiheadAttention(4, 2))

    class Tanh(Block):
        def forward(self, x):
            return torch.tanh(super().forward(x))

    f = tmp_path / "tanh.onnx"
    _export(Tanh(6, 2, 5), 30, f)
    with pytest.raises(InputError, match=r"\(Tanh\): not an operator of the attention subgraph"):
        load_onnx(f)

    class Twice(Block):  # two attention layers: two Softmax nodes
        def forward(self, x):
            return super().forward(super().forward(x))

    f = tmp_path / "twice.onnx"
    _export(Twice(6, 2, 5), 30, f)
    with pytest.raises(InputError, match="2 Softmax nodes"):
        load_onnx(f)


def test_exported_multihead_attention_autoencoder_certifies_and_checks(tmp_path):
    """Acceptance (issue 29): a torch nn.MultiheadAttention autoencoder exported with
    torch.onnx.export(dynamo=False) certifies, and symeq check accepts the certificate."""
    from symeq.certification import certify
    from symeq.cli import main
    from symeq.groups.tokens import patch_mirror
    from symeq.layers.attention.torch_modules import to_torch_attention

    group = patch_mirror(2, 8, 1, 4)             # 4 tokens of 4 pixels: tokens and pixels mirrored
    torch.manual_seed(7)
    raw = TokenAttention(4, 4, 2, bias=True).eval()
    with torch.no_grad():
        raw.attn.in_proj_bias.normal_()
        raw.attn.out_proj.bias.normal_()
    bar = certify(from_torch(raw), group)        # a layerwise-equivariant attention layer, exactly
    assert bar.status == "certified"
    net = to_torch_attention(bar.float_model.layers[0])
    with torch.no_grad():                        # a trained network is never exactly equivariant
        for p in net.parameters():
            p.add_(1e-5 * torch.randn_like(p))
    f = tmp_path / "mha_autoencoder.onnx"
    _export(net, 16, f)
    out, cert = tmp_path / "theta_bar.json", tmp_path / "theta_bar.cert.json"
    code = main(["certify", str(f), "--group", "patchmirror:2x8:1x4", "--out", str(out), "--certificate", str(cert)])
    assert code == 0
    c = certify(str(f), group)
    assert c.status == "certified" and c.distance < 1e-3
    assert c.actions["head_permutation"] == bar.actions["head_permutation"]
    assert main(["check", str(cert), str(out)]) == 0


def test_dynamo_export_with_a_fixed_batch_is_read(tmp_path):
    """torch's newer exporter (dynamo=True, a fixed batch size of 2) writes the same operators; the
    reader runs onnxruntime in batches of the file's size."""
    pytest.importorskip("onnxscript", reason="torch's dynamo exporter needs onnxscript: pip install 'symeq[onnx]'")
    torch.manual_seed(8)
    m = TokenAttention(4, 6, 3).eval()
    with torch.no_grad():
        m.attn.in_proj_bias.normal_()
    f = tmp_path / "dynamo.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(2, 24),), str(f), dynamo=True, input_names=["x"], output_names=["y"])
    X = np.random.default_rng(3).standard_normal((5, 24))
    assert np.max(np.abs(load_onnx(f)(X) - from_torch(m)(X))) < 1e-5


def test_certify_bounded_search_for_a_group_of_order_4():
    """A group other than {e, g} (here the two mirrors of a 2x4 image in 1x2 patches, order 4): the bounded
    search (SVD gauge, per-element head permutation and sign blocks), labelled not proven nearest."""
    from symeq.certification import certify
    from symeq.groups.tokens import attention_group
    from symeq.numbers import matrix
    from symeq_check import check_certificate
    from symeq.io import model_to_json
    import json

    swap, one = matrix([[0, 1], [1, 0]]), matrix([[1, 0], [0, 1]])
    G = attention_group(4, [([1, 0, 3, 2], swap, swap), ([2, 3, 0, 1], one, one)], ["h", "v"])
    torch.manual_seed(0)
    first = certify(from_torch(TokenAttention(4, 2, 2)), G)
    assert first.status == "certified" and "bounded search" in first.method and not first.proven_nearest
    near = first.float_model
    rng = np.random.default_rng(0)
    for mats in (near.layers[0].query, near.layers[0].key, near.layers[0].value, near.layers[0].out):
        for M in mats:
            M += 1e-5 * rng.standard_normal(M.shape)
    c = certify(near, G)
    assert c.status == "certified" and c.distance < 1e-4
    cert, model = json.loads(json.dumps(c.certificate())), json.loads(json.dumps(model_to_json(c.model)))
    assert check_certificate(cert, model).accepted is True


def _opset23(module, n, path):
    pytest.importorskip("onnxscript", reason="torch's dynamo exporter needs onnxscript: pip install 'symeq[onnx]'")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module.eval(), (torch.randn(2, n),), str(path), dynamo=True, opset_version=23,
                              input_names=["x"], output_names=["y"])
        except Exception as e:  # an older torch without opset 23
            pytest.skip(f"this torch does not export opset 23 ({type(e).__name__}): pip install 'torch>=2.9'")
    import onnx

    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    if "Attention" not in ops:
        pytest.skip("this torch writes no fused Attention at opset 23: pip install 'torch>=2.9'")


def test_opset_23_fused_attention_is_read_and_certified(tmp_path):
    """torch's dynamo exporter at opset 23 writes ONNX's fused Attention node: read in the Softmax's place
    (the projections upstream of Q, K and V), the same function as from_torch, certified and checked."""
    from symeq.cli import main

    torch.manual_seed(8)
    m = TokenAttention(4, 6, 3).eval()
    with torch.no_grad():
        m.attn.in_proj_bias.normal_()
    f = tmp_path / "mha23.onnx"
    _opset23(m, 24, f)
    model = load_onnx(f)
    assert "fused Attention" in " ".join(model.meta["reader_notes"])
    X = np.random.default_rng(3).standard_normal((5, 24))
    assert np.max(np.abs(model(X) - from_torch(m)(X))) < 1e-5
    # the mirror of 1 x 4 tokens (tokens reversed, channels reversed) certifies its nearest equivariant layer
    out, cert = tmp_path / "bar.json", tmp_path / "C.json"
    assert main(["certify", str(f), "--group", "patchmirror:1x24:1x6", "--out", str(out),
                 "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(out)]) == 0


def test_opset_23_causal_attention_is_refused_by_name(tmp_path):
    class Causal(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(6, 6) for _ in range(3))

        def forward(self, x):
            x = x.reshape(x.shape[0], 4, 6)
            a = torch.nn.functional.scaled_dot_product_attention(self.q(x)[:, None], self.k(x)[:, None],
                                                                 self.v(x)[:, None], is_causal=True)
            return a.reshape(x.shape[0], -1)

    f = tmp_path / "causal.onnx"
    _opset23(Causal(), 24, f)
    with pytest.raises(InputError, match="is_causal"):
        load_onnx(f)
