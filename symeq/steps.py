"""Pipelines as lists of strategy steps (issue 26, item 7; docs/architecture.md, "Pipelines").

A step is a small function of one argument, the pipeline's state.  It either decides (returns the
pipeline's result) or says why it did not: it returns a :class:`Skip` with one sentence.
:func:`run_steps` tries the steps in order, records every step's outcome in ``trace`` (``(name,
reason)`` for a step that did not decide) and returns the first result, or None when no step decided.
Each step can be called and tested alone.

Examples
--------
>>> def small(n):
...     return "small" if n < 10 else Skip("10 or more")
>>> def even(n):
...     return "even" if n % 2 == 0 else Skip("odd")
>>> trace = []
>>> run_steps([small, even], 13, trace)
>>> trace
[('small', '10 or more'), ('even', 'odd')]
>>> run_steps([small, even], 12, []), run_steps([small, even], 3, [])
('even', 'small')
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Skip", "run_steps", "step_name", "trace_json", "trace_lines", "tried_trace"]


@dataclass(frozen=True)
class Skip:
    """A step did not decide: ``reason`` says why (it did not apply, or applied and reached nothing)."""

    reason: str

    def __bool__(self) -> bool:  # a Skip is never a result
        return False


def step_name(step) -> str:
    """The name a trace records for ``step``: its ``__name__`` without a leading ``_step_`` or ``_``."""
    name = getattr(step, "__name__", repr(step))
    return name.removeprefix("_step_").removeprefix("_")


def run_steps(steps, state, trace: list | None = None):
    """The first result of ``steps`` on ``state`` (None when every step skipped).

    A step returns its result, or a :class:`Skip` (or None, read as a skip without a reason).
    ``trace`` receives ``(name, reason)`` for every step that skipped, in order, and ``(name, None)``
    for the step that decided.
    """
    for step in steps:
        out = step(state)
        if out is None or isinstance(out, Skip):
            if trace is not None:
                trace.append((step_name(step), "" if out is None else out.reason))
            continue
        if trace is not None:
            trace.append((step_name(step), None))
        return out
    return None


def trace_json(trace, decided: str = "decided") -> list[dict]:
    """A trace as the ``"steps"`` list of ``--json`` (verify, certify, fibre): ``{"step", "outcome"}`` per
    step, the outcome the step's reason, ``decided`` for the step that decided (a reason of None) and
    "skipped" for a skip without a reason.

    >>> trace_json([("small", "10 or more"), ("even", None)])
    [{'step': 'small', 'outcome': '10 or more'}, {'step': 'even', 'outcome': 'decided'}]
    """
    return [{"step": str(name), "outcome": decided if reason is None else (str(reason) or "skipped")}
            for name, reason in trace]


def trace_lines(trace, decided: str = "decided", title: str = "steps tried:") -> list[str]:
    """A trace as the text block ``--explain-steps`` prints: the title, then one numbered line per step.

    >>> print("\\n".join(trace_lines([("small", "10 or more"), ("even", None)])))
    steps tried:
      1. small: 10 or more
      2. even: decided
    """
    return [title] + [f"  {i}. {s['step']}: {s['outcome']}" for i, s in enumerate(trace_json(trace, decided), 1)]


def tried_trace(tried) -> list[tuple]:
    """The identifiability report's ``tried`` (dicts with "method", "status" and maybe "reason") as a trace
    of ``(step, outcome)`` pairs: the status, then the reason after " -- " when there is one.

    >>> tried_trace([{"method": "tensor", "status": "not-applicable", "reason": "two hidden layers"}])
    [('tensor', 'not-applicable -- two hidden layers')]
    """
    return [(str(t.get("method")), str(t.get("status")) + (f" -- {t['reason']}" if t.get("reason") else ""))
            for t in tried]
