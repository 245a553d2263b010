"""Optimizer steps per RL step (``workload.optimizer_steps``) in the cost model and plan space.

A train run of n optimizer steps is n mini-batches of m/n microbatches per
replica (docs/cost-model.md, train time): ZeRO-1/2 take
``(m + n*(pp-1)) * stage + n * sync``, ZeRO-3 ``(m + n*(pp-1)) * max(stage, comm)``.
The numbers start from the small instance of tests/rpeg/conftest.py (module
docstring of test_cost_v2.py: d=64, L=2, V=256, F=1e12 FLOP/s, m_half=5, every
beta 1e9 B/s, S=T=4, so a padded sequence has l = 8 tokens; P = 106_496).
"""

from __future__ import annotations

import pytest

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.model.candidates import enumerate_strategies, strategy_problem
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.schema.workload import Workload
from rlplan.rpeg.templates import Kind, Vertex

TRAIN = Vertex("actor", Kind.TRAIN)
REFERENCE = Vertex("reference", Kind.INFER)
BLOCK = (1, 1, 4)

# The hand computation shared below: 8 sequences on dp 2 x pp 2 x tp 1, mb 2 per
# replica -> b = ceil(4 / 2) = 2 sequences of l = 8 tokens, M = 16 tokens per microbatch.
#   slowest stage: ceil(2/2) = 1 layer + the head
#   layer 2*36864*16 + 2*8^2*64*2 = 1_179_648 + 16_384 = 1_196_032; head 2*16384*16 = 524_288
#   1_720_320 FLOP at eff 16/21: GEMM 1_720_320*21/16 / 1e12 = 2.25792e-6 s
#   PP p2p of M*d*2 = 2048 B: 2e-6 + 2048e-9 = 4.048e-6 s (twice: forward and backward)
#   stage = 3*2.25792e-6 + 2*4.048e-6 = 6.77376e-6 + 8.096e-6 = 1.486976e-5 s
#   gradient shard 2P/(tp*pp) = 106_496 B, all-reduce over dp 2:
#   sync = 2*1*1e-6 + 2*(1/2)*106_496e-9 = 2e-6 + 1.06496e-4 = 1.08496e-4 s
STAGE = 1.486976e-5
SYNC = 1.08496e-4


def pipeline_instance(small_instance_data, make_instance, steps: int | None, **placement):
    """The small instance with 8 sequences on 4 GPUs and ``steps`` optimizer steps."""
    data = small_instance_data
    data["hardware"].update(gpus_per_node=4, alpha_coll_g=1e-6, alpha_p2p_g=2e-6)
    data["workload"]["batch_size"] = 8
    if steps is not None:
        data["workload"]["optimizer_steps"] = steps
    data["placement"].update(placement)
    return make_instance(data)


def test_one_optimizer_step_is_the_single_sync_formula(small_instance_data, make_instance):
    """n = 1 (the default): (m + pp - 1) * stage + sync, the model without the field."""
    cost = CostModel(pipeline_instance(small_instance_data, make_instance, None))
    assert cost.workload.optimizer_steps == 1
    # (2 + 1) * 1.486976e-5 + 1.08496e-4 = 4.460928e-5 + 1.08496e-4 = 1.5310528e-4 s
    time = cost.run_time(TRAIN, BLOCK, Strategy(2, 2, 1, 2))
    assert time == pytest.approx(1.5310528e-4, rel=1e-12)
    assert time == pytest.approx(3 * STAGE + SYNC, rel=1e-12)


def test_each_optimizer_step_refills_the_pipeline_and_syncs(small_instance_data, make_instance):
    """n = 2, ZeRO-1: (m + n*(pp-1)) * stage + n * sync = 4 * stage + 2 * sync."""
    cost = CostModel(pipeline_instance(small_instance_data, make_instance, 2))
    # (2 + 2*1) * 1.486976e-5 + 2 * 1.08496e-4 = 5.947904e-5 + 2.16992e-4 = 2.7647104e-4 s
    time = cost.run_time(TRAIN, BLOCK, Strategy(2, 2, 1, 2))
    assert time == pytest.approx(2.7647104e-4, rel=1e-12)


def test_zero3_pays_one_fill_per_optimizer_step_and_no_extra_sync(
    small_instance_data, make_instance
):
    """ZeRO-3: (m + n*(pp-1)) * max(stage, comm), its gradients reduce-scattered per microbatch."""
    # comm = 3 all-gathers of the 106_496-byte shard over dp 2:
    #   3 * ((2-1)*1e-6 + (1/2)*106_496e-9) = 3 * 5.4248e-5 = 1.62744e-4 s > stage
    strategy = Strategy(2, 2, 1, 2, sharding="zero3")
    one = CostModel(pipeline_instance(small_instance_data, make_instance, 1))
    assert one.run_time(TRAIN, BLOCK, strategy) == pytest.approx(3 * 1.62744e-4, rel=1e-12)
    two = CostModel(pipeline_instance(small_instance_data, make_instance, 2))
    assert two.run_time(TRAIN, BLOCK, strategy) == pytest.approx(4 * 1.62744e-4, rel=1e-12)


def test_pipeline_holds_at_most_one_mini_batch_in_flight(small_instance_data, make_instance):
    """Activations of min(pp, m/n) microbatches: pp 2, mb 2, n 2 keeps one (test_cost.py's
    pipelined footprint: one layer 18_688 B at b = 2, tp 2, logits 8_192 B)."""
    data = small_instance_data
    data["workload"]["batch_size"] = 4
    strategy = Strategy(1, 2, 2, 2)
    one = CostModel(make_instance(data)).footprint(TRAIN, strategy)
    # 2 in flight x 18_688 + 8_192 = 45_568
    assert one.transient == pytest.approx(45_568)
    data["workload"]["optimizer_steps"] = 2
    two = CostModel(make_instance(data)).footprint(TRAIN, strategy)
    # 1 in flight x 18_688 + 8_192 = 26_880; the states do not change
    assert (two.resident, two.transient) == (one.resident, pytest.approx(26_880))


def test_infer_is_unaffected(small_instance_data, make_instance):
    """Infer (and generate) vertices run once over the step, whatever n is."""
    strategy = Strategy(2, 2, 1, 2)
    times = [
        CostModel(pipeline_instance(small_instance_data, make_instance, n)).run_time(
            REFERENCE, BLOCK, strategy
        )
        for n in (1, 2)
    ]
    assert times[0] == times[1]


def test_train_microbatches_must_be_a_multiple_of_the_optimizer_steps(
    small_instance_data, make_instance
):
    """m/n microbatches per mini-batch: m = 1 or 3 with n = 2 leave the plan space (train only)."""
    instance = pipeline_instance(small_instance_data, make_instance, 2, microbatches=[1, 2, 3, 4])
    counts = {s.microbatches for s in enumerate_strategies(instance, TRAIN, BLOCK)}
    assert counts == {2, 4}
    problem = strategy_problem(instance, TRAIN, BLOCK, Strategy(2, 2, 1, 3))
    assert problem is not None and "workload.optimizer_steps 2" in problem
    assert strategy_problem(instance, REFERENCE, BLOCK, Strategy(2, 2, 1, 3)) is None
    instance = pipeline_instance(small_instance_data, make_instance, 1, microbatches=[1, 2, 3, 4])
    assert {s.microbatches for s in enumerate_strategies(instance, TRAIN, BLOCK)} == {1, 2, 3, 4}


@pytest.mark.parametrize("steps", [3, 5, 16])
def test_optimizer_steps_must_divide_the_step(steps):
    """One line naming the field when n does not divide B*K = 8."""
    with pytest.raises(InstanceError) as error:
        Workload(4, 2, 4, 4, optimizer_steps=steps)
    assert error.value.path == "workload.optimizer_steps"
    assert "must divide the step's B*K = 4 x 2 = 8 sequences" in str(error.value)
    assert Workload(4, 2, 4, 4, optimizer_steps=8).mini_batch_sequences == 1
