"""torch modules that are not chains, read by torch.fx symbolic tracing into float graph models.

:func:`from_torch_graph` traces a module given in-process (``torch.fx.symbolic_trace``: the module's
``forward`` runs once on proxies; no code is read from a file) and reads its graph as a
:class:`symeq.graph.GraphModel` (docs/graphs.md):

* leaf modules (``Conv2d``, ``Linear``, ``BatchNorm``, activations, pooling, ``Flatten``, ``Dropout``,
  ...) and the functions ``torch.relu``/``tanh``/``sigmoid``, ``F.relu``/``gelu``/``silu``/...,
  ``torch.flatten(x, 1)`` and ``x.mean(dim=(2, 3))`` (a global average pooling) are the modules of a
  branch;
* ``x + y`` (``operator.add``, ``torch.add``, ``x.add(y)``) of two activations is an addition and
  ``torch.cat([...], dim=1)`` a concatenation; the activation that alone reads the result is theirs;
* a branch (the modules between two places where the graph branches or joins) is read by
  :func:`symeq.numeric.models.from_torch` as a ``Sequential``, with every fold it knows.

A traced graph without additions, concatenations or branching gives None (the caller reads the module
as a chain); anything else a trace holds (``x * y``, ``x - y``, a constant added to an activation, a
method symeq does not read) is refused by name, with the traced node and a one-line reason.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import InputError

__all__ = ["from_torch_graph", "from_torch_traced"]

#: torch functions and tensor methods read as activation modules (by the module class's name)
_ACTIVATION_FUNCTIONS = {"relu": "ReLU", "tanh": "Tanh", "sigmoid": "Sigmoid", "gelu": "GELU", "silu": "SiLU",
                         "softplus": "Softplus", "elu": "ELU", "leaky_relu": "LeakyReLU"}
_REFUSED_FUNCTIONS = {
    "mul": "a product of two branches (or of a branch and a constant) is not a layer of symeq's graph models",
    "sub": "a difference of two branches is not read (only additions and concatenations join branches)",
    "truediv": "a quotient is not a layer of symeq's graph models",
    "matmul": "a product of two activations is not read in graphs",
    "view": "reshape with x.flatten(1) or nn.Flatten (x.view reads the batch size, which tracing cannot fix)",
    "reshape": "reshape with x.flatten(1) or nn.Flatten",
}


def _fname(target) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


class _Item:
    """One traced node: ``kind`` "input", "module" (``mods``: the modules it stands for), "add", "concat"
    or "output"; ``args`` the traced nodes it reads."""

    def __init__(self, kind, args, label, mods=()):
        self.kind, self.args, self.label, self.mods = kind, list(args), label, list(mods)


def _item(node, module, torch) -> _Item:
    """The item of one traced node, or an InputError naming it."""
    label = f"traced node {node.name!r}"
    fx = torch.fx.Node
    nodes = [a for a in node.args if isinstance(a, fx)]
    if node.op == "placeholder":
        return _Item("input", [], label)
    if node.op == "output":
        return _Item("output", nodes, label)
    if node.op == "call_module":
        return _Item("module", nodes, f"module {node.target}", [module.get_submodule(node.target)])
    name = _fname(node.target)
    if name in ("add", "iadd", "__add__"):
        consts = [a for a in node.args if not isinstance(a, fx)]
        if consts or len(nodes) != 2 or node.kwargs:
            raise InputError(f"{label} ({name}): an addition of an activation and a constant (or with alpha) is not a "
                             "layer's bias; symeq reads additions of two branches")
        return _Item("add", nodes, label)
    if name in ("cat", "concat"):
        parts = node.args[0] if node.args else node.kwargs.get("tensors")
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if dim not in (1, -3) or not all(isinstance(p, fx) for p in parts):
            raise InputError(f"{label} (torch.cat): symeq reads a concatenation of branches along dim 1 (channels or "
                             f"features), got dim {dim}")
        return _Item("concat", list(parts), label)
    if len(nodes) != 1:
        raise InputError(f"{label} ({name}): " + _REFUSED_FUNCTIONS.get(name, "reads two activations; only additions "
                                                                              "and torch.cat join branches"))
    return _Item("module", nodes, label, _function_modules(node, name, label, torch))


def _function_modules(node, name: str, label: str, torch) -> list:
    """The modules a traced function or method call stands for."""
    nn = torch.nn
    extra = [a for a in node.args[1:]] + list(node.kwargs.values())
    if name in _ACTIVATION_FUNCTIONS and not extra:
        return [getattr(nn, _ACTIVATION_FUNCTIONS[name])()]
    if name == "flatten" and list(node.args[1:]) in ([1], []) and not node.kwargs and \
            (len(node.args) > 1 or node.op == "call_function"):
        return [nn.Flatten()]
    if name == "mean":
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keep = node.kwargs.get("keepdim", False)
        if dim is not None and sorted(d % 4 for d in dim) == [2, 3]:
            return [nn.AdaptiveAvgPool2d(1)] + ([] if keep else [nn.Flatten()])
    raise InputError(f"{label} ({name}): " + _REFUSED_FUNCTIONS.get(
        name, "symeq reads modules, torch.relu/tanh/sigmoid and F.gelu/silu/..., torch.flatten(x, 1), "
              "x.mean(dim=(2, 3)), additions and torch.cat in a traced forward"))


def _trace(module, torch):
    try:
        return torch.fx.symbolic_trace(module)
    except Exception as e:  # data-dependent control flow and the like: no graph to read
        raise InputError(f"{type(module).__name__}: torch.fx cannot trace its forward ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:160] if str(e) else ''}); symeq reads modules whose forward is a "
                         "fixed graph of modules, additions and torch.cat") from None


def _segment_layers(mods: list, labels: list, shape, reader):
    """The float layers of one branch (modules in order) read by from_torch, and its output shape.

    A branch may end with an activation: from_torch reads Sequentials that end affine, so an identity
    layer (a 1x1 convolution on images, a Linear on vectors) is appended and taken off again; what
    would fold into it (a pooling or BatchNorm at the branch's end) is refused."""
    import copy

    torch = reader.torch
    mods = [copy.deepcopy(m).double() for m in mods]  # the caller's modules stay as they are
    width = int(np.prod(shape)) if shape is not None else None
    tail = None
    acts = set(_activation_classes())
    if type(mods[-1]).__name__ in acts:
        out = _out_shape(mods, shape, torch)
        if out is not None and len(out) == 3:
            tail = torch.nn.Conv2d(out[0], out[0], 1)
            with torch.no_grad():
                tail.weight.copy_(torch.eye(out[0]).reshape(out[0], out[0], 1, 1))
                tail.bias.zero_()
        else:
            n = out[0] if out is not None else width
            tail = torch.nn.Linear(n, n)
            with torch.no_grad():
                tail.weight.copy_(torch.eye(n))
                tail.bias.zero_()
    seq = torch.nn.Sequential(*(mods + ([tail.double()] if tail is not None else [])))
    try:
        m = reader.chain(seq, input_shape=shape if shape is not None and len(shape) == 3 else None)
    except InputError as e:
        raise InputError(f"the branch of {', '.join(labels)} (numbered from 0 in this message): {e}") from None
    layers = list(m.layers)
    notes = list(m.meta.get("reader_notes", []))
    if tail is not None:
        last = layers.pop()
        eye = np.eye(last.out_dim)
        dense = getattr(last, "weight", None)
        if dense is None or dense.shape != eye.shape or np.any(dense != eye) or np.any(last.bias != 0):
            raise InputError(f"{labels[-1]}: a pooling or BatchNorm at the end of a branch, after its last activation, "
                             "has no linear layer in the branch to fold into")
    return layers, notes, m.meta.get("output_op")


def _activation_classes():
    from ..activations.registry import torch_activation_classes

    return torch_activation_classes()


def _out_shape(mods, shape, torch):
    """The (C, H, W) or (n,) shape after the modules, from a zero batch (the branch's modules only)."""
    x = torch.zeros((1,) + tuple(shape if shape is not None else ()), dtype=torch.float64)
    with torch.no_grad():
        for m in mods:
            x = m(x)
    return tuple(x.shape[1:])


def _name(label: str, taken: set) -> str:
    s = re.sub(r"[^A-Za-z0-9_-]+", "_", label.replace("module ", "").replace("traced node ", "")).strip("_-") or "node"
    if not re.match(r"[A-Za-z_]", s):
        s = f"m_{s}"
    name, k = s, 1
    while name in taken or name == "input":
        k += 1
        name = f"{s}_{k}"
    taken.add(name)
    return name


def _walk(items: dict, order: list, users: dict, shape, reader):
    """The graph nodes of a traced module: (nodes, names of traced nodes, notes, output_op)."""
    from ..activations.registry import spec_from_torch
    from ..graph import Node

    joined = {a for n in order if items[n].kind in ("add", "concat", "output") for a in items[n].args}
    cut = {n for n in order if items[n].kind == "input" or n in joined or len(users[n]) != 1}
    acts = set(_activation_classes())
    named, done, nodes, notes, taken, output_op = {}, set(), [], [], set(), None
    for n in order:
        it = items[n]
        if it.kind == "input":
            named[n] = ("input", shape)
        elif it.kind in ("add", "concat") or (it.kind == "module" and n not in done):
            missing = [a for a in it.args if a not in named]
            if missing:
                raise InputError(f"{it.label}: reads {missing[0].name!r}, which symeq did not read as a branch")
            if it.kind == "module":
                chain = [n]
                while chain[-1] not in cut and items[users[chain[-1]][0]].kind == "module":
                    chain.append(users[chain[-1]][0])
                done.update(chain)
                src_name, src_shape = named[it.args[0]]
                labels = [items[c].label for c in chain]
                layers, seg_notes, op = _segment_layers([m for c in chain for m in items[c].mods], labels,
                                                        src_shape, reader)
                output_op, notes = op or output_op, notes + seg_notes
                seg, prev = _name(labels[0], taken), src_name
                for j, layer in enumerate(layers, 1):  # segment N: layer nodes N.1, ..., N (docs/graphs.md)
                    prev_next = seg if j == len(layers) else f"{seg}.{j}"
                    nodes.append(Node(prev_next, layer.kind, (prev,), layer=layer, segment=seg, index=j))
                    prev = prev_next
                last = layers[-1]
                named[chain[-1]] = (prev, tuple(last.out_shape) if hasattr(last, "out_shape") else (last.out_dim,))
                continue
            out, act = n, None
            u = users[n][0] if n not in cut else None
            if u is not None and items[u].kind == "module" and len(items[u].mods) == 1 and \
                    type(items[u].mods[0]).__name__ in acts:
                mod = items[u].mods[0]
                act = reader.activation(spec_from_torch(mod, type(mod).__name__, items[u].label))
                out = u
                done.add(u)
            ins = [named[a][0] for a in it.args]
            shapes = [named[a][1] for a in it.args]
            if it.kind == "concat" and any(len(s_) != len(shapes[0]) or s_[1:] != shapes[0][1:] for s_ in shapes):
                raise InputError(f"{it.label} (torch.cat): branches of shapes {shapes}; images need one height and "
                                 "width")
            sh = shapes[0] if it.kind == "add" else (sum(s_[0] for s_ in shapes),) + tuple(shapes[0][1:])
            jname = _name(it.label, taken)
            nodes.append(Node(jname, it.kind, tuple(ins), activation=act))
            named[out] = (jname, sh)
            notes.append(f"{it.label}: read as the {'addition' if it.kind == 'add' else 'concatenation'} of "
                         f"{', '.join(ins)}" + ("" if act is None else f", then {act.name}"))
    return nodes, named, notes, output_op


def from_torch_graph(module, reader, group=None, name: str = "torch model", input_shape=None):
    """The float graph model of a torch module with additions or concatenations (module docstring), or
    None when its traced graph is a chain.

    ``reader``: what :func:`symeq.numeric.models.from_torch` hands over (``torch``, ``chain``: itself, the
    chain reader of a branch, ``activation``: :func:`~symeq.numeric.models.numeric_activation`);
    ``group`` a float group or None; ``input_shape``: (C, H, W) of an image input, or (n,) of a vector
    input (default: a Linear's in_features when one reads the input)."""
    from ..graph import GraphModel

    torch = reader.torch
    if type(module).__module__.startswith("torch."):  # a layer of torch itself, not a network
        raise InputError(f"expected a torch.nn.Sequential or a module of your own (traced by torch.fx), got "
                         f"{type(module).__name__}")
    gm = _trace(module, torch)
    order = list(gm.graph.nodes)
    items = {n: _item(n, gm, torch) for n in order}
    users = {n: [u for u in order if n in items[u].args] for n in order}
    if not any(items[n].kind in ("add", "concat") for n in order) and \
            all(len(users[n]) <= 1 for n in order if items[n].kind != "output"):
        return None
    shape = None if input_shape is None else tuple(int(v) for v in input_shape)
    if shape is None:
        first = [items[u].mods[0] for n in order if items[n].kind == "input" for u in users[n]
                 if items[u].mods and isinstance(items[u].mods[0], torch.nn.Linear)]
        if not first:
            raise InputError(f"{type(module).__name__}: pass input_shape=(C, H, W) (images) or (n,) (vectors)")
        shape = (first[0].in_features,)
    nodes, named, notes, output_op = _walk(items, order, users, shape, reader)
    out = next(items[n] for n in order if items[n].kind == "output")
    meta = {"reader_notes": notes} if notes else {}
    params = [t for t in module.parameters() if t.is_floating_point()]
    if params:
        meta["weights_dtype"] = str(max((t.dtype for t in params), key=lambda d: torch.finfo(d).eps)).replace("torch.", "")
    if output_op is not None:
        meta["output_op"] = output_op
    return GraphModel(int(np.prod(shape)), nodes, output=named[out.args[0]][0], group=group, name=name,
                      input_shape=shape if len(shape) == 3 else None, meta=meta)


def from_torch_traced(module, reader, group=None, name: str = "torch model", input_shape=None):
    """A module that is not an ``nn.Sequential``, traced: its graph model when the trace branches or joins,
    otherwise the chain of its traced modules read by ``reader.chain`` (:func:`symeq.numeric.models.from_torch`)."""
    graph = from_torch_graph(module, reader, group, name, input_shape)
    if graph is not None:
        return graph
    torch = reader.torch
    gm = _trace(module, torch)
    mods = [m for n in gm.graph.nodes for m in _item(n, gm, torch).mods]
    if not mods:
        raise InputError(f"{type(module).__name__}: its traced forward has no modules symeq reads")
    shape = None if input_shape is None or len(input_shape) != 3 else input_shape
    return reader.chain(torch.nn.Sequential(*mods), group, name, shape)
