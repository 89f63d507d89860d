"""Named splits: which scenarios and seeds are for training, validation and test.

A split is a YAML file ``configs/splits/NAME.yaml`` (CompilerGym's datasets convention: what
is held out is a name, not a habit). Each of its three parts, ``train``, ``validation`` and
``test``, lists scenario entries (a preset name or YAML path, a label, nested overrides and
the seeds the entry runs)::

    description: one line
    scenario: dally-groups-poisson-4rack    # the entries' default scenario (optional)
    train:
      seeds: 1000-1999                      # the part's default seeds (optional)
      scenarios:
        - {label: groups-2rack, overrides: {cluster: dally-2rack}}
        - {label: groups-4rack}
    validation: {seeds: 501-506, scenarios: [...]}
    test: {seeds: [101-110], scenarios: [...]}

Seeds are integers, ranges ``lo-hi`` (inclusive) or lists of both. Loading checks that
every entry's scenario loads with its overrides, that labels are unique within a part, that
the parts give disjoint seeds to the same scenario entry (same scenario once overrides are
applied), and that no test seed appears anywhere in train or validation.

``dlcluster list splits`` lists the splits; ``dlcluster evaluate --split NAME[:PART]`` and
``dlcluster train --split NAME`` run them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from dlcluster_gym.config import (
    MAX_SEED,
    ScenarioConfig,
    configs_dir,
    list_presets,
    load_scenario,
    merge_overrides,
    read_yaml,
)
from dlcluster_gym.errors import ConfigError, DLClusterError, UnknownNameError

PARTS: tuple[str, ...] = ("train", "validation", "test")
Part = Literal["train", "validation", "test"]
DEFAULT_PART: Part = "test"

SEEDS_ALLOWED = (
    f"integers 0..{MAX_SEED} (2**63 - 1) or ranges 'lo-hi' (inclusive), alone or in a list, "
    "e.g. 101-110 or [1, 2, 5-9]"
)


@dataclass(frozen=True)
class SeedSet:
    """A set of seeds as sorted, disjoint, inclusive ranges (``1000-99999`` costs two ints)."""

    ranges: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int]]) -> SeedSet:
        """The union of inclusive ranges ``(lo, hi)``, merged."""
        merged: list[list[int]] = []
        for lo, hi in sorted(pairs):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        return cls(tuple((a, b) for a, b in merged))

    @classmethod
    def parse(cls, value: Any) -> SeedSet:
        """Seeds from YAML: an integer, ``"lo-hi"``, or a list of these; ``ValueError`` says
        what is allowed."""
        if isinstance(value, SeedSet):
            return value
        items = list(value) if isinstance(value, list | tuple) else [value]
        if not items:
            raise ValueError(f"no seeds; give {SEEDS_ALLOWED}")
        pairs = []
        for item in items:
            if isinstance(item, int) and not isinstance(item, bool):
                lo = hi = item
            elif isinstance(item, str) and (
                m := re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", item)
            ):
                lo, hi = int(m[1]), int(m[2] or m[1])
                if lo > hi:
                    raise ValueError(f"range {item!r} runs backwards; write {hi}-{lo}")
            else:
                raise ValueError(f"seed {item!r} is not a seed; seeds are {SEEDS_ALLOWED}")
            if not 0 <= lo <= hi <= MAX_SEED:
                raise ValueError(f"seed {item!r} is out of range; seeds are {SEEDS_ALLOWED}")
            pairs.append((lo, hi))
        return cls.of(pairs)

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self.ranges:
            yield from range(lo, hi + 1)

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __contains__(self, seed: object) -> bool:
        return any(lo <= seed <= hi for lo, hi in self.ranges)  # type: ignore[operator]

    def __and__(self, other: SeedSet) -> SeedSet:
        out = []
        for a, b in self.ranges:
            for c, d in other.ranges:
                lo, hi = max(a, c), min(b, d)
                if lo <= hi:
                    out.append((lo, hi))
        return SeedSet.of(out)

    def __or__(self, other: SeedSet) -> SeedSet:
        return SeedSet.of((*self.ranges, *other.ranges))

    def span(self) -> tuple[int, int] | None:
        """``(lo, hi)`` (inclusive) when the seeds are one unbroken range, else None."""
        return self.ranges[0] if len(self.ranges) == 1 else None

    def __str__(self) -> str:
        return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in self.ranges)

    def to_yaml(self) -> str | int | list[str | int]:
        """The YAML form :meth:`parse` reads back."""
        items: list[str | int] = [a if a == b else f"{a}-{b}" for a, b in self.ranges]
        return items[0] if len(items) == 1 else items


Seeds = Annotated[SeedSet, BeforeValidator(SeedSet.parse)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class SplitEntry(_Frozen):
    """One scenario of a part with the seeds it runs: ``scenario`` a preset name or YAML
    path, ``overrides`` nested as in agent configs, ``requires_traces`` whether its workload
    reads a trace (evaluation skips it when the trace root is absent)."""

    scenario: str
    label: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    seeds: Seeds
    requires_traces: bool = False


class Split(_Frozen):
    """A named split: three tuples of entries; ``source`` is the file it was read from."""

    name: str
    description: str = ""
    source: str = ""
    train: tuple[SplitEntry, ...]
    validation: tuple[SplitEntry, ...]
    test: tuple[SplitEntry, ...]

    def part(self, name: str) -> tuple[SplitEntry, ...]:
        """The entries of part ``name`` (train, validation or test)."""
        if name not in PARTS:
            raise ConfigError(
                f"split {self.name!r}: unknown part {name!r}; parts: {', '.join(PARTS)}"
            )
        return getattr(self, name)


# ---------------------------------------------------------------------------- the file


class _EntryFile(_Frozen):
    scenario: str | None = None
    label: str | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    seeds: Seeds | None = None


class _PartFile(_Frozen):
    seeds: Seeds | None = None
    scenarios: tuple[_EntryFile, ...] = Field(min_length=1)


class _SplitFile(_Frozen):
    description: str = ""
    scenario: str | None = None
    train: _PartFile
    validation: _PartFile
    test: _PartFile


def _fmt_error(source: str, exc: ValidationError) -> ConfigError:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        got = "" if isinstance(value, dict) else f" (got {repr(value)[:80]})"
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(err["loc"])
            lines.append(f"{loc}: unknown key{got}; allowed: {allowed}")
        elif err["type"] == "missing":
            lines.append(f"{loc}: missing; every split has the parts {', '.join(PARTS)}")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"{loc}: {msg}{got}")
    return ConfigError(f"{source}: invalid split:\n  " + "\n  ".join(lines))


def _allowed_keys(loc: tuple) -> str:
    """The keys allowed where an unknown key ``loc`` was found."""
    model: type[BaseModel] = _SplitFile
    if len(loc) >= 2 and loc[0] in PARTS:
        model = _EntryFile if len(loc) >= 4 and loc[1] == "scenarios" else _PartFile
    return ", ".join(model.model_fields)


# ---------------------------------------------------------------------------- loading


def splits_dir() -> Path:
    """Where named splits live: ``<configs>/splits`` (``config.configs_dir``)."""
    return configs_dir() / "splits"


def list_splits() -> dict[str, str]:
    """Split name -> one-line description, for every ``configs/splits/*.yaml``."""
    return list_presets("splits")


def split_path(name_or_path: str | Path) -> Path:
    """The file of a split name or a YAML path; an unknown name lists the known ones."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")):
        path = Path(text)
        if not path.is_file():
            raise ConfigError(f"split file {text!r} not found")
        return path
    path = splits_dir() / f"{text}.yaml"
    if not path.is_file():
        raise UnknownNameError("split", text, list_splits())
    return path


def parse_split_part(text: str) -> tuple[str, Part]:
    """``NAME[:PART]`` -> (name, part); the part defaults to ``test``."""
    head, sep, tail = text.rpartition(":")
    if not sep or "/" in tail or "\\" in tail:
        return text, DEFAULT_PART
    if tail not in PARTS:
        raise ConfigError(
            f"split {text!r}: unknown part {tail!r}; give NAME or NAME:PART with PART one of "
            f"{', '.join(PARTS)}"
        )
    if not head:
        raise ConfigError(f"split {text!r}: give the split's name before ':{tail}'")
    return head, tail  # type: ignore[return-value]


def entry_scenario(scenario: str, overrides: Mapping[str, Any]) -> ScenarioConfig:
    """The scenario an entry runs: the preset or file with ``overrides`` merged in."""
    base = load_scenario(scenario)
    if not overrides:
        return base
    return load_scenario(merge_overrides(base.model_dump(), overrides))


def _identity(cfg: ScenarioConfig) -> str:
    """What makes two entries the same scenario: everything but name, description and seed."""
    data = cfg.model_dump(mode="json", exclude={"name", "description", "seed"})
    return json.dumps(data, sort_keys=True)


def load_split(name_or_path: str | Path) -> Split:
    """A split by name (``configs/splits/NAME.yaml``) or YAML path, checked (module doc);
    errors name the file, the field, the value and what is allowed."""
    path = split_path(name_or_path)
    source = str(path)
    data = read_yaml(path)
    try:
        raw = _SplitFile.model_validate(data)
    except ValidationError as exc:
        raise _fmt_error(source, exc) from None
    parts: dict[str, list[SplitEntry]] = {}
    keys: dict[str, list[str]] = {}
    for part in PARTS:
        spec: _PartFile = getattr(raw, part)
        entries, idents, labels = [], [], {}
        for i, e in enumerate(spec.scenarios):
            where = f"{source}: {part}.scenarios.{i}"
            scenario = e.scenario or raw.scenario
            if scenario is None:
                raise ConfigError(
                    f"{where}.scenario: missing; give a scenario (a preset of `dlcluster list "
                    "scenarios` or a YAML path) here or at the top level (scenario: NAME)"
                )
            scenario = _relative_to(scenario, path.parent)
            seeds = e.seeds if e.seeds is not None else spec.seeds
            if seeds is None:
                raise ConfigError(
                    f"{where}.seeds: missing; give the entry's seeds, or the part's "
                    f"({part}.seeds): {SEEDS_ALLOWED}"
                )
            label = e.label or Path(scenario).stem
            if label in labels:
                raise ConfigError(
                    f"{where}.label: {label!r} is also {part}.scenarios.{labels[label]}'s label; "
                    "labels name results, so give each entry of a part its own"
                )
            labels[label] = i
            try:
                cfg = entry_scenario(scenario, e.overrides)
            except DLClusterError as err:
                field = "overrides" if e.overrides else "scenario"
                msg = " ".join(ln.strip() for ln in str(err).splitlines())
                raise ConfigError(f"{where}.{field}: {msg}") from None
            entries.append(
                SplitEntry(
                    scenario=scenario, label=label, overrides=dict(e.overrides), seeds=seeds,
                    requires_traces=cfg.workload.kind in ("trace", "crius"),
                )
            )  # fmt: skip
            idents.append(_identity(cfg))
        parts[part], keys[part] = entries, idents
    _check_disjoint(source, parts, keys)
    return Split(
        name=path.stem, description=raw.description, source=source,
        train=tuple(parts["train"]), validation=tuple(parts["validation"]),
        test=tuple(parts["test"]),
    )  # fmt: skip


def _relative_to(scenario: str, folder: Path) -> str:
    """A relative scenario YAML path is read from the split file's folder when it is there."""
    if scenario.endswith((".yaml", ".yml")) and not Path(scenario).is_absolute():
        here = folder / scenario
        if here.is_file():
            return str(here)
    return scenario


def _check_disjoint(
    source: str, parts: dict[str, list[SplitEntry]], keys: dict[str, list[str]]
) -> None:
    """The same scenario entry gets disjoint seeds in each part; no test seed appears in
    train or validation at all (for any scenario)."""
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        for i, (ea, ka) in enumerate(zip(parts[a], keys[a], strict=True)):
            for j, (eb, kb) in enumerate(zip(parts[b], keys[b], strict=True)):
                both = ea.seeds & eb.seeds
                if ka == kb and both:
                    raise ConfigError(
                        f"{source}: {a}.scenarios.{i} ({ea.label!r}) and {b}.scenarios.{j} "
                        f"({eb.label!r}) are the same scenario and share seeds {both}; the "
                        f"parts of a split must give the same scenario disjoint seeds "
                        f"({a}: {ea.seeds}; {b}: {eb.seeds})"
                    )
    for j, eb in enumerate(parts["test"]):
        for a in ("train", "validation"):
            for i, ea in enumerate(parts[a]):
                both = ea.seeds & eb.seeds
                if both:
                    raise ConfigError(
                        f"{source}: test.scenarios.{j} ({eb.label!r}) seeds {both} also appear "
                        f"in {a}.scenarios.{i} ({ea.label!r}); test seeds must never appear in "
                        f"train or validation (test: {eb.seeds}; {a}: {ea.seeds})"
                    )


def union_seeds(entries: Iterable[SplitEntry]) -> SeedSet:
    """Every seed of ``entries``."""
    out = SeedSet()
    for e in entries:
        out = out | e.seeds
    return out
