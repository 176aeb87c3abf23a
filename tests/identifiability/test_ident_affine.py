"""Issue 25, Deliver 4: affine (degree-1) activations are a kind of activation for identifiability.

A hidden linear layer of width n >= 2 has the symmetry (W, b, W') -> (A W, A b, W' A^-1) for every
invertible A with A 1 = 1: a GL family outside the monomial latent group (not identifiable).  Width 1:
GL_1 is the neuron's scaling alpha, inside the latent group; with one hidden layer the fibre is then
decided exactly from the declared biases.  The witnesses are checked here independently: f is affine in x,
so two parameters have the same function exactly when they agree at 0 and the unit vectors.
"""

import json
from fractions import Fraction

import pytest

from symeq.activations import polynomial, tanh_series
from symeq.cli import main
from symeq.errors import InputError
from symeq.fibre.decide import _affine_decision, decide_identifiability
from symeq.models import DenseLayer, Model, linear_hidden_allowed


def _model(n_in, layers) -> Model:
    with linear_hidden_allowed():
        return Model(n_in, [DenseLayer(w, b, a) for w, b, a in layers])


def _affine_function(layers, n_in):
    """The outputs at 0, e_1, ..., e_n of the network given as (W, b, (a, c) or None) triples, exactly."""
    def run(x):
        for W, b, act in layers:
            x = [sum(Fraction(w) * xi for w, xi in zip(row, x)) + (Fraction(b[i]) if b else 0)
                 for i, row in enumerate(W)]
            if act is not None:
                x = [act[0] * z + act[1] for z in x]
        return x

    pts = [[0] * n_in] + [[int(i == j) for i in range(n_in)] for j in range(n_in)]
    return [run(p) for p in pts]


def test_hidden_linear_width_2_not_identifiable_with_an_exact_family():
    W1, W2 = [[1, 2], [3, -1]], [[2, -1]]
    m = _model(2, [(W1, None, polynomial([0, 1])), (W2, None, None)])
    r = decide_identifiability(m)
    assert (r.status, r.method, r.exit_code) == ("not-identifiable", "affine", 1)
    w = r.result["witness"]
    assert w["kind"] == "gl-family" and w["real"] is True
    i, j = (k - 1 for k in w["neurons"])
    # the family's point at s = 1/3 (A 1 = 1): same function, another parameter
    s = Fraction(1, 3)
    A = [[Fraction(int(r_ == k)) + (s * (int(k == j) - int(k == i)) if r_ == i else 0) for k in range(2)]
         for r_ in range(2)]
    det = A[0][0] * A[1][1] - A[0][1] * A[1][0]
    Ai = [[A[1][1] / det, -A[0][1] / det], [-A[1][0] / det, A[0][0] / det]]
    W1s = [[sum(A[r_][k] * W1[k][c] for k in range(2)) for c in range(2)] for r_ in range(2)]
    W2s = [[sum(W2[q][k] * Ai[k][c] for k in range(2)) for c in range(2)] for q in range(1)]
    assert W1s != W1
    assert _affine_function([(W1s, None, (1, 0)), (W2s, None, None)], 2) == \
        _affine_function([(W1, None, (1, 0)), (W2, None, None)], 2)


def test_affine_with_biases_in_a_deep_network():
    """sigma = 2t + 1 of width 3 before a tanh_3 layer: the GL family keeps A 1 = 1 so the next layer's
    biases need no change; decided before any other method."""
    m = _model(2, [([[1, 2], [3, -1], [2, 5]], [1, -2, 3], polynomial([1, 2])),
                   ([[1, 0, 2], [2, 1, -1]], [1, 1], tanh_series(3)), ([[1, -1]], [2], None)])
    r = decide_identifiability(m)
    assert (r.status, r.method) == ("not-identifiable", "affine")
    assert r.tried[0]["method"] == "affine" and len(r.tried) == 1


def test_degenerate_affine_layer_is_undetermined():
    m = _model(2, [([[0, 0], [0, 0]], None, polynomial([0, 1])), ([[0, 0]], None, None)])
    status, reason, _ = _affine_decision(m)
    assert status == "unknown" and "degenerate" in reason
    assert decide_identifiability(m).exit_code == 3


@pytest.mark.parametrize("b1,b2,c,expected", [
    (True, True, 1, "not-identifiable"),     # the bias pair trades: (b_1 + t, b_2 - a t W_2)
    (True, False, 1, "not-identifiable"),    # the scaling moves b_1 about -c/a, K would need b_2
    (True, False, 0, "identifiable"),        # sigma = a t: the scaling alpha, b_1 -> alpha b_1
    (False, True, 1, "identifiable"),        # the scaling with its offset c (1 - 1/alpha) W_2 in b_2
    (False, False, 1, "identifiable"),       # fibre = orbit = {theta}
    (False, False, 0, "identifiable"),
])
def test_width_1_one_hidden_layer_by_its_scalar(b1, b2, c, expected):
    a = Fraction(3)
    W1, W2 = [[1, 2]], [[2], [-1]]
    B1, B2 = ([Fraction(1, 2)] if b1 else None), ([1, 4] if b2 else None)
    m = _model(2, [(W1, B1, polynomial([c, a])), (W2, B2, None)])
    r = decide_identifiability(m)
    assert r.status == expected and r.method == "affine", r.reason
    f = _affine_function([(W1, B1, (a, c)), (W2, B2, None)], 2)
    if expected == "not-identifiable" and b2:  # the bias line at t = 1 has the same function
        line = [(W1, [B1[0] + 1], (a, c)), (W2, [B2[0] - a * 2, B2[1] + a], None)]
        assert _affine_function(line, 2) == f
    elif expected == "not-identifiable":  # the scaling curve at alpha = 2, within the declared space
        al = Fraction(2)
        curve = [([[al * x for x in W1[0]]], [al * (B1[0] + Fraction(c) / a) - Fraction(c) / a], (a, c)),
                 ([[Fraction(W2[0][0]) / al], [Fraction(W2[1][0]) / al]], None, None)]
        assert _affine_function(curve, 2) == f
    else:  # the orbit point alpha = 2 named in the reason is in the fibre (when alpha may move)
        assert "orbit" in r.reason
        if not (not b1 and not b2 and c != 0):
            al = Fraction(2)
            off = [Fraction(c) * (1 - 1 / al) * W2[i][0] for i in range(2)]
            pt = [([[al * x for x in W1[0]]], [al * B1[0]] if b1 else None, (a, c)),
                  ([[Fraction(W2[0][0]) / al], [Fraction(W2[1][0]) / al]],
                   [B2[i] + off[i] for i in range(2)] if b2 else None, None)]
            assert _affine_function(pt, 2) == f


def test_width_1_in_a_deeper_network_is_undetermined():
    m = _model(2, [([[1, 2]], [1], polynomial([1, 2])), ([[1], [2]], [0, 1], tanh_series(3)),
                   ([[1, -1]], [2], None)])
    r = decide_identifiability(m)
    assert r.status == "unknown" and "width 1" in r.reason and r.exit_code == 3


def test_cli_fibre_answers_and_other_commands_still_refuse(tmp_path, capsys):
    data = {"format": "symeq-model/1", "input_dim": 2, "layers": [
        {"type": "dense", "weight": [["1", "2"], ["3", "-1"]], "bias": None,
         "activation": {"type": "polynomial", "coeffs": ["0", "1"]}},
        {"type": "dense", "weight": [["2", "-1"]], "bias": None, "activation": None}]}
    path = tmp_path / "linear.json"
    path.write_text(json.dumps(data))
    assert main(["fibre", str(path), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert (d["status"], d["method"], d["over"]) == ("not-identifiable", "affine", "R")
    assert main(["fibre", str(path)]) == 1
    assert "A_s = I + s e_" in capsys.readouterr().out
    # outside the identifiability decision a hidden affine layer is still refused, with its reason
    with pytest.raises(InputError, match="affine activation"):
        Model(2, [DenseLayer([[1, 2]], None, polynomial([0, 1])), DenseLayer([[1]], None, None)])
    data["group"] = "trivial"
    assert main(["verify", str(path), "--group", "trivial"]) == 2
    assert "affine activation" in capsys.readouterr().err
