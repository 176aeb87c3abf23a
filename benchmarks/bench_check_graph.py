"""Benchmark: the independent checker on graph certificates (docs/graphs.md) as the images grow.

What is measured: an exact conv2d residual network on n x n images -- a lifting conv 1 -> C (3x3, padding 1,
ReLU), B residual blocks (conv + ReLU, conv affine, add, ReLU), a flatten and a dense head to 10 outputs --
with random integer kernels symmetric left-right, so that it is equivariant under the mirror of the pixels
(the head sums every pixel: invariant).  Its certificate is written here by hand (the mirror on every hidden
space, ``symeq-certificate/2``, ``graph_sha256`` from the checker), independently of symeq's prover, whose
exact path stops at smaller spaces today (benchmarks/resnet_c4.py).  Then ``check``: the whole command
``python -m symeq_check CERT MODEL`` in its own process (start-up and reading included), wall time and peak
memory (VmHWM), and its exit code (0: accepted).

Usage::

    python benchmarks/bench_check_graph.py            # 8x8/8/1, 16x16/16/2, 28x28/32/4 (a minute)
    python benchmarks/bench_check_graph.py --quick    # 8x8/8/1 (seconds)

Markdown to stdout and ``OUT/check_graph.md``; numbers to ``OUT/check_graph.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import markdown_table, write_results  # noqa: E402
from symeq_check.graph import graph_digest, read_graph_model  # noqa: E402

RELU = {"type": "relu"}


def network(n: int, channels: int, blocks: int, seed: int = 0) -> tuple[dict, dict]:
    """The model file and its hand-written certificate (see the module docstring)."""
    rng = random.Random(seed)

    def conv(co, ci, act, shape=None):
        kernel = [[[[a, b, a] for a, b in ((str(rng.randint(-3, 3)), str(rng.randint(-3, 3))) for _ in range(3))]
                   for _ in range(ci)] for _ in range(co)]
        spec = {"type": "conv2d", "kernel": kernel, "bias": None, "padding": 1, "activation": act}
        return dict(spec, input_shape=shape) if shape else spec

    graph, prev = [{"name": "stem", "input": "input", "layers": [conv(channels, 1, RELU, [1, n, n])]}], "stem"
    for b in range(blocks):
        graph += [{"name": f"b{b}", "input": prev, "layers": [conv(channels, channels, RELU),
                                                              conv(channels, channels, None)]},
                  {"name": f"a{b}", "add": [prev, f"b{b}"], "activation": RELU}]
        prev = f"a{b}"
    dim = channels * n * n
    graph.append({"name": "head", "input": prev, "layers": [
        {"type": "flatten"}, {"type": "dense", "weight": [["1"] * dim] * 10, "bias": None, "activation": None}]})
    mirror = [y * n + (n - 1 - x) for y in range(n) for x in range(n)]
    flip = [["1" if c == mirror[r] else "0" for c in range(n * n)] for r in range(n * n)]
    eye = [["1" if i == j else "0" for j in range(10)] for i in range(10)]
    model = {"format": "symeq-model/1", "input_dim": n * n, "graph": graph,
             "group": {"generators": [{"input": flip, "output": eye}]}}
    action = {"kind": "monomial", "source": [c * n * n + mirror[p] for c in range(channels) for p in range(n * n)],
              "factor": ["1"] * dim}
    spaces = ["stem"] + [s for b in range(blocks) for s in (f"b{b}.1", f"b{b}", f"a{b}")]
    cert = {"format": "symeq-certificate/2", "verdict": "layerwise-equivariant", "input_dim": n * n,
            "group": model["group"],
            "parameters": {"graph_sha256": graph_digest(read_graph_model(model)), "graph": graph, "output": "head",
                           "reparametrized": False},
            "spaces": spaces, "latent_actions": [[action]] * len(spaces), "latent_offsets": None}
    return model, cert


WRAP = ("import runpy, sys\nsys.argv = ['symeq_check'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('symeq_check', run_name='__main__')\n"
        "finally:\n    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
        "    sys.stderr.write('MAXRSS %s\\n' % (hwm[0].split()[1] if hwm else 'nan'))\n")


def bench(n: int, channels: int, blocks: int) -> dict:
    model, cert = network(n, channels, blocks)
    with tempfile.TemporaryDirectory() as d:
        mp, cp = Path(d) / "net.json", Path(d) / "cert.json"
        mp.write_text(json.dumps(model))
        cp.write_text(json.dumps(cert))
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", WRAP, str(cp), str(mp)], capture_output=True, text=True,
                           cwd=str(Path(__file__).resolve().parent.parent))
        wall = time.perf_counter() - t
        rss = next((float(line.split()[1]) / 1024 for line in p.stderr.splitlines() if line.startswith("MAXRSS")),
                   float("nan"))
        return {"n": n, "channels": channels, "blocks": blocks, "hidden_dim": channels * n * n,
                "exit": p.returncode, "check_s": wall, "check_mb": rss,
                "certificate_mb": cp.stat().st_size / 2 ** 20, "model_mb": mp.stat().st_size / 2 ** 20}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small network (seconds)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    sizes = [(8, 8, 1)] if args.quick else [(8, 8, 1), (16, 16, 2), (28, 32, 4)]
    rows = [bench(*s) for s in sizes]
    cols = ["n", "channels", "blocks", "hidden_dim", "exit", "check_s", "check_mb", "certificate_mb", "model_mb"]
    text = "\n".join(["# The checker on graph certificates (conv2d residual networks, mirror)", ""]
                     + markdown_table(rows, cols))
    print(text)
    write_results(args.out, "check_graph", text, {"rows": rows})


if __name__ == "__main__":
    main()
