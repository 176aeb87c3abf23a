"""escnn-style C4 and D4 networks in plain torch, as escnn's ``.export()`` gives them (tests/numeric/test_escnn_clients.py).

escnn itself is not a dependency. These are the modules an exported escnn tutorial network consists of:

* ``R2Conv`` on regular fields: an ``nn.Conv2d`` whose weight is fixed by the group. Here the weight is a
  random kernel **averaged over the group** (the Reynolds projection): ``W = 1/|G| sum_g T_g W0`` with
  ``(T_g W)[(c', h'), (c, h)] = L_g W0[(c', g^-1 h'), (c, g^-1 h)]`` (``L_g``: the rotation/flip of the
  k x k filter array, the regular representation on each field's channels; a lifting convolution has
  one trivial input channel). The random entries are multiples of 1/8, so the average is exact in
  float64 and float32 (the weight sharing holds bit for bit, as the exact path reads it);
* ``InnerBatchNorm``: ``nn.BatchNorm2d`` whose running statistics and affine parameters are equal on
  the channels of each field;
* ``ReLU``, ``PointwiseAvgPool`` (``nn.AvgPool2d``), escnn's ``GroupPooling`` exported as
  ``MaxPoolChannels`` (a view to ``(b, F, |G|, H, W)`` then ``.max(2)[0]``; also the ``amax`` form), a
  global average pooling and a ``Linear`` head (optionally a softmax).

**The group and its order (escnn's).** C4: element ``r`` is ``rot^r``, ``rot`` the quarter turn
counter-clockwise (``torch.rot90(x, 1)``). D4: element ``4 f + r`` is ``rot^r flip^f`` (the flip applied
first), ``flip`` the left-right mirror of the array (``torch.flip(x, (-1,))``: e2cnn's and escnn's default axis
pi/2; docs/conv.md says what was checked). A regular field has one channel per element in this order, and g acts on it by
the regular representation ``rho(g) e_h = e_{g h}``. The multiplication table is computed here from the
array operations themselves (a probe image), not taken from symeq.
"""

from __future__ import annotations

import numpy as np

ORDER = {"C4": 4, "D4": 8}


def elements(name: str) -> list[tuple[int, int]]:
    """escnn's elements as (r, f): ``rot^r flip^f``, index ``4 f + r``."""
    if name not in ORDER:
        raise ValueError(f"unknown group {name!r}: C4 or D4")
    return [(r, f) for f in range(ORDER[name] // 4) for r in range(4)]


def act(torch, g: tuple[int, int], x):
    """L_g on the last two axes of ``x``: the flip first (if f), then r counter-clockwise quarter turns."""
    r, f = g
    return torch.rot90(torch.flip(x, dims=(-1,)) if f else x, r, dims=(-2, -1))


def table(torch, name: str) -> list[list[int]]:
    """``mul[a][b]``: the index of the element a b (L_a L_b = L_ab), found on a probe image."""
    els = elements(name)
    probe = torch.arange(25, dtype=torch.float64).reshape(5, 5) ** 1.5
    imgs = [act(torch, g, probe) for g in els]

    def index(img):
        (i,) = [i for i, y in enumerate(imgs) if torch.equal(img, y)]
        return i

    return [[index(act(torch, a, act(torch, b, probe))) for b in els] for a in els]


def inverses(mul) -> list[int]:
    return [next(b for b in range(len(mul)) if mul[a][b] == 0) for a in range(len(mul))]


def regular_rep(mul, a: int) -> np.ndarray:
    """The |G| x |G| permutation matrix of the regular representation: column h has its 1 in row a h."""
    n = len(mul)
    P = np.zeros((n, n), dtype=int)
    for h in range(n):
        P[mul[a][h], h] = 1
    return P


def _reynolds(torch, name: str, W0, lifting: bool):
    """The average over G of T_g W0 (module docstring); W0 of shape (F' n, F n or 1, k, k)."""
    els, mul = elements(name), table(torch, name)
    inv, n = inverses(mul), len(els)

    def field_index(size, g):  # new channel (c, h) reads old (c, g^-1 h)
        return [(j // n) * n + mul[inv[g]][j % n] for j in range(size)]

    total = torch.zeros_like(W0)
    for g in range(n):
        W = W0[field_index(W0.shape[0], g)]
        if not lifting:
            W = W[:, field_index(W0.shape[1], g)]
        total += act(torch, els[g], W)
    return total / n


def _dyadic(torch, gen, *shape):
    return torch.randint(-8, 9, shape, generator=gen, dtype=torch.float64) / 8


def _field_values(torch, gen, F: int, n: int, lo: float, hi: float):
    return (lo + (hi - lo) * torch.randint(0, 9, (F,), generator=gen, dtype=torch.float64) / 8).repeat_interleave(n)


def inner_batchnorm(torch, F: int, n: int, gen):
    """BatchNorm2d with statistics and affine parameters equal on each field's channels (InnerBatchNorm)."""
    bn = torch.nn.BatchNorm2d(F * n)
    with torch.no_grad():
        for t, lo, hi in ((bn.weight, .5, 1.5), (bn.bias, -.25, .25), (bn.running_mean, -.25, .25),
                          (bn.running_var, .5, 2.)):
            t.copy_(_field_values(torch, gen, F, n, lo, hi))
    return bn


def max_pool_channels(torch, size: int, form: str = "max"):
    """escnn's ``MaxPoolChannels(kernel_size)`` (``form="max"``: ``view(...).max(2)[0]``, as escnn writes it) or
    the ``amax`` form; the class is named as escnn names it."""

    class MaxPoolChannels(torch.nn.Module):
        def __init__(self, kernel_size: int):
            super().__init__()
            self.kernel_size = kernel_size

        def forward(self, x):
            b, c, h, w = x.shape
            y = x.view(b, c // self.kernel_size, self.kernel_size, h, w)
            return y.max(2)[0] if form == "max" else y.amax(dim=2)

    return MaxPoolChannels(size)


def antialiased_pool(torch, channels: int, sigma: float = 0.66, stride: int = 2):
    """escnn's ``PointwiseAvgPoolAntialiased2D`` as it runs (and exports): a depthwise ``Conv2d`` (groups =
    channels) with a normalised Gaussian filter of size ``2 round(4 sigma) + 1``, padding half of it. The filter
    is symmetric under D4 bit for bit (each entry computed from x^2 + y^2). On an even grid with stride 2 the
    sampling grid is not symmetric (docs/conv.md): escnn's tutorial pads MNIST to 29x29 for that reason."""
    size = 2 * int(round(4 * sigma)) + 1
    r = torch.arange(size, dtype=torch.float64) - size // 2
    g = torch.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / (2 * sigma ** 2))
    conv = torch.nn.Conv2d(channels, channels, size, stride=stride, padding=size // 2, groups=channels, bias=False)
    with torch.no_grad():
        conv.weight.copy_((g / g.sum()).expand(channels, 1, size, size))
    return conv


def regular_net(torch, name: str = "C4", n: int = 28, fields: int = 2, k: int = 3, classes: int = 10,
                gpool: str | None = None, softmax: bool = False, broken: bool = False, seed: int = 0,
                pool: str = "avg"):
    """lifting R2Conv -> InnerBatchNorm -> ReLU -> PointwiseAvgPool(2) -> R2Conv -> InnerBatchNorm -> ReLU
    [-> GroupPooling (``gpool``: "max" or "amax")] -> global average pooling -> Linear [-> Softmax].

    Without group pooling the Linear head is averaged over G as well (one weight per field: invariant).
    ``pool="antialiased"``: :func:`antialiased_pool` instead of the average pooling, and the second convolution
    unpadded (symeq composes two linear layers in a row only then; docs/onnx.md); use an odd ``n``.
    ``broken``: output channel 0 of the second convolution gets 1/2 on its corner tap from every input channel,
    after the averaging (its kernel is no longer symmetric)."""
    gen = torch.Generator().manual_seed(seed)
    m = ORDER[name]
    C = fields * m
    c1 = torch.nn.Conv2d(1, C, k, padding=k // 2)
    c2 = torch.nn.Conv2d(C, C, k, padding=0 if pool == "antialiased" else k // 2)
    width = fields if gpool else C
    lin = torch.nn.Linear(width, classes)
    with torch.no_grad():
        c1.weight.copy_(_reynolds(torch, name, _dyadic(torch, gen, C, 1, k, k), lifting=True))
        c2.weight.copy_(_reynolds(torch, name, _dyadic(torch, gen, C, C, k, k) / C, lifting=False))
        c1.bias.copy_(_field_values(torch, gen, fields, m, -.25, .25))
        c2.bias.copy_(_field_values(torch, gen, fields, m, -.25, .25))
        W = _dyadic(torch, gen, classes, width)
        if not gpool:  # the head's weight averaged over each field (the regular representation on its inputs)
            W = W.reshape(classes, fields, m).mean(dim=2, keepdim=True).expand(classes, fields, m).reshape(classes, C)
        lin.weight.copy_(W)
        lin.bias.copy_(_dyadic(torch, gen, classes))
        if broken:
            c2.weight[0, :, 0, 0] += 0.5
    pooling = antialiased_pool(torch, C) if pool == "antialiased" else torch.nn.AvgPool2d(2)
    mods = [torch.nn.Sequential(c1, inner_batchnorm(torch, fields, m, gen), torch.nn.ReLU()), pooling,
            torch.nn.Sequential(c2, inner_batchnorm(torch, fields, m, gen), torch.nn.ReLU())]
    if gpool:
        mods.append(max_pool_channels(torch, m, gpool))
    mods += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), lin]
    if softmax:
        mods.append(torch.nn.Softmax(dim=1))
    return torch.nn.Sequential(*mods).eval()


def noisy(torch, net, eps: float, seed: int = 2):
    """Normal float noise of size ``eps`` on every parameter (weights, biases, BatchNorm's affine ones); returns
    the network."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(eps * torch.randn(p.shape, generator=gen))
    return net
