"""Every scenario preset loads and builds its workload."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import TraceWorkload, list_presets, load_scenario
from dlcluster_gym.workload.build import build_workload
from dlcluster_gym.workload.traces import traces_available

SCENARIOS = sorted(list_presets("scenarios"))
EXPECTED = {
    *(f"dally-{a}-{r}rack" for a in ("batch", "poisson") for r in (2, 4, 8, 16)),
    "philly-1024gpu", "tiresias-60job", "itp-cluster10", "cassini-testbed-poisson",
}  # fmt: skip


def reads_a_trace(s) -> bool:
    """Trace workloads and those drawing arrivals from a trace (Crius's ``path``)."""
    return isinstance(s.workload, TraceWorkload) or getattr(s.workload, "path", None) is not None


def test_expected_presets_exist():
    assert set(SCENARIOS) >= EXPECTED


@pytest.mark.parametrize("name", SCENARIOS)
def test_preset_loads_and_builds(name):
    s = load_scenario(name)
    assert s.description and "\n" not in s.description.strip()
    assert s.seed == 1
    assert s.contention  # link sharing is on in every preset (issue 15)
    # Dally Table 1's calibration belongs to the Dally reproduction presets only, the
    # Cassini/HotNets testbed profiles to the Cassini presets (cluster cassini-testbed*)
    expected = {"dally-": "dally-table1", "cassini-": "cassini-testbed"}
    assert s.profile == next((v for k, v in expected.items() if name.startswith(k)), "physics")
    if reads_a_trace(s) and not traces_available():
        pytest.skip(
            f"{name} reads a trace and ../shared/traces was not found; set DLCLUSTER_TRACES"
        )
    cluster = Cluster(s.cluster)
    jobs = build_workload(s, cluster, np.random.default_rng(s.seed))
    assert jobs and [j.job_id for j in jobs] == list(range(len(jobs)))
    arrivals = [j.arrival_s for j in jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] >= 0
    assert max(j.num_gpus for j in jobs) <= cluster.num_gpus or name == "philly-1024gpu"
    if name.startswith("dally-batch"):
        assert len(jobs) == 500 and arrivals[-1] == 0
    if name.startswith("dally-poisson"):
        assert len(jobs) == 400 and arrivals[-1] > 0


def test_poisson_span_scales_with_cluster():
    spans = []
    for r in (2, 4, 8, 16):
        s = load_scenario(f"dally-poisson-{r}rack")
        jobs = build_workload(s, Cluster(s.cluster), np.random.default_rng(s.seed))
        spans.append(jobs[-1].arrival_s)
    # same seed, rate proportional to GPUs: spans halve as racks double
    assert spans[0] / spans[1] == pytest.approx(2.0)
    assert spans[0] / spans[3] == pytest.approx(8.0)


def test_tiresias_cluster_matches_trace_description():
    s = load_scenario("tiresias-60job")
    c = Cluster(s.cluster)
    assert (c.num_racks, c.num_machines, c.num_gpus) == (1, 32, 128)
    assert s.cluster.groups[0].gpu_type == "V100"
