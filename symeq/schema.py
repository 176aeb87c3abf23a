"""The one schema check of every file symeq reads: unknown and missing keys, with "did you mean".

symeq's own copy (level 0): the certificate checker (``symeq_check``) has its own, so that neither
imports the other; the two agree on every file (tests/checker/test_schema_agreement.py).
"""
from __future__ import annotations

import difflib

from .errors import InputError


def close_names(name, known, n: int = 3) -> list[str]:
    """The names in ``known`` closest to ``name`` (difflib), for "did you mean" hints.

    >>> close_names("biases", ["weight", "bias", "activation"])
    ['bias']
    """
    return difflib.get_close_matches(str(name), [str(k) for k in known], n=n, cutoff=0.6)


def check_keys(obj: dict, where: str, allowed, required=(), error=None) -> None:
    """Refuse an object with an unknown or a missing key.

    ``allowed`` lists every key that may appear (``required`` ones included); ``where`` is the
    object's JSON path (``model.layers[0]``).  The error names the key, the path, the keys allowed
    there and, when one is close, says "did you mean".  ``error`` is the exception class raised
    (:class:`symeq.errors.InputError`, exit 2, by default).

    >>> check_keys({"weight": [[1]], "biases": [0]}, "layers[0]", ["type", "weight", "bias"], ["weight", "bias"])
    Traceback (most recent call last):
    ...
    symeq.errors.InputError: layers[0]: unknown key "biases" (did you mean "bias"?); allowed here: "type", "weight", "bias"
    """
    error = InputError if error is None else error
    allowed = list(allowed)
    listed = ", ".join(f'"{k}"' for k in allowed)
    for key in obj:
        if key not in allowed:
            close = close_names(key, allowed, 1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise error(f'{where}: unknown key "{key}"{hint}; allowed here: {listed}')
    for key in required:
        if key not in obj:
            raise error(f'{where}: missing key "{key}"; required here: '
                        + ", ".join(f'"{k}"' for k in required))
