"""The command line: ``rlplan`` (the console script) and ``python main.py`` run it.

* :mod:`rlplan.cli.app`: :func:`main`, bad input and interrupts turned into exit codes;
* :mod:`rlplan.cli.parser`: the argument parser, one function per subcommand;
* :mod:`rlplan.cli.evaluate`: ``check``, ``baseline``, ``simulate``;
* :mod:`rlplan.cli.solve`: ``solve`` and its run folder;
* :mod:`rlplan.cli.export`: ``export``, ``export-config``;
* :mod:`rlplan.cli.explore`: ``compare``, ``pareto``, ``sweep``;
* :mod:`rlplan.cli.common`: exit codes and what the commands share.
"""

from __future__ import annotations

import sys

from rlplan.cli import app


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
    return app.main(argv, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
