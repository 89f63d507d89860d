"""Files the package reads: where the presets live and how a config file is read.

A leaf module (it imports nothing of the package but ``errors``): the model profiles of
``workload``, the configs of ``config``, the splits, suites and trace catalog all read their
YAML through :func:`read_yaml` / :func:`load_yaml_file` and find the presets with
:func:`configs_dir`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

import yaml

from dlcluster_gym.errors import ConfigError

REPO_CONFIGS = Path(__file__).resolve().parent.parent / "configs"
PACKAGED_CONFIGS = Path(__file__).resolve().parent / "_configs"


def configs_dir() -> Path:
    """Where presets live: $DLCLUSTER_CONFIGS, the installed copy, or the repository's."""
    env = os.environ.get("DLCLUSTER_CONFIGS")
    if env:
        return Path(env)
    return PACKAGED_CONFIGS if PACKAGED_CONFIGS.is_dir() else REPO_CONFIGS


# The largest config file read (scenario, cluster, suite, agent config): the largest shipped
# one is under 10 kB; a trace is a data file, read by ``workload.traces``, not a config.
MAX_CONFIG_BYTES = 1_048_576


# Values (scalars, lists, mappings) a config file may hold once its YAML aliases are expanded:
# a 1 MiB file without aliases holds fewer; ten lines of nested aliases ("alias bomb") hold
# billions, which validation and error messages would walk one by one.
MAX_CONFIG_VALUES = 100_000


class RefusedYAMLError(yaml.MarkedYAMLError):
    """Valid YAML that a config file may not hold (aliases that expand too far, or that make
    a value contain itself)."""


def _check_aliases(root: yaml.Node, first_alias: yaml.Mark) -> None:
    """Refuse a document whose aliases expand it past :data:`MAX_CONFIG_VALUES` values or make
    a value contain itself; each shared node is sized once, so this is linear in the file."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise RefusedYAMLError(
                None, None,
                "a YAML alias refers to a value that contains it; a config must be a tree",
                node.start_mark,
            )  # fmt: skip
        open_.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_.discard(key)
        if total > MAX_CONFIG_VALUES:
            raise RefusedYAMLError(
                None, None,
                f"YAML aliases (the first is here) expand this file to more than "
                f"{MAX_CONFIG_VALUES:,} values, the limit of a config file; write the values "
                "out or use fewer aliases",
                first_alias,
            )  # fmt: skip
        sizes[key] = total
        return total

    size(root)


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping key given twice (PyYAML keeps the last),
    aliases that expand a file past :data:`MAX_CONFIG_VALUES` values (a few lines of nested
    aliases expand to billions, an "alias bomb") or make a value contain itself, and reads
    booleans as YAML 1.2 does: ``true``/``false`` only (YAML 1.1's ``yes``, ``no``, ``on``,
    ``off`` stay text, so that a field declared boolean refuses them)."""

    yaml_implicit_resolvers: ClassVar[dict[Any, list]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _first_alias: yaml.Mark | None = None

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._first_alias is None and self.check_event(yaml.AliasEvent):
            self._first_alias = self.peek_event().start_mark
        return super().compose_node(parent, index)

    def compose_document(self) -> Any:
        self._first_alias = None
        node = super().compose_document()
        if self._first_alias is not None:
            _check_aliases(node, self._first_alias)
        return node

    def construct_document(self, node: yaml.Node) -> Any:
        self._root = node  # to name the field of a value that cannot be read
        return super().construct_document(node)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            digits = sum(c.isdigit() for c in node.value)
            field = _node_path(getattr(self, "_root", None), node)
            raise RefusedYAMLError(
                None, None,
                f"{field + ': ' if field else ''}an integer of {digits:,} digits, more than the "
                f"{sys.get_int_max_str_digits():,} a number in a config file may have",
                node.start_mark,
            ) from None  # fmt: skip

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} appears twice in one mapping (first on line "
                    f"{seen[key].start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


def _node_path(root: yaml.Node | None, target: yaml.Node) -> str:
    """The dotted path (``workload.num_jobs``, ``seeds.0``) of ``target`` under ``root``, found
    by identity; empty when it is not there."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                stack.append((value, f"{path}.{name}" if path else str(name)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(
                (value, f"{path}.{i}" if path else str(i)) for i, value in enumerate(node.value)
            )
    return ""


_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` that rejects duplicated keys (used for every config file)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: where a YAML error is and what it is."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = "" if isinstance(exc, RefusedYAMLError) else "malformed YAML: "
    return f"{what}{where}{problem}"


def load_yaml_file(path: Path) -> Any:
    """The YAML document in ``path`` (``safe_load``); one-line ``ConfigError``s naming the file
    for a missing file, a file over :data:`MAX_CONFIG_BYTES`, bytes that are not UTF-8,
    malformed YAML, anchors and aliases, an integer too long to convert and nesting too deep
    to parse."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: more than {MAX_CONFIG_BYTES:,} bytes (1 MiB), the limit of a config file; "
            "is this the file you meant?"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}: not UTF-8 text (line {line}: byte 0x{raw[exc.start]:02x}); a config file "
            "must be UTF-8 YAML (re-save it as UTF-8)"
        ) from None
    try:
        return safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: malformed YAML: nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        why = str(exc).split(";")[0]
        raise ConfigError(f"{path}: malformed YAML: a value cannot be read ({why})") from None


def read_yaml(path: Path) -> dict[str, Any]:
    """A config file's top-level mapping (duplicated keys rejected); one-line errors naming it."""
    data = load_yaml_file(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data
