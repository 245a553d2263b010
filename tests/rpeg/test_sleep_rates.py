"""A level-1 sleep and wake-up at the measured rates (docs/cost-model.md#colocation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.schema.engine import DEFAULT_SLEEP_BACKUP_RATE, DEFAULT_WAKE_LINK_FRACTION

ROOT = Path(__file__).resolve().parent.parent.parent
NEMO = ROOT / "instances" / "published" / "nemo_rl_grpo_llama31_8b_2x8_h100.yaml"


def test_the_defaults_are_the_measured_figures():
    """22 GiB backed up in 10.57 s and restored in 2.19 s over a 25.13 GB/s pinned link."""
    backup = 22 * 2**30
    assert backup / 10.57 == pytest.approx(DEFAULT_SLEEP_BACKUP_RATE, rel=1e-3)
    assert backup / 2.19 / 25.13e9 == pytest.approx(DEFAULT_WAKE_LINK_FRACTION, abs=0.005)


def test_llama_8b_sleeps_at_the_backup_rate_and_wakes_at_a_fraction_of_the_link():
    """Llama-3.1-8B, tp 1: a shard of 2 x 8,029,995,008 = 16,059,990,016 bytes.

    (P = 32 x (4096 x (4096 + 2 x 8 x 128) + 4096 x 4096 + 3 x 4096 x 14336)
    + 2 x 128256 x 4096 = 8,029,995,008: untied embedding and head.)
    Sleep: the slower of the 2.235e9 B/s backup and the 52.8e9 B/s H100 link,
    16,059,990,016 / 2.235e9 = 7.1857 s. Wake: 16,059,990,016 / (35.2e9 x 0.43)
    = 1.0610 s.
    """
    problem = Problem.load(str(NEMO))
    colocation = problem.directory.cost.colocation
    strategy = Strategy(16, 1, 1, 1, gpu_memory_utilization=0.6, max_num_seqs=1024)
    assert colocation.engine_host_bytes("actor", strategy) == 16_059_990_016
    assert colocation.sleep("actor", strategy) == pytest.approx(7.1857, abs=1e-4)
    assert colocation.wake("actor", strategy) == pytest.approx(1.0610, abs=1e-4)
