"""Which expert, expert-tensor and context parallel degrees a vertex may take.

docs/plan-space.md#expert-and-context-parallelism. On a train or infer
vertex the routed experts of each pipeline stage are laid out over that
stage's ``dp*cp*tp`` GPUs by Megatron's MoE parallel folding: ``ep`` GPUs
share one copy of the experts (each holds ``E/ep`` of them), split ``etp``
ways, and ``edp = dp*cp*tp / (ep*etp)`` such groups hold copies. So ``ep``
divides ``E`` and ``ep*etp`` divides ``dp*cp*tp``; ``etp`` divides ``tp``
(the plan space keeps expert tensor groups inside attention tensor groups,
which holds Megatron's default ``etp = tp`` and the recipes' ``etp = 1``).

On a generate vertex ``ep`` is the GPUs of a stage that share one copy of
the experts with data-parallel attention (vLLM ``enable_expert_parallel``,
SGLang ``--ep-size`` with ``--enable-dp-attention``): 1 (experts tp-sharded
like a dense feed-forward block) or a multiple of ``tp`` dividing ``dp*tp``
and ``E``. A dense model takes 1 everywhere.

Context parallelism splits each sequence into ``2*cp`` chunks (Megatron's
load-balanced causal split), so ``cp`` must split the longest sequence,
``S + T`` tokens, into ``2*cp`` equal chunks.
"""

from __future__ import annotations

from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.templates import Kind


def expert_problem(
    spec: ModelSpec, kind: Kind, dp: int, tp: int, cp: int, ep: int, etp: int
) -> str | None:
    """Why (ep, etp) is outside the plan space of a ``kind`` vertex of ``spec`` (None: inside).

    Parameters
    ----------
    spec
        The vertex's model.
    kind
        The vertex's kind.
    dp, tp, cp
        Its data, tensor and context parallel degrees (per pipeline stage
        ``dp*cp*tp`` GPUs).
    ep, etp
        Its expert and expert tensor parallel degrees (etp 1 on generate vertices).
    """
    if not spec.is_moe:
        if ep != 1 or etp != 1:
            return "ep and etp apply to mixture-of-experts models only (this one is dense)"
        return None
    if spec.experts % ep:
        return f"ep {ep} does not divide the {spec.experts} experts"
    if kind is Kind.GENERATE:
        if ep != 1 and (ep % tp or (dp * tp) % ep):
            return (
                f"a rollout's ep {ep} must be 1 or a multiple of tp {tp} dividing dp*tp {dp * tp}"
            )
        return None
    if tp % etp:
        return f"etp {etp} does not divide tp {tp}"
    stage = dp * cp * tp
    if stage % (ep * etp):
        return f"ep*etp = {ep * etp} does not divide the {stage} GPUs of a pipeline stage"
    return None


def context_problem(cp: int, total_length: int) -> str | None:
    """Why ``cp`` cannot split sequences of ``total_length`` tokens (None: it can)."""
    if cp > 1 and total_length % (2 * cp):
        return (
            f"cp {cp} cannot split a {total_length:,}-token sequence into {2 * cp} equal "
            "chunks (context parallelism needs S + T to be a multiple of 2*cp)"
        )
    return None


def expert_data_parallel(dp: int, tp: int, cp: int, ep: int, etp: int) -> int:
    """Copies of each expert: ``edp = dp*cp*tp / (ep*etp)``."""
    return dp * cp * tp // (ep * etp)
