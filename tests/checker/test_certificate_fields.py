"""Issue 25 (5): every field of every identifiability certificate kind is checked or informational.

For each kind (tensor, Jacobian factors with and without a widening top block, Sussmann, Fefferman,
jacobian-rank with and without a continuous orbit, its family certificate, the ReLU local certificate)
every field of a genuine certificate is tampered with (tests/json_mutations.py: each leaf changed, each
key removed, one added, each list grown and shrunk).  A mutation is refused, unless it is in

* ``INFORMATIONAL`` (docs/certificates.md, "Identifiability certificates"): not read for the verdict;
  a changed value leaves the verdict as it was;
* ``REVERIFIED``: data of the proof that the checker recomputes (sample points, row and column
  choices, Kruskal's and the independence proofs, the per-neuron polynomials read as values): another
  valid choice is another proof of the same verdict, so the checker may accept it -- with the same verdict.

A new certificate field that the checker ignores shows up as an accepted mutation outside both sets.
"""
import json

import pytest

import symeq_check as check
from json_mutations import field_mutations
from symeq.activations import monomial, polynomial, real, relu, tanh_series
from symeq.fibre.classical import classical_identifiability
from symeq.fibre.decide import relu_local_identifiability
from symeq.fibre.jacobian import jacobian_identifiability
from symeq.fibre.tensor import tensor_identifiability
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model

INFORMATIONAL = {
    "jacobian-rank": {".seed", ".parameter_order", ".orbit_generators"},
    "jacobian-rank family": {".parameter_order", ".orbit_generators"},
    "tensor": {".witness.text"},  # the witness's description, for people
}
REVERIFIED = {
    "jacobian-rank": {".points", ".rows", ".pivot_columns"},
    # the witness's neuron: bias-free, every neuron has the same system a_k (1 - lambda^(d-k)) = 0
    "tensor": {".independence", ".kruskal.modes", ".neurons", ".witness.neuron", ".witness.polynomials"},
    "widening": {".full_rank.W1_columns", ".full_rank.W2_rows", ".full_rank.W3_rows", ".top.independence",
                 ".top.kruskal.modes", ".top.neurons"},
}


def _net(n0, Ws, acts, bs=None):
    return Model(n0, [DenseLayer(W, bs[i] if bs else None, acts[i] if i < len(acts) else None)
                      for i, W in enumerate(Ws)])


def _circ(row):
    return [[row[(j - i) % 3] for j in range(3)] for i in range(3)]


C3 = [_circ([1, 2, -1]), _circ([2, -1, 3]), _circ([1, 1, -3])]


def _kinds():
    """(name, family of field sets, model, certificate) of every identifiability certificate kind."""
    t4 = polynomial([0, 1, 0, 0, 1])
    yield ("tensor identifiable", "tensor",
           _net(3, [[[1, 2, -1], [3, -1, 2], [1, 1, 4]], [[2, -1, 1], [1, 1, -3], [0, 2, 5]]], [polynomial([0, 1, 0, 1])],
                [[1, -2, 3], [0, 0, 0]]), lambda m: tensor_identifiability(m))
    yield ("tensor witness over C", "tensor", _net(2, [[[1, 2], [3, -1]], [[2, -1], [1, 1]]], [t4]),
           lambda m: tensor_identifiability(m, field="C"))
    yield ("jacobian-factors", "tensor", _net(3, C3, [monomial(2), monomial(3)]), tensor_identifiability)
    yield ("jacobian-factors general", "tensor",
           _net(3, C3, [polynomial([1, 2, 1])] * 2, [[1, 1, 1], [2, 2, 2], [-1, -1, -1]]), tensor_identifiability)
    yield ("jacobian-factors widening", "widening",
           _net(3, [[[1, 2, -1], [2, -1, 1], [1, 1, 3]], [[1, -2, 1], [2, 1, -1], [-1, 1, 2], [1, 3, 1]],
                    [[1, 0, 2, -1], [0, 1, 1, 2], [2, -1, 0, 1], [1, 1, -1, 0], [1, 2, 1, 1]]],
                [monomial(2), monomial(3)], [[1, -1, 2], [0, 1, -1, 2], [1, 0, 0, -1, 1]]), tensor_identifiability)
    yield ("sussmann identifiable", None,
           Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], real("tanh")), DenseLayer([[2, -1]], [1], None)]),
           classical_identifiability)
    yield ("sussmann witness", None,
           Model(2, [DenseLayer([[1, 2], [-1, -2]], [1, -1], real("tanh")), DenseLayer([[2, -1]], [1], None)]),
           classical_identifiability)
    W = [[[201, 401], [-301, 503]], [[211, 409], [-307, 509]], [[223, 419]]]
    yield ("fefferman identifiable", None,
           Model(2, [DenseLayer(W[0], [1, -2], real("tanh")), DenseLayer(W[1], [3, -5], real("tanh")),
                     DenseLayer(W[2], [7], None)]), classical_identifiability)
    yield ("fefferman witness", None,
           Model(2, [DenseLayer([[1, 2], [-1, -2]], [1, -1], real("tanh")),
                     DenseLayer([[2, -1], [1, 3]], [1, 2], real("tanh")), DenseLayer([[2, -1]], [1], None)]),
           classical_identifiability)
    yield ("jacobian-rank", "jacobian-rank",
           Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], tanh_series(3)), DenseLayer([[2, -1], [1, 1]], [1, 0], None)]),
           jacobian_identifiability)
    yield ("jacobian-rank with an orbit", "jacobian-rank",
           Model(3, [DenseLayer([[1, 2, -1], [3, -1, 1], [2, 1, 1]], None, monomial(3)),
                     DenseLayer([[1, 2, 3], [1, -1, 2], [2, 1, 1]], None, None)]), jacobian_identifiability)
    yield ("jacobian-rank family", "jacobian-rank family",
           Model(2, [DenseLayer([[1, 2], [1, 2]], [1, 1], tanh_series(3)), DenseLayer([[2, -1], [1, 1]], [1, 0], None)]),
           jacobian_identifiability)
    yield ("jacobian-rank relu", "jacobian-rank",
           Model(2, [DenseLayer([[1, 2], [3, -1], [-2, 1]], [1, -1, 2], relu()), DenseLayer([[1, -2, 3]], [1], None)]),
           relu_local_identifiability)


KINDS = list(_kinds())


def _run(cert, model):
    try:
        rep = check.check_certificate(cert, model)
    except check.CheckError:
        return None, None
    return rep.accepted, rep.verdict


def _field(path: str) -> str:
    """The field a mutation path is in: '.a.b[3].c-removed' -> '.a.b'."""
    for cut in ("[", "-removed", "+key", "+item", "-item"):
        path = path.split(cut)[0]
    return path


def _under(path: str, fields: set) -> bool:
    return any(path == f or path.startswith(f + ".") for f in fields)


@pytest.mark.parametrize("name, family, model, decide", KINDS, ids=[k[0] for k in KINDS])
def test_every_field_is_checked_or_informational(name, family, model, decide):
    cert = json.loads(json.dumps(decide(model).certificate))
    data = json.loads(json.dumps(model_to_json(model)))
    accepted, verdict = _run(cert, data)
    assert accepted is True, name
    info = INFORMATIONAL.get(family, set())
    again = REVERIFIED.get(family, set())
    seen_info, refused = set(), 0
    for path, mutated in field_mutations(cert):
        ok, v = _run(mutated, data)
        field = _field(path)
        if ok is True:
            assert _under(field, info | again), (name, path, "accepted, but neither checked nor informational")
            assert v == verdict, (name, path)
            seen_info |= {f for f in info if _under(field, {f})}
        else:
            refused += 1
    assert refused > 10, name
    # each informational field present was changed somewhere, and the verdict stayed
    present = {f for f in info for p, _ in field_mutations(cert) if _under(_field(p), {f})}
    assert seen_info == present, (name, seen_info, present)


def test_top_format_of_the_widening_certificate_is_checked():
    name, family, model, decide = next(k for k in KINDS if k[0] == "jacobian-factors widening")
    cert = json.loads(json.dumps(decide(model).certificate))
    data = json.loads(json.dumps(model_to_json(model)))
    for bad in ("symeq-identifiability/2", "symeq-certificate/2", None):
        c = json.loads(json.dumps(cert))
        c["top"]["format"] = bad
        assert _run(c, data)[0] is not True, bad


# ----------------------------------------------------------------------------- the pivot block (issue 25, 6)

def _orbit_certificate():
    name, family, model, decide = next(k for k in KINDS if k[0] == "jacobian-rank with an orbit")
    r = decide(model)
    return model, r, json.loads(json.dumps(r.certificate)), json.loads(json.dumps(model_to_json(model)))


def test_pivot_block_is_named_and_accepted():
    model, r, cert, data = _orbit_certificate()
    assert r.orbit_dimension > 0 and len(cert["pivot_columns"]) == r.rank < r.n_params
    rep = check.check_certificate(cert, data)
    assert rep.accepted is True and any("pivot columns" in c for c in rep.checks), rep.checks


def test_pivot_block_tampered_is_refused():
    """A block through the support of an orbit generator t is singular (J t = 0 restricted to it), so the
    rank of those columns falls short: refused; so are repeated, missing and out-of-range columns."""
    from symeq.fibre.jacobian import orbit_tangent

    model, r, cert, data = _orbit_certificate()
    P, rank = r.n_params, r.rank
    support = sorted(orbit_tangent(model)[0][1])
    singular = support + [c for c in range(P) if c not in support][:rank - len(support)]
    assert len(singular) == rank
    bad = {"singular block": singular,
           "a repeated column": cert["pivot_columns"][:-1] + cert["pivot_columns"][:1],
           "one column short": cert["pivot_columns"][:-1],
           "outside the parameters": cert["pivot_columns"][:-1] + [P],
           "not integers": [str(c) for c in cert["pivot_columns"]]}
    for what, cols in bad.items():
        rep_ok = _run(dict(cert, pivot_columns=cols), data)[0]
        assert rep_ok is False or rep_ok is None, what
    rep = check.check_certificate(dict(cert, pivot_columns=singular), data)
    assert any("pivot columns" in x and f"not {rank}" in x for x in rep.reasons), rep.reasons


@pytest.fixture
def flint_accelerator():
    """python-flint's nmod_mat installed as the checker's rank accelerator, as `symeq check` does
    (symeq/cli/verify.py); removed afterwards, so that the other tests see the bare checker."""
    from symeq.numbers import install_check_accelerator
    from symeq_check import accel

    install_check_accelerator(accel.install)
    yield
    accel.uninstall()


def test_the_bare_checker_eliminates_with_the_standard_library():
    """Without an installed accelerator (`python -m symeq_check`, the zipapp) the checker's own elimination
    is used and named, whether or not python-flint is importable."""
    from symeq_check import accel

    accel.uninstall()
    model, r, cert, data = _orbit_certificate()
    rep = check.check_certificate(cert, data)
    assert rep.accepted is True and any("standard library" in x for x in rep.checks), rep.checks
    assert not any("nmod_mat" in x for x in rep.checks), rep.checks


def test_standard_library_elimination_agrees(monkeypatch, flint_accelerator):
    """SYMEQ_CHECK_STDLIB=1: the checker eliminates with the standard library (no python-flint) and says so;
    the verdict is the same, with and without the pivot block."""
    model, r, cert, data = _orbit_certificate()
    fast = check.check_certificate(cert, data)
    monkeypatch.setenv("SYMEQ_CHECK_STDLIB", "1")
    for c in (cert, {k: v for k, v in cert.items() if k != "pivot_columns"}):
        slow = check.check_certificate(c, data)
        assert slow.accepted is True and any("standard library" in x for x in slow.checks), slow.checks
    assert fast.accepted is True and any("nmod_mat" in x for x in fast.checks), fast.checks


def test_structured_elimination_agrees_with_the_plain_one(monkeypatch, flint_accelerator):
    """Every row of every point certified: the accelerated check eliminates the last affine layer's block
    first; the standard-library path eliminates everything; both accept, and repeated points are refused."""
    import random

    rng = random.Random(5)
    widths = (8, 16, 8, 8)
    layers = []
    for i in range(3):
        W = [[rng.randint(-5, 5) for _ in range(widths[i])] for _ in range(widths[i + 1])]
        layers.append(DenseLayer(W, [rng.randint(-5, 5) for _ in range(widths[i + 1])],
                                 tanh_series(3) if i < 2 else None))
    m = Model(8, layers)
    r = jacobian_identifiability(m)
    cert, data = json.loads(json.dumps(r.certificate)), json.loads(json.dumps(model_to_json(m)))
    assert sorted(cert["rows"]) == list(range(len(cert["points"]) * 8))
    fast = check.check_certificate(cert, data)
    assert fast.accepted is True and any("last affine layer's block first" in c for c in fast.checks), fast.checks
    bad = dict(cert, points=[cert["points"][0]] * len(cert["points"]))  # one point repeated: the rank falls
    rep = check.check_certificate(bad, data)
    assert rep.accepted is False and any("have rank" in x for x in rep.reasons), rep.reasons
    monkeypatch.setenv("SYMEQ_CHECK_STDLIB", "1")
    slow = check.check_certificate(cert, data)
    assert slow.accepted is True and not any("block first" in c for c in slow.checks)


def test_the_check_command_installs_python_flint(tmp_path, capsys, monkeypatch):
    """`symeq check` installs python-flint's nmod_mat as the checker's accelerator and the report names it;
    SYMEQ_CHECK_STDLIB=1 keeps the standard library even then."""
    from symeq.cli import main
    from symeq_check import accel

    model, r, cert, data = _orbit_certificate()
    (tmp_path / "c.json").write_text(json.dumps(cert))
    (tmp_path / "m.json").write_text(json.dumps(data))
    accel.uninstall()
    try:
        assert main(["check", str(tmp_path / "c.json"), str(tmp_path / "m.json")]) == 0
        assert "python-flint's nmod_mat" in capsys.readouterr().out
        assert accel.nmod_rank() is None and accel.accelerator_name() is None  # installed for the check only
        monkeypatch.setenv("SYMEQ_CHECK_STDLIB", "1")
        assert main(["check", str(tmp_path / "c.json"), str(tmp_path / "m.json")]) == 0
        out = capsys.readouterr().out
        assert "standard library" in out and "nmod_mat" not in out
    finally:
        accel.uninstall()
