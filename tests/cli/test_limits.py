"""Size guards (symeq.sizes): refused before the work starts, with the limit, its value and its option.

The acceptance runs of the memory guards (the built-in example's fibre under a 4 GB address-space
limit) run the real command line in a child process, the way a user runs it.
"""

import json
import os
import random
import resource
import subprocess
import sys
import time

import pytest
from flint import fmpq_mpoly_ctx

from symeq.activations import monomial, polynomial, tanh_series
from symeq.cli import main
from symeq.errors import DegreeLimit, LimitExceeded, MonomialLimit, OrbitLimit
from symeq.fibre.ideal import fibre_ideal
from symeq.fibre.orbit import latent_orbit
from symeq.models import DenseLayer, Model
from symeq.numbers import matrix
from symeq.sizes import LIMITS, expansion_size, limits, monomials_upto, power_terms

FOUR_GB = 4_000_000_000


def _model(widths, act, seed=0, bias=True):
    r = random.Random(seed)
    layers = []
    for i in range(len(widths) - 1):
        W = matrix([[r.randint(-3, 3) or 1 for _ in range(widths[i])] for _ in range(widths[i + 1])])
        b = [r.randint(-2, 2) if bias else 0 for _ in range(widths[i + 1])]
        layers.append(DenseLayer(W, b, act if i < len(widths) - 2 else None))
    return Model(widths[0], layers)


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (FOUR_GB, FOUR_GB))


def _run_capped(args, tmp_path, limit_s=60):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "symeq", *args], cwd=tmp_path, env=env, preexec_fn=_cap_memory,
                       capture_output=True, text=True, timeout=limit_s)
    return r, time.monotonic() - t0


# -- counting ------------------------------------------------------------------------------------

def test_monomial_counts():
    assert monomials_upto(2, 2) == 6  # 1, x, y, x^2, xy, y^2
    assert power_terms(2, 2, 10, 1) == 3  # (a + b)^2
    assert power_terms(10 ** 6, 3, 2, 1) == monomials_upto(2, 3)  # capped by the ring


@pytest.mark.parametrize("widths,act,bias", [
    ([2, 3, 1], tanh_series(3), True),
    ([3, 2, 2], polynomial([1, 0, 1, 1]), True),
    ([2, 2, 2, 1], monomial(2), False),
    ([3, 3, 2], tanh_series(5), True),
])
def test_estimate_bounds_the_real_expansion(widths, act, bias):
    m = _model(widths, act, bias=bias)
    est = expansion_size(m, symbolic=False)
    ctx = fmpq_mpoly_ctx.get(("x", m.input_dim), "degrevlex")
    f = m.polynomial_map(ctx)
    assert max(len(p.to_dict()) for p in f) <= est.max_terms
    # symbolic: the fibre ideal's generators come from f(x; theta') - f(x; theta), whose terms are
    # the symbolic expansion's plus f(x; theta)'s
    sym = expansion_size(m, symbolic=True, bias=bias)
    ideal = fibre_ideal(m, gauge="none", bias=bias)
    terms = sum(len(g.to_dict()) for g in ideal.generators)
    assert terms <= sym.total_terms + est.total_terms


# -- the guards, in process ----------------------------------------------------------------------

def test_fibre_ideal_refused_before_expanding():
    from symeq.examples import builtin_example

    t0 = time.monotonic()
    with pytest.raises(MonomialLimit) as e:
        fibre_ideal(builtin_example())
    assert time.monotonic() - t0 < 2
    assert e.value.option == "--max-monomials" and e.value.value > LIMITS.monomials
    assert "--max-monomials" in str(e.value)


def test_raising_the_limit_lets_it_run():
    m = _model([2, 3, 1], tanh_series(3))
    need = expansion_size(m, symbolic=True).total_terms
    with limits(monomials=max(1, need // 4)):
        with pytest.raises(MonomialLimit):
            fibre_ideal(m)
    assert fibre_ideal(m).n_generators > 0


def test_orbit_refused_before_listing_permutations():
    m = _model([2, 12, 1], tanh_series(3))  # 12! * 2^12 elements: never listed
    ideal = fibre_ideal(m)
    t0 = time.monotonic()
    with pytest.raises(OrbitLimit) as e:
        latent_orbit(m, ideal)
    assert time.monotonic() - t0 < 1
    assert "--max-orbit" in str(e.value)


def _write(tmp_path, data, name="m.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


def _two_layer(act):
    return {"format": "symeq-model/1", "input_dim": 2,
            "layers": [{"type": "dense", "weight": [["1", "2"], ["2", "1"]], "bias": ["1", "1"], "activation": act},
                       {"type": "dense", "weight": [["3", "3"]], "bias": None, "activation": None}],
            "group": {"generators": [{"input": [["0", "1"], ["1", "0"]], "output": [["1"]]}]}}


@pytest.mark.parametrize("act", [{"type": "monomial", "degree": 10 ** 9},
                                 {"type": "tanh_series", "order": 10 ** 9 + 1},
                                 {"type": "sigmoid_series", "order": 10 ** 9}])
@pytest.mark.parametrize("cmd", ["verify", "fibre", "explain"])
def test_huge_degree_refused_at_load(tmp_path, capsys, act, cmd):
    from symeq.cli import build_parser

    path = _write(tmp_path, _two_layer(act))
    build_parser()  # imports first: the time below is the command's own
    t0 = time.monotonic()
    assert main([cmd, path]) == 2
    assert time.monotonic() - t0 < 1.0
    err = capsys.readouterr().err
    assert "degree" in err and "--max-degree" in err and str(next(iter(v for k, v in act.items() if k != "type"))) in err


def test_degree_limit_is_an_option(tmp_path, capsys):
    path = _write(tmp_path, _two_layer({"type": "monomial", "degree": 30}))
    assert main(["verify", path, "--max-degree", "20"]) == 2
    assert "--max-degree" in capsys.readouterr().err
    # the option does not leak into the next call in the same process
    assert main(["verify", path, "--timeout", "60"]) in (0, 1, 3)
    assert LIMITS.degree == 1000


def test_total_degree_limit(tmp_path, capsys):
    data = _two_layer({"type": "monomial", "degree": 900})
    layer = {"type": "dense", "weight": [["1", "0"], ["0", "1"]], "bias": ["0", "0"],
             "activation": {"type": "monomial", "degree": 900}}
    data["layers"][1:1] = [layer, layer]  # degree 900^3 > 10^6
    path = _write(tmp_path, data)
    assert main(["verify", path]) == 2
    err = capsys.readouterr().err
    assert "total degree" in err and "--max-total-degree" in err


def test_width_limit(tmp_path, capsys):
    data = _two_layer("tanh3")
    data["input_dim"] = 10 ** 9
    assert main(["verify", _write(tmp_path, data)]) == 2
    assert "--max-width" in capsys.readouterr().err


def test_max_monomials_option(tmp_path, capsys):
    m = _two_layer({"type": "tanh_series", "order": 3})
    m["layers"][1]["bias"] = ["0"]  # biases in both layers: the Gröbner step takes one declaration (issue 25)
    path = _write(tmp_path, m)
    assert main(["fibre", path, "--method", "groebner", "--max-monomials", "3", "--timeout", "30"]) == 2
    err = capsys.readouterr().err
    assert "monomials" in err and "--max-monomials" in err and "> limit 3" in err


def test_forced_symbolic_premise_guarded():
    from symeq.equivariance import decide_equivariance
    from symeq.groups import builtin_group

    m = _model([6, 6, 6, 6], tanh_series(9)).with_group(None)
    g = builtin_group("mirror:2x3")
    with limits(monomials=1000):
        with pytest.raises(MonomialLimit):
            decide_equivariance(m, g, method="symbolic")


def test_limit_errors_are_input_errors():
    assert issubclass(MonomialLimit, LimitExceeded) and DegreeLimit(value=2, maximum=1).exit_code == 2


# -- acceptance: the built-in example under a 4 GB address-space limit --------------------------

@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs RLIMIT_AS (Linux)")
@pytest.mark.parametrize("cmd", [["fibre", "e.json", "--timeout", "30"],
                                 ["verify", "e.json", "--identifiability", "--timeout", "30"]])
def test_builtin_example_fibre_under_4gb(tmp_path, cmd):
    assert main(["example", "--out", str(tmp_path / "e.json")]) == 0
    r, secs = _run_capped(cmd, tmp_path)
    assert r.returncode in (2, 3), (r.returncode, r.stderr[-2000:])
    assert secs < 45
    err = r.stderr
    assert "Traceback" not in err and "internal error" not in err
    assert ("--max-monomials" in err) or ("budget" in err and "ran out" in err or "exceeded" in err) \
        or "locally-identifiable" in r.stdout  # issue 21: the exact Jacobian rank answers locally


# -- without a real Gröbner engine the fallback is announced at the start --------------------------

def test_fibre_without_engine_says_so_first(tmp_path, capsys, monkeypatch):
    import importlib

    # the package, not the function symeq.fibre.groebner that symeq.fibre re-exports under the same name
    registry = importlib.import_module("symeq.fibre.groebner")
    monkeypatch.setattr(registry, "available_engines", lambda: ["flint", "sympy"])
    data = _two_layer({"type": "monomial", "degree": 3})  # bias-free (2,2,1) t^3: a tiny ideal
    data["layers"][0].update(weight=[["1", "2"], ["3", "-1"]], bias=None)
    data["layers"][1].update(weight=[["2", "-1"]])
    data.pop("group")
    code = main(["fibre", _write(tmp_path, data), "--method", "groebner", "--timeout", "20"])
    assert code == 0
    err = capsys.readouterr().err.splitlines()
    notice = [i for i, line in enumerate(err) if "pip install --no-deps passagemath-singular" in line]
    work = [i for i, line in enumerate(err) if line.startswith("fibre of")]
    assert notice and work and notice[0] < work[0], err


def test_fibre_search_equations_guarded():
    from symeq.fibre.search import search_fibre
    from symeq.groups import FiniteGroup, permutation_matrix
    from symeq.numbers import identity

    G = FiniteGroup([(permutation_matrix([1, 0]), identity(1))], ["swap"])
    m = Model(2, [DenseLayer(matrix([["3/5", "4/5"], ["4/5", "-3/5"]]), None, monomial(2)),
                  DenseLayer(matrix([[1, 1]]), None, None)], G)
    with limits(monomials=2):
        # the premise (f's expansion) is guarded first, by the one forward expansion
        with pytest.raises(MonomialLimit, match="polynomial map"):
            search_fibre(m, engine="sympy", timeout=30)
        # past the premise, each candidate action's equations are guarded before they are built
        import symeq.fibre.search as fs
        saved = fs._equivariant
        fs._equivariant = lambda model, group: None
        try:
            with pytest.raises(MonomialLimit, match="candidate action"):
                search_fibre(m, engine="sympy", timeout=30)
        finally:
            fs._equivariant = saved
    assert search_fibre(m, engine="sympy", timeout=30).verdict
