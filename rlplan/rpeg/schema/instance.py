"""Instance schema: the instance, its plan-space and solver sections, and loading.

The schema accepts the research optimizer's configuration files unchanged
(sections ``hardware``, ``models``, ``workload``, ``policy``, ``optimizer``)
and adds the optional sections ``placement``, ``solver``, ``engine`` and
``reference``; ``optimizer`` may be left out too (its defaults apply). Each
section has its module (:mod:`~rlplan.rpeg.schema.hardware`,
:mod:`~rlplan.rpeg.schema.models`, :mod:`~rlplan.rpeg.schema.workload`,
:mod:`~rlplan.rpeg.schema.optimizer`, :mod:`~rlplan.rpeg.schema.engine`,
:mod:`~rlplan.rpeg.schema.reference`; ``placement`` and ``solver`` are here).
Every dataclass validates itself on construction; :func:`parse_instance`
builds them from a mapping and names the field path of the first problem it
meets.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlplan.rpeg.errors import InstanceError, did_you_mean
from rlplan.rpeg.errors import describe as _describe
from rlplan.rpeg.schema.checks import (
    boolean,
    check_keys,
    mapping,
    positive_int,
    require,
    unit_fraction,
)
from rlplan.rpeg.schema.checks import is_power_of_two as _is_power_of_two
from rlplan.rpeg.schema.engine import EngineConfig, parse_engine
from rlplan.rpeg.schema.expert_checks import check_parallel_lists, check_parallel_pins
from rlplan.rpeg.schema.fields import one_of
from rlplan.rpeg.schema.geometry import NODE_BLOCKS
from rlplan.rpeg.schema.hardware import Hardware, parse_hardware
from rlplan.rpeg.schema.limits import check_list_size
from rlplan.rpeg.schema.models import RULE_ROLE, ModelSpec, RuleReward, parse_models
from rlplan.rpeg.schema.optimizer import OptimizerConfig, parse_optimizer
from rlplan.rpeg.schema.pins import Pins, narrowed_staleness, parse_pins
from rlplan.rpeg.schema.policy import ALGORITHMS, REQUIRED_ROLES, TRAINED_MODELS, parse_policy
from rlplan.rpeg.schema.pools import (
    InterPoolLink,
    Pool,
    is_pooled,
    layout_hardware,
    parse_pools,
)
from rlplan.rpeg.schema.reference import ReferenceRun, parse_reference
from rlplan.rpeg.schema.solver_options import INSTANCE, OPTION_RULES, check_option
from rlplan.rpeg.schema.workload import Workload, parse_workload
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.strategy import (
    DEFAULT_MICRO_BATCH_SIZES,
    DIMENSIONS,
    Dimension,
    add_dimension_fields,
)
from rlplan.rpeg.templates import AC_MODEL, FUSED, SEPARATE


def _candidate_list_field(declared: Dimension) -> tuple[str, Any]:
    """The ``placement`` attribute of a dimension: its candidates, by default the declared ones."""
    return (f"tuple[{declared.values.__name__}, ...]", declared.candidates)


#: ``placement.node_blocks``: which runs of whole nodes are blocks (docs/instance.md).
NODE_BLOCKS_VALUE = one_of(NODE_BLOCKS, " or ".join(NODE_BLOCKS))


@dataclass(frozen=True)
@add_dimension_fields(_candidate_list_field, "pin")
class PlacementConfig:
    """The ``placement`` section: the plan space's knobs.

    Attributes
    ----------
    microbatches, micro_batch_sizes
        Train and infer micro-batching, as counts per replica (v1 form) or as
        sequences per micro-batch and replica (the frameworks' form, the
        default). At most one of the two is given; the other is ``None``.
    recompute, sharding, offload, gpu_memory_utilization, max_num_seqs
        One candidate list per dimension of :data:`rlplan.rpeg.strategy.DIMENSIONS`
        (``placement.<name>``): activation recompute (``none``, ``full``) and
        state sharding (``zero1``, ``zero3``) of train vertices, offload
        (``false``, ``true``) of train and infer vertices, and the rollout
        engine's fraction of each GPU (in (0, 1]) and cap on running sequences
        of generate vertices.
    node_blocks
        Which runs of whole nodes inside a rack are blocks: ``any`` (every
        run, e.g. nodes 1-3 of a 4-node rack), ``aligned`` (the aligned
        power-of-two groups only) or ``auto`` (``any`` in racks of up to 8
        nodes) (:mod:`rlplan.rpeg.schema.geometry`).
    sliced_blocks
        Whether sliced blocks are blocks too: one in-node range on each node
        of an aligned group of nodes, e.g. GPUs 0-1 of both nodes of a 2-node
        rack (:func:`rlplan.rpeg.schema.geometry.sliced_blocks`). Off by default.
    pin
        What-if pins (``placement.pin``, :mod:`rlplan.rpeg.schema.pins`): fields of some
        vertices' placements and staleness fixed by the user.
    """

    min_block_gpus: int = 1
    node_blocks: str = NODE_BLOCKS[0]
    sliced_blocks: bool = False
    microbatches: tuple[int, ...] | None = None
    micro_batch_sizes: tuple[int, ...] | None = DEFAULT_MICRO_BATCH_SIZES
    pin: Pins = field(default_factory=Pins)

    def __post_init__(self) -> None:
        positive_int(self.min_block_gpus, "placement.min_block_gpus")
        if not _is_power_of_two(self.min_block_gpus):
            raise InstanceError(
                "placement.min_block_gpus", f"must be a power of two, got {self.min_block_gpus}"
            )
        NODE_BLOCKS_VALUE.check(self.node_blocks, "placement.node_blocks")
        boolean(self.sliced_blocks, "placement.sliced_blocks")
        if (self.microbatches is None) == (self.micro_batch_sizes is None):
            raise InstanceError(
                "placement.microbatches",
                "give exactly one of placement.microbatches and placement.micro_batch_sizes",
            )
        counts = [("microbatches", "microbatches"), ("micro_batch_sizes", "micro_batch_sizes")]
        counts += [(d.name, d.list_key) for d in DIMENSIONS if d.values is int]
        for name, key in counts:
            values = getattr(self, name)
            if values is None:
                continue
            if not values:
                raise InstanceError(f"placement.{key}", "must not be empty")
            check_list_size(values, f"placement.{key}")
            for index, value in enumerate(values):
                positive_int(value, f"placement.{key}[{index}]")
        for declared in DIMENSIONS:
            if declared.values is int:
                continue
            values = getattr(self, declared.name)
            if not values:
                raise InstanceError(declared.placement_key, "must not be empty")
            if declared.values is bool:
                continue
            check_list_size(values, declared.placement_key)
            for index, value in enumerate(values):
                path = f"{declared.placement_key}[{index}]"
                if declared.values is float:
                    unit_fraction(value, path, open_low=True, open_high=False)
                elif value not in declared.choices:
                    raise InstanceError(
                        path, f"must be one of {declared.choice_words()}, got {_describe(value)}"
                    )

    def microbatch_counts(self, replica: int) -> tuple[int, ...]:
        """Micro-batch counts allowed for a replica of ``replica`` sequences.

        The count form is taken as given (counts above ``replica`` are
        dropped); a micro-batch size m gives ``ceil(replica / m)``.
        """
        if self.microbatches is not None:
            return tuple(mb for mb in self.microbatches if mb <= replica)
        assert self.micro_batch_sizes is not None
        return tuple(sorted({-(-replica // size) for size in self.micro_batch_sizes}))


def _int_list(raw: Any, path: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or not raw:
        raise InstanceError(
            path, f"must be a non-empty list of positive integers, got {_describe(raw)}"
        )
    check_list_size(raw, path)
    return tuple(sorted({positive_int(value, f"{path}[{i}]") for i, value in enumerate(raw)}))


def _fraction_list(raw: Any, path: str) -> tuple[float, ...]:
    """A non-empty list of fractions in (0, 1] (``gpu_memory_utilization``), sorted."""
    if not isinstance(raw, list) or not raw:
        raise InstanceError(
            path, f"must be a non-empty list of numbers in (0, 1], got {_describe(raw)}"
        )
    check_list_size(raw, path)
    return tuple(
        sorted(
            {
                unit_fraction(value, f"{path}[{i}]", open_low=True, open_high=False)
                for i, value in enumerate(raw)
            }
        )
    )


def _choice_list(raw: Any, path: str, allowed: tuple[Any, ...]) -> tuple[Any, ...]:
    if not isinstance(raw, list) or not raw:
        raise InstanceError(
            path,
            f"must be a non-empty list of {', '.join(map(str, allowed))}, got {_describe(raw)}",
        )
    check_list_size(raw, path)
    chosen = []
    for index, value in enumerate(raw):
        if isinstance(value, bool) != isinstance(allowed[0], bool) or value not in allowed:
            raise InstanceError(
                f"{path}[{index}]",
                f"must be one of {', '.join(str(a).lower() for a in allowed)}, "
                f"got {_describe(value)}",
            )
        if value not in chosen:
            chosen.append(value)
    return tuple(a for a in allowed if a in chosen)


#: The old name of ``placement.max_num_seqs`` (docs/plan-space.md#older-plan-files).
LEGACY_CONCURRENCY = "concurrency"

_PLACEMENT_KEYS = (
    "min_block_gpus",
    "node_blocks",
    "sliced_blocks",
    "microbatches",
    "micro_batch_sizes",
    *(declared.list_key for declared in DIMENSIONS),
    LEGACY_CONCURRENCY,
    "pin",
)


def parse_placement(data: Any) -> PlacementConfig:
    """Build :class:`PlacementConfig` from the optional ``placement`` section.

    ``placement.pin`` is left to :func:`parse_instance`: pins name template
    vertices, which depend on the ``policy`` and ``engine`` sections.
    """
    if data is None:
        return PlacementConfig()
    section = mapping(data, "placement")
    check_keys(section, _PLACEMENT_KEYS, "placement")
    values: dict[str, Any] = {}
    if section.get("min_block_gpus") is not None:
        values["min_block_gpus"] = positive_int(
            section["min_block_gpus"], "placement.min_block_gpus"
        )
    if section.get("node_blocks") is not None:
        values["node_blocks"] = NODE_BLOCKS_VALUE.check(
            section["node_blocks"], "placement.node_blocks"
        )
    if section.get("sliced_blocks") is not None:
        values["sliced_blocks"] = boolean(section["sliced_blocks"], "placement.sliced_blocks")
    given_counts = section.get("microbatches") is not None
    given_sizes = section.get("micro_batch_sizes") is not None
    if given_counts and given_sizes:
        raise InstanceError(
            "placement.microbatches",
            "give either microbatches (counts) or micro_batch_sizes (sequences), not both",
        )
    if given_counts:
        values["microbatches"] = _int_list(section["microbatches"], "placement.microbatches")
        values["micro_batch_sizes"] = None
    if given_sizes:
        values["micro_batch_sizes"] = _int_list(
            section["micro_batch_sizes"], "placement.micro_batch_sizes"
        )
    for declared in DIMENSIONS:
        raw = section.get(declared.list_key)
        if raw is None:
            continue
        if declared.values is int:
            values[declared.name] = _int_list(raw, declared.placement_key)
        elif declared.values is float:
            values[declared.name] = _fraction_list(raw, declared.placement_key)
        else:
            values[declared.name] = _choice_list(raw, declared.placement_key, declared.choices)
    if section.get(LEGACY_CONCURRENCY) is not None:
        # The old hand-picked rollout concurrency is the engine's cap on running
        # sequences; how many actually run now follows from the KV pool.
        if section.get("max_num_seqs") is not None:
            raise InstanceError(
                "placement.concurrency",
                "is the old name of placement.max_num_seqs: give max_num_seqs only",
            )
        values["max_num_seqs"] = _int_list(section[LEGACY_CONCURRENCY], "placement.concurrency")
    return PlacementConfig(**values)


@dataclass(frozen=True)
class SolverConfig:
    """The ``solver`` section: defaults of ``main.py solve`` (flags override them).

    Each field follows its rule in
    :data:`~rlplan.rpeg.schema.solver_options.OPTION_RULES`, the same rule the
    API and the command line apply.
    """

    backend: str = OPTION_RULES["backend"].default
    time_limit: float = OPTION_RULES["time_limit"].default
    threads: int = OPTION_RULES["threads"].default
    seed: int = OPTION_RULES["seed"].default
    gap: float = OPTION_RULES["gap"].default

    def __post_init__(self) -> None:
        for name in OPTION_RULES:
            check_option(name, getattr(self, name), INSTANCE)


def parse_solver(data: Any) -> SolverConfig:
    """Build :class:`SolverConfig` from the optional ``solver`` section."""
    if data is None:
        return SolverConfig()
    section = mapping(data, "solver")
    check_keys(section, tuple(OPTION_RULES), "solver")
    values = {
        name: check_option(name, section[name], INSTANCE)
        for name in OPTION_RULES
        if section.get(name) is not None
    }
    return SolverConfig(**values)


@dataclass(frozen=True)
class Instance:
    """A complete, validated planning instance.

    Attributes
    ----------
    name
        Short name (the file's stem) used in output paths and reports.
    models
        Architecture per model: ``actor``, ``reference`` (the actor's
        architecture) and, as the algorithm needs, ``reward`` (unless it is
        a rule) and ``critic``.
    reward_rule
        The rule-based reward (``models.reward: {kind: rule, ...}``) of a
        PPO or GRPO instance, or None when the reward is a model (or the
        algorithm has none). Its stage runs on CPUs, not as a vertex
        (:mod:`rlplan.rpeg.templates`).
    warnings
        One-line notes about accepted but ignored input.
    template
        The template this instance's plan space is restricted to
        (:data:`~rlplan.rpeg.templates.SEPARATE` or
        :data:`~rlplan.rpeg.templates.FUSED`),
        or None for every template the instance allows (see
        :attr:`templates`). Solvers that decide the template build the
        restricted variants with :meth:`restricted`; plan files record the
        template, so the fingerprint leaves this field out.
    hardware
        The cluster's hardware; with ``hardware.pools``, the first pool's
        (code that must see every pool reads :attr:`pools`).
    hardware_pools, inter_pool
        The pools ``hardware.pools`` lists and the link between them
        (:mod:`rlplan.rpeg.schema.pools`); empty and None for a one-type
        ``hardware`` section.
    """

    name: str
    hardware: Hardware
    models: dict[str, ModelSpec]
    workload: Workload
    algorithm: str
    optimizer: OptimizerConfig
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    reference: ReferenceRun | None = None
    warnings: tuple[str, ...] = ()
    template: str | None = None
    reward_rule: RuleReward | None = None
    hardware_pools: tuple[Pool, ...] = ()
    inter_pool: InterPoolLink | None = None

    def __post_init__(self) -> None:
        if self.template not in (None, SEPARATE, FUSED):
            raise ValueError(f"unknown template {self.template!r}")
        if self.template == FUSED and not self.ac_share:
            raise InstanceError(
                "optimizer.staleness_candidates.ac_share",
                "missing: the fused actor-critic template needs AC-share candidates",
            )
        if self.algorithm not in ALGORITHMS:
            raise InstanceError(
                "policy.algorithm",
                f"unknown algorithm {self.algorithm!r} (allowed: {', '.join(ALGORITHMS)})",
            )
        for role in (*REQUIRED_ROLES[self.algorithm], "reference"):
            if role == RULE_ROLE and self.reward_rule is not None:
                continue
            if role not in self.models:
                raise InstanceError(f"models.{role}", f"missing: {self.algorithm} needs this model")
        if self.algorithm == "dpo" and not self.engine.reference_model:
            raise InstanceError(
                "engine.reference_model", "online DPO needs the reference model (its loss uses it)"
            )

    @property
    def pools(self) -> tuple[Pool, ...]:
        """The cluster's GPU pools, laid out one after another in the flat GPU index.

        ``hardware.pools`` as written, or the one unnamed pool of
        :attr:`hardware` (docs/instance.md#pools).
        """
        return self.hardware_pools or (Pool(None, self.hardware),)

    @property
    def num_gpus(self) -> int:
        """GPUs of every pool."""
        return sum(pool.hardware.num_gpus for pool in self.pools)

    @property
    def layout_hardware(self) -> Hardware:
        """:attr:`hardware`, or with pools every pool's GPUs stacked, for drawings
        (:func:`~rlplan.rpeg.schema.pools.layout_hardware`)."""
        return layout_hardware(self.pools)

    @property
    def k_eval(self) -> int:
        """Steps unrolled when a plan is evaluated."""
        return self.optimizer.k_eval

    @property
    def steady_state(self) -> bool:
        """Whether a plan's step time is its steady-state period (``optimizer.objective``)."""
        return self.optimizer.objective == "steady_state"

    @property
    def has_moe(self) -> bool:
        """Whether some model is a mixture of experts."""
        return any(spec.is_moe for spec in self.models.values())

    @property
    def reward_rule_seconds(self) -> float | None:
        """Seconds of the rule reward's stage per step, ``ceil(B*K / w) * t`` (None: no rule)."""
        if self.reward_rule is None:
            return None
        return self.reward_rule.stage_seconds(self.workload.sequences)

    @property
    def trained_models(self) -> tuple[str, ...]:
        """Models the algorithm trains (``ac`` alone in the fused template)."""
        if self.fused:
            return (AC_MODEL,)
        return TRAINED_MODELS[self.algorithm]

    @property
    def ac_share(self) -> bool:
        """Whether the plan space includes the fused actor-critic (AC-share) template.

        True for a PPO instance whose ``optimizer.staleness_candidates`` has an
        ``ac_share`` entry.
        """
        return self.algorithm == "ppo" and AC_MODEL in self.optimizer.staleness_candidates

    @property
    def templates(self) -> tuple[str, ...]:
        """The templates of the plan space: (separate,), (ac_share,) or both.

        Under ``engine.framework`` the separate one only: none of the
        frameworks has a fused actor-critic (docs/plan-space.md#framework-plan-spaces).
        """
        if self.template is not None:
            return (self.template,)
        fused = self.ac_share and self.engine.framework is None
        return (SEPARATE, FUSED) if fused else (SEPARATE,)

    @property
    def fused(self) -> bool:
        """Whether this instance's candidate directory holds the fused template."""
        return self.template == FUSED

    @property
    def lambda_ac(self) -> float:
        """Relative penalty of the fused template (``optimizer.lambda_ac``)."""
        return self.optimizer.lambda_ac

    @property
    def lambda_stale(self) -> float:
        """Relative penalty of an off-policy plan (``optimizer.lambda_stale``)."""
        return self.optimizer.lambda_stale

    def score_factor(self, fused: bool, staleness: Iterable[tuple[str, int]] = ()) -> float:
        """What the objective multiplies a step time by.

        Parameters
        ----------
        fused
            Whether the plan fuses actor and critic (AC-share): x (1 + lambda_ac).
        staleness
            The plan's (model, staleness) pairs: x (1 + lambda_stale) when any
            staleness is above 0 (an off-policy plan).

        Returns
        -------
        float
            E.g. 1.0 for an on-policy separate plan, 1.05 for an off-policy one
            with the default lambda_stale, 1.15 x 1.05 for an off-policy fused one.
        """
        factor = 1.0 + self.optimizer.lambda_ac if fused else 1.0
        if any(value > 0 for _, value in staleness):
            factor *= 1.0 + self.optimizer.lambda_stale
        return factor

    @property
    def policy_kinds(self) -> tuple[bool, bool]:
        """Whether this plan space has (on-policy plans, off-policy plans).

        Over the trained models of this instance's template (the separate
        one unless restricted to the fused one): on-policy plans exist when
        every model may take staleness 0, off-policy ones when some model may
        take more.
        """
        choices = [self.optimizer.staleness_candidates[m] for m in self.trained_models]
        return all(0 in c for c in choices), any(max(c) > 0 for c in choices)

    def on_policy(self) -> Instance:
        """This instance with every model that may take staleness 0 restricted to 0."""
        candidates = {
            model: (0,) if 0 in values else values
            for model, values in self.optimizer.staleness_candidates.items()
        }
        optimizer = dataclasses.replace(self.optimizer, staleness_candidates=candidates)
        return dataclasses.replace(self, optimizer=optimizer)

    def without_stale_penalty(self) -> Instance:
        """This instance with ``lambda_stale`` 0: its score is the makespan (x 1 + lambda_ac)."""
        optimizer = dataclasses.replace(self.optimizer, lambda_stale=0.0)
        return dataclasses.replace(self, optimizer=optimizer)

    def restricted(self, template: str | None) -> Instance:
        """This instance with its plan space restricted to one template (None: all)."""
        if template == self.template:
            return self
        return dataclasses.replace(self, template=template)


_SECTIONS = (
    "hardware",
    "models",
    "workload",
    "policy",
    "optimizer",
    "placement",
    "solver",
    "engine",
    "reference",
)


def parse_instance(
    data: Any, name: str = "instance", base_dir: str | os.PathLike[str] | None = None
) -> Instance:
    """Validate a parsed YAML document and build the :class:`Instance`.

    Parameters
    ----------
    data
        The document: a mapping of sections.
    name
        The instance's short name.
    base_dir
        Folder relative ``models.<role>.hf_config`` paths are relative to
        (the instance file's); None for the current folder.

    Raises
    ------
    InstanceError
        Naming the field path of the first problem found.
    """
    if not isinstance(data, Mapping):
        raise InstanceError("", f"an instance must be a mapping of sections, got {_describe(data)}")
    warnings = []
    for key in data:
        if key not in _SECTIONS:
            warnings.append(
                f"warning: unknown section {key!r} ignored{did_you_mean(key, _SECTIONS)}"
            )
    for section in ("hardware", "models", "workload"):
        require(data, section, "")
    algorithm = parse_policy(data.get("policy"))
    hardware_pools: tuple[Pool, ...] = ()
    inter_pool = None
    if is_pooled(data["hardware"]):
        hardware_pools, inter_pool = parse_pools(mapping(data["hardware"], "hardware"))
        hardware = hardware_pools[0].hardware
    else:
        hardware = parse_hardware(data["hardware"])
    models, reward_rule, model_warnings = parse_models(data["models"], algorithm, base_dir)
    warnings.extend(model_warnings)
    workload = parse_workload(data["workload"])
    optimizer = parse_optimizer(data.get("optimizer"), algorithm)
    if AC_MODEL in optimizer.staleness_candidates:
        # The fused actor-critic: the actor's architecture plus a scalar head
        # (rpeg.cost.head_parameters counts the extra d parameters).
        models[AC_MODEL] = models["actor"]
    placement = parse_placement(data.get("placement"))
    # Expert and context parallel choices the models or S + T rule out (one line each).
    warnings.extend(check_parallel_lists(data.get("placement"), models, workload.total_length))
    check_parallel_pins(data.get("placement"), models, workload.total_length)
    if isinstance(data.get("placement"), Mapping) and data["placement"].get(LEGACY_CONCURRENCY):
        warnings.append(
            "warning: placement.concurrency is read as placement.max_num_seqs (the rollout "
            "engine's cap); gpu_memory_utilization takes placement.gpu_memory_utilization"
        )
    solver = parse_solver(data.get("solver"))
    engine = parse_engine(data.get("engine"))
    if data.get("placement") is not None:
        pins = parse_pins(
            data["placement"].get("pin"),
            algorithm,
            engine,
            hardware,
            placement,
            optimizer,
            rule_reward=reward_rule is not None,
            models=models,
            pools=hardware_pools or None,
        )
        if pins and AC_MODEL in optimizer.staleness_candidates:
            _check_pins_with_ac_share(pins)
        if pins:
            placement = dataclasses.replace(placement, pin=pins)
            optimizer = dataclasses.replace(
                optimizer,
                staleness_candidates=narrowed_staleness(optimizer.staleness_candidates, pins),
            )
    reference = parse_reference(data.get("reference"))
    return Instance(
        name=name,
        hardware=hardware,
        models=models,
        workload=workload,
        algorithm=algorithm,
        optimizer=optimizer,
        placement=placement,
        solver=solver,
        engine=engine,
        reference=reference,
        warnings=tuple(warnings),
        reward_rule=reward_rule,
        hardware_pools=hardware_pools,
        inter_pool=inter_pool,
    )


def _check_pins_with_ac_share(pins: Pins) -> None:
    """Refuse pins the fused template cannot honour (it has no such vertex or model).

    Pins name the separate template's vertices; ``actor.generate``,
    ``reference.infer`` and ``reward.infer`` exist in both templates and are
    pinned in both. A pin on a vertex the fused template replaces, or on the
    actor's or critic's staleness, would silently not apply to fused plans.
    """
    shared = ("actor.generate", "reference.infer", "reward.infer")
    for name, _ in pins.vertices:
        if name not in shared:
            raise InstanceError(
                f"placement.pin.{name}",
                "cannot be combined with optimizer.staleness_candidates.ac_share: the fused "
                "actor-critic template has no such vertex (pin only "
                f"{', '.join(shared)}, or remove ac_share)",
            )
    for model, _ in pins.staleness:
        raise InstanceError(
            f"placement.pin.staleness.{model}",
            "cannot be combined with optimizer.staleness_candidates.ac_share: fused plans "
            "have no separate actor or critic staleness (narrow the candidate lists instead)",
        )


def load_instance(path: str | os.PathLike[str]) -> Instance:
    """Read, parse and validate an instance file.

    Parameters
    ----------
    path
        A YAML file following the instance schema.

    Raises
    ------
    InstanceError
        If the file cannot be read or breaks the schema.
    """
    data = read_yaml_file(path)
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return parse_instance(data, name=stem, base_dir=os.path.dirname(os.path.abspath(path)))
