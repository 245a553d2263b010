"""The command-line flags of slime's parser, read from its sources without running them.

slime's ``parse_args`` (slime/utils/arguments.py at THUDM/slime v0.3.1) joins
three parsers, none of which can be built here (they import torch, Megatron
and SGLang at module level):

* Megatron-LM's ``megatron.training.arguments.parse_args`` with slime's own
  flags as its ``extra_args_provider``: ``group.add_argument(...)`` calls and,
  since 2025, ``ArgumentGroupFactory(SomeConfig).build_group(...)``, which
  turns each dataclass field into a flag (megatron/training/argument_utils.py);
* SGLang's ``ServerArgs.add_cli_args``, every flag prefixed ``--sglang-``
  except the ``skipped_args`` slime sets itself
  (slime/backends/sglang_utils/arguments.py ``add_sglang_arguments``); in
  SGLang v0.5.15 the flags are ``A[type, Arg(...)]`` fields of ``ServerArgs``
  (sglang/srt/arg_groups/arg_utils.py ``add_cli_args_from_dataclass``) plus a
  few ``parser.add_argument`` calls;
* the flags ``_pre_parse_mode`` and ``sglang_parse_args`` read first.

The readers below walk the syntax trees of those files and apply the same
rules: flag names, and a type word per flag (``bool`` for a switch, ``int``,
``float``, ``str``, ``list[...]``; an enum or a custom parser is ``str``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

#: How a file is read: repository path -> its text (None when absent).
Reader = Callable[[str], "str | None"]

_SWITCH_ACTIONS = ("store_true", "store_false", "store_const")


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    for keyword in node.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def _action_word(action: ast.expr) -> str | None:
    """``bool`` for switch actions (argparse's or a Deprecated*StoreTrue/Const one)."""
    text = action.value if isinstance(action, ast.Constant) else ast.unparse(action)
    if not isinstance(text, str):
        return None
    if text in _SWITCH_ACTIONS or "StoreTrue" in text or "StoreConst" in text:
        return "bool"
    if "BooleanOptionalAction" in text:
        return "bool"
    return None


def _type_word(node: ast.Call) -> str:
    """The type word of an ``add_argument`` call from its ``action``, ``type`` and ``nargs``."""
    action = _keyword(node, "action")
    if action is not None and _action_word(action) is not None:
        return "bool"
    kind = _keyword(node, "type")
    word = kind.id if isinstance(kind, ast.Name) and kind.id in ("int", "float", "str") else "str"
    nargs = _keyword(node, "nargs")
    if nargs is not None and not (isinstance(nargs, ast.Constant) and nargs.value == "?"):
        return f"list[{word}]"
    return word


def argparse_flags(source: str, calls: tuple[str, ...] = ("add_argument",)) -> dict[str, str]:
    """Every ``--flag`` of the literal ``add_argument`` calls in ``source``, with its type word.

    ``calls`` may add ``reset_arg`` (slime/utils/arguments.py: ``reset_arg(parser,
    "--flag", **kwargs)`` adds the flag when Megatron lacks it). A
    ``BooleanOptionalAction`` flag also gives its ``--no-`` form.
    """
    flags: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or _call_name(node) not in calls:
            continue
        names = [
            arg.value
            for arg in node.args
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        ]
        word = _type_word(node)
        action = _keyword(node, "action")
        negated = action is not None and "BooleanOptionalAction" in ast.unparse(action)
        for name in names:
            if name.startswith("--"):
                flags.setdefault(name, word)
                if negated:
                    flags.setdefault("--no-" + name[2:], "bool")
    return flags


def _annotation_word(annotation: ast.expr) -> str:
    """``int``, ``float``, ``str``, ``bool`` or ``list[X]`` of an annotation, Optional unwrapped."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        parts = [annotation.left, annotation.right]
        kept = [part for part in parts if ast.unparse(part) != "None"]
        return _annotation_word(kept[0]) if len(kept) == 1 else "str"
    if isinstance(annotation, ast.Subscript):
        outer = ast.unparse(annotation.value).rsplit(".", 1)[-1]
        inner = annotation.slice
        items = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if outer in ("Optional", "Annotated"):
            return _annotation_word(items[0])
        if outer == "Union":
            kept = [item for item in items if ast.unparse(item) != "None"]
            return _annotation_word(kept[0]) if len(kept) == 1 else "str"
        if outer in ("list", "List"):
            return f"list[{_annotation_word(items[0])}]"
        if outer == "Literal":
            first = items[0]
            value = first.value if isinstance(first, ast.Constant) else ""
            return type(value).__name__ if isinstance(value, int | float) else "str"
        return "str"
    name = ast.unparse(annotation)
    return name if name in ("int", "float", "str", "bool") else "str"


def _dashed(name: str, prefix: str = "") -> str:
    return "--" + (f"{prefix}_{name}" if prefix else name).replace("_", "-")


def _field_call(value: ast.expr | None) -> ast.Call | None:
    if isinstance(value, ast.Call) and _call_name(value) == "field":
        return value
    return None


def _argparse_meta(call: ast.Call | None) -> dict[str, ast.expr]:
    """The ``metadata={"argparse_meta": {...}}`` entries of a ``field(...)`` call."""
    metadata = _keyword(call, "metadata") if call is not None else None
    if not isinstance(metadata, ast.Dict):
        return {}
    for key, value in zip(metadata.keys, metadata.values, strict=True):
        is_meta = isinstance(key, ast.Constant) and key.value == "argparse_meta"
        if is_meta and isinstance(value, ast.Dict):
            return {
                k.value: v
                for k, v in zip(value.keys, value.values, strict=True)
                if isinstance(k, ast.Constant)
            }
    return {}


def megatron_field_flags(field: ast.AnnAssign) -> dict[str, str]:
    """The flags ``ArgumentGroupFactory`` makes of one dataclass field (argument_utils.py).

    A bool field is ``store_true`` when its default is ``False``, else
    ``store_false`` named ``--no-<name>`` and ``--disable-<name>``; an
    ``argparse_meta`` dict in the field's metadata overrides names and type.
    """
    assert isinstance(field.target, ast.Name)
    name = field.target.id
    call = _field_call(field.value)
    if call is not None and ast.unparse(_keyword(call, "init") or ast.Constant(True)) == "False":
        return {}
    default = _keyword(call, "default") if call is not None else field.value
    word = _annotation_word(field.annotation)
    names = [_dashed(name)]
    if word == "bool" and not (isinstance(default, ast.Constant) and default.value is False):
        names = [_dashed(name, "no"), _dashed(name, "disable")]
    meta = _argparse_meta(call)
    if "arg_names" in meta:
        names = [n for n in ast.literal_eval(meta["arg_names"]) if n.startswith("--")]
    if "type" in meta and isinstance(meta["type"], ast.Name):
        word = meta["type"].id if meta["type"].id in ("int", "float", "str") else "str"
    if "action" in meta and _action_word(meta["action"]) is not None:
        word = "bool"
    if "nargs" in meta and not word.startswith("list["):
        word = f"list[{word}]"
    return dict.fromkeys(names, word)


class SourceTree:
    """Python files of one repository snapshot, found by module name.

    Parameters
    ----------
    read
        Repository path -> text, or None when the snapshot lacks the file.
    """

    def __init__(self, read: Reader) -> None:
        self.read = read
        self._trees: dict[str, ast.Module | None] = {}

    def module(self, dotted: str) -> tuple[str, ast.Module] | None:
        """(path, syntax tree) of module ``dotted`` (``a/b.py`` or ``a/b/__init__.py``)."""
        base = dotted.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path not in self._trees:
                text = self.read(path)
                self._trees[path] = ast.parse(text) if text is not None else None
            tree = self._trees[path]
            if tree is not None:
                return path, tree
        return None

    def find_class(self, dotted: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef]:
        """The class ``name`` as module ``dotted`` defines or re-exports it: (module, class)."""
        found = self.module(dotted)
        if found is None or depth > 8:
            raise LookupError(f"{name}: module {dotted} not in the snapshot")
        path, tree = found
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return dotted, node
        origin = imported_from(tree, name, dotted, path.endswith("__init__.py"))
        if origin is None:
            raise LookupError(f"{name}: not defined or imported in {path}")
        return self.find_class(origin, name, depth + 1)

    def dataclass_fields(self, dotted: str, name: str) -> list[ast.AnnAssign]:
        """The annotated fields of dataclass ``name`` and of its first base, recursively."""
        module, node = self.find_class(dotted, name)
        fields: list[ast.AnnAssign] = []
        if node.bases and isinstance(node.bases[0], ast.Name):
            base = node.bases[0].id
            found = self.module(module)
            assert found is not None
            origin = imported_from(found[1], base, module, found[0].endswith("__init__.py"))
            if origin is not None or any(
                isinstance(n, ast.ClassDef) and n.name == base for n in found[1].body
            ):
                fields += self.dataclass_fields(origin or module, base)
        for statement in node.body:
            named = isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
            if named and "ClassVar" not in ast.unparse(statement.annotation):
                fields.append(statement)
        return fields


def imported_from(tree: ast.AST, name: str, module: str, package: bool) -> str | None:
    """The module an ``from X import name`` anywhere in ``tree`` takes ``name`` from."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            if node.level == 0:
                return node.module
            parts = module.split(".")
            keep = len(parts) - node.level + (1 if package else 0)
            prefix = ".".join(parts[:keep])
            return f"{prefix}.{node.module}" if node.module else prefix
    return None


def _exclusions(function: ast.AST, call: ast.Call) -> set[str]:
    """The ``exclude=`` names of an ``ArgumentGroupFactory`` call (a list, or a list variable)."""
    exclude = _keyword(call, "exclude")
    if exclude is None:
        return set()
    if isinstance(exclude, ast.Name):
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == exclude.id for t in node.targets
            ):
                return set(ast.literal_eval(node.value))
        raise LookupError(f"exclude list {exclude.id} not found")
    return set(ast.literal_eval(exclude))


def megatron_flags(tree: SourceTree, module: str = "megatron.training.arguments") -> dict[str, str]:
    """Every flag of Megatron-LM's ``parse_args``: literal calls and dataclass factories."""
    found = tree.module(module)
    if found is None:
        raise LookupError(f"{module} not in the Megatron-LM snapshot")
    path, syntax = found
    flags = argparse_flags(ast.unparse(syntax))
    for function in ast.walk(syntax):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and _call_name(node) == "ArgumentGroupFactory"):
                continue
            target = node.args[0]
            assert isinstance(target, ast.Name), ast.unparse(node)
            origin = imported_from(syntax, target.id, module, path.endswith("__init__.py"))
            skip = _exclusions(function, node)
            for field in tree.dataclass_fields(origin or module, target.id):
                assert isinstance(field.target, ast.Name)
                if field.target.id not in skip:
                    for flag, word in megatron_field_flags(field).items():
                        flags.setdefault(flag, word)
    return flags


def _sglang_field(field: ast.AnnAssign) -> tuple[str, list[str], str] | None:
    """(field name, flags, type word) of an ``A[type, meta]`` ServerArgs field, or None."""
    annotation = field.annotation
    if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "A"):
        return None
    items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
    if len(items) < 2:
        return None
    assert isinstance(field.target, ast.Name)
    name, meta = field.target.id, items[1]
    options: dict[str, ast.expr] = {}
    if isinstance(meta, ast.Call):
        options = {k.arg: k.value for k in meta.keywords if k.arg}
    elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
        return None
    if ast.unparse(options.get("no_cli", ast.Constant(False))) == "True":
        return None
    cli = options.get("cli_name")
    names = [cli.value if isinstance(cli, ast.Constant) else _dashed(name)]
    if "aliases" in options:
        names += ast.literal_eval(options["aliases"])
    word = _annotation_word(items[0])
    if "action" in options:
        word = _action_word(options["action"]) or "str"
    elif "type_parser" in options:
        word = "str"
    return name, names, word


def sglang_flags(server_args: str, skipped: set[str]) -> dict[str, str]:
    """SGLang's ServerArgs flags as slime registers them: ``--sglang-`` prefixed, skips left out.

    slime's wrapper skips a flag whose ``dest`` (or, without one, its first
    long flag with dashes as underscores) is in ``skipped`` (``skipped_args``
    of slime/backends/sglang_utils/arguments.py).
    """
    syntax = ast.parse(server_args)
    (server,) = [n for n in syntax.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"]
    found: list[tuple[str, list[str], str]] = []
    for statement in server.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            entry = _sglang_field(statement)
            if entry is not None:
                found.append(entry)
    for node in server.body:
        if isinstance(node, ast.FunctionDef) and node.name == "add_cli_args":
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and _call_name(call) == "add_argument":
                    names = [a.value for a in call.args if isinstance(a, ast.Constant)]
                    dest = _keyword(call, "dest")
                    longs = [n for n in names if n.startswith("--")]
                    canonical = dest.value if isinstance(dest, ast.Constant) else None
                    if canonical is None and longs:
                        canonical = longs[0][2:].replace("-", "_")
                    found.append((canonical or "", names, _type_word(call)))
    flags: dict[str, str] = {}
    for canonical, names, word in found:
        if canonical in skipped:
            continue
        for name in names:
            flags.setdefault("--sglang-" + name.lstrip("-"), word)
    return flags


def skipped_sglang_args(slime_sglang_arguments: str) -> set[str]:
    """``skipped_args`` of slime/backends/sglang_utils/arguments.py (fields slime sets itself)."""
    for node in ast.walk(ast.parse(slime_sglang_arguments)):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "skipped_args" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise LookupError("skipped_args not found")
