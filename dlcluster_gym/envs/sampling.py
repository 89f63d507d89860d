"""Scenario sampling per reset (domain randomisation, curricula): ``scenarios=[...]``.

Each entry is a scenario (preset name, YAML path or mapping) or a mapping with keys
``scenario`` (required), ``weight`` (> 0, default 1), ``overrides`` (nested mapping merged into
it) and ``ranges``: ``racks`` ([lo, hi] integers, the cluster's rack count; single-group
clusters only), ``load`` ([lo, hi] floats: the workload's ``load`` or, for traces,
``target_load``) and ``num_jobs`` ([lo, hi] integers: ``num_jobs`` or, for traces,
``max_jobs``). At ``reset(seed=s)`` an entry is drawn by weight and each range uniformly
(integers inclusive) from ``numpy.random.default_rng([s, SALT])``: the same seed gives the
same scenario and the same workload, whatever happened before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcluster_gym.config import ScenarioConfig, load_scenario
from dlcluster_gym.errors import ConfigError

SALT = 0x5CE7A210
RANGE_KEYS: tuple[str, ...] = ("racks", "load", "num_jobs")
ENTRY_KEYS: tuple[str, ...] = ("scenario", "weight", "overrides", "ranges")


@dataclass(frozen=True)
class Entry:
    """One entry of a scenario list, checked."""

    base: dict[str, Any]  # the scenario (overrides applied) as a mapping
    weight: float
    ranges: dict[str, tuple[float, float]]


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def one_line_error(where: str, err: ConfigError) -> ConfigError:
    """``err`` as one line under ``where`` (pydantic's multi-line messages joined)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].endswith("invalid config:"):
        lines = lines[1:]
    return ConfigError(f"{where}: {'; '.join(lines)}")


def _entry(i: int, raw: Any, env: str) -> Entry:
    where = f"{env}: scenarios[{i}]"
    if not isinstance(raw, Mapping) or "scenario" not in raw:
        raw = {"scenario": raw}
    unknown = sorted(set(raw) - set(ENTRY_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; keys: {', '.join(ENTRY_KEYS)}")
    w = raw.get("weight", 1.0)
    if not isinstance(w, int | float) or isinstance(w, bool) or not (math.isfinite(w) and w > 0):
        raise ConfigError(f"{where}.weight must be a finite number > 0, got {w!r}")
    try:
        base = load_scenario(raw["scenario"]).model_dump()
    except ConfigError as err:
        raise one_line_error(f"{where}.scenario", err) from None
    over = raw.get("overrides")
    if over is not None and not isinstance(over, Mapping):
        raise ConfigError(f"{where}.overrides must be a mapping, got {over!r}")
    if over:
        try:
            base = load_scenario(_deep_merge(base, over)).model_dump()
        except ConfigError as err:
            raise one_line_error(f"{where}.overrides", err) from None
    ranges: dict[str, tuple[float, float]] = {}
    for key, r in (raw.get("ranges") or {}).items():
        if key not in RANGE_KEYS:
            raise ConfigError(f"{where}.ranges: unknown range {key!r}; ranges: "
                              f"{', '.join(RANGE_KEYS)}")  # fmt: skip
        ok = (
            isinstance(r, Sequence)
            and len(r) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in r)
            and all(math.isfinite(x) and x > 0 for x in r)
            and r[0] <= r[1]
        )
        if not ok or (key != "load" and not all(float(x).is_integer() for x in r)):
            kind = "numbers" if key == "load" else "integers"
            raise ConfigError(f"{where}.ranges.{key} must be [lo, hi] with 0 < lo <= hi "
                              f"({kind}), got {r!r}")  # fmt: skip
        ranges[key] = (float(r[0]), float(r[1]))
    if "racks" in ranges and len(base["cluster"]["groups"]) != 1:
        raise ConfigError(f"{where}.ranges.racks: cluster {base['cluster']['name']} has "
                          "several machine groups; racks ranges need one group")  # fmt: skip
    for key, names in (("load", ("load", "target_load")), ("num_jobs", ("num_jobs", "max_jobs"))):
        if key in ranges and not any(n in base["workload"] for n in names):
            raise ConfigError(
                f"{where}.ranges.{key}: workload kind "
                f"{base['workload'].get('kind')!r} has no {' or '.join(names)}"
            )
    return Entry(base, float(w), ranges)


class ScenarioSampler:
    """Draws an episode's scenario from a list of entries (see the module docstring)."""

    def __init__(self, scenarios: Sequence[Any], env: str) -> None:
        if isinstance(scenarios, str | bytes | Mapping) or not isinstance(scenarios, Sequence):
            raise ConfigError(f"{env}: scenarios must be a list, got {type(scenarios).__name__}")
        if not scenarios:
            raise ConfigError(f"{env}: scenarios must not be empty")
        self.entries = [_entry(i, s, env) for i, s in enumerate(scenarios)]
        w = np.array([e.weight for e in self.entries])
        self.p = w / w.sum()
        self._cache: dict[int, ScenarioConfig] = {}

    @property
    def first(self) -> ScenarioConfig:
        """The first entry as drawn with every range at its low end (sets the spaces)."""
        return load_scenario(self.entries[0].base)

    def draw(self, seed: int) -> ScenarioConfig:
        """The scenario of the episode with ``seed``."""
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, SALT])
        e = self.entries[int(rng.choice(len(self.entries), p=self.p))]
        data = e.base
        if e.ranges:
            data = {**data, "cluster": dict(data["cluster"]), "workload": dict(data["workload"])}
            parts = []
            for key in RANGE_KEYS:
                if key not in e.ranges:
                    continue
                lo, hi = e.ranges[key]
                if key == "load":
                    v: float = float(rng.uniform(lo, hi))
                    name = "load" if "load" in data["workload"] else "target_load"
                    data["workload"][name] = v
                    parts.append(f"load{v:.2f}")
                elif key == "num_jobs":
                    v = int(rng.integers(int(lo), int(hi) + 1))
                    name = "num_jobs" if "num_jobs" in data["workload"] else "max_jobs"
                    data["workload"][name] = v
                    parts.append(f"{v}jobs")
                else:
                    v = int(rng.integers(int(lo), int(hi) + 1))
                    group = dict(data["cluster"]["groups"][0], racks=v)
                    data["cluster"]["groups"] = [group]
                    data["cluster"]["name"] = f"{data['cluster']['name']}-{v}racks"
                    parts.append(f"{v}racks")
            data["name"] = f"{data['name']}[{','.join(parts)}]"
            return load_scenario(data)
        key = self.entries.index(e)  # entries without ranges: built once
        cfg = self._cache.get(key)
        if cfg is None:
            cfg = self._cache[key] = load_scenario(data)
        return cfg
