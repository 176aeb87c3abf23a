"""Child processes that die with symeq, whatever kills it, under a memory cap.

Every engine (Singular, giac, msolve, the python workers) runs through :func:`spawn`:

* in a session of its own, so its whole process group can be killed (:func:`kill_group`);
* on Linux with ``PR_SET_PDEATHSIG = SIGKILL`` (``prctl(2)``, through :mod:`ctypes` in the
  child before ``exec``): the kernel kills it the moment the spawning process dies, SIGKILL
  included;
* registered with a *guardian*: one small helper process per symeq process (started at the
  first spawn, in its own session, deaf to SIGINT/SIGTERM/SIGHUP) that holds the read end of a
  pipe whose write end only symeq holds.  When symeq dies, however it dies, the pipe reaches end
  of file and the guardian kills every process group still registered.  This is the portable
  fallback (no ``prctl`` outside Linux) and also catches processes an engine started itself,
  which the death signal does not reach;
* with an address-space cap (``RLIMIT_AS``, :func:`memory_cap`; default 75 % of the physical
  memory, ``--memory GB`` on the command line).  An engine that runs into it is reported as
  :class:`~symeq.errors.MemoryLimit` (exit 2, see :func:`failure`), not as a crash.

Python workers (:mod:`symeq.fibre._sympy_worker`) also watch their parent themselves
(:func:`watch_parent`) and carry a deadline of their own.

>>> p = spawn(["true"])
>>> p.wait(), live_groups()
(0, [])
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

try:
    import resource  # imported here: the child between fork and exec must not import
except ImportError:  # pragma: no cover - not POSIX
    resource = None

from .errors import EngineFailed, MemoryLimit

__all__ = [
    "spawn",
    "kill_group",
    "kill_all",
    "live_groups",
    "memory_cap",
    "set_memory_cap",
    "default_memory_cap",
    "failure",
    "watch_parent",
    "die_with_parent",
]

_PR_SET_PDEATHSIG = 1
#: how the guardian process shows in ``ps`` (its command line ends with this word)
GUARDIAN_NAME = "symeq-guardian"
_lock = threading.Lock()
_groups: dict[int, subprocess.Popen] = {}   # pgid -> leader, while unreaped
_guardian = None                            # (Popen, write end) of the guardian, once started
_cap: int | None = None                     # bytes; None = default_memory_cap()
_cap_set = False


def _after_fork_in_child() -> None:
    # a forked child (a process pool's worker) owns none of its parent's children, and must not
    # inherit a lock some other thread held at the fork
    global _lock, _groups, _guardian
    _lock = threading.Lock()
    _groups = {}
    _guardian = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- memory cap --------------------------------------------------------------------------------------

def default_memory_cap() -> int | None:
    """75 % of the physical memory in bytes (None where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def set_memory_cap(gb: float | None) -> None:
    """Cap each engine child's address space at ``gb`` GiB (None: back to the default, 75 % of RAM)."""
    global _cap, _cap_set
    _cap = None if gb is None else int(gb * 2**30)
    _cap_set = gb is not None


def saved_memory_cap() -> tuple:
    """The memory budget's setting, for :func:`restore_memory_cap`."""
    return _cap, _cap_set


def restore_memory_cap(saved: tuple) -> None:
    """Put back a setting from :func:`saved_memory_cap`."""
    global _cap, _cap_set
    _cap, _cap_set = saved


def memory_cap() -> int | None:
    """The address-space cap in bytes that :func:`spawn` gives each child (None: none)."""
    cap = _cap if _cap_set else default_memory_cap()
    if resource is None:  # pragma: no cover - not POSIX
        return cap
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        inherited = min(x for x in (soft, hard, 2**62) if x != resource.RLIM_INFINITY)
        if inherited < 2**62:
            cap = inherited if cap is None else min(cap, inherited)
    except (ValueError, OSError):  # pragma: no cover
        pass
    return cap


# -- the guardian --------------------------------------------------------------------------------------

# the guardian's program: one process group id per line ("+pgid" watch, "-pgid" done); at end of
# file (symeq is gone, or closed the pipe) kill what is left
_GUARDIAN = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
live = set()
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+":
        live.add(int(line[1:]))
    elif line[:1] == "-":
        live.discard(int(line[1:]))
for g in live:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
"""


def _tell_guardian(msg: str) -> None:
    global _guardian
    if _guardian is None:
        try:
            r, w = os.pipe()
            # the last argument only names the process for ps(1)
            proc = subprocess.Popen([sys.executable, "-S", "-E", "-c", _GUARDIAN, GUARDIAN_NAME], stdin=r,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
            os.close(r)
            _guardian = (proc, os.fdopen(w, "w", buffering=1))
        except OSError:  # pragma: no cover - no guardian: the death signal alone
            _guardian = False
    if _guardian:
        try:
            _guardian[1].write(msg + "\n")
        except (OSError, ValueError):  # pragma: no cover - guardian gone
            pass


# -- spawning ----------------------------------------------------------------------------------------

def _preexec(parent: int, pdeathsig: bool, cap: int | None, prctl):
    def run():  # runs in the child between fork and exec: no allocation-heavy Python here
        if pdeathsig and prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl: nobody to report to
                os._exit(137)
        if cap is not None and resource is not None:
            try:
                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            except (ValueError, OSError):
                pass
    return run


_PRCTL = None


def _prctl():
    global _PRCTL
    if _PRCTL is None and sys.platform.startswith("linux"):
        try:
            import ctypes

            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
            _PRCTL.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        except (OSError, AttributeError):  # pragma: no cover
            _PRCTL = False
    return _PRCTL or None


def spawn(cmd, *, stdin=subprocess.DEVNULL, stdout=None, stderr=None, env=None, cwd=None,
          memory: int | None | bool = True) -> subprocess.Popen:
    """Start ``cmd`` in its own session so that it dies with this process.

    Parameters
    ----------
    cmd : list of str
    stdin, stdout, stderr, env, cwd : as for :class:`subprocess.Popen`
    memory : True (default) for the cap :func:`memory_cap`, an int for that many bytes, or
        False/None for no cap.

    Returns
    -------
    subprocess.Popen
        Its pid is also its process group id; stop it with :func:`kill_group`.
    """
    cap = memory_cap() if memory is True else (memory or None)
    # the death signal follows the *thread* that forked the child: only the main thread lives as
    # long as the process (elsewhere the guardian alone covers it)
    pdeath = threading.current_thread() is threading.main_thread()
    pre = _preexec(os.getpid(), pdeath, cap, _prctl() if pdeath else None) if (pdeath or cap) else None
    with _deferred_signals(), _lock:
        proc = subprocess.Popen(list(cmd), stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd,
                                start_new_session=True, preexec_fn=pre)
        proc.memory_cap = cap  # for failure()
        _groups[proc.pid] = proc
        _tell_guardian(f"+{proc.pid}")
    return proc


class _deferred_signals:
    """Hold SIGINT/SIGTERM/SIGHUP while a child is forked and registered, then deliver them.

    A Ctrl-C that lands between fork and registration would raise inside ``Popen`` and leave a
    child nobody kills synchronously (only its death signal would, a moment after symeq is gone).
    Python runs signal handlers in the main thread only, so there the handlers are swapped for one
    that records the signal; elsewhere nothing can be deferred (the guardian covers that case).
    """

    SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)

    def __enter__(self):
        self.old, self.pending = {}, []
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                try:
                    self.old[s] = signal.signal(s, self._hold)
                except (ValueError, OSError):  # pragma: no cover - not allowed here
                    pass
        return self

    def _hold(self, signum, frame):
        self.pending.append((signum, frame))

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)
        if self.pending:
            signum, frame = self.pending[0]
            h = self.old.get(signum)
            if callable(h):
                h(signum, frame)  # e.g. KeyboardInterrupt: now the child is registered and gets killed
            elif h == signal.SIG_DFL:
                os.kill(os.getpid(), signum)
        return False


def _forget(proc) -> None:
    with _lock:
        if _groups.pop(proc.pid, None) is not None:
            _tell_guardian(f"-{proc.pid}")


def kill_group(proc, wait: float = 10) -> None:
    """Kill ``proc`` and every process of its group (it leads its own session), then reap it.

    Only while ``proc`` is unreaped: its pid (= the group id) cannot have been reused.  (Once it
    is reaped the group id may belong to someone else, so a leader that already exited is only
    forgotten; the engines run no helpers of their own that would outlive them.)
    """
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:  # pragma: no cover - already gone
                pass
        try:
            proc.communicate(timeout=wait)
        except (ValueError, subprocess.TimeoutExpired):  # pragma: no cover - pipes already closed
            proc.wait(timeout=wait)
    _forget(proc)


def kill_all() -> None:
    """Kill every child group :func:`spawn` started that is still registered (the CLI's exit path)."""
    with _lock:
        procs = list(_groups.values())
    for p in procs:
        kill_group(p, wait=2)


def live_groups() -> list[int]:
    """Process group ids of children started here and not yet reaped and forgotten."""
    with _lock:
        for pgid, p in list(_groups.items()):
            if p.poll() is not None:
                _groups.pop(pgid)
                _tell_guardian(f"-{pgid}")
        return sorted(_groups)


# -- what went wrong ---------------------------------------------------------------------------------

_OOM_WORDS = ("memoryerror", "out of memory", "bad_alloc", "unable to allocate", "cannot allocate",
              "could not allocate", "no more memory", "not enough memory", "memory exhausted",
              "failed to allocate", "allocation fail", "failed to map segment", "can't start new thread")
_CRASH_SIGNALS = tuple(getattr(signal, n) for n in ("SIGABRT", "SIGSEGV", "SIGBUS") if hasattr(signal, n))


def failure(engine: str, proc, stderr: str = "", stdout: str = "") -> Exception:
    """The error for an engine child that exited unsuccessfully.

    :class:`~symeq.errors.MemoryLimit` when its output says an allocation failed (the address
    space cap of :func:`spawn`) or when it crashed (SIGSEGV, SIGABRT, SIGBUS) under a cap below
    the default one (``--memory``, ``ulimit -v``); else :class:`~symeq.errors.EngineFailed` with
    the exit status or signal and the last lines of its error output.

    >>> class P: returncode = -11; memory_cap = None
    >>> print(failure("giac", P()))
    the giac engine failed: killed by signal 11 (SIGSEGV)
    """
    rc = proc.returncode
    text = (stderr or "")[-2000:] + "\n" + (stdout or "")[-2000:]
    cap = getattr(proc, "memory_cap", None)
    gb = f"{cap / 2**30:.3g}" if cap else None
    name = None
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:  # pragma: no cover
            name = "?"
    if any(w in text.lower() for w in _OOM_WORDS):
        return MemoryLimit(f"the {engine} engine ran out of memory"
                           + (f" under the cap of {gb} GB per engine process; raise it with --memory GB" if gb
                              else "; free memory or raise the process's limit (ulimit -v)"),
                           value=gb, maximum=gb)
    default = default_memory_cap()
    if cap and name and -rc in _CRASH_SIGNALS and (default is None or cap < default):
        # engines (msolve, FLINT) crash rather than report a failed allocation; under a cap the
        # user set (--memory, ulimit -v) below the default that is by far the likeliest cause
        return MemoryLimit(f"the {engine} engine crashed ({name}) under the memory cap of {gb} GB per engine "
                           "process, most likely for want of memory; raise it with --memory GB",
                           value=gb, maximum=gb)
    if name:
        detail = f"killed by signal {-rc} ({name})"
        if cap and -rc in _CRASH_SIGNALS:
            detail += f"; possibly the memory cap of {gb} GB per engine (--memory GB)"
    else:
        detail = f"exit status {rc}"
    tail = (stderr or "").strip()[-300:]
    if tail:
        detail += f": {tail}"
    return EngineFailed(engine, detail)


# -- for python children -------------------------------------------------------------------------------

def watch_parent(parent: int | None = None, interval: float = 0.25) -> None:
    """In a child: exit at once when the parent process ``parent`` (default: the current one) is gone.

    A daemon thread compares :func:`os.getppid` with ``parent``: when the parent dies the child
    is re-parented (to init or a sub-reaper) and the thread calls ``os._exit``.  Pure Python work
    releases the interpreter lock often enough for the thread to run.
    """
    parent = os.getppid() if parent is None else parent
    if os.getppid() != parent:
        os._exit(137)

    def watch():
        import time

        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(137)

    threading.Thread(target=watch, name="symeq-parent-watch", daemon=True).start()


def die_with_parent() -> None:
    """Make the current process die with its parent (call it first in a process pool's ``initializer``).

    :func:`watch_parent` only: ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the
    child ends, and a pool may start its workers from a thread that ends before the pool does.
    """
    watch_parent()
