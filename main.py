"""``python main.py``: the ``rlplan`` command line run from a clone (see :mod:`rlplan.cli`)."""

import sys

from rlplan.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python main.py"))
