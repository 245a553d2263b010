"""``main.py pareto``: frontier filter, cluster shapes, cost, infeasible points, resume, outputs."""

from __future__ import annotations

import csv
import importlib.util
import os

import pytest

from rlplan.compare.csvlog import CsvLog
from rlplan.compare.frontier import Objectives, cost_per_step, dominated_by, dominates
from rlplan.compare.gputypes import parse_gpu_types
from rlplan.compare.pareto import COLUMNS, mark_dominance
from rlplan.compare.shapes import cluster_shape, parse_counts
from rlplan.rpeg.errors import InputError
from tests.htmlcheck import assert_self_contained
from tests.solvers.conftest import ROOT

TINY_GRPO = os.path.join(ROOT, "instances", "tiny_grpo_2gpu.yaml")
TYPES = """\
gpu_types:
  - name: rtx4090
    hardware: {memory_per_gpu: 24e9}
    price_per_gpu_hour: 0.4
  - name: h100
    preset: h100-sxm-80g
    price_per_gpu_hour: 2.5
"""


def _rows(folder) -> list[dict]:
    with open(os.path.join(folder, "pareto.csv"), newline="") as handle:
        return list(csv.DictReader(handle))


# --- the non-dominated filter on hand-made points -----------------------------------------


def test_frontier_of_hand_made_points_keeps_ties_and_marks_dominated():
    """Known frontier: ties are all kept, a dominated point names its dominator, no-plan is None."""
    points = [
        Objectives(1, 10.0, 1.0),  # 0 dominated by 7 (same GPUs and step time, dearer)
        Objectives(2, 6.0, 2.0),  # 1 frontier
        Objectives(2, 6.0, 2.0),  # 2 frontier: ties 1 in every objective
        Objectives(4, 7.0, 3.0),  # 3 dominated by 1 (more GPUs, slower, dearer)
        Objectives(4, 5.0, 5.0),  # 4 frontier: fastest
        Objectives(8, None, None),  # 5 no plan
        Objectives(2, 6.0, 2.5),  # 6 dominated by 1 (same GPUs and step time, dearer)
        Objectives(1, 10.0, 0.9),  # 7 frontier: fewest GPUs, cheapest
    ]
    assert dominated_by(points) == [7, None, None, 1, None, None, 1, None]


def test_dominance_ignores_a_missing_cost_and_points_without_a_plan():
    """Without prices, dominance is over (GPUs, step time); a no-plan point never dominates."""
    assert dominates(Objectives(2, 5.0), Objectives(4, 5.0))
    assert not dominates(Objectives(2, 5.0), Objectives(2, 5.0))
    assert not dominates(Objectives(1, None), Objectives(4, 9.0))
    assert not dominates(Objectives(4, 9.0), Objectives(1, None))


def test_mark_dominance_keeps_dominated_rows_marked():
    """Rows stay; the dominated one is marked with its dominator as TYPE@GPUS."""
    rows = [
        {"gpu_type": "a", "gpus": 8, "step_time_s": 2.0, "cost_per_step": 1.0},
        {"gpu_type": "b", "gpus": 8, "step_time_s": 3.0, "cost_per_step": 1.5},
        {"gpu_type": "b", "gpus": 4, "step_time_s": None, "cost_per_step": None},
    ]
    marked = mark_dominance(rows)
    assert [r["dominated"] for r in marked] == [False, True, None]
    assert [r["dominated_by"] for r in marked] == [None, "a@8", None]


# --- cluster shapes and cost --------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "shape"),
    [
        (1, (1, 1, 1)),
        (4, (1, 1, 4)),
        (8, (1, 1, 8)),
        (16, (1, 2, 8)),
        (32, (2, 2, 8)),
        (48, (3, 2, 8)),
        (64, (4, 2, 8)),
    ],
)
def test_cluster_shape_keeps_the_node_width(gpus, shape):
    """8-GPU nodes, 2 nodes per rack: below a node one node; then nodes, then racks of 2."""
    assert cluster_shape(gpus, 8, 2) == shape


@pytest.mark.parametrize("gpus", [12, 24, 40])
def test_cluster_shape_refuses_counts_it_cannot_shape(gpus):
    """12 is not whole nodes; 24 and 40 GPUs are 3 and 5 nodes, not whole 2-node racks."""
    with pytest.raises(InputError, match="cannot be shaped"):
        cluster_shape(gpus, 8, 2)


def test_parse_counts():
    """Counts in order; bad, repeated or missing counts are refused."""
    assert parse_counts("8, 16,32") == [8, 16, 32]
    for bad in ("8,x", "0", "8,8", " , "):
        with pytest.raises(InputError):
            parse_counts(bad)


def test_cost_per_step_arithmetic():
    """cost per step = GPUs x price per GPU-hour x step time (s) / 3600."""
    assert cost_per_step(8, 2.5, 36.0) == pytest.approx(8 * 2.5 * 36.0 / 3600)  # = 0.2
    assert cost_per_step(8, 2.5, 36.0) == pytest.approx(0.2)
    assert cost_per_step(1, 3600.0, 1.0) == pytest.approx(1.0)


def test_gpu_types_file_errors_name_the_entry():
    """Unknown preset, missing price, both preset and hardware: one InputError each."""
    with pytest.raises(InputError, match=r"gpu_types\[0\]\.preset: unknown GPU preset"):
        parse_gpu_types([{"name": "x", "preset": "h999", "price_per_gpu_hour": 1}], "t.yaml")
    with pytest.raises(InputError, match="price_per_gpu_hour"):
        parse_gpu_types([{"name": "x", "preset": "h100"}], "t.yaml")
    with pytest.raises(InputError, match="either preset"):
        parse_gpu_types(
            [{"name": "x", "preset": "h100", "hardware": {}, "price_per_gpu_hour": 1}], "t.yaml"
        )
    with pytest.raises(InputError, match="given twice"):
        entry = {"name": "x", "preset": "h100", "price_per_gpu_hour": 1}
        parse_gpu_types([entry, entry], "t.yaml")


# --- the command --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pareto_run(tmp_path_factory):
    """One pareto run of tiny_grpo_2gpu over 1 and 2 GPUs of two types (4 solves)."""
    from rlplan.cli import app as main

    folder = tmp_path_factory.mktemp("pareto")
    types = folder / "types.yaml"
    types.write_text(TYPES)
    out = folder / "out"
    argv = ["pareto", TINY_GRPO, "--gpus", "1,2", "--gpu-types", str(types)]
    argv += ["--time-limit", "20", "--workers", "1", "--out", str(out), "--quiet"]
    code = main.main(argv)
    return code, out, argv


def test_pareto_writes_points_with_status_bound_cost_and_dominance(pareto_run):
    """Every point is in pareto.csv with its status, bound, gap, cost and dominance."""
    code, out, _ = pareto_run
    assert code == 0
    rows = {(r["gpu_type"], int(r["gpus"])): r for r in _rows(out)}
    assert tuple(_rows(out)[0]) == COLUMNS
    assert set(rows) == {("rtx4090", 1), ("rtx4090", 2), ("h100", 1), ("h100", 2)}
    for key in (("rtx4090", 2), ("h100", 1), ("h100", 2)):
        row = rows[key]
        assert row["status"] == "OPTIMAL"
        step, bound = float(row["step_time_s"]), float(row["bound_step_s"])
        assert bound <= step and float(row["gap"]) == pytest.approx((step - bound) / step)
        price = float(row["price_per_gpu_hour"])
        assert float(row["cost_per_step"]) == pytest.approx(key[1] * price * step / 3600)
        assert row["dominated"] in ("true", "false")
    # The H100 is faster at both sizes; the cheap 2-GPU rtx4090 stays on the frontier by cost.
    assert rows[("h100", 1)]["dominated"] == "false"
    assert rows[("rtx4090", 2)]["dominated"] == "false"
    assert (rows[("rtx4090", 2)]["racks"], rows[("rtx4090", 2)]["gpus_per_node"]) == ("1", "2")


def test_infeasible_point_is_reported_not_dropped(pareto_run):
    """The 1.5B actor does not fit one 24 GB GPU: INFEASIBLE with the reason, no dominance."""
    _, out, _ = pareto_run
    row = next(r for r in _rows(out) if (r["gpu_type"], r["gpus"]) == ("rtx4090", "1"))
    assert row["status"] == "INFEASIBLE"
    assert "actor.train fits on no block" in row["message"]
    assert row["step_time_s"] == "" and row["dominated"] == "" and row["cost_per_step"] == ""


def test_pareto_outputs_plots_and_self_contained_html(pareto_run):
    """frontier.png, bounds.png and a report.html that embeds both and lists every point."""
    _, out, _ = pareto_run
    for name in ("frontier.png", "bounds.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    contents = assert_self_contained((out / "report.html").read_text(), figures=2, tables=1)
    points = contents.tables[0]
    assert points[0][:2] == ["GPU type", "GPUs"]
    assert len(points) == 1 + 4
    assert any(row[3] == "INFEASIBLE" for row in points[1:])


def test_rerun_resumes_and_repairs_a_torn_last_row(pareto_run, capsys):
    """A rerun solves nothing; after a crash cut the last row, only that point is solved again."""
    from rlplan.cli import app as main

    _, out, argv = pareto_run
    before = _rows(out)
    capsys.readouterr()
    assert main.main(argv) == 0
    assert "0 point(s) to solve (4 already in" in capsys.readouterr().out
    assert _rows(out) == before
    path = out / "pareto.csv"
    text = path.read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    path.write_text(text[: len(text) - len(last) // 2 - 1])  # the last row cut in half
    assert main.main(argv) == 0
    printed = capsys.readouterr().out
    assert "repaired" in printed
    assert "1 point(s) to solve (3 already in" in printed
    after = _rows(out)
    assert len(after) == 4
    strip = ("wall_time_s",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in after] == [
        {k: v for k, v in r.items() if k not in strip} for r in before
    ]


def test_csv_log_drops_a_row_with_missing_fields(tmp_path):
    """A last line with its newline but too few fields is dropped and the file rewritten."""
    path = tmp_path / "log.csv"
    path.write_text("a,b\n1,2\n3\n")
    log = CsvLog(str(path), ("a", "b"))
    assert log.rows() == [{"a": "1", "b": "2"}] and log.repaired
    assert path.read_text() == "a,b\n1,2\n"
    log.append({"a": 5, "b": 6.5})
    assert path.read_text() == "a,b\n1,2\n5,6.5\n"


def test_csv_log_drops_a_last_row_without_its_newline(tmp_path):
    """A crash inside the last field leaves the right field count but a cut value: dropped."""
    path = tmp_path / "log.csv"
    path.write_text("a,b\n1,2\n3,4")  # "4" may be the start of "4.25"
    log = CsvLog(str(path), ("a", "b"))
    assert log.rows() == [{"a": "1", "b": "2"}] and log.repaired
    assert path.read_text() == "a,b\n1,2\n"


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--gpus", "1,x"], "--gpus"),
        (["--gpus", "3"], "cannot be shaped"),
        (["--gpus", "2", "--time-limit", "0"], "--time-limit"),
        (["--gpus", "2", "--gpu-types", "{types_bad_preset}"], "unknown GPU preset"),
        (["--gpus", "2", "--gpu-types", "{types_no_price}"], "price_per_gpu_hour"),
        (["--gpus", "2", "--gpu-types", "missing.yaml"], "--gpu-types"),
    ],
)
def test_bad_pareto_input_exits_2_with_one_line(cli, tmp_path, args, names):
    """Bad --gpus, a count that cannot be shaped, bad GPU-type files: one line, exit 2."""
    bad_preset = tmp_path / "bad_preset.yaml"
    bad_preset.write_text("- {name: x, preset: h999, price_per_gpu_hour: 1}\n")
    no_price = tmp_path / "no_price.yaml"
    no_price.write_text("- {name: x, preset: a100}\n")
    args = [a.format(types_bad_preset=bad_preset, types_no_price=no_price) for a in args]
    out = tmp_path / "out"
    code, stdout, stderr = cli("pareto", TINY_GRPO, *args, "--out", out, "--quiet")
    assert code == 2
    assert stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and names in stderr
    assert not out.exists()


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install -e '.[ray]')"
)
def test_pareto_points_run_as_ray_tasks_without_prices(cli, tmp_path):
    """--executor ray runs each point as a Ray task; without --gpu-types there is no cost."""
    out = tmp_path / "ray"
    instance = os.path.join(ROOT, "instances", "tiny_dpo_2gpu.yaml")
    code, _, _ = cli(
        "pareto",
        instance,
        "--gpus",
        "1,2",
        "--time-limit",
        "20",
        "--executor",
        "ray",
        "--out",
        out,
        "--quiet",
    )
    assert code == 0
    rows = {int(r["gpus"]): r for r in _rows(out)}
    assert rows[1]["status"] == "INFEASIBLE" and rows[2]["status"] == "OPTIMAL"
    assert rows[2]["gpu_type"] == "instance" and rows[2]["cost_per_step"] == ""
    assert rows[2]["dominated"] == "false" and float(rows[2]["samples_per_s_per_gpu"]) > 0
