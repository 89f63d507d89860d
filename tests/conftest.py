"""Shared fixtures: small hand-made scenarios and the trace root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from dlcluster_gym import BaseScheduler, Migrate, Preempt, SetTimeShift, Start, WakeUp
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import ScenarioConfig, load_scenario
from dlcluster_gym.errors import TraceError
from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import get_model
from dlcluster_gym.workload.traces import trace_root

# Property tests draw the same examples on every run (reproducible results and run times);
# HYPOTHESIS_PROFILE=explore draws new ones each run (docs/testing.md).
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))

# The trace root as the package finds it: $DLCLUSTER_TRACES, else ../shared/traces;
# DLCLUSTER_TRACES=none hides it (a fresh clone's view, docs/testing.md). TRACES is None then.
TRACES: Path | None
try:
    TRACES = trace_root()
    NO_TRACES = f"{TRACES} not found (set DLCLUSTER_TRACES to run trace tests)"
except TraceError:
    TRACES = None
    NO_TRACES = "no trace root (DLCLUSTER_TRACES=none; point it at the traces to run trace tests)"
traces_available = TRACES is not None and TRACES.is_dir()
needs_traces = pytest.mark.skipif(not traces_available, reason=NO_TRACES)


def experiment_script(name: str):
    """The module of ``experiments/<role>/NAME.py`` (imported with its folder on ``sys.path``,
    as the scripts import their neighbours)."""
    import importlib

    found = sorted((Path(__file__).resolve().parents[1] / "experiments").glob(f"*/{name}.py"))
    assert len(found) == 1, f"experiments/*/{name}.py: {len(found)} matches"
    folder = str(found[0].parent)
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)


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


class Chaos(BaseScheduler):
    """Seeded random starts (time shifts included), preemptions, migrations and, with
    ``shift_below`` above 0.05, time-shift changes: per running job one draw ``r``, preempt
    below 0.05, shift below ``shift_below``, migrate below ``migrate_below``."""

    name = "chaos"

    def __init__(self, shift_below: float = 0.2, migrate_below: float = 0.25) -> None:
        super().__init__()
        self.shift_below, self.migrate_below = shift_below, migrate_below

    def reset(self, view, rng):
        self.rng = rng

    def schedule(self, view):
        rng, acts = self.rng, []
        free = set(np.flatnonzero(view.free_mask).tolist())
        for job in list(view.running()):
            r = rng.random()
            if r < 0.05:
                acts.append(Preempt(job))
                free |= set(view.gpus_of(job).tolist())
            elif r < self.shift_below:
                acts.append(SetTimeShift(job, float(rng.uniform(-2.0, 2.0))))
            elif r < self.migrate_below:
                n = view.gpus_of(job).size
                pool = sorted(free | set(view.gpus_of(job).tolist()))
                gpus = tuple(int(g) for g in rng.choice(pool, n, replace=False))
                acts.append(Migrate(job, gpus))
                free = (free | set(view.gpus_of(job).tolist())) - set(gpus)
        for job in list(view.waiting()):
            n = view.jobs[job].num_gpus
            if n <= len(free) and rng.random() < 0.8:
                gpus = tuple(int(g) for g in rng.choice(sorted(free), n, replace=False))
                free -= set(gpus)
                acts.append(Start(job, gpus, time_shift_s=float(rng.uniform(0, 1))))
        acts.append(WakeUp(view.now + float(rng.uniform(1.0, 30.0))))
        return acts
