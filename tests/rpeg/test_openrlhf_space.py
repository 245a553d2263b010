"""OpenRLHF's plan space (rlplan/rpeg/model/frameworks/openrlhf.py, OpenRLHF v0.11.0).

The rules against plans written by hand (tests/rpeg/test_export_openrlhf.py):
the plans inside the space break none and export as they are; each plan
changed to break one fact breaks its rule; the instances OpenRLHF cannot run
at all are unsupported.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from rlplan.outputs.frameworks import export_config
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import plan_problems
from rlplan.rpeg.model.plan import plan_from_json
from tests.rpeg.test_export_openrlhf import (
    ASYNC_APART,
    COLOCATED,
    HAND,
    NEMO,
    NEMO_ASYNC,
    NODE0,
    NODE1,
    PPO,
    PPO_SPLIT,
    ROOT,
    SPACE,
    _cluster,
    _hand,
    _lines,
    _problem,
)


def test_hand_plans_lie_in_the_openrlhf_space():
    """The hand plans break no rule: they are what export-config lets through."""
    for name, build in HAND.items():
        problem, plan = build()
        assert SPACE.unsupported(problem.instance) is None, name
        assert plan_problems(SPACE, problem.directory.template, plan, _cluster(problem)) == [], name
        assert export_config(problem, plan, "openrlhf", "plan.json").splitlines() == _lines(
            problem, plan
        )


def test_every_rule_is_cited_and_explained():
    """One rule per fact, each with words, what would lift it and a source at the release."""
    names = [rule.name for rule in SPACE.rules]
    assert len(names) == len(set(names))
    for rule in SPACE.rules:
        assert rule.words and rule.need, rule.name
        assert "OpenRLHF/OpenRLHF v0.11.0 (3c3be623)" in rule.source, rule.name


def _changed(document: dict, staleness: dict | None = None, **vertices: dict) -> dict:
    changed = copy.deepcopy(document)
    if staleness is not None:
        changed["staleness"] = staleness
    for name, fields in vertices.items():
        changed["vertices"][name.replace("__", ".")].update(fields)
    return changed


def _broken(base: Path, document: dict, **engine: Any) -> set[str]:
    problem, plan = _hand(base, document, **engine)
    found = plan_problems(SPACE, problem.directory.template, plan, _cluster(problem))
    return {re.search(r"OpenRLHF rule ([\w-]+):", line).group(1) for line in found}


@pytest.mark.parametrize(
    ("base", "document", "rules"),
    [
        # Async training with the rollout on the training GPUs (train_ppo_ray.py).
        (
            NEMO_ASYNC,
            _changed(COLOCATED, staleness={"actor": 1}),
            {"async-rollout-apart-from-actor", "async-rollout-apart-from-reference"},
        ),
        (NEMO_ASYNC, ASYNC_APART, set()),
        # The reference on half of the actor's GPUs: groups share all GPUs or none.
        (
            NEMO,
            _changed(COLOCATED, reference__infer={"block": NODE1, "dp": 8}),
            {"whole-groups"},
        ),
        # Old log-probs apart from the actor, or in another layout.
        (NEMO, _changed(COLOCATED, actor__infer={"block": NODE1, "dp": 8}), {"logprobs-on-actor"}),
        (NEMO, _changed(COLOCATED, actor__infer={"dp": 8, "pp": 2}), {"deepspeed-no-pp"}),
        (NEMO, _changed(COLOCATED, actor__infer={"offload": True}), {"logprobs-resident"}),
        (
            NEMO,
            _changed(COLOCATED, actor__generate={"max_num_seqs": 256}),
            {"rollout-max-num-seqs"},
        ),
        (NEMO, _changed(COLOCATED, actor__train={"dp": 8, "tp": 2}), {"deepspeed-tp-1"}),
        (PPO, _changed(PPO_SPLIT, staleness={"actor": 0, "critic": 1}), {"critic-on-policy"}),
        (PPO, _changed(PPO_SPLIT, critic__infer={"block": NODE0}), {"values-on-critic"}),
    ],
)
def test_rules_refuse_what_openrlhf_cannot_run(base, document, rules):
    """Each rule finds the plans breaking its fact (and the unchanged plans break none)."""
    assert rules <= _broken(base, document)
    if not rules:
        assert _broken(base, document) == set()


def test_unsupported_instances():
    """Online DPO, the fused actor-critic and old log-probs from the rollout: no plan at all."""
    assert SPACE.unsupported(_problem(NEMO).instance) is None
    assert SPACE.unsupported(_problem(NEMO, recompute_logprobs=False).instance).name == (
        "logprobs-recomputed"
    )
    dpo = Problem.load(str(ROOT / "instances" / "tiny_dpo_2gpu.yaml")).instance
    assert SPACE.unsupported(dpo).name == "no-online-dpo"
    fused = Problem.load(str(ROOT / "instances" / "tiny_ppo_2gpu_ac.yaml"))
    assert SPACE.unsupported(fused.variant("ac_share").instance).name == "no-fused-actor-critic"


def test_dpo_optimum_is_exported_outside_the_space():
    """tiny_dpo_2gpu_v2's optimum (test_frameworks.DPO_V2_OPTIMUM): online DPO and a
    reference on one of the actor's GPUs break rules; the export says what it cannot set."""
    from tests.rpeg.test_frameworks import DPO_V2_OPTIMUM

    problem = Problem.load(str(ROOT / "instances" / "tiny_dpo_2gpu_v2.yaml"))
    plan = plan_from_json(copy.deepcopy(DPO_V2_OPTIMUM), problem.directory)
    assert SPACE.unsupported(problem.instance).name == "no-online-dpo"
    found = plan_problems(SPACE, problem.directory.template, plan, 2)
    assert any("rule whole-groups" in line for line in found)
    lines = _lines(problem, plan)
    assert lines[5].startswith("# not expressible in OpenRLHF: online DPO")
    for line in (
        "--vllm.num_engines 1",
        "--vllm.tensor_parallel_size 2",
        "--ds.zero_stage 3",
        "--ds.enable_sleep",
        "--train.micro_batch_size 4",
        "--rollout.micro_batch_size 8",
        "--ref.offload",
        "--train.async_enable",
        "--train.async_queue_size 1",
        "# not expressible in OpenRLHF: actor.train on GPUs 0-1 and reference.infer on GPU 1 "
        "(with these flags the actor and ref groups share no GPU)",
        "# not expressible in OpenRLHF: actor.infer offload true (it runs on its group's "
        "resident weights)",
    ):
        assert line in lines
    assert "--train.colocate_all" not in lines
    assert "--vllm.enable_sleep" not in lines
