"""Cluster configs (homogeneous and heterogeneous), validation errors, topology queries."""

from __future__ import annotations

import pytest

from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.config import load_cluster, load_scenario
from dlcluster_gym.errors import ConfigError, UnknownNameError

HETERO = {
    "name": "mixed",
    "groups": [
        {"name": "a100", "racks": 1, "machines_per_rack": 2, "gpus_per_machine": 4,
         "gpu_type": "A100", "machine_link": "nvlink"},
        {"name": "a10", "racks": 2, "machines_per_rack": 3, "gpus_per_machine": 2,
         "gpu_type": "A10", "machine_link": "pcie"},
    ],
    "tiers": {"rack": "ib-100", "network": {"bandwidth_gbps": 25, "latency_us": 40}},
    "rack_uplink_oversubscription": 2.0,
}  # fmt: skip


def test_presets_sizes():
    for racks in (2, 4, 8, 16):
        c = Cluster(f"dally-{racks}rack")
        assert c.num_gpus == racks * 64 and c.num_racks == racks and c.num_machines == racks * 8
        assert c.rack_link.bandwidth_gbps == pytest.approx(400)
        assert c.network_link.bandwidth_gbps == pytest.approx(800)


def test_heterogeneous_groups_and_links():
    c = Cluster(HETERO)
    assert c.num_gpus == 8 + 12 and c.num_racks == 3 and c.num_machines == 8
    assert c.machine_gpu_type[:2] == ("A100", "A100") and c.machine_gpu_type[2] == "A10"
    assert c.links_for_group(0)[0].name == "nvlink" and c.links_for_group(1)[0].name == "pcie"
    assert c.network_link.bandwidth_Bps == pytest.approx(25e9 / 8)
    assert c.network_link.latency_s == pytest.approx(40e-6)
    g = c.graph
    up = g.edges[("tor", 1), ("spine", 0)]["capacity_Bps"]
    assert up == pytest.approx(3 * 2 * c.rack_link.bandwidth_Bps / 2.0)  # 2:1 oversubscribed
    assert g.number_of_nodes() == 20 + 8 + 3 + 1


def test_tiers_and_shapes():
    c = Cluster("dally-2rack")
    assert c.placement_tier([0, 7]) == Tier.MACHINE
    assert c.placement_tier([0, 8]) == Tier.RACK
    assert c.placement_tier([0, 64]) == Tier.NETWORK
    assert c.placement_shape([0, 1, 8, 64]) == ((2, 1), (1,))
    with pytest.raises(IndexError, match="GPU 128 does not exist"):
        c.check_gpus([0, 128])


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"racks": 0, "machines_per_rack": 8, "gpus_per_machine": 8}, r"\n  racks: Input should"),
        ({"groups": [{"racks": 0, "machines_per_rack": 8, "gpus_per_machine": 8}]},
         r"\n  groups.0.racks: "),
        ({"racks": 1, "machines_per_rack": 8, "gpus_per_machine": 8, "gpu_type": "B200"},
         r"unknown GPU type 'B200'; known: .*A100"),
        ({"racks": 1, "machines_per_rack": 8, "gpus_per_machine": 8,
          "tiers": {"rack": "warp-drive"}}, r"unknown interconnect 'warp-drive'"),
        ({"racks": 1, "machines_per_rack": 8, "gpus_per_machine": 8,
          "tiers": {"rack": {"bandwidth_gbps": 10}}}, r"both bandwidth_gbps and latency_us"),
        ({"racks": 1, "machines_per_rack": 8, "gpus_per_machine": 8,
          "rack_uplink_oversubscription": 0.5}, r"rack_uplink_oversubscription"),
        ({"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 2, "groups": []},
         r"either `groups` or the homogeneous fields"),
        ({"groups": []}, r"groups is empty: give at least one machine group"),
        ({"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 8, "machine_uplink_gbps": 100,
          "nics_per_machine": 2},
         r"machine_uplink_gbps=100 and the NIC fields \(nic_gbps, nics_per_machine, nic_gpus\) "
         r"both set"),
        ({"racks": 1, "machines_per_rack": 8, "gpus_per_machine": float("nan")},
         r"gpus_per_machine"),
    ],
)  # fmt: skip
def test_bad_cluster_configs(data, match):
    with pytest.raises(ConfigError, match=match):
        load_cluster(data)


def test_cluster_file_errors_name_that_file_in_the_short_form_the_user_wrote(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "racks: 2\nmachines_per_rack: 2\ngpus_per_machine: 4\nnics_per_machine: 8\n"
    )
    scen = tmp_path / "s.yaml"
    scen.write_text("cluster: mine.yaml\nworkload: {kind: dally, num_jobs: 3}\n")
    with pytest.raises(ConfigError) as ei:
        load_scenario(scen)
    msg = str(ei.value)
    assert f"{scen}: {tmp_path / 'mine.yaml'}: invalid config:" in msg
    assert "nics_per_machine=8 is more than gpus_per_machine=4" in msg
    assert "groups" not in msg and "'default'" not in msg and "{...}" not in msg
    assert "Value error" not in msg


@pytest.mark.parametrize(
    ("workload", "where"),
    [
        ({"kind": "synthetic", "num_jobs": 5, "models": ["resnet50", "nosuchnet"]},
         "workload.synthetic.models"),
        ({"kind": "trace", "format": "philly", "path": "x.csv", "models": ["nosuchnet"]},
         "workload.trace.models"),
    ],
)  # fmt: skip
def test_unknown_workload_model_names_the_file_and_field(tmp_path, workload, where):
    import yaml

    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump({"cluster": "dally-2rack", "workload": workload}))
    with pytest.raises(ConfigError) as ei:
        load_scenario(scen)
    msg = str(ei.value)
    assert msg.startswith(f"{scen}: invalid config:"), msg
    assert f"{where}: unknown model 'nosuchnet'" in msg and "literal" not in msg


def test_unknown_cluster_preset_lists_valid_ones():
    with pytest.raises(UnknownNameError, match=r"unknown cluster 'nope'.*dally-8rack"):
        load_cluster("nope")


def test_scenario_overrides_and_bad_overheads():
    sc = load_scenario("dally-batch-2rack", seed=7)
    assert sc.seed == 7 and sc.cluster.num_gpus == 128
    with pytest.raises(ConfigError, match=r"overheads.restore_s"):
        load_scenario(
            {
                "cluster": "dally-2rack",
                "workload": {"kind": "dally", "num_jobs": 3},
                "overheads": {"restore_s": -1},
            }
        )
