"""The graph form of model files (docs/graphs.md): reading, writing back, strict keys with clear
messages (exit 2), the digest graph_sha256, and the model type's forward passes (exact, float, balls)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from flint import arb, fmpq, fmpq_mat

from graph_networks import chain_file, concat_net, conv_residual, residual
from symeq.cli import main
from symeq.digest import graph_digest
from symeq.errors import InputError
from symeq.graph import GraphModel, Node
from symeq.io import model_from_json, model_to_json

RELU = {"type": "relu"}
POINTS = [[1, 2], [fmpq(-3, 2), 5], [0, -1]]


@pytest.mark.parametrize("build", [lambda: residual(RELU), lambda: concat_net(RELU), conv_residual],
                         ids=["residual", "concat", "conv"])
def test_graph_files_round_trip(build):
    data = build()
    g = model_from_json(data)
    back = model_to_json(g)
    g2 = model_from_json(back)
    n = g.input_dim
    X = fmpq_mat(n, 2, [fmpq(i * 7 % 5 - 2, 1 + j) for i in range(n) for j in range(2)])
    assert g.forward(X) == g2.forward(X)
    assert [s.name for s in g.spaces()] == [s.name for s in g2.spaces()]
    d1 = graph_digest(back["graph"], n, back["output"])
    assert d1 == graph_digest(model_to_json(g2)["graph"], n, back["output"])


def test_digest_changes_with_a_weight_not_with_its_spelling():
    data = residual(RELU)
    d0 = graph_digest(data["graph"], 2, "head")
    spelled = copy.deepcopy(data)
    w = spelled["graph"][3]["layers"][0]["weight"]
    w[0][0] = str(fmpq(w[0][0]))  # the same number
    half = copy.deepcopy(data)
    half["graph"][3]["layers"][0]["weight"][0][0] = "0.5"
    half2 = copy.deepcopy(data)
    half2["graph"][3]["layers"][0]["weight"][0][0] = "1/2"
    assert graph_digest(spelled["graph"], 2, "head") == d0
    assert graph_digest(half["graph"], 2, "head") == graph_digest(half2["graph"], 2, "head") != d0
    moved = copy.deepcopy(data)
    moved["graph"][2]["activation"] = None
    assert graph_digest(moved["graph"], 2, "head") != d0
    assert graph_digest(data["graph"], 2, "block") != d0  # the output is digested too


def _bad(mutate):
    data = residual(RELU)
    mutate(data)
    return data


BAD = {
    "both layers and graph": (lambda d: d.update(layers=[]), 'either "layers"'),
    "unknown node key": (lambda d: d["graph"][2].update(activaton=None), 'unknown key "activaton"'),
    "dead node": (lambda d: d.update(output="stem"), "is dead"),
    "unknown input": (lambda d: d["graph"][1].update(input="stme"), "'stme' is not \"input\" or a node listed"),
    "input before definition": (lambda d: d["graph"][0].update(input="sum"), "'sum' is not \"input\" or a node"),
    "size mismatch at add": (lambda d: d["graph"][2].update(add=["stem", "input"]), "inputs of one size"),
    "affine read by a layer": (lambda d: d["graph"][1]["layers"][0].update(activation=None), "is affine"),
    "two kinds in a node": (lambda d: d["graph"][2].update(concat=["stem"]), "exactly one of"),
    "reserved name": (lambda d: d["graph"][0].update(name="input"), '"input" is reserved'),
    "bad name": (lambda d: d["graph"][0].update(name="a b"), "must match"),
    "unknown output": (lambda d: d.update(output="nope"), "is not a node of the graph"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_schema_errors_exit_2_with_a_message(tmp_path, capsys, case):
    mutate, message = BAD[case]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(_bad(mutate)))
    assert main(["verify", str(p)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_graph_files_are_refused_by_name_where_not_read():
    from symeq.numeric.models import model_from_json as float_reader

    with pytest.raises(InputError, match="graph model"):
        float_reader(residual(RELU))


def test_chain_as_graph_and_back():
    chain, graph = chain_file(RELU)
    m, g = model_from_json(chain), model_from_json(graph)
    assert g.is_chain and not model_from_json(residual(RELU)).is_chain
    assert g.as_chain().parameters_equal(m)
    assert GraphModel.from_chain(m).as_chain().parameters_equal(m)
    for x in POINTS:
        assert g(x) == m(x)
    assert g.parameters_count == m.n_params


def test_float_graph_forward_matches_exact():
    import numpy  # noqa: F401  (a core dependency)
    from symeq.numeric.models import from_exact

    chain, _ = chain_file(RELU)
    m = model_from_json(chain)
    gf = GraphModel.from_chain(from_exact(m))
    assert not gf.exact
    for x in POINTS:
        assert np.allclose(gf(np.array([float(v) for v in x])), [float(v) for v in m(x)])
    assert type(gf.as_chain()).__name__ == "NumericModel"


def test_ball_forward_encloses_the_exact_value():
    g = model_from_json(residual(RELU))
    for x in POINTS:
        exact = g(x)
        balls = g.ball_forward([arb(fmpq(v)) for v in x])
        assert all(b.contains(arb(e)) for b, e in zip(balls, exact))


def test_python_api_validation_messages():
    from symeq.models import DenseLayer
    from symeq.numbers import matrix

    lin = lambda: DenseLayer(matrix([[1, 0], [0, 1]]), [0, 0], None)
    relu_layer = lambda n=2: DenseLayer(matrix([[1] * n, [1] * n]), [0, 0], __import__("symeq.activations",
                                                                                        fromlist=["relu"]).relu())
    with pytest.raises(InputError, match="is affine"):
        GraphModel(2, [Node("a", "dense", ("input",), layer=lin()), Node("b", "dense", ("a",), layer=lin())])
    with pytest.raises(InputError, match="lies on no path|is dead"):
        GraphModel(2, [Node("a", "dense", ("input",), layer=relu_layer()), Node("b", "dense", ("input",), layer=lin())])
    with pytest.raises(InputError, match="size"):
        GraphModel(2, [Node("a", "dense", ("input",), layer=relu_layer(3))])
    with pytest.raises(InputError, match="not \"input\" nor a node listed before"):
        GraphModel(2, [Node("a", "dense", ("b",), layer=relu_layer())])
    g = GraphModel(2, [Node("a", "dense", ("input",), layer=relu_layer()),
                       Node("s", "add", ("a", "input"), activation=None)])
    assert g([1, -1]) == [1, -1] and [s.name for s in g.hidden_spaces()] == ["a"]


def test_token_mixing_layers_are_refused_in_graphs_by_name():
    att = {"type": "attention", "tokens": 2, "heads": [{"query": [["1"]], "key": [["1"]], "value": [["1"]],
                                                        "out": [["1"]]}]}
    data = {"format": "symeq-model/1", "input_dim": 2, "graph": [
        {"name": "att", "input": "input", "layers": [att, {"type": "dense", "weight": [["1"]], "bias": None,
                                                          "activation": None}]}]}
    with pytest.raises(InputError, match="attention layers mix tokens and are not allowed in graph models"):
        model_from_json(data)


def test_image_shapes_must_agree_at_additions_and_concatenations():
    data = conv_residual()
    vec = {"name": "vec", "input": "input", "layers": [
        {"type": "dense", "weight": [["1"] * 16] * 32, "bias": None, "activation": {"type": "relu"}}]}
    added = copy.deepcopy(data)
    added["graph"].insert(1, vec)
    added["graph"][3]["add"] = ["stem", "vec"]  # an image (2x4x4) and a vector of 32
    with pytest.raises(InputError, match="one image shape"):
        model_from_json(added)
    joined = copy.deepcopy(added)
    joined["graph"][3] = {"name": "sum", "concat": ["stem", "vec"], "activation": None}
    with pytest.raises(InputError, match="images only or vectors only"):
        model_from_json(joined)
    g = model_from_json(data)
    assert g.shape("stem") == (2, 4, 4) and g.input_shape == (1, 4, 4)
