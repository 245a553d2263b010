"""slime's GPU layout, SGLang rollout and reward flags (see :mod:`rlplan.outputs.frameworks.slime`).

Sources are files of THUDM/slime v0.3.1 and of SGLang v0.5.15.post1 (the
engine of slime's stable image, docker/README.md), whose ``ServerArgs``
fields slime passes on as ``--sglang-<field>`` (slime/backends/sglang_utils/
arguments.py ``add_sglang_arguments``; ``tp_size`` is skipped: slime sets it).
"""

from __future__ import annotations

from rlplan.outputs.frameworks.common import OFFLOAD, PlanFacts, Settings, gpus_words
from rlplan.outputs.frameworks.pooled import pool_words, pooled, roles_words, span
from rlplan.rpeg.model.cost import Strategy

#: slime's default in-flight requests per engine: --sglang-server-concurrency 512
#: (slime/backends/sglang_utils/arguments.py); GenerateState's semaphore holds
#: concurrency x engines requests (slime/rollout/sglang_rollout.py).
SERVER_CONCURRENCY = 512
#: The file the reward model's server group is written to (--sglang-config).
SGLANG_CONFIG = "sglang_config.yaml"


def strategy(facts: PlanFacts, name: str) -> Strategy:
    """The strategy of vertex ``name``."""
    names = list(facts.problem.directory.template.names)
    return facts.plan.placements[names.index(name)].strategy


def degree(facts: PlanFacts, name: str, field: str) -> int:
    """A parallel degree of vertex ``name``: ``tp``, ``pp``, ``dp``, ``cp``, ``ep`` or ``etp``.

    Every strategy has all six (ep, etp and cp 1 unless set: a dense model, a
    generate vertex's etp and cp; rlplan/rpeg/strategy.py).
    """
    return int(getattr(strategy(facts, name), field))


def _interval(start: int, size: int) -> range:
    return range(start, start + size)


def placement_keys(facts: PlanFacts, out: Settings) -> bool:
    """Actor GPUs, rollout GPUs and ``--colocate``; returns whether the rollout is colocated.

    slime's one placement group (slime/ray/placement_group.py
    ``_get_placement_group_layout``, slime/ray/rollout.py
    ``_compute_rollout_offset``): the actor on slots [0, A), the rollout's
    server groups one after another from slot A, or from slot 0 under
    ``--colocate``; a served reward model's group follows the rollout's
    (``start_rollout_servers``: ``gpu_offset += num_gpus``).
    """
    nodes, width = facts.nodes("actor.train")
    out.set("--actor-num-nodes", nodes)
    out.set("--actor-num-gpus-per-node", width)
    actor = facts.block("actor.train").size
    generate = facts.block("actor.generate").size
    reward = facts.block("reward.infer").size if facts.has("reward.infer") else 0
    colocated = facts.block("actor.generate").intersects(facts.block("actor.train"))
    # rollout_num_gpus covers every server group (_resolve_sglang_config asserts it)
    out.set("--rollout-num-gpus", generate + reward)
    # GPUs per node of the rollout: engines span gpus_per_engine // it nodes
    # (sglang_engine.py _compute_server_args); slime's default 8
    width = facts.cluster_nodes()[1]
    if pooled(facts):
        width = span(facts, "actor.generate").pool.hardware.gpus_per_node
    out.set("--num-gpus-per-node", width)
    if colocated:
        out.set("--colocate", True)
    start = 0 if colocated else actor
    slots = {
        "actor.train": _interval(0, actor),
        "actor.generate": _interval(start, generate),
        "reward.infer": _interval(start + generate, reward),
    }
    pairs = [("actor.generate", "actor.train")]
    if reward:
        pairs += [("reward.infer", "actor.train"), ("reward.infer", "actor.generate")]
    for first, second in pairs:
        planned = facts.block(first).intersects(facts.block(second))
        slime_shares = bool(set(slots[first]) & set(slots[second]))
        if planned != slime_shares:
            out.unsupported(
                f"{first} on {gpus_words(facts.block(first))} and {second} on "
                f"{gpus_words(facts.block(second))} (slime's placement puts them on "
                f"{'shared' if slime_shares else 'separate'} GPUs)"
            )
    if reward:
        _reward_offload(facts, out, colocated and slots["reward.infer"].start < actor)
    return colocated


def _reward_offload(facts: PlanFacts, out: Settings, slept: bool) -> None:
    """slime sleeps a server group that starts on Megatron's GPUs under --colocate, no other.

    slime/ray/rollout.py ``start_rollout_servers``: ``needs_offload =
    args.offload_rollout and group_abs_start < megatron_num_gpus``.
    """
    offload = bool(facts.entry("reward.infer")[OFFLOAD.label])
    if offload != slept:
        out.unsupported(
            f"reward.infer offload {str(offload).lower()} (slime "
            f"{'offloads' if slept else 'keeps resident'} a reward server group "
            f"{'on' if slept else 'off'} the Megatron GPUs under --colocate)"
        )


def rollout_keys(facts: PlanFacts, out: Settings) -> None:
    """SGLang engines: GPUs per engine, pp, expert parallel with dp attention, memory, requests.

    An engine of ep = e > 1 over attention tp = t is SGLang tp_size e (GPUs per
    engine / pp: sglang_engine.py ``_compute_server_args``), ``--ep-size`` e and,
    for e > t, ``--enable-dp-attention`` with ``--dp-size`` e / t attention
    replicas (slime's scripts/run-deepseek-r1.sh: 64 GPUs per engine, ep 64,
    dp 8). ``--max-running-requests`` is the engine's: each dp-attention
    worker takes it // dp_size (sglang/srt/model_executor/pool_configurator.py,
    ``requested_max_running_requests_per_worker``), so the plan's max_num_seqs
    per replica is multiplied by the replicas.
    """
    name = "actor.generate"
    tp, pp = degree(facts, name, "tp"), degree(facts, name, "pp")
    ep = degree(facts, name, "ep")
    engine_tp = ep if ep > 1 else tp
    replicas = ep // tp if ep > tp else 1
    if ep > 1 and ep % tp:
        out.unsupported(f"{name} ep {ep} over tp {tp} (SGLang's dp attention needs tp | ep)")
    out.set("--rollout-num-gpus-per-engine", engine_tp * pp)
    if pp > 1:
        out.set("--sglang-pp-size", pp)
    if ep > 1:
        out.set("--sglang-ep-size", ep)
    if replicas > 1:
        # SGLang asserts dp_size > 1 only with enable_dp_attention (slime validate_args too)
        out.set("--sglang-enable-dp-attention", True)
        out.set("--sglang-dp-size", replicas)
    gpus = facts.block(name).size
    if gpus % (engine_tp * pp):
        out.unsupported(f"{name} on {gpus} GPUs in engines of {engine_tp * pp} GPUs")
    # the plan's gpu_memory_utilization is SGLang's static fraction (weights + KV pool)
    out.set("--sglang-mem-fraction-static", facts.utilization(name))
    running = int(facts.entry(name)["max_num_seqs"]) * replicas
    out.set("--sglang-max-running-requests", running)
    if running > SERVER_CONCURRENCY:
        out.set("--sglang-server-concurrency", running)
    if not facts.instance.engine.cuda_graphs:
        # --disable-cuda-graph is deprecated for these two in SGLang v0.5.15 (server_args.py)
        out.set("--sglang-cuda-graph-backend-decode", "disabled")
        out.set("--sglang-cuda-graph-backend-prefill", "disabled")


def reward_keys(facts: PlanFacts, out: Settings) -> None:
    """A rule reward (``--rm-type``) or a reward model (its own SGLang server group)."""
    rule = facts.reward_rule
    if rule is not None:
        facts.reward_rule_comment(
            out,
            "slime scores each sample right after its generation, in the rollout manager "
            "(slime/rollout/sglang_rollout.py generate_and_rm): a built-in rule, --rm-type "
            "deepscaler, dapo, math, f1, gpqa, ifbench (slime/rollout/rm_hub/__init__.py "
            "async_rm), or yours, --custom-rm-path module.function; math here",
        )
        out.set("--rm-type", "math")
        if rule["workers"] > 1:
            out.unsupported(
                f"{rule['workers']} reward workers (the rule runs in the rollout manager's "
                "asyncio loop, one process)"
            )
        return
    if not facts.has("reward.infer"):
        return
    _reward_model(facts, out)


def _reward_model(facts: PlanFacts, out: Settings) -> None:
    """The reward model as a second model of ``--sglang-config`` (sglang_config.py)."""
    tp, pp = degree(facts, "reward.infer", "tp"), degree(facts, "reward.infer", "pp")
    generate = facts.block("actor.generate").size
    reward = facts.block("reward.infer").size
    # a group's pp_size override (sglang_engine.py _compute_server_args reads it)
    overrides = f", overrides: {{pp_size: {pp}}}" if pp > 1 else ""
    out.comment(
        f"reward model: save as {SGLANG_CONFIG} (slime/backends/sglang_utils/sglang_config.py; "
        "docs/en/advanced/sglang-config.md), the actor's engines first, then the reward's:"
    )
    lines = [
        "sglang:",
        "  - name: actor",
        f"    server_groups: [{{worker_type: regular, num_gpus: {generate}}}]",
        "  - name: reward",
        "    model_path: <the reward model, Hugging Face>",
        "    update_weights: false",
        f"    num_gpus_per_engine: {tp * pp}",
        f"    server_groups: [{{worker_type: regular, num_gpus: {reward}{overrides}}}]",
    ]
    for line in lines:
        out.comment(f"  {line}")
    out.set("--sglang-config", SGLANG_CONFIG)
    out.comment(
        "add: --custom-rm-path <module.function: an async function(args, sample) that scores "
        "with the reward model behind args.sglang_model_routers['reward']>"
    )
    out.unsupported(
        f"reward.infer micro-batch {facts.micro_batch('reward.infer')} per GPU (SGLang batches "
        "the scoring requests itself)"
    )


#: How slime orders its one placement group's GPUs (the release and commit read).
_ORDER = (
    "slime/ray/placement_group.py _create_placement_group sorts the bundles by node IP "
    "address, then GPU id (sort_key), and create_placement_groups gives the actor the first "
    "--actor-num-nodes x --actor-num-gpus-per-node of them; THUDM/slime v0.3.1 a6272da0"
)


def gpu_pools(facts: PlanFacts, out: Settings, colocated: bool) -> None:
    """Which GPU pool the actor, the rollout and a served reward model need (several pools only).

    slime asks Ray for one placement group of ``{GPU, CPU}`` bundles and hands
    them out in order: the actor's slots first, then the rollout's, then a
    reward model's (:func:`placement_keys`). It has no setting for a GPU type,
    but the order of node IP addresses decides which pool takes which slots.
    """
    if not pooled(facts):
        return
    slots = ["actor.train"] if colocated else ["actor.train", "actor.generate"]
    if facts.has("reward.infer"):
        slots.append("reward.infer")
    roles = (
        ("training (the actor)", "actor.train"),
        ("the rollout", "actor.generate"),
        ("the reward model", "reward.infer"),
    )
    order: list[str] = []
    for name in slots:
        pool = span(facts, name).name
        if not order or order[-1] != pool:
            order.append(pool)
    head = f"{roles_words(facts, roles)}: slime cannot pin a role to a GPU type ({_ORDER})"
    if len(order) == 1:
        out.comment(f"{head}; start the Ray cluster on {pool_words(facts, slots[0])}'s nodes only")
    elif len(set(order)) == len(order):
        out.comment(
            f"{head}; start the Ray cluster on the plan's nodes only, their IP addresses "
            f"rising pool by pool in the order {', '.join(order)}"
        )
    else:
        out.unsupported(
            f"{head}; the slots go to pools {', '.join(order)} in that order, which no order "
            "of node IP addresses gives"
        )
