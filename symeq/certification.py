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

The result reports the distances first: per layer ||theta_i - theta-bar_i|| / ||theta_i||, the
function distance |f_theta(x) - f_theta-bar(x)| / |f_theta(x)| (median and max) on Gaussian noise
inputs and on data, and the task loss of both with labels (cross-entropy, accuracy) or, for an
autoencoder (output = input dimension, no labels), the reconstruction error.

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

__all__ = ["Certification", "certify", "certify_mirror_run", "read_data", "exact_group_from_numeric", "DEFAULT_NOISE_POINTS"]

DEFAULT_NOISE_POINTS = 2000


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

    @property
    def max_distance(self) -> float:
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
            "distances": {"parameters_per_layer": self.layer_distances, "parameters_max": self.max_distance,
                          "function": self.function_distance, "task_loss": self.task_loss,
                          "max_allowed": self.max_allowed},
            "actions": {"method": self.method, "proven_nearest": self.proven_nearest, "candidates": self.candidates},
            "digits": self.digits,
            "verdict": None if self.verification is None else self.verification.verdict,
            "widths": None if self.float_model is None else self.float_model.widths,
            "reason": self.reason,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }

    def report(self) -> str:
        lines = ["distance to the nearest layerwise-equivariant network found (theta-bar):"]
        for i, d in enumerate(self.layer_distances, 1):
            lines.append(f"  layer {i}: relative parameter distance {d:.3g}")
        for kind, fd in self.function_distance.items():
            lines.append(f"  function distance on {kind} ({fd['points']} inputs): median {fd['median']:.3g}, "
                         f"max {fd['max']:.3g} (relative)")
        if self.task_loss:
            tl = self.task_loss
            extra = "" if "accuracy_theta" not in tl else \
                f"; accuracy {tl['accuracy_theta']:.4f} -> {tl['accuracy_theta_bar']:.4f}"
            lines.append(f"  task loss ({tl['kind']}): theta {tl['theta']:.6g}, theta-bar {tl['theta_bar']:.6g}{extra}")
        label = "" if "nearest" in self.method else \
            f" ({'proven nearest' if self.proven_nearest else 'best found, not proven nearest'})"
        lines.append(f"actions: {self.method}{label}")
        for c in self.candidates:
            lines.append(f"  candidate {c['method']}: max layer distance {c['max_distance']:.3g}")
        grids = ", ".join(f"10^-{d}" for d in self.digits)
        lines.append(f"theta rounded to the grid(s) {grids} (per layer), then averaged over the group exactly (rationals)")
        lines += [f"note: {n}" for n in self.notes]
        v = self.verification
        if v is not None:
            lines.append(f"exact verification of theta-bar: {v.verdict} ({v.end_to_end_method})")
            lines += _action_lines(v)
        if self.status == "certified":
            lines.append(f"certified: theta-bar is layerwise equivariant (exact proof); {self.seconds:.2f} s")
        elif self.status == "too far":
            lines.append(f"certified theta-bar, but its distance {self.max_distance:.3g} is above --max-distance "
                         f"{self.max_allowed:g}; {self.seconds:.2f} s")
        else:
            lines.append(f"undetermined: {self.reason}; {self.seconds:.2f} s")
        return "\n".join(lines)


def _action_lines(v) -> list:
    """theta-bar's proven actions rho_i(g) as cycles (neurons from 1), as `symeq verify` shows them."""
    from .theorem import _describe_action

    d = getattr(v, "derivation", None)
    if d is None or not d.found or not d.actions:
        return []
    lines = ["theta-bar's actions (cycles of neurons, numbered from 1; -j: the value arriving at j changes sign):"]
    layers = v.model.chain().layers
    for i, per_g in enumerate(d.actions):
        for gname, M in zip(v.group.names, per_g):
            lines += _describe_action(layers[i], M, f"rho_{i + 1}({gname})")
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

    if isinstance(network, NumericModel):
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
    num = np.linalg.norm(F - Fb, axis=1)
    den = np.maximum(np.linalg.norm(F, axis=1), 1e-300)
    r = num / den
    return {"median": float(np.median(r)), "max": float(np.max(r)), "points": int(F.shape[0])}


def _task_loss(model, bar, x, y) -> dict | None:
    """Task loss of theta and theta-bar: cross-entropy and accuracy with labels (one logit per class, or
    one output read as the logit of class 1 for labels 0/1), else the reconstruction error of an
    autoencoder (output = input dimension); None otherwise.  The labels fit (:func:`_checked_data`)."""
    F, Fb = model(x), bar(x)
    if y is not None and model.output_dim == 1:  # binary: the output is the logit of class 1
        def bce(Z):
            z = Z[:, 0]
            return float(np.mean(np.logaddexp(0.0, z) - y * z))

        return {"kind": "binary cross-entropy on the data's labels (the output as the logit of class 1)",
                "theta": bce(F), "theta_bar": bce(Fb),
                "accuracy_theta": float(np.mean((F[:, 0] > 0) == (y == 1))),
                "accuracy_theta_bar": float(np.mean((Fb[:, 0] > 0) == (y == 1)))}
    if y is not None:
        def ce(Z):
            Z = Z - Z.max(axis=1, keepdims=True)
            return float(np.mean(np.log(np.exp(Z).sum(axis=1)) - Z[np.arange(len(y)), y]))

        return {"kind": "cross-entropy on the data's labels", "theta": ce(F), "theta_bar": ce(Fb),
                "accuracy_theta": float(np.mean(F.argmax(axis=1) == y)),
                "accuracy_theta_bar": float(np.mean(Fb.argmax(axis=1) == y))}
    if model.output_dim == model.input_dim:
        return {"kind": "reconstruction mean squared error (autoencoder)", "theta": float(np.mean((F - x) ** 2)),
                "theta_bar": float(np.mean((Fb - x) ** 2))}
    return None


def _checked_data(model, data):
    """The data as (x, y or None), checked against the network before any work: x has the network's
    input size, and labels are classes 0 .. outputs-1 (0/1 for a single output)."""
    x, y = read_data(data)
    if x is None:
        return None
    x = x.reshape(x.shape[0], -1)
    if x.shape[1] != model.input_dim:
        raise InputError(f"the data has {x.shape[1]} features, the network takes {model.input_dim}")
    if y is not None:
        y = np.asarray(y).astype(np.int64).reshape(-1)
        if y.shape[0] != x.shape[0]:
            raise InputError(f"the data has {x.shape[0]} inputs but {y.shape[0]} labels")
        classes = max(2, model.output_dim)
        if y.size and (y.min() < 0 or y.max() >= classes):
            what = ("one output, read as the logit of class 1 (labels 0 and 1)" if model.output_dim == 1
                    else f"{model.output_dim} outputs, one logit per class (labels 0 .. {model.output_dim - 1})")
            raise InputError(f"the data's labels run from {y.min()} to {y.max()}, but the network has {what}; "
                             "leave y out for the function distance alone")
    return x, y


def read_data(data):
    """(x, y or None) from a path to an .npz (arrays x, optional y) or a (x, y) pair / Dataset."""
    if data is None:
        return None, None
    if hasattr(data, "x"):
        return np.asarray(data.x, dtype=np.float64), getattr(data, "y", None)
    if isinstance(data, tuple):
        x, y = data
        return np.asarray(x, dtype=np.float64), None if y is None else np.asarray(y)
    from pathlib import Path

    from .check import close_names
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
        x = np.asarray(z["x"], dtype=np.float64)
        y = np.asarray(z["y"]).astype(np.int64).reshape(-1) if "y" in z.files else None
    x = x.reshape(x.shape[0], -1)
    if y is not None and y.shape[0] != x.shape[0]:
        raise InputError(f"{p}: x has {x.shape[0]} rows but y has {y.shape[0]} labels")
    return x, y


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


def certify(network, group=None, *, input_shape=None, digits: int | None = None, data=None,
            max_distance: float | None = None, tol: float = 1e-6, timeout: float | None = 600.0,
            noise_points: int = DEFAULT_NOISE_POINTS, seed: int = 0, name: str | None = None,
            conv: str = "auto") -> Certification:
    """Find the nearest layerwise-equivariant network to a float one and prove it exactly.

    Parameters
    ----------
    network : a NumericModel, a path (.onnx, .npz, .json with floats), an exact Model, or a torch
        ``nn.Sequential`` (read by :func:`symeq.numeric.models.from_torch`, with ``input_shape``
        for convolutions)
    group : a FiniteGroup, a NumericGroup or a built-in group name; default the network's
    digits : the rounding grid 10^-digits of every layer (default, per layer: three digits below the
        layer's largest deviation from its projection; 12 for a layer the projection does not move)
    data : an .npz path (x, optional y) or (x, y): function distance and task loss on data
    max_distance : a largest relative layer distance above which the status is "too far" (exit 1)
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
    from .activations import activation_from_spec
    from .budget import Deadline
    from .models import DenseLayer, Model
    from .numeric.layerwise import derive_latent_actions_numeric
    from .numeric.models import NumericDenseLayer, NumericModel
    from .numeric.monomial import MonomialAction
    from .numeric.project import (check_projectable, group_elements, is_homomorphism, layer_distances,
                                  nearest_involution_actions, repair_cyclic, restrict_to_projectable, reynolds_exact,
                                  reynolds_float, signs_allowed, trivial_actions)
    from .sizes import check_memory, check_width
    from .theorem import verify

    t0 = time.perf_counter()
    deadline = Deadline(timeout)
    from .layers.conv import DENSE_EXPANSION_LIMIT

    model = _as_numeric(network, input_shape, name)
    original = model  # with its conv2d layers, when it has some
    if conv not in ("auto", "dense", "kernels"):
        raise InputError(f"conv must be \"auto\", \"dense\" or \"kernels\", got {conv!r}")
    has_conv = any(l.kind == "conv2d" for l in model.layers)
    kernels = has_conv and (conv == "kernels" or (conv == "auto" and any(
        l.kind == "conv2d" and l.in_dim * l.out_dim > DENSE_EXPANSION_LIMIT for l in model.layers)))
    conv_shapes = [l.shape if l.kind == "conv2d" else None for l in model.layers]
    if has_conv and not kernels:  # convolutions: their dense expansion (shared weights)
        model = NumericModel(model.input_dim, [NumericDenseLayer(np.array(l.weight, dtype=np.float64),
                                                                 np.array(l.bias, dtype=np.float64), l.activation)
                                               if l.kind == "conv2d" else l for l in model.layers],
                             model.group, model.name)
        notes_conv = ["convolutions are projected through their dense expansion; a layer whose average is again a "
                      "convolution (the actions respect the image grid) is written back as a conv2d layer"]
    else:
        notes_conv = []
    ngroup, egroup = _groups(model, group)
    model = model.with_group(ngroup)
    for i, w in enumerate(model.widths):  # size guards before any work
        check_width(w, f"certify: width of layer {i}")
    if not (isinstance(noise_points, int) and noise_points >= 1):
        raise InputError(f"noise_points must be a positive integer, got {noise_points!r}")
    if digits is not None and not (isinstance(digits, int) and 1 <= digits <= 30):
        raise InputError(f"--digits must be an integer from 1 to 30, got {digits!r}")
    if not kernels:
        check_projectable(model)
    elif model.has_attention:
        raise InputError("certify projects dense and convolutional networks only")
    # theta-bar as exact rationals (python-flint objects and their integers, about 200 bytes an entry,
    # twice: the matrices and the model's copy) next to the float work
    check_memory(400 * model.n_params, f"certify: theta-bar in exact rationals ({model.n_params} parameters)")
    for i, l in enumerate(model.layers[:-1], 1):  # the exact twin of every activation, before the work
        try:
            activation_from_spec(l.activation.spec, f"hidden layer {i}")
        except InputError as e:
            raise InputError(f"hidden layer {i}: no exact activation for {l.activation.spec}: {e}") from None
    data = _checked_data(model, data)  # read once and checked before the work
    words, _, _, _ = group_elements(ngroup)
    notes = list(notes_conv)
    sub = [i for i, l in enumerate(model.layers[:-1], 1)
           if l.activation.scalings.alphas != "one" and not signs_allowed(l.activation)]
    if sub:
        notes.append(f"hidden layer(s) {sub}: K_i has scalings the projection does not use (ReLU's positive factors, "
                     "sigmoid's affine flip, shifted or monomial activations); the actions searched are permutations, "
                     "a subgroup of K_i, so a nearer layerwise-equivariant network through all of K_i may exist")
    if kernels:
        return _certify_conv_kernels(model, ngroup, egroup, digits=digits, data=data, max_distance=max_distance,
                                     tol=tol, timeout=timeout, noise_points=noise_points, seed=seed,
                                     deadline=deadline, t0=t0, notes=notes)
    candidates = []  # (max distance, total squared distance, method, proven, gen actions)

    def consider(gen_actions, method, proven):
        chains = _chains_for(model, ngroup, gen_actions)
        proj = reynolds_float(model, chains)
        d = layer_distances(model, proj)
        total = sum((np.sum((l.weight - W) ** 2) + np.sum((l.bias - b) ** 2)) for l, (W, b) in zip(model.layers, proj))
        candidates.append((max(d), float(total), method, proven, gen_actions, chains, proj))

    twin = None
    try:
        der = derive_latent_actions_numeric(model, tol=tol, max_tie_variants=720)
        acts = der.actions
        ok_kind = all(isinstance(a, MonomialAction) for per in acts for a in per)
        if ok_kind:
            acts, changed = restrict_to_projectable(model, acts)
            if changed:
                notes.append("the float twin's actions have scale factors or offsets the projection does not use "
                             "(ReLU, sigmoid, shifted or monomial activations): their permutations (with signs where "
                             "the activation is odd) are used, a subgroup of K_i")
            hom, why = is_homomorphism(ngroup, acts)
            if hom:
                twin = acts
                consider(acts, f"the float twin's actions (max residual {der.max_residual:.3g})", False)
            else:
                notes.append(f"the float twin's actions are not a homomorphism: {why}")
                if len(ngroup.generators) == 1 and len(words) > 2:  # cyclic: repair the cycles that break g^m = e
                    fixed_acts, nfix = repair_cyclic(acts, len(words))
                    consider(fixed_acts, f"the float twin's actions with {nfix} neuron(s) whose cycles break "
                                         f"g^{len(words)} = e fixed", False)
        else:
            notes.append("the float twin's actions are not monomial (attention value spaces)")
    except InputError as e:
        notes.append(f"the float twin found no actions ({e})")
    if len(words) == 2 and len(ngroup.generators) == 1:
        starts = [(None, "identity")] + ([(None, "forward"), (None, "backward")] if model.depth > 2 else [])
        starts += [] if twin is None else [(twin, "identity")]
        for start, init in starts:
            try:
                a = nearest_involution_actions(model, ngroup, start=start, init=init, deadline=deadline)
            except Undetermined as e:
                if candidates:  # a candidate is already there: the search stops, the rest goes on
                    notes.append(f"the matching search stopped at its time budget ({e})")
                    break
                raise
            consider(a.actions, a.method, a.proven_nearest)
            notes += [n for n in a.notes if n not in notes]
    else:
        consider(trivial_actions(model, ngroup), "the trivial action (always a homomorphism)", False)
        per = _per_generator_matching(model, ngroup, deadline)
        if per is not None:
            hom, why = is_homomorphism(ngroup, per)
            if hom:
                consider(per, "the nearest involution of each generator by matching (together a homomorphism)", False)
            else:
                notes.append(f"the per-generator matchings are not a homomorphism: {why}")
        notes.append(f"group of order {len(words)}: candidates are the float twin's actions (repaired for a cyclic "
                     "group), the per-generator matchings (generators of order 2) and the trivial action; best found, "
                     "not proven nearest")
    least = min(c[1] for c in candidates)
    ties = [c for c in candidates if c[1] <= least * (1 + 1e-9) + 1e-300]
    best = next((c for c in ties if c[3]), ties[0])  # a proven nearest candidate wins a tie
    _, _, method, proven, gen_actions, chains, proj = best
    # the grid, per layer: three digits below the layer's largest entrywise deviation from its projection
    # (12 for a layer the projection leaves as it is), and at least three below its largest weight
    if digits is None:
        digits = []
        for l, (W, b) in zip(model.layers, proj):
            dev = max(float(np.max(np.abs(l.weight - W), initial=0.0)), float(np.max(np.abs(l.bias - b), initial=0.0)))
            rel = dev / max(float(np.max(np.abs(l.weight), initial=0.0)), float(np.max(np.abs(l.bias), initial=0.0)),
                            1e-300)
            D = 12 if rel <= 1e-13 else int(min(15, max(3, math.ceil(-math.log10(dev)) + 3)))
            scale = max(float(np.max(np.abs(l.weight), initial=0.0)), 1e-300)
            digits.append(int(max(D, min(15, math.ceil(-math.log10(scale)) + 3))))
    else:
        digits = [digits] * model.depth
    exact = reynolds_exact(model, chains, digits, conv_shapes)
    if any(sh is not None and e[4] is None for sh, e in zip(conv_shapes, exact)):
        # all or nothing: a conv2d layer after a dense one would meet actions that are no channel action
        # times a pixel permutation in the exact walk, so one layer that does not fold makes every layer dense
        if any(e[4] is not None for e in exact):
            notes.append("some projected convolutions are no convolutions any more: every layer is written dense")
        exact = [e[:4] + (None,) for e in exact]
        conv_shapes = [None] * len(conv_shapes)
        notes.append("the projected convolutions share no kernels (the actions do not respect the image grid): "
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
    bar_name = f"{model.name} (nearest layerwise equivariant)"
    exact_model = Model(model.input_dim, layers, egroup, bar_name)
    bar = NumericModel(model.input_dim, flayers, ngroup, bar_name)
    dists = layer_distances(model, [(l.weight, l.bias) for l in bar.layers])
    for li, e in enumerate(exact):  # a convolution kept as one: its distance on its own parameters
        if e[4] is not None:
            K0, b0 = np.asarray(original.layers[li].kernel), np.asarray(original.layers[li].channel_bias)
            K1 = np.array([int(x.p) / int(x.q) for x in np.asarray(e[4][0], dtype=object).ravel()]).reshape(K0.shape)
            b1 = np.array([int(x.p) / int(x.q) for x in e[4][1]])
            num = np.sqrt(np.sum((K0 - K1) ** 2) + np.sum((b0 - b1) ** 2))
            den = np.sqrt(np.sum(K0 ** 2) + np.sum(b0 ** 2))
            dists[li] = float(num / den) if den > 0 else float(num)
    cand_json = [{"method": c[2], "max_distance": c[0], "squared_distance": c[1]} for c in candidates]
    cert = Certification("undetermined", dists, {}, None, digits, method, proven, cand_json, None, exact_model, bar,
                         max_distance, notes)
    return _finish(cert, model, bar, egroup, data, noise_points, seed, timeout, deadline, t0)


def _finish(cert, model, bar, egroup, data, noise_points, seed, timeout, deadline, t0):
    """Function distances and task loss of theta-bar, then its exact verification: the status."""
    from .theorem import verify

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((noise_points, model.input_dim))
    cert.function_distance = {"noise": _relative(model(X), bar(X))}
    x, y = read_data(data)
    if x is not None:
        cert.function_distance["data"] = _relative(model(x), bar(x))
        cert.task_loss = _task_loss(model, bar, x, y)
    try:
        left = None if timeout is None else max(0.0, timeout - deadline.elapsed())
        v = verify(cert.model, egroup, timeout=left, seed=seed)
    except Undetermined as e:
        cert.reason = f"the exact verification of theta-bar stopped: {e}"
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
    elif v.reparametrized:  # the actions hold at theta' (same function), which is not the theta-bar written
        cert.reason = ("the exact pipeline found no action at theta-bar itself, only at a re-parametrized theta' "
                       "with the same function: theta-bar's layerwise equivariance is not proven")
    elif cert.max_allowed is not None and cert.max_distance > cert.max_allowed:
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
    from .numeric.conv import NumericConvLayer
    from .numeric.layerwise import derive_latent_actions_numeric
    from .numeric.models import NumericDenseLayer, NumericModel
    from .numeric.monomial import MonomialAction
    from .numeric.project import (conv_tap_maps, element_actions, is_homomorphism, restrict_to_projectable,
                                  reynolds_conv_exact, reynolds_exact)

    der = derive_latent_actions_numeric(model, tol=tol, max_tie_variants=720)
    if not all(isinstance(a, MonomialAction) for per in der.actions for a in per):
        raise Undetermined("the float twin's actions are not monomial; the convolutions are too large for the "
                           "dense matching search")
    acts, changed = restrict_to_projectable(model, der.actions)
    if changed:
        notes.append("the float twin's actions have scale factors or offsets the projection does not use: their "
                     "permutations (with signs where the activation is odd) are used, a subgroup of K_i")
    hom, why = is_homomorphism(ngroup, acts)
    if not hom:
        raise Undetermined(f"the float twin's actions are not a homomorphism ({why}), and the convolutions are too "
                           "large for the dense matching search")
    chains = element_actions(ngroup, acts)
    layers, flayers, dists, grids = [], [], [], []
    for li, l in enumerate(model.layers):
        deadline.check(f"averaging layer {li + 1} over the group")
        act = None if l.activation is None else activation_from_spec(l.activation.spec)
        if l.kind == "conv2d":
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
        grids.append(int(D))
    bar_name = f"{model.name} (nearest layerwise equivariant)"
    exact_model = Model(model.input_dim, layers, egroup, bar_name)
    bar = NumericModel(model.input_dim, flayers, ngroup, bar_name)
    method = f"the float twin's actions (max residual {der.max_residual:.3g}), convolutions averaged on their kernels"
    notes.append("convolutions too large for their dense matrix: averaged on their kernels, with the float twin's "
                 "actions only (no matching search): best found, not proven nearest")
    cert = Certification("undetermined", dists, {}, None, grids, method, False,
                         [{"method": method, "max_distance": max(dists), "squared_distance": None}], None,
                         exact_model, bar, max_distance, notes)
    return _finish(cert, model, bar, egroup, data, noise_points, seed, timeout, deadline, t0)


def certify_mirror_run(model, data, task: str, timeout: float = 600.0) -> dict:
    """The certified nearest layerwise-equivariant network to a network of the mirror experiment
    (:mod:`symeq.numeric.experiment`) under its horizontal mirror: distances, task loss, status.

    The certification itself is under the key ``"_certification"`` (not JSON).
    """
    from .errors import SymeqError
    from .numeric.experiment import mirror_group

    group = mirror_group(data.shape, task, model.output_dim)
    try:
        c = certify(model, group, data=(data.x, data.y if task == "classifier" else None), timeout=timeout)
    except SymeqError as e:
        return {"status": "not certified", "reason": str(e)}
    return {"status": c.status, "parameter_distance_per_layer": c.layer_distances,
            "parameter_distance_max": c.max_distance, "function_distance": c.function_distance,
            "task_loss": c.task_loss, "method": c.method, "proven_nearest": c.proven_nearest, "digits": c.digits,
            "verdict": None if c.verification is None else c.verification.verdict, "notes": c.notes,
            "seconds": round(c.seconds, 3), "_certification": c}
