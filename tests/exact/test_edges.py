"""Right answers at the edges: size limits inside ``verify --identifiability``, the memory guard
checked before an expansion, scrambling bias-free models, the latent group's name of bias-free
models, the numeric orbit dimension of affine scalings, and merging clones by the absorbed-constant
rule (docs/theory.md).

The models are made the way users make them: ``symeq example`` and ``symeq generate`` files, models
whose weights are shared by a group's regular representation, and weights rounded until neurons tie.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from flint import fmpq

from symeq import procs
from symeq.activations import polynomial, sigmoid_series, tanh_series
from symeq_check import check_certificate
from symeq.cli import main
from symeq.errors import MemoryLimit
from symeq.examples import builtin_example
from symeq.fibre.ideal import fibre_ideal
from symeq.groups import builtin_group, trivial_group
from symeq.io import load_model
from symeq.models import DenseLayer, Model, random_equivariant_model, scramble
from symeq.sizes import expansion_bytes, expansion_size, guard_expansion, limits
from symeq.theorem import latent_group_names, verify

GIB = 2 ** 30


def _points(n, k=4, seed=0):
    r = random.Random(seed)
    return [[fmpq(r.randint(-7, 7), r.randint(1, 5)) for _ in range(n)] for _ in range(k)]


def _same_function(a, b) -> bool:
    return all(a(x) == b(x) for x in _points(a.input_dim))


def _biases(model):
    return [b for layer in model.layers for b in layer.bias]


@pytest.fixture
def ram(monkeypatch):
    """Set the machine's RAM figure (75 % of it is the default memory budget) without allocating."""
    procs.set_memory_cap(None)

    def set_ram(nbytes):
        monkeypatch.setattr(procs, "default_memory_cap", lambda: nbytes * 3 // 4)
    yield set_ram
    procs.set_memory_cap(None)


# -- 1. verify --identifiability past a size limit ------------------------------------------------

def test_identifiability_limit_keeps_the_layerwise_result_json(tmp_path, capsys):
    main(["example", "--out", str(tmp_path / "e.json")])
    capsys.readouterr()
    code = main(["verify", str(tmp_path / "e.json"), "--identifiability", "--json", "--timeout", "60"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["exit_code"] == 3
    assert out["verdict"] == "layerwise-equivariant"          # the conclusion is still reported
    assert out["latent_actions"] and all(out["latent_actions"])
    ident = out["identifiability"]
    # issue 21: the exact Jacobian rank answers locally; the Gröbner step's refusal is kept with its limit
    assert ident["status"] == "locally-identifiable" and ident["method"] == "jacobian-rank"
    lim = ident["groebner_limit"]
    assert lim["limit"] == "monomials" and lim["option"] == "--max-monomials"
    assert lim["value"] > lim["maximum"] == 250000
    assert any("would not help" in h for h in ident["hints"])  # the memory estimate would refuse it


def test_identifiability_limit_text_report(tmp_path, capsys):
    main(["example", "--out", str(tmp_path / "e.json")])
    capsys.readouterr()
    code = main(["verify", str(tmp_path / "e.json"), "--identifiability", "--timeout", "60"])
    cap = capsys.readouterr()
    assert code == 3
    assert "rho_1(mirror)" in cap.out and "homomorphism: ok" in cap.out
    # issue 21: locally identifiable by the Jacobian rank; the global premise stays open (exit 3)
    assert "Identifiability: locally-identifiable" in cap.out and "groebner: refused" in cap.out
    assert "Verdict: layerwise-equivariant (exit 3; identifiability locally-identifiable" in cap.out
    assert "error:" not in cap.err


def test_identifiability_limit_on_a_small_model_in_python():
    """(2,3,1) tanh_3 with biases is decided in milliseconds by the equation count, unless the
    monomial limit refuses the fibre ideal first: then undetermined, never a guess."""
    m = Model(2, [DenseLayer([[1, 2], [3, -1], [2, 5]], [1, -2, 3], tanh_series(3)),
                  DenseLayer([[2, -1, 3]], [1], None)], group=trivial_group(2, 1))
    decided = verify(m, method="grid", identifiability=True)
    assert decided.identifiability["status"] == "not-identifiable" and decided.exit_code == 0
    with limits(monomials=30):
        v = verify(m, method="grid", identifiability=True)
    assert v.verdict == "layerwise-equivariant" and v.actions is not None
    assert v.identifiability["status"] == "undetermined" and v.exit_code == 3
    assert v.identifiability["limit"]["maximum"] == 30


def test_identifiability_budget_keeps_the_layerwise_result(monkeypatch):
    """The fibre ideal's deadline ran out (simulated: it needs seconds on a real model): the
    conclusion stays, identifiability is undetermined with --timeout named (before: the whole
    verification was lost to the BudgetExceeded)."""
    from symeq.errors import BudgetExceeded
    from symeq.fibre import orbit

    def out_of_time(*a, **k):
        raise BudgetExceeded("time budget of 1 s exceeded while expanding the fibre ideal; raise --timeout")

    monkeypatch.setattr(orbit, "compare_with_orbit", out_of_time)
    m = Model(2, [DenseLayer([[1, 2], [3, -1], [2, 5]], [1, -2, 3], tanh_series(3)),
                  DenseLayer([[2, -1, 3]], [1], None)], group=trivial_group(2, 1))
    v = verify(m, method="grid", identifiability=True, timeout=1)
    assert v.verdict == "layerwise-equivariant" and v.actions is not None and v.exit_code == 3
    assert v.identifiability["status"] == "undetermined"
    assert v.identifiability["limit"]["option"] == "--timeout" and "time budget" in v.identifiability["detail"]


# -- 2. the memory guard, checked before the expansion --------------------------------------------

def _deep_tanh():
    r = random.Random(1)
    w = [2, 4, 4, 2]
    layers = [DenseLayer([[r.randint(-9, 9) or 1 for _ in range(w[i])] for _ in range(w[i + 1])],
                         [r.randint(-9, 9) for _ in range(w[i + 1])], tanh_series(3) if i < 2 else None)
              for i in range(3)]
    return Model(2, layers)


def test_memory_guard_refuses_before_expanding(ram):
    m = _deep_tanh()
    est = expansion_size(m, symbolic=True)
    need = expansion_bytes(est)
    assert 0.5 * GIB < need < 4 * GIB   # measured peak of this fibre ideal: about 0.53 GB
    ram(64 * GIB)
    guard_expansion(m, "the fibre ideal", symbolic=True)   # fits: no error
    ram(GIB // 2)
    with pytest.raises(MemoryLimit) as e:
        fibre_ideal(m)
    assert e.value.exit_code == 2 and "--memory" in str(e.value) and "GB" in str(e.value)
    assert e.value.value > e.value.maximum


def test_memory_guard_covers_the_symbolic_premise(ram):
    from symeq.equivariance import decide_equivariance

    m = builtin_example()
    ram(64 * GIB)
    assert decide_equivariance(m, method="symbolic").holds
    ram(2 ** 20)   # 1 MiB of RAM: the premise's expansion (numeric weights) no longer fits
    with pytest.raises(MemoryLimit, match="premise"):
        decide_equivariance(m, method="symbolic")


def test_memory_option_is_the_budget(ram):
    ram(64 * GIB)
    procs.set_memory_cap(0.25)
    with pytest.raises(MemoryLimit):
        guard_expansion(_deep_tanh(), "the fibre ideal", symbolic=True)


def test_raised_monomial_limit_meets_the_memory_guard_cli(tmp_path, capsys, ram):
    ram(8 * GIB)
    main(["example", "--out", str(tmp_path / "e.json")])
    capsys.readouterr()
    code = main(["fibre", str(tmp_path / "e.json"), "--max-monomials", str(10 ** 12), "--timeout", "60"])
    err = capsys.readouterr().err
    # issue 21: the local answer (exit 3) stands; the Gröbner step was refused by the memory guard
    assert code == 3 and "memory budget" in err and "--memory" in err and "Traceback" not in err
    code = main(["verify", str(tmp_path / "e.json"), "--identifiability", "--json", "--max-monomials",
                 str(10 ** 12), "--timeout", "60"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["verdict"] == "layerwise-equivariant"
    assert out["identifiability"]["status"] == "locally-identifiable"
    assert out["identifiability"]["groebner_limit"]["option"] == "--memory"


# -- 3. scrambling keeps a bias-free model bias-free ----------------------------------------------

@pytest.mark.parametrize("activation", ["poly:0,1,1", "poly:1,2,1", "sigmoid:3", "poly:2,-4,3,-1"])
def test_generate_scramble_keeps_bias_free(tmp_path, capsys, activation):
    """t + t^2 (centre -1/2), (t + 1)^2, the sigmoid series (affine flips) and a cubic odd about
    t = 1: every scaling beyond a permutation would need a bias."""
    for seed in range(4):
        plain, scr = tmp_path / f"p{seed}.json", tmp_path / f"s{seed}.json"
        base = ["generate", "--group", "mirror:2x2", "--activation", activation, "--latent", "regular*2",
                "--no-bias", "--seed", str(seed)]
        assert main(base + ["--out", str(plain)]) == 0
        assert main(base + ["--scramble", "--out", str(scr)]) == 0
        a, b = load_model(plain), load_model(scr)
        assert all(x == 0 for x in _biases(b)), (activation, seed, _biases(b))
        assert _same_function(a, b)
    capsys.readouterr()
    assert main(["verify", str(scr)]) == 0


def test_scramble_with_biases_still_uses_sign_flips():
    """Behaviour with biases is unchanged: the sigmoid's affine sign flips are drawn."""
    m = random_equivariant_model(builtin_group("mirror:2x2"), ["regular*2"], sigmoid_series(3), rng=0)
    flips = 0
    for seed in range(6):
        s, k = scramble(m, rng=seed)
        flips += sum(a == -1 for layer in k.alphas for a in layer)
        assert _same_function(m, s)
    assert flips > 0


# -- 4. the latent group's name of bias-free models -----------------------------------------------

def test_bias_free_certificate_names_the_offset_free_group(tmp_path, capsys):
    paths = {}
    for tag, extra in (("free", ["--no-bias"]), ("bias", [])):
        p = tmp_path / f"{tag}.json"
        assert main(["generate", "--group", "mirror:2x2", "--activation", "poly:0,1,1", "--latent", "regular",
                     "--scramble", "--seed", "3", "--out", str(p)] + extra) == 0
        paths[tag] = p
    capsys.readouterr()
    cert = tmp_path / "c.json"
    assert main(["verify", str(paths["free"]), "--certificate", str(cert)]) == 0
    out = capsys.readouterr().out
    data = json.loads(cert.read_text())
    assert data["latent_groups"] == ["permutations"]
    assert "[K = permutations]" in out and "affinely" not in out
    model = json.loads(paths["free"].read_text())
    assert check_certificate(data, model).accepted
    # an older certificate named the with-biases group: the checker still accepts it
    old = dict(data, latent_groups=[polynomial([0, 1, 1]).latent_group])
    assert check_certificate(old, model).accepted
    # with biases the affine group is named, as before
    assert main(["verify", str(paths["bias"]), "--certificate", str(cert)]) == 0
    assert "affinely" in json.loads(cert.read_text())["latent_groups"][0]


def test_latent_group_names_follow_the_rule():
    act = sigmoid_series(3)
    layers = lambda b: [DenseLayer([[1, 2], [3, -1]], [b, 0], act), DenseLayer([[2, -1]], [0], None)]
    assert latent_group_names(Model(2, layers(0))) == ["permutations"]
    assert latent_group_names(Model(2, layers(1))) == [act.latent_group]
    # tanh is odd about 0: its signed permutations need no bias, so a bias-free tanh model keeps them
    tanh = [DenseLayer([[1, 2], [3, -1]], [0, 0], tanh_series(3)), DenseLayer([[2, -1]], [0], None)]
    assert latent_group_names(Model(2, tanh)) == ["signed permutations"]
    assert latent_group_names(builtin_example()) == ["signed permutations"] * 2


# -- 5. numeric functional dimension: the affine scalings of t + t^2 --------------------------------

@pytest.mark.parametrize("activation", ["poly:0,1,1", "poly:1,0,0,1", "monomial:2", "tanh3"])
def test_fdim_counts_the_scalings_the_exact_gauge_fixes(tmp_path, capsys, activation):
    """A generated (regular-representation) model: the numeric dim K equals the number of neurons
    the exact fibre ideal gauge-fixes (continuous scalings with biases), and the Jacobian's rank is
    #params - dim K with a clear gap (t + t^2 and 1 + t^3: monomials up to a constant)."""
    from symeq.numeric.fdim import functional_dimension, latent_dimension, symmetry_directions, jacobian
    from symeq.numeric.models import from_exact

    p = tmp_path / "m.json"
    assert main(["generate", "--group", "mirror:2x2", "--activation", activation, "--latent", "regular",
                 "--scramble", "--seed", "4", "--out", str(p)]) == 0
    capsys.readouterr()
    exact = load_model(p)
    gauged = len(fibre_ideal(exact, bias=True).gauge)
    num = from_exact(exact)
    assert latent_dimension(num) == gauged == (2 if activation != "tanh3" else 0)
    r = functional_dimension(num, rng=1)
    assert r.rank == r.expected == num.n_params - gauged and r.gap > 1e6, r.report()
    Z = symmetry_directions(num)
    if Z.shape[1]:   # the tangent of z -> alpha (z - s) + s, with the constant into the next bias
        J = jacobian(num, np.random.default_rng(0).standard_normal((20, num.input_dim)))
        assert np.abs(J @ Z).max() < 1e-9 * np.abs(J).max()


# -- 6. clones up to the affine scalings merge when the model has biases ----------------------------

def _with_affine_clones(tmp_path, activation, alpha):
    """A generated mirror-equivariant model plus, for each hidden neuron j, a clone whose shifted
    row is alpha times j's (y_clone = q y_j + o), the outgoing weights split unevenly (a_j col_j on
    j, c_j col_j on the clone, a_j + q c_j = 1) and the constant moved into the output bias: the
    same function, but no latent action at theta (j and its mirror image have different splits)."""
    p = tmp_path / "g.json"
    assert main(["generate", "--group", "mirror:2x2", "--activation", activation, "--latent", "regular",
                 "--seed", "5", "--out", str(p)]) == 0
    m = load_model(p)
    l1, l2 = m.layers
    rows, b, s = [list(r) for r in l1.weight.tolist()], list(l1.bias), l1.activation.shift
    q, o = l1.activation.affine_admissible(alpha)
    out = [list(r) for r in l2.weight.tolist()]
    a = [fmpq(3), fmpq(2)]
    c = [(1 - aj) / q for aj in a]
    W2 = [[a[j] * r[j] for j in range(2)] + [c[j] * r[j] for j in range(2)] for r in out]
    b2 = [bb - sum(c[j] * r[j] * o for j in range(2)) for bb, r in zip(l2.bias, out)]
    clones = Model(m.input_dim, [DenseLayer(rows + [[alpha * x for x in r] for r in rows],
                                            b + [alpha * (bj - s) + s for bj in b], l1.activation),
                                 DenseLayer(W2, b2, None)], m.group, "with affine clones")
    assert _same_function(m, clones)
    return m, clones


@pytest.mark.parametrize("activation,alpha", [("sigmoid:3", fmpq(-1)), ("poly:0,1,1", fmpq(2)),
                                              ("poly:0,1,1", fmpq(-1, 3))])
def test_affine_clones_merge_and_theta_is_weakly_identifiable(tmp_path, capsys, activation, alpha):
    from symeq.submodels import find_submodel_structure, reduce_model

    m, clones = _with_affine_clones(tmp_path, activation, alpha)
    capsys.readouterr()
    assert find_submodel_structure(clones)["clones"] == [(1, [0, 2]), (1, [1, 3])]
    red = reduce_model(clones)
    assert red.model.widths == m.widths and len(red.merged) == 2 and _same_function(red.model, clones)
    v = verify(clones, identifiability=True, fibre_search=False, timeout=60)
    assert v.verdict == "layerwise-equivariant" and v.reparametrized and v.exit_code == 0
    assert v.identifiability["status"] == "weakly-identifiable"
    assert v.identifiability["reduced_widths"] == m.widths


def test_bias_free_models_merge_offset_free_clones_only():
    """Without biases the sigmoid's flip sigma(-t) = 1 - sigma(t) would leave a constant that no
    bias can absorb: those neurons are not clones, and a reduction keeps the model bias-free."""
    from symeq.submodels import find_submodel_structure, reduce_model

    sig = Model(2, [DenseLayer([[1, 2], [-1, -2], [3, -1]], [0, 0, 0], sigmoid_series(3)),
                    DenseLayer([[2, -1, 3]], [0], None)])
    assert find_submodel_structure(sig)["clones"] == [] and not reduce_model(sig).changed
    tanh = Model(2, [DenseLayer([[1, 2], [-1, -2], [3, -1]], [0, 0, 0], tanh_series(3)),
                     DenseLayer([[2, -1, 3]], [0], None)])
    red = reduce_model(tanh)   # odd: the flip has no offset, a clone with or without biases
    assert red.merged == [(1, 1, 0)] and all(x == 0 for x in _biases(red.model))
    assert _same_function(red.model, tanh)


def test_memory_option_does_not_leak_into_the_next_call(tmp_path):
    """`--memory` sets the budget of its own call only: the next main() is back at the default."""
    import contextlib
    import io

    from symeq import procs
    from symeq.cli import main

    from symeq.sizes import LIMITS

    path = tmp_path / "m.json"
    before, monomials = procs.memory_cap(), LIMITS.monomials
    seen = []
    real = procs.set_memory_cap

    def spy(gb):
        real(gb)
        seen.append(procs.memory_cap())

    procs.set_memory_cap = spy
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(["example", "--out", str(path)])
            assert main(["fibre", str(path), "--memory", "1", "--max-monomials", "10"]) in (2, 3)  # 3: local answer
            assert seen[-1] is not None and seen[-1] <= 2**30
            main(["fibre", str(path), "--max-monomials", "10"])
            assert seen[-1] == before
    finally:
        procs.set_memory_cap = real
    # and the caller's own settings come back after each call
    assert procs.memory_cap() == before and LIMITS.monomials == monomials


def test_reduction_keeps_a_bias_free_model_bias_free():
    """A dead sigmoid neuron of a bias-free model outputs sigma(0) = 1/2: there is no bias to fold it
    into, so it is kept; a dead tanh neuron (sigma(0) = 0) is removed."""
    from flint import fmpq

    from symeq.activations import sigmoid_series, tanh_series
    from symeq.submodels import reduce_model

    x = [fmpq(1, 3), fmpq(2)]
    for act, width in ((sigmoid_series(3), 3), (tanh_series(3), 2)):
        m = Model(2, [DenseLayer([[1, 2], [0, 0], [2, -1]], None, act), DenseLayer([[1, 3, -1]], None, None)])
        r = reduce_model(m)
        assert r.model.widths == [2, width, 1]
        assert all(b == 0 for layer in r.model.layers for b in layer.bias)
        assert r.model(x) == m(x)
