"""The rules of the solve options: one per option, for every place an option can come from.

A solve takes its backend, time limit, threads, seed and gap from three
sources: the ``solver`` section of the instance file (the defaults), the
Python API (``rlplan.solve(..., gap=0.01)``) and the command line
(``--gap 0.01``). :data:`OPTION_RULES` holds one :class:`OptionRule` per
option: its type, range and default and the name each source gives it, so a
value is accepted or refused alike wherever it comes from, and the error
line names the source it came from (``solver.gap`` in the instance file,
``gap`` in the API, ``--gap`` on the command line).

The relative gap is ``(score - bound) / score`` (``rlplan.solvers.result``),
which lies in [0, 1] for any plan since bounds are never negative: 0 asks for
a proven optimum, 1 accepts the first feasible plan (every plan is within a
100% gap), and a value above 1 would mean the same as 1, so it is refused as
a likely percentage typed as a fraction (``5`` for 5%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from rlplan.rpeg.errors import InputError, InstanceError, describe
from rlplan.rpeg.schema.limits import MAX_SEED, MAX_THREADS, MAX_TIME_LIMIT

#: Where an option value came from.
Source = Literal["instance", "api", "cli"]
INSTANCE: Source = "instance"
API: Source = "api"
COMMAND_LINE: Source = "cli"


@dataclass(frozen=True)
class OptionRule:
    """What one solve option accepts and what each source calls it.

    Attributes
    ----------
    name
        The attribute of :class:`rlplan.solvers.options.SolveOptions` (and of
        the instance's ``SolverConfig``).
    kind
        ``int``, ``float`` or ``str`` (a backend name).
    default
        The value when no source gives one.
    low, high
        The accepted range, both ends included (numbers only).
    positive
        Whether 0 is refused as such (``must be a number > 0``) before the
        range is checked; otherwise a negative value is.
    instance_key, api_name, flag
        The option's name in the instance file, in the Python API and on the
        command line.
    unit
        What the number counts (shown when a value is out of range).
    description
        What the option is, in a few words (the instance's JSON Schema).
    """

    name: str
    kind: type
    default: Any
    low: float = -math.inf
    high: float = math.inf
    positive: bool = False
    instance_key: str = ""
    api_name: str = ""
    flag: str = ""
    unit: str = ""
    description: str = ""

    def named(self, source: Source) -> str:
        """The option's name in ``source``: ``solver.gap``, ``gap`` or ``--gap``."""
        return {INSTANCE: self.instance_key, API: self.api_name, COMMAND_LINE: self.flag}[source]

    def check(self, value: Any, source: Source) -> Any:
        """``value`` as the option's type if this rule accepts it.

        Parameters
        ----------
        value
            The value as given (a YAML scalar, a Python argument, a parsed flag).
        source
            Where it came from, for the error line.

        Returns
        -------
        Any
            An ``int`` for whole-number options (``2.0`` is accepted as 2), a
            ``float`` for the others, the string for a backend name.

        Raises
        ------
        InputError
            Naming the option as ``source`` names it (an :class:`InstanceError`
            for the instance file).
        """
        if self.kind is str:
            if isinstance(value, str) and value:
                return value
            self.refuse(source, f"must be a solver name, got {describe(value)}")
        integer = self.kind is int
        if not _is_number(value) or (integer and not float(value).is_integer()):
            self.refuse(source, f"must be {self._sign_words()}, got {describe(value)}")
        if value < 0 or (value == 0 and self.positive):
            self.refuse(source, f"must be {self._sign_words()}, got {describe(value)}")
        if not self.low <= value <= self.high:
            self.refuse(
                source,
                f"{_shown(value)} is outside the plausible range {_shown(self.low)} to "
                f"{_shown(self.high)} ({self.unit})",
            )
        return int(value) if integer else float(value)

    def error(self, source: Source, message: str) -> InputError:
        """The error of a bad value from ``source`` (an :class:`InstanceError` for the file)."""
        kind = InstanceError if source == INSTANCE else InputError
        return kind(self.named(source), message)

    def refuse(self, source: Source, message: str) -> NoReturn:
        """Raise :meth:`error`."""
        raise self.error(source, message)

    def _sign_words(self) -> str:
        kind = "an integer" if self.kind is int else "a number"
        return f"{kind} {'> 0' if self.positive else '>= 0'}"


def _is_number(value: Any) -> bool:
    """A finite int or float (not a bool, not an int too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return value.bit_length() <= 1000
    return math.isfinite(value)


def _shown(value: float) -> str:
    """``value`` in a dozen characters at most (``1e+30``, ``1024``, ``6.048e+05``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if abs(value) < 10**12 else f"{float(value):.3g}"
    return f"{value:.4g}"


#: The rule of every solve option, by name.
OPTION_RULES: dict[str, OptionRule] = {
    rule.name: rule
    for rule in (
        OptionRule(
            "backend",
            str,
            "auto",
            instance_key="solver.backend",
            api_name="solver",
            flag="--solver",
            description="Solver backend",
        ),
        OptionRule(
            "time_limit",
            float,
            60.0,
            low=1e-3,
            high=MAX_TIME_LIMIT,
            positive=True,
            instance_key="solver.time_limit",
            api_name="time_limit",
            flag="--time-limit",
            unit="seconds, at most a week",
            description="Time limit",
        ),
        OptionRule(
            "threads",
            int,
            2,
            low=1,
            high=MAX_THREADS,
            positive=True,
            instance_key="solver.threads",
            api_name="threads",
            flag="--threads",
            unit="threads",
            description="Worker threads",
        ),
        OptionRule(
            "seed",
            int,
            0,
            low=0,
            high=MAX_SEED,
            instance_key="solver.seed",
            api_name="seed",
            flag="--seed",
            unit="seed, a signed 32-bit integer",
            description="Random seed",
        ),
        OptionRule(
            "gap",
            float,
            0.0,
            low=0,
            high=1,
            instance_key="solver.gap",
            api_name="gap",
            flag="--gap",
            unit="relative gap; 1 accepts any feasible plan",
            description="Relative optimality gap at which to stop",
        ),
    )
}


def check_option(name: str, value: Any, source: Source) -> Any:
    """``value`` of option ``name`` checked by its rule (see :meth:`OptionRule.check`)."""
    return OPTION_RULES[name].check(value, source)
