"""Benchmark: the independent checker (``symeq check``) against ``symeq verify`` as width grows.

What is measured (wall time by ``time.perf_counter``, one run per width, in this process): a
random layerwise-equivariant tanh_series(3) network 25-w-w-25 under D4 acting on 5x5 images
(hidden layers: copies of the regular representation, so w is a multiple of |D4| = 8), scrambled
by a random signed permutation of every hidden layer (the way a user's network hides its
structure), is written as a model file. Then

* ``verify``: read the model file, :func:`symeq.verify` it exactly, write the certificate
  (``symeq verify MODEL --certificate CERT`` without the printing);
* ``check``: :func:`symeq_check.check_files` on that certificate (``symeq-certificate/2``,
  sparse actions) and the model file, Fractions only: ``symeq check CERT MODEL``;
* ``check (dense cert)``: the same checker on the same certificate written the older way
  (``symeq-certificate/1``, every action a dense matrix), which it still reads.

Wall and CPU time (``time.process_time``, this process only) are both recorded. The acceptance bound of the checker: under 30 s at width 400 on 2 cores, and under 2x the time
of ``verify``. Before the checker stored actions sparsely it multiplied dense Fraction matrices:
17.8 s at width 100, 161 s at width 200, about 2 h at width 400.

Usage::

    python benchmarks/bench_check.py            # widths 24, 48, 96, 200, 400 (about a minute)
    python benchmarks/bench_check.py --quick    # widths 16, 24 (seconds)

Markdown to stdout and ``OUT/check.md``; numbers, machine and versions to ``OUT/check.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _common import markdown_table, write_results

from symeq.activations import tanh_series
from symeq_check import check_files
from symeq.groups import dihedral
from symeq.io import load_model, model_to_json, write_json
from symeq.models import random_equivariant_model, scramble
from symeq.theorem import verify

COLUMNS = ["width", "widths", "params", "verify_s", "check_s", "check_over_verify", "verify_cpu_s", "check_cpu_s",
           "dense_check_s", "cert_kb", "dense_cert_kb", "accepted"]


def run(width: int, tmp: Path, seed: int = 0) -> dict:
    m_ = width // 8
    model = random_equivariant_model(dihedral(5), [f"regular*{m_}"] * 2, tanh_series(3), rng=seed)
    model, _ = scramble(model, rng=seed + 1)
    model_path, cert_path, dense_path = tmp / f"m{width}.json", tmp / f"c{width}.json", tmp / f"d{width}.json"
    model_path.write_text(json.dumps(model_to_json(model)))

    t0, c0 = time.perf_counter(), time.process_time()
    v = verify(load_model(model_path))
    write_json(v.certificate(), cert_path)
    verify_s, verify_cpu = time.perf_counter() - t0, time.process_time() - c0
    if v.verdict != "layerwise-equivariant":
        raise SystemExit(f"width {width}: verify says {v.verdict}, expected layerwise-equivariant")
    write_json(v.certificate(dense=True), dense_path)

    t0, c0 = time.perf_counter(), time.process_time()
    report = check_files(str(cert_path), str(model_path))
    check_s, check_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    dense_report = check_files(str(dense_path), str(model_path))
    dense_s = time.perf_counter() - t0
    return {"width": width, "widths": model.widths, "params": model.n_params, "verify_s": round(verify_s, 3),
            "check_s": round(check_s, 3), "check_over_verify": round(check_s / verify_s, 3),
            "verify_cpu_s": round(verify_cpu, 3), "check_cpu_s": round(check_cpu, 3),
            "dense_check_s": round(dense_s, 3), "cert_kb": round(cert_path.stat().st_size / 1024),
            "dense_cert_kb": round(dense_path.stat().st_size / 1024),
            "accepted": bool(report.accepted and dense_report.accepted)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = p.parse_args(argv)
    widths = [16, 24] if a.quick else [24, 48, 96, 200, 400]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        run(8, Path(tmp))  # warm-up (imports, caches), not recorded
        for w in widths:
            print(f"width {w} ...", file=sys.stderr, flush=True)
            rows.append(run(w, Path(tmp)))
            r = rows[-1]
            print(f"  verify {r['verify_s']} s, check {r['check_s']} s (ratio {r['check_over_verify']})",
                  file=sys.stderr, flush=True)
    worst = max(r["check_over_verify"] for r in rows)
    text = "\n".join([
        "## Checker against verify (D4 on 5x5 images, tanh_series(3), 25-w-w-25, scrambled)", "",
        *markdown_table(rows, COLUMNS), "",
        f"check / verify at most {worst:.3g} (acceptance: < 2, and < 30 s at width 400 on 2 cores). "
        "One run per width; wall times on a shared machine are inflated by other load (the CPU times of "
        "this process less so).",
    ])
    print(text)
    write_results(a.out, "check", text, {"columns": COLUMNS, "rows": rows, "max_check_over_verify": worst})
    return 0 if all(r["accepted"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
