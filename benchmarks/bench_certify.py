"""Benchmark: ``symeq certify`` time against ``symeq numeric-check`` time on the same networks.

What is measured (wall time by ``time.perf_counter``, one process): a random layerwise-equivariant
tanh network (mirror group on 8x8 images, two hidden layers of the given width, weights
N(0, 1/fan-in)) is scrambled by a random element of prod K_i and every parameter is perturbed
by relative noise 1e-3 (so the float twin reports "not within tolerance").  On it:

* ``numeric-check``: :func:`symeq.numeric.layerwise.derive_latent_actions_numeric` (residuals only);
* ``certify``: :func:`symeq.certification.certify`, all of it (``certify_s``: the float twin, the
  matching search for the nearest involution, the exact rounding and Reynolds projection, the
  exact verification of theta-bar and the distances on 2000 noise inputs), of which the exact
  verification alone is ``exact_verify_s``.

Usage::

    python benchmarks/bench_certify.py            # widths 64, 128, 256, 512, 1024
    python benchmarks/bench_certify.py --quick    # widths 32, 64

Markdown to stdout and ``OUT/certify.md``; numbers, machine and versions to ``OUT/certify.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from _common import markdown_table, write_results

from symeq.certification import certify
from symeq.groups import mirror
from symeq.numeric import derive_latent_actions_numeric, numeric_activation, random_equivariant_numeric, scramble_numeric


def network(width: int, seed: int = 0, noise: float = 1e-3):
    G = mirror(8, 8)
    m = random_equivariant_numeric(G, [width, width], numeric_activation("tanh"), rng=seed)
    s, _ = scramble_numeric(m, rng=seed + 1)
    th = s.parameters()
    return G, s.with_parameters(th * (1.0 + noise * np.random.default_rng(seed + 2).standard_normal(th.shape)))


def run(width: int, seed: int = 0) -> dict:
    G, net = network(width, seed)
    t0 = time.perf_counter()
    d = derive_latent_actions_numeric(net)
    check_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    c = certify(net, G, timeout=1200)
    total = time.perf_counter() - t0
    verify_s = c.verification.seconds if c.verification is not None else float("nan")
    return {"width": width, "params": net.n_params, "numeric_check_s": round(check_s, 3),
            "twin_status": d.status, "twin_max_residual": d.max_residual,
            "certify_s": round(total, 3), "exact_verify_s": round(verify_s, 3),
            "ratio": round(total / max(check_s, 1e-9), 1), "status": c.status,
            "max_layer_distance": c.max_distance,
            "digits": f"{min(c.digits)}-{max(c.digits)}" if min(c.digits) != max(c.digits) else str(c.digits[0]), "method": c.method.split(" (")[0]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    a = p.parse_args(argv)
    widths = [32, 64] if a.quick else [64, 128, 256, 512, 1024]
    rows = []
    for w in widths:
        print(f"width {w} ...", file=sys.stderr, flush=True)
        rows.append(run(w))
        print(f"  numeric-check {rows[-1]['numeric_check_s']} s, certify {rows[-1]['certify_s']} s", file=sys.stderr,
              flush=True)
    cols = ["width", "params", "numeric_check_s", "twin_status", "certify_s", "exact_verify_s", "ratio", "status",
            "max_layer_distance", "digits"]
    text = "\n".join([
        "# certify against numeric-check",
        "",
        "Two hidden tanh layers of the given width, mirror on 8x8 images, scrambled, relative noise 1e-3 on every "
        "parameter. numeric-check: the float twin's residuals (it reports the noise as 'not within tolerance'). "
        "certify: twin + matching search + exact projection (rationals) + exact verification of theta-bar + "
        "distances; exact_verify_s is the exact pipeline's part.",
        "",
        *markdown_table(rows, cols),
    ])
    print(text)
    write_results(a.out, "certify-quick" if a.quick else "certify", text, {"rows": rows})
    return 0 if all(r["status"] == "certified" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
