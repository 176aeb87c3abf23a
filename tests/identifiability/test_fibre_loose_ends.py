"""The Gröbner path's loose ends: decisions without a Gröbner basis, inactive monomial neurons,
affine latent actions of shifted monomials, and points outside the gauge slice (docs/theory.md).

Every model is written here, the way users make them: small integer weights, weights pruned to
zero (a dead neuron), a network scrambled by a latent symmetry.
"""

import copy
import random

import pytest
from flint import fmpq

from symeq.activations import monomial, polynomial, sigmoid_series, tanh_series
from symeq_check import check_certificate
from symeq.fibre import compare_with_orbit, fibre_ideal, latent_orbit, line_in_fibre
from symeq.fibre.orbit import structural_decision
from symeq.fibre.witness import jacobian_at
from symeq.groups import builtin_group
from symeq.io import model_to_json, save_model
from symeq.models import DenseLayer, LatentElement, Model, apply_latent, random_equivariant_model
from symeq.theorem import verify

TANH3 = tanh_series(3)
T_PLUS_T2 = polynomial([0, 1, 1])            # t + t^2 = (t + 1/2)^2 - 1/4


def _moved(model, ideal, d, s=1):
    """The model with parameter theta + s d (d over the ideal's unknowns), for an end-to-end check."""
    vals = {**ideal.fixed, **{v: ideal.point[v] + s * fmpq(d.get(v, 0)) for v in ideal.variables}}
    layers = []
    for l, layer in enumerate(model.layers, 1):
        W = [[vals[f"w{l}_{i}_{j}"] for j in range(layer.in_dim)] for i in range(layer.out_dim)]
        b = [vals.get(f"b{l}_{i}", fmpq(0)) for i in range(layer.out_dim)]
        layers.append(DenseLayer(W, b, layer.activation))
    return Model(model.input_dim, layers)


def _same_function(m1, m2, n=5, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        x = [fmpq(rng.randint(-9, 9), rng.randint(1, 5)) for _ in range(m1.input_dim)]
        if m1(x) != m2(x):
            return False
    return True


# -- 1. the equation count (Krull) ------------------------------------------------------------------

def test_231_tanh_is_decided_by_the_equation_count():
    """(2,3,1) tanh_3 with biases: 13 unknowns, 10 coefficients of a cubic in two variables.
    Every component of the fibre has dimension >= 3, the orbit is finite: not identifiable,
    without a Gröbner basis (it used to run out of a 60 s budget)."""
    m = Model(2, [DenseLayer([[1, 2], [3, -1], [2, 5]], [1, -2, 3], TANH3), DenseLayer([[2, -1, 3]], [1], None)])
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert c.status == "not-identifiable" and c.criterion == "equation-count"
    assert "13 unknowns but 10 equations" in c.reason and "Krull" in c.reason
    assert c.dimension is None and c.dimension_lower_bound == 3 and c.groebner is None
    assert c.orbit_size == 48                                  # {+-1}^3 x| S_3, finite: no gauge
    # the witness: J(theta) has full rank, so the real fibre is a 3-manifold; ker J is its tangent space
    w = c.witness
    assert w["kind"] == "equation-count" and c.witness_real is True and len(w["tangent_directions"]) == 3
    J = jacobian_at(c.ideal)
    for d in w["tangent_directions"]:
        v = [fmpq(*map(int, (d.get(x, "0").split("/") + ["1"])[:2])) for x in c.ideal.variables]
        assert all(sum((J[i, j] * v[j] for j in range(len(v))), fmpq(0)) == 0 for i in range(J.nrows()))


def test_equation_count_never_fires_when_equations_suffice():
    """(2,2,1) tanh_3 with biases: 9 unknowns, 10 equations -> the count says nothing (Gröbner decides)."""
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], TANH3), DenseLayer([[2, -1]], [1], None)])
    I = fibre_ideal(m)
    assert I.excess == 9 - 10 and structural_decision(m, I) is None


# -- 1b. dead neurons ----------------------------------------------------------------------------

def _pruned_tanh():
    """A (2,3,1) tanh_3 net whose small weights were pruned to zero, as a user would: neuron 2 is dead."""
    raw = [[1.02, 1.97], [2.96, -1.01], [0.04, -0.03]]
    W1 = [[round(x) if abs(x) > 0.1 else 0 for x in row] for row in raw]
    return Model(2, [DenseLayer(W1, [1, -2, 1], TANH3), DenseLayer([[2, -1, 3]], [1], None)])


def test_dead_neuron_line_decides_and_is_exact():
    m = _pruned_tanh()
    assert [list(map(int, r)) for r in m.layers[0].weight.tolist()][2] == [0, 0]
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert c.status == "not-identifiable" and c.criterion == "inactive-neuron"
    assert "neuron 3 of hidden layer 1 is dead" in c.reason and c.witness_real is True  # row 2, numbered from 1
    d = {k: fmpq(*map(int, (v.split("/") + ["1"])[:2])) for k, v in c.witness["line"].items()}
    # the outgoing weight 3 moves to 0 and the output bias absorbs 3 * tanh_3(1) = 3 * 2/3
    assert d == {"w2_0_2": fmpq(-3), "b2_0": fmpq(2)}
    assert line_in_fibre(c.ideal, d)
    for s in (1, fmpq(-5, 2)):                                   # the whole network, end to end
        assert _same_function(m, _moved(m, c.ideal, d, s))


def test_unused_neuron_line():
    """A zero outgoing column: the neuron's incoming weights are free."""
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], TANH3), DenseLayer([[2, 0]], [1], None)])
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert c.status == "not-identifiable" and c.criterion == "inactive-neuron" and "unused" in c.reason
    d = {k: fmpq(v) for k, v in c.witness["line"].items()}
    assert _same_function(m, _moved(m, c.ideal, d, 7))


# -- 2. a monomial neuron with a zero incoming row ------------------------------------------------

def test_monomial_zero_row_is_an_inactive_neuron(tmp_path, capsys):
    """sigma = t^3, neuron 1 has a zero row: no entry fixes its scale.  `fibre` used to exit 2 with a
    hint about gauge='auto'; now it answers not-identifiable (exit 1) with the dead neuron's line,
    and `verify --identifiability` agrees: weakly identifiable (the reduced (2,2,1) t^3 parameter is
    identifiable, Sylvester), so not identifiable itself."""
    from symeq.cli import main
    from symeq.groups import FiniteGroup, permutation_matrix
    from symeq.numbers import identity

    swap = FiniteGroup([(permutation_matrix([1, 0]), identity(1))], ["swap"])
    m = Model(2, [DenseLayer([[1, 2], [0, 0], [2, 1]], None, monomial(3)),
                  DenseLayer([[2, 5, 2]], None, None)], swap)
    I = fibre_ideal(m)
    assert I.ungauged == [(1, 1)] and [g.name for g in I.gauge] == ["w1_0_0", "w1_2_0"]
    pts, _ = latent_orbit(m, I)                       # no error: the finite part is enumerated
    assert len(pts) == 2
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert c.status == "not-identifiable" and c.criterion == "inactive-neuron"
    d = {k: fmpq(v) for k, v in c.witness["line"].items()}
    assert d == {"w2_0_1": fmpq(-5)} and _same_function(m, _moved(m, c.ideal, d))
    path = tmp_path / "dead.json"
    save_model(m, path)
    assert main(["fibre", str(path), "--method", "groebner", "--engine", "sympy", "--timeout", "60"]) == 1
    out = capsys.readouterr().out
    assert "verdict: not-identifiable" in out and "dead" in out and "gauge='auto'" not in out
    v = verify(m, identifiability=True)
    assert v.verdict == "layerwise-equivariant" and v.identifiability["status"] == "weakly-identifiable"


def test_gauge_avoids_weights_from_dead_neurons():
    """Two monomial layers; neuron 0 of layer 1 is dead.  Layer 2's gauge uses live weights, so the
    dead neuron's outgoing weights stay unknowns (its free direction)."""
    m = Model(2, [DenseLayer([[0, 0], [1, 2]], [0, 0], monomial(3)),
                  DenseLayer([[4, 1], [2, -3]], [0, 0], monomial(3)),
                  DenseLayer([[1, 1]], [0], None)])
    I = fibre_ideal(m)
    assert [g.name for g in I.gauge if g.layer == 2] == ["w2_0_1", "w2_1_1"]
    assert {"w2_0_0", "w2_1_0"} <= set(I.variables)
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert c.status == "not-identifiable" and c.criterion == "inactive-neuron"


# -- 3. shifted monomials: affine latent actions ---------------------------------------------------

@pytest.mark.parametrize("act,sym", [
    (T_PLUS_T2, "monomial-plus-constant"),
    (polynomial([1, 0, 0, 1]), "monomial-plus-constant"),    # 1 + t^3
    (polynomial([5, 2, 1]), "monomial-plus-constant"),       # (t + 1)^2 + 4
    (monomial(2), "monomial"), (TANH3, "odd"), (sigmoid_series(3), "odd-plus-constant"),
    (polynomial([1, 0, 1, 0, 1]), "even"), (polynomial([0, 1, 1, 0, 1]), "generic"),
])
def test_absorbed_constant_rule_for_every_class(act, sym):
    """One rule: sigma(alpha t + s(1 - alpha)) = q sigma(t) + o; an offset o != 0 is a latent symmetry
    only when a bias absorbs it.  So the bias-free group is exactly the offset-free part."""
    assert act.symmetry == sym
    s = act.shift
    for alpha in (fmpq(-1), fmpq(2), fmpq(-1, 3), fmpq(5, 2)):
        qo = act.affine_admissible(alpha)
        holds = qo is not None and all(act(alpha * t + s * (1 - alpha)) == qo[0] * act(t) + qo[1]
                                       for t in (fmpq(k, 2) for k in range(-6, 7)))
        assert (qo is not None) == holds
        lin = act.admissible(alpha)
        assert (lin is not None) == (qo is not None and qo[1] == 0)
        with_bias = act.continuous(True) or alpha in act.finite_scalings(True)
        without = (act.continuous(False) or alpha in act.finite_scalings(False))
        assert with_bias == (qo is not None)
        assert without == (lin is not None and (s == 0 or alpha == 1))


def test_t_plus_t2_scalings_are_latent_symmetries():
    """z -> alpha (z + 1/2) - 1/2 multiplies t + t^2's output by alpha^2 plus a constant that the next
    bias absorbs: the scaled network computes the same function, exactly."""
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], [1, -2], T_PLUS_T2), DenseLayer([[2, -1]], [1], None)])
    k = LatentElement([[1, 0]], [[fmpq(3, 2), fmpq(-4)]])
    s = apply_latent(m, k)
    assert s.layers[0].weight != m.layers[0].weight and _same_function(m, s)
    assert T_PLUS_T2.affine_admissible(fmpq(3, 2)) == (fmpq(9, 4), fmpq(-1, 4) * (1 - fmpq(9, 4)))


@pytest.mark.parametrize("name,model", [
    ("111", Model(1, [DenseLayer([[2]], [1], T_PLUS_T2), DenseLayer([[3]], [1], None)])),
    ("211", Model(2, [DenseLayer([[2, -1]], [1], T_PLUS_T2), DenseLayer([[3]], [1], None)])),
    ("1111", Model(1, [DenseLayer([[2]], [1], T_PLUS_T2), DenseLayer([[3]], [-1], T_PLUS_T2),
                       DenseLayer([[2]], [1], None)])),
])
@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_shifted_monomial_fibre_is_the_orbit_of_the_scalings(name, model):
    """With biases, the fibre of these t + t^2 nets is the orbit of the affine scalings: one point in
    the gauge slice.  (They used to be reported not identifiable: K was taken to be {+-1}.)"""
    I = fibre_ideal(model)
    assert len(I.gauge) == len(model.layers) - 1
    c = compare_with_orbit(model, engine="auto", timeout=60)
    assert (c.status, c.dimension, c.degree, c.orbit_size, c.criterion) == ("identifiable", 0, 1, 1, "groebner")


def test_bias_free_t_plus_t2_has_no_affine_scalings():
    """Without biases nothing absorbs the offsets (nor the shift s (1 - alpha)): no gauge, K = S_n."""
    m = Model(2, [DenseLayer([[1, 2], [3, -1]], None, T_PLUS_T2), DenseLayer([[2, -1]], None, None)])
    assert fibre_ideal(m).gauge == [] and T_PLUS_T2.group_name(False) == "permutations"
    pts, stab = latent_orbit(m)
    assert (len(pts), stab) == (2, 1)


def test_derivation_and_checker_accept_affine_scalings_of_t_plus_t2():
    """A layerwise-equivariant t + t^2 net with biases, scrambled by scalings alpha not in {+-1}: the
    derivation finds affine latent actions, the stdlib checker accepts them and rejects a tampered
    offset.  Bias-free, the same net's actions carry no offsets."""
    G = builtin_group("mirror:2x2")
    m = random_equivariant_model(G, ["regular*2"], T_PLUS_T2, rng=1)
    n = m.widths[1]
    k = LatentElement([list(reversed(range(n)))], [[fmpq(3, 2), fmpq(-2), fmpq(1, 3), fmpq(5)][:n]])
    s = apply_latent(m, k)
    assert _same_function(m, s)
    v = verify(s)
    assert v.verdict == "layerwise-equivariant"
    cert = v.certificate()
    assert cert["latent_offsets"] is not None
    assert check_certificate(cert, model_to_json(s)).accepted
    bad = copy.deepcopy(cert)
    per = bad["latent_offsets"][0][0]
    j = next(j for j, x in enumerate(per) if x != "0")
    per[j] = "0"
    assert check_certificate(bad, model_to_json(s)).accepted is False
    free = random_equivariant_model(G, ["regular*2"], T_PLUS_T2, rng=1, bias=False)
    vf = verify(free)
    assert vf.verdict == "layerwise-equivariant" and vf.certificate().get("latent_offsets") is None


# -- 4. points outside the gauge slice --------------------------------------------------------------

@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_gauge_entry_nonzero_on_the_whole_orbit():
    """theta's first row starts with a zero.  The old slice (first nonzero entry of each row) fixed
    w1_0_1 and w1_1_0, so the swapped orbit point (w1_1_0 = 0 there) never reached it: orbit 1.
    Column 1 is nonzero in every row, hence at every orbit point: the slice now sees both."""
    m = Model(2, [DenseLayer([[0, 2], [3, -1]], None, monomial(3)), DenseLayer([[2, -1]], None, None)])
    I = fibre_ideal(m)
    assert [g.name for g in I.gauge] == ["w1_0_1", "w1_1_1"]
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert (c.status, c.degree, c.orbit_size) == ("identifiable", 2, 2)
    assert "no fibre point has a zero gauge entry" in c.reason


@pytest.mark.needs_engine("singular", "giac")  # sympy runs into the 60 s budgets on the three-layer ideal
def test_completeness_is_checked_and_honest_when_it_cannot_be():
    from symeq.fibre.orbit import gauge_completeness

    dense = Model(2, [DenseLayer([[1, 2], [3, -1]], None, monomial(3)), DenseLayer([[2, -1]], None, None)])
    ok, why = gauge_completeness(dense, fibre_ideal(dense), engine="auto", timeout=60)
    assert ok is True and "2 empty ideals" in why
    # a second layer with zero weights, which the first layer's permutations move: the orbit itself
    # has points with a zero gauge entry, so a zero of the check's ideal proves nothing -- "unknown",
    # never a guess
    sparse = Model(2, [DenseLayer([[1, 2], [3, -1]], None, monomial(3)),
                       DenseLayer([[0, 2], [3, 0]], None, monomial(3)), DenseLayer([[2, -1]], None, None)])
    ok, why = gauge_completeness(sparse, fibre_ideal(sparse), engine="auto", timeout=60)
    assert ok is None and "orbit points may too" in why
    c = compare_with_orbit(sparse, engine="auto", timeout=60)
    assert c.status == "unknown" and "points outside it are not excluded" in c.reason


@pytest.mark.needs_engine  # Groebner bases: seconds with sympy alone, under 1 s with an engine (CI's second run)
def test_first_layer_without_a_safe_column_gets_a_linear_form():
    """Pruned first layer: every column has a zero.  A linear form L = w_0 + t w_1 (+ ...) nonzero on
    every row is fixed instead (an equation; no entry eliminated), so the slice sees the whole
    S_2 orbit and the completeness check decides: identifiable (binary cubic of rank 2, Sylvester)."""
    raw = [[0.03, 2.01], [2.98, -0.02]]
    W1 = [[round(x) if abs(x) > 0.1 else 0 for x in row] for row in raw]
    m = Model(2, [DenseLayer(W1, None, monomial(3)), DenseLayer([[2, -1]], None, None)])
    I = fibre_ideal(m)
    assert all(g.form for g in I.gauge) and I.fixed == {} and I.n_variables == 6
    pts, stab = latent_orbit(m, I)
    assert (len(pts), stab) == (2, 1)
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert (c.status, c.degree, c.orbit_size) == ("identifiable", 2, 2)
    assert "no fibre point has a zero gauge entry" in c.reason


def test_pruned_torch_network_rounded_to_rationals():
    """A torch MLP, magnitude-pruned (torch.nn.utils.prune) so that one hidden neuron loses all its
    incoming weights, its weights rounded to rationals with small denominators, tanh replaced by its
    cubic Taylor polynomial: the dead neuron decides, in milliseconds, with an exact line."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    import torch.nn.utils.prune  # noqa: F401  (a submodule, not loaded by `import torch`)
    from fractions import Fraction

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        net[0].weight[1] *= 1e-3                                  # a neuron that barely listens
    torch.nn.utils.prune.l1_unstructured(net[0], "weight", amount=2)   # prunes its two weights
    assert float(net[0].weight[1].detach().abs().sum()) == 0.0

    def exact(t):
        return [[str(Fraction(float(x)).limit_denominator(16)) for x in row] for row in t.detach().tolist()]

    layers = [DenseLayer(exact(net[0].weight), exact(net[0].bias[None])[0], TANH3),
              DenseLayer(exact(net[2].weight), exact(net[2].bias[None])[0], None)]
    m = Model(2, layers)
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert c.status == "not-identifiable" and c.criterion == "inactive-neuron"
    assert "neuron 2 of hidden layer 1 is dead" in c.reason  # weight row 1, numbered from 1
    d = {k: fmpq(*map(int, (v.split("/") + ["1"])[:2])) for k, v in c.witness["line"].items()}
    assert _same_function(m, _moved(m, c.ideal, d))
