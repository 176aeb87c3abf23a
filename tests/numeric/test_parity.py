"""Exact/numeric parity: both derivations, on the same models, reach the same verdicts and actions.

Every activation class (generic, monomial, odd, even-after-shift and monomial-up-to-a-constant
polynomials, tanh and sigmoid series, ReLU) and lightning attention go through the exact path
(:func:`symeq.verify`) and the numeric one (:func:`symeq.numeric.derive_latent_actions_numeric`
of :func:`symeq.numeric.from_exact`) on the same scrambled layerwise-equivariant models.  The
numeric actions must equal the exact ones as signed / scaled permutations (with the offsets of
affine actions: the sigmoid's sign flips, the scalings of a monomial up to a constant), and a
perturbed copy of each model must fail on both paths.  The other tests here check the float
scalings themselves, real torch networks, model files and softmax attention (no exact twin).
"""

import random

import numpy as np
import pytest
from flint import fmpq, fmpq_mat

import symeq
from symeq.activations import monomial, polynomial, real, relu, sigmoid_series, tanh_series
from symeq.attention import random_equivariant_attention, scramble_attention
from symeq.groups import cyclic_shift, image_rotation, mirror, symmetric_group
from symeq.models import DenseLayer, LatentElement, Model, apply_latent, random_equivariant_model, scramble
from symeq.numeric import derive_latent_actions_numeric, from_exact, numeric_activation
from symeq.numeric.layerwise import compare_with_exact
from symeq.numeric.monomial import MonomialAction, as_action

# (id, activation, its symmetry class, group, latent representations); "odd" and "even" are
# shifted on purpose: (t - 1)^3 + 2 (t - 1) is odd about s = 1, (t - 1)^4 + (t - 1)^2 is even
# about s = 1, and t + t^2 = (t + 1/2)^2 - 1/4 is a monomial up to a constant (scalings act affinely)
DENSE_CASES = [
    ("generic", polynomial([0, 1, 1, 0, 1]), "generic", mirror(2, 2), ["regular*2", "regular"]),
    ("monomial", monomial(3), "monomial", cyclic_shift(3), ["regular*2"]),
    ("odd", polynomial([-3, 5, -3, 1]), "odd", image_rotation(2), ["regular", "regular"]),
    ("even-after-shift", polynomial([2, -6, 7, -4, 1]), "even", mirror(2, 2), ["regular*2"]),
    ("monomial-plus-constant", polynomial([0, 1, 1]), "monomial-plus-constant", mirror(2, 2), ["regular*2", "regular"]),
    ("tanh_series", tanh_series(3), "odd", symmetric_group(3), ["regular"]),
    ("sigmoid_series", sigmoid_series(5), "odd-plus-constant", mirror(2, 2), ["regular*2", "regular"]),
    ("relu", relu(), "relu", image_rotation(2), ["regular*2"]),
    # the real activations (issue 20): exact by their symmetry identities, refuted by arb balls
    ("real_tanh", real("tanh"), "odd", mirror(2, 2), ["regular*2", "regular"]),
    ("real_erf", real("erf"), "odd", image_rotation(2), ["regular"]),
    ("real_sigmoid", real("sigmoid"), "odd-plus-constant", mirror(2, 2), ["regular*2", "regular"]),
    ("real_gelu", real("gelu"), "generic", mirror(2, 2), ["regular*2"]),
    ("real_gelu_tanh", real("gelu", approximate="tanh"), "generic", cyclic_shift(3), ["regular"]),
    ("real_silu", real("silu"), "generic", mirror(2, 2), ["regular"]),
    ("real_softplus", real("softplus"), "generic", mirror(2, 2), ["regular"]),
    ("real_elu", real("elu", alpha="3/2"), "generic", mirror(2, 2), ["regular"]),
    ("real_leaky_relu", real("leaky_relu"), "relu", image_rotation(2), ["regular*2"]),
]
CASES = [c[0] for c in DENSE_CASES] + ["attention"]


def _dense_model(case):
    """A random layerwise-equivariant model, hidden by a k in prod K_i with every kind of scaling
    the activation admits (signs, and 2, 1/3, -3/2 for the continuous families)."""
    _, act, symmetry, group, latent = next(c for c in DENSE_CASES if c[0] == case)
    assert act.symmetry == symmetry  # the case tests the class it names
    m = random_equivariant_model(group, latent, act, rng=11)
    choices = [a for a in (fmpq(1), fmpq(-1), fmpq(2), fmpq(1, 3), fmpq(-3, 2)) if act.affine_admissible(a) is not None]
    rng = random.Random(12)
    perms, alphas = [], []
    for n in m.hidden_widths:
        p = list(range(n))
        rng.shuffle(p)
        perms.append(p)
        alphas.append([choices[(j + rng.randrange(len(choices))) % len(choices)] for j in range(n)])
    return apply_latent(m, LatentElement(perms, alphas))


def _attention_model():
    return scramble_attention(random_equivariant_attention(rng=0, dense=[tanh_series(3)]), rng=1)


def _perturbed(model):
    """The same model with one first-layer parameter moved by 1/7 (equivariance breaks)."""
    first = model.layers[0]
    if getattr(first, "kind", "dense") == "attention":
        Head = type(first.heads[0])
        heads = [Head(fmpq_mat(h.query), fmpq_mat(h.key), fmpq_mat(h.value), fmpq_mat(h.out)) for h in first.heads]
        heads[0].value[0, 0] += fmpq(1, 7)
        layers = [type(first)(first.tokens, heads)] + [l.copy() for l in model.layers[1:]]
    else:
        W = fmpq_mat(first.weight)
        W[0, 0] += fmpq(1, 7)
        layers = [DenseLayer(W, list(first.bias), first.activation)] + [l.copy() for l in model.layers[1:]]
    return Model(model.input_dim, layers, model.group, model.name + " (perturbed)")


def _float(q) -> float:
    return int(q.p) / int(q.q)


@pytest.mark.parametrize("case", CASES)
def test_exact_and_numeric_agree(case):
    """Same verdict, same actions (permutation, signs/scalings, offsets) on both paths; and a
    perturbed copy is refused by both."""
    model = _attention_model() if case == "attention" else _dense_model(case)
    v = symeq.verify(model)
    d = derive_latent_actions_numeric(from_exact(model))
    assert v.verdict == "layerwise-equivariant", v.report()
    assert d.within_tolerance and d.max_residual < 1e-9, d.report()
    ex = v.derivation
    assert ex.unique  # one k(g) per generator: the numeric actions have one answer to equal
    assert len(d.actions) == len(ex.actions)
    for i, (nacts, eacts) in enumerate(zip(d.actions, ex.actions)):
        for gi, (n, e) in enumerate(zip(nacts, eacts)):
            e = as_action(e)
            if isinstance(e, MonomialAction):  # dense layers: the same signed/scaled permutation
                assert isinstance(n, MonomialAction)
                assert np.array_equal(n.cols, e.cols), (i, gi)
                assert np.allclose(n.vals, e.vals, rtol=1e-9, atol=1e-12), (i, gi)
            else:  # attention value spaces: P (x) R with R block monomial
                assert np.allclose(np.asarray(n), e, atol=1e-9), (i, gi)
    # affine actions: offsets exactly where the exact path has them, with the same values
    affine_cases = ("sigmoid_series", "monomial-plus-constant", "real_sigmoid")
    if case in affine_cases:
        assert ex.offsets is not None  # the case exercises them (its scramble flips or scales)
    if ex.offsets is None:
        assert d.offsets is None
    else:
        assert d.offsets is not None and case in affine_cases
        for i, per_g in enumerate(ex.offsets):
            for gi, c in enumerate(per_g):
                assert np.allclose(d.offsets[i][gi], [_float(x) for x in c], atol=1e-12), (i, gi)
        assert any(np.any(o != 0) for per_g in d.offsets for o in per_g)
    assert all(r["equal"] for r in compare_with_exact(d, ex, tol=1e-9))

    # negative control: one parameter moved; both paths must say no
    bad = _perturbed(model)
    vb = symeq.verify(bad)
    db = derive_latent_actions_numeric(from_exact(bad))
    assert vb.verdict == "not-equivariant", vb.verdict
    assert not db.within_tolerance and db.max_residual > 1e-4, db.report()


def test_sigmoid_proof_model_has_a_small_numeric_residual():
    """The model of proofs/sigmoid_affine_flips.py: exact proves it with offsets, numeric agrees."""
    act = sigmoid_series(5)
    m = random_equivariant_model(mirror(2, 2), ["regular*2", "regular"], act, rng=5)
    rng = random.Random(6)
    for _ in range(50):  # the proof's draw: the first scramble with a sign flip
        s, k = scramble(m, rng)
        if any(a == -1 for layer in k.alphas for a in layer):
            break
    else:
        raise AssertionError("no scramble with a sign flip in 50 draws")
    v = symeq.verify(s)
    d = derive_latent_actions_numeric(from_exact(s))
    assert v.verdict == "layerwise-equivariant" and v.derivation.offsets is not None
    assert d.within_tolerance and d.max_residual < 1e-12, d.report()
    assert all(r["equal"] for r in compare_with_exact(d, v.derivation, tol=1e-12))


@pytest.mark.parametrize("spec", ["tanh", "sigmoid", "gelu", "relu", "silu", "softplus", "erf",
                                  {"type": "elu", "alpha": "2"}, {"type": "leaky_relu", "slope": "1/10"},
                                  {"type": "gelu", "approximate": "tanh"}, {"type": "sigmoid_series", "order": 5},
                                  {"type": "polynomial", "coeffs": [-3, 5, -3, 1]},
                                  {"type": "polynomial", "coeffs": [0, 1, 1]}, {"type": "monomial", "degree": 2},
                                  {"type": "polynomial", "coeffs": [0, 1, 1, 0, 1]}], ids=str)
def test_float_scalings_satisfy_their_identity(spec):
    """sigma(alpha t + s(1 - alpha)) = q sigma(t) + o on sample points, for every admissible alpha
    of the float view (read off the exact activation where there is one), and fails for alpha = -1
    (and 2) where the view says it is not admissible."""
    act = numeric_activation(spec)
    t = np.linspace(-2.0, 2.0, 41)
    for alpha in (-1.0, 2.0, -0.5, 1.0):
        qo = act.affine_admissible(alpha)
        lhs = act(alpha * t + act.shift * (1 - alpha))
        if qo is None:
            assert not any(np.allclose(lhs, q * act(t) + o) for q in (1.0, -1.0, alpha, abs(alpha))
                           for o in (0.0, 1.0)), (spec, alpha)
        else:
            q, o = qo
            assert np.allclose(lhs, q * act(t) + o, rtol=1e-12, atol=1e-12), (spec, alpha)


def test_torch_sigmoid_network_with_flipped_neurons():
    """A user's torch network: mirror-equivariant by weight sharing (written out below), then some
    hidden neurons flipped (z -> -z, so y -> 1 - y, which the next bias absorbs), as training or
    a re-parametrisation may leave it.  The numeric path finds the affine actions; a perturbed
    copy is not within tolerance."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    from symeq.numeric import from_torch

    rng = np.random.default_rng(3)
    swap = [1, 0, 3, 2]  # the mirror of a 2x2 image on pixels, and on the hidden pairs below
    W1 = rng.standard_normal((4, 4))
    W1[[1, 3]] = W1[[0, 2]][:, swap]  # neuron 2k+1 sees the mirrored image through neuron 2k's weights
    b1 = np.repeat(rng.standard_normal(2), 2)
    W2 = rng.standard_normal((4, 4))
    W2[[1, 3]] = W2[[0, 2]][:, swap]
    b2 = np.repeat(rng.standard_normal(2), 2)
    # flip hidden neurons 0 and 3: sigmoid(-z) = 1 - sigmoid(z)
    flip = np.array([-1.0, 1.0, 1.0, -1.0])
    b2 = b2 + W2 @ np.where(flip < 0, 1.0, 0.0)
    W2 = W2 * flip
    W1, b1 = W1 * flip[:, None], b1 * flip
    seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 4)).double()
    with torch.no_grad():
        for lin, (W, bias) in zip((seq[0], seq[2]), ((W1, b1), (W2, b2))):
            lin.weight.copy_(torch.from_numpy(W))
            lin.bias.copy_(torch.from_numpy(bias))
    m = from_torch(seq, group=mirror(2, 2))
    assert m.equivariance_error(rng=0) < 1e-12  # the network is equivariant end to end
    d = derive_latent_actions_numeric(m)
    assert d.within_tolerance and d.max_residual < 1e-12, d.report()
    rho = d.actions[0][0]
    assert rho.cols.tolist() == [1, 0, 3, 2]
    assert rho.vals.tolist() == [-1.0, -1.0, -1.0, -1.0]  # each flipped neuron meets an unflipped one
    assert rho.offset.tolist() == [1.0, 1.0, 1.0, 1.0]
    with torch.no_grad():
        seq[0].weight[0, 0] += 0.05
    assert not derive_latent_actions_numeric(from_torch(seq, group=mirror(2, 2))).within_tolerance


def test_numeric_check_reads_an_attention_model_file(tmp_path):
    """An attention model in the model file format (exact numbers, or floats) goes through
    ``symeq numeric-check``; the perturbed one exits 1."""
    import json

    from symeq.cli import main
    from symeq.io import model_to_json

    model = _attention_model()
    f = tmp_path / "attention.json"
    f.write_text(json.dumps(model_to_json(model)))
    assert main(["numeric-check", str(f)]) == 0
    data = model_to_json(_perturbed(model))
    data["layers"][0]["heads"][1]["value"][0][0] = 0.123  # a float where the exact reader wants "p/q"
    g = tmp_path / "attention-float.json"
    g.write_text(json.dumps(data))
    assert main(["numeric-check", str(g)]) == 1


def test_softmax_heads_match_only_with_equal_scores():
    """Softmax attention has no exact twin; its heads match only when C^T A_h C = A_k (no scalar:
    softmax(lambda S) != lambda softmax(S)).  Scaling each head's query by f and its value by 1/f
    leaves lightning attention unchanged (still equivariant) and breaks the softmax model's
    equivariance: the numeric walk must tell them apart."""
    from symeq.numeric import NumericModel
    from symeq.layers.attention.floating import NumericAttention

    n = from_exact(_attention_model())
    att, f = n.layers[0], (2.0, 3.0, 5.0, 7.0)
    for kind, equivariant in (("softmax", True), ("lightning", True)):
        m = NumericModel(n.input_dim, [NumericAttention(att.tokens, att.query, att.key, att.value, att.out, kind)]
                         + n.layers[1:], n.group)
        assert derive_latent_actions_numeric(m).within_tolerance == equivariant
    for kind, equivariant in (("softmax", False), ("lightning", True)):
        scaled = NumericAttention(att.tokens, [q * x for q, x in zip(att.query, f)], att.key,
                                  [v / x for v, x in zip(att.value, f)], att.out, kind)
        m = NumericModel(n.input_dim, [scaled] + n.layers[1:], n.group)
        assert (m.equivariance_error(rng=0) < 1e-9) == equivariant
        d = derive_latent_actions_numeric(m)
        assert d.within_tolerance == equivariant, (kind, d.report())


def test_relu_far_from_equivariant_gives_residuals_not_a_crash():
    """Rows that no positive scaling relates (alpha <= 0 fits best) get residual 1; the walk
    goes on and reports every layer (it used to feed NaN into the next assignment)."""
    from symeq.numeric import NumericDenseLayer, NumericModel

    relu_ = numeric_activation("relu")
    for seed in range(4):
        rng = np.random.default_rng(seed)
        m = NumericModel(4, [NumericDenseLayer(rng.standard_normal((6, 4)), rng.standard_normal(6), relu_),
                             NumericDenseLayer(rng.standard_normal((6, 6)), rng.standard_normal(6), relu_),
                             NumericDenseLayer(rng.standard_normal((4, 6)), rng.standard_normal(4))], mirror(2, 2))
        d = derive_latent_actions_numeric(m)
        assert not d.within_tolerance and d.max_residual >= 0.5
        assert all(np.all(np.isfinite(a.vals)) for acts in d.actions for a in acts)


def test_float_sigmoid_model_recovers_the_scrambled_affine_truth():
    """A float sigmoid model hidden by random sign flips: the derived action is k rho k^-1 with
    k the affine post-activation action of the flips (y -> 1 - y), offsets included."""
    from symeq.numeric import random_equivariant_numeric, scramble_numeric

    m = random_equivariant_numeric(mirror(2, 4), [16, 8], numeric_activation("sigmoid"), rng=0)
    s, k = scramble_numeric(m, rng=1)
    d = derive_latent_actions_numeric(s)
    assert d.within_tolerance and d.offsets is not None, d.report()
    for i, (rho, kpost) in enumerate(zip(m.meta["latent_representations"], k.post_actions(m))):
        assert kpost.offset is not None  # some neurons were flipped
        assert d.actions[i][0].allclose(kpost @ rho[0] @ kpost.inverse()), i


@pytest.mark.parametrize("spec", [{"type": "monomial", "degree": 3}, {"type": "polynomial", "coeffs": [0, 1, 1]},
                                  "relu", "tanh"], ids=str)
def test_functional_dimension_uses_the_same_scalings(spec):
    """The tangent directions of the continuous scalings (read off the same Scalings) lie in the
    Jacobian's kernel, offsets of a monomial up to a constant included; finite K has none."""
    from symeq.numeric import NumericDenseLayer, NumericModel
    from symeq.numeric.fdim import jacobian, latent_dimension, symmetry_directions

    rng = np.random.default_rng(0)
    act = numeric_activation(spec)
    m = NumericModel(3, [NumericDenseLayer(rng.standard_normal((4, 3)), rng.standard_normal(4), act),
                         NumericDenseLayer(rng.standard_normal((5, 4)), rng.standard_normal(5), act),
                         NumericDenseLayer(rng.standard_normal((2, 5)), rng.standard_normal(2))])
    Z = symmetry_directions(m)
    continuous = act.scalings.alphas in ("nonzero", "positive")
    assert Z.shape[1] == latent_dimension(m) == (9 if continuous else 0)
    if continuous:
        J = jacobian(m, rng.standard_normal((60, 3)))
        assert np.abs(J @ Z).max() <= 1e-10 * np.abs(J).max()


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "gelu", "silu", "softplus", "elu", "leaky_relu", "erf"])
def test_float_twin_reads_k_from_the_exact_definition(name):
    """The float view of K of each real activation is read off the exact one (no second table)."""
    from symeq.numeric.models import Scalings

    act = real(name)
    num = numeric_activation(act.to_spec())
    assert num.scalings == Scalings.of_exact(act) and num.symmetry == act.symmetry
    assert num.latent_group == act.latent_group and num.spec == act.to_spec()


def test_torch_real_activation_modules_are_read_with_their_parameters():
    """SiLU, Softplus, ELU(alpha), LeakyReLU(slope) and GELU(tanh) become the real activations."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'symeq[numeric]' (or pip install torch==2.13.0)")
    from symeq.numeric import from_torch

    mods = [torch.nn.SiLU(), torch.nn.Softplus(), torch.nn.ELU(alpha=0.5), torch.nn.LeakyReLU(0.1),
            torch.nn.GELU(approximate="tanh")]
    specs = [{"type": "silu"}, {"type": "softplus"}, {"type": "elu", "alpha": "1/2"},
             {"type": "leaky_relu", "slope": "1/10"}, {"type": "gelu", "approximate": "tanh"}]
    for mod, spec in zip(mods, specs):
        seq = torch.nn.Sequential(torch.nn.Linear(3, 4), mod, torch.nn.Linear(4, 2)).double()
        m = from_torch(seq)
        assert m.layers[0].activation.spec == spec
        x = np.linspace(-2, 2, 12).reshape(4, 3)
        with torch.no_grad():
            want = seq(torch.from_numpy(x)).numpy()
        assert np.allclose(m.forward(x), want, atol=1e-12), spec
        assert isinstance(m.layers[0].activation.torch_module(), type(mod))
