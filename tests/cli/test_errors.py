"""The error classes, their exit codes, and how the command line reports them (one line, no traceback)."""

import re
import time
from pathlib import Path

import pytest

import symeq.cli as cli
import symeq.cli.verify as verify_cmds
from symeq.budget import DEFAULT_BUDGETS, Alarm, BudgetAlarm, Deadline
from symeq.errors import (
    BudgetExceeded,
    DegreeLimit,
    EngineFailed,
    EngineMissing,
    GroupTooLarge,
    InputError,
    LimitExceeded,
    MemoryLimit,
    MonomialLimit,
    OrbitLimit,
    RegionLimit,
    SymeqError,
    Undetermined,
)
from symeq.relu.regions import RegionLimitExceeded, count_regions

PACKAGE = Path(cli.__file__).resolve().parent.parent  # symeq/ (symeq.cli is a package)


@pytest.mark.parametrize("cls,limit", [(DegreeLimit, "degree"), (MonomialLimit, "monomials"), (RegionLimit, "regions"),
                                       (GroupTooLarge, "group order"), (OrbitLimit, "orbit size"),
                                       (MemoryLimit, "memory (GB)")])
def test_limit_errors_name_the_limit_its_value_and_the_option(cls, limit):
    e = cls(value=12345, maximum=100, option="--max-thing", what="building the thing")
    assert isinstance(e, LimitExceeded) and isinstance(e, InputError) and isinstance(e, ValueError)
    assert e.exit_code == 2
    assert (e.limit, e.value, e.maximum, e.option) == (limit, 12345, 100, "--max-thing")
    assert str(e) == f"building the thing: {limit} 12345 exceeds the limit 100; raise it with --max-thing"


def test_limit_error_with_a_message_of_its_own():
    e = GroupTooLarge("the group has more than 3 elements; raise max_order")
    assert str(e) == "the group has more than 3 elements; raise max_order" and e.limit == "group order"


def test_engine_failed_is_undetermined():
    e = EngineFailed("msolve", "exit status 1: bad input")
    assert isinstance(e, Undetermined) and e.exit_code == 3
    assert (e.engine, e.detail) == ("msolve", "exit status 1: bad input")
    assert str(e) == "the msolve engine failed: exit status 1: bad input"


def test_region_limit_is_a_budget_and_a_limit_error():
    net = [([[1, 0], [0, 1], [1, 1]], [0, 0, -1], True), ([[1, 1, 1]], [0], False)]
    with pytest.raises(RegionLimitExceeded) as info:
        count_regions(net, limit=2)
    e = info.value
    assert isinstance(e, BudgetExceeded) and isinstance(e, RegionLimit) and not isinstance(e, RuntimeError)
    assert e.exit_code == 3 and e.maximum == 2 and e.limit == "regions"


def test_engine_garbage_is_engine_failed():
    from symeq.fibre.engines import _parse_msolve_leading

    with pytest.raises(EngineFailed, match="msolve"):
        _parse_msolve_leading("Segmentation fault", 3)
    with pytest.raises(EngineFailed, match="msolve"):
        _parse_msolve_leading("[v0*w7]:", 3)


# -- the command line's mapping -----------------------------------------------------------------

ERRORS = [
    (InputError("bad shape"), 2, "error: bad shape"),
    (DegreeLimit(value=10**9, maximum=1000, option="--max-degree"), 2,
     "error: degree 1000000000 exceeds the limit 1000; raise it with --max-degree"),
    (EngineMissing("install it with `pip install x`"), 2, "error: install it with `pip install x`"),
    (BudgetExceeded("time budget of 1 s exceeded while X; raise --timeout"), 3, "error: time budget of 1 s"),
    (EngineFailed("giac", "killed by signal 11 (SIGSEGV)"), 3, "error: the giac engine failed: killed by signal 11"),
    (RegionLimitExceeded(7), 3, "error: more than 7 linear regions"),
    (MemoryError(), 3, "error: symeq groups ran out of memory"),
    (RuntimeError("oops"), 70, "internal error: RuntimeError: oops"),
]


@pytest.mark.parametrize("exc,code,line", ERRORS, ids=[type(e[0]).__name__ for e in ERRORS])
def test_main_maps_errors_to_exit_codes_with_one_line(monkeypatch, capsys, exc, code, line):
    def boom(args):
        raise exc

    monkeypatch.setattr(verify_cmds, "cmd_groups", boom)
    monkeypatch.delenv("SYMEQ_DEBUG", raising=False)
    assert cli.main(["groups"]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line), err


def test_every_symeq_error_has_an_exit_code_of_2_or_3():
    import symeq.errors as errors

    classes = [getattr(errors, n) for n in errors.__all__]
    assert all(issubclass(c, SymeqError) and c.exit_code in (2, 3) for c in classes)


def test_no_bare_runtime_error_for_users():
    """RuntimeError is kept for internal bugs only (exit 70): each says "internal error"."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"raise RuntimeError\(", line) and "internal error" not in line:
                offenders.append(f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}")
    assert offenders == []


# -- budgets -------------------------------------------------------------------------------------

def test_alarm_interrupts_and_names_the_last_step():
    Deadline(None).check("counting sheep")
    t = time.monotonic()
    with pytest.raises(BudgetAlarm) as info:
        with Alarm(0.2, "symeq test", grace=0):
            while time.monotonic() - t < 10:
                pass
    assert time.monotonic() - t < 2
    assert "0.2 s ran out while running symeq test (last step: counting sheep)" in info.value.message


def test_budget_backstop_exits_3_naming_the_command(monkeypatch, capsys):
    def forever(args):
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(verify_cmds, "cmd_check", forever)
    t = time.monotonic()
    assert cli.main(["check", "c.json", "m.json", "--timeout", "0.5"]) == 3
    assert time.monotonic() - t < 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "symeq check: budget 0.5 s (--timeout)"
    assert len(err) == 2 and err[1].startswith("error: the time budget of 0.5 s ran out while running symeq check")


CHEAP = {
    "verify": ["verify", "missing.json"],
    "check": ["check", "missing.json", "missing.json"],
    "fibre": ["fibre", "missing.json"],
    "explain": ["explain", "missing.json"],
    "numeric-check": ["numeric-check", "missing.json"],
    "generate": ["generate", "--group", "nonsense"],
    "certify": ["certify", "missing.json"],
    "experiment": None,  # needs torch and minutes; its parser is checked below
}


@pytest.mark.parametrize("command", sorted(DEFAULT_BUDGETS))
def test_every_command_has_a_budget_and_bad_input_is_one_line(capsys, command):
    """Every command takes --timeout; bad input is one error line, with no budget line before it
    (the budget line comes after the argument and file checks: tests/cli/test_cli_messages.py)."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert "timeout" in {a.dest for a in sub.choices[command]._actions}
    argv = CHEAP[command]
    if argv is None:
        return
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err


@pytest.mark.parametrize("argv", [["verify"], ["generate", "--group", "mirror:1x2"]])
def test_the_default_budget_line_comes_first_on_good_input(capsys, argv):
    assert cli.main(argv) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first == f"symeq {argv[0]}: budget {DEFAULT_BUDGETS[argv[0]]:g} s (default; --timeout to change)"


def test_hunt_shows_its_budget_first_and_a_finished_hunt_one_line(capsys, tmp_path):
    argv = ["hunt", "--arch", "2,4,2", "--group", "rot3", "--out", str(tmp_path / "h.jsonl"), "--budget", "3"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("symeq hunt: budget 3 candidates, no time limit "
                      "(--budget N candidates, --seconds S to change; resumable)")
    assert cli.main(argv) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and cap.out.count("\n") == 1


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "abc"])
def test_bad_timeout_or_memory_is_exit_2(capsys, value):
    for argv in (["check", "c.json", "m.json", "--timeout", value], ["fibre", "m.json", "--memory", value]):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
    if value == "abc":
        with pytest.raises(SystemExit):
            cli.main(["verify", "--timeout", value])
    else:
        assert cli.main(["verify", "--timeout", value]) == 2
        assert "--timeout must be a non-negative number" in capsys.readouterr().err


def test_zero_memory_is_exit_2_and_zero_timeout_exit_3(monkeypatch, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["fibre", "m.json", "--memory", "0"])
    assert info.value.code == 2

    def forever(args):
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(verify_cmds, "cmd_check", forever)
    assert cli.main(["check", "c.json", "m.json", "--timeout", "0"]) == 3


def test_closed_stdout_is_not_an_internal_error(monkeypatch, capsys):
    def closed(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(verify_cmds, "cmd_groups", closed)
    monkeypatch.setattr(cli.os, "dup2", lambda *a: None)  # keep this process's real stdout (pytest -s)
    assert cli.main(["groups"]) == 141
    assert "internal error" not in capsys.readouterr().err


def test_a_crashed_engine_leaves_the_fibre_unknown_with_its_report(monkeypatch):
    """EngineFailed inside the orbit comparison is an open question ("unknown"), not a crash."""
    from symeq.activations import tanh_series
    from symeq.errors import EngineFailed
    from symeq.fibre import orbit
    from symeq.models import DenseLayer, Model
    from symeq.numbers import matrix

    def crash(*args, **kwargs):
        raise EngineFailed("singular", "killed by signal 11 (SIGSEGV)")

    monkeypatch.setattr(orbit, "groebner", crash)
    m = Model(2, [DenseLayer(matrix([[1, 2], [3, -1]]), [1, 2], tanh_series(3)),
                  DenseLayer(matrix([[1, 1]]), [0], None)])
    c = orbit.compare_with_orbit(m, structural=False)
    assert c.status == "unknown"
    assert "engine failed" in c.reason and "SIGSEGV" in c.reason
