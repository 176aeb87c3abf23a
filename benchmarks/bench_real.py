"""Benchmark: real tanh against its Taylor polynomial tanh_series(3), on the same networks.

What is measured (wall time by ``time.perf_counter``, one run per width and activation, in this
process): the e2cnn-style network of ``bench_check.py`` -- D4 acting on 5x5 images, 25-w-w-25 with
hidden layers copies of the regular representation, scrambled by a random signed permutation of
every hidden layer -- built once with sigma = tanh_series(3); the *same* weights with sigma = tanh
(the real one) give the second network (both are odd, so the same scramble hides both). Then

* ``verify``: read the model file, :func:`symeq.verify` it, write the certificate. The polynomial
  network decides the premise first (random points at this size) and then derives; the real one
  works layers first (every layer by tanh's odd symmetry, which proves the premise);
* ``check``: :func:`symeq_check.check_files` on the certificate (Fractions only);
* for the real network also ``refute`` and ``check refutation``: one first-layer weight changed by
  1/3, verified (an arb ball witness) and the witness re-proved by the checker's stdlib intervals.

Target (issue 20): the real networks in the same order of time as the tanh_series ones.

Usage::

    python benchmarks/bench_real.py            # widths 24, 96, 200, 400 (a few minutes)
    python benchmarks/bench_real.py --quick    # widths 16, 24 (seconds)

Markdown to stdout and ``OUT/real.md``; numbers, machine and versions to ``OUT/real.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _common import markdown_table, write_results
from flint import fmpq

from symeq.activations import real, tanh_series
from symeq_check import check_files
from symeq.groups import dihedral
from symeq.io import load_model, model_to_json, write_json
from symeq.models import DenseLayer, Model, random_equivariant_model, scramble
from symeq.theorem import verify

COLUMNS = ["width", "activation", "params", "verify_s", "check_s", "verdict", "accepted", "refute_s",
           "check_refutation_s", "witness_bits", "refutation_accepted"]


def _with_activation(model: Model, act) -> Model:
    layers = [DenseLayer(l.weight, list(l.bias), None if l.activation is None else act) for l in model.layers]
    return Model(model.input_dim, layers, model.group, model.name)


def _timed_verify(model, path: Path, cert: Path):
    path.write_text(json.dumps(model_to_json(model)))
    t0 = time.perf_counter()
    v = verify(load_model(path))
    write_json(v.certificate(), cert)
    verify_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = check_files(str(cert), str(path))
    return v, verify_s, time.perf_counter() - t0, report


def run(width: int, tmp: Path, seed: int = 0) -> list[dict]:
    base = random_equivariant_model(dihedral(5), [f"regular*{width // 8}"] * 2, tanh_series(3), rng=seed)
    base, _ = scramble(base, rng=seed + 1)
    rows = []
    for label, act in (("tanh_series(3)", tanh_series(3)), ("tanh", real("tanh"))):
        model = _with_activation(base, act)
        v, vs, cs, rep = _timed_verify(model, tmp / f"m{width}.json", tmp / f"c{width}.json")
        row = {"width": width, "activation": label, "params": model.n_params, "verify_s": round(vs, 3),
               "check_s": round(cs, 3), "verdict": v.verdict, "accepted": bool(rep.accepted),
               "refute_s": None, "check_refutation_s": None, "witness_bits": None, "refutation_accepted": None}
        if label == "tanh":
            data = model_to_json(model)
            w = data["layers"][0]["weight"]
            w[0][0] = str(fmpq(w[0][0]) + fmpq(1, 3))
            broken = tmp / f"b{width}.json"
            broken.write_text(json.dumps(data))
            vb, bs, bcs, brep = _timed_verify(load_model(broken), broken, tmp / f"bc{width}.json")
            row.update(refute_s=round(bs, 3), check_refutation_s=round(bcs, 3),
                       witness_bits=None if vb.equivariance.witness is None else vb.equivariance.witness.precision,
                       refutation_accepted=bool(vb.verdict == "not-equivariant" and brep.accepted))
        rows.append(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="widths 16 and 24 only (seconds)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"), help="results directory")
    a = p.parse_args(argv)
    widths = [16, 24] if a.quick else [24, 96, 200, 400]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        run(8, Path(tmp))  # warm-up (imports, caches), not recorded
        for w in widths:
            print(f"width {w} ...", file=sys.stderr, flush=True)
            rows.extend(run(w, Path(tmp)))
            for r in rows[-2:]:
                print(f"  {r['activation']}: verify {r['verify_s']} s, check {r['check_s']} s", file=sys.stderr,
                      flush=True)
    ratios = [r2["verify_s"] / r1["verify_s"] for r1, r2 in zip(rows[::2], rows[1::2]) if r1["verify_s"] > 0]
    text = "\n".join([
        "## Real tanh against tanh_series(3) (D4 on 5x5 images, 25-w-w-25, the same scrambled weights)", "",
        *markdown_table(rows, COLUMNS, fmt=lambda v: "-" if v is None else f"{v:.3g}" if isinstance(v, float)
                        else str(v)), "",
        f"verify(tanh) / verify(tanh_series(3)) between {min(ratios):.2g} and {max(ratios):.2g}. The real network "
        "is proved layers first (no premise evaluation); its refutation is an arb ball witness, re-proved by the "
        "checker's Fraction intervals. One run each on a shared machine: wall times include other load.",
    ])
    print(text)
    write_results(a.out, "real", text, {"columns": COLUMNS, "rows": rows, "verify_ratio": [min(ratios), max(ratios)]})
    ok = all(r["accepted"] and r["verdict"] == "layerwise-equivariant" for r in rows) and \
        all(r["refutation_accepted"] for r in rows if r["activation"] == "tanh")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
