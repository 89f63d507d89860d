"""Model performance profiles by source: which per-model numbers a scenario's jobs run with.

- ``physics`` (the default for trace and generic scenarios): the zoo's profile as it is
  (``workload.models``): gradient bytes, compute time, 25 MB DDP buckets, no per-model factor.
- ``physics-ddp`` (a named variant, no preset uses it): ``physics`` plus PyTorch DDP's overlap
  of the gradient buckets' all-reduce with the backward pass (``workload.models.ddp_exposed_s``,
  backward = ``DDP_BACKWARD_FRACTION`` of compute) for data-parallel models. With link sharing
  on, the engine's Up phase of such a job is its exposed communication only (``sim.engine``
  takes ``exposed / (1 - overlap)`` with ``overlap = 0``), so the bytes hidden behind the
  backward pass are not shared; use it for placement costs (validation: Pollux placements).
- ``dally-table1`` (the Dally reproduction presets): the six Dally models get Dally Table 1's
  per-tier calibration factors (``configs/profiles/dally-table1.yaml``, see there and
  ``perf.network.calibrate``); every other model is as in ``physics``.
- ``cassini-testbed`` (the Cassini presets): the 13 Cassini Table 4.2 models as profiled on the
  Cassini / HotNets testbed (``configs/profiles/cassini-testbed.yaml``, read by
  ``workload.testbed_profiles``; provenance there), mapped onto the engine's model by
  :func:`testbed_model_profile`; every other model is as in ``physics``.

A scenario names its source (``ScenarioConfig.profile``); the engine, the workload builders,
the bounds and the env features all resolve model names through :func:`model_profile`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from typing import Any

from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.files import configs_dir, read_yaml
from dlcluster_gym.workload.models import (
    DDP_BACKWARD_FRACTION,
    CommParams,
    ModelProfile,
    get_model,
)
from dlcluster_gym.workload.testbed_profiles import (
    FLOW_RATES,
    FlowRate,
    ProfiledModel,
    testbed_flow_rate,
    testbed_table,
)

PROFILE_SOURCES: dict[str, str] = {
    "physics": "gradient bytes and compute time from the model zoo, no per-model factor",
    "physics-ddp": "physics plus PyTorch DDP's bucket all-reduce overlap with the backward pass",
    "dally-table1": "Dally Table 1 per-tier calibration on the six Dally models (Dally presets)",
    "cassini-testbed": "Cassini/HotNets testbed profiles of the 13 Cassini models (Cassini "
    "presets)",
}


@cache
def _table(source: str) -> dict[str, Any]:
    path = configs_dir() / "profiles" / f"{source}.yaml"
    scales = read_yaml(path).get("tier_scale")
    if not isinstance(scales, dict):
        raise ConfigError(f"{path}: expected a `tier_scale` mapping of model -> [m, r, n]")
    out = {}
    for name, v in scales.items():
        if not (
            isinstance(v, list)
            and len(v) == 3
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
            and all(math.isfinite(x) and x > 0 for x in v)
        ):
            raise ConfigError(
                f"{path}: tier_scale.{name}: expected three finite numbers > 0 (machine, "
                f"rack, network), got {v!r}"
            )
        try:
            model = get_model(str(name)).name
        except UnknownNameError as exc:
            raise ConfigError(f"{path}: tier_scale.{name}: {exc}") from None
        out[model] = (float(v[0]), float(v[1]), float(v[2]))
    return out


@cache
def model_profile(name: str, source: str = "physics") -> ModelProfile:
    """The profile of model ``name`` under profile ``source`` (see the module docstring)."""
    if source not in PROFILE_SOURCES:
        raise UnknownNameError("profile source", source, PROFILE_SOURCES)
    base = get_model(name)
    if source == "physics":
        return base
    if source == "physics-ddp":
        if base.parallelism != "data" or base.comm.overlap > 0:
            return base
        return replace(base, comm=replace(base.comm, backward_fraction=DDP_BACKWARD_FRACTION))
    if source == "cassini-testbed":
        link, models = testbed_table()
        entry = next((m for m in models if m.name == base.name), None)
        return base if entry is None else testbed_model_profile(base, entry, link)
    scale = _table(source).get(base.name)
    return base if scale is None else replace(base, comm=replace(base.comm, tier_scale=scale))


def testbed_model_profile(
    base: ModelProfile, m: ProfiledModel, link_gbps: float, flow_rate: FlowRate | None = None
) -> ModelProfile:
    """``base`` with the testbed profile ``m`` (reference batch) mapped onto the engine's model.

    The testbed profile gives an iteration of ``T`` ms whose Up phases carry ``B`` Gb per
    iteration through the job's 50 Gb/s link (backward pass and all-reduce together, HotNets
    sec. 2). The engine's network model sends a job's bytes at its flows' rate and counts the
    rest of the iteration as compute, so (our mapping; the papers have no engine to map to):

    - all-reduce volume ``V = B`` bytes (``volume_scale = B / grad_bytes``): a job of two
      workers on two servers sends exactly ``B`` per worker through its NIC (ring /
      halving-doubling moves ``2(k-1)/k * V`` per worker, so larger jobs send up to ``2B``,
      as NCCL's ring does);
    - flow rate ``r`` (``flow_rate``, default the YAML's ``flow_rate``): ``up-rate`` caps each
      flow at the profile's Up rate (``rate_cap_Bps = m.up_gbps``, :attr:`ProfiledModel.up_gbps`),
      ``r = min(link, Up rate)``; ``line-rate`` leaves the cap at ``inf``, ``r = link``;
    - ``compute_s = T - B / r``: the Down segments (``up-rate``: exactly them; ``line-rate``:
      plus the part of the Up phases in which the testbed job computes without filling the
      link);
    - ``overlap = 0`` and one collective call per Up segment of the profile (each pays the
      link latency).

    So a two-worker job alone on the testbed runs at ``T`` (plus one link latency per call,
    tens of microseconds) and moves ``B`` bits per iteration; with ``up-rate`` it sends them
    over its whole Up phase at the Up rate, as profiled, and a fair share below that rate
    stretches it. Model-parallel jobs keep the engine's multi-phase template.
    """
    mode = testbed_flow_rate() if flow_rate is None else flow_rate
    if mode not in FLOW_RATES:
        raise ConfigError(f"flow_rate: expected one of {', '.join(FLOW_RATES)}, got {mode!r}")
    bytes_per_iter = m.gbit_per_iteration * 1e9 / 8.0
    cap_gbps = min(link_gbps, m.up_gbps) if mode == "up-rate" else link_gbps
    busy_s = m.gbit_per_iteration / cap_gbps
    compute_s = m.iteration_ms() / 1e3 - busy_s
    comm = CommParams(
        volume_scale=bytes_per_iter / base.grad_bytes,
        messages=float(sum(1 for _, rate in m.segments if rate > 0)),
        overlap=0.0,
        rate_cap_Bps=cap_gbps * 1e9 / 8.0 if mode == "up-rate" else math.inf,
    )
    return replace(
        base,
        parallelism=m.parallelism,
        compute_s=compute_s,
        batch_size=m.reference_batch,
        reference_gpu="A100",
        source=f"cassini-testbed ({m.paper_name}, batch {m.reference_batch}): {m.source}",
        comm=comm,
    )
