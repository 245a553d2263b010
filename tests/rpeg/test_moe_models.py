"""Mixture-of-experts models: presets, Hugging Face configs, published sizes, bad input.

Known answers: each preset's total and active parameter counts against the
figures its publisher states (the vendors count active parameters
differently, so each comparison uses the vendor's definition, derived from
rpeg/model/parameters.py's pieces), counts worked by hand, and the config
fixtures of tests/data/hf (their sources are in its README).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.model.parameters import (
    active_parameter_count,
    attention_parameters,
    parameter_count,
)
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.json_schema import instance_json_schema
from rlplan.rpeg.schema.model_presets import MODEL_PRESETS
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.yamlio import loads

REPO = Path(__file__).resolve().parents[2]
TINY_GRPO = REPO / "instances" / "tiny_grpo_2gpu.yaml"
HF = REPO / "tests" / "data" / "hf"
MOE_PRESETS = {name for name, preset in MODEL_PRESETS.items() if preset.is_moe}


def instance_data(actor: Any) -> dict[str, Any]:
    """tiny_grpo_2gpu with ``actor`` as its actor."""
    data = loads(TINY_GRPO.read_text(encoding="utf-8"))
    data["models"]["actor"] = actor
    return data


def actor_of(section: Any) -> ModelSpec:
    return parse_instance(instance_data(section), name="moe").models["actor"]


def embedding(spec: ModelSpec) -> int:
    """One embedding matrix, ``V*d``."""
    return spec.vocab_size * spec.hidden_dim


# -- published sizes ------------------------------------------------------------------
#
# Definitions (parameters.py counts both embedding matrices of an untied model):
# * Qwen counts both embedding matrices: its 22B of Qwen3-235B-A22B is
#   active_parameter_count itself (22.19e9, +0.9 %; without the input embedding
#   21.57e9 would be -2.0 %).
# * DeepSeek's "36.7B activated" (README_WEIGHTS.md, which says it includes 0.9B
#   embedding and 0.9B output head) matches the shapes only without the input
#   embedding: active_parameter_count - V*d = 36.62e9 (-0.2 %); with both 37.55e9
#   is +2.3 % of 36.7 and +1.5 % of the headline 37B. Kimi-K2 (DeepSeek-V3's
#   architecture) counts alike: 31.69e9 against 32B (-1.0 %; with both 32.86e9,
#   +2.7 %). The input embedding is a lookup, which costs no FLOPs either.
# * GLM's 32B matches without either embedding: active_parameter_count - 2*V*d =
#   32.08e9 (+0.2 %).
# Totals count both embedding matrices for every vendor.


def both(spec: ModelSpec) -> int:
    return active_parameter_count(spec, "actor")


def without_input_embedding(spec: ModelSpec) -> int:
    return active_parameter_count(spec, "actor") - embedding(spec)


def without_embeddings(spec: ModelSpec) -> int:
    return active_parameter_count(spec, "actor") - 2 * embedding(spec)


#: name -> (published total, published active, active definition, active tolerance).
PUBLISHED = {
    # QwenLM/Qwen3 @7a2f61f Qwen3_Technical_Report.pdf Table 5 ("#Total Params 30B,
    # #Activated Params 3B"); vllm-project/vllm-ascend docs, tutorials/models/
    # Qwen3-30B-A3B.md (release v0.22.1rc): "30.5B total parameters with 3.3B activated
    # per token". No definition reproduces 3.3B within 1 %: both embeddings give
    # 3.353e9 (+1.6 %), one 3.042e9 (-7.8 %); 3.35 is printed truncated, so 2 % here.
    "qwen3-30b-a3b": (30.5e9, 3.3e9, both, 0.02),
    # Qwen3 technical report, section 2: "a total of 235B parameters with 22B
    # activated ones" (also Table 3, "#Total Params 235B, #Activated Params 22B").
    "qwen3-235b-a22b": (235e9, 22e9, both, 0.01),
    # deepseek-ai/DeepSeek-V3 @9b4e978 README_WEIGHTS.md, main model: "Total parameters:
    # 671B", "Activation parameters: 36.7B" (README.md: 671B total, 37B activated).
    "deepseek-v3": (671e9, 36.7e9, without_input_embedding, 0.01),
    # MoonshotAI/Kimi-K2 @c6157be README.md "Model Summary": 1T total, 32B activated.
    "kimi-k2": (1e12, 32e9, without_input_embedding, 0.01),
    # zai-org/GLM-4.5 @170f20b README.md: "355 billion total parameters with 32 billion
    # active parameters".
    "glm-4.5": (355e9, 32e9, without_embeddings, 0.01),
}


def test_every_moe_preset_has_its_published_sizes():
    assert (
        set(PUBLISHED)
        == MOE_PRESETS
        == {
            "qwen3-30b-a3b",
            "qwen3-235b-a22b",
            "deepseek-v3",
            "kimi-k2",
            "glm-4.5",
        }
    )


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_moe_preset_active_count_matches_the_vendors_figure(name):
    _, active, definition, tolerance = PUBLISHED[name]
    spec = actor_of({"preset": name})
    assert abs(definition(spec) - active) / active < tolerance


@pytest.mark.parametrize("name", sorted(set(PUBLISHED) - {"kimi-k2"}))
def test_moe_preset_total_count_is_within_one_percent_of_the_published_size(name):
    total = PUBLISHED[name][0]
    spec = actor_of({"preset": name})
    assert abs(parameter_count(spec, "actor") - total) / total < 0.01


def test_kimi_k2_total_rounds_to_its_one_digit_figure():
    """Kimi-K2's "1T" has one significant digit: 1.026e12 (+2.6 %) rounds to it."""
    count = parameter_count(actor_of({"preset": "kimi-k2"}), "actor")
    assert round(count / 1e12, 1) == 1.0
    assert count == pytest.approx(1_026_407_202_816)


def test_qwen3_30b_a3b_counted_by_hand():
    """Every layer MoE: attention + router + 128 experts; 8 of them per token."""
    spec = actor_of({"preset": "qwen3-30b-a3b"})
    assert (spec.moe_layers, spec.heads, spec.q_width, spec.kv_heads) == (48, 32, 4096, 4)
    # attention d*(q + 2*kv*h) + q*d = 2048*(4096 + 2*4*128) + 4096*2048
    #   = 10_485_760 + 8_388_608 = 18_874_368
    assert attention_parameters(spec) == 18_874_368
    # router d*E = 2048*128 = 262_144; one expert 3*d*f_e = 3*2048*768 = 4_718_592
    # MoE layer: 18_874_368 + 262_144 + 128*4_718_592 (603_979_776) = 623_116_288
    # 48 layers: 29_909_581_824; embeddings 2*V*d = 2*151_936*2048 = 622_329_856
    # P = 29_909_581_824 + 622_329_856 = 30_531_911_680
    assert parameter_count(spec, "actor") == 30_531_911_680
    # active layer: 18_874_368 + 262_144 + 8*4_718_592 (37_748_736) = 56_885_248
    # 48 * 56_885_248 = 2_730_491_904; + 622_329_856 = 3_352_821_760
    assert active_parameter_count(spec, "actor") == 3_352_821_760


def test_deepseek_v3_shape_and_latent_attention_counted_by_hand():
    """MLA with 128 heads (head_dim = v_head_dim = 128), 3 dense layers, 1 shared expert."""
    spec = actor_of({"preset": "deepseek-v3"})
    assert (spec.attention, spec.heads, spec.head_dim, spec.kv_heads) == ("mla", 128, 128, 128)
    assert (spec.dense_layers, spec.moe_layers, spec.shared_expert_ffn_dim) == (3, 58, 2048)
    # queries d*c_q + c_q*n*(r+o) = 7168*1536 + 1536*128*192 = 11_010_048 + 37_748_736
    # keys/values d*(c_kv + r) + c_kv*n*(o+v) = 7168*576 + 512*128*256
    #   = 4_128_768 + 16_777_216; output n*v*d = 128*128*7168 = 117_440_512
    # sum: 48_758_784 + 20_905_984 + 117_440_512 = 187_105_280
    assert attention_parameters(spec) == 187_105_280
    # expert 3*7168*2048 = 44_040_192; router 7168*256 = 1_835_008; dense FFN
    # 3*7168*18432 = 396_361_728. Dense layer 187_105_280 + 396_361_728 = 583_467_008.
    # MoE layer 187_105_280 + 1_835_008 + 257*44_040_192 (11_318_329_344) = 11_507_269_632.
    # P = 3*583_467_008 + 58*11_507_269_632 + 2*129_280*7168
    #   = 1_750_401_024 + 667_421_638_656 + 1_853_358_080 = 671_025_397_760
    assert parameter_count(spec, "actor") == 671_025_397_760


# -- presets: dense shapes unchanged, MoE fields written only for MoE -----------------

DENSE_KEYS = {
    "layers",
    "hidden_dim",
    "ffn_dim",
    "vocab_size",
    "head_dim",
    "kv_heads",
    "gated_ffn",
    "tied_embeddings",
    "attention_heads",
}


@pytest.mark.parametrize("name", sorted(set(MODEL_PRESETS) - MOE_PRESETS))
def test_dense_preset_writes_no_mixture_field(name):
    assert set(MODEL_PRESETS[name].fields()) <= DENSE_KEYS
    assert not actor_of({"preset": name}).is_moe


def test_moe_preset_writes_its_experts_and_mla_only_where_it_has_them():
    qwen = MODEL_PRESETS["qwen3-235b-a22b"].fields()
    assert (qwen["experts"], qwen["experts_per_token"], qwen["expert_ffn_dim"]) == (128, 8, 1536)
    assert "attention" not in qwen and "kv_lora_rank" not in qwen
    glm = actor_of({"preset": "glm-4.5"})
    # 96 query heads of 128 on d = 5120: written out, as for Qwen3
    assert (glm.heads, glm.q_width, glm.kv_heads, glm.attention) == (96, 12288, 8, "gqa")
    assert (glm.shared_experts, glm.shared_expert_ffn_dim, glm.dense_layers) == (1, 1536, 3)


def test_moe_preset_fields_can_be_overridden():
    spec = actor_of({"preset": "qwen3-30b-a3b", "experts": 64, "layers": 4})
    assert (spec.experts, spec.experts_per_token, spec.layers) == (64, 8, 4)


# -- Hugging Face configs -------------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "deepseek-v3", "kimi-k2", "glm-4.5"])
def test_hf_config_reads_the_model_of_its_preset(name):
    assert actor_of({"hf_config": str(HF / name)}) == actor_of({"preset": name})


def test_hf_config_qwen2_moe_shared_expert_counted_by_hand():
    """Qwen2-57B-A14B: 64 experts of 2560, 8 per token, one shared expert of 20480."""
    spec = actor_of({"hf_config": str(HF / "qwen2-57b-a14b" / "config.json")})
    assert (spec.experts, spec.shared_experts, spec.shared_expert_ffn_dim) == (64, 1, 20480)
    assert (spec.dense_layers, spec.head_dim, spec.kv_heads) == (0, 128, 4)
    # attention 3584*(3584 + 2*4*128) + 3584*3584 = 16_515_072 + 12_845_056 = 29_360_128
    # router 3584*64 = 229_376; expert 3*3584*2560 = 27_525_120; shared 3*3584*20480
    # = 220_200_960 (its one-output gate, d parameters, is left out like the norms).
    # MoE layer 29_360_128 + 229_376 + 64*27_525_120 + 220_200_960 = 2_011_398_144
    # P = 28*2_011_398_144 + 2*151_936*3584 = 56_319_148_032 + 1_089_077_248
    assert parameter_count(spec, "actor") == 57_408_225_280
    # active: 29_360_128 + 229_376 + 8*27_525_120 + 220_200_960 = 469_991_424 per layer
    assert active_parameter_count(spec, "actor") == 28 * 469_991_424 + 1_089_077_248


def changed_config(folder: Path, source: str, **changes: Any) -> str:
    config = json.loads((HF / source / "config.json").read_text(encoding="utf-8"))
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path = folder / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def test_hf_config_leading_mlp_only_layers_are_dense_layers(tmp_path):
    spec = actor_of(
        {"hf_config": changed_config(tmp_path, "qwen3-30b-a3b", mlp_only_layers=[1, 0])}
    )
    assert (spec.dense_layers, spec.moe_layers) == (2, 46)


@pytest.mark.parametrize(
    ("source", "changes", "field", "message"),
    [
        (
            "qwen3-30b-a3b",
            {"mlp_only_layers": [5]},
            "mlp_only_layers",
            "makes layers 5 of config.json dense; only leading dense layers are modelled",
        ),
        (
            "qwen3-30b-a3b",
            {"decoder_sparse_step": 2},
            "decoder_sparse_step",
            "makes layers 0, 2, 4, 6, 8, 10, 12, 14, ... of config.json dense",
        ),
        ("qwen3-30b-a3b", {"num_experts_per_tok": None}, "num_experts_per_tok", "missing"),
        ("deepseek-v3", {"moe_layer_freq": 2}, "moe_layer_freq", "must be 1 in config.json"),
        ("deepseek-v3", {"first_k_dense_replace": None}, "first_k_dense_replace", "missing"),
        ("deepseek-v3", {"kv_lora_rank": None}, "kv_lora_rank", "missing in config.json"),
        ("glm-4.5", {"n_shared_experts": -1}, "n_shared_experts", "non-negative integer"),
        (
            "glm-4.5",
            {"first_k_dense_replace": 92},
            "num_hidden_layers",
            "leaves no layer after the 92 dense ones",
        ),
        (
            "glm-4.5",
            {"model_type": "mixtral", "num_local_experts": 8},
            "num_local_experts",
            "mixture of experts of model_type 'mixtral', which is not read",
        ),
    ],
)
def test_bad_moe_hf_config_names_the_key(tmp_path, source, changes, field, message):
    with pytest.raises(InstanceError) as caught:
        actor_of({"hf_config": changed_config(tmp_path, source, **changes)})
    assert caught.value.path == f"models.actor.hf_config.{field}"
    assert message in caught.value.message
    assert "\n" not in str(caught.value)


# -- fields that contradict each other or their preset --------------------------------

TINY_MLA = {
    "layers": 2,
    "hidden_dim": 64,
    "ffn_dim": 128,
    "vocab_size": 256,
    "head_dim": 16,
    "attention_heads": 4,
    "experts": 4,
    "experts_per_token": 2,
    "expert_ffn_dim": 32,
    "attention": "mla",
    "kv_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
}


@pytest.mark.parametrize(
    ("section", "field", "message"),
    [
        (
            {"preset": "qwen3-30b-a3b", "experts_per_token": 200},
            "experts_per_token",
            "200 exceeds the 128 experts a token can use",
        ),
        ({**TINY_MLA, "kv_lora_rank": None}, "kv_lora_rank", "missing: attention mla needs it"),
        (
            {"preset": "llama-3.1-8b", "experts": 8},
            "experts",
            "llama-3.1-8b is a dense model; for a mixture of experts name an MoE preset",
        ),
        (
            {"preset": "Qwen/Qwen3-8B", "dense_layers": 2},
            "dense_layers",
            "qwen3-8b is a dense model",
        ),
        (
            {"hf_config": str(HF / "qwen3-8b"), "experts": 8},
            "experts",
            "qwen3-8b/config.json is a dense model",
        ),
        (
            {"preset": "qwen3-30b-a3b", "attention": "mla"},
            "attention",
            "qwen3-30b-a3b has grouped-query attention",
        ),
    ],
)
def test_contradicting_moe_fields_name_the_field(section, field, message):
    with pytest.raises(InstanceError) as caught:
        actor_of(section)
    assert caught.value.path == f"models.actor.{field}"
    assert message in caught.value.message


def test_dense_preset_keeps_harmless_defaults_written_out():
    """``shared_experts: 0`` or ``attention: gqa`` beside a dense preset contradict nothing."""
    spec = actor_of({"preset": "llama-3.1-8b", "shared_experts": 0, "attention": "gqa"})
    assert spec == actor_of({"preset": "llama-3.1-8b"})


def test_tiny_mla_model_counted_by_hand():
    spec = actor_of(TINY_MLA)
    # queries without a rank: d*n*(r+o) = 64*4*24 = 6_144; keys/values
    # d*(c_kv + r) + c_kv*n*(o+v) = 64*40 + 32*4*32 = 2_560 + 4_096; output n*v*d = 4_096
    assert attention_parameters(spec) == 6_144 + 6_656 + 4_096


# -- plan-space lists against the models ----------------------------------------------


def test_expert_parallel_list_without_a_mixture_of_experts_is_a_warning():
    data = instance_data({"preset": "qwen2.5-1.5b"})
    data["placement"]["expert_parallel"] = [1, 2, 4]
    instance = parse_instance(data, name="dense")
    assert [w for w in instance.warnings if "expert_parallel" in w] == [
        "warning: placement.expert_parallel lists 2, 4, but no model is a mixture of "
        "experts: only ep 1 applies"
    ]


def test_expert_parallel_value_dividing_one_moe_model_is_kept():
    """4 divides the 64 experts of the actor although not the 6 of the reward."""
    data = instance_data({**TINY_MLA, "experts": 64})
    data["models"]["reward"] = {**TINY_MLA, "experts": 6}
    data["placement"]["expert_parallel"] = [1, 4]
    assert parse_instance(data, name="moe").placement.ep == (1, 4)
    data["placement"]["expert_parallel"] = [1, 5]
    with pytest.raises(InstanceError, match=r"divides the experts of no .* \(the actor 64, "):
        parse_instance(data, name="moe")


# -- the JSON Schema ------------------------------------------------------------------


def test_json_schema_accepts_moe_models_and_refuses_bad_moe_values():
    validator = jsonschema.Draft202012Validator(instance_json_schema())
    preset = instance_data({"preset": "deepseek-v3", "experts": 128})
    written = instance_data(TINY_MLA)
    written["placement"].update(expert_parallel=[1, 2], context_parallel=[1, 2])
    for document in (preset, written):
        assert list(validator.iter_errors(document)) == []
        parse_instance(document, name="moe")
    for key, value in (("experts", 0), ("attention", "mha"), ("kv_lora_rank", 0.5)):
        bad = instance_data({**TINY_MLA, key: value})
        assert not validator.is_valid(bad)
        with pytest.raises(InstanceError, match=f"models.actor.{key}"):
            parse_instance(bad, name="bad")
