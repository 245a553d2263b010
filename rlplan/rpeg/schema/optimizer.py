"""The ``optimizer`` section: evaluation horizon, staleness candidates and search knobs.

Fields are declared in :data:`OPTIMIZER_FIELDS` (:mod:`rlplan.rpeg.schema.fields`).
The section is optional: an instance without it takes every default below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe
from rlplan.rpeg.schema.checks import check_keys, mapping, nonnegative_int
from rlplan.rpeg.schema.fields import (
    BOOLEAN,
    FRACTION,
    NONNEGATIVE_FLOAT,
    NONNEGATIVE_INT,
    POSITIVE_INT,
    Field,
    check_fields,
    field_range,
    keys,
    one_of,
    read_fields,
    structured,
)
from rlplan.rpeg.schema.limits import MAX_LIST_ITEMS, check_list_size
from rlplan.rpeg.schema.policy import KNOWN_ROLES, TRAINED_MODELS
from rlplan.rpeg.templates import AC_MODEL

#: ``optimizer.staleness_candidates`` key that enables the AC-share template.
AC_SHARE_KEY = "ac_share"
#: Staleness candidates of a trained model the section does not list.
DEFAULT_STALENESS = (0, 1)
#: Steps unrolled when a plan is evaluated, when the section does not say. Two steps
#: are the fewest in which a plan at the default staleness 1 shows what it buys: step
#: 1's generation overlapping step 0's training (the specification's example instance
#: and most shipped instances unroll two steps, docs/templates.md).
DEFAULT_K_EVAL = 2
#: Relative score penalty of an off-policy plan (some trained model at staleness > 0):
#: such a plan scores step time x (1 + lambda_stale). A preference, not a measured
#: figure: no published study prices one step of staleness in step time. The
#: published one-step-off runs report that off-policy pays when it saves tens of
#: percent with matching accuracy (verl docs/advance/one_step_off.md, "Experimental
#: Results": 23 % and 40 % shorter DAPO runs of Qwen2.5-Math-7B; Noukhovitch et
#: al. 2024, "Asynchronous RLHF", arXiv 2410.18252: about 40 % faster on LLaMA 3.1
#: 8B while matching final performance, with PPO less robust to off-policy data
#: than online DPO), while a plan a few percent faster is not worth changing the
#: training algorithm. 5 % keeps every plan of that published kind and drops
#: marginal wins; set 0 to rank plans by step time alone (docs/plan-space.md).
DEFAULT_LAMBDA_STALE = 0.05
#: What a plan's time is: the makespan of ``k_eval`` unrolled steps over ``k_eval``
#: (``makespan``), or the period of the plan repeated without end (``steady_state``,
#: docs/simulator.md, "The steady-state period").
OBJECTIVES = ("makespan", "steady_state")


def staleness_list_schema() -> dict[str, Any]:
    """JSON Schema of one model's staleness candidates (duplicates are merged)."""
    entry = NONNEGATIVE_INT.schema(field_range("optimizer.staleness_candidates.actor[0]"))
    return {"type": "array", "minItems": 1, "maxItems": MAX_LIST_ITEMS, "items": entry}


def _staleness_schema() -> dict[str, Any]:
    """JSON Schema of ``staleness_candidates`` (the models it may name depend on the algorithm)."""
    return {
        "type": "object",
        "properties": {
            name: staleness_list_schema() for name in (*TRAINED_MODELS["ppo"], AC_SHARE_KEY)
        },
        "additionalProperties": False,
    }


OPTIMIZER_FIELDS = (
    Field("k_eval", POSITIVE_INT, DEFAULT_K_EVAL, "Steps unrolled when a plan is evaluated"),
    Field(
        "staleness_candidates",
        structured("mapping of trained model to staleness lists", _staleness_schema),
        None,
        "Staleness choices per trained model (default [0, 1] each); ac_share (PPO only) "
        "adds the fused actor-critic template",
    ),
    Field(
        "objective",
        one_of(OBJECTIVES, " or ".join(OBJECTIVES)),
        OBJECTIVES[0],
        "Step time of a plan: makespan of k_eval steps / k_eval, or the steady-state period",
    ),
    Field("e_max", POSITIVE_INT, 5000, "Evaluation budget of the local search"),
    Field("e_struct", POSITIVE_INT, 400, "Evaluations between structural moves"),
    Field("k_x", POSITIVE_INT, 6, "Candidates sampled when a move picks a strategy"),
    Field(
        "stag_window",
        POSITIVE_INT,
        20,
        "Steps without a new best before a restart from the best plan",
    ),
    Field("t_max", POSITIVE_INT, 50, "Accepted for compatibility; no effect"),
    Field("t_init", NONNEGATIVE_FLOAT, 0.30, "Start temperature, a fraction of the current score"),
    Field("t_warm", NONNEGATIVE_FLOAT, 0.10, "Temperature after a restart"),
    Field("t_min", NONNEGATIVE_FLOAT, 0.03, "End temperature, a fraction of the current score"),
    Field(
        "alpha_pair",
        FRACTION,
        0.28,
        "Probability that a structural move involves two vertices",
        read_as=NONNEGATIVE_FLOAT,
    ),
    Field(
        "score_eps", NONNEGATIVE_FLOAT, 1e-4, "Relative improvement needed to count as a new best"
    ),
    Field("lambda_ac", NONNEGATIVE_FLOAT, 0.15, "Relative penalty of the fused template"),
    Field(
        "lambda_stale",
        NONNEGATIVE_FLOAT,
        DEFAULT_LAMBDA_STALE,
        "Relative penalty of an off-policy plan (a trained model at staleness > 0)",
    ),
    Field("max_throughput_loss", NONNEGATIVE_FLOAT, 0.0, "Accepted for compatibility; no effect"),
    Field(
        "hard_oom",
        BOOLEAN,
        False,
        "Reject memory-overflowing neighbours instead of penalising them",
    ),
    Field("fixed_mb", BOOLEAN, False, "Ablation: keep micro-batching fixed in moves"),
    Field("uniform_vertex", BOOLEAN, False, "Ablation: pick the vertex to move uniformly"),
    Field("no_polish", BOOLEAN, False, "Ablation: skip the final polishing pass"),
    Field("geometric_cooling", BOOLEAN, False, "Cool geometrically instead of linearly"),
)
OPTIMIZER_KEYS = keys(OPTIMIZER_FIELDS)
#: Fields :class:`OptimizerConfig` checks when built (booleans are checked when read).
_CHECKED_WHEN_BUILT = tuple(field for field in OPTIMIZER_FIELDS if field.value is not BOOLEAN)


@dataclass(frozen=True)
class OptimizerConfig:
    """The ``optimizer`` section: evaluation horizon and local-search knobs.

    Knob meanings follow the specification (section 8); ``t_max`` and
    ``max_throughput_loss`` are accepted for compatibility with the reference
    optimizer's files and have no effect here.

    ``staleness_candidates`` maps each trained model to its staleness
    choices; the file's ``ac_share`` entry (PPO only) is stored under the
    fused model's name ``ac`` and enables the AC-share template (a fused
    actor-critic, :mod:`rlplan.rpeg.templates`). ``lambda_ac`` (default 0.15, as in
    the reference optimizer) is that template's relative penalty: every
    solver minimises step time x (1 + lambda_ac) for a fused plan and the
    plain step time otherwise, since a shared backbone couples the policy
    and value losses and is usually avoided for learning quality. Without
    an ``ac_share`` entry ``lambda_ac`` has no effect.

    ``lambda_stale`` (default :data:`DEFAULT_LAMBDA_STALE`) is the relative
    penalty of an off-policy plan, one where some trained model has a
    staleness above 0: such a plan scores step time x (1 + lambda_stale)
    (times 1 + lambda_ac as well when it is fused), since training on the
    previous step's rollouts changes the algorithm. 0 ranks plans by step
    time alone.

    ``objective`` (default ``makespan``) says what a plan's step time is: its
    makespan over ``k_eval`` unrolled steps divided by ``k_eval``, or with
    ``steady_state`` the period of the plan repeated without end, the
    long-run mean step (docs/simulator.md, "The steady-state period").
    """

    k_eval: int = DEFAULT_K_EVAL
    objective: str = OBJECTIVES[0]
    staleness_candidates: dict[str, tuple[int, ...]] = field(default_factory=dict)
    e_max: int = 5000
    t_init: float = 0.30
    t_warm: float = 0.10
    t_min: float = 0.03
    e_struct: int = 400
    k_x: int = 6
    alpha_pair: float = 0.28
    stag_window: int = 20
    score_eps: float = 1e-4
    hard_oom: bool = False
    fixed_mb: bool = False
    uniform_vertex: bool = False
    no_polish: bool = False
    geometric_cooling: bool = False
    t_max: int = 50
    lambda_ac: float = 0.15
    lambda_stale: float = DEFAULT_LAMBDA_STALE
    max_throughput_loss: float = 0.0

    def __post_init__(self) -> None:
        check_fields(self, _CHECKED_WHEN_BUILT, "optimizer")
        for model, values in self.staleness_candidates.items():
            if not values:
                raise InstanceError(f"optimizer.staleness_candidates.{model}", "must not be empty")
            check_list_size(values, f"optimizer.staleness_candidates.{model}")
            for index, value in enumerate(values):
                nonnegative_int(value, f"optimizer.staleness_candidates.{model}[{index}]")


def parse_optimizer(data: Any, algorithm: str) -> OptimizerConfig:
    """Build :class:`OptimizerConfig` from the ``optimizer`` section (None: every default)."""
    section = {} if data is None else mapping(data, "optimizer")
    check_keys(section, OPTIMIZER_KEYS, "optimizer")
    values = read_fields(section, OPTIMIZER_FIELDS, "optimizer")
    values["staleness_candidates"] = _read_staleness(section.get("staleness_candidates"), algorithm)
    return OptimizerConfig(**values)


def _read_staleness(raw: Any, algorithm: str) -> dict[str, tuple[int, ...]]:
    """Staleness candidates per trained model (``ac_share`` stored under ``ac``)."""
    trained = TRAINED_MODELS[algorithm]
    candidates: dict[str, tuple[int, ...]] = {model: DEFAULT_STALENESS for model in trained}
    if raw is None:
        return candidates
    path = "optimizer.staleness_candidates"
    for model, values_raw in mapping(raw, path).items():
        where = f"{path}.{model}"
        if model == AC_SHARE_KEY:
            if algorithm != "ppo":
                raise InstanceError(
                    where,
                    f"AC-share (a fused actor-critic) is PPO only; {algorithm} has no "
                    "critic to fuse: remove this entry",
                )
        elif model not in KNOWN_ROLES:
            raise InstanceError(where, "unknown model (allowed: actor, critic, ac_share)")
        elif model not in trained:
            raise InstanceError(
                where, f"{algorithm} does not train the {model}; it has no staleness"
            )
        if not isinstance(values_raw, list | tuple) or not values_raw:
            raise InstanceError(
                where, f"must be a non-empty list of integers >= 0, got {describe(values_raw)}"
            )
        check_list_size(values_raw, where)
        staleness = sorted(
            {nonnegative_int(value, f"{where}[{index}]") for index, value in enumerate(values_raw)}
        )
        candidates[AC_MODEL if model == AC_SHARE_KEY else model] = tuple(staleness)
    return candidates
