"""The command line: ``rlplan`` (the console script) and ``python main.py`` run it."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None, prog: str = "rlplan") -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit code.

    Parameters
    ----------
    argv
        Arguments after the program name.
    prog
        The program name shown in usage lines and help.

    Returns
    -------
    int
        0 a plan was found, 1 infeasible, 2 bad input, 3 no plan within the limits.
    """
    from rlplan.cli import app

    return app.main(argv, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
