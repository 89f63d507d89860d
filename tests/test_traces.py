"""Trace root resolution and trace loaders (small CSVs written here, and the real files)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from dlcluster_gym.errors import TraceError
from dlcluster_gym.workload import traces as tr

traces_available = tr.traces_available()
needs_traces = pytest.mark.skipif(
    not traces_available, reason="../shared/traces not found; set DLCLUSTER_TRACES"
)

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,a
2017-10-09 06:13:03,2951.0,2,5902.0,b
2017-10-09 07:01:55,10.0,4,40.0,c
2017-10-10 06:13:03,100.0,8,800.0,b
"""
TIRESIAS = """job_id,num_gpu,submit_time,iterations,model_name,duration,interval
0,1,0,606,vgg11,164,30
1,8,30,133,resnet50,147,23
2,2,10,157,alexnet,127,26
"""
ITP_RAW = """job_id,submission_time,duration,num_gpu
a,2266647,604,16
b,2000000,767,2
"""
ITP_EXT = """job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration
a,100,6503,bert,200,128,16,604
b,50,8258,resnet50,300,64,2,767
"""


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# --------------------------------------------------------------------------- trace root


def test_trace_root_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("DLCLUSTER_TRACES", str(tmp_path / "env"))
    assert tr.trace_root(tmp_path / "arg") == (tmp_path / "arg").resolve()
    assert tr.trace_root() == (tmp_path / "env").resolve()
    monkeypatch.delenv("DLCLUSTER_TRACES")
    assert tr.trace_root() == tr.default_trace_root()
    assert tr.default_trace_root().parts[-2:] == ("shared", "traces")


def test_resolve_relative_and_absolute(tmp_path):
    p = write(tmp_path, PHILLY, "x.csv")
    assert tr.resolve_trace("x.csv", tmp_path) == p
    assert tr.resolve_trace(p, tmp_path / "elsewhere") == p


def test_missing_trace_names_path_and_how_to_fix(tmp_path):
    with pytest.raises(TraceError) as ei:
        tr.resolve_trace("nope/philly.csv", tmp_path)
    msg = str(ei.value)
    assert str(tmp_path / "nope" / "philly.csv") in msg
    assert "--traces-dir" in msg and "DLCLUSTER_TRACES" in msg


# --------------------------------------------------------------------------- loaders


def test_philly_sorted_and_relative(tmp_path):
    jobs = tr.load_philly(write(tmp_path, PHILLY))
    assert len(jobs) == 4
    assert jobs.arrival_s.tolist() == [0.0, 2932.0, 2932.0, 86400.0]
    # ties keep file order: line 2 before line 4
    assert jobs.lines.tolist() == [3, 2, 4, 5]
    assert jobs.num_gpus.tolist() == [2, 1, 4, 8]
    assert jobs.iterations is None and jobs.model_names is None


def test_tiresias(tmp_path):
    jobs = tr.load_tiresias(write(tmp_path, TIRESIAS))
    assert jobs.job_ids == ("0", "2", "1")
    assert jobs.model_names == ("vgg11", "alexnet", "resnet50")
    assert jobs.iterations.tolist() == [606, 157, 133]
    assert jobs.duration_s.tolist() == [164, 127, 147]


def test_itp_raw_and_extracted(tmp_path):
    raw = tr.load_itp_raw(write(tmp_path, ITP_RAW))
    assert raw.job_ids == ("b", "a") and raw.num_gpus.tolist() == [2, 16]
    ext = tr.load_itp_extracted(write(tmp_path, ITP_EXT, "e.csv"))
    assert ext.model_names == ("resnet50", "bert") and ext.iterations.tolist() == [8258, 6503]
    assert tr.load_trace("itp-raw", tmp_path / "t.csv").job_ids == ("b", "a")


def test_time_window(tmp_path):
    p = write(tmp_path, PHILLY)
    jobs = tr.load_philly(p, time_window_s=(1000, 90000))
    assert jobs.arrival_s.tolist() == [2932.0, 2932.0, 86400.0]
    with pytest.raises(TraceError, match=r"time window \[100000, 200000\)"):
        tr.load_philly(p, time_window_s=(1e5, 2e5))


def test_missing_column(tmp_path):
    p = write(tmp_path, "timestamp,num_gpus\n2017-10-09 07:01:55,1\n")
    with pytest.raises(TraceError) as ei:
        tr.load_philly(p)
    msg = str(ei.value)
    assert str(p) in msg and "duration" in msg and "columns found: timestamp, num_gpus" in msg


@pytest.mark.parametrize(
    ("row", "column", "value"),
    [
        ("2017-10-09 07:01:55,abc,1,1,a", "duration", "abc"),
        ("2017-13-09 07:01:55,5,1,1,a", "timestamp", "2017-13-09 07:01:55"),
        ("2017-10-09 07:01:55,-5,1,1,a", "duration", "-5"),
        ("2017-10-09 07:01:55,nan,1,1,a", "duration", "nan"),
        ("2017-10-09 07:01:55,5,0,1,a", "num_gpus", "0"),
        ("2017-10-09 07:01:55,5,1.5,1,a", "num_gpus", "1.5"),
    ],
)
def test_malformed_value_philly(tmp_path, row, column, value):
    p = write(tmp_path, PHILLY + row + "\n")
    with pytest.raises(TraceError) as ei:
        tr.load_philly(p)
    msg = str(ei.value)
    assert str(p) in msg and "line 6" in msg and repr(column) in msg and repr(value) in msg


@pytest.mark.parametrize(
    ("row", "column"),
    [
        ("c,-1,5,1", "submission_time"),
        ("c,nan,5,1", "submission_time"),
        ("c,1,5,0", "num_gpu"),
        ("c,1,0,1", "duration"),
    ],
)
def test_malformed_value_itp(tmp_path, row, column):
    p = write(tmp_path, ITP_RAW + row + "\n")
    with pytest.raises(TraceError, match=rf"line 4, column '{column}'"):
        tr.load_itp_raw(p)


def test_short_row_and_empty(tmp_path):
    with pytest.raises(TraceError, match="line 3 has 2 field"):
        tr.load_itp_raw(write(tmp_path, ITP_RAW.replace("b,2000000,767,2", "b,2")))
    with pytest.raises(TraceError, match="empty file"):
        tr.load_itp_raw(write(tmp_path, "", "e.csv"))
    with pytest.raises(TraceError, match="no jobs"):
        tr.load_itp_raw(write(tmp_path, "job_id,submission_time,duration,num_gpu\n", "h.csv"))


def test_unknown_format(tmp_path):
    with pytest.raises(TraceError, match="unknown trace format 'mystery'"):
        tr.load_trace("mystery", write(tmp_path, ITP_RAW))


# --------------------------------------------------------------------------- real files


@needs_traces
@pytest.mark.traces
def test_real_philly_loads():
    jobs = tr.load_philly()  # load speed is benchmarked, not asserted (experiments/bench_*)
    assert len(jobs) == 82247
    assert jobs.arrival_s[0] == 0 and np.all(np.diff(jobs.arrival_s) >= 0)
    assert jobs.num_gpus.min() >= 1 and jobs.duration_s.min() > 0


@needs_traces
@pytest.mark.traces
def test_real_other_traces():
    assert len(tr.load_tiresias()) == 60
    files = sorted((tr.trace_root() / tr.ITP_RAW_DIR).glob("cluster*.csv"))
    assert len(files) == 10
    assert sum(len(tr.load_itp_raw(f)) for f in files) == 69351
    ext = tr.load_itp_extracted(tr.trace_root() / tr.ITP_EXTRACTED_DIR / "cluster10.csv")
    assert len(ext) == 260 and ext.iterations is not None


# --------------------------------------------------------------------------- more formats

EF_PHILLY = (
    "job_id,submit_time,real_iteration,model_name,ddl,batch_size,num_gpu,real_duration,duration,"
    "iteration\n"
    """0,0,1282877,vgg16,771220,256,1,976570,976570,1282877
1,219316,26446831,bert,2065619,64,4,1792395,1792395,26446831
"""
)
HELIOS = (
    "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
    "j1,u,v,8,32,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,50\n"
    """j2,u1,vc1,0,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:10:00,600,0
j3,u2,vc2,2,8,1,FAILED,2020-04-01 00:00:05,2020-04-01 00:00:05,2020-04-01 00:00:05,0,0
j4,u2,vc2,16,64,2,COMPLETED,2020-04-01 00:10:10,2020-04-01 00:11:00,2020-04-01 02:11:00,7200,50
"""
)
PAI_JOBS = """j1,i1,u1,Terminated,100,4000
j2,i2,u1,Terminated,50,900
j3,i3,u2,Terminated,10,500
j4,i4,u2,Failed,20,
"""
PAI_TASKS = """j1,worker,2,Terminated,200,3000,600,29,100,V100
j1,ps,1,Terminated,150,3100,600,29,,
j2,worker,1,Terminated,60,860,600,29,50,T4
j3,worker,4,Terminated,20,400,600,29,,
j4,worker,1,Running,30,,600,29,100,V100
"""


def test_elasticflow_philly(tmp_path):
    jobs = tr.load_trace("elasticflow-philly", write(tmp_path, EF_PHILLY))
    assert jobs.model_names == ("vgg16", "bert")
    assert jobs.iterations.tolist() == [1282877, 26446831]
    assert jobs.duration_s.tolist() == [976570, 1792395] and jobs.num_gpus.tolist() == [1, 4]


def test_pollux_workload_iterations_from_convergence_runs(tmp_path):
    runs = tmp_path / "runs" / "ncf"
    runs.mkdir(parents=True)
    (runs / "validation-256.csv").write_text("progress,iteration,metric\n1,10,0\n2,900,0\n")
    (runs / "validation-1024.csv").write_text("progress,iteration,metric\n1,10,0\n2,250,0\n")
    p = write(
        tmp_path,
        "name,time,application,num_replicas,batch_size\nncf-0,30,ncf,2,2048\nncf-1,5,ncf,1,300\n",
    )
    jobs = tr.load_pollux_workload(p, pollux_traces=tmp_path / "runs")
    # batch 300 -> nearest measured 256 (900 iterations); 2048 -> 1024 (250)
    assert jobs.job_ids == ("ncf-1", "ncf-0") and jobs.iterations.tolist() == [900, 250]
    assert jobs.model_names == ("ncf", "ncf") and jobs.num_gpus.tolist() == [1, 2]
    with pytest.raises(TraceError, match="no Pollux convergence runs for application 'ncf'"):
        tr.load_pollux_workload(p, pollux_traces=tmp_path / "elsewhere")


def test_helios_drops_cpu_and_zero_length_jobs(tmp_path):
    jobs = tr.load_trace("helios", write(tmp_path, HELIOS))
    assert jobs.job_ids == ("j1", "j4")
    assert jobs.arrival_s.tolist() == [0.0, 600.0]  # from the earliest GPU job's submission
    assert jobs.num_gpus.tolist() == [8, 16] and jobs.duration_s.tolist() == [3600, 7200]
    bad = write(tmp_path, HELIOS.replace(",8,32,", ",-8,32,"), "bad.csv")
    with pytest.raises(TraceError, match=r"line 2, column 'gpu_num'.*'-8'"):
        tr.load_helios(bad)


@pytest.mark.parametrize("header", [False, True])
def test_alibaba_pai(tmp_path, header):
    jh = ",".join(tr.PAI_JOB_COLUMNS) + "\n" if header else ""
    th = ",".join(tr.PAI_TASK_COLUMNS) + "\n" if header else ""
    jobs_csv = write(tmp_path, jh + PAI_JOBS, "pai_job_table.csv")
    write(tmp_path, th + PAI_TASKS, "pai_task_table.csv")
    jobs = tr.load_trace("alibaba-pai", jobs_csv)
    # j3 has no GPU task, j4 never finished: both left out
    assert jobs.job_ids == ("j2", "j1")
    assert jobs.arrival_s.tolist() == [0.0, 50.0]
    assert jobs.num_gpus.tolist() == [1, 2]  # 1 x 50% -> 1 GPU; 2 x 100% -> 2
    assert jobs.duration_s.tolist() == [800.0, 2950.0]  # first task start to last task end


def test_generic_mapping(tmp_path):
    p = write(tmp_path, "id,sub,end,g,m\na,10,40,2,resnet50\nb,0,5,1,vgg11\n")
    cols = {"job_id": "id", "arrival": "sub", "end": "end", "num_gpus": "g", "model": "m"}
    jobs = tr.load_trace("generic", p, columns=cols, time_unit_s=60)
    assert jobs.job_ids == ("b", "a") and jobs.model_names == ("vgg11", "resnet50")
    assert jobs.arrival_s.tolist() == [0.0, 600.0] and jobs.duration_s.tolist() == [300, 1800]
    with pytest.raises(TraceError, match=r"unknown key.*gpus; allowed: arrival"):
        tr.load_generic(p, columns={"arrival": "sub", "gpus": "g"})
    with pytest.raises(TraceError, match="must map arrival, num_gpus and duration"):
        tr.load_generic(p, columns={"arrival": "sub", "num_gpus": "g"})
    with pytest.raises(TraceError, match=r"missing column.*nope"):
        tr.load_generic(p, columns={"arrival": "nope", "num_gpus": "g", "duration": "end"})


def test_skip_malformed_rows_with_count(tmp_path):
    p = write(tmp_path, ITP_RAW + "c,1,abc,1\nd,5\ne,7,100,4\n")
    with pytest.raises(TraceError, match=r"line 4, column 'duration'"):
        tr.load_itp_raw(p)
    with pytest.warns(UserWarning, match=r"t.csv: skipped 2 malformed row\(s\); first: line 4"):
        jobs = tr.load_itp_raw(p, on_error="skip")
    assert jobs.skipped == 2 and jobs.job_ids == ("e", "b", "a")
    only_bad = write(tmp_path, "job_id,submission_time,duration,num_gpu\nx,1,0,1\n", "b.csv")
    with warnings.catch_warnings():  # the error says it all: no warning beside it
        warnings.simplefilter("error")
        with pytest.raises(TraceError, match=r"1 malformed row\(s\) skipped; first: line 2"):
            tr.load_itp_raw(only_bad, on_error="skip")


def test_limit_gpus_and_rescale(tmp_path):
    jobs = tr.load_itp_raw(write(tmp_path, ITP_RAW + "c,2100000,100,64\n"))
    assert tr.limit_gpus(jobs, 16, "cap").num_gpus.tolist() == [2, 16, 16]
    assert tr.limit_gpus(jobs, 16, "filter").job_ids == ("b", "a")
    with pytest.raises(TraceError, match="every job wants more than 1 GPUs"):
        tr.limit_gpus(tr.limit_gpus(jobs, 16, "filter").select(np.array([False, True])), 1,
                      "filter")  # fmt: skip
    scaled = tr.rescale_arrivals(jobs, 32, 0.5)
    assert scaled.offered_load(32) == pytest.approx(0.5)
    assert scaled.arrival_s[0] == jobs.arrival_s[0]
    assert np.all(np.diff(scaled.arrival_s) >= 0)
    with pytest.raises(TraceError, match="target_load"):
        tr.rescale_arrivals(jobs, 32, 0.0)


def test_pollux_model_classes(tmp_path):
    # GPU-hours 0.5 (small), 5 (medium), 50 (large), 500 (xlarge)
    text = "job_id,submission_time,duration,num_gpu\n" + "".join(
        f"j{i},{i},{h * 3600},1\n" for i, h in enumerate((0.5, 5, 50, 500))
    )
    jobs = tr.load_itp_raw(write(tmp_path, text))
    models = tr.pollux_models(jobs, np.random.default_rng(3))
    assert models[0] in ("cifar10", "ncf") and models[1] in ("deepspeech2", "bert")
    assert models[2:] == ("yolov3", "imagenet")
    assert models == tr.pollux_models(jobs, np.random.default_rng(3))


def test_trace_options_in_a_scenario(tmp_path):
    from dlcluster_gym.api import prepare

    p = write(tmp_path, ITP_RAW + "c,2100000,100,64\nd,2200000,3600,4\n")
    base = {
        "cluster": {"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 8},
        "workload": {"kind": "trace", "format": "itp-raw", "path": str(p), "models": "pollux"},
    }
    _, _, jobs, _ = prepare(base)
    assert [j.num_gpus for j in jobs] == [2, 64, 4, 16]  # by arrival
    base["workload"].update(gpu_demand="filter", target_load=0.5)
    _, _, jobs, _ = prepare(base)
    assert [j.num_gpus for j in jobs] == [2, 4, 16]
    assert {j.model for j in jobs} <= {"cifar10", "ncf", "deepspeech2", "bert"}
    gpu_s = 2 * 767 + 16 * 604 + 4 * 3600
    assert gpu_s / (16 * jobs[-1].arrival_s) == pytest.approx(0.5)


GENERIC_DURATIONS = """id,submit,runtime,gpus,net
a,0,1000.5,2,resnet50
b,20000,3600,8,vgg11
c,40000,777.25,16,bert-large
d,60000,12345.6,32,alexnet
e,90000,500,64,mobilenetv3
"""


def test_network_ideal_replays_trace_durations(tmp_path):
    """Under ``network: ideal`` a multi-GPU job alone on the cluster runs exactly its trace
    duration (durations become iterations at compute time, no communication)."""
    from dlcluster_gym import simulate

    p = write(tmp_path, GENERIC_DURATIONS)
    cols = {"job_id": "id", "arrival": "submit", "duration": "runtime", "num_gpus": "gpus",
            "model": "net"}  # fmt: skip
    scenario = {
        "cluster": "dally-2rack",  # 2 racks x 8 machines x 8 GPUs: 64 GPUs span machines
        "workload": {"kind": "trace", "format": "generic", "path": str(p), "columns": cols,
                     "models": "trace", "iterations_from": "duration"},
        "network": "ideal",
    }  # fmt: skip
    res = simulate(scenario, "fcfs")
    jobs = res.jobs
    order = np.argsort(jobs["arrival_s"], kind="stable")
    run = (jobs["finish_s"] - jobs["first_start_s"])[order]
    want = [1000.5, 3600.0, 777.25, 12345.6, 500.0]
    assert jobs["num_gpus"][order].tolist() == [2, 8, 16, 32, 64]
    assert (jobs["finish_s"][order][:-1] < jobs["arrival_s"][order][1:]).all()  # no overlap
    assert run.tolist() == pytest.approx(want, rel=1e-9, abs=0)
    # The network model converts at the packed placement, where FCFS puts these jobs.
    res = simulate({**scenario, "network": "model"}, "fcfs")
    run = (res.jobs["finish_s"] - res.jobs["first_start_s"])[order]
    assert run.tolist() == pytest.approx(want, rel=1e-9, abs=0)


# --------------------------------------------------------------------------- more real files


@needs_traces
@pytest.mark.traces
def test_real_elasticflow_philly_and_pollux_workloads():
    ef = tr.load_elasticflow_philly()
    assert len(ef) == 876 and set(ef.num_gpus.tolist()) == {1, 2, 4}
    for i in range(1, 9):
        w = tr.load_pollux_workload(f"{tr.POLLUX_WORKLOAD_DIR}/workload-{i}.csv")
        assert len(w) == 160 and np.all(w.iterations > 0)
    w1 = tr.load_pollux_workload(f"{tr.POLLUX_WORKLOAD_DIR}/workload-1.csv")
    # cifar10 at batch 2048: Pollux's run converges after 3178 iterations
    assert w1.iterations[w1.model_names.index("cifar10")] == 3178


@needs_traces
@pytest.mark.traces
@pytest.mark.parametrize("i", range(1, 11))
def test_itp_cluster_presets_follow_the_sizing_rule(i):
    from dlcluster_gym.config import load_scenario

    jobs = tr.load_itp_raw(f"{tr.ITP_RAW_DIR}/cluster{i:02d}.csv")
    cfg = load_scenario(f"itp-cluster{i:02d}")
    busy = jobs.gpu_seconds() / float(jobs.arrival_s[-1] - jobs.arrival_s[0])
    racks = max(math.ceil(int(jobs.num_gpus.max()) / 64), round(busy / (0.8 * 64)), 1)
    assert cfg.cluster.num_racks == racks and cfg.cluster.num_gpus == 64 * racks
    assert cfg.workload.path == f"elasticflow_itp/raw/cluster{i:02d}.csv"


# --------------------------------------------------------------------------- no trace root


@pytest.mark.parametrize("value", ["none", "NONE", " none "])
def test_no_trace_root_switch(tmp_path, monkeypatch, value):
    """DLCLUSTER_TRACES=none: no trace root even where ../shared/traces exists (a fresh
    clone's view); every lookup under the root is a TraceError saying how to give one."""
    from dlcluster_gym import simulate

    monkeypatch.setenv("DLCLUSTER_TRACES", value)
    assert not tr.traces_available()
    for lookup in (tr.trace_root, lambda: tr.resolve_trace(tr.TIRESIAS_60JOB_CSV)):
        with pytest.raises(TraceError, match="no trace root is configured") as ei:
            lookup()
        assert "--traces-dir" in str(ei.value) and "DLCLUSTER_TRACES=DIR" in str(ei.value)
    with pytest.raises(TraceError, match=f"trace file {tr.TIRESIAS_60JOB_CSV} needs the trace"):
        simulate("tiresias-60job", "fcfs", seed=0)
    # an explicit trace root and absolute paths need no configured one
    p = write(tmp_path, PHILLY, "x.csv")
    assert tr.traces_available(tmp_path) and tr.trace_root(tmp_path) == tmp_path.resolve()
    assert tr.resolve_trace("x.csv", tmp_path) == p and tr.resolve_trace(p) == p
    with pytest.raises(TraceError, match=r"trace file not found: .*absent\.csv"):
        tr.resolve_trace(tmp_path / "absent.csv")


def test_an_empty_trace_root_variable_counts_as_unset(monkeypatch):
    monkeypatch.setenv("DLCLUSTER_TRACES", "")
    assert tr.trace_root() == tr.default_trace_root()


def test_no_trace_root_skips_or_stops_the_agents_trace_scenarios(monkeypatch):
    """Under DLCLUSTER_TRACES=none agent validation skips its trace scenarios and training on
    one stops with a one-line ConfigError, as without a trace root."""
    pytest.importorskip("stable_baselines3")
    from dlcluster_gym.agents import envs
    from dlcluster_gym.agents.config import load_agent_config
    from dlcluster_gym.errors import ConfigError

    monkeypatch.setenv("DLCLUSTER_TRACES", "none")
    cfg = load_agent_config("scheduler-v6")
    assert envs.available(cfg.validation.scenarios)[1] == ["val-trace-itp06-l0.9"]
    with pytest.raises(ConfigError, match=r"'trace-itp02-l0\.9' needs the traces, but no trace"):
        envs.train_specs(cfg, source="scheduler-v6.yaml")
