"""Local identifiability by the exact Jacobian rank mod 2^61 - 1, against the parameter count.

tanh_series(3) MLPs with biases (random integer weights in [-5, 5], seed 5), from the built-in example
(152 parameters) to (16, 64, 64, 16) (6 288 parameters), plus the hidden-rotation network of
docs/identifiability.md.  For each: the decision (symeq/fibre/jacobian.py: reverse-mode Jacobian
modulo p, python-flint's ``nmod_mat`` elimination with 2 threads, the certificate's independent rows),
split into Jacobian and rank seconds, and the standard-library checker (symeq_check/,
``check_jacobian_rank``) on the certificate, with its ratio to the decision.  The checker refuses
certificates beyond its stated size limit (rows x r x P > ``MAX_JACOBIAN_WORK``): those rows say so.

```
python benchmarks/bench_local_ident.py            # every row, a few minutes (the 6 288-parameter rank dominates)
python benchmarks/bench_local_ident.py --quick    # smoke test: the two smallest rows
python benchmarks/bench_local_ident.py --only 6288 --stdlib   # one row; the checker's standard-library elimination
```

The checker eliminates with python-flint's ``nmod_mat``, installed in its hook as ``symeq check`` does (``symeq_check/accel.py``; the
``check_elimination`` column says which), the last affine layer's block first when every row is certified;
``--stdlib`` sets ``SYMEQ_CHECK_STDLIB=1`` (the standard-library packed-integer elimination).

Results: stdout and ``--out`` (default benchmarks/results/: local_ident.md, local_ident.json); progress on
stderr.  Times are wall-clock on a machine shared with other jobs (the load average is in the JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import markdown_table, write_results  # noqa: E402

import symeq_check as check  # noqa: E402
from symeq_check.identifiability.rank import MAX_JACOBIAN_WORK  # noqa: E402
from symeq.activations import monomial, tanh_series  # noqa: E402
from symeq.examples import builtin_example  # noqa: E402
from symeq.fibre.jacobian import jacobian_identifiability  # noqa: E402
from symeq.io import model_to_json  # noqa: E402
from symeq.models import DenseLayer, Model  # noqa: E402

CASES = [("built-in example", None), ("(8,16,8,8)", (8, 16, 8, 8)), ("(16,8,4,16)", (16, 8, 4, 16)),
         ("(4,4,4,4,4,4)", (4, 4, 4, 4, 4, 4)), ("hidden rotation (3,5,5,2,1)", "rotation"),
         ("(8,32,32,8)", (8, 32, 32, 8)), ("(16,32,32,16)", (16, 32, 32, 16)),
         ("(16,64,64,16)", (16, 64, 64, 16)),
         # the rows of issue 25's table
         ("(6,10,8,4)", (6, 10, 8, 4)), ("(8,24,24,8)", (8, 24, 24, 8)), ("(16,40,40,16)", (16, 40, 40, 16))]


def mlp(widths, seed=5, acts=None):
    rng = random.Random(seed)
    layers = []
    for i in range(len(widths) - 1):
        W = [[rng.randint(-5, 5) for _ in range(widths[i])] for _ in range(widths[i + 1])]
        b = [rng.randint(-5, 5) for _ in range(widths[i + 1])]
        act = None if i == len(widths) - 2 else (acts[i] if acts else tanh_series(3))
        layers.append(DenseLayer(W, b, act))
    return Model(widths[0], layers)


def model_for(spec):
    if spec is None:
        return builtin_example().with_group(None)
    if spec == "rotation":
        m = mlp((3, 5, 5, 2, 1), seed=3, acts=[tanh_series(3), tanh_series(3), monomial(2)])
        m.layers[-1] = DenseLayer([[1, 1]], [0], None)
        return m
    return mlp(spec)


def run_case(name, spec) -> dict:
    m = model_for(spec)
    load = round(os.getloadavg()[0], 2)  # the 1-minute load average as this row starts (a shared machine)
    print(f"{name}: deciding ...", file=sys.stderr, flush=True)
    t = time.perf_counter()
    r = jacobian_identifiability(m, certificate=True)
    decide = time.perf_counter() - t
    row = {"network": name, "params": r.n_params, "rank": r.rank, "bound": r.n_params - (r.orbit_dimension or 0),
           "points": r.points, "status": r.status, "decide_s": decide,
           "jacobian_s": r.timings.get("jacobian", 0.0), "rank_s": r.timings.get("rank", 0.0),
           "check_s": None, "check": "no certificate", "check_over_decide": None, "check_elimination": None,
           "dimension_lower_bound": r.dimension_lower_bound, "load": load, "load_after_check": None}
    if r.certificate is not None:
        cert = json.loads(json.dumps(r.certificate))
        model = json.loads(json.dumps(model_to_json(m)))
        work = len(cert.get("rows", ())) * r.rank * r.n_params
        if work > MAX_JACOBIAN_WORK:
            row["check"] = f"refused: rows r P = {work:.2g} > limit {MAX_JACOBIAN_WORK:.2g}"
        else:
            print(f"{name}: checking ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            rep = check.check_certificate(cert, model)
            row["check_s"] = time.perf_counter() - t
            row["check"] = {True: "accepted", False: "rejected", None: "undetermined"}[rep.accepted]
            said = " ".join(rep.checks)
            row["check_elimination"] = ("nmod_mat, last layer first" if "block first" in said else "nmod_mat"
                                        if "nmod_mat" in said else "standard library")
            row["check_over_decide"] = row["check_s"] / decide
            row["load_after_check"] = round(os.getloadavg()[0], 2)
    print(f"{name}: {row['status']} rank {row['rank']}/{row['bound']} in {decide:.3g} s; check {row['check']}",
          file=sys.stderr, flush=True)
    return row


def markdown(res) -> str:
    cols = ["network", "params", "rank", "bound", "points", "status", "decide_s", "jacobian_s", "rank_s",
            "check", "check_s", "check_over_decide", "check_elimination", "load", "load_after_check"]

    def fmt(v):
        if v is None:
            return "–"
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    lines = ["## Local identifiability by the Jacobian rank mod 2^61-1", "",
             f"tanh_series(3) with biases; {res['cpus']} CPUs, load average {res['loadavg']} at the start; "
             "bound = #params - dim K.theta; times in seconds; load = the 1-minute load average as the row "
             "starts and after its check (a shared machine). The rank eliminates the last affine layer's "
             "Kronecker block first from 1 000 parameters on (symeq/fibre/jacobian.py, _structured_rank).", ""]
    lines += markdown_table(res["rows"], cols, fmt)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke test: the two smallest rows")
    p.add_argument("--only", type=int, action="append", metavar="PARAMS",
                   help="only the rows with this many parameters (repeatable)")
    p.add_argument("--stdlib", action="store_true", help="the checker's standard-library elimination "
                   "(SYMEQ_CHECK_STDLIB=1), not python-flint's nmod_mat")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    if args.stdlib:
        os.environ["SYMEQ_CHECK_STDLIB"] = "1"
    from symeq.numbers import install_check_accelerator
    from symeq_check import accel

    install_check_accelerator(accel.install)  # as `symeq check` does (the checker imports no flint)
    cases = CASES[:2] if args.quick else CASES
    if args.only:
        cases = [(n, s) for n, s in cases if model_for(s).n_params in set(args.only)]
    res = {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
           "rows": [run_case(n, s) for n, s in cases]}
    text = markdown(res)
    print(text)
    write_results(args.out, "local_ident" + ("-quick" if args.quick else "") + ("-only" if args.only else "")
                  + ("-stdlib" if args.stdlib else ""), text, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
