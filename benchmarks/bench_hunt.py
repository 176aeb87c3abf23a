"""Benchmark: the ReLU counterexample hunter (symeq.relu.hunt).

What is measured (wall time by ``time.perf_counter``):

(a) candidates verified per second, one worker (in-process), for the architectures
    (2,4,2) and (2,6,2) under ``rot3`` (order-3 rotation of R^2) and (3,6,3) under ``shift:3``
    (cyclic shift of 3 coordinates).  Every candidate is verified exactly: canonical-form
    equivariance, positive-monomial actions at theta, the fibre-wide decision; counterexamples
    are also minimised and certified (relu-regions equivariance, realisation, actions), which
    dominates on (2,4,2)/rot3 where about a third of the candidates are counterexamples.
(b) the speed-up from 1 to 2 workers (local process pool) on (2,4,2)/rot3, same candidates.

Usage::

    python benchmarks/bench_hunt.py            # default (about half a minute)
    python benchmarks/bench_hunt.py --quick    # a few seconds
    python benchmarks/bench_hunt.py --budget 1000

Progress goes to stderr; a Markdown table goes to stdout and ``OUT/hunt.md``; the numbers, with
the machine and versions, to ``OUT/hunt.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

CASES = [((2, 4, 2), "rot3"), ((2, 6, 2), "rot3"), ((3, 6, 3), "shift:3")]


def _run(arch, group, budget, workers, seed=0):
    from symeq.relu.hunt import hunt, read_records

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "h.jsonl")
        t = time.perf_counter()
        s = hunt(arch, group, out, budget=budget, workers=workers, seed=seed)
        dt = time.perf_counter() - t
        recs = read_records(out)[1]
    st = {}
    for r in recs:
        st[r["status"]] = st.get(r["status"], 0) + 1
    return {"arch": ",".join(map(str, arch)), "group": group, "workers": workers, "candidates": s["verified"],
            "seconds": round(dt, 3), "per_second": round(s["verified"] / dt, 1), "statuses": st}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    budget = args.budget or (48 if args.quick else 400)
    rows = []
    for arch, group in CASES:
        print(f"(a) {arch} {group}: {budget} candidates, 1 worker", file=sys.stderr, flush=True)
        rows.append(_run(arch, group, budget, 1))
    print(f"(b) (2,4,2) rot3: {budget} candidates, 2 workers", file=sys.stderr, flush=True)
    two = _run((2, 4, 2), "rot3", budget, 2)
    speedup = round(two["per_second"] / rows[0]["per_second"], 2)
    lines = ["| architecture | group | workers | candidates | seconds | candidates/s | statuses |",
             "|---|---|---|---|---|---|---|"]
    for r in rows + [two]:
        lines.append(f"| {r['arch']} | {r['group']} | {r['workers']} | {r['candidates']} | {r['seconds']} | "
                     f"{r['per_second']} | {', '.join(f'{k} {v}' for k, v in sorted(r['statuses'].items()))} |")
    lines.append("")
    lines.append(f"Speed-up from 1 to 2 workers on (2,4,2)/rot3: {speedup}x ({os.cpu_count()} CPUs).")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hunt.md").write_text(text + "\n")
    import flint

    (out / "hunt.json").write_text(json.dumps({
        "rows": rows, "two_workers": two, "speedup_1_to_2": speedup, "budget": budget,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": {"python-flint": flint.__version__},
        "date": datetime.datetime.now().isoformat(timespec="seconds")}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
