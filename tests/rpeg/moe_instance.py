"""A tiny mixture-of-experts instance whose costs are computed by hand.

The small DPO instance of tests/rpeg/conftest.py (v1 knobs: gemm_efficiency 1,
no non-GEMM time, no flash attention, no packing) on 4 GPUs of one node, its
model made an MoE of 4 experts, top-2, expert width 32, and 4 sequences of
S + T = 4 + 4 tokens. Every level is ``g``; alpha_coll 1e-6 s, alpha_p2p
2e-6 s, every beta 1e9 B/s (1e-9 s/B); moe_imbalance 1.5.

    d=64, q=a*h=4*16=64, kv=2, h=16, f=128, V=256, L=2 (both MoE)
    attention  = 64*(64 + 2*2*16) + 64*64     = 12288
    dense FFN  = 3*64*128                      = 24576  (P_l = 36864)
    expert     = 3*64*32                       = 6144
    router     = 64*4                          = 256
    MoE layer  = 12288 + 256 + 4*6144          = 37120  (active 12288 + 256 + 2*6144 = 24832)
    routed     = 2 layers * 4 * 6144           = 49152
    P          = 2*37120 + V*d 16384 + head 16384 = 107008;  P_dense = 57856
"""

from __future__ import annotations

import copy
from typing import Any

from rlplan.rpeg.model.blocks import GroupLevels
from rlplan.rpeg.model.cost import CostModel
from rlplan.rpeg.templates import Kind, Vertex
from tests.rpeg.conftest import SMALL_INSTANCE, build_instance

TRAIN = Vertex("actor", Kind.TRAIN)
INFER = Vertex("reference", Kind.INFER)
GENERATE = Vertex("actor", Kind.GENERATE)
#: A block of the whole node.
NODE = (1, 1, 4)
#: Every level inside one node.


def in_node_levels(ep: int) -> GroupLevels:
    """Every group inside one node: the expert group's ``ep - 1`` peers all on NVLink."""
    return GroupLevels("g", "g", "g", "g", "g", (ep - 1, 0, 0))


#: The levels of strategy A (ep 2) and of every in-node strategy with ep <= 2.
LEVELS = in_node_levels(2)
ALPHA_COLL = 1e-6
ALPHA_P2P = 2e-6


def moe_data(**changes: Any) -> dict[str, Any]:
    """The instance's data; ``changes`` are ``section__key=value`` pairs."""
    data = copy.deepcopy(SMALL_INSTANCE)
    # The hand computations leave the MoE layers' fixed time out (0), except where a
    # test sets it (test_cost_moe.py::test_the_moe_layers_fixed_time).
    data["hardware"].update(
        gpus_per_node=4,
        alpha_coll_g=ALPHA_COLL,
        alpha_p2p_g=ALPHA_P2P,
        moe_imbalance=1.5,
        moe_expert_overhead=0.0,
    )
    data["models"]["actor"].update(experts=4, experts_per_token=2, expert_ffn_dim=32)
    data["workload"]["batch_size"] = 4
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        if section == "actor":
            data["models"]["actor"][key] = value
        else:
            data.setdefault(section, {})[key] = value
    return data


def moe_cost(**changes: Any) -> CostModel:
    """The cost model of :func:`moe_data` with ``changes``."""
    return CostModel(build_instance(moe_data(**changes)))
