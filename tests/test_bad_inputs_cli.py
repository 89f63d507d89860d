"""Bad command lines: every subcommand's options given a wrong type, a value out of range, a
wrong kind of path, or a combination that makes no sense, each an exit-2, one-line error that
names the option and the value (``bad_inputs_harness.check_case``)."""

from __future__ import annotations

import pytest
from bad_inputs_harness import (
    ALIAS_BOMB,
    ALIAS_REFUSED,
    CHECKPOINTS,
    HAS_AGENTS,
    OK_SCENARIO,
    SIM,
    SUITE,
    TOO_BIG,
    TOO_BIG_REFUSED,
    Case,
    check_case,
    params,
)

S = [*SIM, "{d}/s.yaml"]
LB = ["leaderboard", "--suite", "{d}/suite.yaml"]
F = {"s.yaml": OK_SCENARIO, "suite.yaml": SUITE, "afile": "x"}
CK = str(CHECKPOINTS / "placement.zip")
EV = ["evaluate", "--agent", CK]
USAGE = "(see --help)"


def bad_values(prefix: list[str], table: dict[str, list[tuple[str, str]]]) -> dict[str, Case]:
    """``prefix --option value`` for each (value, expected text) of each option."""
    out: dict[str, Case] = {}
    for option, bad in table.items():
        for value, why in bad:
            name = f"{prefix[0] if prefix[0] != 'simulate' else 'sim'}{option}={value or 'empty'}"
            out[name] = ([*prefix, option, value], F, why)
    return out


SIMULATE = {
    "--seed": [
        ("-1", "Invalid value for '--seed': -1 is not in the range 0<=x<=9223372036854775807"),
        ("9223372036854775808", "9223372036854775808 is not in the range 0<=x<="),
        ("1.5", "Invalid value for '--seed': '1.5' is not a valid integer range"),
    ],
    "--format": [("", "Invalid value for '--format': '' is not one of 'table', 'json'")],
    "--events": [("{d}/", "Invalid value for '--events': File '{d}/' is a directory")],
    "--traces-dir": [
        ("{d}/afile", "Invalid value for '--traces-dir': Directory '{d}/afile' is a file")
    ],
    "--policy": [
        ("", "unknown policy ''; valid policies: cassini"),
        (":", "policy import path ':' must look like 'package.module:Name'"),
        ("os:", "policy import path 'os:' must look like 'package.module:Name'"),
        ("os:sep", "policy 'os:sep' (os:sep) is a str, not a policy class or factory"),
        ("agent:", "policy 'agent:': the checkpoint path after 'agent:' is empty"),
    ],
    "--policy-arg": [("=3", "--policy-arg '=3': expected key=value")],
    "--time-limit": [
        ("soon", "Invalid value for '--time-limit': 'soon' is not a valid float"),
        ("-3", "--time-limit -3: give a finite number of seconds > 0"),
        ("inf", "--time-limit inf: give a finite number of seconds > 0"),
    ],
}

LEADERBOARD = {
    "--workers": [
        ("two", "Invalid value for '--workers': 'two' is not a valid integer range"),
        ("-1", "Invalid value for '--workers': -1 is not in the range x>=1"),
    ],
    "--out": [
        ("{d}/afile", "Invalid value for '--out': Directory '{d}/afile' is a file"),
        ("{d}", "--out {d}: not empty and not a leaderboard run (holds afile)"),
        ("{d}/afile/lb", "--out {d}/afile/lb: {d}/afile is not a directory"),
    ],
    "--traces-dir": [
        ("{d}/afile", "Invalid value for '--traces-dir': Directory '{d}/afile' is a file")
    ],
    "--time-limit": [
        ("x", "Invalid value for '--time-limit': 'x' is not a valid float"),
        ("-2", "--time-limit -2: give a finite number"),
    ],
    "--ray-timeout": [
        ("0", "--ray-timeout 0: give a finite number of seconds > 0"),
        ("inf", "--ray-timeout inf: give"),
    ],
    "--row": [("x", "--row x: replays one row of a run; it needs --verify RESULTS_DIR")],
    "--verify": [
        (
            "{d}",
            "give --suite {d}/suite.yaml (run a suite) or --verify {d} (replay a run), not both",
        )
    ],
}

CASES: dict[str, Case] = {
    **bad_values(S, SIMULATE),
    **bad_values(LB, LEADERBOARD),
    # --- simulate: arguments and flags
    "sim-out-is-a-file-overwrite": (
        [*S, "--out", "{d}/afile", "--overwrite"],
        F,
        "Invalid value for '--out': Directory '{d}/afile' is a file",
    ),
    "sim-flag-with-a-value": ([*S, "--quiet=yes"], F, "Option '--quiet' does not take a value"),
    "sim-extra-argument": (
        [*S, "extra"],
        F,
        "main simulate: Got unexpected extra argument (extra)",
    ),
    "sim-option-without-value": ([*S, "--seed"], F, "Option '--seed' requires an argument"),
    "sim-events-under-out-file": (
        [*S, "--out", "{d}/run", "--events", "{d}/run/results.json"],
        F,
        "--out writes results.json there itself",
    ),
    "sim-out-is-cwd": ([*S, "--out", "."], F, "--out .: not empty"),
    # --- list (alone it prints its help: tests/test_cli_list.py), models, compat
    "list-two-things": (
        ["list", "policies", "models"],
        {},
        "Got unexpected extra argument (models)",
    ),
    "list-singular": (
        ["list", "policy"],
        {},
        "Invalid value for '{policies|scenarios|models|clusters|suites|splits}': 'policy' is not "
        "one of",
    ),
    "models-format": (
        ["models", "--format", "xml"],
        {},
        "Invalid value for '--format': 'xml' is not one of 'table', 'json'",
    ),
    "models-profile": (
        ["models", "--profile", "nosuch"],
        {},
        "Invalid value for '--profile': 'nosuch' is not one of 'cassini-testbed'",
    ),
    "compat-no-jobs": (
        ["compat", "--jobs", ""],
        {},
        "no jobs given; expected MODEL:BATCH[,MODEL:BATCH...]",
    ),
    "compat-empty-job": (["compat", "--jobs", ","], {}, "malformed job spec ''"),
    "compat-batch-0": (
        ["compat", "--jobs", "vgg16:0"],
        {},
        "batch size per GPU 0 of vgg16 is outside its documented range 512-1800",
    ),
    "compat-batch-negative": (
        ["compat", "--jobs", "vgg16:-4"],
        {},
        "malformed job spec 'vgg16:-4': batch '-4' is not a positive integer",
    ),
    "compat-batch-fraction": (
        ["compat", "--jobs", "vgg16:1.5"],
        {},
        "batch '1.5' is not a positive integer",
    ),
    "compat-two-colons": (["compat", "--jobs", "vgg16:1:2"], {}, "malformed job spec 'vgg16:1:2'"),
    "compat-batch-huge": (
        ["compat", "--jobs", "vgg16:99999999999"],
        {},
        "batch size per GPU 99999999999 of vgg16 is outside",
    ),
    "compat-link-0": (
        ["compat", "--jobs", "vgg16", "--link-gbps", "0"],
        {},
        "link speed must be a finite number of Gb/s > 0, got 0.0",
    ),
    "compat-link-nan": (
        ["compat", "--jobs", "vgg16", "--link-gbps", "nan"],
        {},
        "link speed must be a finite number of Gb/s > 0, got nan",
    ),
    "compat-link-inf": (["compat", "--jobs", "vgg16", "--link-gbps", "inf"], {}, "got inf"),
    "compat-link-text": (
        ["compat", "--jobs", "vgg16", "--link-gbps", "fast"],
        {},
        "Invalid value for '--link-gbps': 'fast' is not a valid float",
    ),
    "compat-no-jobs-option": (["compat"], {}, "main compat: Missing option '--jobs'"),
    "compat-format": (
        ["compat", "--jobs", "vgg16", "--format", "csv"],
        {},
        "Invalid value for '--format': 'csv'",
    ),
    # --- leaderboard: the Ray backend and --verify
    "ray-address-without-port": (
        [*LB, "--backend", "ray", "--ray-address", "nohostport"],
        F,
        "Ray address 'nohostport': expected HOST:PORT or ray://HOST:PORT",
    ),
    "ray-address-port-text": (
        [*LB, "--backend", "ray", "--ray-address", "host:abc"],
        F,
        "Ray address 'host:abc': expected HOST:PORT",
    ),
    "ray-address-unreachable": (
        [*LB, "--backend", "ray", "--ray-address", "127.0.0.1:1", "--ray-timeout", "1"],
        F,
        "Ray address '127.0.0.1:1' is unreachable",
    ),
    "verify-missing-folder": (
        ["leaderboard", "--verify", "{d}/nowhere"],
        F,
        "{d}/nowhere: no leaderboard rows found (expected {d}/nowhere/cells/*.json)",
    ),
    "verify-a-file": (
        ["leaderboard", "--verify", "{d}/afile"],
        F,
        "Invalid value for '--verify': Directory '{d}/afile' is a file",
    ),
    "leaderboard-resume-takes-no-value": (
        [*LB, "--resume", "x"],
        F,
        "Got unexpected extra argument (x)",
    ),
    # --- report
    "report-missing-folder": (
        ["report", "{d}/nowhere"],
        F,
        "{d}/nowhere: no results.json; pass a directory written by `dlcluster simulate --out`",
    ),
    "report-a-file": (
        ["report", "{d}/afile"],
        F,
        "Invalid value for 'RUN_DIR': Directory '{d}/afile' is a file",
    ),
    "report-out-a-file": (
        ["report", "{d}", "--out", "{d}/afile"],
        F,
        "Invalid value for '--out': Directory '{d}/afile' is a file",
    ),
    "report-nothing": (["report"], F, "main report: Missing argument 'RUN_DIR'"),
    # --- evaluate (no simulation runs: the options are checked first)
    "evaluate-no-agent": (["evaluate"], {}, "main evaluate: Missing option '--agent'"),
    "evaluate-seeds-empty": ([*EV, "--seeds", ""], {}, "--seeds '': give at least one seed"),
    "evaluate-seeds-negative": (
        [*EV, "--seeds", "-3"],
        {},
        "--seeds '-3': seeds must be >= 0, got -3",
    ),
    "evaluate-seeds-backwards": (
        [*EV, "--seeds", "5-1"],
        {},
        "--seeds '5-1': range '5-1' runs backwards; write 1-5",
    ),
    "evaluate-seeds-text": (
        [*EV, "--seeds", "a"],
        {},
        "--seeds 'a': expected comma-separated integers >= 0 or ranges lo-hi",
    ),
    "evaluate-seed-too-big": (
        [*EV, "--seeds", "9223372036854775808"],
        {},
        "seeds must be <= 9223372036854775807 (2**63 - 1)",
    ),
    "evaluate-seed-range-huge": (
        [*EV, "--seeds", "0-99999999999"],
        {},
        "--seeds '0-99999999999': 100,000,000,000 seeds in '0-99999999999'; at most 100,000",
    ),
    "evaluate-unknown-baseline": (
        [*EV, "--baselines", "nosuch"],
        {},
        "--baselines 'nosuch': unknown policy 'nosuch'",
    ),
    "evaluate-unknown-reference": (
        [*EV, "--baselines", "fcfs", "--reference", "nosuch"],
        {},
        "--reference 'nosuch': not among the evaluated policies (placement-agent, fcfs)",
    ),
    "evaluate-tie-rtol-negative": (
        [*EV, "--tie-rtol", "-1"],
        {},
        "Invalid value for '--tie-rtol': -1.0 is not in the range x>=0.0",
    ),
    "evaluate-tie-rtol-nan": (
        [*EV, "--tie-rtol", "nan"],
        {},
        "--tie-rtol nan: give a finite relative tolerance >= 0",
    ),
    "evaluate-unknown-scenario": (
        [*EV, "--scenario", "nosuch"],
        {},
        "--scenario 'nosuch': unknown scenario 'nosuch'",
    ),
    "evaluate-out-a-file": (
        [*EV, "--scenario", "{d}/s.yaml", "--baselines", "", "--seeds", "1", "--out", "{d}/afile"],
        F,
        "--out {d}/afile: exists and is not a directory",
    ),
    "evaluate-label-twice": (
        ["evaluate", "--agent", f"a={CK}", "--agent", f"a={CK}"],
        {},
        "label 'a' is taken by another agent",
    ),
    "evaluate-label-is-a-baseline": (
        ["evaluate", "--agent", f"fcfs={CK}", "--baselines", "fcfs"],
        {},
        "--baselines 'fcfs': that is an agent's label",
    ),
    "evaluate-agent-not-a-zip": (
        ["evaluate", "--agent", "{d}/afile"],
        F,
        "--agent {d}/afile: agent checkpoint '{d}/afile' is not a readable zip file",
    ),
    "evaluate-format": (
        [*EV, "--format", "xml"],
        {},
        "Invalid value for '--format': 'xml' is not one of 'table', 'json'",
    ),
    # --- train: options checked before anything trains
    "train-unknown-agent": (
        ["train", "--agent", "nosuch"],
        {},
        "Invalid value for '--agent': 'nosuch' is not one of 'placement', 'delay-timer', "
        "'scheduler'",
    ),
    "train-timesteps-0": (
        ["train", "--agent", "placement", "--timesteps", "0"],
        {},
        "Invalid value for '--timesteps': 0 is not in the range x>=1",
    ),
    "train-n-envs-0": (
        ["train", "--agent", "placement", "--n-envs", "0"],
        {},
        "Invalid value for '--n-envs': 0 is not in the range x>=1",
    ),
    "train-seed-negative": (
        ["train", "--agent", "placement", "--seed", "-1"],
        {},
        "Invalid value for '--seed': -1 is not in the range 0<=x<=4294967295",
    ),
    "train-seed-too-big": (
        ["train", "--agent", "placement", "--seed", "4294967296"],
        {},
        "4294967296 is not in the range 0<=x<=4294967295",
    ),
    "train-out-a-file": (
        ["train", "--agent", "placement", "--out", "{d}/afile"],
        F,
        "Invalid value for '--out': Directory '{d}/afile' is a file",
    ),
    "train-resume-a-folder": (
        ["train", "--agent", "placement", "--resume", "{d}"],
        F,
        "Invalid value for '--resume': File '{d}' is a directory",
    ),
}

NEEDS_AGENTS: dict[str, Case] = {
    "train-config-for-another-agent": (
        ["train", "--agent", "placement", "--config", "scheduler"],
        {},
        "config scheduler is for the scheduler agent, not placement",
    ),
    "train-config-malformed": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "a: [\n"},
        "c.yaml: malformed YAML: line 2, column 1",
    ),
    "train-config-latin1": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "# \xe9\n".encode("latin-1")},
        "c.yaml: not UTF-8 text (line 1: byte 0xe9)",
    ),
    "train-config-alias-bomb": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": ALIAS_BOMB + "agent: placement\n"},
        f"c.yaml: {ALIAS_REFUSED}",
    ),
    "train-config-too-big": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "agent: placement\n" + TOO_BIG},
        f"c.yaml: {TOO_BIG_REFUSED}",
    ),
    "train-config-too-many-envs": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "agent: placement\ntrain: {n_envs: 100000}\n"},
        "train.n_envs: Input should be less than or equal to 256 (got 100000)",
    ),
    "train-config-timesteps-decimal": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "agent: placement\ntrain: {timesteps: 1.0e+6}\n"},
        "train.timesteps: expected an integer, not the decimal number 1000000.0",
    ),
    "train-config-boolean-text": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "agent: placement\nnormalize_reward: 'yes'\n"},
        "normalize_reward: Input should be a valid boolean (got 'yes')",
    ),
    "train-config-not-a-mapping": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "- 1\n"},
        "c.yaml: expected a mapping at the top level",
    ),
    "train-config-missing-fields": (
        ["train", "--agent", "placement", "--config", "{d}/c.yaml"],
        {"c.yaml": "agent: placement\n"},
        "c.yaml: invalid agent config: algorithm: Field required",
    ),
    "train-config-unknown-name": (
        ["train", "--agent", "placement", "--config", "nosuch"],
        {},
        "agent config 'nosuch' not found (built-in: delay_timer, delay_timer_manual_warm, "
        "placement",
    ),
    "train-resume-missing": (
        ["train", "--agent", "placement", "--resume", "{d}/nope.zip", "--timesteps", "2048"],
        {},
        "agent checkpoint '{d}/nope.zip' not found",
    ),
    "train-resume-not-a-zip": (
        ["train", "--agent", "placement", "--resume", "{d}/afile", "--timesteps", "2048"],
        F,
        "agent checkpoint '{d}/afile' is not a readable zip file",
    ),
    "train-resume-other-agent": (
        [
            "train",
            "--agent",
            "placement",
            "--resume",
            str(CHECKPOINTS / "scheduler.zip"),
            "--timesteps",
            "2048",
        ],
        {},
        "cannot resume placement (maskable_ppo) training from",
    ),
}


def test_the_table_has_distinct_cases():
    assert len(CASES) + len(NEEDS_AGENTS) >= 90
    assert len({(tuple(a), c) for a, _, c in CASES.values()}) == len(CASES)


@pytest.mark.parametrize(
    ("args", "files", "culprit"),
    params(CASES) + params(NEEDS_AGENTS, [pytest.mark.skipif(not HAS_AGENTS, reason="agents")]),
)
def test_bad_command_line_is_one_line_and_exit_2(tmp_path, monkeypatch, args, files, culprit):
    check_case(tmp_path, monkeypatch, args, files, culprit)


def test_an_unused_traces_dir_is_noted(tmp_path, monkeypatch):
    """``--traces-dir`` on a scenario that reads no trace runs, with a note on stderr saying
    the option is not used (and, when so, that the folder does not exist)."""
    from bad_inputs_harness import write_files
    from click.testing import CliRunner

    from dlcluster_gym.cli import main

    write_files(tmp_path, F)
    for where, extra in ((tmp_path / "nowhere", "; {d}/nowhere does not exist either"),
                         (tmp_path, "")):  # fmt: skip
        r = CliRunner().invoke(main, [*SIM, f"{tmp_path}/s.yaml", "--traces-dir", str(where)])
        assert r.exit_code == 0, r.output
        assert r.stderr == (
            f"note: --traces-dir {where} is not used: scenario '{tmp_path}/s.yaml' reads no "
            f"trace file{extra.replace('{d}', str(tmp_path))}\n"
        )


def test_workers_beyond_the_cores_are_capped_with_a_warning(tmp_path, monkeypatch):
    import os

    from bad_inputs_harness import write_files
    from click.testing import CliRunner

    from dlcluster_gym.cli import main

    write_files(tmp_path, F)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    r = CliRunner().invoke(
        main,
        ["leaderboard", "--suite", f"{tmp_path}/suite.yaml", "--out", f"{tmp_path}/lb",
         "--workers", "100000", "--quiet"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert r.stderr == (
        "warning: workers 100,000 is more than the 1 core(s) of this machine; running 1 worker "
        "process(es)\n"
    )
