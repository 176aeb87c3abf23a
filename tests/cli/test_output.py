"""Readable output: actions in cycle notation (symeq/notation.py), matrices only when asked,
sparse --json, and numeric-check's recovered actions."""

import itertools
import json
import random

import pytest
from flint import fmpq

from symeq.activations import monomial, tanh_series
from symeq.cli import main
from symeq.errors import InputError
from symeq.groups import builtin_group, dihedral
from symeq.io import model_to_json
from symeq.models import random_equivariant_model, scramble
from symeq.notation import format_cycles, matrix_cycles, parse_cycles
from symeq.numbers import matrix, monomial_matrix, monomial_parts


@pytest.mark.parametrize("text, n, source, factor", [
    ("(1 -3 2)(4 5)", 5, [1, 2, 0, 4, 3], [1, 1, -1, 1, 1]),
    ("()", 3, [0, 1, 2], [1, 1, 1]),
    ("(-2)", 2, [0, 1], [1, -1]),
    ("(1 2*2)(-1/2*3)", 3, [1, 0, 2], [1, 2, fmpq(-1, 2)]),
])
def test_cycle_notation_examples_round_trip(text, n, source, factor):
    assert parse_cycles(text, n) == (source, factor)
    assert format_cycles(source, factor) == text


def test_cycle_notation_means_what_the_docs_say():
    """(1 -3 2)(4 5) is y -> (y_2, y_3, -y_1, y_5, y_4): the value of 1 moves to 3 with a sign."""
    M = monomial_matrix(*parse_cycles("(1 -3 2)(4 5)", 5))
    y = matrix([[10], [20], [30], [40], [50]])
    assert [(M * y)[j, 0] for j in range(5)] == [20, 30, -10, 50, 40]
    assert matrix_cycles(M) == "(1 -3 2)(4 5)"
    assert matrix_cycles(matrix([[1, 1], [0, 1]])) is None


@pytest.mark.parametrize("seed", range(20))
def test_random_signed_scaled_permutations_round_trip(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 30)
    source = list(range(n))
    rng.shuffle(source)
    factor = [rng.choice([fmpq(1), fmpq(-1), fmpq(2), fmpq(-3, 7)]) for _ in range(n)]
    text = format_cycles(source, factor)
    assert parse_cycles(text, n) == (source, factor)
    M = monomial_matrix(source, factor)
    assert monomial_parts(M) == (source, factor)
    assert parse_cycles(text.replace("*", "·").replace("-", "−"), n) == (source, factor)


@pytest.mark.parametrize("bad", ["(1 2", "(1 1)", "(0 1)", "(1 4)", "(1 0*2)", "x(1 2)", "(1 a)"])
def test_bad_cycle_notation_is_an_input_error(bad):
    with pytest.raises(InputError):
        parse_cycles(bad, 3)


@pytest.fixture(scope="module")
def wide_model(tmp_path_factory):
    """D4 on 5x5 images, 25-96-96-25, scrambled by signed permutations (as a user's network)."""
    m = random_equivariant_model(dihedral(5), ["regular*12"] * 2, tanh_series(3), rng=0)
    m, _ = scramble(m, rng=1)
    path = tmp_path_factory.mktemp("wide") / "model.json"
    path.write_text(json.dumps(model_to_json(m)))
    return m, path


def test_verify_output_at_width_96_is_small(wide_model, capsys):
    _, path = wide_model
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Verdict: layerwise-equivariant" in out
    assert len(out.encode()) < 15_000, len(out.encode())  # was ~150 kB with dense matrices
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("  rho_1(rot90)"))
    wrapped = [lines[at]] + list(itertools.takewhile(lambda x: x.startswith("    ") and x.strip().startswith("("),
                                                     lines[at + 1:]))
    assert len(wrapped) > 1 and all(len(x) <= 100 for x in wrapped)  # a long action wraps (symeq.notation)
    text = wrapped[0].split(": ", 1)[1] + "".join(x.strip() for x in wrapped[1:])
    source, factor = parse_cycles(text, 96)
    assert sorted(source) == list(range(96)) and all(abs(c) == 1 for c in factor)
    # the dense matrices only when asked
    assert main(["verify", str(path), "--matrix"]) == 0
    dense = capsys.readouterr().out
    assert len(dense.encode()) > 10 * len(out.encode())
    assert dense.count("\n    [") >= 4 * 96
    # --json: the sparse form, the same action as the text's cycles
    assert main(["verify", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "symeq-certificate/2"
    a = data["latent_actions"][0][0]
    assert a["kind"] == "monomial" and len(a["source"]) == 96 and len(a["factor"]) == 96
    assert (source, factor) == (a["source"], [fmpq(c) for c in a["factor"]])


def test_scalars_are_shown_in_front_of_the_neuron(tmp_path, capsys):
    m = random_equivariant_model(builtin_group("shift:3"), ["regular*2"], monomial(3), rng=4)
    m, k = scramble(m, rng=5)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model_to_json(m)))
    assert main(["verify", str(path), "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["latent_actions"][0][0]
    assert main(["verify", str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  rho_1("))
    source, factor = parse_cycles(line.split(": ", 1)[1], 6)
    assert (source, [str(c) for c in factor]) == (a["source"], a["factor"])


def test_numeric_check_json_carries_the_actions(tmp_path, capsys):
    model = tmp_path / "e.json"
    assert main(["example", "--out", str(model)]) == 0
    assert main(["verify", str(model), "--json"]) == 0
    exact = json.loads(capsys.readouterr().out)["latent_actions"]
    assert main(["numeric-check", str(model), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    acts = data["actions"]
    assert [(a["layer"], a["generator"]) for a in acts] == [(1, "mirror"), (2, "mirror")]
    for a, per_layer in zip(acts, exact):
        assert a["kind"] == "monomial" and isinstance(a["residual"], float) and a["residual"] < 1e-9
        assert a["source"] == per_layer[0]["source"]
        assert [round(x) for x in a["factor"]] == [int(x) for x in per_layer[0]["factor"]]
        assert parse_cycles(a["cycles"], len(a["source"]))[0] == a["source"]
    assert main(["numeric-check", str(model)]) == 0
    assert "rho_1(mirror): (" in capsys.readouterr().out


def test_numeric_check_group_output(tmp_path, capsys):
    model = tmp_path / "e.json"
    assert main(["example", "--out", str(model)]) == 0
    # the trivial action on the output: this model is equivariant, not invariant -> exit 1
    assert main(["numeric-check", str(model), "--group", "mirror:2x3", "--group-output", "6", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["derivation"]["within_tolerance"] is False and data["actions"]
    assert main(["numeric-check", str(model), "--group", "mirror:2x3", "--group-output", "same"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["numeric-check", str(model), "--group", "mirror:2x3", "--group-output", "zero"])
    assert e.value.code == 2


def test_explain_shows_cycles_and_matrices_only_when_asked(tmp_path):
    from symeq.examples import builtin_example
    from symeq.explain import explain
    from symeq.theorem import verify

    m = builtin_example()
    v = verify(m)
    plain = explain(m, out_dir=tmp_path / "plain", verification=v)["markdown"].read_text(encoding="utf-8")
    full = explain(m, out_dir=tmp_path / "full", verification=v, matrix=True)["markdown"].read_text(encoding="utf-8")
    cycles = matrix_cycles(v.actions[0][0])
    assert f"`{cycles}`" in plain and f"`{cycles}`" in full
    assert len(full) > len(plain)


def test_numeric_text_summarises_very_wide_actions():
    from symeq.cli.numeric import MAX_TEXT_NEURONS, _action_line

    n = MAX_TEXT_NEURONS + 2
    source = [1, 0] + list(range(2, n))
    wide = {"layer": 1, "generator": "g", "source": source, "cycles": format_cycles(source, [1] * n)}
    assert _action_line(wide) == f"  rho_1(g): monomial on {n} neurons, 2 moved (--json gives its cycles)"
    small = {"layer": 2, "generator": "g", "source": [1, 0], "cycles": "(1 2)"}
    assert _action_line(small) == "  rho_2(g): (1 2)"
