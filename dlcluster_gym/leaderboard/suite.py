"""Suites: which entrants run on which scenarios with which seeds, and the cells they make.

A suite YAML (``configs/suites/NAME.yaml`` or any file)::

    name: my-suite
    description: one line
    seeds: [1, 2, 3]
    reference: fcfs                       # scores are ratios to this entrant (must be listed)
    metrics: [avg_jct_s, p95_jct_s, makespan_s]
    entrants:
      - fcfs                              # a registered policy name
      - {policy: cassini, params: {base: dally}, label: dally-cassini}
      - {policy: crius, optional: true}   # skipped (with a note) until it is registered
      - agent:agents/checkpoints/ppo.zip  # a trained agent (needs agent support)
    scenarios:
      - dally-batch-8rack
      - {name: crius-testbed-64gpu, optional: true}

Unknown policies and scenarios are errors that list the valid ones, unless marked
``optional: true``: then they are left out and reported in :attr:`Suite.skipped`.

A relative file path in a suite (a scenario YAML, an ``agent:PATH`` checkpoint) is looked for in
the suite file's folder, then in the project root (the folder that holds ``configs/`` and
``agents/``: the repository, or the installed package), then in the current folder
(:func:`locate`). Rows record the path as the suite writes it and the checkpoint by its content
(:func:`file_hash`), so a run verifies from any folder and on any machine with the same files.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dlcluster_gym.config import Bool, Float, Seed, configs_dir, list_presets, read_yaml
from dlcluster_gym.errors import ConfigError, DLClusterError, UnknownNameError
from dlcluster_gym.scheduler import make_policy, policies, policy_kind, resolve_policy

AGENT_PREFIX = "agent:"
DEFAULT_METRICS = ("avg_jct_s", "p95_jct_s", "makespan_s")


class EntrantSpec(BaseModel):
    """One entrant: a policy (registered name, ``pkg.mod:Class`` or ``agent:PATH``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str
    params: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None
    optional: Bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, v: Any) -> Any:
        return {"policy": v} if isinstance(v, str) else v

    @property
    def name(self) -> str:
        """The label shown in tables: ``label``, else the policy with its parameters."""
        if self.label:
            return self.label
        if not self.params:
            return self.policy
        args = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.policy}[{args}]"


class ScenarioSpec(BaseModel):
    """One scenario: a preset name or a YAML path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    optional: Bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v


class SuiteConfig(BaseModel):
    """The YAML schema of a suite."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    seeds: tuple[Seed, ...] = Field(min_length=1)
    reference: str = "fcfs"
    metrics: tuple[str, ...] = Field(DEFAULT_METRICS, min_length=1)
    entrants: tuple[EntrantSpec, ...] = Field(min_length=1)
    scenarios: tuple[ScenarioSpec, ...] = Field(min_length=1)
    # Wall-clock seconds one cell may take (None: no limit); past it the cell is an error.
    time_limit_s: Annotated[Float, Field(gt=0)] | None = None

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: tuple[int, ...]) -> tuple[int, ...]:
        twice = sorted({s for s in seeds if seeds.count(s) > 1})
        if twice:
            raise ValueError(
                f"seed {twice[0]} appears twice; each seed runs once per entrant and scenario"
            )
        return seeds


@dataclass(frozen=True)
class Cell:
    """One run: an entrant on a scenario with a seed. ``id`` is stable and file-name safe.

    ``scenario`` and ``policy`` are as the suite writes them (what a row records);
    ``scenario_file`` and ``checkpoint_file`` are the files they name, found by :func:`locate`
    (None for a preset scenario and for an entrant that is not an agent)."""

    id: str
    scenario: str
    entrant: str
    policy: str
    params: dict[str, Any]
    seed: int
    scenario_file: str | None = None
    checkpoint_file: str | None = None

    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True)

    @property
    def run_scenario(self) -> str:
        """The scenario to load: its file, else its preset name."""
        return self.scenario_file or self.scenario

    @property
    def run_policy(self) -> str:
        """The policy to build: ``agent:FILE`` with the checkpoint found, else ``policy``."""
        if self.checkpoint_file is not None:
            return f"{AGENT_PREFIX}{self.checkpoint_file}"
        return self.policy

    def located(self, bases: Iterable[str | Path | None], checkpoint: str | None = None) -> Cell:
        """This cell with its files looked for under ``bases`` (:func:`locate`); with
        ``checkpoint`` (a recorded :func:`file_hash`), a checkpoint of that content first."""
        bases = list(bases)
        scen = self.scenario
        ckpt = self.policy[len(AGENT_PREFIX) :] if self.policy.startswith(AGENT_PREFIX) else None
        return dataclasses.replace(
            self,
            scenario_file=str(locate(scen, bases)) if is_scenario_file(scen) else None,
            checkpoint_file=None if ckpt is None else str(locate(ckpt, bases, checkpoint)),
        )


@dataclass(frozen=True)
class Suite:
    """A validated suite: entrants and scenarios that exist, plus what was left out and why."""

    name: str
    description: str
    seeds: tuple[int, ...]
    reference: str
    metrics: tuple[str, ...]
    entrants: tuple[EntrantSpec, ...]
    scenarios: tuple[str, ...]
    source: str
    skipped: tuple[str, ...] = field(default_factory=tuple)
    time_limit_s: float | None = None  # per cell, wall clock (None: no limit)
    # The suite file's folder (absolute; the current folder for a mapping): where its relative
    # paths are looked for first.
    base: str | None = None

    def cells(self) -> list[Cell]:
        """Every (scenario, entrant, seed), scenario-major, in suite order."""
        bases = load_bases(self.base)
        return [
            Cell(cell_id(sc, e.name, s), sc, e.name, e.policy, dict(e.params), s).located(bases)
            for sc in self.scenarios
            for e in self.entrants
            for s in self.seeds
        ]


def cell_id(scenario: str, entrant: str, seed: int) -> str:
    """``scenario.entrant.sSEED`` with characters outside ``[A-Za-z0-9_.+=-]`` replaced."""
    safe = re.sub(r"[^A-Za-z0-9_.+=-]+", "-", f"{Path(scenario).stem}.{entrant}")
    return f"{safe.strip('-')}.s{seed}"


def list_suites() -> dict[str, str]:
    """Suite preset name -> description."""
    return list_presets("suites")


def _suite_path(spec: str | Path) -> Path:
    if str(spec).endswith((".yaml", ".yml")):
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"{path}: suite file not found")
        return path
    path = configs_dir() / "suites" / f"{spec}.yaml"
    if not path.is_file():
        raise UnknownNameError("suite", str(spec), list_suites())
    return path


def project_root() -> Path:
    """The folder that holds ``configs/`` and ``agents/``: the repository, or the installed
    package (where the shipped suites' ``agents/checkpoints/...`` paths point)."""
    return configs_dir().resolve().parent


def load_bases(base: str | Path | None) -> list[Path]:
    """Where a suite's relative paths are looked for, in order: the suite file's folder, the
    project root, the current folder."""
    return [Path(b) for b in (base, project_root(), Path.cwd()) if b is not None]


def locate(path: str, bases: Iterable[str | Path | None], sha: str | None = None) -> Path:
    """The file a suite names: an absolute ``path`` as is; a relative one under the first of
    ``bases`` that holds it (with ``sha``, a :func:`file_hash`: the first whose content has
    it, else the first that holds one). Not found anywhere: ``path`` under the first base."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    found: list[Path] = []
    for b in bases:
        if b is not None and (Path(b) / p).is_file():
            c = (Path(b) / p).resolve()
            if c not in found:
                found.append(c)
    if sha is not None:
        for c in found:
            if file_hash(c) == sha:
                return c
    if found:
        return found[0]
    first = next((Path(b) for b in bases if b is not None), Path.cwd())
    return (first / p).absolute()


def file_hash(path: str | Path) -> str | None:
    """sha256 (first 16 hex digits) of a file's bytes; None when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def is_scenario_file(name: str) -> bool:
    """A scenario given as a YAML file (else a preset name)."""
    return name.endswith((".yaml", ".yml"))


def _scenario_exists(name: str, bases: list[Path]) -> bool:
    if is_scenario_file(name):
        return locate(name, bases).is_file()
    return (configs_dir() / "scenarios" / f"{name}.yaml").is_file()


UNKNOWN_KIND = "unknown"  # a policy that no longer resolves: shown apart, never ranked


def entrant_kind(policy: str, params: dict[str, Any] | str | None = None) -> str:
    """The :data:`~dlcluster_gym.scheduler.KINDS` entry of an entrant (``params`` a mapping or
    its JSON), computed once per process and entrant. Never raises: a policy that cannot be
    built with ``params`` falls back on its class's declaration, and one that no longer
    resolves at all is ``"unknown"`` (reported apart, as the references are)."""
    if isinstance(params, dict):
        params = json.dumps(params, sort_keys=True)
    return _entrant_kind(policy, params or "{}")


@functools.lru_cache(maxsize=1024)
def _entrant_kind(policy: str, params_json: str) -> str:
    try:
        return policy_kind(policy, json.loads(params_json))
    except Exception:  # a report must not fail because a policy cannot be built any more
        pass
    try:
        factory, spec = resolve_policy(policy)
    except Exception:
        return UNKNOWN_KIND
    if spec.bound:
        return "bound"
    return "clairvoyant" if getattr(factory, "clairvoyant", False) is True else "deployable"


def agent_support(policy: str) -> bool:
    """Whether this installation resolves ``agent:PATH`` policies (the agents issue adds it
    to the policy registry; until then the registry does not know the prefix)."""
    from dlcluster_gym.scheduler import resolve_policy

    try:
        resolve_policy(policy)
    except UnknownNameError:
        return False
    return True


def _check_policy(e: EntrantSpec, known: dict[str, Any], bases: list[Path]) -> bool:
    """True if the entrant can run; False if optional and unavailable; raise otherwise."""
    if e.policy.startswith(AGENT_PREFIX):
        path = locate(e.policy[len(AGENT_PREFIX) :], bases)
        if not path.exists():
            if e.optional:
                return False
            raise ConfigError(f"entrant {e.policy!r}: agent checkpoint {path} not found")
        if not agent_support(e.policy):
            if e.optional:
                return False
            raise ConfigError(
                f"entrant {e.policy!r}: this installation has no agent support yet "
                "(agent:PATH entrants need the agents package); remove the entrant or mark it "
                "optional: true"
            )
        from dlcluster_gym.envs.agent_meta import read_agent_meta

        try:  # a file that is not a checkpoint: the suite's error, not one per cell
            read_agent_meta(path)
        except ConfigError as exc:
            raise ConfigError(f"entrant {e.policy!r}: {exc}") from None
        return True
    if e.policy in known or ":" in e.policy:
        return True
    if e.optional:
        return False
    raise UnknownNameError("policy", e.policy, known)


def load_suite(spec: str | Path | dict[str, Any]) -> Suite:
    """A suite from a preset name, a YAML path or a mapping, validated against what exists."""
    if isinstance(spec, dict):
        data, source, base = dict(spec), "<suite mapping>", Path.cwd()
    else:
        path = _suite_path(spec)
        source, base = str(path), path.resolve().parent
        data = read_yaml(path)
        data.setdefault("name", path.stem)
    bases = load_bases(base)
    try:
        cfg = SuiteConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        errors = exc.errors()
        for e in errors:
            if e["type"] == "too_short" and any(
                o["loc"][: len(e["loc"])] == e["loc"] and o["loc"] != e["loc"] for o in errors
            ):
                continue  # a list whose items failed: the items' errors say it all
            loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
            value = e.get("input")
            got = "" if isinstance(value, dict) else f" (got {repr(value)[:80]})"
            lines.append(f"  {loc}: {str(e['msg']).removeprefix('Value error, ')}{got}")
        raise ConfigError(f"{source}: invalid suite:\n" + "\n".join(lines)) from None
    from dlcluster_gym.sim.results import SUMMARY_KEYS

    bad = [m for m in cfg.metrics if m not in SUMMARY_KEYS]
    if bad:
        raise ConfigError(
            f"{source}: metrics: unknown metric {bad[0]!r}; valid: {', '.join(SUMMARY_KEYS)}"
        )
    known = policies()
    skipped: list[str] = []
    entrants = []
    for e in cfg.entrants:
        try:
            ok = _check_policy(e, known, bases)
        except (UnknownNameError, ConfigError) as exc:
            raise ConfigError(f"{source}: entrants: {exc}") from None
        if ok and not e.policy.startswith(AGENT_PREFIX):
            try:  # parameters are checked now, not when the cell runs
                make_policy(e.policy, **e.params)
            except DLClusterError as exc:
                raise ConfigError(f"{source}: entrants: {exc}") from None
        if ok:
            entrants.append(e)
        else:
            skipped.append(f"entrant {e.name} (not available)")
    labels = [e.name for e in entrants]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(
            f"{source}: entrants: label {dupes[0]!r} appears twice; give each a distinct label"
        )
    if cfg.reference not in labels:
        raise ConfigError(
            f"{source}: reference {cfg.reference!r} must be one of the entrants: "
            f"{', '.join(labels)}"
        )
    scenarios = []
    for s in cfg.scenarios:
        if _scenario_exists(s.name, bases):
            scenarios.append(s.name)
        elif s.optional:
            skipped.append(f"scenario {s.name} (no such preset yet)")
        else:
            err = UnknownNameError("scenario", s.name, list_presets("scenarios"))
            raise ConfigError(f"{source}: scenarios: {err}")
    if not scenarios:
        raise ConfigError(f"{source}: no scenario of the suite exists")
    if len(set(scenarios)) != len(scenarios):
        raise ConfigError(f"{source}: scenarios: a scenario is listed twice")
    _check_scenarios(source, scenarios, cfg.seeds, bases)
    _check_cell_ids(source, scenarios, [e.name for e in entrants])
    return Suite(
        name=cfg.name,
        description=cfg.description,
        seeds=cfg.seeds,
        reference=cfg.reference,
        metrics=cfg.metrics,
        entrants=tuple(entrants),
        scenarios=tuple(scenarios),
        source=source,
        skipped=tuple(skipped),
        time_limit_s=cfg.time_limit_s,
        base=str(base),
    )


def _check_cell_ids(source: str, scenarios: list[str], labels: list[str]) -> None:
    """Cell ids (file names) are unique: two scenario files with one stem, or two labels
    that differ only in characters a file name cannot hold, would share cells."""
    seen: dict[str, tuple[str, str]] = {}
    for sc in scenarios:
        for label in labels:
            key = cell_id(sc, label, 0)
            if key in seen:
                other = seen[key]
                what = (
                    f"scenarios {other[0]!r} and {sc!r} have the same file name"
                    if other[0] != sc
                    else f"entrant labels {other[1]!r} and {label!r} give the same file name"
                )
                raise ConfigError(
                    f"{source}: {what} ({key.removesuffix('.s0')}); cells are stored by "
                    "scenario file name and label: rename one, or give the entrant a label"
                )
            seen[key] = (sc, label)


def _check_scenarios(
    source: str, scenarios: list[str], seeds: tuple[int, ...], bases: list[Path]
) -> None:
    """Every scenario loads with every seed (its config, not its trace file): a mistake in a
    scenario file is the suite's error now, not one failed cell per entrant and seed later."""
    from dlcluster_gym.config import load_scenario

    for name in scenarios:
        for seed in seeds[:1]:  # the seed only overrides a field: one load checks the file
            try:
                spec = str(locate(name, bases)) if is_scenario_file(name) else name
                load_scenario(spec, seed=seed)
            except DLClusterError as exc:
                raise ConfigError(f"{source}: scenarios: {exc}") from None
