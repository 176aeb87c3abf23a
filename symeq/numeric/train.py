"""Training MLPs with a soft mirror-equivariance loss (torch extra), on digits or a user .npz.

The paper's recipe (Shahverdi, Marchetti, Bokman, Kohn 2026, Section 5): an MLP of depth 4 whose
first layer has a tanh or GELU activation (GELU after), trained as an autoencoder or a classifier,
with a soft equivariance loss added in the second half of training:

* autoencoder: |f(g x) - g f(x)|^2 (the output is an image, mirrored with the input);
* classifier:  |f(g x) - f(x)|^2 (the logits are invariant).

Data: scikit-learn's 8x8 digits (``sklearn.datasets.load_digits`` reads a file shipped inside the
scikit-learn wheel: nothing is fetched from the network) or any ``.npz`` with an array ``x``
(N x h*w*c, or N x h x w [x c]) and optionally ``y`` (integer labels) and ``shape`` (h, w, c).
Images are scaled by one global mean and standard deviation, never per pixel, so that the mirror
still commutes with the normalisation.  Progress goes to stderr.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import EngineMissing, InputError

__all__ = ["Dataset", "load_digits_dataset", "load_npz_dataset", "image_permutation", "build_mlp", "train_mlp",
           "ProgressBar", "finetune_equivariant", "task_loss_torch"]

ACTIVATIONS = ("tanh", "gelu", "relu", "poly")


def _torch():
    try:
        import torch
    except ImportError:
        raise EngineMissing("training needs torch: pip install 'symeq[numeric]' (or pip install torch)") from None
    return torch


@dataclass
class Dataset:
    """Images as rows (N x h*w*c, channel-major then row-major, as :func:`symeq.groups.mirror`)."""

    x: np.ndarray
    y: np.ndarray | None
    shape: tuple  # (h, w, c)
    name: str
    scale: dict = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return int(self.y.max()) + 1 if self.y is not None else 0


def _normalise(x: np.ndarray) -> tuple[np.ndarray, dict]:
    mu, sd = float(x.mean()), float(x.std()) or 1.0
    return (x - mu) / sd, {"mean": mu, "std": sd}


def load_digits_dataset() -> Dataset:
    """scikit-learn's 1797 8x8 digits (bundled in the wheel, no download)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise EngineMissing("the digits data set needs scikit-learn: pip install 'symeq[numeric]'") from None
    d = load_digits()
    x, scale = _normalise(d.data.astype(np.float64))
    return Dataset(x, d.target.astype(np.int64), (8, 8, 1), "scikit-learn digits 8x8 (1797 images)", scale)


def load_npz_dataset(path) -> Dataset:
    """A user data set: ``x`` (N x D or N x h x w [x c]), optional ``y`` and ``shape``."""
    from .models import open_npz

    p = Path(path)
    z = open_npz(p, "a data set .npz with an array \"x\"")
    if "x" not in z.files:
        raise InputError(f"{p}: a data set .npz needs an array \"x\" (and optionally \"y\", \"shape\")")
    from ..schema import close_names

    for name in sorted(set(z.files) - {"x", "y", "shape"}):  # a misspelt "Y" must not drop the labels
        close = close_names(name, ["x", "y", "shape"], 1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        raise InputError(f'{p}: unknown array "{name}"{hint}; a data set .npz holds "x", "y" and "shape"')
    with z:
        x = np.asarray(z["x"], dtype=np.float64)
        y = np.asarray(z["y"]).astype(np.int64) if "y" in z.files else None
        shape = tuple(int(v) for v in z["shape"]) if "shape" in z.files else None
    if x.ndim == 3:
        shape = shape or (x.shape[1], x.shape[2], 1)
    elif x.ndim == 4:  # N x h x w x c -> channel-major
        shape = shape or (x.shape[1], x.shape[2], x.shape[3])
        x = x.transpose(0, 3, 1, 2)
    x = x.reshape(x.shape[0], -1)
    if shape is None:
        side = int(round(np.sqrt(x.shape[1])))
        if side * side != x.shape[1]:
            raise InputError(f"{p}: cannot infer the image shape of rows of size {x.shape[1]}; add \"shape\" = (h, w, c)")
        shape = (side, side, 1)
    if len(shape) == 2:
        shape = (shape[0], shape[1], 1)
    if int(np.prod(shape)) != x.shape[1]:
        raise InputError(f"{p}: shape {shape} does not match rows of size {x.shape[1]}")
    if not np.all(np.isfinite(x)):
        raise InputError(f"{p}: x has NaN or infinite entries")
    if y is not None and (y.shape[0] != x.shape[0] or y.min() < 0):
        raise InputError(f"{p}: y must hold {x.shape[0]} non-negative integer labels")
    x, scale = _normalise(x)
    return Dataset(x, y, shape, f"{p.name} ({x.shape[0]} images {shape[0]}x{shape[1]}x{shape[2]})", scale)


def image_permutation(shape, kind: str = "horizontal") -> np.ndarray:
    """Index array idx with (g x)[k] = x[idx[k]] for the horizontal or vertical mirror."""
    h, w, c = shape
    idx = np.arange(c * h * w).reshape(c, h, w)
    idx = idx[:, :, ::-1] if kind == "horizontal" else idx[:, ::-1, :]
    return idx.reshape(-1).copy()


def build_mlp(input_dim: int, output_dim: int, first_activation: str, widths=(64, 64, 64), later: str = "gelu"):
    """An nn.Sequential: Linear, first activation, then Linear + ``later`` activation, final Linear."""
    torch = _torch()

    def act(name):
        if name in ("tanh", "gelu", "relu"):  # the activation unit's torch module
            from ..activations.registry import torch_module

            return torch_module(name)
        if name == "poly":
            from .torch_backend import Polynomial

            return Polynomial([0.0, 1.0, 0.5, 0.0])  # t + t^2/2: generic quadratic, K = permutations
        raise InputError(f"unknown activation {name!r}; use one of {', '.join(ACTIVATIONS)}")

    mods, n = [], input_dim
    for i, w in enumerate(widths):
        mods += [torch.nn.Linear(n, w), act(first_activation if i == 0 else later)]
        n = w
    mods.append(torch.nn.Linear(n, output_dim))
    return torch.nn.Sequential(*mods)


class ProgressBar:
    """A one-line progress bar on stderr (no dependency); silent when ``enabled`` is False."""

    def __init__(self, total: int, label: str, enabled: bool = True, stream=None):
        self.total, self.label, self.enabled = total, label, enabled
        self.stream = stream or sys.stderr
        self.t0 = time.perf_counter()

    def update(self, k: int, extra: str = "") -> None:
        if not self.enabled:
            return
        frac = k / max(self.total, 1)
        bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
        self.stream.write(f"\r{self.label} [{bar}] {k}/{self.total} {time.perf_counter() - self.t0:.0f}s {extra}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def train_mlp(net, data: Dataset, task: str = "autoencoder", *, epochs: int = 300, lr: float = 1e-3,
              batch_size: int = 128, equivariance_weight: float = 10.0, equivariance_start: float = 0.5,
              noise_in_equivariance: bool = True, noise_scale: float = 1.0, weight_decay: float = 0.0,
              optimizer: str = "adam", equivariance_ramp: float = 0.0,
              seed: int = 0, progress: bool = True, device: str | None = None) -> dict:
    """Train in place; the soft horizontal-mirror loss is on from ``equivariance_start`` of training.

    ``noise_scale``: std of the Gaussian noise inputs added to each batch of the equivariance loss
    (``noise_in_equivariance``); ``equivariance_ramp``: fraction of training over which the loss
    weight rises linearly once it is on (0: switched on at once); ``optimizer``: "adam" (AdamW when
    ``weight_decay`` > 0) or "sgd" (momentum 0.9); ``device``: None or "cpu" (default), "cuda", or
    "auto" (CUDA when present).  Random numbers (batch order, noise) are drawn on the CPU, so a
    seed gives the same batches on every device.

    Returns a dict of final losses (task loss, equivariance loss, accuracy for classifiers).
    """
    torch = _torch()
    if task not in ("autoencoder", "classifier"):
        raise InputError(f"unknown task {task!r}; use autoencoder or classifier")
    if task == "classifier" and data.y is None:
        raise InputError(f"the data set {data.name} has no labels \"y\": use --task autoencoder")
    if epochs < 1:
        raise InputError("--epochs must be at least 1")
    if device in (None, "auto"):
        device = "cuda" if device == "auto" and torch.cuda.is_available() else "cpu"
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise EngineMissing(f"device {device!r} requested, but torch sees no CUDA device")
    torch.manual_seed(seed)
    net.to(device)
    X = torch.from_numpy(data.x).float().to(device)
    Y = torch.from_numpy(data.y).to(device) if data.y is not None else None
    perm = torch.from_numpy(image_permutation(data.shape, "horizontal")).to(device)
    if optimizer == "adam":
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay) if weight_decay else \
            torch.optim.Adam(net.parameters(), lr=lr)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    else:
        raise InputError(f"unknown optimizer {optimizer!r}; use adam or sgd")
    gen = torch.Generator().manual_seed(seed)
    bar = ProgressBar(epochs, f"training {task}", progress)
    start = int(equivariance_start * epochs)
    stats = {}
    for ep in range(epochs):
        order = torch.randperm(X.shape[0], generator=gen).to(device)
        tot, teq, n = 0.0, 0.0, 0
        for s in range(0, X.shape[0], batch_size):
            xb = X[order[s:s + batch_size]]
            out = net(xb)
            if task == "autoencoder":
                loss = torch.mean((out - xb) ** 2)
            else:
                loss = torch.nn.functional.cross_entropy(out, Y[order[s:s + batch_size]])
            eq = torch.zeros((), device=device)
            if ep >= start:
                # the data batch plus as many Gaussian noise inputs: pixels that are constant in
                # the data (digits' borders) otherwise keep weights the task never touches, and
                # the paper's metric is measured on noise inputs
                xe = torch.cat([xb, noise_scale * torch.randn(xb.shape, generator=gen).to(device)]) \
                    if noise_in_equivariance else xb
                oe = net(xe)
                outg = net(xe[:, perm])
                target = oe[:, perm] if task == "autoencoder" else oe
                eq = torch.mean((outg - target) ** 2)
            w = equivariance_weight
            if ep >= start and equivariance_ramp > 0:
                w *= min(1.0, (ep - start + 1) / max(1.0, equivariance_ramp * epochs))
            opt.zero_grad()
            (loss + w * eq).backward()
            opt.step()
            tot += float(loss.detach()) * xb.shape[0]
            teq += float(eq.detach()) * xb.shape[0]
            n += xb.shape[0]
        stats = {"task_loss": tot / n, "equivariance_loss": teq / n}
        bar.update(ep + 1, f"loss {stats['task_loss']:.4f} equiv {stats['equivariance_loss']:.4f}")
    bar.close()
    if task == "classifier":
        with torch.no_grad():
            stats["train_accuracy"] = float((net(X).argmax(1) == Y).float().mean())
    net.to("cpu")   # the analysis (numpy) reads the weights from the CPU
    stats["device"] = str(device)
    return stats


def _torch_reynolds(torch, chains, li: int):
    """The Reynolds average of layer li as a function on torch tensors (W, b) -> (W-bar, b-bar)."""
    maps = []
    for chain in chains:
        P_in, P_out = chain[li], chain[li + 1]
        inv = P_out.inverse()
        maps.append((torch.from_numpy(P_in.cols), torch.from_numpy(P_in.vals), torch.from_numpy(inv.cols),
                     torch.from_numpy(inv.vals)))

    def project(W, b):
        accW, accb = torch.zeros_like(W), torch.zeros_like(b)
        for in_cols, in_vals, out_cols, out_vals in maps:
            right = torch.empty_like(W)
            right[:, in_cols] = W * in_vals.to(W.dtype)              # W P_in
            accW += out_vals.to(W.dtype)[:, None] * right[out_cols]   # P_out^-1 W P_in
            accb += out_vals.to(b.dtype) * b[out_cols]
        return accW / len(maps), accb / len(maps)

    return project


def task_loss_torch(torch, out, x, y, task: str):
    """The task loss: reconstruction MSE (autoencoder), cross-entropy (one logit per class) or binary
    cross-entropy (one output, the logit of class 1)."""
    if task == "autoencoder":
        return torch.mean((out - x) ** 2)
    if out.shape[1] == 1:
        return torch.nn.functional.binary_cross_entropy_with_logits(out[:, 0], y.to(out.dtype))
    return torch.nn.functional.cross_entropy(out, y)


#: the part of the fine-tuning data kept aside to choose the iterate (early stopping), and how often it is read
VALIDATION, EVAL_EVERY, MIN_VALIDATION_POINTS = 0.15, 10, 20


def _validation_score(torch, net, Xv, Yv, task: str) -> tuple:
    """The key the kept iterate minimises on the validation part: (error rate, loss) for a classifier (accuracy
    first: a lower cross-entropy that misclassifies more is not kept), (loss,) for an autoencoder."""
    with torch.no_grad():
        out = net(Xv)
        loss = float(task_loss_torch(torch, out, Xv, Yv, task))
        if task == "autoencoder":
            return (loss,)
        pred = (out[:, 0] > 0).long() if out.shape[1] == 1 else out.argmax(1)
        return (float((pred != Yv).double().mean()), loss)


def _validation_split(torch, X, Y, validation: float, gen):
    """(X, Y, Xv, Yv): a seeded ``validation`` fraction of the points set aside (Xv None when that is fewer
    than :data:`MIN_VALIDATION_POINTS` points)."""
    nv = int(round(validation * X.shape[0]))
    if nv < MIN_VALIDATION_POINTS or X.shape[0] - nv < 1:
        return X, Y, None, None
    perm = torch.randperm(X.shape[0], generator=gen)
    Yv = None if Y is None else Y[perm[:nv]]
    return X[perm[nv:]], None if Y is None else Y[perm[nv:]], X[perm[:nv]], Yv


def finetune_equivariant(model, chains, x: np.ndarray, y, task: str, *, steps: int = 300, lr: float = 1e-3,
                         batch_size: int = 256, seconds: float | None = None, seed: int = 0, progress: bool = True,
                         deadline=None, validation: float = VALIDATION) -> tuple:
    """Train a layerwise-equivariant float network inside the subspace of its actions (torch extra).

    ``model``: a NumericModel already in the subspace (theta-bar in floats); ``chains``: the element
    actions (:func:`symeq.numeric.project.element_actions`).  Projected gradient steps: the gradient is
    averaged over the group (the orthogonal projection of the gradient onto the subspace), Adam steps
    with it (its per-coordinate scaling commutes with signed permutations, so the step stays in the
    subspace), and the Reynolds average is applied after every step so that rounding drift never
    accumulates: every iterate is layerwise equivariant for the same actions, up to float rounding.
    The caller rounds and averages the result exactly (:func:`symeq.numeric.project.reynolds_exact`).

    At most ``steps`` steps (minibatches of ``batch_size``, seeded) and ``seconds`` (or the
    ``deadline``'s time); progress on stderr.  **Early stopping:** a ``validation`` fraction of ``x``
    (seeded; none below :data:`MIN_VALIDATION_POINTS` points) is not trained on; every
    :data:`EVAL_EVERY` steps, and at the start (theta-bar itself, step 0), the iterate is scored on it
    (:func:`_validation_score`) and the best one is returned, so the result is never worse than
    theta-bar on the validation part.  Returns (the fine-tuned NumericModel, info dict: steps done, the
    step kept, seconds, the validation score, final training loss, why it stopped).
    """
    torch = _torch()
    from .models import NumericDenseLayer, NumericModel

    if steps < 1:
        raise InputError("--finetune-steps must be at least 1")
    torch.manual_seed(seed)
    net = model.to_torch(dtype=torch.float64)
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    projs = [_torch_reynolds(torch, chains, li) for li in range(len(linears))]
    X = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
    Y = None if y is None else torch.from_numpy(np.asarray(y, dtype=np.int64))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    X, Y, Xv, Yv = _validation_split(torch, X, Y, validation, gen)

    def snapshot():
        return [(lin.weight.detach().clone(), lin.bias.detach().clone()) for lin in linears]

    best = None if Xv is None else (_validation_score(torch, net, Xv, Yv, task), 0, snapshot())
    bar = ProgressBar(steps, "fine-tuning inside the layerwise-equivariant subspace", progress)
    t0 = time.perf_counter()
    done, why, loss_v = 0, f"{steps} steps", float("nan")
    order, pos = torch.randperm(X.shape[0], generator=gen), 0
    for k in range(steps):
        if seconds is not None and time.perf_counter() - t0 > seconds:
            why = f"its time budget of {seconds:g} s"
            break
        if deadline is not None and deadline.seconds is not None and deadline.elapsed() >= deadline.seconds:
            why = "the command's time budget"
            break
        if pos >= X.shape[0]:
            order, pos = torch.randperm(X.shape[0], generator=gen), 0
        idx = order[pos:pos + batch_size]
        pos += batch_size
        xb = X[idx]
        loss = task_loss_torch(torch, net(xb), xb, None if Y is None else Y[idx], task)
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            for lin, P in zip(linears, projs):
                lin.weight.grad, lin.bias.grad = P(lin.weight.grad, lin.bias.grad)
        opt.step()
        with torch.no_grad():
            for lin, P in zip(linears, projs):
                W, b = P(lin.weight, lin.bias)
                lin.weight.copy_(W)
                lin.bias.copy_(b)
        done, loss_v = k + 1, float(loss.detach())
        if best is not None and (done % EVAL_EVERY == 0 or done == steps):
            score = _validation_score(torch, net, Xv, Yv, task)
            if score < best[0]:
                best = (score, done, snapshot())
        if k % 10 == 0 or k + 1 == steps:
            bar.update(k + 1, f"loss {loss_v:.5g}")
    bar.close()
    if best is not None and done % EVAL_EVERY and done != steps:  # stopped by a budget between two readings
        score = _validation_score(torch, net, Xv, Yv, task)
        if score < best[0]:
            best = (score, done, snapshot())
    kept = done
    if best is not None:
        kept = best[1]
        with torch.no_grad():
            for lin, (W, b) in zip(linears, best[2]):
                lin.weight.copy_(W)
                lin.bias.copy_(b)
    layers = [NumericDenseLayer(lin.weight.detach().numpy().copy(), lin.bias.detach().numpy().copy(), l.activation)
              for lin, l in zip(linears, model.layers)]
    out = NumericModel(model.input_dim, layers, model.group, model.name)
    return out, {"steps": done, "kept_step": kept, "seconds": round(time.perf_counter() - t0, 3),
                 "train_loss_last_batch": loss_v, "stopped_by": why, "lr": lr, "batch_size": batch_size,
                 "validation_points": 0 if Xv is None else int(Xv.shape[0]),
                 "validation_loss": None if best is None else best[0][-1],
                 "validation_error": None if best is None or len(best[0]) == 1 else best[0][0]}
