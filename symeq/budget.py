"""Time budgets: long computations check a deadline and stop cleanly past it.

Two layers keep every command within its budget:

* :class:`Deadline` -- computations check it between steps and raise
  :class:`~symeq.errors.BudgetExceeded` (exit 3) naming the step that was running;
* :class:`Alarm` -- the command line's backstop: a real-time timer in the main thread that
  interrupts whatever runs, :data:`ALARM_GRACE` after the budget, for code that checks no
  deadline.  Its message names the command and the last step a :class:`Deadline` saw.

Each command has a default budget (:data:`DEFAULT_BUDGETS`, seconds), changed with
``--timeout``, and prints it in its first line of output.

>>> d = Deadline(None)
>>> d.check("anything")          # no budget: never raises
>>> Deadline(0).expired()
True
>>> DEFAULT_BUDGETS["verify"]
300.0
"""

from __future__ import annotations

import signal
import threading
import time

from .errors import BudgetExceeded

__all__ = ["Deadline", "Alarm", "BudgetAlarm", "DEFAULT_BUDGETS", "alarm_grace", "last_step", "process_deadline"]

#: default time budgets of the commands in seconds (``--timeout`` changes them); docs/cli.md states them
DEFAULT_BUDGETS = {
    "verify": 300.0,
    "check": 300.0,
    "fibre": 300.0,
    "explain": 300.0,
    "numeric-check": 600.0,
    "generate": 120.0,
    "experiment": 3600.0,
    "certify": 600.0,
}

_last_step: list = [None]  # the step the latest Deadline.check named (for the alarm's message)


def last_step() -> str | None:
    """What the most recent :meth:`Deadline.check` said was running (None before any check)."""
    return _last_step[0]


class Deadline:
    """A wall-clock budget in seconds (None = unlimited)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.start = time.monotonic()

    def expired(self) -> bool:
        return self.seconds is not None and time.monotonic() - self.start >= self.seconds

    def check(self, what: str) -> None:
        _last_step[0] = what
        if self.expired():
            raise BudgetExceeded(f"time budget of {self.seconds:g} s exceeded while {what}; raise --timeout")

    def elapsed(self) -> float:
        return time.monotonic() - self.start


class BudgetAlarm(BaseException):
    """Raised by :class:`Alarm` in the main thread when the budget (plus grace) is over.

    A ``BaseException`` (like ``KeyboardInterrupt``) so that no ``except Exception`` on the way
    swallows it; ``finally`` blocks still run (and kill engine processes).  The CLI turns it into
    exit 3 with :attr:`message`.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def alarm_grace(seconds: float) -> float:
    """Seconds the backstop waits past a budget: 10 %, at least 2 s, at most 10 s."""
    return min(10.0, max(2.0, 0.1 * seconds))


class Alarm:
    """Interrupt the main thread with :class:`BudgetAlarm` once ``seconds`` (+ grace) have passed.

    A context manager; does nothing outside the main thread, without ``seconds``, or where
    ``SIGALRM`` does not exist.  ``what`` names the command for the message.

    >>> with Alarm(None, "nothing"):
    ...     pass
    """

    def __init__(self, seconds: float | None, what: str, grace: float | None = None):
        self.seconds = seconds
        self.what = what
        self.grace = alarm_grace(seconds) if (grace is None and seconds) else (grace or 0.0)
        self._old = None
        self._armed = False

    def _fire(self, signum, frame):
        step = last_step()
        raise BudgetAlarm(f"the time budget of {self.seconds:g} s ran out while running {self.what}"
                          + (f" (last step: {step})" if step else "") + "; raise --timeout")

    def __enter__(self):
        if self.seconds is not None:
            _process_deadline[:] = [time.perf_counter() + self.seconds + self.grace]
        if (self.seconds is not None and hasattr(signal, "setitimer")
                and threading.current_thread() is threading.main_thread()
                and signal.getitimer(signal.ITIMER_REAL)[0] == 0):  # leave a caller's timer alone
            self._old = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, self.seconds + self.grace))  # 0 would disarm
            self._armed = True
        return self

    def __exit__(self, *exc):
        _process_deadline.clear()
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old if self._old is not None else signal.SIG_DFL)
            self._armed = False
        return False


_process_deadline: list[float] = []


def process_deadline() -> float | None:
    """The ``time.perf_counter()`` at which the running command's :class:`Alarm` fires (None: none).

    Child processes that get no deadline of their own inherit this one (see
    :mod:`symeq.fibre._sympy_worker`)."""
    return _process_deadline[0] if _process_deadline else None
