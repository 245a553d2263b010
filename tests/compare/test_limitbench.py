"""limitbench's scale variants: every (GPU count, k_eval) of every instance, as a valid file."""

from __future__ import annotations

import pytest

from benchmarks.limitbench import scale_variants
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.instance import load_instance
from tests.solvers.conftest import ROOT


def test_scale_variants_reshape_and_set_k_eval(tmp_path):
    source = f"{ROOT}/instances/ppo_8b_1x2x8_h100.yaml"
    paths = scale_variants([source], "8,64", "1,8", str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in paths] == [
        "ppo_8b_1x2x8_h100-8gpu-k1.yaml",
        "ppo_8b_1x2x8_h100-8gpu-k8.yaml",
        "ppo_8b_1x2x8_h100-64gpu-k1.yaml",
        "ppo_8b_1x2x8_h100-64gpu-k8.yaml",
    ]
    shapes = []
    for path in paths:
        instance = load_instance(path)
        shapes.append((instance.hardware.num_gpus, instance.k_eval))
    assert shapes == [(8, 1), (8, 8), (64, 1), (64, 8)]


def test_scale_variants_without_options_are_the_instances(tmp_path):
    assert scale_variants(["a.yaml", "b.yaml"], None, None, str(tmp_path)) == ["a.yaml", "b.yaml"]


def test_an_unshapeable_count_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="--gpus"):
        scale_variants([f"{ROOT}/instances/ppo_8b_1x2x8_h100.yaml"], "12", None, str(tmp_path))
