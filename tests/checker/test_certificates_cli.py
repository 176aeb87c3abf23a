"""Certificates (round trip, tampering) and the command line (exit codes, one-line errors)."""

import copy
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symeq.activations import monomial, relu, tanh_series
from symeq_check import check_certificate
from symeq.cli import main
from symeq.groups import builtin_group
from symeq.io import model_to_json
from symeq.models import random_equivariant_model, scramble
from symeq.theorem import verify

CASES = [("mirror:2x2", tanh_series(3)), ("shift:3", monomial(3)), ("sign:2", tanh_series(5)), ("mirror:1x2", relu())]


def _verified(seed, case, dense=False):
    gspec, act = CASES[case]
    m = random_equivariant_model(builtin_group(gspec), ["regular*2"], act, rng=seed)
    m, _ = scramble(m, rng=seed + 1)
    v = verify(m)
    assert v.verdict == "layerwise-equivariant"
    return m, v.certificate(dense=dense)  # dense: the older symeq-certificate/1, still checked


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(0, len(CASES) - 1))
def test_certificate_round_trip(seed, case):
    m, cert = _verified(seed, case)
    text = json.dumps(cert)
    assert check_certificate(json.loads(text), json.loads(json.dumps(model_to_json(m)))).accepted


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(0, len(CASES) - 1), st.data())
def test_tampered_latent_entry_is_rejected(seed, case, data):
    m, cert = _verified(seed, case, dense=True)
    bad = copy.deepcopy(cert)
    M = bad["latent_actions"][0][0]
    i = data.draw(st.integers(0, len(M) - 1))
    j = data.draw(st.integers(0, len(M) - 1))
    delta = data.draw(st.sampled_from(["1", "-1", "1/2", "3"]))
    from fractions import Fraction

    M[i][j] = str(Fraction(M[i][j]) + Fraction(delta))
    assert check_certificate(bad, model_to_json(m)).accepted is False


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.integers(0, len(CASES) - 1), st.data())
def test_tampered_weight_is_rejected(seed, case, data):
    """A changed weight, in the certificate or in the model file, is rejected."""
    m, cert = _verified(seed, case)
    from fractions import Fraction

    where = data.draw(st.sampled_from(["certificate", "model"]))
    model_json = model_to_json(m)
    target = cert["parameters"] if where == "certificate" else model_json
    layer = data.draw(st.integers(0, len(target["layers"]) - 1))
    W = target["layers"][layer]["weight"]
    i = data.draw(st.integers(0, len(W) - 1))
    j = data.draw(st.integers(0, len(W[0]) - 1))
    W[i][j] = str(Fraction(W[i][j]) + 1)
    assert check_certificate(cert, model_json).accepted is False


def test_non_monomial_action_is_rejected():
    m, cert = _verified(3, 0, dense=True)
    bad = copy.deepcopy(cert)
    M = bad["latent_actions"][0][0]
    row = M[0]
    k = next(j for j, x in enumerate(row) if x != "0")
    row[(k + 1) % len(row)] = "1"  # a second nonzero entry in row 0
    r = check_certificate(bad, model_to_json(m))
    assert r.accepted is False and any("monomial" in x for x in r.reasons)


# -- command line ----------------------------------------------------------------------------

def test_verify_builtin_example(capsys):
    assert main(["verify"]) == 0
    out = capsys.readouterr().out
    assert "rho_1(mirror)" in out and "Verdict: layerwise-equivariant" in out


def test_verify_json_and_certificate(tmp_path, capsys):
    cert = tmp_path / "cert.json"
    model = tmp_path / "model.json"
    assert main(["example", "--out", str(model)]) == 0
    assert main(["verify", str(model), "--json", "--certificate", str(cert)]) == 0
    data = json.loads(capsys.readouterr().out)  # stdout is clean JSON
    assert data["verdict"] == "layerwise-equivariant"
    assert main(["check", str(cert), str(model)]) == 0
    # tamper with the file on disk: rejected, exit 1
    c = json.loads(cert.read_text())
    c["latent_actions"][1][0]["factor"][0] = "7"  # a sparse (symeq-certificate/2) action
    cert.write_text(json.dumps(c))
    assert main(["check", str(cert), str(model)]) == 1


def test_not_equivariant_exit_1(tmp_path, capsys):
    model = tmp_path / "m.json"
    data = model_to_json(random_equivariant_model(builtin_group("mirror:2x2"), ["regular"], tanh_series(3), rng=1))
    data["layers"][0]["weight"][0][0] = "123/7"
    model.write_text(json.dumps(data))
    cert = tmp_path / "c.json"
    assert main(["verify", str(model), "--certificate", str(cert)]) == 1
    assert "witness" in capsys.readouterr().out
    assert main(["check", str(cert), str(model)]) == 0  # the witness really fails


def _good_model():
    return model_to_json(random_equivariant_model(builtin_group("mirror:2x2"), ["regular"], tanh_series(3), rng=2))


def _bad_inputs():
    m = _good_model()
    shape = copy.deepcopy(m)
    for row in shape["layers"][1]["weight"]:
        row.append("1")
    flt = copy.deepcopy(m)
    flt["layers"][0]["weight"][0][0] = 0.5
    act = copy.deepcopy(m)
    act["layers"][0]["activation"] = {"type": "softmax"}
    notaction = copy.deepcopy(m)
    # input: the mirror (order 2); output: a 4-cycle (order 4) - not an action
    notaction["group"]["generators"][0]["output"] = [["0", "1", "0", "0"], ["0", "0", "1", "0"],
                                                     ["0", "0", "0", "1"], ["1", "0", "0", "0"]]
    groupdim = copy.deepcopy(m)
    groupdim["group"]["generators"][0]["input"] = [["1"]]
    nolayers = copy.deepcopy(m)
    nolayers["layers"] = []
    return {
        "malformed JSON": ("{not json", "malformed JSON"),
        "wrong shape": (json.dumps(shape), "expected"),
        "float": (json.dumps(flt), "float"),
        "unknown activation": (json.dumps(act), "unknown activation"),
        "not an action": (json.dumps(notaction), "does not respect a relation"),
        "group dimension": (json.dumps(groupdim), "group acts on inputs of size 1"),
        "no layers": (json.dumps(nolayers), "non-empty list of layers"),
    }


@pytest.mark.parametrize("case", list(_bad_inputs()))
def test_bad_input_exit_2_one_line(case, tmp_path, capsys):
    text, needle = _bad_inputs()[case]
    f = tmp_path / "bad.json"
    f.write_text(text)
    assert main(["verify", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and needle in err[-1], err
    assert not any("Traceback" in line for line in err)


def test_missing_file_and_bad_group(capsys):
    assert main(["verify", "/nonexistent/model.json"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["verify", "--group", "mirror:2"]) == 2
    assert main(["verify", "--group", "sign:5"]) == 2  # the built-in example takes 6 inputs
    assert "size" in capsys.readouterr().err


def test_timeout_exit_3(capsys):
    assert main(["verify", "--timeout", "0"]) == 3
    assert "time budget" in capsys.readouterr().err


def test_console_script_runs():
    """The installed entry point (python -m symeq) works end to end, as a user runs it."""
    r = subprocess.run([sys.executable, "-m", "symeq", "verify"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Verdict: layerwise-equivariant" in r.stdout
    r = subprocess.run([sys.executable, "-m", "symeq", "verify", "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2


def test_generate_then_verify(tmp_path):
    out = tmp_path / "g.json"
    assert main(["generate", "--group", "shift:4", "--activation", "monomial:3", "--latent", "regular",
                 "--scramble", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0
