"""Every scenario preset loads and builds its workload."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import TraceWorkload, list_presets, load_scenario
from dlcluster_gym.scenario.build import build_workload
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
    # Dally Table 1's calibration belongs to the Dally reproduction presets only (the job
    # groups family is not one: physics profiles), the Cassini/HotNets testbed profiles to the
    # Cassini presets (cluster cassini-testbed*)
    expected = {"dally-groups-": "physics", "dally-": "dally-table1", "cassini-": "cassini-testbed"}
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


# --------------------------------------------------------------------------- overrides

TRACE = {"kind": "trace", "format": "itp-raw", "path": "elasticflow_itp/raw/cluster01.csv"}


def _every_way(name: str, over: dict) -> list[dict]:
    """The scenario ``name`` with ``over`` through load_scenario's keyword overrides, an env's
    scenario_overrides, an env's scenarios=[{overrides}] entry and a split entry's overrides
    (the CLI's --split and agent configs), each as a mapping without its name."""
    import gymnasium as gym

    from dlcluster_gym.splits import entry_scenario

    env = gym.make("DLCluster/Scheduler-v4", scenario=name, scenario_overrides=over)
    sampled = gym.make("DLCluster/Scheduler-v4", scenarios=[{"scenario": name, "overrides": over}])
    cfgs = [
        load_scenario(name, **over),
        env.unwrapped.scenario,
        sampled.unwrapped.scenario,
        entry_scenario(name, over),
    ]
    return [{k: v for k, v in c.model_dump().items() if k != "name"} for c in cfgs]


@pytest.mark.parametrize(
    "over",
    [
        {"workload": {"num_jobs": 40}},  # merged: the preset's kind, arrivals and load stay
        {"workload": {"num_jobs": 40, "load": 1.2}, "cluster": "dally-4rack"},
        {"workload": {"kind": "dally", "num_jobs": 40}},  # a kind: the mapping replaces
        {"workload": {**TRACE, "max_jobs": 30}},  # switches the Dally workload to a trace
    ],
    ids=["partial", "partial-and-cluster", "same-kind", "to-a-trace"],
)
def test_one_override_rule_everywhere(over):
    got = _every_way("dally-poisson-2rack", over)
    assert all(g == got[0] for g in got[1:])
    w = load_scenario("dally-poisson-2rack", **over).workload
    preset = load_scenario("dally-poisson-2rack").workload
    if "kind" not in over["workload"]:
        assert (w.kind, w.arrival, w.num_jobs) == ("dally", preset.arrival, 40)
    elif over["workload"]["kind"] == "dally":
        assert w.arrival == "batch"  # the default: nothing of the preset's workload is kept
    else:
        assert (w.kind, w.path, w.max_jobs) == ("trace", TRACE["path"], 30)


def test_merge_overrides_leaves_its_inputs_alone():
    from dlcluster_gym.config import merge_overrides

    base = {"workload": {"kind": "dally", "num_jobs": 5, "groups": {"r_vc": 0.1}}, "seed": 1}
    over = {"workload": {"groups": {"r_group": 0.2}}, "seed": 2}
    assert merge_overrides(base, over) == {
        "workload": {"kind": "dally", "num_jobs": 5, "groups": {"r_vc": 0.1, "r_group": 0.2}},
        "seed": 2,
    }
    assert base["workload"]["groups"] == {"r_vc": 0.1} and over["seed"] == 2
    assert merge_overrides(base, {"workload": {"kind": "synthetic"}})["workload"] == {
        "kind": "synthetic"
    }
