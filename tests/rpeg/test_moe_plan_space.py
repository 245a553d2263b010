"""Expert and context parallelism in the plan space: enumeration, plan files, pins,
dominance and the local-search move (docs/plan-space.md#expert-and-context-parallelism).

The tiny MoE instance (tests/rpeg/moe_instances.py) has 4 experts, top-2, on 2 GPUs
with placement.expert_parallel [1, 2, 4], expert_tensor_parallel [1, 2] and
context_parallel [1, 2]; S + T = 256 + 512 = 768 tokens.
"""

from __future__ import annotations

import itertools
import json
import random

import pytest

from rlplan.rpeg.errors import InstanceError, PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model import dominance
from rlplan.rpeg.model.candidates import (
    CandidateDirectory,
    dimension_values,
    enumerate_strategies,
    strategy_problem,
)
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness, plan_from_json, plan_to_json
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.search import moves
from rlplan.rpeg.search.annealing import SimulatedAnnealing
from rlplan.rpeg.search.state import SearchState
from rlplan.rpeg.strategy import dimensions_of
from rlplan.rpeg.templates import Kind
from rlplan.solvers import exhaustive
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.rpeg.moe_instances import (
    INSTANCES,
    tiny_moe_document,
    tiny_moe_instance,
    tiny_moe_problem,
)

PAIR = (1, 1, 2)  # the shape of the 2-GPU block
DRAWS = 200


def _product_filter(instance, vertex, shape) -> list[Strategy]:
    """The plan space by brute force: every value of every dimension, tp, pp and
    microbatch count, kept when :func:`strategy_problem` accepts it, in product order."""
    size = shape[0] * shape[1] * shape[2]
    spec = instance.models[vertex.model]
    applying = dimensions_of(vertex.kind)
    choices = [
        (d.default,)
        if d.mixture_only and not spec.is_moe
        else dimension_values(instance, vertex, d)
        for d in applying
    ]
    counts = range(1, instance.workload.sequences + 1) if vertex.kind is not Kind.GENERATE else [1]
    found = []
    for combination in itertools.product(*choices):
        values = dict(zip((d.name for d in applying), combination, strict=True))
        cp = values.get("cp", 1)
        for tp in (2**i for i in range(size.bit_length()) if size % 2**i == 0):
            for pp in range(1, size + 1):
                if size % (tp * pp * cp):
                    continue
                for mb in counts:
                    strategy = Strategy(size // (tp * pp * cp), pp, tp, mb, **values)
                    if strategy_problem(instance, vertex, shape, strategy) is None:
                        found.append(strategy)
    return found


def _dense(name: str, **placement):
    data = read_yaml_file(INSTANCES / name)
    data.setdefault("placement", {}).update(placement)
    return parse_instance(data, name)


@pytest.mark.parametrize(
    "make",
    [
        lambda: tiny_moe_instance(),
        lambda: tiny_moe_instance(pin={"actor.train": {"ep": 2}, "actor.generate": {"tp": 1}}),
        lambda: tiny_moe_instance(context_parallel=[1, 2, 3]),
        lambda: _dense("tiny_ppo_2gpu.yaml", context_parallel=[1, 2], expert_parallel=[1, 2]),
        lambda: parse_instance(
            {**read_yaml_file(INSTANCES / "tiny_ppo_2gpu.yaml"), "engine": {"framework": "verl"}}
        ),
    ],
    ids=["moe", "moe-pinned", "moe-cp3", "dense-cp", "dense-verl"],
)
def test_enumeration_is_the_rule_over_the_whole_product(make):
    """enumerate_strategies generates only valid (ep, etp, cp) per (dp, tp, pp) and only
    valid microbatch counts: the same list, in the same order, as the rule applied to
    every combination. cp 3 would need 768 % 6 == 0 (it is): on 2 GPUs it still fits no
    dp*cp*pp*tp = 2, so it adds nothing."""
    instance = make()
    directory = CandidateDirectory(instance)
    total = 0
    for vertex in directory.template.vertices:
        for shape in directory.cluster.shapes:
            listed = enumerate_strategies(instance, vertex, shape)
            assert listed == _product_filter(instance, vertex, shape), (vertex.name, shape)
            total += len(listed)
    assert total > 0


def test_moe_enumeration_takes_every_expert_layout():
    """On the 2-GPU block actor.train has dp*cp*tp = 2 (pp 1) or 1 (pp 2): ep*etp must
    divide it and etp divide tp. (dp2 tp1): ep 1 or 2, etp 1; (dp1 tp2): ep 1 or 2 with
    etp 1, or ep 1 etp 2; (dp1 cp2 tp1): ep 1 or 2; pp 2: ep 1 — 8 layouts, 1
    microbatch count each (4)."""
    instance = tiny_moe_instance()
    vertex = CandidateDirectory(instance).template.vertices[3]
    assert vertex.name == "actor.train"
    found = {
        (s.dp, s.cp, s.pp, s.tp, s.ep, s.etp) for s in enumerate_strategies(instance, vertex, PAIR)
    }
    assert found == {
        (2, 1, 1, 1, 1, 1), (2, 1, 1, 1, 2, 1), (1, 1, 1, 2, 1, 1), (1, 1, 1, 2, 2, 1),
        (1, 1, 1, 2, 1, 2), (1, 2, 1, 1, 1, 1), (1, 2, 1, 1, 2, 1), (1, 1, 2, 1, 1, 1),
    }  # fmt: skip


# -- plan files --------------------------------------------------------------------------


def _moe_plan(problem: Problem) -> Plan:
    """Every vertex on both GPUs: the rollout at dp 2 ep 2, the old log-probs at tp 2 ep 2,
    the reference at dp 2, the training at dp 1 cp 2 ep 2."""
    block = problem.directory.cluster.blocks_by_shape[PAIR][0]
    strategies = [
        Strategy(2, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=16, ep=2),
        Strategy(1, 1, 2, 4, ep=2),
        Strategy(2, 1, 1, 4),
        Strategy(1, 1, 1, 4, cp=2, ep=2),
    ]
    return Plan(tuple(Placement(block, s) for s in strategies), make_staleness({"actor": 0}))


def test_moe_plan_round_trips_with_expert_keys_only_where_not_one():
    problem = tiny_moe_problem()
    plan = _moe_plan(problem)
    document = json.loads(json.dumps(plan_to_json(plan, problem.directory)))
    vertices = document["vertices"]
    assert {k: vertices["actor.generate"].get(k) for k in ("ep", "etp", "cp")} == {
        "ep": 2, "etp": None, "cp": None}  # fmt: skip
    assert "ep" not in vertices["reference.infer"] and "etp" not in vertices["actor.infer"]
    assert (vertices["actor.train"]["cp"], vertices["actor.train"]["ep"]) == (2, 2)
    assert "etp" not in vertices["actor.train"]
    assert plan_from_json(document, problem.directory) == plan


@pytest.mark.parametrize(
    ("vertex", "changes", "field", "message"),
    [
        ("actor.train", {"ep": 3}, "ep", "ep 3 does not divide the 4 experts"),
        ("actor.train", {"dp": 2, "cp": 1, "ep": 4, "micro_batch_size": 2},
         "ep", "ep*etp = 4 does not divide the 2 GPUs of a pipeline stage"),
        ("actor.generate", {"cp": 2}, "cp", "applies to train and infer vertices only"),
        ("actor.train", {"dp": 2, "cp": 1, "etp": 2, "micro_batch_size": 2},
         "etp", "etp 2 does not divide tp 1"),
    ],
    ids=["ep-experts", "ep-stage", "cp-generate", "etp-tp"],
)  # fmt: skip
def test_plan_with_a_bad_expert_layout_is_refused_naming_the_field(vertex, changes, field, message):
    """One PlanError line whose path is the vertex's ep, etp or cp."""
    problem = tiny_moe_problem()
    document = plan_to_json(_moe_plan(problem), problem.directory)
    del document["instance"]
    document["vertices"][vertex].update(changes)
    with pytest.raises(PlanError) as caught:
        plan_from_json(document, problem.directory)
    assert caught.value.path == f"plan.vertices.{vertex}.{field}"
    assert caught.value.message == message
    assert "\n" not in str(caught.value)


def test_cli_refuses_a_bad_expert_layout_with_exit_code_2(cli, tmp_path):
    problem = tiny_moe_problem()
    document = plan_to_json(_moe_plan(problem), problem.directory)
    del document["instance"]
    document["vertices"]["actor.train"]["ep"] = 3
    instance = tmp_path / "tiny_moe.yaml"
    instance.write_text(json.dumps(tiny_moe_document()))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(document))
    code, _, err = cli("simulate", instance, plan)
    assert code == 2
    assert err.strip().splitlines() == [
        "error: plan.vertices.actor.train.ep: ep 3 does not divide the 4 experts"
    ]


# -- pins ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "pin"),
    [("actor.train", {"ep": 2}), ("actor.train", {"etp": 2}), ("actor.infer", {"cp": 2}),
     ("actor.generate", {"ep": 2})],
)  # fmt: skip
def test_expert_pins_narrow_the_plan_space(name, pin):
    """A pinned vertex enumerates exactly the unpinned strategies with the pinned value."""
    free = tiny_moe_instance()
    pinned = tiny_moe_instance(pin={name: pin})
    directory = CandidateDirectory(pinned)
    vertex = directory.template.vertices[directory.template.index(name)]
    ((field, value),) = pin.items()
    kept = [s for s in enumerate_strategies(free, vertex, PAIR) if getattr(s, field) == value]
    assert kept and enumerate_strategies(pinned, vertex, PAIR) == kept
    options = directory.options[directory.template.index(name)]
    assert options and all(
        getattr(c.strategy, field) == value for cs in options.values() for c in cs
    )


@pytest.mark.parametrize(
    ("document", "path", "message"),
    [
        (lambda: _dense_document({"actor.train": {"etp": 2}}),
         "placement.pin.actor.train.etp",
         "ep and etp apply to mixture-of-experts models only (this one is dense)"),
        (lambda: _dense_document({"actor.generate": {"ep": 2}}, expert_parallel=[1, 2]),
         "placement.pin.actor.generate.ep", "2: the actor is a dense model (only ep 1 applies)"),
        (lambda: tiny_moe_document(pin={"actor.generate": {"ep": 3}}),
         "placement.pin.actor.generate.ep", "3 does not divide the 4 experts of the actor"),
        (lambda: tiny_moe_document(pin={"actor.train": {"cp": 5}}),
         "placement.pin.actor.train.cp",
         "cp 5 cannot split a 768-token sequence into 10 equal chunks (context parallelism "
         "needs S + T to be a multiple of 2*cp)"),
    ],
    ids=["etp-dense", "ep-dense", "ep-experts", "cp-length"],
)  # fmt: skip
def test_impossible_expert_pins_are_refused_at_parse_time(document, path, message):
    with pytest.raises(InstanceError) as caught:
        parse_instance(document(), "pinned")
    assert (caught.value.path, caught.value.message) == (path, message)


def _dense_document(pin, **placement):
    """tiny_rule_grpo_2gpu (a dense actor) with ``placement`` keys and a pin."""
    data = read_yaml_file(INSTANCES / "tiny_rule_grpo_2gpu.yaml")
    data["placement"].update(placement, pin=pin)
    return data


# -- dominance -----------------------------------------------------------------------------


def test_pruned_and_unpruned_directories_have_the_same_optimum():
    """Dominance pruning keeps the optimum: the oracle over the unpruned plan space (every
    candidate that fits and starts: 7 x 10 x 10 x 10 = 7,000 placements, each vertex on
    either GPU with its one candidate there or on both with 5 or 8) proves the same
    makespan as over the pruned one, which is smaller."""
    pruned = tiny_moe_problem()
    full_directory = CandidateDirectory(pruned.instance, prune=False)
    full = Problem(pruned.instance, full_directory, Simulator(full_directory))
    assert exhaustive.plan_space_size(full)[0] == 7000
    assert exhaustive.plan_space_size(pruned)[0] < 7000
    options = SolveOptions(time_limit=120)
    best, brute = exhaustive.solve(pruned, options), exhaustive.solve(full, options)
    assert best.status is Status.OPTIMAL and brute.status is Status.OPTIMAL
    assert best.makespan == pytest.approx(brute.makespan, rel=1e-12)


def _with(plan: Plan, vertex: int, strategy: Strategy) -> Plan:
    return plan.with_placement(vertex, Placement(plan.placements[vertex].block, strategy))


def test_pub_lags_and_refits_do_not_depend_on_cp():
    """cp is outside the weight layout (context parallel ranks hold the same weights):
    changing only cp (dp 1 cp 2 <-> dp 2, same (tp, pp, shards, ep, etp)) changes no pub
    lag or refit, at the source (actor.train) or at a destination (actor.infer), in a
    fresh simulator each time. In the MoE plan the refit into the rollout (same layout as
    the trainer) is the CUDA IPC copy, the pub into actor.infer (tp 2) a reshard; with
    the trainer at tp 2, actor.infer at tp 1 receives a reshard of its own shard."""
    problem = tiny_moe_problem()
    plan = _moe_plan(problem)
    pubs = slice(len(problem.directory.template.data_edges), None)

    def lags(candidate: Plan) -> list[float]:
        return Simulator(CandidateDirectory(problem.instance)).lags(candidate)[pubs]

    train, infer = 3, 1
    base = lags(plan)
    assert len(base) == 2 and all(lag > 0 for lag in base)
    assert lags(_with(plan, train, Strategy(2, 1, 1, 4, ep=2))) == base
    wide = _with(plan, train, Strategy(1, 1, 2, 4, ep=2))
    split = lags(_with(wide, infer, Strategy(1, 1, 1, 4, cp=2, ep=2)))
    replicated = lags(_with(wide, infer, Strategy(2, 1, 1, 4, ep=2)))
    assert split == replicated and split[1] > 0


def test_dominance_keeps_expert_layouts_apart_and_merges_cp():
    """Candidates of a pub-touched vertex that differ in ep or etp are never compared;
    those differing only in cp (with dp) share a key, as do all of a vertex no pub
    edge touches."""
    directory = CandidateDirectory(tiny_moe_instance(), prune=False)
    train = directory.options[3][PAIR]
    by = {(c.strategy.dp, c.strategy.cp, c.strategy.tp, c.strategy.ep, c.strategy.etp): c
          for c in train}  # fmt: skip
    key = dominance.dominance_key
    assert key(by[2, 1, 1, 1, 1], False, (), False) == key(by[1, 2, 1, 1, 1], False, (), False)
    assert key(by[2, 1, 1, 1, 1], False, (), False) != key(by[2, 1, 1, 2, 1], False, (), False)
    assert key(by[1, 1, 2, 1, 1], False, (), True) != key(by[1, 1, 2, 1, 2], False, (), True)
    assert key(by[1, 1, 2, 1, 1], True) == key(by[2, 1, 1, 2, 1], True) == ()


# -- the local-search move -----------------------------------------------------------------


def _state(problem: Problem, plan: Plan) -> SearchState:
    return SearchState.of(plan, problem.simulator.evaluate(plan), problem.simulator.capacity)


def _proposals(problem: Problem, plan: Plan, directory=None) -> list[Plan]:
    context = moves.MoveContext(directory or problem.directory, problem.instance.optimizer)
    rng, state = random.Random(0), _state(problem, plan)
    return [
        p for _ in range(DRAWS) for p in moves.CHANGE_EXPERT_LAYOUT.propose(state, context, rng)
    ]


def _start(problem: Problem) -> Plan:
    """Every vertex on both GPUs with its fastest candidate there."""
    block = problem.directory.cluster.blocks_by_shape[PAIR][0]
    placements = [
        Placement(block, options[PAIR][0].strategy) for options in problem.directory.options
    ]
    return Plan(tuple(placements), make_staleness({"actor": 0}))


def test_change_expert_layout_proposes_only_directory_candidates():
    problem = tiny_moe_problem()
    plan = _start(problem)
    found = _proposals(problem, plan)
    assert found
    layouts = set()
    for proposal in found:
        pairs = zip(plan.placements, proposal.placements, strict=True)
        changed = [v for v, (a, b) in enumerate(pairs) if a != b]
        assert len(changed) == 1
        (vertex,) = changed
        before, after = plan.placements[vertex], proposal.placements[vertex]
        assert after.block == before.block
        assert after.strategy in {c.strategy for c in problem.directory.options[vertex][PAIR]}
        old = (before.strategy.ep, before.strategy.etp, before.strategy.cp)
        new = (after.strategy.ep, after.strategy.etp, after.strategy.cp)
        assert new != old
        layouts.add((vertex, new))
    assert len(layouts) >= 3  # it explores, not one fixed proposal


@pytest.mark.parametrize("start", [_start, _moe_plan], ids=["fastest", "moe"])
def test_change_expert_layout_delta_equals_full_resimulation(start):
    """The search's simulator (its lag cache warm from earlier plans) scores every
    proposal as a fresh simulator does: the score difference to the start is the same.
    From the MoE plan the trainer and the rollout share a layout (a refit without
    reshard); a proposal changing the rollout's ep breaks it."""
    problem = tiny_moe_problem()
    plan = start(problem)
    before = problem.simulator.evaluate(plan).score
    found = _proposals(problem, plan)
    assert found
    for proposal in dict.fromkeys(found):
        warm = problem.simulator.evaluate(proposal).score - before
        fresh_simulator = Simulator(CandidateDirectory(problem.instance))
        assert problem.simulator.lags(proposal) == fresh_simulator.lags(proposal)
        fresh = fresh_simulator.evaluate(proposal).score - fresh_simulator.evaluate(plan).score
        assert warm == pytest.approx(fresh, rel=1e-12, abs=1e-12)


def test_change_expert_layout_fires_and_improves():
    """Over the unpruned directory, actor.train at dp 1 cp 2 (each GPU trains all 16
    sequences, split in two along the sequence) is slower than at dp 2 (8 each):
    the move proposes cp 1 candidates, dp 2 among them, which simulate faster."""
    problem = tiny_moe_problem()
    full = CandidateDirectory(problem.instance, prune=False)
    worse = _with(_start(problem), 3, Strategy(1, 1, 1, 4, cp=2))
    before = problem.simulator.evaluate(worse).makespan
    found = _proposals(problem, worse, full)
    assert any(p.placements[3].strategy.cp == 1 for p in found)
    assert min(problem.simulator.evaluate(p).makespan for p in found) < before * (1 - 1e-9)


def test_change_expert_layout_does_not_fire_on_a_dense_plan_space():
    """tiny_grpo_2gpu has no experts and no context parallel list: one (1, 1, 1) layout;
    the search leaves the move out (its draws stay those of the other moves)."""
    problem = Problem.from_instance(_dense("tiny_grpo_2gpu.yaml"))
    assert not moves.expert_layouts_vary(problem.directory)
    plan = _start(problem)
    assert _proposals(problem, plan) == []
    search = SimulatedAnnealing(problem.simulator)
    assert moves.CHANGE_EXPERT_LAYOUT not in search.parameter
    assert moves.CHANGE_EXPERT_LAYOUT in SimulatedAnnealing(tiny_moe_problem().simulator).parameter


def test_dense_instance_with_context_parallel_takes_the_move():
    """A dense model with placement.context_parallel [1, 2] has two layouts (cp 1, 2)."""
    instance = _dense("tiny_grpo_2gpu.yaml", context_parallel=[1, 2])
    assert moves.expert_layouts_vary(CandidateDirectory(instance))
