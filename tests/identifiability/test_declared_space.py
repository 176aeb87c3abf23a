"""Issue 25, the declared parameter space: a layer with ``"bias": null`` has no bias parameters, a layer
with a bias vector (zeros included) has them -- per layer, in every method and in the checker.

The models are built here with exact rational weights; the "old" certificates are those the earlier rule
(any nonzero bias: every layer biased) produced, rebuilt by declaring the null biases as zero vectors
(the same layers digest: null and zeros read alike there), so the checker must refuse them by the
parameter count it rebuilds from the model file.
"""
import copy
import json

import pytest

import symeq_check as check
from symeq.activations import monomial, real, relu, sigmoid_series, tanh_series
from symeq.fibre import jacobian as jm
from symeq.fibre.classical import classical_identifiability, zero_sum_flips
from symeq.fibre.ideal import _resolve_bias, fibre_ideal, layer_bias_flags
from symeq.io import model_from_json, model_to_json
from symeq.layers.base import declared_biases
from symeq.models import DenseLayer, Model
from symeq.submodels import reduce_model


def _json(x):
    return json.loads(json.dumps(x))


def _dense(W, b, act):
    return {"type": "dense", "weight": [[str(x) for x in r] for r in W],
            "bias": None if b is None else [str(x) for x in b], "activation": act}


SIG5 = {"type": "sigmoid_series", "order": 5}
TANH3 = {"type": "tanh_series", "order": 3}


def model_2221(second=None, third=None) -> dict:
    """2-2-2-1, sigmoid_series(5): neuron 2 of hidden layer 2 has zero incoming weights; layers 2 and 3
    without biases by default (``second``/``third``: a bias vector for them instead)."""
    return {"format": "symeq-model/1", "input_dim": 2, "layers": [
        _dense([[1, 2], [3, -1]], [1, -2], SIG5),
        _dense([[2, -1], [0, 0]], second, SIG5),
        _dense([[1, 3]], third, None)]}


def model_3442(second=None, third=None) -> dict:
    """3-4-4-2, tanh_series(3): biases in the first layer only by default."""
    W1 = [[1, -2, 3], [2, 1, -1], [-3, 1, 2], [1, 1, 1]]
    W2 = [[2, -1, 1, 3], [1, 2, -2, 1], [-1, 3, 1, 2], [3, 1, 2, -1]]
    W3 = [[1, -1, 2, 1], [2, 1, -1, 3]]
    return {"format": "symeq-model/1", "input_dim": 3, "layers": [
        _dense(W1, [1, -2, 3, 2], TANH3), _dense(W2, second, TANH3), _dense(W3, third, None)]}


# ----------------------------------------------------------------------------- the model records it

def test_null_stays_null_and_zeros_stay_zeros():
    data = model_2221()
    m = model_from_json(data)
    assert declared_biases(m) == (True, False, False)
    out = model_to_json(m)
    assert [l["bias"] for l in out["layers"]][1:] == [None, None]
    zeros = model_from_json(model_2221(second=[0, 0], third=[0]))
    assert declared_biases(zeros) == (True, True, True)
    out = model_to_json(zeros)
    assert out["layers"][1]["bias"] == ["0", "0"] and out["layers"][2]["bias"] == ["0"]
    # a model file with every bias written as zeros has its biases (a zero is a point of the space)
    allzero = model_from_json({"format": "symeq-model/1", "input_dim": 1, "layers": [
        _dense([[1], [2]], [0, 0], TANH3), _dense([[1, 1]], [0], None)]})
    assert declared_biases(allzero) == (True, True)
    assert model_to_json(model_from_json(model_to_json(allzero)))["layers"][0]["bias"] == ["0", "0"]


def test_python_zero_lists_follow_the_model_and_has_bias_declares():
    lone = Model(1, [DenseLayer([[1]], [0], monomial(2)), DenseLayer([[1]], [0], None)])
    assert declared_biases(lone) == (False, False)
    mixed = Model(1, [DenseLayer([[1]], [1], monomial(2)), DenseLayer([[1]], None, None)])
    assert declared_biases(mixed) == (True, False)
    said = Model(1, [DenseLayer([[1]], [0], monomial(2), has_bias=True), DenseLayer([[1]], None, None)])
    assert declared_biases(said) == (True, False)
    assert said.copy().layers[0].has_bias is True and mixed.copy().layers[1].has_bias is False


# ----------------------------------------------------------------------------- Jacobian rank

def test_2221_is_locally_identifiable_in_its_declared_space():
    m = model_from_json(model_2221())
    r = jm.jacobian_identifiability(m)
    assert (r.status, r.n_params, r.rank, r.orbit_dimension) == ("locally-identifiable", 12, 12, 0), r.reason
    assert r.certificate["bias"] == [True, False, False] and r.certificate["parameters"] == 12


def test_2221_with_declared_zero_biases_is_not_identifiable():
    """The same numbers with the biases of layers 2 and 3 declared (zeros): the constant neuron's outgoing
    weight moves into the output bias, a line in the fibre."""
    m = model_from_json(model_2221(second=[0, 0], third=[0]))
    r = jm.jacobian_identifiability(m)
    assert r.status == "not-identifiable" and r.n_params == 15
    assert any(f["kind"] == "constant-neuron" for f in r.families)


def test_no_family_moves_a_missing_bias():
    m = model_from_json(model_2221())
    flags = jm.layer_biases(m)
    fams = jm._families(m, flags)
    assert not any(f["kind"] == "constant-neuron" for f in fams)
    offs, P = jm._offsets(m, flags)
    assert P == 12 and "b2" not in offs and "b3" not in offs


def test_3442_counts_40_parameters_rank_40():
    m = model_from_json(model_3442())
    r = jm.jacobian_identifiability(m)
    assert (r.status, r.n_params, r.rank) == ("locally-identifiable", 40, 40), r.reason
    layout = [(n, c) for n, _, c in jm.parameter_layout(m)]
    assert layout == [("W1", 12), ("b1", 4), ("W2", 16), ("W3", 8)]


def test_checker_accepts_the_declared_certificates():
    for data in (model_2221(), model_3442()):
        m = model_from_json(data)
        cert = _json(jm.jacobian_identifiability(m).certificate)
        rep = check.check_certificate(cert, _json(data))
        assert rep.accepted is True, rep.reasons


@pytest.mark.parametrize("build", [model_2221, model_3442])
def test_checker_refuses_the_old_certificate(build):
    """The old rule gave every layer biases (46 parameters for 3-4-4-2; for 2-2-2-1 a constant-neuron
    family moving into an output bias that does not exist): rebuilt here by declaring zero biases, which
    have the same layers digest as null ones, and refused against the file with null biases."""
    biased = build(second=[0] * (2 if build is model_2221 else 4), third=[0] * (1 if build is model_2221 else 2))
    old = _json(jm.jacobian_identifiability(model_from_json(biased)).certificate)
    assert old["bias"] is True and old["parameters"] == (15 if build is model_2221 else 46)
    assert check.layers_digest(biased["layers"], biased["input_dim"]) == \
        check.layers_digest(build()["layers"], biased["input_dim"])
    rep = check.check_certificate(old, _json(build()))
    assert rep.accepted is False
    assert any("parameters" in x or "bias" in x for x in rep.reasons), rep.reasons
    # the right certificate for the biased file is still accepted there
    assert check.check_certificate(old, _json(biased)).accepted is True


def test_checker_refuses_a_bias_field_that_is_not_the_files():
    data = model_3442()
    cert = _json(jm.jacobian_identifiability(model_from_json(data)).certificate)
    for bad in (True, False, [True, True, False], [True, False]):
        tampered = dict(cert, bias=bad)
        assert check.check_certificate(tampered, _json(data)).accepted is False, bad


# ----------------------------------------------------------------------------- other methods

def test_fibre_ideal_has_no_unknowns_for_missing_biases():
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], monomial(2)), DenseLayer([[2, -1]], None, None)])
    I = fibre_ideal(m)
    assert not any(v.startswith("b2_") for v in I.variables)
    assert I.bias == (True, False) and "layers 1" in I.summary()
    assert layer_bias_flags(m) == (True, False) and _resolve_bias(m, "auto") is None
    both = fibre_ideal(Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], monomial(2)),
                                 DenseLayer([[2, -1]], [0], None)]))
    assert "b2_0" in both.variables and both.bias is True


def test_ideal_gauge_follows_the_declared_space():
    """t + t^2 = (t + 1/2)^2 - 1/4 scales continuously only when the next layer's bias takes the offset."""
    from symeq.activations import polynomial

    act = polynomial([0, 1, 1])
    with_next = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], act), DenseLayer([[2, -1]], [1], None)])
    without = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], act), DenseLayer([[2, -1]], None, None)])
    assert fibre_ideal(with_next).gauge and not fibre_ideal(without).gauge
    assert jm.orbit_tangent(with_next) and not jm.orbit_tangent(without)


def test_mixed_declarations_are_not_applicable_to_one_flag_methods():
    from symeq.fibre.tensor import tensor_identifiability

    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], monomial(3)), DenseLayer([[2, -1]], None, None)])
    t = tensor_identifiability(m)
    assert t.status == "not-applicable" and "one layer only" in t.reason
    deep = Model(3, [DenseLayer([[1, 2, 1], [3, -1, 1], [1, 1, 2]], [1, 2, 3], monomial(2)),
                     DenseLayer([[1, 2, 1], [3, -1, 1], [1, 1, 2]], None, monomial(2)),
                     DenseLayer([[1, 2, 1], [3, -1, 1], [1, 1, 2]], None, None)])
    d = tensor_identifiability(deep)
    assert d.status == "not-applicable" and "some layers only" in d.reason


def test_relu_functional_dimension_counts_the_declared_space():
    from symeq.relu.fdim import relu_functional_dimension

    W1 = [[1, 2], [3, -1], [-2, 1]]
    full = relu_functional_dimension(Model(2, [DenseLayer(W1, [1, -1, 2], relu()),
                                                DenseLayer([[1, -2, 3]], [1], None)]))
    part = relu_functional_dimension(Model(2, [DenseLayer(W1, [1, -1, 2], relu()),
                                                DenseLayer([[1, -2, 3]], None, None)]))
    assert (full.params, part.params) == (13, 12)
    assert part.rank == part.bound == 12 - 3 and part.exact


def test_reduce_model_moves_no_constant_into_a_missing_bias():
    layers = lambda b: [DenseLayer([[1], [0]], [1, 2], tanh_series(3)), DenseLayer([[2, 3]], b, None)]  # noqa: E731
    assert reduce_model(Model(1, layers([0]))).model.widths == [1, 1, 1]
    kept = reduce_model(Model(1, layers(None)))
    assert kept.model.widths == [1, 2, 1] and declared_biases(kept.model) == (True, False)


# ----------------------------------------------------------------------------- Sussmann and Fefferman

def _sig3(out_bias):
    return {"format": "symeq-model/1", "input_dim": 2, "layers": [
        _dense([[1, 2], [3, -1], [-2, 5]], [1, -2, 3], {"type": "sigmoid"}),
        _dense([[2, -1, 3]], out_bias, None)]}


def test_sigmoid_without_output_bias_has_an_orbit_of_6():
    d = classical_identifiability(model_from_json(_sig3(None)))
    assert (d.status, d.orbit_size) == ("identifiable", 6), d.reason
    assert d.certificate["orbit_formula"] == "3!" and d.certificate["orbit_size"] == "6"
    assert "declared parameter space" in d.scope
    d2 = classical_identifiability(model_from_json(_sig3([1])))
    assert d2.orbit_size == 48
    tanh = json.loads(json.dumps(_sig3(None)).replace('"sigmoid"', '"tanh"'))
    assert classical_identifiability(model_from_json(tanh)).orbit_size == 48  # sign flips move no bias


def test_zero_sum_flips_count_the_flips_that_keep_a_missing_bias():
    d = classical_identifiability(Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 5]], [1, -2, 3], real("sigmoid")),
                                            DenseLayer([[2, -2, 3]], None, None)]))
    assert d.orbit_size == 2 * 6  # flipping units 1 and 2 together adds 2 - 2 = 0 to the output
    assert zero_sum_flips([[2], [-2], [3]]) == 2


def test_classical_certificates_check_in_the_declared_space():
    for out_bias in (None, [1]):
        data = _sig3(out_bias)
        d = classical_identifiability(model_from_json(data))
        rep = check.check_certificate(_json(d.certificate), _json(data))
        assert rep.accepted is True, rep.reasons
    # the old orbit (48) against the file without an output bias is refused
    d = classical_identifiability(model_from_json(_sig3([0])))
    assert d.orbit_size == 48
    assert check.check_certificate(_json(d.certificate), _json(_sig3(None))).accepted is False


def test_sussmann_witnesses_change_no_missing_bias():
    # R1 without biases in the hidden layer: an incoming weight moves, not a bias
    m = Model(2, [DenseLayer([[1, 2], [3, 1]], None, real("tanh")), DenseLayer([[2, 0]], None, None)])
    d = classical_identifiability(m)
    assert d.status == "not-identifiable"
    assert all(ch["param"] == "weight" for ch in d.witness["changes"]) and not d.witness["bias_terms"]
    rep = check.check_certificate(_json(d.certificate), _json(model_to_json(m)))
    assert rep.accepted is True, rep.reasons
    # R2 of a sigmoid without an output bias: the constant has nowhere to go: undetermined, not a witness
    s = Model(2, [DenseLayer([[1, 2], [0, 0]], [1, 3], real("sigmoid")), DenseLayer([[2, -1]], None, None)])
    ds = classical_identifiability(s)
    assert ds.status == "undetermined" and "null" in ds.reason


def test_checker_refuses_a_witness_that_moves_a_missing_bias():
    m = Model(2, [DenseLayer([[1, 2], [0, 0]], [1, 3], real("tanh")), DenseLayer([[2, -1]], [0], None)])
    d = classical_identifiability(m)
    assert d.status == "not-identifiable" and d.witness["bias_terms"]
    data = _json(model_to_json(m))
    assert check.check_certificate(_json(d.certificate), data).accepted is True
    data["layers"][1]["bias"] = None  # the output layer without a bias: the constant cannot move there
    rep = check.check_certificate(_json(d.certificate), data)
    assert rep.accepted is False


def test_copy_of_the_certificate_is_not_changed_by_checking():
    data = model_3442()
    cert = _json(jm.jacobian_identifiability(model_from_json(data)).certificate)
    before = copy.deepcopy(cert)
    check.check_certificate(cert, _json(data))
    assert cert == before


def test_groebner_step_is_not_applicable_to_a_mixed_declaration(tmp_path, capsys):
    """symeq fibre on a small mixed model: the Gröbner step (whose orbit count takes one declaration) says
    not applicable, and the Jacobian rank's local answer is the report's; compare_with_orbit refuses it."""
    from symeq.cli import main
    from symeq.errors import InputError
    from symeq.fibre.orbit import compare_with_orbit

    data = {"format": "symeq-model/1", "input_dim": 2, "layers": [
        _dense([[1, 2], [3, -1]], [1, -2], {"type": "polynomial", "coeffs": ["0", "1", "1"]}),
        _dense([[2, -1]], None, None)]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    code = main(["fibre", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    tried = {t["method"]: t for t in out["tried"]}
    assert tried["groebner"]["status"] == "not-applicable" and "some layers only" in tried["groebner"]["reason"]
    assert out["status"] != "not-identifiable" or out["method"] == "jacobian-rank", out
    assert code in (0, 1, 3)
    with pytest.raises(InputError, match="some layers only"):
        compare_with_orbit(model_from_json(data), engine="sympy")


@pytest.mark.parametrize("out_bias, hidden_bias", [(None, [1, -1, 2]), (None, None), ([1], [1, -1, 2])])
def test_relu_certificate_in_the_declared_space(out_bias, hidden_bias):
    from symeq.fibre.decide import relu_local_identifiability

    m = Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 1]], hidden_bias, relu()),
                  DenseLayer([[1, -2, 3]], out_bias, None)])
    d = relu_local_identifiability(m)
    assert d.status == "locally-identifiable", d.reason
    cert = _json(d.certificate)
    assert cert["parameters"] == 9 + 3 * (hidden_bias is not None) + (out_bias is not None)
    rep = check.check_certificate(cert, _json(model_to_json(m)))
    assert rep.accepted is True, rep.reasons
