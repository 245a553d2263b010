"""Exceptions raised by the domain layer.

Every error that stems from user input carries the path of the offending field
so that the command line can print one precise line and exit with code 2.
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable
from typing import Any

#: Longest field path (or file name) and message of an error line: with
#: ``error: `` the line stays within 300 characters.
MAX_PATH_CHARS, MAX_MESSAGE_CHARS = 100, 190


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxtuple = 2, 4, 4, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 40, 40, 40


def describe(value: Any) -> str:
    """A short description of a value for an error line, never the whole of a huge value.

    Parameters
    ----------
    value
        Anything read from user input.

    Returns
    -------
    str
        ``nothing`` for None; otherwise the value's ``repr`` with strings,
        lists and mappings abridged (``[1, 2, 3, 4, ...]``) and integers of
        more than 128 bits named by their number of digits.
    """
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return _SHORT.repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return (
            f"an integer of {len(str(abs(value)))} digits"
            if value.bit_length() < 10000
            else "a huge integer"
        )
    return _SHORT.repr(value)


def cap(text: str, limit: int, *, keep_end: bool = False) -> str:
    """``text`` on one line, cut to ``limit`` characters (``...`` marks the cut).

    A message's last clause (after its last ``"; "``) is what to do about
    the problem (``delete the plan's "instance" entry ...``, ``did you mean
    ...?``): when it takes at most two thirds of ``limit`` it is kept whole
    and the middle of what comes before it is cut instead. Otherwise the
    text keeps its start.

    Parameters
    ----------
    text
        Any text, e.g. an error message quoting user input.
    limit
        Most characters returned.
    keep_end
        Keep the end rather than the start (for file paths).
    """
    text = str(text).replace("\n", " ")
    if len(text) <= limit:
        return text
    if keep_end:
        return "..." + text[-(limit - 3) :]
    head, separator, fix = text.rpartition(_CLAUSE)
    if separator and len(fix) + len(separator) <= limit * 2 // 3:
        return _cut_middle(head, limit - len(separator) - len(fix)) + separator + fix
    return text[: limit - 3] + "..."


#: What separates the clauses of a message; the last one says what to do.
_CLAUSE = "; "


def _cut_middle(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its start and end, ``...`` between them.

    The cut falls between words when a space lies within a few characters of it.
    """
    if len(text) <= limit:
        return text
    end_chars = (limit - 3) // 3
    start, end = text[: limit - 3 - end_chars], text[len(text) - end_chars :]
    space = start.rfind(" ")
    if space >= len(start) - _WORD:
        start = start[: space + 1]
    space = end.find(" ")
    if 0 <= space < _WORD:
        end = end[space:]
    return start + "..." + end


#: Longest word end that the cut of :func:`_cut_middle` drops to fall between words.
_WORD = 24


class InputError(ValueError):
    """Bad user input (instance file, plan file or option).

    Parameters
    ----------
    path
        Dotted path of the offending field (``models.actor.layers``) or the
        file name when the whole file is at fault.
    message
        What is wrong, in a few words.
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = cap(path, MAX_PATH_CHARS, keep_end=True)
        self.message = cap(message, MAX_MESSAGE_CHARS)
        super().__init__(f"{self.path}: {self.message}" if self.path else self.message)


class InstanceError(InputError):
    """An instance file that does not follow the schema."""


class PlanError(InputError):
    """A plan that does not fit the instance it is applied to."""


class InfeasiblePlanError(PlanError):
    """A well-formed plan of the plan space that cannot run: a rollout engine of it
    would refuse to start (its KV pool holds no sequence of the maximum length).

    The command line reports it as infeasible (exit code 1), not as bad input.
    """


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """A ``"; did you mean 'x'?"`` hint for a misspelt name, or ``""``.

    Parameters
    ----------
    word
        The unknown name as the user wrote it.
    choices
        The names that would have been accepted.

    Returns
    -------
    str
        The closest choice in a hint to append to a message (``"unknown
        key; did you mean 'racks'?"``); empty when nothing is close
        (``difflib`` similarity below 0.6).
    """
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
