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

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.config import ScenarioConfig, load_scenario, merge_overrides
from dlcluster_gym.errors import ConfigError, DLClusterError

SALT = 0x5CE7A210
RANGE_KEYS: tuple[str, ...] = ("racks", "load", "num_jobs")
ENTRY_KEYS: tuple[str, ...] = ("scenario", "weight", "overrides", "ranges")


@dataclass(frozen=True)
class Entry:
    """One entry of a scenario list, checked."""

    base: dict[str, Any]  # the scenario (overrides applied) as a mapping
    weight: float
    ranges: dict[str, tuple[float, float]]


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
    spec = raw["scenario"]
    if not isinstance(spec, str | Path | Mapping | ScenarioConfig):
        raise ConfigError(
            f"{where}.scenario must be a preset name, a YAML path or a mapping, got {spec!r}"
        )
    try:
        base = load_scenario(dict(spec) if isinstance(spec, Mapping) else spec).model_dump()
    except ConfigError as err:
        raise one_line_error(f"{where}.scenario", err) from None
    except DLClusterError as err:  # an unknown preset name, a missing file
        raise ConfigError(f"{where}.scenario: {err}") from None
    over = raw.get("overrides")
    if over is not None and not isinstance(over, Mapping):
        raise ConfigError(f"{where}.overrides must be a mapping, got {over!r}")
    if over:
        try:
            base = load_scenario(merge_overrides(base, over)).model_dump()
        except ConfigError as err:
            raise one_line_error(f"{where}.overrides", err) from None
    raw_ranges = raw.get("ranges")
    if raw_ranges is not None and not isinstance(raw_ranges, Mapping):
        raise ConfigError(
            f"{where}.ranges must be a mapping of {', '.join(RANGE_KEYS)} to [lo, hi], "
            f"got {raw_ranges!r}"
        )
    ranges: dict[str, tuple[float, float]] = {}
    for key, r in (raw_ranges or {}).items():
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
    wl = base["workload"]
    for key, names in (("load", ("load", "target_load")), ("num_jobs", ("num_jobs", "max_jobs"))):
        if key in ranges and not any(n in wl for n in names):
            raise ConfigError(
                f"{where}.ranges.{key}: workload kind {wl.get('kind')!r} has no "
                f"{' or '.join(names)}"
            )
    if "load" in ranges and "load" in wl:
        if wl.get("arrival") != "poisson":
            raise ConfigError(
                f"{where}.ranges.load: the workload's arrivals are {wl.get('arrival')!r}, where "
                "load changes nothing (it sets the Poisson arrival rate); use a Poisson "
                "scenario, or ranges num_jobs/racks"
            )
        if wl.get("rate_per_hour") is not None:
            raise ConfigError(
                f"{where}.ranges.load: the workload sets rate_per_hour="
                f"{wl['rate_per_hour']!r}, which overrides load; drop one of them"
            )
    _check_ends(where, base, ranges)
    return Entry(base, float(w), ranges)


def _apply(data: dict[str, Any], values: Mapping[str, float]) -> tuple[dict[str, Any], list[str]]:
    """``data`` (a scenario mapping) with the drawn ``values`` of its ranges, and their label
    parts (``load0.85``, ``120jobs``, ``4racks``)."""
    data = {**data, "cluster": dict(data["cluster"]), "workload": dict(data["workload"])}
    parts = []
    for key in RANGE_KEYS:
        if key not in values:
            continue
        v = values[key]
        if key == "load":
            name = "load" if "load" in data["workload"] else "target_load"
            data["workload"][name] = float(v)
            parts.append(f"load{v:.2f}")
        elif key == "num_jobs":
            name = "num_jobs" if "num_jobs" in data["workload"] else "max_jobs"
            data["workload"][name] = int(v)
            parts.append(f"{int(v)}jobs")
        else:
            group = dict(data["cluster"]["groups"][0], racks=int(v))
            data["cluster"]["groups"] = [group]
            data["cluster"]["name"] = f"{data['cluster']['name']}-{int(v)}racks"
            parts.append(f"{int(v)}racks")
    return data, parts


def _check_ends(where: str, base: dict[str, Any], ranges: dict[str, tuple[float, float]]) -> None:
    """Load the scenario with each range at its low and high end, alone and all together
    (every corner), so that a range the config rejects fails here, not at some reset."""
    keys = list(ranges)
    trials: list[tuple[str, dict[str, float]]] = []
    for key in keys:
        trials += [(f"{where}.ranges.{key}", {key: end}) for end in ranges[key]]
    if len(keys) > 1:
        for ends in itertools.product(*(ranges[k] for k in keys)):
            trials.append((f"{where}.ranges", dict(zip(keys, ends, strict=True))))
    for loc, values in trials:
        try:
            load_scenario(_apply(base, values)[0])
        except ConfigError as err:
            at = ", ".join(f"{k}={_fmt(v)}" for k, v in values.items())
            raise one_line_error(f"{loc} (at {at})", err) from None


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


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
        """The first entry's scenario, its ranges not applied (sets the spaces)."""
        return load_scenario(self.entries[0].base)

    def largest(self) -> list[tuple[str, int, int]]:
        """``(where, machines, racks)`` of each entry's largest cluster (its ``racks`` range at
        the high end), for envs whose observation has a size limit."""
        out = []
        for i, e in enumerate(self.entries):
            groups = e.base["cluster"]["groups"]
            if "racks" in e.ranges:
                groups = [dict(groups[0], racks=int(e.ranges["racks"][1]))]
            machines = sum(int(g["racks"]) * int(g["machines_per_rack"]) for g in groups)
            out.append((f"scenarios[{i}]", machines, sum(int(g["racks"]) for g in groups)))
        return out

    def draw(self, seed: int) -> ScenarioConfig:
        """The scenario of the episode with ``seed``."""
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, SALT])
        e = self.entries[int(rng.choice(len(self.entries), p=self.p))]
        data = e.base
        if e.ranges:
            values: dict[str, float] = {}
            for key in RANGE_KEYS:
                if key not in e.ranges:
                    continue
                lo, hi = e.ranges[key]
                if key == "load":
                    values[key] = float(rng.uniform(lo, hi))
                else:
                    values[key] = int(rng.integers(int(lo), int(hi) + 1))
            data, parts = _apply(data, values)
            data["name"] = f"{data['name']}[{','.join(parts)}]"
            return load_scenario(data)
        key = self.entries.index(e)  # entries without ranges: built once
        cfg = self._cache.get(key)
        if cfg is None:
            cfg = self._cache[key] = load_scenario(data)
        return cfg
