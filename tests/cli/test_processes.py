"""Child processes die with symeq, whatever kills it; signals end a command with one line.

Each test starts symeq (or a small parent) as a real process, finds its children through /proc
(the ``ppid`` field of ``/proc/PID/stat``), kills the parent and checks that no child (and no
process of a child's process group) is left 2 s later.  Linux only (/proc).
"""

import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from symeq import procs
from symeq.activations import tanh_series
from symeq.errors import EngineFailed, MemoryLimit
from symeq.fibre.engines import available_engines, install_command
from symeq.io import save_model
from symeq.models import DenseLayer, Model

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

INSTALLED = set(available_engines())
W33 = [[1, 2, -1], [3, -1, 2], [-2, 1, 1]]
ROOT = str(Path(__file__).resolve().parents[2])


def busy_model() -> Model:
    """(3,3,3) tanh_series(3) with biases: its fibre ideal keeps every Gröbner engine busy >= 10 s."""
    return Model(3, [DenseLayer(W33, [1, -1, 2], tanh_series(3)),
                     DenseLayer([[2, -1, 1], [1, 1, -3], [-1, 2, 2]], [1, 0, -1], None)])


def _stat(pid: int):
    """(state, ppid, pgrp) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[2])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _children(parent: int) -> list[int]:
    out = []
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[1] == parent and st[0] != "Z":
            out.append(pid)
    return out


def _alive(pids, groups) -> list[str]:
    """Live (non-zombie) processes among ``pids`` or in the process groups ``groups``."""
    left = []
    for pid in _all_pids():
        st = _stat(pid)
        if st is None or st[0] == "Z":
            continue
        if pid in pids or st[2] in groups:
            left.append(f"{pid} ({st[0]}): {_cmdline(pid)}")
    return left


def _wait_gone(pids, groups, seconds=2.0) -> list[str]:
    t = time.monotonic() + seconds
    while True:
        left = _alive(pids, groups)
        if not left or time.monotonic() > t:
            return left
        time.sleep(0.05)


def _env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))


def _start(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "symeq", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=_env(), **kw)


def _wait_for(predicate, seconds=60.0, what="the condition"):
    t = time.monotonic() + seconds
    while time.monotonic() < t:
        v = predicate()
        if v:
            return v
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def _engine_children(pid: int, proc=None) -> list[int]:
    """symeq's children that are engines (not its guardian)."""
    if proc is not None and proc.poll() is not None:
        pytest.fail(f"symeq ended early (exit {proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
    return [c for c in _children(pid) if procs.GUARDIAN_NAME not in _cmdline(c)]


def _engine_groups(kids) -> set[int]:
    """The process groups of the engine children, read once each child runs in its own session.

    A child seen right after fork still sits in the test's own process group until its setsid;
    reading that group would count pytest itself as a leftover engine."""
    deadline = time.monotonic() + 5
    while True:
        stats = {k: _stat(k) for k in kids}
        if all(st is None or st[2] == k for k, st in stats.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    # a child caught between fork and exec still shows symeq's command line: once settled, the
    # guardian (which outlives symeq by a moment, killing what is registered) is not an engine
    return {st[2] for k, st in stats.items() if st is not None and procs.GUARDIAN_NAME not in _cmdline(k)} \
        - {os.getpgrp()}


def _engines_only(kids) -> set[int]:
    """The engine children among ``kids`` (read after :func:`_engine_groups` let them settle)."""
    return {k for k in kids if procs.GUARDIAN_NAME not in _cmdline(k)}


def _fibre_args(model_path, engine):
    args = ["fibre", str(model_path), "--engine", engine, "--timeout", "120"]
    if _fibre_has_method():  # the Gröbner route, not the tensor method
        args += ["--method", "groebner"]
    return args


@functools.lru_cache(maxsize=None)
def _fibre_has_method() -> bool:
    from symeq.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return any(a.dest == "method" for a in sub.choices["fibre"]._actions)


def engine_param(engine):
    return pytest.param(engine, marks=pytest.mark.skipif(engine not in INSTALLED and engine != "auto",
                                                         reason=f"`{install_command(engine)}`"))


@pytest.mark.parametrize("engine", [engine_param(e) for e in ("sympy", "auto", "singular", "giac", "msolve")])
def test_sigkill_of_symeq_fibre_leaves_no_engine(tmp_path, engine):
    path = tmp_path / "busy.json"
    save_model(busy_model(), path)
    p = _start(_fibre_args(path, engine))
    try:
        kids = _wait_for(lambda: _engine_children(p.pid, p), what="an engine child of symeq fibre")
        time.sleep(0.3)  # let auto start its second wave of engines too
        kids = set(kids) | set(_engine_children(p.pid, p))
        groups = _engine_groups(kids)
        everyone = set(kids) | {c for c in _children(p.pid)}
        assert groups, "the engines lead their own process groups"
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert _wait_gone(everyone, groups) == [], "engine processes outlived symeq"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_sympy_worker_stops_itself_at_its_deadline(tmp_path):
    from symeq.fibre import engines, fibre_ideal

    variables, polys = engines._system(fibre_ideal(busy_model()))
    job = engines._python_job("buchberger", variables, polys, tmp_path, "w")
    env = _env()
    env[engines.WORKER_DEADLINE_ENV] = "1"
    t = time.monotonic()
    with open(job.stdin, "rb") as inp:
        r = subprocess.run(job.cmd, stdin=inp, capture_output=True, env=env, timeout=60)
    assert r.returncode == -signal.SIGALRM, r.stderr.decode()[-500:]
    assert time.monotonic() - t < 10


def test_sympy_worker_watches_its_parent(tmp_path):
    """No death signal here (a plain Popen parent): the worker's own parent watch ends it."""
    from symeq.fibre import engines, fibre_ideal

    variables, polys = engines._system(fibre_ideal(busy_model()))
    job = engines._python_job("buchberger", variables, polys, tmp_path, "w")
    parent = textwrap.dedent(f"""
        import os, subprocess, sys, time
        env = dict(os.environ, {engines.WORKER_PARENT_ENV}=str(os.getpid()))
        w = subprocess.Popen({job.cmd!r}, stdin=open({str(job.stdin)!r}, "rb"), stdout=subprocess.DEVNULL,
                             env=env, start_new_session=True)
        print(w.pid, flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, env=_env())
    try:
        worker = int(p.stdout.readline())
        time.sleep(1.0)  # the worker is up and computing
        assert _alive({worker}, set()), "the worker should still be computing"
        p.kill()
        p.wait()
        assert _wait_gone({worker}, {worker}) == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_guardian_kills_the_group_without_the_death_signal():
    """A child spawned from a worker thread gets no PR_SET_PDEATHSIG: the guardian alone ends it."""
    parent = textwrap.dedent("""
        import threading, time
        from symeq import procs
        box = []
        t = threading.Thread(target=lambda: box.append(procs.spawn(["sleep", "120"])))
        t.start(); t.join()
        print(box[0].pid, flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, env=_env())
    try:
        child = int(p.stdout.readline())
        assert _alive({child}, set())
        p.kill()
        p.wait()
        assert _wait_gone({child}, {child}) == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_spawn_kill_group_and_registry():
    p = procs.spawn(["sh", "-c", "sleep 60 & sleep 60"])
    _wait_for(lambda: _children(p.pid), seconds=10, what="sh's child")
    assert p.pid in procs.live_groups()
    assert _stat(p.pid)[2] == p.pid  # its own process group
    procs.kill_group(p)
    assert _wait_gone({p.pid}, {p.pid}) == []
    assert p.pid not in procs.live_groups()


def test_memory_cap_is_a_limit_error():
    p = procs.spawn([sys.executable, "-c", "x = bytearray(2 * 2**30)"], stderr=subprocess.PIPE,
                    memory=400 * 2**20)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    e = procs.failure("python", p, err.decode())
    assert isinstance(e, MemoryLimit) and e.exit_code == 2 and "--memory" in str(e)


def test_memory_cap_through_the_cli(tmp_path):
    from symeq.cli import main

    path = tmp_path / "busy.json"
    save_model(busy_model(), path)
    args = _fibre_args(path, "sympy")
    args[args.index("--timeout") + 1] = "30"
    old = procs.memory_cap()
    try:
        code = main(args + ["--memory", "0.03"])
    finally:
        procs.set_memory_cap(None)
    assert code == 2
    assert procs.memory_cap() == old


def test_a_crash_is_engine_failed():
    p = procs.spawn([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                    memory=False)
    p.wait(timeout=30)
    e = procs.failure("python", p, "")
    assert isinstance(e, EngineFailed) and e.exit_code == 3 and "SIGSEGV" in str(e)


def slow_relu_model(pairs: int = 8, rng: int = 5) -> Model:
    """An equivariant ReLU network 6-16-6 with no layerwise action at theta: `symeq verify` must work.

    f(x) = (I + J) x (J the all-ones matrix, equivariant under the mirror of 2x3 images) written as
    sum_i v_i (relu(w_i x) - relu(-w_i x)) over 8 random integer rows w_i, with V W = I + J.  The
    rows are not closed under the mirror, so the layers-first proof fails at once and verify proves
    the premise by exact region enumeration (about 25 s alone on one free core), then searches the fibre.
    """
    import random

    from flint import fmpq_mat

    from symeq.activations import relu
    from symeq.groups import builtin_group

    r = random.Random(rng)
    group = builtin_group("mirror:2x3")
    n = group.input_dim
    W = fmpq_mat([[r.randint(-3, 3) for _ in range(n)] for _ in range(pairs)])
    L = fmpq_mat([[1 + (i == j) for j in range(n)] for i in range(n)])
    V = L * (W.transpose() * W).inv() * W.transpose()  # V W = L: sum_i v_i w_i = I + J
    w = [[W[i, j] for j in range(n)] for i in range(pairs)]
    v = [[V[i, j] for j in range(pairs)] for i in range(n)]
    hidden = DenseLayer(w + [[-a for a in row] for row in w], [0] * (2 * pairs), relu())
    out = DenseLayer([row + [-a for a in row] for row in v], [0] * n, None)
    return Model(n, [hidden, out], group=group, name="equivariant relu net without a layerwise action")


def test_slow_relu_model_is_equivariant_without_an_action():
    """The model behind the signal test: f is (I + J) x exactly, yet no layer maps onto itself under g."""
    from symeq.layerwise import derive_latent_actions

    model = slow_relu_model()
    x = [1, -2, 3, 0, 5, -1]
    assert model(x) == [a + sum(x) for a in x]
    assert not derive_latent_actions(model, model.group).found


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_verify_signal_exits_with_one_line(tmp_path, sig, code, word):
    """Ctrl-C (SIGINT) -> 130 and SIGTERM -> 143 while `symeq verify` computes: one line, no traceback."""
    path = tmp_path / "relu.json"
    save_model(slow_relu_model(), path)
    p = _start(["verify", str(path)])
    try:
        first = p.stderr.readline().decode()
        assert first.startswith("symeq verify: budget 300 s")
        p.stderr.readline()       # "verifying ...": the model is loaded, the work has begun
        time.sleep(0.5)
        assert p.poll() is None, "verify should still be computing"
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        lines = [ln for ln in err.decode().splitlines() if ln.strip()]
        assert p.returncode == code, err.decode()
        assert "Traceback" not in err.decode()
        assert lines == [f"symeq verify: {word} ({signal.Signals(sig).name}); stopped"]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_fibre_signal_stops_the_engines(tmp_path, sig, code):
    """The same handling in `symeq fibre`, with engine processes running: they are gone at once."""
    path = tmp_path / "busy.json"
    save_model(busy_model(), path)
    p = _start(_fibre_args(path, "sympy"))
    try:
        kids = _wait_for(lambda: _engine_children(p.pid, p), what="an engine child of symeq fibre")
        groups = _engine_groups(kids)
        kids = _engines_only(kids)
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        assert p.returncode == code, err.decode()
        assert "Traceback" not in err.decode()
        assert _alive(kids, groups) == [], "symeq exited before its engines were gone"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_budget_line_comes_first_and_budget_exit_3(tmp_path):
    path = tmp_path / "busy.json"
    save_model(busy_model(), path)
    args = _fibre_args(path, "sympy")
    args[args.index("--timeout") + 1] = "2"
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "symeq", *args, "--json"], capture_output=True, text=True, env=_env(),
                       timeout=120)
    assert r.stderr.splitlines()[0] == "symeq fibre: budget 2 s (--timeout)"
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - t < 30
    assert json.loads(r.stdout)["status"] == "unknown"
