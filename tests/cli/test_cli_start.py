"""Building the command line loads no algorithm: the option lists come from light name modules
(``symeq/fibre/methods.py``, the Gröbner registry), and ``symeq.fibre`` imports its heavy submodules on
first use.  Every command starts with this cost, ``symeq check`` included."""

from __future__ import annotations

import json
import subprocess
import sys

import symeq.fibre as fibre
from symeq.fibre.decide import METHODS as DECIDE_METHODS
from symeq.fibre.methods import METHODS

HEAVY = ("symeq.fibre.decide", "symeq.fibre.ideal", "symeq.fibre.orbit", "symeq.fibre.tensor", "sympy")


def test_building_the_parser_imports_no_identifiability_method():
    code = ("import json, sys; from symeq.cli import build_parser; build_parser(); "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout) == [], out.stdout


def test_the_fibre_command_offers_the_methods_decide_runs():
    assert DECIDE_METHODS is METHODS
    from symeq.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a.choices, dict) and "fibre" in a.choices)
    method = next(a for a in sub.choices["fibre"]._actions if a.dest == "method")
    assert tuple(method.choices) == ("auto",) + METHODS


def test_every_public_name_of_symeq_fibre_resolves():
    for name in fibre.__all__:
        assert getattr(fibre, name) is not None, name
    assert callable(fibre.groebner) and fibre.groebner.__module__.startswith("symeq.fibre.groebner")
    assert set(fibre.__all__) <= set(dir(fibre))
