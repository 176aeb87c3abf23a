"""``python -m symeq_check CERT MODEL``: the independent certificate checker (see the package docstring)."""
import sys

from .command import main

sys.exit(main())
