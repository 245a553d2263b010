"""Instance schema: hardware, models, workload, policy and the optional sections.

The schema accepts the research optimizer's configuration files unchanged
(sections ``hardware``, ``models``, ``workload``, ``policy``, ``optimizer``)
and adds the optional sections ``placement`` and ``solver``. Every dataclass
validates itself on construction; :func:`parse_instance` builds them from a
mapping and names the field path of the first problem it meets.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlplan.rpeg.errors import InstanceError, did_you_mean
from rlplan.rpeg.schema.limits import (
    MAX_QUANTILES,
    check_cluster_size,
    check_list_size,
    check_range,
)
from rlplan.rpeg.schema.pins import Pins, narrowed_staleness, parse_pins
from rlplan.rpeg.schema.presets import expand_hardware, expand_model
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.strategy import (
    DEFAULT_MICRO_BATCH_SIZES,
    DIMENSIONS,
    Dimension,
    add_dimension_fields,
)
from rlplan.rpeg.templates import AC_MODEL, FUSED, SEPARATE

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
#: ``optimizer.staleness_candidates`` key that enables the AC-share template.
AC_SHARE_KEY = "ac_share"
LEVELS = ("g", "n", "r")

# ----------------------------------------------------------------------------
# v2 defaults (DESIGN.md section 10); each names its public source.
# ----------------------------------------------------------------------------

#: Ceiling of GEMM efficiency: the largest fraction of the datasheet's dense
#: BF16 peak a large GEMM reaches. Source: S. Bekman, *Machine Learning
#: Engineering*, "Maximum Achievable Matmul FLOPS" table
#: (github.com/stas00/ml-engineering, compute/accelerator/README.md): H100 SXM
#: 794.5 of 989 TFLOP/s (80.3 %), A100 SXM 271.2 of 312 (86.9 %); 0.8 is the
#: H100 figure rounded.
DEFAULT_GEMM_EFFICIENCY = 0.8
#: Host-to-GPU bandwidth per GPU for offloaded states: PCIe 4.0 x16, 32 GB/s
#: raw per direction, about 25 GB/s achieved (PCI-SIG PCIe 4.0 specification;
#: the figure the DeepSpeed ZeRO-Offload paper, Ren et al. 2021, uses).
DEFAULT_HOST_BANDWIDTH = 25e9
#: Fixed cost of one rollout-engine decode step (scheduling, sampling,
#: detokenisation) and the fraction of HBM bandwidth a decode step reaches.
#: Source: vLLM 0.6.0, Llama-3.1-8B-Instruct on 1 x A100-80G, ShareGPT at 4
#: requests/s: median TPOT 14.14 ms (sgl-project/sglang
#: benchmark/benchmark_vllm_060/README.md). About 7 sequences are in flight,
#: so a step reads 16.1 GB of weights + about 0.3 GB of KV cache; at an
#: achievable 80 % of the 2.039 TB/s HBM (a typical fraction for streaming
#: kernels) that takes 10.0 ms, leaving 4.1 ms of fixed cost per step.
DEFAULT_DECODE_STEP_OVERHEAD = 4e-3
DEFAULT_DECODE_BW_EFF = 0.8
#: Time of non-GEMM kernels (attention, norms, activations, rotary, casts,
#: cross-entropy) per second of GEMM time in train and infer passes and
#: prefill. Source: Megatron-LM (NVIDIA/Megatron-LM README) reaches up to
#: 47 % MFU end to end on H100, while its GEMMs run at the 80 % of
#: ``DEFAULT_GEMM_EFFICIENCY``: 0.80 / 0.47 - 1 = 0.70.
DEFAULT_NON_GEMM_RATIO = 0.7
#: Extra seconds per decode step and model layer when the rollout engine runs
#: without CUDA graphs (``engine.cuda_graphs: false``, vLLM ``enforce_eager``):
#: kernel launches from Python. Source: Qwen2.5-Omni-7B thinker (a 28-layer
#: Qwen2.5-7B) on A800, TPOT about 22.5 ms eager against 13 ms with CUDA graphs
#: (vllm-project/vllm-omni issue 7960, 2026-09-22): 9.5 ms / 28 layers.
DEFAULT_EAGER_LAYER_OVERHEAD = 3.4e-4
#: Rollout workspace (CUDA graphs, activations, sampler) per GPU, bytes
#: (DESIGN.md section 10; vLLM's profile run reserves about this much for an
#: 8B model beside weights and KV cache).
DEFAULT_ROLLOUT_WORKSPACE = 2e9


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
    """Return ``value`` as an int > 0 (integral floats such as ``1e3`` allowed).

    Like every reader below, it also refuses a value outside the field's
    plausible range (:data:`rlplan.rpeg.schema.limits.LIMITS`).
    """
    if _is_number(value) and float(value).is_integer() and value > 0:
        check_range(value, path)
        return int(value)
    raise InstanceError(path, f"must be a positive integer, got {_describe(value)}")


def nonnegative_int(value: Any, path: str) -> int:
    """Return ``value`` as an int >= 0."""
    if _is_number(value) and float(value).is_integer() and value >= 0:
        check_range(value, path)
        return int(value)
    raise InstanceError(path, f"must be a non-negative integer, got {_describe(value)}")


def positive_float(value: Any, path: str, *, limits: bool = True) -> float:
    """Return ``value`` as a finite float > 0 (``limits``: within the field's range)."""
    if _is_number(value) and value > 0:
        if limits:
            check_range(value, path)
        return float(value)
    raise InstanceError(path, f"must be a positive number, got {_describe(value)}")


def nonnegative_float(value: Any, path: str) -> float:
    """Return ``value`` as a finite float >= 0."""
    if _is_number(value) and value >= 0:
        check_range(value, path)
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
    """Reject keys outside ``allowed``: typos must not pass silently.

    Raises
    ------
    InstanceError
        Naming the first unknown key, the closest allowed key when one is
        close (``did you mean ...?``) and every allowed key.
    """
    for key in data:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise InstanceError(
                where,
                f"unknown key{did_you_mean(key, allowed)} (allowed: {', '.join(allowed)})",
            )


def require(data: Mapping[str, Any], key: str, path: str) -> Any:
    """Return ``data[key]`` or raise naming the missing field."""
    if key not in data or data[key] is None:
        where = f"{path}.{key}" if path else key
        raise InstanceError(where, "missing required field")
    return data[key]


def _bandwidth_to_inverse(value: Any, path: str) -> float:
    """Normalise a ``beta_*`` value: >= 1 is bytes/s, < 1 is s/byte."""
    number = positive_float(value, path, limits=False)
    if number >= 1.0:
        check_range(number, path)
    else:
        check_range(1.0 / number, path, f"{number:.4g} s/byte ({1.0 / number:.4g} bytes/s)")
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
    decode_bw_eff: float = DEFAULT_DECODE_BW_EFF
    non_gemm_constant: float = 0.0
    non_gemm_scaling: float = 0.0
    non_gemm_batch_cal: float = 64.0
    memory_reserve: float = 0.0
    gemm_efficiency: float = DEFAULT_GEMM_EFFICIENCY
    host_bandwidth: float = DEFAULT_HOST_BANDWIDTH
    decode_step_overhead: float = DEFAULT_DECODE_STEP_OVERHEAD
    non_gemm_ratio: float = DEFAULT_NON_GEMM_RATIO
    eager_layer_overhead: float = DEFAULT_EAGER_LAYER_OVERHEAD

    def __post_init__(self) -> None:
        positive_int(self.racks, "hardware.racks")
        positive_int(self.nodes_per_rack, "hardware.nodes_per_rack")
        positive_int(self.gpus_per_node, "hardware.gpus_per_node")
        check_cluster_size(self.racks, self.nodes_per_rack, self.gpus_per_node)
        positive_float(self.flops_per_gpu, "hardware.flops_per_gpu")
        positive_float(self.memory_per_gpu, "hardware.memory_per_gpu")
        positive_float(self.memory_bandwidth, "hardware.memory_bandwidth")
        for name in ("alpha_coll", "alpha_p2p"):
            for level in LEVELS:
                nonnegative_float(getattr(self, name)[level], f"hardware.{name}_{level}")
        for name in ("beta_coll", "beta_p2p"):
            for level in LEVELS:
                inverse = positive_float(
                    getattr(self, name)[level], f"hardware.{name}_{level}", limits=False
                )
                check_range(1.0 / inverse, f"hardware.{name}_{level}")
        nonnegative_float(self.gemm_m_half, "hardware.gemm_m_half")
        nonnegative_float(self.gemm_k_half, "hardware.gemm_k_half")
        unit_fraction(self.decode_bw_eff, "hardware.decode_bw_eff", open_low=True, open_high=False)
        nonnegative_float(self.non_gemm_constant, "hardware.non_gemm_constant")
        nonnegative_float(self.non_gemm_scaling, "hardware.non_gemm_scaling")
        positive_float(self.non_gemm_batch_cal, "hardware.non_gemm_batch_cal")
        unit_fraction(
            self.memory_reserve, "hardware.memory_reserve", open_low=False, open_high=True
        )
        unit_fraction(
            self.gemm_efficiency, "hardware.gemm_efficiency", open_low=True, open_high=False
        )
        positive_float(self.host_bandwidth, "hardware.host_bandwidth")
        nonnegative_float(self.decode_step_overhead, "hardware.decode_step_overhead")
        nonnegative_float(self.non_gemm_ratio, "hardware.non_gemm_ratio")
        nonnegative_float(self.eager_layer_overhead, "hardware.eager_layer_overhead")

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
    "gemm_efficiency",
    "host_bandwidth",
    "decode_step_overhead",
    "non_gemm_ratio",
    "eager_layer_overhead",
)


def parse_hardware(data: Any) -> Hardware:
    """Build :class:`Hardware` from the ``hardware`` section.

    A ``preset`` key names a GPU of :data:`rlplan.rpeg.schema.presets.GPU_PRESETS` whose
    figures fill the fields the section does not give.
    """
    section = mapping(data, "hardware")
    check_keys(
        section, ("preset", *_HARDWARE_REQUIRED, *_HARDWARE_COMM, *_HARDWARE_OPTIONAL), "hardware"
    )
    section = expand_hardware(section)
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
        The usual shape parameters.
    kv_heads
        Key/value heads (grouped-query attention); defaults to the head count.
    gated_ffn
        Whether the feed-forward block is gated (three matrices, SwiGLU).
    attention_heads
        Query heads when the query width ``attention_heads * head_dim``
        differs from ``hidden_dim`` (Qwen3: 64 heads of 128 on a hidden size
        of 5120); None (the default) means ``hidden_dim / head_dim``. A value
        equal to that is stored as None, so both spellings are one model.
    tied_embeddings
        Whether the language-model head shares the input embedding's
        weights (Hugging Face ``tie_word_embeddings``): such a model stores
        ``V*d`` parameters fewer.
    """

    layers: int
    hidden_dim: int
    ffn_dim: int
    vocab_size: int
    head_dim: int = 128
    kv_heads: int | None = None
    gated_ffn: bool = True
    attention_heads: int | None = None
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("layers", "hidden_dim", "ffn_dim", "vocab_size", "head_dim"):
            positive_int(getattr(self, name), name)
        if self.attention_heads is not None:
            positive_int(self.attention_heads, "attention_heads")
            if self.attention_heads * self.head_dim == self.hidden_dim:
                object.__setattr__(self, "attention_heads", None)
        if self.attention_heads is None and self.hidden_dim % self.head_dim:
            raise InstanceError(
                "hidden_dim",
                f"{self.hidden_dim} is not divisible by head_dim {self.head_dim} "
                "(give attention_heads when the query width differs from hidden_dim)",
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
        """Attention (query) heads: ``attention_heads``, else ``hidden_dim / head_dim``."""
        if self.attention_heads is not None:
            return self.attention_heads
        return self.hidden_dim // self.head_dim

    @property
    def q_width(self) -> int:
        """Width of the query and attention output ``heads * head_dim`` (``hidden_dim`` mostly)."""
        return self.heads * self.head_dim


_MODEL_KEYS = (
    "layers",
    "hidden_dim",
    "ffn_dim",
    "vocab_size",
    "head_dim",
    "kv_heads",
    "gated_ffn",
    "attention_heads",
    "tied_embeddings",
)


def parse_model(data: Any, path: str, base_dir: str | os.PathLike[str] | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from ``models.<role>``.

    Parameters
    ----------
    data
        The mapping as written: shape fields, or a ``preset`` name of
        :data:`rlplan.rpeg.schema.presets.MODEL_PRESETS` or an ``hf_config`` path, which
        the other fields override.
    path
        Its field path (``models.actor``).
    base_dir
        Folder a relative ``hf_config`` path is relative to (the instance
        file's); None for the current folder.
    """
    section = mapping(data, path)
    check_keys(section, ("preset", "hf_config", *_MODEL_KEYS), path)
    section = expand_model(section, path, base_dir)
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
    if section.get("attention_heads") is not None:
        values["attention_heads"] = positive_int(
            section["attention_heads"], f"{path}.attention_heads"
        )
    if section.get("tied_embeddings") is not None:
        values["tied_embeddings"] = boolean(section["tied_embeddings"], f"{path}.tied_embeddings")
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
        check_list_size(raw, path, MAX_QUANTILES)
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
            check_list_size(values, f"optimizer.staleness_candidates.{model}")
            for index, value in enumerate(values):
                nonnegative_int(value, f"optimizer.staleness_candidates.{model}[{index}]")


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
                    where, f"must be a non-empty list of integers >= 0, got {_describe(values_raw)}"
                )
            check_list_size(values_raw, where)
            staleness = sorted(
                {
                    nonnegative_int(value, f"{where}[{index}]")
                    for index, value in enumerate(values_raw)
                }
            )
            candidates[AC_MODEL if model == AC_SHARE_KEY else model] = tuple(staleness)
    values["staleness_candidates"] = candidates
    return OptimizerConfig(**values)


def _candidate_list_field(declared: Dimension) -> tuple[str, Any]:
    """The ``placement`` attribute of a dimension: its candidates, by default the declared ones."""
    return (f"tuple[{declared.values.__name__}, ...]", declared.candidates)


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
    recompute, sharding, offload, concurrency
        One candidate list per dimension of :data:`rlplan.rpeg.strategy.DIMENSIONS`
        (``placement.<name>``): activation recompute (``none``, ``full``) and
        state sharding (``zero1``, ``zero3``) of train vertices, offload
        (``false``, ``true``) of train and infer vertices, rollout concurrency
        (max_num_seqs) of generate vertices.
    pin
        What-if pins (``placement.pin``, :mod:`rlplan.rpeg.schema.pins`): fields of some
        vertices' placements and staleness fixed by the user.
    """

    min_block_gpus: int = 1
    microbatches: tuple[int, ...] | None = None
    micro_batch_sizes: tuple[int, ...] | None = DEFAULT_MICRO_BATCH_SIZES
    pin: Pins = field(default_factory=Pins)

    def __post_init__(self) -> None:
        positive_int(self.min_block_gpus, "placement.min_block_gpus")
        if not _is_power_of_two(self.min_block_gpus):
            raise InstanceError(
                "placement.min_block_gpus", f"must be a power of two, got {self.min_block_gpus}"
            )
        if (self.microbatches is None) == (self.micro_batch_sizes is None):
            raise InstanceError(
                "placement.microbatches",
                "give exactly one of placement.microbatches and placement.micro_batch_sizes",
            )
        counts = ["microbatches", "micro_batch_sizes"]
        counts += [declared.name for declared in DIMENSIONS if declared.values is int]
        for name in counts:
            values = getattr(self, name)
            if values is None:
                continue
            if not values:
                raise InstanceError(f"placement.{name}", "must not be empty")
            check_list_size(values, f"placement.{name}")
            for index, value in enumerate(values):
                positive_int(value, f"placement.{name}[{index}]")
        for declared in DIMENSIONS:
            if declared.values is int:
                continue
            values = getattr(self, declared.name)
            if not values:
                raise InstanceError(declared.placement_key, "must not be empty")
            if declared.values is bool:
                continue
            for index, value in enumerate(values):
                if value not in declared.choices:
                    raise InstanceError(
                        f"{declared.placement_key}[{index}]",
                        f"must be one of {declared.choice_words()}, got {_describe(value)}",
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


_PLACEMENT_KEYS = (
    "min_block_gpus",
    "microbatches",
    "micro_batch_sizes",
    *(declared.name for declared in DIMENSIONS),
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
        raw = section.get(declared.name)
        if raw is None:
            continue
        if declared.values is int:
            values[declared.name] = _int_list(raw, declared.placement_key)
        else:
            values[declared.name] = _choice_list(raw, declared.placement_key, declared.choices)
    return PlacementConfig(**values)


@dataclass(frozen=True)
class EngineConfig:
    """The ``engine`` section: facts about the RL framework (DESIGN.md section 10).

    Attributes
    ----------
    flash_attention
        Attention scores are never materialised (default in verl, OpenRLHF
        and NeMo RL: their configs enable flash attention by default).
    sequence_packing
        Train and infer work on real tokens (verl ``use_remove_padding``, NeMo
        RL ``sequence_packing``); without it every sequence is padded to S+T.
    recompute_logprobs
        Old log-probs are recomputed by an ``actor.infer`` vertex (verl's
        ``compute_log_prob``, NeMo RL's ``get_logprobs``, OpenRLHF's
        ``make_experience``).
    rollout_workspace
        Bytes per GPU the rollout engine needs beside weights and KV pool.
    reference_model
        Whether a frozen reference model scores the samples (a KL term).
        KL-free recipes (DAPO, Dr. GRPO; verl with ``use_kl_loss`` and
        ``use_kl_in_reward`` false) drop ``reference.infer``; online DPO
        always needs it.
    cuda_graphs
        The rollout engine replays decode steps as CUDA graphs (vLLM's
        default); ``false`` is vLLM's ``enforce_eager`` (verl's rollout
        default until 2025), which adds ``hardware.eager_layer_overhead`` per
        layer to every decode step.
    """

    flash_attention: bool = True
    sequence_packing: bool = True
    recompute_logprobs: bool = True
    rollout_workspace: float = DEFAULT_ROLLOUT_WORKSPACE
    reference_model: bool = True
    cuda_graphs: bool = True

    def __post_init__(self) -> None:
        for name in (
            "flash_attention",
            "sequence_packing",
            "recompute_logprobs",
            "reference_model",
            "cuda_graphs",
        ):
            boolean(getattr(self, name), f"engine.{name}")
        nonnegative_float(self.rollout_workspace, "engine.rollout_workspace")


def parse_engine(data: Any) -> EngineConfig:
    """Build :class:`EngineConfig` from the optional ``engine`` section."""
    if data is None:
        return EngineConfig()
    section = mapping(data, "engine")
    keys = (
        "flash_attention",
        "sequence_packing",
        "recompute_logprobs",
        "reference_model",
        "cuda_graphs",
        "rollout_workspace",
    )
    check_keys(section, keys, "engine")
    values: dict[str, Any] = {}
    for key in keys[:5]:
        if section.get(key) is not None:
            values[key] = boolean(section[key], f"engine.{key}")
    if section.get("rollout_workspace") is not None:
        values["rollout_workspace"] = nonnegative_float(
            section["rollout_workspace"], "engine.rollout_workspace"
        )
    return EngineConfig(**values)


@dataclass(frozen=True)
class ReferenceRun:
    """The ``reference`` section: a measured run the realism check compares with.

    Attributes
    ----------
    step_time_s
        Measured seconds per RL step.
    phases
        Measured phase times: name -> (seconds, vertex names the phase covers).
    source, framework, settings
        Citation, framework and its settings in words.
    """

    step_time_s: float
    source: str
    phases: tuple[tuple[str, float, tuple[str, ...]], ...] = ()
    framework: str = ""
    settings: str = ""


def parse_reference(data: Any) -> ReferenceRun | None:
    """Build :class:`ReferenceRun` from the optional ``reference`` section."""
    if data is None:
        return None
    section = mapping(data, "reference")
    check_keys(section, ("step_time_s", "phases", "source", "framework", "settings"), "reference")
    step = positive_float(require(section, "step_time_s", "reference"), "reference.step_time_s")
    texts = {}
    for key in ("source", "framework", "settings"):
        value = section.get(key, "")
        if not isinstance(value, str):
            raise InstanceError(f"reference.{key}", f"must be text, got {_describe(value)}")
        texts[key] = value.strip()
    if not texts["source"]:
        raise InstanceError("reference.source", "missing required field")
    phases = []
    raw = section.get("phases")
    if raw is not None:
        for name, entry in mapping(raw, "reference.phases").items():
            path = f"reference.phases.{name}"
            entry = mapping(entry, path)
            check_keys(entry, ("measured_s", "vertices"), path)
            seconds = positive_float(require(entry, "measured_s", path), f"{path}.measured_s")
            vertices = require(entry, "vertices", path)
            if (
                not isinstance(vertices, list)
                or not vertices
                or not all(isinstance(v, str) for v in vertices)
            ):
                raise InstanceError(
                    f"{path}.vertices", f"must be a list of vertex names, got {_describe(vertices)}"
                )
            phases.append((name, seconds, tuple(vertices)))
    return ReferenceRun(step, texts["source"], tuple(phases), texts["framework"], texts["settings"])


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
    template
        The template this instance's plan space is restricted to
        (:data:`~rlplan.rpeg.templates.SEPARATE` or
        :data:`~rlplan.rpeg.templates.FUSED`),
        or None for every template the instance allows (see
        :attr:`templates`). Solvers that decide the template build the
        restricted variants with :meth:`restricted`; plan files record the
        template, so the fingerprint leaves this field out.
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
            if role not in self.models:
                raise InstanceError(f"models.{role}", f"missing: {self.algorithm} needs this model")
        if self.algorithm == "dpo" and not self.engine.reference_model:
            raise InstanceError(
                "engine.reference_model", "online DPO needs the reference model (its loss uses it)"
            )

    @property
    def k_eval(self) -> int:
        """Steps unrolled when a plan is evaluated."""
        return self.optimizer.k_eval

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
        """The templates of the plan space: (separate,), (ac_share,) or both."""
        if self.template is not None:
            return (self.template,)
        return (SEPARATE, FUSED) if self.ac_share else (SEPARATE,)

    @property
    def fused(self) -> bool:
        """Whether this instance's candidate directory holds the fused template."""
        return self.template == FUSED

    @property
    def lambda_ac(self) -> float:
        """Relative penalty of the fused template (``optimizer.lambda_ac``)."""
        return self.optimizer.lambda_ac

    def score_factor(self, fused: bool) -> float:
        """What the objective multiplies a step time by: 1 + lambda_ac when fused, else 1."""
        return 1.0 + self.optimizer.lambda_ac if fused else 1.0

    def restricted(self, template: str | None) -> Instance:
        """This instance with its plan space restricted to one template (None: all)."""
        if template == self.template:
            return self
        return dataclasses.replace(self, template=template)


def _canonical(value: Any) -> Any:
    """``value`` as JSON-ready data with integral floats as ints (``8e10`` == ``80000000000``)."""
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def instance_fingerprint(instance: Instance) -> str:
    """A stable hash of what a plan depends on; plan files record it (DESIGN.md section 9).

    Covers the parsed hardware, models, workload, algorithm, ``k_eval``,
    staleness candidates, engine and placement sections: what the simulator
    evaluates a plan with and the plan space it was chosen from. Leaves out
    the name, the solver section, the local-search knobs and the reference
    run, and, being computed from the parsed instance, comments, layout,
    key order and how a number is spelt.

    Parameters
    ----------
    instance
        A parsed instance.

    Returns
    -------
    str
        ``"sha256:"`` and the first 16 hex digits of the SHA-256 of the
        canonical JSON of that content.
    """
    content = {
        "hardware": dataclasses.asdict(instance.hardware),
        "models": {role: dataclasses.asdict(spec) for role, spec in instance.models.items()},
        "workload": dataclasses.asdict(instance.workload),
        "algorithm": instance.algorithm,
        "k_eval": instance.k_eval,
        "staleness_candidates": instance.optimizer.staleness_candidates,
        "engine": dataclasses.asdict(instance.engine),
        "placement": dataclasses.asdict(instance.placement),
    }
    text = json.dumps(_canonical(content), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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
        models[role] = parse_model(
            require(models_section, role, "models"), f"models.{role}", base_dir
        )
    for role in models_section:
        if role not in models:
            parse_model(models_section[role], f"models.{role}", base_dir)
            warnings.append(f"warning: models.{role} is not used by {algorithm}; ignored")
    models["reference"] = models["actor"]
    workload = parse_workload(data["workload"])
    optimizer = parse_optimizer(data["optimizer"], algorithm)
    if AC_MODEL in optimizer.staleness_candidates:
        # The fused actor-critic: the actor's architecture plus a scalar head
        # (rpeg.cost.head_parameters counts the extra d parameters).
        models[AC_MODEL] = models["actor"]
    placement = parse_placement(data.get("placement"))
    solver = parse_solver(data.get("solver"))
    engine = parse_engine(data.get("engine"))
    if data.get("placement") is not None:
        pins = parse_pins(
            data["placement"].get("pin"), algorithm, engine, hardware, placement, optimizer
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
