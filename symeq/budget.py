"""Time budgets: long computations check a deadline and stop cleanly past it.

>>> d = Deadline(None)
>>> d.check("anything")          # no budget: never raises
>>> Deadline(0).expired()
True
"""

from __future__ import annotations

import time

from .errors import BudgetExceeded

__all__ = ["Deadline"]


class Deadline:
    """A wall-clock budget in seconds (None = unlimited)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.start = time.monotonic()

    def expired(self) -> bool:
        return self.seconds is not None and time.monotonic() - self.start >= self.seconds

    def check(self, what: str) -> None:
        if self.expired():
            raise BudgetExceeded(f"time budget of {self.seconds:g} s exceeded while {what}; raise --timeout")

    def elapsed(self) -> float:
        return time.monotonic() - self.start
