"""``ideal``: Cassini's Ideal comparison point, an analytical BOUND (see sim/bounds.py)."""

from __future__ import annotations

from collections.abc import Sequence

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.sim.bounds import ideal_results
from dlcluster_gym.sim.results import Results
from dlcluster_gym.workload.job import Job


class IdealBound:
    """Every job alone on a dedicated cluster: computed, never scheduled through the engine."""

    name = "ideal"

    def __init__(self) -> None:
        self.params: dict = {}

    def bound(self, scenario: ScenarioConfig, cluster: Cluster, jobs: Sequence[Job]) -> Results:
        return ideal_results(scenario, cluster, jobs)
