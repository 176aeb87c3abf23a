"""Identifiability by the tensor method (Kruskal certificates) against Gröbner bases.

Three parts, one run (docs/identifiability.md; the method is symeq/fibre/tensor.py):

1. **Shared cases.**  The fibre suite of bench_fibre.py (architectures (2,2,1) ... (3,3,3), σ ∈ {t², t³,
   t + t², tanh_series(3)}, with and without biases, random and S₂-equivariant θ).  On every case where
   the tensor method decides, the best exact Gröbner engine (the fastest of Singular slimgb, giac and
   msolve that settles within ``--case-timeout``; msolve answers modulo primes and is labelled) runs
   ``compare_with_orbit`` on the same model; verdicts and point counts must agree.
2. **Widths.**  The tensor method alone on tanh_series(3) with biases at (n, n, n) for n = 4 ... 64
   (random rational θ), a scalar-output case (n, n, 1), a deep tanh case (not applicable: the
   Jacobian-factor certificate needs at least n outputs) and deep
   bias-free t² cases (n, n, n, n) and (16,16,16,16,16), and deep tanh_series(3) cases with biases
   (n, n, n, n), decided by the Jacobian-factor certificate (symeq/fibre/deep.py).
   Each row also times the independent checker (``symeq check``) on the certificate.
3. **Growth.**  The slope of log(time) against log(width) between successive widths.

```
python benchmarks/bench_tensor.py             # everything, a few minutes (the Gröbner side dominates)
python benchmarks/bench_tensor.py --quick     # smoke test: widths up to 16, (2,2,1) shared cases only
```

Results: stdout and ``--out`` (default benchmarks/results/: tensor.md, tensor.json); progress on stderr.
Times are wall-clock on a machine shared with other jobs: noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import markdown_table, write_results  # noqa: E402
from bench_fibre import ACTIVATIONS, make_model  # noqa: E402

from symeq.activations import monomial, tanh_series  # noqa: E402
from symeq_check import check_certificate  # noqa: E402
from symeq.errors import BudgetExceeded, SymeqError  # noqa: E402
from symeq.fibre.engines import available_engines  # noqa: E402
from symeq.fibre.orbit import compare_with_orbit  # noqa: E402
from symeq.fibre.tensor import tensor_identifiability  # noqa: E402
from symeq.io import model_to_json  # noqa: E402
from symeq.models import DenseLayer, Model  # noqa: E402

ARCHS = [(2, 2, 1), (2, 2, 2), (2, 3, 1), (3, 3, 1), (2, 3, 2), (3, 3, 3)]
GROEBNER = ["giac", "singular", "msolve"]
REPEAT_BELOW = 0.5


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    if dt < REPEAT_BELOW:
        times = [dt]
        for _ in range(2):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        dt = statistics.median(times)
    return out, dt


def random_model(widths, seed: int = 0, bias: bool = True) -> Model:
    """Random rational theta: entries p/3 with p a nonzero integer in [-9, 9] (biases may be zero)."""
    rng = random.Random(seed)
    layers = []
    for l in range(1, len(widths)):
        W = [[Fraction(rng.choice([x for x in range(-9, 10) if x]), 3) for _ in range(widths[l - 1])]
             for _ in range(widths[l])]
        b = [Fraction(rng.randint(-9, 9), 3) if bias else 0 for _ in range(widths[l])]
        layers.append(DenseLayer(W, b, tanh_series(3) if l < len(widths) - 1 else None))
    return Model(widths[0], layers)


def random_deep_monomial(widths, seed: int = 0) -> Model:
    """Bias-free t^2 network with random rational weights p/3, p a nonzero integer in [-9, 9]."""
    rng = random.Random(seed)
    layers = []
    for l in range(1, len(widths)):
        W = [[Fraction(rng.choice([x for x in range(-9, 10) if x]), 3) for _ in range(widths[l - 1])]
             for _ in range(widths[l])]
        layers.append(DenseLayer(W, [0] * widths[l], monomial(2) if l < len(widths) - 1 else None))
    return Model(widths[0], layers)


def _groebner_best(m, engines, timeout):
    best = None
    for e in engines:
        t0 = time.perf_counter()
        # a later engine only has to beat the best time so far
        budget = timeout if best is None else max(1.0, min(timeout, best[1]))
        try:
            c = compare_with_orbit(m, engine=e, timeout=budget, witnesses=False)
        except (BudgetExceeded, SymeqError):
            continue
        dt = time.perf_counter() - t0
        if c.status == "unknown":
            continue
        if best is None or dt < best[1]:
            best = (c, dt, e)
    return best


def shared(args, engines) -> list[dict]:
    rows = []
    archs = [(2, 2, 1)] if args.quick else ARCHS
    for arch in archs:
        for act in ACTIVATIONS:
            for bias in (False, True):
                for kind in ("random", "equivariant"):
                    m = make_model(arch, act, bias, kind)
                    t, dt = _timed(lambda: tensor_identifiability(m))
                    row = {"arch": "(" + ",".join(map(str, arch)) + ")", "σ": act, "bias": "yes" if bias else "no",
                           "θ": kind[:5], "tensor": t.status, "tensor s": dt, "condition": t.condition,
                           "gröbner": "-", "engine": "-", "gröbner s": "-", "agree": "-"}
                    if t.status in ("identifiable", "not-identifiable") and engines:
                        big = arch == (3, 3, 3)
                        best = _groebner_best(m, engines, args.target_timeout if big else args.case_timeout)
                        if best is None:
                            row.update({"gröbner": "unknown", "gröbner s": f"> {args.case_timeout:g}"})
                        else:
                            c, gdt, e = best
                            pts_t = t.fibre_points
                            pts_g = c.distinct_points if c.distinct_points is not None else c.degree
                            agree = c.status == t.status and (pts_t is None or c.dimension != 0 or pts_t == pts_g)
                            row.update({"gröbner": f"{c.status} ({pts_g} pts)" if c.dimension == 0 else
                                        f"{c.status} (dim {c.dimension})", "engine": e + ("" if c.exact else " (mod p)"),
                                        "gröbner s": gdt, "agree": "yes" if agree else "**NO**"})
                    _log(f"shared {row['arch']} {act} bias={bias} {kind}: tensor {t.status} {dt:.3g} s, "
                         f"gröbner {row['gröbner']} {row['gröbner s']}")
                    rows.append(row)
    return rows


def widths(args) -> list[dict]:
    rows = []
    ns = [4, 8, 16] if args.quick else [4, 8, 16, 32, 64]
    cases = [((n, n, n), f"({n},{n},{n}) tanh3 + bias") for n in ns]
    sc = (16, 16, 1) if not args.quick else (4, 4, 1)
    cases.append((sc, f"({sc[0]},{sc[1]},1) scalar output, tanh3 + bias"))
    cases.append(((4, 4, 4, 2), "deep (4,4,4,2), tanh3 + bias"))
    deep = [(n, n, n, n) for n in ([4, 16] if args.quick else [4, 16, 64])]
    cases += [(a, f"deep ({a[0]},{a[0]},{a[0]},{a[0]}), t² bias-free") for a in deep]
    # general activations (docs/identifiability.md, "Deep networks, general activations"): random
    # nonzero weights give every row of W_2 n >= 3 entries; the fibre is the finite orbit (n! 2^n)^2
    cases += [(a, f"deep ({a[0]},{a[0]},{a[0]},{a[0]}) tanh_series(3) with biases") for a in deep]
    cases.append(((16,) * 5, "deep (16,16,16,16,16) three hidden layers, t² bias-free"))
    for arch, label in cases:
        deep_t2 = "t² bias-free" in label
        m = random_deep_monomial(arch, seed=sum(arch)) if deep_t2 else random_model(arch, seed=sum(arch))
        t, dt = _timed(lambda: tensor_identifiability(m))
        chk = "-"
        cdt = None
        if t.certificate is not None:
            cj, mj = json.loads(json.dumps(t.certificate)), json.loads(json.dumps(model_to_json(m)))
            r, cdt = _timed(lambda: check_certificate(cj, mj))
            chk = "accepted" if r.accepted else "REJECTED"
        rows.append({"case": label, "arch": str(arch).replace(" ", ""), "verdict": t.status,
                     "orbit": "-" if t.orbit_size is None else (str(t.orbit_size) if t.orbit_size < 10 ** 12 else
                                                                 f"{t.orbit_size:.3e}"),
                     "tensor s": dt, "check": chk, "check s": "-" if cdt is None else cdt,
                     "certificate kB": "-" if t.certificate is None else round(len(json.dumps(t.certificate)) / 1024, 1),
                     "condition": t.condition})
        _log(f"width {label}: {t.status} in {dt:.3g} s, check {chk}")
    return rows


def growth(rows) -> list[dict]:
    # the square (n, n, n) rows only: the scalar-output row also ends with "tanh3 + bias"
    sq = [r for r in rows
          if r["case"].endswith("tanh3 + bias") and r["case"].startswith("(") and "scalar" not in r["case"]]
    out = []
    for a, b in zip(sq, sq[1:]):
        na, nb = int(a["arch"].split(",")[1]), int(b["arch"].split(",")[1])
        slope = math.log(max(b["tensor s"], 1e-6) / max(a["tensor s"], 1e-6)) / math.log(nb / na)
        out.append({"widths": f"{na} -> {nb}", "time ratio": b["tensor s"] / max(a["tensor s"], 1e-9),
                    "slope (log t / log n)": slope})
    return out


def markdown(res) -> str:
    lines = ["## Tensor method (Kruskal certificates) against Gröbner", "",
             f"Run {res['date']}, {res['seconds']:.0f} s, on a machine with {res['cpus']} CPUs shared with other "
             "sessions (times are noisy and inflated by contention). Gröbner: the fastest of "
             f"{', '.join(res['engines']) or 'none'} per case, {res['case_timeout']:g} s per case "
             f"({res['target_timeout']:g} s on (3,3,3)); `-` = the tensor method does not decide (not "
             "applicable), so Gröbner is not compared there.", "",
             "### Shared cases", ""]
    lines += markdown_table(res["shared"], ["arch", "σ", "bias", "θ", "tensor", "tensor s", "gröbner", "engine",
                                            "gröbner s", "agree"])
    dec = [r for r in res["shared"] if r["agree"] != "-"]
    lines += ["", f"Agreement: {sum(r['agree'] == 'yes' for r in dec)} of {len(dec)} cases where both answer; "
              f"the tensor method decides {sum(r['tensor'] != 'not-applicable' for r in res['shared'])} of "
              f"{len(res['shared'])} shared cases.", "", "### Widths (tensor alone)", ""]
    lines += markdown_table(res["widths"], ["case", "verdict", "orbit", "tensor s", "check", "check s",
                                            "certificate kB"])
    lines += ["", "### Growth with width", ""] + markdown_table(res["growth"], ["widths", "time ratio",
                                                                                 "slope (log t / log n)"])
    t = {r["arch"]: r for r in res["widths"]}
    lines += ["", "### Targets", ""]
    for arch, limit in (("(4,4,4)", 1.0), ("(64,64,64)", 60.0)):
        r = t.get(arch)
        if r is None:
            lines.append(f"- {arch}: not in this run")
        else:
            met = r["verdict"] == "identifiable" and r["tensor s"] < limit
            lines.append(f"- {arch} decided exactly in {r['tensor s']:.3g} s (target < {limit:g} s): "
                         f"{'met' if met else '**NOT met**'}")
    lines.append(f"- agreement with Gröbner wherever both answer: {sum(r['agree'] == 'yes' for r in dec)}/{len(dec)}"
                 + (" (met)" if all(r["agree"] == "yes" for r in dec) else " (**NOT met**)"))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke test (small widths, (2,2,1) shared cases)")
    p.add_argument("--case-timeout", type=float, default=20.0, help="Gröbner seconds per engine and case")
    p.add_argument("--target-timeout", type=float, default=60.0, help="Gröbner seconds on the (3,3,3) cases")
    p.add_argument("--no-groebner", action="store_true", help="skip the Gröbner side")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    engines = [] if args.no_groebner else [e for e in GROEBNER if e in available_engines()]
    res = {"engines": engines, "case_timeout": args.case_timeout, "target_timeout": args.target_timeout,
           "date": time.strftime("%Y-%m-%d"), "cpus": __import__("os").cpu_count()}
    res["widths"] = widths(args)
    res["growth"] = growth(res["widths"])
    res["shared"] = shared(args, engines)
    res["seconds"] = time.perf_counter() - t0
    text = markdown(res)
    print(text)
    write_results(args.out, "tensor" + ("-quick" if args.quick else ""), text, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
