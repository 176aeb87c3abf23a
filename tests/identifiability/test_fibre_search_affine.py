"""The fibre-wide search follows the absorbed-constant rule (docs/theory.md): with biases, the scalings
and sign flips of activations that are monomial or odd *up to a constant* act affinely, and the next
layer's bias absorbs their offsets -- the same latent groups the orbit, the gauge and the derivation use."""

from __future__ import annotations

import json

import pytest
from flint import fmpq

from symeq.activations import monomial, polynomial, sigmoid_series, tanh_series
from symeq.fibre.groebner import best_exact_engine
from symeq.fibre.search import search_fibre
from symeq.groups import FiniteGroup
from symeq.layerwise import check_layerwise, derive_latent_actions
from symeq.models import DenseLayer, Model
from symeq.numbers import mat_rows, matrix

SWAP = FiniteGroup([(matrix([[0, 1], [1, 0]]), matrix([[1]]))], ["swap"])
NEG = FiniteGroup([(matrix([[-1, 0], [0, -1]]), matrix([[-1]]))], ["neg"])
T_PLUS_T2 = polynomial([0, 1, 1])        # (t + 1/2)^2 - 1/4
CUBE_SHIFTED = polynomial([0, 3, 3, 1])  # (t + 1)^3 - 1: odd d, so its sign flip has an offset


def _engine():
    return best_exact_engine()  # singular or giac where installed (fast); sympy otherwise


def assert_verified(model, r):
    """theta' has theta's function (expanded exactly) and its affine actions pass every exact check."""
    assert r.verdict == "layerwise-parameter" and r.exit_code == 0
    assert r.parameter.polynomial_map() == model.polynomial_map()
    checks, hom, _, _ = check_layerwise(r.parameter, model.group, r.actions, None, r.offsets)
    assert hom and all(c.holds for c in checks)


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_t_plus_t2_with_biases_swap_candidate_has_no_real_point():
    """x^2 + 3xy + y^2 = (x + 3/2 y)^2 - 5/4 y^2 with sigma = t + t^2 and biases -1/2: under the swap,
    4ab/(a^2 + b^2) = 3 has complex solutions only.  The candidate's points form a curve (the affine
    scalings z -> alpha (z + 1/2) - 1/2 of both neurons); the gauge charts of those scalings make it
    finite, and Hermite's form proves it has no real point.  Before the rule was applied here the
    scalings were not gauged and the candidate stayed undecided ("nonempty")."""
    m = Model(2, [DenseLayer([[1, "3/2"], [0, 1]], ["-1/2", "-1/2"], T_PLUS_T2),
                  DenseLayer([[1, "-5/4"]], [0], None)], SWAP)
    swap = matrix([[0, 1], [1, 0]])
    r = search_fibre(m, engine=_engine(), check_theta=False, candidate_filter=lambda c: c.post[0][0] == swap,
                     timeout=120)
    assert [c.outcome for c in r.candidates] == ["no-real-point"], r.report()
    assert r.candidates[0].field == "R" and r.candidates[0].dimension == 1
    assert "monomial matrices acting affinely" in r.proof[0]
    assert r.verdict == "undetermined"  # a filtered search is never a proof
    # the whole search finds theta' with rows (1, 1), (-1, 1) up to the scalings, acted on by signs
    full = search_fibre(m, engine=_engine(), check_theta=False, timeout=120)
    assert_verified(m, full)
    W = mat_rows(full.parameter.layers[0].weight)
    assert abs(W[0][0]) == abs(W[0][1]) and abs(W[1][0]) == abs(W[1][1])
    assert full.offsets is None  # t + t^2 is even: its sign flip needs no offset


def _odd_up_to_constant(act, out_weight, out_bias):
    """(2, 2, 1) with sigma odd up to a constant, f odd: the sign flips of both neurons (affine, with
    offsets 2 sigma(s)) make every layer equivariant under x -> -x, y -> -y."""
    return Model(2, [DenseLayer([[1, 2], [3, -1]], [act.shift, act.shift], act),
                     DenseLayer([out_weight], [out_bias], None)], NEG)


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_affine_sign_flips_are_searched_for_odd_up_to_a_constant():
    for act, o in [(sigmoid_series(3), 1), (CUBE_SHIFTED, -2)]:
        # b_2 = -W_2 sigma(s) makes f odd: f(-x) = W_2 (2 sigma(s) - sigma(z)) + b_2 = -f(x)
        m = _odd_up_to_constant(act, [2, 4], -6 * act(act.shift))
        assert derive_latent_actions(m).found  # theta itself is layerwise, with affine actions
        # the search must agree, from the candidates alone: before the rule it only tried permutations
        # and answered "no-layerwise-parameter" -- a wrong negative
        r = search_fibre(m, engine=_engine(), check_theta=False, timeout=120)
        assert_verified(m, r)
        assert r.offsets == [[[o, o]]], (act, r.offsets)
        assert "acting affinely" in r.proof[0]
        assert json.loads(json.dumps(r.to_json()))["offsets"] == [[[str(o), str(o)]]]


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_without_biases_no_offsets_are_searched():
    """The rule's other half: a bias-free theta' has no bias to absorb an offset, so sigmoid neurons
    are searched with permutations only (no sign candidates)."""
    m = Model(2, [DenseLayer([[1, 2], [2, 1]], None, sigmoid_series(3)), DenseLayer([[1, 1]], None, None)], SWAP)
    r = search_fibre(m, engine=_engine(), check_theta=False, timeout=60)
    assert "K = permutations)" in r.proof[0]
    assert all(c.offsets is None for c in r.candidates) and r.offsets is None
    assert_verified(m, r)


NEG_IN = FiniteGroup([(matrix([[-1, 0], [0, -1]]), matrix([[1]]))], ["neg"])


def _flip_model(act, bias_out):
    """(2, 2, 1) layerwise equivariant under x -> -x through the sign flips of both neurons (pre-
    activation u = z - s -> -u): the output is negated (q = -1, odd up to a constant: the bias absorbs
    the offsets) or kept (q = 1, even)."""
    odd = act.affine_admissible(-1)[0] == -1
    s = act.shift
    b2 = -act(s) * 3 if odd else fmpq(bias_out)  # 3 = the sum of the outgoing weights
    return Model(2, [DenseLayer([[1, 2], [3, -1]], [s, s], act), DenseLayer([[1, 2]], [b2], None)],
                 NEG if odd else NEG_IN)


@pytest.mark.parametrize("act", [tanh_series(3), sigmoid_series(3), CUBE_SHIFTED, T_PLUS_T2, monomial(3),
                                 monomial(2), polynomial([1, 0, 1, 0, 1])],
                         ids=["odd", "odd-plus-constant", "monomial-plus-constant-odd",
                              "monomial-plus-constant-even", "monomial-odd", "monomial-even", "even"])
@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_every_sign_class_is_searched_by_the_rule(act):
    """One body over the activation classes with a sign flip among their latent scalings: wherever the
    derivation finds theta layerwise, the search finds a layerwise theta' from its candidates alone."""
    m = _flip_model(act, 5)
    assert derive_latent_actions(m).found
    r = search_fibre(m, engine=_engine(), check_theta=False, timeout=120)
    assert_verified(m, r)
