"""tests/kinds: one generic test body over every registered layer kind (issue 26, item 8).

pytest imports these modules by their file names (no ``__init__.py``, as in tests/), so the
helper module ``kind_instances`` next to them is importable; tests/conftest.py puts tests/ itself
on the path too (tests/json_mutations.py, tests/tied_networks.py stay importable from here).
"""
