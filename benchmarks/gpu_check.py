"""GPU check of the numeric twin's torch paths: one short script for a machine with CUDA.

Nothing in symeq needs a GPU; this checks that the torch paths give the numpy answers there and
how fast they are.  What it runs (each step timed, results to ``--out`` as JSON and to stdout):

1. the matrix-free Jacobian products (:class:`symeq.numeric.fdim.JacobianOperator`, torch
   ``jvp``/``vjp`` under ``vmap``) against the numpy chain rule on a random tanh net: the largest
   relative difference;
2. the functional dimension of a tanh MLP, matrix-free, with the torch products on the device
   (``--quick``: 1 608 parameters; default: 111 264) and with numpy, both ranks and times;
3. a short training run of the mirror experiment's autoencoder on the device, then the numeric
   analysis of the trained net (the paper's metric on layer 1).

Usage::

    python benchmarks/gpu_check.py --out DIR             # on a CUDA machine (a few minutes)
    python benchmarks/gpu_check.py --device cpu --quick  # the same steps on the CPU (smoke test)

Exit 0 when every comparison agrees, 1 when one does not, 2 when the device is not there.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_results  # noqa: E402

LINES: list = []


def say(text: str) -> None:
    """Print a result line and keep it for the Markdown results file."""
    print(text)
    LINES.append(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=".")
    a = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch is not installed: pip install 'symeq[numeric]'", file=sys.stderr)
        return 2
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"device {a.device!r} requested, but torch {torch.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    from symeq.numeric import NumericDenseLayer, NumericModel, numeric_activation
    from symeq.numeric.fdim import JacobianOperator, functional_dimension

    res = {"torch": torch.__version__, "device": a.device,
           "device_name": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else "cpu"}
    ok = True

    def net(widths, seed=0):
        rng = np.random.default_rng(seed)
        act = numeric_activation("tanh")
        return NumericModel(widths[0], [NumericDenseLayer(1.5 * rng.standard_normal((b, c)) / np.sqrt(c),
                                                          0.5 * rng.standard_normal(b), act if i < len(widths) - 2 else None)
                                        for i, (c, b) in enumerate(zip(widths[:-1], widths[1:]))])

    # 1. products
    m = net([16, 64, 64, 16])
    X = np.random.default_rng(1).standard_normal((300, 16))
    V = np.random.default_rng(2).standard_normal((m.n_params, 8))
    t = time.perf_counter()
    tj = JacobianOperator(m, X, backend="torch", device=a.device)
    JV_t = tj.matmat(V)
    JTJV_t = tj.rmatmat(JV_t)
    res["products_torch_s"] = time.perf_counter() - t
    nj = JacobianOperator(m, X)
    JV, JTJV = nj.matmat(V), nj.rmatmat(nj.matmat(V))
    res["products_rel_diff"] = float(max(np.abs(JV_t - JV).max() / np.abs(JV).max(),
                                         np.abs(JTJV_t - JTJV).max() / np.abs(JTJV).max()))
    ok &= res["products_rel_diff"] < 1e-10
    say(f"1. J V and J^T J V, torch on {a.device} vs numpy: relative difference {res['products_rel_diff']:.2g}")

    # 2. functional dimension, matrix-free
    big = net([8, 32, 32, 8] if a.quick else [32, 256, 256, 128, 32])
    for backend in ("torch", "numpy"):
        r = functional_dimension(big, rng=1, method="krylov", backend=backend, device=a.device)
        res[f"fdim_{backend}"] = {"rank": r.rank, "expected": r.expected, "seconds": r.seconds,
                                  "iterations": r.details["iterations"], "backend": r.backend}
        say(f"2. functional dimension ({big.n_params} parameters), {r.backend}: {r.rank} of {r.expected}, "
              f"{r.seconds:.1f} s, {r.details['iterations']} iterations")
    ok &= res["fdim_torch"]["rank"] == res["fdim_numpy"]["rank"] == res["fdim_numpy"]["expected"]

    # 3. training on the device, then the analysis
    from symeq.numeric.experiment import run_mirror

    t = time.perf_counter()
    run = run_mirror("tanh", "autoencoder", epochs=4 if a.quick else 60, progress=False, device=a.device)
    res["training"] = {"seconds": time.perf_counter() - t, "device": run.training.get("device"),
                       "layer1_horizontal_error": run.errors["f_1, horizontal"]}
    ok &= run.training.get("device", "").startswith(a.device.split(":")[0])
    say(f"3. autoencoder trained on {run.training.get('device')} in {res['training']['seconds']:.1f} s; "
          f"layer-1 horizontal error {run.errors['f_1, horizontal']:.3g}")

    res["all_agree"] = bool(ok)
    say("all comparisons agree" if ok else "A COMPARISON DISAGREES (see gpu_check.json)")
    # the shared results writer: gpu_check.md, and gpu_check.json with the machine's metadata block
    write_results(a.out, "gpu_check", "\n".join(LINES), res)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
