"""The busy windows (docs/formulation.md#busy-windows) in both exact backends.

Their validity on simulated schedules is checked in tests/formulation/test_rows.py;
here: each backend writes one row per window, and the rows tighten the MILP's LP
relaxation, the bound a branch-and-bound starts from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplan.formulation import build_formulation, windows
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.solvers.cpsat import CpSatModel
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.milp import translation
from rlplan.solvers.options import SolveOptions
from tests.solvers.test_exhaustive import KNOWN_OPTIMA

ROOT = Path(__file__).resolve().parent.parent.parent
TINY_DPO_4 = ROOT / "instances" / "tiny_dpo_4gpu.yaml"


def _lp_relaxation(problem: Problem, monkeypatch: pytest.MonkeyPatch, windows: bool) -> float:
    """The optimum of the MILP with every integrality dropped (HiGHS, deterministic)."""
    highspy = pytest.importorskip("highspy")
    from rlplan.solvers.milp.engines import new_highs

    if not windows:
        monkeypatch.setenv("RLPLAN_NO_WINDOWS", "1")
    start = warm_start_plan(problem, SolveOptions(time_limit=5, seed=0))
    built = translation.build_model(problem, start)
    monkeypatch.delenv("RLPLAN_NO_WINDOWS", raising=False)
    highs = new_highs()
    built.milp.model.to_highs(highs)
    columns = highs.getLp().num_col_
    highs.changeColsIntegrality(
        columns, list(range(columns)), [highspy.HighsVarType.kContinuous] * columns
    )
    highs.run()
    return highs.getInfo().objective_function_value


def test_windows_tighten_the_lp_relaxation(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny_dpo_4gpu (k_eval 2): the LP may spread the trainer's GPU-seconds over the
    # whole makespan under the area row alone; the window from the end of the first
    # generation to the makespan keeps them after it: 17.96 s and 18.14 s (17.87 s and
    # 18.10 s with the assignments no plan below the warm start can use, which the
    # model leaves out, docs/formulation.md). No relaxation may pass the proven
    # optimum, 18.1383 s (KNOWN_OPTIMA in tests/solvers/test_exhaustive.py).
    problem = Problem.load(str(TINY_DPO_4))
    without = _lp_relaxation(problem, monkeypatch, windows=False)
    with_windows = _lp_relaxation(problem, monkeypatch, windows=True)
    assert with_windows > without + 0.1
    assert with_windows <= KNOWN_OPTIMA["tiny_dpo_4gpu.yaml"] + 1e-6


def test_each_backend_writes_one_row_per_window(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = Problem.load(str(TINY_DPO_4))
    f = build_formulation(problem, 40.0, prune=False)
    rows = windows.window_rows(f)
    assert rows
    with_rows = len(CpSatModel(f).model.proto.constraints)
    monkeypatch.setenv("RLPLAN_NO_WINDOWS", "1")
    assert len(CpSatModel(f).model.proto.constraints) == with_rows - len(rows)
    monkeypatch.delenv("RLPLAN_NO_WINDOWS")
    start = warm_start_plan(problem, SolveOptions(time_limit=5, seed=0))
    milp = translation.build_model(problem, start).milp
    family = milp.model.families.index("busy_windows")
    written = sum(1 for index in milp.model.row_family if index == family)
    assert written == len(windows.window_rows(milp.formulation))
