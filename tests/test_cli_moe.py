"""``rlplan check`` on mixture-of-experts instances: the model summary, and bad MoE input
as one stderr line naming the field with exit code 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlplan.rpeg.schema.yamlio import loads

REPO = Path(__file__).resolve().parent.parent
TINY_GRPO = REPO / "instances" / "tiny_grpo_2gpu.yaml"


def moe_instance(folder: Path, change: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """tiny_grpo_2gpu (S + T = 256 + 512 = 768) on 8 H100 with a Qwen3-30B-A3B actor."""
    data = loads(TINY_GRPO.read_text(encoding="utf-8"))
    data["hardware"] = {"preset": "h100", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8}
    data["models"]["actor"] = {"preset": "qwen3-30b-a3b"}
    data["placement"] = {"microbatches": [8]}
    if change is not None:
        change(data)
    path = folder / "moe.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def models_section(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index("models")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    return lines[start + 1 : end]


def test_check_prints_total_and_active_parameters_of_a_mixture_of_experts(cli, tmp_path):
    """30,531,911,680 and 3,352,821,760 parameters (tests/rpeg/test_moe_models.py by hand)."""
    code, out, err = cli("check", moe_instance(tmp_path))
    assert err == ""
    assert code in (0, 1)
    like = "(qwen3-30b-a3b-like MoE: 128 experts, 8 per token)"
    active = f"                3.353 B active per token {like}"
    assert models_section(out) == [
        "  actor        30.532 B parameters (48 layers, d 2048)",
        active,
        "  reward        0.494 B parameters (24 layers, d 896)",
        "  reference    30.532 B parameters (48 layers, d 2048)",
        active,
    ]


def test_check_names_no_preset_for_a_changed_shape_and_lists_shared_experts(cli, tmp_path):
    def change(data: dict[str, Any]) -> None:
        data["models"]["actor"] = {"preset": "glm-4.5", "layers": 4}

    _, out, _ = cli("check", moe_instance(tmp_path, change))
    assert models_section(out)[1].split(" active per token ")[1] == (
        "(MoE: 160 experts, 8 per token, 1 shared, 3 dense layers)"
    )


def test_check_of_a_dense_instance_prints_only_totals(cli):
    code, out, _ = cli("check", TINY_GRPO)
    assert code == 0
    assert models_section(out) == [
        "  actor         1.777 B parameters (28 layers, d 1536)",
        "  reward        0.494 B parameters (24 layers, d 896)",
        "  reference     1.777 B parameters (28 layers, d 1536)",
    ]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change writing ``value`` at the dotted ``path`` (``a.b`` keys may hold dots: ``|``)."""

    def change(data: dict[str, Any]) -> None:
        keys = [key.replace("|", ".") for key in path.split(".")]
        parent = data
        for key in keys[:-1]:
            parent = parent.setdefault(key, {})
        parent[keys[-1]] = value

    return change


BAD_MOE_INPUT = [
    (
        _set("models.actor.experts_per_token", 200),
        "models.actor.experts_per_token: 200 exceeds the 128 experts a token can use",
    ),
    (
        _set("models.actor", {"preset": "deepseek-v3", "kv_lora_rank": None}),
        "models.actor.kv_lora_rank: missing: attention mla needs it",
    ),
    (
        _set("models.actor", {"preset": "llama-3.1-8b", "experts": 8}),
        "models.actor.experts: llama-3.1-8b is a dense model; for a mixture of experts name "
        "an MoE preset or config, or write the whole shape without one",
    ),
    (
        _set("placement.pin.actor|train.ep", 3),
        "placement.pin.actor.train.ep: 3 does not divide the 128 experts of the actor",
    ),
    (
        _set("placement.pin.reward|infer.ep", 2),
        "placement.pin.reward.infer.ep: 2: the reward is a dense model (only ep 1 applies)",
    ),
    (
        _set("placement.expert_parallel", [1, 3]),
        "placement.expert_parallel[1]: 3 divides the experts of no mixture-of-experts model "
        "(the actor 128)",
    ),
    (
        _set("placement.context_parallel", [1, 5]),
        "placement.context_parallel[1]: cp 5 cannot split a 768-token sequence into 10 equal "
        "chunks (context parallelism needs S + T to be a multiple of 2*cp)",
    ),
    (
        _set("placement.pin.actor|train.cp", 5),
        "placement.pin.actor.train.cp: cp 5 cannot split a 768-token sequence into 10 equal "
        "chunks (context parallelism needs S + T to be a multiple of 2*cp)",
    ),
]


@pytest.mark.parametrize(
    ("change", "line"), BAD_MOE_INPUT, ids=[line.split(":")[0] for _, line in BAD_MOE_INPUT]
)
def test_check_bad_moe_input_is_one_line_and_exit_2(cli, tmp_path, change, line):
    code, out, err = cli("check", moe_instance(tmp_path, change))
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: {line}"]


def test_check_accepts_expert_and_context_parallel_values_that_apply(cli, tmp_path):
    """ep 4 divides 128 experts; cp 2 and 3 split 768 tokens into 4 and 6 chunks."""

    def change(data: dict[str, Any]) -> None:
        data["placement"].update(expert_parallel=[1, 4], context_parallel=[1, 2, 3])
        data["placement"]["pin"] = {"actor.train": {"ep": 4, "cp": 2}}

    code, _, err = cli("check", moe_instance(tmp_path, change))
    assert code in (0, 1)
    assert err == ""


def test_check_warns_about_expert_parallel_on_a_dense_instance(cli, tmp_path):
    data = loads(TINY_GRPO.read_text(encoding="utf-8"))
    data["placement"]["expert_parallel"] = [1, 2]
    path = tmp_path / "dense.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = cli("check", path)
    assert code == 0
    assert err.splitlines() == [
        "warning: placement.expert_parallel lists 2, but no model is a mixture of experts: "
        "only ep 1 applies"
    ]
    assert "lower bounds" in out
