"""``check``, ``baseline`` and ``simulate``: an instance's sizes and bounds, and plans judged
by the simulator without a solver."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

from rlplan.cli.common import (
    EXIT_INFEASIBLE,
    EXIT_NO_PLAN,
    EXIT_OK,
    default_out,
    gigabytes,
    load_problem,
    report_unplaceable,
)
from rlplan.cli.run_folder import instance_copy, recorded_instance
from rlplan.outputs.cost import cost_lines
from rlplan.outputs.files import (
    OutputBundle,
    check_output_file,
    check_output_folder,
    write_json,
    write_text,
)
from rlplan.outputs.gantt import write_gantt
from rlplan.outputs.pool_groups import memory_lines, pool_spans
from rlplan.outputs.report_md import render_report
from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.model.parameters import active_parameter_count, parameter_count
from rlplan.rpeg.model.plan import plan_to_json, read_plan
from rlplan.rpeg.schema.json_schema import instance_json_schema
from rlplan.rpeg.schema.mixture import MLA
from rlplan.rpeg.schema.model_presets import MODEL_PRESETS
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.pins import pin_words
from rlplan.rpeg.schema.pools import cluster_words
from rlplan.solvers.common import best_over_templates, plan_result
from rlplan.solvers.value import BASELINES


def command_check(args: argparse.Namespace) -> int:
    """Print what the instance implies: sizes, fastest candidates, bounds."""
    problem = load_problem(args.instance)
    print_sizes(problem)
    print_fastest_candidates(problem)
    if report_unplaceable(problem):
        return EXIT_INFEASIBLE
    print_bounds(problem)
    return EXIT_OK


def print_sizes(problem: Problem) -> None:
    """The instance's cluster, models, plan space, pins and templates."""
    instance, directory = problem.instance, problem.directory
    cluster = directory.cluster
    print(f"instance     {instance.name}: {instance.algorithm}, k_eval {instance.k_eval}")
    for index, pool in enumerate(instance.pools):
        words = cluster_words((pool,))
        name = "" if pool.name is None else f" pool {pool.name}:"
        print(
            f"{'cluster' if index == 0 else '':<12}{name} {words}, "
            f"{gigabytes(pool.hardware.usable_memory)} usable each"
        )
    print("models")
    for model, spec in instance.models.items():
        params = parameter_count(spec, model)
        shape = f"{spec.layers} layers, d {spec.hidden_dim}"
        print(f"  {model:<10} {params / 1e9:8.3f} B parameters ({shape})")
        if spec.is_moe:
            print(f"  {'':<10} {mixture_words(spec, model)}")
    rule = instance.reward_rule
    if rule is not None:
        print(
            f"  {'reward':<10} rule on CPU: {rule.seconds_per_sample:g} s per sample, "
            f"{rule.workers} worker(s), {instance.reward_rule_seconds:.4g} s per step "
            "(a delay before the reward's consumers, no vertex)"
        )
    framework = directory.framework
    if framework is not None:
        refused = framework.unsupported(instance)
        what = f"cannot run this instance: {refused.line()}" if refused else "narrow the plan space"
        rules = len(framework.rules)
        print(f"framework    {framework.display} {framework.release}: {rules} rules {what}")
    print(
        f"plan space   {len(cluster.blocks)} blocks, {len(cluster.shapes)} shapes, "
        f"{directory.size} candidates, "
        f"{directory.assignment_count()} (vertex, block, strategy) assignments"
    )
    refused = (
        f", {directory.refused} rollouts left out (the engine's KV pool holds no "
        "sequence of S + T tokens)"
        if directory.refused
        else ""
    )
    print(
        f"             {directory.enumerated} strategies per (vertex, shape) enumerated, "
        f"{directory.fitting} fit in memory, {directory.size} kept after dominance pruning"
        + refused
    )
    pins = instance.placement.pin
    if pins:
        pinned = [f"{name} {pin_words(pin)}" for name, pin in pins.vertices]
        pinned += [f"staleness {model} {steps}" for model, steps in pins.staleness]
        print(f"pins         {'; '.join(pinned)}")
    if instance.ac_share:
        print(
            f"templates    separate actor and critic, or fused actor-critic (ac_share): "
            f"fused score = step time x (1 + lambda_ac) = x {1 + instance.lambda_ac:g}"
        )


def mixture_words(spec: ModelSpec, model: str) -> str:
    """A mixture of experts' active parameters and experts, e.g. ``3.353 B active per token
    (qwen3-30b-a3b-like MoE: 128 experts, 8 per token)``."""
    like = next(
        (
            f"{name}-like "
            for name, preset in MODEL_PRESETS.items()
            if preset.is_moe and ModelSpec(**preset.fields()) == spec
        ),
        "",
    )
    parts = [f"{spec.experts} experts", f"{spec.experts_per_token} per token"]
    if spec.shared_experts:
        parts.append(f"{spec.shared_experts} shared")
    if spec.dense_layers:
        parts.append(f"{spec.dense_layers} dense layers")
    if spec.attention == MLA:
        parts.append("MLA")
    active = active_parameter_count(spec, model)
    return f"{active / 1e9:8.3f} B active per token ({like}MoE: {', '.join(parts)})"


def print_fastest_candidates(problem: Problem) -> None:
    """The fastest candidate of every vertex of every template."""
    directory = problem.directory
    print("fastest candidate per vertex")
    for template in problem.templates:
        variant = problem.variant(template).directory
        shown = variant.template.vertices
        if template != problem.templates[0]:
            # The fused template's own vertices (the shared ones are listed above).
            shown = tuple(v for v in shown if v.name not in directory.template.names)
        for vertex in shown:
            index = variant.template.index(vertex.name)
            candidate = variant.fastest(index)
            if candidate is None:
                print(f"  {vertex.name:<16} none fits in memory")
                continue
            size = candidate.shape[0] * candidate.shape[1] * candidate.shape[2]
            print(
                f"  {vertex.name:<16} {candidate.time:10.4f} s on {size:>4} GPUs "
                f"{candidate.strategy.label():<24} {gigabytes(candidate.memory)} per GPU"
            )


def print_bounds(problem: Problem) -> None:
    """The lower bounds on the makespan of every template."""
    instance = problem.instance
    for template in problem.templates:
        variant = problem.variant(template)
        if variant.unplaceable():
            print(f"the {template} template has a vertex that fits nowhere: only the other counts")
            continue
        bounds, factor = variant.bounds, variant.score_factor
        words = "lower bounds on the makespan (step time = makespan / k_eval)"
        if len(problem.templates) > 1:
            words = f"{template}: lower bounds on the makespan" + (
                f"; on the score: x {factor:g}" if factor != 1 else ""
            )
        print(words)
        for label, value in (
            ("compute", bounds.compute),
            ("critical path", bounds.critical_path),
            ("area and path", bounds.area_path),
        ):
            print(f"  {label:<14} {value:10.4f} s  (step {value / instance.k_eval:.4f} s)")


def gpu_memory_lines(trace: Trace, problem: Problem) -> list[str]:
    """The GPU memory line, one per pool when the instance has several (docs/outputs.md)."""
    spans = pool_spans(problem.instance.pools)
    if spans:
        return memory_lines(trace, spans, gigabytes)
    peak = max(trace.peak_memory_bytes)
    return [f"memory       peak {gigabytes(peak)} of {gigabytes(trace.capacity_bytes)} per GPU"]


def print_trace_summary(trace: Trace, problem: Problem) -> None:
    """Print the simulated figures of a plan."""
    if trace.period is not None:
        k = trace.k_eval
        print(f"makespan     {trace.unrolled_makespan:.4f} s over {k} steps (with the fill)")
        print(
            f"step time    {trace.step_time:.4f} s steady-state step (the period; "
            f"makespan({k})/{k} {trace.unrolled_step:.4f} s)"
        )
    else:
        print(f"makespan     {trace.makespan:.4f} s over {trace.k_eval} steps")
        print(f"step time    {trace.step_time:.4f} s")
    if problem.instance.ac_share or trace.factor != 1:
        if trace.template is not None:
            fused = trace.template == "ac_share"
            words = "fused actor-critic" if fused else "separate actor and critic"
            print(f"template     {trace.template} ({words})")
        print(
            f"score        {trace.score_step:.4f} s per step (step time x {trace.factor:g}; "
            "what the solvers minimise)"
        )
    print(f"samples/s    {trace.samples_per_s:.3f}")
    print(f"tokens/s     {trace.generated_tokens_per_s:.1f} generated")
    instance = problem.instance
    for line in cost_lines(instance.pools, trace.step_time, instance.workload.sequences):
        print(line)
    print("\n".join(gpu_memory_lines(trace, problem)))
    host = max(trace.host_memory_bytes, default=0.0)
    if host > 0:
        capacity = gigabytes(trace.host_capacity_bytes)
        print(f"host memory  peak {gigabytes(host)} of {capacity} per node")
    if trace.violation_bytes > 0:
        worst = max(range(len(trace.peak_memory_bytes)), key=lambda g: trace.peak_memory_bytes[g])
        print(f"INFEASIBLE: GPU {worst} overflows memory by {gigabytes(trace.violation_bytes)}")
    for overflow in trace.host_overflows:
        print(
            f"INFEASIBLE: node {overflow.node} overflows host memory: needs "
            f"{gigabytes(overflow.needed)} of {gigabytes(overflow.capacity)} "
            f"({', '.join(overflow.vertices)})"
        )


def write_plan_outputs(
    out: str,
    problem: Problem,
    plan_document: dict,
    trace: Trace,
    extra: dict[str, Callable[[str], None]] | None = None,
    status: str | None = None,
) -> list[str]:
    """Write a baseline's run folder (plan, trace, Gantt chart and ``extra``) in whole."""
    with OutputBundle(out, replace=True) as bundle:
        bundle.write_json("plan.json", plan_document)
        bundle.write_json("trace.json", trace.to_json())
        bundle.write_with(
            "gantt.png",
            lambda path: write_gantt(
                trace,
                problem.instance.layout_hardware,
                path,
                instance_name=problem.instance.name,
                status=status,
                pools=problem.instance.pools,
            ),
        )
        for name, writer in (extra or {}).items():
            bundle.write_with(name, writer)
        return bundle.commit()


def command_baseline(args: argparse.Namespace) -> int:
    """Build a baseline plan, simulate it and write plan, trace, report, Gantt chart and the
    instance's copy (``--out``, by default ``runs/<instance>-<time>`` as ``solve``)."""
    started = time.perf_counter()
    if args.out:
        check_output_folder(args.out, run=True)
    problem = load_problem(args.instance)
    copy = instance_copy(args.instance, problem.instance)
    out = args.out or default_out(problem.instance.name)
    if not args.out:
        check_output_folder(out, run=True)
    if report_unplaceable(problem):
        return EXIT_INFEASIBLE
    build = BASELINES[args.kind]
    plan, _ = best_over_templates(problem, build)
    if plan is None:
        print(f"no plan: the {args.kind} baseline found no memory-feasible plan")
        return EXIT_NO_PLAN
    trace = problem.simulator.simulate(plan)
    print(f"{args.kind} baseline for {problem.instance.name}")
    print_trace_summary(trace, problem)
    result = plan_result(problem, args.kind, plan, started)
    report = render_report(problem, result, trace)

    extra = {"report.md": _text_writer(report)}
    document = plan_to_json(plan, problem.directory)
    if copy is not None:
        extra[copy.name] = _text_writer(copy.text)
        copy.record(document)
    written = write_plan_outputs(
        out,
        problem,
        document,
        trace,
        extra=extra,
        status=f"{result.status.value} ({args.kind} baseline)",
    )
    print("wrote " + ", ".join(written))
    return EXIT_OK


def _text_writer(text: str) -> Callable[[str], None]:
    """A writer of ``text`` to the path it is given (for :func:`write_plan_outputs`)."""

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)

    return write


def command_simulate(args: argparse.Namespace) -> int:
    """Simulate a plan file (of the instance given, or the one the plan records)."""
    check_output_file(args.trace, "--trace")
    check_output_file(args.gantt, "--gantt")
    if args.instance is None:
        if not os.path.isfile(args.plan):
            raise PlanError(args.plan, "no such file")
        args.instance = recorded_instance(
            args.plan, "instance", "give it first: simulate INSTANCE PLAN"
        )
    problem = load_problem(args.instance)
    plan = read_plan(args.plan, problem.directory)
    trace = problem.simulator.simulate(plan)
    print_trace_summary(trace, problem)
    if args.trace:
        write_json(args.trace, trace.to_json())
        print(f"wrote {args.trace}")
    if args.gantt:
        folder = os.path.dirname(os.path.abspath(args.gantt))
        os.makedirs(folder, exist_ok=True)
        temporary = os.path.join(folder, f".tmp-{os.path.basename(args.gantt)}")
        write_gantt(
            trace,
            problem.instance.layout_hardware,
            temporary,
            instance_name=problem.instance.name,
            pools=problem.instance.pools,
        )
        os.replace(temporary, args.gantt)
        print(f"wrote {args.gantt}")
    return EXIT_OK if trace.feasible else EXIT_INFEASIBLE


def command_schema(args: argparse.Namespace) -> int:
    """Print (or write to ``--out``) the instance format's JSON Schema; exit code 0."""
    text = json.dumps(instance_json_schema(), indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    check_output_file(args.out, "--out")
    write_text(args.out, text)
    print(f"wrote {args.out}")
    return 0
