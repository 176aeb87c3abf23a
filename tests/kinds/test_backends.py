"""Every layer kind x number backend (symeq/backends.py): the kind's one forward pass and Jacobian
(``layer.jacobian_program(backend, bias)``) agree across exact (fmpq), float64, modular (2^61 - 1 and a
prime below 2^31) and torch at rational points.

The kinds come from the registry (those declaring ``jacobian-rank``), the instances from
tests/kinds/kind_instances.py.  Exact is the reference: its forward equals the kind's own exact
``forward`` (fmpq_mat), the modular forward and Jacobian are the exact ones reduced mod p entry by entry,
the float64 and torch ones are within 1e-9 of the exact ones; the exact Jacobian matches central
differences of the exact forward (a polynomial in each parameter: the difference quotient at step h is
the derivative plus O(h^2), checked to 1e-6).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from flint import fmpq

from kind_instances import BUILDERS, JACOBIAN_VARIANTS, rational_points, registered_kinds, supports
from symeq.backends import MERSENNE61, Exact, Float64, Modular, NotPolynomial, reverse_jacobian

KINDS = [k for k in registered_kinds() if k in BUILDERS]
SMALL_PRIME = 2147483647


def _models(kind):
    """The instances of the kind whose every layer has a polynomial program (the rank method's models)."""
    out = []
    for variant, model, _ in BUILDERS[kind].models(3):
        if not all(supports(l, "jacobian-rank") for l in model.layers):
            continue
        try:
            [l.jacobian_program(Exact(), True) for l in model.layers]
        except NotPolynomial:
            continue
        out.append((variant, model))
    return out


def _programs(model, bk):
    from symeq.layers.base import declared_biases

    return [l.jacobian_program(bk, b) for l, b in zip(model.layers, declared_biases(model))]


def _points(model, n=3, seed=4):
    rng = random.Random(seed)
    return [[fmpq(rng.randint(-3, 3), rng.choice((1, 2, 3))) for _ in range(model.input_dim)] for _ in range(n)]


def _run(model, bk, pts):
    progs = _programs(model, bk)
    X = bk.permute(bk.asarray(pts, (len(pts), model.input_dim)), (1, 0))
    keep: dict = {}
    J = reverse_jacobian(progs, X, bk, keep=keep)
    return keep["output"], J


def _reduce(A, p):
    bk = Modular(p)
    return np.array([bk.scalar(x) for x in A.ravel()], dtype=np.int64).reshape(A.shape)


def _floats(A):
    return np.array([float(x) for x in np.asarray(A).ravel()]).reshape(np.asarray(A).shape)


def _kind_cases(kind):
    models = _models(kind)
    if not models:
        pytest.skip(f"{kind} layers have no polynomial Jacobian program (jacobian-rank not declared or not polynomial)")
    return models


@pytest.mark.parametrize("kind", KINDS)
def test_exact_program_is_the_kinds_forward(kind):
    from flint import fmpq_mat

    for variant, model in _kind_cases(kind):
        pts = _points(model)
        Y, _ = _run(model, Exact(), pts)
        X = fmpq_mat(model.input_dim, len(pts), [pts[j][i] for i in range(model.input_dim) for j in range(len(pts))])
        ref = model.forward(X)
        assert [[Y[i, j] for j in range(len(pts))] for i in range(Y.shape[0])] == \
            [[ref[i, j] for j in range(len(pts))] for i in range(ref.nrows())], (kind, variant)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", [MERSENNE61, SMALL_PRIME])
def test_modular_program_is_the_exact_one_mod_p(kind, p):
    for variant, model in _kind_cases(kind):
        pts = _points(model)
        Ye, Je = _run(model, Exact(), pts)
        Ym, Jm = _run(model, Modular(p), pts)
        assert (Ym.astype(np.int64) == _reduce(Ye, p)).all(), (kind, variant, "forward")
        assert (Jm.astype(np.int64) == _reduce(Je, p)).all(), (kind, variant, "jacobian")
        assert Je.shape[1] == sum(c for c in (pr.n_params for pr in _programs(model, Exact())))


@pytest.mark.parametrize("kind", KINDS)
def test_float_program_is_the_exact_one(kind):
    for variant, model in _kind_cases(kind):
        pts = _points(model)
        Ye, Je = _run(model, Exact(), pts)
        Yf, Jf = _run(model, Float64(), pts)
        for a, b in ((Yf, Ye), (Jf, Je)):
            b = _floats(b)
            assert np.max(np.abs(a - b) / (1 + np.abs(b)), initial=0.0) <= 1e-9, (kind, variant)


@pytest.mark.parametrize("kind", KINDS)
def test_torch_program_is_the_float_one(kind):
    pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]'")
    from symeq.backends import Torch

    for variant, model in _kind_cases(kind):
        pts = _points(model)
        Yf, Jf = _run(model, Float64(), pts)
        bk = Torch()
        Yt, Jt = _run(model, bk, pts)
        assert np.allclose(bk.to_numpy(Yt), Yf, rtol=1e-12, atol=1e-12), (kind, variant)
        assert np.allclose(bk.to_numpy(Jt), Jf, rtol=1e-12, atol=1e-12), (kind, variant)


@pytest.mark.parametrize("kind", KINDS)
def test_exact_jacobian_against_central_differences(kind):
    """Each parameter moved by +-h in the program's own values (rebuilt by the kind's builder), on the
    variants whose builder can set every parameter (JACOBIAN_VARIANTS)."""
    h = fmpq(1, 1 << 20)
    wanted = JACOBIAN_VARIANTS.get(kind)
    for variant, model in [(v, m) for v, m in _kind_cases(kind) if wanted is None or v in wanted][:1]:
        pts = _points(model, n=2)
        _, J = _run(model, Exact(), pts)
        progs = _programs(model, Exact())
        col = 0
        for li, prog in enumerate(progs):
            setter = BUILDERS[model.layers[li].kind].set_parameters
            values = [fmpq(v) for v in prog.values()]
            for k in range(len(values)):
                outs = []
                for s in (1, -1):
                    v = list(values)
                    v[k] += s * h
                    layers = list(model.layers)
                    layers[li] = setter(model.layers[li], v, prog.bias)
                    m2 = type(model)(model.input_dim, layers, None, model.name)
                    outs.append(_run(m2, Float64(), pts)[0])
                fd = ((outs[0] - outs[1]) / (2 * float(h))).T.reshape(-1)  # point-major, outputs per point
                col_exact = _floats(J[:, col + k])
                assert np.max(np.abs(fd - col_exact)) <= 1e-6 * (1 + np.max(np.abs(col_exact))), (kind, li, k)
            col += len(values)
        assert col == J.shape[1]


def test_a_wrong_backend_product_fails_the_parity(monkeypatch):
    """A modular product off by one in one entry is caught against the exact program."""
    good = Modular.matmul

    def wrong(self, a, b):
        out = good(self, a, b)
        out = out.copy()
        out.flat[0] = (int(out.flat[0]) + 1) % self.p
        return out

    monkeypatch.setattr(Modular, "matmul", wrong)
    with pytest.raises(AssertionError):
        test_modular_program_is_the_exact_one_mod_p("dense", MERSENNE61)


def test_modular_backend_refuses_what_it_cannot_reduce():
    from symeq.backends import Denominator

    with pytest.raises(Denominator):
        Modular(SMALL_PRIME).scalar(fmpq(1, SMALL_PRIME))
    with pytest.raises(ValueError, match="2\\^61 - 1 or a prime below 2\\^31"):
        Modular(1 << 40)
    assert rational_points(2, 1, 0).nrows() == 2
