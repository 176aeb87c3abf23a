"""Benchmark: scaling of the ReLU counterexample hunter (symeq.relu.hunt) with workers.

What is measured (wall time by ``time.perf_counter`` around one ``hunt(...)`` call, one run per
row; worker start-up inside the call is included: the process pool's start and initializer, the
dask client's connection and ``client.run`` warm-up; the LocalCluster's own start is not):

* cases: (2,4,2) under ``rot3`` (order-3 rotation of R^2; about half of the candidates are
  counterexamples, which are minimised and certified), (3,8,3) under ``shift:3`` (cyclic shift
  of 3 coordinates; cheaper per candidate, no counterexamples) and the heaviest, two hidden
  layers (2,4,4,2) under ``rot3`` (exact region decisions, derivations at theta and at the
  reduced submodel, the first-layer orbit bound, the functional dimension);
* paths: in-process (``workers=1``), a local process pool with 2 workers (``workers=2``), and
  ``dask.distributed`` with a ``LocalCluster`` of 2 single-threaded worker processes
  (``scheduler=...``; skipped when dask is not installed);
* every path verifies the same candidates and must write byte-identical result lines (checked,
  reported in the ``same lines`` column);
* ``workers busy``: the seconds spent inside work units (measured by the workers) over
  ``workers x wall time`` -- the share of the run the workers were computing rather than waiting
  for work or for results to be shipped.  On a machine whose cores are busy with other work the
  speed-up is capped by the free cores, while this share still shows the hunter's own overhead;
* ``CPU ms/candidate``: CPU time of the worker processes inside work units per candidate
  (``time.process_time``), and ``main CPU s``: CPU time of the coordinating process (writing,
  dispatch, the dask client).  Equal CPU per candidate on every path means that distributing
  adds no work; the wall-clock speed-up is then what the free cores allow.  (Linux shares the
  CPU between sessions when ``sched_autogroup`` is on: a session's extra processes then gain
  nothing while other sessions keep the cores busy.)

Work units are sized from the measured cost (about 1 s each), workers are started once, and
results come back in index order; see the module docstring of symeq.relu.hunt.

Usage::

    python benchmarks/bench_hunt.py            # default budgets (about a minute on 2 free cores)
    python benchmarks/bench_hunt.py --quick    # a few seconds
    python benchmarks/bench_hunt.py --budget 3000

Progress goes to stderr; a Markdown table goes to stdout and ``OUT/hunt.md``; the numbers, with
the machine, its load average and versions, to ``OUT/hunt.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from _common import write_results

CASES = [((2, 4, 2), "rot3", 1200), ((3, 8, 3), "shift:3", 1500), ((2, 4, 4, 2), "rot3", 120)]


def _run(arch, group, budget, workers=1, scheduler=None):
    from symeq.relu.hunt import hunt, read_records

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "h.jsonl")
        t, t0 = time.perf_counter(), os.times()
        s = hunt(arch, group, out, budget=budget, workers=workers, scheduler=scheduler)
        dt, t1 = time.perf_counter() - t, os.times()
        lines = Path(out).read_text().splitlines()[1:]
        recs = read_records(out)[1]
    st = {}
    for r in recs:
        st[r["status"]] = st.get(r["status"], 0) + 1
    return {"arch": ",".join(map(str, arch)), "group": group, "candidates": s["verified"], "seconds": round(dt, 3),
            "per_second": round(s["verified"] / dt, 1), "busy": round(s["busy"], 2),
            "cpu_ms_per_candidate": round(1000 * s["cpu_seconds"] / max(1, s["verified"]), 2),
            "main_cpu_seconds": round((t1.user + t1.system) - (t0.user + t0.system), 2), "statuses": st}, lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=None, help="candidates per case (default: per case)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-dask", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    try:
        import distributed
    except ImportError:
        distributed = None
    if args.no_dask:
        distributed = None
    rows = []
    cluster = None
    if distributed is not None:
        print("starting a dask LocalCluster with 2 workers", file=sys.stderr, flush=True)
        cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    try:
        for arch, group, default_budget in CASES:
            budget = args.budget or (max(8, default_budget // 20) if args.quick else default_budget)
            paths = [("in-process", {"workers": 1}), ("2 local workers", {"workers": 2})]
            if cluster is not None:
                paths.append(("dask, 2 workers", {"scheduler": cluster.scheduler_address}))
            base = ref = None
            for name, kw in paths:
                print(f"{arch} {group}: {budget} candidates, {name}", file=sys.stderr, flush=True)
                row, lines = _run(arch, group, budget, **kw)
                if ref is None:
                    ref, base = lines, row["per_second"]
                row.update(path=name, same=lines == ref, speedup=round(row["per_second"] / base, 2))
                rows.append(row)
    finally:
        if cluster is not None:
            cluster.close()
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    lines = ["| architecture | group | path | candidates | seconds | candidates/s | vs in-process | workers busy | "
             "CPU ms/candidate | main CPU s | same lines | statuses |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['arch']} | {r['group']} | {r['path']} | {r['candidates']} | {r['seconds']} | "
                     f"{r['per_second']} | {r['speedup']}x | {round(100 * r['busy'])}% | {r['cpu_ms_per_candidate']} | "
                     f"{r['main_cpu_seconds']} | {'yes' if r['same'] else 'NO'} | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(r['statuses'].items()))} |")
    lines.append("")
    lines.append(f"{os.cpu_count()} CPUs; load average before {load and [round(x, 1) for x in load]}, after "
                 f"{load_after and [round(x, 1) for x in load_after]} (a load above the CPU count means other work "
                 f"competed for the cores and the speed-ups are understated).")
    text = "\n".join(lines)
    print(text)
    versions = {}
    if distributed is not None:
        versions["distributed"] = distributed.__version__
    write_results(args.out, "hunt", text, {"rows": rows, "quick": args.quick, "versions": versions,
                                           "loadavg_before": load, "loadavg_after": load_after})
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
