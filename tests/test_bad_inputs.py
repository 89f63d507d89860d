"""The bad-input guarantee: every input mistake a user can make on the command line gives exit
code 2 and exactly one line on stderr that names the culprit, never a Python traceback.

Each case is (command line, files to create, text the error line must contain). ``{d}`` in an
argument or a file is the test's temporary folder. The files are small on purpose: every error
here is found before a simulation runs, or at the policy's first decision.
"""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from dlcluster_gym.cli import main

CLUSTER = "cluster: {racks: 1, machines_per_rack: 2, gpus_per_machine: 4}\n"
SYNTH = "workload: {kind: synthetic, num_jobs: 4}\n"
OK_SCENARIO = CLUSTER + SYNTH


def scenario(**over: str) -> str:
    """A small valid scenario YAML with some top-level entries replaced."""
    parts = {"cluster": CLUSTER, "workload": SYNTH}
    parts.update({k: f"{k}: {v}\n" for k, v in over.items()})
    return "".join(parts.values())


def generic_trace(csv_name: str = "t.csv", **extra: str) -> str:
    """A scenario over a generic CSV trace ``{d}/csv_name``."""
    opts = "".join(f", {k}: {v}" for k, v in extra.items())
    cols = "{arrival: submit, num_gpus: gpus, duration: runtime, job_id: id}"
    return CLUSTER + (
        f"workload: {{kind: trace, format: generic, path: '{{d}}/{csv_name}', columns: {cols}"
        f"{opts}}}\n"
    )


CSV_HEAD = "id,submit,gpus,runtime\n"
SIM = ["simulate", "--quiet", "--scenario"]
POLICIES = "from dlcluster_gym import BaseScheduler\n" + "".join(
    f"class {name}(BaseScheduler):\n    def schedule(self, view):\n        {body}\n"
    for name, body in (
        ("ReturnsNone", "return None"),
        ("Raises", "raise ZeroDivisionError('oops')"),
        ("ReturnsInt", "return 3"),
    )
)
SUITE = "seeds: [1]\nentrants: [fcfs]\nscenarios: ['{d}/s.yaml']\n"

# id: (arguments, files, culprit)
CASES: dict[str, tuple[list[str], dict[str, str], str]] = {
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
        [*SIM, "dally-batch-2rack", "--policy", "gavel", "--policy-arg", "round_s=60"],
        {},
        "policy 'gavel' has no parameter 'round_s'",
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
            "suite.yaml": SUITE.replace("[fcfs]", "[fcfs, {policy: gavel, params: {round_s: 60}}]"),
            "s.yaml": OK_SCENARIO,
        },
        "policy 'gavel' has no parameter 'round_s'",
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
}
HAS_AGENTS = all(importlib.util.find_spec(m) for m in ("torch", "stable_baselines3"))
PARAMS = [pytest.param(*case, id=name) for name, case in CASES.items()] + [
    pytest.param(
        *case,
        id=name,
        marks=pytest.mark.skipif(not HAS_AGENTS, reason="needs the agents extra (torch, sb3)"),
    )
    for name, case in NEEDS_AGENTS.items()
]


def test_the_table_is_big_enough():
    assert len(CASES) >= 60


@pytest.mark.parametrize(("args", "files", "culprit"), PARAMS)
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, files, culprit):
    d = str(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text.replace("{d}", d))
    monkeypatch.chdir(tmp_path)  # user policies are imported from the current directory
    result = CliRunner().invoke(main, [a.replace("{d}", d) for a in args])
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    assert "Traceback" not in result.output + result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert culprit.replace("{d}", d) in lines[0], lines[0]


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
