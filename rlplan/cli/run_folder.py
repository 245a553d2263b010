"""A run folder that stands alone: the instance is copied beside the plan that records it.

``solve`` and ``baseline`` write ``<instance name>.yaml`` into their run folder
with the other outputs (staged and swapped in whole), and plan.json and
result.json name it under ``"instance"``, ``"file"``. ``simulate``,
``export-config``, ``pareto`` and ``sweep`` find it from the plan
(:func:`~rlplan.outputs.frameworks.locate_instance`, :func:`instance_argument`),
from any folder, whatever became of the original instance file.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from rlplan.outputs.files import RECORDING_FILES
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import Instance, parse_instance
from rlplan.rpeg.schema.presets import expand_model
from rlplan.rpeg.schema.yamlio import loads, read_yaml_file


@dataclass(frozen=True)
class InstanceCopy:
    """The copy of an instance file that a run folder holds.

    Attributes
    ----------
    name
        Its file name in the run folder, ``<instance name>.yaml`` (so that it
        loads as an instance of the same name).
    text
        Its content.
    fingerprint
        The instance's fingerprint (:func:`instance_fingerprint`).
    """

    name: str
    text: str
    fingerprint: str

    def record(self, document: dict[str, Any]) -> dict[str, Any]:
        """``document`` (a plan or result.json) with an ``"instance"`` entry naming this copy.

        Parameters
        ----------
        document
            The document; a plan already records the instance's name and
            fingerprint, and a result.json is given them.

        Returns
        -------
        dict[str, Any]
            The same document, changed in place.
        """
        name = self.name.removesuffix(".yaml")
        entry = document.setdefault("instance", {"name": name, "fingerprint": self.fingerprint})
        entry["file"] = self.name
        return document


def instance_copy(source: str, instance: Instance) -> InstanceCopy | None:
    """The copy of the instance file ``source`` for a run folder.

    The file is copied as written, comments included, unless a model reads
    its shape from an ``hf_config`` file: that model's shape is then written
    out in full, so that the copy needs no other file.

    Parameters
    ----------
    source
        The instance file given on the command line.
    instance
        What it parsed to (the copy must read back with the same fingerprint).

    Returns
    -------
    InstanceCopy or None
        None, with a warning on stderr, when the copy would not read back as
        the same instance (the run folder then holds no copy).
    """
    with open(source, encoding="utf-8") as handle:
        text = handle.read()
    data = read_yaml_file(source)
    models = data.get("models") if isinstance(data, dict) else None
    if isinstance(models, dict) and any(
        isinstance(spec, dict) and "hf_config" in spec for spec in models.values()
    ):
        text = _with_shapes_written_out(data, source)
    if isinstance(data, dict) and _framework_of(data) != instance.engine.framework:
        text = _with_framework(data, source, instance.engine.framework)
    fingerprint = instance_fingerprint(instance)
    try:
        same = instance_fingerprint(parse_instance(loads(text), instance.name)) == fingerprint
    except InputError:
        same = False
    if not same:
        print(
            f"warning: {source} is not copied into the run folder: its copy would not "
            "read back as the same instance",
            file=sys.stderr,
        )
        return None
    return InstanceCopy(f"{instance.name}.yaml", text, fingerprint)


def _with_shapes_written_out(data: dict[str, Any], source: str) -> str:
    """The instance document as YAML, every ``hf_config`` model given its shape in full."""
    base = os.path.dirname(os.path.abspath(source))
    document = dict(data)
    document["models"] = {
        role: expand_model(spec, f"models.{role}", base)
        if isinstance(spec, dict) and "hf_config" in spec
        else spec
        for role, spec in data["models"].items()
    }
    header = (
        f"# {os.path.basename(source)} as a run copied it: the models' hf_config shapes "
        "written out\n"
    )
    return header + yaml.safe_dump(json.loads(json.dumps(document)), sort_keys=False)


def _framework_of(data: dict[str, Any]) -> Any:
    engine = data.get("engine")
    return engine.get("framework") if isinstance(engine, dict) else None


def _with_framework(data: dict[str, Any], source: str, framework: str | None) -> str:
    """The instance document as YAML with ``engine.framework`` set as ``--framework`` gave it.

    A run solved with ``--framework`` holds an instance that says so, so that
    ``sweep`` and ``solve`` from the folder stay in that framework's plan space.
    """
    base = os.path.dirname(os.path.abspath(source))
    document = dict(data)
    models = data.get("models")
    if isinstance(models, dict):
        document["models"] = {
            role: expand_model(spec, f"models.{role}", base)
            if isinstance(spec, dict) and "hf_config" in spec
            else spec
            for role, spec in models.items()
        }
    engine = data.get("engine")
    document["engine"] = {**(engine if isinstance(engine, dict) else {}), "framework": framework}
    header = f"# {os.path.basename(source)} as a run copied it: engine.framework {framework}\n"
    return header + yaml.safe_dump(json.loads(json.dumps(document)), sort_keys=False)


def recorded_instance(plan: str, option: str, how: str) -> str:
    """The instance file a plan was made for, found from what it records.

    Parameters
    ----------
    plan
        A plan file, or a result.json.
    option
        The argument the error line names.
    how
        How the error line says to name the instance.

    Raises
    ------
    InputError
        Naming ``option`` when no instance file matches the plan.
    """
    # Imported here: it loads the framework exporters, which only these paths need.
    from rlplan.outputs.frameworks import locate_instance

    try:
        return locate_instance(plan, how)
    except InputError as exc:
        raise InputError(option, exc.message) from None


def instance_argument(path: str) -> str:
    """The instance file an INSTANCE argument names: itself, or what a run records.

    Parameters
    ----------
    path
        An instance file, a plan file (``.json``: the instance it was made
        for) or a run folder (the instance its plan.json or result.json
        records).

    Returns
    -------
    str
        The instance file.

    Raises
    ------
    InputError
        For a folder that holds neither plan.json nor result.json, or a plan
        whose instance cannot be found.
    """
    how = "give the instance file instead"
    if os.path.isdir(path):
        for name in RECORDING_FILES:
            recording = os.path.join(path, name)
            if os.path.isfile(recording):
                return recorded_instance(recording, "instance", how)
        raise InputError(
            path, "is a folder without plan.json or result.json: give an instance file or a run"
        )
    if path.endswith(".json"):
        if not os.path.isfile(path):
            raise InputError(path, "no such file")
        return recorded_instance(path, "instance", how)
    return path
