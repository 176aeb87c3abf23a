"""A refutation of an ONNX network checked from the command line, both ways (issue 27, Deliver 5).

``symeq verify NET.onnx --exact-floats --certificate C.json`` writes the exact reading it proved things
about beside the certificate (``C.model.json``), so the plain checker checks ``C.json C.model.json``;
``symeq check C.json NET.onnx`` reads the network with symeq's ONNX reader and says so.  The torch
tests skip without torch or onnx; the refusals that need neither run everywhere.
"""

from __future__ import annotations

import json
import sys
import warnings

import pytest

from symeq.cli import main
from symeq.cli.loader import has_extra


def _needs_torch_onnx():
    if not has_extra("onnx"):
        pytest.skip("the ONNX tests need onnx: pip install 'symeq[onnx]'")
    if not has_extra("torch"):
        pytest.skip("exporting from torch needs torch: pip install 'symeq[numeric]'")
    import torch

    return torch


def _export_mlp(torch, path, broken: bool) -> None:
    """Linear(4, 6) -> ReLU -> Linear(6, 4), mirror:2x2-equivariant, or with one weight moved by 1/4."""
    from symeq.groups import mirror
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.models import numeric_activation

    m = random_equivariant_numeric(mirror(2, 2), [6], numeric_activation("relu"), rng=0)
    l1, l2 = torch.nn.Linear(4, 6), torch.nn.Linear(6, 4)
    with torch.no_grad():
        for lin, layer in ((l1, m.layers[0]), (l2, m.layers[1])):
            lin.weight.copy_(torch.from_numpy(layer.weight))
            lin.bias.copy_(torch.from_numpy(layer.bias))
        if broken:
            l1.weight[0, 0] += 0.25
    net = torch.nn.Sequential(l1, torch.nn.ReLU(), l2).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 4),), str(path), dynamo=False)


GROUP = ["--group", "mirror:2x2"]


@pytest.fixture
def refuted(tmp_path, capsys):
    """A torch-exported net refuted by verify --exact-floats, with its certificate and the model file beside it."""
    torch = _needs_torch_onnx()
    net, cert = tmp_path / "net.onnx", tmp_path / "C.json"
    _export_mlp(torch, net, broken=True)
    assert main(["verify", str(net), "--exact-floats", *GROUP, "--certificate", str(cert)]) == 1
    out, err = capsys.readouterr()
    assert "Verdict: not-equivariant" in out
    beside = tmp_path / "C.model.json"
    assert f"written to {beside}" in err and f"symeq check {cert} {beside}" in err
    return net, cert, beside


def test_refutation_checked_both_ways_from_the_command_line(refuted, capsys):
    net, cert, beside = refuted
    assert json.loads(beside.read_text())["format"] == "symeq-model/1"
    # 1. the model file verify wrote, with symeq's check and with the plain checker
    assert main(["check", str(cert), str(beside)]) == 0
    out = capsys.readouterr().out
    assert "result: accepted" in out and "symeq's ONNX reader" not in out
    from symeq_check import main as plain_checker

    assert plain_checker([str(cert), str(beside)]) == 0
    assert "result: accepted" in capsys.readouterr().out
    # 2. the .onnx itself: symeq reads it, the checker checks that reading, and the output says so
    digest = json.loads(cert.read_text())["parameters"]["layers_sha256"]
    assert main(["check", str(cert), str(net), *GROUP]) == 0
    out = capsys.readouterr().out
    assert (f"the model was read from {net} by symeq's ONNX reader; the checker checked the certificate against "
            f"that reading (digest {digest})") in out and "result: accepted" in out
    assert main(["check", str(cert), str(net), *GROUP, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["accepted"] and data["model_reading"]["layers_sha256"] == digest


def test_tampered_certificate_is_rejected_both_ways(refuted, tmp_path, capsys):
    net, cert, beside = refuted
    data = json.loads(cert.read_text())
    data["equivariance"]["witness"]["x"] = ["0"] * 4  # f(0) = Q f(0) here (the biases are equivariant): no witness
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(data))
    for model in ([str(beside)], [str(net), *GROUP]):
        assert main(["check", str(bad), *model]) == 1
        assert "result: rejected" in capsys.readouterr().out


def test_certificate_of_another_network_is_refused(refuted, tmp_path, capsys):
    torch = _needs_torch_onnx()
    net, cert, _ = refuted
    other = tmp_path / "other.onnx"
    _export_mlp(torch, other, broken=False)  # the same net without the broken weight
    assert main(["check", str(cert), str(other), *GROUP]) == 2
    err = capsys.readouterr().err
    assert f"is not a certificate of the model {other}" in err and "Traceback" not in err


def test_unreadable_onnx_exits_2(refuted, tmp_path, capsys):
    _, cert, _ = refuted
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(bytes(range(256)) * 4)
    assert main(["check", str(cert), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.onnx" in err and "Traceback" not in err
    assert main(["check", str(cert), str(tmp_path / "missing.onnx")]) == 2
    assert "missing.onnx" in capsys.readouterr().err


# -- refusals that need neither torch nor onnx -------------------------------------------------

def _model_and_cert(tmp_path):
    model, cert = tmp_path / "m.json", tmp_path / "c.json"
    assert main(["example", "--out", str(model)]) == 0
    assert main(["verify", str(model), "--certificate", str(cert)]) == 0
    return model, cert


def test_missing_onnx_extra_gives_the_install_line(tmp_path, capsys, monkeypatch):
    model, cert = _model_and_cert(tmp_path)
    assert not (tmp_path / "c.model.json").exists()  # a JSON model is not written again beside the certificate
    (tmp_path / "net.onnx").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "onnx", None)  # as if the extra were not installed
    capsys.readouterr()
    assert main(["check", str(cert), str(tmp_path / "net.onnx")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'symeq[onnx]'" in err and "Traceback" not in err


def test_npz_and_misplaced_group_are_refused(tmp_path, capsys):
    model, cert = _model_and_cert(tmp_path)
    capsys.readouterr()
    assert main(["check", str(cert), str(tmp_path / "net.npz")]) == 2
    assert ".npz file holds float weights" in capsys.readouterr().err
    assert main(["check", str(cert), str(model), "--group", "mirror:2x3"]) == 2
    assert "--group goes with an .onnx MODEL" in capsys.readouterr().err
    assert main(["check", str(cert), str(model)]) == 0  # the plain JSON path is unchanged


def test_certify_without_out_writes_theta_bar_beside_the_certificate(tmp_path, capsys):
    """certify's certificate is about theta-bar: without --out, theta-bar goes beside it (C.model.json)."""
    from symeq.groups import mirror
    from symeq.numeric.generate import random_equivariant_numeric
    from symeq.numeric.models import numeric_activation, save_npz

    G = mirror(2, 2)
    net = random_equivariant_numeric(G, [6], numeric_activation("tanh"), rng=0).perturbed(1e-4, rng=1)
    save_npz(net, tmp_path / "net.npz")
    cert, beside = tmp_path / "C.json", tmp_path / "C.model.json"
    assert main(["certify", str(tmp_path / "net.npz"), "--certificate", str(cert)]) == 0
    err = capsys.readouterr().err
    assert f"theta-bar written to {beside} (beside the certificate)" in err
    assert f"symeq check {cert} {beside}" in err
    assert main(["check", str(cert), str(beside)]) == 0
    # the input network is never overwritten: a certificate whose neighbour is the input is refused first
    (tmp_path / "D.model.json").write_text("{}")  # refused before it is read
    assert main(["certify", str(tmp_path / "D.model.json"), "--certificate", str(tmp_path / "D.json")]) == 2
    assert "the input network; give --out" in capsys.readouterr().err
