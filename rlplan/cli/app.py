"""Command line: plan RL-for-LLM training steps on GPU clusters.

Subcommands: check, baseline, simulate, solve, export, export-config, compare, pareto,
sweep (:mod:`rlplan.cli.parser`). Bad input prints one line naming the problem and exits
with code 2; a plan file whose rollout engine could not start is infeasible (code 1).
``python main.py`` and the ``rlplan`` console script (:mod:`rlplan.cli`) both run
:func:`main`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

from rlplan.cli.common import EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_OK
from rlplan.cli.parser import build_parser, handler_of
from rlplan.rpeg.errors import InfeasiblePlanError, InputError, cap

__all__ = ["MAX_ERROR_LINE", "build_parser", "main"]

#: Longest error line printed.
MAX_ERROR_LINE = 300


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends a command as Ctrl-C does (staged outputs are dropped, exit 143).

    ``solve`` installs its own handlers (:mod:`rlplan.rpeg.interrupts`) while it searches.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt(signum)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None, prog: str = "python main.py") -> int:
    """Entry point of ``python main.py`` and ``rlplan``; returns the exit code.

    Parameters
    ----------
    argv
        Arguments after the program name (default: ``sys.argv[1:]``).
    prog
        Program name in usage and error lines.

    Returns
    -------
    int
        0 a plan was found, 1 infeasible, 2 bad input, 3 no plan within the
        limits; 128 + the signal number when SIGINT or SIGTERM ended the run.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        with sigterm_interrupts():
            return handler_of(args)(args)
    except InfeasiblePlanError as exc:
        print(cap(f"INFEASIBLE: {exc}", MAX_ERROR_LINE))
        return EXIT_INFEASIBLE
    except InputError as exc:
        print(cap(f"error: {exc}", MAX_ERROR_LINE), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        print("interrupted", file=sys.stderr)
        return 128 + (exc.args[0] if exc.args and isinstance(exc.args[0], int) else 2)
    except BrokenPipeError:
        # The reader of our output went away (e.g. piped into `head`).
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
