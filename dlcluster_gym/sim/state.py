"""What the engine's helper modules (results, views, the PS runtime) may assume of the engine,
so that they do not import ``sim.engine`` (which imports them): job status codes and the
engine's core attributes as a protocol (``sim.engine.Engine`` satisfies it)."""

from __future__ import annotations

from typing import Any, Protocol

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.workload.job import Job

# Job status codes.
PENDING, WAITING, RUNNING, DONE, DROPPED = 0, 1, 2, 3, 4


class EngineState(Protocol):
    """The engine as its helpers see it: the scenario, cluster, jobs and clock (the helpers
    also read the engine's per-job arrays; ``sim.engine.Engine`` documents them)."""

    scenario: ScenarioConfig
    cluster: Cluster
    jobs: list[Job]
    now: float

    def __getattr__(self, name: str) -> Any: ...
