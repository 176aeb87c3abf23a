"""The prover and the checker accept exactly the same model files (issue 26, item 5): every mutation of the
strict-files suite (tests/cli/test_strict_files.py: near-miss renames, deletions, unknown keys; and
tests/json_mutations.py: every leaf changed, every key removed, lists grown and shrunk) of every model kind
is read by symeq's reader (``symeq.io.model_from_json``) and by the checker's (``symeq_check``), and the
two agree on every one: both accept or both refuse.  A model without ``"format"`` or a layer without
``"type"`` is refused by both with a message naming the key.  And ``numeric-check`` (floats allowed)
reads a conv2d file that contains a float."""
from __future__ import annotations

import json

import numpy as np
import pytest

from json_mutations import field_mutations
from symeq.cli import main
from symeq.errors import SymeqError
from symeq.io import model_from_json
from symeq_check import CheckError
from symeq_check.graph import read_graph_model
from symeq_check.model import _model
from test_strict_files import MODELS, _mutations


def _reads(read, refusal, data):
    """(True, "") when ``read`` accepts the model file, (False, its message) when it refuses it with ``refusal``."""
    try:
        read(data)
        return True, ""
    except refusal as exc:
        return False, str(exc)


def _prover(data):
    return _reads(model_from_json, SymeqError, data)


def _checker(data):
    return _reads(_model, CheckError, data)


def _checker_any(data):
    """The checker's reading of a chain or a graph file (its dispatch reads "graph" files with
    :func:`symeq_check.graph.read_graph_model`)."""
    graph = isinstance(data, dict) and "graph" in data
    return _reads(read_graph_model if graph else _model, CheckError, data)


# ----------------------------------------------------------------------------- graph files (docs/graphs.md)
R = {"type": "relu"}
SWAP = [["0", "1"], ["1", "0"]]


def _dense(w, b=None, act=R):
    return {"type": "dense", "weight": w, "bias": b, "activation": act}


def _residual_file():
    return {"format": "symeq-model/1", "name": "residual", "input_dim": 2,
            "graph": [{"name": "stem", "input": "input", "layers": [_dense([["1", "0"], ["0", "1"]])]},
                      {"name": "block", "input": "stem", "layers": [_dense([["2", "1"], ["1", "2"]], ["1", "1"]),
                                                                    _dense([["1", "3"], ["3", "1"]], None, None)]},
                      {"name": "sum", "add": ["stem", "block"], "activation": R},
                      {"name": "head", "input": "sum", "layers": [_dense([["5", "2"], ["2", "5"]], None, None)]}],
            "output": "head", "group": {"generators": [{"input": SWAP, "output": SWAP}]}}


def _concat_file():
    return {"format": "symeq-model/1", "input_dim": 2,
            "graph": [{"name": "a", "input": "input", "layers": [_dense([["1", "0"], ["0", "1"]])]},
                      {"name": "b", "input": "input", "layers": [_dense([["0", "1"], ["1", "0"]], ["1", "1"])]},
                      {"name": "cat", "concat": ["a", "b"], "activation": {"type": "tanh_series", "order": 3}},
                      {"name": "head", "input": "cat",
                       "layers": [_dense([["1", "0", "2", "0"], ["0", "1", "0", "2"]], None, None)]}]}


def _conv_file():
    conv = {"type": "conv2d", "input_shape": [1, 2, 2], "kernel": [[[["2"]]]], "bias": ["1"], "activation": R}
    return {"format": "symeq-model/1", "input_dim": 4,
            "graph": [{"name": "stem", "input": "input", "layers": [conv]},
                      {"name": "block", "input": "stem",
                       "layers": [{"type": "conv2d", "kernel": [[[["-1"]]]], "bias": None, "activation": None}]},
                      {"name": "sum", "add": ["stem", "block"], "activation": R},
                      {"name": "head", "input": "sum", "layers": [{"type": "flatten"},
                                                                  _dense([["1", "1", "0", "0"], ["0", "0", "1", "1"]],
                                                                         None, None)]}]}


def _pool_file():
    data = _conv_file()
    data["graph"][3]["layers"] = [{"type": "maxpool2d", "kernel_size": 2, "stride": 1}, {"type": "flatten"},
                                  _dense([["3"]], None, None)]
    return data


GRAPH_FILES = {"residual": _residual_file, "concat": _concat_file, "conv": _conv_file, "pool": _pool_file}


def _disagreements(data) -> tuple[list, int, int]:
    mutations = [(what, m) for what, m, _ in _mutations(data)] + list(field_mutations(data))
    disagree, refused = [], 0
    for what, mutated in mutations:
        p, c = _prover(mutated), _checker_any(mutated)
        if p[0] != c[0]:
            disagree.append(f"{what}: prover {'accepts' if p[0] else 'refuses: ' + p[1]}; "
                            f"checker {'accepts' if c[0] else 'refuses: ' + c[1]}")
        refused += not p[0]
    return disagree, refused, len(mutations)


@pytest.mark.parametrize("kind", list(GRAPH_FILES))
def test_prover_and_checker_agree_on_every_mutation_of_a_graph_file(kind):
    data = GRAPH_FILES[kind]()
    assert _prover(data)[0] and _checker_any(data)[0], (_prover(data), _checker_any(data))
    disagree, refused, n = _disagreements(data)
    assert n > 100
    assert not disagree, "\n".join(disagree)
    assert refused >= 10


@pytest.mark.parametrize("change", [
    lambda d: d.update(layers=[_dense(SWAP, None, None)]),                      # both forms
    lambda d: d["graph"][1].update(input="sum"),                               # reads a later node
    lambda d: d["graph"][0].update(name="input"),                              # the reserved name
    lambda d: d["graph"][1].update(name="stem"),                               # a name twice
    lambda d: d["graph"][2].update(add=["stem"]),                              # an addition of one input
    lambda d: d.update(output="block"),                                        # dead nodes
    lambda d: d["graph"][3].update(input="block"),                             # an affine output read by a layer
    lambda d: d["graph"][1]["layers"][1].update(weight=[["1", "0"]]),          # sizes differ at the addition
    lambda d: d["graph"][1]["layers"][0].update(activation=None),              # a hidden layer without activation
    lambda d: d["graph"][0]["layers"].insert(0, {"type": "attention", "tokens": 1, "heads": []}),
])
def test_prover_and_checker_refuse_the_graph_rules_alike(change):
    data = _residual_file()
    change(data)
    assert not _prover(data)[0] and not _checker_any(data)[0], (_prover(data), _checker_any(data))


@pytest.mark.parametrize("kind", list(MODELS))
def test_prover_and_checker_agree_on_every_strict_files_mutation(kind):
    data = MODELS[kind]()
    assert _prover(data)[0] and _checker(data)[0], kind
    mutations = [(what, m) for what, m, _ in _mutations(data)] + list(field_mutations(data))
    assert len(mutations) > 100
    disagree, refused = [], 0
    for what, mutated in mutations:
        p, c = _prover(mutated), _checker(mutated)
        if p[0] != c[0]:
            disagree.append(f"{what}: prover {'accepts' if p[0] else 'refuses: ' + p[1]}; "
                            f"checker {'accepts' if c[0] else 'refuses: ' + c[1]}")
        refused += not p[0]
    assert not disagree, "\n".join(disagree)
    assert refused >= 10  # the mutations do reach the readers' refusals


@pytest.mark.parametrize("where", ["format", "type"])
def test_a_missing_format_or_type_is_refused_by_both_naming_the_key(where, tmp_path, capsys):
    data = MODELS["dense"]()
    if where == "format":
        del data["format"]
    else:
        del data["layers"][0]["type"]
    (p_ok, p_why), (c_ok, c_why) = _prover(data), _checker(data)
    assert not p_ok and not c_ok
    assert f'"{where}"' in p_why, p_why
    assert f'"{where}"' in c_why or where in c_why, c_why
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data))
    assert main(["verify", str(path)]) == 2  # no certificate is written that `symeq check` would refuse
    assert f'"{where}"' in capsys.readouterr().err


def test_numeric_check_reads_a_conv_file_with_a_float(tmp_path, capsys):
    from test_strict_files import _conv_model

    from symeq.numeric.models import model_from_json as numeric_model_from_json

    data = _conv_model()
    decimal = json.loads(json.dumps(data))
    decimal["layers"][0]["kernel"][0][0][0][0], decimal["layers"][0]["bias"] = "1/10", ["1/2"]
    data["layers"][0]["kernel"][0][0][0][0], data["layers"][0]["bias"] = 0.1, [0.5]  # floats: allowed here
    floats, exact = numeric_model_from_json(data), numeric_model_from_json(decimal)
    x = np.random.default_rng(0).standard_normal((4, 4))
    assert np.allclose(floats.forward(x), exact.forward(x), rtol=0, atol=1e-14)  # the floats read as given
    assert not np.allclose(floats.forward(x), numeric_model_from_json(_conv_model()).forward(x))
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(data))
    assert main(["numeric-check", str(path)]) in (0, 1)  # a verdict, not bad input
    err = capsys.readouterr().err
    assert "is a float" not in err and "error" not in err, err
    data["layers"][0]["bias"] = [float("nan")]
    path.write_text(json.dumps(data))
    assert main(["numeric-check", str(path)]) == 2


NUMBERS = ["1", "-1", "+1", "1/2", "-6/4", "+1/2", " 1/2", "1 / 2", "1/2 ", ".5", "5.", "-.5", "1e3", "1E-3", "1.5e2",
           "1e1000", "1e10000", "1e10001", "1/0", "0/1", "1/2e3", "", "-", ".", "e3", "1_000", "0x10", "1.2.3",
           "00012", "-0", "+-1", "inf", "nan", "1e+3", "\t3/4\n", "- 1", "1 e3", 7, -3, True, 0.5, None, [1]]


@pytest.mark.parametrize("text", NUMBERS, ids=[repr(t) for t in NUMBERS])
def test_prover_and_checker_read_one_number_syntax(text):
    """Every number of a file: both read it, to the same value, or both refuse it."""
    from fractions import Fraction

    from symeq.numbers import parse_number as prover_number
    from symeq_check import parse_number as checker_number

    try:
        mine = prover_number(text)
    except SymeqError:
        mine = None
    try:
        theirs = checker_number(text)
    except CheckError:
        theirs = None
    assert (mine is None) == (theirs is None), (text, mine, theirs)
    if mine is not None:
        assert Fraction(int(mine.p), int(mine.q)) == theirs
