"""Framework-default baselines: the plan each framework's documented defaults give.

One function per framework builds, in that framework's plan space (a
directory built with ``engine.framework``), the plan its default config and
rules of thumb describe: where the rollout runs (on the trainer's GPUs or on
its own), and the strategy fields its defaults fix. The rule shared by all
four (:func:`default_plan`):

* placement: colocated puts every vertex on the whole cluster (on a cluster of
  GPU pools the whole of the first pool every vertex may use), except the
  vertices the framework runs apart (NeMo RL's reward model), which take a
  block of their own sized as below against the others'; separate puts
  the rollout and the other vertices on disjoint blocks sized as the split
  baseline sizes them (:mod:`rlplan.rpeg.search.split`, in the framework's
  order of the two, the best simulated of those splits kept); staleness 0
  (each framework's default is synchronous);
* per vertex, among its candidates on its block, the one matching the most of
  the framework's defaults for its kind, the fastest of those (a default the
  instance's candidate lists leave out, or that the candidate directory
  drops as no faster and no leaner than another candidate, matches nothing);
* the plan is conformed to the framework's rules and repaired for memory
  (:func:`~rlplan.rpeg.search.baselines.repair_memory`: what a user does on an
  out-of-memory error); ``None`` when it still does not fit.

Each default names the file and commit it is read from (the repositories'
git mirrors; the exporters, :mod:`rlplan.outputs.frameworks`, cite the same
keys).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.candidates import Candidate, CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.search.baselines import repair_memory
from rlplan.rpeg.search.split import generation_share, sides, split_blocks
from rlplan.rpeg.strategy import Recompute, Sharding
from rlplan.rpeg.templates import Kind

VERL = "volcengine/verl b178a3cd"
NEMO_RL = "NVIDIA-NeMo/RL v0.7.0 (81aa43dd)"
OPENRLHF = "OpenRLHF/OpenRLHF v0.11.0 (3c3be623) openrlhf/cli/train_ppo_ray.py"
SLIME = "THUDM/slime 624b824a"


@dataclass(frozen=True)
class Default:
    """One documented default: a strategy field's value for vertices of some kinds."""

    field: str
    value: Any
    kinds: frozenset[Kind]
    source: str


@dataclass(frozen=True)
class FrameworkDefaults:
    """A framework's default placement and strategy fields.

    Attributes
    ----------
    colocated
        Whether the rollout shares the trainer's GPUs (else disjoint blocks).
    generation_last
        Under a separate placement, whether the rollout takes the GPUs after the trainer's.
    defaults
        The strategy fields the framework's defaults fix.
    placement_source
        Where the placement default is read from.
    apart
        Vertices a colocated framework runs on GPUs of their own (a block
        sized against the others' by work, as the split baseline sizes).
    """

    colocated: bool
    generation_last: bool
    defaults: tuple[Default, ...]
    placement_source: str
    apart: tuple[str, ...] = ()


_TRAIN = frozenset({Kind.TRAIN})
_GENERATE = frozenset({Kind.GENERATE})
_MODELS = frozenset({Kind.TRAIN, Kind.INFER})

VERL_DEFAULTS = FrameworkDefaults(
    colocated=True,
    generation_last=False,
    placement_source=f"{VERL} verl/trainer/config/ppo_trainer.yaml actor_rollout_ref."
    "hybrid_engine: true",
    defaults=(
        Default(
            "sharding",
            Sharding.ZERO3,
            _TRAIN,
            f"{VERL} verl/trainer/config/engine/fsdp.yaml strategy: fsdp",
        ),
        Default(
            "offload",
            False,
            _MODELS,
            f"{VERL} verl/trainer/config/engine/fsdp.yaml "
            "param_offload: false, optimizer_offload: false",
        ),
        Default(
            "recompute",
            Recompute.FULL,
            _TRAIN,
            f"{VERL} verl/trainer/config/model/hf_model.yaml enable_gradient_checkpointing: True",
        ),
        Default(
            "tp",
            2,
            _GENERATE,
            f"{VERL} verl/trainer/config/rollout/rollout.yaml tensor_model_parallel_size: 2",
        ),
        Default(
            "gpu_memory_utilization",
            0.5,
            _GENERATE,
            f"{VERL} verl/trainer/config/rollout/rollout.yaml gpu_memory_utilization: 0.5",
        ),
        Default(
            "max_num_seqs",
            256,
            _GENERATE,
            f"{VERL} verl/trainer/config/rollout/rollout.yaml max_num_seqs: 256",
        ),
    ),
)

NEMO_RL_DEFAULTS = FrameworkDefaults(
    colocated=True,
    generation_last=False,
    placement_source=f"{NEMO_RL} examples/configs/grpo_math_1B.yaml policy.generation."
    "colocated.enabled: true; a reward model on GPUs of its own (examples/configs/"
    "grpo_rm_1B.yaml env.reward_model.resources)",
    apart=("reward.infer",),
    defaults=(
        Default(
            "sharding",
            Sharding.ZERO3,
            _TRAIN,
            f"{NEMO_RL} examples/configs/"
            "grpo_math_1B.yaml policy.dtensor_cfg.enabled: true (FSDP2)",
        ),
        Default(
            "tp",
            1,
            _MODELS,
            f"{NEMO_RL} examples/configs/grpo_math_1B.yaml "
            "policy.dtensor_cfg.tensor_parallel_size: 1",
        ),
        Default(
            "recompute",
            Recompute.NONE,
            _TRAIN,
            f"{NEMO_RL} examples/configs/"
            "grpo_math_1B.yaml policy.dtensor_cfg.activation_checkpointing: false",
        ),
        Default(
            "tp",
            1,
            _GENERATE,
            f"{NEMO_RL} examples/configs/grpo_math_1B.yaml "
            "policy.generation.vllm_cfg.tensor_parallel_size: 1",
        ),
        Default(
            "gpu_memory_utilization",
            0.6,
            _GENERATE,
            f"{NEMO_RL} examples/configs/"
            "grpo_math_1B.yaml policy.generation.vllm_cfg.gpu_memory_utilization: 0.6",
        ),
    ),
)

OPENRLHF_DEFAULTS = FrameworkDefaults(
    colocated=False,
    generation_last=False,
    placement_source=f"{OPENRLHF} --train.colocate_all default False (vLLM engines on "
    "GPUs of their own)",
    defaults=(
        # ZeRO-2 shards gradients and optimizer states, not the weights: of the plan
        # space's two shardings, zero1 (weights whole on every rank) is the nearer.
        Default("sharding", Sharding.ZERO1, _TRAIN, f"{OPENRLHF} --ds.zero_stage default 2"),
        Default(
            "recompute",
            Recompute.NONE,
            _TRAIN,
            f"{OPENRLHF} --actor.gradient_checkpointing_enable default False",
        ),
        Default("offload", False, _MODELS, f"{OPENRLHF} --ds.adam_offload default False"),
        Default("tp", 1, _GENERATE, f"{OPENRLHF} --vllm.tensor_parallel_size default 1"),
        Default(
            "gpu_memory_utilization",
            0.95,
            _GENERATE,
            f"{OPENRLHF} --vllm.gpu_memory_utilization default 0.95",
        ),
    ),
)

SLIME_DEFAULTS = FrameworkDefaults(
    colocated=False,
    generation_last=True,
    placement_source=f"{SLIME} slime/utils/arguments.py --colocate default False "
    "(slime/ray/placement_group.py: the rollout's GPUs after the actor's)",
    defaults=(
        Default(
            "sharding",
            Sharding.ZERO1,
            _TRAIN,
            f"{SLIME} (Megatron's distributed "
            "optimizer, always on: rlplan/rpeg/model/frameworks/slime.py)",
        ),
        Default(
            "tp",
            1,
            _GENERATE,
            f"{SLIME} slime/utils/arguments.py --rollout-num-gpus-per-engine default 1",
        ),
    ),
)


def _matches(candidate: Candidate, kind: Kind, defaults: tuple[Default, ...]) -> int:
    """How many of ``defaults`` for ``kind`` the candidate's strategy holds."""
    strategy = candidate.strategy
    return sum(
        1
        for default in defaults
        if kind in default.kinds and getattr(strategy, default.field) == default.value
    )


def default_candidate(
    directory: CandidateDirectory, vertex: int, block: Block, defaults: tuple[Default, ...]
) -> Candidate | None:
    """The candidate on ``block`` matching most of ``defaults``, the fastest of those."""
    candidates = directory.options[vertex].get(block.extent, ())
    kind = directory.template.vertices[vertex].kind
    # Candidates come fastest first: max keeps the first of the most matches.
    return max(candidates, key=lambda c: _matches(c, kind, defaults), default=None)


def _blocks(directory: CandidateDirectory, spec: FrameworkDefaults) -> list[list[Block]]:
    """Per placement tried, each vertex's block."""
    count = len(directory.template.vertices)
    names = [vertex.name for vertex in directory.template.vertices]
    apart = [v for v in range(count) if names[v] in spec.apart]
    if spec.colocated and apart:
        others = [v for v in range(count) if v not in apart]
        parts = (apart, others)
        pairs = split_blocks(directory, generation_share(directory, parts), parts)
        return [[first if v in apart else second for v in range(count)] for first, second in pairs]
    if spec.colocated:
        wholes = directory.cluster.whole_blocks()
        for whole in wholes:
            if all(directory.allows(v, whole) for v in range(count)):
                return [[whole] * count]
        return []
    generation, _ = sides(directory)
    tried = []
    for first, second in split_blocks(directory, generation_share(directory)):
        if (first.start > second.start) != spec.generation_last:
            continue
        tried.append([first if v in generation else second for v in range(count)])
    return tried


def default_plan(
    directory: CandidateDirectory, simulator: Simulator, spec: FrameworkDefaults
) -> Plan | None:
    """The plan of ``spec`` (the module's rule) in ``directory``'s plan space, or ``None``."""
    staleness = make_staleness({model: 0 for model in directory.template.trained_models})
    best, best_score = None, math.inf
    for blocks in _blocks(directory, spec):
        placements = []
        for vertex, block in enumerate(blocks):
            candidate = default_candidate(directory, vertex, block, spec.defaults)
            if candidate is None:
                break
            placements.append(Placement(block, candidate.strategy))
        else:
            plan = repair_memory(Plan(tuple(placements), staleness), simulator)
            score = math.inf if plan is None else simulator.evaluate(plan).score
            if score < best_score:
                best, best_score = plan, score
    return best


def verl_default(directory: CandidateDirectory, simulator: Simulator) -> Plan | None:
    """verl's defaults: the hybrid engine (colocated), FSDP, rollout tp 2 at 0.5 of each GPU."""
    return default_plan(directory, simulator, VERL_DEFAULTS)


def nemo_rl_default(directory: CandidateDirectory, simulator: Simulator) -> Plan | None:
    """NeMo RL's grpo_math_1B defaults: colocated, DTensor FSDP2, vLLM tp 1 at 0.6."""
    return default_plan(directory, simulator, NEMO_RL_DEFAULTS)


def openrlhf_default(directory: CandidateDirectory, simulator: Simulator) -> Plan | None:
    """OpenRLHF's argument defaults: vLLM engines apart, ZeRO-2, vLLM tp 1 at 0.95."""
    return default_plan(directory, simulator, OPENRLHF_DEFAULTS)


def slime_default(directory: CandidateDirectory, simulator: Simulator) -> Plan | None:
    """slime's argument defaults: the rollout's GPUs after the actor's, one GPU per engine."""
    return default_plan(directory, simulator, SLIME_DEFAULTS)


#: ``engine.framework`` name -> its default baseline.
DEFAULT_PLANS: dict[str, Callable[[CandidateDirectory, Simulator], Plan | None]] = {
    "verl": verl_default,
    "nemo-rl": nemo_rl_default,
    "openrlhf": openrlhf_default,
    "slime": slime_default,
}
