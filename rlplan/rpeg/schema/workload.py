"""The ``workload`` section: prompts, samples and sequence lengths of one RL step.

Fields are declared in :data:`WORKLOAD_FIELDS` (:mod:`rlplan.rpeg.schema.fields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe
from rlplan.rpeg.schema.checks import check_keys, mapping, positive_int, unit_fraction
from rlplan.rpeg.schema.fields import (
    FRACTION_OPEN_LOW,
    POSITIVE_INT,
    Field,
    check_fields,
    field_range,
    keys,
    read_fields,
    structured,
)
from rlplan.rpeg.schema.limits import MAX_QUANTILES, check_list_size


def _quantiles_schema() -> dict[str, Any]:
    """JSON Schema of ``gen_quantiles``: up to :data:`MAX_QUANTILES` ``[fraction, length]`` pairs.

    Increasing fractions and lengths ending at ``[1.0, generation_length]``
    are checked by :class:`Workload`, not by the schema.
    """
    length_range = field_range("workload.gen_quantiles[0][1]")
    return {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_QUANTILES,
        "items": {
            "type": "array",
            "prefixItems": [
                {"description": "Fraction of sequences done", **FRACTION_OPEN_LOW.schema(None)},
                {"description": "Generated length", **POSITIVE_INT.schema(length_range)},
            ],
            "minItems": 2,
            "maxItems": 2,
        },
    }


WORKLOAD_FIELDS = (
    Field("batch_size", POSITIVE_INT, description="Prompts per RL step"),
    Field("samples_per_prompt", POSITIVE_INT, description="Responses sampled per prompt"),
    Field("context_length", POSITIVE_INT, description="Prompt length"),
    Field("generation_length", POSITIVE_INT, description="Longest generated response"),
    Field(
        "gen_quantiles",
        structured("list of [fraction, length] pairs", _quantiles_schema),
        None,
        "Distribution of generated lengths: increasing [fraction finished, length] pairs "
        "ending at [1.0, generation_length] (default: every response runs to the maximum)",
    ),
    Field(
        "optimizer_steps",
        POSITIVE_INT,
        1,
        "Optimizer steps (mini-batches) per RL step: the B*K sequences train in this many "
        "global batches of B*K / optimizer_steps, one gradient synchronisation each "
        "(must divide B*K)",
    ),
)
WORKLOAD_KEYS = keys(WORKLOAD_FIELDS)


@dataclass(frozen=True)
class Workload:
    """One RL step's data: ``batch_size`` prompts, each sampled ``samples_per_prompt`` times.

    The step's ``B*K`` sequences train in ``optimizer_steps`` mini-batches
    (global batches) of ``B*K / optimizer_steps`` sequences, one optimizer
    step each (NeMo RL ``policy.train_global_batch_size``, verl
    ``ppo_mini_batch_size``, OpenRLHF ``--train.batch_size``).
    ``gen_quantiles`` is a list of ``(fraction finished, length)`` pairs with
    increasing fractions ending at 1.0 and increasing lengths ending at
    ``generation_length``; ``None`` means every sequence runs to the maximum.
    """

    batch_size: int
    samples_per_prompt: int
    context_length: int
    generation_length: int
    gen_quantiles: tuple[tuple[float, int], ...] | None = None
    optimizer_steps: int = 1

    def __post_init__(self) -> None:
        check_fields(self, WORKLOAD_FIELDS, "workload")
        if self.gen_quantiles is not None:
            _check_quantiles(self.gen_quantiles, self.generation_length)
        if self.sequences % self.optimizer_steps:
            raise InstanceError(
                "workload.optimizer_steps",
                f"must divide the step's B*K = {self.batch_size} x {self.samples_per_prompt} "
                f"= {self.sequences} sequences (each optimizer step trains B*K / "
                f"optimizer_steps of them), got {self.optimizer_steps}",
            )

    @property
    def mini_batch_sequences(self) -> int:
        """Sequences per optimizer step (global batch) ``B*K / optimizer_steps``."""
        return self.sequences // self.optimizer_steps

    @property
    def sequences(self) -> int:
        """Sequences per step ``B*K``."""
        return self.batch_size * self.samples_per_prompt

    @property
    def total_length(self) -> int:
        """Prompt plus maximal generation ``S+T``."""
        return self.context_length + self.generation_length

    def _pieces(self) -> tuple[tuple[float, int, int], ...]:
        """(probability, low, high): the generated length is uniform on (low, high]."""
        if self.gen_quantiles is None:
            return ((1.0, self.generation_length, self.generation_length),)
        pieces = []
        previous_fraction, previous_length = 0.0, 0
        for fraction, length in self.gen_quantiles:
            pieces.append((fraction - previous_fraction, previous_length, length))
            previous_fraction, previous_length = fraction, length
        return tuple(pieces)

    @property
    def mean_generated(self) -> float:
        """E[T]: mean generated length (``generation_length`` without ``gen_quantiles``)."""
        return sum(p * (low + high) / 2 for p, low, high in self._pieces())

    @property
    def mean_generated_square(self) -> float:
        """E[T^2] (uniform on (a, b]: (a^2 + a*b + b^2) / 3)."""
        return sum(
            p * (low * low + low * high + high * high) / 3 for p, low, high in self._pieces()
        )

    def survival(self, lengths: Any) -> Any:
        """P(T > x) at generated lengths ``x`` (numpy array or float): 1 - F(x).

        F is piecewise linear between the quantile points (piecewise uniform
        lengths); without ``gen_quantiles`` every sequence runs to the maximum.
        """
        import numpy as np

        x = np.asarray(lengths, dtype=np.float64)
        if self.gen_quantiles is None:
            return (x < self.generation_length).astype(np.float64)
        points_x = [0.0] + [float(length) for _, length in self.gen_quantiles]
        points_f = [0.0] + [fraction for fraction, _ in self.gen_quantiles]
        # Equal lengths (a point mass) are kept apart by a hair so np.interp is defined.
        for index in range(1, len(points_x)):
            if points_x[index] <= points_x[index - 1]:
                points_x[index] = points_x[index - 1] + 1e-9
        return 1.0 - np.interp(x, points_x, points_f)

    def decode_segments(self) -> tuple[tuple[int, int, float], ...]:
        """Decode segments ``(first length, last length, active fraction)``.

        Segment i covers generated lengths ``len_{i-1}+1 .. len_i`` and runs
        with the fraction ``1 - q_{i-1}`` of sequences still active.
        """
        if self.gen_quantiles is None:
            return ((1, self.generation_length, 1.0),)
        segments = []
        previous_length, previous_fraction = 0, 0.0
        for fraction, length in self.gen_quantiles:
            if length > previous_length:
                segments.append((previous_length + 1, length, 1.0 - previous_fraction))
            previous_length, previous_fraction = length, fraction
        return tuple(segments)


def _check_quantiles(quantiles: tuple[tuple[float, int], ...], generation_length: int) -> None:
    path = "workload.gen_quantiles"
    previous_fraction, previous_length = 0.0, 0
    for index, (fraction, length) in enumerate(quantiles):
        if not previous_fraction < fraction <= 1.0:
            raise InstanceError(
                f"{path}[{index}]",
                f"fractions must increase within (0, 1], got {fraction} after {previous_fraction}",
            )
        if not previous_length <= length <= generation_length:
            raise InstanceError(
                f"{path}[{index}]",
                f"lengths must not decrease and stay <= generation_length "
                f"{generation_length}, got {length} after {previous_length}",
            )
        previous_fraction, previous_length = fraction, length
    if quantiles[-1][0] != 1.0 or quantiles[-1][1] != generation_length:
        raise InstanceError(
            path,
            f"must end with [1.0, {generation_length}] (all sequences done at generation_length)",
        )


def parse_workload(data: Any) -> Workload:
    """Build :class:`Workload` from the ``workload`` section."""
    section = mapping(data, "workload")
    check_keys(section, WORKLOAD_KEYS, "workload")
    values = read_fields(section, WORKLOAD_FIELDS, "workload")
    raw = section.get("gen_quantiles")
    if raw is not None:
        values["gen_quantiles"] = _read_quantiles(raw)
    return Workload(**values)


def _read_quantiles(raw: Any) -> tuple[tuple[float, int], ...]:
    """The ``gen_quantiles`` pairs as written (their order is checked by :class:`Workload`)."""
    path = "workload.gen_quantiles"
    if not isinstance(raw, list) or not raw:
        raise InstanceError(
            path, f"must be a non-empty list of [fraction, length] pairs, got {describe(raw)}"
        )
    check_list_size(raw, path, MAX_QUANTILES)
    pairs = []
    for index, pair in enumerate(raw):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise InstanceError(
                f"{path}[{index}]", f"must be a [fraction, length] pair, got {describe(pair)}"
            )
        fraction = unit_fraction(pair[0], f"{path}[{index}][0]", open_low=True, open_high=False)
        length = positive_int(pair[1], f"{path}[{index}][1]")
        pairs.append((fraction, length))
    return tuple(pairs)
