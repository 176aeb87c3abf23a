"""Certificates bind theta by a digest; a large theta is not copied into them.

A certificate always carries ``parameters.layers_sha256``, the SHA-256 of theta as the standalone
checker reads it; a copy of theta's layers only up to ``INLINE_PARAMETERS`` parameters (and always
for a re-parametrized theta').  The checker recomputes the digest from the model file it is given.
"""

import copy
import json
import sys
from pathlib import Path

from symeq_check import check_certificate, layers_digest
from symeq.examples import builtin_example
from symeq.io import model_to_json
from symeq.theorem import INLINE_PARAMETERS, verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tied_networks import d4_tied_network  # noqa: E402


def test_small_certificate_carries_theta_and_its_digest():
    m = builtin_example()
    cert = verify(m).certificate()
    mj = model_to_json(m)
    assert cert["parameters"]["layers"] == mj["layers"]
    assert cert["parameters"]["layers_sha256"] == layers_digest(mj["layers"], m.input_dim)
    assert check_certificate(cert, mj).accepted is True


def test_a_changed_digest_or_another_model_is_rejected():
    m = builtin_example()
    cert = verify(m).certificate()
    mj = model_to_json(m)
    bad = copy.deepcopy(cert)
    bad["parameters"]["layers_sha256"] = "0" * 64
    r = check_certificate(bad, mj)
    assert r.accepted is False and "digest" in r.reasons[0]
    other = copy.deepcopy(mj)
    other["layers"][0]["weight"][0][0] = "12345"
    slim = copy.deepcopy(cert)
    del slim["parameters"]["layers"]
    assert check_certificate(slim, mj).accepted is True
    r = check_certificate(slim, other)
    assert r.accepted is False and "digest" in r.reasons[0]


def test_the_digest_reads_numbers_as_the_checker_does():
    a = [{"type": "dense", "weight": [["1/2", 2]], "bias": None, "activation": None}]
    b = [{"type": "dense", "weight": [["0.5", "2"]], "bias": [0], "activation": None}]
    c = [{"type": "dense", "weight": [["1/3", 2]], "bias": None, "activation": None}]
    assert layers_digest(a, 2) == layers_digest(b, 2) != layers_digest(c, 2)


def test_a_real_size_certificate_is_small_and_accepted(tmp_path):
    """25-120-120-25 D4 network with rounded (tied) weights: theta is digested, not copied."""
    m = d4_tied_network(channels=15, seed=2)
    assert m.n_params > INLINE_PARAMETERS
    v = verify(m)
    cert = v.certificate()
    assert "layers" not in cert["parameters"]
    mj = model_to_json(m)
    assert len(json.dumps(cert)) < len(json.dumps(mj)) / 4
    assert check_certificate(cert, mj).accepted is True
    tampered = copy.deepcopy(mj)
    tampered["layers"][1]["bias"][0] = "7/3"
    assert check_certificate(cert, tampered).accepted is False
