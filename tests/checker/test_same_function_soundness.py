"""The checker's "same function" test of a re-parametrized theta' (symeq_check.evaluate) is a proof or it says
it is not one: two counterexamples that it used to pass as the same function.

* Max pooling is not a polynomial: max(x^3, -x^3) = |x|^3 and max(x^3, x^3) = x^3 agree on every point of
  the non-negative lattice the polynomial test evaluates, yet differ at x = -1.
* A softmax theta and a lightning theta' with the same heads have equal softmax canonical forms but are
  different functions.
"""
from __future__ import annotations

import json
from fractions import Fraction

from symeq_check import check_certificate
from symeq_check.evaluate import _evaluate, _lattice, _same_function_failure
from symeq_check.model import _layers


def _cubes_then_max(second_tap: str) -> list:
    """x -> (x^3, (t x)^3) by a 1x1 conv of two channels, a max over the field of both, a readout."""
    return [{"type": "conv2d", "input_shape": [1, 1, 1], "kernel": [[[["1"]]], [[[second_tap]]]], "bias": None,
             "activation": {"type": "monomial", "degree": 3}},
            {"type": "group_pool", "field_size": 2}, {"type": "flatten"},
            {"type": "dense", "weight": [["1"]], "bias": None, "activation": None}]


def test_max_pooling_is_not_proved_equal_on_a_lattice():
    theta, theta2 = _layers(_cubes_then_max("-1"), 1, "m"), _layers(_cubes_then_max("1"), 1, "m")
    # the lattice cannot tell them apart, but x = -1 does: the functions differ
    assert all(_evaluate(theta, x) == _evaluate(theta2, x) for x in _lattice(1, 12))
    assert _evaluate(theta, (Fraction(-1),)) != _evaluate(theta2, (Fraction(-1),))
    why = _same_function_failure(theta, theta2, 1)
    assert why is not None and "max pooling" in why


def _attention(scoring):
    att = {"type": "attention", "tokens": 2,
           "heads": [{"query": [["1"], ["0"]], "key": [["1"], ["1"]], "value": [["1", "0"], ["0", "1"]],
                      "out": [["1", "0"], ["0", "1"]]}]}
    if scoring:
        att["scoring"] = scoring
    return [att, {"type": "dense", "weight": [["1", "0"], ["0", "1"]], "bias": None, "activation": None}]


def test_softmax_and_lightning_with_the_same_heads_are_not_the_same_function():
    soft, light = _layers(_attention("softmax"), 4, "m"), _layers(_attention(None), 4, "m")
    for a, b in ((soft, light), (light, soft)):
        why = _same_function_failure(a, b, 4)
        assert why is not None and "scoring" in why
    assert _same_function_failure(soft, _layers(_attention("softmax"), 4, "m"), 4) is None


def test_a_certificate_with_a_lightning_theta_prime_for_a_softmax_model_is_rejected():
    import symeq
    from symeq.io import model_to_json
    from symeq.attention import softmax_mirror_attention

    model = softmax_mirror_attention(False)
    cert = json.loads(json.dumps(symeq.verify(model).certificate()))
    data = json.loads(json.dumps(model_to_json(model)))
    assert check_certificate(cert, data).accepted is True
    forged = json.loads(json.dumps(cert))
    layers = forged["parameters"]["layers"]
    assert layers[0].get("scoring") == "softmax"
    for key in ("scoring", "scale", "bias"):
        layers[0].pop(key, None)
    for head in layers[0]["heads"]:
        head.pop("score_bias", None)
    forged["parameters"]["reparametrized"] = True
    report = check_certificate(forged, data)
    assert report.accepted is False and any("scoring" in r for r in report.reasons), report.reasons
