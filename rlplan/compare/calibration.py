"""Fitted knobs and their leave-one-out check: ``python -m rlplan.compare.calibration``.

Most cost-model defaults come from a public measurement (docs/cost-model.md).
The knobs of :data:`FITTED` have none that isolates them, so their defaults
are *fitted*: the value that best predicts the published runs of
``instances/published/`` when their published plans are simulated (the
dense runs: the mixture-of-experts runs are checks the fit never sees). The fit
minimises the sum, over runs, of the squared log of predicted / measured for
the step and for every measured phase (a 20 % miss counts as much above as
below).

A fit that only holds the runs it was fitted on proves little, so the
leave-one-out table predicts each run with every knob fitted on the *other*
runs alone: that is the error to expect on a run the model has not seen
(docs/cost-model.md#fitted-knobs).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlplan.compare.realism import HELD_OUT, PUBLISHED, RunCheck, check_run, published_runs
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.instance import Instance, load_instance

#: Golden-section ratio, (sqrt(5) - 1) / 2.
GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True)
class Knob:
    """A hardware field whose default is fitted to the published runs.

    Attributes
    ----------
    field
        The ``hardware`` field (a :class:`~rlplan.rpeg.schema.hardware.Hardware` attribute).
    low, high
        The interval the fit searches.
    why
        Why no public measurement sets it directly.
    """

    field: str
    low: float
    high: float
    why: str


#: The fitted knobs (docs/cost-model.md#fitted-knobs).
FITTED: tuple[Knob, ...] = (
    Knob(
        "non_gemm_ratio",
        0.0,
        2.0,
        "non-GEMM kernel time per GEMM second in train and infer passes; the public "
        "figures are end-to-end MFU, which also holds communication, bubbles and the "
        "optimizer that the model prices separately",
    ),
)


#: The knob fitted to the phases of the mixture-of-experts runs that publish them
#: (docs/cost-model.md#fitted-knobs); the other MoE runs check it.
FITTED_MOE = Knob(
    "moe_expert_overhead",
    0.0,
    0.005,
    "fixed time per expert a GPU holds, MoE layer and pass of Megatron's token "
    "dispatcher; no public measurement isolates it, one published run times the "
    "training and log-prob phases of an MoE step apart",
)


@dataclass(frozen=True)
class Run:
    """A published run: its instance (as loaded) and its plan file."""

    instance_path: Path
    plan_path: Path
    instance: Instance

    @property
    def name(self) -> str:
        """The run's name (its instance file's stem)."""
        return self.instance.name


def load_runs(folder: Path = PUBLISHED) -> list[Run]:
    """Every published run of ``folder`` (instance and plan) of dense models.

    The knobs were fitted to the dense runs; a run of a mixture of experts is
    left out, and so is a held-out dense run (:data:`~rlplan.compare.realism.HELD_OUT`),
    so that its check (:mod:`rlplan.compare.realism`) stays a check of the model
    on a run it was not fitted to.
    """
    return _runs(folder, lambda instance: not instance.has_moe and instance.name not in HELD_OUT)


def load_moe_runs(folder: Path = PUBLISHED) -> list[Run]:
    """The published runs of a mixture of experts that publish phase times."""
    return _runs(
        folder,
        lambda instance: (
            instance.has_moe and instance.reference is not None and bool(instance.reference.phases)
        ),
    )


def _runs(folder: Path, keep: Callable[[Instance], bool]) -> list[Run]:
    """The published runs of ``folder`` whose instance ``keep`` accepts."""
    runs = []
    for instance_path, plan_path in published_runs(folder):
        instance = load_instance(instance_path)
        if keep(instance):
            runs.append(Run(instance_path, plan_path, instance))
    return runs


def phase_loss(runs: Sequence[Run], values: dict[str, float]) -> float:
    """Sum of squared log errors of the phases of ``runs`` at ``values``."""
    return sum(math.log(phase.ratio) ** 2 for run in runs for phase in predict(run, values).phases)


def fit_moe(runs: Sequence[Run], tolerance: float = 1e-6) -> float:
    """:data:`FITTED_MOE`'s value minimising :func:`phase_loss` over ``runs``."""
    knob = FITTED_MOE
    return golden_section(
        lambda value: phase_loss(runs, {knob.field: value}), knob.low, knob.high, tolerance
    )


def with_knobs(instance: Instance, values: dict[str, float]) -> Instance:
    """``instance`` with the hardware fields of ``values`` replaced."""
    if not values:
        return instance
    hardware = dataclasses.replace(instance.hardware, **values)
    return dataclasses.replace(instance, hardware=hardware)


def predict(run: Run, values: dict[str, float]) -> RunCheck:
    """The realism check of ``run`` with the knobs set to ``values``."""
    check, _, _ = check_run(run.instance_path, run.plan_path, with_knobs(run.instance, values))
    return check


def log_errors(check: RunCheck) -> list[float]:
    """log(predicted / measured) of the step and of every measured phase."""
    return [math.log(check.ratio), *(math.log(phase.ratio) for phase in check.phases)]


def loss(runs: Sequence[Run], values: dict[str, float]) -> float:
    """Sum of squared log errors of ``runs`` (steps and phases) at ``values``."""
    return sum(e * e for run in runs for e in log_errors(predict(run, values)))


def golden_section(
    function: Callable[[float], float], low: float, high: float, tolerance: float
) -> float:
    """The minimiser of a unimodal ``function`` on [low, high], within ``tolerance``."""
    a, b = low, high
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = function(c), function(d)
    while b - a > tolerance:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = function(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = function(d)
    return (a + b) / 2


def fit(
    runs: Sequence[Run],
    knobs: Sequence[Knob] = FITTED,
    tolerance: float = 1e-3,
    sweeps: int = 3,
) -> dict[str, float]:
    """Knob values minimising :func:`loss` over ``runs`` (coordinate descent, golden section).

    One sweep suffices for one knob; several knobs are fitted one at a time,
    ``sweeps`` times over.
    """
    values = {knob.field: getattr(runs[0].instance.hardware, knob.field) for knob in knobs}
    for _ in range(sweeps if len(knobs) > 1 else 1):
        for knob in knobs:

            def at(value: float, name: str = knob.field) -> float:
                return loss(runs, {**values, name: value})

            values[knob.field] = golden_section(at, knob.low, knob.high, tolerance)
    return values


@dataclass(frozen=True)
class HeldOut:
    """One run predicted with the knobs fitted on the other runs."""

    name: str
    values: dict[str, float]
    fitted_ratio: float
    held_out_ratio: float


def leave_one_out(runs: Sequence[Run], fitted: dict[str, float]) -> list[HeldOut]:
    """Each run predicted with the knobs fitted without it (and with the full fit)."""
    rows = []
    for index, run in enumerate(runs):
        others = [other for position, other in enumerate(runs) if position != index]
        values = fit(others)
        rows.append(
            HeldOut(run.name, values, predict(run, fitted).ratio, predict(run, values).ratio)
        )
    return rows


def render(runs: Sequence[Run], fitted: dict[str, float], rows: list[HeldOut]) -> str:
    """The fit and the leave-one-out table as text."""
    knobs = ", ".join(f"{name} = {value:.3f}" for name, value in fitted.items())
    lines = [f"fitted on all {len(runs)} runs: {knobs} (loss {loss(runs, fitted):.4f})", ""]
    names = list(fitted)
    header = f"{'run':44s} {'all runs':>8s} {'held out':>8s}  " + "  ".join(
        f"{name + ' without it':>24s}" for name in names
    )
    lines.append(header)
    for row in rows:
        knob_columns = "  ".join(f"{row.values[name]:24.3f}" for name in names)
        lines.append(
            f"{row.name:44s} {row.fitted_ratio:8.2f} {row.held_out_ratio:8.2f}  {knob_columns}"
        )
    worst = max(rows, key=lambda row: abs(math.log(row.held_out_ratio)))
    lines.append(
        f"worst held-out step ratio: {worst.held_out_ratio:.2f} ({worst.name}); ratios are "
        "predicted / measured step time"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Fit the knobs to the published runs and print the leave-one-out table."""
    parser = argparse.ArgumentParser(
        prog="python -m rlplan.compare.calibration", description=__doc__
    )
    parser.add_argument(
        "--folder", default=str(PUBLISHED), help="folder of published runs (default: shipped)"
    )
    args = parser.parse_args(argv)
    try:
        runs = load_runs(Path(args.folder))
        if len(runs) < 2:
            print(f"error: {args.folder}: leave-one-out needs at least two published runs")
            return 2
        fitted = fit(runs)
        rows = leave_one_out(runs, fitted)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(runs, fitted, rows))
    moe_runs = load_moe_runs(Path(args.folder))
    if moe_runs:
        value = fit_moe(moe_runs)
        names = ", ".join(run.name for run in moe_runs)
        print(
            f"\n{FITTED_MOE.field} = {value:.3g} s, fitted to the phases of {names} "
            f"(loss {phase_loss(moe_runs, {FITTED_MOE.field: value}):.4f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
