"""``export-config`` of mixture-of-experts plans: ep, etp and cp for verl, NeMo RL and OpenRLHF.

The instances and plans are tests/rpeg/moe_plans.py: one node of 8 GPUs,
every model 8 experts (2 per token, width 64). Each expected value is derived
by hand in a comment; the keys are checked against the release key lists
(tests/data/releases/verl.json, nemo_rl.json).
"""

from __future__ import annotations

import json

import pytest

from benchmarks.release_keys import nemo_rl as nemo_keys
from benchmarks.release_keys.verl import DATA as VERL_DATA
from benchmarks.release_keys.verl import key_problem
from rlplan.formulation.framework import ImplicationRow, framework_rows
from rlplan.formulation.model import build_formulation
from rlplan.formulation.rows import Chooses
from rlplan.outputs.frameworks import export_config
from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks.conform import conform
from tests.rpeg import verl_plans
from tests.rpeg.moe_plans import (
    HIGH,
    NEMO_GRPO,
    NEMO_PPO,
    TRAIN,
    VERL_GRPO,
    VERL_PPO,
    broken,
    comments,
    keys,
    load,
    moe_instance,
    rollout,
    variant,
    verl_overrides,
    vertex,
)

ACTOR = "actor_rollout_ref.actor.megatron"
REF = "actor_rollout_ref.ref.megatron"
ROLLOUT = "actor_rollout_ref.rollout"
REWARD = "reward.reward_model.rollout"
#: ZeRO-3 with tp 1: dp 8 over the 8 GPUs, one copy of the 8 experts over all 8 (ep 8).
ZERO3 = {"dp": 8, "tp": 1, "cp": 1, "ep": 8, "etp": 1, "microbatches": 2}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("moe")


@pytest.fixture(scope="module")
def grpo(folder):
    return moe_instance(folder, "tiny_grpo_4gpu")


@pytest.fixture(scope="module")
def ppo(folder):
    return moe_instance(folder, "tiny_ppo_2gpu")


def _zero3(document: dict) -> dict:
    """``document`` with every Megatron role in the ZERO3 layout (actor.train ZeRO-3)."""
    layout = {name: dict(ZERO3) for name in ("actor_train", "actor_infer", "reference_infer")}
    layout["actor_train"]["sharding"] = "zero3"
    return variant(document, **layout)


# -- verl -------------------------------------------------------------------------------


def test_verl_actor_takes_the_plans_expert_and_context_degrees(grpo):
    """actor.train dp 2 x cp 2 x tp 2 = 8 GPUs, ep 4 (2 experts a GPU), etp 1, cp 2."""
    config, out = verl_overrides(*load(grpo, VERL_GRPO))
    assert config == "ppo_megatron_trainer"
    assert out[f"{ACTOR}.tensor_model_parallel_size"] == "2"
    assert out[f"{ACTOR}.expert_model_parallel_size"] == "4"
    # etp 1 written although it is Megatron's default only at tp 1 (verl's null = tp = 2)
    assert out[f"{ACTOR}.expert_tensor_parallel_size"] == "1"
    assert out[f"{ACTOR}.context_parallel_size"] == "2"


def test_verl_reference_and_critic_take_the_actors_degrees(ppo):
    """The reference and the critic run in the actor's layout (one Megatron state): 4, 1, 2."""
    _, out = verl_overrides(*load(ppo, VERL_PPO))
    for prefix in (REF, "critic.megatron"):
        assert out[f"{prefix}.expert_model_parallel_size"] == "4"
        assert out[f"{prefix}.expert_tensor_parallel_size"] == "1"
        assert out[f"{prefix}.context_parallel_size"] == "2"


@pytest.mark.parametrize(("ep", "data_parallel"), [(8, "4"), (4, "2"), (2, "1"), (1, "1")])
def test_verl_rollout_shares_experts_over_ep_gpus(grpo, ep, data_parallel):
    """Rollout dp 4 x tp 2: ep GPUs share the experts with ep / tp data-parallel attention
    ranks (verl asserts expert_parallel_size = tp x data_parallel_size): 8 -> 4, 4 -> 2,
    2 -> 1; ep 1 is the engine's default, experts tp-sharded, data_parallel_size 1."""
    document = variant(VERL_GRPO, actor_generate={"ep": ep})
    _, out = verl_overrides(*load(grpo, document))
    assert out[f"{ROLLOUT}.tensor_model_parallel_size"] == "2"
    assert out[f"{ROLLOUT}.expert_parallel_size"] == str(ep)
    assert out[f"{ROLLOUT}.data_parallel_size"] == data_parallel


@pytest.mark.parametrize(("ep", "etp", "expected"), [(2, 1, ("2", "1")), (4, 1, ("4", "2"))])
def test_verl_reward_model_served_with_expert_parallelism(grpo, ep, etp, expected):
    """Reward dp 4 x tp 2: ep 2 = tp 2 x 1 rank, ep 4 = tp 2 x 2 data-parallel ranks."""
    document = variant(VERL_GRPO, reward_infer={"ep": ep, "etp": etp})
    _, out = verl_overrides(*load(grpo, document))
    got = (out[f"{REWARD}.expert_parallel_size"], out[f"{REWARD}.data_parallel_size"])
    assert got == expected


def test_verl_reward_layout_vllm_cannot_serve_is_a_comment(grpo):
    """ep 1, etp 1 at tp 2 keeps every expert whole on both tp ranks; vLLM shards them over
    tp (ep 1, etp 2) or spreads them (etp 1, ep a multiple of 2): a comment, no key."""
    problem, plan = load(grpo, variant(VERL_GRPO, reward_infer={"ep": 1, "etp": 1}))
    assert f"{REWARD}.expert_parallel_size" not in keys(problem, plan, "verl")
    wanted = "not expressible in verl 0.9.1: reward.infer ep 1, etp 1 over tp 2"
    assert any(line.startswith(wanted) for line in comments(problem, plan, "verl"))
    sharded = load(grpo, variant(VERL_GRPO, reward_infer={"ep": 1, "etp": 2}))
    assert keys(*sharded, "verl")[f"{REWARD}.expert_parallel_size"] == 1


def test_verl_experts_under_zero3_take_megatron_fsdp(grpo):
    """ZeRO-3 at tp = pp = 1 is verl's FSDP backend, which has no expert parallel size: with
    ep 8 the export takes Megatron with Megatron-FSDP; at ep 1 it stays FSDP."""
    config, out = verl_overrides(*load(grpo, _zero3(VERL_GRPO)))
    assert config == "ppo_megatron_trainer"
    assert out[f"{ACTOR}.use_megatron_fsdp"] == "true"
    assert out[f"{ACTOR}.expert_model_parallel_size"] == "8"
    assert out[f"{ACTOR}.context_parallel_size"] == "1"
    dense_experts = {"ep": 1}
    document = variant(
        _zero3(VERL_GRPO),
        actor_train=dense_experts,
        actor_infer=dense_experts,
        reference_infer=dense_experts,
    )
    config, out = verl_overrides(*load(grpo, document))
    assert config == "ppo_trainer"
    assert not any("megatron" in key for key in out)


def test_verl_moe_keys_are_keys_of_the_release(grpo, ppo):
    """Every key=value of the MoE exports is a key of verl 0.9.1's config, of its type."""
    release = json.loads(VERL_DATA.read_text(encoding="utf-8"))
    seen = set()
    for path, document in ((grpo, VERL_GRPO), (ppo, VERL_PPO), (grpo, _zero3(VERL_GRPO))):
        config, out = verl_overrides(*load(path, document))
        for key, value in out.items():
            assert key_problem(release, config, key, value) is None
            seen.add(key)
    for prefix in (ACTOR, REF, "critic.megatron"):
        for name in ("expert_model_parallel_size", "expert_tensor_parallel_size"):
            assert f"{prefix}.{name}" in seen
        assert f"{prefix}.context_parallel_size" in seen
    for prefix in (ROLLOUT, REWARD):
        assert {f"{prefix}.expert_parallel_size", f"{prefix}.data_parallel_size"} <= seen


def test_verl_dense_plans_write_no_expert_or_context_keys():
    """A dense plan (the published NeMo RL run) exports as before: no ep, etp or cp key."""
    _, overrides, _ = verl_plans.export(*verl_plans.published(verl_plans.NEMO))
    words = ("expert", "context_parallel", "data_parallel_size")
    assert not [key for key in overrides if any(word in key for word in words)]


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"reference_infer": {"dp": 4, "cp": 1}}, "reference-on-global-pool"),
        ({"reference_infer": {"ep": 8}}, "reference-on-global-pool"),
        ({"actor_infer": {"ep": 2}}, "logprobs-on-actor"),
        ({"reward_infer": {"dp": 2, "cp": 2}}, "reward-model-no-context-parallel"),
    ],
)
def test_verl_refuses_expert_layouts_it_cannot_run(grpo, changes, rule):
    """Each rule removes a plan by ep or cp alone; export-config refuses it naming the rule."""
    problem, plan = load(grpo, variant(VERL_GRPO, **changes))
    assert any(rule in line for line in broken(problem, plan, "verl"))
    with pytest.raises(PlanError, match=rule):
        export_config(problem, plan, "verl", "plan.json")


def test_verl_refuses_a_critic_in_its_own_expert_layout(ppo):
    document = variant(VERL_PPO, critic_train={"ep": 2}, critic_infer={"ep": 2})
    problem, plan = load(ppo, document)
    assert any("critic-on-global-pool" in line for line in broken(problem, plan, "verl"))


def test_conform_moves_a_follower_into_its_leaders_expert_layout(grpo):
    """conform repairs actor.infer at ep 2 into actor.train's ep 4 (logprobs-on-actor)."""
    problem, plan = load(grpo, variant(VERL_GRPO, actor_infer={"ep": 2}))
    framed = problem.with_framework("verl")
    names = framed.directory.template.names
    fixed = conform(framed.directory, plan)
    strategy = fixed.placements[names.index("actor.infer")].strategy
    assert (strategy.ep, strategy.etp, strategy.cp) == (TRAIN["ep"], 1, TRAIN["cp"])
    assert broken(problem, fixed, "verl") == []
    # dominance keeps candidates of a layout-tied vertex apart by ep, etp and cp too
    kept = framed.directory._kept_apart(names.index("actor.infer"))
    assert {"ep", "etp", "cp"} <= set(kept)


def test_layout_rows_tie_the_expert_and_context_degrees(grpo):
    """The exact backends' rows: each actor.train assignment implies an actor.infer one on
    its block with its ep, etp and cp, among the infer candidates that differ in them."""
    framed = Problem.load(str(grpo)).with_framework("verl")
    f = build_formulation(framed, upper_bound=1e9, prune=False)
    names = framed.directory.template.names
    lead, follow = names.index("actor.train"), names.index("actor.infer")
    rows = [
        row
        for row in framework_rows(f)
        if isinstance(row, ImplicationRow)
        and isinstance(row.then, Chooses)
        and (row.condition.vertex, row.then.vertex) == (lead, follow)
    ]

    def degrees(assignment) -> tuple:
        strategy = assignment.candidate.strategy
        return (assignment.block, strategy.ep, strategy.etp, strategy.cp)

    assert rows
    for row in rows:
        leader = degrees(f.assignments[lead][row.condition.indices[0]])
        assert all(degrees(f.assignments[follow][i]) == leader for i in row.then.indices)
    assert len({degrees(a)[1:] for a in f.assignments[follow]}) > 1


# -- NeMo RL ----------------------------------------------------------------------------


def test_nemo_policy_megatron_cfg_takes_the_plans_degrees(grpo):
    """policy dp 1 x cp 2 x tp 2 on GPUs 0-3: ep 4, etp 1, cp 2; sequences padded to a
    multiple of tp x 2 x cp = 2 x 2 x 2 = 8 (2cp chunks, the base's tp); rollout dp 2 x tp 2
    with ep 4: one engine of 4 GPUs, 2 attention ranks, so no async engine."""
    out = keys(*load(grpo, NEMO_GRPO), "nemo-rl")
    assert out["policy.megatron_cfg.expert_model_parallel_size"] == 4
    assert out["policy.megatron_cfg.expert_tensor_parallel_size"] == 1
    assert out["policy.megatron_cfg.context_parallel_size"] == 2
    assert out["policy.make_sequence_length_divisible_by"] == 8
    assert out["policy.generation.vllm_cfg.expert_parallel_size"] == 4
    assert out["policy.generation.vllm_cfg.async_engine"] is False


def test_nemo_value_model_megatron_cfg_takes_its_degrees(ppo):
    """The value model in the policy's layout: 4, 1, 2, padded to 8."""
    out = keys(*load(ppo, NEMO_PPO), "nemo-rl")
    assert out["value.megatron_cfg.expert_model_parallel_size"] == 4
    assert out["value.megatron_cfg.expert_tensor_parallel_size"] == 1
    assert out["value.megatron_cfg.context_parallel_size"] == 2
    assert out["value.make_sequence_length_divisible_by"] == 8


def test_nemo_dtensor_policy_takes_expert_and_context_parallel(grpo):
    """ZeRO-3 is DTensor: ep 4 (beyond the base: ++ on a command line) and cp 2."""
    layout = {"dp": 1, "tp": 2, "cp": 2, "ep": 4, "etp": 1}
    document = variant(
        NEMO_GRPO,
        actor_train={**layout, "sharding": "zero3"},
        actor_infer=layout,
        reference_infer=layout,
    )
    problem, plan = load(grpo, document)
    out = keys(problem, plan, "nemo-rl")
    assert out["policy.dtensor_cfg.expert_parallel_size"] == 4
    assert out["policy.dtensor_cfg.context_parallel_size"] == 2
    assert "policy.megatron_cfg.expert_model_parallel_size" not in out
    command = [line for line in comments(problem, plan, "nemo-rl") if "take ++" in line]
    assert command and "policy.dtensor_cfg.expert_parallel_size" in command[0]
    etp = {**layout, "ep": 2, "etp": 2}  # ep x etp = 4 = the stage's dp x cp x tp
    document = variant(document, actor_train=etp, actor_infer=etp, reference_infer=etp)
    lines = comments(*load(grpo, document), "nemo-rl")
    assert any("actor.train etp 2 under ZeRO-3" in line for line in lines)


def test_nemo_moe_keys_are_keys_of_the_release(grpo, ppo):
    """Every key the MoE exports set is a key of v0.7.0 of its type; the expert keys are
    keys of the base configs (no ++) but DTensor's expert_parallel_size."""
    data = json.loads(nemo_keys.DATA.read_text(encoding="utf-8"))
    for path, document in ((grpo, NEMO_GRPO), (ppo, NEMO_PPO)):
        pairs, bases = nemo_keys.emitted(*load(path, document))
        assert nemo_keys.problems(pairs, data) == []
        beyond = nemo_keys.outside_bases(pairs, bases, data)
        assert not [key for key in beyond if "expert" in key or "context" in key]


def test_nemo_comment_lines_for_what_it_cannot_run(grpo, folder):
    """cp without packing; ep 4 over tp 2 (data parallelism inside vLLM) with async GRPO,
    whose engine must be async; a reward model's experts (its config sets none)."""
    unpacked = moe_instance(folder, "tiny_grpo_4gpu", packing=False)
    lines = comments(*load(unpacked, NEMO_GRPO), "nemo-rl")
    assert any("actor.train cp 2 without sequence packing" in line for line in lines)
    apart = {"origin": [0, 0, 2], "extent": [1, 1, 2]}
    policy = {"dp": 1, "tp": 2, "cp": 1, "ep": 2, "etp": 1, "microbatches": 4}
    document = {
        "staleness": {"actor": 1},
        "vertices": {
            "actor.generate": rollout(HIGH, 2, 2, ep=4),
            "actor.train": vertex({"origin": [0, 0, 0], "extent": [1, 1, 2]}, **policy),
            "actor.infer": vertex({"origin": [0, 0, 0], "extent": [1, 1, 2]}, **policy),
            "reference.infer": vertex(
                {"origin": [0, 0, 0], "extent": [1, 1, 2]}, **policy, offload=True
            ),
            "reward.infer": vertex(apart, 2, 1, microbatches=8),
        },
    }
    problem, plan = load(grpo, document)
    assert broken(problem, plan, "nemo-rl") == []
    assert keys(problem, plan, "nemo-rl")["policy.generation.vllm_cfg.async_engine"] is True
    lines = comments(problem, plan, "nemo-rl")
    assert any("actor.generate ep 4 over tp 2 with the async engine" in line for line in lines)
    document = variant(NEMO_GRPO, reward_infer={"ep": 2})
    lines = comments(*load(grpo, document), "nemo-rl")
    assert any("reward.infer ep 2, etp 1" in line for line in lines)


def test_nemo_refuses_a_reference_in_another_expert_layout(grpo):
    problem, plan = load(grpo, variant(NEMO_GRPO, reference_infer={"ep": 2}))
    with pytest.raises(PlanError, match="reference-on-policy"):
        export_config(problem, plan, "nemo-rl", "plan.json")


# -- OpenRLHF ---------------------------------------------------------------------------


def test_openrlhf_refuses_expert_and_context_parallelism(grpo):
    """DeepSpeed has no expert parallelism, one ring-attention size; vLLM no EP flag."""
    found = broken(*load(grpo, VERL_GRPO), "openrlhf")
    for rule in ("deepspeed-no-ep", "deepspeed-cp-1", "rollout-no-ep"):
        assert any(rule in line for line in found), rule
    single = variant(VERL_GRPO, actor_generate={"ep": 1})
    assert not any("rollout-no-ep" in line for line in broken(*load(grpo, single), "openrlhf"))


def test_openrlhf_comment_lines_name_the_degrees(grpo):
    lines = comments(*load(grpo, VERL_GRPO), "openrlhf")
    for wanted in ("rollout ep 8", "actor.train ep 4, etp 1", "actor.train cp 2"):
        assert any(f"not expressible in OpenRLHF: {wanted}" in line for line in lines), wanted
