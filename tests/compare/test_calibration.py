"""The fitted knobs and the leave-one-out table (``python -m rlplan.compare.calibration``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rlplan.compare import calibration
from rlplan.rpeg.schema.hardware import Hardware

TINY = Path(__file__).resolve().parent.parent / "data" / "published_tiny"


def test_golden_section_finds_the_minimum_of_a_parabola():
    """(x - 0.3)^2 + 1 on [0, 2] is smallest at x = 0.3 (by hand: its derivative vanishes)."""
    found = calibration.golden_section(lambda x: (x - 0.3) ** 2 + 1, 0.0, 2.0, 1e-6)
    assert found == pytest.approx(0.3, abs=1e-6)


def _planted_runs(tmp_path: Path, planted: float) -> Path:
    """Two copies of the tiny run whose measurements are its predictions at ``planted``.

    The second copy has twice the batch, so the runs differ; the fit must find
    ``planted`` again, since there every log error is 0.
    """
    folder = tmp_path / "runs"
    folder.mkdir()
    for index, batch in enumerate((4, 8)):
        document = yaml.safe_load((TINY / "tiny_grpo_run.yaml").read_text(encoding="utf-8"))
        document["workload"]["batch_size"] = batch
        name = f"run{index}"
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
        shutil.copy(TINY / "tiny_grpo_run.plan.json", folder / f"{name}.plan.json")
    for run in calibration.load_runs(folder):
        check = calibration.predict(run, {"non_gemm_ratio": planted})
        document = yaml.safe_load(run.instance_path.read_text(encoding="utf-8"))
        document["reference"]["step_time_s"] = check.predicted_s
        for phase in check.phases:
            document["reference"]["phases"][phase.name]["measured_s"] = phase.predicted_s
        run.instance_path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return folder


def test_the_fit_recovers_a_planted_knob_value(tmp_path):
    """Runs measured as the model predicts at non_gemm_ratio 0.4 are fitted back to 0.4."""
    runs = calibration.load_runs(_planted_runs(tmp_path, 0.4))
    fitted = calibration.fit(runs, tolerance=1e-5)
    assert fitted["non_gemm_ratio"] == pytest.approx(0.4, abs=1e-4)
    assert calibration.loss(runs, fitted) == pytest.approx(0.0, abs=1e-8)
    rows = calibration.leave_one_out(runs, fitted)
    assert [row.name for row in rows] == ["run0", "run1"]
    for row in rows:
        # Each run alone also fits 0.4, so the held-out prediction is exact.
        assert row.values["non_gemm_ratio"] == pytest.approx(0.4, abs=1e-2)
        assert row.held_out_ratio == pytest.approx(1.0, abs=1e-2)


def test_the_shipped_default_is_the_fit_over_the_shipped_runs():
    """Every fitted knob's default is what the fit gives on the shipped published runs.

    A changed cost model or a new published run moves the fit; the default
    must then be refitted (``python -m rlplan.compare.calibration``).
    """
    runs = calibration.load_runs()
    fitted = calibration.fit(runs, tolerance=1e-3)
    for knob in calibration.FITTED:
        default = Hardware.__dataclass_fields__[knob.field].default
        assert fitted[knob.field] == pytest.approx(default, abs=0.01), knob.field


def test_leave_one_out_needs_two_runs(tmp_path, capsys):
    """One published run cannot be left out: one line, exit 2."""
    folder = tmp_path / "one"
    shutil.copytree(TINY, folder)
    assert calibration.main(["--folder", str(folder)]) == 2
    assert "at least two" in capsys.readouterr().out


def test_the_moe_default_is_the_fit_to_the_published_moe_phases():
    """moe_expert_overhead's default is what the fit gives on the MoE runs with phases.

    Only the B200 Qwen3-30B-A3B run publishes phases: its policy-training and
    log-prob phases leave 7.50 ms and 7.97 ms per MoE layer and pass (16 experts
    a GPU, 0.469 and 0.498 ms an expert) above the model without the knob; the
    log-squared fit lies between them.
    """
    runs = calibration.load_moe_runs()
    assert [run.name for run in runs] == ["nemo_rl_grpo_qwen3_30b_a3b_4x8_b200"]
    fitted = calibration.fit_moe(runs)
    assert 0.469e-3 < fitted < 0.498e-3
    default = Hardware.__dataclass_fields__["moe_expert_overhead"].default
    assert fitted == pytest.approx(default, abs=1e-5)
