"""certify and check of a C4 ResNet on n x n images (issue 27): a graph network at image size.

The network (built here, float64, from numpy; ``build``): a lifting convolution 1 -> C (3x3, padding 1,
ReLU), then B post-activation residual blocks (conv 3x3 + ReLU, conv 3x3 affine, add, ReLU), then global
average pooling and a linear head to 10 classes (the pooling is folded into the head's dense matrix, as
symeq's readers fold it).  Hidden spaces carry regular C4 fields (C / 4 fields of 4 orientations): the
group ``rot90`` acts by the quarter turn of the pixels times the cyclic shift of each field's
orientations; the head is invariant.  Every layer is random, projected onto the equivariant layers with
these actions (symeq's own Reynolds average, float), then moved by Gaussian noise of relative size
``--noise`` (default 1e-4): the network certify meets is equivariant up to that noise, as a trained
network with an equivariant architecture is up to its float error.

Measured, each command in its own process (peak memory: that process's VmHWM):

* ``certify``: :func:`symeq.certification.certify` on the float network (the float derivation along the
  graph, the projection per layer node, the exact theta-bar, the function distance on ``--points``
  noise inputs, the exact verification of theta-bar); the time excludes building the network
  (reported separately) and the Python start-up and imports (measured inside the process);
* ``symeq check CERT MODEL``: the whole command (start-up and reading included), on the certificate and
  theta-bar that certify wrote;
* one float64 forward pass of the same network in torch (one image, median of 20), and each time as a
  multiple of it.

The issue's target is certify and check each under 60 s and under 2 GB at 28 x 28, 32 channels, 4 blocks (the
first row); the second row (8 x 8, 8 channels, 4 blocks) is one the exact graph walk takes today (its
spaces of 512 coordinates are within ``symeq.graph.derive.MAX_SPACE_DIM``).  ``--quick`` runs an 8 x 8,
8 channels, 1 block network.  Writes
``OUT/resnet_c4.md`` and ``OUT/resnet_c4.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_results  # noqa: E402

FULL = [{"n": 28, "channels": 32, "blocks": 4}, {"n": 8, "channels": 8, "blocks": 4}]
QUICK = [{"n": 8, "channels": 8, "blocks": 1}]
CLASSES = 10


def _actions(n: int, channels: int):
    """The generator's actions: on the input image (from the group) and on a regular hidden space."""
    from symeq.groups import image_rotation
    from symeq.numeric.models import group_from_exact
    from symeq.numeric.monomial import MonomialAction
    from symeq.numeric.project import signed_permutation

    group = image_rotation(n, 1, CLASSES)
    ngroup = group_from_exact(group)
    A = signed_permutation(ngroup.generators[0][0], "rot90")
    npix = n * n
    source = np.array([(c // 4) * 4 + (c + 1) % 4 for c in range(channels)])  # each field's orientations shifted
    hidden = MonomialAction((source[:, None] * npix + A.cols[None, :]).ravel(), np.ones(channels * npix))
    return group, ngroup, A, hidden


def build(n: int, channels: int, blocks: int, noise: float, seed: int = 0):
    """The float C4 ResNet (module docstring) as a GraphModel, with the group."""
    from symeq.certify_graph import _float_average, _project_layer
    from symeq.graph import GraphModel, Node
    from symeq.layers.conv import ConvShape
    from symeq.layers.conv.floating import NumericConvLayer
    from symeq.numeric.models import NumericDenseLayer, numeric_activation
    from symeq.numeric.monomial import MonomialAction
    from symeq.numeric.project import group_elements

    group, ngroup, A, H = _actions(n, channels)
    rng = np.random.default_rng(seed)
    relu = numeric_activation("relu")
    words = group_elements(ngroup)[0]

    def power(a, k):
        out = MonomialAction.identity(a.n)
        for _ in range(k):
            out = out @ a
        return out

    def projected(layer, P_in, P_out):
        pairs = [(power(P_in, len(w)), power(P_out, len(w))) for w in words]
        return _project_layer(layer, _float_average(layer, pairs), lambda dev, scale: 15)[1]  # (certify's own average)

    def conv(c_in, act, P_in):
        K = rng.standard_normal((channels, c_in, 3, 3)) / np.sqrt(9 * c_in)
        layer = NumericConvLayer(ConvShape(c_in, channels, n, n, 3, 3, 1, 1), K, 0.1 * rng.standard_normal(channels),
                                 act)
        return projected(layer, P_in, H)

    nodes = [Node("stem", "conv2d", ("input",), layer=conv(1, relu, A), segment="stem")]
    prev = "stem"
    for b in range(1, blocks + 1):
        nodes.append(Node(f"block{b}.1", "conv2d", (prev,), layer=conv(channels, relu, H), segment=f"block{b}", index=1))
        nodes.append(Node(f"block{b}", "conv2d", (f"block{b}.1",), layer=conv(channels, None, H), segment=f"block{b}",
                          index=2))
        nodes.append(Node(f"add{b}", "add", (prev, f"block{b}"), activation=relu))
        prev = f"add{b}"
    w = rng.standard_normal((CLASSES, channels)) / np.sqrt(channels)
    head = NumericDenseLayer(np.repeat(w, n * n, axis=1) / (n * n), 0.1 * rng.standard_normal(CLASSES), None)
    nodes.append(Node("head", "dense", (prev,), layer=projected(head, H, MonomialAction.identity(CLASSES)),
                      segment="head"))
    for nd in nodes:  # the float error of a trained network: relative Gaussian noise on every parameter
        layer = nd.layer
        if layer is None:
            continue
        if hasattr(layer, "kernel"):
            layer.kernel += noise * np.std(layer.kernel) * rng.standard_normal(layer.kernel.shape)
            layer.channel_bias += noise * np.std(layer.channel_bias) * rng.standard_normal(layer.channel_bias.shape)
        else:
            layer.weight += noise * np.std(layer.weight) * rng.standard_normal(layer.weight.shape)
            layer.bias += noise * np.std(layer.bias) * rng.standard_normal(layer.bias.shape)
    model = GraphModel(n * n, nodes, "head", None, f"C4 ResNet {n}x{n}x{channels}, {blocks} blocks", (1, n, n))
    return model, group


def _hwm_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return float(line.split()[1]) / 1024
    return float("nan")


def child(cfg: dict, out: Path) -> None:
    """One certify run in this process: writes theta-bar, the certificate and the figures as JSON."""
    from symeq.certification import certify
    from symeq.certify_graph import _n_params
    from symeq.io import model_to_json, write_json

    t = time.perf_counter()
    model, group = build(cfg["n"], cfg["channels"], cfg["blocks"], cfg["noise"])
    t_build = time.perf_counter() - t
    t = time.perf_counter()
    c = certify(model, group, timeout=cfg["timeout"], noise_points=cfg["points"])
    t_cert = time.perf_counter() - t
    rec = {"status": c.status, "reason": c.reason, "build_s": t_build, "certify_s": t_cert, "certify_mb": _hwm_mb(),
           "verify_s": None if c.verification is None else c.verification.seconds,
           "parameters_max": c.max_distance, "distance": c.distance,
           "function_noise_max": c.function_distance.get("noise", {}).get("max"),
           "parameters": int(sum(_n_params(l) for l in model.layers))}
    if c.status == "certified":
        write_json(model_to_json(c.model), out / "bar.json")
        write_json(c.certificate(), out / "cert.json")
    (out / "child.json").write_text(json.dumps(rec, default=float))


WRAP = ("import runpy, sys\n"
        "sys.argv = ['symeq'] + sys.argv[1:]\n"
        "try:\n    runpy.run_module('symeq', run_name='__main__')\n"
        "finally:\n    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
        "    sys.stderr.write('MAXRSS %s\\n' % (hwm[0].split()[1] if hwm else 'nan'))\n")


def run_check(cert: Path, model: Path) -> tuple[int, float, float]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", WRAP, "check", str(cert), str(model)], capture_output=True, text=True)
    wall = time.perf_counter() - t
    rss = [float(x.split()[1]) for x in p.stderr.splitlines() if x.startswith("MAXRSS ")]
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
    return p.returncode, wall, (rss[-1] / 1024 if rss else float("nan"))


def torch_forward_seconds(cfg: dict) -> float | None:
    """One float64 forward pass of the same architecture in torch (one image, median of 20)."""
    try:
        import torch
    except ImportError:
        return None
    model, _ = build(cfg["n"], cfg["channels"], cfg["blocks"], cfg["noise"])
    convs = {}
    for nd in model.nodes:
        if nd.layer is not None and hasattr(nd.layer, "kernel"):
            S = nd.layer.shape
            m = torch.nn.Conv2d(S.in_channels, S.out_channels, 3, padding=1).double()
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(nd.layer.kernel))
                m.bias.copy_(torch.from_numpy(nd.layer.channel_bias))
            convs[nd.name] = m
    head = model.node("head").layer
    lin = torch.nn.Linear(cfg["channels"], CLASSES).double()
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(head.weight[:, ::cfg["n"] ** 2] * cfg["n"] ** 2))
        lin.bias.copy_(torch.from_numpy(head.bias))

    def forward(x):
        x = torch.relu(convs["stem"](x))
        for b in range(1, cfg["blocks"] + 1):
            x = torch.relu(x + convs[f"block{b}"](torch.relu(convs[f"block{b}.1"](x))))
        return lin(x.mean((2, 3)))

    x = torch.randn(1, 1, cfg["n"], cfg["n"], dtype=torch.float64)
    times = []
    with torch.no_grad():
        forward(x)
        for _ in range(20):
            t = time.perf_counter()
            forward(x)
            times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def bench(cfg: dict) -> dict:
    load = os.getloadavg()[0]  # the shared machine's 1-minute load average as the row starts
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        t = time.perf_counter()
        p = subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg), "--out", str(out)],
                           capture_output=True, text=True)
        wall = time.perf_counter() - t
        if p.returncode != 0 or not (out / "child.json").exists():
            sys.stderr.write(p.stderr[-3000:])
            return {**cfg, "status": f"certify process failed (exit {p.returncode})", "certify_process_s": wall}
        rec = {**cfg, **json.loads((out / "child.json").read_text()), "certify_process_s": wall, "load": load}
        if (out / "cert.json").exists():
            rec["check_exit"], rec["check_s"], rec["check_mb"] = run_check(out / "cert.json", out / "bar.json")
            rec["certificate_mb"] = (out / "cert.json").stat().st_size / 2 ** 20
    tf = torch_forward_seconds(cfg)
    rec["torch_forward_s"] = tf
    rec["certify_over_torch"] = None if not tf else rec.get("certify_s", 0) / tf
    rec["check_over_torch"] = None if not tf or "check_s" not in rec else rec["check_s"] / tf
    return rec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="a tiny network (8x8, 8 channels, 1 block)")
    p.add_argument("--noise", type=float, default=1e-4, help="relative weight noise (default 1e-4)")
    p.add_argument("--points", type=int, default=64, help="certify's noise inputs for the function distance (default 64)")
    p.add_argument("--timeout", type=float, default=600.0, help="certify's time budget (default 600 s)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        child(json.loads(args.child), Path(args.out))
        return 0
    recs = [bench({**row, "noise": args.noise, "points": args.points, "timeout": args.timeout})
            for row in (QUICK if args.quick else FULL)]
    cols = ["n", "channels", "blocks", "parameters", "status", "build_s", "certify_s", "verify_s", "certify_mb",
            "check_exit",
            "check_s", "check_mb", "certificate_mb", "torch_forward_s", "certify_over_torch", "check_over_torch",
            "parameters_max", "function_noise_max", "load"]
    fmt = lambda v: "-" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["# certify and check of a C4 ResNet (issue 27)", "",
             "n x n images, C channels (regular C4 fields), B residual blocks, ReLU, global average pooling and a "
             f"linear head to {CLASSES} classes; weight noise {args.noise:g} (relative); certify with {args.points} "
             "noise inputs.  certify: in-process time of certify() (building the network and imports excluded; "
             "verify_s: the exact verification of theta-bar within it), peak memory of its process; check: the whole "
             "`symeq check` command in its own process; torch: one float64 forward pass of one image (median of 20); "
             "load: the machine's 1-minute load average as the row started (a shared 2-core machine).",
             "", *markdown_table([{c: r.get(c) for c in cols} for r in recs], cols, fmt), "",
             "Target (issue 27): certify and check each < 60 s and < 2 GB at 28x28, 32 channels, 4 blocks."]
    for r in recs:
        if r.get("reason"):
            lines.append(f"\n{r['n']}x{r['n']}x{r['channels']}, {r['blocks']} blocks: certify's reason: {r['reason']}")
    text = "\n".join(lines)
    print(text)
    write_results(args.out, "resnet_c4" + ("-quick" if args.quick else ""), text, {"rows": recs, "columns": cols})
    return 0


if __name__ == "__main__":
    sys.exit(main())
