"""Bad suites and damaged run folders: one mistake at a time in a suite file (seeds,
entrants, scenarios, metrics, limits), and a leaderboard run or a ``simulate --out`` run whose
files were edited or damaged, read by ``report``, ``leaderboard --verify`` and ``--resume``.
Each is an exit-2, one-line error naming the file and the field
(``bad_inputs_harness.check_case``)."""

from __future__ import annotations

import json

import pytest
from bad_inputs_harness import (
    ALIAS_BOMB,
    ALIAS_REFUSED,
    LB_CELL,
    OK_SCENARIO,
    SUITE,
    TOO_BIG,
    TOO_BIG_REFUSED,
    Case,
    check_case,
    edited_json,
    leaderboard_dir_files,
    params,
    run_dir_files,
)

LB = ["leaderboard", "--suite", "{d}/suite.yaml", "--out", "{d}/lb", "--quiet", "--workers", "1"]
INVALID = "suite.yaml: invalid suite: "


def suite(text: str, **extra: str) -> dict[str, str | bytes]:
    return {"suite.yaml": text, "s.yaml": OK_SCENARIO, **extra}


def entrants(value: str) -> dict[str, str | bytes]:
    return suite(SUITE.replace("[fcfs]", value))


def scenarios(value: str, **extra: str) -> dict[str, str | bytes]:
    return suite(SUITE.replace("['{d}/s.yaml']", value), **extra)


SUITE_CASES: dict[str, Case] = {
    "alias-bomb": (LB, suite(ALIAS_BOMB + SUITE), f"suite.yaml: {ALIAS_REFUSED}"),
    "too-big": (LB, suite(SUITE + TOO_BIG), f"suite.yaml: {TOO_BIG_REFUSED}"),
    "optional-text": (
        LB,
        entrants("[fcfs, {policy: nosuch, optional: 'yes'}]"),
        f"{INVALID}entrants.1.optional: Input should be a valid boolean (got 'yes')",
    ),
    "seed-decimal": (
        LB,
        suite(SUITE.replace("[1]", "[2.0]")),
        f"{INVALID}seeds.0: expected an integer, not the decimal number 2.0",
    ),
    "name-a-list": (
        LB,
        suite(SUITE + "name: [1]\n"),
        f"{INVALID}name: Input should be a valid string (got [1])",
    ),
    "description-a-mapping": (
        LB,
        suite(SUITE + "description: {a: 1}\n"),
        f"{INVALID}description: Input should be a valid string",
    ),
    "seeds-text": (
        LB,
        suite(SUITE.replace("[1]", "abc")),
        f"{INVALID}seeds: Input should be a valid tuple (got 'abc')",
    ),
    "seeds-fraction": (
        LB,
        suite(SUITE.replace("[1]", "[1.5]")),
        f"{INVALID}seeds.0: Input should be a valid integer, got a number with a fractional part",
    ),
    "seeds-boolean": (
        LB,
        suite(SUITE.replace("[1]", "[true]")),
        f"{INVALID}seeds.0: expected an integer, not a boolean",
    ),
    "seeds-a-number": (
        LB,
        suite(SUITE.replace("[1]", "1")),
        f"{INVALID}seeds: Input should be a valid tuple (got 1)",
    ),
    "seed-too-big": (
        LB,
        suite(SUITE.replace("[1]", "[9223372036854775808]")),
        f"{INVALID}seeds.0: Input should be less than or equal to 9223372036854775807",
    ),
    "entrants-empty": (
        LB,
        entrants("[]"),
        f"{INVALID}entrants: Tuple should have at least 1 item after validation, not 0",
    ),
    "entrants-a-name": (
        LB,
        entrants("fcfs"),
        f"{INVALID}entrants: Input should be a valid tuple (got 'fcfs')",
    ),
    "entrant-without-policy": (
        LB,
        entrants("[{label: x}]"),
        f"{INVALID}entrants.0.policy: Field required",
    ),
    "entrant-unknown-key": (
        LB,
        entrants("[{policy: fcfs, color: red}]"),
        f"{INVALID}entrants.0.color: Extra inputs are not permitted (got 'red')",
    ),
    "entrant-params-a-list": (
        LB,
        entrants("[{policy: themis, params: [1]}]"),
        f"{INVALID}entrants.0.params: Input should be a valid dictionary (got [1])",
    ),
    "entrant-param-out-of-range": (
        LB,
        entrants("[fcfs, {policy: themis, params: {lease_s: -1}}]"),
        "suite.yaml: entrants: policy 'themis': lease_s must be a finite number of seconds > 0, "
        "got -1.0",
    ),
    "entrant-param-yes": (
        LB,
        entrants("[fcfs, {policy: tiresias, params: {preemption: yes}}]"),
        "suite.yaml: entrants: policy 'tiresias': parameter 'preemption': Input should be a valid "
        "boolean: true or false (got 'yes')",
    ),
    "entrant-optional-maybe": (
        LB,
        entrants("[{policy: fcfs, optional: maybe}]"),
        f"{INVALID}entrants.0.optional: Input should be a valid boolean",
    ),
    "entrant-label-twice": (
        LB,
        entrants("[fcfs, {policy: fcfs-consolidated, label: fcfs}]"),
        "suite.yaml: entrants: label 'fcfs' appears twice; give each a distinct label",
    ),
    "entrant-labels-one-file-name": (
        LB,
        entrants("[fcfs, {policy: fcfs, label: 'a b'}, {policy: fcfs-consolidated, label: 'a-b'}]"),
        "suite.yaml: entrant labels 'a b' and 'a-b' give the same file name (s.a-b)",
    ),
    "entrant-agent-missing": (
        LB,
        entrants("[fcfs, 'agent:{d}/none.zip']"),
        "suite.yaml: entrants: entrant 'agent:{d}/none.zip': agent checkpoint {d}/none.zip not "
        "found",
    ),
    "entrant-agent-not-a-checkpoint": (
        LB,
        entrants("[fcfs, 'agent:{d}/s.yaml']"),
        "suite.yaml: entrants: entrant 'agent:{d}/s.yaml': agent checkpoint '{d}/s.yaml' is not a "
        "readable zip file",
    ),
    "entrant-module-missing": (
        LB,
        entrants("[fcfs, nosuchmod:X]"),
        "suite.yaml: entrants: policy 'nosuchmod:X': cannot import module 'nosuchmod'",
    ),
    "entrant-cassini-on-cassini": (
        LB,
        entrants("[fcfs, {policy: cassini, params: {base: cassini}}]"),
        "suite.yaml: entrants: policy 'cassini': base 'cassini' is itself a Cassini policy",
    ),
    "scenarios-empty": (
        LB,
        scenarios("[]"),
        f"{INVALID}scenarios: Tuple should have at least 1 item after validation, not 0",
    ),
    "scenarios-unknown-preset": (
        LB,
        scenarios("[nosuch]"),
        "suite.yaml: scenarios: unknown scenario 'nosuch'; valid scenarios:",
    ),
    "scenarios-twice": (
        LB,
        scenarios("['{d}/s.yaml', '{d}/s.yaml']"),
        "suite.yaml: scenarios: a scenario is listed twice",
    ),
    "scenarios-one-file-name": (
        LB,
        scenarios("['{d}/s.yaml', '{d}/sub/s.yaml']", **{"sub/s.yaml": OK_SCENARIO}),
        "suite.yaml: scenarios '{d}/s.yaml' and '{d}/sub/s.yaml' have the same file name (s.fcfs)",
    ),
    "scenario-file-missing": (
        LB,
        scenarios("['{d}/none.yaml']"),
        "suite.yaml: scenarios: unknown scenario '{d}/none.yaml'",
    ),
    "scenario-optional-but-broken": (
        LB,
        scenarios(
            "['{d}/s.yaml', {name: '{d}/bad.yaml', optional: true}]", **{"bad.yaml": "cluster: 5\n"}
        ),
        "suite.yaml: scenarios: {d}/bad.yaml: invalid config: cluster: Input should be a valid "
        "dictionary",
    ),
    "scenario-unknown-key": (
        LB,
        scenarios("[{name: '{d}/s.yaml', weight: 2}]"),
        f"{INVALID}scenarios.0.weight: Extra inputs are not permitted (got 2)",
    ),
    "scenarios-all-optional-and-absent": (
        LB,
        scenarios("[{name: nosuch, optional: true}]"),
        "suite.yaml: no scenario of the suite exists",
    ),
    "reference-not-an-entrant": (
        LB,
        suite(SUITE + "reference: themis\n"),
        "suite.yaml: reference 'themis' must be one of the entrants: fcfs",
    ),
    "metrics-empty": (
        LB,
        suite(SUITE + "metrics: []\n"),
        f"{INVALID}metrics: Tuple should have at least 1 item after validation, not 0",
    ),
    "metrics-a-name": (
        LB,
        suite(SUITE + "metrics: avg_jct_s\n"),
        f"{INVALID}metrics: Input should be a valid tuple (got 'avg_jct_s')",
    ),
    "metric-wall-clock": (
        LB,
        suite(SUITE + "metrics: [wall_s]\n"),
        "suite.yaml: metrics: unknown metric 'wall_s'; valid: makespan_s",
    ),
    "time-limit-text": (
        LB,
        suite(SUITE + "time_limit_s: soon\n"),
        f"{INVALID}time_limit_s: Input should be a valid number",
    ),
    "time-limit-zero": (
        LB,
        suite(SUITE + "time_limit_s: 0\n"),
        f"{INVALID}time_limit_s: Input should be greater than 0 (got 0)",
    ),
    "time-limit-infinite": (
        LB,
        suite(SUITE + "time_limit_s: .inf\n"),
        f"{INVALID}time_limit_s: Input should be a finite number (got inf)",
    ),
    "unknown-key": (
        LB,
        suite(SUITE + "workers: 4\n"),
        f"{INVALID}workers: Extra inputs are not permitted (got 4)",
    ),
    "latin1": (
        LB,
        suite(("# \xe9\n" + SUITE).encode("latin-1")),
        "suite.yaml: not UTF-8 text (line 1: byte 0xe9)",
    ),
    "a-list": (LB, suite("- 1\n"), "suite.yaml: expected a mapping at the top level, got list"),
    "empty": (LB, suite(""), "suite.yaml: expected a mapping at the top level, got NoneType"),
    "out-of-another-suite": (
        [*LB[:4], "{d}/other", "--resume"],
        lambda: {
            **suite(SUITE),
            **{k.replace("lb/", "other/"): v for k, v in leaderboard_dir_files().items()},
        },
        "{d}/other holds a run of suite 'bad', not 'suite'",
    ),
    "out-holds-cells-without-resume": (
        LB,
        lambda: {**suite(SUITE.replace("{d}", "{d}") + "name: bad\n"), **leaderboard_dir_files()},
        "{d}/lb already holds 1 finished cell(s); pass --resume to continue that run",
    ),
}


def _damaged(target: str, name: str, edit: object) -> object:
    """The one-cell leaderboard run (``target`` "lb") or simulate run ("run") with file
    ``name`` replaced: by bytes, or by the JSON that ``edit`` makes of the parsed file."""

    def files() -> dict:
        base = leaderboard_dir_files() if target == "lb" else run_dir_files()
        key = f"{target}/{name}"
        if isinstance(edit, bytes):
            return {**base, key: edit}
        return edited_json(base, key, edit)

    return files


def _pop(key: str):
    return lambda data: data.pop(key)


def _set(key: str, value: object):
    return lambda data: data.__setitem__(key, value)


def _npz(**arrays: object) -> bytes:
    """The bytes of an .npz archive of ``arrays`` (object arrays pickled)."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def _npy() -> bytes:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.arange(3.0))
    return buf.getvalue()


REPORT = ["report", "{d}/lb"]
VERIFY = ["leaderboard", "--verify", "{d}/lb"]
SUITE_FIX = "(a damaged run directory: rerun the suite with --resume to rewrite it)"
CELL_FIX = "(a damaged run directory: delete the file and rerun with --resume)"
CELL = "lb/" + LB_CELL
LB_ARRAYS = LB_CELL.replace(".json", ".npz")  # the cell's per-job data
ARRAYS = "lb/" + LB_ARRAYS
ARRAYS_FIX = SUITE_FIX

RUN_DIR_CASES: dict[str, Case] = {
    # --- a leaderboard run's suite.json
    "suite-json-truncated": (
        REPORT,
        _damaged("lb", "suite.json", b'{"name": "bad", '),
        "lb/suite.json: not valid JSON (Expecting property name",
    ),
    "suite-json-a-list": (
        REPORT,
        _damaged("lb", "suite.json", b"[]"),
        f"lb/suite.json: holds a JSON list, not the resolved suite of a leaderboard run (a JSON "
        f"object) {SUITE_FIX}",
    ),
    "suite-json-no-cells": (
        REPORT,
        _damaged("lb", "suite.json", _pop("cells")),
        f"lb/suite.json: cells must be a list of cell ids, got None {SUITE_FIX}",
    ),
    "suite-json-seeds-text": (
        VERIFY,
        _damaged("lb", "suite.json", _set("seeds", "1")),
        "lb/suite.json: seeds must be a list of integers, got '1'",
    ),
    "suite-json-entrant-a-name": (
        REPORT,
        _damaged("lb", "suite.json", _set("entrants", ["fcfs"])),
        "lb/suite.json: entrants must be a list of entrant objects, got ['fcfs']",
    ),
    "suite-json-entrant-bad": (
        REPORT,
        _damaged("lb", "suite.json", _set("entrants", [{"policy": 5}])),
        "lb/suite.json: entrants: 1 validation error for EntrantSpec policy Input should be a "
        "valid string",
    ),
    "suite-json-binary": (
        VERIFY,
        _damaged("lb", "suite.json", b"\xff\xfe\x00"),
        "lb/suite.json: not UTF-8 text; expected the resolved suite of a leaderboard run",
    ),
    # --- a leaderboard run's cells
    "cell-truncated": (REPORT, _damaged("lb", LB_CELL, b'{"id": '), f"{CELL}: not valid JSON"),
    "cell-a-list": (
        VERIFY,
        _damaged("lb", LB_CELL, b"[1]"),
        f"{CELL}: holds a JSON list, not a leaderboard cell row (a JSON object) {CELL_FIX}",
    ),
    "cell-without-status": (
        REPORT,
        _damaged("lb", LB_CELL, _pop("status")),
        f"{CELL}: status must be a str, got None {CELL_FIX}",
    ),
    "cell-unknown-status": (
        REPORT,
        _damaged("lb", LB_CELL, _set("status", "done")),
        f"{CELL}: status 'done' is not one of ok, n/a, error",
    ),
    "cell-seed-text": (
        VERIFY,
        _damaged("lb", LB_CELL, _set("seed", "1")),
        f"{CELL}: seed must be a int, got '1'",
    ),
    "cell-id-other-file": (
        REPORT,
        _damaged("lb", LB_CELL, _set("id", "x.fcfs.s1")),
        f"{CELL}: id 'x.fcfs.s1' does not match the file name",
    ),
    "cell-metric-text": (
        REPORT,
        _damaged("lb", LB_CELL, _set("avg_jct_s", "fast")),
        f"{CELL}: avg_jct_s must be a number, got 'fast'",
    ),
    "cell-params-not-json": (
        VERIFY,
        _damaged("lb", LB_CELL, _set("params", "{bad")),
        f"{CELL}: params must be a JSON object, got '{{bad'",
    ),
    "cell-params-a-list": (
        VERIFY,
        _damaged("lb", LB_CELL, _set("params", [1])),
        f"{CELL}: params must be a str or dict, got [1]",
    ),
    # --- a leaderboard run's per-job data (cells/<id>.npz), read by report to draw
    "arrays-garbage": (
        REPORT,
        _damaged("lb", LB_ARRAYS, b"garbage\n"),
        f"{ARRAYS}: not a NumPy .npz archive {ARRAYS_FIX}",
    ),
    "arrays-truncated": (
        REPORT,
        lambda: {**(f := leaderboard_dir_files()), ARRAYS: f[ARRAYS][:100]},
        f"{ARRAYS}: not a NumPy .npz archive (File is not a zip file) {ARRAYS_FIX}",
    ),
    "arrays-one-array": (
        REPORT,
        _damaged("lb", LB_ARRAYS, _npy()),
        f"{ARRAYS}: a single NumPy array (.npy), not a cell's .npz archive of per-job data",
    ),
    "arrays-foreign-name": (
        REPORT,
        _damaged("lb", LB_ARRAYS, _npz(jct_s=[1.0], comm_overhead=[0.0], weights=[1.0])),
        f"{ARRAYS}: holds 'weights', not an array of a cell's per-job data",
    ),
    "arrays-without-jct": (
        REPORT,
        _damaged("lb", LB_ARRAYS, _npz(comm_overhead=[0.0])),
        f"{ARRAYS}: lacks the array 'jct_s' {ARRAYS_FIX}",
    ),
    "arrays-text": (
        REPORT,
        _damaged("lb", LB_ARRAYS, _npz(jct_s=["a"], comm_overhead=[0.0])),
        f"{ARRAYS}: jct_s must be a 1-D array of floats, got <U1 of shape (1,)",
    ),
    "arrays-pickled": (
        REPORT,
        _damaged("lb", LB_ARRAYS, _npz(jct_s=[{"a": 1}], comm_overhead=[0.0])),
        f"{ARRAYS}: a damaged .npz archive (ValueError: Object arrays cannot be loaded when "
        "allow_pickle=False)",
    ),
    "arrays-uneven": (
        REPORT,
        _damaged("lb", LB_ARRAYS, _npz(jct_s=[1.0, 2.0], comm_overhead=[0.0])),
        f"{ARRAYS}: jct_s and comm_overhead have different lengths",
    ),
    "arrays-series-without-time": (
        REPORT,
        _damaged("lb", LB_ARRAYS, _npz(jct_s=[1.0], comm_overhead=[0.0], ts_busy_gpus=[1.0])),
        f"{ARRAYS}: the time series (ts_busy_gpus) lack ts_t or differ in length",
    ),
    "verify-unknown-row": (
        ["leaderboard", "--verify", "{d}/lb", "--row", "nosuch"],
        leaderboard_dir_files,
        "unknown row 'nosuch'; valid rows: s.fcfs.s1",
    ),
    # --- a simulate run's results.json and metrics.json
    "results-a-list": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", b"[]"),
        "run/results.json: holds a JSON list, not the results.json of `dlcluster simulate --out`",
    ),
    "results-without-metrics": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", _pop("metrics")),
        "run/results.json: 'metrics' must be a JSON object, got '(missing)'",
    ),
    "results-jobs-a-list": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", _set("jobs", [1])),
        "run/results.json: 'jobs' must be a JSON object, got [1]",
    ),
    "results-without-identity": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", lambda d: d["metrics"].pop("policy")),
        "run/results.json: metrics lacks policy",
    ),
    "results-metric-text": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", lambda d: d["metrics"].__setitem__("makespan_s", "long")),
        "run/results.json: metrics.makespan_s must be a number, got 'long'",
    ),
    "results-column-a-number": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", lambda d: d["jobs"].__setitem__("jct_s", 5)),
        "run/results.json: jobs.jct_s must be a list (one value per job), got 5",
    ),
    "results-columns-uneven": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", lambda d: d["timeseries"]["t"].append(1.0)),
        "run/results.json: the timeseries columns have different lengths",
    ),
    "results-jct-text": (
        ["report", "{d}/run"],
        _damaged(
            "run",
            "results.json",
            lambda d: d["jobs"].__setitem__("jct_s", ["x"] * len(d["jobs"]["jct_s"])),
        ),
        "run/results.json: jobs.jct_s and the time series must be numbers",
    ),
    "results-cluster-missing": (
        ["report", "{d}/run"],
        _damaged("run", "results.json", lambda d: d["scenario_config"].pop("cluster")),
        "run/results.json: scenario_config.cluster is missing",
    ),
    "results-cluster-invalid": (
        ["report", "{d}/run"],
        _damaged(
            "run",
            "results.json",
            lambda d: d["scenario_config"]["cluster"]["groups"][0].__setitem__("racks", 0),
        ),
        "run/results.json: scenario_config.cluster: <cluster mapping>: invalid config: "
        "groups.0.racks: Input should be greater than 0",
    ),
    "metrics-json-a-list": (
        ["report", "{d}/run"],
        _damaged("run", "metrics.json", b"[]"),
        "run/metrics.json: holds a JSON list, not the metrics.json of `dlcluster simulate --out`",
    ),
}

CASES: dict[str, Case] = {**SUITE_CASES, **RUN_DIR_CASES}


def test_the_table_has_distinct_cases():
    assert len(CASES) >= 60
    assert len({(tuple(a), c) for a, _, c in CASES.values()}) == len(CASES)


@pytest.mark.parametrize(("args", "files", "culprit"), params(CASES))
def test_bad_suite_or_run_folder_is_one_line_and_exit_2(
    tmp_path, monkeypatch, args, files, culprit
):
    check_case(tmp_path, monkeypatch, args, files, culprit)


def test_resume_reruns_a_damaged_cell(tmp_path, monkeypatch):
    """``--resume`` over a damaged cell file reruns it (with a warning naming it) instead of
    failing: the damage is in an output, which the run can write again."""
    from bad_inputs_harness import write_files
    from click.testing import CliRunner

    from dlcluster_gym.cli import main

    files = {**suite(SUITE + "name: bad\n"), **leaderboard_dir_files()}
    files["lb/" + LB_CELL] = b"{bad"
    files["lb/suite.json"] = b"[]"
    write_files(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, [a.replace("{d}", str(tmp_path)) for a in [*LB, "--resume"]])
    assert r.exit_code == 0, r.output
    assert "rerunning 1 cell(s)" in r.stderr and "unreadable cell file" in r.stderr
    row = json.loads((tmp_path / "lb" / LB_CELL).read_text())
    assert row["status"] == "ok"
