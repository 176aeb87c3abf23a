"""The one loader every command uses: a model file (or the built-in example) and its group.

A command that reads a model calls :func:`load_model_args` with its parsed arguments:

* ``args.model`` is the model file; when it is ``None`` and the command allows it, the built-in
  example (:func:`symeq.examples.builtin_example`) is used, with one line on stderr saying so;
* ``--group SPEC`` (``args.group``) replaces the file's group by a built-in one acting on the
  output as ``--group-output`` says (:func:`group_from_args`);
* a model left without a group is an :class:`~symeq.errors.InputError` (exit 2) with
  :data:`NO_GROUP`, unless the command does not need one.

The float twin passes its own reader (``symeq.numeric.models.load_numeric_model``); everything
else is shared.
"""

from __future__ import annotations

import sys

from ..cliargs import group_output_arg
from ..errors import InputError, Undetermined

__all__ = ["NO_GROUP", "add_group_options", "announce_budget", "group_from_args", "has_extra", "load_model_args",
           "require_extra"]

NO_GROUP = "the model has no \"group\"; add one to the file or pass --group (see `symeq groups`)"


def add_group_options(parser) -> None:
    """``--group SPEC`` and ``--group-output same|k``: a built-in group overriding the file's."""
    parser.add_argument("--group", help="a built-in group overriding the file's (see `symeq groups`)")
    parser.add_argument("--group-output", type=group_output_arg, default="same",
                        help="how --group acts on the output: 'same' (default) or k for the trivial action on R^k")


def require_extra(module: str, install: str, what: str = "this command") -> None:
    """Refuse at once (exit 2, with the install line) when an optional package is missing.

    Called before any long work by a command that will need ``module`` (an extra such as
    matplotlib, torch or onnx), so that a missing package is found in a second, not after
    minutes of training or search.  Only the module's presence is checked; nothing is imported.

    >>> require_extra("json", "pip install json")
    >>> require_extra("no_such_module_xyz", "pip install 'symeq[plot]'", "drawing figures")
    Traceback (most recent call last):
    ...
    symeq.errors.EngineMissing: drawing figures needs the no_such_module_xyz package, which is not installed: pip install 'symeq[plot]'
    """
    from ..errors import EngineMissing

    if not has_extra(module):
        raise EngineMissing(f"{what} needs the {module} package, which is not installed: {install}")


def has_extra(module: str) -> bool:
    """Whether an optional package can be imported, found without importing it.

    >>> has_extra("json"), has_extra("no_such_module_xyz")
    (True, False)
    """
    import importlib.util

    if module in sys.modules and sys.modules[module] is None:  # blocked (as tests do)
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError, AttributeError):  # a parent package missing, or a broken installation
        return False


def announce_budget(args) -> None:
    """Print the command's pending budget line (set by :func:`symeq.cli.main`), once.

    Called when the arguments and input files have been checked, so that bad input is one error
    line with no banner before it; a second call prints nothing.
    """
    line = getattr(args, "budget_banner", None)
    if line:
        print(line, file=sys.stderr, flush=True)
        args.budget_banner = None


def group_from_args(args):
    """The built-in group of ``--group`` with its ``--group-output`` action, or ``None`` without ``--group``."""
    if getattr(args, "group", None) is None:
        return None
    from ..groups import builtin_group

    return builtin_group(args.group, output=getattr(args, "group_output", "same"))


def load_model_args(args, *, read=None, builtin: bool = True, need_group: bool = True, graphs: bool = False):
    """The model of a command's arguments, with ``--group`` applied.

    Parameters
    ----------
    args : argparse.Namespace
        with ``model`` (a path or ``None``) and, where the command has them, ``group`` and ``group_output``.
    read : callable, optional
        the reader of a model file (default :func:`symeq.io.load_model`).
    builtin : bool
        whether a missing ``model`` means the built-in example.
    need_group : bool
        whether a model without a group is an error (:data:`NO_GROUP`, exit 2).
    graphs : bool
        whether the command takes graph models (docs/graphs.md); otherwise a graph file is refused by
        name (exit 3).

    Examples
    --------
    >>> import argparse
    >>> model = load_model_args(argparse.Namespace(model=None, group="mirror:2x3", group_output="same"))
    >>> model.group.label, model.widths
    ('mirror 2x3x1', [6, 8, 6, 6])
    """
    path = getattr(args, "model", None)
    if path is None and builtin:
        from ..examples import builtin_example

        group = group_from_args(args)  # a bad --group is reported before the budget line
        announce_budget(args)
        model = builtin_example()
        print(f"no model file given: using the built-in example ({model.name})", file=sys.stderr, flush=True)
    else:
        if read is None and str(path).lower().endswith(".onnx"):  # float weights: exact only when asked
            if not getattr(args, "exact_floats", False):
                raise InputError(f"{path}: an ONNX file holds float weights; `symeq certify {path} --group ...` finds "
                                 "the nearest layerwise-equivariant network and certifies it, or `symeq verify --exact-floats` reads "
                                 "every weight as the exact dyadic rational it is")
            from ..numeric.onnx_graph_exact import load_onnx_exact_network as read  # a chain or a graph
        elif read is None and str(path).lower().endswith(".npz"):  # symeq's float layout (numeric/models.py)
            raise InputError(f"{path}: an .npz file holds float weights; `symeq numeric-check {path}` checks it in "
                             f"floats, `symeq certify {path} --group ...` finds and proves the nearest "
                             "layerwise-equivariant network")
        elif read is None:
            from ..io import load_model as read
        model = read(path)
        for line in (getattr(model, "meta", None) or {}).get("reader_notes", []):  # folds and drops (docs/onnx.md)
            print(f"  read: {line}", file=sys.stderr)
        group = group_from_args(args)
    from ..graph.model import GraphModel  # here, not at the top: every command's start imports this module

    if isinstance(model, GraphModel) and not graphs:  # docs/graphs.md; docs/limits.md lists what covers them
        raise Undetermined(f"{path}: `symeq {getattr(args, 'command', None) or 'this command'}` does not cover graph "
                           "models (`symeq verify` does; docs/limits.md)")
    if group is not None:
        model = model.with_group(group)
    if need_group and model.group is None:
        raise InputError(NO_GROUP)
    announce_budget(args)
    return model
