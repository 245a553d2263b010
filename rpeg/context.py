"""Everything derived from an instance once: candidate directory, simulator, bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from rpeg.bounds import LowerBounds, lower_bounds
from rpeg.candidates import CandidateDirectory
from rpeg.instance import Instance, load_instance
from rpeg.pins import pin_words
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

    def unplaceable_reason(self, name: str, shortfall: float) -> str:
        """Why vertex ``name`` fits on no block, in one sentence naming its pin if it has one.

        Parameters
        ----------
        name
            A vertex from :meth:`unplaceable`.
        shortfall
            Its smallest memory shortfall in bytes (``inf``: no strategy at all).

        Returns
        -------
        str
            E.g. ``actor.train fits on no block under placement.pin.actor.train
            {recompute: none}: its leanest strategy needs 17.43 GB per GPU, 2.31 GB
            more than the usable 15.12 GB (without the pin it fits)``.
        """
        directory = self.directory
        pin = self.instance.placement.pin.vertex(name)
        pinned = "" if pin is None else f" under placement.pin.{name} {pin_words(pin)}"
        capacity = directory.capacity
        if math.isinf(shortfall):
            if pin is None:
                return f"{name} has no strategy in the plan space of the placement lists"
            return (
                f"{name} has no strategy{pinned}: no block and strategy of the plan space match it"
            )
        reason = (
            f"{name} fits on no block{pinned}: its leanest strategy needs "
            f"{(capacity + shortfall) / 1e9:.2f} GB per GPU, {shortfall / 1e9:.2f} GB "
            f"more than the usable {capacity / 1e9:.2f} GB"
        )
        if pin is not None:
            free, _ = directory.smallest_shortfall(directory.template.index(name), pinned=False)
            if free <= 0:
                reason += " (without the pin it fits)"
        return reason
