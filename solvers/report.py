"""The human-readable ``report.md`` of a solve."""

from __future__ import annotations

from rpeg.context import Problem
from rpeg.simulator import Trace
from rpeg.vocabulary import framework_markdown, framework_view
from solvers.result import Result


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f} s"


def render_report(problem: Problem, result: Result, trace: Trace | None) -> str:
    """Markdown summary of a result: status, figures, placement and framework settings."""
    instance = problem.instance
    hardware = instance.hardware
    lines = [
        f"# Plan for `{instance.name}`",
        "",
        f"{instance.algorithm.upper()} on {hardware.racks} x {hardware.nodes_per_rack} x "
        f"{hardware.gpus_per_node} = {hardware.num_gpus} GPUs, k_eval = {instance.k_eval}.",
        "",
        "| | |",
        "|---|---|",
        f"| status | {result.status.value} |",
        f"| solver | {result.solver} |",
        f"| step time (simulated) | {_seconds(result.step_time)} |",
        f"| makespan of {instance.k_eval} steps | {_seconds(result.makespan)} |",
    ]
    if trace is not None:
        lines += [
            f"| samples/s | {trace.samples_per_s:.3f} |",
            f"| generated tokens/s | {trace.generated_tokens_per_s:.1f} |",
        ]
    bound = None if result.bound is None else result.bound / instance.k_eval
    gap = "—" if result.gap is None else f"{result.gap:.4%}"
    lines += [
        f"| lower bound on the step time | {_seconds(bound)} |",
        f"| gap | {gap} |",
        f"| wall time | {result.wall_time:.2f} s |",
    ]
    if result.message:
        lines += [f"| note | {result.message} |"]
    lines += [
        "",
        "Optimality, bound and gap are over the plan space: aligned power-of-two blocks, "
        "the strategies and microbatch counts of the instance, and its staleness candidates.",
    ]
    if result.plan is None or trace is None:
        return "\n".join(lines) + "\n"
    plan, directory = result.plan, problem.directory
    lines += [
        "",
        "## Placement",
        "",
        "| vertex | block | GPUs | dp | pp | tp | microbatches | run time "
        "| memory per GPU (alone) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for index, (vertex, placement) in enumerate(
        zip(directory.template.vertices, plan.placements, strict=True)
    ):
        strategy = placement.strategy
        candidate = directory.candidate(index, placement.block.extent, strategy)
        block = placement.block
        lines.append(
            f"| {vertex.name} | origin {list(block.origin)} extent {list(block.extent)} | "
            f"{block.label()} | {strategy.dp} | {strategy.pp} | {strategy.tp} | "
            f"{strategy.microbatches} | {candidate.time:.4f} s | {candidate.memory / 1e9:.2f} GB |"
        )
    lines += ["", "## Staleness", ""]
    lines += [f"- {model}: {value}" for model, value in plan.staleness]
    lines += ["", *framework_markdown(framework_view(problem, plan, trace))]
    lines += [
        "",
        "## Memory per GPU",
        "",
        f"Usable capacity {trace.capacity_bytes / 1e9:.2f} GB per GPU.",
        "",
        "| GPU | peak |",
        "|---|---|",
    ]
    lines += [
        f"| {gpu} | {peak / 1e9:.2f} GB |" for gpu, peak in enumerate(trace.peak_memory_bytes)
    ]
    return "\n".join(lines) + "\n"
