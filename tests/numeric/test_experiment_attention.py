"""symeq experiment attention (issue 29, docs/attention.md): a tiny run in the default suite, the
paper-scale run as a slow test."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch", reason="the experiment trains with torch: pip install 'symeq[numeric]'")
pytest.importorskip("onnx", reason="ONNX files need onnx: pip install 'symeq[onnx]'")
pytest.importorskip("onnxruntime", reason="the ONNX attention reader checks with onnxruntime: pip install onnxruntime")
pytest.importorskip("sklearn", reason="the digits need scikit-learn: pip install 'symeq[numeric]'")
pytest.importorskip("matplotlib", reason="the score-map figure needs matplotlib: pip install 'symeq[plot]'")

from symeq.certification import certify  # noqa: E402
from symeq.numeric.experiment_attention import (  # noqa: E402
    digit_tokens,
    load_attention_npz,
    mirror_groups,
    run_attention_experiment,
)


def test_token_layout_and_mirrors():
    x = np.arange(64, dtype=float)[None, :]          # pixel (i, j) holds 8 i + j
    t = digit_tokens(x)[0].reshape(8, 8)
    assert t[0].tolist() == [0, 1, 2, 3, 8, 9, 10, 11]          # patch (1, 1): rows 1-2, columns 1-4
    assert t[1].tolist() == [4, 5, 6, 7, 12, 13, 14, 15]        # patch (1, 2)
    h, v = mirror_groups()
    img = x.reshape(8, 8)
    for group, flipped in ((h, img[:, ::-1]), (v, img[::-1, :])):
        A = np.array([[float(group.generators[0][0][i, j]) for j in range(64)] for i in range(64)])
        assert np.array_equal(A @ digit_tokens(x)[0], digit_tokens(flipped.reshape(1, 64))[0])


def test_tiny_run_writes_and_checks_everything(tmp_path):
    from symeq.numeric.onnx_io import load_onnx

    res = run_attention_experiment(steps=6, noise_points=400, out=tmp_path, heads=2,
                                   certifier=certify)
    assert sorted(res["head_partner"]) == [1, 2]
    assert res["finding"] and res["metric_horizontal"] >= 0 and res["metric_vertical"] >= 0
    c = res["certified"]
    assert c["status"] == "certified" and c["verdict"] == "layerwise-equivariant"
    assert c["check_exit_code"] == 0, c                     # symeq check, in its own process
    for f in ("theta.onnx", "theta.npz", "theta_bar.onnx", "theta_bar.npz", "theta_bar.json",
              "theta_bar.certificate.json", "score_maps.png", "table.md", "results.json"):
        assert (tmp_path / f).exists(), f
    # the saved networks read back: .onnx (the attention subgraph reader) and .npz agree
    X = np.random.default_rng(0).standard_normal((5, 64))
    for stem in ("theta", "theta_bar"):
        a, b = load_onnx(tmp_path / f"{stem}.onnx"), load_attention_npz(tmp_path / f"{stem}.npz")
        assert np.max(np.abs(a(X) - b(X))) < 1e-4 * max(1.0, np.abs(b(X)).max())
    assert json.loads((tmp_path / "results.json").read_text())["heads"] == 2
    assert "finding:" in (tmp_path / "table.md").read_text()


def test_cli_refuses_bad_heads(capsys):
    from symeq.cli import main

    assert main(["experiment", "attention", "--heads", "3", "--epochs", "4"]) == 2


@pytest.mark.slow
def test_paper_scale_run_reproduces_self_mapped_and_swapped_heads(tmp_path):
    res = run_attention_experiment(out=tmp_path, certifier=certify)             # the default: 4 heads, 1200 steps, seed 0
    assert res["self_mapped"] and res["swapped"], res["finding"]
    assert max(res["head_residual"]) < 0.05
    assert res["metric_horizontal"] < res["metric_vertical"]     # the control is less equivariant
    assert res["certified"]["check_exit_code"] == 0
    assert res["seconds"] < 600
