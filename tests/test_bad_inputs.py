"""The bad-input guarantee: every input mistake a user can make on the command line gives exit
code 2 and exactly one line on stderr that names the culprit, never a Python traceback.

Each case is (command line, files to create, text the error line must contain). ``{d}`` in an
argument or a file is the test's temporary folder. The files are small on purpose: every error
here is found before a simulation runs, at the policy's first decision, or when a run passes
its ``--time-limit``. This file holds the first table (one case of each kind of mistake); the
families ``test_bad_inputs_*.py`` (scenarios, traces, command lines, policy parameters, suites
and run folders, checkpoints and env arguments) hold the rest, on the helpers of
``bad_inputs_harness.py``; ``test_the_tables_are_big_enough`` counts them all.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from bad_inputs_harness import (
    CLUSTER,
    CSV_HEAD,
    HAS_AGENTS,
    OK_SCENARIO,
    SIM,
    SUITE,
    Case,
    check_case,
    damaged_checkpoint,
    generic_trace,
    leaderboard_dir_files,
    params,
    run_dir_files,
    scenario,
    trace_scenario,
)
from click.testing import CliRunner

from dlcluster_gym.cli import main

POLICIES = "from dlcluster_gym import BaseScheduler\n" + "".join(
    f"class {name}(BaseScheduler):\n    def schedule(self, view):\n        {body}\n"
    for name, body in (
        ("ReturnsNone", "return None"),
        ("Raises", "raise ZeroDivisionError('oops')"),
        ("ReturnsInt", "return 3"),
        ("Hangs", "while True:\n            pass"),
        ("Sleeps", "import time; time.sleep(3600)"),
        (
            "Swallows",
            "while True:\n            try:\n                while True: pass\n"
            "            except Exception: pass",
        ),
    )
)


def _flip(data: bytes) -> bytes:
    """``data`` with one byte inverted a third of the way in (inside a compressed member)."""
    b = bytearray(data)
    b[len(b) // 3] ^= 0xFF
    return bytes(b)


# id: (arguments, files, culprit)
CASES: dict[str, Case] = {
    # --- scenarios: files and YAML
    "unknown-preset": ([*SIM, "nosuch"], {}, "unknown scenario 'nosuch'"),
    "missing-file": ([*SIM, "{d}/missing.yaml"], {}, "missing.yaml: file not found"),
    "malformed-yaml": ([*SIM, "{d}/s.yaml"], {"s.yaml": "a: [1,\n"}, "s.yaml: malformed YAML"),
    "not-a-mapping": ([*SIM, "{d}/s.yaml"], {"s.yaml": "- 1\n- 2\n"}, "expected a mapping"),
    "duplicate-key": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": OK_SCENARIO + "seed: 1\nseed: 2\n"},
        "key 'seed' appears twice",
    ),
    "unknown-field": ([*SIM, "{d}/s.yaml"], {"s.yaml": OK_SCENARIO + "sedd: 3\n"}, "sedd"),
    "empty-file": ([*SIM, "{d}/s.yaml"], {"s.yaml": ""}, "s.yaml: expected a mapping"),
    # --- scenarios: values
    "negative-seed-yaml": ([*SIM, "{d}/s.yaml"], {"s.yaml": scenario(seed="-3")}, "seed"),
    "seed-not-int-yaml": ([*SIM, "{d}/s.yaml"], {"s.yaml": scenario(seed="abc")}, "seed"),
    "zero-racks": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(cluster="{racks: 0, machines_per_rack: 2, gpus_per_machine: 4}")},
        "racks",
    ),
    "racks-1e9": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": scenario(
                cluster="{racks: 1000000000, machines_per_rack: 2, gpus_per_machine: 4}"
            )
        },
        "machines is more than the limit of 100,000",
    ),
    "too-many-gpus": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": scenario(
                cluster="{racks: 10, machines_per_rack: 10, gpus_per_machine: 100000}"
            )
        },
        "GPUs is more than the limit of 1,000,000",
    ),
    "num-jobs-1e7": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(workload="{kind: synthetic, num_jobs: 10000000}")},
        "workload.synthetic.num_jobs",
    ),
    "num-jobs-0": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(workload="{kind: synthetic, num_jobs: 0}")},
        "num_jobs",
    ),
    "load-1e9": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(workload="{kind: dally, num_jobs: 4, arrival: poisson, load: 1e9}")},
        "load",
    ),
    "unknown-workload-kind": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(workload="{kind: magic, num_jobs: 4}")},
        "magic",
    ),
    "unknown-gpu-type": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": scenario(
                cluster="{racks: 1, machines_per_rack: 2, gpus_per_machine: 4, gpu_type: Z99}"
            )
        },
        "unknown GPU type 'Z99'",
    ),
    "unknown-interconnect": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": scenario(
                cluster="{racks: 1, machines_per_rack: 2, gpus_per_machine: 4, "
                "tiers: {rack: warp-drive}}"
            )
        },
        "unknown interconnect 'warp-drive'",
    ),
    "gpu-jobs-on-gpu-less-cluster": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(cluster="{racks: 1, machines_per_rack: 2, gpus_per_machine: 0}")},
        "gpus_per_machine: 0",
    ),
    "unknown-cluster-preset": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(cluster="nosuch")},
        "s.yaml: unknown cluster 'nosuch'",
    ),
    "missing-cluster-file": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(cluster="nofile.yaml")},
        "s.yaml: cluster: file 'nofile.yaml' not found",
    ),
    "unknown-model": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(workload="{kind: synthetic, num_jobs: 4, models: [nosuch]}")},
        "unknown model 'nosuch'",
    ),
    "negative-round-period": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(round_period_s="-5")},
        "round_period_s",
    ),
    "nan-horizon": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": scenario(max_sim_time_s=".nan")},
        "max_sim_time_s",
    ),
    # --- command-line options
    "negative-seed-cli": ([*SIM, "dally-batch-2rack", "--seed", "-1"], {}, "--seed"),
    "seed-not-int-cli": ([*SIM, "dally-batch-2rack", "--seed", "abc"], {}, "--seed"),
    "bad-format": ([*SIM, "dally-batch-2rack", "--format", "xml"], {}, "--format"),
    "unknown-option": ([*SIM, "dally-batch-2rack", "--nope"], {}, "--nope"),
    "missing-scenario-option": (["simulate"], {}, "--scenario"),
    "unknown-command": (["frobnicate"], {}, "frobnicate"),
    "list-unknown": (["list", "foo"], {}, "'foo'"),
    "out-is-a-file": (
        [*SIM, "dally-batch-2rack", "--out", "{d}/afile"],
        {"afile": "x"},
        "--out",
    ),
    "events-is-a-dir": ([*SIM, "dally-batch-2rack", "--events", "{d}"], {}, "--events"),
    "events-under-a-file": (
        [*SIM, "dally-batch-2rack", "--events", "{d}/afile/ev.jsonl"],
        {"afile": "x"},
        "--events {d}/afile/ev.jsonl: {d}/afile is not a directory",
    ),
    "out-under-a-file": (
        [*SIM, "dally-batch-2rack", "--out", "{d}/afile/run"],
        {"afile": "x"},
        "--out {d}/afile/run: {d}/afile is not a directory",
    ),
    # --- policies
    "unknown-policy": ([*SIM, "dally-batch-2rack", "--policy", "nosuch"], {}, "'nosuch'"),
    "policy-bad-module": (
        [*SIM, "dally-batch-2rack", "--policy", "nosuchmod_xyz:P"],
        {},
        "cannot import module 'nosuchmod_xyz'",
    ),
    "policy-no-attribute": (
        [*SIM, "dally-batch-2rack", "--policy", "tests.fixtures.my_policy:Nope"],
        {},
        "has no attribute 'Nope'",
    ),
    "policy-arg-no-equals": (
        [*SIM, "dally-batch-2rack", "--policy-arg", "noequals"],
        {},
        "--policy-arg 'noequals'",
    ),
    "param-unknown-gavel": (
        [*SIM, "dally-batch-2rack", "--policy", "gavel", "--policy-arg", "lease_s=60"],
        {},
        "policy 'gavel' has no parameter 'lease_s'",
    ),
    "param-unknown-fcfs": (
        [*SIM, "dally-batch-2rack", "--policy-arg", "x=1"],
        {},
        "policy 'fcfs' has no parameter 'x'",
    ),
    "param-bool-maybe": (
        [*SIM, "dally-batch-2rack", "--policy", "tiresias", "--policy-arg", "preemption=maybe"],
        {},
        "'preemption': Input should be a valid boolean",
    ),
    "param-float-text": (
        [*SIM, "dally-batch-2rack", "--policy", "themis", "--policy-arg", "lease_s=soon"],
        {},
        "'lease_s'",
    ),
    "param-int-float": (
        [*SIM, "dally-batch-2rack", "--policy", "cassini", "--policy-arg", "max_candidates=2.5"],
        {},
        "'max_candidates'",
    ),
    "param-out-of-range": (
        [*SIM, "dally-batch-2rack", "--policy", "cassini", "--policy-arg", "max_candidates=0"],
        {},
        "max_candidates must be an integer >= 1",
    ),
    "param-thresholds-order": (
        [*SIM, "dally-batch-2rack", "--policy", "tiresias", "--policy-arg", "thresholds=[5, 1]"],
        {},
        "thresholds",
    ),
    "schedule-returns-none": (
        [*SIM, "{d}/s.yaml", "--policy", "pol_bad_inputs:ReturnsNone"],
        {"s.yaml": OK_SCENARIO, "pol_bad_inputs.py": POLICIES},
        "policy 'pol_bad_inputs:ReturnsNone': schedule() returned None at t=149.516s (trigger: "
        "arrival of job 0)",
    ),
    "schedule-returns-int": (
        [*SIM, "{d}/s.yaml", "--policy", "pol_bad_inputs:ReturnsInt"],
        {"s.yaml": OK_SCENARIO, "pol_bad_inputs.py": POLICIES},
        "schedule() returned 3 at t=",
    ),
    "schedule-raises": (
        [*SIM, "{d}/s.yaml", "--policy", "pol_bad_inputs:Raises"],
        {"s.yaml": OK_SCENARIO, "pol_bad_inputs.py": POLICIES},
        "'pol_bad_inputs:Raises' raised ZeroDivisionError: oops in schedule() at t=149.516s "
        "(trigger: arrival of job 0)",
    ),
    # --- traces (generic CSV)
    "trace-missing-file": ([*SIM, "{d}/s.yaml"], {"s.yaml": generic_trace()}, "t.csv"),
    "trace-huge-gpus": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": CSV_HEAD + "a,0,99999999999999999999,60\n"},
        "line 2, column 'gpus'",
    ),
    "trace-duplicate-ids": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": CSV_HEAD + "a,0,1,60\na,5,1,60\n"},
        "job id 'a' appears twice",
    ),
    "trace-duration-end-disagree": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": generic_trace().replace("job_id: id}", "job_id: id, end: fin}"),
            "t.csv": "id,submit,gpus,runtime,fin\na,0,1,60,60\nb,10,1,60,100\n",
        },
        "line 3, column 'fin'",
    ),
    "trace-missing-column": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": "id,submit,gpus\na,0,1\n"},
        "missing column(s) runtime",
    ),
    "trace-bad-number": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": CSV_HEAD + "a,0,1,soon\n"},
        "column 'runtime'",
    ),
    "trace-negative-duration": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": CSV_HEAD + "a,0,1,-60\n"},
        "column 'runtime'",
    ),
    "trace-empty": ([*SIM, "{d}/s.yaml"], {"s.yaml": generic_trace(), "t.csv": ""}, "empty"),
    "trace-header-only": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": CSV_HEAD},
        "no jobs",
    ),
    "trace-generic-without-columns": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": CLUSTER + "workload: {kind: trace, format: generic, path: '{d}/t.csv'}\n",
            "t.csv": CSV_HEAD + "a,0,1,60\n",
        },
        "must map arrival, num_gpus and duration",
    ),
    "trace-unknown-column-key": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": generic_trace().replace("job_id: id}", "job_id: id, color: c}"),
            "t.csv": CSV_HEAD + "a,0,1,60\n",
        },
        "unknown key(s) color",
    ),
    "trace-unit-on-other-format": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": CLUSTER + "workload: {kind: trace, format: philly, path: x.csv, "
            "time_unit_s: 60}\n"
        },
        "time_unit_s applies to format 'generic' only",
    ),
    "trace-zero-unit": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(duration_unit_s="0"), "t.csv": CSV_HEAD + "a,0,1,60\n"},
        "duration_unit_s",
    ),
    "trace-unknown-format": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": CLUSTER + "workload: {kind: trace, format: excel, path: x.xls}\n"},
        "excel",
    ),
    # --- leaderboards
    "suite-unknown": (["leaderboard", "--suite", "nosuch"], {}, "unknown suite 'nosuch'"),
    "suite-missing-file": (
        ["leaderboard", "--suite", "{d}/nosuch.yaml"],
        {},
        "nosuch.yaml: suite file not found",
    ),
    "suite-none": (["leaderboard"], {}, "--suite"),
    "suite-unknown-entrant": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE.replace("[fcfs]", "[fcfs, nosuch]"), "s.yaml": OK_SCENARIO},
        "unknown policy 'nosuch'",
    ),
    "suite-entrant-bad-param": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {
            "suite.yaml": SUITE.replace("[fcfs]", "[fcfs, {policy: gavel, params: {lease_s: 60}}]"),
            "s.yaml": OK_SCENARIO,
        },
        "policy 'gavel' has no parameter 'lease_s'",
    ),
    "suite-bad-reference": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE + "reference: dally\n", "s.yaml": OK_SCENARIO},
        "reference 'dally'",
    ),
    "suite-unknown-metric": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE + "metrics: [happiness]\n", "s.yaml": OK_SCENARIO},
        "unknown metric 'happiness'",
    ),
    "suite-duplicate-key": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE + "seeds: [2]\n", "s.yaml": OK_SCENARIO},
        "key 'seeds' appears twice",
    ),
    "suite-no-seeds": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE.replace("[1]", "[]"), "s.yaml": OK_SCENARIO},
        "seeds",
    ),
    "leaderboard-workers-0": (
        ["leaderboard", "--suite", "paper-heuristics", "--workers", "0"],
        {},
        "--workers",
    ),
    "leaderboard-backend": (
        ["leaderboard", "--suite", "paper-heuristics", "--backend", "mpi"],
        {},
        "--backend",
    ),
    "verify-empty-dir": (["leaderboard", "--verify", "{d}"], {}, "no leaderboard rows"),
    "report-not-a-run": (["report", "{d}"], {}, "no results.json"),
    # --- other commands
    "compat-unknown-model": (["compat", "--jobs", "nosuch"], {}, "unknown model 'nosuch'"),
    "compat-bad-batch": (["compat", "--jobs", "vgg16:abc"], {}, "batch 'abc'"),
    "compat-negative-link": (
        ["compat", "--jobs", "vgg16", "--link-gbps", "-5"],
        {},
        "link speed",
    ),
    "evaluate-missing-checkpoint": (
        ["evaluate", "--agent", "{d}/missing.zip"],
        {},
        "missing.zip' not found",
    ),
    # --- encodings and damaged files
    "trace-latin1": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": (CSV_HEAD + "j\xe9,0,1,60\n").encode("latin-1")},
        "t.csv: not UTF-8 text (line 2: byte 0xe9",
    ),
    "trace-binary": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": bytes(range(255, -1, -1)) * 8},
        "t.csv: not UTF-8 text (line 1",
    ),
    "checkpoint-meta-not-json": (
        [*SIM, "dally-batch-2rack", "--policy", "agent:{d}/a.zip"],
        {"a.zip": damaged_checkpoint(member="dlcluster_agent.json", data=b"{bad")},
        "dlcluster_agent.json is not valid JSON",
    ),
    "checkpoint-meta-a-list": (
        [*SIM, "dally-batch-2rack", "--policy", "agent:{d}/a.zip"],
        {"a.zip": damaged_checkpoint(member="dlcluster_agent.json", data=b"[1, 2]")},
        "dlcluster_agent.json must hold a JSON object, got list",
    ),
    "checkpoint-bit-flipped": (
        [*SIM, "dally-batch-2rack", "--policy", "agent:{d}/a.zip"],
        {"a.zip": lambda d: _flip(damaged_checkpoint()(d))},
        "is damaged: member 'policy.pth' fails its checksum",
    ),
    "checkpoint-truncated": (
        [*SIM, "dally-batch-2rack", "--policy", "agent:{d}/a.zip"],
        {"a.zip": lambda d: damaged_checkpoint()(d)[:-30_000]},
        "a.zip' is not a readable zip file",
    ),
    "report-metrics-json-corrupted": (
        ["report", "{d}/run"],
        lambda: {**run_dir_files(), "run/metrics.json": b'{"avg_jct_s": 1'},
        "run/metrics.json: not valid JSON",
    ),
    "report-results-json-corrupted": (
        ["report", "{d}/run"],
        lambda: {**run_dir_files(), "run/results.json": b"\x00\x01"},
        "run/results.json: not valid JSON",
    ),
    "leaderboard-negative-seed": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE.replace("[1]", "[-1]"), "s.yaml": OK_SCENARIO},
        "seeds.0: Input should be greater than or equal to 0 (got -1)",
    ),
    "leaderboard-bad-scenario-file": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE, "s.yaml": scenario(round_period_s="-5")},
        "suite.yaml: scenarios: {d}/s.yaml: invalid config: round_period_s",
    ),
    "ray-timeout-negative": (
        ["leaderboard", "--suite", "{d}/suite.yaml", "--backend", "ray", "--ray-timeout", "-1"],
        {"suite.yaml": SUITE, "s.yaml": OK_SCENARIO},
        "--ray-timeout -1: give a finite number of seconds > 0",
    ),
    "verify-suite-json-corrupted": (
        ["leaderboard", "--verify", "{d}/lb"],
        lambda: {**leaderboard_dir_files(), "lb/suite.json": b'{"name": "bad", '},
        "lb/suite.json: not valid JSON",
    ),
    # --- mistakes that would otherwise pass silently
    "out-not-empty": (
        [*SIM, "{d}/s.yaml", "--out", "{d}"],
        {"s.yaml": OK_SCENARIO},
        "--out {d}: not empty (holds 1 file(s), e.g. s.yaml)",
    ),
    "events-is-the-out-folder": (
        [*SIM, "{d}/s.yaml", "--out", "{d}/run", "--events", "{d}/run"],
        {"s.yaml": OK_SCENARIO},
        "--events {d}/run: is the --out folder",
    ),
    "events-overwrites-an-out-file": (
        [*SIM, "{d}/s.yaml", "--out", "{d}/run", "--events", "{d}/run/metrics.json"],
        {"s.yaml": OK_SCENARIO},
        "--out writes metrics.json there itself",
    ),
    "policy-arg-twice": (
        [
            *SIM,
            "{d}/s.yaml",
            "--policy",
            "tiresias",
            "--policy-arg",
            "num_queues=2",
            "--policy-arg",
            "num_queues=4",
        ],
        {"s.yaml": OK_SCENARIO},
        "parameter 'num_queues' is given twice",
    ),
    "param-bool-yes": (
        [*SIM, "{d}/s.yaml", "--policy", "tiresias", "--policy-arg", "preemption=yes"],
        {"s.yaml": OK_SCENARIO},
        "parameter 'preemption': Input should be a valid boolean: true or false (got 'yes')",
    ),
    "cassini-on-cassini": (
        [*SIM, "{d}/s.yaml", "--policy", "cassini", "--policy-arg", "base=cassini"],
        {"s.yaml": OK_SCENARIO},
        "policy 'cassini': base 'cassini' is itself a Cassini policy",
    ),
    "suite-duplicate-seed": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE.replace("[1]", "[1, 2, 1]"), "s.yaml": OK_SCENARIO},
        "seeds: seed 1 appears twice",
    ),
    "philly-time-zone": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": trace_scenario("philly"),
            "t.csv": "timestamp,duration,num_gpus,gpu_time,cluster\n"
            "2017-10-09 07:01:55,66,1,66,a\n2017-10-09 08:01:55+02:00,66,1,66,a\n",
        },
        "line 3, column 'timestamp': has a time zone",
    ),
    "itp-fractional-gpus": (
        [*SIM, "{d}/s.yaml"],
        {
            "s.yaml": trace_scenario("itp-raw"),
            "t.csv": "job_id,submission_time,duration,num_gpu\na,0,60,1.0000000000000001\n",
        },
        "line 2, column 'num_gpu': must be a positive integer",
    ),
    "csv-duplicated-header-column": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": "id,submit,gpus,runtime,gpus\na,0,1,60,2\n"},
        "column 'gpus' appears 2 times in the header (columns 3, 5)",
    ),
    "csv-header-repeated": (
        [*SIM, "{d}/s.yaml"],
        {"s.yaml": generic_trace(), "t.csv": CSV_HEAD + "a,0,1,60\n" + CSV_HEAD + "b,0,1,60\n"},
        "line 3 repeats the header row",
    ),
    # --- runaways: a wall-clock limit
    "time-limit-hanging-policy": (
        [*SIM, "{d}/s.yaml", "--policy", "pol_bad_inputs:Hangs", "--time-limit", "0.3"],
        {"s.yaml": OK_SCENARIO, "pol_bad_inputs.py": POLICIES},
        "policy 'pol_bad_inputs:Hangs' was still in schedule() at t=149.516s (trigger: arrival "
        "of job 0) when the run ran past its time limit of 0.3 s (wall clock)",
    ),
    "time-limit-sleeping-policy": (
        [*SIM, "{d}/s.yaml", "--policy", "pol_bad_inputs:Sleeps", "--time-limit", "0.3"],
        {"s.yaml": OK_SCENARIO, "pol_bad_inputs.py": POLICIES},
        "'pol_bad_inputs:Sleeps' was still in schedule()",
    ),
    "time-limit-swallowing-policy": (
        [*SIM, "{d}/s.yaml", "--policy", "pol_bad_inputs:Swallows", "--time-limit", "0.3"],
        {"s.yaml": OK_SCENARIO, "pol_bad_inputs.py": POLICIES},
        "'pol_bad_inputs:Swallows' was still in schedule()",
    ),
    "time-limit-zero": (
        [*SIM, "{d}/s.yaml", "--time-limit", "0"],
        {"s.yaml": OK_SCENARIO},
        "--time-limit 0: give a finite number of seconds > 0",
    ),
    "leaderboard-time-limit-nan": (
        ["leaderboard", "--suite", "{d}/suite.yaml", "--time-limit", "nan"],
        {"suite.yaml": SUITE, "s.yaml": OK_SCENARIO},
        "--time-limit nan: give a finite number of seconds > 0",
    ),
    "suite-time-limit-negative": (
        ["leaderboard", "--suite", "{d}/suite.yaml"],
        {"suite.yaml": SUITE + "time_limit_s: -5\n", "s.yaml": OK_SCENARIO},
        "time_limit_s: Input should be greater than 0 (got -5)",
    ),
}

NEEDS_AGENTS = {
    "train-timesteps-not-a-rollout": (
        ["train", "--agent", "placement", "--timesteps", "256", "--out", "{d}/run"],
        {},
        "--timesteps 256",
    ),
    "train-missing-config": (
        ["train", "--agent", "placement", "--config", "{d}/missing.yaml"],
        {},
        "missing.yaml",
    ),
    "checkpoint-model-corrupted": (
        [*SIM, "dally-batch-2rack", "--policy", "agent:{d}/a.zip"],
        {"a.zip": damaged_checkpoint(member="policy.pth", data=b"not a torch file")},
        "a.zip': its maskable_ppo model does not load (UnpicklingError",
    ),
    "checkpoint-model-member-missing": (
        [*SIM, "dally-batch-2rack", "--policy", "agent:{d}/a.zip"],
        {"a.zip": damaged_checkpoint(drop="policy.pth")},
        "a.zip': its maskable_ppo model does not load",
    ),
}
PARAMS = params(CASES) + params(
    NEEDS_AGENTS, [pytest.mark.skipif(not HAS_AGENTS, reason="needs the agents extra")]
)
FAMILIES = (
    "test_bad_inputs_scenarios",
    "test_bad_inputs_traces",
    "test_bad_inputs_cli",
    "test_bad_inputs_policies",
    "test_bad_inputs_leaderboards",
    "test_bad_inputs_agents",
)


def all_cases() -> dict[str, int]:
    """Cases per table: this file's and each family file's (``CASES`` and ``API_CASES``)."""
    import importlib

    counts = {"test_bad_inputs": len(CASES) + len(NEEDS_AGENTS)}
    for name in FAMILIES:
        mod = importlib.import_module(name)
        counts[name] = sum(len(getattr(mod, t, {})) for t in ("CASES", "NEEDS_AGENTS", "API_CASES"))
    return counts


def test_the_tables_are_big_enough():
    counts = all_cases()
    assert sum(counts.values()) >= 300, counts


@pytest.mark.parametrize(("args", "files", "culprit"), PARAMS)
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, files, culprit):
    check_case(tmp_path, monkeypatch, args, files, culprit)


def test_overwrite_replaces_an_earlier_run(tmp_path):
    """``--overwrite``: the earlier run's files (a report included) go, others stay."""
    (tmp_path / "s.yaml").write_text(OK_SCENARIO)
    out = tmp_path / "run"
    out.mkdir()
    for name in ("events.jsonl", "report.md", "notes.txt"):
        (out / name).write_text("old")
    args = [*SIM, str(tmp_path / "s.yaml"), "--out", str(out), "--overwrite"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    names = {p.name for p in out.iterdir()}
    assert {"results.json", "metrics.json", "notes.txt"} <= names
    assert not {"events.jsonl", "report.md"} & names


def test_failed_cells_are_listed_one_line_each(tmp_path, monkeypatch):
    """Cells that fail at run time: the run goes on, each failed cell is one ``error:`` line
    naming it, exit code 1, and the leaderboard renders even when no cell finished."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pol_bad_inputs.py").write_text(POLICIES)
    (tmp_path / "s.yaml").write_text(OK_SCENARIO)
    suite = SUITE.replace("[1]", "[1, 2]").replace("[fcfs]", "[pol_bad_inputs:Raises]")
    (tmp_path / "suite.yaml").write_text(suite.replace("{d}", str(tmp_path)) + (
        "reference: pol_bad_inputs:Raises\n"))  # fmt: skip
    r = CliRunner().invoke(
        main, ["leaderboard", "--suite", "suite.yaml", "--out", "lb", "--workers", "1", "--quiet"]
    )
    assert r.exit_code == 1, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in r.output, r.stderr
    for seed, line in zip((1, 2), lines, strict=True):
        assert line.startswith(
            f"error: s.pol_bad_inputs-Raises.s{seed}: PolicyError: policy "
            "'pol_bad_inputs:Raises' raised ZeroDivisionError: oops in schedule() at t="
        ), line
    assert "## Failed cells" in (tmp_path / "lb" / "leaderboard.md").read_text()


def test_a_cell_past_its_time_limit_fails_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pol_bad_inputs.py").write_text(POLICIES)
    (tmp_path / "s.yaml").write_text(OK_SCENARIO)
    suite = SUITE.replace("[fcfs]", "[fcfs, pol_bad_inputs:Hangs]") + "time_limit_s: 60\n"
    (tmp_path / "suite.yaml").write_text(suite.replace("{d}", str(tmp_path)))
    args = ["leaderboard", "--suite", "suite.yaml", "--out", "lb", "--workers", "1", "--quiet",
            "--time-limit", "0.5"]  # fmt: skip
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    assert r.stderr.splitlines() == [
        "error: s.pol_bad_inputs-Hangs.s1: TimeLimitError: policy 'pol_bad_inputs:Hangs' was "
        "still in schedule() at t=149.516s (trigger: arrival of job 0) when the cell ran past "
        "its time limit of 0.5 s (wall clock)"
    ]
    rows = {
        p.stem: json.loads(p.read_text())["status"] for p in (tmp_path / "lb/cells").glob("*.json")
    }
    assert rows == {"s.fcfs.s1": "ok", "s.pol_bad_inputs-Hangs.s1": "error"}


def test_api_time_limit_and_env_seed_are_typed_errors():
    import gymnasium as gym

    from dlcluster_gym.api import simulate
    from dlcluster_gym.config import safe_load
    from dlcluster_gym.errors import ConfigError, TimeLimitError

    class Hangs:
        def schedule(self, view):
            while True:
                pass

    with pytest.raises(TimeLimitError, match=r"was still in schedule\(\) at t=149\.516s"):
        simulate(safe_load(OK_SCENARIO), Hangs(), time_limit_s=0.2)
    # off the main thread (no SIGALRM there): the exception is raised in the running thread
    import threading

    caught: list[BaseException] = []

    def in_thread() -> None:
        try:
            simulate(safe_load(OK_SCENARIO), Hangs(), time_limit_s=0.2)
        except TimeLimitError as exc:
            caught.append(exc)

    worker = threading.Thread(target=in_thread, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and "ran past its time limit of 0.2 s" in str(caught[0])
    with pytest.raises(ConfigError, match="time_limit_s must be a finite number of seconds > 0"):
        simulate(safe_load(OK_SCENARIO), time_limit_s=-1)
    env = gym.make("DLCluster/Scheduler-v3", scenario=safe_load(OK_SCENARIO))
    for seed in (2**70, -1):
        with pytest.raises(ValueError, match=r"reset\(seed=.*\) is out of range; seed must be"):
            env.reset(seed=seed)
    with pytest.raises(ValueError, match=r"seed=\.\.\.\) must be an integer .* got 1\.5"):
        env.reset(seed=1.5)


SIMULATE_API: dict[str, tuple[dict, str]] = {
    "policy-params-text": (
        {"policy_params": "x"},
        "simulate: policy_params must be None or a dict of parameter names (str) to values, "
        "got 'x'",
    ),
    "policy-params-number-keys": ({"policy_params": {1: 2}}, "policy_params must be None or a"),
    "traces-dir-number": (
        {"traces_dir": 123},
        "simulate: traces_dir must be None or a folder path (str or Path), got 123",
    ),
    "seed-negative": (
        {"seed": -1},
        "simulate: seed must be None or an integer in [0, 2**63 - 1], got -1",
    ),
    "seed-too-big": ({"seed": 2**63}, "seed must be None or an integer in [0, 2**63 - 1]"),
    "seed-boolean": ({"seed": True}, "seed must be None or an integer in [0, 2**63 - 1], got True"),
    "seed-text": ({"seed": "3"}, "seed must be None or an integer in [0, 2**63 - 1], got '3'"),
}


@pytest.mark.parametrize(("kwargs", "text"), SIMULATE_API.values(), ids=SIMULATE_API)
def test_simulate_names_the_argument_it_refuses(kwargs, text):
    """A bad argument of ``simulate()`` is a ConfigError naming it, before the scenario
    loads: never an internal TypeError, nor the preset's YAML blamed for it."""
    from dlcluster_gym.api import simulate
    from dlcluster_gym.errors import ConfigError

    with pytest.raises(ConfigError) as ei:
        simulate("dally-poisson-2rack", "fcfs", **kwargs)
    assert text in str(ei.value) and ".yaml" not in str(ei.value)


def test_trace_with_bom_and_separate_units(tmp_path):
    """A UTF-8 byte-order mark is not part of the first column's name; arrivals in epoch
    seconds and durations in minutes are expressible (``arrival_unit_s``, ``duration_unit_s``)."""
    (tmp_path / "t.csv").write_text(
        "\ufeff" + CSV_HEAD + "a,1600000000,1,2\nb,1600000060,2,3\n", encoding="utf-8"
    )
    text = generic_trace(arrival_unit_s="1", duration_unit_s="60").replace("{d}", str(tmp_path))
    (tmp_path / "s.yaml").write_text(text)
    from dlcluster_gym.api import prepare

    _, _, jobs, _ = prepare(str(tmp_path / "s.yaml"))
    assert [j.arrival_s for j in jobs] == [0.0, 60.0]  # epoch seconds, rebased
    assert [j.num_gpus for j in jobs] == [1, 2]
    from dlcluster_gym.workload.traces import load_trace

    cols = {"arrival": "submit", "num_gpus": "gpus", "duration": "runtime", "job_id": "id"}
    tr = load_trace("generic", tmp_path / "t.csv", columns=cols, duration_unit_s=60)
    assert tr.job_ids == ("a", "b") and tr.duration_s.tolist() == [120.0, 180.0]
    assert tr.arrival_s.tolist() == [0.0, 60.0]


def test_env_rejects_a_text_action_and_human_rendering_without_pygame():
    import gymnasium as gym

    from dlcluster_gym.errors import ConfigError, InvalidActionError

    env = gym.make("DLCluster/Placement-v0")
    env.reset(seed=1)
    for bad in ("wait", None):
        with pytest.raises(InvalidActionError, match=r"not an integer in 0\.\.6 \(wait"):
            env.step(bad)
    if importlib.util.find_spec("pygame") is None:  # no human mode: an error when made
        from dlcluster_gym.envs.placement import PlacementEnv

        with pytest.raises(ConfigError, match="render_mode 'human' needs pygame"):
            PlacementEnv(render_mode="human")
        # through gym.make too: not accepted first and failing at the first render
        for env_id in ("DLCluster/Placement-v0", "DLCluster/Scheduler-v0"):
            with pytest.raises(ConfigError, match="render_mode 'human' needs pygame"):
                gym.make(env_id, render_mode="human")
