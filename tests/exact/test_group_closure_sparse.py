"""Group closure on permutations (issue 19): when every input matrix is a signed/scaled
permutation, symeq.groups.core.closure multiplies permutations, not dense matrices.  Each case
is checked against the dense closure (the same function with the monomial test switched off)."""

from __future__ import annotations

import time

import pytest

from symeq.errors import GroupActionError, GroupTooLarge
from symeq.groups import core
from symeq.groups.builtins import dihedral, global_sign, image_rotation, mirror
from symeq.groups.core import FiniteGroup, closure, permutation_matrix
from symeq.numbers import identity, matrix, monomial_matrix


def _dense(monkeypatch, *args, **kw):
    with monkeypatch.context() as m:
        m.setattr(core, "_monomial_form", lambda mat: None)
        return closure(*args, **kw)


def _same(a, b):
    assert [e.word for e in a] == [e.word for e in b]
    for x, y in zip(a, b):
        assert len(x.mats) == len(y.mats)
        for p, q in zip(x.mats, y.mats):
            assert p == q


CYCLE3 = permutation_matrix([1, 2, 0])
ORDER3 = matrix([[0, -1], [1, -1]])  # not monomial, order 3


@pytest.mark.parametrize("gens", [
    [tuple(g) for g in dihedral(4, c=2).generators],
    [tuple(g) for g in image_rotation(3).generators],
    [(permutation_matrix([1, 2, 0], [1, -1, 1]), identity(1))],          # signed: order 6
    [(monomial_matrix([1, 0], [2, matrix([[1]])[0, 0] / 2]), identity(1))],  # scaled monomial: order 2
    [(CYCLE3, ORDER3)],                                                  # dense second component
    [tuple(g) for g in (mirror(2, 3) * global_sign(1)).generators],
])
def test_sparse_closure_equals_dense(monkeypatch, gens):
    sparse = closure(gens)
    assert core._monomial_form(gens[0][0]) is not None  # the sparse path is the one taken
    _same(sparse, _dense(monkeypatch, gens))


def test_errors_are_the_same(monkeypatch):
    bad = [(CYCLE3, permutation_matrix([1, 0]))]  # g^3 = 1 on the input, not on the output
    with pytest.raises(GroupActionError) as e1:
        closure(bad, names=["r"], what=["input", "output"])
    with pytest.raises(GroupActionError) as e2:
        _dense(monkeypatch, bad, names=["r"], what=["input", "output"])
    assert str(e1.value) == str(e2.value) and "output" in str(e1.value)
    big = [(monomial_matrix([0], [2]),)]  # x -> 2x: infinite
    for f in (closure, lambda *a, **k: _dense(monkeypatch, *a, **k)):
        with pytest.raises(GroupTooLarge):
            f(big, max_order=50)


def test_monomial_form():
    assert core._monomial_form(matrix([[0, 3], [-1, 0]]))[0] == (1, 0)
    assert core._monomial_form(matrix([[1, 1], [0, 1]])) is None
    assert core._monomial_form(matrix([[1, 0], [1, 0]])) is None      # a repeated column
    assert core._monomial_form(matrix([[0, 0], [0, 1]])) is None      # a zero row


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_d4_at_28x28_closes_fast():
    """D4 on 28 x 28 images (784 x 784 matrices): was 3-6 s with dense products."""
    G = dihedral(28, output=identity(1))
    t0 = time.perf_counter()
    assert G.order() == 8
    assert time.perf_counter() - t0 < 2.0
    assert FiniteGroup(G.generators, G.names).elements()[3].mats[0].nrows() == 784


def test_regular_representation_and_cayley_graph_match_dense(monkeypatch):
    G = dihedral(3, c=2)
    reg, cay = G.regular_representation(), G.cayley_graph()
    with monkeypatch.context() as m:
        m.setattr(core, "_monomial_form", lambda mat: None)
        H = dihedral(3, c=2)
        reg2, cay2 = H.regular_representation(), H.cayley_graph()
    assert reg == reg2
    assert sorted(cay.edges(data="generator")) == sorted(cay2.edges(data="generator"))
    assert cay.number_of_edges() == 16
