"""Plans as settings of RL frameworks: verl, OpenRLHF, NeMo RL and slime (``export-config``).

One module per framework (:mod:`rlplan.outputs.frameworks.verl`,
:mod:`rlplan.outputs.frameworks.openrlhf`, :mod:`rlplan.outputs.frameworks.nemo_rl`,
:mod:`rlplan.outputs.frameworks.slime`), each with
``settings(facts, plan_name)`` (the ordered keys and comment lines) and
``render(settings)`` (the framework's syntax). Whatever a framework cannot
express is a ``# not expressible in <framework>: ...`` comment line.
"""

from __future__ import annotations

import glob
import json
import os
from types import ModuleType

from rlplan.outputs.frameworks import nemo_rl, openrlhf, slime, verl
from rlplan.outputs.frameworks.common import PlanFacts, Settings
from rlplan.paths import SOURCE_ROOT
from rlplan.rpeg.errors import InputError, InstanceError, PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS as PLAN_SPACES
from rlplan.rpeg.model.frameworks.rules import plan_breaks, pool_sizes
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import load_instance

#: Framework name (as ``--framework`` takes it) -> its module.
FRAMEWORKS: dict[str, ModuleType] = {
    verl.FRAMEWORK: verl,
    openrlhf.FRAMEWORK: openrlhf,
    nemo_rl.FRAMEWORK: nemo_rl,
    slime.FRAMEWORK: slime,
}


def framework_settings(problem: Problem, plan: Plan, framework: str, plan_name: str) -> Settings:
    """The ordered settings of ``plan`` for ``framework``.

    Raises
    ------
    InputError
        For an unknown framework name (path ``--framework``).
    """
    module = FRAMEWORKS.get(framework)
    if module is None:
        raise InputError(
            "--framework",
            f"unknown framework {framework!r} (allowed: {', '.join(FRAMEWORKS)})",
        )
    return module.settings(PlanFacts(problem, plan), plan_name)


#: Framework name -> the name its exports use.
DISPLAY_NAMES = {
    verl.FRAMEWORK: "verl",
    openrlhf.FRAMEWORK: "OpenRLHF",
    nemo_rl.FRAMEWORK: "NeMo RL",
    slime.FRAMEWORK: "slime",
}


def export_config(problem: Problem, plan: Plan, framework: str, plan_name: str = "plan") -> str:
    """``plan`` written as ``framework``'s settings.

    Parameters
    ----------
    problem
        The instance the plan was made for.
    plan
        The plan.
    framework
        ``verl``, ``openrlhf``, ``nemo-rl`` or ``slime``.
    plan_name
        How the header comment names the plan.

    Returns
    -------
    str
        verl: Hydra overrides, one ``key=value`` per line; OpenRLHF and slime:
        one command-line flag per line; NeMo RL: a YAML document. Comment lines
        (``# ...``) carry the header, notes and every setting of the plan the
        framework cannot express.

    Raises
    ------
    InputError
        For an unknown framework name.
    PlanError
        For a plan outside the framework's plan space (:func:`check_runnable`).
    """
    if framework in FRAMEWORKS:
        check_runnable(problem, plan, framework, plan_name)
    settings = framework_settings(problem, plan, framework, plan_name)
    return FRAMEWORKS[framework].render(settings)


def check_runnable(problem: Problem, plan: Plan, framework: str, plan_name: str) -> None:
    """Refuse, in one line naming the rule, a plan ``framework`` cannot run.

    The rules are those of the framework's plan space
    (:mod:`rlplan.rpeg.model.frameworks`): the instance may be one the
    framework cannot run at all, or the plan may break a rule.

    Raises
    ------
    PlanError
        Naming the first rule broken and how to get a plan the framework runs.
    """
    space = PLAN_SPACES[framework]
    fix = f"solve with --framework {framework} for a plan {space.display} can run"
    if plan.fused:
        raise PlanError(
            plan_name,
            "the plan fuses actor and critic into one model (AC-share) and "
            f"{space.display} has no fused actor-critic; solve again without "
            "optimizer.staleness_candidates.ac_share for a plan it can run",
        )
    rule = space.unsupported(problem.instance)
    if rule is not None:
        raise PlanError(plan_name, f"{space.display} rule {rule.name}: {rule.words}")
    template = problem.directory.for_plan(plan).template
    breaks = plan_breaks(space, template, plan, pool_sizes(problem.directory.cluster))
    if breaks:
        rule, line = breaks[0]
        where = line.split(":", 1)[0]
        raise PlanError(
            plan_name, f"{where} breaks {space.display} rule {rule.name}: {rule.words}; {fix}"
        )


def _recorded(plan_path: str) -> tuple[str | None, str | None, str | None]:
    """The instance name, fingerprint and copy a plan records (``None`` when absent or unreadable).

    The copy is the instance file a run folder holds beside its plan (``"file"``).
    """
    try:
        with open(plan_path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None, None, None
    recorded = document.get("instance") if isinstance(document, dict) else None
    if not isinstance(recorded, dict):
        return None, None, None
    name, fingerprint, copy = (recorded.get(key) for key in ("name", "fingerprint", "file"))
    return (
        name if isinstance(name, str) else None,
        fingerprint if isinstance(fingerprint, str) else None,
        copy if isinstance(copy, str) and copy else None,
    )


def locate_instance(plan_path: str, how: str = "give --instance INSTANCE") -> str:
    """The instance file a plan was made for, found without ``--instance``.

    Looks, in order, for the instance copy the plan records (``"file"``,
    beside the plan: a run folder's copy of its instance), ``X.yaml`` beside
    a plan ``X.plan.json`` (the published runs), then, for the instance name
    the plan records,
    ``NAME.yaml`` beside the plan, in the working folder, and in
    ``instances/`` and its subfolders (of the working folder and of this
    repository). A candidate is taken when
    the plan records no fingerprint or its fingerprint matches.

    Parameters
    ----------
    plan_path
        A plan file (``plan.json`` of ``solve``, or a published plan).
    how
        How the error line says to name the instance.

    Returns
    -------
    str
        The path of the instance file.

    Raises
    ------
    InputError
        Naming ``--instance`` when no candidate matches.
    """
    folder = os.path.dirname(os.path.abspath(plan_path))
    base = os.path.basename(plan_path)
    name, fingerprint, copy = _recorded(plan_path)
    candidates = [os.path.join(folder, copy)] if copy is not None else []
    if base.endswith(".plan.json"):
        candidates.append(os.path.join(folder, base[: -len(".plan.json")] + ".yaml"))
    if name is not None:
        root = str(SOURCE_ROOT)
        candidates.append(os.path.join(folder, f"{name}.yaml"))
        candidates.append(os.path.join(os.getcwd(), f"{name}.yaml"))
        for top in dict.fromkeys((os.getcwd(), root)):
            candidates.append(os.path.join(top, "instances", f"{name}.yaml"))
            candidates += sorted(glob.glob(os.path.join(top, "instances", "*", f"{name}.yaml")))
    for candidate in dict.fromkeys(candidates):
        if not os.path.isfile(candidate):
            continue
        if fingerprint is None:
            return candidate
        try:
            if instance_fingerprint(load_instance(candidate)) == fingerprint:
                return candidate
        except InstanceError:
            continue
    recorded = f"instance {name!r}" if name else "no instance name"
    raise InputError(
        "--instance",
        f"cannot tell which instance {plan_path} was made for (it records {recorded}"
        f"{', no matching file found' if name else ''}); {how}",
    )
