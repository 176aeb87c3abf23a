"""jacobian-rank certificates of native conv2d models (issue 21): symeq/fibre/jacobian.py writes them, and
symeq_check/ re-reads the conv layers from the model file, recomputes the certified Jacobian rows mod p
with the standard library and eliminates them.  Tampering with any field is caught."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest

import symeq_check as check
from symeq_check.identifiability import rank
from symeq_check.conv import _Conv
from symeq_check.digest import _layers_digest
from symeq_check.identifiability.rank import JACOBIAN_PRIME, _jac_rows
from symeq_check.model import _model
from symeq.activations import monomial, tanh_series
from symeq.fibre import jacobian as jm
from symeq.io import model_to_json
from symeq.layers.conv import ConvLayer, ConvShape
from symeq.models import DenseLayer, Model


def _kernel(rng, co, ci, kh, kw):
    return [[[[rng.randint(-3, 3) for _ in range(kw)] for _ in range(kh)] for _ in range(ci)] for _ in range(co)]


def _deep_conv(seed=4):
    """conv (2 -> 2 channels, 5x5, stride 2, circular padding) -> conv (zero padding) -> dense readout."""
    rng = random.Random(seed)
    c1 = ConvLayer(ConvShape(2, 2, 5, 5, 3, 3, stride=2, padding=1, padding_mode="circular"),
                   _kernel(rng, 2, 2, 3, 3), [1, -1], tanh_series(3))
    c2 = ConvLayer(ConvShape(2, 2, 3, 3, 2, 2, padding=1), _kernel(rng, 2, 2, 2, 2), [2, 1], tanh_series(3))
    n = c2.out_dim
    dense = DenseLayer([[rng.randint(-3, 3) for _ in range(n)] for _ in range(2)], [1, 0], None)
    return Model(50, [c1, c2, dense])


def _conv_without_bias(seed=6):
    """conv -> conv (1x1 kernels) -> dense, every bias zero: the certificate's bias-free parameter order."""
    rng = random.Random(seed)
    c1 = ConvLayer(ConvShape(1, 2, 4, 4, 3, 3), _kernel(rng, 2, 1, 3, 3), None, tanh_series(3))
    c2 = ConvLayer(ConvShape(2, 3, 2, 2, 1, 1), _kernel(rng, 3, 2, 1, 1), None, tanh_series(3))
    out = DenseLayer([[rng.randint(-3, 3) for _ in range(c2.out_dim)] for _ in range(2)], None, None)
    return Model(16, [c1, c2, out])


def _json(x):
    return json.loads(json.dumps(x))


@pytest.fixture(scope="module", params=["deep", "no-bias"])
def conv_cert(request):
    m = _deep_conv() if request.param == "deep" else _conv_without_bias()
    r = jm.jacobian_identifiability(m)
    assert r.status == "locally-identifiable" and r.certificate is not None, r.reason
    return m, r, _json(r.certificate), _json(model_to_json(m))


def test_conv_certificate_accepted(conv_cert):
    m, r, cert, model = conv_cert
    layout = sum(c for _, _, c in jm.parameter_layout(m, cert["bias"]))
    assert cert["method"] == "jacobian-rank" and cert["parameters"] == r.n_params == layout
    rep = check.check_certificate(cert, model)
    assert rep.accepted is True, rep.reasons
    assert any(f"rank {r.rank}" in c for c in rep.checks)


def test_bias_free_conv_certificate():
    m = _conv_without_bias()
    r = jm.jacobian_identifiability(m)
    assert r.certificate["bias"] is False and r.n_params == 2 * 9 + 3 * 2 + 2 * 12


def test_checker_rows_equal_the_producers_jacobian():
    """The checker's own stdlib reading of the conv layers (_Conv.sources) gives the producer's rows."""
    m = _deep_conv()
    _, layers, _ = _model(_json(model_to_json(m)))
    geometry = [l.sources() if isinstance(l, _Conv) else None for l in layers]
    pts = jm._points(m.input_dim, 3, 7)
    J = jm._jacobian(jm._twins(m, True), jm._points_mod(pts), jm.Deadline(None))
    K = m.layers[-1].out_dim
    for n, pt in enumerate(pts):
        rows = _jac_rows(layers, True, pt, list(range(K)), JACOBIAN_PRIME, geometry)
        assert rows == [[int(v) for v in J[n * K + k]] for k in range(K)]


def test_checker_conv_rows_equal_its_dense_rows_with_shared_weights():
    """Independently of the producer: the checker's conv rows are sums of its dense-expansion rows."""
    rng = random.Random(1)
    conv = ConvLayer(ConvShape(1, 2, 4, 4, 3, 3, padding=1), _kernel(rng, 2, 1, 3, 3), [1, -2], tanh_series(3))
    dense = DenseLayer([[rng.randint(-3, 3) for _ in range(32)] for _ in range(2)], [1, 0], None)
    m = Model(16, [conv, dense])
    dm = Model(16, [DenseLayer(conv.weight, conv.bias, conv.activation), dense])
    _, cl, _ = _model(_json(model_to_json(m)))
    _, dl, _ = _model(_json(model_to_json(dm)))
    geometry = [l.sources() if isinstance(l, _Conv) else None for l in cl]
    p, src = JACOBIAN_PRIME, geometry[0]
    pt = jm._points(16, 1, 3)[0]
    for k in range(2):
        rc = _jac_rows(cl, True, pt, [k], p, geometry)[0]
        rd = _jac_rows(dl, True, pt, [k], p)[0]
        for o in range(2):
            for t in range(9):
                want = sum(rd[(o * 16 + q) * 16 + s] for q, s in enumerate(src[t]) if s >= 0) % p
                assert rc[o * 9 + t] == want
            assert rc[18 + o] == sum(rd[32 * 16 + o * 16 + q] for q in range(16)) % p
        assert rc[20:] == rd[32 * 16 + 32:]


def _bump_kernel(model):
    model["layers"][0]["kernel"][0][0][0][0] = str(int(model["layers"][0]["kernel"][0][0][0][0]) + 1)
    return model


@pytest.mark.parametrize("key,change", [
    ("rank", lambda c: c["rank"] - 1),
    ("rank", lambda c: c["rank"] + 1),
    ("rows", lambda c: c["rows"][:c["rank"] - 1]),
    ("rows", lambda c: c["rows"][:-1] + [c["rows"][0]]),
    ("orbit_dimension", lambda c: c["orbit_dimension"] + 1),
    ("parameters", lambda c: c["parameters"] - 1),
    ("widths", lambda c: c["widths"][:-1] + [c["widths"][-1] + 1]),
    ("bias", lambda c: not c["bias"]),
    ("prime", lambda c: "1073741789"),
    ("layers_sha256", lambda c: "0" * 64),
])
def test_conv_certificate_tampering_is_rejected(conv_cert, key, change):
    _, _, cert, model = conv_cert
    bad = copy.deepcopy(cert)
    bad[key] = change(cert)
    rep = check.check_certificate(bad, model)
    assert rep.accepted is False, (key, rep.checks)


def test_conv_certificate_of_a_changed_kernel_is_a_mismatch(conv_cert):
    _, _, cert, model = conv_cert
    rep = check.check_certificate(cert, _bump_kernel(copy.deepcopy(model)))
    assert rep.accepted is False and rep.mismatch


def test_conv_geometry_change_is_a_mismatch():
    """The stride, padding and padding mode are read from the model file: another geometry is another theta."""
    m = _deep_conv()
    cert, model = _json(jm.jacobian_identifiability(m).certificate), _json(model_to_json(m))
    assert model["layers"][0]["padding_mode"] == "circular"
    bad = copy.deepcopy(model)
    bad["layers"][0]["padding_mode"] = "zeros"
    rep = check.check_certificate(cert, bad)
    assert rep.accepted is False and rep.mismatch


def test_rows_at_one_point_fall_short_of_the_rank(conv_cert):
    """Every point replaced by the first: the recomputed rows have rank <= #outputs, and the checker rejects."""
    _, r, cert, model = conv_cert
    bad = copy.deepcopy(cert)
    bad["points"] = [cert["points"][0]] * len(cert["points"])
    rep = check.check_certificate(bad, model)
    assert rep.accepted is False and any(f"not {r.rank}" in x for x in rep.reasons)


def test_conv_row_work_limit_says_so(conv_cert, monkeypatch):
    _, _, cert, model = conv_cert
    monkeypatch.setattr(rank, "MAX_JACOBIAN_ROW_WORK", 10)
    rep = check.check_certificate(cert, model)
    assert rep.accepted is None and any("MAX_JACOBIAN_ROW_WORK" in x for x in rep.reasons)


def test_continuous_scaling_next_to_a_conv_layer_is_not_covered():
    """The producer computes no orbit tangent next to a convolution: it writes no certificate, and the checker
    refuses one that claims it (the tangent would not be recomputed), never accepts it."""
    rng = random.Random(2)
    k = _kernel(rng, 2, 1, 3, 3)
    W = [[rng.randint(-3, 3) for _ in range(8)] for _ in range(2)]

    def model(act):
        return Model(16, [ConvLayer(ConvShape(1, 2, 4, 4, 3, 3), k, [1, -2], act), DenseLayer(W, [0, 1], None)])

    r = jm.jacobian_identifiability(model(monomial(2)))
    assert r.status == "not-applicable" and r.certificate is None
    # the certificate of the tanh twin, moved onto the monomial model with its digest
    cert = _json(jm.jacobian_identifiability(model(tanh_series(3))).certificate)
    target = _json(model_to_json(model(monomial(2))))
    cert["layers_sha256"] = _layers_digest(_model(target)[1])
    rep = check.check_certificate(cert, target)
    assert rep.accepted is False and any("convolution" in x for x in rep.reasons)


def test_cli_fibre_writes_a_conv_certificate_that_symeq_check_accepts(tmp_path, capsys):
    from symeq.cli import main
    from symeq.io import save_model

    path, cert = tmp_path / "conv.json", tmp_path / "c.json"
    save_model(_deep_conv(), path)
    main(["fibre", str(path), "--json", "--certificate", str(cert)])
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "locally-identifiable" and d["method"] == "jacobian-rank"
    assert main(["check", str(cert), str(path)]) == 0
    capsys.readouterr()
    bad = json.loads(cert.read_text())
    bad["rank"] -= 1
    cert.write_text(json.dumps(bad))
    assert main(["check", str(cert), str(path)]) == 1
