"""Model and certificate files: JSON with exact rationals written as "p/q" strings.

Numbers are parsed by :func:`symeq.numbers.parse_number` (a regular grammar); nothing from a
file is ever passed to ``eval`` or ``sympify``.  Errors name the file and the place in it.

Examples
--------
>>> from symeq.examples import builtin_example
>>> m = builtin_example()
>>> model_from_json(model_to_json(m)).parameters_equal(m)
True
"""

from __future__ import annotations

import json
from pathlib import Path

from .schema import check_keys
from .errors import InputError
from .graph.io import graph_from_json, graph_to_json
from .graph.model import GraphModel
from .groups import FiniteGroup
from .layers.base import declared_biases
from .layers.registry import layer_to_json, read_layers
from .models import Model
from .sizes import check_total_degree, check_width

__all__ = ["MODEL_FORMAT", "CERTIFICATE_FORMAT", "read_json", "write_json", "model_from_json",
           "model_to_json", "layers_to_json", "load_model", "save_model", "MODEL_KEYS"]

MODEL_FORMAT = "symeq-model/1"
CERTIFICATE_FORMAT = "symeq-certificate/2"  # sparse actions; symeq_check also reads /1 (dense)

# The schema of a model file (docs/model-files.md): the keys allowed in each object, and the
# required ones.  An unknown key is refused (exit 2) instead of ignored: a misspelt "biases" must
# not silently become a bias-free layer.  "bias" is required on dense and conv2d layers; null means
# no bias.
MODEL_KEYS = (("format", "name", "input_dim", "layers", "group"), ("format", "input_dim", "layers"))
# each kind declares its own keys (``schema`` on its layer class, symeq/layers/), read by the exact and the
# float readers alike


def read_json(path) -> dict:
    """Read a JSON file, turning every failure into a one-line :class:`InputError`."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise InputError(f"{p}: cannot read ({e.__class__.__name__})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise InputError(f"{p}: JSON nested too deeply (no symeq file nests more than a few levels)") from None


def write_json(data: dict, path) -> None:
    """Write JSON atomically (a temporary file renamed into place), so nothing is half-written.  An
    existing path that is not a regular file (a device such as /dev/full, a pipe) is refused: the rename
    would replace it."""
    p = Path(path)
    if p.exists() and not p.is_file():
        raise InputError(f"{path}: is not a regular file (a folder, a device, a pipe or a socket); give a file name")
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(p)


def layers_from_json(layers, input_dim: int, where: str = "layers") -> list:
    """The layers of a model file, each read by its kind (:func:`symeq.layers.registry.read_layers`)."""
    return read_layers(layers, input_dim, where)


def model_header(data, where: str = "model", graphs: bool = False) -> int:
    """Check a model file's object, format and ``input_dim`` (exact and numeric readers); return n.

    ``graphs``: the reader takes the graph form (docs/graphs.md; the exact reader does): its keys are
    checked by :func:`symeq.graph.io.graph_from_json`."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object")
    if "graph" in data and "layers" in data:
        raise InputError(f'{where}: a model file has either "layers" (a chain) or "graph" (a graph model, '
                         "docs/graphs.md), not both")
    if "graph" in data and not graphs:
        raise InputError(f'{where}: a graph model ("graph", docs/graphs.md) is not read here; `symeq verify` '
                         "reads graph model files")
    if "graph" not in data:
        check_keys(data, where, *MODEL_KEYS, error=InputError)
    elif "format" not in data:
        raise InputError(f'{where}: missing key "format"')
    fmt = data["format"]  # required (MODEL_KEYS), as the checker requires it
    if fmt != MODEL_FORMAT:
        raise InputError(f"{where}: unsupported format {fmt!r}; expected {MODEL_FORMAT!r}")
    n = data.get("input_dim")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"{where}: \"input_dim\" must be a positive integer, got {n!r}")
    check_width(n, f"{where}: input_dim")
    return n


def model_from_json(data, where: str = "model"):
    """Build a :class:`Model` from the ``symeq-model/1`` JSON structure (a
    :class:`symeq.graph.GraphModel` from the graph form, docs/graphs.md)."""
    n = model_header(data, where, graphs=True)
    if "graph" in data:
        return graph_from_json(data, n, where)
    layers = layers_from_json(data.get("layers"), n, f"{where}.layers")
    group = FiniteGroup.from_json(data["group"], f"{where}.group") if data.get("group") is not None else None
    try:
        model = Model(n, layers, group, str(data.get("name", "model")))
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    if model.is_polynomial:  # exact values grow with the degree of f: refuse an absurd one at once
        check_total_degree(model.degree(), f"{where}: the polynomial map f (product of the layers' degrees)")
    return model


def layers_to_json(model: Model) -> list[dict]:
    """The model file's ``"layers"``, each written by its kind (``layer.to_json(declared_bias)``)."""
    return [layer_to_json(l, declared) for l, declared in zip(model.layers, declared_biases(model))]


def model_to_json(model, include_group: bool = True) -> dict:
    if isinstance(model, GraphModel):  # the graph form (docs/graphs.md)
        return graph_to_json(model, include_group, MODEL_FORMAT)
    data = {"format": MODEL_FORMAT, "name": model.name, "input_dim": model.input_dim, "layers": layers_to_json(model)}
    if include_group and model.group is not None:
        data["group"] = model.group.to_json()
    return data


def load_model(path) -> Model:
    """Load a model file, with errors that name the file."""
    return model_from_json(read_json(path), where=str(path))


def save_model(model: Model, path) -> None:
    write_json(model_to_json(model), path)
