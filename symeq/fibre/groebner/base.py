"""The interface every Gröbner engine implements, and what the registry knows about it.

An engine is one module of :mod:`symeq.fibre.groebner` defining an :class:`Engine` (its ``ENGINES``
list).  The runner (:mod:`.run`) asks it whether it is installed (:meth:`Engine.available`), for the
child processes that compute a grevlex Gröbner basis (:meth:`Engine.jobs`, each a
:class:`~symeq.fibre.groebner.jobs._Job` started through :mod:`symeq.procs`), and to turn their
answers into one :class:`~symeq.fibre.groebner.result.GroebnerResult` (:meth:`Engine.combine`).
"""

from __future__ import annotations

from pathlib import Path

from .result import GroebnerResult


class Engine:
    """One Gröbner engine: a name, what it computes, how to install it, how to run it.

    Attributes
    ----------
    name : the value of ``engine=`` and of ``symeq fibre --engine``
    label : its name in messages ("Singular slimgb")
    exact : True when it computes over Q (``field="QQ"``), False when modulo primes
    install : the command that installs it (shown when it is missing)
    auto_rank : ``(many CPUs, at most 2 CPUs)``: the preference of ``engine="auto"`` among the exact
        engines (lower first), None when ``auto`` never picks it as its exact engine
    racer : an engine that races this one during auto's head start (on more than 2 CPUs)
    companions : engines started beside this one after the head start (on more than 2 CPUs): they
        settle some ideals this one does not
    """

    name: str = ""
    label: str = ""
    exact: bool = True
    install: str = ""
    auto_rank: tuple | None = None
    racer: str | None = None
    companions: tuple = ()

    def available(self) -> bool:
        """True when the engine is installed here."""
        raise NotImplementedError

    def missing_message(self) -> str:
        """The message of :class:`~symeq.errors.EngineMissing` when it is not installed."""
        return f"the {self.name} engine is not installed; install it with `{self.install}`"

    def jobs(self, variables: list, polys: list, tmp: Path, *, want_basis: bool = True, threads: int = 1,
             tag: str = "") -> list:
        """The child-process jobs computing a grevlex Gröbner basis of ``polys`` (scratch files in ``tmp``)."""
        raise NotImplementedError

    def extra_job(self, variables: list, polys: list, tmp: Path, threads: int = 1):
        """One more job when :meth:`combine` needs it (msolve: a third prime), else None."""
        return None

    def combine(self, results: list[GroebnerResult], extra=None) -> GroebnerResult:
        """One answer from the jobs' answers; ``extra()`` runs :meth:`extra_job` and returns its answer."""
        return results[0]

    def __repr__(self) -> str:
        return f"<Gröbner engine {self.name} ({'exact over QQ' if self.exact else 'modular'})>"
