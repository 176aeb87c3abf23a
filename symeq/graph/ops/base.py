"""The join op protocol: what an addition or a concatenation node says about itself (docs/graphs.md).

A join op unit is one module of ``symeq/graph/ops/`` defining ``OP``, an instance of a
:class:`JoinOp` subclass, plus one line in :data:`symeq.graph.ops.registry.OP_UNITS`.  Code outside
the unit asks the op (``op.out_shape``, ``op.exact``, ``op.floating``, ``op.action``) and never
switches on its name.

``key``
    the model-file key of the node (``"add"``, ``"concat"``) and ``Node.op``;
``min_inputs``
    the fewest inputs the node takes;
``out_shape(dims, shapes, where)``
    the output size and image shape (C, H, W) or None from the inputs', or an ``InputError`` naming
    the node (``where``) and the sizes;
``exact(Xs)`` / ``floating(Xs)``
    the node's value before its activation, on exact batches (``fmpq_mat``, one column per point) or
    float batches (numpy, one row per point); ``ball(ys)`` on lists of arb balls;
``affine_output(inputs_affine)``
    whether the node's value without an activation is affine (no known action) given which inputs are;
``action(actions, dims, shapes)``
    from the inputs' actions (``fmpq_mat`` on vector spaces, the kinds' sparse action objects on image
    spaces -- conv's ``ConvAction``, compared by :func:`action_key` --, or None when not known yet: an
    affine input), the action
    on the node's value and the actions forced on the unknown inputs: ``(action, forced, detail)``
    with ``forced`` a dict {input position: matrix}; ``action`` None with ``detail`` saying why when
    the inputs give none (disagreeing actions, only unknown inputs).
"""

from __future__ import annotations

from dataclasses import replace

from flint import fmpq, fmpq_mat

__all__ = ["JoinOp", "activation_action", "action_key"]


def action_key(a) -> tuple:
    """A hashable key equal for equal actions: a sparse action object's ``key()`` (conv's ``ConvAction``:
    its channel part and pixel permutation), a matrix's entries.  A sparse action and a matrix are compared
    on their monomial form (what both are on the whole space)."""
    if hasattr(a, "key"):
        return a.key()
    return ("matrix", a.nrows(), tuple(a.entries()))


def same_action(a, b) -> bool:
    """Whether two actions on one space are equal (sparse objects by key, a sparse one and a matrix on their
    monomial forms)."""
    if hasattr(a, "key") == hasattr(b, "key"):
        return action_key(a) == action_key(b)
    from ...numbers import monomial_parts

    sp, M = (a, b) if hasattr(a, "key") else (b, a)
    parts = monomial_parts(M)
    if parts is None:
        return False
    cols, vals = sp.monomial()
    return list(parts[0]) == list(cols) and [fmpq(x) for x in parts[1]] == [fmpq(x) for x in vals]


class JoinOp:
    """Base class of the join op units (see the module docstring)."""

    key: str = ""
    min_inputs: int = 2

    def affine_output(self, inputs_affine) -> bool:
        """Whether the node's value, without an activation, is affine (its action unknown until a join that
        reads it forces one) given which inputs are affine: by default when any input is (a concatenation's
        block sum needs every block's action)."""
        return any(inputs_affine)

    def out_shape(self, dims, shapes, where):  # pragma: no cover - every unit overrides it
        raise NotImplementedError

    def exact(self, Xs):  # pragma: no cover
        raise NotImplementedError

    def floating(self, Xs):  # pragma: no cover
        raise NotImplementedError

    def ball(self, ys):  # pragma: no cover
        raise NotImplementedError

    def action(self, actions, dims, shapes):  # pragma: no cover
        raise NotImplementedError


def activation_action(act, M: fmpq_mat):
    """The action on sigma(z) given the action M on z, for an elementwise activation without a bias.

    sigma(M z) = Q sigma(z) for all z holds exactly when M is monomial with entries alpha in the
    activation's admissible scalings that need no bias (alpha = 1, or the activation's shift s is 0):
    then Q has q(alpha) (:meth:`symeq.activations.Activation.admissible`) where M has alpha.  Returns
    ``(Q, detail)``; Q is None (with the reason) when M is not in the latent group K.

    >>> from symeq.activations import relu, monomial
    >>> from symeq.numbers import matrix
    >>> activation_action(relu(), matrix([[0, 2], [1, 0]]))[0].entries()
    [0, 2, 1, 0]
    >>> activation_action(monomial(2), matrix([[-1, 0], [0, 1]]))[0].entries()
    [1, 0, 0, 1]
    >>> activation_action(relu(), matrix([[-1, 0], [0, 1]]))[1]
    'entry -1 at (0, 0) is not an admissible scaling of relu'
    """
    if act is None:
        return M, "no activation"
    if hasattr(M, "factor") and hasattr(M, "key"):  # a sparse action (conv's ConvAction): its channel factors
        return _sparse_activation_action(act, M)
    n = M.nrows()
    Q = fmpq_mat(n, n)
    shift = getattr(act, "shift", 0)
    name = act.spec.get("type", "the activation") if isinstance(getattr(act, "spec", None), dict) else "the activation"
    for i in range(n):
        nz = [j for j in range(n) if M[i, j] != 0]
        if len(nz) != 1:
            return None, f"row {i} of the action is not monomial: it does not commute with {name}"
        j = nz[0]
        alpha = fmpq(M[i, j])
        q = act.admissible(alpha) if (alpha == 1 or shift == 0) else None
        if q is None:
            return None, f"entry {alpha} at ({i}, {j}) is not an admissible scaling of {name}"
        Q[i, j] = q
    return Q, f"the action lies in {name}'s latent group"


def _act_name(act) -> str:
    return act.spec.get("type", "the activation") if isinstance(getattr(act, "spec", None), dict) else "the activation"


def _sparse_activation_action(act, M):
    """:func:`activation_action` on a sparse action whose entries are its channel factors (``factor[c]``
    on every pixel of channel c): the latent group's check on the channel factors, no dense matrix."""
    shift = getattr(act, "shift", 0)
    name = _act_name(act)
    out = []
    for c, alpha in enumerate(M.factor):
        alpha = fmpq(alpha)
        q = act.admissible(alpha) if (alpha == 1 or shift == 0) else None
        if q is None:
            return None, f"factor {alpha} of channel {c} is not an admissible scaling of {name}"
        out.append(fmpq(q))
    return replace(M, factor=tuple(out)), f"the action lies in {name}'s latent group (on its channel factors)"
