"""argparse types shared by the command families (standard library only, so any level may use them).

>>> group_output_arg("same"), group_output_arg("3")
('same', 3)
"""

from __future__ import annotations

import argparse

__all__ = ["group_output_arg"]


def group_output_arg(text: str):
    """argparse type of --group-output: \"same\" or k (the trivial action on R^k)."""
    if text == "same":
        return "same"
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("--group-output is \"same\" or a positive integer") from None
    if k < 1:
        raise argparse.ArgumentTypeError("--group-output must be positive")
    return k
