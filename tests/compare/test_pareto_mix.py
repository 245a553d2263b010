"""``main.py pareto --budget-per-hour`` / ``--total-gpus``: pool mixes, their instances, outputs."""

from __future__ import annotations

import csv
import itertools
import os

import pytest
import yaml

from rlplan.compare.gputypes import load_gpu_types, parse_gpu_types
from rlplan.compare.mix_instances import mix_document
from rlplan.compare.mixes import NodeKind, count_mixes, enumerate_mixes
from rlplan.compare.pareto import plan_points
from rlplan.compare.pareto_mix import MIX_COLUMNS, MixBudget, mark_mix_dominance, plan_mix_points
from rlplan.compare.variants import load_document
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import loads
from tests.htmlcheck import assert_self_contained
from tests.solvers.conftest import ROOT

TINY_GRPO = os.path.join(ROOT, "instances", "tiny_grpo_2gpu.yaml")  # 1 x 1 x 2 GPUs
TWO_POOLS = os.path.join(ROOT, "tests", "data", "tiny_two_pools_grpo.yaml")  # solves in < 1 s
H100_H20 = os.path.join(ROOT, "instances", "gpu_types", "h100_h20.yaml")

# Three kinds for the hand count: a and b any node count, c in racks of 2 nodes.
KINDS = [
    NodeKind("a", 8, 5.0, None),
    NodeKind("b", 8, 3.0, None),
    NodeKind("c", 4, 2.0, 2),  # counts 1, 2, 4, 6, ...: 3 nodes do not shape
]
# Budget 10, every mix maximal (no type of it grows by its next count within 10):
#   {a}      a2 = 10                       -> a:16
#   {b}      b3 = 9 (b4 = 12)              -> b:24
#   {c}      c4 = 8 (c3 does not shape, c6 = 12) -> c:16
#   {a,b}    a1 + b1 = 8, leftover 2 < 3, 5 -> a:8+b:8
#   {a,c}    a1 + c2 = 9, c grows 2 -> 4 (+4), a by 5: leftover 1 -> a:8+c:8
#            (a1 + c1 = 7 leaves 3 >= 2: not maximal)
#   {b,c}    b2 + c2 = 10 -> b:16+c:8  (b1 + c2 = 7 leaves 3 = b's node: not maximal)
#   {a,b,c}  a1 + b1 + c1 = 10 -> a:8+b:8+c:4
EXPECTED = ["a:16", "b:24", "c:16", "a:8+b:8", "a:8+c:8", "b:16+c:8", "a:8+b:8+c:4"]


def _brute_force(kinds, budget):
    """Every count vector (0 = type left out) that fits and no type of which can grow."""
    found = set()
    ranges = [range(int(budget // k.node_cost) + 1) for k in kinds]
    for counts in itertools.product(*ranges):
        if (
            not any(counts)
            or sum(n * k.node_cost for n, k in zip(counts, kinds, strict=True)) > budget
        ):
            continue
        if any(
            k.rack_width and n > k.rack_width and n % k.rack_width
            for n, k in zip(counts, kinds, strict=True)
        ):
            continue  # does not shape into racks
        spent = sum(n * k.node_cost for n, k in zip(counts, kinds, strict=True))
        if all(
            spent + (k.next_count(n) - n) * k.node_cost > budget
            for n, k in zip(counts, kinds, strict=True)
            if n
        ):
            found.add(
                "+".join(
                    f"{k.name}:{n * k.node_gpus}" for n, k in zip(counts, kinds, strict=True) if n
                )
            )
    return found


def _rows(folder) -> list[dict]:
    with open(os.path.join(folder, "pareto.csv"), newline="") as handle:
        return list(csv.DictReader(handle))


# --- enumeration ---------------------------------------------------------------------------


def test_mixes_of_a_hand_counted_case():
    """Seven maximal mixes at budget 10, one type first, in the order derived above."""
    mixes = enumerate_mixes(KINDS, 10.0, 100, "--budget-per-hour")
    assert [m.key(KINDS) for m in mixes] == EXPECTED
    assert count_mixes(KINDS, 10.0) == 7


@pytest.mark.parametrize("budget", [5.0, 7.0, 10.0, 13.0, 16.5, 24.0])
def test_mixes_are_exactly_the_maximal_ones(budget):
    """The enumeration equals a brute force over every count vector at several budgets."""
    mixes = enumerate_mixes(KINDS, budget, 10_000, "--budget-per-hour")
    keys = [m.key(KINDS) for m in mixes]
    assert len(keys) == len(set(keys))
    assert set(keys) == _brute_force(KINDS, budget)


def test_next_count_keeps_whole_racks():
    """With 2 nodes per rack a type at 2 nodes grows to 4, at 4 to 6; without racks by one."""
    assert [KINDS[2].next_count(n) for n in (1, 2, 4, 6)] == [2, 4, 6, 8]
    assert [KINDS[0].next_count(n) for n in (1, 2, 7)] == [2, 3, 8]
    assert KINDS[2].most_nodes(7.0) == 2 and KINDS[2].most_nodes(12.0) == 6
    assert KINDS[0].most_nodes(4.9) == 0


def test_too_many_mixes_and_a_node_over_budget_are_refused_with_the_count():
    """More mixes than the limit: the count in the message; a node above the budget: named."""
    with pytest.raises(
        InputError, match=r"--budget-per-hour: 7 pool mixes are more than the limit of 6"
    ):
        enumerate_mixes(KINDS, 10.0, 6, "--budget-per-hour")
    with pytest.raises(
        InputError, match=r"one node of a \(8 GPUs, 5\) does not fit the budget of 4"
    ):
        enumerate_mixes(KINDS, 4.0, 100, "--budget-per-hour")


# --- the mixes of an instance, and the instances they write --------------------------------


def test_budget_and_total_gpu_modes_on_the_tiny_instance():
    """2-GPU nodes; h100 4.5 and h20 2.0 per node-hour (prices 2.25 and 1.00 per GPU-hour).

    Budget 8: h100 1 node (2 = 9 > 8); h20 4 nodes = 8; h100 1 + h20 1 = 6.5 (one more h20
    is 8.5). Total 4 GPUs: 2 nodes of either; 1 + 1.
    """
    types = load_gpu_types(H100_H20)
    by_budget = plan_mix_points(TINY_GRPO, types, MixBudget(per_hour=8.0))
    assert [p.mix for p in by_budget] == ["h100:2", "h20:8", "h100:2+h20:2"]
    assert [p.price_per_hour for p in by_budget] == [4.5, 8.0, 6.5]
    assert [p.shapes for p in by_budget] == ["1x1x2", "1x4x2", "1x1x2+1x1x2"]
    by_total = plan_mix_points(TINY_GRPO, types, MixBudget(total_gpus=4))
    assert [p.mix for p in by_total] == ["h100:4", "h20:4", "h100:2+h20:2"]
    assert [p.gpus for p in by_total] == [4, 4, 4]


def test_a_one_type_mix_is_the_gpu_count_forms_instance():
    """h100:2 of the mixes has the fingerprint of the GPU-count form's h100@2."""
    types = load_gpu_types(H100_H20)
    mix = plan_mix_points(TINY_GRPO, types, MixBudget(per_hour=8.0))[0]
    point = plan_points(TINY_GRPO, [2], types[:1])[0]
    assert (mix.mix, point.key) == ("h100:2", "h100@2")
    assert mix.fingerprint == point.fingerprint


def test_a_mix_of_two_types_writes_pools_with_prices_and_the_slower_link():
    """One pool per type, named and priced, shaped; the link is the slower inter-rack p2p."""
    types = parse_gpu_types(
        [
            {"name": "h100", "preset": "h100-sxm-80g", "price_per_gpu_hour": 2.25},
            {
                "name": "slow",
                "hardware": {"preset": "h20-96g", "alpha_p2p_r": 4e-5, "beta_p2p_r": 1 / 5e9},
                "price_per_gpu_hour": 1.0,
            },
        ],
        "t.yaml",
    )
    document = load_document(TINY_GRPO)
    written = mix_document(document, [(types[0], 2), (types[1], 6)])
    instance = parse_instance(loads(yaml.safe_dump(written), "mix"), "mix")
    pools = instance.pools
    assert [p.name for p in pools] == ["h100", "slow"]
    assert [p.price_per_gpu_hour for p in pools] == [2.25, 1.0]
    assert [
        (p.hardware.racks, p.hardware.nodes_per_rack, p.hardware.gpus_per_node) for p in pools
    ] == [
        (1, 1, 2),
        (1, 3, 2),
    ]
    assert pools[0].hardware.flops_per_gpu == 989e12 and pools[1].hardware.flops_per_gpu == 148e12
    # h100's inter-rack p2p: 1.5e-5 s, 25e9 B/s; slow's: 4e-5 s, 5e9 B/s (written as s/byte).
    assert instance.inter_pool.alpha_p2p == pytest.approx(4e-5)
    assert instance.inter_pool.beta_p2p == pytest.approx(1 / 5e9)


def test_a_pooled_instance_gives_its_pool_0_and_its_link():
    """tiny_two_pools: the types are written over pool "fast"; inter_pool 5e-5 s, 12.5 GB/s."""
    types = load_gpu_types(H100_H20)
    points = plan_mix_points(TWO_POOLS, types, MixBudget(per_hour=8.0))
    assert [p.mix for p in points] == ["h100:2", "h20:8", "h100:2+h20:2"]
    instance = parse_instance(loads(points[2].variant.text, "mix"), "mix")
    assert instance.inter_pool.alpha_p2p == pytest.approx(5e-5)
    assert instance.inter_pool.beta_p2p == pytest.approx(1 / 12.5e9)
    assert instance.pools[0].hardware.decode_bw_eff == 1.0  # pool "fast"'s knob, kept
    homogeneous = yaml.safe_load(points[0].variant.text)["hardware"]
    assert "pools" not in homogeneous and homogeneous["gpus_per_node"] == 2


# --- dominance -----------------------------------------------------------------------------


def test_dominance_by_mix_with_and_without_gpus():
    """At a budget GPUs are no objective; with a GPU total they are.

    x (4 GPUs, 2 s, cost 1), y (8 GPUs, 2 s, cost 1.5), z (8 GPUs, 1.8 s, cost 1).
    Over (step, cost): z dominates x and y (the first dominator named is the fastest).
    Over (GPUs, step, cost): x keeps its 4 GPUs and stays on the frontier beside z; y is
    dominated by x (named first: fewest GPUs) and z.
    """
    rows = [
        {"mix": "x", "gpus": 4, "step_time_s": 2.0, "cost_per_step": 1.0},
        {"mix": "y", "gpus": 8, "step_time_s": 2.0, "cost_per_step": 1.5},
        {"mix": "z", "gpus": 8, "step_time_s": 1.8, "cost_per_step": 1.0},
        {"mix": "w", "gpus": 8, "step_time_s": None, "cost_per_step": None},
    ]
    at_budget = mark_mix_dominance([dict(r) for r in rows], with_gpus=False)
    assert [r["dominated_by"] for r in at_budget] == ["z", "z", None, None]
    assert [r["dominated"] for r in at_budget] == [True, True, False, None]
    with_gpus = mark_mix_dominance([dict(r) for r in rows], with_gpus=True)
    assert [r["dominated_by"] for r in with_gpus] == [None, "x", None, None]


# --- the command ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mix_run(tmp_path_factory):
    """One budget run of tiny_two_pools with the h100 / h20 types at 8 per hour (3 mixes)."""
    from rlplan.cli import app as main

    out = tmp_path_factory.mktemp("mix") / "out"
    argv = ["pareto", TWO_POOLS, "--gpu-types", H100_H20, "--budget-per-hour", "8"]
    argv += ["--time-limit", "10", "--workers", "1", "--out", str(out), "--quiet"]
    return main.main(argv), out, argv


def test_mix_run_writes_every_mix_with_status_bound_price_and_dominance(mix_run):
    """Columns, mix keys, prices, cost per step = price per hour x step / 3600."""
    code, out, _ = mix_run
    assert code == 0
    rows = {r["mix"]: r for r in _rows(out)}
    assert tuple(_rows(out)[0]) == MIX_COLUMNS
    assert list(rows) == ["h100:2", "h20:8", "h100:2+h20:2"]
    assert [rows[k]["kind"] for k in rows] == ["homogeneous", "homogeneous", "mixed"]
    assert [float(rows[k]["price_per_hour"]) for k in rows] == [4.5, 8.0, 6.5]
    for row in rows.values():
        assert row["status"] == "OPTIMAL"
        step, bound = float(row["step_time_s"]), float(row["bound_step_s"])
        # staleness candidates {actor: [0]}: on-policy, so the score is the step time
        assert float(row["score_step_s"]) == pytest.approx(step)
        assert bound <= float(row["score_step_s"])
        cost = float(row["price_per_hour"]) * step / 3600
        assert float(row["cost_per_step"]) == pytest.approx(cost)
    on_front = {k for k, r in rows.items() if r["dominated"] == "false"}
    marked = mark_mix_dominance(
        [
            {
                "mix": k,
                "gpus": 0,
                "step_time_s": float(r["step_time_s"]),
                "cost_per_step": float(r["cost_per_step"]),
            }
            for k, r in rows.items()
        ],
        with_gpus=False,
    )
    assert on_front == {r["mix"] for r in marked if r["dominated"] is False}


def test_mix_run_html_draws_the_frontier_by_mix(mix_run):
    """report.html: the by-mix frontier figure, the bounds figure and a table of every mix."""
    _, out, _ = mix_run
    contents = assert_self_contained((out / "report.html").read_text(), figures=2, tables=1)
    assert "Frontier by mix" in contents.headings
    table = contents.tables[0]
    assert table[0][:3] == ["mix", "kind", "GPUs"] and "bound (s/step)" in table[0]
    assert [row[0] for row in table[1:]] == ["h100:2", "h20:8", "h100:2+h20:2"]
    assert {row[1] for row in table[1:]} == {"homogeneous", "mixed"}


def test_mix_rerun_resumes_by_mix_and_checks_fingerprints(mix_run, capsys):
    """A rerun solves nothing; a row with a stale fingerprint is solved again; another budget
    sets the stored mixes it does not ask for aside."""
    from rlplan.cli import app as main

    _, out, argv = mix_run
    capsys.readouterr()
    assert main.main(argv) == 0
    printed = capsys.readouterr().out
    assert "0 point(s) to solve (3 already in" in printed
    assert "* h100:2+h20:2" in printed
    assert "fastest mix at a budget of 8 per hour: " in printed
    alone = min(
        (r for r in _rows(out) if r["kind"] == "homogeneous"), key=lambda r: float(r["step_time_s"])
    )
    mixed = next(r for r in _rows(out) if r["kind"] == "mixed")
    ratio = float(alone["step_time_s"]) / float(mixed["step_time_s"])
    assert f"against fastest homogeneous {alone['mix']}: {ratio:.3f}x" in printed
    path = out / "pareto.csv"
    path.write_text(path.read_text().replace(_rows(out)[1]["fingerprint"], "sha256:stale"))
    assert main.main(argv) == 0
    assert "1 point(s) to solve (2 already in" in capsys.readouterr().out
    other = [a if a != "8" else "6.5" for a in argv]  # 6.5: h100:2, h20:6, h100:2+h20:2
    assert main.main(other) == 0
    printed = capsys.readouterr().out
    assert "1 point(s) to solve (2 already in" in printed and "1 stored point(s)" in printed


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--budget-per-hour", "abc"], "--budget-per-hour: must be a positive number"),
        (["--budget-per-hour", "0"], "--budget-per-hour: must be a positive number"),
        (["--budget-per-hour", "-3"], "--budget-per-hour: must be a positive number"),
        (["--budget-per-hour", "nan"], "--budget-per-hour: must be a positive number"),
        (["--budget-per-hour", "8", "--total-gpus", "4"], "--total-gpus: give --budget-per-hour"),
        ([], "--gpus: give --gpus COUNTS, or --budget-per-hour"),
        (["--budget-per-hour", "8", "--gpus", "2"], "--gpus: not with --budget-per-hour"),
        (["--total-gpus", "x"], "--total-gpus: must be a whole number"),
        (["--total-gpus", "0"], "--total-gpus: must be between 1 and 4096"),
        (["--budget-per-hour", "4"], "--budget-per-hour: one node of h100"),
        (["--total-gpus", "1"], "--total-gpus: one node of h100 (2 GPUs, 2)"),
        (
            ["--budget-per-hour", "8", "--max-mixes", "2"],
            "3 pool mixes are more than the limit of 2",
        ),
        (["--gpus", "2", "--max-mixes", "5"], "--max-mixes: only with"),
    ],
)
def test_bad_mix_input_exits_2_with_one_line(cli, tmp_path, args, names):
    """Each bad budget, pair of options or over-budget type: one line naming it, exit 2."""
    out = tmp_path / "out"
    code, stdout, stderr = cli("pareto", TWO_POOLS, "--gpu-types", H100_H20, *args, "--out", out)
    assert code == 2
    assert stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and names in stderr
    assert not out.exists()


def test_a_budget_without_gpu_types_exits_2(cli, tmp_path):
    """Mixes need the types and their prices."""
    code, _, stderr = cli("pareto", TWO_POOLS, "--budget-per-hour", "8", "--out", tmp_path / "o")
    assert code == 2
    assert (
        stderr.strip() == "error: --gpu-types: --budget-per-hour needs a GPU types file with prices"
    )


def test_the_gpu_count_form_shapes_a_pooled_instance_from_its_pool_0():
    """tiny_two_pools at 4 GPUs: pool "fast"'s 2-GPU nodes, two of them, in today's form."""
    (point,) = plan_points(TWO_POOLS, [4], None)
    hardware = yaml.safe_load(point.variant.text)["hardware"]
    assert "pools" not in hardware and point.shape == (1, 2, 2)
    assert hardware["flops_per_gpu"] == 400e12  # pool "fast"


def test_a_point_line_shows_the_score_when_the_bound_is_about_it():
    """An off-policy plan (score = step x 1.05) shows its score beside the bound; else not."""
    from rlplan.compare.pareto_mix import _mix_line

    row = {"mix": "a:8", "status": "OPTIMAL", "step_time_s": 64.9087, "cost_per_step": 0.6}
    off = _mix_line({**row, "score_step_s": 68.1541, "bound_step_s": 68.1522})
    assert "64.9087 s/step (score 68.1541 s, bound 68.1522 s)" in off
    on = _mix_line({**row, "score_step_s": 64.9087, "bound_step_s": 64.9})
    assert "64.9087 s/step (bound 64.9000 s)" in on
