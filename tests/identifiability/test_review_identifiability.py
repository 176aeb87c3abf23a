"""Review of the identifiability decisions: regressions for flaws found (docs/identifiability.md)."""

import json

import symeq_check as check
from symeq.activations import monomial
from symeq.fibre.jacobian import jacobian_identifiability
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model


def test_hidden_rotation_with_singular_cayley_point_is_decided():
    # sigma = t^2, outgoing columns 4 and -1: mu = (1, -1/4), so I - A/2 is singular and R(1) does not
    # exist (this raised ZeroDivisionError before); the hyperbolic rotation family is still a curve in the
    # fibre (4 u1^2 - u2^2 is kept), checked exactly at t = 2
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [0, 0], monomial(2)), DenseLayer([[4, -1]], [0], None)])
    r = jacobian_identifiability(m)
    assert r.status == "not-identifiable"
    assert any(f["kind"] == "rotation" and f["dimension"] > 0 for f in r.families)
    rep = check.check_certificate(json.loads(json.dumps(r.certificate)), json.loads(json.dumps(model_to_json(m))))
    assert rep.accepted is True
