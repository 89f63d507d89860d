"""Bad scenario files: YAML and encoding mistakes, and one bad value at a time in every part of
a scenario (engine settings, cluster, links, each workload kind), each an exit-2, one-line
error naming the file, the field and the value (``bad_inputs_harness.check_case``)."""

from __future__ import annotations

import pytest
from bad_inputs_harness import (
    ALIAS_BOMB,
    ALIAS_REFUSED,
    OK_SCENARIO,
    SIM,
    TOO_BIG,
    TOO_BIG_REFUSED,
    Case,
    check_case,
    params,
)

C = "{racks: 1, machines_per_rack: 2, gpus_per_machine: 4"
W = "{kind: synthetic, num_jobs: 4"
RUN = [*SIM, "{d}/s.yaml"]
INVALID = "s.yaml: invalid config: "


def sc(cluster: str = C + "}", workload: str = W + "}", extra: str = "") -> dict[str, str]:
    return {"s.yaml": f"cluster: {cluster}\nworkload: {workload}\n{extra}"}


def fields(where: str, table: dict[str, list[tuple[str, str]]]) -> dict[str, Case]:
    """Cases from ``{field: [(bad value, expected text), ...]}`` placed by ``where``: "top"
    (a scenario field), "cluster" (in the homogeneous cluster), "synthetic" (in the
    synthetic workload). The expected text follows ``s.yaml: invalid config: <path>: ``."""
    out: dict[str, Case] = {}
    for field, bad in table.items():
        for value, why in bad:
            if where == "top":
                files, path = sc(extra=f"{field}: {value}\n"), field
            elif where == "cluster":
                files, path = sc(cluster=f"{C}, {field}: {value}}}"), f"cluster.{field}"
            else:
                files, path = sc(workload=f"{W}, {field}: {value}}}"), f"workload.{where}.{field}"
            out[f"{where}.{field}={value}"] = (RUN, files, f"{INVALID}{path}{why}")
    return out


GT0 = ": Input should be greater than 0"
FINITE = ": Input should be a finite number"
NUMBER = ": Input should be a valid number"
EXTRA = ": Extra inputs are not permitted"
GE1 = ": Input should be greater than or equal to 1"
NOT_BOOL = ": expected a number, not a boolean"

TOP = {
    "seed": [
        ("1.5", ": Input should be a valid integer, got a number with a fractional part"),
        ("true", ": expected an integer, not a boolean"),
        ("[1]", ": Input should be a valid integer (got [1])"),
        ("9223372036854775808", ": Input should be less than or equal to 9223372036854775807"),
    ],
    "round_period_s": [
        ("0", GE1),
        ("1e-9", GE1 + " (got '1e-9')"),  # YAML 1.1 reads 1e-9 as text; pydantic as a number
        ("0.001", GE1),
        (".inf", FINITE),
        ("abc", NUMBER),
        ("true", NOT_BOOL),
    ],
    "oversize_jobs": [("keep", ": Input should be 'reject' or 'drop' (got 'keep')")],
    "contention": [
        ("maybe", ": Input should be a valid boolean"),
        ("2", ": Input should be a valid boolean"),
        ("1", ": Input should be a valid boolean (got 1)"),
        ("'true'", ": Input should be a valid boolean (got 'true')"),
        ("on", ": Input should be a valid boolean (got 'on')"),
    ],
    "network": [("fast", ": Input should be 'model' or 'ideal' (got 'fast')")],
    "profile": [("nosuch", ": Input should be 'physics', 'physics-ddp', 'dally-table1' or")],
    "max_sim_time_s": [("0", GT0), ("-1", GT0), (".inf", FINITE)],
    "overheads": [
        ("{checkpoint_s: -1}", ".checkpoint_s: Input should be greater than or equal to 0"),
        ("{restore_s: .nan}", ".restore_s" + FINITE),
        ("{restart_s: abc}", ".restart_s" + NUMBER),
        ("{pause_s: 1}", ".pause_s" + EXTRA),
        ("5", ": Input should be a valid dictionary or instance of Overheads (got 5)"),
    ],
    "name": [("[1]", ": Input should be a valid string (got [1])")],
    "description": [("{a: 1}", ": Input should be a valid string")],
}

CLUSTER_FIELDS = {
    "gpu_type": [("5", ": Input should be a valid string (got 5)")],
    "memory_gb_per_machine": [("-1", GT0), (".nan", FINITE), ("true", NOT_BOOL)],
    "cpus_per_machine": [
        ("0", GT0),
        ("true", ": expected an integer, not a boolean (got True)"),
        ("2.0", ": expected an integer, not the decimal number 2.0"),
        ("'2'", ": expected an integer, not text (got '2')"),
        ("1e6", ": expected an integer, not text (got '1e6')"),  # YAML 1.1: text
        ("1.0e+6", ": expected an integer, not the decimal number 1000000.0"),
        ("1.5", ": Input should be a valid integer, got a number with a fractional part"),
    ],
    "allocatable_cpus_per_machine": [("0", GT0)],
    "nic_gbps": [("0", GT0), (".inf", FINITE)],
    "nics_per_machine": [
        ("0", GT0),
        ("4.0", ": expected an integer, not the decimal"),
        ("false", ": expected an integer, not a boolean (got False)"),
    ],
    "machine_link": [
        ("warp", ": unknown interconnect 'warp'; known: eth-1"),
        ("{bandwidth_gbps: 10}", ": give an interconnect preset name, or both bandwidth_gbps"),
    ],
    "tiers": [
        ("{machine: nosuch}", ".machine: unknown interconnect 'nosuch'"),
        ("{rack: {bandwidth_gbps: -1, latency_us: 1}}", ".rack.bandwidth_gbps" + GT0),
        ("{network: {latency_us: 1}}", ".network: give an interconnect preset name, or both"),
        ("{spine: ib}", ".spine" + EXTRA),
    ],
    "rack_uplink_oversubscription": [("0.5", ": Input should be greater than or equal to 1")],
    "spine_oversubscription": [(".nan", FINITE)],
    "rail_optimized": [
        ("maybe", ": Input should be a valid boolean"),
        ("'yes'", ": Input should be a valid boolean (got 'yes')"),
        ("1", ": Input should be a valid boolean (got 1)"),
    ],
    "machine_uplink_gbps": [("-5", GT0)],
    "collective": [("tree", ": Input should be 'hierarchical' or 'flat-ring' (got 'tree')")],
    "transport_efficiency": [("1.5", ": Input should be less than or equal to 1"), ("0", GT0)],
    "color": [("red", EXTRA + " (got 'red')")],
    "name": [("[1]", ": Input should be a valid string")],
}

SYNTHETIC = {
    "arrival": [("weekly", ": Input should be 'batch' or 'poisson' (got 'weekly')")],
    "load": [
        ("0", GT0),
        ("-1", GT0),
        (".nan", FINITE),
        ("11", ": Input should be less than or equal to 10"),
    ],
    "rate_per_hour": [("0", GT0), ("-3", GT0)],
    "models": [
        ("resnet50", ": Input should be a valid tuple (got 'resnet50')"),
        ("[resnet50, nosuch]", ": unknown model 'nosuch'; valid models: alexnet"),
    ],
    "gpu_demands": [
        ("[0]", ".0" + GT0),
        ("[1.5]", ".0: Input should be a valid integer, got a number with a fractional part"),
        ("[1000001]", ".0: Input should be less than or equal to 1000000"),
        ("[true]", ".0: expected an integer, not a boolean"),
    ],
    "gpu_demand_weights": [("[-1, 1, 1, 1]", ".0" + GT0)],
    "iterations": [
        ("[0, 5]", ".0" + GT0),
        ("[5]", ".1: Field required"),
        ("[5, 1000000001]", ".1: Input should be less than or equal to 1000000000"),
        ("[5, 1.0e+6]", ".1: expected an integer, not the decimal number 1000000.0"),
    ],
    "max_jobs": [
        ("0", GT0),
        ("-2", GT0),
        ("3000000", ": Input should be less than or equal to 2000000"),
    ],
    "seed": [("1", EXTRA)],
}

SYN = f"{INVALID}workload.synthetic: "
WL = f"{INVALID}workload"
TRACE = "{kind: trace, format: philly, path: x.csv"
CRIUS = "{kind: crius, path: x.csv"

CASES: dict[str, Case] = {
    **fields("top", TOP),
    **fields("cluster", CLUSTER_FIELDS),
    **fields("synthetic", SYNTHETIC),
    # --- files and YAML
    "latin1-file": (
        RUN,
        {"s.yaml": ("# caf\xe9\n" + OK_SCENARIO).encode("latin-1")},
        "s.yaml: not UTF-8 text (line 1: byte 0xe9)",
    ),
    "binary-file": (
        RUN,
        {"s.yaml": bytes(range(256))},
        "s.yaml: not UTF-8 text (line 2: byte 0x80)",
    ),
    "tab-indent": (
        RUN,
        {"s.yaml": "cluster:\n\tracks: 1\n"},
        "line 2, column 1: found character '\\t'",
    ),
    "a-directory": (RUN, {"s.yaml/x": "a"}, "Is a directory: {d}/s.yaml"),
    "yml-missing": ([*SIM, "{d}/s.yml"], {}, "s.yml: file not found"),
    "unclosed-quote": (RUN, {"s.yaml": "name: 'abc\n" + OK_SCENARIO}, "malformed YAML: line 4"),
    "undefined-alias": (RUN, {"s.yaml": "cluster: *c\n"}, "found undefined alias 'c'"),
    "recursive-alias": (
        RUN,
        {"s.yaml": f"cluster: &c [*c]\nworkload: {W}}}\n"},
        "s.yaml: line 1, column 10: a YAML alias refers to a value that contains it",
    ),
    "alias-bomb": (RUN, {"s.yaml": ALIAS_BOMB + OK_SCENARIO}, f"s.yaml: {ALIAS_REFUSED}"),
    "too-big": (RUN, {"s.yaml": OK_SCENARIO + TOO_BIG}, f"s.yaml: {TOO_BIG_REFUSED}"),
    "python-tag": (
        RUN,
        {"s.yaml": "cluster: !!python/object:os.system {}\n"},
        "could not determine a constructor for the tag",
    ),
    "two-documents": (
        RUN,
        {"s.yaml": OK_SCENARIO + "---\n" + OK_SCENARIO},
        "but found another document",
    ),
    "scalar-top-level": (
        RUN,
        {"s.yaml": "hello\n"},
        "s.yaml: expected a mapping at the top level, got str",
    ),
    "null-top-level": (RUN, {"s.yaml": "~\n"}, "expected a mapping at the top level, got NoneType"),
    "huge-integer": (
        RUN,
        {"s.yaml": OK_SCENARIO + "seed: " + "9" * 5000 + "\n"},
        "s.yaml: line 3, column 7: seed: an integer of 5,000 digits, more than the 4,300 a "
        "number in a config file may have",
    ),
    "huge-integer-nested": (
        RUN,
        sc(workload=W.replace("num_jobs: 4", "num_jobs: " + "9" * 10_000) + "}"),
        "s.yaml: line 2, column 39: workload.num_jobs: an integer of 10,000 digits",
    ),
    "huge-integer-in-a-list": (
        RUN,
        sc(workload=W + ", gpu_demands: [1, " + "4" * 4301 + "]}"),
        "s.yaml: line 2, column 59: workload.gpu_demands.1: an integer of 4,301 digits",
    ),
    "nested-too-deep": (
        RUN,
        {"s.yaml": OK_SCENARIO + "description: " + "[" * 5000 + "]" * 5000 + "\n"},
        "s.yaml: malformed YAML: nested too deeply to read",
    ),
    "preset-with-a-path": ([*SIM, "../../etc/passwd"], {}, "unknown scenario '../../etc/passwd'"),
    "empty-scenario-name": ([*SIM, ""], {}, "unknown scenario ''; valid scenarios:"),
    "too-many-nics": (
        RUN,
        {
            "s.yaml": "cluster: {racks: 1, machines_per_rack: 2, gpus_per_machine: 0, "
            "nics_per_machine: 1000000}\nworkload: {kind: ps, num_jobs: 2}\n"
        },
        f"{INVALID}cluster: 2,000,000 NICs is more than the limit of 1,000,000",
    ),
    "missing-workload": (RUN, {"s.yaml": f"cluster: {C}}}\n"}, f"{WL}: Field required"),
    "missing-cluster": (RUN, {"s.yaml": f"workload: {W}}}\n"}, f"{INVALID}cluster: Field required"),
    # --- a cluster file beside the scenario
    "cluster-file-malformed": (
        RUN,
        {"s.yaml": f"cluster: c.yaml\nworkload: {W}}}\n", "c.yaml": "racks: [\n"},
        "s.yaml: {d}/c.yaml: malformed YAML: line 2",
    ),
    "cluster-file-bad-field": (
        RUN,
        {
            "s.yaml": f"cluster: c.yaml\nworkload: {W}}}\n",
            "c.yaml": "racks: 0\nmachines_per_rack: 1\ngpus_per_machine: 4\n",
        },
        "c.yaml: invalid config: racks: Input should be greater than 0 (got 0)",
    ),
    "cluster-file-alias-bomb": (
        RUN,
        {
            "s.yaml": f"cluster: c.yaml\nworkload: {W}}}\n",
            "c.yaml": ALIAS_BOMB + "racks: 1\nmachines_per_rack: 2\ngpus_per_machine: 4\n",
        },
        f"c.yaml: {ALIAS_REFUSED}",
    ),
    "cluster-file-too-big": (
        RUN,
        {"s.yaml": f"cluster: c.yaml\nworkload: {W}}}\n", "c.yaml": TOO_BIG},
        f"c.yaml: {TOO_BIG_REFUSED}",
    ),
    "cluster-file-a-list": (
        RUN,
        {"s.yaml": f"cluster: c.yaml\nworkload: {W}}}\n", "c.yaml": "- 1\n"},
        "c.yaml: expected a mapping at the top level, got list",
    ),
    "cluster-file-latin1": (
        RUN,
        {
            "s.yaml": f"cluster: c.yaml\nworkload: {W}}}\n",
            "c.yaml": "# \xe9\nracks: 1\n".encode("latin-1"),
        },
        "c.yaml: not UTF-8 text (line 1: byte 0xe9)",
    ),
    "cluster-file-a-directory": (
        RUN,
        {"s.yaml": f"cluster: c.yaml\nworkload: {W}}}\n", "c.yaml/x": "a"},
        "s.yaml: cluster: file 'c.yaml' not found",
    ),
    # --- the cluster as a whole
    "cluster-a-list": (
        RUN,
        sc(cluster="[1, 2]"),
        f"{INVALID}cluster: Input should be a valid dictionary",
    ),
    "cluster-a-number": (
        RUN,
        sc(cluster="5"),
        "cluster: Input should be a valid dictionary or instance of ClusterConfig (got 5)",
    ),
    "cluster-racks-negative": (
        RUN,
        sc(cluster="{racks: -1, machines_per_rack: 2, gpus_per_machine: 4}"),
        f"{INVALID}cluster.racks{GT0}",
    ),
    "cluster-racks-fraction": (
        RUN,
        sc(cluster="{racks: 1.5, machines_per_rack: 2, gpus_per_machine: 4}"),
        "cluster.racks: Input should be a valid integer, got a number with a fractional part",
    ),
    "cluster-racks-text": (
        RUN,
        sc(cluster="{racks: abc, machines_per_rack: 2, gpus_per_machine: 4}"),
        "cluster.racks: expected an integer, not text (got 'abc')",
    ),
    "cluster-racks-true": (
        RUN,
        sc(cluster="{racks: true, machines_per_rack: 2, gpus_per_machine: 4}"),
        "cluster.racks: expected an integer, not a boolean (got True)",
    ),
    "cluster-machines-per-rack-0": (
        RUN,
        sc(cluster="{racks: 1, machines_per_rack: 0, gpus_per_machine: 4}"),
        f"cluster.machines_per_rack{GT0}",
    ),
    "cluster-too-many-machines": (
        RUN,
        sc(cluster="{racks: 2, machines_per_rack: 60000, gpus_per_machine: 1}"),
        "120,000 machines is more than the limit of 100,000",
    ),
    "cluster-gpus-negative": (
        RUN,
        sc(cluster="{racks: 1, machines_per_rack: 2, gpus_per_machine: -1}"),
        "cluster.gpus_per_machine: Input should be greater than or equal to 0",
    ),
    "cluster-gpus-fraction": (
        RUN,
        sc(cluster="{racks: 1, machines_per_rack: 2, gpus_per_machine: 2.5}"),
        "cluster.gpus_per_machine: Input should be a valid integer, got a number",
    ),
    "cluster-more-nics-than-gpus": (
        RUN,
        sc(cluster=C + ", nics_per_machine: 9}"),
        "cluster: nics_per_machine=9 is more than gpus_per_machine=4; a NIC must serve at least "
        "one GPU (allowed: 1..4)",
    ),
    "cluster-nic-gpus-overlap": (
        RUN,
        sc(cluster=C + ", nic_gpus: [[0, 1], [1, 2]]}"),
        "nic_gpus=[[0, 1], [1, 2]] must list 2 non-empty NICs that together hold each local GPU "
        "0..3 exactly once",
    ),
    "cluster-nic-gpus-unknown-gpu": (
        RUN,
        sc(cluster=C + ", nic_gpus: [[0, 1, 2, 3, 4]]}"),
        "nic_gpus=[[0, 1, 2, 3, 4]] must list 1 non-empty NICs",
    ),
    "cluster-nic-gpus-empty-nic": (
        RUN,
        sc(cluster=C + ", nic_gpus: [[]]}"),
        "nic_gpus=[[]] must list 1 non-empty NICs",
    ),
    "cluster-nic-gpus-without-gpus": (
        RUN,
        sc(cluster="{racks: 1, machines_per_rack: 2, gpus_per_machine: 0, nic_gpus: [[0]]}"),
        "nic_gpus needs GPUs on the machine",
    ),
    "cluster-uplink-and-nic-fields": (
        RUN,
        sc(cluster=C + ", machine_uplink_gbps: 10, nic_gbps: 10}"),
        "machine_uplink_gbps=10 and the NIC fields (nic_gbps, nics_per_machine, nic_gpus) both "
        "set the NICs; give one of them",
    ),
    "cluster-rail-unequal-nics": (
        RUN,
        sc(
            cluster=(
                "{rail_optimized: true, groups: [{name: a, racks: 1, machines_per_rack: 1, "
                "gpus_per_machine: 4}, {name: b, racks: 1, machines_per_rack: 1, gpus_per_machine: "
                "8}]}"
            )
        ),
        "rail_optimized needs the same number of NICs on every machine; got a: 4, b: 8",
    ),
    "cluster-group-name-twice": (
        RUN,
        sc(
            cluster=(
                "{groups: [{name: a, racks: 1, machines_per_rack: 1, gpus_per_machine: 4}, {name: "
                "a, racks: 1, machines_per_rack: 1, gpus_per_machine: 8}]}"
            )
        ),
        "cluster: group name 'a' appears twice; give each group its own name",
    ),
    "cluster-group-without-racks": (
        RUN,
        sc(cluster="{groups: [{name: a, machines_per_rack: 1, gpus_per_machine: 4}]}"),
        "cluster.groups.0.racks: Field required",
    ),
    "cluster-groups-and-flat-fields": (
        RUN,
        sc(cluster="{racks: 1, groups: [{racks: 1, machines_per_rack: 1, gpus_per_machine: 4}]}"),
        "give either `groups` or the homogeneous fields (racks), not both",
    ),
    "cluster-groups-empty": (
        RUN,
        sc(cluster="{groups: []}"),
        "groups is empty: give at least one machine group",
    ),
    "cluster-group-bad-gpu-type": (
        RUN,
        sc(
            cluster=(
                "{groups: [{name: a, racks: 1, machines_per_rack: 1, gpus_per_machine: 4, "
                "gpu_type: Q1}]}"
            )
        ),
        "cluster.groups.0.gpu_type: unknown GPU type 'Q1'",
    ),
    # --- synthetic workloads: consistency between fields
    "synthetic-num-jobs-negative": (
        RUN,
        sc(workload="{kind: synthetic, num_jobs: -1}"),
        f"{SYN[:-2]}.num_jobs{GT0}",
    ),
    "synthetic-num-jobs-text": (
        RUN,
        sc(workload="{kind: synthetic, num_jobs: abc}"),
        "workload.synthetic.num_jobs: expected an integer, not text (got 'abc')",
    ),
    "synthetic-num-jobs-fraction": (
        RUN,
        sc(workload="{kind: synthetic, num_jobs: 2.5}"),
        "num_jobs: Input should be a valid integer, got a number with a fractional part",
    ),
    "synthetic-models-empty": (
        RUN,
        sc(workload=W + ", models: []}"),
        SYN + "models must not be empty",
    ),
    "synthetic-demands-empty": (
        RUN,
        sc(workload=W + ", gpu_demands: []}"),
        SYN + "gpu_demands must not be empty",
    ),
    "synthetic-weights-count": (
        RUN,
        sc(workload=W + ", gpu_demand_weights: [1, 1]}"),
        SYN + "gpu_demand_weights has 2 entries for 4 gpu_demands",
    ),
    "synthetic-iterations-backwards": (
        RUN,
        sc(workload=W + ", iterations: [10, 5]}"),
        SYN + "iterations must be [lo, hi] with lo <= hi, got [10, 5]",
    ),
    # --- other workload kinds
    "workload-a-list": (RUN, sc(workload="[]"), f"{WL}: Input should be a valid dictionary"),
    "workload-without-kind": (
        RUN,
        sc(workload="{num_jobs: 4}"),
        f"{WL}: Unable to extract tag using discriminator 'kind'",
    ),
    "workload-unknown-kind-named": (
        RUN,
        sc(workload="{kind: weekly, num_jobs: 4}"),
        "workload: Input tag 'weekly' found using 'kind' does not match any of the expected tags",
    ),
    "dally-without-num-jobs": (
        RUN,
        sc(workload="{kind: dally}"),
        f"{WL}.dally.num_jobs: Field required",
    ),
    "dally-load-0": (
        RUN,
        sc(workload="{kind: dally, num_jobs: 4, arrival: poisson, load: 0}"),
        f"{WL}.dally.load{GT0}",
    ),
    "dally-models-not-a-field": (
        RUN,
        sc(workload="{kind: dally, num_jobs: 4, models: [x]}"),
        f"{WL}.dally.models{EXTRA}",
    ),
    "ps-rate-0": (
        RUN,
        sc(workload="{kind: ps, num_jobs: 4, rate_per_hour: 0}"),
        f"{WL}.ps.rate_per_hour{GT0}",
    ),
    "ps-unknown-model": (
        RUN,
        sc(workload="{kind: ps, num_jobs: 4, models: [nosuch]}"),
        "s.yaml: workload: unknown PS model 'nosuch'; valid PS models: bilstm",
    ),
    "ps-models-empty": (
        RUN,
        sc(workload="{kind: ps, num_jobs: 4, models: []}"),
        f"{WL}.ps.models: models must not be empty",
    ),
    "ps-variant-zero-epochs": (
        RUN,
        sc(workload="{kind: ps, num_jobs: 4, variants: [[0, 1]]}"),
        f"{WL}.ps.variants.0.0{GT0}",
    ),
    "ps-variant-one-number": (
        RUN,
        sc(workload="{kind: ps, num_jobs: 4, variants: [[1]]}"),
        f"{WL}.ps.variants.0.1: Field required",
    ),
    "ps-variants-empty": (
        RUN,
        sc(workload="{kind: ps, num_jobs: 4, variants: []}"),
        "variants must not be empty",
    ),
    "crius-without-path": (RUN, sc(workload="{kind: crius}"), f"{WL}.crius.path: Field required"),
    "crius-unknown-model": (
        RUN,
        sc(workload=CRIUS + ", models: [nosuch]}"),
        f"{WL}.crius: models: unknown large model 'nosuch'",
    ),
    "crius-weights-without-models": (
        RUN,
        sc(workload=CRIUS + ", model_weights: [1, 2]}"),
        "model_weights needs models: one weight per model named there",
    ),
    "crius-weights-count": (
        RUN,
        sc(workload=CRIUS + ", models: [bert-1.3b], model_weights: [1, 2]}"),
        "model_weights has 2 entries for 1 models",
    ),
    "crius-demand-weights-count": (
        RUN,
        sc(workload=CRIUS + ", gpu_demand_weights: [1]}"),
        "gpu_demand_weights has 1 entries for 5 gpu_demands",
    ),
    "crius-max-duration-0": (
        RUN,
        sc(workload=CRIUS + ", max_duration_s: 0}"),
        f"{WL}.crius.max_duration_s{GT0}",
    ),
    "crius-window-backwards": (
        RUN,
        sc(workload=CRIUS + ", time_window_s: [5, 1]}"),
        "time_window_s must be [start, end) with start < end, got [5.0, 1.0]",
    ),
    "crius-unknown-format": (
        RUN,
        sc(workload=CRIUS + ", format: nosuch}"),
        f"{WL}.crius.format: Input should be 'philly', 'tiresias'",
    ),
    "trace-without-path": (
        RUN,
        sc(workload="{kind: trace, format: philly}"),
        f"{WL}.trace.path: Field required",
    ),
    "trace-path-a-number": (
        RUN,
        sc(workload="{kind: trace, format: philly, path: 5}"),
        f"{WL}.trace.path: Input should be a valid string (got 5)",
    ),
    "trace-unknown-model": (
        RUN,
        sc(workload=TRACE + ", models: [nosuch]}"),
        f"{WL}.trace.models: unknown model 'nosuch'",
    ),
    "trace-on-error": (
        RUN,
        sc(workload=TRACE + ", on_error: ignore}"),
        "on_error: Input should be 'fail' or 'skip' (got 'ignore')",
    ),
    "trace-gpu-demand": (
        RUN,
        sc(workload=TRACE + ", gpu_demand: shrink}"),
        "gpu_demand: Input should be 'keep', 'cap' or 'filter' (got 'shrink')",
    ),
    "trace-target-load-0": (
        RUN,
        sc(workload=TRACE + ", target_load: 0}"),
        f"{WL}.trace.target_load{GT0}",
    ),
    "trace-duration-tier": (
        RUN,
        sc(workload=TRACE + ", duration_tier: pod}"),
        "duration_tier: Input should be 'machine', 'rack' or 'network' (got 'pod')",
    ),
    "trace-window-negative": (
        RUN,
        sc(workload=TRACE + ", time_window_s: [-1, 5]}"),
        "time_window_s.0: Input should be greater than or equal to 0",
    ),
    "trace-window-backwards": (
        RUN,
        sc(workload=TRACE + ", time_window_s: [5, 1]}"),
        f"{WL}.trace: time_window_s must be [start, end) with start < end",
    ),
    "trace-window-three-numbers": (
        RUN,
        sc(workload=TRACE + ", time_window_s: [1, 2, 3]}"),
        "time_window_s: Tuple should have at most 2 items after validation, not 3",
    ),
    "trace-iterations-from": (
        RUN,
        sc(workload=TRACE + ", iterations_from: x}"),
        "iterations_from: Input should be 'trace' or 'duration' (got 'x')",
    ),
    "trace-columns-not-generic": (
        RUN,
        sc(workload=TRACE + ", columns: {a: b}}"),
        "columns applies to format 'generic' only, not 'philly'",
    ),
    "trace-task-path-not-alibaba": (
        RUN,
        sc(workload=TRACE + ", task_path: y.csv}"),
        "task_path applies to format 'alibaba-pai' only, not 'philly'",
    ),
    "trace-columns-a-list": (
        RUN,
        sc(workload="{kind: trace, format: generic, path: x.csv, columns: [a]}"),
        "workload.trace.columns: Input should be a valid dictionary (got ['a'])",
    ),
}


def test_the_table_has_distinct_cases():
    assert len(CASES) >= 100
    assert len({(tuple(a), str(f), c) for a, f, c in CASES.values()}) == len(CASES)


@pytest.mark.parametrize(("args", "files", "culprit"), params(CASES))
def test_bad_scenario_is_one_line_and_exit_2(tmp_path, monkeypatch, args, files, culprit):
    check_case(tmp_path, monkeypatch, args, files, culprit)


def test_anchors_and_aliases_within_the_limit_load(tmp_path):
    """Shared values (anchors and aliases, as ``yaml.safe_dump`` writes them for a value used
    twice) load as the values written out would."""
    from dlcluster_gym.config import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text(
        "cluster: {racks: 2, machines_per_rack: 2, gpus_per_machine: 4,\n"
        "          tiers: {rack: &link ib-quantum, network: *link}}\n"
        "workload: {kind: synthetic, num_jobs: 4, gpu_demands: &d [1, 2], "
        "gpu_demand_weights: *d}\n"
    )
    cfg = load_scenario(path)
    assert cfg.cluster.tiers.network.preset == "ib-quantum"
    assert cfg.workload.gpu_demand_weights == (1.0, 2.0)
