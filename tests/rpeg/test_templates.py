"""RPEG templates and their unrolling over steps (docs/templates.md)."""

from __future__ import annotations

import pytest

from rlplan.rpeg.templates import Kind, build_template, run_id, unroll


def _named(template, edges):
    names = template.names
    return {(names[e.src], names[e.dst]) for e in edges}


def test_ppo_template():
    """PPO: six vertices, eight data edges, two pub edges as in the table."""
    template = build_template("ppo")
    assert template.names == (
        "actor.generate",
        "reference.infer",
        "reward.infer",
        "critic.infer",
        "actor.train",
        "critic.train",
    )
    assert _named(template, template.data_edges) == {
        ("actor.generate", "reference.infer"),
        ("actor.generate", "reward.infer"),
        ("actor.generate", "critic.infer"),
        ("reference.infer", "actor.train"),
        ("reward.infer", "actor.train"),
        ("critic.infer", "actor.train"),
        ("reward.infer", "critic.train"),
        ("critic.infer", "critic.train"),
    }
    assert len(template.data_edges) == 8
    assert _named(template, template.pub_edges) == {
        ("actor.train", "actor.generate"),
        ("critic.train", "critic.infer"),
    }
    assert {e.model for e in template.pub_edges} == {"actor", "critic"}
    assert template.trained_models == ("actor", "critic")


def test_grpo_template():
    """GRPO: generate -> each infer -> actor.train; one pub edge."""
    template = build_template("grpo")
    assert template.names == ("actor.generate", "reference.infer", "reward.infer", "actor.train")
    assert _named(template, template.data_edges) == {
        ("actor.generate", "reference.infer"),
        ("actor.generate", "reward.infer"),
        ("reference.infer", "actor.train"),
        ("reward.infer", "actor.train"),
    }
    assert len(template.data_edges) == 4
    assert _named(template, template.pub_edges) == {("actor.train", "actor.generate")}
    assert template.trained_models == ("actor",)


def test_dpo_template():
    """Online DPO: generate -> reference.infer -> actor.train; one pub edge."""
    template = build_template("dpo")
    assert template.names == ("actor.generate", "reference.infer", "actor.train")
    assert _named(template, template.data_edges) == {
        ("actor.generate", "reference.infer"),
        ("reference.infer", "actor.train"),
    }
    assert _named(template, template.pub_edges) == {("actor.train", "actor.generate")}
    assert template.pub_edges[0].model == "actor"


def test_vertex_kinds_and_depths():
    """Vertex kinds follow the names; PPO depths are 0, 1, 1, 1, 2, 2."""
    template = build_template("ppo")
    assert [v.kind for v in template.vertices] == [
        Kind.GENERATE,
        Kind.INFER,
        Kind.INFER,
        Kind.INFER,
        Kind.TRAIN,
        Kind.TRAIN,
    ]
    # generate 0; each infer 1 (after generate); both trains 2 (after an infer)
    assert template.depths() == (0, 1, 1, 1, 2, 2)


def test_unknown_algorithm_is_rejected():
    """Only ppo, grpo and dpo have templates."""
    with pytest.raises(ValueError, match="unknown algorithm"):
        build_template("sac")


def _pub_sources(template, edges, model_vertex, step):
    """Steps of the train runs the user ``model_vertex`` at ``step`` waits for via pub edges."""
    count = len(template.vertices)
    pub_start = len(template.data_edges)
    target = run_id(template.index(model_vertex), step, count)
    return sorted(
        (template.names[e.src % count], e.src // count)
        for e in edges
        if e.dst == target and e.template_edge >= pub_start
    )


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "dpo"])
def test_unroll_staleness_zero(algorithm):
    """sigma = 0: generate at step t waits for train at step t-1; step 0 waits for none."""
    template = build_template(algorithm)
    staleness = dict.fromkeys(template.trained_models, 0)
    edges = unroll(template, 3, staleness)
    # step - 1 - 0: step 2 -> 1, step 1 -> 0, step 0 -> -1 (none)
    assert _pub_sources(template, edges, "actor.generate", 2) == [("actor.train", 1)]
    assert _pub_sources(template, edges, "actor.generate", 1) == [("actor.train", 0)]
    assert _pub_sources(template, edges, "actor.generate", 0) == []


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "dpo"])
def test_unroll_staleness_one(algorithm):
    """sigma = 1: generate at step 2 waits for train at step 0; steps 0 and 1 wait for none."""
    template = build_template(algorithm)
    staleness = dict.fromkeys(template.trained_models, 1)
    edges = unroll(template, 3, staleness)
    # step - 1 - 1: step 2 -> 0, step 1 -> -1 (none), step 0 -> -2 (none)
    assert _pub_sources(template, edges, "actor.generate", 2) == [("actor.train", 0)]
    assert _pub_sources(template, edges, "actor.generate", 1) == []
    assert _pub_sources(template, edges, "actor.generate", 0) == []


def test_unroll_mixed_staleness_ppo():
    """PPO with actor sigma 1 and critic sigma 0: each model's users follow their own sigma."""
    template = build_template("ppo")
    edges = unroll(template, 3, {"actor": 1, "critic": 0})
    assert _pub_sources(template, edges, "actor.generate", 2) == [("actor.train", 0)]
    assert _pub_sources(template, edges, "critic.infer", 2) == [("critic.train", 1)]
    assert _pub_sources(template, edges, "critic.infer", 1) == [("critic.train", 0)]
    assert _pub_sources(template, edges, "critic.infer", 0) == []


def test_unroll_edge_counts_and_chains():
    """PPO over 3 steps at sigma 0 has 24 data, 4 pub and 12 chain edges."""
    template = build_template("ppo")
    edges = unroll(template, 3, {"actor": 0, "critic": 0})
    count = len(template.vertices)
    data = [e for e in edges if 0 <= e.template_edge < len(template.data_edges)]
    pub = [e for e in edges if e.template_edge >= len(template.data_edges)]
    chain = [e for e in edges if e.template_edge == -1]
    # data: 8 per step x 3; pub: 2 models x steps 1, 2; chain: 6 vertices x steps 1, 2
    assert (len(data), len(pub), len(chain)) == (24, 4, 12)
    # data edges stay inside a step
    assert all(e.src // count == e.dst // count for e in data)
    # chain edges join a vertex's consecutive runs
    assert {(e.src, e.dst) for e in chain} == {
        (run_id(v, t - 1, count), run_id(v, t, count)) for v in range(count) for t in (1, 2)
    }


def test_run_ids_are_step_major():
    """Run ids number runs step-major, template order within a step."""
    # ppo has 6 vertices: (vertex 4, step 2) -> 2*6 + 4 = 16
    assert run_id(4, 2, 6) == 16


# -- old log-probs: actor.infer (docs/cost-model.md) -----------------------------------


@pytest.mark.parametrize(
    ("algorithm", "users"),
    [
        ("ppo", ("reference.infer", "reward.infer", "critic.infer")),
        ("grpo", ("reference.infer", "reward.infer")),
        ("dpo", ("reference.infer",)),
    ],
)
def test_actor_infer_sits_between_generation_and_training(algorithm, users):
    """recompute_logprobs adds actor.infer: generate -> actor.infer -> actor.train."""
    plain = build_template(algorithm)
    template = build_template(algorithm, recompute_logprobs=True)
    # inserted right after actor.generate; the other vertices keep their order
    assert template.names == (plain.names[0], "actor.infer", *plain.names[1:])
    assert template.vertices[1].kind is Kind.INFER and template.vertices[1].model == "actor"
    # two new data edges, the others unchanged
    assert _named(template, template.data_edges) == _named(plain, plain.data_edges) | {
        ("actor.generate", "actor.infer"),
        ("actor.infer", "actor.train"),
    }
    # a second pub edge of the actor's weights, synchronous (staleness fixed at 0)
    edges = {(template.names[e.src], template.names[e.dst]): e for e in template.pub_edges}
    assert edges[("actor.train", "actor.infer")].synchronous
    assert edges[("actor.train", "actor.infer")].staleness_model is None
    assert edges[("actor.train", "actor.infer")].model == "actor"
    assert not edges[("actor.train", "actor.generate")].synchronous
    assert edges[("actor.train", "actor.generate")].staleness_model == "actor"
    # depth: actor.infer reads the rollout (1), like the other scorers; the trains stay last
    depths = dict(zip(template.names, template.depths(), strict=True))
    assert depths["actor.infer"] == 1
    assert all(depths[name] == 1 for name in users)
    assert depths["actor.train"] == 2


def test_synchronous_pub_edge_ignores_the_actor_staleness():
    """Actor staleness 1: generate at t waits for train at t-2, actor.infer still for t-1."""
    template = build_template("ppo", recompute_logprobs=True)
    edges = unroll(template, 3, {"actor": 1, "critic": 0})
    # rollout: step - 1 - 1; old log-probs: step - 1 - 0 (the current policy)
    assert _pub_sources(template, edges, "actor.generate", 2) == [("actor.train", 0)]
    assert _pub_sources(template, edges, "actor.generate", 1) == []
    assert _pub_sources(template, edges, "actor.infer", 2) == [("actor.train", 1)]
    assert _pub_sources(template, edges, "actor.infer", 1) == [("actor.train", 0)]
    assert _pub_sources(template, edges, "actor.infer", 0) == []
    # staleness 3 changes the rollout's wait only
    edges = unroll(template, 3, {"actor": 3, "critic": 0})
    assert _pub_sources(template, edges, "actor.generate", 2) == []
    assert _pub_sources(template, edges, "actor.infer", 2) == [("actor.train", 1)]


def test_unroll_edge_counts_with_actor_infer():
    """PPO with actor.infer over 3 steps at sigma 0: 30 data, 6 pub, 14 chain edges."""
    template = build_template("ppo", recompute_logprobs=True)
    edges = unroll(template, 3, {"actor": 0, "critic": 0})
    data = [e for e in edges if 0 <= e.template_edge < len(template.data_edges)]
    pub = [e for e in edges if e.template_edge >= len(template.data_edges)]
    chain = [e for e in edges if e.template_edge == -1]
    # data: 10 per step x 3; pub: 3 edges x steps 1, 2; chain: 7 vertices x steps 1, 2
    assert (len(data), len(pub), len(chain)) == (30, 6, 14)
