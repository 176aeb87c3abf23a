"""``python -m symeq.check CERT MODEL``: an alias of ``python -m symeq_check CERT MODEL``.

The certificate checker is the standard-library package ``symeq_check`` beside ``symeq`` (its
docstring is the map of it).  Importing this module loads nothing: the checker is imported only when
it runs as a command, so that symeq's library code never reads the checker (tests/test_architecture.py).
"""

if __name__ == "__main__":
    import sys

    from symeq_check.command import main

    sys.exit(main(prog="python -m symeq.check"))
