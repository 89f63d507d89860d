"""Trace root resolution and trace loaders (small CSVs written here, and the real files)."""

from __future__ import annotations

import time
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
    with pytest.raises(TraceError, match="unknown trace format 'helios'"):
        tr.load_trace("helios", write(tmp_path, ITP_RAW))


# --------------------------------------------------------------------------- real files


@needs_traces
@pytest.mark.traces
def test_real_philly_loads_fast():
    t = time.perf_counter()
    jobs = tr.load_philly()
    elapsed = time.perf_counter() - t
    assert len(jobs) == 82247
    assert elapsed < 2.0
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
