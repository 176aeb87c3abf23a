"""jacobian-rank certificates of the ReLU local answer (issue 21): symeq.fibre.decide writes the sample points
of symeq.relu.fdim's exact functional dimension; symeq check re-checks exactly that no hidden pre-activation is
0 at a certified point, recomputes the rows (slopes from the exact signs) and the positive rescalings' tangent
with the standard library, and eliminates."""

from __future__ import annotations

import copy
import json
import random

import pytest

import symeq_check as check
from symeq_check.identifiability.rank import _jac_rows
from symeq_check.model import _model
from symeq.activations import relu
from symeq.fibre.decide import relu_local_identifiability
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model


def _small():
    return Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 1]], [1, -1, 2], relu()), DenseLayer([[1, -1, 2]], [0], None)])


def _deep(seed=1):
    rng = random.Random(seed)
    W1 = [[rng.randint(-5, 5) for _ in range(3)] for _ in range(5)]
    W2 = [[rng.randint(-5, 5) for _ in range(5)] for _ in range(4)]
    W3 = [[rng.randint(-5, 5) for _ in range(4)] for _ in range(2)]
    return Model(3, [DenseLayer(W1, [rng.randint(-3, 3) for _ in range(5)], relu()),
                     DenseLayer(W2, [rng.randint(-3, 3) for _ in range(4)], relu()), DenseLayer(W3, [1, 0], None)])


def _json(x):
    return json.loads(json.dumps(x))


@pytest.fixture(scope="module", params=["small", "deep"])
def relu_cert(request):
    m = _small() if request.param == "small" else _deep()
    r = relu_local_identifiability(m)
    assert r.status == "locally-identifiable" and r.certificate is not None, r.reason
    return m, r, _json(r.certificate), _json(model_to_json(m))


def test_relu_certificate_accepted(relu_cert):
    _, r, cert, model = relu_cert
    assert cert["rank"] == r.fdim.rank == r.fdim.params - r.fdim.orbit_dim
    rep = check.check_certificate(cert, model)
    assert rep.accepted is True, rep.reasons
    assert any(f"dimension {r.fdim.orbit_dim}" in c for c in rep.checks)


@pytest.mark.parametrize("key,change", [
    ("rank", lambda c: c["rank"] - 1),
    ("rank", lambda c: c["rank"] + 1),
    ("rows", lambda c: c["rows"][:c["rank"] - 1]),
    ("orbit_dimension", lambda c: c["orbit_dimension"] + 1),
    ("parameters", lambda c: c["parameters"] - 1),
    ("layers_sha256", lambda c: "0" * 64),
    ("points", lambda c: [c["points"][0]] * len(c["points"])),
])
def test_relu_certificate_tampering_is_rejected(relu_cert, key, change):
    _, _, cert, model = relu_cert
    bad = copy.deepcopy(cert)
    bad[key] = change(cert)
    rep = check.check_certificate(bad, model)
    assert rep.accepted is False, (key, rep.checks)


def test_a_point_on_a_bent_hyperplane_is_rejected():
    """x = (-1, 0): neuron 1's pre-activation x1 + 2 x2 + 1 is 0 there, where the Jacobian does not exist."""
    m = _small()
    cert, model = _json(relu_local_identifiability(m).certificate), _json(model_to_json(m))
    bad = copy.deepcopy(cert)
    bad["points"][0] = ["-1", "0"]
    rep = check.check_certificate(bad, model)
    assert rep.accepted is False and any("pre-activation 1 of layer 1 is 0" in x for x in rep.reasons)


def test_changed_weight_is_a_mismatch(relu_cert):
    _, _, cert, model = relu_cert
    bad = copy.deepcopy(model)
    bad["layers"][0]["weight"][0][0] = str(int(bad["layers"][0]["weight"][0][0]) + 7)
    rep = check.check_certificate(cert, bad)
    assert rep.accepted is False and rep.mismatch


def test_no_certificate_when_the_rank_falls_short():
    # without biases (issue 25: the declared parameter space, which the checker counts too) a certificate is written
    m = Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 1]], None, relu()), DenseLayer([[1, -1, 2]], None, None)])
    r = relu_local_identifiability(m)
    assert r.certificate is not None and r.certificate["bias"] is False and r.certificate["parameters"] == 9
    # two clones: the rank falls short (the split of their outgoing weights), "unknown" and no certificate
    c = Model(2, [DenseLayer([[1, 2], [1, 2], [-2, 1]], [1, 1, 2], relu()), DenseLayer([[1, -1, 2]], [0], None)])
    r = relu_local_identifiability(c)
    assert r.status == "unknown" and r.certificate is None


def test_cli_fibre_writes_a_relu_certificate_that_symeq_check_accepts(tmp_path, capsys):
    from symeq.cli import main
    from symeq.io import save_model

    path, cert = tmp_path / "relu.json", tmp_path / "c.json"
    save_model(_small(), path)
    main(["fibre", str(path), "--json", "--certificate", str(cert)])
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "locally-identifiable"
    assert main(["check", str(cert), str(path)]) == 0


def test_leaky_relu_certificate_accepted_and_bound_to_the_slope():
    from symeq.activations import real

    def model(slope):
        act = real("leaky_relu", slope=slope)
        return Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 1]], [1, -1, 2], act), DenseLayer([[1, -1, 2]], [0], None)])

    m = model("1/5")
    r = relu_local_identifiability(m)
    assert r.status == "locally-identifiable" and r.certificate is not None, r.reason
    cert, doc = _json(r.certificate), _json(model_to_json(m))
    rep = check.check_certificate(cert, doc)
    assert rep.accepted is True, rep.reasons
    other = _json(model_to_json(model("1/3")))  # another slope: another theta
    rep = check.check_certificate(cert, other)
    assert rep.accepted is False and rep.mismatch


def test_checker_rows_equal_fdims_jacobian_leaky_two_hidden_layers():
    """The checker's stdlib rows (slopes from exact signs) equal symeq.relu.fdim's Jacobian mod its prime."""
    from fractions import Fraction

    from symeq.activations import real
    from symeq.relu import fdim

    act = real("leaky_relu", slope="1/5")
    rng = random.Random(3)
    m = Model(3, [DenseLayer([[rng.randint(-4, 4) for _ in range(3)] for _ in range(4)], [1, -1, 2, 0], act),
                  DenseLayer([[rng.randint(-4, 4) for _ in range(4)] for _ in range(3)], [1, 0, 2], act),
                  DenseLayer([[rng.randint(-4, 4) for _ in range(3)] for _ in range(2)], [0, 1], None)])
    layers = fdim.network_slopes(m)
    p = fdim.PRIMES[0]
    fdim._mod_all(layers, [], p)
    X = fdim._random_points(3, 4, random.Random(0))
    signs, bad = fdim._exact_forward(layers, X)
    assert not bad
    J = fdim._jacobian_mod(layers, X, signs, p)
    _, cl, _ = _model(_json(model_to_json(m)))
    rows = [r for x in X for r in _jac_rows(cl, True, [Fraction(int(v.p), int(v.q)) for v in x], [0, 1], p)]
    assert [list(map(int, r)) for r in J] == rows
