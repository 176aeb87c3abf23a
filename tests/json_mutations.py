"""Field-by-field mutations of a JSON value, shared by the tampering tests.

``field_mutations(x)`` yields ``(path, mutated copy)`` for every field of ``x``: each leaf changed,
each key removed, one key added, each list grown and shrunk. Used by tests/identifiability/test_classical.py and
tests/exact/test_real_activations.py to check that the certificate checker refuses every tampered field.
"""

from __future__ import annotations

from fractions import Fraction


def field_mutations(x, path=""):
    """(path, mutated copy) for every field of a JSON value: each leaf changed, each key removed, one added.

    >>> [p for p, _ in field_mutations({"a": [1]})]
    ['+key', '.a-removed', '.a+item', '.a-item', '.a[0]']
    """
    if isinstance(x, dict):
        yield path + "+key", dict(x, extra_key=1)
        for k, v in x.items():
            yield f"{path}.{k}-removed", {kk: vv for kk, vv in x.items() if kk != k}
            for p, m in field_mutations(v, f"{path}.{k}"):
                yield p, dict(x, **{k: m})
    elif isinstance(x, list):
        yield path + "+item", x + [x[-1] if x else 0]
        if x:
            yield path + "-item", x[:-1]
        for i, v in enumerate(x):
            for p, m in field_mutations(v, f"{path}[{i}]"):
                yield p, x[:i] + [m] + x[i + 1:]
    elif isinstance(x, bool):
        yield path, not x
    elif isinstance(x, int):
        yield path, x + 1
    elif x is None:
        yield path, 1
    else:
        try:
            yield path, str(Fraction(x) + 1)
        except (ValueError, ZeroDivisionError):
            yield path, x + "x"
