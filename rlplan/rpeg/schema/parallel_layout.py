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

import itertools
from functools import lru_cache

from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.templates import Kind

#: The dimensions whose values depend on the structural degrees: the enumeration
#: derives their valid values per (dp, tp, cp) instead of listing every product.
LAYOUT_DIMENSIONS = ("ep", "etp", "cp")


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
    found = expert_field_problem(spec, kind, dp, tp, cp, ep, etp)
    return None if found is None else found[1]


def expert_field_problem(
    spec: ModelSpec, kind: Kind, dp: int, tp: int, cp: int, ep: int, etp: int
) -> tuple[str, str] | None:
    """:func:`expert_problem` with the field at fault: ``("ep" | "etp", why)`` (None: none).

    A product ``ep*etp`` that does not divide the stage is the fault of ``etp``
    when ``ep`` alone divides it, else of ``ep``.
    """
    if not spec.is_moe:
        for name, value in (("ep", ep), ("etp", etp)):
            if value != 1:
                return name, f"{name} {value}: {DENSE_WORDS}"
        return None
    if spec.experts % ep:
        return "ep", f"ep {ep} does not divide the {spec.experts} experts"
    if kind is Kind.GENERATE:
        if ep != 1 and (ep % tp or (dp * tp) % ep):
            return "ep", (
                f"a rollout's ep {ep} must be 1 or a multiple of tp {tp} dividing dp*tp {dp * tp}"
            )
        return None
    if tp % etp:
        return "etp", f"etp {etp} does not divide tp {tp}"
    stage = dp * cp * tp
    if stage % (ep * etp):
        name = "etp" if stage % ep == 0 else "ep"
        return name, f"ep*etp = {ep * etp} does not divide the {stage} GPUs of a pipeline stage"
    return None


#: Why a dense model takes no expert dimension.
DENSE_WORDS = "ep and etp apply to mixture-of-experts models only (this one is dense)"


@lru_cache(maxsize=65536)
def expert_layouts(
    spec: ModelSpec,
    kind: Kind,
    dp: int,
    tp: int,
    cp: int,
    eps: tuple[int, ...],
    etps: tuple[int, ...],
) -> tuple[tuple[int, int], ...]:
    """Every (ep, etp) of ``eps`` x ``etps`` :func:`expert_problem` accepts, cached per model.

    Many (vertex, shape) pairs share (dp, tp, cp) and the actor, reference and
    their vertices share one model, so each product is filtered once.
    """
    return tuple(
        (ep, etp)
        for ep, etp in itertools.product(eps, etps)
        if expert_field_problem(spec, kind, dp, tp, cp, ep, etp) is None
    )


def layout_field_problem(
    spec: ModelSpec, kind: Kind, dp: int, tp: int, cp: int, ep: int, etp: int, total_length: int
) -> tuple[str, str] | None:
    """The first expert or context rule (ep, etp, cp) a strategy breaks: ``(field, why)``.

    The text is the one :func:`expert_problem` or :func:`context_problem`
    gives; plan files name the field with it.
    """
    found = expert_field_problem(spec, kind, dp, tp, cp, ep, etp)
    if found is None:
        why = context_problem(cp, total_length)
        found = None if why is None else ("cp", why)
    return found


def dense_pin_problem(spec: ModelSpec, name: str, value: int) -> str | None:
    """Why pinning ``name`` to ``value`` leaves a vertex of the dense ``spec`` no strategy.

    A dense model takes ep = etp = 1 (:func:`expert_field_problem`); other
    fields, and mixtures of experts, are None. (A pinned ep that divides no
    experts and a pinned cp that cannot split ``S + T`` are refused by
    :func:`rlplan.rpeg.schema.expert_checks.check_parallel_pins`.)
    """
    if name in ("ep", "etp") and not spec.is_moe and value != 1:
        return DENSE_WORDS
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
