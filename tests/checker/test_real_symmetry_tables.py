"""The real activations' identity table exists twice, on purpose (issue 26): symeq's copy
(``symeq.activations.REAL_SYMMETRIES``) and the checker's own (``symeq_check.real.REAL_SYMMETRY_TABLE``).
Both are read-only; they are equal; the checker re-proves its rows at rational points with its own
interval arithmetic (``python -m symeq_check --self-test``), symeq's rows are re-proved here with arb
balls; and a wrong row (``"gelu": ((1, 0, 1, 0), (-1, 0, -1, 0))``, gelu(-t) = -gelu(t), false) injected
into either copy is caught.  A forged certificate that relies on that row is rejected by the checker."""
from __future__ import annotations

import copy
import subprocess
import sys
from types import MappingProxyType

import pytest
from flint import arb, fmpq

import symeq.activations as symeq_activations
import symeq_check.real as checker_real
from symeq.activations import real
from symeq.digest import layers_digest
from symeq.groups import global_sign
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model
from symeq.theorem import verify
from symeq_check import check_certificate
from symeq_check.selftest import self_test

WRONG_ROW = ((1, 0, 1, 0), (-1, 0, -1, 0))
POINTS = [fmpq(p, q) for p, q in ((-3, 1), (-1, 3), (1, 5), (1, 2), (5, 2))]


def _tables_equal() -> bool:
    return dict(symeq_activations.REAL_SYMMETRIES) == dict(checker_real.REAL_SYMMETRY_TABLE)


def _prover_identity_failures(table) -> list[str]:
    """symeq's own check of its table: every row at rational points with arb balls (python-flint), the
    positive family at a few scalings.  Independent of the checker's intervals."""
    failures = []
    for name, rows in table.items():
        act = real(name)
        rows = [(a, 0, a, 0) for a in (fmpq(1, 3), fmpq(2))] if rows == "positive" else rows
        for alpha, beta, q, c in rows:
            for t in POINTS:
                lhs = act.ball(arb(fmpq(alpha) * t + fmpq(beta)))
                rhs = arb(fmpq(q)) * act.ball(arb(t)) + arb(fmpq(c))
                if not lhs.overlaps(rhs):
                    failures.append(f"{name}: {(alpha, beta, q, c)} at t = {t}")
    return failures


def test_the_two_tables_are_equal_and_read_only():
    assert _tables_equal()
    assert symeq_activations.REAL_SYMMETRIES is not checker_real.REAL_SYMMETRY_TABLE
    for table in (symeq_activations.REAL_SYMMETRIES, checker_real.REAL_SYMMETRY_TABLE):
        assert isinstance(table, MappingProxyType)
        with pytest.raises(TypeError):
            table["gelu"] = WRONG_ROW
        assert all(isinstance(rows, (tuple, str)) for rows in table.values())


def test_the_checker_self_test_passes_on_its_own_table():
    failures, tested = self_test()
    assert failures == [] and tested >= 100
    out = subprocess.run([sys.executable, "-m", "symeq_check", "--self-test"], capture_output=True, text=True)
    assert out.returncode == 0 and "0 failed" in out.stdout, out.stdout + out.stderr


def test_the_provers_identity_check_passes_on_its_own_table():
    assert _prover_identity_failures(symeq_activations.REAL_SYMMETRIES) == []


def test_a_wrong_row_in_the_checkers_copy_is_caught(monkeypatch):
    bad = dict(checker_real.REAL_SYMMETRY_TABLE, gelu=WRONG_ROW)
    monkeypatch.setattr(checker_real, "REAL_SYMMETRY_TABLE", MappingProxyType(bad))
    failures, _ = self_test()
    assert failures and all(f.startswith("gelu") for f in failures)
    assert not _tables_equal()
    from symeq_check.selftest import main

    assert main() == 1


def test_a_wrong_row_in_symeqs_copy_is_caught(monkeypatch):
    bad = dict(symeq_activations.REAL_SYMMETRIES, gelu=WRONG_ROW)
    monkeypatch.setattr(symeq_activations, "REAL_SYMMETRIES", MappingProxyType(bad))
    assert real("gelu").symmetry_holds(-1, 0, -1)  # the prover now believes it ...
    failures = _prover_identity_failures(symeq_activations.REAL_SYMMETRIES)
    assert failures and all(f.startswith("gelu") for f in failures)  # ... and its own check refutes it
    assert not _tables_equal()
    assert self_test()[0] == []  # the checker's copy is untouched


def _forged_gelu_certificate():
    """A one-neuron GELU network with the sign flip on input and output (not equivariant: gelu(-t) =
    gelu(t) - t), and the certificate of the same tanh network (latent action -1, true for tanh) with
    its parameters replaced by the GELU network's: the forgery the wrong row would let through."""
    def model(act):
        return Model(1, [DenseLayer([[1]], [0], act), DenseLayer([[1]], [0], None)], group=global_sign(1))

    v = verify(model(real("tanh")))
    assert v.verdict == "layerwise-equivariant"
    cert = copy.deepcopy(v.certificate())
    gelu = model_to_json(model(real("gelu")))
    cert["parameters"]["layers"] = gelu["layers"]
    cert["parameters"]["layers_sha256"] = layers_digest(gelu["layers"], 1)
    return cert, gelu


def test_a_forged_certificate_needs_the_wrong_row_and_the_self_test_refuses_that_row(monkeypatch):
    cert, gelu = _forged_gelu_certificate()
    honest = check_certificate(cert, gelu)
    assert honest.accepted is False and any("layer 1" in r for r in honest.reasons), honest.reasons
    assert verify(Model(1, [DenseLayer([[1]], [0], real("gelu")), DenseLayer([[1]], [0], None)],
                        group=global_sign(1))).verdict == "not-equivariant"
    bad = dict(checker_real.REAL_SYMMETRY_TABLE, gelu=WRONG_ROW)
    monkeypatch.setattr(checker_real, "REAL_SYMMETRY_TABLE", MappingProxyType(bad))
    assert check_certificate(cert, gelu).accepted is True  # one wrong axiom fools the checker ...
    assert self_test()[0]  # ... and its self-test says which
