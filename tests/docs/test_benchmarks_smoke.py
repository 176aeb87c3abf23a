"""Smoke test: the derivation benchmark runs with --quick and writes its tables."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_derivation.py"


def test_bench_derivation_quick(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    md, js = out / "derivation.md", out / "derivation.json"
    assert md.is_file() and js.is_file()

    res = json.loads(js.read_text())
    for section in ("width", "depth", "premise"):
        assert res[section], section
        for row in res[section]:
            assert set(res["columns"][section]) <= set(row), (section, row)
    assert {"width", "depth", "widths", "params", "build_s", "derive_s", "found"} <= set(res["width"][0])
    assert all(r["found"] for r in res["width"] + res["depth"])
    assert {"grid_s", "symbolic_s", "sympy_s", "sympy_over_grid", "sympy_over_symbolic",
            "grid_over_symbolic"} <= set(res["premise"][0])
    assert res["premise"][0]["grid_s"] is not None and res["premise"][0]["symbolic_s"] is not None
    for name in ("width", "depth"):
        assert isinstance(res["fits"][name]["exponent_all"], float)

    text = md.read_text()
    for header in ("| width |", "| depth |", "derive_latent_actions (s)", "symeq grid (s)",
                   "symeq fmpq_mpoly (s)", "sympy expand (s)", "sympy / grid", "Scaling with width"):
        assert header in text, header
    # the table goes to stdout, progress to stderr
    assert "| width |" in proc.stdout and "| width |" not in proc.stderr
    assert "(a) width" in proc.stderr


@pytest.mark.slow  # a benchmark's smoke run (CI_SLOW=1 runs it)
def test_bench_fdim_quick(tmp_path):
    script = SCRIPT.parent / "bench_fdim.py"
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((out / "fdim.json").read_text())
    assert len(res["rows"]) == 4
    for r in res["rows"]:
        assert r["dense_rank"] == r["krylov_rank"], r       # small enough for both: they agree
        assert (r["krylov_rank"] < r["expected"]) == r["clone"], r
        assert r["dense_over_krylov"] is not None and r["krylov_s"] > 0
    assert "| widths |" in (out / "fdim.md").read_text() and "| widths |" in proc.stdout


@pytest.mark.slow  # seconds; the default suite stays under 5 minutes (run with -m slow)
def test_bench_check_quick(tmp_path):
    """The checker benchmark runs at two tiny widths and reports checker against verify time."""
    script = SCRIPT.parent / "bench_check.py"
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((out / "check.json").read_text())
    assert [r["width"] for r in res["rows"]] == [16, 24]
    for r in res["rows"]:
        assert r["accepted"] is True and r["verify_s"] > 0 and r["check_s"] > 0
        # the times are rounded to 1 ms and the ratio to 0.001: the ratio of the unrounded times
        # lies between these bounds (a wrong ratio column, e.g. verify / check, falls outside)
        e = 0.0005
        lo = (r["check_s"] - e) / (r["verify_s"] + e)
        hi = (r["check_s"] + e) / (r["verify_s"] - e) if r["verify_s"] > e else float("inf")
        assert lo - e <= r["check_over_verify"] <= hi + e
    assert "| width |" in (out / "check.md").read_text() and "check / verify at most" in proc.stdout
