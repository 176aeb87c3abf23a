"""The projection of a float network onto the layerwise-equivariant parameters, and the nearest action.

For actions rho_i(g) in K_i (rho_0 = rho_in, rho_L = rho_out), the parameters theta-bar that are
layerwise equivariant under them form a linear subspace: W_i rho_{i-1}(g) = rho_i(g) W_i and
b_i = rho_i(g) b_i for every g (an odd activation commutes with signed permutations, any
activation with permutations).  Its Reynolds operator

    W_i -> (1/|G|) sum_g rho_i(g)^-1 W_i rho_{i-1}(g),     b_i -> (1/|G|) sum_g rho_i(g)^-1 b_i

is the orthogonal projection onto it (signed permutations are orthogonal), so theta-bar is the
nearest layerwise-equivariant parameter for these actions.  :func:`reynolds_exact` computes it in
exact rationals after rounding theta to the grid 10^-D (rounding is odd and commutes with
permutations, so a float network that is exactly equivariant stays so); :func:`reynolds_float`
is its float twin, used for distances and for choosing D.

Which actions?  :func:`nearest_involution_actions` answers for a group of order 2 {e, g}: by
||theta - theta-bar||^2 = ||theta - g.theta||^2 / 4 the cost of rho_i(g) decomposes over its
cycles, each neuron fixed (with a sign where K_i has signs) or paired with one other with a
common sign, so the best rho_i(g) given its neighbours rho_{i-1}(g), rho_{i+1}(g) is a
maximum-weight matching (``networkx.max_weight_matching``) on the gains
2 |S_jk| - 2 |d_j| - 2 |d_k| of pairing j with k over fixing both (S, d from two Gram matrices).
It is tried first as an assignment problem (scipy's LAPJV, weights |d_j| on the diagonal and
|S_jk| / 2 off it): every involution is an assignment of the same weight, so an optimal assignment
that happens to be an involution is the optimal involution, found in a fraction of the matching's
time; otherwise the matching decides (exactly up to :data:`MAX_FULL_MATCHING` candidate pairs,
bounded and labelled not proven beyond).
With one hidden layer this is the nearest homomorphism G -> K_1 exactly (up to float rounding of
the costs); deeper, the layers are optimised in turn until none changes (each step optimal given
its neighbours, the whole not proven nearest), and the report says which; certify restarts it from
seeded random involutions (:func:`random_involutions`) and bounds the optimum from below
(:func:`involution_lower_bound`: the first and last layers' own optima).

With data, :func:`second_moments` and :func:`weighted_distances` weigh each layer's distance by
the data reaching it, and :func:`weighted_projection` gives, for fixed actions, the equivariant
parameters nearest in that weighted distance (the Reynolds average only when the actions keep the
data's second moment, docs/certify.md); :func:`layer_diagnostics` puts the paper's least-squares
metric beside the K-restricted one, with the near-linear, near-dead and near-clone units.

Supported: input and output representations by signed permutations; hidden actions that are
signed permutations where the activation is odd without shift (tanh, erf, odd series), and
permutations for every other activation (:func:`signs_allowed`).  Permutations lie in every K_i,
so the projection is always layerwise equivariant; for ReLU (positive scalings), sigmoid (affine
sign flips) and monomial activations it searches that subgroup of K_i only, and says so.

Examples
--------
>>> import numpy as np
>>> from symeq.groups import mirror
>>> from symeq.numeric.models import numeric_activation
>>> from symeq.numeric.generate import random_equivariant_numeric
>>> m = random_equivariant_numeric(mirror(2, 2), [6], numeric_activation("tanh"), rng=0)
>>> noisy = m.perturbed(1e-4, rng=1)
>>> acts = nearest_involution_actions(noisy, noisy.group)
>>> proj = reynolds_float(noisy, element_actions(noisy.group, acts.actions))
>>> d = layer_distances(noisy, proj)
>>> bool(max(d) < 1e-3)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..layers.registry import first_unsupported
from .monomial import MonomialAction

__all__ = ["Actions", "signed_permutation", "group_elements", "element_actions", "is_homomorphism",
           "reynolds_float", "reynolds_exact", "layer_distances", "nearest_involution_actions", "trivial_actions",
           "check_projectable", "signs_allowed", "restrict_to_projectable", "repair_cyclic", "fold_conv",
           "conv_tap_maps", "reynolds_conv_exact", "MAX_FULL_MATCHING", "layer_inputs", "second_moments",
           "symmetrised_moment", "weighted_distances", "parameter_distance", "data_scaled", "random_involutions",
           "involution_lower_bound", "MAX_MOMENT_WIDTH", "layer_diagnostics", "unused_inputs", "weighted_projection",
           "ridged", "DATA_RIDGE", "paired_involutions", "TermsCache"]

#: above this many positive-gain pairs on a layer the matching (networkx, pure Python: about 40 s for
#: 20 000 pairs on 1024 neurons) is bounded (then the result is labelled "best found, not proven nearest")
MAX_FULL_MATCHING = 5_000


@dataclass
class Actions:
    """Generator actions per hidden layer (``actions[i][g]``, MonomialAction) and how they were found."""

    actions: list
    method: str
    proven_nearest: bool = False
    notes: list = field(default_factory=list)


def signed_permutation(M: np.ndarray, what: str) -> MonomialAction:
    """A float matrix with entries 0 and +-1, one nonzero per row and column, as a MonomialAction."""
    a = MonomialAction.from_dense(np.asarray(M, dtype=np.float64))
    if a is None or not np.all(np.abs(a.vals) == 1.0):
        raise InputError(f"{what} is not a signed permutation matrix; certify projects with groups acting by "
                         "(signed) permutations of coordinates (image mirrors and rotations, shifts, tokens, signs)")
    return a


def _compose(a: MonomialAction, b: MonomialAction) -> MonomialAction:
    return MonomialAction(b.cols[a.cols], a.vals * b.vals[a.cols])


def action_key(a: MonomialAction) -> bytes:
    return a.cols.tobytes() + np.sign(a.vals).astype(np.int8).tobytes()


def group_elements(group):
    """Every element of a (numeric) group as a word in the generators, with its input and output actions.

    Returns ``(words, ins, outs, index)``: ``ins[e]``, ``outs[e]`` MonomialActions of element e,
    ``index`` maps an input action's key to its element (the input action is faithful, as symeq's
    groups are given by their action on the input).
    """
    gin = [signed_permutation(a, f"the input matrix of generator {n}") for n, (a, _) in zip(group.names, group.generators)]
    gout = [signed_permutation(b, f"the output matrix of generator {n}") for n, (_, b) in zip(group.names, group.generators)]
    n_in, n_out = gin[0].n, gout[0].n
    words, ins, outs = [()], [MonomialAction.identity(n_in)], [MonomialAction.identity(n_out)]
    index = {_key(ins[0]): 0}
    frontier = [0]
    while frontier:
        nxt = []
        for e in frontier:
            for gi in range(len(gin)):
                a = _compose(ins[e], gin[gi])
                k = _key(a)
                if k not in index:
                    if len(words) >= group.max_order:
                        raise InputError(f"the group has more than {group.max_order} elements")
                    index[k] = len(words)
                    words.append(words[e] + (gi,))
                    ins.append(a)
                    outs.append(_compose(outs[e], gout[gi]))
                    nxt.append(index[k])
        frontier = nxt
    return words, ins, outs, index


def element_actions(group, gen_actions) -> list:
    """Per element: the chain [rho_0(e), rho_1(e), ..., rho_{L-1}(e), rho_L(e)] (from words in the generators)."""
    words, ins, outs, _ = group_elements(group)
    out = []
    for e, w in enumerate(words):
        hidden = []
        for acts in gen_actions:
            a = MonomialAction.identity(acts[0].n)
            for gi in w:
                a = _compose(a, acts[gi])
            hidden.append(a)
        out.append([ins[e]] + hidden + [outs[e]])
    return out


def is_homomorphism(group, gen_actions) -> tuple[bool, str]:
    """Whether generator actions extend to a homomorphism G -> prod K_i (exact comparison of signed
    permutations along every edge of the Cayley graph), and where it fails."""
    words, ins, outs, index = group_elements(group)
    chains = element_actions(group, gen_actions)
    for e in range(len(words)):
        for gi in range(len(gen_actions[0]) if gen_actions else 0):
            f = index[_key(_compose(ins[e], signed_permutation(group.generators[gi][0], "input")))]
            for li, acts in enumerate(gen_actions, 1):
                prod = _compose(chains[e][li], acts[gi])
                if _key(prod) != _key(chains[f][li]):
                    return False, (f"on hidden layer {li} the actions break a relation of the group "
                                   f"(element {''.join(group.names[i] for i in words[e]) or 'e'} times "
                                   f"{group.names[gi]})")
    return True, ""


def check_projectable(model) -> None:
    """Refuse, before any work, the models whose layers the projection does not cover."""
    bad = first_unsupported(model.layers, "reynolds")
    if bad is not None:
        raise InputError("certify projects dense networks (convolutions as their dense expansion) only; "
                         f"{bad.kind} layers do not support the Reynolds projection")


def signs_allowed(act) -> bool:
    """Whether -1 entries may appear in rho_i(g): an odd activation without shift (tanh, erf, odd series).

    Every activation admits permutations (alpha = 1); the other scalings (ReLU's positive
    factors, sigmoid's affine sign flip, shifted or monomial activations) are not used by the
    projection, which then searches the permutations, a subgroup of K_i.
    """
    sc = act.scalings
    return sc.alphas == "sign" and sc.flip is not None and sc.flip[0] == -1.0 and sc.constant == 0.0 \
        and act.shift == 0.0


def restrict_to_projectable(model, gen_actions):
    """The actions with their factors reduced to the signs the projection uses (+1 where no signs are
    allowed) and affine offsets dropped; and whether anything changed."""
    out, changed = [], False
    for li, acts in enumerate(gen_actions):
        signs = signs_allowed(model.layers[li].activation)
        row = []
        for a in acts:
            vals = np.where(a.vals < 0, -1.0, 1.0) if signs else np.ones(a.n)
            changed = changed or a.offset is not None or not np.array_equal(vals, a.vals)
            row.append(MonomialAction(a.cols.copy(), vals))
        out.append(row)
    return out, changed


def _check_actions(model, chains) -> None:
    for chain in chains:
        for li, a in enumerate(chain[1:-1], 1):
            if not np.all(np.abs(a.vals) == 1.0):
                raise InputError(f"hidden layer {li}: the action has scale factors {a.kind()}; certify's projection "
                                 "covers signed permutations (scaled actions: not yet)")
            if np.any(a.vals < 0) and not signs_allowed(model.layers[li - 1].activation):
                raise InputError(f"hidden layer {li}: an action with signs, but the activation is not odd (or shifted)")
            if a.offset is not None:
                raise InputError(f"hidden layer {li}: an affine action; the projection uses linear ones")


def reynolds_float(model, chains) -> list:
    """theta-bar in floats: per layer (W-bar, b-bar) for the element chains of :func:`element_actions`."""
    _check_actions(model, chains)
    G = len(chains)
    out = []
    for li, l in enumerate(model.layers):
        W = np.zeros_like(l.weight)
        b = np.zeros_like(l.bias)
        for chain in chains:
            P_in, P_out = chain[li], chain[li + 1]
            inv = P_out.inverse()
            W += inv.left(P_in.right(l.weight))
            b += inv.left(l.bias[:, None])[:, 0]
        out.append((W / G, b / G))
    return out


def _ints(x: np.ndarray, digits: int) -> np.ndarray:
    """round(x * 10^D) as exact integers (object array of python ints when int64 could overflow)."""
    scaled = np.rint(np.asarray(x, dtype=np.float64) * 10.0 ** digits)
    if np.max(np.abs(scaled), initial=0.0) < 2.0 ** 52 / 1e4:
        return scaled.astype(np.int64)
    from fractions import Fraction

    return np.array([round(Fraction(float(v)) * 10 ** digits) for v in np.asarray(x).ravel()],
                    dtype=object).reshape(np.shape(x))


def fold_conv(W: np.ndarray, b: np.ndarray, shape):
    """The kernel and channel bias of a convolution whose dense matrix is W (integers), or None.

    W is a convolution of ``shape`` (:class:`symeq.layers.conv.ConvShape`) exactly when it is
    zero off the kernel's taps, equal on all positions of each tap, and b is constant on each
    output channel; compared as integers.  Returns (kernel as nested lists, channel bias) of
    the same integers, or None.
    """
    from ..layers.conv import dense_rows

    C_out, C_in, kh, kw = shape.out_channels, shape.in_channels, shape.kh, shape.kw
    taps = np.arange(1, C_out * C_in * kh * kw + 1).reshape(C_out, C_in, kh, kw)
    M = np.array(dense_rows(shape, taps.tolist(), 0), dtype=np.int64)  # tap index + 1 of every entry, 0 off taps
    if M.shape != W.shape or np.any(W[M == 0] != 0):
        return None
    on = M > 0
    t, v = M[on] - 1, W[on]
    K = np.zeros(taps.size, dtype=W.dtype)
    K[t] = v
    if np.any(K[t] != v):
        return None
    cb = np.asarray(b).reshape(C_out, -1)
    if np.any(cb != cb[:, :1]):
        return None
    return K.reshape(C_out, C_in, kh, kw).tolist(), cb[:, 0].tolist()


def _conv_positions(shape, o: int):
    """Every (row, column, tap) of output channel o's taps in the dense matrix of a convolution."""
    S = shape
    oh, ow = S.out_hw
    y, x, c, i, j = np.meshgrid(np.arange(oh), np.arange(ow), np.arange(S.in_channels), np.arange(S.kh),
                                np.arange(S.kw), indexing="ij")
    yy, xx = S.stride * y + i - S.padding, S.stride * x + j - S.padding
    if S.padding_mode == "circular":
        yy, xx = yy % S.height, xx % S.width
        ok = np.ones(yy.shape, dtype=bool)
    else:
        ok = (yy >= 0) & (yy < S.height) & (xx >= 0) & (xx < S.width)
    rows = ((o * oh + y) * ow + x)[ok]
    cols = ((c * S.height + yy) * S.width + xx)[ok]
    taps = (((o * S.in_channels + c) * S.kh + i) * S.kw + j)[ok]
    return rows, cols, taps


def _tap_of(shape, rows, cols):
    """The tap (flat kernel index) of dense positions, -1 off the taps."""
    S = shape
    oh, ow = S.out_hw
    o, rem = np.divmod(rows, oh * ow)
    y, x = np.divmod(rem, ow)
    c, rem = np.divmod(cols, S.height * S.width)
    yy, xx = np.divmod(rem, S.width)
    i, j = yy - S.stride * y + S.padding, xx - S.stride * x + S.padding
    if S.padding_mode == "circular":  # the tap that wraps onto this pixel, if any
        i, j = i % S.height, j % S.width
    ok = (i >= 0) & (i < S.kh) & (j >= 0) & (j < S.kw)
    return np.where(ok, ((o * S.in_channels + c) * S.kh + i) * S.kw + j, -1)


def _grid_actions(shape, chains, li: int) -> bool:
    """Whether every element acts on the layer's input and output images by a channel action times a pixel
    permutation (what a conv2d layer's exact check needs, :func:`symeq.layers.conv.floating.channel_pixel_parts`)."""
    from ..layers.conv.floating import channel_pixel_parts

    oh, ow = shape.out_hw
    return all(channel_pixel_parts(c[li], shape.in_channels, shape.height, shape.width) is not None
               and channel_pixel_parts(c[li + 1], shape.out_channels, oh, ow) is not None for c in chains)


def _pixel_tap_map(shape, pix_out_inv, pix_in_inv):
    """The spatial part of :func:`conv_tap_maps` on one channel: for each spatial tap (i, j) the
    spatial tap it goes to (-1 for a tap with no position), or None when some position leaves the
    taps or a tap's positions go to different taps (checked on every position of the image)."""
    from dataclasses import replace

    S1 = replace(shape, in_channels=1, out_channels=1)
    rows, cols, taps = _conv_positions(S1, 0)
    t2 = _tap_of(S1, pix_out_inv[rows], pix_in_inv[cols])
    if np.any(t2 < 0):
        return None
    k = shape.kh * shape.kw
    first = np.full(k, -1)
    first[taps[::-1]] = np.arange(len(taps))[::-1]  # one position of each spatial tap
    if np.any(t2 != t2[first[taps]]):
        return None
    smap = np.full(k, -1)
    seen = first >= 0
    smap[seen] = t2[first[seen]]
    return smap


def conv_tap_maps(shape, chains, li: int):
    """For each element: the map of kernel taps t -> (tap, sign) that P_out^-1 W P_in induces, or None.

    The actions on input and output must be channel actions times pixel permutations (as a conv2d
    layer's exact check needs).  P_out(g)^-1 W P_in(g) is then a convolution of the same shape for
    every kernel exactly when each element maps every position of a tap to positions of one tap
    with one sign, and the channel bias maps with one sign per channel.  Both actions being a
    channel part times a pixel part, a tap (o, c, i, j) goes to (channel image of o, channel image
    of c, pixel image of (i, j)) with the product of the two channel signs: the pixel part is
    checked on every position of one channel pair (:func:`_pixel_tap_map`), which is the check on
    all positions, and the channel parts are array arithmetic (no loop over channels).
    Returns a list of (tap index array, sign array, channel array, channel sign array) or None
    when some element does not respect the grid; a tap with no position maps to -1 with sign 0.
    """
    from ..layers.conv.floating import channel_pixel_parts

    S = shape
    oh, ow = S.out_hw
    if not _grid_actions(S, chains, li):
        return None
    out = []
    for chain in chains:
        P_in, P_out = chain[li], chain[li + 1]
        src_in, fac_in, pix_in = channel_pixel_parts(P_in, S.in_channels, S.height, S.width)
        src_o, fac_o, pix_o = channel_pixel_parts(P_out.inverse(), S.out_channels, oh, ow)
        cin_inv, pin_inv = np.empty_like(src_in), np.empty_like(pix_in)
        cin_inv[src_in], pin_inv[pix_in] = np.arange(len(src_in)), np.arange(len(pix_in))
        smap = _pixel_tap_map(S, pix_o, pin_inv)
        if smap is None:
            return None
        pair = src_o[:, None] * S.in_channels + cin_inv[None, :]            # (C_out, C_in) channel images
        sign = fac_o[:, None] * fac_in[cin_inv][None, :]
        seen = smap >= 0
        tmap = np.where(seen[None, None, :], pair[:, :, None] * (S.kh * S.kw) + smap[None, None, :], -1)
        tsign = np.where(seen[None, None, :], sign[:, :, None], 0.0)
        out.append((tmap.reshape(-1), tsign.reshape(-1), src_o.astype(np.int64), np.asarray(fac_o, dtype=float)))
    return out


def reynolds_conv_exact(layer, maps, digits: int):
    """The Reynolds average of a convolution on its kernel (no dense matrix), exactly.

    ``maps`` from :func:`conv_tap_maps`.  Returns (kernel, channel bias) in ``fmpq`` (nested
    lists) and as float arrays: K-bar[t] = (1/|G|) sum_g sign_g(t) K[tap_g(t)] after rounding K
    to the grid 10^-digits, and the same for the channel bias.
    """
    from flint import fmpq

    K = _ints(np.asarray(layer.kernel).reshape(-1), digits)
    cb = _ints(np.asarray(layer.channel_bias), digits)
    acc_k, acc_b = np.zeros_like(K), np.zeros_like(cb)
    for tmap, tsign, cmap, csign in maps:
        acc_k = acc_k + tsign.astype(np.int64) * K[tmap]
        acc_b = acc_b + csign.astype(np.int64) * cb[cmap]
    den = len(maps) * 10 ** digits
    shape = np.asarray(layer.kernel).shape
    Kq = np.array([fmpq(int(v), den) for v in acc_k], dtype=object).reshape(shape).tolist()
    Kf = np.array([int(v) / den for v in acc_k]).reshape(shape)
    return Kq, [fmpq(int(v), den) for v in acc_b], Kf, np.array([int(v) / den for v in acc_b])


def reynolds_exact(model, chains, digits: int, conv_shapes=None):
    """theta-bar exactly: theta rounded to the grid 10^-digits, then the Reynolds average in rationals.

    ``digits``: one number, or one per layer (each layer is averaged on its own, so each may have
    its own grid).

    Returns per layer ``(W-bar, b-bar, W-float, b-float, conv)``: an ``fmpq_mat``, a list of ``fmpq``,
    their correctly rounded float64 values, and for a layer with a ConvShape in ``conv_shapes``
    whose actions are channel actions times pixel permutations and whose average is again a
    convolution (:func:`fold_conv`) its ``(kernel, channel bias)`` in ``fmpq`` (else None).  Signed permutations act on the rounded integers by indexing and signs;
    the one division by |G| 10^digits is exact.
    """
    from flint import fmpq, fmpq_mat

    _check_actions(model, chains)
    G = len(chains)
    per_layer = [digits] * model.depth if isinstance(digits, int) else list(digits)
    if len(per_layer) != model.depth:
        raise InputError(f"digits: one per layer ({model.depth}), got {len(per_layer)}")
    out = []
    for li, l in enumerate(model.layers):
        den = G * 10 ** per_layer[li]
        Wi = _ints(l.weight, per_layer[li])
        bi = _ints(l.bias, per_layer[li])
        W = np.zeros_like(Wi)
        b = np.zeros_like(bi)
        for chain in chains:
            P_in, P_out = chain[li], chain[li + 1]
            inv = P_out.inverse()
            s_in = P_in.vals.astype(np.int64)
            s_out = inv.vals.astype(np.int64)
            right = np.empty_like(Wi)
            right[:, P_in.cols] = Wi * s_in[None, :]          # W P_in
            W = W + s_out[:, None] * right[inv.cols]           # P_out^-1 W P_in
            b = b + s_out * bi[inv.cols]
        Wq = fmpq_mat(W.shape[0], W.shape[1], [fmpq(int(v), den) for v in W.ravel()])
        Wf = np.array([int(v) / den for v in W.ravel()]).reshape(W.shape)  # int / int: correctly rounded
        conv = None
        shape = None if conv_shapes is None else conv_shapes[li]
        if shape is not None and _grid_actions(shape, chains, li):
            folded = fold_conv(W, b, shape)
            if folded is not None:
                K, cb = folded
                conv = ([[[[fmpq(int(x), den) for x in r] for r in kc] for kc in ko] for ko in K],
                        [fmpq(int(x), den) for x in cb])
        out.append((Wq, [fmpq(int(v), den) for v in b], Wf, np.array([int(v) / den for v in b]), conv))
    return out


def layer_distances(model, projected) -> list[float]:
    """Per layer ||theta_i - theta-bar_i|| / ||theta_i|| (weights and bias together)."""
    out = []
    for l, (W, b) in zip(model.layers, projected):
        num = np.sqrt(np.sum((l.weight - W) ** 2) + np.sum((l.bias - b) ** 2))
        den = np.sqrt(np.sum(l.weight ** 2) + np.sum(l.bias ** 2))
        out.append(float(num / den) if den > 0 else float(num))
    return out


def repair_cyclic(gen_actions, order: int) -> tuple[list, int]:
    """For a cyclic group <g> of the given order: each layer's rho(g) with the cycles that break
    rho(g)^order = 1 (a cycle of length not dividing the order, or whose signs multiply to -1 an odd
    number of times) replaced by fixed neurons.  Returns (actions, number of neurons fixed); the result
    is a homomorphism (the only relation of a cyclic group is g^order = e).
    """
    out, fixed = [], 0
    for acts in gen_actions:
        a = acts[0]
        cols, vals = a.cols.copy(), np.where(a.vals < 0, -1.0, 1.0)
        seen = np.zeros(a.n, dtype=bool)
        for j in range(a.n):
            if seen[j]:
                continue
            cyc, k = [], j
            while not seen[k]:
                seen[k] = True
                cyc.append(k)
                k = int(cols[k])
            closed = k == j
            sign = float(np.prod(vals[cyc]))
            L = len(cyc)
            if not closed or order % L or (sign < 0 and (order // L) % 2):
                cols[cyc], vals[cyc] = cyc, 1.0
                fixed += L
        out.append([MonomialAction(cols, vals)])
    return out, fixed


def trivial_actions(model, group) -> list:
    """rho_i(g) = identity on every hidden layer: always a homomorphism (the fallback candidate)."""
    return [[MonomialAction.identity(w) for _ in group.generators] for w in model.widths[1:-1]]


def _best_involution(S: np.ndarray, d: np.ndarray, signs: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """The involution (pi, s) maximising sum over cycles: fixed j gains |d_j| (or d_j), a pair (j, k) |S_jk|.

    First the assignment relaxation (:func:`_assignment`: optimal whenever its optimum is an
    involution); else the maximum-weight matching on the gains of pairing over fixing both
    (:func:`_matching_involution`: exact up to :data:`MAX_FULL_MATCHING` candidate pairs, beyond
    that bounded and not proven).  Returns (cols, vals, exact).
    """
    n = d.shape[0]
    fix = np.abs(d) if signs else d
    pair = np.abs(S) if signs else S
    pi = _assignment(fix, pair)
    if pi is not None and np.array_equal(pi[pi], np.arange(n)):
        cols, exact = pi, True
    else:
        cols, exact = _matching_involution(fix, pair, pi)
    vals = np.ones(n)
    for j in range(n):
        k = cols[j]
        if signs and ((k == j and d[j] < 0) or (k != j and S[j, k] < 0)):
            vals[j] = -1.0
    return cols, vals, exact


def _assignment(fix, pair):
    """The optimal assignment for weights fix on the diagonal and pair / 2 off it (scipy's LAPJV).

    Every involution is an assignment with the same weight, so an optimal assignment that is an
    involution is an optimal involution (the assignment is a relaxation), found in O(n^3) with a
    small constant.  None when scipy is missing.
    """
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        return None
    n = fix.shape[0]
    Wt = pair / 2.0
    Wt[np.arange(n), np.arange(n)] = fix
    rows, cols = linear_sum_assignment(Wt, maximize=True)
    pi = np.empty(n, dtype=np.int64)
    pi[rows] = cols
    return pi


def _matching(gain, nodes, nx):
    """networkx's maximum-weight matching on the positive gains among ``nodes``: list of pairs."""
    sub = gain[np.ix_(nodes, nodes)]
    iu, ju = np.triu_indices(len(nodes), 1)
    g = sub[iu, ju]
    sel = np.flatnonzero(g > 0)
    graph = nx.Graph()
    graph.add_nodes_from(range(len(nodes)))
    graph.add_weighted_edges_from((int(iu[t]), int(ju[t]), float(g[t])) for t in sel)
    return [(int(nodes[a]), int(nodes[b])) for a, b in nx.max_weight_matching(graph, maxcardinality=False)]


def _matching_involution(fix, pair, pi=None):
    """The optimal involution by maximum-weight matching on the gains of pairing over fixing: (cols, exact).

    Exact when the positive-gain pairs number at most :data:`MAX_FULL_MATCHING` (networkx's
    blossom algorithm is pure Python).  Beyond that it is bounded: the 2-cycles and fixed points
    of the assignment ``pi`` are kept, and only the neurons on its longer cycles are matched
    among themselves (each to its 8 best partners when still too many); not proven optimal.
    """
    import networkx as nx

    n = fix.shape[0]
    gain = pair - fix[:, None] - fix[None, :]
    scale = max(1.0, float(np.max(np.abs(pair), initial=0.0)))
    gain = np.where(gain > 1e-12 * scale, gain, 0.0)
    np.fill_diagonal(gain, 0.0)
    cols = np.arange(n)
    if int(np.count_nonzero(np.triu(gain, 1))) <= MAX_FULL_MATCHING:
        for a, b in _matching(gain, np.arange(n), nx):
            cols[a], cols[b] = b, a
        return cols, True
    rest = np.arange(n)
    if pi is not None:  # keep the assignment's 2-cycles and fixed points
        good = pi[pi] == np.arange(n)
        cols[good] = pi[good]
        rest = np.flatnonzero(~good)
    sub = gain[np.ix_(rest, rest)]
    if int(np.count_nonzero(np.triu(sub, 1))) > MAX_FULL_MATCHING:  # each neuron's 8 best partners
        keep = np.zeros_like(sub, dtype=bool)
        top = np.argsort(-sub, axis=1)[:, :8]
        keep[np.arange(len(rest))[:, None], top] = True
        sub = np.where(keep | keep.T, sub, 0.0)
        gain = gain.copy()
        gain[np.ix_(rest, rest)] = sub
    for a, b in _matching(gain, rest, nx):
        cols[a], cols[b] = b, a
    return cols, False


class TermsCache:
    """Memo of one model's matching terms, so that the searches from many starts (and the lower bound) do
    not recompute what they share: each hidden layer's two Gram products (the one with its incoming
    weights depends only on rho_{i-1}, the one with its outgoing weights only on rho_{i+1}; the first and
    last are fixed by the group) and each layer's best involution for given neighbours.  Hits return the
    very arrays a fresh computation would (the same products of the same operands), so results are
    bitwise those without the cache.  Least recently used entries go beyond ``max_bytes``.
    """

    def __init__(self, model, max_bytes: int = 128 << 20):
        from collections import OrderedDict

        self.model, self.max_bytes, self.nbytes = model, max_bytes, 0
        self._d = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key):
        hit = self._d.get(key)
        if hit is None:
            self.misses += 1
            return None
        self._d.move_to_end(key)
        self.hits += 1
        return hit[0]

    def put(self, key, value) -> None:
        size = sum(int(getattr(v, "nbytes", 0)) for v in value)
        if size > self.max_bytes:
            return
        self._d[key] = (value, size)
        self.nbytes += size
        while self.nbytes > self.max_bytes:
            _, (_, sz) = self._d.popitem(last=False)
            self.nbytes -= sz


def _cache_for(model, cache):
    return cache if cache is not None and cache.model is model else None


def _exact_key(a: MonomialAction) -> bytes:
    """An action's columns and factors, every bit (a cache key: equal keys, equal products)."""
    return a.cols.astype(np.int64).tobytes() + np.asarray(a.vals, dtype=np.float64).tobytes()


def _term_part(model, rho, i, part: str):
    """One side's (G + G^T, diag G) of hidden layer i: "in" from W_i and rho_{i-1}, "out" from W_{i+1}, rho_{i+1}."""
    if part == "in":
        Wi, bi = model.layers[i - 1].weight, model.layers[i - 1].bias
        V = np.hstack([Wi, bi[:, None]])
        U = np.hstack([rho[i - 1].right(Wi), bi[:, None]])
        G = V @ U.T
    else:
        Wn = model.layers[i].weight
        G = Wn.T @ rho[i + 1].left(Wn)  # G[k, j] = y_k . x_j
    return G + G.T, np.diag(G).copy()


def _layer_terms(model, rho, i, side: str = "both", cache=None):
    """S and d of hidden layer i given its neighbours (``side``: "in" counts only W_i, "out" only W_{i+1});
    with a :class:`TermsCache` of this model, each side's products are computed once per neighbour."""
    cache = _cache_for(model, cache)
    n = model.layers[i - 1].weight.shape[0]
    S, d = np.zeros((n, n)), np.zeros(n)
    for part, nb in (("in", i - 1), ("out", i + 1)):
        if side not in ("both", part):
            continue
        key = ("terms", i, part, _exact_key(rho[nb]))
        got = None if cache is None else cache.get(key)
        if got is None:
            got = _term_part(model, rho, i, part)
            if cache is not None:
                cache.put(key, got)
        S += got[0]
        d += got[1]
    return S, d


def _layer_best(model, rho, i, side: str = "both", cache=None):
    """:func:`_best_involution` of hidden layer i's terms (:func:`_layer_terms`), memoised in ``cache``."""
    cache = _cache_for(model, cache)
    signs = signs_allowed(model.layers[i - 1].activation)
    nbs = {"in": (i - 1,), "out": (i + 1,), "both": (i - 1, i + 1)}[side]
    key = ("best", i, side) + tuple(_exact_key(rho[k]) for k in nbs)
    got = None if cache is None else cache.get(key)
    if got is None:
        S, d = _layer_terms(model, rho, i, side, cache)
        got = _best_involution(S, d, signs) + ((S, d) if side != "both" else (None, None))  # the bound's S, d
        if cache is not None:
            cache.put(key, got)
    cols, vals, ok, S, d = got
    return cols.copy(), vals.copy(), ok, S, d


def nearest_involution_actions(model, group, start=None, max_sweeps: int = 20, init: str = "identity",
                               deadline=None, cache=None) -> Actions:
    """The homomorphism {e, g} -> prod K_i whose projection is nearest to theta (a group of order 2).

    ``start``: generator actions per hidden layer to start from; else ``init``: "identity", or
    "forward" (each layer's nearest involution for its incoming weights alone, from the input up)
    or "backward" (for its outgoing weights alone, from the output down).  One hidden layer: the
    exact optimum whatever the start.  Deeper: layers optimised in turn, each optimal given its
    neighbours, until a sweep changes nothing (at most ``max_sweeps``): a local optimum, which is
    why callers try several starts.  ``deadline`` (:class:`symeq.budget.Deadline`) is checked
    before every layer's matching (:class:`~symeq.errors.BudgetExceeded` past it).  ``cache``: a
    :class:`TermsCache` of this model shared by several calls (the same result, less work).
    """
    if len(group.generators) != 1:
        raise InputError("the matching search is for a group with one generator of order 2")
    words, ins, outs, _ = group_elements(group)
    if len(words) != 2:
        raise InputError(f"the matching search is for a group of order 2; this one has order {len(words)}")
    check_projectable(model)
    hidden = model.depth - 1
    rho = [ins[1]] + [start[i][0] if start is not None else MonomialAction.identity(w)
                      for i, w in enumerate(model.widths[1:-1])] + [outs[1]]
    exact = True
    notes = []
    sweeps = 0
    if start is None and init in ("forward", "backward") and hidden > 1:
        order = range(1, hidden + 1) if init == "forward" else range(hidden, 0, -1)
        for i in order:
            if deadline is not None:
                deadline.check(f"matching the neurons of hidden layer {i}")
            cols, vals, ok, _, _ = _layer_best(model, rho, i, "in" if init == "forward" else "out", cache)
            exact = exact and ok
            rho[i] = MonomialAction(cols, vals)
    elif init not in ("identity", "forward", "backward"):
        raise InputError(f"unknown start {init!r}")
    for sweeps in range(1, max_sweeps + 1):
        changed = False
        for i in range(1, hidden + 1):
            if deadline is not None:
                deadline.check(f"matching the neurons of hidden layer {i}")
            cols, vals, ok, _, _ = _layer_best(model, rho, i, "both", cache)
            exact = exact and ok
            new = MonomialAction(cols, vals)
            if _key(new) != _key(rho[i]):
                changed = True
                rho[i] = new
        if not changed or hidden == 1:
            break
    # the matching searches permutations (signed where signs_allowed): all of K_1 only where it has no other
    # scalings; ReLU's positive factors, the sigmoid's affine flip, monomial activations are not searched
    whole_k = all(signs_allowed(l.activation) or l.activation.scalings.alphas == "one" for l in model.layers[:-1])
    if hidden == 1 and exact and whole_k:
        method, proven = "maximum-weight matching (one hidden layer: the nearest homomorphism)", True
    elif hidden == 1 and exact:
        method, proven = ("maximum-weight matching (one hidden layer): the nearest homomorphism into the permutations "
                          "searched, a subgroup of K_1 (its other scalings are not searched): not proven nearest"), False
    else:
        how = "from the given actions" if start is not None else f"start: {init}"
        method, proven = (f"maximum-weight matching per layer, layers in turn ({how}, {sweeps} sweep(s)); each "
                          "layer's action is optimal given its neighbours: best found, not proven nearest"), False
        if not exact:
            notes.append(f"more than {MAX_FULL_MATCHING} candidate pairs on a layer where the assignment relaxation "
                         "was no involution: the matching was bounded (the assignment's 2-cycles kept, the rest "
                         "matched among themselves), so not proven nearest")
    return Actions([[a] for a in rho[1:-1]], method, proven, notes)


# -- data-aware distances (docs/certify.md, "Distances on the data") -------------------------------------------

#: widths above which the data's second moments (a (n+1) x (n+1) matrix per layer) are not formed
MAX_MOMENT_WIDTH = 4096


def _augmented(a: MonomialAction) -> MonomialAction:
    """diag(rho, 1): the action on a layer's input with the constant 1 that carries the bias."""
    return MonomialAction(np.append(a.cols, a.n), np.append(np.where(a.vals < 0, -1.0, 1.0), 1.0))


def layer_inputs(model, x: np.ndarray) -> list:
    """Each layer's input on the data (theta's features: x, f_1(x), ..., f_{L-1}(x)), N x n_{i-1}."""
    out, Y = [], np.asarray(x, dtype=np.float64)
    for l in model.layers:
        out.append(Y)
        Y = l.forward(Y)
    return out


def second_moments(model, x: np.ndarray) -> list | None:
    """Per layer Sigma_{i-1} = E[(y, 1)(y, 1)^T] of its input y on the data (the 1 carries the bias);
    None when some layer is wider than :data:`MAX_MOMENT_WIDTH`."""
    if max(model.widths[:-1]) > MAX_MOMENT_WIDTH:
        return None
    out = []
    for Y in layer_inputs(model, x):
        Y1 = np.hstack([Y, np.ones((Y.shape[0], 1))])
        out.append(Y1.T @ Y1 / Y.shape[0])
    return out


def symmetrised_moment(S: np.ndarray, chains, li: int) -> np.ndarray:
    """Sigma-bar = (1/|G|) sum_g rho~(g) Sigma rho~(g)^T, rho~ = diag(rho_{li}(g), 1): the second moment of the
    data augmented by the group's action on that layer's input.  Every rho~(g) keeps Sigma-bar, so the
    Reynolds average is the orthogonal projection in <A, B> = tr(A Sigma-bar B^T) (docs/certify.md)."""
    acc = np.zeros_like(S)
    for chain in chains:
        r = _augmented(chain[li])
        acc += r.left(r.left(S).T).T  # rho S rho^T
    return acc / len(chains)


def weighted_distances(model, projected, moments) -> tuple[list, float]:
    """Per layer ||[W - W-bar, b - b-bar] Sigma^{1/2}|| / ||[W, b] Sigma^{1/2}|| (Sigma from ``moments``:
    the relative change of the layer's pre-activation on the data, as a root mean square), and the
    whole network's sqrt(sum_i num_i^2 / sum_i den_i^2)."""
    per, tn, td = [], 0.0, 0.0
    for l, (W, b), S in zip(model.layers, projected, moments):
        D = np.hstack([l.weight - W, (l.bias - b)[:, None]])
        T = np.hstack([l.weight, l.bias[:, None]])
        num = max(float(np.sum((D @ S) * D)), 0.0)
        den = max(float(np.sum((T @ S) * T)), 0.0)
        per.append(float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num)))
        tn, td = tn + num, td + den
    return per, (float(np.sqrt(tn / td)) if td > 0 else float(np.sqrt(tn)))


def parameter_distance(model, projected) -> float:
    """The whole network's ||theta - theta-bar|| / ||theta|| (every weight and bias together)."""
    num = sum(float(np.sum((l.weight - W) ** 2) + np.sum((l.bias - b) ** 2)) for l, (W, b) in zip(model.layers, projected))
    den = sum(float(np.sum(l.weight ** 2) + np.sum(l.bias ** 2)) for l in model.layers)
    return float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))


def data_scaled(model, moments):
    """theta with the columns of every W_i scaled by the data's root mean square of that input
    (sqrt of Sigma_{i-1}'s diagonal): the matching search on it weights the neurons the data use
    (a heuristic for candidates under the data metric; the candidates are judged by that metric)."""
    from .models import NumericDenseLayer, NumericModel

    layers = []
    for l, S in zip(model.layers, moments):
        s = np.sqrt(np.maximum(np.diag(S)[:-1], 0.0))
        layers.append(NumericDenseLayer(l.weight * s[None, :], l.bias.copy(), l.activation))
    return NumericModel(model.input_dim, layers, model.group, model.name)


# -- the search at depth: seeded restarts and a lower bound ----------------------------------------------------

def random_involutions(model, group, rng) -> list:
    """Generator actions per hidden layer: a random involution on each (a random pairing of a random
    half of the neurons, signs at random where the activation allows them); a restart of the search."""
    out = []
    for l, w in zip(model.layers[:-1], model.widths[1:-1]):
        cols = np.arange(w)
        perm = rng.permutation(w)
        k = int(rng.integers(0, w // 2 + 1))
        for t in range(k):
            a, b = perm[2 * t], perm[2 * t + 1]
            cols[a], cols[b] = b, a
        vals = np.ones(w)
        if signs_allowed(l.activation):
            s = rng.choice([-1.0, 1.0], size=w)
            for j in range(w):  # a 2-cycle carries one common sign, as the matching's
                s[j] = s[min(j, cols[j])]
            vals = s
        out.append([MonomialAction(cols, vals)])
    return out


def _one_layer_cost(W, b, P_in, P_out) -> float:
    """||[W, b] - Reynolds_{e, g}([W, b])||^2 for one layer and an involution (P_in, P_out)."""
    inv = P_out.inverse()
    Wg = inv.left(P_in.right(W))
    bg = inv.left(b[:, None])[:, 0]
    return float(np.sum((W - Wg) ** 2) + np.sum((b - bg) ** 2)) / 4.0


def involution_lower_bound(model, group, deadline=None, cache=None) -> tuple[float | None, str]:
    """A lower bound on min ||theta - theta-bar||^2 over every homomorphism {e, g} -> prod_i of the
    (signed) permutations searched, and how it was found.

    The squared distance is a sum over layers, T_1(rho_1) + T_2(rho_1, rho_2) + ... + T_L(rho_{L-1}),
    each term >= 0.  So the sum of the terms' independent minima is a lower bound: min T_1 is the
    first layer's own matching (rho_0 is fixed), min T_L the last layer's (rho_L fixed), and a middle
    term's own minimum is 0 (identity on both sides).  None where a matching was bounded (not exact).
    ``cache``: the searches' :class:`TermsCache` of this model (their first steps are these matchings).
    """
    words, ins, outs, _ = group_elements(group)
    if len(words) != 2 or len(group.generators) != 1:
        return None, "the lower bound is for a group of order 2"
    hidden = model.depth - 1
    rho = [ins[1]] + [MonomialAction.identity(w) for w in model.widths[1:-1]] + [outs[1]]
    total, parts = 0.0, []
    for i, side in ((1, "in"), (hidden, "out")):
        if deadline is not None:
            deadline.check(f"the lower bound's matching on hidden layer {i}")
        signs = signs_allowed(model.layers[i - 1].activation)
        cols, vals, ok, S, d = _layer_best(model, rho, i, side, cache)  # the forward/backward starts' first step
        a = MonomialAction(cols, vals)
        if side == "in":
            l = model.layers[0]
            cost = _one_layer_cost(l.weight, l.bias, rho[0], a)
        else:
            l = model.layers[-1]
            cost = _one_layer_cost(l.weight, l.bias, a, rho[-1])
        if not ok:
            # the matching was bounded: every involution's cost is C - w / 2 (w its assignment weight, the
            # best signs taken), and no involution weighs more than the optimal assignment, so
            # C - w* / 2 = cost(found) - (w* - w(found)) / 2 is a lower bound
            fix, pair = (np.abs(d), np.abs(S)) if signs else (d, S)
            pi = _assignment(fix, pair.copy())
            if pi is None:
                return None, f"the matching on hidden layer {i} was bounded and scipy's assignment is missing"
            Wt = pair / 2.0
            Wt[np.arange(len(fix)), np.arange(len(fix))] = fix
            w_star = float(Wt[np.arange(len(fix)), pi].sum())
            w_found = float(Wt[np.arange(len(fix)), cols].sum())
            cost -= max(0.0, w_star - w_found) / 2.0
            parts.append(f"hidden layer {i}'s by the assignment relaxation")
        total += max(cost, 0.0)
    how = ("the first layer's and the last layer's own optima (each layer's matching alone; the middle layers' own "
           "optimum is 0)")
    if parts:
        how += "; " + ", ".join(parts) + " (its matching was bounded)"
    return total, how


# -- the paper's metric beside the K-restricted one, and the units that explain the gap ------------------------

#: a unit is near-linear when an affine function of its pre-activation explains this much of its output's
#: variance on the data (R^2), near-dead when its output's standard deviation is below this fraction of the
#: layer's largest, near-clones when their outputs correlate (in absolute value) at least this much
NEAR_LINEAR_R2, NEAR_DEAD, NEAR_CLONE = 0.999, 1e-3, 0.999


class _LeastSquares:
    """min ||F A - B|| over A for one F and several B (the paper's metric's fit, one per generator), as
    ``numpy.linalg.lstsq(F, B, rcond=None)`` gives it, from one factorisation of F's Gram matrix.

    Where F is tall and well conditioned (Cholesky's reciprocal condition estimate of F^T F above
    :data:`_GRAM_RCOND`, so kappa(F) below 10^4), the normal equations with one step of refinement on the
    residual (the corrected semi-normal equations) give lstsq's solution up to float round-off, at the cost
    of two products with F instead of an SVD of it; anything else (rank deficient, ill conditioned, wide,
    scipy missing) goes to lstsq itself, with its minimum-norm answer.
    """

    def __init__(self, F: np.ndarray):
        self.F, self.cho = F, None
        m, n = F.shape
        if m < n or n == 0:
            return
        try:
            from scipy.linalg import LinAlgError, cho_factor
            from scipy.linalg.lapack import dpocon
        except ImportError:
            return
        Gm = F.T @ F
        try:
            c, low = cho_factor(Gm, lower=False, check_finite=False)
        except (LinAlgError, ValueError):
            return
        rcond, info = dpocon(c, float(np.max(np.sum(np.abs(Gm), axis=0))), uplo="U")
        if info == 0 and np.isfinite(rcond) and rcond > _GRAM_RCOND:
            self.cho = (c, low)

    def solve(self, B: np.ndarray) -> np.ndarray:
        if self.cho is None:
            return np.linalg.lstsq(self.F, B, rcond=None)[0]
        from scipy.linalg import cho_solve

        A = cho_solve(self.cho, self.F.T @ B, check_finite=False)
        return A + cho_solve(self.cho, self.F.T @ (B - self.F @ A), check_finite=False)


#: the Gram matrix's reciprocal condition number above which :class:`_LeastSquares` uses it (kappa(F) < 10^4)
_GRAM_RCOND = 1e-8


def _median_rel(T, P):
    norms = np.maximum(np.linalg.norm(T, axis=1), 1e-300)
    return float(np.median(np.linalg.norm(T - P, axis=1) / norms))


def layer_diagnostics(model, x: np.ndarray, group, gen_actions, seed: int = 0) -> list:
    """Per hidden layer i and generator g, on the data x: the paper's metric (median relative error
    |f_i(gx) - A f_i(x)| / |f_i(gx)| of the least-squares A, fitted on two thirds of the data, measured on the
    rest) beside the same error with A = rho_i(g) of the chosen actions (in K_i), and the units that
    explain a gap: near-linear (an approximate GL symmetry of the linear regime, not in K_i), near-dead
    (A is free on them) and near-clone pairs (A can mix them).  Units are numbered from 1."""
    rng = np.random.default_rng(seed)
    N = x.shape[0]
    order = rng.permutation(N)
    fit, test = (order[: (2 * N) // 3], order[(2 * N) // 3:]) if N >= 30 else (order, order)
    out = []
    Y = np.asarray(x, dtype=np.float64)  # model.forward(x, i - 1), one layer further each step
    Yg = [model.forward(x @ np.asarray(A).T, 0) for A, _ in group.generators]  # and of gx
    for i in range(1, model.depth):
        l = model.layers[i - 1]
        Z = Y @ l.weight.T + l.bias if i > 1 else x @ l.weight.T + l.bias
        F = l.activation(Z)
        sd = F.std(axis=0)
        dead = sd <= NEAR_DEAD * max(float(sd.max(initial=0.0)), 1e-300)
        lin = np.zeros(F.shape[1], dtype=bool)
        ZT, FT = np.ascontiguousarray(Z.T), np.ascontiguousarray(F.T)  # each unit's column in one piece
        for j in np.flatnonzero(~dead):
            zc, fc = ZT[j] - ZT[j].mean(), FT[j] - FT[j].mean()
            vz = float(zc @ zc)
            r2 = float((zc @ fc) ** 2 / (vz * float(fc @ fc))) if vz > 0 else 0.0
            lin[j] = r2 >= NEAR_LINEAR_R2
        clones = []
        live = np.flatnonzero(~dead)
        if 1 < len(live) <= 2048:
            C = np.corrcoef(F[:, live].T)
            iu, ju = np.triu_indices(len(live), 1)
            hit = np.abs(C[iu, ju]) >= NEAR_CLONE
            clones = [(int(live[a]) + 1, int(live[b]) + 1) for a, b in zip(iu[hit], ju[hit])]
        fitter = _LeastSquares(F[fit])  # one factorisation per layer, for every generator
        for gi, name in enumerate(group.names):
            Fg = Yg[gi] = l.forward(Yg[gi])  # model.forward(gx, i)
            At = fitter.solve(Fg[fit])
            rho = gen_actions[i - 1][gi]
            out.append({"layer": i, "generator": name, "paper_metric": _median_rel(Fg[test], F[test] @ At),
                        "k_metric": _median_rel(Fg[test], rho.apply_rows(F[test])),
                        "fit_points": int(len(fit)), "test_points": int(len(test)),
                        "near_linear": [int(j) + 1 for j in np.flatnonzero(lin)],
                        "near_dead": [int(j) + 1 for j in np.flatnonzero(dead)],
                        "near_clones": clones[:50], "near_clone_pairs": len(clones), "width": int(F.shape[1])})
        Y = l.forward(Y) if i + 1 < model.depth else Y
    return out


def unused_inputs(x: np.ndarray) -> dict:
    """Inputs the data never use: zero on every data point, and constant (the bias absorbs them); from 1."""
    zero = np.all(x == 0, axis=0)
    const = np.all(x == x[:1], axis=0) & ~zero
    return {"zero": [int(j) + 1 for j in np.flatnonzero(zero)], "constant": [int(j) + 1 for j in np.flatnonzero(const)]}


def _reynolds_aug(T: np.ndarray, chains, li: int) -> np.ndarray:
    """The Reynolds average of one layer's augmented [W, b] (the bias as the last column)."""
    W, b = T[:, :-1], T[:, -1]
    accW, accb = np.zeros_like(W), np.zeros_like(b)
    for chain in chains:
        P_in, inv = chain[li], chain[li + 1].inverse()
        accW += inv.left(P_in.right(W))
        accb += inv.left(b[:, None])[:, 0]
    return np.hstack([accW, accb[:, None]]) / len(chains)


def weighted_projection(model, chains, moments, projected=None, *, tol: float = 1e-12, maxiter: int = 2000,
                        deadline=None):
    """Per layer the layerwise-equivariant [W-bar, b-bar] (for these actions) nearest to theta's in the data's
    weighted distance tr(Delta Sigma Delta^T), Sigma = ``moments[i]`` (:func:`second_moments`).

    The equivariant [W, b] form the image V of the Reynolds operator R (the Frobenius-orthogonal projection).
    With T-bar = R(T) + D, D in V, the optimum solves R(D Sigma) = R((T - R(T)) Sigma): the operator
    D -> R(D Sigma) is symmetric and positive semi-definite on V (<R(D1 Sigma), D2> = tr(D1 Sigma D2^T)), so
    conjugate gradients from D = 0 stay in V (every iterate is layerwise equivariant) and reach, where Sigma
    is singular (inputs the data never use), the minimiser nearest to the Reynolds average.  Where every
    rho(g) keeps Sigma, R commutes with D -> D Sigma and D = 0: the Reynolds average itself.

    Returns (per layer (W-bar, b-bar), per layer the relative residual of the conjugate gradients).
    """
    projected = projected if projected is not None else reynolds_float(model, chains)
    out, res = [], []
    for li, (l, (Wr, br), S) in enumerate(zip(model.layers, projected, moments)):
        T = np.hstack([l.weight, l.bias[:, None]])
        TR = np.hstack([Wr, br[:, None]])
        rhs = _reynolds_aug((T - TR) @ S, chains, li)
        nrm = float(np.linalg.norm(rhs))
        D = np.zeros_like(T)
        r = rhs.copy()
        p = r.copy()
        rr = float(np.sum(r * r))
        k = 0
        while k < maxiter and rr > (tol * max(nrm, 1e-300)) ** 2:
            if deadline is not None and k % 20 == 0:
                deadline.check(f"the data-weighted projection of layer {li + 1}")
            Ap = _reynolds_aug(p @ S, chains, li)
            pAp = float(np.sum(p * Ap))
            if pAp <= 0:
                break
            a = rr / pAp
            D += a * p
            r -= a * Ap
            rr_new = float(np.sum(r * r))
            p = r + (rr_new / rr) * p
            rr = rr_new
            k += 1
        D = _reynolds_aug(D, chains, li)  # back onto V exactly in floats (drift)
        Tb = TR + D
        out.append((Tb[:, :-1].copy(), Tb[:, -1].copy()))
        res.append(float(np.sqrt(rr) / nrm) if nrm > 0 else 0.0)
    return out, res


#: the data metric's ridge: Sigma + lambda I with lambda = DATA_RIDGE * tr(Sigma) / (n + 1), so that
#: directions the data (nearly) never see stay near theta instead of moving freely
DATA_RIDGE = 1e-2


def ridged(moments, ridge: float = DATA_RIDGE) -> list:
    """Each Sigma plus ``ridge`` times its mean eigenvalue on the diagonal (:data:`DATA_RIDGE`)."""
    return [S + ridge * float(np.trace(S)) / S.shape[0] * np.eye(S.shape[0]) for S in moments]


def paired_involutions(model, group) -> list:
    """Generator actions per hidden layer that pair (almost) every neuron with another, from the input up:
    on each layer the pairs of largest |S_jk| given the layer below (greedy), the sign of S_jk where the
    activation allows signs.  Far from theta in general, but a hidden representation that can carry what
    changes under the mirror (a trivial rho_i forces f(x) = f(gx) downstream of it): the start of
    ``certify --finetune``'s second run."""
    words, ins, outs, _ = group_elements(group)
    if len(words) != 2 or len(group.generators) != 1:
        raise InputError("paired actions are for a group of order 2")
    rho = [ins[1]] + [MonomialAction.identity(w) for w in model.widths[1:-1]] + [outs[1]]
    for i in range(1, model.depth):
        S, _ = _layer_terms(model, rho, i, "in")
        signs = signs_allowed(model.layers[i - 1].activation)
        score = np.abs(S) if signs else S.copy()
        n = S.shape[0]
        iu, ju = np.triu_indices(n, 1)
        order = np.argsort(-score[iu, ju], kind="stable")
        cols, vals, used = np.arange(n), np.ones(n), np.zeros(n, dtype=bool)
        for t in order:
            a, b = int(iu[t]), int(ju[t])
            if used[a] or used[b]:
                continue
            used[a] = used[b] = True
            cols[a], cols[b] = b, a
            if signs and S[a, b] < 0:
                vals[a] = vals[b] = -1.0
        rho[i] = MonomialAction(cols, vals)
    return [[a] for a in rho[1:-1]]


_key = action_key  # the earlier private name, for callers not yet moved to the public one
