"""Model performance profiles by source: which per-model numbers a scenario's jobs run with.

- ``physics`` (the default for trace and generic scenarios): the zoo's profile as it is
  (``workload.models``): gradient bytes, compute time, 25 MB DDP buckets, no per-model factor.
- ``dally-table1`` (the Dally reproduction presets): the six Dally models get Dally Table 1's
  per-tier calibration factors (``configs/profiles/dally-table1.yaml``, see there and
  ``perf.network.calibrate``); every other model is as in ``physics``.

A scenario names its source (``ScenarioConfig.profile``); the engine, the workload builders,
the bounds and the env features all resolve model names through :func:`model_profile`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

import yaml

from dlcluster_gym.config import configs_dir
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.workload.models import ModelProfile, get_model

PROFILE_SOURCES: dict[str, str] = {
    "physics": "gradient bytes and compute time from the model zoo, no per-model factor",
    "dally-table1": "Dally Table 1 per-tier calibration on the six Dally models (Dally presets)",
}


@cache
def _table(source: str) -> dict[str, Any]:
    path = configs_dir() / "profiles" / f"{source}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read profile source {source!r}: {exc}") from None
    scales = data.get("tier_scale") if isinstance(data, dict) else None
    if not isinstance(scales, dict):
        raise ConfigError(f"{path}: expected a `tier_scale` mapping of model -> [m, r, n]")
    out = {}
    for name, v in scales.items():
        if not (isinstance(v, list) and len(v) == 3 and all(float(x) > 0 for x in v)):
            raise ConfigError(
                f"{path}: tier_scale.{name}: expected three positive numbers, got {v!r}"
            )
        out[get_model(name).name] = tuple(float(x) for x in v)
    return out


@cache
def model_profile(name: str, source: str = "physics") -> ModelProfile:
    """The profile of model ``name`` under profile ``source`` (see the module docstring)."""
    if source not in PROFILE_SOURCES:
        raise UnknownNameError("profile source", source, PROFILE_SOURCES)
    base = get_model(name)
    if source == "physics":
        return base
    scale = _table(source).get(base.name)
    return base if scale is None else replace(base, comm=replace(base.comm, tier_scale=scale))
