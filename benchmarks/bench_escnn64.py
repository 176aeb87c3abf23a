"""Benchmark: ``symeq certify`` on escnn-style C4 networks at width (issue 27 (5): 64 regular fields at 28x28).

What is measured (wall time by ``time.perf_counter``, one process, after building the network): an
escnn-style C4 network (symeq/layers/conv/nets.py: a lifting convolution and a group convolution on
``fields`` regular fields, i.e. 4 x fields channels, 3x3 kernels, padding 1, tanh_series(3), the
invariant readout) on n x n images, in floats, every kernel entry and channel bias perturbed by relative
noise 1e-3 (seeded), is certified by :func:`symeq.certification.certify` with its defaults and
``conv="kernels"`` (what "auto" picks at 28x28: convolutions averaged on their kernels, the float twin's
actions, the exact verification of theta-bar, the function distance on noise points).  Columns:

* ``certify_s``: all of certify (wall); ``certify_cpu_s``: its CPU time, all threads (torch's conv2d uses
  both cores: on a quiet machine the wall time is at most this); ``exact_verify_s``: its exact verification
  of theta-bar (the proof);
* ``noise_points``: the noise points drawn (2000 asked; fewer where one forward pass of the network on
  them would pass ``NOISE_WORK`` multiply-adds) and the median function distance with its 95 %
  order-statistic interval;
* ``torch_numpy_rel``: the largest relative difference between the float network's outputs computed with
  torch's conv2d (used for large batches when torch is importable) and with numpy's im2col product, on
  8 noise points (the float error of the forward passes: both float64, different summation orders);
* ``load``: the 1-minute load average before and after the row (a shared 2-core machine).

Usage::

    python benchmarks/bench_escnn64.py              # 28x28 with 16 and 64 fields (the target: 64 fields under 120 s)
    python benchmarks/bench_escnn64.py --quick      # 8x8 with 2 fields
    python benchmarks/bench_escnn64.py --fields 64  # one row

Markdown to stdout and ``OUT/escnn64.md``; numbers, machine and versions to ``OUT/escnn64.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_results  # noqa: E402


def network(n: int, fields: int, noise: float = 1e-3, seed: int = 0):
    """(float network with noise, its group) for the C4 network with ``fields`` regular fields on n x n."""
    from symeq.activations import tanh_series
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model
    from symeq.layers.conv.floating import NumericConvLayer
    from symeq.numeric.models import NumericModel, from_exact

    layers, group = regular_network("C4", n, fields, 2, tanh_series(3), rng=seed)
    net = from_exact(Model(n * n, layers, group, f"C4 {n}x{n}, {fields} regular fields"))
    rng = np.random.default_rng(seed + 2)
    out = []
    for l in net.layers:
        if l.kind == "conv2d" and l.activation is not None:
            l = NumericConvLayer(l.shape, l.kernel * (1 + noise * rng.standard_normal(l.kernel.shape)),
                                 l.channel_bias * (1 + noise * rng.standard_normal(l.channel_bias.shape)), l.activation)
        out.append(l)
    return NumericModel(net.input_dim, out, net.group, net.name), group


def torch_numpy_difference(net, points: int = 8) -> float | None:
    """Largest relative difference of the outputs, torch conv2d against numpy's im2col product."""
    import symeq.layers.conv.floating as nc

    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    X = np.random.default_rng(1).standard_normal((points, net.input_dim))
    old = nc.TORCH_MIN_WORK
    try:
        nc.TORCH_MIN_WORK = 0
        a = net(X)
        nc.TORCH_MIN_WORK = float("inf")
        b = net(X)
    finally:
        nc.TORCH_MIN_WORK = old
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


def run(n: int, fields: int, timeout: float) -> dict:
    from symeq.certification import certify
    from symeq.sizes import limits

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    net, group = network(n, fields)
    build = time.perf_counter() - t0
    with limits(width=max(100_000, 2 * max(net.widths))):
        t0, cpu0 = time.perf_counter(), time.process_time()
        c = certify(net, group, timeout=timeout, conv="kernels")
        total, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    fd = c.function_distance.get("noise", {})
    lo, hi = fd.get("median_interval_95", [float("nan")] * 2)
    return {"image": f"{n}x{n}", "fields": fields, "channels": 4 * fields, "params": int(net.n_params),
            "build_s": round(build, 2), "certify_s": round(total, 2), "certify_cpu_s": round(cpu, 2),
            "exact_verify_s": round(c.verification.seconds, 2) if c.verification is not None else None,
            "status": c.status, "verdict": None if c.verification is None else c.verification.verdict,
            "max_layer_distance": c.max_distance, "digits": "-".join(map(str, sorted(set(c.digits)))),
            "noise_points": fd.get("points"), "noise_median": fd.get("median"),
            "noise_median_95": f"{lo:.3g}-{hi:.3g}", "torch_numpy_rel": torch_numpy_difference(net),
            "under_120_s": total < 120, "load": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
            "reason": c.reason}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="8x8 images, 2 fields (smoke test)")
    p.add_argument("--fields", type=int, nargs="*", help="regular fields per row (default 16 64)")
    p.add_argument("--size", type=int, default=28, help="image size (default 28)")
    p.add_argument("--timeout", type=float, default=1200.0)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = p.parse_args(argv)
    rows_spec = [(8, 2)] if a.quick else [(a.size, f) for f in (a.fields or [16, 64])]
    rows = []
    for n, f in rows_spec:
        print(f"{n}x{n}, {f} fields ...", file=sys.stderr, flush=True)
        rows.append(run(n, f, a.timeout))
        print(f"  certify {rows[-1]['certify_s']} s ({rows[-1]['status']}), exact verify "
              f"{rows[-1]['exact_verify_s']} s", file=sys.stderr, flush=True)
    cols = ["image", "fields", "channels", "params", "certify_s", "certify_cpu_s", "exact_verify_s", "status",
            "max_layer_distance", "digits", "noise_points", "noise_median", "noise_median_95", "torch_numpy_rel", "load", "load_after"]
    text = "\n".join([
        "# certify on escnn-style C4 networks at width",
        "",
        "Lifting + group convolution on regular fields (4 channels a field), 3x3, padding 1, tanh_series(3), "
        "invariant readout; relative noise 1e-3 on every kernel entry and channel bias. certify_s: all of "
        "certify (twin, averaging on the kernels, exact rationals, exact verification, function distance), "
        "certify_cpu_s its CPU time (all threads); "
        "exact_verify_s: the exact verification of theta-bar. noise_median_95: the median's 95 % interval over "
        "the noise points. torch_numpy_rel: the float forward pass, torch against numpy (float64 both). "
        "load: the 1-minute load average (2 cores, shared).",
        "",
        *markdown_table(rows, cols),
    ])
    print(text)
    write_results(a.out, "escnn64-quick" if a.quick else "escnn64", text, {"rows": rows})
    return 0 if all(r["status"] == "certified" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
