"""Exceptions with the exit codes the CLI maps them to.

Every error a user can cause carries a message that says what to change, and every one of them
is a subclass of :class:`SymeqError`, so the command line never shows a traceback for it.

Exit codes
----------
====  ==========================================================================================
0     the conclusion is established (or a certificate is accepted)
1     refuted (or a certificate is rejected)
2     bad input or usage: :class:`InputError` and its subclasses, among them every
      :class:`LimitExceeded` (a size guard refused the work before it started; the message names
      the limit, its value and the option that raises it) and :class:`EngineMissing`
3     undetermined: :class:`Undetermined`, :class:`BudgetExceeded` (the time budget ran out; the
      message names what was running) and :class:`EngineFailed` (an engine crashed or answered
      something unreadable, so no verdict was reached)
70    an internal error (a bug in symeq); ``SYMEQ_DEBUG=1`` shows the traceback
130   interrupted by Ctrl-C (SIGINT); 143 (128 + 15) for SIGTERM, 129 for SIGHUP; child
      processes are killed first
====  ==========================================================================================

:class:`EngineFailed` keeps exit code 3 on purpose: a crashed engine leaves the question open,
which is what "undetermined" means, and a caller that retries with another engine or a larger
budget treats both the same way.  Its class (and the message) tell the two apart.

How to raise a limit error
--------------------------
Check the size *before* the work starts, and pass the limit's name, the estimated value, the
maximum and the option that raises it::

    if n_monomials > max_monomials:
        raise MonomialLimit(value=n_monomials, maximum=max_monomials, option="--max-monomials",
                            what="expanding the polynomial map")

The message is built from these fields (or pass your own text as the first argument); the CLI
prints it and exits 2.

>>> e = DegreeLimit(value=10**9, maximum=1000, option="--max-degree", what="loading the model")
>>> print(e)
loading the model: degree 1000000000 exceeds the limit 1000; raise it with --max-degree
>>> e.exit_code, e.limit, e.option
(2, 'degree', '--max-degree')
>>> EngineFailed("msolve", "exit status -11").exit_code
3
"""

from __future__ import annotations

__all__ = [
    "SymeqError",
    "InputError",
    "ShapeError",
    "NotExactError",
    "GroupActionError",
    "LimitExceeded",
    "DegreeLimit",
    "MonomialLimit",
    "RegionLimit",
    "GroupTooLarge",
    "OrbitLimit",
    "MemoryLimit",
    "EngineMissing",
    "Undetermined",
    "BudgetExceeded",
    "EngineFailed",
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


class LimitExceeded(InputError):
    """A size guard refused a computation before it started (exit code 2).

    Parameters
    ----------
    message : str, optional
        The full message; built from the other fields when omitted.
    limit : str, optional
        The limit's name ("degree", "monomials", ...); defaults to the class's ``limit``.
    value : int, optional
        The size found (or estimated).
    maximum : int, optional
        The largest size allowed.
    option : str, optional
        The command-line option (or keyword) that raises the limit.
    what : str, optional
        What was about to run, e.g. "building the fibre ideal".

    Attributes
    ----------
    limit, value, maximum, option, what
        As given.

    Examples
    --------
    >>> e = MonomialLimit(value=5 * 10**7, maximum=10**6, option="--max-monomials")
    >>> print(e)
    monomials 50000000 exceeds the limit 1000000; raise it with --max-monomials
    >>> isinstance(e, InputError), e.exit_code
    (True, 2)
    """

    limit = "size"
    option: str | None = None

    def __init__(self, message: str | None = None, *, limit: str | None = None, value=None, maximum=None,
                 option: str | None = None, what: str | None = None):
        if limit is not None:
            self.limit = limit
        if option is not None:
            self.option = option
        self.value = value
        self.maximum = maximum
        self.what = what
        if message is None:
            message = f"{self.limit} {value if value is not None else '(unknown)'}"
            if maximum is not None:
                message += f" exceeds the limit {maximum}"
            else:
                message += " exceeds its limit"
            if self.option:
                message += f"; raise it with {self.option}"
            if what:
                message = f"{what}: {message}"
        super().__init__(message)


class DegreeLimit(LimitExceeded):
    """A polynomial degree above the limit (model file, activation, or an expansion)."""

    limit = "degree"


class MonomialLimit(LimitExceeded):
    """An expansion with more monomials (terms) than the limit."""

    limit = "monomials"


class RegionLimit(LimitExceeded):
    """A ReLU network with more linear regions than the enumeration limit."""

    limit = "regions"


class GroupTooLarge(LimitExceeded):
    """A group whose enumeration exceeds the size cap."""

    limit = "group order"


class OrbitLimit(LimitExceeded):
    """An orbit (of parameters under the symmetry group) larger than the enumeration limit."""

    limit = "orbit size"


class MemoryLimit(LimitExceeded):
    """The memory budget (``--memory``) is exceeded: an engine child ran into its address-space cap,
    or an in-process expansion was estimated (before it started) to need more than the budget."""

    limit = "memory (GB)"
    option = "--memory"


class EngineMissing(SymeqError):
    """An optional engine or package is not installed (exit code 2)."""

    exit_code = 2


class Undetermined(SymeqError):
    """A computation that could not reach a verdict (exit code 3)."""

    exit_code = 3


class BudgetExceeded(Undetermined):
    """A computation that ran past its time budget (exit code 3)."""


class EngineFailed(Undetermined):
    """An engine (a child process or a library routine) crashed or returned something unreadable.

    Exit code 3: no verdict was reached.  ``engine`` names the engine, ``detail`` says what went
    wrong (exit status, signal, the last lines of its error output).

    >>> str(EngineFailed("giac", "killed by signal 11 (SIGSEGV)"))
    'the giac engine failed: killed by signal 11 (SIGSEGV)'
    """

    def __init__(self, engine: str, detail: str = ""):
        self.engine = engine
        self.detail = detail
        super().__init__(f"the {engine} engine failed" + (f": {detail}" if detail else ""))

