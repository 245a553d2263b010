"""Instance suites: a YAML list of instance files to benchmark together."""

from __future__ import annotations

import os
from dataclasses import dataclass

from rlplan.paths import INSTANCES
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.yamlio import read_yaml_file

DEFAULT_SUITE = str(INSTANCES / "suites" / "default.yaml")


@dataclass(frozen=True)
class Suite:
    """Instance paths (resolved) and the suite's name."""

    name: str
    instances: tuple[str, ...]


def load_suite(path: str) -> Suite:
    """Read a suite file: ``instances: [relative/or/absolute.yaml, ...]``.

    Relative paths are taken from the suite file's folder.
    """
    data = read_yaml_file(path)
    if not isinstance(data, dict) or set(data) - {"instances", "description"}:
        raise InputError(
            path, "a suite is a mapping with 'instances' (and an optional 'description')"
        )
    raw = data.get("instances")
    if not isinstance(raw, list) or not raw or not all(isinstance(p, str) for p in raw):
        raise InputError(f"{path}: instances", "must be a non-empty list of instance file paths")
    folder = os.path.dirname(os.path.abspath(path))
    resolved = []
    for index, item in enumerate(raw):
        full = item if os.path.isabs(item) else os.path.join(folder, item)
        if not os.path.isfile(full):
            raise InputError(f"{path}: instances[{index}]", f"no such file {item}")
        resolved.append(os.path.normpath(full))
    return Suite(os.path.splitext(os.path.basename(path))[0], tuple(resolved))
