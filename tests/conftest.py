"""Shared fixtures: small hand-made scenarios and the trace root."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import ScenarioConfig, load_scenario
from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import get_model

TRACES = Path(
    os.environ.get("DLCLUSTER_TRACES")
    or Path(__file__).resolve().parents[1].parent / "shared" / "traces"
)
traces_available = TRACES.is_dir()
needs_traces = pytest.mark.skipif(
    not traces_available, reason=f"{TRACES} not found (set DLCLUSTER_TRACES to run trace tests)"
)


def small_scenario(racks: int = 1, machines: int = 2, gpus: int = 4, **kw) -> ScenarioConfig:
    data = {
        "name": "hand-made",
        "cluster": {"racks": racks, "machines_per_rack": machines, "gpus_per_machine": gpus},
        "workload": {"kind": "synthetic", "num_jobs": 1},
    }
    data.update(kw)
    return load_scenario(data)


def run_engine(scenario: ScenarioConfig, jobs: list[Job], policy, seed: int = 0, **kw):
    engine = Engine(
        scenario,
        Cluster(scenario.cluster),
        jobs,
        policy,
        np.random.default_rng(seed),
        record_events=True,
        **kw,
    )
    return engine, engine.run()


def frac(cluster: Cluster, model: str, gpus: list[int]) -> float:
    """Exposed communication of ``model`` on ``gpus`` as a fraction of compute (no contention)."""
    return placement_overhead(cluster, get_model(model), np.asarray(gpus, dtype=np.int64))


def starts(res) -> dict[int, tuple[float, list[int], str]]:
    """Last start of each job: (time, GPUs, tier) from a run recorded with events."""
    return {e["job"]: (e["t"], e["gpus"], e["tier"]) for e in res.events if e["event"] == "start"}


def overhead_scenario(**kw) -> ScenarioConfig:
    """1 rack x 2 machines x 4 GPUs with checkpoint 10 s, restore 20 s, restart 30 s."""
    return small_scenario(
        racks=1,
        machines=2,
        gpus=4,
        overheads={"checkpoint_s": 10.0, "restore_s": 20.0, "restart_s": 30.0},
        **kw,
    )
