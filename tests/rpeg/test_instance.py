"""Instance loading and validation (docs/instance.md)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.instance import load_instance, parse_instance
from rlplan.rpeg.schema.yamlio import MAX_INSTANCE_BYTES, loads

REPO = Path(__file__).resolve().parents[2]
INSTANCES = REPO / "instances"
DATA = REPO / "tests" / "data"
TINY_PPO = INSTANCES / "tiny_ppo_2gpu.yaml"
TINY_GRPO = INSTANCES / "tiny_grpo_2gpu.yaml"


def replace_once(text: str, old: str, new: str) -> str:
    """``text`` with the single occurrence of ``old`` replaced (fails if not exactly one)."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def tiny_ppo_text() -> str:
    return TINY_PPO.read_text(encoding="utf-8")


def tiny_ppo() -> dict[str, Any]:
    """A fresh, valid instance document (tiny PPO on 2 GPUs)."""
    return loads(tiny_ppo_text())


def tiny_grpo() -> dict[str, Any]:
    """A fresh, valid instance document (tiny GRPO on 2 GPUs)."""
    return loads(TINY_GRPO.read_text(encoding="utf-8"))


def tiny_ppo_yaml(literals: dict[str, str]) -> str:
    """tiny_ppo_2gpu re-dumped as YAML, with the leaves at dotted paths written as raw literals.

    Independent of how the shipped file spells its values (others may edit it).
    """
    data = tiny_ppo()
    for index, path in enumerate(literals):
        set_leaf(data, path, f"SENTINEL{index}X")
    text = yaml.safe_dump(data, sort_keys=False)
    for index, literal in enumerate(literals.values()):
        text = replace_once(text, f"SENTINEL{index}X", literal)
    return text


def rejection(data: Any) -> InstanceError:
    """The InstanceError that parse_instance raises on ``data``."""
    with pytest.raises(InstanceError) as info:
        parse_instance(data)
    return info.value


# ----------------------------------------------------------------------------
# Accepted input
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(INSTANCES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_instance_loads(path):
    """Every file in instances/ loads, is named after its stem and carries no warning."""
    instance = load_instance(path)
    assert instance.name == path.stem
    assert instance.warnings == ()
    assert instance.models["reference"] == instance.models["actor"]


def test_bare_scientific_notation_is_a_float():
    """A bare exponent such as 989e12 (no dot, unsigned exponent) reads as a float."""
    data = loads("a: 989e12\nb: 5e-6\nc: 1.5e+3\nd: 7\ne: 1e5abc\nf: .inf\n")
    assert data["a"] == 989e12 and isinstance(data["a"], float)
    assert data["b"] == 5e-6 and isinstance(data["b"], float)
    assert data["c"] == 1500.0 and isinstance(data["c"], float)
    assert data["d"] == 7 and isinstance(data["d"], int)
    assert data["e"] == "1e5abc"
    assert data["f"] == float("inf")


def test_instance_hardware_reads_scientific_notation():
    """hardware.flops_per_gpu written as bare 989e12 is the float 9.89e14 in the instance."""
    text = tiny_ppo_yaml({"hardware.flops_per_gpu": "989e12", "hardware.memory_per_gpu": "80e9"})
    assert "flops_per_gpu: 989e12" in text
    hardware = parse_instance(loads(text)).hardware
    assert isinstance(hardware.flops_per_gpu, float)
    assert hardware.flops_per_gpu == 989e12
    assert hardware.memory_per_gpu == 80e9


def test_beta_bandwidth_and_inverse_bandwidth_normalise_alike():
    """beta_coll_g as 450e9 bytes/s and as 1/450e9 s/byte give the same s/byte value."""
    as_bandwidth = tiny_ppo_yaml({"hardware.beta_coll_g": "450e9"})
    as_inverse = tiny_ppo_yaml({"hardware.beta_coll_g": repr(1 / 450e9)})
    bandwidth = parse_instance(loads(as_bandwidth)).hardware.beta_coll["g"]
    inverse = parse_instance(loads(as_inverse)).hardware.beta_coll["g"]
    assert bandwidth == pytest.approx(1 / 450e9, rel=1e-12)
    assert inverse == pytest.approx(1 / 450e9, rel=1e-12)
    assert bandwidth == pytest.approx(inverse, rel=1e-12)


def test_bare_inverse_bandwidth_is_accepted():
    """An inverse bandwidth in bare scientific notation (4e-11) is kept as s/byte."""
    data = loads(tiny_ppo_yaml({"hardware.beta_p2p_n": "4e-11"}))
    assert parse_instance(data).hardware.beta_p2p["n"] == pytest.approx(4e-11)


def test_unknown_top_level_section_is_a_warning():
    """An unknown top-level section is accepted with a one-line warning naming it."""
    data = tiny_ppo()
    data["logging"] = {"level": "info", "pictures": True}
    instance = parse_instance(data)
    assert len(instance.warnings) == 1
    assert "logging" in instance.warnings[0]
    assert "\n" not in instance.warnings[0]


def test_lambda_ac_alone_is_accepted():
    """optimizer.lambda_ac without ac_share staleness is accepted (and has no effect)."""
    data = tiny_ppo()
    data["optimizer"]["lambda_ac"] = 0.15
    instance = parse_instance(data)
    del data["optimizer"]["lambda_ac"]
    plain = parse_instance(data)
    assert instance.optimizer.staleness_candidates == plain.optimizer.staleness_candidates
    assert instance.models == plain.models and instance.hardware == plain.hardware


# ----------------------------------------------------------------------------
# Rejections, each naming the exact field path
# ----------------------------------------------------------------------------


def test_missing_section():
    """A missing required section is rejected naming the section."""
    data = tiny_ppo()
    del data["workload"]
    error = rejection(data)
    assert error.path == "workload"
    assert "missing" in error.message


def test_missing_field():
    """A missing required field is rejected naming section.field."""
    data = tiny_ppo()
    del data["hardware"]["flops_per_gpu"]
    error = rejection(data)
    assert error.path == "hardware.flops_per_gpu"
    assert "missing" in error.message


def test_null_field_counts_as_missing():
    """A required field given as null is reported as missing."""
    data = tiny_ppo()
    data["workload"]["batch_size"] = None
    assert rejection(data).path == "workload.batch_size"


def test_wrong_type():
    """A string where an integer is expected is rejected naming the field."""
    data = tiny_ppo()
    data["models"]["actor"]["layers"] = "abc"
    error = rejection(data)
    assert error.path == "models.actor.layers"
    assert "positive integer" in error.message
    assert "'abc'" in error.message


@pytest.mark.parametrize(
    ("section", "key"),
    [("models.actor", "layers"), ("hardware", "racks"), ("workload", "batch_size")],
)
def test_bool_is_not_an_int(section, key):
    """YAML true where an integer is expected is rejected, not read as 1."""
    data = tiny_ppo()
    node = data
    for part in section.split("."):
        node = node[part]
    node[key] = True
    assert rejection(data).path == f"{section}.{key}"


def test_bool_is_not_a_float():
    """YAML true where a number is expected (flops_per_gpu) is rejected."""
    data = tiny_ppo()
    data["hardware"]["flops_per_gpu"] = True
    assert rejection(data).path == "hardware.flops_per_gpu"


@pytest.mark.parametrize("value", [0, -3])
def test_non_positive_size(value):
    """Zero and negative sizes are rejected with a 'positive integer' message."""
    data = tiny_ppo()
    data["models"]["actor"]["layers"] = value
    error = rejection(data)
    assert error.path == "models.actor.layers"
    assert "positive integer" in error.message
    assert str(error) == f"models.actor.layers: must be a positive integer, got {value}"


def test_non_positive_size_from_yaml_file(tmp_path):
    """layers: -3 in a file is rejected by load_instance naming models.actor.layers."""
    path = tmp_path / "bad.yaml"
    path.write_text(tiny_ppo_yaml({"models.actor.layers": "-3"}), encoding="utf-8")
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert info.value.path == "models.actor.layers"
    assert "positive integer" in info.value.message


def test_zero_workload_size():
    """workload.generation_length: 0 is rejected."""
    data = tiny_ppo()
    data["workload"]["generation_length"] = 0
    assert rejection(data).path == "workload.generation_length"


def test_unknown_algorithm():
    """An algorithm other than ppo, grpo, dpo is rejected at policy.algorithm."""
    data = tiny_ppo()
    data["policy"]["algorithm"] = "reinforce"
    error = rejection(data)
    assert error.path == "policy.algorithm"
    assert "reinforce" in error.message


def test_unknown_key_in_known_section():
    """A typo inside a known section (hardware.gpus_per_nod) is an error, not a warning."""
    data = tiny_ppo()
    data["hardware"]["gpus_per_nod"] = data["hardware"].pop("gpus_per_node")
    error = rejection(data)
    assert error.path == "hardware.gpus_per_nod"
    assert "unknown key" in error.message
    assert "did you mean 'gpus_per_node'?" in error.message


@pytest.mark.parametrize(
    ("section", "typo", "meant"),
    [
        ("workload", "samples_per_promt", "samples_per_prompt"),
        ("engine", "flash_attn", "flash_attention"),
        ("placement", "max_num_seq", "max_num_seqs"),
        ("solver", "time_limt", "time_limit"),
        ("optimizer", "kval", "k_eval"),
    ],
)
def test_unknown_key_suggests_the_closest(section, typo, meant):
    """A misspelt key names the key it most likely meant; a far-off one gets no guess."""
    data = tiny_ppo()
    data.setdefault(section, {})[typo] = 1
    error = rejection(data)
    assert error.path == f"{section}.{typo}"
    assert f"unknown key; did you mean {meant!r}? (allowed: " in error.message
    data = tiny_ppo()
    data["hardware"]["xyzzy"] = 1
    assert "did you mean" not in rejection(data).message


def test_misspelt_top_level_section_warning_suggests_the_section():
    data = tiny_ppo()
    data["hardwre"] = data["hardware"]
    instance = parse_instance(data)
    assert instance.warnings == (
        "warning: unknown section 'hardwre' ignored; did you mean 'hardware'?",
    )


def test_unknown_key_in_model():
    """A typo inside a model (models.actor.layer) is an error."""
    data = tiny_ppo()
    data["models"]["actor"]["layer"] = 24
    assert rejection(data).path == "models.actor.layer"


def test_unknown_model_role():
    """A model role other than actor, critic, reward is rejected."""
    data = tiny_ppo()
    data["models"]["value_head"] = dict(data["models"]["critic"])
    error = rejection(data)
    assert error.path == "models.value_head"
    assert "unknown" in error.message


def test_reference_role_is_not_given():
    """models.reference is rejected: the reference always has the actor's architecture."""
    data = tiny_ppo()
    data["models"]["reference"] = dict(data["models"]["actor"])
    assert rejection(data).path == "models.reference"


def test_role_required_by_algorithm_is_missing():
    """PPO without a critic model is rejected at models.critic."""
    data = tiny_ppo()
    del data["models"]["critic"]
    error = rejection(data)
    assert error.path == "models.critic"
    assert "missing" in error.message


def test_staleness_for_untrained_model():
    """GRPO with critic staleness candidates is rejected: it trains no critic."""
    data = tiny_grpo()
    data["optimizer"]["staleness_candidates"]["critic"] = [0, 1]
    error = rejection(data)
    assert error.path == "optimizer.staleness_candidates.critic"
    assert "grpo" in error.message


def test_ac_share_loads_for_ppo():
    """staleness_candidates.ac_share enables the fused template: candidates under ``ac``."""
    data = tiny_ppo()
    data["optimizer"]["staleness_candidates"]["ac_share"] = [1, 0, 1]
    instance = parse_instance(data)
    assert instance.ac_share
    assert instance.templates == ("separate", "ac_share")
    assert instance.optimizer.staleness_candidates["ac"] == (0, 1)
    assert "ac_share" not in instance.optimizer.staleness_candidates
    # The fused model has the actor's architecture (the value head is counted by the cost model).
    assert instance.models["ac"] == instance.models["actor"]
    assert instance.lambda_ac == 0.15
    fused = instance.restricted("ac_share")
    assert fused.fused and fused.trained_models == ("ac",)
    assert instance.trained_models == ("actor", "critic")


def test_without_ac_share_the_plan_space_has_one_template():
    """No ac_share entry: one template, no ``ac`` model, and the fingerprint is unchanged."""
    instance = parse_instance(tiny_ppo())
    assert not instance.ac_share and instance.templates == ("separate",)
    assert "ac" not in instance.models
    assert "ac" not in instance.optimizer.staleness_candidates


@pytest.mark.parametrize("loader", [tiny_grpo, "dpo"])
def test_ac_share_for_grpo_or_dpo_is_one_line_error(loader):
    """AC-share is PPO only: GRPO and DPO configs with ac_share name the field in one line."""
    if loader == "dpo":
        data = loads((INSTANCES / "tiny_dpo_2gpu.yaml").read_text(encoding="utf-8"))
        algorithm = "dpo"
    else:
        data = loader()
        algorithm = "grpo"
    data["optimizer"].setdefault("staleness_candidates", {})["ac_share"] = [0, 1]
    error = rejection(data)
    assert error.path == "optimizer.staleness_candidates.ac_share"
    assert "PPO only" in error.message and algorithm in error.message
    assert "\n" not in str(error)


def test_ac_share_with_a_pin_on_a_replaced_vertex_is_rejected():
    """Pins on vertices the fused template replaces would not bind fused plans: refused."""
    data = tiny_ppo()
    data["optimizer"]["staleness_candidates"]["ac_share"] = [0, 1]
    data["placement"]["pin"] = {"actor.train": {"tp": 2}}
    error = rejection(data)
    assert error.path == "placement.pin.actor.train"
    assert "ac_share" in error.message
    data["placement"]["pin"] = {"actor.generate": {"tp": 2}}
    assert parse_instance(data).placement.pin.vertex("actor.generate") is not None


def test_not_yaml_file():
    """A file that is not valid YAML is rejected naming the file."""
    path = DATA / "not_yaml.yaml"
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert info.value.path == str(path)
    assert "not a valid YAML file" in info.value.message


def test_binary_file(tmp_path):
    """A file that is not UTF-8 text is rejected naming the file."""
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00\x81 not text")
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert info.value.path == str(path)


def test_missing_file(tmp_path):
    """A file that does not exist is rejected naming the file."""
    path = tmp_path / "nowhere.yaml"
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert info.value.path == str(path)
    assert "no such file" in info.value.message


def test_directory_is_not_an_instance(tmp_path):
    """A directory given as the instance is rejected naming it."""
    with pytest.raises(InstanceError) as info:
        load_instance(tmp_path)
    assert info.value.path == str(tmp_path)


def test_file_larger_than_one_mebibyte(tmp_path):
    """A file over 1 MiB is refused before parsing, naming the file."""
    path = tmp_path / "huge.yaml"
    padding = "# " + "x" * 1000 + "\n"
    path.write_text(tiny_ppo_text() + padding * (MAX_INSTANCE_BYTES // len(padding) + 1))
    assert path.stat().st_size > MAX_INSTANCE_BYTES
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert info.value.path == str(path)
    assert "too large" in info.value.message


def test_top_level_list():
    """A YAML file whose top level is a list is rejected as not a mapping of sections."""
    with pytest.raises(InstanceError) as info:
        load_instance(DATA / "top_level_list.yaml")
    # The whole document is at fault: the path is the document root ("") or the file.
    assert info.value.path in ("", str(DATA / "top_level_list.yaml"))
    assert "mapping" in info.value.message


@pytest.mark.parametrize("text", ["", "just a sentence\n", "42\n"])
def test_scalar_or_empty_document(tmp_path, text):
    """An empty file or a bare scalar is rejected as not a mapping of sections."""
    path = tmp_path / "scalar.yaml"
    path.write_text(text)
    with pytest.raises(InstanceError) as info:
        load_instance(path)
    assert "mapping" in info.value.message


# ----------------------------------------------------------------------------
# Regressions: huge values, error-line length, unusable output paths
# ----------------------------------------------------------------------------


def test_huge_integer_is_an_instance_error():
    """An integer too large for a float (400 digits) is rejected naming the field."""
    data = tiny_ppo()
    data["models"]["actor"]["layers"] = -(10**400)
    error = rejection(data)
    assert error.path == "models.actor.layers"


def test_integer_literal_beyond_str_digit_limit_is_an_instance_error():
    """A 5000-digit integer literal is rejected as an InstanceError, not a ValueError."""
    text = tiny_ppo_yaml({"workload.batch_size": "9" * 5000})
    with pytest.raises(InstanceError):
        parse_instance(loads(text))


def test_error_message_stays_short_for_aliased_value():
    """A wrong-typed value built from nested YAML aliases gives a short error line."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for depth in range(1, 5):
        lines.append(f"l{depth}: &l{depth} [" + ", ".join([f"*l{depth - 1}"] * 10) + "]")
    text = "\n".join(lines) + "\n" + tiny_ppo_yaml({"models.actor.layers": "*l4"})
    assert len(text) < 4000
    data = loads(text)
    for key in ("l0", "l1", "l2", "l3", "l4"):
        data.pop(key)
    error = rejection(data)
    assert error.path == "models.actor.layers"
    assert len(str(error)) < 1000


# ----------------------------------------------------------------------------
# Property: breaking any one numeric leaf is reported at that leaf
# ----------------------------------------------------------------------------


def numeric_leaves(node: Any, path: str = "") -> list[str]:
    """Paths (``a.b``, ``a.b[0]``) of the int/float leaves of a parsed document."""
    if isinstance(node, dict):
        found = []
        for key, value in node.items():
            found += numeric_leaves(value, f"{path}.{key}" if path else str(key))
        return found
    if isinstance(node, list):
        found = []
        for index, value in enumerate(node):
            found += numeric_leaves(value, f"{path}[{index}]")
        return found
    if isinstance(node, int | float) and not isinstance(node, bool):
        return [path]
    return []


def set_leaf(document: dict[str, Any], path: str, value: Any) -> None:
    """Replace the leaf at ``path`` (as produced by :func:`numeric_leaves`)."""
    parts: list[str | int] = []
    for dotted in path.split("."):
        name, *indices = dotted.split("[")
        parts.append(name)
        parts += [int(index.rstrip("]")) for index in indices]
    node: Any = document
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


#: Leaves where 0 is a valid value: latencies, optional efficiency knobs,
#: the memory reserve, the v2 non-GEMM ratio, decode step overhead and rollout
#: workspace, staleness values, the solver seed and gap, and the local-search
#: temperatures and weights.
ZERO_ALLOWED_SUFFIXES = (
    "gemm_m_half",
    "gemm_k_half",
    "non_gemm_constant",
    "non_gemm_scaling",
    "memory_reserve",
    "non_gemm_ratio",
    "decode_step_overhead",
    "rollout_workspace",
    "t_init",
    "t_warm",
    "t_min",
    "alpha_pair",
    "score_eps",
    "lambda_ac",
    "max_throughput_loss",
)


def zero_allowed(path: str) -> bool:
    """Whether the leaf at ``path`` accepts 0."""
    return (
        path.startswith("hardware.alpha_")
        or path.startswith("optimizer.staleness_candidates.")
        or path in ("solver.seed", "solver.gap")
        or path.split(".")[-1] in ZERO_ALLOWED_SUFFIXES
    )


BASE_DOCUMENT = loads(TINY_PPO.read_text(encoding="utf-8"))
LEAVES = numeric_leaves(BASE_DOCUMENT)

# Bounded well inside float range: huge integers are covered above.
NON_POSITIVE = st.one_of(
    st.integers(min_value=-(10**18), max_value=0),
    st.floats(max_value=0.0, allow_nan=False),
)
NEGATIVE = st.one_of(
    st.integers(min_value=-(10**18), max_value=-1),
    # An explicit bound, not .filter(lambda x: x < 0): hypothesis 6.155 rewrites that
    # filter into max_value=0.0 and then still draws 0.0 and -0.0.
    st.floats(max_value=-1e-300, allow_nan=False),
)
WRONG_TYPE = st.one_of(st.text(max_size=12), st.booleans())


def test_property_leaves_cover_every_section():
    """The property test below draws from numeric leaves of every section of the file."""
    sections = {leaf.split(".")[0] for leaf in LEAVES}
    assert {"hardware", "models", "workload", "optimizer", "placement", "engine"} <= sections
    assert "placement.max_num_seqs[0]" in LEAVES
    assert "placement.gpu_memory_utilization[0]" in LEAVES
    assert "hardware.gemm_efficiency" in LEAVES
    assert any(leaf.startswith("optimizer.staleness_candidates.") for leaf in LEAVES)
    assert any(leaf.endswith("]") for leaf in LEAVES)
    parse_instance(copy.deepcopy(BASE_DOCUMENT))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), leaf=st.sampled_from(LEAVES))
def test_any_broken_numeric_leaf_is_named(data, leaf):
    """Any one numeric leaf made non-positive or a string is rejected naming that leaf."""
    bad_numbers = NEGATIVE if zero_allowed(leaf) else NON_POSITIVE
    value = data.draw(st.one_of(bad_numbers, WRONG_TYPE), label="value")
    document = copy.deepcopy(BASE_DOCUMENT)
    set_leaf(document, leaf, value)
    with pytest.raises(InstanceError) as info:
        parse_instance(document)
    assert info.value.path == leaf
    assert "\n" not in str(info.value)
