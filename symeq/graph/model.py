"""Graph models: a directed acyclic graph of nodes, exact or float by its layers (docs/graphs.md).

One model type for every network that is not a chain (residual blocks, concatenated branches):

* a **layer node** holds one layer of the chain classes (``symeq.layers.*`` exact, ``symeq.numeric``
  float), its ``op`` is the layer's ``kind`` and it has one input.  A segment of a model file is sugar:
  segment ``N`` with k layers is the layer nodes ``N.1``, ..., ``N.(k-1)`` and ``N`` (its last layer),
  named as their spaces in docs/graphs.md;
* a **join node** (``op`` a key of :mod:`symeq.graph.ops.registry`: ``"add"``, ``"concat"``) reads
  nodes (an addition two or more, a concatenation one or more) and has an optional elementwise
  activation.

API: :class:`Node`, :class:`Space`, :class:`GraphModel` (``exact``, ``nodes``, ``output``, ``group``,
``input_dim``, ``output_dim``, ``spaces()``, ``hidden_spaces()``, ``forward``/``__call__`` as the chain
classes (exact: ``fmpq_mat`` columns, like :class:`symeq.models.Model`; float: numpy rows, like
``symeq.numeric.models.NumericModel``), ``ball_forward``, ``with_group``, ``is_chain``, ``as_chain()``,
``GraphModel.from_chain``, ``parameters_count``, ``node(name)``, ``readers(name)``).

Examples
--------
>>> from symeq.models import DenseLayer
>>> from symeq.activations import relu
>>> from symeq.numbers import matrix
>>> stem = Node("stem", "dense", ("input",), layer=DenseLayer(matrix([[1, 0], [0, 1]]), [0, 0], relu()))
>>> block = Node("block", "dense", ("stem",), layer=DenseLayer(matrix([[0, 1], [1, 0]]), [0, 0], None))
>>> total = Node("sum", "add", ("stem", "block"), activation=relu())
>>> g = GraphModel(2, [stem, block, total])
>>> g([1, -2]), g.exact, g.is_chain
([1, 1], True, False)
>>> [s.name for s in g.hidden_spaces()]
['stem', 'block']
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import InputError, ShapeError
from ..layers.registry import supports
from .ops.registry import join_op

__all__ = ["Node", "Space", "GraphModel", "NAME_PATTERN", "INPUT"]

INPUT = "input"
"""The reserved name of the model's input."""

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
"""Node names of a model file; layer nodes inside a segment are named ``N.j`` (docs/graphs.md)."""


@dataclass(frozen=True, eq=False)
class Node:
    """One node: a layer node (``layer`` set, ``op`` its kind, one input) or a join (``op`` a join key,
    ``activation`` an activation or None).  ``segment``/``index``: the model file's segment and the
    layer's place in it (1-based), kept for writing the file back."""

    name: str
    op: str
    inputs: tuple
    layer: Any = None
    activation: Any = None
    segment: str | None = None
    index: int = 1

    @property
    def is_join(self) -> bool:
        return self.layer is None

    @property
    def act(self):
        """The activation applied at the node's output (a layer's or a join's; None: affine)."""
        return self.activation if self.is_join else self.layer.activation


@dataclass(frozen=True)
class Space:
    """A named space of the graph: its size, image shape (C, H, W) or None, and latent group name
    (None: ``input``, the output, or an affine hidden space, whose action is forced)."""

    name: str
    dim: int
    shape: tuple | None
    latent: str | None


def _exact_layer(layer) -> bool:
    return layer.backend.exact


class GraphModel:
    """A graph network (see the module docstring); validated on construction with InputError messages.

    Parameters
    ----------
    input_dim : n_0
    nodes : the nodes in topological order (a node reads ``"input"`` or nodes before it)
    output : the name of the output node (default: the last node)
    group : optional finite group acting on input and output
    name : a label for reports
    input_shape : (C, H, W) when the input is an image (conv2d layers reading it check it)
    """

    def __init__(self, input_dim: int, nodes: Sequence[Node], output: str | None = None, group=None,
                 name: str = "", input_shape: tuple | None = None, meta: dict | None = None):
        self.input_dim = int(input_dim)
        self._nodes = tuple(nodes)
        if not self._nodes:
            raise InputError("a graph model needs at least one node")
        self._output = output if output is not None else self._nodes[-1].name
        self.name = name
        self.input_shape = tuple(input_shape) if input_shape is not None else None
        self.meta = dict(meta or {})
        self._index = {}
        self._dims = {INPUT: self.input_dim}
        self._shapes = {INPUT: self.input_shape}
        self._validate()
        self._group = None
        if group is not None:
            self._check_group(group)
            self._group = group

    # -- structure ---------------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple:
        return self._nodes

    @property
    def output(self) -> str:
        return self._output

    @property
    def group(self):
        return self._group

    @property
    def output_dim(self) -> int:
        return self._dims[self._output]

    @property
    def widths(self) -> list:
        """The input's size, then every node's, in file order (the reports' one-line summary)."""
        return [self.input_dim] + [self._dims[n.name] for n in self._nodes]

    @property
    def layers(self) -> list:
        """The layers of the layer nodes, in node order."""
        return [n.layer for n in self._nodes if not n.is_join]

    @property
    def exact(self) -> bool:
        """Whether the layers are exact (``symeq.layers``) rather than float (``symeq.numeric``)."""
        return _exact_layer(self.layers[0]) if self.layers else self._exact_joins

    @property
    def parameters_count(self) -> int:
        return sum(getattr(l, "n_params", l.in_dim * l.out_dim + l.out_dim) for l in self.layers)

    def node(self, name: str) -> Node:
        return self._nodes[self._index[name]]

    def dim(self, name: str) -> int:
        return self._dims[name]

    def shape(self, name: str) -> tuple | None:
        return self._shapes[name]

    def readers(self, name: str) -> list:
        """The nodes that read ``name``, in order."""
        return [n for n in self._nodes if name in n.inputs]

    def spaces(self) -> list:
        """Every space: ``input``, then one per node in file order (the output node's included)."""
        out = [Space(INPUT, self.input_dim, self.input_shape, None)]
        for n in self._nodes:
            act = n.act
            latent = None if (act is None or n.name == self._output) else act.latent_group
            out.append(Space(n.name, self._dims[n.name], self._shapes[n.name], latent))
        return out

    def hidden_spaces(self) -> list:
        """All spaces but ``input`` and the output node's, in file order."""
        return [s for s in self.spaces()[1:] if s.name != self._output]

    @property
    def is_chain(self) -> bool:
        """Layer nodes only, each reading the one before it, the last one the output."""
        prev = INPUT
        for n in self._nodes:
            if n.is_join or n.inputs != (prev,):
                return False
            prev = n.name
        return prev == self._output

    def as_chain(self):
        """The same network as a chain: :class:`symeq.models.Model` (exact) or ``NumericModel`` (float)."""
        if not self.is_chain:
            raise InputError("this graph model is not a chain (it has joins or branches)")
        if self.exact:
            from ..models import Model
            return Model(self.input_dim, [l.copy() for l in self.layers], self._group, self.name or "model",
                         dict(self.meta))
        # float layers live in symeq.numeric (level 5, above this one): their module is loaded
        # whenever a float layer exists, so it is looked up, not imported
        NumericModel = sys.modules["symeq.numeric.models"].NumericModel
        return NumericModel(self.input_dim, list(self.layers), self._group, self.name or "model", dict(self.meta))

    @classmethod
    def from_chain(cls, model, segment: str = "chain") -> "GraphModel":
        """A chain model (exact or float) as a graph of one segment named ``segment``."""
        nodes, prev = [], INPUT
        for j, layer in enumerate(model.layers, 1):
            name = segment if j == len(model.layers) else f"{segment}.{j}"
            nodes.append(Node(name, layer.kind, (prev,), layer=layer, segment=segment, index=j))
            prev = name
        shape = getattr(model.layers[0], "in_shape", None) if supports(model.layers[0], "image-output") else None
        return cls(model.input_dim, nodes, prev, model.group, getattr(model, "name", ""), shape,
                   dict(getattr(model, "meta", {}) or {}))

    def with_group(self, group) -> "GraphModel":
        return GraphModel(self.input_dim, self._nodes, self._output, group, self.name, self.input_shape, self.meta)

    def __repr__(self) -> str:
        kind = "exact" if self.exact else "float"
        return f"GraphModel({self.name!r}, {kind}, {len(self._nodes)} nodes, {self.input_dim}->{self.output_dim})"

    # -- evaluation --------------------------------------------------------------------------------
    def values(self, X) -> dict:
        """Every node's value on the batch X (exact: ``fmpq_mat`` columns; float: numpy rows)."""
        vals = {INPUT: X}
        exact = self.exact
        for n in self._nodes:
            if n.is_join:
                op = join_op(n.op)
                Z = op.exact([vals[i] for i in n.inputs]) if exact else op.floating([vals[i] for i in n.inputs])
                vals[n.name] = _apply(n.activation, Z, exact)
            else:
                vals[n.name] = n.layer.forward(vals[n.inputs[0]])
        return vals

    def forward(self, X):
        """The network on a batch: exact ``fmpq_mat`` (one column per point) or float array (one row per point)."""
        if self.exact:
            if X.nrows() != self.input_dim:
                raise ShapeError(f"the model takes inputs of size {self.input_dim}, got {X.nrows()}")
            return self.values(X)[self._output]
        import numpy as np
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.input_dim:
            raise ShapeError(f"the model takes batches of shape (N, {self.input_dim}), got {X.shape}")
        return self.values(X)[self._output]

    def __call__(self, x):
        if self.exact:
            from flint import fmpq_mat
            from ..numbers import as_fmpq
            if len(x) != self.input_dim:
                raise ShapeError(f"the model takes inputs of size {self.input_dim}, got {len(x)}")
            return self.forward(fmpq_mat(len(x), 1, [as_fmpq(v) for v in x])).entries()
        import numpy as np
        X = np.asarray(x, dtype=np.float64)
        return self.forward(X[None, :])[0] if X.ndim == 1 else self.forward(X)

    def ball_forward(self, y: list) -> list:
        """The network on arb balls (a list, one ball per coordinate); every layer must declare
        ``ball-evaluation`` (refused by name otherwise)."""
        from ..layers.registry import require
        require(self.layers, "ball-evaluation", "ball evaluation")
        vals = {INPUT: list(y)}
        for n in self._nodes:
            if n.is_join:
                z = join_op(n.op).ball([vals[i] for i in n.inputs])
                vals[n.name] = z if n.activation is None else [n.activation.ball(t) for t in z]
            else:
                vals[n.name] = n.layer.ball_forward(vals[n.inputs[0]])
        return vals[self._output]

    # -- validation --------------------------------------------------------------------------------
    def _validate(self) -> None:
        exact = None
        for pos, n in enumerate(self._nodes):
            where = f"node {n.name!r}"
            if n.name == INPUT or n.name in self._index:
                raise InputError(f"{where}: " + ("\"input\" is reserved" if n.name == INPUT else "duplicate name"))
            for i in n.inputs:
                if i not in self._dims:
                    raise InputError(f"{where} reads {i!r}, which is not \"input\" nor a node listed before it")
            if n.is_join:
                self._validate_join(n, where)
            else:
                self._validate_layer(n, where)
                if exact is None:
                    exact = _exact_layer(n.layer)
                elif exact != _exact_layer(n.layer):
                    raise InputError(f"{where}: a graph model has exact layers only or float layers only")
            self._index[n.name] = pos
        self._exact_joins = exact if exact is not None else True
        if self._output not in self._index:
            raise InputError(f"the output {self._output!r} is not a node of the graph")
        self._validate_reach()
        self._validate_affine()

    def _validate_layer(self, n: Node, where: str) -> None:
        layer = n.layer
        if len(n.inputs) != 1:
            raise InputError(f"{where}: a layer node has one input, got {len(n.inputs)}")
        if supports(layer, "token-mixing"):
            raise InputError(f"{where}: {layer.kind} layers mix tokens and are not allowed in graph models")
        src = n.inputs[0]
        if layer.in_dim != self._dims[src]:
            raise ShapeError(f"{where} expects inputs of size {layer.in_dim}, but {src!r} has size {self._dims[src]}")
        in_shape = getattr(layer, "in_shape", None) if supports(layer, "image-output") else None
        if in_shape is not None and self._shapes[src] is not None and tuple(in_shape) != tuple(self._shapes[src]):
            raise ShapeError(f"{where} expects images of shape {list(in_shape)}, but {src!r} has shape "
                             f"{list(self._shapes[src])}")
        act = layer.activation
        if act is not None and getattr(act, "symmetry", None) in ("affine", "constant"):
            raise InputError(f"{where} has a {act.symmetry} activation: its latent symmetry group is not a group "
                             "of monomial matrices; use a polynomial of degree >= 2 or relu")
        self._dims[n.name] = layer.out_dim
        self._shapes[n.name] = tuple(layer.out_shape) if supports(layer, "image-output") else None

    def _validate_join(self, n: Node, where: str) -> None:
        op = join_op(n.op)
        if len(n.inputs) < op.min_inputs:
            raise InputError(f"{where}: {n.op!r} needs at least {op.min_inputs} inputs, got {len(n.inputs)}")
        act = n.activation
        if act is not None and getattr(act, "symmetry", None) in ("affine", "constant"):
            raise InputError(f"{where} has a {act.symmetry} activation: its latent symmetry group is not a group "
                             "of monomial matrices")
        dim, shape = op.out_shape([self._dims[i] for i in n.inputs], [self._shapes[i] for i in n.inputs], where)
        self._dims[n.name], self._shapes[n.name] = dim, shape

    def _validate_reach(self) -> None:
        live = {self._output}
        for n in reversed(self._nodes):
            if n.name in live:
                live.update(n.inputs)
        dead = [n.name for n in self._nodes if n.name not in live]
        if dead:
            raise InputError(f"node {dead[0]!r} is dead: it lies on no path to the output {self._output!r}")

    def _validate_affine(self) -> None:
        affine = set()  # a layer without activation, or a join without one whose op says so (add: all inputs affine)
        for n in self._nodes:
            if n.act is None and (not n.is_join or join_op(n.op).affine_output([i in affine for i in n.inputs])):
                affine.add(n.name)
        for n in self._nodes:
            if n.name not in affine or n.name == self._output:
                continue
            for r in self.readers(n.name):
                if not r.is_join:
                    raise InputError(f"node {n.name!r} is affine (no activation), so only additions, "
                                     f"concatenations or the output may read it; {r.name!r} is a layer")

    def _check_group(self, group) -> None:
        if group.input_dim != self.input_dim:
            raise ShapeError(f"the group acts on inputs of size {group.input_dim}, the model takes {self.input_dim}")
        if group.output_dim != self.output_dim:
            raise ShapeError(f"the group acts on outputs of size {group.output_dim}, the model returns "
                             f"{self.output_dim}")


def _apply(act, Z, exact: bool):
    if act is None:
        return Z
    if exact:
        from flint import fmpq_mat
        return fmpq_mat(Z.nrows(), Z.ncols(), [act(z) for z in Z.entries()])
    return act(Z)
