"""From a float network to a certificate: the nearest layerwise-equivariant network, proven exactly.

A trained or exported network theta is a float object; the exact path (:func:`symeq.theorem.verify`)
proves statements about rational parameters.  :func:`certify` joins them (docs/certify.md):

1. **actions**: the float twin recovers rho_i(g) in K_i
   (:func:`symeq.numeric.layerwise.derive_latent_actions_numeric`); for a group of order 2 the
   nearest homomorphism {e, g} -> prod K_i is also searched by maximum-weight matching
   (:func:`symeq.numeric.project.nearest_involution_actions`), and the candidate whose projection is
   nearest wins.  For larger groups the candidates are the twin's actions (when they form a
   homomorphism; for a cyclic group, also with the cycles that break g^m = e fixed), each
   generator's nearest involution by matching (generators of order 2, when together they form a
   homomorphism) and the trivial action, which always is one: "best found, not proven nearest".
2. **projection**: theta is rounded to the grid 10^-D (``digits``; by default, per layer, three
   digits below the layer's largest deviation from its projection) and averaged over G layer by layer in
   exact rationals (:func:`symeq.numeric.project.reynolds_exact`): theta-bar is layerwise
   equivariant under those actions by construction.
3. **proof**: theta-bar goes through the exact pipeline; its verification is the certificate that
   ``symeq check`` re-checks on the written model file.

The result reports the distances first: the one metric (:data:`METRICS`) that chose theta-bar and
judges ``max_distance`` (the whole network's relative parameter distance, or with ``metric="data"``
the data-weighted one, theta-bar then being each candidate's weighted least-squares projection),
per layer ||theta_i - theta-bar_i|| / ||theta_i|| and with data the same weighted by the data
reaching the layer, the function distance |f_theta(x) - f_theta-bar(x)| / |f_theta(x)| (median and
max) on noise inputs (at the data's scale when there are data) and on data, the task loss of both
(``task`` or read from the data: cross-entropy and accuracy, or an autoencoder's reconstruction
error), the inputs the data never use, per hidden layer the paper's metric beside the K-restricted
one with the units that explain a gap, and for a group of order 2 at depth a lower bound on the
optimum (``search``).  With ``finetune`` the network is also trained inside the
layerwise-equivariant subspace (:func:`symeq.numeric.train.finetune_equivariant`), and the
fine-tuned network is what is rounded, averaged and verified (docs/certify.md).

Examples
--------
>>> from symeq.groups import mirror
>>> from symeq.numeric.models import numeric_activation
>>> from symeq.numeric.generate import random_equivariant_numeric
>>> G = mirror(2, 2)
>>> net = random_equivariant_numeric(G, [4], numeric_activation({"type": "tanh_series", "order": 3}), rng=0)
>>> c = certify(net.perturbed(1e-4, rng=1), G)
>>> c.status, c.max_distance < 1e-3
('certified', True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError, Undetermined
from .layers.registry import KindUnsupported, any_supports, supports
from .steps import Skip, step_name

__all__ = ["Certification", "certify", "certify_mirror_run", "read_data", "exact_group_from_numeric", "DEFAULT_NOISE_POINTS",
           "METRICS", "TASKS"]

DEFAULT_NOISE_POINTS = 2000


METRICS = {
    "parameters": "whole-network relative parameter distance ||theta - theta-bar|| / ||theta|| (every weight and "
                  "bias together)",
    "data": "whole-network data-weighted distance sqrt(sum_i ||Delta_i S_{i-1}^{1/2}||^2 / sum_i "
            "||theta_i S_{i-1}^{1/2}||^2), S_{i-1} = Sigma_{i-1} + lambda I, Sigma_{i-1} the second moment of layer "
            "i's input on the data and lambda 1% of its mean eigenvalue; each candidate's theta-bar is its weighted "
            "least-squares projection (not the Reynolds average)",
}


@dataclass
class Certification:
    """The outcome of :func:`certify`: theta-bar, how it was found, its distances and its proof."""

    status: str                    # "certified", "too far", "undetermined"
    layer_distances: list
    function_distance: dict        # {"noise": {...}, "data": {...} or absent}
    task_loss: dict | None
    digits: list                   # the rounding grid 10^-D of each layer
    method: str
    proven_nearest: bool
    candidates: list               # every candidate tried: method and distance
    verification: object = None    # symeq.theorem.Verification of theta-bar
    model: object = None           # the exact theta-bar (symeq.models.Model)
    float_model: object = None     # theta-bar in floats (NumericModel)
    max_allowed: float | None = None
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    reason: str | None = None
    metric: str = "parameters"     # the one metric that chooses theta-bar and judges max_allowed
    distance: float | None = None  # theta-bar's value in that metric
    layer_distances_data: list | None = None  # per layer, weighted by the data reaching it
    data_info: dict | None = None  # inputs the data never use, where the noise inputs come from
    diagnostics: list | None = None  # per hidden layer: the paper's metric beside the K one, and the units
    search: dict | None = None     # restarts, lower bound, gap
    actions: list | None = None    # theta-bar's rho_i(g) (the actions it was projected with)
    finetune: dict | None = None   # the fine-tuning run, when asked
    steps: list = field(default_factory=list)  # (candidate step, why it added none, or None) in order

    @property
    def max_distance(self) -> float:
        """The largest per-layer relative parameter distance (reported; the metric is :attr:`distance`)."""
        return max(self.layer_distances) if self.layer_distances else 0.0

    @property
    def exit_code(self) -> int:
        return {"certified": 0, "too far": 1, "undetermined": 3}[self.status]

    def certificate(self) -> dict:
        return self.verification.certificate()

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "verified": self.verification is not None and self.status != "undetermined",
            "distances": {"metric": self.metric, "metric_description": METRICS[self.metric],
                          "distance": self.distance,
                          "parameters_per_layer": self.layer_distances, "parameters_max": self.max_distance,
                          "data_weighted_per_layer": self.layer_distances_data,
                          "function": self.function_distance, "task_loss": self.task_loss,
                          "max_allowed": self.max_allowed},
            "data": self.data_info,
            "layers": self.diagnostics,
            "actions": {"method": self.method, "proven_nearest": self.proven_nearest, "candidates": self.candidates,
                        "theta_bar": self.actions, "search": self.search},
            "finetune": self.finetune,
            "digits": self.digits,
            "verdict": None if self.verification is None else self.verification.verdict,
            "widths": getattr(self.float_model, "widths", None),  # a graph model has spaces, not widths
            "reason": self.reason,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }

    def report(self) -> str:
        verified = self.verification is not None and self.status != "undetermined"
        lines = ["distance to the nearest layerwise-equivariant network found (theta-bar):" if verified else
                 "candidate theta-bar, NOT verified (see the last line): its distances, for what they are worth:"]
        lines.append(f"  metric (chooses theta-bar, judges --max-distance): {METRICS[self.metric]}: "
                     f"{self.distance:.3g}" if self.distance is not None else "  metric: none computed")
        for i, d in enumerate(self.layer_distances, 1):
            extra = "" if self.layer_distances_data is None else \
                f"; weighted by the data reaching it {self.layer_distances_data[i - 1]:.3g}"
            lines.append(f"  layer {i}: relative parameter distance {d:.3g}{extra}")
        for kind, fd in self.function_distance.items():
            lines.append(f"  function distance on {kind} ({fd['points']} inputs): median {fd['median']:.3g}, "
                         f"max {fd['max']:.3g} (relative)")
        lines += _task_lines(self.task_loss)
        if self.data_info:
            lines += _data_lines(self.data_info)
        if self.diagnostics:
            lines += _diagnostic_lines(self.diagnostics)
        label = f" ({'proven nearest' if self.proven_nearest else 'best found, not proven nearest'} in the " \
                f"{self.metric} metric)"
        lines.append(f"actions: {self.method}{label}")
        for c in self.candidates:
            lines.append(f"  candidate {c['method']}: {self.metric} distance {c['distance']:.3g}")
        if self.search and self.search.get("line"):
            lines.append(f"  {self.search['line']}")
        if self.finetune:
            lines += _finetune_lines(self.finetune)
        grids = ", ".join("none (no parameters)" if d is None else f"10^-{d}" for d in self.digits)
        ft = "the fine-tuned network " if self.finetune else "theta "
        lines.append(f"{ft}rounded to the grid(s) {grids} (per layer), then averaged over the group exactly "
                     "(rationals)")
        lines += [f"note: {n}" for n in self.notes]
        v = self.verification
        if v is not None:
            what = "the fine-tuned network" if self.finetune else "theta-bar"
            how = getattr(v, "end_to_end_method", None) or v.equivariance.method  # a graph's: its equivariance
            lines.append(f"exact verification of {what}: {v.verdict} ({how})")
            lines += _action_lines(v)
        if self.status == "certified":
            what = "the fine-tuned network (written with --out)" if self.finetune else "theta-bar"
            lines.append(f"certified: {what} is layerwise equivariant (exact proof); {self.seconds:.2f} s")
        elif self.status == "too far":
            lines.append(f"certified theta-bar, but its {self.metric} distance {self.distance:.3g} is above "
                         f"--max-distance {self.max_allowed:g}; {self.seconds:.2f} s")
        else:
            lines.append(f"undetermined: {self.reason}; {self.seconds:.2f} s")
        return "\n".join(lines)


def _task_lines(tl) -> list:
    if not tl:
        return []
    out = [f"  task loss ({tl['kind']}; task {tl['task']}, {tl['task_source']}):"]
    for split in tl["splits"]:
        vals = ", ".join(f"{name} {v:.6g}" for name, v in split["loss"].items())
        acc = "" if "accuracy" not in split else \
            "; accuracy " + ", ".join(f"{name} {v:.4f}" for name, v in split["accuracy"].items())
        out.append(f"    on {split['name']} ({split['points']} inputs): {vals}{acc}")
    return out


def _data_lines(info) -> list:
    out = []
    if info.get("noise"):
        out.append(f"  noise inputs: {info['noise']}")
    z, c = info.get("unused_inputs", {}).get("zero", []), info.get("unused_inputs", {}).get("constant", [])
    if z:
        out.append(f"  inputs the data never use (zero on every data point; numbered from 1): {_list(z)}")
    if c:
        out.append(f"  inputs the data never vary (constant on every data point, so their weights act as a bias; "
                   f"numbered from 1): {_list(c)}")
    return out


def _list(xs, k: int = 40) -> str:
    return ", ".join(map(str, xs[:k])) + (f", ... ({len(xs)} in all)" if len(xs) > k else "")


def _diagnostic_lines(diag) -> list:
    on = "data points" if diag and diag[0].get("inputs") == "data" else "noise inputs (no --data)"
    out = ["  per hidden layer, the paper's metric (least-squares A_i with A_i f_i(x) ~ f_i(gx)) beside the same error "
           f"with theta-bar's rho_i(g) in K_i (median relative error on held-out {on}):"]
    for d in diag:
        why = []
        if d["near_linear"]:
            why.append(f"{len(d['near_linear'])} near-linear unit(s) (an approximate GL symmetry of the linear regime, "
                       f"not in K): {_list(d['near_linear'], 12)}")
        if d["near_dead"]:
            why.append(f"{len(d['near_dead'])} near-dead unit(s) (A is free on them): {_list(d['near_dead'], 12)}")
        if d["near_clone_pairs"]:
            pairs = ", ".join(f"{a}~{b}" for a, b in d["near_clones"][:8])
            why.append(f"{d['near_clone_pairs']} near-clone pair(s) (A can mix them): {pairs}")
        gap = "" if not why else "; units that explain a gap: " + "; ".join(why)
        out.append(f"    hidden layer {d['layer']} ({d['generator']}): paper {d['paper_metric']:.3g}, K {d['k_metric']:.3g}"
                   f" of {d['width']} units{gap}")
    return out


def _finetune_lines(ft) -> list:
    out = [f"fine-tuned inside the layerwise-equivariant subspace of {ft['actions']}: {ft['steps']} projected "
           f"gradient step(s), {ft['seconds']:.1f} s, stopped by {ft['stopped_by']} (Adam, lr {ft['lr']:g}, batches "
           f"of {ft['batch_size']}; trained on {ft['train_points']} points, {ft['held_out_points']} held out)"]
    if ft.get("validation_points"):
        err = ft.get("validation_error")
        out.append(f"  early stopping: the iterate of step {ft['kept_step']} kept (step 0 is theta-bar), the best on "
                   f"{ft['validation_points']} validation points of the fine-tuning split (loss "
                   f"{ft['validation_loss']:.5g}" + ("" if err is None else f", error rate {err:.4f}") + ")")
    if len(ft.get("tried", [])) > 1:
        out.append("  runs (the one best on the validation points is kept; the held-out split is not used to "
                   "choose): " + "; ".join(f"{t['actions']}: validation loss {t['score'][-1]:.5g}" for t in ft["tried"]))
    if "parameters_per_layer" in ft:
        w = ft.get("data_weighted_per_layer")
        out.append("  the fine-tuned network's relative parameter distance to theta: " + ", ".join(
            f"layer {i} {d:.3g}" + ("" if w is None else f" (on the data {w[i - 1]:.3g})")
            for i, d in enumerate(ft["parameters_per_layer"], 1)) + f"; whole network {ft['parameters']:.3g}")
    if "function" in ft:
        out.append("  its function distance to theta: " + ", ".join(
            f"on {k} median {v['median']:.3g}, max {v['max']:.3g}" for k, v in ft["function"].items()))
    n = ft.get("nearest")
    if n:
        out.append(f"  the nearest theta-bar (before fine-tuning): {n['metric']} distance {n['distance']:.3g}, per layer "
                   + ", ".join(f"{d:.3g}" for d in n["parameters_per_layer"]))
    return out


def _action_lines(v) -> list:
    """theta-bar's proven actions rho_i(g) as cycles (neurons from 1), as `symeq verify` shows them."""
    from .theorem import describe_action

    d = getattr(v, "derivation", None)
    if d is None or not d.found or not d.actions or not callable(getattr(v.model, "chain", None)):  # (graphs: none)
        return []
    lines = ["theta-bar's actions (cycles of neurons, numbered from 1; -j: the value arriving at j changes sign):"]
    layers = v.model.chain().layers
    for i, per_g in enumerate(d.actions):
        for gname, M in zip(v.group.names, per_g):
            lines += describe_action(layers[i], M, f"rho_{i + 1}({gname})")
    return lines


def exact_group_from_numeric(group):
    """An exact :class:`~symeq.groups.FiniteGroup` from float generator matrices (each float read exactly)."""
    from fractions import Fraction

    from flint import fmpq, fmpq_mat

    from .groups import FiniteGroup

    def q(M):
        M = np.asarray(M, dtype=np.float64)
        vals = []
        for v in M.ravel():
            f = Fraction(float(v))
            vals.append(fmpq(f.numerator, f.denominator))
        return fmpq_mat(M.shape[0], M.shape[1], vals)

    return FiniteGroup([(q(a), q(b)) for a, b in group.generators], list(group.names), group.label)


def _as_numeric(network, input_shape=None, name=None):
    from .numeric.models import NumericModel

    if isinstance(network, NumericModel) or callable(getattr(network, "hidden_spaces", None)):  # (or a graph)
        return network
    if isinstance(network, (str, bytes)) or hasattr(network, "__fspath__"):
        from .numeric.onnx_io import load_float_network

        return load_float_network(network)
    if hasattr(network, "layers") and hasattr(network, "input_dim"):  # an exact Model
        from .numeric.models import from_exact

        return from_exact(network)
    from .numeric.models import from_torch

    return from_torch(network, None, name or "torch model", input_shape=input_shape)


def _groups(model, group):
    """(numeric group, exact group) from what the caller gave (exact, numeric, built-in name) or the model's."""
    from .groups import FiniteGroup
    from .numeric.models import NumericGroup, group_from_exact

    if isinstance(group, str):
        from .groups import builtin_group

        group = builtin_group(group)
    if group is None:
        group = model.group
    if group is None:
        raise InputError("no group: pass one (--group, --group-file) or give the network file a group")
    if isinstance(group, FiniteGroup):
        return group_from_exact(group), group
    if isinstance(group, NumericGroup):
        return group, exact_group_from_numeric(group)
    raise InputError(f"expected a group, got {type(group).__name__}")


def _relative(F, Fb) -> dict:
    """Median and max over the points of |F - Fb| / |F|, with the median's 95 % order-statistic
    interval (the points' sampling error: ranks n/2 -+ 1.96 sqrt(n)/2)."""
    num = np.linalg.norm(F - Fb, axis=1)
    den = np.maximum(np.linalg.norm(F, axis=1), 1e-300)
    r = np.sort(num / den)
    n = len(r)
    lo, hi = int(max(0, np.floor(n / 2 - 0.98 * np.sqrt(n)))), int(min(n - 1, np.ceil(n / 2 + 0.98 * np.sqrt(n))))
    return {"median": float(np.median(r)), "max": float(r[-1]), "points": int(n),
            "median_interval_95": [float(r[lo]), float(r[hi])]}


NOISE_WORK = 20_000_000_000
"""Multiply-adds of one network's forward pass on the noise points, above which fewer points are
drawn (at least :data:`MIN_NOISE_POINTS`; the report says how many, and the median's interval)."""

MIN_NOISE_POINTS = 64

FORWARD_BLOCK = 8_000_000
"""Floats of the widest layer's outputs for one block of points in :func:`_outputs` (bounded memory)."""


def _work_per_point(model) -> int:
    """Multiply-adds of one point's forward pass (a convolution's taps times its outputs)."""
    def one(l):
        taps = getattr(getattr(l, "shape", None), "taps", None)
        return l.out_dim * taps if taps else l.out_dim if supports(l, "sparse-actions") else l.in_dim * l.out_dim

    return int(sum(one(l) for l in model.layers))


def _noise_count(model, noise_points: int) -> int:
    """The noise points drawn: ``noise_points``, or fewer where their forward pass passes NOISE_WORK."""
    return int(min(noise_points, max(MIN_NOISE_POINTS, NOISE_WORK // max(1, _work_per_point(model)))))


def _outputs(model, X) -> np.ndarray:
    """model(X), a block of points at a time (the hidden layers of a wide network hold one block)."""
    step = max(1, FORWARD_BLOCK // max(max(model.widths), 1))
    if X.shape[0] <= step:
        return model(X)
    return np.concatenate([model(X[a:a + step]) for a in range(0, X.shape[0], step)])


TASKS = ("classifier", "autoencoder")


def _losses(F, x, y, task: str) -> tuple[float, float | None]:
    """(task loss, accuracy or None) of outputs F on (x, y): reconstruction MSE, cross-entropy, or binary
    cross-entropy with the single output as the logit of class 1."""
    if task == "autoencoder":
        return float(np.mean((F - x) ** 2)), None
    if F.shape[1] == 1:
        z = F[:, 0]
        return float(np.mean(np.logaddexp(0.0, z) - y * z)), float(np.mean((z > 0) == (y == 1)))
    Z = F - F.max(axis=1, keepdims=True)
    return (float(np.mean(np.log(np.exp(Z).sum(axis=1)) - Z[np.arange(len(y)), y])),
            float(np.mean(F.argmax(axis=1) == y)))


def _task_kind(task: str, outputs: int) -> str:
    if task == "autoencoder":
        return "reconstruction mean squared error"
    return ("binary cross-entropy on the data's labels (the output as the logit of class 1)" if outputs == 1
            else "cross-entropy on the data's labels")


def _task_loss(models: dict, splits: list, task: str | None, source: str) -> dict | None:
    """Task loss (and accuracy) of each named network on each named split ``(name, x, y)``; None without a task.

    The keys of the first split's ``loss`` keep the legacy names ``theta``, ``theta_bar`` at the top level."""
    if task is None:
        return None
    out = {"kind": _task_kind(task, next(iter(models.values())).output_dim), "task": task, "task_source": source,
           "splits": []}
    for name, x, y in splits:
        sp = {"name": name, "points": int(x.shape[0]), "loss": {}}
        for mname, m in models.items():
            loss, acc = _losses(m(x), x, y, task)
            sp["loss"][mname] = loss
            if acc is not None:
                sp.setdefault("accuracy", {})[mname] = acc
        out["splits"].append(sp)
    first = out["splits"][0]
    for mname in models:
        out[mname] = first["loss"][mname]
        if "accuracy" in first:
            out[f"accuracy_{mname}"] = first["accuracy"][mname]
    return out


def _checked_data(model, data, task: str | None = None):
    """The data as (x, y or None, task or None, where the task came from), checked against the network before
    any work: x has the network's input size; the task is ``task`` when given, else read from the data
    (labels and an output unlike the input: a classifier; no labels and output = input: an autoencoder),
    and never guessed: labels with an output the size of the input need ``task``."""
    if task is not None and task not in TASKS:
        raise InputError(f"--task must be classifier or autoencoder, got {task!r}")
    x, y = read_data(data)
    if x is None:
        if task is not None:
            raise InputError(f"--task {task} needs --data (the task loss is measured on the data)")
        return None
    if x.shape[1] != model.input_dim:
        raise InputError(f"the data has {x.shape[1]} features, the network takes {model.input_dim}")
    if task == "autoencoder":
        if model.output_dim != model.input_dim:
            raise InputError(f"--task autoencoder needs an output the size of the input ({model.input_dim}); the "
                             f"network has {model.output_dim} outputs")
        return x, None, "autoencoder", "--task autoencoder" + ("; the labels y are not used" if y is not None else "")
    if task == "classifier" and y is None:
        raise InputError('--task classifier needs labels: an array "y" in the data')
    if y is None:
        if model.output_dim == model.input_dim:
            return x, None, "autoencoder", "read from the data: no labels, and the output has the input's size"
        return x, None, None, "no labels, and the output is not the input's size: no task loss"
    if task is None and model.output_dim == model.input_dim:
        raise InputError(f"the data has labels, and the network's output has the input's size ({model.input_dim}): "
                         "it may be an autoencoder or a classifier; say which with --task autoencoder (the labels "
                         "are not used) or --task classifier (one logit per class)")
    if y.shape[0] != x.shape[0]:
        raise InputError(f"the data has {x.shape[0]} inputs but {y.shape[0]} labels")
    classes = max(2, model.output_dim)
    if y.min() < 0 or y.max() >= classes:
        what = ("one output, read as the logit of class 1 (labels 0 and 1)" if model.output_dim == 1
                else f"{model.output_dim} outputs, one logit per class (labels 0 .. {model.output_dim - 1})")
        raise InputError(f"the data's labels run from {y.min()} to {y.max()}, but the network has {what}; "
                         "leave y out for the function distance alone")
    return x, y, "classifier", "--task classifier" if task else "read from the data: labels given"


def _validated(x, y, where: str):
    """x as an N x features float array with N >= 1 and every entry finite; y as integer labels (an array
    of integers, or of floats that are whole numbers), one per row, or None."""
    try:
        x = np.asarray(x)
        if x.dtype.kind not in "biuf":  # strings, objects, complex numbers (whose imaginary part would be dropped)
            raise TypeError
        x = x.astype(np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{where}: the inputs x are not real numbers") from None
    if x.ndim == 0 or x.shape[0] == 0 or x.size == 0:
        raise InputError(f"{where}: the data has no inputs (x has shape {x.shape}); give at least one data point")
    x = x.reshape(x.shape[0], -1)
    bad = ~np.isfinite(x)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise InputError(f"{where}: x has {int(bad.sum())} entries that are NaN or infinite (in {len(rows)} data "
                         f"point(s), the first is point {int(rows[0]) + 1}); remove or impute them")
    if y is None:
        return x, None
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        raise InputError(f"{where}: the labels y are not numbers (dtype {y.dtype})")
    y = y.reshape(-1)
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)):
            raise InputError(f"{where}: the labels y contain NaN or infinite values")
        frac = np.flatnonzero(y != np.round(y))
        if frac.size:
            raise InputError(f"{where}: the labels y must be whole numbers (class indices); {frac.size} are not, the "
                             f"first is {y[frac[0]]!r} at point {int(frac[0]) + 1}")
    if y.shape[0] != x.shape[0]:
        raise InputError(f"{where}: x has {x.shape[0]} rows but y has {y.shape[0]} labels")
    return x, y.astype(np.int64)


def read_data(data):
    """(x, y or None) from a path to an .npz (arrays x, optional y) or a (x, y) pair / Dataset, checked
    (:func:`_validated`: at least one point, finite entries, whole-number labels, one per point)."""
    if data is None:
        return None, None
    if hasattr(data, "x"):
        return _validated(data.x, getattr(data, "y", None), "the data")
    if isinstance(data, tuple):
        if len(data) != 2:
            raise InputError("data as a tuple must be (x, y) (y may be None)")
        return _validated(data[0], data[1], "the data")
    from pathlib import Path

    from .schema import close_names
    from .numeric.models import open_npz

    p = Path(data)
    z = open_npz(p, "a data set .npz with an array \"x\"")
    with z:
        for name in sorted(set(z.files) - {"x", "y", "shape"}):
            close = close_names(name, ["x", "y", "shape"], 1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise InputError(f'{p}: unknown array "{name}"{hint}; a data set .npz holds "x", "y" and "shape"')
        if "x" not in z.files:
            raise InputError(f'{p}: a data set .npz needs an array "x" (N x features) and optionally "y" (labels)')
        try:
            x = z["x"]
            y = z["y"] if "y" in z.files else None
        except ValueError as e:  # object arrays need allow_pickle, which symeq never sets
            raise InputError(f"{p}: unreadable array ({e})") from None
    return _validated(x, y, str(p))


def _chains_for(model, group, gen_actions):
    from .numeric.project import element_actions

    return element_actions(group, gen_actions)


def _per_generator_matching(model, group, deadline=None):
    """For a group generated by involutions: each generator's nearest involution on its own (matching),
    as generator actions per hidden layer; None when some generator is not of order 2."""
    from .numeric.models import NumericGroup
    from .numeric.project import group_elements, nearest_involution_actions

    per = []
    for name, (a, b) in zip(group.names, group.generators):
        sub = NumericGroup([(a, b)], [name], f"<{name}>")
        if len(group_elements(sub)[0]) != 2:
            return None
        per.append(nearest_involution_actions(model, sub, deadline=deadline).actions)
    return [[per[g][i][0] for g in range(len(per))] for i in range(model.depth - 1)]


def _finetune_options(finetune) -> dict | None:
    """None (no fine-tuning) or the fine-tuning options, checked: steps, lr, seconds, batch_size, holdout,
    progress."""
    if finetune is None or finetune is False:
        return None
    opts = {"steps": 1000, "lr": 1e-3, "seconds": 60.0, "batch_size": 256, "holdout": 0.2, "progress": True}
    if finetune is not True:
        if not isinstance(finetune, dict):
            raise InputError("finetune must be True or a dict of options (steps, lr, seconds, batch_size, holdout, "
                             "progress)")
        unknown = set(finetune) - set(opts)
        if unknown:
            raise InputError(f"unknown fine-tuning option(s) {sorted(unknown)}; known: {sorted(opts)}")
        opts.update(finetune)
    if not (isinstance(opts["steps"], int) and 1 <= opts["steps"] <= 10 ** 6):
        raise InputError(f"--finetune-steps must be an integer from 1 to 10^6, got {opts['steps']!r}")
    if not (isinstance(opts["lr"], (int, float)) and 0 < opts["lr"] <= 10 and math.isfinite(opts["lr"])):
        raise InputError(f"--finetune-lr must be a number in (0, 10], got {opts['lr']!r}")
    if opts["seconds"] is not None and not (isinstance(opts["seconds"], (int, float)) and opts["seconds"] > 0):
        raise InputError(f"--finetune-seconds must be positive, got {opts['seconds']!r}")
    if not (isinstance(opts["batch_size"], int) and opts["batch_size"] >= 1):
        raise InputError(f"the fine-tuning batch size must be a positive integer, got {opts['batch_size']!r}")
    if not (isinstance(opts["holdout"], (int, float)) and 0 < opts["holdout"] < 1):
        raise InputError(f"--holdout must be a fraction strictly between 0 and 1, got {opts['holdout']!r}")
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        from .errors import EngineMissing

        raise EngineMissing("--finetune trains with torch, which is not installed: pip install 'symeq[numeric]' "
                            "(or pip install torch)")
    return opts


def _actions_json(group, gen_actions) -> list:
    """theta-bar's rho_i(g) per hidden layer and generator: cycles (numbered from 1), source and signs."""
    from .notation import format_cycles

    out = []
    for i, per in enumerate(gen_actions, 1):
        for name, a in zip(group.names, per):
            cols, vals = np.asarray(a.cols, dtype=np.int64), np.sign(a.vals).astype(np.int64).tolist()
            out.append({"layer": i, "generator": name, "cycles": format_cycles(cols.tolist(), vals),
                        "source": (cols + 1).tolist(), "signs": vals})
    return out


def _noise_inputs(model, x, noise_points, seed):
    """Noise inputs: N(0, I), or with data the data's per-feature mean and standard deviation."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((noise_points, model.input_dim))
    if x is None:
        return Z, "i.i.d. N(0, 1) (no --data)"
    return x.mean(axis=0) + x.std(axis=0) * Z, ("Gaussian with the data's per-feature mean and standard deviation "
                                                "(a feature constant on the data stays at its value)")


class _CertifyRun:
    """The state the steps of :func:`certify` share: the float network (convolutions expanded where
    they are projected dense), its groups, the data and its moments, the options, and the candidates
    (``consider`` adds one, once per distinct tuple of actions, with every way it was found)."""

    def __init__(self, model, original, ngroup, egroup, *, words, kernels, conv_shapes, checked, metric, restarts,
                 seed, tol, deadline, notes, ft_opts):
        self.model, self.original, self.ngroup, self.egroup = model, original, ngroup, egroup
        self.kernels, self.conv_shapes, self.checked, self.metric = kernels, conv_shapes, checked, metric
        self.restarts, self.seed, self.tol, self.deadline, self.notes = restarts, seed, tol, deadline, notes
        self.ft_opts = ft_opts
        self.x = None if checked is None else checked[0]
        self.words = words
        self.moments = self.metric_moments = None
        self.candidates, self.seen = [], {}
        self.twin = None  # the float twin's actions, when they are a homomorphism
        self.search = {"restarts": 0, "lower_bound": None, "optimal": False, "line": None}
        self.trace: list = []  # (step, reason) per candidate step (reason None: it added candidates)

    @property
    def involutions(self) -> bool:
        """A group of order 2 with one generator: the matching search applies."""
        return len(self.words) == 2 and len(self.ngroup.generators) == 1

    def consider(self, gen_actions, method, proven):
        from .numeric.project import (action_key, element_actions, layer_distances, parameter_distance, reynolds_float,
                                      weighted_distances, weighted_projection)

        key = b"".join(action_key(a) for per in gen_actions for a in per)
        if key in self.seen:  # the same actions from another start: one candidate, every way it was found
            c = self.seen[key]
            if proven and not c["proven"]:
                c["also"].append(c["method"])
                c["method"], c["proven"] = method, True
            elif method != c["method"] and method not in c["also"]:
                c["also"].append(method)
            return
        model, moments, metric_moments = self.model, self.moments, self.metric_moments
        chains = element_actions(self.ngroup, gen_actions)
        proj = reynolds_float(model, chains)
        c = {"layer": layer_distances(model, proj), "pdist": parameter_distance(model, proj), "method": method,
             "proven": proven, "gen": gen_actions, "chains": chains, "proj": proj, "also": [], "wd": None,
             "ddist": None}
        if moments is not None:
            c["wd"], c["ddist"] = weighted_distances(model, proj, moments)
        if self.metric == "data":  # theta-bar: the nearest equivariant point in the data's weighted distance
            _, c["reynolds_data_weighted"] = weighted_distances(model, proj, metric_moments)
            c["proj"], cg = weighted_projection(model, chains, metric_moments, proj, deadline=self.deadline)
            c["layer"], c["pdist"] = layer_distances(model, c["proj"]), parameter_distance(model, c["proj"])
            c["wd"], _ = weighted_distances(model, c["proj"], moments)
            _, c["ddist"] = weighted_distances(model, c["proj"], metric_moments)
            c["cg_residual"] = max(cg)
        c["score"] = c["pdist"] if self.metric == "parameters" else c["ddist"]
        self.seen[key] = c
        self.candidates.append(c)


def _certify_options(conv, metric, restarts) -> None:
    """The options' values, checked before any work."""
    if conv not in ("auto", "dense", "kernels"):
        raise InputError(f"conv must be \"auto\", \"dense\" or \"kernels\", got {conv!r}")
    if metric not in METRICS:
        raise InputError(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if not (isinstance(restarts, int) and 0 <= restarts <= 10_000):
        raise InputError(f"--restarts must be an integer from 0 to 10000, got {restarts!r}")


def _dense_for_projection(model, conv):
    """``(model, kernels, conv_shapes, notes)``: convolutions through their dense expansion (shared
    weights), unless they are averaged on their kernels (``conv="kernels"``, or too large for "auto")."""
    from .layers.conv import DENSE_EXPANSION_LIMIT
    from .numeric.models import NumericDenseLayer, NumericModel

    has_conv = any_supports(model.layers, "sparse-actions")
    kernels = has_conv and (conv == "kernels" or (conv == "auto" and any(
        supports(l, "sparse-actions") and l.in_dim * l.out_dim > DENSE_EXPANSION_LIMIT for l in model.layers)))
    conv_shapes = [l.shape if supports(l, "sparse-actions") else None for l in model.layers]
    if not has_conv or kernels:
        return model, kernels, conv_shapes, []
    model = NumericModel(model.input_dim, [NumericDenseLayer(np.array(l.weight, dtype=np.float64),
                                                             np.array(l.bias, dtype=np.float64), l.activation)
                                           if supports(l, "sparse-actions") else l for l in model.layers],
                         model.group, model.name)
    return model, kernels, conv_shapes, [
        "convolutions are projected through their dense expansion; a layer whose average is again a "
        "convolution (the actions respect the image grid) is written back as a conv2d layer"]


def _certify_guards(model, kernels, noise_points, digits) -> None:
    """Size guards and the exact twin of every activation, before the work."""
    from .activations import activation_from_spec
    from .numeric.project import check_projectable
    from .sizes import check_memory, check_width

    for i, w in enumerate(model.widths):  # size guards before any work
        check_width(w, f"certify: width of layer {i}")
    if not (isinstance(noise_points, int) and noise_points >= 1):
        raise InputError(f"noise_points must be a positive integer, got {noise_points!r}")
    if digits is not None and not (isinstance(digits, int) and 1 <= digits <= 30):
        raise InputError(f"--digits must be an integer from 1 to 30, got {digits!r}")
    if not kernels:
        check_projectable(model)
    elif model.token_mixing:
        raise InputError("certify projects dense and convolutional networks only")
    # theta-bar as exact rationals (python-flint objects and their integers, about 200 bytes an entry,
    # twice: the matrices and the model's copy) next to the float work
    check_memory(400 * model.n_params, f"certify: theta-bar in exact rationals ({model.n_params} parameters)")
    for i, l in enumerate(model.layers[:-1], 1):  # the exact twin of every activation, before the work
        try:
            activation_from_spec(l.activation.spec, f"hidden layer {i}")
        except InputError as e:
            raise InputError(f"hidden layer {i}: no exact activation for {l.activation.spec}: {e}") from None


def _data_guards(metric, checked, finetune, has_conv, kernels):
    """What --metric data and --finetune need of the data, before the work; the fine-tuning options."""
    if metric == "data" and checked is None:
        raise InputError("--metric data weights the distance by the data: give --data")
    ft_opts = _finetune_options(finetune)
    if ft_opts is not None:
        if checked is None or checked[2] is None:
            raise InputError("--finetune trains on the task: give --data (with labels y for a classifier, or "
                             "--task autoencoder for a network whose output has the input's size)")
        if has_conv:
            raise InputError("--finetune covers dense networks (a convolution's weight sharing is not kept by the "
                             "fine-tuning steps)")
        if checked[0].shape[0] < 10:
            raise InputError(f"--finetune needs at least 10 data points (a held-out split); the data has "
                             f"{checked[0].shape[0]}")
    if kernels and metric != "parameters":
        raise InputError("--metric data is not available for convolutions averaged on their kernels (--conv kernels, "
                         "and every network with max pooling or group pooling)")
    return ft_opts


def _subgroup_note(model) -> list:
    """The note when some K_i has scalings the projection does not use (its actions are a subgroup)."""
    from .numeric.project import signs_allowed

    sub = [i for i, l in enumerate(model.layers[:-1], 1)
           if l.activation.scalings.alphas != "one" and not signs_allowed(l.activation)]
    if not sub:
        return []
    return [f"hidden layer(s) {sub}: K_i has scalings the projection does not use (ReLU's positive factors, "
            "sigmoid's affine flip, shifted or monomial activations); the actions searched are permutations, "
            "a subgroup of K_i, so a nearer layerwise-equivariant network through all of K_i may exist"]


def _data_moments(st: _CertifyRun) -> None:
    """The data's second moments (data-weighted distances) and, for --metric data, their ridged form."""
    from .numeric.project import ridged, second_moments

    if st.x is not None:
        st.moments = second_moments(st.model, st.x)
        if st.moments is None:
            if st.metric == "data":
                raise InputError("--metric data: a layer is wider than the data moments allow "
                                 "(symeq.numeric.project.MAX_MOMENT_WIDTH)")
            st.notes.append("a layer is too wide for the data's second moments: no data-weighted distances")
    st.metric_moments = None if st.metric != "data" else ridged(st.moments)


def _step_float_twin(st: _CertifyRun):
    """Candidate: the float twin's actions (restricted to what the projection uses; a cyclic group's
    broken cycles repaired when they are no homomorphism)."""
    from .numeric.layerwise import derive_latent_actions_numeric
    from .numeric.monomial import MonomialAction
    from .numeric.project import is_homomorphism, repair_cyclic, restrict_to_projectable

    notes = st.notes
    try:
        der = derive_latent_actions_numeric(st.model, tol=st.tol, max_tie_variants=720)
    except InputError as e:
        notes.append(f"the float twin found no actions ({e})")
        return Skip(f"the float twin found no actions ({e})")
    acts = der.actions
    if not all(isinstance(a, MonomialAction) for per in acts for a in per):
        notes.append("the float twin's actions are not monomial (attention value spaces)")
        return Skip("the float twin's actions are not monomial")
    acts, changed = restrict_to_projectable(st.model, acts)
    if changed:
        notes.append("the float twin's actions have scale factors or offsets the projection does not use "
                     "(ReLU, sigmoid, shifted or monomial activations): their permutations (with signs where "
                     "the activation is odd) are used, a subgroup of K_i")
    hom, why = is_homomorphism(st.ngroup, acts)
    if hom:
        st.twin = acts
        st.consider(acts, f"the float twin's actions (max residual {der.max_residual:.3g})", False)
        return None
    notes.append(f"the float twin's actions are not a homomorphism: {why}")
    if len(st.ngroup.generators) == 1 and len(st.words) > 2:  # cyclic: repair the cycles that break g^m = e
        fixed_acts, nfix = repair_cyclic(acts, len(st.words))
        st.consider(fixed_acts, f"the float twin's actions with {nfix} neuron(s) whose cycles break "
                                f"g^{len(st.words)} = e fixed", False)
        return None
    return Skip(f"the float twin's actions are not a homomorphism: {why}")


def _step_involution_search(st: _CertifyRun):
    """Candidates for a group of order 2: the exact matching (one hidden layer), or the joint search
    layer by layer from warm starts and seeded random restarts, with its lower bound."""
    from .numeric.project import TermsCache, data_scaled, nearest_involution_actions, random_involutions

    if not st.involutions:
        return Skip(f"a group of order 2 with one generator needed; this one has order {len(st.words)}")
    model, ngroup, hidden, notes = st.model, st.ngroup, st.model.depth - 1, st.notes
    starts = [(None, "identity", "start: identity")]
    if hidden > 1:  # the joint search: warm starts, then seeded random restarts
        starts += [(None, "forward", "start: each layer's best matching from the input up"),
                   (None, "backward", "start: each layer's best matching from the output down")]
        starts += [] if st.twin is None else [(st.twin, "identity", "start: the float twin's actions")]
        rng = np.random.default_rng(st.seed)
        starts += [(random_involutions(model, ngroup, rng), "identity", f"random restart {k + 1} (seed {st.seed})")
                   for k in range(st.restarts)]
    runs = [(model, s) for s in starts]
    if st.metric == "data":  # also searched on theta weighted by the data (a heuristic; judged by the metric)
        scaled = data_scaled(model, st.moments)
        runs += [(scaled, s) for s in starts[:3]]
    caches = {id(m): TermsCache(m) for m, _ in runs}  # the starts share each layer's products (same results)
    for m, (start, init, label) in runs:
        try:
            a = nearest_involution_actions(m, ngroup, start=start, init=init, deadline=st.deadline, cache=caches[id(m)])
        except Undetermined as e:
            if st.candidates:  # a candidate is already there: the search stops, the rest goes on
                notes.append(f"the matching search stopped at its time budget ({e})")
                break
            raise
        if label.startswith("random"):
            st.search["restarts"] += 1
        weighted = m is not model
        method = a.method if hidden == 1 and not weighted else \
            f"maximum-weight matching per layer, layers in turn ({label}" + \
            ("; columns weighted by the data's root mean square" if weighted else "") + ")"
        # proven nearest: in the parameter metric, by the exact matching on theta itself
        st.consider(a.actions, method, a.proven_nearest and not weighted and st.metric == "parameters")
        notes += [n for n in a.notes if n not in notes]
    if hidden > 1 and st.metric == "parameters":
        _lower_bound(st, caches[id(model)])
    return None


def _lower_bound(st: _CertifyRun, cache=None) -> None:
    """The lower bound of the nearest homomorphism's distance (two or more hidden layers, parameter metric)."""
    from .numeric.project import involution_lower_bound

    try:
        lb, how = involution_lower_bound(st.model, st.ngroup, st.deadline, cache)
    except Undetermined as e:
        lb, how = None, f"its matchings ran past the time budget ({e})"
    st.search["lower_bound_method"] = how
    if lb is not None:
        den = sum(float(np.sum(l.weight ** 2) + np.sum(l.bias ** 2)) for l in st.model.layers)
        st.search["lower_bound"] = float(np.sqrt(lb / den)) if den > 0 else float(np.sqrt(lb))


def _step_trivial_action(st: _CertifyRun):
    """Candidate for a larger group: the trivial action (always a homomorphism)."""
    from .numeric.project import trivial_actions

    if st.involutions:
        return Skip("a group of order 2: the matching search covers it")
    st.consider(trivial_actions(st.model, st.ngroup), "the trivial action (always a homomorphism)", False)
    return None


def _step_per_generator(st: _CertifyRun):
    """Candidate for a larger group: the nearest involution of each generator by matching, when together
    they are a homomorphism."""
    from .numeric.project import is_homomorphism

    if st.involutions:
        return Skip("a group of order 2: the matching search covers it")
    per = _per_generator_matching(st.model, st.ngroup, st.deadline)
    out = None
    if per is None:
        out = Skip("a generator is not of order 2")
    else:
        hom, why = is_homomorphism(st.ngroup, per)
        if hom:
            st.consider(per, "the nearest involution of each generator by matching (together a homomorphism)", False)
        else:
            st.notes.append(f"the per-generator matchings are not a homomorphism: {why}")
            out = Skip(f"the per-generator matchings are not a homomorphism: {why}")
    st.notes.append(f"group of order {len(st.words)}: candidates are the float twin's actions (repaired for a cyclic "
                    "group), the per-generator matchings (generators of order 2) and the trivial action; best found, "
                    "not proven nearest")
    return out


#: where the candidate actions of :func:`certify` come from, in order (docs/architecture.md, "Pipelines");
#: every step runs, the nearest candidate in the metric is theta-bar (a proven nearest one wins a tie)
CANDIDATE_STEPS = (_step_float_twin, _step_involution_search, _step_trivial_action, _step_per_generator)


def _choose(st: _CertifyRun):
    """theta-bar's candidate: the nearest in the metric (a proven nearest one wins a tie), and the search's line."""
    search = st.search
    least = min(c["score"] for c in st.candidates)
    ties = [c for c in st.candidates if c["score"] <= least * (1 + 1e-9) + 1e-300]
    best = next((c for c in ties if c["proven"]), ties[0])
    method = best["method"]
    if best["also"]:
        method += f" (also found from {len(best['also'])} other start(s))"
    if best["proven"]:
        search.update(optimal=True, line="optimal: the exact matching over every homomorphism into the actions "
                                         "searched (proven nearest)")
    elif search["lower_bound"] is not None:
        lbv, b = search["lower_bound"], best["score"]
        search["gap"] = max(0.0, b - lbv)
        if b <= lbv * (1 + 1e-9) + 1e-15:
            search.update(optimal=True, line=f"optimal: theta-bar's distance {b:.3g} equals the lower bound "
                                             f"({search['lower_bound_method']})")
        else:
            search["line"] = (f"within {b - lbv:.3g} of the optimum: the nearest homomorphism's distance (into the "
                              f"actions searched) lies in [{lbv:.3g}, {b:.3g}] (lower bound: "
                              f"{search['lower_bound_method']}; {search['restarts']} random restart(s))")
    elif st.model.depth - 1 > 1 and len(st.words) == 2:
        search["line"] = (f"no lower bound computed ({search.get('lower_bound_method', 'none for the data metric')}); "
                          f"{search['restarts']} random restart(s)")
    return best, method


def _grid_digits(model, proj, digits):
    """The grid, per layer: three digits below the layer's largest entrywise deviation from its projection
    (12 for a layer the projection leaves as it is), and at least three below its largest weight."""
    if digits is not None:
        return [digits] * model.depth
    out = []
    for l, (W, b) in zip(model.layers, proj):
        dev = max(float(np.max(np.abs(l.weight - W), initial=0.0)), float(np.max(np.abs(l.bias - b), initial=0.0)))
        rel = dev / max(float(np.max(np.abs(l.weight), initial=0.0)), float(np.max(np.abs(l.bias), initial=0.0)),
                        1e-300)
        out.append(_digits_for(dev, rel, float(np.max(np.abs(l.weight), initial=0.0))))
    return out


def _finetune_runs(st: _CertifyRun, best, nearest, timeout):
    """--finetune: train from theta-bar's actions (and, for an involution, from actions pairing the neurons)
    on a split of the data; the run best on the fine-tuning split's validation points is kept (each run
    stops early on them: :func:`symeq.numeric.train.finetune_equivariant`).
    ``(source, chains, ft_info, split)``."""
    from .numeric.models import NumericDenseLayer, NumericModel
    from .numeric.project import action_key, element_actions, paired_involutions, reynolds_float
    from .numeric.train import finetune_equivariant

    model, ngroup, ft_opts, checked, deadline = st.model, st.ngroup, st.ft_opts, st.checked, st.deadline
    gen_actions = best["gen"]
    xs, ys = checked[0], checked[1]
    order = np.random.default_rng(st.seed).permutation(xs.shape[0])
    nh = max(1, int(round(ft_opts["holdout"] * xs.shape[0])))
    held, train = order[:nh], order[nh:]
    split = ((xs[train], None if ys is None else ys[train]), (xs[held], None if ys is None else ys[held]))
    left = None if timeout is None else max(0.0, timeout - deadline.elapsed())
    secs = ft_opts["seconds"] if left is None else min(ft_opts["seconds"] or left, 0.5 * left)
    starts = [("theta-bar's actions (the nearest)", gen_actions, best["chains"], nearest)]
    if st.involutions:
        # a trivial rho_i forces f(x) = f(gx) after layer i, which an autoencoder cannot afford: fine-tune
        # also from actions that pair the neurons, and keep the run best on the validation points
        paired = paired_involutions(model, ngroup)
        keys = [b"".join(action_key(a) for per in acts for a in per) for acts in (paired, gen_actions)]
        if keys[0] != keys[1]:
            pch = element_actions(ngroup, paired)
            pproj = reynolds_float(model, pch)
            starts.append(("actions pairing the neurons (greedy on theta's weights, from the input up)", paired,
                           pch, NumericModel(model.input_dim, [NumericDenseLayer(W, b, l.activation) for l, (W, b)
                                                               in zip(model.layers, pproj)], ngroup, model.name)))
    tried = []
    for label, gacts, ch, start in starts:
        ft_model, info = finetune_equivariant(start, ch, split[0][0], split[0][1], checked[2],
                                              steps=ft_opts["steps"], lr=float(ft_opts["lr"]),
                                              batch_size=ft_opts["batch_size"], seconds=secs / len(starts),
                                              seed=st.seed, progress=ft_opts["progress"], deadline=deadline)
        info["train_loss"] = _losses(ft_model(split[0][0]), split[0][0], split[0][1], checked[2])[0]
        info["actions"] = label
        score = (info["train_loss"],) if info.get("validation_loss") is None else \
            ((info["validation_error"],) if info.get("validation_error") is not None else ()) + (info["validation_loss"],)
        tried.append((score, len(tried), ft_model, info, gacts, ch))
    _, _, source, ft_info, ft_gen, chains = min(tried, key=lambda t: (t[0], t[1]))
    ft_info["tried"] = [{"actions": t[3]["actions"], "steps": t[3]["steps"], "kept_step": t[3].get("kept_step"),
                         "seconds": t[3]["seconds"], "train_loss": t[3]["train_loss"], "score": list(t[0])}
                        for t in tried]
    ft_info.update(train_points=int(len(train)), held_out_points=int(len(held)),
                   actions_json=_actions_json(ngroup, ft_gen))
    return source, chains, ft_info, split


def _exact_theta_bar(st: _CertifyRun, source, chains, digits, bar_name):
    """theta-bar rounded to the grid and averaged exactly: the exact model (conv2d layers kept where every
    projected convolution is one) and its float copy."""
    from .activations import activation_from_spec
    from .models import DenseLayer, Model
    from .numeric.models import NumericDenseLayer, NumericModel
    from .numeric.project import reynolds_exact

    model, conv_shapes = st.model, st.conv_shapes
    exact = reynolds_exact(source, chains, digits, conv_shapes)
    if any(sh is not None and e[4] is None for sh, e in zip(conv_shapes, exact)):
        # all or nothing: a conv2d layer after a dense one would meet actions that are no channel action
        # times a pixel permutation in the exact walk, so one layer that does not fold makes every layer dense
        if any(e[4] is not None for e in exact):
            st.notes.append("some projected convolutions are no convolutions any more: every layer is written dense")
        exact = [e[:4] + (None,) for e in exact]
        conv_shapes = [None] * len(conv_shapes)
        st.notes.append("the projected convolutions share no kernels (the actions do not respect the image grid): "
                        "theta-bar is written as a dense network")
    layers, flayers = [], []
    for li, (l, (Wq, bq, Wf, bf, conv)) in enumerate(zip(model.layers, exact)):
        act = None if l.activation is None else activation_from_spec(l.activation.spec)
        if conv is not None:
            from .layers.conv import ConvLayer

            layers.append(ConvLayer(conv_shapes[li], conv[0], conv[1], act))
        else:
            layers.append(DenseLayer(Wq, bq, act))
        flayers.append(NumericDenseLayer(Wf, bf, l.activation))
    return exact, Model(model.input_dim, layers, st.egroup, bar_name), NumericModel(model.input_dim, flayers,
                                                                                      st.ngroup, bar_name)


def _kept_conv_distances(st: _CertifyRun, exact, dists) -> None:
    """A convolution kept as one: its distance on its own parameters (kernel and channel bias)."""
    for li, e in enumerate(exact):
        if e[4] is not None:
            K0, b0 = np.asarray(st.original.layers[li].kernel), np.asarray(st.original.layers[li].channel_bias)
            K1 = np.array([int(x.p) / int(x.q) for x in np.asarray(e[4][0], dtype=object).ravel()]).reshape(K0.shape)
            b1 = np.array([int(x.p) / int(x.q) for x in e[4][1]])
            num = np.sqrt(np.sum((K0 - K1) ** 2) + np.sum((b0 - b1) ** 2))
            den = np.sqrt(np.sum(K0 ** 2) + np.sum(b0 ** 2))
            dists[li] = float(num / den) if den > 0 else float(num)


def _certification(st: _CertifyRun, best, method, digits, exact, exact_model, bar, max_distance, ft_info):
    """The Certification (status "undetermined" until :func:`_finish` verifies theta-bar exactly)."""
    from .numeric.project import layer_distances, parameter_distance, weighted_distances

    model, metric = st.model, st.metric
    written = [(l.weight, l.bias) for l in bar.layers]
    dists = layer_distances(model, written) if ft_info is None else best["layer"]
    _kept_conv_distances(st, exact, dists)
    cand_json = [{"method": c["method"], "also_found_by": c["also"], "distance": c["score"],
                  "parameters_per_layer": c["layer"], "parameters_max": max(c["layer"]),
                  "parameters": c["pdist"], "data_weighted": c["ddist"],
                  **({} if metric != "data" else {"reynolds_data_weighted": c["reynolds_data_weighted"],
                                                  "cg_residual": c["cg_residual"]})} for c in st.candidates]
    cert = Certification("undetermined", dists, {}, None, digits, method, best["proven"], cand_json, None,
                         exact_model, bar, max_distance, st.notes, metric=metric, distance=best["score"],
                         layer_distances_data=best["wd"], search=st.search,
                         actions=_actions_json(st.ngroup, best["gen"]))
    if ft_info is None:  # the written (rounded) theta-bar's distance in the metric
        if metric == "parameters":
            cert.distance = parameter_distance(model, written)
        else:
            _, cert.distance = weighted_distances(model, written, st.metric_moments)
        return cert
    ft_info["nearest"] = {"metric": metric, "distance": best["score"], "parameters_per_layer": best["layer"]}
    ft_info["parameters_per_layer"] = layer_distances(model, written)
    ft_info["parameters"] = parameter_distance(model, written)
    if st.moments is not None:
        ft_info["data_weighted_per_layer"], _ = weighted_distances(model, written, st.moments)
    cert.finetune = ft_info
    cert.actions = ft_info["actions_json"]  # the written network's
    st.notes.append("with --finetune the exact verification, the written files and the actions in --json are of the "
                    "fine-tuned network; theta-bar (the nearest, in the lines above) is reported by its float "
                    "projection and not verified on its own")
    return cert


def _unit_diagnostics(st: _CertifyRun, cert, gen_actions, noise_points, timeout) -> None:
    """The paper's metric and the unit diagnostics (float measurements; the proof comes first), on the
    data, or without data on noise inputs (N(0, 1), as the paper measures)."""
    from .numeric.project import layer_diagnostics

    model, x = st.model, st.x
    if max(model.widths[1:-1]) > 2048:
        st.notes.append("hidden layers wider than 2048: the paper's metric and the unit diagnostics are not computed")
    elif timeout is None or st.deadline.elapsed() < 0.5 * timeout:
        xd = x if x is not None else _noise_inputs(model, None, max(noise_points, 2 * max(model.widths) + 60),
                                                   st.seed)[0]
        try:
            cert.diagnostics = layer_diagnostics(model, xd, st.ngroup, gen_actions, st.seed)
            for d in cert.diagnostics:
                d["inputs"] = "data" if x is not None else "noise"
        except (np.linalg.LinAlgError, ValueError) as e:  # a degenerate fit: the diagnostics are left out
            st.notes.append(f"the paper's metric could not be fitted ({e})")
    else:
        st.notes.append("the paper's metric and the unit diagnostics were skipped: half of the time budget was spent")


def certify(network, group=None, *, input_shape=None, digits: int | None = None, data=None,
            max_distance: float | None = None, tol: float = 1e-6, timeout: float | None = 600.0,
            noise_points: int = DEFAULT_NOISE_POINTS, seed: int = 0, name: str | None = None,
            conv: str = "auto", task: str | None = None, metric: str = "parameters", restarts: int | None = None,
            finetune=None) -> Certification:
    """Find the nearest layerwise-equivariant network to a float one and prove it exactly.

    Parameters
    ----------
    network : a NumericModel, a path (.onnx, .npz, .json with floats), an exact Model, or a torch
        ``nn.Sequential`` (read by :func:`symeq.numeric.models.from_torch`, with ``input_shape``
        for convolutions)
    group : a FiniteGroup, a NumericGroup or a built-in group name; default the network's
    digits : the rounding grid 10^-digits of every layer (default, per layer: three digits below the
        layer's largest deviation from its projection; 12 for a layer the projection does not move)
    data : an .npz path (x, optional y) or (x, y): function distance, task loss, data-weighted distances
    task : "classifier" or "autoencoder"; default read from the data (labels and an output unlike the
        input: classifier; no labels, output = input: autoencoder); labels with output = input need it
    metric : "parameters" (whole-network ||theta - theta-bar|| / ||theta||) or "data" (the same weighted
        by the second moment of each layer's input on the data, symmetrised over the group; needs data):
        the one metric that chooses theta-bar among the candidates and judges ``max_distance``
    max_distance : a distance in ``metric`` above which the status is "too far" (exit 1)
    restarts : seeded random restarts of the joint search (groups of order 2, two or more hidden layers;
        default 8); a graph network has no such search and refuses any but 0
    finetune : True or a dict (steps, lr, seconds, batch_size, holdout, progress): train inside the
        layerwise-equivariant subspace of the chosen actions on a split of the data (torch extra), then
        round, average and verify the fine-tuned network exactly (:func:`symeq.numeric.train.finetune_equivariant`)
    tol : the float twin's tolerance (only decides which candidate actions are tried)
    conv : how convolutions are averaged: "dense" (through their dense matrix, with the matching
        search; a kernel is written back when the average is a convolution), "kernels" (on the
        kernels, with the float twin's actions only: for convolutions whose dense matrix is too
        large), or "auto" (dense while every convolution's dense matrix fits
        :data:`symeq.layers.conv.DENSE_EXPANSION_LIMIT`)
    timeout : seconds for the whole run (the search, then the exact verification with what is left);
        past it the status is "undetermined" (a search stopped before any candidate raises
        :class:`~symeq.errors.BudgetExceeded`, exit 3)

    Returns
    -------
    Certification

    References
    ----------
    Shahverdi, Marchetti, Bokman, Kohn, arXiv 2601.21645 (2026), Theorem 4.1; docs/certify.md.
    """
    from .budget import Deadline
    from .numeric.models import NumericDenseLayer, NumericModel
    from .numeric.project import group_elements

    t0 = time.perf_counter()
    deadline = Deadline(timeout)
    model, graph = _chain_or_graph(_as_numeric(network, input_shape, name))
    if graph:  # residual blocks, concatenations: the graph's road (symeq/certify_graph.py, docs/certify.md)
        return _graph_road(model, group, data, task, t0, digits=digits, max_distance=max_distance, tol=tol,
                           timeout=timeout, noise_points=noise_points, seed=seed, metric=metric, finetune=finetune,
                           conv=conv, restarts=restarts)
    if model.token_mixing:  # softmax attention: its own road (symeq/certify_attention.py, docs/attention.md)
        from .certify_attention import certify_attention

        return certify_attention(model, *_groups(model, group), result=Certification, relative=_relative,
                                 digits=digits, data=None if data is None else read_data(data)[0],
                                 max_distance=max_distance, timeout=timeout, noise_points=noise_points, seed=seed,
                                 t0=t0)
    original = model  # with its conv2d layers, when it has some
    restarts = 8 if restarts is None else restarts  # (a graph network takes none: symeq/certify_graph.py)
    _certify_options(conv, metric, restarts)
    model, kernels, conv_shapes, notes = _dense_for_projection(model, _pooling_road(model, conv))
    ngroup, egroup = _groups(model, group)
    model = model.with_group(ngroup)
    _certify_guards(model, kernels, noise_points, digits)
    checked = _checked_data(model, data, task)  # read once and checked before the work
    ft_opts = _data_guards(metric, checked, finetune, any(sh is not None for sh in conv_shapes), kernels)
    words = group_elements(ngroup)[0]
    notes += _subgroup_note(model)
    if kernels:
        return _certify_conv_kernels(model, ngroup, egroup, digits=digits, data=checked, max_distance=max_distance,
                                     tol=tol, timeout=timeout, noise_points=noise_points, seed=seed,
                                     deadline=deadline, t0=t0, notes=notes)
    st = _CertifyRun(model, original, ngroup, egroup, words=words, kernels=kernels, conv_shapes=conv_shapes, checked=checked,
                     metric=metric, restarts=restarts, seed=seed, tol=tol, deadline=deadline, notes=notes,
                     ft_opts=ft_opts)
    _data_moments(st)
    for step in CANDIDATE_STEPS:
        out = step(st)
        st.trace.append((step_name(step), out.reason if isinstance(out, Skip) else None))
    best, method = _choose(st)
    digits = _grid_digits(model, best["proj"], digits)
    nearest = NumericModel(model.input_dim, [NumericDenseLayer(W.copy(), b.copy(), l.activation)
                                             for l, (W, b) in zip(model.layers, best["proj"])], ngroup, model.name)
    source, chains, ft_info, split = model if metric == "parameters" else nearest, best["chains"], None, None
    if ft_opts is not None:
        source, chains, ft_info, split = _finetune_runs(st, best, nearest, timeout)
    bar_name = f"{model.name} (nearest layerwise equivariant)" if ft_opts is None else \
        f"{model.name} (layerwise equivariant, fine-tuned)"
    exact, exact_model, bar = _exact_theta_bar(st, source, chains, digits, bar_name)
    cert = _certification(st, best, method, digits, exact, exact_model, bar, max_distance, ft_info)
    cert.steps = st.trace
    _unit_diagnostics(st, cert, best["gen"], noise_points, timeout)
    return _finish(cert, model, bar, egroup, checked, noise_points, seed, timeout, deadline, t0,
                   nearest=nearest if ft_opts is not None else None, split=split)


def _pooling_road(model, conv: str) -> str:
    """``conv`` for a chain with parameter-free layers (pooling, docs/certify.md "Pooling"): such a layer
    is kept as it is, its output action the one its input action induces (the float derivation's
    transport), and the layers around it are averaged on their own parameters with those actions
    (:func:`_certify_conv_kernels`); the dense matching search reads every layer's weights and refuses
    them by name."""
    bad = next((l for l in model.layers if supports(l, "parameter-free")), None)
    if bad is None:
        return conv
    if conv == "dense":
        raise KindUnsupported(bad.kind, "reynolds", "certify --conv dense (the dense matching search reads every "
                              "layer's weights; a network with pooling is certified with --conv auto or kernels)")
    return "kernels"


def _kernel_road_no_actions(model, der) -> str:
    """Why the kernel road has no actions to average with (the float twin's own reason where it has one)."""
    if any_supports(model.layers, "parameter-free"):
        why = der.undetermined or "its actions are not monomial"
        return (f"the float twin found no actions to average with ({why}); a network with pooling is averaged "
                "with the actions its layers carry (docs/certify.md, 'Pooling')")
    return "the float twin's actions are not monomial; the convolutions are too large for the dense matching search"


def _keep_parameter_free(l, layers, flayers, dists, grids) -> None:
    """theta-bar keeps a parameter-free layer (pooling) as it is: its exact layer, the float one, distance 0
    and no grid (nothing is rounded)."""
    layers.append(l.exact_layer())
    flayers.append(l)
    dists.append(0.0)
    grids.append(None)


def _chain_or_graph(model):
    from .certify_graph import chain_or_graph

    return chain_or_graph(model)


def _graph_road(model, group, data, task, t0, **options):
    """certify of a graph network (symeq/certify_graph.py), given this module's result class, finish and grid."""
    from .certify_graph import certify_graph

    return certify_graph(model, *_groups(model, group), result=Certification, finish=_finish, grid=_digits_for,
                         checked=_checked_data(model, data, task), t0=t0, **options)


def _finish(cert, model, bar, egroup, checked, noise_points, seed, timeout, deadline, t0, nearest=None, split=None):
    """Function distances and task loss of theta-bar, then its exact verification: the status."""
    from .numeric.project import unused_inputs
    from .theorem import verify

    x = None if checked is None else checked[0]
    drawn = _noise_count(model, noise_points)
    X, how = _noise_inputs(model, x, drawn, seed)
    if drawn < noise_points:
        how += (f"; {drawn} of the {noise_points} points asked for: one forward pass costs "
                f"{_work_per_point(model):.3g} multiply-adds, and the noise points stop at {NOISE_WORK:.3g} "
                "per network (the median's 95 % interval over the points is in the JSON)")
    ref = bar if nearest is None else nearest  # the lines above are of the nearest theta-bar
    cert.function_distance = {"noise": _relative(_outputs(model, X), _outputs(ref, X))}
    cert.data_info = {"noise": how}
    if x is not None:
        cert.function_distance["data"] = _relative(_outputs(model, x), _outputs(ref, x))
        cert.data_info["unused_inputs"] = unused_inputs(x)
        if split is None:
            cert.task_loss = _task_loss({"theta": model, "theta_bar": bar}, [("the data", x, checked[1])],
                                        checked[2], checked[3])
        else:
            cert.task_loss = _task_loss({"theta": model, "theta_bar": nearest, "theta_bar_finetuned": bar},
                                        [("the fine-tuning split", *split[0]), ("the held-out split", *split[1])],
                                        checked[2], checked[3])
            cert.finetune["function"] = {"noise": _relative(model(X), bar(X)), "data": _relative(model(x), bar(x))}
    if timeout is not None and deadline.elapsed() >= timeout:
        cert.reason = (f"the time budget of {timeout:g} s ran out before the exact verification of theta-bar "
                       "(raise --timeout)")
        cert.seconds = time.perf_counter() - t0
        return cert
    try:
        left = None if timeout is None else max(1e-3, timeout - deadline.elapsed())
        v = verify(cert.model, egroup, timeout=left, seed=seed)
    except Undetermined as e:
        cert.reason = (f"the exact verification of theta-bar stopped at the end of the time budget of {timeout:g} s "
                       f"(raise --timeout): {e}" if timeout is not None else
                       f"the exact verification of theta-bar stopped: {e}")
        cert.seconds = time.perf_counter() - t0
        return cert
    except InputError as e:  # theta-bar is well formed by construction: a refusal is no verdict on it
        cert.reason = f"the exact pipeline could not take theta-bar: {e}"
        cert.seconds = time.perf_counter() - t0
        return cert
    cert.verification = v
    if v.verdict != "layerwise-equivariant":
        # theta-bar is layerwise equivariant by construction: an exact pipeline that does not say so is a
        # budget or a search that ran out, never a refutation of theta-bar
        cert.reason = f"the exact pipeline returned {v.verdict!r} for theta-bar ({'; '.join(v.notes)[:300]})"
    elif getattr(v, "reparametrized", False):  # the actions hold at theta' (same function), not at theta-bar
        cert.reason = ("the exact pipeline found no action at theta-bar itself, only at a re-parametrized theta' "
                       "with the same function: theta-bar's layerwise equivariance is not proven")
    elif cert.max_allowed is not None and cert.distance > cert.max_allowed:
        cert.status = "too far"
    else:
        cert.status = "certified"
    cert.seconds = time.perf_counter() - t0
    return cert


def _digits_for(dev: float, rel: float, scale: float) -> int:
    """Three digits below a layer's deviation from its projection (12 when it does not move), and
    at least three below its largest weight; at most 15."""
    D = 12 if rel <= 1e-13 else int(min(15, max(3, math.ceil(-math.log10(dev)) + 3)))
    return int(max(D, min(15, math.ceil(-math.log10(max(scale, 1e-300))) + 3)))


def _certify_conv_kernels(model, ngroup, egroup, *, digits, data, max_distance, tol, timeout, noise_points, seed,
                          deadline, t0, notes):
    """certify for networks whose convolutions are too large for their dense matrix: the float twin's
    actions (which must form a homomorphism and respect the image grid), each convolution averaged on
    its kernel (:func:`symeq.numeric.project.reynolds_conv_exact`), dense layers as usual."""
    from .activations import activation_from_spec
    from .layers.conv import ConvLayer
    from .models import DenseLayer, Model
    from .layers.conv.floating import NumericConvLayer
    from .numeric.layerwise import derive_latent_actions_numeric
    from .numeric.models import NumericDenseLayer, NumericModel
    from .numeric.monomial import MonomialAction
    from .numeric.project import (conv_tap_maps, element_actions, is_homomorphism, restrict_to_projectable,
                                  reynolds_conv_exact, reynolds_exact)

    der = derive_latent_actions_numeric(model, tol=tol, max_tie_variants=720)
    if not all(isinstance(a, MonomialAction) for per in der.actions for a in per):
        raise Undetermined(_kernel_road_no_actions(model, der))
    acts, changed = restrict_to_projectable(model, der.actions)
    if changed:
        notes.append("the float twin's actions have scale factors or offsets the projection does not use: their "
                     "permutations (with signs where the activation is odd) are used, a subgroup of K_i")
    hom, why = is_homomorphism(ngroup, acts)
    if not hom:
        raise Undetermined(f"the float twin's actions are not a homomorphism ({why}), and " +
                           ("a network with pooling has no matching search" if any_supports(model.layers,
                            "parameter-free") else "the convolutions are too large for the dense matching search"))
    chains = element_actions(ngroup, acts)
    layers, flayers, dists, grids = [], [], [], []
    tot_num = tot_den = 0.0
    for li, l in enumerate(model.layers):
        deadline.check(f"averaging layer {li + 1} over the group")
        if supports(l, "parameter-free"):  # pooling: no parameters, kept (its action is the transported one)
            _keep_parameter_free(l, layers, flayers, dists, grids)
            continue
        act = None if l.activation is None else activation_from_spec(l.activation.spec)
        if supports(l, "sparse-actions"):
            maps = conv_tap_maps(l.shape, chains, li)
            if maps is None:
                raise Undetermined(f"layer {li + 1}: the actions do not respect the image grid, so the average is no "
                                   "convolution, and the layer is too large for its dense matrix")
            K = np.asarray(l.kernel).reshape(-1)
            Kf = sum(ts * K[tm] for tm, ts, _, _ in maps) / len(maps)
            cbf = sum(cs * np.asarray(l.channel_bias)[cm] for _, _, cm, cs in maps) / len(maps)
            dev = max(float(np.max(np.abs(K - Kf))), float(np.max(np.abs(l.channel_bias - cbf), initial=0.0)))
            scale = max(float(np.max(np.abs(K))), float(np.max(np.abs(l.channel_bias), initial=0.0)), 1e-300)
            D = digits if digits is not None else _digits_for(dev, dev / scale, float(np.max(np.abs(K))))
            Kq, cbq, Kbar, cbbar = reynolds_conv_exact(l, maps, D)
            layers.append(ConvLayer(l.shape, Kq, cbq, act))
            flayers.append(NumericConvLayer(l.shape, Kbar, cbbar, l.activation))
            num = np.sqrt(np.sum((np.asarray(l.kernel) - Kbar) ** 2) + np.sum((l.channel_bias - cbbar) ** 2))
            den = np.sqrt(np.sum(np.asarray(l.kernel) ** 2) + np.sum(l.channel_bias ** 2))
        else:
            one = NumericModel(l.in_dim, [NumericDenseLayer(l.weight, l.bias, None)])
            chain1 = [[c[li], c[li + 1]] for c in chains]
            from .numeric.project import reynolds_float

            (W, b), = reynolds_float(one, chain1)
            dev = max(float(np.max(np.abs(l.weight - W))), float(np.max(np.abs(l.bias - b), initial=0.0)))
            scale = max(float(np.max(np.abs(l.weight))), 1e-300)
            D = digits if digits is not None else _digits_for(dev, dev / scale, scale)
            (Wq, bq, Wf, bf, _), = reynolds_exact(one, chain1, D)
            layers.append(DenseLayer(Wq, bq, act))
            flayers.append(NumericDenseLayer(Wf, bf, l.activation))
            num = np.sqrt(np.sum((l.weight - Wf) ** 2) + np.sum((l.bias - bf) ** 2))
            den = np.sqrt(np.sum(l.weight ** 2) + np.sum(l.bias ** 2))
        dists.append(float(num / den) if den > 0 else float(num))
        tot_num, tot_den = tot_num + float(num) ** 2, tot_den + float(den) ** 2
        grids.append(int(D))
    bar_name = f"{model.name} (nearest layerwise equivariant)"
    exact_model = Model(model.input_dim, layers, egroup, bar_name)
    bar = NumericModel(model.input_dim, flayers, ngroup, bar_name)
    method = f"the float twin's actions (max residual {der.max_residual:.3g}), convolutions averaged on their kernels"
    notes.append(("pooling layers kept as they are (no parameters; their actions are those their inputs' actions "
                  "induce), the layers around them" if any_supports(model.layers, "parameter-free") else
                  "convolutions too large for their dense matrix:") + " averaged on their kernels, with the float "
                 "twin's actions only (no matching search): best found, not proven nearest")
    whole = float(np.sqrt(tot_num / tot_den)) if tot_den > 0 else float(np.sqrt(tot_num))
    cert = Certification("undetermined", dists, {}, None, grids, method, False,
                         [{"method": method, "also_found_by": [], "distance": whole, "parameters_per_layer": dists,
                           "parameters_max": max(dists), "parameters": whole, "data_weighted": None}], None,
                         exact_model, bar, max_distance, notes, metric="parameters", distance=whole,
                         actions=_actions_json(ngroup, acts))
    return _finish(cert, model, bar, egroup, data, noise_points, seed, timeout, deadline, t0)


def certify_mirror_run(model, data, task: str, timeout: float = 600.0, finetune: bool = True) -> dict:
    """The certified nearest layerwise-equivariant network to a network of the mirror experiment
    (:mod:`symeq.numeric.experiment`) under its horizontal mirror: distances, task loss, status; with
    ``finetune`` (default) also the certified network fine-tuned inside the layerwise-equivariant
    subspace of the same search's actions (``"finetuned"``: its held-out task loss beside theta's and theta-bar's).

    The certifications themselves are under the keys ``"_certification"`` (not JSON).
    """
    from .errors import SymeqError
    from .numeric.experiment import mirror_group

    group = mirror_group(data.shape, task, model.output_dim)
    pair = (data.x, data.y if task == "classifier" else None)
    try:
        c = certify(model, group, data=pair, timeout=timeout, task=task)
    except SymeqError as e:
        return {"status": "not certified", "reason": str(e)}
    out = {"status": c.status, "parameter_distance_per_layer": c.layer_distances,
           "parameter_distance_max": c.max_distance, "distance": c.distance, "metric": c.metric,
           "function_distance": c.function_distance, "task_loss": c.task_loss, "method": c.method,
           "proven_nearest": c.proven_nearest, "search": c.search, "digits": c.digits,
           "verdict": None if c.verification is None else c.verification.verdict, "notes": c.notes,
           "seconds": round(c.seconds, 3), "_certification": c}
    if finetune:
        try:
            f = certify(model, group, data=pair, timeout=timeout, task=task, finetune={"progress": False})
        except SymeqError as e:
            out["finetuned"] = {"status": "not certified", "reason": str(e)}
        else:
            out["finetuned"] = {"status": f.status, "verdict": None if f.verification is None else f.verification.verdict,
                                "task_loss": f.task_loss, "finetune": f.finetune, "seconds": round(f.seconds, 3),
                                "_certification": f}
    return out
