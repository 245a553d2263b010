"""A plan as OpenRLHF settings: flags of ``python3 -m openrlhf.cli.train_ppo_ray``.

Every flag is one of openrlhf/cli/train_ppo_ray.py at OpenRLHF/OpenRLHF
v0.11.0 (commit 3c3be623, PyPI ``openrlhf==0.11.0``; dotted since v0.10.2),
the release :mod:`rlplan.rpeg.model.frameworks.openrlhf` is read from
(tests/data/releases/openrlhf.json lists them). The export is a bash array
of flags, one per line with comment lines between them, and its command.

How the plan maps onto OpenRLHF:

* each model is a Ray group (``--actor.num_nodes`` x ``--actor.num_gpus_per_node``,
  likewise ``ref``, ``reward``, ``critic``), the rollout ``--vllm.num_engines``
  engines of ``--vllm.tensor_parallel_size`` GPUs; groups share GPUs only
  through the ``--train.colocate_*`` flags;
* ``workload.optimizer_steps`` n optimizer steps per RL step (one gradient
  synchronisation each in the cost model): ``--train.batch_size`` B x K / n,
  one epoch (openrlhf/trainer/ppo_trainer.py: one step per train batch);
* a staleness s >= 1 of the actor is ``--train.async_enable`` with
  ``--train.async_queue_size s`` (openrlhf/trainer/ppo_trainer_async.py).
"""

from __future__ import annotations

from rlplan.outputs.frameworks.common import (
    OFFLOAD,
    RECOMPUTE,
    SHARDING,
    PlanFacts,
    Settings,
    fitting_micro_batch,
    gpus_words,
    optimizer_steps,
)
from rlplan.outputs.frameworks.openrlhf_pools import cluster_line, pool_lines
from rlplan.rpeg.model.frameworks.openrlhf import RELEASE, VLLM_MAX_NUM_SEQS
from rlplan.rpeg.strategy import Recompute, Sharding, value_word

FRAMEWORK = "openrlhf"

#: The file defining every flag (OpenRLHF/OpenRLHF, v0.11.0), and the command.
SOURCE = "openrlhf/cli/train_ppo_ray.py"
COMMAND = 'python3 -m openrlhf.cli.train_ppo_ray "${args[@]}"'
#: Placeholder of the reward function's file: the plan does not know the user's.
REWARD_FUNC_FILE = "reward_func.py"
#: OpenRLHF's own --algo.kl.init_coef default (train_ppo_ray.py): above 0 builds the reference.
KL_COEF = 0.01

#: Ray groups: the vertices each runs (the first present names its GPUs).
GROUPS = {
    "vllm": ("actor.generate",),
    "actor": ("actor.train", "actor.infer"),
    "ref": ("reference.infer",),
    "reward": ("reward.infer",),
    "critic": ("critic.train", "critic.infer"),
}
#: The DeepSpeed groups, in the order train_ppo_ray.py builds them.
DEEPSPEED = ("actor", "ref", "reward", "critic")


def _anchors(facts: PlanFacts) -> dict[str, str]:
    """Group -> the vertex whose block is its GPUs, for the groups the plan has."""
    found = {}
    for group, names in GROUPS.items():
        present = [name for name in names if facts.has(name)]
        if present:
            found[group] = present[0]
    return found


def _user_lines(facts: PlanFacts, out: Settings, anchors: dict[str, str]) -> None:
    """What the user must still add: model and data paths."""
    out.comment("add: --actor.model_name_or_path <the actor, models.actor of the instance>")
    out.comment("add: --data.prompt_dataset <prompts> --data.input_key <prompt field>")
    if facts.reward_rule is not None:
        out.comment("add: --data.label_key <answer field> (the labels reward_func scores with)")
    if "reward" in anchors:
        out.comment("add: --reward.model_name_or_path <the reward model, models.reward>")
    if "critic" in anchors:
        out.comment(
            "add: --critic.model_name_or_path <the critic, models.critic> (OpenRLHF's default: "
            "the reward model, or the actor with a reward function)"
        )


def _cluster(facts: PlanFacts, out: Settings) -> None:
    """The Ray cluster the groups need (OpenRLHF takes it from Ray, no flag)."""
    if cluster_line(facts, out):
        return
    nodes, gpus = facts.cluster_nodes()
    used = len({gpu for block in facts.blocks.values() for gpu in block.gpus()})
    out.comment(
        f"cluster: {nodes} node{'s' if nodes > 1 else ''} x {gpus} GPUs in one Ray cluster "
        f"(ray start --head --num-gpus {gpus} on the first node, ray start --address "
        f"<head>:6379 --num-gpus {gpus} on the others); the plan uses {used} of its GPUs"
    )


def _workload(facts: PlanFacts, out: Settings, anchors: dict[str, str]) -> None:
    """Algorithm, batch, lengths and KL (train_ppo_ray.py, v0.11.0)."""
    instance = facts.instance
    workload = instance.workload
    if instance.algorithm == "dpo":
        out.unsupported(
            "online DPO (train_ppo_ray trains PPO-family algorithms; openrlhf/cli/train_dpo.py "
            "is offline DPO); the flags below describe the plan's placement only"
        )
    else:
        estimator = "group_norm" if instance.algorithm == "grpo" else "gae"
        out.set("--algo.advantage.estimator", estimator)
    out.set("--rollout.batch_size", workload.batch_size)
    out.set("--rollout.n_samples_per_prompt", workload.samples_per_prompt)
    steps = optimizer_steps(instance)
    out.comment(
        f"{steps} optimizer step{'s' if steps > 1 else ''} per RL step "
        "(workload.optimizer_steps): --train.batch_size = rollout.batch_size x "
        f"n_samples_per_prompt / {steps}, one epoch"
    )
    out.set("--train.batch_size", workload.mini_batch_sequences)
    out.set("--train.max_epochs", 1)
    # The prompt is workload.context_length tokens and the response at most
    # generation_length: vLLM's max_model_len is --data.max_len, and prompts
    # longer than max_len - max_new_tokens are cut (openrlhf/utils/agent.py).
    out.set("--data.max_len", workload.total_length)
    out.set("--rollout.max_new_tokens", workload.generation_length)
    engine = instance.engine
    if engine.sequence_packing:
        out.set("--ds.packing_samples", True)
    if not engine.flash_attention and engine.sequence_packing:
        out.unsupported("attention without flash attention (packing switches it on)")
    elif not engine.flash_attention:
        out.set("--ds.attn_implementation", "eager")
    if "ref" in anchors:
        out.comment("reference model on: --algo.kl.init_coef above 0 builds the ref group")
        out.set("--algo.kl.init_coef", KL_COEF)
    else:
        out.comment("no reference model (engine.reference_model false): no KL, no ref group")
        out.set("--algo.kl.init_coef", 0.0)


def _rewards(facts: PlanFacts, out: Settings) -> None:
    """A rule reward: ``--reward.remote_url`` naming a Python file with ``reward_func``."""
    rule = facts.reward_rule
    if rule is None:
        return
    facts.reward_rule_comment(
        out,
        "OpenRLHF runs reward_func(queries, prompts, labels) from the .py file given as "
        f"--reward.remote_url, no reward model (openrlhf/utils/agent.py); replace "
        f"{REWARD_FUNC_FILE} by your file",
    )
    out.set("--reward.remote_url", REWARD_FUNC_FILE)
    if rule["workers"] > 1:
        out.unsupported(
            f"{rule['workers']} reward workers (reward_func runs per sample in each vLLM "
            "engine's thread pool right after its generation: openrlhf/utils/agent.py "
            "SingleTurnAgentExecutor)"
        )


def _rollout(facts: PlanFacts, out: Settings) -> None:
    """The vLLM engines (openrlhf/trainer/ray/vllm_engine.py create_vllm_engines)."""
    tp, pp, dp = facts.layout("actor.generate")
    out.set("--vllm.num_engines", dp)
    out.set("--vllm.tensor_parallel_size", tp)
    if pp > 1:
        out.unsupported(f"rollout pp {pp} (vLLM engines are tensor parallel only)")
    ep = facts.degrees("actor.generate")[0]
    if ep > 1:
        out.unsupported(
            f"rollout ep {ep} (no flag passes vLLM's enable_expert_parallel: the engines shard "
            "experts over tp)"
        )
    out.set("--vllm.gpu_memory_utilization", facts.utilization("actor.generate"))
    seqs = facts.entry("actor.generate")["max_num_seqs"]
    if seqs != VLLM_MAX_NUM_SEQS:
        out.unsupported(
            f"rollout max_num_seqs {seqs} (no flag: vLLM 0.27.1's engine default "
            f"{VLLM_MAX_NUM_SEQS} applies)"
        )
    if not facts.instance.engine.cuda_graphs:
        out.set("--vllm.enforce_eager", True)


def _sizes(facts: PlanFacts, out: Settings, anchors: dict[str, str]) -> None:
    """num_nodes and num_gpus_per_node of every DeepSpeed group the plan has."""
    for group in DEEPSPEED:
        if group in anchors:
            nodes, width = facts.nodes(anchors[group])
            out.set(f"--{group}.num_nodes", nodes)
            out.set(f"--{group}.num_gpus_per_node", width)


def _colocation(facts: PlanFacts, out: Settings, anchors: dict[str, str], stale: bool) -> bool:
    """The colocation flags; returns whether the rollout sleeps on the actor's GPUs.

    train_ppo_ray.py: ``--train.colocate_all`` puts every DeepSpeed group (and
    the rollout when synchronous) in the actor's placement group, except critic
    and reward under ``--train.colocate_critic_reward``, which get one of their own.
    """
    same = {g: facts.block(name) == facts.block(anchors["actor"]) for g, name in anchors.items()}
    pair = "critic" in anchors and "reward" in anchors
    pair = pair and facts.same_block(anchors["critic"], anchors["reward"])
    with_actor = same.get("critic") or same.get("reward")
    colocate_all = bool(same["vllm"] if not stale else with_actor)
    shared: set[frozenset[str]] = set()
    separate = pair and not (colocate_all and same["critic"])
    if separate:
        out.set("--train.colocate_critic_reward", True)
        shared.add(frozenset(("critic", "reward")))
    if colocate_all:
        out.set("--train.colocate_all", True)
        apart = ("critic", "reward") if separate else ()
        on_actor = [g for g in anchors if g not in apart and (g != "vllm" or not stale)]
        shared |= {frozenset((a, b)) for a in on_actor for b in on_actor if a != b}
        nodes, width = facts.nodes(anchors["actor"])
        for group in on_actor:  # ref: asserted in train_ppo_ray.py; others: its bundles
            if group in DEEPSPEED:
                out.set(f"--{group}.num_nodes", nodes)
                out.set(f"--{group}.num_gpus_per_node", width)
    elif same.get("ref"):
        out.set("--train.colocate_actor_ref", True)
        shared.add(frozenset(("actor", "ref")))
    groups = list(anchors)
    for i, first in enumerate(groups):
        for second in groups[i + 1 :]:
            a, b = anchors[first], anchors[second]
            wanted = frozenset((first, second)) in shared
            if facts.same_block(a, b) if wanted else facts.disjoint(a, b):
                continue
            out.unsupported(
                f"{a} on {gpus_words(facts.block(a))} and {b} on {gpus_words(facts.block(b))} "
                f"(with these flags the {first} and {second} groups "
                f"{'share all their GPUs' if wanted else 'share no GPU'})"
            )
    return colocate_all and not stale


def _layouts(facts: PlanFacts, out: Settings) -> None:
    """DeepSpeed tp (one flag for every model) and pp (none)."""
    names = [name for names in GROUPS.values() for name in names if facts.has(name)]
    names = [name for name in names if name != "actor.generate"]
    tp = facts.layout("actor.train")[0]
    if tp > 1:
        out.set("--ds.tensor_parallel_size", tp)
    for name in names:
        other_tp, other_pp, _ = facts.layout(name)
        if other_pp > 1:
            out.unsupported(f"{name} pp {other_pp} (DeepSpeed models have no pipeline stages)")
        ep, etp, cp = facts.degrees(name)
        if ep * etp > 1:
            out.unsupported(f"{name} ep {ep}, etp {etp} (a DeepSpeed model holds every expert)")
        if cp > 1:
            out.unsupported(
                f"{name} cp {cp} (one --ds.ring_attn_size for every DeepSpeed model, left at 1)"
            )
        if other_tp != tp:
            out.unsupported(
                f"{name} tp {other_tp} while actor.train tp {tp} (one --ds.tensor_parallel_size "
                "for every DeepSpeed model)"
            )
    for name, leader in (("actor.infer", "actor.train"), ("critic.infer", "critic.train")):
        if facts.has(name) and (
            not facts.same_block(name, leader) or facts.layout(name) != facts.layout(leader)
        ):
            out.unsupported(f"{facts.where(name)} while {facts.where(leader)} (one group)")


def _training(facts: PlanFacts, out: Settings) -> None:
    """ZeRO stage, recompute and offload: one set of flags for actor and critic."""
    actor = facts.entry("actor.train")
    out.set("--ds.zero_stage", 3 if actor[SHARDING.label] == Sharding.ZERO3 else 1)
    if actor[RECOMPUTE.label] == Recompute.FULL:
        out.set("--actor.gradient_checkpointing_enable", True)
    if actor[OFFLOAD.label]:
        out.comment(
            "actor.train offload: --ds.enable_sleep moves the optimizer states, gradients and "
            "fp32 weights to the host outside training (the bf16 weights stay)"
        )
        out.set("--ds.enable_sleep", True)
    if facts.has("critic.train"):
        critic = facts.entry("critic.train")
        for declared in (SHARDING, RECOMPUTE, OFFLOAD):
            field = declared.label
            if critic[field] != actor[field]:
                out.unsupported(
                    f"critic.train {field} {value_word(critic[field])} while actor.train "
                    f"{value_word(actor[field])} (actor and critic share the DeepSpeed flags)"
                )
    for name in ("actor.infer", "critic.infer"):
        if facts.has(name) and facts.entry(name)[OFFLOAD.label]:
            out.unsupported(f"{name} offload true (it runs on its group's resident weights)")


def _batches(facts: PlanFacts, out: Settings, anchors: dict[str, str]) -> None:
    """``--train.micro_batch_size`` and ``--rollout.micro_batch_size``.

    Every DeepSpeed group, reference and reward too, gets ``--train.batch_size``
    and ``--train.micro_batch_size`` (openrlhf/utils/deepspeed/deepspeed.py
    ``get_ds_train_config``, ``get_ds_eval_config``): each group's dp (GPUs over
    the one DeepSpeed tp) must fit them.
    """
    sequences = facts.instance.workload.mini_batch_sequences
    trains = [name for name in ("actor.train", "critic.train") if facts.has(name)]
    wanted = min(facts.micro_batch(name) for name in trains)
    if len({facts.micro_batch(name) for name in trains}) > 1:
        out.unsupported(
            f"critic.train micro-batch {facts.micro_batch('critic.train')} per GPU while "
            f"actor.train {facts.micro_batch('actor.train')} (one --train.micro_batch_size)"
        )
    tp = facts.layout("actor.train")[0]
    groups = [g for g in DEEPSPEED if g in anchors]
    dps = [
        out.value(f"--{g}.num_nodes") * out.value(f"--{g}.num_gpus_per_node") // tp for g in groups
    ]
    micro = fitting_micro_batch(sequences, dps, wanted)
    if micro is None:
        out.unsupported(
            f"{sequences} sequences over dp {', '.join(map(str, dps))} (DeepSpeed needs "
            "--train.batch_size a multiple of micro-batch x dp in every group)"
        )
    elif micro != wanted:
        out.unsupported(
            f"train micro-batch {wanted} per GPU ({sequences} sequences are no multiple of "
            f"{wanted} x dp in every group, as DeepSpeed asserts): {micro} here"
        )
    out.set("--train.micro_batch_size", micro or wanted)
    infers = ("actor.infer", "reference.infer", "reward.infer", "critic.infer")
    infers = tuple(name for name in infers if facts.has(name))
    if infers:
        _rollout_micro(facts, out, infers, dps[0])


def _rollout_micro(facts: PlanFacts, out: Settings, infers: tuple[str, ...], dp: int) -> None:
    """``--rollout.micro_batch_size``: one for every log-prob, reference, reward and value pass.

    train_ppo_ray.py asserts n_samples_per_prompt x rollout.batch_size //
    rollout.micro_batch_size >= the actor's GPUs // tp (its dp ``dp``).
    """
    rollout = facts.micro_batch(infers[0])
    for name in infers[1:]:
        if facts.micro_batch(name) != rollout:
            out.unsupported(
                f"{name} micro-batch {facts.micro_batch(name)} per GPU while {infers[0]} "
                f"{rollout} (one --rollout.micro_batch_size)"
            )
    most = facts.instance.workload.sequences // dp
    if rollout > most:
        out.unsupported(
            f"{infers[0]} micro-batch {rollout} per GPU (train_ppo_ray.py asserts at least one "
            f"micro-batch per actor rank, at most {most} sequences each): {most} here"
        )
    out.set("--rollout.micro_batch_size", min(rollout, most))


def _inference_offload(facts: PlanFacts, out: Settings) -> None:
    """``--ref.offload`` / ``--reward.offload``: ZeRO-3 parameter offload, under ZeRO-3 only."""
    zero3 = facts.entry("actor.train")[SHARDING.label] == Sharding.ZERO3
    for name, flag in (("reference.infer", "--ref.offload"), ("reward.infer", "--reward.offload")):
        if not facts.has(name) or not facts.entry(name)[OFFLOAD.label]:
            continue
        if zero3:
            out.set(flag, True)
        else:
            out.unsupported(
                f"{name} offload true under ZeRO-1 ({flag} is DeepSpeed's offload_param, which "
                "acts under ZeRO-3 only: the weights stay on the GPUs)"
            )


def settings(facts: PlanFacts, plan_name: str) -> Settings:
    """The plan's OpenRLHF flags, in order.

    Parameters
    ----------
    facts
        The plan and its instance.
    plan_name
        How the header names the plan (its file name).

    Returns
    -------
    Settings
        Flags (``True`` for a switch) and comment lines.
    """
    out = Settings("OpenRLHF")
    facts.header(
        out,
        plan_name,
        f"valid for OpenRLHF {RELEASE} (pip install openrlhf=={RELEASE[1:]}, vLLM 0.27.1): "
        f"flags of python3 -m openrlhf.cli.train_ppo_ray ({SOURCE}), one per line",
    )
    anchors = _anchors(facts)
    stale = facts.staleness.get("actor", 0)
    _user_lines(facts, out, anchors)
    _cluster(facts, out)
    _workload(facts, out, anchors)
    _rewards(facts, out)
    _sizes(facts, out, anchors)
    pool_lines(facts, out, anchors)
    _rollout(facts, out)
    if _colocation(facts, out, anchors, stale > 0):
        out.set("--vllm.enable_sleep", True)
    _layouts(facts, out)
    _training(facts, out)
    _batches(facts, out, anchors)
    _inference_offload(facts, out)
    if stale > 0:
        out.set("--train.async_enable", True)
        out.set("--train.async_queue_size", stale)
    for model, steps in sorted(facts.staleness.items()):
        if model != "actor" and steps > 0:
            out.unsupported(f"{model} staleness {steps} (values always use the latest critic)")
    return out


def render(out: Settings) -> str:
    """A bash array of flags (``--flag value``, ``--flag`` for a switch) and the command.

    Comment lines before the first flag come first; the others stay between
    the flags (bash allows them inside an array's parentheses).
    """
    head: list[str] = []
    body: list[str] = []
    for kind, key, value in out.items:
        target = body if body or kind == "set" else head
        if kind == "comment":
            target.append(f"# {key}")
        elif value is True:
            target.append(key)
        elif value is not False:
            target.append(f"{key} {value}")
    return "\n".join([*head, "args=(", *body, ")", COMMAND]) + "\n"
