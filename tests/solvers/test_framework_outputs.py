"""``main.py solve`` writes the plan in framework vocabulary (docs/outputs.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from rlplan.cli import app as main

INSTANCE = Path(__file__).resolve().parents[2] / "instances" / "tiny_grpo_2gpu.yaml"


def test_solve_writes_framework_settings(tmp_path, capsys):
    out = tmp_path / "run"
    code = main.main(["solve", str(INSTANCE), "--solver", "greedy", "--out", str(out), "--quiet"])
    capsys.readouterr()
    assert code == 0
    report = (out / "report.md").read_text()
    assert "## Framework settings" in report
    assert "gpu_memory_utilization" in report and "Where to set it:" in report
    result = json.loads((out / "result.json").read_text())
    for key in (
        "status",
        "solver",
        "makespan_s",
        "step_time_s",
        "bound_makespan_s",
        "gap",
        "stats",
    ):
        assert key in result
    framework = result["framework"]
    plan = json.loads((out / "plan.json").read_text())
    assert set(framework["vertices"]) == set(plan["vertices"])
    for name, entry in framework["vertices"].items():
        placed = plan["vertices"][name]
        assert (entry["tp"], entry["pp"], entry["dp"]) == (placed["tp"], placed["pp"], placed["dp"])
        assert entry["num_gpus"] == entry["tp"] * entry["pp"] * entry["dp"]
        if entry["kind"] == "generate":
            assert entry["max_num_seqs"] == placed["max_num_seqs"]
            assert entry["gpu_memory_utilization"] == placed["gpu_memory_utilization"]
            assert 1 <= entry["effective_concurrency"] <= entry["max_num_seqs"]
            assert 0.0 < entry["gpu_memory_utilization"] <= 1.0
        else:
            assert entry["micro_batch_size_per_gpu"] == placed["micro_batch_size"]
            assert math.isclose(
                entry["micro_batch_tokens_per_gpu"],
                entry["micro_batch_size_per_gpu"] * framework["tokens_per_sequence"],
            )
    assert set(framework["staleness"]) == set(plan["staleness"])
    for model, described in framework["staleness"].items():
        assert described["steps"] == plan["staleness"][model]
        assert described["words"] in report
    assert isinstance(framework["colocated"], list) and isinstance(framework["concurrent"], list)
