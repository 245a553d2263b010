"""Strategy dimensions are declared once (rlplan.rpeg.strategy) and everything follows.

The first tests pin the declaration itself: the fields each vertex kind has,
the defaults (the plan space's and a strategy's), the choices as the strings
plan files and instances spell. The others declare a throw-away dimension and
show that, with no other edit, it reaches the ``placement`` section, strategy
enumeration, plan files (written and read back), pins, plan diffs and the
framework settings of ``report.md``.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from rlplan.rpeg import strategy
from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.schema.instance import PlacementConfig
from rlplan.rpeg.schema.pins import STRATEGY_FIELDS, VertexPin
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.strategy import DIMENSIONS, Recompute, Sharding, plan_fields
from rlplan.rpeg.templates import Kind

INSTANCES = Path(__file__).resolve().parents[2] / "instances"


# -- the declaration ------------------------------------------------------------------


def test_each_kind_has_the_plan_file_fields_it_always_had():
    """Plan files and pins take these fields, in this order, per vertex kind."""
    assert plan_fields(Kind.GENERATE) == (
        "dp",
        "pp",
        "tp",
        "gpu_memory_utilization",
        "max_num_seqs",
        "ep",
    )
    assert plan_fields(Kind.INFER) == (
        "dp",
        "pp",
        "tp",
        "microbatches",
        "micro_batch_size",
        "offload",
        "ep",
        "etp",
        "cp",
    )
    assert plan_fields(Kind.TRAIN) == (
        "dp",
        "pp",
        "tp",
        "microbatches",
        "micro_batch_size",
        "recompute",
        "sharding",
        "offload",
        "ep",
        "etp",
        "cp",
    )
    assert {kind: plan_fields(kind) for kind in Kind} == STRATEGY_FIELDS


def test_the_declared_dimensions_and_where_they_apply():
    assert [d.name for d in DIMENSIONS] == [
        "recompute",
        "sharding",
        "offload",
        "gpu_memory_utilization",
        "max_num_seqs",
        "ep",
        "etp",
        "cp",
    ]
    kinds = {d.name: d.kinds for d in DIMENSIONS}
    assert kinds == {
        "recompute": {Kind.TRAIN},
        "sharding": {Kind.TRAIN},
        "offload": {Kind.TRAIN, Kind.INFER},
        "gpu_memory_utilization": {Kind.GENERATE},
        "max_num_seqs": {Kind.GENERATE},
        "ep": set(Kind),
        "etp": {Kind.TRAIN, Kind.INFER},
        "cp": {Kind.TRAIN, Kind.INFER},
    }
    assert [d.label for d in DIMENSIONS] == [
        "recompute",
        "sharding",
        "offload",
        "gpu_memory_utilization",
        "max_num_seqs",
        "expert_parallel",
        "expert_tensor_parallel",
        "context_parallel",
    ]
    # the candidate lists of the expert and context parallel degrees
    assert [d.placement_key for d in DIMENSIONS[5:]] == [
        "placement.expert_parallel",
        "placement.expert_tensor_parallel",
        "placement.context_parallel",
    ]
    assert strategy.dimension("offload").applies_words == "train and infer vertices only"


def test_choices_keep_the_strings_of_plan_files_and_instances():
    assert [str(c) for c in strategy.dimension("recompute").choices] == ["none", "full"]
    assert [str(c) for c in strategy.dimension("sharding").choices] == ["zero1", "zero3"]
    assert strategy.dimension("offload").choices == (False, True)
    # numbers read as given: a fraction in (0, 1] and a positive count
    assert strategy.dimension("gpu_memory_utilization").choices is None
    assert strategy.dimension("max_num_seqs").choices is None
    assert strategy.dimension("gpu_memory_utilization").numeric
    assert not strategy.dimension("offload").numeric
    # str enums: equal to, hashed like and serialised as their strings.
    assert Recompute.FULL == "full" and hash(Sharding.ZERO3) == hash("zero3")
    assert json.dumps([Recompute.NONE, Sharding.ZERO1]) == '["none", "zero1"]'


def test_defaults_are_the_plan_space_and_strategy_defaults_of_before():
    placement = PlacementConfig()
    assert placement.recompute == ("none", "full")
    assert placement.sharding == ("zero1", "zero3")
    assert placement.offload == (False, True)
    # the rollout engine's share of a GPU as verl, NeMo RL, vLLM and OpenRLHF set it, and
    # vLLM's two max_num_seqs defaults (rlplan/rpeg/strategy.py cites the files)
    assert placement.gpu_memory_utilization == (0.5, 0.6, 0.8, 0.9, 0.95)
    assert placement.max_num_seqs == (256, 1024)
    assert placement.micro_batch_sizes == (1, 2, 4, 8)
    assert placement.microbatches is None
    plain = Strategy(1, 1, 1)
    assert (plain.microbatches, plain.recompute, plain.sharding, plain.offload) == (
        1,
        "none",
        "zero1",
        False,
    )
    assert (plain.gpu_memory_utilization, plain.max_num_seqs) == (0.0, 0)


def test_strategy_fields_follow_the_declaration_in_order():
    names = [f.name for f in dataclasses.fields(Strategy) if f.init]
    assert names == ["dp", "pp", "tp", "microbatches", *(d.name for d in DIMENSIONS)]
    pin_names = [f.name for f in dataclasses.fields(VertexPin)]
    assert pin_names == [
        "origin",
        "extent",
        "pool",
        "dp",
        "pp",
        "tp",
        "microbatches",
        "micro_batch_size",
        *(d.name for d in DIMENSIONS),
    ]
    # Positional construction keeps the order it always had.
    assert Strategy(2, 1, 1, 4, "full", "zero3", True, 0.0, 0) == Strategy(
        2, 1, 1, 4, recompute="full", sharding="zero3", offload=True
    )


def test_hash_layout_and_label_come_from_the_declaration():
    zero3 = Strategy(4, 1, 2, 2, Recompute.FULL, Sharding.ZERO3, True)
    assert hash(zero3) == hash((4, 1, 2, 2, "full", "zero3", True, 0.0, 0, 1, 1, 1))
    assert hash(zero3) == hash(Strategy(4, 1, 2, 2, "full", "zero3", True))
    assert zero3.layout == (2, 1, 4, 1, 1)
    assert Strategy(4, 1, 2, 2).layout == (2, 1, 1, 1, 1)
    assert zero3.label() == "dp4 pp1 tp2 mb2 recompute zero3 offload"
    assert Strategy(4, 1, 2, 2).label() == "dp4 pp1 tp2 mb2"
    rollout = Strategy(8, 1, 1, gpu_memory_utilization=0.8, max_num_seqs=256)
    assert rollout.label() == "dp8 pp1 tp1 u0.8 s256"
    experts = Strategy(4, 1, 2, 2, ep=8, etp=2, cp=2)
    assert experts.label() == "dp4 pp1 tp2 mb2 ep8 etp2 cp2"
    assert experts.layout == (2, 1, 1, 8, 2) and experts.gpus == 16


# -- a throw-away dimension -------------------------------------------------------------

#: Modules the throw-away dimension must not be re-imported for: the declaration
#: itself and what it imports (their classes stay shared with the rest of the suite).
_BASE = ("rlplan", "rlplan.rpeg", "rlplan.rpeg.strategy", "rlplan.rpeg.errors")
_BASE += ("rlplan.rpeg.templates",)


def _fresh_import(names: tuple[str, ...]) -> dict[str, ModuleType]:
    """Import ``names`` anew (every ``rlplan`` module but the base ones is dropped first)."""
    for name in [n for n in sys.modules if n.startswith("rlplan") and n not in _BASE]:
        del sys.modules[name]
    return {name: importlib.import_module(name) for name in names}


@pytest.fixture
def overlap(monkeypatch: pytest.MonkeyPatch):
    """The code base as if :data:`DIMENSIONS` declared a train-only ``overlap`` flag.

    The declaration tuple is patched and every module above it imported anew
    (classes built from the declaration are built when their module is); on
    teardown the original modules and the package attributes pointing at
    them come back.
    """
    declared = strategy.Dimension(
        name="overlap",
        kinds=frozenset({Kind.TRAIN}),
        values=bool,
        default=False,
        candidates=(False, True),
        label="comm_overlap",
        tag=lambda value: "overlap",
    )
    saved = {name: module for name, module in sys.modules.items() if name.startswith("rlplan")}
    monkeypatch.setattr(strategy, "DIMENSIONS", (*strategy.DIMENSIONS, declared))
    try:
        modules = _fresh_import(
            (
                "rlplan.rpeg.schema.instance",
                "rlplan.rpeg.model.candidates",
                "rlplan.rpeg.model.plan",
                "rlplan.rpeg.evaluation.problem",
                "rlplan.rpeg.search.baselines",
                "rlplan.compare.plandiff",
                "rlplan.outputs.vocabulary",
            )
        )
        yield SimpleNamespace(
            **{name.rsplit(".", 1)[1]: module for name, module in modules.items()}
        )
    finally:
        for name in [n for n in sys.modules if n.startswith("rlplan")]:
            del sys.modules[name]
        sys.modules.update(saved)
        for name, module in saved.items():
            parent, _, child = name.rpartition(".")
            if parent in saved:
                setattr(saved[parent], child, module)


def _document(pin: Any = None, **placement: Any) -> dict[str, Any]:
    data = copy.deepcopy(read_yaml_file(INSTANCES / "tiny_ppo_2gpu.yaml"))
    section = data.setdefault("placement", {})
    section.update(placement)
    if pin is not None:
        section["pin"] = pin
    return data


def _greedy(fresh: SimpleNamespace, data: dict[str, Any]):
    instance = fresh.instance.parse_instance(data, "tiny_ppo_2gpu.yaml")
    problem = fresh.problem.Problem.from_instance(instance)
    plan = fresh.baselines.greedy_plan(problem.directory, problem.simulator)
    assert plan is not None
    return problem, plan


def _with_overlap(plan, index: int):
    placement = plan.placements[index]
    moved = dataclasses.replace(placement.strategy, overlap=True)
    return plan.with_placement(index, dataclasses.replace(placement, strategy=moved))


def test_a_declared_dimension_reaches_the_plan_space(overlap):
    """``placement.overlap`` lists its candidates; train vertices enumerate them."""
    instance = overlap.instance.parse_instance(_document(overlap=[True]), "tiny")
    assert instance.placement.overlap == (True,)
    directory = overlap.candidates.CandidateDirectory(instance)
    train = directory.template.index("actor.train")
    vertex = directory.template.vertices[train]
    strategies = overlap.candidates.enumerate_strategies(instance, vertex, (1, 1, 2))
    assert strategies and all(s.overlap is True for s in strategies)
    assert "overlap" in strategies[0].label()
    generate = directory.template.vertices[directory.template.index("actor.generate")]
    rollouts = overlap.candidates.enumerate_strategies(instance, generate, (1, 1, 2))
    assert rollouts and all(s.overlap is False for s in rollouts)
    with pytest.raises(InstanceError) as caught:
        overlap.instance.parse_instance(_document(overlap=["yes"]), "tiny")
    assert caught.value.path == "placement.overlap[0]"


def test_a_declared_dimension_reaches_plan_files(overlap):
    """Written on the vertices it applies to, read back, refused where it does not apply."""
    problem, plan = _greedy(overlap, _document())
    directory = problem.directory
    train = directory.template.index("actor.train")
    changed = _with_overlap(plan, train)
    document = json.loads(json.dumps(overlap.plan.plan_to_json(changed, directory)))
    assert document["vertices"]["actor.train"]["overlap"] is True
    assert document["vertices"]["critic.train"]["overlap"] is False
    assert "overlap" not in document["vertices"]["actor.generate"]
    assert list(document["vertices"]["actor.train"])[-1] == "overlap"
    read = overlap.plan.plan_from_json(document, directory)
    assert read == changed and read.placements[train].strategy.overlap is True
    # A v1-style plan without the key reads the default.
    del document["vertices"]["actor.train"]["overlap"]
    assert overlap.plan.plan_from_json(document, directory) == plan.with_placement(
        train, plan.placements[train]
    )
    document["vertices"]["actor.generate"]["overlap"] = True
    with pytest.raises(overlap.plan.PlanError, match="train vertices only"):
        overlap.plan.plan_from_json(document, directory)


def test_a_declared_dimension_reaches_pins(overlap):
    """A pin takes it on the kinds it applies to and filters strategies by it."""
    instance = overlap.instance.parse_instance(
        _document(pin={"actor.train": {"overlap": True}}), "tiny"
    )
    assert instance.placement.pin.vertex("actor.train").overlap is True
    directory = overlap.candidates.CandidateDirectory(instance)
    vertex = directory.template.vertices[directory.template.index("actor.train")]
    free = overlap.candidates.enumerate_strategies(instance, vertex, (1, 1, 2))
    assert free and all(s.overlap for s in free)
    broken = dataclasses.replace(free[0], overlap=False)
    problem = overlap.candidates.strategy_problem(instance, vertex, (1, 1, 2), broken)
    assert problem == "placement.pin.actor.train: overlap true pinned, got false"
    with pytest.raises(InstanceError) as caught:
        overlap.instance.parse_instance(
            _document(pin={"actor.generate": {"overlap": True}}), "tiny"
        )
    assert caught.value.path == "placement.pin.actor.generate.overlap"
    assert caught.value.message == "applies to train vertices only"
    with pytest.raises(InstanceError, match=r"not among placement\.overlap"):
        overlap.instance.parse_instance(
            _document(pin={"actor.train": {"overlap": True}}, overlap=[False]), "tiny"
        )


def test_a_declared_dimension_reaches_plan_diffs_and_the_report(overlap):
    """The plan diff names it; the framework settings of report.md have its column."""
    problem, plan = _greedy(overlap, _document())
    directory = problem.directory
    train = directory.template.index("actor.train")
    changed = _with_overlap(plan, train)
    before = overlap.plan.plan_to_json(plan, directory)
    after = overlap.plan.plan_to_json(changed, directory)
    assert overlap.plandiff.plan_changes(before, after) == [
        "actor.train strategy: overlap off -> on"
    ]
    view = overlap.vocabulary.framework_view(problem, changed)
    assert view["vertices"]["actor.train"]["comm_overlap"] is True
    assert "comm_overlap" not in view["vertices"]["actor.generate"]
    lines = overlap.vocabulary.framework_markdown(view)
    header = next(line for line in lines if line.startswith("| vertex |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    row = next(line for line in lines if line.startswith("| actor.train |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert len(cells) == len(columns)
    assert cells[columns.index("comm_overlap")] == "yes"
    generate = next(line for line in lines if line.startswith("| actor.generate |"))
    assert [c.strip() for c in generate.strip("|").split("|")][columns.index("comm_overlap")] == "—"
