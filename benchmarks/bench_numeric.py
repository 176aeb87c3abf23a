"""Benchmark: numeric recovery of the layerwise actions at real scale, and its scaling with width.

What is measured (numpy float64, wall time by ``time.perf_counter``): a random layerwise-
equivariant tanh network (mirror group on 8x8 images, regular latent actions, weights
N(0, 1/fan-in)) is scrambled by a random element of prod K_i (signed permutations) and
:func:`symeq.numeric.layerwise.derive_latent_actions_numeric` recovers the actions (Gram matrix,
linear assignment, residuals, homomorphism check).  Depth is the number of *hidden* layers.

Usage::

    python benchmarks/bench_numeric.py            # widths 256..4096 at depth 6 (about a minute)
    python benchmarks/bench_numeric.py --quick    # widths 64..512, depth 3 (seconds)

Markdown to stdout and ``OUT/numeric.md``; numbers, machine and versions to ``OUT/numeric.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from _common import markdown_table, write_results

from symeq.groups import mirror
from symeq.numeric import derive_latent_actions_numeric, numeric_activation, random_equivariant_numeric, scramble_numeric


def run(width: int, depth: int, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    m = random_equivariant_numeric(mirror(8, 8), [width] * depth, numeric_activation("tanh"), rng=seed)
    s, _ = scramble_numeric(m, rng=seed + 1)
    del m
    build = time.perf_counter() - t0
    d = derive_latent_actions_numeric(s)
    return {"width": width, "depth": depth, "params": s.n_params, "build_s": round(build, 3),
            "derive_s": round(d.seconds, 3), "max_residual": d.max_residual, "min_margin": d.min_margin,
            "within_tolerance": d.within_tolerance}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = p.parse_args(argv)
    widths, depth = ([64, 128, 256, 512], 3) if a.quick else ([256, 512, 1024, 2048, 4096], 6)
    rows = []
    for w in widths:
        print(f"width {w}, depth {depth} ...", file=sys.stderr, flush=True)
        rows.append(run(w, depth))
        print(f"  {rows[-1]['derive_s']} s", file=sys.stderr, flush=True)
    big = [r for r in rows if r["width"] >= widths[len(widths) // 2]]
    exponent = None
    if len(big) >= 2:
        x = np.log([r["width"] for r in big])
        y = np.log([r["derive_s"] for r in big])
        exponent = float(np.polyfit(x, y, 1)[0])
    cols = ["width", "depth", "params", "build_s", "derive_s", "max_residual", "min_margin", "within_tolerance"]
    md = markdown_table(rows, cols)
    if exponent is not None:
        md.append(f"\nderive time ~ width^{exponent:.2f} over the larger widths (one Gram matrix per layer: width^3 expected)")
    text = "\n".join(md)
    print(text)
    write_results(a.out, "numeric", text, {"rows": rows, "width_exponent": exponent})
    return 0


if __name__ == "__main__":
    sys.exit(main())
