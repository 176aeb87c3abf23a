"""Graph models (docs/graphs.md) as the checker reads them: the strict reading of a ``"graph"`` model file
(segments, additions, concatenations, in topological order), its digest ``graph_sha256`` (form 2, from
:func:`symeq_check.digest.canonical_layers` of every segment), its exact and interval forward passes, and the
checker of its ``symeq-certificate/2``: every node re-verified with the actions of its spaces, the output
against G, the homomorphism, or (``not-equivariant``) the witness through the graph.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ._numbers import CheckError, _count, _dict, _short, _vector
from .activations import _activation, _apply, _neuron_failure
from .algebra import _homomorphism, _invertible, _monomial_failure, _sparse
from .conv import _channel_pixel, _conv_failure, _out_dim
from .digest import graph_digest_of, graph_node_form
from .evaluate import _evaluate
from .intervals import _check_witness, _interval_apply, _iv_conv, _iv_round
from .layerwise import _action, _layer_failure
from .model import _group, _Layer, _layers, _model_header, kind_of
from .pooling import _Pool
from .real import _positive_only
from .report import CheckReport
from .schema import (CERT_FORMAT, CERT_REQUIRED, EQUIVARIANCE_KEYS, GRAPH_CERT_KEYS, GRAPH_CHECKS_KEYS,
    GRAPH_PARAMETER_KEYS, NODE_KEYS, PARAMS_DIFFER, UNVERIFIABLE, VERIFIABLE, check_keys)

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
MAX_DENSE = 1_000_000  # entries of a conv layer's dense matrix this checker builds (size guard)


@dataclass(frozen=True)
class _Node:
    name: str
    kind: str        # "layers" (a segment), "add" or "concat"
    inputs: tuple    # the names it reads
    layers: tuple    # a segment's layers as symeq_check.model._layers reads them; () for a join
    act: object      # a join's activation (None: affine); a segment's is its last layer's
    width: int
    shape: tuple | None  # (C, H, W) when the node's value is an image


@dataclass(frozen=True)
class GraphModel:
    n_in: int
    nodes: tuple
    output: str
    group: list | None
    canonical: tuple  # per node, its digest-form-2 object


def _name(value, at: str, known: dict) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise CheckError(f"{at}: a node name must match [A-Za-z_][A-Za-z0-9_-]*, got {_short(value)}")
    if value == "input":
        raise CheckError(f'{at}: "input" is reserved (the model\'s input), not a node name')
    if value in known:
        raise CheckError(f"{at}: node name {value!r} is used twice")
    return value


def _ref(value, at: str, known: dict) -> str:
    if not isinstance(value, str) or value not in known:
        raise CheckError(f"{at}: {_short(value)} is not \"input\" or a node listed before this one "
                         f"(known: {', '.join(known)})")
    return value


def _segment(spec: dict, at: str, known: dict):
    src = _ref(spec.get("input"), f"{at}.input", known)
    width, shape, affine = known[src]
    if affine:
        raise CheckError(f"{at}: node {src!r} is affine (no activation); only an addition or a concatenation "
                         "(or the model's output) may read it")
    value = spec.get("layers")
    if isinstance(value, list):
        kinds = [kind_of(l) if isinstance(l, dict) else None for l in value]
        for j in (j for j, k in enumerate(kinds) if not getattr(k, "in_graph", True)):
            raise CheckError(f"{at}.layers[{j}]: {value[j]['type']} (token mixing) is not allowed in a graph model")
        first = next((l for l, k in zip(value, kinds) if not getattr(k, "reshape_only", False)), None)
        if isinstance(first, dict) and getattr(kind_of(first), "reads_image", False) and shape is not None:
            given = first.get("input_shape")
            if given is None:  # a conv2d (or a pooling) reading an image node inherits its shape
                value = [dict(l, input_shape=list(shape)) if l is first else l for l in value]
            elif isinstance(given, list) and given != list(shape):
                raise CheckError(f"{at}: its {first.get('type')} expects images of shape {_short(given)}, but {src!r} has "
                                 f"shape {list(shape)}")
    layers = _layers(value, width, at.replace(".", " "), free_last=True)
    if not layers:
        raise CheckError(f"{at}: a segment needs a layer (a flatten alone is none)")
    for j, layer in enumerate(layers, 1):
        _degenerate(layer.act, f"{at} layer {j}")
    last = layers[-1]
    image = last.image and kind_of(value[-1]).reads_image  # a dense layer's output is flat
    node = _Node(spec["name"], "layers", (src,), tuple(layers), last.act, _out_dim(last),
                 tuple(last.out_shape) if image else None)
    return node, graph_node_form(dict(spec, layers=list(layers.declared)), "layers", (src,))


def _degenerate(act, where: str) -> None:
    """Refuse a polynomial activation of degree 0 or 1 (docs/graphs.md): its latent group is no group of
    monomial matrices (a linear activation is an affine layer, a constant one forgets its input)."""
    if isinstance(act, tuple) and len(act) <= 2:
        raise CheckError(f"{where} has a polynomial activation of degree {len(act) - 1}: its latent group is not "
                         "a group of monomial matrices (graph models take degree >= 2, relu or a real activation)")


def _join(spec: dict, kind: str, at: str, known: dict):
    names, least = spec.get(kind), 2 if kind == "add" else 1  # a node may be listed twice (docs/graphs.md)
    if not isinstance(names, list) or len(names) < least:
        raise CheckError(f"{at}: {kind!r} must list at least {least} node name{'s' * (least > 1)}")
    names = tuple(_ref(v, f"{at}.{kind}[{j}]", known) for j, v in enumerate(names))
    widths = [known[n][0] for n in names]
    shapes = [known[n][1] for n in names]
    if kind == "add":
        if len(set(widths)) != 1:
            raise CheckError(f"{at}: an addition needs inputs of one size, got {widths}")
        images = {s for s in shapes if s is not None}
        if len(images) > 1 or (images and None in shapes):
            raise CheckError(f"{at}: an addition needs inputs of one image shape, got "
                             f"{[list(s) if s else None for s in shapes]}")
        width, shape = widths[0], (images.pop() if images else None)
    else:
        width = sum(widths)
        if all(s is None for s in shapes):
            shape = None
        elif any(s is None for s in shapes) or len({s[1:] for s in shapes}) != 1:
            raise CheckError(f"{at}: a concatenation of images needs images of one height and width (and no "
                             f"vectors), got {[list(s) if s else width for s, width in zip(shapes, widths)]}")
        else:
            shape = (sum(s[0] for s in shapes),) + shapes[0][1:]
    act, _ = _activation(spec.get("activation"), at)
    _degenerate(act, at)
    node = _Node(spec["name"], kind, names, (), act, width, shape)
    return node, graph_node_form(spec, kind, names)


def _graph(value, n_in: int, output, where: str = "model"):
    """The nodes, the output's name and the digest form of a ``"graph"`` (read strictly, docs/graphs.md)."""
    if not isinstance(value, list) or not value:
        raise CheckError(f"{where}: 'graph' must be a non-empty list of nodes")
    known = {"input": (n_in, None, False)}
    nodes, canonical = [], []
    for i, spec in enumerate(value):
        at = f"{where}.graph[{i}]"
        kinds = [k for k in NODE_KEYS if k in _dict(spec, at)]
        if len(kinds) != 1:
            raise CheckError(f'{at}: a node has exactly one of "layers" (a segment), "add", "concat"'
                             + (f", got {', '.join(kinds)}" if kinds else ""))
        check_keys(spec, at, *NODE_KEYS[kinds[0]])
        _name(spec.get("name"), f"{at}.name", known)
        node, form = _segment(spec, at, known) if kinds[0] == "layers" else _join(spec, kinds[0], at, known)
        nodes.append(node)
        canonical.append(form)
        # affine: a segment ending without an activation, or a join without one that reads an affine node (an
        # addition: only affine nodes; one input of known action gives the sum that action)
        known[node.name] = (node.width, node.shape, node.act is None and (
            node.kind == "layers" or (all if node.kind == "add" else any)(known[i][2] for i in node.inputs)))
    output = nodes[-1].name if output is None else output
    if not isinstance(output, str) or output not in known or output == "input":
        raise CheckError(f"{where}.output: {_short(output)} is not a node of the graph")
    live, order = {output}, {n.name: n for n in nodes}
    for node in reversed(nodes):
        if node.name in live:
            live.update(node.inputs)
    dead = [n.name for n in nodes if n.name not in live]
    if dead:
        raise CheckError(f"{where}: node(s) {', '.join(dead)} lie on no path from \"input\" to the output "
                         f"{output!r} (dead nodes are refused)")
    return tuple(nodes), output, tuple(canonical), order


def read_graph_model(model) -> GraphModel:
    """A ``symeq-model/1`` file in the graph form, read strictly (docs/graphs.md)."""
    n_in = _model_header(model)
    if "graph" not in model:
        raise CheckError("model: not a graph model (it has \"layers\")")
    nodes, output, canonical, order = _graph(model.get("graph"), n_in, model.get("output"))
    group = model.get("group")
    if group is not None:
        group = _group(group, n_in, order[output].width, "model group")
    return GraphModel(n_in, nodes, output, group, canonical)


def graph_digest(gm: GraphModel) -> str:
    """``graph_sha256`` (docs/graphs.md): SHA-256 of the graph's digest form 2."""
    return graph_digest_of(list(gm.canonical), gm.n_in, gm.output)


# ----------------------------------------------------------------------------- forward passes

def _join_value(node: _Node, values: list, zero, add, apply):
    if node.kind == "add":
        s = list(values[0])
        for v in values[1:]:
            s = [add(a, b) for a, b in zip(s, v)]
    else:
        s = [a for v in values for a in v]
    return tuple(s) if node.act is None else tuple(apply(node.act, a) for a in s)


def _forward(gm: GraphModel, x) -> tuple:
    """f(x) exactly (Fractions), node by node."""
    vals = {"input": tuple(x)}
    for node in gm.nodes:
        if node.kind == "layers":
            vals[node.name] = _evaluate(list(node.layers), vals[node.inputs[0]])
        else:
            vals[node.name] = _join_value(node, [vals[n] for n in node.inputs], Fraction(0),
                                          lambda a, b: a + b, _apply)
    return vals[gm.output]


def _iv_forward(gm: GraphModel, x, bits: int) -> list:
    """An enclosure of f(x) for exact x (the checker's intervals, rounded outward)."""
    vals = {"input": [(v, v) for v in x]}
    for node in gm.nodes:
        if node.kind != "layers":
            vals[node.name] = list(_join_value(node, [vals[n] for n in node.inputs], None,
                                               lambda a, b: (a[0] + b[0], a[1] + b[1]),
                                               lambda act, a: _interval_apply(act, _iv_round(a, bits), bits)))
            continue
        ys = vals[node.inputs[0]]
        for layer in node.layers:
            if layer.pools:
                ys = [(max(ys[i][0] for i in w), max(ys[i][1] for i in w)) for w in layer.windows]
                continue
            if layer.kernels:  # on integers, its taps read once per output pixel
                ys = [_interval_apply(layer.act, _iv_round(a, bits), bits) for a in _iv_conv(layer, ys)]
                continue
            out = []
            for terms, b in _affine_rows(layer):
                lo = hi = b
                for i, w in terms:
                    yl, yh = ys[i]
                    if w > 0:
                        lo, hi = lo + w * yl, hi + w * yh
                    elif w < 0:
                        lo, hi = lo + w * yh, hi + w * yl
                out.append(_interval_apply(layer.act, _iv_round((lo, hi), bits), bits))
            ys = out
        vals[node.name] = ys
    return vals[gm.output]


def _affine_rows(layer):
    """Per output neuron, its (input index, weight) pairs and its bias (a conv2d's from its taps, sparse)."""
    if not layer.kernels:
        for row, b in zip(layer.weight, layer.bias):
            yield [(i, w) for i, w in enumerate(row) if w], b
        return
    src = layer.sources()
    for o, r in enumerate(layer.rows):
        for q in range(len(src[0])):
            yield [(src[t][q], w) for t, w in enumerate(r) if w and src[t][q] >= 0], layer.bias[o]


def _dense(layer) -> _Layer:
    """A layer as a dense exact map (a conv2d's matrix built from its taps, under :data:`MAX_DENSE`)."""
    if not layer.kernels:
        return layer
    src, n_in = layer.sources(), layer.in_shape[0] * layer.in_shape[1] * layer.in_shape[2]
    if layer.out_dim * n_in > MAX_DENSE:
        raise _TooLarge(f"a conv2d layer of {layer.out_dim} x {n_in} entries is larger than this checker's graph "
                        f"check builds ({MAX_DENSE})")
    npix, rows, zero = len(src[0]), [], Fraction(0)
    for o, r in enumerate(layer.rows):
        for q in range(npix):
            row = [zero] * n_in
            for t, w in enumerate(r):
                if w and src[t][q] >= 0:
                    row[src[t][q]] += w
            rows.append(tuple(row))
    return _Layer(tuple(rows), tuple(b for b in layer.bias for _ in range(npix)), layer.act, layer.label)


class _TooLarge(Exception):
    """A size guard: nothing this checker re-verifies (exit 3), not a rejection."""


# ----------------------------------------------------------------------------- the certificate

def graph_spaces(gm: GraphModel) -> list:
    """(name, node, layer index or None, width, shape, activation) of every space but ``input``, in file order
    (docs/graphs.md, "Spaces"); the last one is the output node's (G acts there), the others are hidden."""
    out = []
    for node in gm.nodes:
        if node.kind == "layers":
            for j, layer in enumerate(node.layers, 1):
                image = layer.image and (j < len(node.layers) or node.shape is not None)
                out.append((f"{node.name}.{j}" if j < len(node.layers) else node.name, node, j, _out_dim(layer),
                            tuple(layer.out_shape) if image else None, layer.act))
        else:
            out.append((node.name, node, None, node.width, node.shape, node.act))
    last = max(i for i, s in enumerate(out) if s[1].name == gm.output)
    return out[:last] + out[last + 1:] + [out[last]]


def _space_action(value, n: int, shape, where: str):
    """One action on a space: the chain's JSON forms, or (on an image) a channel-pixel action."""
    if isinstance(value, dict) and value.get("kind") == "channel-pixel" and shape is not None:
        src, fac, pix = _channel_pixel(value, shape, where)
        P = shape[1] * shape[2]
        return tuple(((src[c] * P + pix[p], fac[c]),) for c in range(shape[0]) for p in range(P))
    return _action(value, n, where, None, True)


def _read_actions(report: CheckReport, cert: dict, hidden: list, group: list):
    """Per hidden space, per generator: (sparse action, offset or None); None after a reason."""
    actions, offsets = cert.get("latent_actions"), cert.get("latent_offsets")
    for key, value in (("latent_actions", actions), ("latent_offsets", offsets)):
        if not (value is None and key == "latent_offsets") and (not isinstance(value, list) or len(value) != len(hidden)):
            report.reasons.append(f"{key} must list one entry per hidden space ({len(hidden)}, in the order of "
                                  f"\"spaces\")")
            return None
    out = []
    for i, (name, _, _, n, shape, act) in enumerate(hidden):
        entry = actions[i]
        offs = None if offsets is None else offsets[i]
        if not isinstance(entry, list) or len(entry) != len(group) or (
                offs is not None and (not isinstance(offs, list) or len(offs) != len(group))):
            report.reasons.append(f"space {name}: one action (and offset) per generator ({len(group)}) is needed")
            return None
        row = []
        for g, value in enumerate(entry):
            m = _space_action(value, n, shape, f"certificate.latent_actions[{i}][{g}]")
            if isinstance(m, str):
                report.reasons.append(f"space {name}, generator {g + 1}: {m}")
                return None
            c = None if offs is None or offs[g] is None else _vector(offs[g], f"latent_offsets[{i}][{g}]", n)
            if act is not None:  # an activation's latent group: (positive) monomial matrices
                why = _monomial_failure(m, act == "relu" or _positive_only(act))
                if why:
                    report.reasons.append(f"space {name}, generator {g + 1}: the action is not in the latent group "
                                          f"of its activation: {why}")
            row.append((m, c if c is not None and any(c) else None))
        out.append(row)
    return out


def _channel_pixel_of(m, shape):
    """A sparse action as (source, factor, pixels) on the image ``shape`` (a channel action times one pixel
    permutation for all channels), or None when it is not of that form."""
    C, H, W = shape
    P = H * W
    if len(m) != C * P or any(len(row) != 1 for row in m):
        return None
    cols, vals = [row[0][0] for row in m], [row[0][1] for row in m]
    pix = tuple(c % P for c in cols[:P])
    src = tuple(cols[c * P] // P for c in range(C))
    fac = tuple(vals[c * P] for c in range(C))
    if any(cols[c * P + q] != src[c] * P + pix[q] or vals[c * P + q] != fac[c] for c in range(C) for q in range(P)):
        return None
    return src, fac, pix


def _on_kernels(layer, p, q, c, o):
    """A conv2d layer checked on its kernels (symeq_check.conv) when both actions are channel-pixel actions and
    there are no offsets: the reason it fails, or "" when it holds; None when the dense check must decide."""
    if not layer.kernels or (c is not None and any(c)) or (o is not None and any(o)):
        return None
    pc, qc = _channel_pixel_of(p, layer.in_shape), _channel_pixel_of(q, layer.out_shape)
    if pc is None or qc is None:
        return None
    return _conv_failure(layer, pc, qc) or ""  # "": verified on the kernels


def _pool_failure(layer: _Pool, p, q, c, o) -> str | None:
    """Why max(P x + c) = Q max(x) + o fails (sparse P, Q; docs/conv.md "Pooling"): P must map each window
    onto the window of Q's neuron with Q's factor on all of it, positive on a window of more than one entry."""
    if (c is not None and any(c)) or (o is not None and any(o)):
        return "a pooling layer admits no offsets"
    for j, win in enumerate(layer.windows):
        if len(q[j]) != 1 or any(len(p[i]) != 1 for i in win):
            return f"neuron {j + 1}: the actions are not monomial on its window"
        (k, f), image = q[j][0], [p[i][0] for i in win]
        if sorted(col for col, _ in image) != sorted(layer.windows[k]):
            return f"neuron {j + 1}: P does not map its window onto the window of Q's neuron"
        if {x for _, x in image} != {f}:
            return f"neuron {j + 1}: the factors of P on its window differ from Q's factor {f}"
        if (len(win) > 1 or len(layer.windows[k]) > 1) and not f > 0:
            return f"neuron {j + 1}: a non-positive factor {f} on a window of {len(win)} (a maximum needs positive ones)"
    return None


def _join_failure(node: _Node, ins: list, q, o, widths: list) -> str | None:
    """Why node(rho_in x) = Q node(x) + o fails, for its inputs' actions ``ins`` [(sparse, offset)]."""
    if node.kind == "add":
        m = ins[0][0]
        if any(a != m for a, _ in ins[1:]):
            return "the inputs' actions differ (an addition needs one action on all its inputs)"
    else:  # block-diagonal sum
        m, base = [], 0
        for (a, _), w in zip(ins, widths):
            m.extend(tuple((col + base, x) for col, x in row) for row in a)
            base += w
        m = tuple(m)
    if node.kind == "add":
        c = [sum(v) for v in zip(*[(off or (Fraction(0),) * len(m)) for _, off in ins])]
    else:
        c = [v for (_, off), w in zip(ins, widths) for v in (off or (Fraction(0),) * w)]
    o = o or (Fraction(0),) * len(m)
    if node.act is None:
        return None if m == q and tuple(c) == tuple(o) else "the action on the inputs is not the node's action"
    for j, (row, qrow) in enumerate(zip(m, q)):
        if len(row) != 1 or len(qrow) != 1 or row[0][0] != qrow[0][0]:
            return f"neuron {j + 1}: the inputs' action and the node's do not send it to one neuron"
        why = _neuron_failure(node.act, (row[0][1],), (Fraction(1),), c[j], Fraction(0), qrow[0][1], o[j])
        if why:
            return f"neuron {j + 1} (activation of the {node.kind}): {why}"
    return None


def _check_nodes(report: CheckReport, gm: GraphModel, spaces: list, rho: dict, group: list) -> None:
    """Every node of the graph, for every generator, with the actions ``rho[space][g]`` = (sparse, offset)."""
    last_space, spaces_of = {"input": "input"}, {}
    for name, node, j, *_ in spaces:
        last_space[node.name] = name
        spaces_of.setdefault(node.name, []).append(name)
    for g in range(len(group)):
        for name, node, j, n, shape, act in spaces:
            q, o = rho[name][g]
            if name == spaces[-1][0] and act is not None:
                why = _monomial_failure(q, act == "relu" or _positive_only(act))
                if why:
                    report.reasons.append(f"space {name}, generator {g + 1}: G's output matrix is not in the latent "
                                          f"group of the output's activation: {why}")
                    continue
            if j is None:
                why = _join_failure(node, [rho[last_space[i]][g] for i in node.inputs], q, o,
                                    [next(s[3] for s in spaces if s[0] == last_space[i]) if i != "input" else gm.n_in
                                     for i in node.inputs])
            else:
                prev = last_space[node.inputs[0]] if j == 1 else spaces_of[node.name][j - 2]
                p, c = rho[prev][g]
                layer = node.layers[j - 1]
                if layer.pools:
                    why = _pool_failure(layer, p, q, c, o)
                else:  # a conv2d on its kernels when it can, else the dense check
                    why = _on_kernels(layer, p, q, c, o)
                    why = _layer_failure(_dense(layer), p, q, act is None, c, o) if why is None else why
            if why:
                report.reasons.append(f"space {name}, generator {g + 1}: {why}")
            else:
                report.checks.append(f"space {name}, generator {g + 1}: node {node.name!r} "
                                     f"({'layer ' + str(j) if j else node.kind}) equivariant, verified exactly")


def _check_graph_layerwise(report: CheckReport, cert: dict, gm: GraphModel, group: list, cap: int) -> None:
    spaces = graph_spaces(gm)
    hidden = spaces[:-1]
    claimed = cert.get("spaces")
    names = [s[0] for s in hidden]
    if claimed != names:
        report.reasons.append(f"spaces must name the hidden spaces in file order: {names}, got {_short(claimed)}")
        return
    read = _read_actions(report, cert, hidden, group)
    if read is None or report.reasons:
        return
    rho = {"input": [(_sparse(p), None) for p, _ in group]}
    rho.update((s[0], row) for s, row in zip(hidden, read))
    rho[spaces[-1][0]] = [(_sparse(q), None) for _, q in group]
    try:
        _check_nodes(report, gm, spaces, rho, group)
    except _TooLarge as exc:
        report.checks.append(f"nothing this checker can re-verify: {exc}")
        report.unverifiable = True
        return
    for g, (p, _) in enumerate(group):
        if not _invertible(p):
            report.reasons.append(f"generator {g + 1}: input matrix is singular (not a group element)")
    if report.reasons:
        return

    def augmented(m, c):  # y -> M y + c as [[M, c], [0, 1]]
        if c is None:
            return m
        k = len(m)
        return tuple(row + (((k, c[r]),) if c[r] else ()) for r, row in enumerate(m)) + (((k, Fraction(1)),),)

    # spaces acted on alike by every generator stay alike in the whole group: one of them is enumerated
    columns = list(dict.fromkeys(tuple(augmented(*rho[s][g]) for g in range(len(group)))
                                 for s in ["input"] + [s[0] for s in spaces]))
    if len(columns) < len(spaces) + 1:
        report.checks.append(f"homomorphism: {len(spaces) + 1} spaces, {len(columns)} distinct tuples of actions "
                             "(equal ones are enumerated once)")
    _homomorphism(report, [tuple(col[g] for col in columns) for g in range(len(group))], cap)


def _check_parameters(report: CheckReport, cert: dict, gm: GraphModel, verdict: str) -> bool:
    """The certificate's graph is the model's (its digest, its copy); False after a reason."""
    params = _dict(cert.get("parameters"), "certificate parameters")
    check_keys(params, "certificate.parameters", *GRAPH_PARAMETER_KEYS)
    if params.get("graph_sha256") != graph_digest(gm):
        report.reasons.append(f"{PARAMS_DIFFER}: the certificate's digest of the graph (graph_sha256) is not the "
                              "model's (a certificate of another model, or a changed model file)")
        report.mismatch = True
        return False
    if params.get("graph") is not None:
        nodes, output, _, _ = _graph(params["graph"], gm.n_in, params.get("output"), "certificate.parameters")
        def key(ns):  # what a node computes (an image of C x 1 x 1 and a vector of C are one value)
            return [(n.name, n.kind, n.inputs, n.layers, n.act) for n in ns]

        if (key(nodes), output) != (key(gm.nodes), gm.output):
            report.reasons.append(f"{PARAMS_DIFFER}: the certificate's copy of the graph is not the model's "
                                  "(it contradicts its own graph_sha256: tampered)")
            return False
    if params.get("reparametrized") is not False and verdict == "layerwise-equivariant":
        report.checks.append("nothing this checker can re-verify: a re-parametrized graph (theta' != theta)")
        report.unverifiable = True
        return False
    report.checks.append(f"parameters: the model's graph ({len(gm.nodes)} nodes, graph_sha256 equal)")
    return True


def check_graph_certificate(cert: dict, model: dict, *, max_group_size: int = 10000) -> CheckReport:
    """The checker of a ``symeq-certificate/2`` of a graph model (docs/graphs.md, docs/certificates.md)."""
    gm = read_graph_model(model)
    verdict = cert.get("verdict")
    if verdict not in VERIFIABLE + UNVERIFIABLE:
        raise CheckError(f"certificate: unknown verdict {_short(verdict)}")
    if cert.get("format") != CERT_FORMAT:
        raise CheckError(f"certificate: a graph model's certificate has format {CERT_FORMAT!r}")
    required = CERT_REQUIRED.get(verdict, ("format", "verdict"))
    check_keys(cert, "certificate", GRAPH_CERT_KEYS,
               required + (("spaces",) if verdict == "layerwise-equivariant" else ()))
    if cert.get("checks") is not None:
        check_keys(_dict(cert["checks"], "certificate checks"), "certificate.checks", *GRAPH_CHECKS_KEYS)
    report = CheckReport(None, verdict)
    if _count(cert.get("input_dim"), "certificate input_dim", 1) != gm.n_in:
        report.reasons.append(f"certificate input_dim {cert.get('input_dim')} differs from the model's {gm.n_in}")
        report.accepted, report.mismatch = False, True
        return report
    n_out = next(n.width for n in gm.nodes if n.name == gm.output)
    group = _group(cert.get("group"), gm.n_in, n_out, "certificate group")
    if gm.group is not None and gm.group != group:
        report.reasons.append("the model's group differs from the certificate's")
        report.mismatch = True
    eq = cert.get("equivariance")
    eq = {} if eq is None else _dict(eq, "certificate equivariance")
    check_keys(eq, "certificate.equivariance", EQUIVARIANCE_KEYS, ("witness",) if verdict == "not-equivariant" else ())
    if verdict in UNVERIFIABLE:
        report.checks.append(f"nothing this checker can re-verify: {verdict}")
        report.accepted = False if report.reasons else None
        return report
    expected = verdict == "layerwise-equivariant"
    if eq.get("holds") is not None and eq.get("holds") is not expected:
        report.reasons.append(f"equivariance.holds = {eq.get('holds')} contradicts the verdict")
    if not report.mismatch and (cert.get("parameters") is None and not expected
                                or _check_parameters(report, cert, gm, verdict)):
        if expected:
            _check_graph_layerwise(report, cert, gm, group, max_group_size)
        else:
            _check_witness(report, eq, gm.n_in, gm, group, interval_forward=_iv_forward)
    report.note_identifiability(cert)
    report.accepted = None if (getattr(report, "unverifiable", False) and not report.reasons) else not report.reasons
    return report
