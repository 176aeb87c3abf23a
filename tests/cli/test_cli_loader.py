"""The command line reads models in one place (symeq/cli/loader.py): every command that takes a model
and ``--group`` applies the group the same way and refuses a model without one with the same error."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from symeq.cli import main
from symeq.cli.loader import NO_GROUP
from symeq.examples import builtin_example
from symeq.io import model_to_json

CLI = Path(__file__).resolve().parents[2] / "symeq" / "cli"


@pytest.fixture
def groupless(tmp_path):
    """The built-in example's file with its "group" removed, as a user might write it."""
    data = model_to_json(builtin_example())
    del data["group"]
    path = tmp_path / "nogroup.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("argv", [["verify"], ["explain", "--out", "{tmp}/e"], ["numeric-check"]])
def test_a_model_without_a_group_is_the_same_input_error_everywhere(argv, groupless, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv + [str(groupless)]) == 2
    err = capsys.readouterr().err
    assert f"error: {NO_GROUP}" in err and "Traceback" not in err


def test_group_option_supplies_the_missing_group(groupless, capsys):
    # the example is the scrambled mirror-equivariant MLP: with the group given on the command line
    # it verifies exactly as the file with its group does
    assert main(["verify", str(groupless), "--group", "mirror:2x3", "--timeout", "120"]) == 0
    assert "group mirror 2x3x1" in capsys.readouterr().err
    assert main(["numeric-check", str(groupless), "--group", "mirror:2x3"]) == 0


def test_an_unknown_group_is_an_input_error(groupless, capsys):
    assert main(["numeric-check", str(groupless), "--group", "no-such-group"]) == 2
    assert "unknown built-in group 'no-such-group'" in capsys.readouterr().err


def test_only_the_loader_reads_model_files_or_groups():
    """No command reads a model file or builds a --group itself (one loader, not three copies)."""
    readers = {"load_model", "load_numeric_model", "builtin_group", "builtin_example", "with_group"}
    calls = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "loader.py":
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                    if name in readers:
                        calls.append((path.name, fn.name, name))
    # `symeq example` writes the built-in example file: it loads no model, so it is the one exception
    assert calls == [("verify.py", "cmd_example", "builtin_example")]
