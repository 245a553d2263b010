"""YAML reading with the conventions of instance files.

PyYAML's safe loader reads ``989e12`` as a string because YAML 1.1 wants a
decimal point or a signed exponent. Instance files write such numbers bare, so
the loader here also resolves them as floats.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from rlplan.rpeg.errors import InstanceError

#: Largest file accepted as an instance; real instances are a few kilobytes.
MAX_INSTANCE_BYTES = 1 << 20

_FLOAT_PATTERN = re.compile(
    r"""^(?:
        [-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)
       |[-+]?(?:[0-9][0-9_]*)\.[0-9_]*
       |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
       |[-+]?\.(?:inf|Inf|INF)
       |\.(?:nan|NaN|NAN)
    )$""",
    re.X,
)


#: libyaml's parser when PyYAML was built with it (about 6 times faster on a
#: 1 MiB file), else the pure-Python one; both construct with SafeConstructor.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InstanceLoader(_SAFE_LOADER):  # type: ignore[misc, valid-type]
    """Safe loader that accepts bare scientific notation (``450e9``) and refuses duplicate keys.

    A key given twice in one mapping is an error naming the key: silently
    keeping the second value hides a typo. Keys brought in by a YAML merge
    (``<<: *base``) may be overridden as YAML intends.
    """

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue  # an unhashable key: SafeConstructor refuses it below
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"duplicate key {str(key)[:40]!r}",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


InstanceLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:float"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
InstanceLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", _FLOAT_PATTERN, list("-+0123456789.")
)


def loads(text: str, source: str = "<string>") -> Any:
    """Parse YAML text with :class:`InstanceLoader`.

    Parameters
    ----------
    text
        The YAML document.
    source
        Name used in error messages.

    Raises
    ------
    InstanceError
        If the text is not valid YAML.
    """
    try:
        return yaml.load(text, Loader=InstanceLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InstanceError(source, f"not a valid YAML file{where}: {problem}") from None
    except (ValueError, RecursionError) as exc:
        message = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise InstanceError(source, f"not a usable YAML file: {message}") from None


def read_yaml_file(path: str | os.PathLike[str]) -> Any:
    """Read and parse an instance file, refusing what cannot be one.

    Raises
    ------
    InstanceError
        If the file does not exist, is not a regular file, is larger than
        :data:`MAX_INSTANCE_BYTES`, is not UTF-8 text, or is not YAML.
    """
    name = os.fspath(path)
    if not os.path.exists(name):
        raise InstanceError(name, "no such file")
    if not os.path.isfile(name):
        raise InstanceError(name, "not a regular file")
    size = os.path.getsize(name)
    if size > MAX_INSTANCE_BYTES:
        raise InstanceError(
            name, f"file is {size} bytes, too large to be an instance (limit {MAX_INSTANCE_BYTES})"
        )
    try:
        with open(name, encoding="utf-8") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        raise InstanceError(name, "not a text file (not UTF-8)") from None
    except OSError as exc:
        raise InstanceError(name, f"cannot be read: {exc.strerror}") from None
    return loads(text, name)
