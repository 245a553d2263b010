"""Instance schema: hardware, models, workload, policy and the optional sections.

The schema accepts the research optimizer's configuration files unchanged
(sections ``hardware``, ``models``, ``workload``, ``policy``, ``optimizer``)
and adds the optional sections ``placement`` and ``solver``. Every dataclass
validates itself on construction; :func:`parse_instance` builds them from a
mapping and names the field path of the first problem it meets.
"""

from __future__ import annotations

import math
import os
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rpeg.errors import InstanceError
from rpeg.yamlio import read_yaml_file

ALGORITHMS = ("ppo", "grpo", "dpo")

#: Model roles each algorithm needs in ``models`` (the reference model always
#: shares the actor's architecture and is never given).
REQUIRED_ROLES: dict[str, tuple[str, ...]] = {
    "ppo": ("actor", "critic", "reward"),
    "grpo": ("actor", "reward"),
    "dpo": ("actor",),
}

#: Models each algorithm trains (and so may give a staleness).
TRAINED_MODELS: dict[str, tuple[str, ...]] = {
    "ppo": ("actor", "critic"),
    "grpo": ("actor",),
    "dpo": ("actor",),
}

KNOWN_ROLES = ("actor", "critic", "reward")
LEVELS = ("g", "n", "r")


# ----------------------------------------------------------------------------
# Field readers: each returns the converted value or raises with the path.
# ----------------------------------------------------------------------------


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxtuple = 2, 4, 4, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 40, 40, 40


def _describe(value: Any) -> str:
    """A short description of a value for error lines (never the whole of a huge value)."""
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


def _is_number(value: Any) -> bool:
    """A finite int or float (not a bool, not an int too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return value.bit_length() <= 1000
    return math.isfinite(value)


def positive_int(value: Any, path: str) -> int:
    """Return ``value`` as an int > 0 (integral floats such as ``1e3`` allowed)."""
    if _is_number(value) and float(value).is_integer() and value > 0:
        return int(value)
    raise InstanceError(path, f"must be a positive integer, got {_describe(value)}")


def nonnegative_int(value: Any, path: str) -> int:
    """Return ``value`` as an int >= 0."""
    if _is_number(value) and float(value).is_integer() and value >= 0:
        return int(value)
    raise InstanceError(path, f"must be a non-negative integer, got {_describe(value)}")


def positive_float(value: Any, path: str) -> float:
    """Return ``value`` as a finite float > 0."""
    if _is_number(value) and value > 0:
        return float(value)
    raise InstanceError(path, f"must be a positive number, got {_describe(value)}")


def nonnegative_float(value: Any, path: str) -> float:
    """Return ``value`` as a finite float >= 0."""
    if _is_number(value) and value >= 0:
        return float(value)
    raise InstanceError(path, f"must be a non-negative number, got {_describe(value)}")


def unit_fraction(value: Any, path: str, *, open_low: bool, open_high: bool) -> float:
    """Return ``value`` as a float in (0|[0, 1)|1]."""
    if _is_number(value):
        low_ok = value > 0 if open_low else value >= 0
        high_ok = value < 1 if open_high else value <= 1
        if low_ok and high_ok:
            return float(value)
    interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
    raise InstanceError(path, f"must be a number in {interval}, got {_describe(value)}")


def boolean(value: Any, path: str) -> bool:
    """Return ``value`` if it is a YAML boolean."""
    if isinstance(value, bool):
        return value
    raise InstanceError(path, f"must be true or false, got {_describe(value)}")


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    """Return ``value`` if it is a mapping with string keys."""
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return value
    raise InstanceError(path, f"must be a mapping of names to values, got {_describe(value)}")


def check_keys(data: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    """Reject keys outside ``allowed``: typos must not pass silently."""
    for key in data:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise InstanceError(where, f"unknown key (allowed: {', '.join(allowed)})")


def require(data: Mapping[str, Any], key: str, path: str) -> Any:
    """Return ``data[key]`` or raise naming the missing field."""
    if key not in data or data[key] is None:
        where = f"{path}.{key}" if path else key
        raise InstanceError(where, "missing required field")
    return data[key]


def _bandwidth_to_inverse(value: Any, path: str) -> float:
    """Normalise a ``beta_*`` value: >= 1 is bytes/s, < 1 is s/byte."""
    number = positive_float(value, path)
    return 1.0 / number if number >= 1.0 else number


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


# ----------------------------------------------------------------------------
# Sections
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hardware:
    """A cluster of ``racks x nodes_per_rack x gpus_per_node`` identical GPUs.

    Communication parameters are stored per level ``g`` (inside a node),
    ``n`` (across nodes of a rack) and ``r`` (across racks); every ``beta`` is
    an inverse bandwidth in s/byte.
    """

    racks: int
    nodes_per_rack: int
    gpus_per_node: int
    flops_per_gpu: float
    memory_per_gpu: float
    memory_bandwidth: float
    alpha_coll: dict[str, float]
    beta_coll: dict[str, float]
    alpha_p2p: dict[str, float]
    beta_p2p: dict[str, float]
    gemm_m_half: float = 5.0
    gemm_k_half: float = 0.0
    decode_bw_eff: float = 0.15
    non_gemm_constant: float = 0.0
    non_gemm_scaling: float = 0.0
    non_gemm_batch_cal: float = 64.0
    memory_reserve: float = 0.0

    def __post_init__(self) -> None:
        positive_int(self.racks, "hardware.racks")
        positive_int(self.nodes_per_rack, "hardware.nodes_per_rack")
        positive_int(self.gpus_per_node, "hardware.gpus_per_node")
        positive_float(self.flops_per_gpu, "hardware.flops_per_gpu")
        positive_float(self.memory_per_gpu, "hardware.memory_per_gpu")
        positive_float(self.memory_bandwidth, "hardware.memory_bandwidth")
        for name in ("alpha_coll", "alpha_p2p"):
            for level in LEVELS:
                nonnegative_float(getattr(self, name)[level], f"hardware.{name}_{level}")
        for name in ("beta_coll", "beta_p2p"):
            for level in LEVELS:
                positive_float(getattr(self, name)[level], f"hardware.{name}_{level}")
        nonnegative_float(self.gemm_m_half, "hardware.gemm_m_half")
        nonnegative_float(self.gemm_k_half, "hardware.gemm_k_half")
        unit_fraction(self.decode_bw_eff, "hardware.decode_bw_eff", open_low=True, open_high=False)
        nonnegative_float(self.non_gemm_constant, "hardware.non_gemm_constant")
        nonnegative_float(self.non_gemm_scaling, "hardware.non_gemm_scaling")
        positive_float(self.non_gemm_batch_cal, "hardware.non_gemm_batch_cal")
        unit_fraction(
            self.memory_reserve, "hardware.memory_reserve", open_low=False, open_high=True
        )

    @property
    def num_gpus(self) -> int:
        """Total number of GPUs ``R*N*G``."""
        return self.racks * self.nodes_per_rack * self.gpus_per_node

    @property
    def gpus_per_rack(self) -> int:
        """GPUs in one rack ``N*G``."""
        return self.nodes_per_rack * self.gpus_per_node

    @property
    def usable_memory(self) -> float:
        """Bytes per GPU a plan may use: ``memory_per_gpu * (1 - memory_reserve)``."""
        return self.memory_per_gpu * (1.0 - self.memory_reserve)


_HARDWARE_REQUIRED = (
    "racks",
    "nodes_per_rack",
    "gpus_per_node",
    "flops_per_gpu",
    "memory_per_gpu",
    "memory_bandwidth",
)
_HARDWARE_COMM = tuple(
    f"{kind}_{mode}_{level}"
    for mode in ("coll", "p2p")
    for kind in ("alpha", "beta")
    for level in LEVELS
)
_HARDWARE_OPTIONAL = (
    "gemm_m_half",
    "gemm_k_half",
    "decode_bw_eff",
    "non_gemm_constant",
    "non_gemm_scaling",
    "non_gemm_batch_cal",
    "memory_reserve",
)


def parse_hardware(data: Any) -> Hardware:
    """Build :class:`Hardware` from the ``hardware`` section."""
    section = mapping(data, "hardware")
    check_keys(section, _HARDWARE_REQUIRED + _HARDWARE_COMM + _HARDWARE_OPTIONAL, "hardware")
    ints = {
        key: positive_int(require(section, key, "hardware"), f"hardware.{key}")
        for key in _HARDWARE_REQUIRED[:3]
    }
    floats = {
        key: positive_float(require(section, key, "hardware"), f"hardware.{key}")
        for key in _HARDWARE_REQUIRED[3:]
    }
    comm: dict[str, dict[str, float]] = {}
    for mode in ("coll", "p2p"):
        alphas, betas = {}, {}
        for level in LEVELS:
            alpha_key, beta_key = f"alpha_{mode}_{level}", f"beta_{mode}_{level}"
            alphas[level] = nonnegative_float(
                require(section, alpha_key, "hardware"), f"hardware.{alpha_key}"
            )
            betas[level] = _bandwidth_to_inverse(
                require(section, beta_key, "hardware"), f"hardware.{beta_key}"
            )
        comm[f"alpha_{mode}"] = alphas
        comm[f"beta_{mode}"] = betas
    optional: dict[str, float] = {}
    for key in _HARDWARE_OPTIONAL:
        if section.get(key) is not None:
            value = section[key]
            if not _is_number(value):
                raise InstanceError(f"hardware.{key}", f"must be a number, got {_describe(value)}")
            optional[key] = float(value)
    return Hardware(**ints, **floats, **comm, **optional)


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a decoder-only transformer.

    Attributes
    ----------
    layers, hidden_dim, ffn_dim, vocab_size, head_dim
        The usual shape parameters; the number of attention heads is
        ``hidden_dim / head_dim``.
    kv_heads
        Key/value heads (grouped-query attention); defaults to the head count.
    gated_ffn
        Whether the feed-forward block is gated (three matrices, SwiGLU).
    """

    layers: int
    hidden_dim: int
    ffn_dim: int
    vocab_size: int
    head_dim: int = 128
    kv_heads: int | None = None
    gated_ffn: bool = True

    def __post_init__(self) -> None:
        for name in ("layers", "hidden_dim", "ffn_dim", "vocab_size", "head_dim"):
            positive_int(getattr(self, name), name)
        if self.hidden_dim % self.head_dim:
            raise InstanceError(
                "hidden_dim",
                f"{self.hidden_dim} is not divisible by head_dim {self.head_dim}",
            )
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        positive_int(self.kv_heads, "kv_heads")
        if self.heads % self.kv_heads:
            raise InstanceError(
                "kv_heads", f"{self.kv_heads} does not divide the head count {self.heads}"
            )

    @property
    def heads(self) -> int:
        """Attention heads ``hidden_dim / head_dim``."""
        return self.hidden_dim // self.head_dim


_MODEL_KEYS = ("layers", "hidden_dim", "ffn_dim", "vocab_size", "head_dim", "kv_heads", "gated_ffn")


def parse_model(data: Any, path: str) -> ModelSpec:
    """Build a :class:`ModelSpec` from ``models.<role>``."""
    section = mapping(data, path)
    check_keys(section, _MODEL_KEYS, path)
    values: dict[str, Any] = {
        key: positive_int(require(section, key, path), f"{path}.{key}")
        for key in ("layers", "hidden_dim", "ffn_dim", "vocab_size")
    }
    if section.get("head_dim") is not None:
        values["head_dim"] = positive_int(section["head_dim"], f"{path}.head_dim")
    if section.get("kv_heads") is not None:
        values["kv_heads"] = positive_int(section["kv_heads"], f"{path}.kv_heads")
    if section.get("gated_ffn") is not None:
        values["gated_ffn"] = boolean(section["gated_ffn"], f"{path}.gated_ffn")
    try:
        return ModelSpec(**values)
    except InstanceError as exc:
        raise InstanceError(f"{path}.{exc.path}", exc.message) from None


@dataclass(frozen=True)
class Workload:
    """One RL step's data: ``batch_size`` prompts, each sampled ``samples_per_prompt`` times.

    ``gen_quantiles`` is a list of ``(fraction finished, length)`` pairs with
    increasing fractions ending at 1.0 and increasing lengths ending at
    ``generation_length``; ``None`` means every sequence runs to the maximum.
    """

    batch_size: int
    samples_per_prompt: int
    context_length: int
    generation_length: int
    gen_quantiles: tuple[tuple[float, int], ...] | None = None

    def __post_init__(self) -> None:
        for name in ("batch_size", "samples_per_prompt", "context_length", "generation_length"):
            positive_int(getattr(self, name), f"workload.{name}")
        if self.gen_quantiles is not None:
            _check_quantiles(self.gen_quantiles, self.generation_length)

    @property
    def sequences(self) -> int:
        """Sequences per step ``B*K``."""
        return self.batch_size * self.samples_per_prompt

    @property
    def total_length(self) -> int:
        """Prompt plus maximal generation ``S+T``."""
        return self.context_length + self.generation_length

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


_WORKLOAD_KEYS = (
    "batch_size",
    "samples_per_prompt",
    "context_length",
    "generation_length",
    "gen_quantiles",
)


def parse_workload(data: Any) -> Workload:
    """Build :class:`Workload` from the ``workload`` section."""
    section = mapping(data, "workload")
    check_keys(section, _WORKLOAD_KEYS, "workload")
    values: dict[str, Any] = {
        key: positive_int(require(section, key, "workload"), f"workload.{key}")
        for key in _WORKLOAD_KEYS[:4]
    }
    raw = section.get("gen_quantiles")
    if raw is not None:
        path = "workload.gen_quantiles"
        if not isinstance(raw, list) or not raw:
            raise InstanceError(
                path, f"must be a non-empty list of [fraction, length] pairs, got {_describe(raw)}"
            )
        pairs = []
        for index, pair in enumerate(raw):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                raise InstanceError(
                    f"{path}[{index}]", f"must be a [fraction, length] pair, got {_describe(pair)}"
                )
            fraction = unit_fraction(pair[0], f"{path}[{index}][0]", open_low=True, open_high=False)
            length = positive_int(pair[1], f"{path}[{index}][1]")
            pairs.append((fraction, length))
        values["gen_quantiles"] = tuple(pairs)
    return Workload(**values)


@dataclass(frozen=True)
class OptimizerConfig:
    """The ``optimizer`` section: evaluation horizon and local-search knobs.

    Knob meanings follow the specification (section 8); ``t_max``,
    ``lambda_ac`` and ``max_throughput_loss`` are accepted for compatibility
    with the reference optimizer's files and have no effect here.
    """

    k_eval: int
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
    max_throughput_loss: float = 0.0

    def __post_init__(self) -> None:
        positive_int(self.k_eval, "optimizer.k_eval")
        positive_int(self.e_max, "optimizer.e_max")
        positive_int(self.e_struct, "optimizer.e_struct")
        positive_int(self.k_x, "optimizer.k_x")
        positive_int(self.stag_window, "optimizer.stag_window")
        positive_int(self.t_max, "optimizer.t_max")
        for name in ("t_init", "t_warm", "t_min", "score_eps", "lambda_ac", "max_throughput_loss"):
            nonnegative_float(getattr(self, name), f"optimizer.{name}")
        unit_fraction(self.alpha_pair, "optimizer.alpha_pair", open_low=False, open_high=False)
        for model, values in self.staleness_candidates.items():
            if not values:
                raise InstanceError(f"optimizer.staleness_candidates.{model}", "must not be empty")


_OPTIMIZER_INTS = ("e_max", "e_struct", "k_x", "stag_window", "t_max")
_OPTIMIZER_FLOATS = (
    "t_init",
    "t_warm",
    "t_min",
    "alpha_pair",
    "score_eps",
    "lambda_ac",
    "max_throughput_loss",
)
_OPTIMIZER_BOOLS = ("hard_oom", "fixed_mb", "uniform_vertex", "no_polish", "geometric_cooling")
_OPTIMIZER_KEYS = (
    "k_eval",
    "staleness_candidates",
    *_OPTIMIZER_INTS,
    *_OPTIMIZER_FLOATS,
    *_OPTIMIZER_BOOLS,
)


def parse_optimizer(data: Any, algorithm: str) -> OptimizerConfig:
    """Build :class:`OptimizerConfig` from the ``optimizer`` section."""
    section = mapping(data, "optimizer")
    check_keys(section, _OPTIMIZER_KEYS, "optimizer")
    values: dict[str, Any] = {
        "k_eval": positive_int(require(section, "k_eval", "optimizer"), "optimizer.k_eval")
    }
    for key in _OPTIMIZER_INTS:
        if section.get(key) is not None:
            values[key] = positive_int(section[key], f"optimizer.{key}")
    for key in _OPTIMIZER_FLOATS:
        if section.get(key) is not None:
            values[key] = nonnegative_float(section[key], f"optimizer.{key}")
    for key in _OPTIMIZER_BOOLS:
        if section.get(key) is not None:
            values[key] = boolean(section[key], f"optimizer.{key}")
    trained = TRAINED_MODELS[algorithm]
    candidates: dict[str, tuple[int, ...]] = {model: (0, 1) for model in trained}
    raw = section.get("staleness_candidates")
    if raw is not None:
        path = "optimizer.staleness_candidates"
        raw = mapping(raw, path)
        for model, values_raw in raw.items():
            where = f"{path}.{model}"
            if model == "ac_share":
                raise InstanceError(
                    where, "the fused actor-critic variant is not modelled; remove this entry"
                )
            if model not in KNOWN_ROLES:
                raise InstanceError(where, "unknown model (allowed: actor, critic)")
            if model not in trained:
                raise InstanceError(
                    where, f"{algorithm} does not train the {model}; it has no staleness"
                )
            if not isinstance(values_raw, list | tuple) or not values_raw:
                raise InstanceError(
                    where, f"must be a non-empty list of integers >= 0, got {_describe(values_raw)}"
                )
            staleness = sorted(
                {
                    nonnegative_int(value, f"{where}[{index}]")
                    for index, value in enumerate(values_raw)
                }
            )
            candidates[model] = tuple(staleness)
    values["staleness_candidates"] = candidates
    return OptimizerConfig(**values)


@dataclass(frozen=True)
class PlacementConfig:
    """The ``placement`` section: the plan space's knobs."""

    min_block_gpus: int = 1
    microbatches: tuple[int, ...] = (1, 2, 4, 8)

    def __post_init__(self) -> None:
        positive_int(self.min_block_gpus, "placement.min_block_gpus")
        if not _is_power_of_two(self.min_block_gpus):
            raise InstanceError(
                "placement.min_block_gpus", f"must be a power of two, got {self.min_block_gpus}"
            )
        if not self.microbatches:
            raise InstanceError("placement.microbatches", "must not be empty")
        for index, value in enumerate(self.microbatches):
            positive_int(value, f"placement.microbatches[{index}]")


def parse_placement(data: Any) -> PlacementConfig:
    """Build :class:`PlacementConfig` from the optional ``placement`` section."""
    if data is None:
        return PlacementConfig()
    section = mapping(data, "placement")
    check_keys(section, ("min_block_gpus", "microbatches"), "placement")
    values: dict[str, Any] = {}
    if section.get("min_block_gpus") is not None:
        values["min_block_gpus"] = positive_int(
            section["min_block_gpus"], "placement.min_block_gpus"
        )
    if section.get("microbatches") is not None:
        raw = section["microbatches"]
        if not isinstance(raw, list) or not raw:
            raise InstanceError(
                "placement.microbatches",
                f"must be a non-empty list of positive integers, got {_describe(raw)}",
            )
        values["microbatches"] = tuple(
            sorted(
                {positive_int(value, f"placement.microbatches[{i}]") for i, value in enumerate(raw)}
            )
        )
    return PlacementConfig(**values)


@dataclass(frozen=True)
class SolverConfig:
    """The ``solver`` section: defaults of ``main.py solve`` (flags override them)."""

    backend: str = "auto"
    time_limit: float = 60.0
    threads: int = 2
    seed: int = 0
    gap: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not self.backend:
            raise InstanceError(
                "solver.backend", f"must be a solver name, got {_describe(self.backend)}"
            )
        positive_float(self.time_limit, "solver.time_limit")
        positive_int(self.threads, "solver.threads")
        nonnegative_int(self.seed, "solver.seed")
        nonnegative_float(self.gap, "solver.gap")


def parse_solver(data: Any) -> SolverConfig:
    """Build :class:`SolverConfig` from the optional ``solver`` section."""
    if data is None:
        return SolverConfig()
    section = mapping(data, "solver")
    check_keys(section, ("backend", "time_limit", "threads", "seed", "gap"), "solver")
    values: dict[str, Any] = {}
    if section.get("backend") is not None:
        if not isinstance(section["backend"], str):
            raise InstanceError(
                "solver.backend", f"must be a solver name, got {_describe(section['backend'])}"
            )
        values["backend"] = section["backend"]
    if section.get("time_limit") is not None:
        values["time_limit"] = positive_float(section["time_limit"], "solver.time_limit")
    if section.get("threads") is not None:
        values["threads"] = positive_int(section["threads"], "solver.threads")
    if section.get("seed") is not None:
        values["seed"] = nonnegative_int(section["seed"], "solver.seed")
    if section.get("gap") is not None:
        values["gap"] = nonnegative_float(section["gap"], "solver.gap")
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
        architecture) and, as the algorithm needs, ``reward`` and ``critic``.
    warnings
        One-line notes about accepted but ignored input.
    """

    name: str
    hardware: Hardware
    models: dict[str, ModelSpec]
    workload: Workload
    algorithm: str
    optimizer: OptimizerConfig
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise InstanceError(
                "policy.algorithm",
                f"unknown algorithm {self.algorithm!r} (allowed: {', '.join(ALGORITHMS)})",
            )
        for role in (*REQUIRED_ROLES[self.algorithm], "reference"):
            if role not in self.models:
                raise InstanceError(f"models.{role}", f"missing: {self.algorithm} needs this model")

    @property
    def k_eval(self) -> int:
        """Steps unrolled when a plan is evaluated."""
        return self.optimizer.k_eval

    @property
    def trained_models(self) -> tuple[str, ...]:
        """Models the algorithm trains."""
        return TRAINED_MODELS[self.algorithm]


_SECTIONS = ("hardware", "models", "workload", "policy", "optimizer", "placement", "solver")


def parse_instance(data: Any, name: str = "instance") -> Instance:
    """Validate a parsed YAML document and build the :class:`Instance`.

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
            warnings.append(f"warning: unknown section {key!r} ignored")
    for section in ("hardware", "models", "workload", "optimizer"):
        require(data, section, "")
    algorithm = "ppo"
    if data.get("policy") is not None:
        policy = mapping(data["policy"], "policy")
        check_keys(policy, ("algorithm",), "policy")
        if policy.get("algorithm") is not None:
            algorithm = policy["algorithm"]
            if algorithm not in ALGORITHMS:
                raise InstanceError(
                    "policy.algorithm",
                    f"unknown algorithm {_describe(algorithm)} (allowed: {', '.join(ALGORITHMS)})",
                )
    hardware = parse_hardware(data["hardware"])
    models_section = mapping(data["models"], "models")
    check_keys(models_section, KNOWN_ROLES, "models")
    models: dict[str, ModelSpec] = {}
    for role in REQUIRED_ROLES[algorithm]:
        models[role] = parse_model(require(models_section, role, "models"), f"models.{role}")
    for role in models_section:
        if role not in models:
            parse_model(models_section[role], f"models.{role}")
            warnings.append(f"warning: models.{role} is not used by {algorithm}; ignored")
    models["reference"] = models["actor"]
    workload = parse_workload(data["workload"])
    optimizer = parse_optimizer(data["optimizer"], algorithm)
    placement = parse_placement(data.get("placement"))
    solver = parse_solver(data.get("solver"))
    return Instance(
        name=name,
        hardware=hardware,
        models=models,
        workload=workload,
        algorithm=algorithm,
        optimizer=optimizer,
        placement=placement,
        solver=solver,
        warnings=tuple(warnings),
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
    return parse_instance(data, name=stem)
