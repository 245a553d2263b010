"""Simulator throughput: ``python -m benchmarks.simbench INSTANCE``.

Prints how many plans per second the simulator evaluates on one core, with
the candidate directory built beforehand (as the search uses it).
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.search.sampling import random_plan


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.simbench", description=__doc__)
    parser.add_argument("instance")
    parser.add_argument(
        "--plans", type=int, default=2000, help="distinct random plans (default 2000)"
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="time to measure (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        instance = load_instance(args.instance)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    directory = CandidateDirectory(instance)
    built = time.perf_counter() - started
    simulator = Simulator(directory)
    rng = random.Random(args.seed)
    plans = [random_plan(directory, rng) for _ in range(args.plans)]
    for plan in plans[:50]:  # warm the lag and graph caches
        simulator.evaluate(plan)
    evaluations = 0
    started = time.perf_counter()
    deadline = started + args.seconds
    while time.perf_counter() < deadline:
        for plan in plans:
            simulator.evaluate(plan)
        evaluations += len(plans)
    elapsed = time.perf_counter() - started
    gpus = instance.hardware.num_gpus
    print(
        f"instance            {instance.name} ({instance.algorithm}, {gpus} GPUs, "
        f"k_eval {instance.k_eval})"
    )
    print(f"candidate directory {directory.size} candidates, built in {built:.3f} s")
    print(f"evaluations         {evaluations} in {elapsed:.2f} s")
    print(f"plans per second    {evaluations / elapsed:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
