"""Everything derived from an instance once: candidate directory, simulator, bounds."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property

from rlplan.rpeg.evaluation.bounds import LowerBounds, lower_bounds
from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.frameworks.rules import FieldValues, allowed_words
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.schema.engine import framework_name
from rlplan.rpeg.schema.instance import Instance, load_instance
from rlplan.rpeg.schema.pins import pin_words
from rlplan.rpeg.strategy import value_word
from rlplan.rpeg.templates import FUSED


@dataclass
class Problem:
    """An instance with its candidate directory and simulator, built once and shared.

    For an AC-share instance (PPO with ``staleness_candidates.ac_share``) the
    plan space holds two templates (:attr:`templates`): the problem's
    directory and simulator are the separate template's, :meth:`variant`
    gives the problem restricted to one template (the fused one has its own
    directory and simulator), and :meth:`for_plan` the problem of a plan's
    template. The simulator judges plans of either template.
    """

    instance: Instance
    directory: CandidateDirectory
    simulator: Simulator
    _variants: dict = field(default_factory=dict, repr=False, compare=False)
    _policy_variants: dict = field(default_factory=dict, repr=False, compare=False)
    #: The problems of this instance under each framework (None: the full space),
    #: shared by all of them, so switching back and forth builds each once.
    _frameworks: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_instance(cls, instance: Instance) -> Problem:
        """Build the directory and simulator of ``instance``."""
        directory = CandidateDirectory(instance)
        return cls(instance, directory, Simulator(directory))

    def with_framework(self, name: str | None, path: str = "engine.framework") -> Problem:
        """This problem with ``engine.framework`` set to ``name`` (None: the full plan space).

        Built once per name: the problem this one came from (or went to) is
        returned, not rebuilt.

        Raises
        ------
        InstanceError
            Naming ``path`` for an unknown framework, with the closest name.
        """
        name = framework_name(name, path)
        siblings = self._frameworks
        siblings.setdefault(self.instance.engine.framework, self)
        found = siblings.get(name)
        if found is None:
            engine = dataclasses.replace(self.instance.engine, framework=name)
            found = Problem.from_instance(dataclasses.replace(self.instance, engine=engine))
            found._frameworks = siblings
            siblings[name] = found
        return found

    @property
    def templates(self) -> tuple[str, ...]:
        """The templates of this problem's plan space (``separate``, ``ac_share`` or both)."""
        return self.instance.templates

    @property
    def score_factor(self) -> float:
        """The smallest factor the objective multiplies this problem's makespans by.

        A makespan bound times it bounds the score. For one template:
        ``1 + lambda_ac`` when it is the fused one, times ``1 + lambda_stale``
        when every plan is off-policy (no trained model may take staleness 0),
        else 1. A problem with both templates reports scores: 1.
        """
        if len(self.templates) > 1:
            return 1.0
        on_policy, _ = self.instance.policy_kinds
        return self.instance.score_factor(self.instance.fused, () if on_policy else (("", 1),))

    @property
    def staleness_switch(self) -> bool:
        """Whether the penalty tells on- from off-policy plans here (``lambda_stale`` > 0).

        True when some template's plan space has both on-policy and
        off-policy plans: the exact backends then solve twice
        (:mod:`rlplan.solvers.staleness`).
        """
        if self.instance.lambda_stale <= 0:
            return False
        return any(all(self.variant(t).instance.policy_kinds) for t in self.templates)

    def on_policy(self) -> Problem:
        """This problem with every trained model that may take staleness 0 kept at 0, built once."""
        found = self._policy_variants.get("on_policy")
        if found is None:
            found = self._policy_variants["on_policy"] = Problem.from_instance(
                self.instance.on_policy()
            )
        return found

    def without_stale_penalty(self) -> Problem:
        """This problem with ``lambda_stale`` 0 (the score of every plan ignores staleness)."""
        found = self._policy_variants.get("unpenalised")
        if found is None:
            found = self._policy_variants["unpenalised"] = Problem.from_instance(
                self.instance.without_stale_penalty()
            )
        return found

    def variant(self, template: str) -> Problem:
        """This problem restricted to ``template`` (``separate`` or ``ac_share``), built once.

        The separate variant shares this problem's directory and simulator.
        """
        if self.instance.template == template:
            return self
        found = self._variants.get(template)
        if found is None:
            instance = self.instance.restricted(template)
            fused = template == FUSED
            found = Problem(instance, self.directory.variant(fused), self.simulator.variant(fused))
            found._variants = self._variants
            self._variants[template] = found
        return found

    def for_plan(self, plan: Plan) -> Problem:
        """The problem (restricted to one template when needed) whose directory fits ``plan``."""
        if plan.fused == self.directory.fused:
            return self
        return self.variant(plan.template)

    @cached_property
    def score_bound(self) -> float:
        """Plan-independent lower bound on the score over this problem's plan space.

        For one template with factor ``f`` (``1 + lambda_ac`` when fused, else
        1) and ``B`` the bound of :attr:`bounds`: ``f B`` when staleness is
        not penalised or no plan is off-policy; ``f (1 + lambda_stale) B``
        when every plan is; otherwise ``f min(B_on, (1 + lambda_stale) B)``,
        with ``B_on`` the bound of the on-policy plans (:attr:`on_policy_bounds`):
        an on-policy plan scores at least ``f B_on``, an off-policy one at
        least ``f (1 + lambda_stale) B``. Over both templates, the smaller of
        the two.
        """
        return self._score_bound()[0]

    @property
    def score_bound_source(self) -> str:
        """The plan-independent bound :attr:`score_bound` is: ``critical_path`` or ``compute``."""
        return self._score_bound()[1]

    def _score_bound(self) -> tuple[float, str]:
        """:attr:`score_bound` and the bound it comes from."""
        if len(self.templates) > 1:
            return min(
                (self.variant(template)._score_bound() for template in self.templates),
                key=lambda item: item[0],
            )
        variant = self.variant(self.templates[0])
        instance = variant.instance
        factor = instance.score_factor(instance.fused)
        penalty = 1.0 + instance.lambda_stale
        on_policy, off_policy = instance.policy_kinds
        full = (variant.bounds.best * factor, variant.bounds.source)
        if not on_policy:
            return full[0] * penalty, full[1]
        if not off_policy or instance.lambda_stale <= 0:
            return full
        on = variant.on_policy_bounds
        return min((on.best * factor, on.source), (full[0] * penalty, full[1]))

    @classmethod
    def load(cls, path: str) -> Problem:
        """Load an instance file and build its problem."""
        return cls.from_instance(load_instance(path))

    @cached_property
    def bounds(self) -> LowerBounds:
        """Plan-independent lower bounds on the makespan."""
        return lower_bounds(self.directory, switch=self.simulator.switch)

    @cached_property
    def on_policy_bounds(self) -> LowerBounds:
        """Plan-independent lower bounds on the makespan of the on-policy plans."""
        return lower_bounds(self.directory, on_policy=True, switch=self.simulator.switch)

    def unplaceable(self) -> list[tuple[str, float]]:
        """Vertices that fit on no block, with their smallest memory shortfall in bytes.

        Over both templates of an AC-share problem, only when *both* have such
        a vertex (the vertices of each are listed); one placeable template is
        enough for a plan.
        """
        if len(self.templates) > 1:
            per_template = [self.variant(t).unplaceable() for t in self.templates]
            if all(per_template):
                return [item for missing in per_template for item in missing]
            return []
        missing = []
        for index, vertex in enumerate(self.directory.template.vertices):
            if not self.directory.options[index]:
                shortfall, _ = self.directory.smallest_shortfall(index)
                missing.append((vertex.name, shortfall))
        return missing

    def _framework_words(self, name: str) -> str:
        """Which framework rule leaves vertex ``name`` no value of a placement list ("": none)."""
        framework = self.directory.framework
        if framework is None:
            return ""
        kind = self.directory.template.vertices[self.directory.template.index(name)].kind
        placement = self.instance.placement
        for rule in framework.of_kind(FieldValues):
            listed = getattr(placement, rule.field, None)
            if not rule.covers(name, kind) or not isinstance(listed, tuple):
                continue
            if not set(listed) & set(rule.allowed):
                shown = ", ".join(value_word(value) for value in listed)
                return (
                    f"in {framework.display}'s plan space: rule {rule.name} allows "
                    f"{rule.field} {allowed_words(rule)} and placement.{rule.field} lists {shown}"
                )
        return f"in {framework.display}'s plan space (engine.framework)"

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
        if name not in directory.template.names and len(self.templates) > 1:
            return self.variant(FUSED).unplaceable_reason(name, shortfall)
        pin = self.instance.placement.pin.vertex(name)
        pinned = "" if pin is None else f" under placement.pin.{name} {pin_words(pin)}"
        capacity = directory.capacity
        if math.isinf(shortfall):
            framework = self._framework_words(name)
            if framework:
                return f"{name} has no strategy{pinned} {framework}"
            if pin is None:
                return f"{name} has no strategy in the plan space of the placement lists"
            return (
                f"{name} has no strategy{pinned}: no block and strategy of the plan space match it"
            )
        _, leanest = directory.smallest_shortfall(directory.template.index(name))
        if leanest is not None:
            capacity = directory.capacity_of(leanest.shape)
        refused = None if leanest is None else directory.refusal(leanest)
        if refused is not None and leanest is not None and leanest.memory <= capacity:
            # Memory would do; the rollout engine's KV pool is what falls short.
            best = leanest.strategy.label()
            reason = f"{name} fits on no block{pinned}: at its best ({best}) {refused}"
        else:
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
