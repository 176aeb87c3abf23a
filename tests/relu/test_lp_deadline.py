"""The exact LP (symeq.relu.lp) checks its time budget inside its loops (issue 19, bounded resources).

A ReLU verify whose region enumeration runs long answers undetermined (exit 3) shortly after its
budget, also through the Python API (where no alarm backstops it)."""

from __future__ import annotations

import json
import random
import time

import pytest

from symeq.budget import Deadline
from symeq.cli import main
from symeq.errors import BudgetExceeded
from symeq.relu import lp
from symeq.relu.lp import deadline_scope, interior_point, solve_lp
from symeq.relu.regions import decide_equivariance


class CountingDeadline(Deadline):
    """A deadline that expires at its ``n``-th check naming the LP (records every step it saw)."""

    def __init__(self, n: int):
        super().__init__(None)
        self.n, self.seen = n, []

    def check(self, what: str) -> None:
        self.seen.append(what)
        if "exact LP" in what and sum("exact LP" in w for w in self.seen) >= self.n:
            raise BudgetExceeded(f"test budget exceeded while {what}")


def _cube_lp(n):
    """max sum x on the cube 0 <= x_i <= 1: n pivots."""
    A = [[1 if j == i else 0 for j in range(n)] for i in range(n)]
    return [1] * n, A, [1] * n


def test_solve_lp_checks_its_deadline_between_pivots():
    c, A, b = _cube_lp(40)
    assert solve_lp(c, A, b).pivots == 40
    d = CountingDeadline(3)
    with pytest.raises(BudgetExceeded, match="solving an exact LP"):
        solve_lp(c, A, b, deadline=d)
    # set-up check, then one check every CHECK_EVERY pivots: stopped after 2 * CHECK_EVERY pivots at most
    assert sum("solving an exact LP" in w for w in d.seen) == 2
    with pytest.raises(BudgetExceeded, match="time budget of 0 s exceeded while setting up an exact LP"):
        solve_lp(c, A, b, deadline=Deadline(0))


def test_interior_point_and_scope():
    with pytest.raises(BudgetExceeded):
        interior_point([[1, 0], [0, 1], [-1, -1]], [0, 0, 1], deadline=Deadline(0))
    with deadline_scope(Deadline(0)):
        with pytest.raises(BudgetExceeded):
            interior_point([[1, 0], [0, 1], [-1, -1]], [0, 0, 1])
    assert not lp._SCOPE  # the scope is closed again, also after the exception
    assert interior_point([[1, 0], [0, 1], [-1, -1]], [0, 0, 1])[1] > 0
    with deadline_scope(None):  # no deadline: nothing to check
        assert solve_lp(*_cube_lp(3)).status == "optimal"


def _relu_net(n, width, seed):
    rnd = random.Random(seed)
    W1 = [[rnd.randint(-3, 3) for _ in range(n)] for _ in range(width)]
    b1 = [rnd.randint(-2, 2) for _ in range(width)]
    W2 = [[rnd.randint(-3, 3) for _ in range(width)]]
    return W1, b1, W2


def test_region_enumeration_stops_inside_an_lp():
    """decide_equivariance checks its deadline between regions; the LPs check it inside a region."""
    W1, b1, W2 = _relu_net(3, 8, 1)
    layers = [(W1, b1, True), (W2, [0], False)]
    rho = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]
    d = CountingDeadline(2)
    with pytest.raises(BudgetExceeded, match="exact LP"):
        decide_equivariance(layers, rho, [[1]], deadline=d)
    assert not lp._SCOPE
    assert not any("linear regions" in w for w in d.seen[:1])  # stopped by the LP's own check


def _identity_net_json(n, seed):
    """relu(Ax) - relu(-Ax) = Ax, then A^-1: f = id, equivariant under the cyclic shift, but the
    hidden layer has no permutation action (so the premise goes to region enumeration)."""
    from flint import fmpq_mat
    rnd = random.Random(seed)
    A = [[(1 if i == j else (rnd.randint(-2, 2) if j > i else 0)) for j in range(n)] for i in range(n)]
    P = [[rnd.random() for _ in range(n)] for _ in range(n)]  # mix the rows (keeps A invertible)
    order = sorted(range(n), key=lambda i: P[i][0])
    A = [A[i] for i in order]
    Ai = fmpq_mat(A).inv()
    Ainv = [[str(Ai[i, j]) for j in range(n)] for i in range(n)]
    W1 = [[str(x) for x in r] for r in A] + [[str(-x) for x in r] for r in A]
    W2 = [Ainv[i] + [str(-fmpq_mat(A).inv()[i, j]) for j in range(n)] for i in range(n)]
    rot = [[str(int(j == (i + 1) % n)) for j in range(n)] for i in range(n)]
    return {"format": "symeq-model/1", "input_dim": n, "layers": [
        {"type": "dense", "weight": W1, "bias": None, "activation": {"type": "relu"}},
        {"type": "dense", "weight": W2, "bias": None, "activation": None}],
        "group": {"generators": [{"input": rot, "output": rot}]}}


def test_tiny_budget_relu_verify_is_undetermined_promptly(tmp_path, capsys):
    """f = id through 2n ReLU neurons without an action: verify enumerates regions; a 0.3 s budget
    gives exit 3 from the enumeration's own deadline check, not from the command's alarm (budget + grace),
    whose message is "ran out while running" (no wall-clock assertion: a loaded machine must not fail it)."""
    path = tmp_path / "relu.json"
    path.write_text(json.dumps(_identity_net_json(9, 3)))
    rc = main(["verify", str(path), "--timeout", "0.3"])
    out = capsys.readouterr()
    assert rc == 3, out.out + out.err
    assert "time budget of 0.3 s exceeded while" in out.out + out.err
    assert "ran out while running" not in out.out + out.err


def test_region_decision_of_a_model_stops_in_time():
    """The model-level premise decision (symeq.equivariance) under a 0.2 s deadline."""
    from symeq.equivariance import decide_equivariance as decide_model
    from symeq.io import model_from_json
    m = model_from_json(_identity_net_json(9, 3))
    t0 = time.monotonic()
    with pytest.raises(BudgetExceeded, match="time budget of 0.2 s exceeded"):
        decide_model(m, m.group, deadline=Deadline(0.2))
    assert time.monotonic() - t0 < 1.0
