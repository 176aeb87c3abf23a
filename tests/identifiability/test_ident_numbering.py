"""Issue 25, Deliver 7: text output numbers units, neurons, rows and layers from 1 in identifiability
reasons (the JSON keeps 0-based indices, as arrays do)."""

import json
import re

import pytest

from symeq.activations import polynomial, real, tanh_series
from symeq.cli import main
from symeq.errors import InputError
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model

ZERO_BASED = re.compile(r"\b(neuron|neurons|unit|units|row|rows|layer|column)s? 0\b")


def _text(tmp_path, capsys, model, *extra) -> str:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model_to_json(model)))
    main(["fibre", str(path), *extra])
    out = capsys.readouterr()
    return out.out + out.err


def test_sussmann_clones_of_the_first_and_last_units(tmp_path, capsys):
    t = real("tanh")
    m = Model(2, [DenseLayer([[1, 2], [3, 1], [1, 2]], [1, 2, 1], t), DenseLayer([[1, 2, 3]], [1], None)])
    text = _text(tmp_path, capsys, m)
    assert "units 1 and 3 of hidden layer 1 are clones" in text
    assert not ZERO_BASED.search(text)


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_dead_first_neuron_in_a_deep_network(tmp_path, capsys):
    a = tanh_series(3)
    m = Model(2, [DenseLayer([[0, 0], [1, 2], [3, -1]], [1, 2, -1], a),
                  DenseLayer([[1, 2, -1], [2, 1, 1]], [1, -1], a), DenseLayer([[1, -2]], [1], None)])
    text = _text(tmp_path, capsys, m)
    assert "neuron 1 of hidden layer 1" in text and not ZERO_BASED.search(text)


def test_tensor_witness_and_affine_family_number_from_1(tmp_path, capsys):
    m = Model(3, [DenseLayer([[1, 2, 0], [0, 1, -1], [3, -1, 1]], None, polynomial([0, 1, 0, 0, 1])),
                  DenseLayer([[2, -1, 1], [1, 1, 3], [1, 0, 2]], None, None)])
    text = _text(tmp_path, capsys, m, "--field", "C")
    assert "neuron 1: every root lambda" in text and not ZERO_BASED.search(text)
    data = {"format": "symeq-model/1", "input_dim": 2, "layers": [
        {"type": "dense", "weight": [["1", "2"], ["3", "-1"]], "bias": None,
         "activation": {"type": "polynomial", "coeffs": ["0", "1"]}},
        {"type": "dense", "weight": [["2", "-1"]], "bias": None, "activation": None}]}
    path = tmp_path / "lin.json"
    path.write_text(json.dumps(data))
    main(["fibre", str(path)])
    out = capsys.readouterr().out
    assert re.search(r"e_[12] \(e_[12] - e_[12]\)", out) and "hidden layer 1" in out
    assert not re.search(r"e_0\b|W_0\b|neuron 0", out)


def test_piecewise_linear_input_errors_number_layers_from_1():
    from symeq.relu.regions import evaluate

    with pytest.raises(InputError, match=r"^layer 2: W has 1 rows but b has 2 entries"):
        evaluate([([[1, 2]], [0], True), ([[1]], [0, 1], False)], [1, 1])
    with pytest.raises(InputError, match=r"^layer 1 must be a triple"):
        evaluate([([[1, 2]], [0])], [1, 1])


def test_relu_fdim_input_errors_number_layers_from_1():
    """relu.fdim's reader of (W, b, slope) triples names the layer from 1, as the text output does."""
    from symeq.relu.fdim import network_slopes

    with pytest.raises(InputError, match=r"^layer 2 must be a triple"):
        network_slopes([([[1, 2]], [0], True), ([[1]], [0])])
