"""The checker's exact witness at width (symeq_check/intervals.py, ``_ExactForward``): f(x) re-evaluated with
integers over one denominator per space, a conv2d's taps read once per output pixel.  It must equal the plain
evaluation on the Fractions (symeq_check/graph.py ``_forward``, symeq_check/evaluate.py ``_evaluate``) and
re-prove the refutation of a wide C4 ResNet with one kernel tap moved; its time is measured in the report,
not asserted here (no timed tests)."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from symeq.cli import main
from symeq.graph.io import graph_to_json
from test_graph_width import c4_resnet

from symeq_check import intervals
from symeq_check.evaluate import _evaluate
from symeq_check.graph import _affine_rows, _forward, read_graph_model
from symeq_check.intervals import _ExactForward, _iv_conv
from symeq_check.model import _layers


def _broken(n: int, fields: int, blocks: int) -> dict:
    data = graph_to_json(c4_resnet(n, fields, blocks, group=False))
    data["graph"][1]["layers"][1]["kernel"][0][0][0][0] = "5/7"  # block1's affine conv: one tap moved
    return data


def _point(rng, n: int) -> list:
    return [Fraction(rng.randint(-40, 40), rng.choice([1, 2, 3, 7, 12])) for _ in range(n)]


def test_integer_evaluation_equals_the_fractions_on_a_graph():
    gm = read_graph_model(_broken(8, 1, 2))
    rng = random.Random(5)
    fast = _ExactForward()
    for _ in range(3):  # one set of plans serves every point
        x = _point(rng, gm.n_in)
        y = fast(gm, x)
        assert y == _forward(gm, x) and all(isinstance(v, Fraction) for v in y)
    assert fast.work(gm) > 0


def test_integer_evaluation_equals_the_fractions_on_a_chain():
    """Strides, zero and circular padding, a polynomial activation, a zero tap column, pooling, a dense layer
    after a flatten: each against the plain evaluation."""
    rng = random.Random(11)

    def kernel(o, c, k, zero_tap=False):
        return [[[[0 if zero_tap and (i, j) == (0, 0) else str(Fraction(rng.randint(-5, 5), rng.randint(1, 6)))
                   for j in range(k)] for i in range(k)] for _ in range(c)] for _ in range(o)]

    spec = [{"type": "conv2d", "kernel": kernel(3, 2, 3, True), "bias": ["1/3", "-2", "0"], "stride": 2,
             "padding": 1, "input_shape": [2, 7, 7], "activation": {"type": "relu"}},
            {"type": "conv2d", "kernel": kernel(2, 3, 2), "bias": ["5/7", "-1/2"], "padding": 1,
             "padding_mode": "circular", "activation": {"type": "polynomial", "coeffs": ["1/2", "1", "1/3"]}},
            {"type": "maxpool2d", "kernel_size": 2},
            {"type": "flatten"},
            {"type": "dense", "weight": [[str(Fraction(rng.randint(-9, 9), 4)) for _ in range(8)] for _ in range(3)],
             "bias": ["1", "0", "-1/5"], "activation": None}]
    layers = _layers(spec, 98, "model")
    fast = _ExactForward()
    for _ in range(4):
        x = _point(rng, 98)
        assert fast(layers, x) == _evaluate(list(layers), x)


def test_interval_conv_equals_the_sparse_rows():
    """The ball witness's conv2d step (integers) is the exact hull the per-neuron sparse rows give."""
    rng = random.Random(3)
    for stride, padding, mode in ((1, 1, "zeros"), (2, 1, "zeros"), (1, 1, "circular")):
        kernel = [[[[str(Fraction(rng.randint(-6, 6), rng.randint(1, 5))) for _ in range(3)] for _ in range(3)]
                   for _ in range(2)] for _ in range(3)]
        spec = [{"type": "conv2d", "kernel": kernel, "bias": ["1/3", "-2", "0"], "stride": stride, "padding": padding,
                 "padding_mode": mode, "input_shape": [2, 5, 6], "activation": {"type": "relu"}}]
        (layer,) = _layers(spec, 60, "model", free_last=True)
        ys = []
        for a in _point(rng, 60):
            ys.append((a, a + Fraction(rng.randint(0, 9), 8)))
        ref = []
        for terms, b in _affine_rows(layer):
            lo = hi = b
            for i, w in terms:
                lo, hi = (lo + w * ys[i][0], hi + w * ys[i][1]) if w > 0 else (lo + w * ys[i][1], hi + w * ys[i][0])
            ref.append((lo, hi))
        assert _iv_conv(layer, ys) == ref


def _verify_and_check(tmp_path, data: dict, n: int, capsys, timeout: str = "120") -> tuple:
    model = tmp_path / "bad.json"
    model.write_text(json.dumps(data))
    cert = tmp_path / "r.json"
    assert main(["verify", str(model), "--group", f"rot90:{n}", "--group-output", "1", "--certificate", str(cert),
                 "--timeout", timeout]) == 1
    capsys.readouterr()
    return str(model), str(cert)


def test_a_refutation_at_8x8_is_re_proved_and_a_moved_witness_refused(tmp_path, capsys, monkeypatch):
    model, cert = _verify_and_check(tmp_path, _broken(8, 2, 2), 8, capsys)
    assert main(["check", cert, model]) == 0
    out = capsys.readouterr().out
    assert "f(P x) != Q f(x)" in out and "result: accepted" in out
    c = json.loads(open(cert).read())
    c["equivariance"]["witness"]["x"] = ["0"] * 64  # f(P 0) = f(0) = Q f(0): proves nothing
    (tmp_path / "zero.json").write_text(json.dumps(c))
    assert main(["check", str(tmp_path / "zero.json"), model]) == 1
    assert "does not break equivariance" in capsys.readouterr().out
    monkeypatch.setattr(intervals, "MAX_WITNESS_WORK", 1000)  # the size guard: nothing re-verified, no verdict
    assert main(["check", cert, model]) == 3
    assert "multiply-adds" in capsys.readouterr().out


@pytest.mark.slow
def test_the_wide_c4_resnet_refutation_is_re_proved(tmp_path, capsys):
    """The issue's network (28 x 28, 32 channels, 4 residual blocks) with one kernel tap moved: verify refutes
    it with an exact witness and the checker re-proves the witness (f(P x) != Q f(x), exactly)."""
    model, cert = _verify_and_check(tmp_path, _broken(28, 8, 4), 28, capsys)
    assert main(["check", cert, model]) == 0
    out = capsys.readouterr().out
    assert "f(P x) != Q f(x)" in out and "result: accepted" in out
