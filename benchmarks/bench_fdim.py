"""Benchmark: functional dimension, dense SVD against the matrix-free krylov method, up to 10^5+ parameters.

What is measured (numpy float64 unless ``--torch``, wall time by ``time.perf_counter``): random
tanh MLPs (weights 1.5 N(0, 1/fan-in), biases 0.5 N(0, 1)), and the same net with one neuron of
the second hidden layer cloned; :func:`symeq.numeric.fdim.functional_dimension` with
``method="dense"`` (stacked Jacobian and its SVD: what a user would write with numpy) and
``method="krylov"`` (matrix-free; see the module docstring), on the same points (N n_out =
1.5 #params).  The dense method runs only up to ``--dense-max`` parameters (memory: the Jacobian
is 12 #params^2 bytes).  The table gives both ranks, the expected #params - dim K, both times and
their ratio, and what the krylov method reports: sigma_min / sigma_max above the cut (a Ritz
upper bound), the kernel directions found and the bound |J V| / sigma_max recomputed for them.

Usage::

    python benchmarks/bench_fdim.py            # up to 1.1e5 parameters, dense up to 7000 (about 15 minutes on 2 cores)
    python benchmarks/bench_fdim.py --quick    # up to 3e3 parameters (seconds)
    python benchmarks/bench_fdim.py --torch    # the krylov products by torch autograd (GPU when present)

Markdown to stdout and ``OUT/fdim.md``; numbers, machine and versions to ``OUT/fdim.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from _common import markdown_table, write_results

from symeq.numeric import NumericDenseLayer, NumericModel, numeric_activation
from symeq.numeric.fdim import functional_dimension

FULL = [[8, 32, 32, 8], [16, 64, 64, 16], [16, 96, 96, 16], [32, 256, 256, 128, 32]]
QUICK = [[4, 12, 10, 4], [8, 32, 32, 8]]


def net(widths, clone: bool, seed: int = 0) -> NumericModel:
    rng = np.random.default_rng(seed)
    act = numeric_activation("tanh")
    layers = [NumericDenseLayer(1.5 * rng.standard_normal((b, a)) / np.sqrt(a), 0.5 * rng.standard_normal(b),
                                act if i < len(widths) - 2 else None)
              for i, (a, b) in enumerate(zip(widths[:-1], widths[1:]))]
    if clone:
        W, bias = layers[1].weight.copy(), layers[1].bias.copy()
        W[1], bias[1] = W[0], bias[0]
        layers[1] = NumericDenseLayer(W, bias, act)
    return NumericModel(widths[0], layers)


def run(widths, clone: bool, dense_max: int, backend: str) -> dict:
    m = net(widths, clone)
    row = {"widths": "-".join(map(str, widths)), "clone": clone, "params": m.n_params}
    if m.n_params <= dense_max:
        d = functional_dimension(m, rng=1, method="dense", max_params=dense_max)
        row.update(dense_rank=d.rank, dense_s=round(d.seconds, 3), dense_gap=d.gap if np.isfinite(d.gap) else "inf")
    else:
        row.update(dense_rank=None, dense_s=None, dense_gap=None)
    k = functional_dimension(m, rng=1, method="krylov", backend=backend, max_extra=8 if clone else 64)
    det = k.details
    row.update(expected=k.expected, krylov_rank=k.rank, krylov_capped=det["null_capped"], krylov_s=round(k.seconds, 3),
               iterations=det["iterations"], jacobian_products=det["matvecs"],
               sigma_min_over_max=(det["smallest_above"] / det["sigma_max"]) if det["smallest_above"] else None,
               kernel_found=det["null_found"], kernel_bound=det["null_bound"],
               dense_over_krylov=(row["dense_s"] / k.seconds) if row["dense_s"] else None, backend=k.backend)
    return row


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--torch", action="store_true", help="krylov products by torch autograd")
    p.add_argument("--dense-max", type=int, default=7000,
                   help="largest model given to the dense SVD (6288 parameters take about 2 minutes here)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = p.parse_args(argv)
    rows = []
    for widths in (QUICK if a.quick else FULL):
        for clone in (False, True):
            print(f"widths {widths}, clone {clone} ...", file=sys.stderr, flush=True)
            rows.append(run(widths, clone, a.dense_max, "torch" if a.torch else "numpy"))
            print(f"  dense {rows[-1]['dense_s']} s, krylov {rows[-1]['krylov_s']} s", file=sys.stderr, flush=True)
    cols = ["widths", "clone", "params", "expected", "dense_rank", "krylov_rank", "dense_s", "krylov_s",
            "dense_over_krylov", "iterations", "sigma_min_over_max", "kernel_found", "kernel_bound"]
    shown = [dict(r, krylov_rank=f"<= {r['krylov_rank']}") if r["krylov_capped"] else r for r in rows]
    md = markdown_table(shown, cols, _fmt)
    md.append("\nkrylov ranks of clones are upper bounds when the kernel count was capped (8 directions here); "
              "sigma_min_over_max is a Ritz value, an upper bound.")
    text = "\n".join(md)
    print(text)
    write_results(a.out, "fdim", text, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
