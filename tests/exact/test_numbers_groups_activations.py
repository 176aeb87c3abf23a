"""Exact numbers, finite groups (closure and action validation), activations."""

from fractions import Fraction

import pytest
import sympy
from flint import fmpq
from hypothesis import given, settings
from hypothesis import strategies as st

from symeq.activations import monomial, polynomial, relu, sigmoid_series, tanh_series
from symeq.errors import GroupActionError, GroupTooLarge, InputError, NotExactError, ShapeError
from symeq.groups import (
    FiniteGroup, builtin_group, closure, cyclic_shift, dihedral, global_sign, mirror,
    permutation_matrix, symmetric_group, vertical_mirror,
)
from symeq.numbers import identity, matrix, nullspace, parse_matrix, parse_number


# -- numbers ---------------------------------------------------------------------------------

@given(st.fractions(max_denominator=10**6))
def test_number_round_trip(q):
    assert parse_number(str(q)) == fmpq(q.numerator, q.denominator)


@pytest.mark.parametrize("text,value", [("-3", fmpq(-3)), ("0.25", fmpq(1, 4)), ("-1.5e-3", fmpq(-3, 2000)),
                                        ("2/-1".replace("-", ""), fmpq(2)), ("7/14", fmpq(1, 2)), (".5", fmpq(1, 2))])
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("bad", ["1/0", "abc", "1//2", "", "1e", "__import__('os')", "1/2/3",
                                 " 7/14 ", "1 / 2", "1e1001"])  # as the checker: no spaces, exponent <= 1000
def test_parse_number_rejects(bad):
    with pytest.raises(InputError):
        parse_number(bad)


def test_float_refused_with_advice():
    with pytest.raises(NotExactError, match='write exact numbers as strings'):
        parse_number(0.1)
    with pytest.raises(InputError):
        parse_number(True)


def test_parse_matrix_shapes():
    with pytest.raises(ShapeError, match="not rectangular"):
        parse_matrix([[1, 2], [3]])
    with pytest.raises(ShapeError, match="expected 2x3"):
        parse_matrix([[1, 2], [3, 4]], shape=(2, 3))


@given(st.lists(st.lists(st.integers(-3, 3), min_size=3, max_size=3), min_size=1, max_size=3))
def test_nullspace_is_null(rows):
    M = matrix(rows)
    for v in nullspace(M):
        assert all(x == 0 for x in (M * parse_matrix([[x] for x in v])).entries())
    assert len(nullspace(M)) == 3 - M.rank()


# -- groups ----------------------------------------------------------------------------------

@pytest.mark.parametrize("group,order", [
    (mirror(2, 3), 2), (vertical_mirror(3, 2, 2), 2), (cyclic_shift(5), 5), (symmetric_group(4), 24),
    (global_sign(3), 2), (dihedral(3), 8), (dihedral(2, 2), 8), (mirror(1, 2) * cyclic_shift(3), 6),
    (builtin_group("sign:1*sym:3"), 12),
])
def test_builtin_orders(group, order):
    assert group.order() == order


def test_mirror_is_the_left_right_flip():
    P = mirror(2, 3).generators[0][0]
    x = [fmpq(i) for i in range(6)]  # rows (0 1 2), (3 4 5)
    y = (P * parse_matrix([[v] for v in x])).entries()
    assert y == [2, 1, 0, 5, 4, 3]


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(range(4))), st.permutations(list(range(4))))
def test_permutation_group_closure_matches_sympy(p, q):
    from sympy.combinatorics import Permutation, PermutationGroup

    G = FiniteGroup([(permutation_matrix(p), permutation_matrix(p)), (permutation_matrix(q), permutation_matrix(q))])
    assert G.order() == PermutationGroup([Permutation(p), Permutation(q)]).order()


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(range(4))), st.permutations(list(range(3))))
def test_action_validation(p, q):
    """rho_out(g) = Q defines an action of <P> iff ord(Q) divides ord(P)."""
    from sympy.combinatorics import Permutation

    P, Q = permutation_matrix(p), permutation_matrix(q)
    G = FiniteGroup([(P, Q)])
    op, oq = Permutation(p).order(), Permutation(q).order()
    if op % oq == 0:
        assert G.order() == op
    else:
        with pytest.raises(GroupActionError, match="does not respect a relation"):
            G.validate()


def test_group_errors():
    with pytest.raises(GroupTooLarge):
        FiniteGroup([(permutation_matrix([1, 2, 3, 4, 5, 6, 0]), identity(1))], max_order=3).validate()
    with pytest.raises(GroupActionError, match="not invertible"):
        FiniteGroup([(matrix([[1, 0], [0, 0]]), identity(1))])
    with pytest.raises(ShapeError):
        FiniteGroup([(identity(2), identity(1)), (identity(3), identity(1))])
    with pytest.raises(InputError, match="unknown built-in group"):
        builtin_group("rotation:3")
    # an infinite-order generator hits the cap instead of looping forever
    with pytest.raises(GroupTooLarge):
        FiniteGroup([(matrix([[1, 1], [0, 1]]), identity(1))], max_order=50).validate()


def test_closure_components():
    s = matrix([[0, 1], [1, 0]])
    els = closure([(s, -identity(2))])
    assert len(els) == 2


# -- activations -----------------------------------------------------------------------------

@pytest.mark.parametrize("order", [1, 3, 5, 7, 9, 11])
def test_tanh_series_matches_sympy(order):
    t = sympy.Symbol("t")
    ser = sympy.series(sympy.tanh(t), t, 0, order + 1).removeO()
    expected = [sympy.Rational(ser.coeff(t, k)) for k in range(order + 1)]
    got = [sympy.Rational(int(c.p), int(c.q)) for c in tanh_series(order).coeffs]
    assert got == expected[: len(got)] and all(e == 0 for e in expected[len(got):])


@pytest.mark.parametrize("order", [1, 3, 5, 6])
def test_sigmoid_series_matches_sympy(order):
    t = sympy.Symbol("t")
    ser = sympy.series(1 / (1 + sympy.exp(-t)), t, 0, order + 1).removeO()
    expected = [sympy.Rational(ser.coeff(t, k)) for k in range(order + 1)]
    got = [sympy.Rational(int(c.p), int(c.q)) for c in sigmoid_series(order).coeffs]
    assert got == expected[: len(got)]


@pytest.mark.parametrize("act,sym,K", [
    (tanh_series(3), "odd", "signed permutations"),
    (polynomial([0, 1, 0, 1]), "odd", "signed permutations"),
    (polynomial([0, 1, 1, 0, 1]), "generic", "permutations"),
    (monomial(2), "monomial", "monomial matrices"),
    (monomial(3), "monomial", "monomial matrices"),
    (polynomial([1, 0, 1, 0, 1]), "even", "permutations"),
    (sigmoid_series(5), "odd-plus-constant", "signed permutations acting affinely (sign flips y -> 2 sigma(s) - y)"),
    (relu(), "relu", "positive monomial matrices"),
])
def test_latent_groups(act, sym, K):
    assert act.symmetry == sym and act.latent_group == K


@given(st.integers(-5, 5), st.integers(1, 5), st.sampled_from([tanh_series(5), monomial(3), monomial(2),
                                                               polynomial([1, 2, 1]), polynomial([0, 1, 1, 0, 1])]))
def test_admissible_is_a_symmetry(p, q, act):
    """sigma(alpha t + s(1 - alpha)) = q sigma(t) exactly when admissible() says so."""
    alpha = fmpq(p, q)
    factor = act.admissible(alpha)
    pts = [fmpq(k, 3) for k in range(-6, 7)]
    s = act.shift
    holds = factor is not None and all(act(alpha * t + s * (1 - alpha)) == factor * act(t) for t in pts)
    assert (factor is not None) == holds


@pytest.mark.parametrize("spec", [{"type": "softmax"}, {"type": "tanh_series", "order": 4},
                                  {"type": "monomial", "degree": 0}, {"kind": "relu"}])
def test_bad_activation_specs(spec):
    from symeq.activations import activation_from_spec

    with pytest.raises(InputError):
        activation_from_spec(spec)


@pytest.mark.parametrize("spec", ["dihedral:2", "sym:4", "mirror:2x3*shift:2"])
def test_cayley_graph(spec):
    import networkx as nx

    G = builtin_group(spec)
    C = G.cayley_graph()
    assert C.number_of_nodes() == G.order()
    assert nx.is_strongly_connected(C)
    # every element has exactly one out-edge per distinct generator action
    assert all(C.out_degree(v) <= len(G.generators) for v in C)


# -- real activations (issue 20) -------------------------------------------------------------------

REAL_NAMES = ["tanh", "sigmoid", "gelu", "silu", "softplus", "elu", "leaky_relu", "erf"]


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_activation_spec_round_trip(name):
    from symeq.activations import activation_from_spec

    act = activation_from_spec({"type": name})
    assert act.kind == "real" and act.name == name and act.to_spec()["type"] == name
    again = activation_from_spec(act.to_spec())
    assert again.to_spec() == act.to_spec() and again.symmetry == act.symmetry
    assert act.degree is None and not act.is_polynomial and act.shift == 0


@pytest.mark.parametrize("name,group", [("tanh", "signed permutations"), ("erf", "signed permutations"),
                                        ("gelu", "permutations"), ("silu", "permutations"),
                                        ("softplus", "permutations"), ("elu", "permutations"),
                                        ("leaky_relu", "positive monomial matrices")])
def test_real_latent_groups(name, group):
    from symeq.activations import real

    assert real(name).latent_group == group


def test_real_symmetry_table_matches_admissible():
    """admissible/affine_admissible (what the derivation uses) agree with the identity table."""
    from symeq.activations import real

    for name in REAL_NAMES:
        act = real(name)
        for alpha in (fmpq(1), fmpq(-1), fmpq(2), fmpq(1, 3)):
            qo = act.affine_admissible(alpha)
            in_table = any(act.symmetry_holds(alpha, 0, q, c) for q in (alpha, -alpha, 1, -1) for c in (0, 1))
            assert (qo is not None) == in_table, (name, alpha)
            if qo is not None:
                assert act.symmetry_holds(alpha, 0, *qo)
    assert real("sigmoid").affine_admissible(-1) == (-1, 1)
    assert real("sigmoid").admissible(-1) is None
    assert not real("tanh").symmetry_holds(-1, fmpq(1, 2), -1)


def test_real_exact_values_only_where_rational():
    from symeq.activations import real
    from symeq.errors import NotExactError

    assert real("sigmoid")(0) == fmpq(1, 2) and real("tanh")(0) == 0
    assert real("leaky_relu", slope="1/10")(fmpq(-3)) == fmpq(-3, 10)
    assert real("elu", alpha="2")(fmpq(5)) == 5
    for name, t in [("tanh", 1), ("softplus", 0), ("elu", -1), ("gelu", fmpq(1, 2))]:
        with pytest.raises(NotExactError):
            real(name)(fmpq(t))


@pytest.mark.parametrize("spec,msg", [
    ({"type": "tanh", "order": 3}, 'unknown key "order"'),
    ({"type": "tahn"}, "did you mean tanh"),
    ({"type": "leaky_relu", "slop": "1/10"}, 'did you mean "slope"'),
    ({"type": "leaky_relu", "slope": "1"}, "identity"),
    ({"type": "leaky_relu", "slope": "-1"}, "|t|"),
    ({"type": "elu", "alpha": "0"}, "nonzero"),
    ({"type": "gelu", "approximate": "fast"}, "approximate"),
    ({"type": "leaky_relu", "slope": 0.01}, ""),
    ({"type": "tanh_series", "order": 3, "extra": 1}, 'unknown key "extra"'),
    ({"type": "polynomial"}, 'missing key "coeffs"'),
])
def test_real_bad_specs(spec, msg):
    from symeq.activations import activation_from_spec

    with pytest.raises(InputError, match=None) as e:
        activation_from_spec(spec)
    assert msg in str(e.value)


@pytest.mark.parametrize("text,spec", [
    ("tanh", {"type": "tanh"}), ("tanh3", {"type": "tanh_series", "order": 3}),
    ("tanh_series:5", {"type": "tanh_series", "order": 5}), ("sigmoid", {"type": "sigmoid"}),
    ("sigmoid_series:3", {"type": "sigmoid_series", "order": 3}), ("logistic", {"type": "sigmoid"}),
    ("swish", {"type": "silu"}), ("monomial:2", {"type": "monomial", "degree": 2}),
    ("leaky_relu:1/10", {"type": "leaky_relu", "slope": "1/10"}), ("gelu:tanh", {"type": "gelu", "approximate": "tanh"}),
    ('{"type": "elu", "alpha": "2"}', {"type": "elu", "alpha": "2"}),
])
def test_activation_text_one_spelling(text, spec):
    from symeq.activations import activation_from_spec, activation_from_text

    assert activation_from_text(text).to_spec() == spec
    if not text.startswith("{"):
        assert activation_from_spec(text).to_spec() == spec  # a string in a model file reads the same


def test_activation_text_unknown_suggests():
    from symeq.activations import activation_from_text

    with pytest.raises(InputError, match="did you mean"):
        activation_from_text("sigmod")
