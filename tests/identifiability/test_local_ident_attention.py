"""jacobian-rank certificates of attention models (a first lightning-attention layer, then token-wise dense
layers) (issue 21): symeq check re-reads Q_h, K_h, V_h, O_h and the token-wise W, b from the model file,
recomputes the certified rows mod p by its own reverse mode, recomputes the reparametrisations' tangent
(GL(d_v), GL(d_k), the scores/values scalar, GL(d_out) into the next layer) and eliminates."""

from __future__ import annotations

import copy
import json
import random

import pytest
from flint import fmpq_mat

import symeq_check as check
from symeq_check.digest import _layers_digest
from symeq_check.identifiability.rank import JACOBIAN_PRIME, _jac_attention_tangents, _jac_count, _jac_rows, _jac_tokens
from symeq_check.model import _model
from symeq.activations import monomial, tanh_series
from symeq.fibre import jacobian as jm
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model


def _attention(T=3, d=2, dk=2, dv=1, H=2, seed=5, tail=True, act=None, bias=True):
    from symeq.layers.attention import AttentionLayer, Head, tokenwise

    rng = random.Random(seed)

    def rnd(r, c):
        return fmpq_mat(r, c, [rng.randint(-9, 9) for _ in range(r * c)])

    att = AttentionLayer(T, [Head(rnd(d, dk), rnd(d, dk), rnd(d, dv), rnd(dv, d)) for _ in range(H)])
    if not tail:
        return Model(T * d, [att])
    W1, W2 = rnd(3, d), rnd(2, 3)
    b1, b2 = ([1, -1, 2] * T, [0, 1] * T) if bias else (None, None)
    return Model(T * d, [att, DenseLayer(tokenwise(W1, T), b1, act or tanh_series(3), T),
                         DenseLayer(tokenwise(W2, T), b2, None, T)])


def _json(x):
    return json.loads(json.dumps(x))


MODELS = {"tail": lambda: _attention(), "heads only": lambda: _attention(tail=False),
          "wider, no bias": lambda: _attention(T=4, d=3, dk=2, dv=2, H=2, seed=8, bias=False)}


@pytest.fixture(scope="module", params=sorted(MODELS))
def att_cert(request):
    m = MODELS[request.param]()
    r = jm.jacobian_identifiability(m)
    assert r.status == "locally-identifiable" and r.certificate is not None, r.reason
    return m, r, _json(r.certificate), _json(model_to_json(m))


def test_attention_certificate_accepted(att_cert):
    _, r, cert, model = att_cert
    assert cert["orbit_dimension"] == r.orbit_dimension > 0
    rep = check.check_certificate(cert, model)
    assert rep.accepted is True, rep.reasons
    assert any(f"dimension {r.orbit_dimension}" in c for c in rep.checks)


def test_checker_rows_equal_the_producers_jacobian(att_cert):
    m, _, cert, model = att_cert
    _, layers, _ = _model(model)
    pts = jm._points(m.input_dim, 2, 11)
    J = jm._jacobian(jm._twins(m, cert["bias"]), jm._points_mod(pts), jm.Deadline(None))
    K = m.layers[-1].out_dim
    for n, pt in enumerate(pts):
        rows = _jac_rows(layers, cert["bias"], pt, list(range(K)), JACOBIAN_PRIME)
        assert rows == [[int(v) for v in J[n * K + k]] for k in range(K)]


def test_checker_tangent_is_in_the_kernel_and_matches_the_producers(att_cert):
    m, r, cert, model = att_cert
    _, layers, _ = _model(model)
    T = _jac_tokens(layers)
    offs, c = [], 0
    for l in layers:
        offs += [c, c + _jac_count(l, False, T)]
        c += _jac_count(l, cert["bias"], T)
    mine = _jac_attention_tangents(layers, offs)
    theirs = [v for _, v in jm.orbit_tangent(m, cert["bias"])]
    assert len(mine) == len(theirs)
    assert [{k: str(x) for k, x in a.items()} for a in mine] == [{k: str(x) for k, x in b.items()} for b in theirs]


@pytest.mark.parametrize("key,change", [
    ("rank", lambda c: c["rank"] - 1),
    ("rows", lambda c: c["rows"][:c["rank"] - 1]),
    ("orbit_dimension", lambda c: c["orbit_dimension"] - 1),
    ("parameters", lambda c: c["parameters"] + 1),
    ("widths", lambda c: [c["widths"][0] + 1] + c["widths"][1:]),
    ("bias", lambda c: not c["bias"]),
    ("layers_sha256", lambda c: "0" * 64),
    ("points", lambda c: [c["points"][0]] * len(c["points"])),
])
def test_attention_certificate_tampering_is_rejected(att_cert, key, change):
    _, _, cert, model = att_cert
    bad = copy.deepcopy(cert)
    bad[key] = change(cert)
    rep = check.check_certificate(bad, model)
    assert rep.accepted is False, (key, rep.checks)


def test_changed_query_is_a_mismatch(att_cert):
    _, _, cert, model = att_cert
    bad = copy.deepcopy(model)
    spec = bad["layers"][0]
    key = next(k for k in ("heads",) if k in spec)
    head = spec[key][0]
    qk = next(k for k in head if k.lower().startswith("q"))
    head[qk][0][0] = str(int(head[qk][0][0]) + 1)
    rep = check.check_certificate(cert, bad)
    assert rep.accepted is False and rep.mismatch


def test_continuous_scaling_in_a_token_wise_layer_is_not_covered():
    m = _attention(act=monomial(3))
    r = jm.jacobian_identifiability(m)
    assert r.status == "not-applicable" and r.certificate is None
    cert = _json(jm.jacobian_identifiability(_attention()).certificate)
    target = _json(model_to_json(m))
    cert["layers_sha256"] = _layers_digest(_model(target)[1])
    rep = check.check_certificate(cert, target)
    assert rep.accepted is False and any("token-wise layer" in x for x in rep.reasons)
