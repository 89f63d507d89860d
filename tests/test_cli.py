"""The `dlcluster` command and the Python API give the same results; errors are clear."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlcluster_gym import simulate
from dlcluster_gym.cli import main
from dlcluster_gym.errors import ConfigError, UnknownNameError

REQUIRED = {
    "makespan_s",
    "avg_jct_s",
    "median_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_queue_s",
    "p95_queue_s",
    "p99_queue_s",
    "avg_comm_s",
    "avg_comm_overhead",
    "gpu_utilization",
    "jobs_total",
    "jobs_completed",
    "jobs_dropped",
    "preemptions",
    "migrations",
    "sim_events",
    "wall_s",
    "scenario",
    "policy",
    "seed",
    "version",
    "bound",
    "kind",
}
USER_POLICY = "fixtures.my_policy:SmallestFirst"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def sim_json(*args: str) -> dict:
    r = run("simulate", "--format", "json", "--quiet", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def drop_wall(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "wall_s"}


def test_simulate_json_has_required_fields_and_is_deterministic():
    a = sim_json("--scenario", "dally-batch-2rack", "--policy", "fcfs", "--seed", "2")
    b = sim_json("--scenario", "dally-batch-2rack", "--policy", "fcfs", "--seed", "2")
    assert set(a) >= REQUIRED
    assert drop_wall(a) == drop_wall(b)
    assert a["seed"] == 2 and a["policy"] == "fcfs" and a["scenario"] == "dally-batch-2rack"
    assert a["jobs_completed"] == a["jobs_total"] == 500


def test_cli_equals_python_api():
    cli = sim_json("--scenario", "dally-poisson-2rack", "--policy", "random", "--seed", "5")
    api = simulate("dally-poisson-2rack", "random", seed=5).metrics()
    for k, v in cli.items():
        if k != "wall_s":
            assert api[k] == pytest.approx(v, nan_ok=True) if isinstance(v, float) else api[k] == v


def test_different_seeds_differ():
    a = sim_json("--scenario", "dally-poisson-2rack", "--policy", "fcfs", "--seed", "1")
    b = sim_json("--scenario", "dally-poisson-2rack", "--policy", "fcfs", "--seed", "2")
    assert a["avg_jct_s"] != b["avg_jct_s"]


def test_ideal_is_labelled_a_bound():
    d = sim_json("--scenario", "dally-batch-2rack", "--policy", "ideal")
    assert d["bound"] is True and d["kind"] == "bound" and d["avg_queue_s"] == 0.0
    fcfs = sim_json("--scenario", "dally-batch-2rack", "--policy", "fcfs")
    assert d["avg_jct_s"] < fcfs["avg_jct_s"]
    r = run("simulate", "--scenario", "dally-batch-2rack", "--policy", "ideal", "--quiet")
    assert "BOUND" in r.output


def test_user_policy_by_import_path_with_args(tmp_path: Path):
    d = sim_json(
        "--scenario", "dally-batch-2rack", "--policy", USER_POLICY, "--policy-arg", "max_starts=3"
    )
    assert d["jobs_completed"] == 500
    assert d["policy_params"] == {"max_starts": 3}
    r = run(
        "simulate",
        "--scenario",
        "dally-batch-2rack",
        "--policy",
        USER_POLICY,
        "--policy-arg",
        "nope=1",
        "--quiet",
    )
    assert r.exit_code == 2 and "has no parameter 'nope'; parameters: max_starts" in r.stderr


def test_out_dir_and_events(tmp_path: Path):
    out = tmp_path / "run"
    ev = tmp_path / "events.jsonl"
    d = sim_json("--scenario", "dally-batch-2rack", "--out", str(out), "--events", str(ev))
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["avg_jct_s"] == d["avg_jct_s"]
    lines = ev.read_text().splitlines()
    assert len([x for x in lines if '"finish"' in x]) == 500
    assert {"jobs.csv", "timeseries.csv", "results.json"} <= {p.name for p in out.iterdir()}
    from dlcluster_gym import Results

    back = Results.load(out)
    assert back.summary["avg_jct_s"] == pytest.approx(d["avg_jct_s"])


@pytest.mark.parametrize("what", ["policies", "scenarios", "models", "clusters"])
def test_list(what):
    r = run("list", what)
    assert r.exit_code == 0
    lines = r.output.strip().splitlines()
    assert len(lines) >= 4 and all(len(line.split(None, 1)) == 2 for line in lines)


def test_unknown_names_list_valid_ones():
    r = run("simulate", "--scenario", "no-such-scenario", "--quiet")
    assert r.exit_code == 2
    assert "unknown scenario 'no-such-scenario'" in r.stderr and "dally-batch-8rack" in r.stderr
    r = run("simulate", "--scenario", "dally-batch-2rack", "--policy", "nope", "--quiet")
    assert r.exit_code == 2 and "unknown policy 'nope'" in r.stderr and "fcfs" in r.stderr
    with pytest.raises(UnknownNameError, match=r"valid policies: .*fcfs"):
        simulate("dally-batch-2rack", "nope")
    r = run("simulate", "--scenario", "dally-batch-2rack", "--policy", "os:nothing", "--quiet")
    assert r.exit_code == 2 and "has no attribute 'nothing'" in r.stderr


def test_bad_scenario_yaml_names_file_field_and_value(tmp_path: Path):
    p = tmp_path / "bad.yaml"
    p.write_text("cluster: dally-2rack\nworkload: {kind: dally, num_jobs: -5}\n")
    with pytest.raises(ConfigError, match=r"(?s)bad.yaml.*workload.dally.num_jobs.*-5"):
        simulate(p)
    p.write_text(
        "cluster: {racks: 2, machines_per_rack: 8, gpus_per_machine: 8, gpu_type: "
        "Z80}\nworkload: {kind: dally, num_jobs: 5}\n"
    )
    r = run("simulate", "--scenario", str(p), "--quiet")
    assert r.exit_code == 2 and "unknown GPU type 'Z80'" in r.stderr and "A100" in r.stderr
    p.write_text("cluster: [unclosed\n")
    r = run("simulate", "--scenario", str(p), "--quiet")
    assert r.exit_code == 2 and "malformed YAML" in r.stderr
    p.write_text("cluster: dally-2rack\nworkload: {kind: dally, num_jobs: 5}\nbogus: 1\n")
    r = run("simulate", "--scenario", str(p), "--quiet")
    assert r.exit_code == 2 and "bogus" in r.stderr


def test_models_overheads_json():
    r = run("models", "--overheads", "--format", "json")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert set(d) == {"vgg11", "alexnet", "mobilenetv3", "resnet18", "resnet50", "bert-large"}
    assert all(set(v) == {"machine", "rack", "network"} for v in d.values())


def test_models_list_follows_the_profile_source():
    def listed(*args: str) -> dict:
        r = run("models", "--format", "json", *args)
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)

    physics, testbed, table1 = (
        listed(),
        listed("--profile", "cassini-testbed"),
        listed("--profile", "dally-table1"),
    )
    # the testbed profile has its own compute time (HotNets/Cassini measurements)
    assert testbed["bert"]["compute_s"] != physics["bert"]["compute_s"]
    assert testbed["bert"]["source"].startswith("cassini-testbed")
    assert table1["vgg11"]["tier_scale"] != [1.0, 1.0, 1.0] == physics["vgg11"]["tier_scale"]
    assert table1["vgg11"]["compute_s"] == physics["vgg11"]["compute_s"]


def test_parquet_round_trip(tmp_path: Path):
    pq = pytest.importorskip("pyarrow.parquet")
    res = simulate("dally-batch-2rack", "fcfs")
    path = res.to_parquet(tmp_path / "jobs.parquet")
    table = pq.read_table(path)
    assert table.num_rows == 500
    assert table.column("jct_s").to_pylist() == pytest.approx(res.jobs["jct_s"].tolist())


def test_a_policy_that_never_schedules_warns(tmp_path: Path, monkeypatch):
    (tmp_path / "idle_policy.py").write_text(
        "from dlcluster_gym import BaseScheduler\n"
        "class Idle(BaseScheduler):\n    def schedule(self, view):\n        return []\n"
    )
    monkeypatch.chdir(tmp_path)
    r = run(
        "simulate", "--scenario", "dally-batch-2rack", "--policy", "idle_policy:Idle", "--quiet"
    )
    assert r.exit_code == 0
    assert r.stderr.startswith("warning: 500 of 500 job(s) did not finish under policy")
    assert "(it never started a job)" in r.stderr
    assert "500 JOB(S) UNFINISHED" in r.stdout


def test_scenario_with_a_cluster_file_and_a_big_run_estimate(tmp_path: Path, capsys):
    from dlcluster_gym.cli.simulate import _estimate

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text(
        "racks: 1\nmachines_per_rack: 2\ngpus_per_machine: 4\n"
    )
    s = tmp_path / "sub" / "s.yaml"
    s.write_text("cluster: c.yaml\nworkload: {kind: synthetic, num_jobs: 4}\n")
    d = sim_json("--scenario", str(s))
    assert d["jobs_total"] == 4
    s.write_text("cluster: c.yaml\nworkload: {kind: synthetic, num_jobs: 1400000}\n")
    _estimate(str(s), None)
    assert "note: a big run: 1,400,000 jobs on 8 GPUs" in capsys.readouterr().err


TINY = (
    "cluster: {racks: 1, machines_per_rack: 2, gpus_per_machine: 4}\n"
    "workload: {kind: synthetic, num_jobs: 6}\n"
)


@pytest.mark.parametrize(
    ("policy", "args", "kind"),
    [
        ("fcfs", (), "deployable"),
        ("srw", (), "clairvoyant"),
        ("themis", (), "clairvoyant"),
        ("themis", ("--policy-arg", "lengths=history"), "deployable"),
        ("ideal", (), "bound"),
    ],
)
def test_simulate_reports_the_policy_kind(tmp_path: Path, policy: str, args: tuple, kind: str):
    from dlcluster_gym import Results

    scen = tmp_path / "s.yaml"
    scen.write_text(TINY)
    out = tmp_path / "run"
    d = sim_json("--scenario", str(scen), "--policy", policy, *args, "--out", str(out))
    assert d["kind"] == kind and d["bound"] is (kind == "bound")
    assert Results.load(out).kind == kind
    assert (
        simulate(str(scen), policy, policy_params=dict(a.split("=") for a in args[1:])).kind == kind
    )
    if kind == "clairvoyant":
        r = run("simulate", "--scenario", str(scen), "--policy", policy, "--quiet", *args)
        assert "(CLAIRVOYANT: not deployable)" in r.stdout


def test_report_of_a_run_saved_before_kinds_were_recorded(tmp_path: Path):
    scen = tmp_path / "s.yaml"
    scen.write_text(TINY)
    out = tmp_path / "run"
    sim_json("--scenario", str(scen), "--policy", "srw", "--out", str(out))
    data = json.loads((out / "results.json").read_text())
    del data["metrics"]["kind"]
    (out / "results.json").write_text(json.dumps(data))
    r = run("report", str(out))
    assert r.exit_code == 0, r.output
    md = (out / "report.md").read_text()
    assert md.startswith("# srw (clairvoyant) on s") and "| kind | clairvoyant |" in md
    assert "(clairvoyant): reads ground truth" in md


def test_list_policies_shows_each_kind():
    r = run("list", "policies")
    kinds = {ln.split()[0]: ln.split()[1] for ln in r.output.splitlines()}
    assert kinds["fcfs"] == kinds["dally"] == kinds["tiresias"] == "deployable"
    assert kinds["srw"] == kinds["themis"] == "clairvoyant" and kinds["ideal"] == "bound"
    assert set(kinds.values()) <= {"deployable", "clairvoyant", "bound"}


def test_no_arguments_prints_the_help():
    """`dlcluster` alone shows the help as click lays it out (one line per option and command),
    not one `error:` line with the help squashed into it."""
    result = CliRunner().invoke(main, [], prog_name="dlcluster")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "Usage: dlcluster [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines and any(ln.split()[:1] == ["simulate"] for ln in lines)
    assert "error:" not in result.stderr and len(lines) > 10


def test_profile_prints_the_run_and_its_costliest_functions(tmp_path: Path) -> None:
    """``dlcluster profile`` (in a fresh process: the profiler sees only this run): the
    run's line, the top functions in the order asked, the raw profile when asked, and a
    one-line error for an unknown policy."""
    import pstats
    import subprocess
    import sys

    out = tmp_path / "run.prof"
    cmd = [sys.executable, "-m", "dlcluster_gym.cli", "profile", "--scenario",
           "dally-poisson-2rack", "--policy", "dally", "--jobs", "30", "--top", "7",
           "--sort", "cumulative", "--out", str(out)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[0]
    assert head.startswith("dally-poisson-2rack:dally jobs=30 ") and "avg_jct=" in head
    assert "Ordered by: cumulative time" in r.stdout and "restriction <7>" in r.stdout
    assert pstats.Stats(str(out)).total_calls > 0
    bad = run("profile", "--scenario", "dally-poisson-2rack", "--policy", "nope")
    assert bad.exit_code == 2 and "unknown policy 'nope'" in bad.output
    assert "Traceback" not in bad.output
