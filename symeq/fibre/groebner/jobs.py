"""Engine processes: one :class:`_Job` per child, started through :mod:`symeq.procs`.

Every engine runs in a child process started by :func:`symeq.procs.spawn`: in its own session,
killed as a whole process group past the budget, killed with symeq however symeq ends, under an
address-space cap.  Python workers are also told their parent's pid and their deadline.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from ... import procs
from ...budget import process_deadline
from ...errors import EngineFailed
from .result import GroebnerResult


@functools.lru_cache(maxsize=None)
def _wheel_binary(name: str) -> str | None:
    """The copy a passagemath wheel ships at site-packages/sage_wheels/bin/, else ``name`` on PATH."""
    candidates = []
    for key in ("purelib", "platlib"):
        try:
            candidates.append(Path(sysconfig.get_paths()[key]))
        except KeyError:
            pass
    candidates += [Path(p) for p in sys.path if p]
    for base in candidates:
        exe = base / "sage_wheels" / "bin" / name
        if exe.is_file() and os.access(exe, os.X_OK):
            return str(exe)
    return shutil.which(name)


@dataclass
class _Job:
    """One engine run in a child process (its own session, so its whole group can be killed)."""

    engine: str
    cmd: list
    parse: object                   # (job) -> GroebnerResult
    tmp: Path
    stdin: Path | None = None
    tag: str = ""
    proc: object = None
    t0: float = 0.0
    seconds: float = 0.0

    def start(self, deadline: float | None = None) -> None:
        """Start the engine (:func:`symeq.procs.spawn`: own session, dies with symeq, memory cap).

        ``deadline`` (a ``time.perf_counter()`` value) is passed on to python workers, which stop
        themselves shortly after it even when nobody is left to kill them."""
        out = open(self.tmp / f"{self.tag}.stdout", "wb")
        err = open(self.tmp / f"{self.tag}.stderr", "wb")
        inp = open(self.stdin, "rb") if self.stdin else subprocess.DEVNULL
        env = _child_env()
        env[WORKER_PARENT_ENV] = str(os.getpid())
        if deadline is None:
            deadline = process_deadline()  # the command's own budget (symeq.cli)
        if deadline is not None:
            env[WORKER_DEADLINE_ENV] = f"{max(0.0, deadline - time.perf_counter()) + WORKER_GRACE:.3f}"
        try:
            self.t0 = time.perf_counter()
            # engines (giac) write files in cwd
            self.proc = procs.spawn(self.cmd, stdin=inp, stdout=out, stderr=err, env=env, cwd=str(self.tmp))
        finally:
            out.close()
            err.close()
            if self.stdin:
                inp.close()

    def poll(self) -> bool:
        if self.proc is None or self.proc.poll() is None:
            return False
        if not self.seconds:
            self.seconds = time.perf_counter() - self.t0
        return True

    def kill(self) -> None:
        if self.proc is not None:
            procs.kill_group(self.proc)

    @property
    def stdout(self) -> str:
        return (self.tmp / f"{self.tag}.stdout").read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return (self.tmp / f"{self.tag}.stderr").read_text(errors="replace")

    def result(self) -> GroebnerResult:
        if self.proc.returncode != 0:
            raise procs.failure(self.engine, self.proc, self.stderr, self.stdout)
        try:
            r = self.parse(self)
        except (ValueError, KeyError, IndexError, TypeError) as e:  # unreadable output (json, int(...))
            raise EngineFailed(self.engine, f"unreadable output ({e})") from None
        r.seconds = self.seconds
        return r


#: environment variables telling a python worker its parent's pid and its own deadline (seconds)
WORKER_PARENT_ENV = "SYMEQ_WORKER_PARENT"
WORKER_DEADLINE_ENV = "SYMEQ_WORKER_DEADLINE"
#: seconds a python worker runs past the caller's deadline before it stops itself
WORKER_GRACE = 5.0


def _child_env() -> dict:
    root = str(Path(__file__).resolve().parents[3])  # the folder holding the symeq package
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))


def _wait(jobs: list, deadline: float | None, until=None) -> None:
    """Poll ``jobs`` until all are done, ``until(jobs)`` is true, or the deadline passes."""
    t0 = time.perf_counter()
    while True:
        running = [j for j in jobs if not j.poll()]
        if not running or (until is not None and until(jobs)):
            return
        now = time.perf_counter()
        if deadline is not None and now >= deadline:
            return
        # fine polling first (small ideals take milliseconds), coarser later
        time.sleep(0.001 if now - t0 < 0.2 else (0.005 if now - t0 < 2 else 0.02))
