"""Issue 25, Deliver 3: ``symeq fibre`` always prints the one report with the strongest result reached.

Every path through the command line with ``--json``: the rank step says "unknown" and the Gröbner step is
refused by its size guard; the budget runs out in the Gröbner step (cooperatively, or in code that checks
no deadline) after a local answer; the Gröbner step after a proven answer is capped (enforced, also
against code that checks no deadline); ``--method groebner`` alone refused (exit 2, report printed).
Refusals and slow steps are forced by monkeypatching the step, so each test takes seconds.
"""

import json
import time

import pytest

from symeq.activations import tanh_series
from symeq.cli import main
from symeq.errors import BudgetExceeded, MonomialLimit
from symeq.examples import builtin_example
from symeq.fibre import decide as decide_mod
from symeq.fibre import jacobian, orbit
from symeq.io import model_to_json
from symeq.models import DenseLayer, Model


def _write(tmp_path, model, name="m.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(model_to_json(model)))
    return str(path)


def _dead_neuron() -> Model:
    """Two hidden tanh_3 layers, neuron 1 of hidden layer 1 with zero incoming weights: the Jacobian step
    proves not identifiable (a constant-neuron family)."""
    a = tanh_series(3)
    return Model(2, [DenseLayer([[0, 0], [1, 2], [3, -1]], [1, 2, -1], a),
                     DenseLayer([[1, 2, -1], [2, 1, 1]], [1, -1], a), DenseLayer([[1, -2]], [1], None)])


def _unknown_rank(real=jacobian.jacobian_identifiability):
    """A Jacobian-rank step that reached nothing (as on a model whose rank misses the bound)."""
    import dataclasses

    def step(model, **k):
        d = real(model, **k)
        return dataclasses.replace(d, status="unknown", certificate=None,
                                   reason="jacobian-rank: the rank misses the bound: a missed bound proves nothing")

    return step


def _refuse(*a, **k):
    raise MonomialLimit(value=10 ** 9, maximum=3, option="--max-monomials", what="building the fibre ideal")


def _out_of_time(*a, **k):
    raise BudgetExceeded("time budget of 2 s exceeded while expanding the fibre ideal; raise --timeout")


def _deaf(*a, **k):
    """A Gröbner step that checks no deadline."""
    time.sleep(60)
    raise AssertionError("the cap did not stop the step")  # pragma: no cover


def _json(capsys):
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_rank_unknown_and_groebner_refused_prints_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(jacobian, "jacobian_identifiability", _unknown_rank())
    monkeypatch.setattr(orbit, "compare_with_orbit", _refuse)
    path = _write(tmp_path, builtin_example().with_group(None))
    assert main(["fibre", path, "--json"]) == 3
    d, err = _json(capsys)
    assert d["status"] == "unknown" and d["limit"]["maximum"] == 3 and d["limit"]["limit"] == "monomials"
    assert [t["status"] for t in d["tried"] if t["method"] in ("jacobian-rank", "groebner")] == ["unknown", "refused"]
    assert "error:" not in err and "groebner: refused" in err


def test_groebner_refused_keeps_the_local_answer(tmp_path, capsys):
    """A real size guard (--max-monomials 3) in the Gröbner step: the locally-identifiable answer stands."""
    path = _write(tmp_path, builtin_example().with_group(None))
    assert main(["fibre", path, "--json", "--max-monomials", "3"]) == 3
    d, _ = _json(capsys)
    assert (d["status"], d["method"]) == ("locally-identifiable", "jacobian-rank")
    assert d["limit"]["maximum"] == 3 and d["tried"][-1]["status"] == "refused"


@pytest.mark.parametrize("step", [_out_of_time, pytest.param(_deaf, marks=pytest.mark.slow)])
def test_budget_in_the_groebner_step_keeps_the_local_answer(tmp_path, capsys, monkeypatch, step):
    monkeypatch.setattr(orbit, "compare_with_orbit", step)
    path = _write(tmp_path, builtin_example().with_group(None))
    t0 = time.perf_counter()
    assert main(["fibre", path, "--json", "--timeout", "3"]) == 3
    assert time.perf_counter() - t0 < 15
    d, _ = _json(capsys)
    assert (d["status"], d["method"]) == ("locally-identifiable", "jacobian-rank")
    assert d["tried"][-1]["method"] == "groebner" and d["tried"][-1]["status"] == "unknown"


def test_cap_after_a_proven_answer_is_enforced(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(decide_mod, "PROVEN_STEP_CAP", 1.0)
    monkeypatch.setattr(orbit, "compare_with_orbit", _deaf)
    path = _write(tmp_path, _dead_neuron())
    t0 = time.perf_counter()
    assert main(["fibre", path, "--json"]) == 1
    assert time.perf_counter() - t0 < 10
    d, _ = _json(capsys)
    assert (d["status"], d["method"]) == ("not-identifiable", "jacobian-rank")
    assert "cap of 1 s" in d["tried"][-1]["reason"]


def test_cap_restores_the_command_alarm(monkeypatch):
    """After a capped step the command's own timer runs again with the time it had left."""
    import signal

    monkeypatch.setattr(decide_mod, "PROVEN_STEP_CAP", 0.3)
    monkeypatch.setattr(orbit, "compare_with_orbit", _deaf)
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 30.0)
    try:
        r = decide_mod.decide_identifiability(_dead_neuron(), certificate=False)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert r.status == "not-identifiable" and r.exit_code == 1 and not fired
    assert 20 < left < 30


def test_groebner_alone_refused_prints_the_report_and_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(orbit, "compare_with_orbit", _refuse)
    path = _write(tmp_path, builtin_example().with_group(None))
    assert main(["fibre", path, "--json", "--method", "groebner"]) == 2
    d, err = _json(capsys)
    assert d["status"] == "unknown" and d["limit"]["option"] == "--max-monomials"
    assert "error: building the fibre ideal: monomials" in err


def test_groebner_alone_out_of_time_prints_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(orbit, "compare_with_orbit", _out_of_time)
    path = _write(tmp_path, builtin_example().with_group(None))
    assert main(["fibre", path, "--json", "--method", "groebner"]) == 3
    d, _ = _json(capsys)
    assert d["status"] == "unknown" and "time budget" in d["reason"]


def test_jacobian_rank_alone_refused_prints_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(jacobian, "jacobian_identifiability", _refuse)
    path = _write(tmp_path, builtin_example().with_group(None))
    assert main(["fibre", path, "--json", "--method", "jacobian-rank"]) == 2
    d, _ = _json(capsys)
    assert d["status"] == "unknown" and d["limit"]["maximum"] == 3


def test_verify_identifiability_keeps_the_layerwise_result_when_groebner_is_refused(monkeypatch):
    from symeq.groups import trivial_group
    from symeq.theorem import verify

    monkeypatch.setattr(jacobian, "jacobian_identifiability", _unknown_rank())
    monkeypatch.setattr(orbit, "compare_with_orbit", _refuse)
    m = Model(2, [DenseLayer([[1, 2], [3, -1], [2, 5]], [1, -2, 3], tanh_series(3)),
                  DenseLayer([[2, -1, 3]], [1], None)], group=trivial_group(2, 1))
    v = verify(m, method="grid", identifiability=True)
    assert v.verdict == "layerwise-equivariant" and v.exit_code == 3
    assert v.identifiability["status"] == "undetermined" and v.identifiability["limit"]["maximum"] == 3


@pytest.mark.slow
def test_real_groebner_step_after_a_proven_answer_is_capped(tmp_path, capsys):
    """No monkeypatch: (2,3,3,1) tanh_3 with a dead neuron in hidden layer 2; the Jacobian step proves
    not identifiable, the Gröbner step would run far longer than its 10 s cap (about 11 s in all)."""
    import random

    r = random.Random(5)
    a = tanh_series(3)
    w = [2, 3, 3, 1]
    layers = []
    for i in range(3):
        W = [[r.randint(-3, 3) or 1 for _ in range(w[i])] for _ in range(w[i + 1])]
        if i == 1:
            W[1] = [0] * w[i]
        layers.append(DenseLayer(W, [r.randint(-3, 3) for _ in range(w[i + 1])], a if i < 2 else None))
    path = _write(tmp_path, Model(2, layers))
    t0 = time.perf_counter()
    assert main(["fibre", path, "--json"]) == 1
    assert time.perf_counter() - t0 < 10 + 8
    d, _ = _json(capsys)
    assert (d["status"], d["method"]) == ("not-identifiable", "jacobian-rank")
    assert d["tried"][-1]["method"] == "groebner"
