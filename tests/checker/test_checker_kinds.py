"""The checker's layer kinds are table-driven (symeq_check.model.KINDS, docs/certificates.md "The checker"):
each model-file ``"type"`` maps to a kind declared in its subject module, which reads it and writes its digest
form 2, and the read layers answer forward, degree, their digest form 1 and their capabilities; outside the
kind-declaring places no module compares a string naming a kind or asks isinstance of a kind's class (but an
explicit list of the places not converted, each with why).  The table's keys are the prover's model-file
types; an unknown type keeps its message."""
from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

from symeq_check import CheckError, main
from symeq_check.layer import Kind, Layer
from symeq_check.model import KINDS, _layers, kind_of

CHECKER = Path(__file__).resolve().parents[2] / "symeq_check"
KIND_NAMES = {"dense", "conv2d", "attention", "flatten", "maxpool2d", "group_pool"}
KIND_CLASSES = {"_Attention", "_Heads", "_Conv", "_Pool", "_Layer"}

#: (module, function) where a string naming a kind is compared: the kind-declaring places, and those left
#: as they are (not a switch over the checker's layer kinds, or outside the layers' reading)
LITERAL_COMPARISONS = {
    # pooling's two kinds share a reader and a digest form: maxpool2d's windows or group_pool's fields
    ("pooling.py", "_PoolKind.canonical"), ("pooling.py", "_pool_layer"),
    # a latent action's "kind": {"kind": "dense", "matrix": ...} is an action form, not a layer kind
    ("layerwise.py", "_action"),
}
#: (module, function) asking isinstance of a kind's layer class: the class's own module
ISINSTANCE_OF_KIND_CLASSES = {
    ("attention.py", "_head_outputs"),  # attention's own heads: Q K^T from attention, A_h from its heads
}
#: not converted: the identifiability methods (outside the layerwise kernel) are defined per kind of network,
#: and switch on the layer classes (deep, family, rank, tensor) and on "dense" (classical; rank's own tags)
NOT_CONVERTED = "identifiability/"
#: the modules whose layer code must ask the table or the layer, with no exception
SWITCH_FREE = {"model.py", "evaluate.py", "digest.py", "layerwise.py", "intervals.py", "graph.py", "conv.py"}


def _places():
    """(module, function, what) for every comparison with a kind's name and every isinstance of a kind class."""
    out = []
    for path in sorted(CHECKER.rglob("*.py")):
        rel = path.relative_to(CHECKER).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node, scope):
            for child in ast.iter_child_nodes(node):
                inner = scope
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = f"{scope}.{child.name}" if scope else child.name
                if isinstance(child, ast.Compare):
                    names = {n.value for part in [child.left, *child.comparators] for n in ast.walk(part)
                             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
                    if names & KIND_NAMES:
                        out.append((rel, scope, "literal"))
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "isinstance" \
                        and len(child.args) == 2:
                    names = {n.id for n in ast.walk(child.args[1]) if isinstance(n, ast.Name)}
                    if names & KIND_CLASSES:
                        out.append((rel, scope, "isinstance"))
                visit(child, inner)

        visit(tree, "")
    return out


def test_no_kind_switches_outside_the_kind_declaring_places():
    """model, evaluate and digest (and layerwise, intervals, graph, conv's layerwise check) ask the table or
    the layer: no comparison with a kind's name, no isinstance of a kind's class; the places left are listed."""
    places = _places()
    assert len(places) > 5, "the test is not reading the checker"
    places = [p for p in places if not p[0].startswith(NOT_CONVERTED)]
    literal = {(m, f) for m, f, what in places if what == "literal"}
    instance = {(m, f) for m, f, what in places if what == "isinstance"}
    assert not {p for p in literal | instance if p[0] in SWITCH_FREE} - LITERAL_COMPARISONS, \
        "kind switches in a module that asks the table"
    assert literal == LITERAL_COMPARISONS, (sorted(literal - LITERAL_COMPARISONS), sorted(LITERAL_COMPARISONS - literal))
    assert instance == ISINSTANCE_OF_KIND_CLASSES, (sorted(instance - ISINSTANCE_OF_KIND_CLASSES),
                                                    sorted(ISINSTANCE_OF_KIND_CLASSES - instance))
    for module in ("model.py", "evaluate.py", "digest.py"):
        assert not [p for p in places if p[0] == module], module


def test_the_table_is_the_prover_s_model_file_types():
    """KINDS has exactly the types symeq advertises for model files; against its registry of kinds and of
    readers (symeq/layers/registry.py, one module a line in KIND_MODULES) the differences are these."""
    from symeq.layers import registry

    assert set(registry.kind_names()) - set(KINDS) == {"heads"}  # a layer of the theorem's chain (attention
    # split), never a model file's "type"
    # types that read into no layer of their own: flatten, and average pooling (folded into the next layer)
    assert set(KINDS) - set(registry.kind_names()) == {"flatten", "avgpool2d", "global_avgpool"}
    modules = [importlib.import_module(m) for m in registry.KIND_MODULES]
    advertised = {t for m in modules for t in getattr(m, "JSON_ADVERTISED", ())}
    readers = {t for m in modules for t in m.JSON_READERS}
    # average pooling is read by both (folded exactly into the next layer, symeq_check/avgpool.py) but not
    # advertised in the prover's list of layer types
    assert set(KINDS) - advertised == {"avgpool2d", "global_avgpool"} and advertised <= set(KINDS)
    assert all(registry.json_reader(t) is not None for t in KINDS)
    # the prover also reads the older spelling group_maxpool, to refuse it with a pointer to group_pool: the
    # checker refuses it as an unknown type (exit 2)
    assert readers - set(KINDS) == {"group_maxpool"}


def test_every_kind_declares_reading_and_digest_form():
    for name, kind in KINDS.items():
        assert isinstance(kind, Kind) and callable(kind.read) and callable(kind.canonical), name
        assert kind_of({"type": name}) is kind
    assert [n for n, k in KINDS.items() if k.first_only] == ["attention"]
    assert [n for n, k in KINDS.items() if not k.makes_layer] == ["flatten", "avgpool2d", "global_avgpool"]
    assert kind_of({"type": ["dense"]}) is None and kind_of({}) is None and kind_of({"type": "Dense"}) is None


def test_read_layers_answer_what_is_asked():
    layers = _layers([{"type": "dense", "weight": [[1, 2]], "bias": None, "activation": {"type": "monomial", "degree": 2}},
                      {"type": "dense", "weight": [[3]], "bias": [1], "activation": None}], 2, "m")
    assert all(isinstance(l, Layer) for l in layers)
    assert [l.degree() for l in layers] == [2, 1] and [l.out_dim for l in layers] == [1, 1]
    assert layers[1].forward(layers[0].forward((1, 1))) == (28,)


@pytest.mark.parametrize("value, message", [
    ([{"type": "group_maxpool", "field_size": 2}], "model layer 1: unsupported layer type 'group_maxpool'"),
    ([{"type": "Dense"}], "model layer 1: unsupported layer type 'Dense'"),
    ([{"type": ["dense"]}], "model layer 1: unsupported layer type ['dense']"),
    ([{"weight": [[1]]}], "model layer 1: unsupported layer type None"),
    ([{"type": "dense", "weight": [[1, 1, 1, 1]], "bias": None, "activation": {"type": "relu"}},
      {"type": "attention", "tokens": 1, "heads": []}], "model layer 2: unsupported layer type 'attention'"),
])
def test_an_unknown_type_keeps_its_message(value, message):
    with pytest.raises(CheckError) as e:
        _layers(value, 4, "model")
    assert str(e.value) == message


def test_an_unknown_type_in_a_model_file_is_exit_2(tmp_path, capsys):
    model = {"format": "symeq-model/1", "input_dim": 1, "layers": [{"type": "bogus"}]}
    cert = {"format": "symeq-certificate/2", "verdict": "layerwise-equivariant"}
    (tmp_path / "m.json").write_text(json.dumps(model))
    (tmp_path / "c.json").write_text(json.dumps(cert))
    assert main([str(tmp_path / "c.json"), str(tmp_path / "m.json")]) == 2
    assert "model layer 1: unsupported layer type 'bogus'" in capsys.readouterr().err
