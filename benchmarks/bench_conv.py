"""Convolutions at image size: verify, check and numeric-check of C4 networks kept as kernels (issue 19).

Each row is an escnn-style C4 network (symeq/layers/conv/nets.py: a lifting convolution and a group
convolution on regular fields, 3x3 kernels, padding 1, tanh_series(3), an invariant readout) on
n x n images with C hidden channels.  Every command runs as its own process, the way a user runs it:

* ``symeq verify MODEL --certificate CERT``: wall time and peak memory (``ru_maxrss`` of that process);
* ``symeq check CERT MODEL``: wall time and peak memory;
* ``symeq numeric-check MODEL.npz``: wall time (the float twin, kernels in the npz);
* one float forward pass of the same network in torch (one image, median of 20, float64), and each
  command's time as a multiple of it.

The 16 x 16 x 16 row is the network of the issue that took 379 s when convolutions were expanded to
dense layers; the 28 x 28 x 32 row is the target (verify under 30 s and 2 GB, check under the verify
time, numeric-check under 5 s).  ``--quick`` runs two tiny rows.  Writes ``OUT/conv.md``,
``OUT/conv.json`` and, with matplotlib, ``OUT/conv.png`` (time against pixels x channels).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_results  # noqa: E402

ROWS = [(8, 8), (12, 8), (16, 8), (16, 16), (28, 16), (28, 32)]
QUICK = [(5, 4), (6, 8)]
DENSE_BEFORE = {(8, 8): 6.5, (12, 8): 37.0, (16, 8): 94.0, (16, 16): 379.0}  # issue 19's table (dense expansion)

# peak memory: VmHWM of the command's own process (ru_maxrss would carry this parent's peak across exec)
WRAP = ("import runpy, sys\n"
        "sys.argv = ['symeq'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('symeq', run_name='__main__')\n"
        "finally:\n    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
        "    sys.stderr.write('MAXRSS %s\\n' % (hwm[0].split()[1] if hwm else 'nan'))\n")


def run(args: list[str]) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak memory in MB) of one symeq command in its own process."""
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", WRAP] + args, capture_output=True, text=True)
    wall = time.perf_counter() - t
    rss = [float(line.split()[1]) for line in p.stderr.splitlines() if line.startswith("MAXRSS ")]
    if p.returncode not in (0,):
        sys.stderr.write(p.stderr[-2000:])
    return p.returncode, wall, (rss[-1] / 1024 if rss else float("nan"))


def torch_forward_seconds(layers, n: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    mods = []
    for l in layers[:-1]:
        s = l.shape
        conv = torch.nn.Conv2d(s.in_channels, s.out_channels, s.kh, stride=s.stride, padding=s.padding).double()
        with torch.no_grad():
            conv.weight.copy_(torch.tensor([[[[float(x) for x in r] for r in kc] for kc in ko] for ko in l.kernel]))
            conv.bias.copy_(torch.tensor([float(b) for b in l.channel_bias]))
        mods += [conv, torch.nn.Tanh()]
    last = layers[-1]
    lin = torch.nn.Linear(last.in_dim, 1).double()
    mods += [torch.nn.Flatten(), lin]
    net = torch.nn.Sequential(*mods)
    x = torch.randn(1, 1, n, n, dtype=torch.float64)
    with torch.no_grad():
        net(x)
        times = []
        for _ in range(20):
            t = time.perf_counter()
            net(x)
            times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def bench_row(n: int, channels: int, tmp: Path) -> dict:
    from symeq.activations import tanh_series
    from symeq.io import model_to_json, write_json
    from symeq.layers.conv.nets import regular_network
    from symeq.models import Model
    from symeq.numeric.models import from_exact, save_npz

    layers, group = regular_network("C4", n, channels // 4, 2, tanh_series(3), rng=0)
    model = Model(n * n, layers, group, f"C4 {n}x{n}x{channels}")
    path, cert, npz = tmp / f"c4_{n}_{channels}.json", tmp / f"c4_{n}_{channels}.cert.json", tmp / f"c4_{n}_{channels}.npz"
    write_json(model_to_json(model), path)
    save_npz(from_exact(model), npz)
    rc_v, t_v, m_v = run(["verify", str(path), "--certificate", str(cert), "--timeout", "600"])
    rc_c, t_c, m_c = run(["check", str(cert), str(path)])
    rc_n, t_n, m_n = run(["numeric-check", str(npz)])
    verdict = json.loads(cert.read_text())["verdict"] if cert.exists() else None
    tf = torch_forward_seconds(layers, n)
    row = {"image": f"{n}x{n}", "channels": channels, "hidden_width": channels * n * n, "pixels_x_channels": n * n * channels,
           "verdict": verdict, "verify_exit": rc_v, "verify_s": t_v, "verify_mb": m_v, "check_exit": rc_c, "check_s": t_c,
           "check_mb": m_c, "numeric_check_exit": rc_n, "numeric_check_s": t_n, "torch_forward_s": tf,
           "verify_over_torch": None if not tf else t_v / tf, "dense_before_s": DENSE_BEFORE.get((n, channels)),
           "speedup_vs_dense": None if (n, channels) not in DENSE_BEFORE else DENSE_BEFORE[(n, channels)] / t_v}
    print(f"  {n}x{n}x{channels}: verify {t_v:.2f} s {m_v:.0f} MB (exit {rc_v}), check {t_c:.2f} s (exit {rc_c}), "
          f"numeric-check {t_n:.2f} s (exit {rc_n})", file=sys.stderr)
    return row


def plot(rows: list[dict], out: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.5))
    x = [r["pixels_x_channels"] for r in rows]
    for key, label in (("verify_s", "symeq verify"), ("check_s", "symeq check"), ("numeric_check_s", "numeric-check")):
        ax.loglog(x, [r[key] for r in rows], "o-", label=label)
    dense = [(r["pixels_x_channels"], r["dense_before_s"]) for r in rows if r["dense_before_s"]]
    if dense:
        ax.loglog(*zip(*dense), "k--", label="verify, dense expansion (before)")
    ax.set_xlabel("pixels x channels (hidden width)")
    ax.set_ylabel("seconds (one process each)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "conv.png", dpi=120)
    return str(out / "conv.png")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke test (two tiny networks)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n, c in (QUICK if args.quick else ROWS):
            rows.append(bench_row(n, c, Path(d)))
    cols = ["image", "channels", "hidden_width", "verdict", "verify_s", "verify_mb", "check_s", "check_mb",
            "numeric_check_s", "torch_forward_s", "verify_over_torch", "dense_before_s", "speedup_vs_dense"]
    fmt = lambda v: "-" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["# Convolutions kept as kernels (issue 19)", "",
             "C4 networks (lifting + group convolution, regular fields, 3x3, tanh_series(3), invariant readout); "
             "each command in its own process; memory is the process's peak RSS; torch: one float64 forward "
             "pass of one image (median of 20).", ""]
    lines += markdown_table(rows, cols, fmt)
    png = plot(rows, Path(args.out)) if not args.quick else None
    if png:
        lines += ["", f"Figure: {Path(png).name} (time against pixels x channels)."]
    text = "\n".join(lines)
    print(text)
    write_results(args.out, "conv" + ("-quick" if args.quick else ""), text, {"rows": rows, "columns": cols})
    return 0


if __name__ == "__main__":
    sys.exit(main())
