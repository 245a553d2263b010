"""The local-search scale suite and its benchmark's stopping rule."""

from __future__ import annotations

from benchmarks.localbench import SCALE_SUITE, load_optima, load_variants, proven_score
from rlplan.compare.variants import parse_variant
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.search.stopping import StoppingCriterion


def test_scale_suite_variants_parse_and_span_the_dimensions():
    """Every variant of instances/suites/scale.yaml is a valid instance; together they vary
    the cluster size, k_eval from 1 to 8, staleness sets, min_block_gpus and micro-batch
    size lists."""
    variants = dict(load_variants(SCALE_SUITE))
    assert len(variants) >= 20
    hardware = {
        (d["hardware"]["racks"], d["hardware"]["nodes_per_rack"], d["hardware"]["gpus_per_node"])
        for d in variants.values()
    }
    assert len({r * n * g for r, n, g in hardware}) >= 3
    assert {d["optimizer"]["k_eval"] for d in variants.values()} >= {1, 2, 4, 8}
    assert len({str(d["optimizer"]["staleness_candidates"]) for d in variants.values()}) >= 3
    assert {d["placement"]["min_block_gpus"] for d in variants.values()} >= {1, 4}
    assert len({str(d["placement"]["micro_batch_sizes"]) for d in variants.values()}) >= 2


def test_cached_optima_name_suite_variants_with_a_status_and_bound():
    """The cache holds CP-SAT's status, simulated optimum and raw bound per variant."""
    optima = load_optima(SCALE_SUITE)
    names = {name for name, _ in load_variants(SCALE_SUITE)}
    assert optima and set(optima) <= names
    for record in optima.values():
        assert record["status"] in ("OPTIMAL", "FEASIBLE", "UNKNOWN")
        if record["status"] == "OPTIMAL":
            assert record["bound_s"] <= record["score_s"] * (1 + 1e-12)
            assert record["score_s"] >= record["makespan_s"] * (1 - 1e-12)
            assert record["gap"] <= 1e-4


def test_cached_optima_are_of_the_suite_instances_as_they_are():
    """Every proven record carries the fingerprint of its variant's instance as parsed
    today, so the benchmark counts it; a record of another fingerprint would not count."""
    optima = load_optima(SCALE_SUITE)
    for name, document in load_variants(SCALE_SUITE):
        fingerprint = instance_fingerprint(parse_variant(document, name, name))
        record = optima[name]
        assert record["status"] == "OPTIMAL"
        assert proven_score(record, fingerprint) == record["score_s"]
        assert proven_score(record, "sha256:0000000000000000") is None


def test_budget_ends_the_search_only_once_converged():
    """Past e_max the search goes on while it improved within the last e_max / 2
    evaluations; then it stops, saying so."""
    stop = StoppingCriterion(100)
    assert not stop(99)
    stop.improved(90)
    assert not stop(100)
    assert not stop(139)
    assert stop(140)
    assert "converged" in stop.reason
    idle = StoppingCriterion(100)
    assert idle(100)
