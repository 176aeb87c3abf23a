"""Submodels: inactive and cloned neurons, reduction, and lifting back (weak identifiability).

A hidden neuron is *inactive* when its incoming row is zero (it outputs the constant sigma(b),
which folds into the next layer's bias) or its outgoing column is zero (nothing sees it).  Two
neurons are *clones* when their shifted pre-activation rows [w | b - s] agree up to a scaling
alpha in the latent group (e.g. up to sign for odd sigma): then the second outputs q y + o for the
first's output y, and merging adds q times its outgoing column to the first's and o times it to
the next layer's bias.  Which alpha count follows the absorbed-constant rule (docs/theory.md):
with biases the affine ones too (the sigmoid's sign flips, sigma(-t) = 1 - sigma(t); every
alpha != 0 for t + t^2 = (t + 1/2)^2 - 1/4, whose scaled neuron outputs alpha^2 y plus a
constant), the same K_i as the derivation and the fibre's orbit; in a bias-free model only the
offset-free ones (no bias absorbs o, and the model stays bias-free).  Removing and
merging gives the reduced parameter theta~ of a submodel with the same function (the maps
alpha_i, alpha_i*, beta_i of the paper); theta is *weakly identifiable* when theta~ is
identifiable.

Lifting back: from latent actions rho~_i on the reduced model, :func:`lift` builds theta' with
the original widths and the same function, whose layers are equivariant: each orbit of reduced
neurons under the actions gets the same number of copies (the smallest clone count in the
orbit, at least 1), the outgoing weights are split equally between the copies, and the
remaining neurons are re-wired as inactive (zero incoming row, zero bias, zero outgoing column)
and fixed by every action.

Examples
--------
>>> from symeq.activations import tanh_series
>>> from symeq.models import DenseLayer, Model
>>> from symeq.numbers import matrix
>>> m = Model(1, [DenseLayer(matrix([[1], [1], [0]]), [0, 0, 2], tanh_series(3)),
...               DenseLayer(matrix([[2, 3, 5]]), [0], None)])
>>> r = reduce_model(m)
>>> r.model.widths, r.removed, r.merged
([1, 1, 1], [(1, 2, 'inactive (zero incoming row)')], [(1, 1, 0)])

Without an output bias (``None``: none in the declared parameter space) the constant neuron stays:

>>> m2 = Model(1, [DenseLayer(matrix([[1], [1], [0]]), [0, 0, 2], tanh_series(3)),
...                DenseLayer(matrix([[2, 3, 5]]), None, None)])
>>> reduce_model(m2).model.widths
[1, 2, 1]
>>> x = [fmpq(1, 2)]
>>> r.model(x) == m(x)
True

References
----------
Shahverdi, Marchetti, Bokman, Kohn (2026), Section on submodels and weak identifiability;
Sussmann (1992) for the irreducible tanh networks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flint import fmpq, fmpq_mat

from .layers.base import declared_biases
from .layers.registry import all_support, any_supports
from .layerwise import absorbs_offsets, canonical_rows
from .models import DenseLayer, Model
from .numbers import mat_rows, monomial_matrix, monomial_parts

__all__ = ["Reduction", "reduce_model", "lift", "find_submodel_structure"]


@dataclass
class Reduction:
    """The reduced model and how it was obtained.

    Attributes
    ----------
    model : the reduced model theta~ (same function)
    removed : (layer, original neuron, reason) for each removed inactive neuron
    merged : (layer, clone, kept neuron) in original indices
    groups : per hidden layer, for each reduced neuron the list of (original neuron, q) it stands for
    """

    model: Model
    removed: list = field(default_factory=list)
    merged: list = field(default_factory=list)
    groups: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.removed or self.merged)


def find_submodel_structure(model: Model) -> dict:
    """Inactive neurons and clone classes of each hidden layer (original indices), without reducing.

    Clones are taken up to the latent scalings of the absorbed-constant rule, as in
    :func:`reduce_model`.
    """
    out = {"inactive": [], "clones": []}
    affine = absorbs_offsets(model)
    for i, layer in enumerate(model.layers[:-1]):
        rows = mat_rows(layer.weight)
        nxt = mat_rows(model.layers[i + 1].weight)
        for j, r in enumerate(rows):
            if all(x == 0 for x in r):
                out["inactive"].append((i + 1, j, "zero incoming row"))
            elif all(row[j] == 0 for row in nxt):
                out["inactive"].append((i + 1, j, "zero outgoing column"))
        keys, _ = canonical_rows(rows, layer.bias, layer.activation, affine=affine)
        classes: dict = {}
        for j, k in enumerate(keys):
            if any(x != 0 for x in rows[j]):
                classes.setdefault(k, []).append(j)
        out["clones"].extend((i + 1, js) for js in classes.values() if len(js) > 1)
    return out


def reduce_model(model: Model) -> Reduction:
    """Remove inactive neurons and merge clones until none is left (same function).

    Models of conv2d layers are reduced on channels (:func:`_reduce_conv`: dead and cloned
    channels), never on their dense expansion.
    Clones count up to the affine scalings when the model has biases (the absorbed-constant rule,
    docs/theory.md): two t + t^2 neurons whose shifted rows differ by the factor 2 merge, the
    constant going into the next bias.

    >>> from symeq.activations import polynomial
    >>> m = Model(2, [DenseLayer([[1, 2], [2, 4]], [1, fmpq(5, 2)], polynomial([0, 1, 1])),
    ...               DenseLayer([[2, -1]], [1], None)])
    >>> r = reduce_model(m)
    >>> r.merged, r.model.widths
    ([(1, 1, 0)], [2, 1, 1])
    >>> x = [fmpq(1, 3), fmpq(-2)]
    >>> r.model(x) == m(x)
    True
    """
    if any_supports(model.layers, "channel-reduction"):  # by channels (conv); else by neurons and heads
        return _reduce_conv(model)
    affine = absorbs_offsets(model)
    # the declared parameter space stays: a constant (a dead neuron's sigma(b), a clone's offset) goes into
    # the next bias only where the next layer has biases (symeq.layers.base.declared_biases)
    flags = declared_biases(model)
    layers = [(mat_rows(l.weight), list(l.bias), l.activation) for l in model.layers]
    # groups[i][j]: the original neurons (with factors q) that reduced neuron j of layer i stands for
    groups = [[[(j, fmpq(1))] for j in range(len(layers[i][0]))] for i in range(len(layers) - 1)]
    removed, merged = [], []
    changed = True
    while changed:
        changed = False
        for i in range(len(layers) - 1):
            rows, bias, act = layers[i]
            nrows, nbias, nact = layers[i + 1]
            # 1. zero incoming row: constant output sigma(b_j), folded into the next bias
            for j in range(len(rows)):
                if all(x == 0 for x in rows[j]) and len(rows) > 1:
                    c = act(bias[j])
                    if not flags[i + 1] and c != 0 and any(r[j] != 0 for r in nrows):
                        continue  # kept: removing it would give the next layer a bias
                    nbias = [b + r[j] * c for b, r in zip(nbias, nrows)]
                    removed.extend((i + 1, o, "inactive (zero incoming row)") for o, _ in groups[i][j])
                    layers[i], layers[i + 1] = _drop(layers[i], layers[i + 1], j, nbias)
                    groups[i].pop(j)
                    changed = True
                    break
            if changed:
                break
            # 2. zero outgoing column: nothing downstream sees it
            for j in range(len(rows)):
                if all(r[j] == 0 for r in nrows) and len(rows) > 1:
                    removed.extend((i + 1, o, "inactive (zero outgoing column)") for o, _ in groups[i][j])
                    layers[i], layers[i + 1] = _drop(layers[i], layers[i + 1], j, nbias)
                    groups[i].pop(j)
                    changed = True
                    break
            if changed:
                break
            # 3. clones: equal canonical rows; neuron k outputs (scale_k / scale_j)-admissible q times j
            keys, scales = canonical_rows(rows, bias, act, affine=affine)
            seen = {}
            for k, key in enumerate(keys):
                if key in seen:
                    j = seen[key]
                    # shifted row k = alpha * shifted row j, so y_k = q y_j + o (o = 0 without biases)
                    alpha = scales[k] / scales[j]
                    q, o = act.affine_admissible(alpha) if affine else (act.admissible(alpha), fmpq(0))
                    if o != 0 and not flags[i + 1] and any(r[k] != 0 for r in nrows):
                        continue  # the offset would need a bias the next layer does not have
                    nrows = [list(r) for r in nrows]
                    if o != 0:
                        nbias = [b + r[k] * o for b, r in zip(nbias, nrows)]
                    for r in nrows:
                        r[j] += q * r[k]
                    layers[i + 1] = (nrows, nbias, nact)
                    merged.extend((i + 1, o, groups[i][j][0][0]) for o, _ in groups[i][k])
                    groups[i][j] = groups[i][j] + [(o, q * qq) for o, qq in groups[i][k]]
                    layers[i], layers[i + 1] = _drop(layers[i], layers[i + 1], k, nbias)
                    groups[i].pop(k)
                    changed = True
                    break
                seen[key] = k
            if changed:
                break
    new_layers = [DenseLayer(fmpq_mat(len(r), len(r[0]), [x for row in r for x in row]), b, a, has_bias=f)
                  for (r, b, a), f in zip(layers, flags)]
    reduced = Model(model.input_dim, new_layers, model.group, model.name + " (reduced)", dict(model.meta))
    return Reduction(reduced, removed, merged, groups)


def _drop(layer, nxt, j, nbias):
    rows, bias, act = layer
    nrows, _, nact = nxt
    return ((rows[:j] + rows[j + 1:], bias[:j] + bias[j + 1:], act),
            ([r[:j] + r[j + 1:] for r in nrows], nbias, nact))


def _inverse_source(source, n: int) -> list[int]:
    """The permutation c -> j of ``source`` (output j comes from neuron c)."""
    perm = [0] * n
    for j, c in enumerate(source):
        perm[c] = j
    return perm


def _orbit_copies(perms: list[list[int]], groups, n: int) -> list[int]:
    """Copies per reduced neuron: constant on the orbits of ``perms``, the smallest clone count there.

    ``groups[j]`` are the original neurons merged into reduced neuron j (at least one copy each).
    """
    cnt = [max(1, len(groups[j])) for j in range(n)]
    per = [1] * n
    for orbit in _orbits(perms, n):
        m = min(cnt[j] for j in orbit)
        for j in orbit:
            per[j] = m
    return per


def _orbits(perms: list[list[int]], n: int) -> list[list[int]]:
    seen, orbits = set(), []
    for s in range(n):
        if s in seen:
            continue
        orbit, stack = [], [s]
        seen.add(s)
        while stack:
            a = stack.pop()
            orbit.append(a)
            for p in perms:
                b = p[a]
                if b not in seen:
                    seen.add(b)
                    stack.append(b)
        orbits.append(sorted(orbit))
    return orbits


def lift(original: Model, reduction: Reduction, actions) -> tuple[Model, list]:
    """theta' with the original widths, the same function, and layerwise-equivariant actions.

    Parameters
    ----------
    original : the model theta
    reduction : :func:`reduce_model` of theta
    actions : ``actions[i][g]`` on the reduced hidden layers (e.g. from derive_latent_actions)

    Returns
    -------
    (model, actions) : theta' and its actions ``actions'[i][g]`` on the original widths
    """
    red = reduction.model
    if any_supports(red.layers, "channel-reduction"):
        return _lift_conv(original, reduction, actions)
    L = red.depth
    ngen = len(actions[0]) if actions else 0
    # copies per reduced neuron: constant on orbits of the actions (smallest clone count)
    copies = []
    for i in range(L - 1):
        n = red.layers[i].out_dim
        perms = []
        for g in range(ngen):
            cols, _ = monomial_parts(actions[i][g])
            perms.append(_inverse_source(cols, n))  # rho has (j, c): output j comes from neuron c
        per = _orbit_copies(perms, reduction.groups[i], n)
        # per[j] <= cnt[j] and the clone counts add up to at most the original width
        assert sum(per) <= original.layers[i].out_dim
        copies.append(per)
    layers = []
    prev_index = None  # for each reduced neuron of the previous layer, its copies' indices
    prev_width = original.input_dim
    new_actions = [[None] * ngen for _ in range(L - 1)]
    for i, layer in enumerate(red.layers):
        rows = mat_rows(layer.weight)
        bias = list(layer.bias)
        if i < L - 1:
            width = original.layers[i].out_dim
            index, out_rows, out_bias = [], [], []
            for j, r in enumerate(rows):
                index.append(list(range(len(out_rows), len(out_rows) + copies[i][j])))
                for _ in range(copies[i][j]):
                    out_rows.append(r)
                    out_bias.append(bias[j])
            n_inactive = width - len(out_rows)
            out_rows += [[fmpq(0)] * len(rows[0])] * n_inactive
            out_bias += [fmpq(0)] * n_inactive
        else:
            index, out_rows, out_bias = None, rows, bias
        if prev_index is not None:
            # split each reduced column equally between its copies; inactive columns are zero
            split = []
            for r in out_rows:
                nr = [fmpq(0)] * prev_width
                for j, idx in enumerate(prev_index):
                    for t in idx:
                        nr[t] = r[j] / len(idx)
                split.append(nr)
            out_rows = split
        ncols = prev_width
        layers.append(DenseLayer(fmpq_mat(len(out_rows), ncols, [x for r in out_rows for x in r]), out_bias,
                                 layer.activation))
        if i < L - 1:
            width = original.layers[i].out_dim
            for g in range(ngen):
                cols, vals = monomial_parts(actions[i][g])
                bc, bv = list(range(width)), [fmpq(1)] * width
                for j, (c, v) in enumerate(zip(cols, vals)):
                    for a, b in zip(index[j], index[c]):
                        bc[a], bv[a] = b, v
                new_actions[i][g] = monomial_matrix(bc, bv)
            prev_index, prev_width = index, width
    lifted = Model(original.input_dim, layers, original.group, original.name + " (re-parametrized)", dict(original.meta))
    return lifted, new_actions


# -- convolutions: dead and cloned channels ------------------------------------------------------------
#
# A channel of a hidden conv layer plays the part of a neuron: its kernel row K[o] (C_in x kh x kw
# entries) and bias b_o are the incoming row, the next layer's kernels K'[:, o] its outgoing column.
# * zero outgoing kernels: nothing downstream sees the channel; it is removed;
# * zero incoming kernel: the channel is the constant sigma(b_o) at every pixel; it is removed when
#   sigma(b_o) = 0, or when every output pixel of the next layer reads the whole kernel (padding 0 or
#   circular padding): then the constant adds sigma(b_o) * sum K'[o', o] to the next channel bias o'.
#   With zero padding the border pixels read part of the kernel: a per-pixel bias, which a conv
#   layer has not, so the channel is kept;
# * clones: equal canonical kernel rows [K[o] | b_o - s] up to a latent scaling alpha (the same keys
#   as the channel matching): channel k outputs q y_j + o; the next kernels from j get q times those
#   from k, and o * sum K'[:, k] goes to the next bias (only where the whole kernel is read; else the
#   clone is kept when o != 0).
# Only chains of conv2d layers are reduced (a dense layer after a conv is a whole-image kernel).


def _conv_layers(layer):
    """(kernel rows, channel bias, activation) of a ConvLayer as mutable lists."""
    return [list(r) for r in layer.rows], list(layer.channel_bias), layer.activation


def _reads_whole_kernel(shape) -> bool:
    """Every output pixel reads every tap inside the image (no zero-padding tap)."""
    return shape.padding == 0 or shape.padding_mode == "circular"


def _reduce_conv(model: Model) -> Reduction:
    from .layers.conv import ConvShape

    if not all_support(model.layers, "channel-reduction"):
        return Reduction(model)  # mixed dense/conv chains: not reduced (the verdict says what it could reach)
    affine = absorbs_offsets(model)
    bias_free = all(b == 0 for l in model.layers for b in l.channel_bias)
    shapes = [l.shape for l in model.layers]
    layers = [_conv_layers(l) for l in model.layers]
    groups = [[[(j, fmpq(1))] for j in range(shapes[i].out_channels)] for i in range(len(layers) - 1)]
    removed, merged = [], []

    def kk(i):  # taps per input channel of layer i
        return shapes[i].kh * shapes[i].kw

    def out_col(i, j):  # the next layer's kernel entries from channel j, per output channel
        k = kk(i + 1)
        return [r[j * k:(j + 1) * k] for r in layers[i + 1][0]]

    def drop(i, j):
        rows, bias, act = layers[i]
        nrows, nbias, nact = layers[i + 1]
        k = kk(i + 1)
        layers[i] = (rows[:j] + rows[j + 1:], bias[:j] + bias[j + 1:], act)
        layers[i + 1] = ([r[:j * k] + r[(j + 1) * k:] for r in nrows], nbias, nact)
        s, t = shapes[i], shapes[i + 1]
        shapes[i] = ConvShape(s.in_channels, s.out_channels - 1, s.height, s.width, s.kh, s.kw, s.stride, s.padding,
                              s.padding_mode)
        shapes[i + 1] = ConvShape(t.in_channels - 1, t.out_channels, t.height, t.width, t.kh, t.kw, t.stride,
                                  t.padding, t.padding_mode)
        groups[i].pop(j)

    changed = True
    while changed:
        changed = False
        for i in range(len(layers) - 1):
            rows, bias, act = layers[i]
            whole = _reads_whole_kernel(shapes[i + 1])
            n = len(rows)
            for j in range(n if n > 1 else 0):
                col = out_col(i, j)
                if all(x == 0 for r in col for x in r):
                    removed.extend((i + 1, o, "inactive channel (zero outgoing kernels)") for o, _ in groups[i][j])
                    drop(i, j)
                    changed = True
                    break
                if all(x == 0 for x in rows[j]):
                    c = act(bias[j])
                    if c != 0 and (not whole or bias_free):
                        continue  # a per-pixel (border) bias, or a bias in a bias-free model: kept
                    nrows, nbias, nact = layers[i + 1]
                    layers[i + 1] = (nrows, [b + c * sum(r, fmpq(0)) for b, r in zip(nbias, col)], nact)
                    removed.extend((i + 1, o, "inactive channel (zero incoming kernel)") for o, _ in groups[i][j])
                    drop(i, j)
                    changed = True
                    break
            if changed:
                break
            keys, scales = canonical_rows(rows, bias, act, affine=affine)
            seen: dict = {}
            for k, key in enumerate(keys):
                if key in seen and n > 1:
                    j = seen[key]
                    alpha = scales[k] / scales[j]
                    q, o = act.affine_admissible(alpha) if affine else (act.admissible(alpha), fmpq(0))
                    if o != 0 and not whole:
                        continue
                    t = kk(i + 1)
                    nrows, nbias, nact = layers[i + 1]
                    nrows = [list(r) for r in nrows]
                    if o != 0:
                        nbias = [b + o * sum(r[k * t:(k + 1) * t], fmpq(0)) for b, r in zip(nbias, nrows)]
                    for r in nrows:
                        for u in range(t):
                            r[j * t + u] += q * r[k * t + u]
                    layers[i + 1] = (nrows, nbias, nact)
                    merged.extend((i + 1, oo, groups[i][j][0][0]) for oo, _ in groups[i][k])
                    groups[i][j] = groups[i][j] + [(oo, q * qq) for oo, qq in groups[i][k]]
                    drop(i, k)
                    changed = True
                    break
                seen.setdefault(key, k)
            if changed:
                break
    if not (removed or merged):
        return Reduction(model)
    new_layers = [_conv_from_rows(sh, r, b, a) for sh, (r, b, a) in zip(shapes, layers)]
    reduced = Model(model.input_dim, new_layers, model.group, model.name + " (reduced)", dict(model.meta))
    return Reduction(reduced, removed, merged, groups)


def _conv_from_rows(shape, rows, bias, act):
    from .layers.conv import ConvLayer

    kh, kw = shape.kh, shape.kw
    kernel = [[[[r[(c * kh + a) * kw + b] for b in range(kw)] for a in range(kh)] for c in range(shape.in_channels)]
              for r in rows]
    return ConvLayer(shape, kernel, bias, act)


def _lift_conv(original: Model, reduction: Reduction, actions) -> tuple[Model, list]:
    """:func:`lift` on channels: each orbit of reduced channels gets the same number of copies (the
    smallest clone count in it), the next layer's kernels from a channel are split equally between
    its copies, the other channels are inactive (zero kernels in and out, zero bias) and fixed."""
    from .layers.conv import ConvAction, ConvShape, as_conv_action

    red = reduction.model
    L = red.depth
    ngen = len(actions[0]) if actions else 0
    acts = [[as_conv_action(actions[i][g], *red.layers[i].out_shape) for g in range(ngen)] for i in range(L - 1)]
    if any(a is None for per in acts for a in per):
        raise ValueError("lifting conv actions: an action is not a channel action times a pixel permutation")
    copies = []
    for i in range(L - 1):
        n = red.layers[i].shape.out_channels
        perms = []
        for g in range(ngen):
            perms.append(_inverse_source(acts[i][g].source, n))
        per = _orbit_copies(perms, reduction.groups[i], n)
        assert sum(per) <= original.layers[i].shape.out_channels
        copies.append(per)
    layers, new_actions = [], [[None] * ngen for _ in range(L - 1)]
    prev_index, prev_width = None, original.layers[0].shape.in_channels
    for i, layer in enumerate(red.layers):
        s = layer.shape
        rows, bias = [list(r) for r in layer.rows], list(layer.channel_bias)
        if i < L - 1:
            width = original.layers[i].shape.out_channels
            index, out_rows, out_bias = [], [], []
            for j, r in enumerate(rows):
                index.append(list(range(len(out_rows), len(out_rows) + copies[i][j])))
                out_rows += [r] * copies[i][j]
                out_bias += [bias[j]] * copies[i][j]
            out_rows += [[fmpq(0)] * len(rows[0])] * (width - len(out_rows))
            out_bias += [fmpq(0)] * (width - len(out_bias))
        else:
            index, out_rows, out_bias, width = None, rows, bias, s.out_channels
        t = s.kh * s.kw
        if prev_index is not None:
            split = []
            for r in out_rows:
                nr = [fmpq(0)] * (prev_width * t)
                for j, idx in enumerate(prev_index):
                    for c in idx:
                        nr[c * t:(c + 1) * t] = [x / len(idx) for x in r[j * t:(j + 1) * t]]
                split.append(nr)
            out_rows = split
        shape = ConvShape(prev_width, width, s.height, s.width, s.kh, s.kw, s.stride, s.padding, s.padding_mode)
        layers.append(_conv_from_rows(shape, out_rows, out_bias, layer.activation))
        if i < L - 1:
            for g in range(ngen):
                a = acts[i][g]
                bc, bv = list(range(width)), [fmpq(1)] * width
                for j, (c, v) in enumerate(zip(a.source, a.factor)):
                    for x, y in zip(index[j], index[c]):
                        bc[x], bv[x] = y, v
                new_actions[i][g] = ConvAction(tuple(bc), tuple(bv), a.pixel, a.hw)
            prev_index, prev_width = index, width
    lifted = Model(original.input_dim, layers, original.group, original.name + " (re-parametrized)",
                   dict(original.meta))
    return lifted, new_actions
