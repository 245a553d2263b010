"""NeMo RL keys of mixture-of-experts and context parallel plans (beside :mod:`.nemo_rl`).

The keys are NVIDIA-NeMo/RL's at tag v0.7.0 (commit 81aa43dd; paths below
are in that repository), all of them keys of the example configs the export
inherits (tests/data/releases/nemo_rl.json) but
``policy.dtensor_cfg.expert_parallel_size``, which recipes set
(examples/configs/recipes/llm/grpo-moonlight-16b-automodel-1n8g-ep8.yaml) and
the bases leave out. Written, as every exporter does
(:mod:`rlplan.outputs.frameworks.common`), for vertices of a mixture of
experts, and cp also where it is above 1:

* Megatron (ZeRO-1): ``{policy,value}.megatron_cfg.expert_model_parallel_size``,
  ``expert_tensor_parallel_size`` and ``context_parallel_size``, read by
  ``_apply_moe_config`` and ``_apply_parallelism_config``
  (nemo_rl/models/megatron/setup.py); old and reference log-probs run in the
  policy's (their rules tie them);
* DTensor (ZeRO-3): ``dtensor_cfg.expert_parallel_size`` and
  ``context_parallel_size`` (nemo_rl/models/automodel/setup.py, passed to
  Automodel's ``create_device_mesh``, whose expert parallel group spans the
  dp, cp and tp ranks and holds whole experts: NVIDIA-NeMo/Automodel
  nemo_automodel/components/distributed/mesh_utils.py
  ``_create_fsdp2_device_mesh``, read at 210f58f2; v0.7.0 pins the submodule
  at 24b47e85, not read);
* vLLM: ``policy.generation.vllm_cfg.expert_parallel_size`` ep, a multiple of
  tp (nemo_rl/models/generation/vllm/vllm_generation.py: "vLLM's EP = DP *
  TP"; vllm_worker.py sets ``enable_expert_parallel`` when it is above 1).
"""

from __future__ import annotations

from rlplan.outputs.frameworks.common import PlanFacts, Settings

#: DTensor's expert parallel size: a key recipes set and the export's bases leave out.
DTENSOR_EXPERTS = "policy.dtensor_cfg.expert_parallel_size"


def pad_multiple(facts: PlanFacts, name: str) -> int:
    """``make_sequence_length_divisible_by`` of a Megatron train vertex: tp, x 2cp with cp.

    ``_get_pack_sequence_parameters_for_megatron`` (nemo_rl/models/megatron/data.py)
    asserts it is a multiple of ``2 * cp`` when cp is above 1 (each sequence
    splits into 2cp chunks); the bases set it to tp, and tp x 2cp keeps both
    (the published recipe grpo-qwen3-30ba3b-8n8g-megatron-cp2-r3.yaml: 16 at
    tp 4, cp 2).
    """
    tp = facts.layout(name)[0]
    cp = facts.degrees(name)[2]
    return tp * 2 * cp if cp > 1 else tp


def generation_experts(facts: PlanFacts, out: Settings, async_engine: bool) -> None:
    """The rollout's expert parallel size, and what vLLM's data parallelism rules out.

    ``VllmGeneration.__init__`` (vllm_generation.py) asserts ep is a multiple
    of tp and, when ep is not tp (vLLM data parallelism inside the engine),
    ``async_engine`` false, which async GRPO (``async_grpo_train``,
    nemo_rl/algorithms/grpo.py) and vLLM pp > 1 need true.
    """
    if not facts.mixture("actor.generate"):
        return
    tp = facts.layout("actor.generate")[0]
    ep = facts.degrees("actor.generate")[0]
    out.set("policy.generation.vllm_cfg.expert_parallel_size", ep)
    if ep > tp and async_engine:
        out.unsupported(
            f"actor.generate ep {ep} over tp {tp} with the async engine (async GRPO or pp > 1): "
            "vllm_generation.py asserts async_engine false when vLLM's data parallelism "
            "(ep / tp attention ranks sharing the experts) runs inside one engine"
        )


def megatron_experts(facts: PlanFacts, out: Settings, section: str, name: str) -> None:
    """ep, etp and cp of ``section``'s ``megatron_cfg`` (and the sequence padding cp needs).

    Under Megatron the policy and the value model pack as the instance says
    (``engine.sequence_packing``).
    """
    ep, etp, cp = facts.degrees(name)
    moe = facts.mixture(name)
    if moe:
        out.set(f"{section}.megatron_cfg.expert_model_parallel_size", ep)
        out.set(f"{section}.megatron_cfg.expert_tensor_parallel_size", etp)
    if not (moe or cp > 1):
        return
    out.set(f"{section}.megatron_cfg.context_parallel_size", cp)
    if cp == 1:
        return
    out.set(f"{section}.make_sequence_length_divisible_by", pad_multiple(facts, name))
    if not facts.instance.engine.sequence_packing:
        out.unsupported(
            f"{name} cp {cp} without sequence packing (nemo_rl/models/megatron/setup.py "
            "_apply_parallelism_config and nemo_rl/algorithms/ppo.py setup assert packing "
            "with context parallelism)"
        )


def dtensor_experts(facts: PlanFacts, out: Settings, section: str, name: str) -> None:
    """ep and cp of ``section``'s ``dtensor_cfg``; DTensor has no expert tensor parallelism."""
    ep, etp, cp = facts.degrees(name)
    if cp > 1:
        out.set(f"{section}.dtensor_cfg.context_parallel_size", cp)
    if not facts.mixture(name):
        return
    if etp > 1:
        out.unsupported(
            f"{name} etp {etp} under ZeRO-3 (DTensor's dtensor_cfg has no expert tensor "
            "parallel size; its expert parallel ranks hold whole experts)"
        )
    elif ep > 1 and section == "policy":
        out.set(DTENSOR_EXPERTS, ep)
    elif ep > 1:
        out.unsupported(f"{name} ep {ep} under ZeRO-3 (no {section} config sets it)")


def reward_experts(facts: PlanFacts, out: Settings) -> None:
    """The reward model's context parallel size (DTensor); its experts as they load."""
    ep, etp, cp = facts.degrees("reward.infer")
    if cp > 1:
        # env.reward_model.dtensor_cfg.context_parallel_size: examples/configs/grpo_rm_1B.yaml
        out.set("env.reward_model.dtensor_cfg.context_parallel_size", cp)
    if facts.mixture("reward.infer") and ep * etp > 1:
        out.unsupported(
            f"reward.infer ep {ep}, etp {etp} (the reward model loads as a DTensor sequence "
            "classifier, nemo_rl/environments/reward_model_environment.py, whose config in "
            "grpo_rm_1B.yaml sets no expert parallelism)"
        )
