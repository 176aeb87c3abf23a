"""Acceptance of the core: random layerwise-equivariant models, scrambled, are verified; their
derived actions pass every check and the independent checker; a perturbed weight is caught with a
witness that really fails.  Written once and run over every activation kind and built-in group."""

import random
import zlib

import pytest
from flint import fmpq, fmpq_mat

from symeq.activations import monomial, polynomial, relu, tanh_series
from symeq_check import check_certificate
from symeq.groups import builtin_group
from symeq.io import model_to_json
from symeq.layerwise import check_layerwise, derive_latent_actions
from symeq.models import DenseLayer, Model, random_equivariant_model, scramble
from symeq.numbers import matrix, monomial_parts
from symeq.theorem import verify

ACTIVATIONS = {
    "odd-poly": polynomial([0, 1, 0, "-1/2"]),
    "tanh3": tanh_series(3),
    "tanh5": tanh_series(5),
    "monomial2": monomial(2),
    "monomial3": monomial(3),
    "generic-poly": polynomial([0, 1, 1, 0, 1]),
    "relu": relu(),
}
GROUPS = ["mirror:2x2", "mirror:1x2x2", "vmirror:2x2", "shift:3", "sym:3", "sign:2", "dihedral:2", "mirror:1x2*sign:1"]


def _model(gspec, aname, seed):
    G = builtin_group(gspec)
    act = ACTIVATIONS[aname]
    big = G.order() > 4
    latent = ["regular"] if (big or aname == "relu") else ["regular*2", "regular"]
    m = random_equivariant_model(G, latent, act, rng=seed)
    return m


def _perturb(model, rng):
    """Change one weight of the first layer by a small rational.

    The neuron is one whose outgoing column is nonzero: a random equivariant model can have
    inactive neurons (zero outgoing weights), and perturbing those leaves f, and its
    equivariance, unchanged (PYTHONHASHSEED-dependent draws once hit that)."""
    m = model.copy()
    layer = m.layers[0]
    active = list(range(layer.out_dim))
    if len(m.layers) > 1:
        nxt = m.layers[1].weight
        active = [c for c in active if any(nxt[r, c] != 0 for r in range(nxt.nrows()))]
    i, j = rng.choice(active), rng.randrange(layer.in_dim)
    W = fmpq_mat(layer.weight)
    W[i, j] = W[i, j] + fmpq(1, 7)
    m.layers[0] = DenseLayer(W, layer.bias, layer.activation)
    return m


def _really_fails(model, witness):
    A, B = model.group.generators[witness.generator_index]
    x = witness.x
    gx = [sum((A[i, j] * x[j] for j in range(len(x))), fmpq(0)) for i in range(len(x))]
    fx = model(x)
    return model(gx) != [sum((B[i, j] * fx[j] for j in range(len(fx))), fmpq(0)) for i in range(B.nrows())]


@pytest.mark.parametrize("gspec", GROUPS)
@pytest.mark.parametrize("aname", list(ACTIVATIONS))
def test_scrambled_equivariant_model_is_verified(gspec, aname):
    rng = random.Random(zlib.crc32(repr((gspec, aname)).encode()))  # hash() of str varies per process
    model = _model(gspec, aname, rng.randrange(10**6))
    scrambled, k = scramble(model, rng)
    v = verify(scrambled)
    assert v.verdict == "layerwise-equivariant", v.report()
    d = v.derivation
    # the derived actions lie in K_i: monomial, with entries allowed by the activation
    act = ACTIVATIONS[aname]
    for per_layer in d.actions:
        for M in per_layer:
            cols, vals = monomial_parts(M)
            if act.latent_group in ("permutations",):
                assert all(x == 1 for x in vals)
            elif act.latent_group == "signed permutations":
                assert all(x in (1, -1) for x in vals)
            elif act.latent_group == "positive monomial matrices":
                assert all(x > 0 for x in vals)
    # both checks, re-run independently of the derivation
    checks, hom, order, _ = check_layerwise(scrambled, scrambled.group, d.actions)
    assert all(c.holds for c in checks) and hom and order == scrambled.group.order()
    # the independent checker accepts the certificate
    report = check_certificate(v.certificate(), model_to_json(scrambled))
    assert report.accepted, report.reasons
    # a perturbed weight breaks equivariance, with a witness that really fails
    bad = _perturb(scrambled, rng)
    vb = verify(bad)
    assert vb.verdict == "not-equivariant" and vb.exit_code == 1
    assert _really_fails(bad, vb.equivariance.witness)
    rb = check_certificate(vb.certificate(), model_to_json(bad))
    assert rb.accepted, rb.reasons


def test_derived_action_recovers_the_hidden_structure():
    """Scrambling by k conjugates the latent actions: rho'(g) = k rho(g) k^-1."""
    G = builtin_group("mirror:2x3")
    m = random_equivariant_model(G, ["regular*3"], tanh_series(3), rng=7)
    s, k = scramble(m, rng=8)
    (rho,) = derive_latent_actions(m).actions[0]
    (rho_s,) = derive_latent_actions(s).actions[0]
    K = k.post_matrices(m)[0]
    assert rho_s == K * rho * K.inv()


def test_builtin_example_shows_signed_permutations():
    from symeq.examples import builtin_example

    v = verify(builtin_example())
    assert v.verdict == "layerwise-equivariant"
    vals = {x for M in v.actions[0] for x in monomial_parts(M)[1]}
    assert vals == {1, -1}


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_no_action_at_theta_is_undetermined_and_proves_non_identifiability():
    """x^2 + y^2 = (3x/5 + 4y/5)^2 + (4x/5 - 3y/5)^2 is swap-invariant, but the swap maps no
    neuron to a multiple of another: no latent action at theta, so theta is not identifiable
    (LITERATURE: sigma = t^2 has a positive-dimensional fibre)."""
    from symeq.groups import FiniteGroup, permutation_matrix
    from symeq.numbers import identity

    G = FiniteGroup([(permutation_matrix([1, 0]), identity(1))], ["swap"])
    m = Model(2, [DenseLayer(matrix([["3/5", "4/5"], ["4/5", "-3/5"]]), None, monomial(2)),
                  DenseLayer(matrix([[1, 1]]), None, None)], G)
    v = verify(m, fibre_search=False)
    assert v.equivariance.holds and v.equivariance.exact
    assert v.verdict == "undetermined" and v.exit_code == 3
    assert v.identifiability["status"] == "not-identifiable"
    assert "no partner" in v.derivation.failure
    # Issue acceptance: the fibre-wide search finds a layerwise-equivariant theta' (same function)
    v = verify(m)
    assert v.verdict == "layerwise-equivariant" and v.exit_code == 0 and v.reparametrized
    assert v.identifiability["status"] == "not-identifiable"
    assert v.model.polynomial_map() == m.polynomial_map()
    assert check_certificate(v.certificate(), model_to_json(m)).accepted


def test_clones_are_resolved_by_backtracking():
    """Two identical hidden neurons tie; the next layer decides how they are matched."""
    G = builtin_group("sign:1")
    W1 = matrix([[1], [1], [2]])
    W2 = matrix([[1, 3, 5], [2, -1, 1]])
    m = Model(1, [DenseLayer(W1, None, tanh_series(3)), DenseLayer(W2, None, tanh_series(3)),
                  DenseLayer(matrix([[1, 1]]), None, None)], G)
    v = verify(m)
    assert v.verdict == "layerwise-equivariant"
    assert "backtracking" in v.derivation.method


def test_probabilistic_premise_is_upgraded_by_the_layerwise_proof():
    G = builtin_group("mirror:2x3")
    m = random_equivariant_model(G, ["regular*2", "regular*2", "regular"], tanh_series(5), rng=3)
    v = verify(m)  # degree 125 in 6 variables: the grid is too large, random points are used
    assert v.equivariance.method == "probabilistic" and v.equivariance.probabilistic
    assert v.verdict == "layerwise-equivariant"
    cert = v.certificate()
    assert cert["equivariance"]["probabilistic"] is False
    assert "proven exactly by the layerwise checks" in cert["equivariance"]["method"]


@pytest.mark.parametrize("method", ["grid", "symbolic", "probabilistic"])
def test_equivariance_methods_agree(method):
    from symeq.equivariance import decide_equivariance

    G = builtin_group("shift:3")
    m = random_equivariant_model(G, ["regular"], polynomial([0, 1, 1, 0, 1]), rng=11)
    assert decide_equivariance(m, method=method).holds
    bad = _perturb(m, random.Random(1))
    r = decide_equivariance(bad, method=method)
    assert not r.holds and _really_fails(bad, r.witness)


def test_relu_identity_width4_has_no_action_at_theta():
    """LITERATURE (Bokman-Kahl 2023 style): the identity on R^2 through width 4,
    W1 = [A; -A], W2 = [A^-1, -A^-1], is equivariant under the order-3 rotation
    R = [[0, -1], [1, -1]], but no positive monomial action exists at theta."""
    from symeq.groups import FiniteGroup

    R = matrix([[0, -1], [1, -1]])
    A = matrix([[1, 2], [0, 1]])
    Ai = A.inv()
    W1 = matrix([[A[i, j] for j in range(2)] for i in range(2)] + [[-A[i, j] for j in range(2)] for i in range(2)])
    W2 = matrix([[Ai[i, j] for j in range(2)] + [-Ai[i, j] for j in range(2)] for i in range(2)])
    m = Model(2, [DenseLayer(W1, None, relu()), DenseLayer(W2, None, None)], FiniteGroup([(R, R)], ["rot3"]))
    assert m([fmpq(3, 2), fmpq(-5)]) == [fmpq(3, 2), fmpq(-5)]  # the identity
    v = verify(m)
    assert v.equivariance.holds and v.equivariance.method == "relu-regions"
    assert v.derivation.candidates == {"rot3": 0}  # no positive monomial action at theta
    assert v.verdict == "no-layerwise-parameter" and v.exit_code == 1
    assert v.identifiability["status"] == "not-identifiable"
    assert v.fibre.smallest_equivariant_width == 6
    real = v.fibre.realisation
    assert real.widths == [2, 6, 2] and verify(real).verdict == "layerwise-equivariant"
    for x in ([fmpq(1, 3), fmpq(-2)], [fmpq(5), fmpq(7, 2)]):
        assert real(x) == m(x)
    assert check_certificate(v.certificate(), model_to_json(m)).exit_code == 3


def test_relu_rotation_width6_layerwise():
    """Width 6, rows +-(a, aR^-1, aR^-2) permuted by the rotation: verified layerwise."""
    from symeq.groups import FiniteGroup

    R = matrix([[0, -1], [1, -1]])
    G = FiniteGroup([(R, R)], ["rot3"])
    m = random_equivariant_model(G, ["regular*2"], relu(), rng=4)
    s, _ = scramble(m, rng=5)
    v = verify(s)
    assert v.verdict == "layerwise-equivariant"
    assert all(x > 0 for M in v.actions[0] for x in monomial_parts(M)[1])


@pytest.mark.needs_engine("singular", "giac")  # identifiability of the reduced (2,2,1) tanh_3: minutes in sympy
def test_clone_and_inactive_neuron_weakly_identifiable_reparametrized():
    """Issue acceptance: a tanh-series model with one cloned and one inactive neuron, whose
    clone multiplicities do not let the mirror act at theta: symeq returns theta' of the same
    widths with the same function, layerwise equivariant, exit 0, and the checker accepts it."""
    from symeq.groups import FiniteGroup, permutation_matrix
    from symeq.numbers import identity
    from symeq.submodels import find_submodel_structure

    swap = permutation_matrix([1, 0])
    G = FiniteGroup([(swap, identity(1))], ["swap"])
    # neurons: a=(1,2), a again (clone), b=(2,1) = a mirrored, and an inactive neuron (zero out column)
    W1 = matrix([[1, 2], [1, 2], [2, 1], [5, -3]])
    b1 = [1, 1, 1, 4]
    W2 = matrix([[1, 2, 3, 0]])  # a carries 1 + 2 = 3 in total, b carries 3: invariant
    m = Model(2, [DenseLayer(W1, b1, tanh_series(3)), DenseLayer(W2, [0], None)], G)
    s = find_submodel_structure(m)
    assert s["clones"] == [(1, [0, 1])] and s["inactive"] == [(1, 3, "zero outgoing column")]
    v = verify(m, identifiability=True)
    assert v.verdict == "layerwise-equivariant" and v.exit_code == 0
    assert v.identifiability["status"] == "weakly-identifiable"
    assert v.identifiability["orbit_size"] == 8  # the reduced (2,2,1) tanh_3 parameter: {+-1}^2 x| S_2
    assert v.reparametrized and v.model.widths == m.widths
    for x in ([fmpq(1, 3), fmpq(-2)], [fmpq(5), fmpq(7, 2)]):
        assert v.model(x) == m(x)
    cert = v.certificate()
    assert cert["parameters"]["reparametrized"] is True
    report = check_certificate(cert, model_to_json(m))
    assert report.accepted, report.reasons
    # a theta' with another function is rejected
    cert["parameters"]["layers"][1]["weight"][0][0] = "9"
    assert check_certificate(cert, model_to_json(m)).accepted is False


def test_reduction_preserves_the_function():
    from symeq.submodels import reduce_model

    rng = random.Random(3)
    for _ in range(5):
        rows = [[rng.randint(-2, 2) for _ in range(2)] for _ in range(3)]
        rows += [rows[0], [-x for x in rows[1]], [0, 0]]  # a clone, a negated clone (odd sigma), an inactive one
        W1 = matrix(rows)
        b1 = [1, 2, 0, 1, -2, 3]
        W2 = matrix([[rng.randint(-3, 3) for _ in range(6)] for _ in range(2)])
        m = Model(2, [DenseLayer(W1, b1, tanh_series(3)), DenseLayer(W2, [1, 1], None)])
        r = reduce_model(m)
        assert r.model.widths[1] <= 3
        for x in ([fmpq(1, 2), fmpq(3)], [fmpq(-2), fmpq(1, 5)]):
            assert r.model(x) == m(x)


@pytest.mark.parametrize("gspec", ["mirror:2x2", "shift:3", "sign:2"])
def test_sigmoid_sign_flips_act_affinely(gspec):
    """sigma(-t) = 1 - sigma(t): a scrambled sigmoid-series model has latent actions with
    offsets (y -> -y + 1 on flipped neurons); the checker re-verifies them and rejects a
    tampered offset."""
    import copy

    from symeq.activations import sigmoid_series

    G = builtin_group(gspec)
    m = random_equivariant_model(G, ["regular*2", "regular"], sigmoid_series(3), rng=1)
    rng = random.Random(3)
    for _ in range(10):  # a scramble that flips at least one neuron
        s, k = scramble(m, rng)
        if any(a == -1 for layer in k.alphas for a in layer):
            break
    v = verify(s)
    assert v.verdict == "layerwise-equivariant"
    cert = v.certificate()
    report = check_certificate(cert, model_to_json(s))
    assert report.accepted, report.reasons
    assert cert["latent_offsets"] is not None  # the flips really act affinely here
    if cert["latent_offsets"] is not None:
        bad = copy.deepcopy(cert)
        layer, g = next((i, g) for i, per in enumerate(bad["latent_offsets"]) for g, c in enumerate(per)
                        if any(x != "0" for x in c))
        c = bad["latent_offsets"][layer][g]
        j = next(j for j, x in enumerate(c) if x != "0")
        c[j] = "0"
        assert check_certificate(bad, model_to_json(s)).accepted is False


def test_deeper_relu_without_action_gets_numeric_evidence():
    """Two hidden ReLU layers: the identity through width 4 twice, under the order-3 rotation:
    equivariant, no positive monomial action at theta, fibre-wide undetermined with a numeric
    functional-dimension probe in the notes."""
    from symeq.groups import FiniteGroup

    R = matrix([[0, -1], [1, -1]])
    W1 = matrix([[1, 0], [0, 1], [-1, 0], [0, -1]])
    W2 = matrix([[1, 0, -1, 0], [0, 1, 0, -1], [-1, 0, 1, 0], [0, -1, 0, 1]])
    W3 = matrix([[1, 0, -1, 0], [0, 1, 0, -1]])
    m = Model(2, [DenseLayer(W1, None, relu()), DenseLayer(W2, None, relu()), DenseLayer(W3, None, None)],
              FiniteGroup([(R, R)], ["rot3"]))
    assert m([fmpq(2), fmpq(-3)]) == [2, -3]
    v = verify(m)
    assert v.equivariance.holds and v.verdict == "undetermined" and v.exit_code == 3
    assert any("numeric evidence" in n for n in v.notes)
