"""The ``rlplan`` console script: the subcommands of ``python main.py``, one implementation."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run ``rlplan`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit code.

    Parameters
    ----------
    argv
        Arguments after the program name.

    Returns
    -------
    int
        0 a plan was found, 1 infeasible, 2 bad input, 3 no plan within the limits.
    """
    import main as command_line

    return command_line.main(argv, prog="rlplan")


if __name__ == "__main__":
    sys.exit(main())
