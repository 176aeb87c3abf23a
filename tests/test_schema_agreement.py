"""The prover and the checker accept exactly the same model files (issue 26, item 5): every mutation of the
strict-files suite (tests/test_strict_files.py: near-miss renames, deletions, unknown keys; and
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
