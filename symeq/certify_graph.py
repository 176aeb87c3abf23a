"""certify's road for graph networks (residual blocks, concatenations): the nearest layerwise-equivariant
graph network, proven exactly (docs/certify.md, "Graph networks"; the model: docs/graphs.md).

:func:`symeq.certification.certify` routes a float :class:`symeq.graph.GraphModel` that is not a chain
here (a chain goes the chain's road, unchanged).  The steps are the chain's, space by space:

1. **actions**: the candidates (:func:`_candidates`): the float derivation along the graph
   (:func:`symeq.numeric.graph.derive_graph_numeric`) gives rho_s(g) on every hidden space s (forced
   at additions: an affine branch carries the action of what it is added to), reduced to the signed
   permutations the projection uses (signs only where the space's activation is odd, none for ReLU,
   whose positive factors are not used: a subgroup of K_s); and the trivial action (the identity on
   every hidden space), kept when it agrees with every join (each op's ``float_combine``).  Each is extended
   to every element of G along words in the generators and must form a homomorphism (checked exactly
   on signed permutations); every layer node is averaged with it in floats, and the one nearest to
   theta in the whole-network parameter distance is theta-bar.  No candidate: undetermined.
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
(and on data when given).  Options: ``conv`` "auto" and "kernels" (kernels, the one way here), "dense"
refused for a graph with convolutions; ``restarts`` None or 0 (more is refused: no restarted search).
The paper's metric is measured per hidden space (:func:`_space_diagnostics`, on noise inputs, spaces up to
:data:`MAX_METRIC_DIM`); the units that explain a gap are examined on chains only.  Not on this road:
``--metric data``, ``--finetune``, the matching search and its lower bound (theta-bar is "best found, not
proven nearest").
"""

from __future__ import annotations

import time

import numpy as np

from .errors import BudgetExceeded, InputError, Undetermined
from .graph.ops.registry import join_op
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


def _guards(model, digits, noise_points, metric, finetune, conv="auto", restarts=None) -> None:
    """Size guards, the options this road takes, and the exact twin of every activation, before the work."""
    from .activations import activation_from_spec
    from .sizes import check_memory, check_width

    if metric != "parameters":
        raise InputError("certify of a graph network measures the parameter distance only (--metric data: chains)")
    if finetune:
        raise InputError("--finetune covers dense chains; this is a graph network")
    _option_guards(model, conv, restarts)
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


def _option_guards(model, conv, restarts) -> None:
    """``--conv`` and ``--restarts`` on a graph network: honoured where they mean something, refused by name
    where they do not (docs/certify.md, "Graph networks")."""
    if conv not in ("auto", "dense", "kernels"):
        raise InputError(f"conv must be \"auto\", \"dense\" or \"kernels\", got {conv!r}")
    if conv == "dense":
        bad = next((n for n in model.nodes if not n.is_join and supports(n.layer, "sparse-actions")), None)
        if bad is not None:
            raise InputError(f"certify --conv dense: node {bad.name} is a {bad.layer.kind} layer of a graph network, "
                             "whose convolutions are averaged on their kernels (--conv auto or --conv kernels); the "
                             "dense expansion and its matching search cover chains")
    if restarts is not None and restarts != 0:
        raise InputError(f"--restarts {restarts}: the seeded random restarts belong to the chain's joint matching "
                         "search (groups of order 2); a graph network has no matching search (its candidates: the "
                         "float derivation's actions and the trivial action), so there is nothing to restart")


def _n_params(layer) -> int:
    if supports(layer, "parameter-free"):  # pooling
        return 0
    if supports(layer, "sparse-actions"):
        return int(np.asarray(layer.kernel).size + np.asarray(layer.channel_bias).size)
    return int(layer.in_dim * layer.out_dim + layer.out_dim)


def _derived_candidate(model, ngroup, tol, deadline):
    """The float derivation's generator actions per hidden space, reduced to signed permutations:
    ``(derivation, actions or None, why not, changed)``."""
    from .numeric.graph import derive_graph_numeric
    from .numeric.monomial import MonomialAction
    from .numeric.project import signs_allowed

    der = derive_graph_numeric(model, ngroup, tol=tol, deadline=deadline)
    acts, changed = [], False
    for si, s in enumerate(model.hidden_spaces()):
        row = []
        for gi, a in enumerate(der.actions[si]):
            if not isinstance(a, MonomialAction):
                why = getattr(der, "undetermined", None) or "no monomial action was found"
                return der, None, (f"space {s.name}, generator {ngroup.names[gi]}: the float derivation found no "
                                   f"action to project with ({why})"), False
            act = model.node(s.name).act
            signs = act is None or signs_allowed(act)
            vals = np.where(a.vals < 0, -1.0, 1.0) if signs else np.ones(a.n)
            changed = changed or a.offset is not None or not np.array_equal(vals, a.vals)
            row.append(MonomialAction(a.cols.copy(), vals))
        acts.append(row)
    return der, acts, None, changed


def _trivial_candidate(model, ngroup):
    """rho_s(g) = identity on every hidden space (a homomorphism; it must agree with the joins)."""
    from .numeric.monomial import MonomialAction

    return [[MonomialAction.identity(s.dim) for _ in ngroup.names] for s in model.hidden_spaces()]


def _same_action(a, b) -> bool:
    from .numeric.project import action_key

    return action_key(a) == action_key(b)


def _block_sum(actions):
    from .numeric.graph import _block_sum as block_sum

    return block_sum(actions)


def _chains(model, ngroup, gen, joins: bool):
    """The element chains [input, hidden spaces..., output] of generator actions ``gen`` and the index of
    every space; :class:`Undetermined` when they are no homomorphism or (``joins``) disagree with a join."""
    from .numeric.project import action_key, element_actions, is_homomorphism

    hom, why = is_homomorphism(ngroup, gen)
    if not hom:
        raise Undetermined(f"the actions are not a homomorphism ({why})")
    chains = element_actions(ngroup, gen)
    hidden = model.hidden_spaces()
    index = {"input": 0, **{s.name: i for i, s in enumerate(hidden, 1)}, model.output: len(hidden) + 1}
    for n in (n for n in model.nodes if n.is_join and joins):
        rule = getattr(join_op(n.op), "float_combine", None)
        for c in chains:
            got = None if rule is None else rule([c[index[i]] for i in n.inputs], _same_action, _block_sum)
            if got is None or action_key(got) != action_key(c[index[n.name]]):
                raise Undetermined(f"they disagree with the join {n.name} (its inputs' actions do not give its own)")
    return chains, index


def _float_average(layer, P):
    """One layer averaged over the element actions ``P`` (pairs (in, out)) in floats: the averaged
    parameters, the largest deviation and weight, and ||theta - average||^2, ||theta||^2."""
    from .numeric.project import conv_tap_maps

    chain2 = [[a, b] for a, b in P]
    if supports(layer, "sparse-actions"):
        maps = conv_tap_maps(layer.shape, chain2, 0)
        if maps is None:
            raise Undetermined(f"{layer.label}: the actions do not respect the image grid, so the average is no "
                               "convolution")
        K = np.asarray(layer.kernel, dtype=np.float64).reshape(-1)
        cb = np.asarray(layer.channel_bias, dtype=np.float64)
        Kf = sum(ts * K[tm] for tm, ts, _, _ in maps) / len(maps)
        cbf = sum(cs * cb[cm] for _, _, cm, cs in maps) / len(maps)
        theta, avg = (K, cb), (Kf, cbf)
    else:
        from .numeric.models import NumericDenseLayer, NumericModel
        from .numeric.project import reynolds_float

        W, b = np.asarray(layer.weight, dtype=np.float64), np.asarray(layer.bias, dtype=np.float64)
        (Wf, bf), = reynolds_float(NumericModel(layer.in_dim, [NumericDenseLayer(W, b, None)]), chain2)
        theta, avg, maps = (W, b), (Wf, bf), None
    dev = max(float(np.max(np.abs(t - a), initial=0.0)) for t, a in zip(theta, avg))
    scale = max(float(np.max(np.abs(t), initial=0.0)) for t in theta)
    num = sum(float(np.sum((t - a) ** 2)) for t, a in zip(theta, avg))
    den = sum(float(np.sum(t ** 2)) for t in theta)
    return {"chain2": chain2, "maps": maps, "dev": dev, "scale": scale, "num": num, "den": den}


def _project_layer(layer, fl, grid):
    """The layer averaged exactly with the float average ``fl`` (:func:`_float_average`), rounded to the grid
    10^-D with ``D = grid(deviation, scale)``: (exact layer, float layer, D, relative distance,
    ||theta - bar||^2, ||theta||^2)."""
    from .activations import activation_from_spec

    act = None if layer.activation is None else activation_from_spec(layer.activation.spec)
    D = grid(fl["dev"], fl["scale"])
    if supports(layer, "sparse-actions"):
        from .layers.conv import ConvLayer
        from .layers.conv.floating import NumericConvLayer
        from .numeric.project import reynolds_conv_exact

        K, cb = np.asarray(layer.kernel, dtype=np.float64), np.asarray(layer.channel_bias, dtype=np.float64)
        Kq, cbq, Kbar, cbbar = reynolds_conv_exact(layer, fl["maps"], D)
        exact = ConvLayer(layer.shape, Kq, cbq, act)
        flt = NumericConvLayer(layer.shape, Kbar, cbbar, layer.activation)
        num, den = np.sum((K - Kbar) ** 2) + np.sum((cb - cbbar) ** 2), np.sum(K ** 2) + np.sum(cb ** 2)
    else:
        from .models import DenseLayer
        from .numeric.models import NumericDenseLayer, NumericModel
        from .numeric.project import reynolds_exact

        W, b = np.asarray(layer.weight, dtype=np.float64), np.asarray(layer.bias, dtype=np.float64)
        one = NumericModel(layer.in_dim, [NumericDenseLayer(W, b, None)])
        (Wq, bq, Wbar, bbar, _), = reynolds_exact(one, fl["chain2"], D)
        exact = DenseLayer(Wq, bq, act)
        flt = NumericDenseLayer(Wbar, bbar, layer.activation)
        num, den = np.sum((W - Wbar) ** 2) + np.sum((b - bbar) ** 2), np.sum(W ** 2) + np.sum(b ** 2)
    rel = float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))
    return exact, flt, int(D), rel, float(num), float(den)


def _consider(model, ngroup, gen, method, joins, deadline):
    """A candidate: its element chains, the float average of every layer node and the whole-network
    distance of theta from that average; or the reason it is none (a string)."""
    try:
        chains, index = _chains(model, ngroup, gen, joins)
        avgs = {}
        for n in model.nodes:
            if n.is_join or supports(n.layer, "parameter-free"):
                continue
            deadline.check(f"averaging node {n.name} over the group (in floats)")
            avgs[n.name] = _float_average(n.layer, [(c[index[n.inputs[0]]], c[index[n.name]]) for c in chains])
    except BudgetExceeded:
        raise
    except Undetermined as e:
        return f"{method}: {e}"
    num, den = sum(a["num"] for a in avgs.values()), sum(a["den"] for a in avgs.values())
    dist = float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))
    return {"gen": gen, "chains": chains, "index": index, "avgs": avgs, "method": method, "distance": dist}


def _theta_bar(model, cand, grid, deadline, egroup, ngroup):
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
        exact, flt, D, rel, num, den = _project_layer(n.layer, cand["avgs"][n.name], grid)
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


def _candidates(model, ngroup, tol, deadline, notes):
    """Every candidate this road has (the float derivation's actions, the trivial action), nearest first;
    the steps (name, why it gave none or None). :class:`Undetermined` when there is none."""
    der, gen, why, changed = _derived_candidate(model, ngroup, tol, deadline)
    found, skipped = [], []
    if gen is not None:
        if changed:
            notes.append("the float derivation's actions have scale factors or offsets the projection does not use: "
                         "their permutations (with signs where the activation is odd) are used, a subgroup of K_s")
        residual = getattr(der, "max_residual", None)
        method = "the float derivation's actions along the graph" + \
            ("" if residual is None else f" (max residual {residual:.3g})")
        found.append(_consider(model, ngroup, gen, method, False, deadline))
    else:
        skipped.append(why)
    found.append(_consider(model, ngroup, _trivial_candidate(model, ngroup), "the trivial action on every hidden "
                           "space (a homomorphism)", True, deadline))
    skipped += [c for c in found if isinstance(c, str)]
    steps = [("graph_float_derivation", why if gen is None else (found[0] if isinstance(found[0], str) else None)),
             ("graph_trivial_action", found[-1] if isinstance(found[-1], str) else None)]
    found = [c for c in found if not isinstance(c, str)]
    notes += [f"candidate not used: {s}" for s in skipped]
    if not found:
        raise Undetermined("no candidate actions to project with: " + "; ".join(skipped))
    if len(found) == 2 and _same(found[0]["gen"], found[1]["gen"]):  # the derivation found the trivial action
        found[0]["also"] = [found.pop(1)["method"]]
    found.sort(key=lambda c: c["distance"])  # stable: the derivation's wins a tie
    return steps, found


def _same(a, b) -> bool:
    from .numeric.project import action_key

    return all(action_key(x) == action_key(y) for pa, pb in zip(a, b) for x, y in zip(pa, pb))


#: the widest hidden space the paper's metric is fitted on (a least-squares fit of a dim x dim matrix)
MAX_METRIC_DIM = 2048
#: the most floats the paper's metric holds (every node's values on its inputs and their images): 1.6 GB
MAX_METRIC_FLOATS = 2 * 10 ** 8


def _space_diagnostics(model, ngroup, gen, noise_points: int, seed: int, notes: list) -> list | None:
    """Per hidden space s (at most :data:`MAX_METRIC_DIM` wide) and generator g, on N(0, 1) noise inputs: the
    paper's metric (median relative error of the least-squares A with A f_s(x) ~ f_s(gx), fitted on two thirds,
    measured on the rest) beside the same error with theta-bar's rho_s(g); the units are not examined."""
    from .numeric.project import _LeastSquares, _median_rel

    hidden = model.hidden_spaces()
    keep = [i for i, s in enumerate(hidden) if s.dim <= MAX_METRIC_DIM]
    if len(keep) < len(hidden):
        notes.append(f"graph network: the paper's metric is not fitted on the hidden spaces wider than {MAX_METRIC_DIM}: "
                     + ", ".join(hidden[i].name for i in range(len(hidden)) if i not in keep))
    if not keep:
        return None
    N = max(noise_points, 2 * max(hidden[i].dim for i in keep) + 60)
    floats = N * (1 + len(ngroup.names)) * sum(s.dim for s in model.spaces())  # every node's values, per batch
    if floats > MAX_METRIC_FLOATS:
        notes.append(f"graph network: the paper's metric is not computed: the values of every node on {N} noise inputs "
                     f"and their images would be {floats:.3g} floats (limit {MAX_METRIC_FLOATS:.3g})")
        return None
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, model.input_dim))
    order = rng.permutation(N)
    fit, test = order[: (2 * N) // 3], order[(2 * N) // 3:]
    vals = model.values(x)
    moved = [model.values(x @ np.asarray(A, dtype=np.float64).T) for A, _ in ngroup.generators]
    out = []
    for i in keep:
        s = hidden[i]
        F = np.asarray(vals[s.name], dtype=np.float64)
        fitter = _LeastSquares(F[fit])
        for gi, name in enumerate(ngroup.names):
            Fg = np.asarray(moved[gi][s.name], dtype=np.float64)
            out.append({"layer": s.name, "space": s.name, "generator": name,
                        "paper_metric": _median_rel(Fg[test], F[test] @ fitter.solve(Fg[fit])),
                        "k_metric": _median_rel(Fg[test], gen[i][gi].apply_rows(F[test])), "fit_points": len(fit),
                        "test_points": len(test), "near_linear": [], "near_dead": [], "near_clones": [],
                        "near_clone_pairs": 0, "width": int(s.dim), "inputs": "noise"})
    notes.append("graph network: the paper's metric per hidden space (the layer column names the space); the units "
                 "that explain a gap (near-linear, near-dead, near-clone) are examined on chains only")
    return out


def _actions_json(hidden, ngroup, gen) -> list:
    return [{"space": s.name, "generator": g, "cols": [int(c) for c in a.cols], "signs": [int(v) for v in a.vals]}
            for s, per in zip(hidden, gen) for g, a in zip(ngroup.names, per)]


def certify_graph(model, ngroup, egroup, *, result, finish, grid, digits=None, checked=None, max_distance=None,
                  tol: float = 1e-6, timeout=None, noise_points: int = 2000, seed: int = 0, metric="parameters",
                  finetune=None, t0=None, conv: str = "auto", restarts=None):
    """The nearest layerwise-equivariant graph network to a float one found, verified exactly (module docstring).

    ``result`` is :class:`symeq.certification.Certification`, ``finish`` its ``_finish`` (function
    distances, then the exact verification that sets the status) and ``grid`` its per-layer grid rule
    ``_digits_for(dev, rel, scale)`` (used unless ``digits`` is given), passed in by the caller as
    :mod:`symeq.certify_attention` is given its result class.  ``conv``: "auto" and "kernels" average
    convolutions on their kernels (the one way on graphs), "dense" is refused for a graph with
    convolutions; ``restarts``: None or 0 (a graph network has no restarted search; more is refused).
    """
    from .budget import Deadline

    t0 = time.perf_counter() if t0 is None else t0
    deadline = Deadline(timeout)
    model = model.with_group(ngroup)
    _guards(model, digits, noise_points, metric, finetune, conv, restarts)
    notes: list = []
    steps, found = _candidates(model, ngroup, tol, deadline, notes)
    best = found[0]
    rule = (lambda dev, scale: int(digits)) if digits is not None else \
        (lambda dev, scale: grid(dev, dev / max(scale, 1e-300), scale))
    emodel, fmodel, rows, whole = _theta_bar(model, best, rule, deadline, egroup, ngroup)
    dists, grids = [r[1] for r in rows], [r[2] for r in rows]
    notes.append("graph network: the layers are its layer nodes, in file order: " +
                 ", ".join(f"layer {i} = node {r[0]}" for i, r in enumerate(rows, 1)))
    notes.append("graph network: the candidates are the float derivation's actions and the trivial action, the "
                 "nearest in the parameter metric is theta-bar; no matching search, no lower bound and no random "
                 "restarts on graphs: best found, not proven nearest")
    method = best["method"] + (f" (also: {', '.join(best['also'])})" if best.get("also") else "")
    cand = [{"method": c["method"], "also_found_by": c.get("also", []), "distance": c["distance"],
             "parameters": c["distance"], "data_weighted": None} for c in found]
    cand[0].update(distance=whole, parameters=whole, layer_nodes=[r[0] for r in rows], parameters_per_layer=dists,
                   parameters_max=max(dists, default=0.0))  # theta-bar's, on the grid
    hidden = model.hidden_spaces()
    cert = result("undetermined", dists, {}, None, grids, method, False, cand, None, emodel, fmodel, max_distance,
                  notes, metric="parameters", distance=whole, actions=_actions_json(hidden, ngroup, best["gen"]))
    cert.search = {"restarts": 0, "lower_bound": None, "optimal": False,
                   "line": f"{len(found)} candidate(s) on this graph network, the nearest chosen; not proven nearest"}
    cert.steps = steps
    try:  # float measurements after the choice (the proof comes first, in finish)
        if timeout is not None and deadline.elapsed() >= 0.5 * timeout:
            notes.append("the paper's metric was skipped: half of the time budget was spent")
        else:
            cert.diagnostics = _space_diagnostics(model, ngroup, best["gen"], noise_points, seed, notes)
    except (np.linalg.LinAlgError, ValueError) as e:  # a degenerate fit: the diagnostics are left out
        notes.append(f"the paper's metric could not be fitted ({e})")
    return finish(cert, model, fmodel, egroup, checked, noise_points, seed, timeout, deadline, t0)
