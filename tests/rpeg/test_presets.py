"""Presets (rpeg/schema/presets.py, model_presets.py, hf_config.py): GPU datasheets, dense
model shapes, Hugging Face config.json reading.

Known answers: the GPU figures are the vendors' (restated here from the
datasheets, not copied from the table under test), the shipped instances
typed the same numbers by hand, and every dense model preset's parameter
count is within 1 % of the size its publisher states (the mixtures of
experts: tests/rpeg/test_moe_models.py).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.model.parameters import layer_parameters, parameter_count
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.hardware import HOST_RATES
from rlplan.rpeg.schema.instance import load_instance, parse_instance
from rlplan.rpeg.schema.model_presets import MODEL_PRESETS
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.presets import GPU_PRESETS
from rlplan.rpeg.schema.yamlio import loads
from rlplan.rpeg.templates import Kind, Vertex

REPO = Path(__file__).resolve().parents[2]
INSTANCES = REPO / "instances"
HF = REPO / "tests" / "data" / "hf"
QWEN3_8B_CONFIG = HF / "qwen3-8b" / "config.json"
TINY_TIED_CONFIG = HF / "tiny-tied" / "config.json"


def read(path: Path) -> dict[str, Any]:
    return loads(path.read_text(encoding="utf-8"))


def with_hardware_preset(data: dict[str, Any], preset: str) -> dict[str, Any]:
    """``data`` with the datasheet and link fields of its hardware replaced by ``preset``."""
    changed = copy.deepcopy(data)
    hardware = changed["hardware"]
    for key in list(hardware):
        if key.startswith(("alpha_", "beta_")) or key in (
            "flops_per_gpu",
            "memory_per_gpu",
            "memory_bandwidth",
        ):
            del hardware[key]
    hardware["preset"] = preset
    return changed


# -- GPU presets --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance", "preset"),
    [
        # Typed by hand from the H100 SXM5 datasheet (instances/README.md table).
        ("ppo_8b_1x2x8_h100.yaml", "h100-sxm-80g"),
        ("grpo_32b_2x4x8_h100.yaml", "h100-sxm-80g"),
        # From the A100 SXM4 80GB datasheet.
        ("dpo_8b_1x2x8_a100.yaml", "a100-sxm-80g"),
        # From the Ada Lovelace whitepaper (RTX 4090), with its planner knobs written out.
        ("tiny_ppo_2gpu.yaml", "rtx-4090-24g"),
        # From verl's H20 figures (published run, /tmp/published_notes.md section 7).
        ("published/verl_dapo_qwen25_math_7b_16_h20.yaml", "h20-96g"),
    ],
)
def test_gpu_preset_reproduces_the_hand_typed_shipped_hardware(instance, preset):
    """A shipped instance with its datasheet fields replaced by the preset parses the same.

    The host figures (rates and host memory) are not datasheet fields of
    these files, which take the defaults without a preset: the variant
    writes the original's values, so the preset's host figures stay out of
    the comparison (test_gpu_preset_fills_the_host_figures checks them).
    """
    path = INSTANCES / instance
    original = load_instance(path)
    data = with_hardware_preset(read(path), preset)
    for key in (*HOST_RATES, "host_memory_per_node"):
        data["hardware"][key] = getattr(original.hardware, key)
    parsed = parse_instance(data, name=original.name, base_dir=path.parent)
    assert parsed.hardware == original.hardware
    assert instance_fingerprint(parsed) == instance_fingerprint(original)


#: (dense BF16 FLOP/s, bytes, memory bytes/s, intra-node bytes/s per direction)
#: restated from each vendor source: NVIDIA H100, H200, A100, L40S datasheets,
#: the Ada Lovelace whitepaper (RTX 4090), and verl's figures for the H20
#: (NVLink 900 GB/s bidirectional = 450 per direction; PCIe Gen4 x16 is
#: 32 GB/s raw per direction, about 25 achieved, an assumption).
DATASHEETS = {
    "h100-sxm-80g": (989e12, 80e9, 3.35e12, 450e9),
    "h200-sxm-141g": (989e12, 141e9, 4.8e12, 450e9),
    # GB200 NVL72: 5 PFLOPS BF16 with sparsity = 2.5 dense, 186 GB HBM3e at 8 TB/s,
    # NVLink 5 1.8 TB/s bidirectional = 900 GB/s per direction.
    "gb200-nvl72-186g": (2.5e15, 186e9, 8.0e12, 900e9),
    "a100-sxm-80g": (312e12, 80e9, 2.039e12, 300e9),
    "a100-sxm-40g": (312e12, 40e9, 1.555e12, 300e9),
    "h20-96g": (148e12, 96e9, 4.0e12, 450e9),
    "l40s-48g": (362.05e12, 48e9, 864e9, 25e9),
    "rtx-4090-24g": (165e12, 24e9, 1.008e12, 25e9),
}


def hardware_of(section: dict[str, Any]) -> Any:
    data = read(INSTANCES / "tiny_ppo_2gpu.yaml")
    data["hardware"] = section
    return parse_instance(data, name="preset").hardware


#: (host link, host-to-device and device-to-host pinned bytes/s per GPU, host bytes per
#: GPU) restated from the sources docs/cost-model.md#colocation names: nvbandwidth
#: measurements (NVIDIA/nvbandwidth issues 24, 42, 53), the Inspur NF5488A5 measurement
#: of two A100s sharing a PCIe switch (11 GB/s each), and the servers' host memory
#: (MLPerf system descriptions: "2 TB" = 32 x 64 GB for 8 H100 or H200, "1TB" = 16 x
#: 64 GB for 8 A100; 400 GB for 4 L40S; assumed 2 TB for 8 H20 and 256 GB for 8 RTX 4090).
HOST_LINKS = {
    "h100-sxm-80g": ("PCIe Gen5 x16", 35.2e9, 52.8e9, 32 * 64e9 / 8),
    "h200-sxm-141g": ("PCIe Gen5 x16", 35.2e9, 52.8e9, 32 * 64e9 / 8),
    "a100-sxm-80g": ("PCIe Gen4 x16, shared by a GPU pair", 11e9, 11e9, 16 * 64e9 / 8),
    "a100-sxm-40g": ("PCIe Gen4 x16, shared by a GPU pair", 11e9, 11e9, 16 * 64e9 / 8),
    "h20-96g": ("PCIe Gen5 x16", 35.2e9, 52.8e9, 32 * 64e9 / 8),
    "l40s-48g": ("PCIe Gen4 x16", 25.13e9, 25e9, 400e9 / 4),
    "rtx-4090-24g": ("PCIe Gen4 x16", 25.13e9, 25e9, 256e9 / 8),
}


@pytest.mark.parametrize("name", sorted(HOST_LINKS))
def test_gpu_preset_fills_the_host_figures(name):
    """Pinned rates as measured, pageable 2.4 times slower, host memory per GPU x GPUs."""
    link, to_device, to_host, per_gpu = HOST_LINKS[name]
    hardware = hardware_of({"preset": name, "racks": 1, "nodes_per_rack": 2, "gpus_per_node": 4})
    assert GPU_PRESETS[name].host.name == link
    assert hardware.host_to_device_pinned == pytest.approx(to_device, rel=1e-12)
    assert hardware.device_to_host_pinned == pytest.approx(to_host, rel=1e-12)
    assert hardware.host_to_device_pageable == pytest.approx(to_device / 2.4, rel=1e-12)
    assert hardware.device_to_host_pageable == pytest.approx(to_host / 2.4, rel=1e-12)
    # 4 GPUs per node here: host memory scales with the node's GPUs.
    assert hardware.host_memory_per_node == pytest.approx(4 * per_gpu, rel=1e-12)


def test_host_bandwidth_overrides_every_host_rate_the_section_does_not_write():
    """hardware.host_bandwidth stands for all four rates, the preset's included; a rate
    written beside it wins, and host memory is untouched."""
    section = {"preset": "h100", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8}
    hardware = hardware_of({**section, "host_bandwidth": 10e9, "device_to_host_pinned": 30e9})
    assert hardware.host_to_device_pinned == hardware.host_to_device_pageable == 10e9
    assert hardware.device_to_host_pageable == 10e9
    assert hardware.device_to_host_pinned == 30e9
    assert hardware.host_memory_per_node == hardware_of(section).host_memory_per_node


def test_hardware_without_preset_takes_the_pcie_gen4_host_defaults():
    """25 GB/s pinned both ways, 25/2.4 GB/s pageable, 128 GB of host memory per GPU."""
    data = read(INSTANCES / "ppo_8b_1x2x8_h100.yaml")
    hardware = parse_instance(data, name="no-preset").hardware
    assert hardware.host_to_device_pinned == hardware.device_to_host_pinned == 25e9
    assert hardware.host_to_device_pageable == pytest.approx(25e9 / 2.4, rel=1e-12)
    assert hardware.host_memory_per_node == 8 * 128e9


def test_every_required_gpu_has_a_preset():
    assert set(DATASHEETS) == set(GPU_PRESETS)


@pytest.mark.parametrize("name", sorted(DATASHEETS))
def test_gpu_preset_fills_the_datasheet_figures(name):
    flops, memory, bandwidth, nvlink = DATASHEETS[name]
    hardware = hardware_of({"preset": name, "racks": 2, "nodes_per_rack": 2, "gpus_per_node": 4})
    assert (hardware.racks, hardware.nodes_per_rack, hardware.gpus_per_node) == (2, 2, 4)
    assert hardware.flops_per_gpu == flops
    assert hardware.memory_per_gpu == memory
    assert hardware.memory_bandwidth == bandwidth
    assert hardware.beta_coll["g"] == pytest.approx(1 / nvlink, rel=1e-12)
    assert hardware.beta_p2p["g"] == pytest.approx(1 / nvlink, rel=1e-12)
    # Slower levels outward: node link > rack link > inter-rack link (an NVL72 rack is
    # one NVLink domain, so its trays talk at the node link's rate).
    for betas in (hardware.beta_coll, hardware.beta_p2p):
        if name.startswith("gb200"):
            assert betas["g"] == betas["n"] < betas["r"]
        else:
            assert betas["g"] < betas["n"] < betas["r"]
    assert 0 < hardware.alpha_coll["g"] < hardware.alpha_coll["n"] < hardware.alpha_coll["r"]


def test_explicit_fields_override_the_preset():
    hardware = hardware_of(
        {
            "preset": "a100-sxm-80g",
            "racks": 1,
            "nodes_per_rack": 4,
            "gpus_per_node": 8,
            "flops_per_gpu": 280e12,
            "beta_coll_n": 50e9,  # 400 Gb/s instead of the preset's 200 Gb/s
            "memory_reserve": 0.1,
        }
    )
    assert hardware.flops_per_gpu == 280e12
    assert hardware.beta_coll["n"] == pytest.approx(1 / 50e9)
    assert hardware.beta_p2p["n"] == pytest.approx(1 / 25e9)  # not overridden
    assert hardware.memory_per_gpu == 80e9
    # 80e9 x (1 - 0.1) less the default fixed reserve of 2**30 bytes
    assert hardware.usable_memory == pytest.approx(72e9 - 2**30)


@pytest.mark.parametrize("spelling", ["H100", "h100_sxm", "H100-SXM-80G", "h100-80g"])
def test_gpu_preset_aliases_and_case(spelling):
    reference = hardware_of(
        {"preset": "h100-sxm-80g", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8}
    )
    assert (
        hardware_of({"preset": spelling, "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8})
        == reference
    )


@pytest.mark.parametrize(
    ("section", "field", "message"),
    [
        (
            {"preset": "h100-pcie", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8},
            "hardware.preset",
            "unknown GPU preset 'h100-pcie'; did you mean 'h100-sxm-80g'?",
        ),
        (
            {"preset": "mi300x", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8},
            "hardware.preset",
            "unknown GPU preset 'mi300x' (known: h100-sxm-80g,",
        ),
        (
            {"preset": 7, "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8},
            "hardware.preset",
            "must be the name of a GPU preset, got 7",
        ),
        ({"preset": "h100", "nodes_per_rack": 1, "gpus_per_node": 8}, "hardware.racks", "missing"),
        (
            {"preset": "h100", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8, "flops": 1},
            "hardware.flops",
            "unknown key",
        ),
    ],
)
def test_bad_gpu_preset_names_the_field(section, field, message):
    with pytest.raises(InstanceError) as caught:
        hardware_of(section)
    assert caught.value.path == field
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


# -- model presets --------------------------------------------------------------------

#: Sizes as their publishers state them (model cards on huggingface.co; the
#: Qwen cards' "Number of Parameters", Meta's model cards and the Hub's
#: safetensors totals). The count ignores norms and biases (< 0.1 %).
PUBLISHED_PARAMETERS = {
    "llama-3.1-8b": 8.03e9,  # meta-llama/Llama-3.1-8B: 8.03B params
    "llama-3.1-70b": 70.6e9,  # meta-llama/Llama-3.1-70B: 70.6B params
    "llama-3-8b": 8.03e9,  # meta-llama/Meta-Llama-3-8B: 8.03B params
    "llama-3-70b": 70.6e9,  # meta-llama/Meta-Llama-3-70B: 70.6B params
    "llama-3.2-1b": 1.23e9,  # Llama 3.2 model card: 1B (1.23B)
    "llama-3.2-3b": 3.21e9,  # Llama 3.2 model card: 3B (3.21B)
    "qwen2.5-0.5b": 0.49e9,  # Qwen/Qwen2.5-0.5B card: 0.49B
    "qwen2.5-1.5b": 1.54e9,  # Qwen/Qwen2.5-1.5B card: 1.54B
    "qwen2.5-3b": 3.09e9,  # Qwen/Qwen2.5-3B card: 3.09B
    "qwen2.5-7b": 7.61e9,  # Qwen/Qwen2.5-7B card: 7.61B
    "qwen2.5-14b": 14.7e9,  # Qwen/Qwen2.5-14B card: 14.7B
    "qwen2.5-32b": 32.5e9,  # Qwen/Qwen2.5-32B card: 32.5B
    "qwen2.5-72b": 72.7e9,  # Qwen/Qwen2.5-72B card: 72.7B
    "qwen2.5-math-7b": 7.62e9,  # Qwen/Qwen2.5-Math-7B on the Hub: 7.62B params
    "qwen3-4b": 4.0e9,  # Qwen/Qwen3-4B card: 4.0B
    "qwen3-8b": 8.2e9,  # Qwen/Qwen3-8B card: 8.2B
    "qwen3-14b": 14.8e9,  # Qwen/Qwen3-14B card: 14.8B
    "qwen3-32b": 32.8e9,  # Qwen/Qwen3-32B card: 32.8B
}

REQUIRED_MODELS = {
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "qwen2.5-7b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "qwen2.5-math-7b",
    "qwen3-8b",
    "qwen3-32b",
}


def model_of(section: Any, base_dir: Path | None = None, role: str = "actor") -> ModelSpec:
    data = read(INSTANCES / "tiny_ppo_2gpu.yaml")
    data["models"][role] = section
    return parse_instance(data, name="model", base_dir=base_dir).models[role]


def test_every_required_model_has_a_preset():
    """Every dense preset has its published size here (the mixtures of experts are
    checked in tests/rpeg/test_moe_models.py)."""
    assert set(MODEL_PRESETS) >= REQUIRED_MODELS
    dense = {name for name, preset in MODEL_PRESETS.items() if not preset.is_moe}
    assert set(PUBLISHED_PARAMETERS) == dense


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMETERS))
def test_model_preset_parameter_count_is_within_one_percent_of_the_published_size(name):
    spec = model_of({"preset": name})
    count = parameter_count(spec, "actor")
    assert abs(count - PUBLISHED_PARAMETERS[name]) / PUBLISHED_PARAMETERS[name] < 0.01


def test_qwen3_32b_counts_its_wide_attention():
    """Qwen3-32B: 64 query heads of 128 (q = 8192) on a hidden size of 5120."""
    spec = model_of({"preset": "qwen3-32b"})
    assert (spec.heads, spec.q_width, spec.kv_heads, spec.tied_embeddings) == (64, 8192, 8, False)
    # P_l = 5120*(8192 + 2*8*128) + 8192*5120 + 3*5120*25600
    #     = 52_428_800 + 41_943_040 + 393_216_000 = 487_587_840
    assert layer_parameters(spec) == 487_587_840
    # P = 64*487_587_840 + 2*151936*5120 = 31_205_621_760 + 1_555_824_640
    assert parameter_count(spec, "actor") == 32_761_446_400
    # (with q = d the count would be 30.75e9, 6 % short of the published 32.8e9)


def test_tied_preset_counts_the_embedding_once():
    """Llama-3.2-1B ties its head to the embedding: P = L*P_l + V*d."""
    spec = model_of({"preset": "llama-3.2-1b"})
    assert spec.tied_embeddings
    # P_l = 2048*(2048 + 2*8*64) + 2048*2048 + 3*2048*8192
    #     = 6_291_456 + 4_194_304 + 50_331_648 = 60_817_408
    # P = 16*60_817_408 + 128256*2048 = 973_078_528 + 262_668_288 = 1_235_746_816
    assert parameter_count(spec, "actor") == 1_235_746_816
    assert parameter_count(spec, "reference") == 1_235_746_816
    # a scalar head is never the embedding: + d
    assert parameter_count(spec, "critic") == 1_235_746_816 + 2048


@pytest.mark.parametrize(
    "spelling", ["llama-3.1-8b", "Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"]
)
def test_model_preset_spellings(spelling):
    assert model_of({"preset": spelling}) == ModelSpec(
        layers=32, hidden_dim=4096, ffn_dim=14336, vocab_size=128256, head_dim=128, kv_heads=8
    )


def test_model_preset_fields_can_be_overridden():
    spec = model_of({"preset": "qwen2.5-7b", "layers": 4, "vocab_size": 1000})
    assert (spec.layers, spec.vocab_size, spec.hidden_dim, spec.kv_heads) == (4, 1000, 3584, 4)


def test_model_preset_equals_the_hand_typed_shipped_models():
    """The shipped ppo_8b instance with every model given as the llama-3-8b preset."""
    original = load_instance(INSTANCES / "ppo_8b_1x2x8_h100.yaml")
    data = read(INSTANCES / "ppo_8b_1x2x8_h100.yaml")
    for role in ("actor", "critic", "reward"):
        data["models"][role] = {"preset": "llama-3-8b"}
    parsed = parse_instance(data, name=original.name)
    assert parsed.models == original.models
    assert instance_fingerprint(parsed) == instance_fingerprint(original)


# -- Hugging Face config.json ----------------------------------------------------------


def test_hf_config_reads_qwen3_8b_like_its_preset():
    from_config = model_of({"hf_config": str(QWEN3_8B_CONFIG)})
    assert from_config == model_of({"preset": "qwen3-8b"})
    assert (from_config.layers, from_config.hidden_dim, from_config.ffn_dim) == (36, 4096, 12288)
    assert (from_config.vocab_size, from_config.heads, from_config.kv_heads) == (151936, 32, 8)
    assert (from_config.head_dim, from_config.tied_embeddings) == (128, False)
    # P = 36*(4096*(4096 + 2048) + 4096*4096 + 3*4096*12288) + 2*151936*4096
    #   = 36*192_937_984 + 1_244_659_712 = 8_190_427_136 (Qwen3-8B card: 8.2B)
    assert parameter_count(from_config, "actor") == 8_190_427_136


def test_hf_config_tiny_tied_model_counted_by_hand():
    """4 heads of 32 (q = 128) on d = 64, kv 2, f = 96, V = 100, 2 layers, tied."""
    spec = model_of({"hf_config": str(TINY_TIED_CONFIG)})
    assert (spec.heads, spec.q_width, spec.tied_embeddings) == (4, 128, True)
    # P_l = d*(q + 2*kv*h) + q*d + 3*d*f = 64*(128 + 128) + 128*64 + 3*64*96
    #     = 16_384 + 8_192 + 18_432 = 43_008
    assert layer_parameters(spec) == 43_008
    # tied: P = L*P_l + V*d = 86_016 + 6_400
    assert parameter_count(spec, "actor") == 92_416
    # critic: the embedding plus a scalar head d
    assert parameter_count(spec, "critic") == 86_016 + 6_400 + 64


def test_hf_config_path_is_relative_to_the_instance_file(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    shutil.copytree(HF / "qwen3-8b", folder / "Qwen3-8B")
    data = read(INSTANCES / "tiny_ppo_2gpu.yaml")
    data["models"]["actor"] = {"hf_config": "Qwen3-8B/config.json"}
    data["models"]["critic"] = {"hf_config": "Qwen3-8B", "layers": 2}  # a folder works too
    (folder / "run.yaml").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not the instance's folder
    instance = load_instance(folder / "run.yaml")
    assert instance.models["actor"] == model_of({"preset": "qwen3-8b"})
    assert instance.models["critic"].layers == 2
    assert instance.models["critic"].hidden_dim == 4096


def write_config(folder: Path, **changes: Any) -> Path:
    config = json.loads(QWEN3_8B_CONFIG.read_text(encoding="utf-8"))
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path = folder / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_hf_config_defaults(tmp_path):
    """No head_dim: hidden / heads; no num_key_value_heads: the heads; no tie flag: untied."""
    path = write_config(tmp_path, head_dim=None, num_key_value_heads=None, tie_word_embeddings=None)
    spec = model_of({"hf_config": str(path)})
    assert (spec.head_dim, spec.kv_heads, spec.tied_embeddings) == (128, 32, False)


def test_hf_config_multimodal_text_config(tmp_path):
    inner = json.loads(TINY_TIED_CONFIG.read_text(encoding="utf-8"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "vlm", "text_config": inner}), encoding="utf-8")
    assert layer_parameters(model_of({"hf_config": str(path)})) == 43_008


@pytest.mark.parametrize(
    ("make", "field", "message"),
    [
        (lambda d: str(d / "nope.json"), "models.actor.hf_config", "cannot read"),
        (lambda d: 5, "models.actor.hf_config", "must be the path of a Hugging Face config.json"),
        (
            lambda d: str(write_config(d, num_hidden_layers=None)),
            "models.actor.hf_config.num_hidden_layers",
            "missing in config.json",
        ),
        (
            lambda d: str(write_config(d, hidden_size="4096")),
            "models.actor.hf_config.hidden_size",
            "must be a positive integer in config.json",
        ),
        (
            lambda d: str(write_config(d, head_dim=None, hidden_size=4000, num_attention_heads=48)),
            "models.actor.hf_config.head_dim",
            "not a multiple of num_attention_heads",
        ),
        (
            # experts in a config whose model_type (qwen3) is a dense one: not read
            lambda d: str(write_config(d, num_experts=128)),
            "models.actor.hf_config.num_experts",
            "mixture of experts of model_type 'qwen3', which is not read",
        ),
        (
            lambda d: str(write_config(d, tie_word_embeddings="yes")),
            "models.actor.hf_config.tie_word_embeddings",
            "must be true or false",
        ),
    ],
)
def test_bad_hf_config_names_the_field(tmp_path, make, field, message):
    with pytest.raises(InstanceError) as caught:
        model_of({"hf_config": make(tmp_path)})
    assert caught.value.path == field
    assert message in caught.value.message
    assert "\n" not in str(caught.value)


def test_hf_config_that_is_not_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(InstanceError, match=r"models\.actor\.hf_config: .* is not a JSON file"):
        model_of({"hf_config": str(path)})


@pytest.mark.parametrize(
    ("section", "field", "message"),
    [
        ({"preset": "qwen3-7b"}, "models.actor.preset", "did you mean 'qwen3-8b'?"),
        ({"preset": "llama3.1-8b"}, "models.actor.preset", "did you mean 'llama-3.1-8b'?"),
        (
            {"preset": "qwen3-8b", "hf_config": str(QWEN3_8B_CONFIG)},
            "models.actor.hf_config",
            "give preset or hf_config, not both",
        ),
        ({"preset": "qwen3-8b", "layer": 3}, "models.actor.layer", "did you mean 'layers'?"),
        ({"preset": "qwen3-8b", "kv_heads": 3}, "models.actor.kv_heads", "does not divide"),
    ],
)
def test_bad_model_preset_names_the_field(section, field, message):
    with pytest.raises(InstanceError) as caught:
        model_of(section)
    assert caught.value.path == field
    assert message in caught.value.message


def test_bad_preset_is_one_line_and_exit_2(cli, tmp_path):
    data = read(INSTANCES / "tiny_ppo_2gpu.yaml")
    data["hardware"] = {"preset": "h100-pcie", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 2}
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = cli("check", path)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        "error: hardware.preset: unknown GPU preset 'h100-pcie'; did you mean 'h100-sxm-80g'? "
        "(known: h100-sxm-80g, gb200-nvl72-186g, h200-sxm-141g, a100-sxm-80g, a100-sxm-40g, "
        "h20-96g, l40s-48g, "
        "rtx-4090-24g)"
    ]


# -- the query width in the schema and the cost model ---------------------------------


def test_attention_heads_equal_to_hidden_over_head_dim_is_the_default():
    plain = ModelSpec(layers=2, hidden_dim=64, ffn_dim=128, vocab_size=256, head_dim=16)
    spelled = ModelSpec(
        layers=2, hidden_dim=64, ffn_dim=128, vocab_size=256, head_dim=16, attention_heads=4
    )
    assert spelled == plain
    assert spelled.attention_heads is None
    assert (spelled.heads, spelled.q_width) == (4, 64)


def test_attention_heads_lift_the_divisibility_of_hidden_dim():
    with pytest.raises(InstanceError, match="not divisible by head_dim"):
        ModelSpec(layers=2, hidden_dim=100, ffn_dim=128, vocab_size=256, head_dim=16)
    spec = ModelSpec(
        layers=2, hidden_dim=100, ffn_dim=128, vocab_size=256, head_dim=16, attention_heads=8
    )
    assert (spec.heads, spec.q_width, spec.kv_heads) == (8, 128, 8)


def test_attention_flops_use_the_query_width(small_instance_data, make_instance):
    """The small hand-checkable instance with 8 query heads of 16 (q = 128) on d = 64."""
    small_instance_data["models"]["actor"]["attention_heads"] = 8
    small_instance_data["hardware"]["memory_bandwidth"] = 1e15  # decode bound by GEMMs (the limit)
    instance = make_instance(small_instance_data)
    spec = instance.models["actor"]
    assert (spec.q_width, spec.kv_heads) == (128, 2)
    cost = CostModel(instance)
    # P_l = 64*(128 + 2*2*16) + 128*64 + 3*64*128 = 12_288 + 8_192 + 24_576 = 45_056
    assert layer_parameters(spec) == 45_056
    # One sequence of S+T = 8 tokens (no packing): per token 2*(2*45_056 + 256*64)
    # = 212_992 FLOPs; attention 2 layers * 2 * 8^2 * q = 32_768; a forward pass
    # 8*212_992 + 32_768 = 1_736_704; training three of them.
    train = Vertex("actor", Kind.TRAIN)
    assert cost.vertex_flops(train) == 3 * 1_736_704
    strategy = Strategy(1, 1, 1, 1)
    gemm, _, _, _ = cost._stage_forward("actor", strategy, 1, 8.0, 64.0, ("g", "g", "g"))
    # The same forward pass at efficiency 8/(8+5) of 1e12 FLOP/s.
    assert gemm == pytest.approx(1_736_704 * 13 / 8 / 1e12, rel=1e-12)
    # One decode step at context 4: 2*(2*45_056 + 2*2*4*128) + 2*256*64 = 217_088 FLOPs
    # at efficiency 1/(1+5); the memory time is nil.
    decode = cost.decode_round("actor", strategy, np.array([1.0]), np.array([4.0]), ("g", "g", "g"))
    assert float(decode[0]) == pytest.approx(217_088 * 6 / 1e12, rel=1e-12)
