"""Everything derived from an instance once: candidate directory, simulator, bounds."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from rpeg.bounds import LowerBounds, lower_bounds
from rpeg.candidates import CandidateDirectory
from rpeg.instance import Instance, load_instance
from rpeg.simulator import Simulator


@dataclass
class Problem:
    """An instance with its candidate directory and simulator, built once and shared."""

    instance: Instance
    directory: CandidateDirectory
    simulator: Simulator

    @classmethod
    def from_instance(cls, instance: Instance) -> Problem:
        """Build the directory and simulator of ``instance``."""
        directory = CandidateDirectory(instance)
        return cls(instance, directory, Simulator(directory))

    @classmethod
    def load(cls, path: str) -> Problem:
        """Load an instance file and build its problem."""
        return cls.from_instance(load_instance(path))

    @cached_property
    def bounds(self) -> LowerBounds:
        """Plan-independent lower bounds on the makespan."""
        return lower_bounds(self.directory)

    def unplaceable(self) -> list[tuple[str, float]]:
        """Vertices that fit on no block, with their smallest memory shortfall in bytes."""
        missing = []
        for index, vertex in enumerate(self.directory.template.vertices):
            if not self.directory.options[index]:
                shortfall, _ = self.directory.smallest_shortfall(index)
                missing.append((vertex.name, shortfall))
        return missing
