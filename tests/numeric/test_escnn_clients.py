"""escnn's tutorial-style networks as clients (issue 27): C4 and D4 regular-field CNNs written in plain torch the way
escnn's ``.export()`` gives them (tests/escnn_style.py: R2Conv weights averaged over the group, InnerBatchNorm,
ReLU, average pooling, GroupPooling as ``MaxPoolChannels``, a Linear head, a softmax), exported by
``torch.onnx.export(dynamo=False)``, then

* certified from the ``.onnx`` with float noise on the weights: exit 0, theta-bar's distance within 3 times the
  distance to the noise-free (equivariant) network, ``symeq check`` accepts the certificate;
* with GroupPooling (``Reshape`` to 5-d and ``ReduceMax``): ``verify --exact-floats`` proves them and the checker
  accepts; certify takes them too (the projection through the parameter-free layer);
* the certificate's action on every hidden space is escnn's regular representation on each field's channels
  (built here from the multiplication table of the array operations, independently of symeq) times the
  rotation/flip of the pixels (built with ``torch.rot90``/``torch.flip`` on an index image);
* one kernel made non-symmetric: ``verify --exact-floats`` refutes it (exit 1) with a witness ``symeq check``
  re-proves, and ``certify`` reports that layer's distance as large;
* antialiased pooling (a depthwise Gaussian conv, stride 2, on an odd grid as in escnn's tutorial) composed with
  the next convolution; ``from_torch`` reads escnn's ``MaxPoolChannels(kernel_size)``.

The assumed correspondence (docs/conv.md, "escnn's conventions"): symeq's ``rot90`` is ``torch.rot90(x, -1)`` =
escnn's ``rot^3`` (index 3), symeq's ``mirror`` is ``torch.flip(x, (-1,))`` = escnn's ``flip`` (index 4 of D4).
The 28x28 runs take 50 to 80 s each on the shared 2-core machine and are marked slow; the default runs use 8x8
(9x9, the odd grid of escnn's tutorial, with antialiased pooling).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the escnn-style clients are torch modules: pip install 'symeq[numeric]'")
pytest.importorskip("onnx", reason="the escnn-style clients are exported to ONNX: pip install 'symeq[onnx]'")

import escnn_style as es  # noqa: E402

from symeq.cli import main  # noqa: E402

# symeq's generators as escnn elements (r, f) = rot^r flip^f, and as torch operations on images
SYMEQ_GENERATORS = {"rot90": ((3, 0), lambda x: torch.rot90(x, -1, dims=(-2, -1))),
                    "mirror": ((0, 1), lambda x: torch.flip(x, dims=(-1,)))}


def _export(net, n, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 1, n, n),), str(path), dynamo=False)


def _group(name, n, classes):
    return ["--group", f"rot90:{n}" if name == "C4" else f"dihedral:{n}", "--group-output", str(classes)]


def _pixels(op, h, w):
    """The source pixel of each pixel after ``op`` (the certificate's ``pixels``: (M y)[p] = y[pixels[p]])."""
    idx = torch.arange(h * w, dtype=torch.float64).reshape(h, w)
    return [int(v) for v in op(idx).flatten()]


def _channel_matrix(entry):
    """The channel part of a channel-pixel action as a matrix: (M y)[c] = factor[c] y[source[c]]."""
    src, fac = entry["channels"]["source"], entry["channels"]["factor"]
    M = np.zeros((len(src), len(src)), dtype=object)
    for c, (s, f) in enumerate(zip(src, fac)):
        M[c, s] = f
    return M


def _assert_regular(cert, name, pooled=()):
    """Every hidden space's action is (I_F x rho_reg(g)) on channels times g on the pixels; a space in ``pooled``
    (after GroupPooling) has the identity on its F channels instead. Fails on any other action."""
    mul = es.table(torch, name)
    m = es.ORDER[name]
    gens = [g["name"] for g in cert["group"]["generators"]]
    assert gens == (["rot90"] if name == "C4" else ["rot90", "mirror"])
    assert len(cert["latent_actions"]) >= 2
    for space, entries in enumerate(cert["latent_actions"]):
        for gname, entry in zip(gens, entries):
            el, op = SYMEQ_GENERATORS[gname]
            probe = torch.arange(9.0).reshape(3, 3)
            assert torch.equal(es.act(torch, el, probe), op(probe))  # the correspondence assumed above
            assert entry["kind"] == "channel-pixel"
            assert entry["pixels"] == _pixels(op, entry["height"], entry["width"]), (space, gname)
            C = len(entry["channels"]["source"])
            a = es.elements(name).index(el)
            if space in pooled:
                want = np.eye(C, dtype=int)
            else:
                assert C % m == 0
                want = np.kron(np.eye(C // m, dtype=int), es.regular_rep(mul, a))
            got = _channel_matrix(entry)
            assert all(f == "1" for f in entry["channels"]["factor"]), (space, gname)
            assert np.array_equal((got == "1").astype(int), want), (space, gname, entry["channels"]["source"])


# -- the modules themselves ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["C4", "D4"])
def test_the_averaged_networks_are_invariant_and_the_broken_one_is_not(name):
    x = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    for gpool in (None, "max"):
        net, bad = es.regular_net(torch, name, n=8, gpool=gpool), es.regular_net(torch, name, n=8, gpool=gpool, broken=True)
        with torch.no_grad():
            for g in es.elements(name)[1:]:
                assert float((net(es.act(torch, g, x)) - net(x)).abs().max()) < 1e-5
            assert max(float((bad(es.act(torch, g, x)) - bad(x)).abs().max()) for g in es.elements(name)) > 1e-4
    # the lifting kernel of channel (c, h) is L_h of channel (c, e)'s, bit for bit (the weight sharing is exact)
    W = es.regular_net(torch, name, n=8).state_dict()["0.0.weight"]
    m = es.ORDER[name]
    for h, g in enumerate(es.elements(name)):
        assert torch.equal(W[h::m], es.act(torch, g, W[0::m]))


def test_the_regular_representation_is_a_homomorphism_of_the_table():
    for name in ("C4", "D4"):
        mul = es.table(torch, name)
        m = len(mul)
        assert sorted(mul[0]) == list(range(m)) and all(sorted(row) == list(range(m)) for row in mul)
        for a in range(m):
            for b in range(m):
                assert np.array_equal(es.regular_rep(mul, a) @ es.regular_rep(mul, b), es.regular_rep(mul, mul[a][b]))
    assert es.table(torch, "D4")[4][1] == 7  # flip rot = rot^3 flip: the group is not abelian


# -- certify from the .onnx, with noise ---------------------------------------------------------------------------

def _folded_distance(clean, noisy):
    """|theta_noisy - theta_clean| / |theta_noisy| on the parameters symeq certifies (the folded layers)."""
    from symeq.numeric.onnx_io import load_onnx

    a, b = load_onnx(clean), load_onnx(noisy)
    num = den = 0.0
    def params(layer):  # a convolution's own parameters (docs/certify.md), a dense layer's weight and bias
        if layer.kind == "group_pool":
            return ()
        return (layer.kernel, layer.channel_bias) if layer.kind == "conv2d" else (layer.weight, layer.bias)

    for la, lb in zip(a.layers, b.layers):
        for pa, pb in zip(params(la), params(lb)):
            pa, pb = np.asarray(pa, dtype=float), np.asarray(pb, dtype=float)
            num += float(((pa - pb) ** 2).sum())
            den += float((pb ** 2).sum())
    return (num / den) ** 0.5


def _certify_case(tmp_path, capsys, name, n, fields, eps=1e-6, pool="avg"):
    classes = 3
    clean = es.regular_net(torch, name, n=n, fields=fields, classes=classes, softmax=True, pool=pool)
    _export(clean, n, tmp_path / "clean.onnx")
    _export(es.noisy(torch, clean, eps), n, tmp_path / "net.onnx")
    bar, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    capsys.readouterr()
    assert main(["certify", str(tmp_path / "net.onnx"), *_group(name, n, classes), "--out", str(bar),
                 "--certificate", str(cert), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "certified" and report["verified"]
    noise = _folded_distance(tmp_path / "clean.onnx", tmp_path / "net.onnx")
    assert 0 < report["distances"]["distance"] <= 3 * noise, (report["distances"]["distance"], noise)
    assert main(["check", str(cert), str(bar)]) == 0
    _assert_regular(json.loads(cert.read_text()), name)


@pytest.mark.parametrize("name,n,pool", [("C4", 8, "avg"), ("D4", 8, "avg"),
                                           pytest.param("C4", 9, "antialiased", marks=pytest.mark.slow)])
def test_certify_small_escnn_nets_from_onnx(name, n, pool, tmp_path, capsys):
    """8x8 (9x9 with antialiased pooling), one regular field: the dense-expansion road of certify (seconds)."""
    _certify_case(tmp_path, capsys, name, n, 1, pool=pool)


@pytest.mark.slow
@pytest.mark.parametrize("name,fields", [("C4", 2), ("D4", 1), ("D4", 2)])
def test_certify_escnn_nets_at_28x28_from_onnx(name, fields, tmp_path, capsys):
    """28x28 (the kernel-averaging road of certify): 30 s to a few minutes here."""
    _certify_case(tmp_path, capsys, name, 28, fields)


# -- group pooling: verify --exact-floats, check, the actions ------------------------------------------------

def _verify_exact(tmp_path, capsys, net, name, n, classes, expect):
    path, cert = tmp_path / "net.onnx", tmp_path / "cert.json"
    _export(net, n, path)
    capsys.readouterr()
    code = main(["verify", str(path), "--exact-floats", *_group(name, n, classes), "--certificate", str(cert)])
    out = capsys.readouterr().out
    assert code == expect, out
    assert main(["check", str(cert), str(tmp_path / "cert.model.json")]) == 0
    checked = capsys.readouterr().out
    assert "result: accepted" in checked, checked
    return json.loads(cert.read_text()), out + checked


@pytest.mark.parametrize("name,form,pool,n", [("C4", "max", "avg", 8), ("C4", "amax", "avg", 8), ("D4", "max", "avg", 8),
                                             pytest.param("D4", "max", "antialiased", 9, marks=pytest.mark.slow),
                                             ("C4", "max", "antialiased", 9),
                                             pytest.param("D4", "max", "avg", 28, marks=pytest.mark.slow)])
def test_group_pooling_exports_verify_exactly_with_regular_actions(name, form, pool, n, tmp_path, capsys):
    """GroupPooling read as group_pool; antialiased pooling (a depthwise Gaussian conv, stride 2, on the odd grid
    of escnn's tutorial) composed exactly with the next, unpadded, convolution."""
    from symeq.numeric.onnx_io import load_onnx

    net = es.regular_net(torch, name, n=n, classes=3, gpool=form, softmax=True, pool=pool)
    _export(net, n, tmp_path / "read.onnx")
    read = load_onnx(tmp_path / "read.onnx")
    assert [l.kind for l in read.layers] == ["conv2d", "conv2d", "group_pool", "dense"]
    if pool == "antialiased":
        assert any("depthwise" in note for note in read.meta["reader_notes"])
    cert, out = _verify_exact(tmp_path, capsys, net, name, n, 3, 0)
    assert cert["verdict"] == "layerwise-equivariant" and "layerwise-equivariant" in out
    assert len(cert["latent_actions"]) == 3
    _assert_regular(cert, name, pooled=(2,))
    _assert_comparison_is_sharp(cert, name)


def _assert_comparison_is_sharp(cert, name):
    """The comparison fails on the other orientation of the turn, and on another reflection of D4 (the
    mirror's channel action replaced by that of flip rot, a reflection too)."""
    m = es.ORDER[name]
    for gen, other in ((0, 1), (1, 5)) if name == "D4" else ((0, 1),):  # (generator, element to put instead)
        bad = json.loads(json.dumps(cert))
        ch = bad["latent_actions"][0][gen]["channels"]
        mul = es.table(torch, name)
        inv = es.inverses(mul)
        ch["source"] = [(j // m) * m + mul[inv[other]][j % m] for j in range(len(ch["source"]))]
        with pytest.raises(AssertionError):
            _assert_regular(bad, name, pooled=(2,))


def test_from_torch_reads_escnns_exported_maxpoolchannels():
    """escnn's (and e2cnn's) MaxPoolChannels keeps its field size as ``kernel_size``."""
    from symeq.numeric import from_torch

    net = es.regular_net(torch, "C4", n=8, classes=3, gpool="max")
    model = from_torch(net, None, input_shape=(1, 8, 8))
    assert [l.kind for l in model.layers] == ["conv2d", "conv2d", "group_pool", "conv2d"]
    x = np.random.default_rng(0).standard_normal((3, 64))
    with torch.no_grad():
        want = net(torch.from_numpy(x).float().reshape(3, 1, 8, 8)).double().numpy()
    assert np.max(np.abs(model.forward(x) - want)) < 1e-5


@pytest.mark.parametrize("name,n", [("C4", 8), pytest.param("D4", 8, marks=pytest.mark.slow),
                                    pytest.param("C4", 28, marks=pytest.mark.slow)])
def test_certify_a_group_pooling_net(name, n, tmp_path, capsys):
    """certify through GroupPooling (the projection passes the action through the parameter-free layer)."""
    clean = es.regular_net(torch, name, n=n, classes=3, gpool="max")
    _export(clean, n, tmp_path / "clean.onnx")
    _export(es.noisy(torch, clean, 1e-6), n, tmp_path / "net.onnx")
    bar, cert = tmp_path / "bar.json", tmp_path / "cert.json"
    capsys.readouterr()
    assert main(["certify", str(tmp_path / "net.onnx"), *_group(name, n, 3), "--out", str(bar),
                 "--certificate", str(cert), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "certified"
    noise = _folded_distance(tmp_path / "clean.onnx", tmp_path / "net.onnx")
    assert 0 < report["distances"]["distance"] <= 3 * noise, (report["distances"]["distance"], noise)
    assert main(["check", str(cert), str(bar)]) == 0
    _assert_regular(json.loads(cert.read_text()), name, pooled=(2,))


# -- the broken variant ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,gpool", [("C4", None), pytest.param("D4", "max", marks=pytest.mark.slow)])
def test_a_broken_kernel_is_refuted_with_a_checked_witness(name, gpool, tmp_path, capsys):
    net = es.regular_net(torch, name, n=8, classes=3, gpool=gpool, broken=True)
    cert, out = _verify_exact(tmp_path, capsys, net, name, 8, 3, 1)
    assert cert["verdict"] == "not-equivariant" and "Verdict: not-equivariant" in out
    assert "the model is not equivariant under generator" in out  # the checker re-evaluated the witness
    # the witness shows the failure in torch as well (float64, the output is invariant: f(g x) != f(x))
    from fractions import Fraction

    w = cert["equivariance"]["witness"]
    x = torch.tensor([float(Fraction(v)) for v in w["x"]], dtype=torch.float64).reshape(1, 1, 8, 8)
    op = SYMEQ_GENERATORS[w["generator_name"]][1]
    with torch.no_grad():
        net = net.double()
        gap, size = float((net(op(x)) - net(x)).abs().max()), float(net(x).abs().max())
    assert gap > 1e-3 * max(1.0, size), gap


def test_certify_reports_the_broken_layer_far_and_the_others_near(tmp_path, capsys):
    """certify never claims the broken network is equivariant: it certifies theta-bar, and the broken layer's
    distance is large (the kernel moved by 1/4) while the others stay at the noise level."""
    net = es.noisy(torch, es.regular_net(torch, "C4", n=8, fields=1, classes=3, broken=True), 1e-6)
    _export(net, 8, tmp_path / "bad.onnx")
    capsys.readouterr()
    code = main(["certify", str(tmp_path / "bad.onnx"), *_group("C4", 8, 3), "--out", str(tmp_path / "bar.json"),
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["status"] == "certified"
    per = report["distances"]["parameters_per_layer"]
    assert len(per) == 3
    assert per[1] > 1e-2, per
    assert per[0] < 1e-4 and per[2] < 1e-4, per
