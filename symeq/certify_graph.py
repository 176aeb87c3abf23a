"""certify's road for graph networks (residual blocks, concatenations): the nearest layerwise-equivariant
graph network, proven exactly (docs/certify.md, "Graph networks"; the model: docs/graphs.md).

:func:`symeq.certification.certify` routes a float :class:`symeq.graph.GraphModel` that is not a chain
here (a chain goes the chain's road, unchanged).  The steps are the chain's, space by space:

1. **actions**: the float derivation along the graph (:func:`symeq.numeric.graph.derive_graph_numeric`)
   gives rho_s(g) on every hidden space s (forced at additions: an affine branch carries the action of
   what it is added to).  They are reduced to the signed permutations the projection uses (signs only
   where the space's activation is odd, none for ReLU, whose positive factors are not used: a subgroup
   of K_s), extended to every element of G along words in the generators, and must form a
   homomorphism (checked exactly on signed permutations); otherwise the run is undetermined.
2. **projection**: every layer node N reading space s is averaged over G with its in and out actions,
   W-bar = 1/|G| sum_g rho_N(g)^-1 W rho_s(g), b-bar = 1/|G| sum_g rho_N(g)^-1 b, in exact rationals after
   rounding to the grid 10^-D (D per layer, three digits below the layer's deviation from its
   projection, as for chains): dense layers by their matrix, convolutions on their kernels
   (:func:`symeq.numeric.project.reynolds_conv_exact`: the actions must be channel actions times pixel
   permutations, so the average is a convolution again).  Join nodes (additions, concatenations) have
   no parameters; their activations are kept.
3. **proof**: theta-bar, an exact graph model, goes through the exact verification of graphs
   (:func:`symeq.theorem.verify`); its certificate is what ``symeq check`` re-checks.

Distances: per layer node ||theta_N - theta-bar_N|| / ||theta_N|| (named by node in the notes), the
whole network's relative parameter distance (the metric), and the function distance on noise inputs
(and on data when given).  Not on this road: ``--metric data``, ``--finetune``, the involution search
and its lower bound (the twin's actions are the one candidate, "best found, not proven nearest").
"""

from __future__ import annotations

import time

import numpy as np

from .errors import InputError, Undetermined
from .layers.registry import supports

__all__ = ["certify_graph", "chain_or_graph"]


def chain_or_graph(model):
    """``(model, graph)``: a graph model that is a chain as its chain (the chain's road takes it), and
    whether what is left is a graph network (this road)."""
    if not callable(getattr(model, "hidden_spaces", None)):
        return model, False
    if model.exact:
        raise InputError("certify takes a float network; an exact graph model is proven as it is by `symeq verify`")
    if model.is_chain:
        return model.as_chain(), False
    return model, True


def _guards(model, digits, noise_points, metric, finetune) -> None:
    """Size guards, the options this road takes, and the exact twin of every activation, before the work."""
    from .activations import activation_from_spec
    from .sizes import check_memory, check_width

    if metric != "parameters":
        raise InputError("certify of a graph network measures the parameter distance only (--metric data: chains)")
    if finetune:
        raise InputError("--finetune covers dense chains; this is a graph network")
    for s in model.spaces():
        check_width(s.dim, f"certify: width of space {s.name}")
    if not (isinstance(noise_points, int) and noise_points >= 1):
        raise InputError(f"noise_points must be a positive integer, got {noise_points!r}")
    if digits is not None and not (isinstance(digits, int) and 1 <= digits <= 30):
        raise InputError(f"--digits must be an integer from 1 to 30, got {digits!r}")
    for n in model.nodes:
        if not n.is_join and not (supports(n.layer, "sparse-actions") or supports(n.layer, "reynolds")):
            raise InputError(f"node {n.name}: {n.layer.kind} layers do not support the Reynolds projection")
        act = n.act
        if act is not None:
            try:
                activation_from_spec(act.spec, f"node {n.name}")
            except InputError as e:
                raise InputError(f"node {n.name}: no exact activation for {act.spec}: {e}") from None
    n_params = sum(_n_params(n.layer) for n in model.nodes if not n.is_join)
    check_memory(400 * n_params, f"certify: theta-bar in exact rationals ({n_params} parameters)")


def _n_params(layer) -> int:
    if supports(layer, "parameter-free"):  # pooling
        return 0
    if supports(layer, "sparse-actions"):
        return int(np.asarray(layer.kernel).size + np.asarray(layer.channel_bias).size)
    return int(layer.in_dim * layer.out_dim + layer.out_dim)


def _space_actions(model, ngroup, tol, deadline):
    """The float derivation's generator actions per hidden space, reduced to signed permutations, and the
    element chains [input, hidden spaces..., output] (per element of G) with the index of every space."""
    from .numeric.graph import derive_graph_numeric
    from .numeric.monomial import MonomialAction
    from .numeric.project import element_actions, is_homomorphism, signs_allowed

    der = derive_graph_numeric(model, ngroup, tol=tol, deadline=deadline)
    hidden = model.hidden_spaces()
    acts, changed = [], False
    for si, s in enumerate(hidden):
        row = []
        for gi, a in enumerate(der.actions[si]):
            if not isinstance(a, MonomialAction):
                why = getattr(der, "undetermined", None) or "no monomial action was found"
                raise Undetermined(f"space {s.name}, generator {ngroup.names[gi]}: the float derivation found no "
                                   f"action to project with ({why})")
            act = model.node(s.name).act
            signs = act is None or signs_allowed(act)
            vals = np.where(a.vals < 0, -1.0, 1.0) if signs else np.ones(a.n)
            changed = changed or a.offset is not None or not np.array_equal(vals, a.vals)
            row.append(MonomialAction(a.cols.copy(), vals))
        acts.append(row)
    gen = [[acts[si][gi] for gi in range(len(ngroup.names))] for si in range(len(hidden))]
    hom, why = is_homomorphism(ngroup, gen)
    if not hom:
        raise Undetermined(f"the float derivation's actions are not a homomorphism ({why}); no graph projection")
    chains = element_actions(ngroup, gen)
    index = {"input": 0, **{s.name: i for i, s in enumerate(hidden, 1)}, model.output: len(hidden) + 1}
    return der, gen, chains, index, changed


def _project_layer(layer, P, grid):
    """One layer averaged over the element actions ``P`` (pairs (in, out)), rounded to the grid 10^-D with
    ``D = grid(deviation, scale)``: (exact layer, float layer, D, relative distance, ||theta - bar||^2,
    ||theta||^2)."""
    from .activations import activation_from_spec
    from .numeric.project import conv_tap_maps, reynolds_conv_exact

    act = None if layer.activation is None else activation_from_spec(layer.activation.spec)
    chain2 = [[a, b] for a, b in P]
    if supports(layer, "sparse-actions"):
        from .layers.conv import ConvLayer
        from .numeric.conv import NumericConvLayer

        maps = conv_tap_maps(layer.shape, chain2, 0)
        if maps is None:
            raise Undetermined(f"{layer.label}: the actions do not respect the image grid, so the average is no "
                               "convolution")
        K = np.asarray(layer.kernel, dtype=np.float64)
        cb = np.asarray(layer.channel_bias, dtype=np.float64)
        Kv = K.reshape(-1)
        Kf = sum(ts * Kv[tm] for tm, ts, _, _ in maps) / len(maps)
        cbf = sum(cs * cb[cm] for _, _, cm, cs in maps) / len(maps)
        D = grid(max(float(np.max(np.abs(Kv - Kf))), float(np.max(np.abs(cb - cbf), initial=0.0))),
                 max(float(np.max(np.abs(Kv))), float(np.max(np.abs(cb), initial=0.0))))
        Kq, cbq, Kbar, cbbar = reynolds_conv_exact(layer, maps, D)
        exact = ConvLayer(layer.shape, Kq, cbq, act)
        flt = NumericConvLayer(layer.shape, Kbar, cbbar, layer.activation)
        num, den = np.sum((K - Kbar) ** 2) + np.sum((cb - cbbar) ** 2), np.sum(K ** 2) + np.sum(cb ** 2)
    else:
        from .models import DenseLayer
        from .numeric.models import NumericDenseLayer, NumericModel
        from .numeric.project import reynolds_exact, reynolds_float

        W, b = np.asarray(layer.weight, dtype=np.float64), np.asarray(layer.bias, dtype=np.float64)
        one = NumericModel(layer.in_dim, [NumericDenseLayer(W, b, None)])
        (Wf, bf), = reynolds_float(one, chain2)
        D = grid(max(float(np.max(np.abs(W - Wf))), float(np.max(np.abs(b - bf), initial=0.0))),
                 float(np.max(np.abs(W))))
        (Wq, bq, Wbar, bbar, _), = reynolds_exact(one, chain2, D)
        exact = DenseLayer(Wq, bq, act)
        flt = NumericDenseLayer(Wbar, bbar, layer.activation)
        num, den = np.sum((W - Wbar) ** 2) + np.sum((b - bbar) ** 2), np.sum(W ** 2) + np.sum(b ** 2)
    rel = float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))
    return exact, flt, int(D), rel, float(num), float(den)


def _theta_bar(model, chains, index, grid, deadline, egroup, ngroup):
    """theta-bar node by node: (exact graph model, float graph model, per layer node (name, distance, grid),
    whole-network distance)."""
    from .activations import activation_from_spec
    from .graph import GraphModel, Node
    from .numeric.onnx_graph_exact import file_names

    enodes, fnodes, rows = [], [], []
    tot_num = tot_den = 0.0
    for n in model.nodes:
        if n.is_join:
            act = None if n.activation is None else activation_from_spec(n.activation.spec)
            enodes.append(Node(n.name, n.op, n.inputs, activation=act, segment=n.segment, index=n.index))
            fnodes.append(n)
            continue
        if supports(n.layer, "parameter-free"):  # pooling: kept as it is (its action is the transported one)
            enodes.append(Node(n.name, n.op, n.inputs, layer=n.layer.exact_layer(), segment=n.segment, index=n.index))
            fnodes.append(n)
            continue
        deadline.check(f"averaging node {n.name} over the group")
        P = [(c[index[n.inputs[0]]], c[index[n.name]]) for c in chains]
        exact, flt, D, rel, num, den = _project_layer(n.layer, P, grid)
        enodes.append(Node(n.name, n.op, n.inputs, layer=exact, segment=n.segment, index=n.index))
        fnodes.append(Node(n.name, n.op, n.inputs, layer=flt, segment=n.segment, index=n.index))
        rows.append((n.name, rel, D))
        tot_num, tot_den = tot_num + num, tot_den + den
    name = f"{model.name or 'model'} (nearest layerwise equivariant)"
    (enodes, output), (fnodes, _) = file_names(enodes, model.output), file_names(fnodes, model.output)
    renamed = {n.name: m.name for n, m in zip(model.nodes, enodes)}  # the model file's names (docs/graphs.md)
    rows = [(renamed[r[0]],) + r[1:] for r in rows]
    emodel = GraphModel(model.input_dim, enodes, output, egroup, name, model.input_shape)
    fmodel = GraphModel(model.input_dim, fnodes, output, ngroup, name, model.input_shape)
    whole = float(np.sqrt(tot_num / tot_den)) if tot_den > 0 else float(np.sqrt(tot_num))
    return emodel, fmodel, rows, whole


def _actions_json(hidden, ngroup, gen) -> list:
    return [{"space": s.name, "generator": g, "cols": [int(c) for c in a.cols], "signs": [int(v) for v in a.vals]}
            for s, per in zip(hidden, gen) for g, a in zip(ngroup.names, per)]


def certify_graph(model, ngroup, egroup, *, result, finish, grid, digits=None, checked=None, max_distance=None,
                  tol: float = 1e-6, timeout=None, noise_points: int = 2000, seed: int = 0, metric="parameters",
                  finetune=None, t0=None):
    """The nearest layerwise-equivariant graph network to a float one, verified exactly (module docstring).

    ``result`` is :class:`symeq.certification.Certification`, ``finish`` its ``_finish`` (function
    distances, then the exact verification that sets the status) and ``grid`` its per-layer grid rule
    ``_digits_for(dev, rel, scale)`` (used unless ``digits`` is given), passed in by the caller as
    :mod:`symeq.certify_attention` is given its result class.
    """
    from .budget import Deadline

    t0 = time.perf_counter() if t0 is None else t0
    deadline = Deadline(timeout)
    model = model.with_group(ngroup)
    _guards(model, digits, noise_points, metric, finetune)
    der, gen, chains, index, changed = _space_actions(model, ngroup, tol, deadline)
    notes = []
    if changed:
        notes.append("the float derivation's actions have scale factors or offsets the projection does not use: "
                     "their permutations (with signs where the activation is odd) are used, a subgroup of K_s")
    rule = (lambda dev, scale: int(digits)) if digits is not None else \
        (lambda dev, scale: grid(dev, dev / max(scale, 1e-300), scale))
    emodel, fmodel, rows, whole = _theta_bar(model, chains, index, rule, deadline, egroup, ngroup)
    dists, grids = [r[1] for r in rows], [r[2] for r in rows]
    notes.append("graph network: the layers are its layer nodes, in file order: " +
                 ", ".join(f"layer {i} = node {r[0]}" for i, r in enumerate(rows, 1)))
    residual = getattr(der, "max_residual", None)
    method = "the float derivation's actions along the graph" + \
        ("" if residual is None else f" (max residual {residual:.3g})")
    notes.append("graph network: the float derivation's actions are the one candidate (no matching search): best "
                 "found, not proven nearest")
    cand = [{"method": method, "also_found_by": [], "distance": whole, "layer_nodes": [r[0] for r in rows],
             "parameters_per_layer": dists,
             "parameters_max": max(dists, default=0.0), "parameters": whole, "data_weighted": None}]
    hidden = model.hidden_spaces()
    cert = result("undetermined", dists, {}, None, grids, method, False, cand, None, emodel, fmodel, max_distance,
                  notes, metric="parameters", distance=whole, actions=_actions_json(hidden, ngroup, gen))
    cert.steps = [("graph_float_derivation", None)]
    return finish(cert, model, fmodel, egroup, checked, noise_points, seed, timeout, deadline, t0)
