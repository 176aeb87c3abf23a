"""The Macaulay2 engine (symeq/fibre/groebner/macaulay2.py): one module of the engine registry.

Skipped where ``M2`` is absent (install it with ``apt-get install macaulay2``); where present, its
dimension and degree must equal the sympy engine's on small fibre ideals and small ideals.
"""

import pytest
from flint import fmpq

from symeq.activations import monomial, polynomial
from symeq.cli import main
from symeq.errors import EngineFailed
from symeq.fibre import fibre_ideal, groebner
from symeq.fibre.groebner import ENGINES, available_engines, hermite_counts
from symeq.fibre.groebner.macaulay2 import MACAULAY2_INSTALL, _macaulay2_script, _parse_macaulay2
from symeq.io import save_model
from symeq.models import DenseLayer, Model

W22 = [[1, 2], [3, -1]]
FIBRES = {
    "221-t3+t2": Model(2, [DenseLayer(W22, None, polynomial([0, 0, 1, 1])), DenseLayer([[2, -1]], None, None)]),
    "221-t3": Model(2, [DenseLayer(W22, None, monomial(3)), DenseLayer([[2, -1]], None, None)]),
    "221-t2": Model(2, [DenseLayer(W22, None, monomial(2)), DenseLayer([[2, -1]], None, None)]),
    "231-t3": Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 1]], None, monomial(3)),
                        DenseLayer([[2, -1, 3]], None, None)]),
}
needs_m2 = pytest.mark.skipif("macaulay2" not in available_engines(),
                              reason=f"Macaulay2 (M2) not found: `{MACAULAY2_INSTALL}`")


def test_registered_with_its_install_line():
    e = ENGINES["macaulay2"]
    assert (e.name, e.exact, e.install) == ("macaulay2", True, "apt-get install macaulay2")


def test_script_and_parser_without_m2():
    # the script asks for gb in GRevLex over QQ; the parser reads exponent vectors and the basis
    script = _macaulay2_script(["x", "y"], [{(2, 0): fmpq(1, 2), (0, 0): fmpq(-1)}], True)
    assert "QQ[v0,v1, MonomialOrder => GRevLex]" in script and "x^2-2" in script.replace("v0", "x")
    lms, basis = _parse_macaulay2("@@LEADS\n{2, 0}\n{0, 1}\n@@BASIS\nv0^2-2\nv1-3/2\n@@END\n", 2, True)
    assert lms == [(2, 0), (0, 1)] and basis[1] == {(0, 1): fmpq(1), (0, 0): fmpq(-3, 2)}
    with pytest.raises(EngineFailed):  # unreadable output: exit 3, never an internal error
        _parse_macaulay2("@@LEADS\n{2, x}\n@@END\n", 2, False)
    with pytest.raises(EngineFailed):
        _parse_macaulay2("-- error: syntax\n", 2, False)


@needs_m2
@pytest.mark.parametrize("name", list(FIBRES))
def test_macaulay2_agrees_with_sympy(name):
    ideal = fibre_ideal(FIBRES[name])
    expected = groebner(ideal, engine="sympy")
    r = groebner(ideal, engine="macaulay2", timeout=120)
    assert (r.dimension, r.degree) == (expected.dimension, expected.degree)
    assert r.engine == "macaulay2" and r.field == "QQ" and r.exact
    if r.dimension == 0:  # its basis is a Gröbner basis over Q: the same distinct points
        assert hermite_counts(r) == hermite_counts(expected)


@needs_m2
def test_symeq_fibre_engine_macaulay2(tmp_path, capsys):
    path = tmp_path / "t3.json"
    save_model(FIBRES["221-t3"], path)
    code = main(["fibre", str(path), "--method", "groebner", "--engine", "macaulay2", "--timeout", "120"])
    out = capsys.readouterr().out
    assert code == 0 and "macaulay2" in out, out
