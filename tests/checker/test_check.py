"""Tests for the independent certificate checker symeq_check (hand-built models and certificates)."""
import copy
import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symeq_check import CheckError, check_certificate, check_files, main, parse_number
from symeq_check.activations import sigmoid_series_coeffs, tanh_series_coeffs

SWAP = [[0, 1], [1, 0]]
ONE = [[1]]
TANH3 = {"type": "tanh_series", "order": 3}


def num(x):
    """Write a number the way the files do: integers as JSON ints, the rest as "p/q"."""
    x = Fraction(x)
    return x.numerator if x.denominator == 1 else str(x)


def mat(m):
    return [[num(x) for x in row] for row in m]


def dense(weight, bias, activation):
    return {"type": "dense", "weight": mat(weight),
            "bias": None if bias is None else [num(x) for x in bias], "activation": activation}


def make(layers, generators, latent, verdict="layerwise-equivariant", witness=None, input_dim=2,
         model_group=True):
    """Return (certificate, model) dicts for a network and a group given by (input, output) pairs."""
    group = {"generators": [{"input": mat(p), "output": mat(q)} for p, q in generators]}
    model = {"format": "symeq-model/1", "input_dim": input_dim, "layers": layers}
    if model_group:
        model["group"] = copy.deepcopy(group)
    cert = {"format": "symeq-certificate/1", "verdict": verdict,
            "equivariance": {"holds": {"layerwise-equivariant": True,
                                       "not-equivariant": False}.get(verdict),
                             "method": "hand", "detail": "", "witness": witness},
            "identifiability": {"status": "unknown"}, "input_dim": input_dim, "group": group,
            "parameters": {"layers": copy.deepcopy(layers), "reparametrized": False},
            "latent_actions": [[mat(m) for m in per_layer] for per_layer in latent],
            "latent_offsets": None, "checks": {}, "versions": {}}
    return cert, model


def swap_tanh():
    """(a) swap on R^2, trivial action on a scalar output, tanh_series(3) hidden layer."""
    layers = [dense([[1, 2], [2, 1]], [1, 1], TANH3), dense([[3, 3]], [0], None)]
    return make(layers, [(SWAP, ONE)], [[SWAP]])


def sign_tanh(latent):
    """(b) global sign group, odd activation, bias-free; neuron 1 is minus neuron 0."""
    layers = [dense([[1, 2], [-1, -2]], None, TANH3), dense([[1, -1]], None, None)]
    return make(layers, [([[-1, 0], [0, -1]], [[-1]])], [[latent]])


def square_scaling():
    """(c) t^2 with swap on the input: row0 P = (1/2) row1, row1 P = 2 row0, so q = 1/4 and 4.

    Biases satisfy b0 = (1/2) b1 and b1 = 2 b0; W2 Q = W2 forces W2 = [4, 1]. By hand:
    f(x) = 4 (x1 + 2 x2 + 1)^2 + (4 x1 + 2 x2 + 2)^2 = 4 (x1 + 2 x2 + 1)^2 + 4 (2 x1 + x2 + 1)^2.
    """
    layers = [dense([[1, 2], [4, 2]], [1, 2], {"type": "monomial", "degree": 2}),
              dense([[4, 1]], [0], None)]
    return make(layers, [(SWAP, ONE)], [[[[0, Fraction(1, 4)], [4, 0]]]])


def relu_scaling():
    """(d) relu, same weights: q = alpha, Q = [[0, 1/2], [2, 0]], W2 = [2, 1].

    f(x) = 2 relu(x1 + 2 x2 + 1) + relu(4 x1 + 2 x2 + 2) = 2 relu(x1 + 2 x2 + 1) + 2 relu(2 x1 + x2 + 1).
    """
    layers = [dense([[1, 2], [4, 2]], [1, 2], {"type": "relu"}), dense([[2, 1]], [0], None)]
    return make(layers, [(SWAP, ONE)], [[[[0, Fraction(1, 2)], [2, 0]]]])


# ----------------------------------------------------------------------------- numbers, series

def test_tanh_and_sigmoid_series():
    assert tanh_series_coeffs(7) == [Fraction(x) for x in
                                     (0, 1, 0, Fraction(-1, 3), 0, Fraction(2, 15), 0,
                                      Fraction(-17, 315))]
    assert sigmoid_series_coeffs(5) == [Fraction(1, 2), Fraction(1, 4), 0, Fraction(-1, 48), 0,
                                        Fraction(1, 480)]


@pytest.mark.parametrize("text,value", [("1/3", Fraction(1, 3)), ("-3", Fraction(-3)),
                                        ("0.25", Fraction(1, 4)), ("-1.5e-3", Fraction(-3, 2000)),
                                        ("+2/4", Fraction(1, 2)), ("1E2", Fraction(100)), (5, 5)])
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("bad", [0.5, True, None, "1/0", "abc", "1/3/4", " 1", "1_000", "0x10",
                                 "", ".", "1e99999", [1]])
def test_parse_number_refuses(bad):
    with pytest.raises(CheckError):
        parse_number(bad)


def test_float_message_suggests_strings():
    with pytest.raises(CheckError, match=r'"1/3" or "0.25"'):
        parse_number(0.1)


@given(st.fractions(max_denominator=10 ** 6))
def test_fraction_strings_round_trip(x):
    assert parse_number(str(x)) == x


@given(st.decimals(allow_nan=False, allow_infinity=False, places=6))
def test_decimal_strings_exact(d):
    assert parse_number(str(d)) == Fraction(d)


# ----------------------------------------------------------------------------- accepted certificates

@pytest.mark.parametrize("build", [swap_tanh, square_scaling, relu_scaling,
                                   lambda: sign_tanh([[-1, 0], [0, -1]]),
                                   lambda: sign_tanh(SWAP)])
def test_hand_built_certificates_accepted(build):
    report = check_certificate(*build())
    assert report.accepted is True, report.reasons
    assert report.exit_code == 0 and report.reasons == []
    assert any("homomorphism: group of order 2" in c for c in report.checks)
    assert any(c.startswith("layer 1, generator 1:") and "verified" in c for c in report.checks)
    assert any(c.startswith("layer 2, generator 1: W P = Q W") for c in report.checks)


def test_sigmoid_swap_accepted_and_two_hidden_layers():
    sig = {"type": "sigmoid_series", "order": 5}
    poly = {"type": "polynomial", "coeffs": ["0", "1", "1/2"]}
    layers = [dense([[1, 2], [2, 1]], [1, 1], sig), dense([[1, 1], [2, 2]], ["1/3", 0], poly),
              dense([[3, 5]], [0], None)]
    report = check_certificate(*make(layers, [(SWAP, ONE)], [[SWAP], [[[1, 0], [0, 1]]]]))
    assert report.accepted is True, report.reasons
    assert any("all 2 latent actions" in c for c in report.checks)


def test_single_affine_layer():
    cert, model = make([dense([[1, 1]], [2], None)], [(SWAP, ONE)], [])
    assert check_certificate(cert, model).accepted is True
    cert, model = make([dense([[1, 2]], [2], None)], [(SWAP, ONE)], [])
    assert check_certificate(cert, model).accepted is False


# ----------------------------------------------------------------------------- tampering

@pytest.mark.parametrize("build", [swap_tanh, square_scaling, relu_scaling])
def test_tampered_latent_entry_rejected(build):
    cert, model = build()
    row = cert["latent_actions"][0][0][0]
    k = next(k for k, x in enumerate(row) if x != 0)
    row[k] = "7/3"
    report = check_certificate(cert, model)
    assert report.accepted is False and report.exit_code == 1
    assert any("layer 1, generator 1" in r for r in report.reasons)


def test_tampered_weight_rejected():
    cert, model = swap_tanh()
    cert["parameters"]["layers"][0]["weight"][0][1] = 3
    report = check_certificate(cert, model)
    assert report.accepted is False
    assert any("parameters differ from the model" in r for r in report.reasons)
    # declared as a re-parametrization, it is checked for the same function, and fails
    cert["parameters"]["reparametrized"] = True
    report = check_certificate(cert, model)
    assert report.accepted is False
    assert any("f(x; theta') != f(x; theta)" in r for r in report.reasons)


def test_tampered_activation_rejected():
    cert, model = swap_tanh()
    cert["parameters"]["layers"][0]["activation"] = {"type": "tanh_series", "order": 5}
    assert check_certificate(cert, model).accepted is False


def test_same_function_different_spelling_accepted():
    cert, model = swap_tanh()
    cert["parameters"]["layers"][0]["activation"] = {"type": "polynomial",
                                                    "coeffs": [0, "1.0", 0, "-2/6", "0"]}
    cert["parameters"]["layers"][1]["bias"] = None
    assert check_certificate(cert, model).accepted is True


def test_non_monomial_latent_rejected():
    cert, model = swap_tanh()
    cert["latent_actions"][0][0] = [[1, 1], [0, 1]]
    report = check_certificate(cert, model)
    assert report.accepted is False
    assert any("layer 1, generator 1" in r and "row 1" in r for r in report.reasons)


def test_relu_needs_positive_latent():
    cert, model = relu_scaling()
    cert["latent_actions"][0][0] = [[0, "-1/2"], [2, 0]]
    report = check_certificate(cert, model)
    assert report.accepted is False and any("positive" in r for r in report.reasons)


def test_relu_absolute_value():
    layers = [dense([[1, 0], [-1, 0]], None, {"type": "relu"}), dense([[1, 1]], None, None)]
    cert, model = make(layers, [([[-1, 0], [0, 1]], ONE)], [[SWAP]])
    assert check_certificate(cert, model).accepted is True  # relu(t) + relu(-t) = |t|
    layers[1] = dense([[1, -1]], None, None)  # t, odd: fails with output +1
    cert, model = make(layers, [([[-1, 0], [0, 1]], ONE)], [[SWAP]])
    assert check_certificate(cert, model).accepted is False


def test_wrong_latent_count_or_size_rejected():
    cert, model = swap_tanh()
    cert["latent_actions"] = []
    assert check_certificate(cert, model).accepted is False
    cert, model = swap_tanh()
    cert["latent_actions"][0][0] = [[1]]
    assert check_certificate(cert, model).accepted is False


def clone_network():
    """Two clone neurons; the swap generator is listed twice with latent identity and swap."""
    layers = [dense([[1, 1], [1, 1]], [0, 0], TANH3), dense([[1, 1]], None, None)]
    return make(layers, [(SWAP, ONE), (SWAP, ONE)], [[[[1, 0], [0, 1]], SWAP]])


def test_homomorphism_violation_rejected():
    cert, model = clone_network()
    report = check_certificate(cert, model)
    assert report.accepted is False
    assert any("homomorphism" in r and "hidden layer 1" in r for r in report.reasons)
    # every layer equation held: the failure comes from the homomorphism check alone
    assert sum("verified" in c for c in report.checks) == 4


def test_homomorphism_consistent_when_both_generators_agree():
    cert, model = clone_network()
    cert["latent_actions"][0][0] = mat(SWAP)
    report = check_certificate(cert, model)
    assert report.accepted is True and any("group of order 2" in c for c in report.checks)


def test_group_size_cap():
    report = check_certificate(*swap_tanh(), max_group_size=1)
    assert report.accepted is False and any("max_group_size=1" in r for r in report.reasons)


def test_model_group_must_match():
    cert, model = swap_tanh()
    model["group"]["generators"][0]["input"] = [[1, 0], [0, 1]]
    report = check_certificate(cert, model)
    assert report.accepted is False and any("group differs" in r for r in report.reasons)
    cert, model = swap_tanh()
    model["group"]["generators"][0]["input"] = [["0/5", "1.0"], [1, 0]]  # same numbers
    assert check_certificate(cert, model).accepted is True


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.fractions(-5, 5, max_denominator=7), min_size=2, max_size=2),
                min_size=1, max_size=4),
       st.lists(st.fractions(-5, 5, max_denominator=7), min_size=4, max_size=4),
       st.integers(0, 3), st.fractions(-3, 3, max_denominator=5))
def test_odd_network_under_global_sign(w1, w2, k, delta):
    """Any bias-free odd network is sign-equivariant with latent -I; tampering breaks it."""
    n = len(w1)
    minus = [[-int(i == j) for j in range(n)] for i in range(n)]
    layers = [dense(w1, None, {"type": "tanh_series", "order": 5}), dense([w2[:n]], None, None)]
    cert, model = make(layers, [([[-1, 0], [0, -1]], [[-1]])], [[minus]])
    assert check_certificate(cert, model).accepted is True
    if any(w1[k % n]) and delta != 0:  # neuron k must go to -neuron k with factor exactly -1
        cert["latent_actions"][0][0][k % n][k % n] = num(-1 + delta)
        assert check_certificate(cert, model).accepted is False


# ----------------------------------------------------------------------------- witnesses

def test_witness_accepted_when_equivariance_fails():
    layers = [dense([[1, 2]], None, None)]
    cert, model = make(layers, [(SWAP, ONE)], [], verdict="not-equivariant",
                       witness={"generator": 0, "x": [1, "0.0"]})
    report = check_certificate(cert, model)
    assert report.accepted is True, report.reasons
    assert any("f(P x) = [2]" in c for c in report.checks)
    assert any("Q f(x) = [1]" in c for c in report.checks)


def test_witness_rejected_when_model_is_equivariant():
    cert, model = swap_tanh()
    cert["verdict"] = "not-equivariant"
    cert["equivariance"] = {"holds": False, "witness": {"generator": 0, "x": ["1/2", -3]}}
    report = check_certificate(cert, model)
    assert report.accepted is False and report.exit_code == 1


def test_relu_witness_evaluated_exactly():
    layers = [dense([[1, 0]], [0], {"type": "relu"}), dense([[1]], None, None)]
    cert, model = make(layers, [([[-1, 0], [0, 1]], [[-1]])], [], verdict="not-equivariant",
                       witness={"generator": 0, "x": ["-1/3", 0]})
    report = check_certificate(cert, model)  # relu(1/3) = 1/3 but -relu(-1/3) = 0
    assert report.accepted is True and any("f(P x) = [1/3]" in c for c in report.checks)


def test_missing_witness_rejected_bad_witness_malformed():
    cert, model = swap_tanh()
    cert["verdict"] = "not-equivariant"
    cert["equivariance"] = {"holds": False, "witness": None}
    assert check_certificate(cert, model).accepted is False
    cert["equivariance"]["witness"] = {"generator": 5, "x": [0, 0]}
    with pytest.raises(CheckError):
        check_certificate(cert, model)
    cert["equivariance"]["witness"] = {"generator": 0, "x": [0, 0, 0]}
    with pytest.raises(CheckError):
        check_certificate(cert, model)


@pytest.mark.parametrize("verdict", ["undetermined", "no-layerwise-parameter"])
def test_unverifiable_verdicts(verdict):
    cert, model = swap_tanh()
    cert["verdict"] = verdict
    report = check_certificate(cert, model)
    assert report.accepted is None and report.exit_code == 3
    assert any(f"nothing this checker can re-verify: {verdict}" in c for c in report.checks)


# ----------------------------------------------------------------------------- malformed input

def _mutations():
    def float_weight(c, m):
        m["layers"][0]["weight"][0][0] = 1.0

    def wrong_shape(c, m):
        m["layers"][1]["weight"] = [[3, 3, 3]]

    def wrong_bias(c, m):
        m["layers"][0]["bias"] = [1]

    def unknown_activation(c, m):
        m["layers"][0]["activation"] = {"type": "softmax"}

    def even_tanh(c, m):
        m["layers"][0]["activation"] = {"type": "tanh_series", "order": 4}

    def hidden_without_activation(c, m):
        m["layers"][0]["activation"] = None

    def last_with_activation(c, m):
        m["layers"][1]["activation"] = {"type": "relu"}

    def unknown_verdict(c, m):
        c["verdict"] = "probably"

    def bad_format(c, m):
        m["format"] = "symeq-model/2"

    def bool_number(c, m):
        c["group"]["generators"][0]["input"][0][0] = False

    def float_in_latent(c, m):
        c["latent_actions"][0][0][0][1] = 1.0

    def ragged_latent(c, m):
        c["latent_actions"][0][0] = [[0, 1], [1]]

    def group_wrong_size(c, m):
        c["group"]["generators"][0]["output"] = [[1, 0], [0, 1]]

    return [float_weight, wrong_shape, wrong_bias, unknown_activation, even_tanh,
            hidden_without_activation, last_with_activation, unknown_verdict, bad_format,
            bool_number, float_in_latent, ragged_latent, group_wrong_size]


@pytest.mark.parametrize("mutate", _mutations(), ids=lambda f: f.__name__)
def test_malformed_raises(mutate):
    cert, model = swap_tanh()
    mutate(cert, model)
    with pytest.raises(CheckError):
        check_certificate(cert, model)


def test_shape_error_names_layer():
    cert, model = swap_tanh()
    model["layers"][1]["weight"] = [[3, 3, 3]]
    with pytest.raises(CheckError, match="layer 2"):
        check_certificate(cert, model)


def _write(tmp_path, cert, model):
    cp, mp = tmp_path / "cert.json", tmp_path / "model.json"
    cp.write_text(json.dumps(cert))
    mp.write_text(json.dumps(model))
    return str(cp), str(mp)


def test_main_exit_codes(tmp_path, capsys):
    cert, model = swap_tanh()
    paths = _write(tmp_path, cert, model)
    assert main(list(paths)) == 0
    out = capsys.readouterr().out
    assert "result: accepted" in out and "homomorphism" in out
    assert check_files(*paths).accepted is True

    cert["latent_actions"][0][0] = [[1, 1], [0, 1]]
    assert main(list(_write(tmp_path, cert, model))) == 1
    assert "REJECTED" in capsys.readouterr().out

    cert["verdict"] = "undetermined"
    assert main(list(_write(tmp_path, cert, model))) == 3


@pytest.mark.parametrize("content", ['{"format": ', '{"format": "symeq-model/1", "input_dim": 2.0}',
                                     "[" * 100000, "\xff"])
def test_main_malformed_files(tmp_path, capsys, content):
    cert, model = swap_tanh()
    cp, mp = _write(tmp_path, cert, model)
    with open(mp, "w", encoding="latin-1") as fh:
        fh.write(content)
    assert main([cp, mp]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and err.count("\n") == 1


def test_main_float_file_and_missing_file(tmp_path, capsys):
    cert, model = swap_tanh()
    model["layers"][0]["bias"] = [1.5, 1]
    cp, mp = _write(tmp_path, cert, model)
    assert main([cp, mp]) == 2
    assert '"1/3" or "0.25"' in capsys.readouterr().err
    assert main([cp, str(tmp_path / "nope.json")]) == 2
    assert main([cp]) == 2
    with pytest.raises(CheckError):
        check_files(cp, str(tmp_path / "nope.json"))


def test_relu_bias_must_scale():
    cert, model = relu_scaling()
    for doc in (model, cert["parameters"]):
        doc["layers"][0]["bias"] = [1, 3]
    report = check_certificate(cert, model)
    assert report.accepted is False and any("bias" in r for r in report.reasons)


@pytest.mark.parametrize("activation", [{"type": "relu"}, TANH3, {"type": "monomial", "degree": 3}])
def test_dead_neuron_with_constant_output(activation):
    """Neuron 1 has zero incoming weights: it may only map to itself with a factor fixing sigma(2)."""
    layers = [dense([[1, 1], [0, 0]], [0, 2], activation), dense([[1, 5]], None, None)]
    cert, model = make(layers, [(SWAP, ONE)], [[[[1, 0], [0, 1]]]])
    assert check_certificate(cert, model).accepted is True
    cert["latent_actions"][0][0][1][1] = 2
    report = check_certificate(cert, model)
    assert report.accepted is False
    assert any("layer 1, generator 1: neuron 2" in r for r in report.reasons)


def test_singular_generator_rejected():
    """[[1, 0], [0, 0]] is idempotent: its closure {I, P} is finite, but it is not a group element."""
    cert, model = make([dense([[1, 0]], None, None)], [([[1, 0], [0, 0]], ONE)], [])
    report = check_certificate(cert, model)
    assert report.accepted is False and any("singular" in r for r in report.reasons)
