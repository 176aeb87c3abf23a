"""The pooling kinds ``maxpool2d`` and ``group_pool`` (symeq/layers/pooling.py, docs/conv.md "Pooling"):
exact and float forward against a direct maximum, the induced actions and their refusals, the exact check
(holds, refuted, undetermined), verify -> certificate -> ``symeq check`` on escnn-style C4 and D4 networks
with max pooling and group pooling, a broken network, numeric-check, the digest and the readers' agreement,
torch in and out, ONNX in."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from flint import fmpq, fmpq_mat

from symeq.activations import relu
from symeq.cli import main
from symeq.errors import InputError, Undetermined
from symeq.groups import builtin_group
from symeq.io import model_from_json, model_to_json
from symeq.layers.base import NoPartner
from symeq.layers.conv import ConvAction, ConvLayer
from symeq.layers.conv.nets import regular_network
from symeq.layers.pooling import GroupPoolLayer, MaxPool2dLayer
from symeq.models import Model


def _points(n: int, count: int, seed: int) -> fmpq_mat:
    rng = random.Random(seed)
    return fmpq_mat(n, count, [fmpq(rng.randint(-9, 9), rng.randint(1, 4)) for _ in range(n * count)])


def _direct_maxpool(x, shape, k, s, p):
    """torch's MaxPool2d by its definition, on one flat point (a list)."""
    C, H, W = shape
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    out = []
    for c in range(C):
        for y in range(oh):
            for xx in range(ow):
                vals = [x[(c * H + i) * W + j] for i in range(s * y - p, s * y - p + k)
                        for j in range(s * xx - p, s * xx - p + k) if 0 <= i < H and 0 <= j < W]
                out.append(max(vals))
    return out


@pytest.mark.parametrize("shape,k,s,p", [((2, 4, 4), 2, 2, 0), ((1, 5, 5), 3, 2, 1), ((3, 4, 6), 3, 1, 1)])
def test_maxpool_forward_exact_and_float(shape, k, s, p):
    from symeq.numeric import from_exact

    layer = MaxPool2dLayer(shape, k, s, p)
    X = _points(layer.in_dim, 3, seed=k + s)
    Y = layer.forward(X)
    for t in range(3):
        col = [X[i, t] for i in range(layer.in_dim)]
        assert [Y[j, t] for j in range(layer.out_dim)] == _direct_maxpool(col, shape, k, s, p)
    twin = from_exact(Model(layer.in_dim, [ConvLayer.from_dense([[fmpq(1)] * layer.in_dim], None, relu(), shape),
                                           ConvLayer.from_dense([[fmpq(1)]], None, None, (1, 1, 1))])).layers[0]
    assert twin is not None
    from symeq.numeric.models import float_twin

    F = float_twin(layer).forward(np.array([[int(X[i, t].p) / int(X[i, t].q) for i in range(layer.in_dim)]
                                            for t in range(3)]))
    assert np.allclose(F, np.array([[int(Y[j, t].p) / int(Y[j, t].q) for j in range(layer.out_dim)]
                                    for t in range(3)]), atol=1e-12)


def test_group_pool_forward_is_the_max_over_each_field():
    layer = GroupPoolLayer((6, 2, 2), 3)
    X = _points(24, 2, seed=3)
    Y = layer.forward(X)
    for t in range(2):
        for f in range(2):
            for q in range(4):
                assert Y[f * 4 + q, t] == max(X[(f * 3 + i) * 4 + q, t] for i in range(3))


def test_bad_shapes_and_keys_are_refused_by_name():
    with pytest.raises(InputError, match="padding 2 must be at most half"):
        MaxPool2dLayer((1, 4, 4), 2, 2, 2)
    with pytest.raises(InputError, match="whole number of fields"):
        GroupPoolLayer((6, 2, 2), 4)
    data = _c4_file()
    data["layers"][1]["kernel"] = 2  # a misspelt key
    with pytest.raises(InputError, match="kernel"):
        model_from_json(data)


# -- actions ----------------------------------------------------------------------------------------------

def _rot(C, n, src=None, fac=None):
    return ConvAction(tuple(src or range(C)), tuple(fac or [fmpq(1)] * C), tuple(ConvAction.rot90_pixels(n)), (n, n))


def test_maxpool_induces_the_pooled_rotation_and_refuses_what_it_cannot_carry():
    layer = MaxPool2dLayer((2, 4, 4), 2)
    P = _rot(2, 4, [1, 0], [fmpq(2), fmpq(1, 3)])
    _, cands = layer.match_action(P)
    (Q, off), = list(cands)
    assert off is None and Q == _rot(2, 2, [1, 0], [fmpq(2), fmpq(1, 3)])
    assert layer.check_action(P, Q)[0]
    assert not layer.check_action(P, _rot(2, 2, [1, 0], [fmpq(2), fmpq(1)]))[0]  # a factor differs
    assert not layer.check_action(P, _rot(2, 2, [0, 1], [fmpq(2), fmpq(1, 3)]))[0]  # channels differ
    with pytest.raises(NoPartner, match="non-positive channel factor"):
        layer.match_action(_rot(2, 4, [1, 0], [fmpq(-1), fmpq(1)]))
    odd = MaxPool2dLayer((1, 5, 5), 2)  # 2x2 windows, stride 2 on 5x5: the last row and column are unread
    with pytest.raises(NoPartner, match="pooling windows") as e:
        odd.match_action(_rot(1, 5))
    assert e.value.inconclusive


def test_a_sign_flip_through_a_max_is_refuted_exactly_or_undetermined():
    layer = MaxPool2dLayer((1, 2, 2), 2)
    flip = ConvAction((0,), (fmpq(-1),), (0, 1, 2, 3), (2, 2))
    out = ConvAction((0,), (fmpq(-1),), (0,), (1, 1))
    holds, detail = layer.check_action(flip, out)  # max(-x) = -min(x) != -max(x): a rational point shows it
    assert not holds and "rational point" in detail
    one = MaxPool2dLayer((1, 2, 2), 1)  # windows of one pixel: linear, any sign
    assert one.check_action(flip, flip)[0]


def test_the_check_raises_undetermined_rather_than_guess(monkeypatch):
    layer = MaxPool2dLayer((1, 2, 2), 2)
    flip = ConvAction((0,), (fmpq(-1),), (0, 1, 2, 3), (2, 2))
    monkeypatch.setattr(MaxPool2dLayer, "forward", lambda self, X: fmpq_mat(1, X.ncols()))  # no point tells
    with pytest.raises(Undetermined):
        layer.check_action(flip, ConvAction((0,), (fmpq(-1),), (0,), (1, 1)))


def test_group_pool_induces_the_field_permutation_and_refuses_a_split_field():
    layer = GroupPoolLayer((8, 2, 2), 4)
    src = [5, 6, 7, 4, 1, 2, 3, 0]  # field 0 -> field 1, field 1 -> field 0, rotated inside
    P = ConvAction(tuple(src), (fmpq(3),) * 4 + (fmpq(1, 2),) * 4, tuple(ConvAction.rot90_pixels(2)), (2, 2))
    (Q, _), = list(layer.match_action(P)[1])
    assert Q.source == (1, 0) and Q.factor == (fmpq(3), fmpq(1, 2)) and Q.pixel == P.pixel
    assert layer.check_action(P, Q)[0]
    split = ConvAction((4, 1, 2, 3, 0, 5, 6, 7), (fmpq(1),) * 8, P.pixel, (2, 2))
    with pytest.raises(NoPartner, match="whole block"):
        layer.match_action(split)
    assert not layer.check_action(split, ConvAction((0, 1), (fmpq(1),) * 2, P.pixel, (2, 2)))[0]


# -- verify, certificate, check ------------------------------------------------------------------------------

def _c4_model(group: str = "C4", seed: int = 1) -> Model:
    """lifting conv (relu) on 4x4 -> maxpool 2x2 -> group conv on 2x2 (relu) -> group_pool -> invariant readout."""
    m = 4 if group == "C4" else 8
    l1 = regular_network(group, 4, fields=1, hidden=1, activation=relu(), rng=seed)[0][0]
    l2 = regular_network(group, 2, fields=1, hidden=2, activation=relu(), rng=seed + 1)[0][1]
    ro = ConvLayer.from_dense([[fmpq(1, 3)] * 4], [fmpq(1, 2)], None, (1, 2, 2))
    g = builtin_group("rot90:4" if group == "C4" else "dihedral:4", output=1)
    return Model(16, [l1, MaxPool2dLayer((m, 4, 4), 2), l2, GroupPoolLayer((m, 2, 2), m), ro], g, name=f"{group} pool")


def _c4_file(group: str = "C4") -> dict:
    return json.loads(json.dumps(model_to_json(_c4_model(group))))


@pytest.mark.parametrize("group", ["C4", "D4"])
def test_verify_writes_a_certificate_the_checker_accepts(group, tmp_path, capsys):
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(_c4_file(group)))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    out = capsys.readouterr().out
    assert "layerwise-equivariant" in out and "windows map onto windows" in out
    data = json.loads(cert.read_text())
    assert len(data["latent_actions"]) == 4
    assert main(["check", str(cert), str(path)]) == 0
    assert "max(P x) = Q max(x) verified on the windows" in capsys.readouterr().out


def test_the_checker_rejects_a_wrong_pooled_action(tmp_path, capsys):
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(_c4_file()))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    data = json.loads(cert.read_text())
    entry = data["latent_actions"][1][0]  # the maxpool's output: 2x2 pixels turned; turn them the other way
    assert entry["kind"] == "channel-pixel" and entry["height"] == 2
    entry["pixels"] = [entry["pixels"][i] for i in entry["pixels"]]
    cert.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["check", str(cert), str(path)]) != 0
    assert "window" in capsys.readouterr().out


def test_a_broken_network_is_refuted_with_a_witness_the_checker_accepts(tmp_path, capsys):
    data = _c4_file()
    data["layers"][2]["kernel"][0][0][0][0] = "7/9"  # one tap of the group convolution: no longer C4-equivariant
    path, cert = tmp_path / "broken.json", tmp_path / "c.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 1
    assert "not-equivariant" in capsys.readouterr().out
    assert main(["check", str(cert), str(path)]) == 0  # the exact witness re-evaluated through the max layers
    assert "not equivariant under generator 1" in capsys.readouterr().out


def test_a_stride_that_breaks_the_pooling_grid_is_never_called_equivariant(tmp_path, capsys):
    model = _c4_model()
    l1 = regular_network("C4", 5, fields=1, hidden=1, activation=relu(), rng=3)[0][0]
    pool = MaxPool2dLayer((4, 5, 5), 2)  # 2x2 windows, stride 2 on 5x5: the last row and column are never read
    l2 = model.layers[2]
    m = Model(25, [l1, pool, l2, model.layers[3], model.layers[4]], builtin_group("rot90:5", output=1))
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(model_to_json(m)))
    code = main(["verify", str(path)])
    out = capsys.readouterr().out
    assert code in (1, 3) and "layerwise-equivariant" not in out.split("Verdict:")[-1], out[-600:]


def test_numeric_check_on_the_float_twin(tmp_path, capsys):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_c4_file()))
    assert main(["numeric-check", str(path)]) == 0
    assert "induced by the pooling windows" in capsys.readouterr().out


def test_digests_agree_and_defaults_are_canonical():
    from symeq.digest import layers_digest
    from symeq_check.digest import layers_digest as check_digest

    data = _c4_file()
    layers = data["layers"]
    d = layers_digest(layers, 16)
    assert d == check_digest(layers, 16)
    implicit = json.loads(json.dumps(layers))
    del implicit[1]["stride"], implicit[1]["padding"], implicit[2]["input_shape"]
    assert layers_digest(implicit, 16) == d == check_digest(implicit, 16)
    other = json.loads(json.dumps(layers))
    other[3]["field_size"] = 2
    assert layers_digest(other, 16) != d


@pytest.mark.parametrize("upto", [2, pytest.param(4, marks=pytest.mark.slow)])  # maxpool2d; and group_pool
def test_prover_and_checker_agree_on_mutations_of_a_pooling_file(upto):
    from json_mutations import field_mutations
    from symeq.errors import SymeqError
    from symeq_check import CheckError
    from symeq_check.model import _model
    from test_strict_files import _mutations

    data = _c4_file()
    width = 16 if upto == 2 else 4
    data["layers"] = data["layers"][:upto] + [{"type": "flatten"}, {"type": "dense", "weight": [["1/4"] * width],
                                                                     "bias": None, "activation": None}]

    def reads(read, refusal, d):
        try:
            read(d)
            return True
        except refusal:
            return False

    assert reads(model_from_json, SymeqError, data) and reads(_model, CheckError, data)
    muts = [m for _, m, _ in _mutations(data)] + [m for _, m in field_mutations(data)]
    assert len(muts) > 20
    bad = [m for m in muts if reads(model_from_json, SymeqError, m) != reads(_model, CheckError, m)]
    assert not bad, json.dumps(bad[0])[:400]


# -- torch and ONNX ----------------------------------------------------------------------------------------

class _MaxPoolChannels:
    """A MaxPoolChannels-like module (escnn's GroupPooling on regular fields), built when torch is there."""

    @staticmethod
    def make(torch, n):
        class MaxPoolChannels(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.field_size = n

            def forward(self, x):
                b, c, h, w = x.shape
                return x.view(b, c // n, n, h, w).amax(dim=2)

        return MaxPoolChannels()


def test_from_torch_reads_maxpool2d_and_maxpoolchannels():
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    from symeq.numeric import from_torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), _MaxPoolChannels.make(torch, 4),
                              torch.nn.Flatten(), torch.nn.Linear(2 * 2 * 2, 2)).double()
    model = from_torch(net, None, input_shape=(1, 4, 4))
    assert [l.kind for l in model.layers] == ["conv2d", "maxpool2d", "conv2d", "group_pool", "conv2d"]
    x = np.random.default_rng(1).standard_normal((3, 16))
    with torch.no_grad():
        want = net(torch.from_numpy(x).reshape(3, 1, 4, 4)).numpy()
    assert np.allclose(model.forward(x), want, atol=1e-12)
    with pytest.raises(InputError, match="ceil_mode"):
        from_torch(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2, ceil_mode=True)),
                   None, input_shape=(1, 5, 5))
    with pytest.raises(InputError, match="after an activation"):
        from_torch(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.MaxPool2d(2), torch.nn.ReLU()),
                   None, input_shape=(1, 6, 6))


def _torch_c4(torch):
    """The C4 network of :func:`_c4_model` as torch modules (Conv2d, MaxPool2d, a MaxPoolChannels, Linear)."""
    model = _c4_model()
    l1, l2, ro = model.layers[0], model.layers[2], model.layers[4]
    t = lambda v: torch.tensor([[[[float(x) for x in r] for r in kc] for kc in ko] for ko in v], dtype=torch.float64)  # noqa: E731
    c1, c2 = torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 3, padding=1)
    lin = torch.nn.Linear(4, 1)
    with torch.no_grad():
        c1.weight.copy_(t(l1.kernel)), c1.bias.copy_(torch.tensor([float(b) for b in l1.channel_bias]))
        c2.weight.copy_(t(l2.kernel)), c2.bias.copy_(torch.tensor([float(b) for b in l2.channel_bias]))
        lin.weight.copy_(torch.tensor([[float(x) for x in ro.rows[0]]])), lin.bias.copy_(torch.tensor([0.5]))
    return torch.nn.Sequential(c1, torch.nn.ReLU(), torch.nn.MaxPool2d(2), c2, torch.nn.ReLU(),
                               _MaxPoolChannels.make(torch, 4), torch.nn.Flatten(), lin).eval()


def test_onnx_maxpool_and_group_pooling_are_read_exactly_and_verified(tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    pytest.importorskip("onnx", reason="needs onnx: pip install 'symeq[onnx]'")
    import warnings

    from symeq.numeric.onnx_io import load_onnx, load_onnx_exact

    net = _torch_c4(torch)
    path = tmp_path / "c4pool.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 1, 4, 4),), str(path), dynamo=False)
    m = load_onnx(path)
    assert [l.kind for l in m.layers] == ["conv2d", "maxpool2d", "conv2d", "group_pool", "dense"]
    x = np.random.default_rng(2).integers(-8, 8, (3, 16)) / 8
    with torch.no_grad():
        want = net(torch.from_numpy(x).float().reshape(3, 1, 4, 4)).numpy()
    assert np.max(np.abs(m.forward(x) - want)) < 1e-5
    exact = load_onnx_exact(path)
    assert [l.kind for l in exact.layers] == ["conv2d", "maxpool2d", "conv2d", "group_pool", "conv2d"]
    assert main(["verify", str(path), "--exact-floats", "--group", "rot90:4", "--group-output", "1"]) == 0
    assert "layerwise-equivariant" in capsys.readouterr().out


def test_certify_refuses_pooling_by_name(tmp_path, capsys):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_c4_file()))
    assert main(["certify", str(path), "--conv", "dense"]) == 2  # the dense matching search (certify
    assert "maxpool2d layers do not support certify --conv dense" in capsys.readouterr().err  # takes them
    # on the kernel road: tests/certify/test_certify_pooling.py)


@pytest.mark.slow  # matplotlib
def test_explain_draws_pooling_layers(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_c4_file()))
    assert main(["explain", str(path), "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "network.svg").exists()


def test_pooling_inside_a_graph_segment_verifies_and_checks(tmp_path, capsys):
    data = _c4_file()
    layers = data.pop("layers")
    data["graph"] = [{"name": "a", "input": "input", "layers": layers[:2]},
                     {"name": "b", "input": "a", "layers": layers[2:]}]
    path, cert = tmp_path / "g.json", tmp_path / "c.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(path)]) == 0


def test_the_checker_wants_positive_factors_on_a_pooled_space(tmp_path, capsys):
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(_c4_file()))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    data = json.loads(cert.read_text())
    data["latent_actions"][1][0]["channels"]["factor"][0] = "-1"
    cert.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["check", str(cert), str(path)]) == 1
    assert "a max layer needs positive factors" in capsys.readouterr().out


def test_a_dense_readout_after_group_pooling_digests_alike_on_both_sides(tmp_path, capsys):
    """flatten + dense after group_pool: the prover rewrites it as a whole-image conv2d, the checker reads the
    file as written; both digests (and so symeq check) agree."""
    data = _c4_file()
    data["layers"][-1] = {"type": "flatten"}
    data["layers"].append({"type": "dense", "weight": [["1/3"] * 4], "bias": ["1/2"], "activation": None})
    path, cert = tmp_path / "m.json", tmp_path / "c.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path), "--certificate", str(cert)]) == 0
    assert main(["check", str(cert), str(path)]) == 0
    assert "parameters: equal" in capsys.readouterr().out


def test_what_does_not_take_pooling_refuses_it_by_name(tmp_path, capsys):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(_c4_file()))
    assert main(["numeric-check", str(path), "--fdim"]) == 2
    assert "maxpool2d layers do not support the functional dimension" in capsys.readouterr().err
    assert main(["export", str(path), "--onnx", str(tmp_path / "m.onnx")]) == 2
    import importlib.util
    if importlib.util.find_spec("onnx") is None:  # without the extra the install line comes first
        assert "pip install 'symeq[onnx]'" in capsys.readouterr().err
    else:
        assert "maxpool2d layers do not support" in capsys.readouterr().err
