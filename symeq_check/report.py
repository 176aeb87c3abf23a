"""The outcome of one check, :class:`CheckReport`: accepted, rejected, or nothing verifiable, with the
lines that say what was verified and why anything was rejected, and its exit code.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CheckReport:
    """Outcome of checking one certificate against one model.

    Attributes
    ----------
    accepted : bool or None
        True if accepted, False if rejected, None if nothing could be verified.
    verdict : str
        The certificate's verdict.
    reasons : list of str
        Why the certificate was rejected (empty when accepted).
    checks : list of str
        Human-readable lines describing what was verified.
    mismatch : bool
        True when the certificate is about another model (its input dimension, group, theta or
        theta's digest differ from the model file's): bad input, exit code 2, not a rejection of
        the certificate's claims.
    """

    accepted: bool | None
    verdict: str
    reasons: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    mismatch: bool = False

    @property
    def exit_code(self) -> int:
        """Process exit code: 0 accepted, 1 rejected, 2 a certificate of another model, 3 nothing verifiable."""
        if self.mismatch:
            return 2
        return 3 if self.accepted is None else (0 if self.accepted else 1)

    def lines(self) -> list[str]:
        """Return the report as printable lines."""
        result = {True: "accepted", False: "rejected", None: "undetermined (nothing verified)"}[self.accepted]
        if self.mismatch:
            result = "not checked: the certificate is not about this model (exit 2; give the model it was written for)"
        return ([f"verdict: {self.verdict}"] + [f"checked: {c}" for c in self.checks]
                + [f"REJECTED: {r}" for r in self.reasons] + [f"result: {result}"])

    def note_identifiability(self, cert: dict) -> None:
        """Say that an equivariance certificate's ``identifiability`` claim is not read (docs/certificates.md:
        a ``symeq-identifiability/1`` certificate, checked on its own, is what re-verifies one)."""
        ident = cert.get("identifiability")
        if isinstance(ident, dict) and ident.get("status") not in (None, "not-checked", "unknown"):
            self.checks.append(f"identifiability {str(ident.get('status'))[:40]!r}: not re-verified here (its own "
                               "certificate is)")
