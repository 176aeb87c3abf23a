"""Every option of every command has help text, and ``symeq --help`` says where to start.

The walk goes through the argparse tree of :func:`symeq.cli.build_parser` generically (every
sub-parser at every depth), so a command added later is covered without touching this file.
"""

import argparse

import pytest

from symeq.cli import build_parser, main


def _walk(parser, path=("symeq",)):
    """Yield (command path, parser) for the parser and every sub-parser below it, each once."""
    yield path, parser
    seen = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias of a command already walked
                    continue
                seen.add(id(sub))
                yield from _walk(sub, path + (name,))


def _commands():
    return list(_walk(build_parser()))


def _subcommand_help(parser):
    """The one-line help of each sub-command, as shown in its parent's --help."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                out[choice.dest] = choice.help
    return out


def test_the_walk_sees_every_command():
    names = {" ".join(p[1:]) for p, _ in _commands()}
    assert {"verify", "check", "example", "generate", "groups", "explain", "fibre", "hunt",
            "numeric-check", "experiment"} <= names


@pytest.mark.parametrize("path,parser", _commands(), ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_every_option_has_help(path, parser):
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        if not (action.help or "").strip():
            missing.append("/".join(action.option_strings) or action.dest)
    for name, text in _subcommand_help(parser).items():
        if not (text or "").strip():
            missing.append(f"command {name}")
    assert not missing, f"{' '.join(path)}: no help text for {', '.join(missing)}"
    parser.format_help()  # a stray % in a help text breaks only here


def test_a_missing_help_is_caught():
    """The check above can fail: an option added without help is found."""
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--documented", help="has help")
    p.add_argument("--bare")
    bare = [a.dest for a in p._actions if not (a.help or "").strip()]
    assert bare == ["bare"]


@pytest.mark.parametrize("path", [p for p, _ in _commands()], ids=lambda p: " ".join(p))
def test_help_exits_zero(path, capsys):
    with pytest.raises(SystemExit) as e:
        main(list(path[1:]) + ["--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


def test_top_level_help_says_where_to_start_and_the_exit_codes():
    text = build_parser().format_help()
    assert "where to start" in text
    assert "symeq verify" in text and "symeq example --out model.json" in text
    assert "symeq check cert.json model.json" in text
    exit_lines = text[text.index("exit codes:"):].splitlines()
    for code in ("0", "1", "2", "3"):
        assert any(line.strip().startswith(code + " ") for line in exit_lines), code
