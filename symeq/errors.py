"""Exceptions with the exit codes the CLI maps them to.

Every error a user can cause carries a message that says what to change.  The CLI turns
:class:`InputError` (and subclasses) into exit code 2 and :class:`Undetermined` into exit 3.
"""

from __future__ import annotations

__all__ = [
    "SymeqError",
    "InputError",
    "ShapeError",
    "NotExactError",
    "GroupActionError",
    "GroupTooLarge",
    "EngineMissing",
    "Undetermined",
    "BudgetExceeded",
]


class SymeqError(Exception):
    """Base class of every error symeq raises on purpose."""

    exit_code = 2


class InputError(SymeqError, ValueError):
    """Malformed input: a file, a shape, a number or an option (exit code 2)."""

    exit_code = 2


class ShapeError(InputError):
    """Matrix or vector dimensions that do not fit together."""


class NotExactError(InputError):
    """A float (or other inexact number) where an exact rational is required."""


class GroupActionError(InputError):
    """Generator pairs that do not define a group action."""


class GroupTooLarge(InputError):
    """A group whose enumeration exceeds the size cap."""


class EngineMissing(SymeqError):
    """An optional engine or package is not installed (exit code 2)."""

    exit_code = 2


class Undetermined(SymeqError):
    """A computation that could not reach a verdict (exit code 3)."""

    exit_code = 3


class BudgetExceeded(Undetermined):
    """A computation that ran past its time or size budget (exit code 3)."""
