"""The paper's mirror experiment, on data that ships with scikit-learn: train, analyse, tabulate, draw.

For each activation of the first layer (tanh, GELU, ReLU; GELU after, as in the paper) an MLP of
depth 4 is trained as an autoencoder or classifier with the soft horizontal-mirror loss
(:mod:`symeq.numeric.train`), converted to a :class:`~symeq.numeric.models.NumericModel`, and
measured with the paper's metric (:func:`symeq.numeric.layerwise.paper_metric`): layer 1 and 2
under the horizontal mirror, layer 1 under the vertical mirror as the control (the network was
never asked to be vertically equivariant).  The table puts the paper's CIFAR10 numbers next to
ours, naming both data sets; the figure groups the first-layer filters by the projected action:
self-symmetric (j -> j, +), mirrored pairs (j <-> k, +), negated pairs and anti-symmetric
filters (sign -1).

Reference: Shahverdi, Marchetti, Bokman, Kohn, *Identifiable Equivariant Networks are Layerwise
Equivariant*, arXiv 2601.21645 (2026), Section 5 and its table (docs/theory.md, "Experiments").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import EngineMissing, InputError
from .layerwise import paper_metric
from .models import from_torch
from .monomial import MonomialAction

__all__ = ["PAPER_TABLE", "run_mirror", "run_mirror_experiment", "format_table", "filter_groups", "plot_filters",
           "mirror_group", "save_networks", "emergence_curve", "plot_emergence"]

# Shahverdi et al. 2026, CIFAR10, MLP of depth 4: median relative error of the least-squares A_i
PAPER_TABLE = {
    ("autoencoder", "f_1, horizontal"): {"tanh": 0.029, "gelu": 0.40},
    ("autoencoder", "f_2, horizontal"): {"tanh": 0.022, "gelu": 0.11},
    ("autoencoder", "f_1, vertical (control)"): {"tanh": 0.15, "gelu": 0.49},
    ("classifier", "f_1, horizontal"): {"tanh": 0.077, "gelu": 0.19},
    ("classifier", "f_2, horizontal"): {"tanh": 0.054, "gelu": 0.064},
    ("classifier", "f_1, vertical (control)"): {"tanh": 0.48, "gelu": 0.56},
}
ROWS = ["f_1, horizontal", "f_2, horizontal", "f_1, vertical (control)"]

# Training recipe per task on the 8x8 digits (seeds fixed).  The first layer is narrower than the
# input (16 < 64 pixels), as the paper's 64 filters are for 3072 CIFAR10 pixels: with a square
# first layer W is invertible and, in tanh's near-linear regime, A_1 = W g W^-1 fits any mirror,
# the vertical control included.  Gaussian noise in the equivariance loss (as many noise inputs as
# data) is what the metric measures on; for the autoencoder it is drawn with std 3 (in units of the
# globally normalised pixels) so that the loss reaches tanh's nonlinear regime: with std 1 the
# autoencoder keeps layer 1 near-linear (row norms ~0.2), where the least-squares A_1 is small but
# is no signed permutation.  The classifier needs the longer run: at 300 epochs the second-half
# loss has not yet made the net invariant on noise (end-to-end error ~0.1).  The equivariance loss
# is on in the second half only, as in the paper; on from the start (or ramped in) it makes the
# GELU layers layerwise equivariant too (both ~0.006 on the classifier), so the contrast is a
# property of the recipe "train, then ask for equivariance", as the paper's is.
TASK_DEFAULTS = {
    "autoencoder": {"epochs": 300, "lr": 2e-3, "noise_scale": 3.0},
    "classifier": {"epochs": 600, "lr": 1e-3, "noise_scale": 1.0},
}
DEFAULT_WIDTHS = (16, 64, 64)


@dataclass
class MirrorRun:
    """One trained network and its measurements."""

    activation: str
    task: str
    dataset: str
    errors: dict           # row label -> median relative error (least-squares A_i)
    projected: dict        # row label -> the same with A_i projected onto K_i
    training: dict
    filters: np.ndarray    # first-layer weights (width x D)
    action: MonomialAction  # projected layer-1 action of the horizontal mirror
    shape: tuple
    equivariance: dict = None  # end-to-end median relative equivariance error, per mirror and input kind
    model: object = None       # the trained network (NumericModel, float64, with the horizontal mirror)
    certified: dict = None     # the certified nearest layerwise-equivariant network (symeq.certification)
    files: list = None         # the saved networks (.npz, .onnx)

    def to_json(self) -> dict:
        return {"activation": self.activation, "task": self.task, "dataset": self.dataset,
                "errors": self.errors, "projected_errors": self.projected, "training": self.training,
                "end_to_end_equivariance": self.equivariance,
                "filter_groups": {k: len(v) for k, v in filter_groups(self.action).items()},
                "certified": self.certified, "files": self.files}


def mirror_group(shape, task: str, out_dim: int):
    """The horizontal mirror as a float group: on the image input, on the output image (autoencoder)
    or trivially on the logits (classifier)."""
    from .models import NumericGroup
    from .train import image_permutation

    D = int(np.prod(shape))
    H = np.eye(D)[image_permutation(shape, "horizontal")]
    out = H if task == "autoencoder" else np.eye(out_dim)
    return NumericGroup([(H, out)], ["mirror"], f"horizontal mirror {shape[0]}x{shape[1]}x{shape[2]}")


def end_to_end_equivariance(net, data, task: str, kind: str, n: int = 4000, seed: int = 0) -> dict:
    """Median of |f(g x) - g f(x)| / |f(x)| (classifier: |f(g x) - f(x)| / |f(x)|) on N(0, 1) noise and on the data."""
    import torch

    from .train import image_permutation

    perm = torch.from_numpy(image_permutation(data.shape, kind))
    X = torch.randn(n, data.x.shape[1], generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    out = {}
    for name, x in (("noise", X), ("data", torch.from_numpy(data.x))):
        with torch.no_grad():
            o, og = net(x), net(x[:, perm])
            t = o[:, perm] if task == "autoencoder" else o
            out[name] = float(torch.median((og - t).norm(dim=1) / o.norm(dim=1).clamp_min(1e-300)))
    return out


def run_mirror(activation: str, task: str = "autoencoder", *, data=None, epochs: int | None = None, seed: int = 0,
               widths=DEFAULT_WIDTHS, n_fit: int = 6000, n_test: int = 4000, progress: bool = True,
               certifier=None, **train_kw) -> MirrorRun:
    """Train one network and measure layers 1 and 2 (horizontal) and layer 1 (vertical control).

    Training settings default to :data:`TASK_DEFAULTS` for the task; ``train_kw`` overrides them
    (any keyword of :func:`symeq.numeric.train.train_mlp`).  ``certifier(model, data, task)``, when
    given, returns the certified nearest layerwise-equivariant network as a dict
    (:func:`symeq.certification.certify_mirror_run`, passed in by the command line: the theorem
    level sits above this one).
    """
    from .train import build_mlp, image_permutation, load_digits_dataset, train_mlp

    data = data or load_digits_dataset()
    out_dim = data.x.shape[1] if task == "autoencoder" else data.n_classes
    import torch

    torch.manual_seed(seed)
    net = build_mlp(data.x.shape[1], out_dim, activation, widths)
    kw = dict(TASK_DEFAULTS.get(task, {}))
    if epochs is not None:
        kw["epochs"] = epochs
    kw.update(train_kw)
    stats = train_mlp(net, data, task, seed=seed, progress=progress, **kw)
    net = net.double()
    e2e = {k: end_to_end_equivariance(net, data, task, k, seed=seed) for k in ("horizontal", "vertical")}
    model = from_torch(net, name=f"{activation} {task}")
    D = data.x.shape[1]
    eye = np.eye(D)
    H = eye[image_permutation(data.shape, "horizontal")]
    V = eye[image_permutation(data.shape, "vertical")]
    hor = paper_metric(model, [("horizontal", H)], layers=[1, 2], n_fit=n_fit, n_test=n_test, rng=seed)
    ver = paper_metric(model, [("vertical", V)], layers=[1], n_fit=n_fit, n_test=n_test, rng=seed + 1)
    errors = {ROWS[0]: hor[0].error, ROWS[1]: hor[1].error, ROWS[2]: ver[0].error}
    projected = {ROWS[0]: hor[0].projected_error, ROWS[1]: hor[1].projected_error, ROWS[2]: ver[0].projected_error}
    run = MirrorRun(activation, task, data.name, errors, projected, stats, model.layers[0].weight.copy(),
                    hor[0].projected, data.shape, e2e, model.with_group(mirror_group(data.shape, task, out_dim)))
    if certifier is not None:
        run.certified = certifier(run.model, data, task)
    return run


def format_table(runs: list[MirrorRun]) -> str:
    """Markdown: our median relative errors per activation next to the paper's (CIFAR10)."""
    if not runs:
        return ""
    task, dataset = runs[0].task, runs[0].dataset
    acts = [r.activation for r in runs]
    head = ["layer, mirror"] + [f"{a} (ours)" for a in acts] + [f"{a} projected to K" for a in acts] + \
        ["tanh (paper)", "GELU (paper)"]
    lines = [f"Mirror experiment, {task}: median relative error |f_i(g y) - A_i f_i(y)| / |f_i(y)| on noise inputs.",
             f"Ours: {dataset}, MLP depth 4, first-layer width {runs[0].filters.shape[0]} (activation as named, GELU "
             "after), equivariance loss in the second half. Paper: CIFAR10 (Shahverdi et al. 2026, Section 5).",
             "The last rows: end-to-end median relative equivariance error of the trained nets (the theorem needs it ~0).",
             "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in ROWS:
        paper = PAPER_TABLE.get((task, row), {})
        cells = [row] + [f"{r.errors[row]:.3f}" for r in runs] + [f"{r.projected[row]:.3f}" for r in runs] + \
            [f"{paper.get('tanh', float('nan')):.3f}", f"{paper.get('gelu', float('nan')):.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    for kind in ("horizontal", "vertical"):
        if all(r.equivariance for r in runs):
            cells = [f"end to end, {kind}: noise / data"] + \
                [f"{r.equivariance[kind]['noise']:.3f} / {r.equivariance[kind]['data']:.3f}" for r in runs] + \
                ["" for _ in runs] + ["", ""]
            lines.append("| " + " | ".join(cells) + " |")
    if any(r.certified for r in runs):
        lines += ["", "Certified nearest layerwise-equivariant network theta-bar (symeq certify: actions by matching, "
                  "exact projection, exact proof), per activation:", "",
                  "| | " + " | ".join(acts) + " |", "|" + "---|" * (len(acts) + 1)]
        lines += _certified_rows(runs)
    for r in runs:
        g = {k: len(v) for k, v in filter_groups(r.action).items()}
        lines.append(f"\n{r.activation}: layer-1 filters: {g['self-symmetric']} self-symmetric, "
                     f"{g['mirrored pairs']} in mirrored pairs, {g['negated pairs']} in negated pairs, "
                     f"{g['anti-symmetric']} anti-symmetric, {g['unpaired']} unpaired; training {json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.training.items()})}")
    return "\n".join(lines)


def _certified_rows(runs) -> list[str]:
    def cell(r, f):
        c = r.certified
        if not c:
            return ""
        if c.get("status") not in ("certified", "too far"):
            return c.get("status", "") + (f" ({c['reason'][:60]})" if c.get("reason") else "")
        return f(c)

    rows = [("status", lambda c: f"{c['status']} ({c['verdict']})"),
            ("parameter distance, per layer", lambda c: " / ".join(f"{d:.3f}" for d in c["parameter_distance_per_layer"])),
            ("function distance, noise: median / max", lambda c: f"{c['function_distance']['noise']['median']:.3f} / "
                                                                 f"{c['function_distance']['noise']['max']:.3f}"),
            ("function distance, data: median / max", lambda c: f"{c['function_distance']['data']['median']:.3f} / "
                                                                f"{c['function_distance']['data']['max']:.3f}"),
            ("task loss theta -> theta-bar", lambda c: "" if not c["task_loss"] else
             f"{c['task_loss']['theta']:.4f} -> {c['task_loss']['theta_bar']:.4f}"),
            ("actions", lambda c: "nearest (proven)" if c["proven_nearest"] else "best found (not proven nearest)"),
            ("search at depth", lambda c: (c.get("search") or {}).get("line") or ""),
            ("fine-tuned certified network (symeq certify --finetune)", _finetuned_status),
            ("held-out task loss: theta / theta-bar / fine-tuned", _finetuned_loss)]
    return ["| " + name + " | " + " | ".join(cell(r, f) for r in runs) + " |" for name, f in rows]


def _held_out(c):
    f = c.get("finetuned") or {}
    tl = f.get("task_loss") or {}
    return next((s for s in tl.get("splits", []) if s["name"] == "the held-out split"), None)


def _finetuned_status(c) -> str:
    f = c.get("finetuned")
    if not f:
        return ""
    if f.get("status") not in ("certified", "too far"):
        return f.get("status", "") + (f" ({f['reason'][:60]})" if f.get("reason") else "")
    return f"{f['status']} ({f['verdict']}; {f['finetune']['steps']} steps)"


def _finetuned_loss(c) -> str:
    h = _held_out(c)
    if h is None:
        return ""
    L = h["loss"]
    text = f"{L['theta']:.4f} / {L['theta_bar']:.4f} / {L['theta_bar_finetuned']:.4f}"
    if "accuracy" in h:
        A = h["accuracy"]
        text += f" (accuracy {A['theta']:.3f} / {A['theta_bar']:.3f} / {A['theta_bar_finetuned']:.3f})"
    return text


def filter_groups(action: MonomialAction) -> dict:
    """Neurons grouped by the projected mirror action: j -> j (+/-), j <-> k (+/-).

    A neuron whose partner does not map back to it (the projected permutation is not an
    involution there) is "unpaired": the layer is not equivariant through K at that neuron.
    """
    groups = {"self-symmetric": [], "anti-symmetric": [], "mirrored pairs": [], "negated pairs": [], "unpaired": []}
    cols, vals = action.cols.tolist(), action.vals.tolist()
    for j, (k, v) in enumerate(zip(cols, vals)):
        if k == j:
            groups["self-symmetric" if v > 0 else "anti-symmetric"].append(j)
        elif cols[k] == j and vals[k] == v:
            groups["mirrored pairs" if v > 0 else "negated pairs"].append(j)
        else:
            groups["unpaired"].append(j)
    return groups


def plot_filters(run: MirrorRun, path) -> None:
    """PNG of the first-layer filters grouped as in :func:`filter_groups` (matplotlib extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EngineMissing("figures need matplotlib: pip install 'symeq[plot]'") from None
    h, w, c = run.shape
    groups = [(k, v) for k, v in filter_groups(run.action).items() if v]
    ncols = 16
    nrows = sum(max(1, -(-len(v) // ncols)) for _, v in groups)
    fig = plt.figure(figsize=(ncols * 0.7, nrows * 0.8 + 0.4 * len(groups) + 0.6))
    gs = fig.add_gridspec(nrows, ncols, hspace=0.6)
    r0 = 0
    for name, idx in groups:
        rows = max(1, -(-len(idx) // ncols))
        for t, j in enumerate(idx):
            ax = fig.add_subplot(gs[r0 + t // ncols, t % ncols])
            img = run.filters[j].reshape(c, h, w)[0]
            m = np.abs(img).max() or 1.0
            ax.imshow(img, cmap="RdBu_r", vmin=-m, vmax=m)
            ax.set_xticks([])
            ax.set_yticks([])
            if t == 0:
                ax.set_title(f"{name} ({len(idx)})", loc="left", fontsize=8)
        r0 += rows
    fig.suptitle(f"first-layer filters, {run.activation} {run.task}, {run.dataset}", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def emergence_curve(activation: str, task: str = "autoencoder", weights=(0.0, 0.3, 1.0, 3.0, 10.0), *, data=None,
                    epochs: int | None = None, seed: int = 0, widths=DEFAULT_WIDTHS, n_fit: int = 6000,
                    n_test: int = 4000, progress: bool = True, certifier=None, **train_kw) -> list[dict]:
    """One network per equivariance-penalty weight (same seed, data and schedule), and per network: the
    end-to-end equivariance error, the paper's metric of layers 1 and 2, the certified theta-bar's distance
    through K (``certifier``: :func:`symeq.certification.certify_mirror_run`) and the held-out task loss of
    the certified fine-tuned network beside theta's.  How layerwise equivariance emerges as the penalty grows.
    """
    rows = []
    train_kw.pop("equivariance_weight", None)  # the weights are the curve's
    for w in weights:
        r = run_mirror(activation, task, data=data, epochs=epochs, seed=seed, widths=widths, n_fit=n_fit,
                       n_test=n_test, progress=progress, certifier=certifier, equivariance_weight=float(w), **train_kw)
        row = {"equivariance_weight": float(w), "end_to_end_noise": r.equivariance["horizontal"]["noise"],
               "end_to_end_data": r.equivariance["horizontal"]["data"], "paper_metric_layer_1": r.errors[ROWS[0]],
               "paper_metric_layer_2": r.errors[ROWS[1]]}
        c = r.certified or {}
        row["k_distance"] = c.get("distance")
        row["certified"] = c.get("status")
        h = _held_out(c) if c else None
        if h is not None:
            row["held_out_loss_theta"] = h["loss"]["theta"]
            row["held_out_loss_finetuned_certified"] = h["loss"]["theta_bar_finetuned"]
            row["finetuned_certified"] = c["finetuned"]["status"]
        rows.append(row)
    return rows


def plot_emergence(rows: list[dict], path, title: str = "") -> None:
    """PNG: the end-to-end error, the paper's metric, the K-distance and the certified fine-tuned task loss
    against the equivariance-penalty weight (matplotlib extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EngineMissing("figures need matplotlib: pip install 'symeq[plot]'") from None
    w = [r["equivariance_weight"] for r in rows]
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.2))
    panels = [("end-to-end equivariance error", [("end_to_end_data", "data"), ("end_to_end_noise", "noise")]),
              ("paper's metric (least-squares A_i)", [("paper_metric_layer_1", "layer 1"),
                                                      ("paper_metric_layer_2", "layer 2")]),
              ("certified theta-bar: distance through K", [("k_distance", "whole network")]),
              ("held-out task loss", [("held_out_loss_theta", "theta"),
                                      ("held_out_loss_finetuned_certified", "fine-tuned, certified")])]
    for ax, (name, series) in zip(axes, panels):
        for key, label in series:
            ys = [r.get(key) for r in rows]
            if any(y is not None for y in ys):
                ax.plot(w, [np.nan if y is None else y for y in ys], marker="o", label=label)
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlabel("equivariance penalty weight")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _plain(obj):
    """JSON-ready: drop the keys starting with "_" (live objects kept for Python callers)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def save_networks(runs, out) -> list[str]:
    """Every trained network as ``net_<activation>_<task>.npz`` and ``.onnx`` (onnx extra; skipped without it)."""
    from .models import save_npz

    outp = Path(out)
    outp.mkdir(parents=True, exist_ok=True)
    files = []
    for r in runs:
        stem = outp / f"net_{r.activation}_{r.task}"
        save_npz(r.model, f"{stem}.npz")
        r.files = [f"{stem}.npz"]
        try:
            from .onnx_io import export_onnx

            export_onnx(r.model, f"{stem}.onnx")
            r.files.append(f"{stem}.onnx")
        except EngineMissing:  # said in the results (onnx_skipped)
            pass
        if r.certified and r.certified.get("_certification") is not None \
                and r.certified["_certification"].model is not None:
            from ..io import model_to_json, write_json

            write_json(model_to_json(r.certified["_certification"].model), f"{stem}_certified.json")
            write_json(r.certified["_certification"].certificate(), f"{stem}_certificate.json")
            r.files += [f"{stem}_certified.json", f"{stem}_certificate.json"]
            f = (r.certified.get("finetuned") or {}).get("_certification")
            if f is not None and f.verification is not None and f.status != "undetermined":
                write_json(model_to_json(f.model), f"{stem}_finetuned_certified.json")
                write_json(f.certificate(), f"{stem}_finetuned_certificate.json")
                r.files += [f"{stem}_finetuned_certified.json", f"{stem}_finetuned_certificate.json"]
        files += r.files
    return files


def written_summary(result: dict, out) -> str:
    """What :func:`run_mirror_experiment` wrote to ``out``, and what it skipped and why (one line).

    >>> written_summary({"networks": ["a.npz", "a.onnx"], "figures": ["f.png"]}, "exp")
    'written to exp: table.md, results.json, 2 network file(s), 1 figure(s)'
    >>> written_summary({"networks": ["a.npz"], "figures_skipped": "figures skipped: no matplotlib"}, "exp")
    'written to exp: table.md, results.json, 1 network file(s); figures skipped: no matplotlib'
    """
    parts = ["table.md", "results.json", f"{len(result.get('networks', []))} network file(s)"]
    if result.get("figures"):
        parts.append(f"{len(result['figures'])} figure(s)")
    line = f"written to {out}: " + ", ".join(parts)
    for key in ("figures_skipped", "onnx_skipped"):
        if result.get(key):
            line += f"; {result[key]}"
    return line


def run_mirror_experiment(activations=("tanh", "gelu"), task: str = "autoencoder", *, epochs: int | None = None,
                          out=None, seed: int = 0, data=None, progress: bool = True, figures: bool = True,
                          certifier=None, emergence=None, **train_kw) -> dict:
    """Train and measure every activation; write ``table.md``, ``results.json``, PNGs and the networks to ``out``.

    Every trained network is saved (``net_<activation>_<task>.npz`` and ``.onnx``), and with a
    ``certifier`` (see :func:`run_mirror`) also its certified nearest layerwise-equivariant network (``..._certified.json``,
    ``..._certificate.json``: ``symeq check`` re-checks them); matplotlib is looked for before the
    training starts, and without it the figures are skipped (said on stderr and in the results); so
    is onnx, without which the ``.onnx`` files are skipped.  ``emergence``: penalty weights for
    :func:`emergence_curve` per activation (``result["emergence"]``, and ``emergence_<act>_<task>.png``).
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        raise EngineMissing("the experiment needs torch: pip install 'symeq[numeric]'") from None
    for a in activations:
        if a not in ("tanh", "gelu", "relu", "poly"):
            raise InputError(f"unknown activation {a!r}; use tanh, gelu, relu or poly")
    skipped = None
    if out is not None and figures:  # checked before training, not after it
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            figures = False
            skipped = "figures skipped: matplotlib is not installed (pip install 'symeq[plot]')"
            import sys

            print(skipped, file=sys.stderr, flush=True)
    no_onnx = None
    if out is not None:  # the .onnx networks: said before training too
        try:
            import onnx  # noqa: F401
        except ImportError:
            import sys

            no_onnx = "the .onnx networks are not written: onnx is not installed (pip install 'symeq[onnx]')"
            print(no_onnx, file=sys.stderr, flush=True)
    runs = [run_mirror(a, task, data=data, epochs=epochs, seed=seed, progress=progress, certifier=certifier,
                       **train_kw) for a in activations]
    files = []
    if out is not None:
        files = save_networks(runs, out)
    table = format_table(runs)
    result = {"table": table, "runs": [_plain(r.to_json()) for r in runs],
              "paper": {f"{k[0]}: {k[1]}": v for k, v in PAPER_TABLE.items()}, "networks": files}
    if skipped:
        result["figures_skipped"] = skipped
    if no_onnx:
        result["onnx_skipped"] = no_onnx
    if emergence:
        result["emergence"] = {a: emergence_curve(a, task, emergence, data=data, epochs=epochs, seed=seed,
                                                  progress=progress, certifier=certifier, **train_kw)
                               for a in activations}
    if out is not None:
        outp = Path(out)
        outp.mkdir(parents=True, exist_ok=True)
        (outp / "table.md").write_text(table + "\n")
        (outp / "results.json").write_text(json.dumps(result, indent=1) + "\n")
        if figures:
            result["figures"] = []
            for r in runs:
                p = outp / f"filters_{r.activation}_{r.task}.png"
                plot_filters(r, p)
                result["figures"].append(str(p))
            for a, rows in (result.get("emergence") or {}).items():
                p = outp / f"emergence_{a}_{task}.png"
                plot_emergence(rows, p, f"emergence of layerwise equivariance, {a} {task}")
                result["figures"].append(str(p))
    result["_runs"] = runs
    return result
