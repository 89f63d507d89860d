"""The ``cassini-testbed`` profile source: Cassini/HotNets testbed profiles as data
(``configs/profiles/cassini-testbed.yaml``), what the engine runs with them, the Cassini
presets that use them, ``dlcluster models --overheads --profile cassini-testbed``."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from dlcluster_gym.cli import main
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_cluster, load_scenario
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf import testbed as tb  # module import: its test* names are not tests
from dlcluster_gym.perf.network import placement_overhead, placement_traffic
from dlcluster_gym.scenario.build import build_workload
from dlcluster_gym.workload import profiles as wp  # module import: a test* name
from dlcluster_gym.workload import testbed_profiles as tp
from dlcluster_gym.workload.models import get_model
from dlcluster_gym.workload.profiles import PROFILE_SOURCES, model_profile

CASSINI_MODELS = [
    "vgg11", "vgg16", "vgg19", "resnet50", "wide-resnet101", "bert", "roberta", "xlm",
    "camembert", "gpt1", "gpt2-medium", "gpt3", "dlrm",
]  # fmt: skip


def test_yaml_holds_the_13_cassini_models_with_provenance():
    link, models = tp.testbed_table()
    assert link == 50.0
    assert sorted(m.name for m in models) == sorted(CASSINI_MODELS)
    assert all(m.source for m in models)  # every entry says what is measured / derived
    # the paper anchors, written out here on purpose (HotNets sec. 3, Table 1 group 5)
    vgg16 = tb.get_profiled_model("vgg16")
    assert (vgg16.iteration_ms(), vgg16.compute_ms()) == (255.0, 141.0)
    assert tb.get_profiled_model("resnet50").iteration_ms() == 165.0
    assert "cassini-testbed" in PROFILE_SOURCES


@pytest.mark.parametrize("model", CASSINI_MODELS)
def test_engine_runs_a_two_worker_job_at_the_profiled_iteration_and_bytes(model):
    """Alone on two testbed servers, the engine's iteration is the profile's (plus one link
    latency per collective call) and the NIC carries the profile's bits per iteration."""
    cluster = Cluster(load_cluster("cassini-testbed"))
    prof = model_profile(model, "cassini-testbed")
    m = tb.get_profiled_model(model)
    gpus = np.array([0, 2])  # two servers under two ToRs
    it_ms = prof.compute_s * (1.0 + placement_overhead(cluster, prof, gpus)) * 1e3
    assert m.iteration_ms() <= it_ms <= m.iteration_ms() + 1.0
    traffic = placement_traffic(cluster, prof, gpus)
    nic0 = traffic.links == cluster.gpu_nic[0]
    assert traffic.bytes_per_iter[nic0].sum() * 8 / 1e9 == pytest.approx(m.gbit_per_iteration)
    assert prof.parallelism == m.parallelism


def test_other_models_fall_back_to_physics():
    assert model_profile("alexnet", "cassini-testbed") == get_model("alexnet")


def test_cassini_preset_builds_its_jobs_from_the_testbed_profiles():
    sc = load_scenario("cassini-testbed-poisson")
    assert sc.profile == "cassini-testbed"
    jobs = build_workload(sc, Cluster(sc.cluster), np.random.default_rng(1))
    for j in jobs[:40]:
        assert j.compute_s == model_profile(j.model, "cassini-testbed").compute_s


_OK = {"parallelism": "data", "reference_batch": 8, "batch_range": [8, 32]}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"parallelism": "pipe"}, "models.x.parallelism: expected data or model, got 'pipe'"),
        (
            {"parallelism": "data", "reference_batch": 0, "batch_range": [1, 2]},
            "models.x.reference_batch: expected an integer > 0, got 0",
        ),
        (
            {"parallelism": "data", "reference_batch": 8, "batch_range": [16, 32]},
            "models.x.batch_range: expected [lo, hi] integers with lo <= reference_batch <= hi",
        ),
        (
            {**_OK, "segments": [[10, 0], [-5, 30]]},
            "models.x.segments[1] duration: expected a number > 0, got -5",
        ),
        (
            {**_OK, "segments": [[10, 0], [5, 0]]},
            "models.x.segments: need at least one Up and one Down segment",
        ),
    ],
)
def test_bad_entries_are_one_line_errors_naming_the_field(entry, message):
    with pytest.raises(ConfigError) as exc:
        tp._entry("cassini-testbed.yaml", "x", entry)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_cli_models_overheads_with_the_testbed_source():
    r = CliRunner().invoke(
        main, ["models", "--overheads", "--profile", "cassini-testbed", "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    table = json.loads(r.output)
    assert sorted(table) == sorted(CASSINI_MODELS)
    for row in table.values():
        # sharing the ToR uplink of a 2:1 over-subscribed rack costs more than one ToR
        assert row["net-12"] > row["net-2"] >= row["rack-2"] > 0
    r = CliRunner().invoke(main, ["models", "--overheads", "--profile", "cassini-testbed"])
    assert r.exit_code == 0 and "vgg16" in r.output


def test_hotnets_engine_times_by_hand_for_two_aligned_vgg16():
    """Two VGG16(1200) started together on one 50 Gb/s uplink. With the YAML's ``flow_rate:
    up-rate`` each job sends its 3.99 Gb over its 114 ms Up phase at its 35 Gb/s Up rate; shared
    fairly each gets 25 Gb/s, so the Up phase is 35/25 = 1.4x as long (+45.6 ms), as the
    profile shape. With ``line-rate`` each sends at 50 Gb/s (79.8 ms), fully overlapped, so
    each gets half the link and its 79.8 ms doubles."""
    assert tp.testbed_flow_rate() == "up-rate"
    iso, shared = tb.hotnets_engine_ms([("vgg16", 1200), ("vgg16", 1200)])
    assert iso == pytest.approx([255.0, 255.0], abs=0.1)  # + the link latency
    assert shared - iso == pytest.approx([0.4 * 114.0] * 2, rel=5e-3)  # circle quantisation
    iso, shared = tb.hotnets_engine_ms([("vgg16", 1200), ("vgg16", 1200)], "profile")
    assert iso == pytest.approx([255.0, 255.0])
    assert shared == pytest.approx([255.0 + 0.4 * 114.0] * 2, rel=5e-3)
    iso, shared = tb.hotnets_engine_ms([("vgg16", 1200)] * 2, flow_rate="line-rate")
    up = 3.99 / 50 * 1e3
    assert iso == pytest.approx([255.0, 255.0], abs=0.1)
    assert shared - iso == pytest.approx([up, up], rel=5e-3)


def test_up_rate_cap_maps_the_profile_onto_its_down_and_up_phases():
    """VGG16(1200): 141 ms Down, 114 ms Up at 35 Gb/s. ``up-rate``: compute = the Down 141 ms,
    each flow capped at 35 Gb/s = 4.375e9 B/s, so two workers on two servers move 3.99 Gb in
    114 ms. ``line-rate``: compute = 255 - 3.99/50 s = 175.2 ms, no cap."""
    base, m = get_model("vgg16"), tb.get_profiled_model("vgg16")
    up = wp.testbed_model_profile(base, m, 50.0, "up-rate")
    assert up.compute_s == pytest.approx(0.141)
    assert up.comm.rate_cap_Bps == pytest.approx(35e9 / 8)
    line = wp.testbed_model_profile(base, m, 50.0, "line-rate")
    assert line.compute_s == pytest.approx(0.255 - 3.99 / 50)
    assert line.comm.rate_cap_Bps == math.inf
    cluster = Cluster(load_cluster("cassini-testbed"))
    gpus = np.array([0, 2])
    assert placement_overhead(cluster, up, gpus) * up.compute_s == pytest.approx(0.114, abs=1e-4)
    assert placement_overhead(cluster, line, gpus) * line.compute_s == pytest.approx(
        0.0798, abs=1e-4
    )
    # the traffic the engine shares: 35 Gb/s on the NIC during the network stage
    nic0 = placement_traffic(cluster, up, gpus).links == cluster.gpu_nic[0]
    assert placement_traffic(cluster, up, gpus).rate[nic0] == pytest.approx([35e9 / 8], rel=1e-3)
    with pytest.raises(ConfigError, match="flow_rate: expected one of up-rate, line-rate"):
        wp.testbed_model_profile(base, m, 50.0, "fast")  # type: ignore[arg-type]


def test_rate_cap_is_a_ceiling_not_a_floor_and_physics_has_none():
    """A cap above the link changes nothing; physics and dally-table1 profiles carry no cap."""
    cluster = Cluster(load_cluster("cassini-testbed"))
    gpus = np.array([0, 2])
    base = model_profile("vgg16", "cassini-testbed")
    loose = replace(base, comm=replace(base.comm, rate_cap_Bps=1e12))
    free = replace(base, comm=replace(base.comm, rate_cap_Bps=math.inf))
    assert placement_overhead(cluster, loose, gpus) == placement_overhead(cluster, free, gpus)
    for name in ("vgg16", "resnet50", "bert-large"):
        assert get_model(name).comm.rate_cap_Bps == math.inf
        assert model_profile(name, "dally-table1").comm.rate_cap_Bps == math.inf
    with pytest.raises(ValueError, match="rate_cap_Bps must be > 0"):
        replace(base.comm, rate_cap_Bps=0.0)


def test_bad_flow_rate_is_a_one_line_error_naming_file_field_and_value(tmp_path, monkeypatch):
    (tmp_path / "profiles").mkdir()
    src = (tp.configs_dir() / "profiles" / "cassini-testbed.yaml").read_text()
    bad = src.replace("flow_rate: up-rate", "flow_rate: turbo")
    assert bad != src
    (tmp_path / "profiles" / "cassini-testbed.yaml").write_text(bad)
    monkeypatch.setenv("DLCLUSTER_CONFIGS", str(tmp_path))
    tp._read.cache_clear()
    try:
        with pytest.raises(ConfigError) as exc:
            tp.testbed_flow_rate()
    finally:
        monkeypatch.delenv("DLCLUSTER_CONFIGS")
        tp._read.cache_clear()
    msg = str(exc.value)
    assert "cassini-testbed.yaml: flow_rate: expected one of up-rate, line-rate, got 'turbo'" in msg
    assert "\n" not in msg
    assert tp.testbed_flow_rate() == "up-rate"


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("  vgg11: [0.11, abc, 0.34]", "tier_scale.vgg11: expected three finite numbers > 0"),
        ("  vgg11: [0.11, .inf, 0.34]", "tier_scale.vgg11: expected three finite numbers > 0"),
        ("  vgg11: [0.11, 0.2]", "tier_scale.vgg11: expected three finite numbers > 0"),
        ("  nosuchnet: [1, 1, 1]", "tier_scale.nosuchnet: unknown model 'nosuchnet'"),
        ("  vgg11: [1, 1, 1]\n  vgg11: [2, 2, 2]", "key 'vgg11' appears twice"),
    ],
)
def test_bad_dally_table1_profile_entries_are_one_line_errors(tmp_path, monkeypatch, line, match):
    """The calibration file is checked like a config: finite positive factors, known models,
    no duplicated keys; errors name the file and the field."""
    from dlcluster_gym.workload import profiles

    (tmp_path / "profiles").mkdir()
    src = (tp.configs_dir() / "profiles" / "dally-table1.yaml").read_text()
    bad = src.replace("  vgg11: [0.113717, 0.308801, 0.337769]", line)
    assert bad != src
    (tmp_path / "profiles" / "dally-table1.yaml").write_text(bad)
    monkeypatch.setenv("DLCLUSTER_CONFIGS", str(tmp_path))
    profiles._table.cache_clear()
    profiles.model_profile.cache_clear()
    try:
        with pytest.raises(ConfigError, match=match) as exc:
            profiles.model_profile("resnet18", "dally-table1")
    finally:
        monkeypatch.delenv("DLCLUSTER_CONFIGS")
        profiles._table.cache_clear()
        profiles.model_profile.cache_clear()
    assert "dally-table1.yaml" in str(exc.value) and "\n" not in str(exc.value)
    assert profiles.model_profile("vgg11", "dally-table1").comm.tier_scale[0] == 0.113717
