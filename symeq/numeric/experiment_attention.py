"""``symeq experiment attention``: the paper's one-layer multi-head attention autoencoder (docs/attention.md).

The paper (Shahverdi, Marchetti, Bokman, Kohn, arXiv 2601.21645) trains a one-layer multi-head
attention autoencoder with a soft mirror-equivariance loss and reports that most heads' maps
mirror onto themselves while two heads swap.  This module runs that experiment on what is
available offline, scikit-learn's 8x8 digits, with the token layout adapted:

* **tokens**: each 8x8 image is cut into 2x4 patches (2 pixel rows, 4 pixel columns), 8 tokens of
  d = 8 pixels (token t = 2 r + c for the patch in patch-row r and patch-column c; pixel a*4 + b
  inside it), the layout of ``patchmirror:8x8:2x4`` (:func:`symeq.groups.tokens.patch_mirror`);
* **the mirror**: the horizontal mirror swaps the two patch columns (tokens 2r <-> 2r + 1) and
  reverses the 4 columns inside each patch (a pixel permutation C of the channels); the
  vertical-mirror control reverses the patch rows and swaps the two pixel rows inside each patch;
* **the network**: one ``nn.MultiheadAttention`` (embed dimension 8, ``heads`` heads, with biases,
  no positional encoding), input tokens -> output tokens (the autoencoder);
* **training** (torch, seeded, a fixed number of Adam steps on batches of :data:`BATCH` images with
  Gaussian jitter :data:`JITTER`): the reconstruction loss, plus in the second half the soft
  mirror-equivariance loss ``weight * ||f(g x) - g f(x)||^2`` (g the horizontal mirror), as the
  paper's schedule.  The jitter is an adaptation to the digits (constant border pixels).

Reported: per head, its partner under the mirror (matched by the score matrices C^T A_h C ~ A_k
and the value maps, :func:`symeq.layers.attention.floating.match_heads_numeric`) with its residual, so which
heads map to themselves and which swap; the paper's metric (a least-squares linear map A with
A f_1(y) ~ f_1(g y) on the heads' outputs, the median of ||f_1(g y) - A f_1(y)|| / ||f_1(y)|| on
held-out Gaussian noise inputs with the data's per-feature mean and spread) for the mirror and for
the vertical control; a figure of the heads' score maps A_h = Q_h K_h^T; and the certified nearest
layerwise-equivariant network (:mod:`symeq.certify_attention`), whose certificate ``symeq check``
re-checks in a separate process.  Every network is saved as ``.onnx`` (torch's exporter) and
``.npz`` (:func:`save_attention_npz`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import InputError

__all__ = ["run_attention_experiment", "digit_tokens", "mirror_groups", "save_attention_npz", "load_attention_npz",
           "format_attention_table", "DEFAULT_STEPS"]

DEFAULT_STEPS = 1200
"""Adam steps of the default run (the second half with the equivariance loss)."""

MATCHED = 0.05
"""Largest per-head matching residual under which a head counts as mapped onto its partner."""

BATCH = 256
"""Images per Adam step (drawn with replacement, seeded)."""

JITTER = 0.1
"""Standard deviation of the Gaussian noise added to the (normalised) inputs at every step: the 8x8
digits have border pixels that are constant on the data, along which the attention's parameters
would not be determined by the data at all (a constant feature acts like a bias, and softmax drops
every score term that is constant along a row)."""


def digit_tokens(x: np.ndarray) -> np.ndarray:
    """Digits (N x 64, row-major 8x8) as 8 tokens of 2x4 patches, flattened t*8 + c."""
    img = x.reshape(-1, 4, 2, 2, 4)                    # n, patch row r, pixel row a, patch col c, pixel col b
    return img.transpose(0, 1, 3, 2, 4).reshape(-1, 64)  # n, r, c, a, b


def mirror_groups():
    """(horizontal, vertical): exact groups on the 8 tokens x 8 pixels (input and output alike)."""
    from ..groups.tokens import attention_group, patch_mirror
    from ..groups.core import permutation_matrix

    horizontal = patch_mirror(8, 8, 2, 4)
    tokens = [(3 - r) * 2 + c for r in range(4) for c in range(2)]
    pix = [(1 - a) * 4 + b for a in range(2) for b in range(4)]
    C = permutation_matrix(pix)
    vertical = attention_group(8, [(tokens, C, C)], ["vertical mirror"], label="vertical patch mirror 8x8 (2x4 patches)")
    return horizontal, vertical


def _index(group) -> np.ndarray:
    """idx with (g x)[k] = x[idx[k]] for the group's one permutation generator."""
    A = group.generators[0][0]
    n = A.nrows()
    return np.array([next(j for j in range(n) if A[k, j] != 0) for k in range(n)])


def _train(x, idx, heads, steps, seed, weight, lr, progress, jitter=JITTER, batch=BATCH):
    from ..layers.attention.torch_modules import TokenAttention
    from .models import _torch

    torch = _torch()
    torch.manual_seed(seed)
    net = TokenAttention(8, 8, heads, bias=True)
    X0 = torch.tensor(x, dtype=torch.float32)
    g = torch.tensor(idx, dtype=torch.long)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    log = []
    for step in range(steps):
        opt.zero_grad()
        rows = torch.randint(0, X0.shape[0], (min(batch, X0.shape[0]),), generator=gen)
        X = X0[rows] + jitter * torch.randn(len(rows), X0.shape[1], generator=gen)
        Y = net(X)
        rec = torch.mean((Y - X) ** 2)
        loss = rec
        eq = None
        if step >= steps // 2:  # the second half: the soft mirror-equivariance loss
            eq = torch.mean((net(X[:, g]) - Y[:, g]) ** 2)
            loss = rec + weight * eq
        loss.backward()
        opt.step()
        if step % max(1, steps // 10) == 0 or step == steps - 1:
            r, e = float(rec.detach()), None if eq is None else float(eq.detach())
            log.append({"step": step + 1, "reconstruction": r, "equivariance": e})
            if progress:
                print(f"  step {step + 1}/{steps}: reconstruction {r:.4f}"
                      + ("" if e is None else f", equivariance {e:.2e}"), file=sys.stderr)
    return net.eval(), log


def _paper_metric(layer, gidx, Z_fit, Z_test) -> float:
    """The paper's metric on the heads' outputs f_1: least-squares A with A f_1(y) ~ f_1(g y)."""
    hl = layer.heads_layer()
    F, Fg = hl.forward(Z_fit), hl.forward(Z_fit[:, gidx])
    A = np.linalg.lstsq(F, Fg, rcond=None)[0]
    T, Tg = hl.forward(Z_test), hl.forward(Z_test[:, gidx])
    res = np.linalg.norm(Tg - T @ A, axis=1) / np.maximum(np.linalg.norm(T, axis=1), 1e-300)
    return float(np.median(res))


def _head_partners(layer, group):
    """Per head: (partner, residual) from the numeric matching, and the margin."""
    from ..layers.attention.floating import match_heads_numeric

    A = np.array([[float(group.generators[0][0][i, j]) for j in range(64)] for i in range(64)])
    hl = layer.heads_layer()
    rho, res, margin, why = match_heads_numeric(hl, A)
    if why:
        raise InputError(f"the mirror does not act as tokens (x) channels: {why}")
    T, H, dv = layer.tokens, len(layer.query), layer.value[0].shape[1]
    from ..layers.attention.floating import factor_kron_numeric

    R = factor_kron_numeric(rho, T, H * dv)[1]
    blocks = np.array([[np.linalg.norm(R[h * dv:(h + 1) * dv, k * dv:(k + 1) * dv]) for k in range(H)]
                       for h in range(H)])
    perm = [int(np.argmax(blocks[h])) for h in range(H)]
    return perm, [float(r) for r in res], float(margin)


def save_attention_npz(layer, path) -> None:
    """A softmax attention layer as ``.npz``: kind, tokens, query/key/value/out (H x ...), score_bias
    (H x d, zeros for none), bias (d_out), scale (NaN for 1/sqrt(d_k))."""
    H, d = len(layer.query), layer.d
    sb = np.zeros((H, d)) if layer.score_bias is None else np.array(
        [np.zeros(d) if b is None else b for b in layer.score_bias])
    np.savez(path, kind=np.array("softmax-attention"), tokens=np.array(layer.tokens), query=np.array(layer.query),
             key=np.array(layer.key), value=np.array(layer.value), out=np.array(layer.out), score_bias=sb,
             bias=np.zeros(layer.d_out) if layer.bias is None else layer.bias,
             scale=np.array(np.nan if layer.scale is None else layer.scale))


def load_attention_npz(path):
    """The layer :func:`save_attention_npz` wrote (a NumericAttention)."""
    from ..layers.attention.floating import NumericAttention

    with np.load(path, allow_pickle=False) as z:
        if "kind" not in z.files or str(z["kind"]) != "softmax-attention":
            raise InputError(f"{path}: not a softmax-attention .npz (written by save_attention_npz)")
        scale = float(z["scale"])
        return NumericAttention(int(z["tokens"]), list(z["query"]), list(z["key"]), list(z["value"]), list(z["out"]),
                                "softmax", None if np.isnan(scale) else scale, list(z["score_bias"]), z["bias"])


def _export(layer, path) -> None:
    import warnings

    from .models import _torch
    from ..layers.attention.torch_modules import to_torch_attention

    torch = _torch()
    m = to_torch_attention(layer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.zeros(2, layer.in_dim),), str(path), dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})


def _score_figure(layer, perm, C, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    H = len(layer.query)
    fig, axes = plt.subplots(2, H, figsize=(2.2 * H, 4.6), squeeze=False)
    for h in range(H):
        A = layer.query[h] @ layer.key[h].T
        k = perm[h]
        B = C.T @ (layer.query[k] @ layer.key[k].T) @ C
        lim = max(np.abs(A).max(), np.abs(B).max(), 1e-12)
        for row, (M, title) in enumerate(((A, f"head {h + 1}: A_{h + 1}"), (B, f"C^T A_{k + 1} C"))):
            ax = axes[row][h]
            ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_title(title, fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.suptitle("score matrices A_h = Q_h K_h^T (8 pixels of a 2x4 patch); below: the partner under the mirror")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_attention_table(res: dict) -> str:
    """The report as a Markdown table (heads numbered from 1)."""
    lines = [f"# symeq experiment attention ({res['data']})", "",
             f"{res['heads']} heads, {res['steps']} Adam steps (batches of {BATCH}, jitter {JITTER}; equivariance loss "
             f"weight {res['weight']} in the second half), seed {res['seed']}; reconstruction MSE "
             f"{res['reconstruction']:.4g}, end-to-end "
             f"mirror error {res['end_to_end']:.3g} (median relative, data)", "",
             "| head | partner under the mirror | residual |", "|---|---|---|"]
    for h, (k, r) in enumerate(zip(res["head_partner"], res["head_residual"]), 1):
        what = "itself" if k == h else f"head {k} (swap)" if res["head_partner"][k - 1] == h else f"head {k}"
        lines.append(f"| {h} | {what} | {r:.3g} |")
    lines += ["", f"heads mapped to themselves: {res['self_mapped'] or 'none'}; swapped pairs: "
                  f"{res['swapped'] or 'none'}; matching margin {res['margin']:.3g}", "",
              "| paper's metric on the heads' outputs | median relative residual |", "|---|---|",
              f"| horizontal mirror | {res['metric_horizontal']:.3g} |",
              f"| vertical mirror (control) | {res['metric_vertical']:.3g} |", ""]
    c = res.get("certified")
    if c:
        lines += ["| certified nearest layerwise-equivariant network | |", "|---|---|",
                  f"| status | {c['status']} |", f"| head involution | {c['head_permutation']} |",
                  f"| distance (A_h, b_h, V_h O_h, c) | {c['distance']:.3g} |",
                  f"| function distance, noise (median / max) | {c['function_noise_median']:.3g} / "
                  f"{c['function_noise_max']:.3g} |",
                  f"| symeq check | {c.get('check', 'not run')} |"]
    lines += ["", f"finding: {res['finding']}"]
    return "\n".join(lines)


def run_attention_experiment(*, heads: int = 4, steps: int | None = None, seed: int = 0, weight: float = 10.0,
                             lr: float = 0.01, out=None, noise_points: int = 20000, progress: bool = False,
                             figures: bool = True, certifier=None, check: bool = True, data=None) -> dict:
    """Train, analyse, certify and save (see the module docstring); returns the results as a dict.

    ``certifier``: :func:`symeq.certification.certify` (passed in by the caller, as ``symeq
    experiment attention`` does, since the certification sits above this module; it takes the
    attention road, :mod:`symeq.certify_attention`); None skips the certified row."""
    from .models import from_torch
    from .train import load_digits_dataset

    t0 = time.perf_counter()
    steps = DEFAULT_STEPS if steps is None else steps
    if not isinstance(steps, int) or steps < 2:
        raise InputError(f"--epochs (training steps) must be an integer >= 2, got {steps!r}")
    if heads not in (1, 2, 4, 8):
        raise InputError(f"--heads must divide the token width 8 (1, 2, 4 or 8), got {heads!r}")
    ds = data if data is not None else load_digits_dataset()
    if ds.x.shape[1] != 64 or tuple(getattr(ds, "shape", (8, 8, 1))) != (8, 8, 1):
        raise InputError("the attention experiment cuts 8x8 one-channel images into 2x4 patches: the data must be "
                         f"8x8x1 (64 features), got shape {getattr(ds, 'shape', None)} with {ds.x.shape[1]} features")
    x = digit_tokens(ds.x)
    horizontal, vertical = mirror_groups()
    hidx, vidx = _index(horizontal), _index(vertical)
    net, log = _train(x, hidx, heads, steps, seed, weight, lr, progress)
    model = from_torch(net, horizontal, "attention autoencoder (digits, 2x4 patches)")
    layer = model.layers[0]
    Y = model(x)
    e2e = np.linalg.norm(model(x[:, hidx]) - Y[:, hidx], axis=1) / np.maximum(np.linalg.norm(Y, axis=1), 1e-300)
    rng = np.random.default_rng(seed + 1)
    mu, sd = x.mean(axis=0), x.std(axis=0)
    Z = mu + sd * rng.standard_normal((noise_points, 64))
    Zf, Zt = Z[: noise_points // 2], Z[noise_points // 2:]
    perm, res_h, margin = _head_partners(layer, horizontal)
    selfs = [h + 1 for h in range(heads) if perm[h] == h]
    swaps = [[h + 1, perm[h] + 1] for h in range(heads) if perm[h] > h and perm[perm[h]] == h]
    res = {"data": ds.name, "layout": "8 tokens = 2x4 patches of the 8x8 image (patchmirror:8x8:2x4)",
           "heads": heads, "steps": steps, "seed": seed, "weight": weight, "lr": lr, "training": log,
           "reconstruction": float(np.mean((Y - x) ** 2)), "end_to_end": float(np.median(e2e)),
           "head_partner": [k + 1 for k in perm], "head_residual": res_h, "margin": margin,
           "self_mapped": selfs, "swapped": swaps,
           "metric_horizontal": _paper_metric(layer, hidx, Zf, Zt),
           "metric_vertical": _paper_metric(layer, vidx, Zf, Zt), "noise_points": noise_points}
    res["finding"] = _finding(res, heads)
    outp = Path(out) if out is not None else None
    files = []
    if outp is not None:
        outp.mkdir(parents=True, exist_ok=True)
        save_attention_npz(layer, outp / "theta.npz")
        _export(layer, outp / "theta.onnx")
        files += ["theta.npz", "theta.onnx"]
    if certifier is not None:
        files += _certified_row(res, certifier, model, horizontal, seed, x, outp, check)
    if outp is not None and figures:
        try:
            _score_figure(layer, perm, _channel(horizontal), outp / "score_maps.png")
            files.append("score_maps.png")
        except ImportError:
            res["figures_skipped"] = "figures skipped: no matplotlib (pip install 'symeq[plot]')"
    res["seconds"] = round(time.perf_counter() - t0, 2)
    res["files"] = files
    res["table"] = format_attention_table(res)
    if outp is not None:
        (outp / "table.md").write_text(res["table"] + "\n")
        (outp / "results.json").write_text(json.dumps({k: v for k, v in res.items() if not k.startswith("_")},
                                                      indent=1) + "\n")
        res["files"] += ["table.md", "results.json"]
    return res


def _finding(res: dict, heads: int) -> str:
    """The sentence of :func:`run_attention_experiment` on whether the heads reproduce the paper's finding."""
    selfs, swaps, res_h = res["self_mapped"], res["swapped"], res["head_residual"]
    n_swap = 2 * len(swaps)
    worst = max(res_h)
    if len(selfs) + n_swap == heads and worst > MATCHED:
        return (f"the best matching pairs the heads as partners {res['head_partner']}, but with residuals up to "
                f"{worst:.3g} (> {MATCHED}): the heads are not clearly mapped onto each other by the mirror "
                "in this run; the paper's finding is not reproduced here")
    if len(selfs) + n_swap != heads:
        return (f"the heads do not form a mirror involution at this training (partners {res['head_partner']}): "
                "the paper's finding is not reproduced by this run")
    if swaps and selfs:
        return (f"{len(selfs)} head(s) map to themselves and {len(swaps)} pair(s) swap, as the paper reports "
                "(self-mapped heads and a swapped pair)")
    return (f"{len(selfs)} head(s) map to themselves and {len(swaps)} pair(s) swap: "
            + ("no swapped pair in this run (the paper reports one)" if not swaps
               else "no self-mapped head in this run"))


def _certified_row(res: dict, certifier, model, horizontal, seed: int, x, outp, check: bool) -> list:
    """Certify the trained layer (``res["certified"]``, and its files under ``outp`` with their check by
    ``symeq check`` when ``check``); returns the names of the files written."""
    files = []
    c = certifier(model, horizontal, noise_points=2000, seed=seed, data=(x, None))
    fb = c.float_model.layers[0]
    row = {"status": c.status, "head_permutation": c.actions["head_permutation"],
           "inner_signs": c.actions["inner_signs"], "distance": c.distance,
           "function_noise_median": c.function_distance["noise"]["median"],
           "function_noise_max": c.function_distance["noise"]["max"],
           "function_data_median": c.function_distance["data"]["median"],
           "verdict": c.verification.verdict, "digits": c.digits, "method": c.method}
    res["certified"] = row
    res["_certification"] = c
    if outp is not None:
        from ..io import model_to_json, write_json

        write_json(model_to_json(c.model), outp / "theta_bar.json")
        write_json(c.certificate(), outp / "theta_bar.certificate.json")
        save_attention_npz(fb, outp / "theta_bar.npz")
        files += ["theta_bar.json", "theta_bar.certificate.json", "theta_bar.npz"]
        try:
            _export(fb, outp / "theta_bar.onnx")
            files.append("theta_bar.onnx")
        except InputError as e:
            res["theta_bar_onnx_skipped"] = str(e)
        if check:
            proc = subprocess.run([sys.executable, "-m", "symeq", "check", str(outp / "theta_bar.certificate.json"),
                                   str(outp / "theta_bar.json")], capture_output=True, text=True, timeout=600)
            row["check"] = f"exit {proc.returncode}" + (" (accepted)" if proc.returncode == 0 else "")
            row["check_exit_code"] = proc.returncode
    return files


def _channel(group) -> np.ndarray:
    """The channel matrix C of the group's generator P (x) C."""
    from ..layers.attention.floating import factor_kron_numeric

    A = np.array([[float(group.generators[0][0][i, j]) for j in range(64)] for i in range(64)])
    return factor_kron_numeric(A, 8, 8)[1]


def cmd_attention(args, certifier=None) -> int:
    """The CLI of ``symeq experiment attention`` (options: --epochs = training steps, --seed, --out,
    --heads, --data (an 8x8x1 data set .npz), --json, --quiet; --activation and --task belong to the
    mirror experiment and are not used); exit 1 when ``symeq check`` rejects theta-bar's certificate."""
    data = None
    if getattr(args, "data", None):
        from .train import load_npz_dataset

        data = load_npz_dataset(args.data)
    res = run_attention_experiment(heads=getattr(args, "heads", None) or 4, steps=args.epochs, seed=args.seed,
                                   out=args.out, progress=not args.quiet, figures=args.out is not None,
                                   certifier=certifier, data=data)
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if not k.startswith("_")}, indent=1))
    else:
        print(res["table"])
    if args.out:
        print(f"written to {args.out}: {', '.join(res['files'])}", file=sys.stderr)
    c = res.get("certified")
    if c is not None and c.get("check_exit_code") not in (None, 0):
        return 1
    return 0
