"""Bad traces: one bad cell at a time in every column each format reads, and the file-level
mistakes (encoding, headers, rows, ids) of every format, each an exit-2, one-line error
naming the file, the line, the column and the value (``bad_inputs_harness.check_case``)."""

from __future__ import annotations

import pytest
from bad_inputs_harness import CLUSTER, SIM, Case, check_case, generic_trace, params, trace_scenario

RUN = [*SIM, "{d}/s.yaml"]

# format: (header, a valid row); every column a loader reads is broken below, one at a time
FORMATS: dict[str, tuple[str, str]] = {
    "philly": ("timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-09 07:01:55,66,1,66,a"),
    "tiresias": (
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval",
        "j1,1,0,100,resnet50,60,0",
    ),
    "itp-raw": ("job_id,submission_time,duration,num_gpu", "a,0,60,1"),
    "itp-extracted": (
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration",
        "a,0,100,resnet50,100,32,1,60",
    ),
    "elasticflow-philly": (
        "job_id,submit_time,model_name,num_gpu,duration,iteration",
        "a,0,resnet50,1,60,100",
    ),
    "pollux-workload": ("name,time,application,num_replicas,batch_size", "a,0,cifar10,1,128"),
    "helios": (
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
        "duration,queue",
        "a,u,v,1,4,1,COMPLETED,2020-04-01 00:00:00,0,0,60,0",
    ),
}

TIME = [  # seconds >= 0
    ("soon", "not a number"),
    ("-5", "must be a finite number >= 0"),
    ("nan", "must be a finite number >= 0"),
    ("inf", "must be a finite number >= 0"),
    ("", "not a number"),
]
DURATION = [
    ("0", "must be a finite number > 0"),
    ("-60", "must be a finite number > 0"),
    ("soon", "not a number"),
    ("inf", "must be a finite number > 0"),
    ("1e308", "must be at most 3.154e+09 s (100 years)"),
]
AMOUNT = [("1e308", "must be at most 1e+12")]  # iterations, batch sizes
GPUS = [
    ("0", "must be a positive integer <= 1,000,000 (a whole GPU count)"),
    ("1.5", "must be a positive integer <= 1,000,000 (a whole GPU count)"),
    ("2.0000000000000001", "must be a positive integer <= 1,000,000 (a whole GPU count)"),
    ("-1", "must be a positive integer"),
    ("two", "not a number"),
    ("1e7", "must be a positive integer <= 1,000,000"),
]
TEXT = [("", "must not be empty")]
TIMESTAMP = [
    ("yesterday", "must be a timestamp like 2017-10-09 07:01:55"),
    ("2017-13-45 07:01:55", "must be a timestamp like 2017-10-09 07:01:55"),
    ("2017-10-09T07:01:55Z", "has a time zone; this format's timestamps are local times"),
]
COLUMNS: dict[str, dict[str, list[tuple[str, str]]]] = {
    "philly": {"timestamp": TIMESTAMP, "duration": DURATION, "num_gpus": GPUS},
    "tiresias": {
        "job_id": TEXT,
        "num_gpu": GPUS,
        "submit_time": TIME,
        "iterations": DURATION[:2] + AMOUNT,
        "model_name": TEXT,
        "duration": DURATION,
    },
    "itp-raw": {"job_id": TEXT, "submission_time": TIME, "duration": DURATION, "num_gpu": GPUS},
    "itp-extracted": {
        "submission_time": TIME[:2],
        "num_iteration": DURATION[:2],
        "model_name": TEXT,
        "num_gpu": GPUS[:3],
        "duration": DURATION[:2],
    },
    "elasticflow-philly": {
        "submit_time": TIME[:2],
        "model_name": TEXT,
        "num_gpu": GPUS[:3],
        "duration": DURATION[:2],
        "iteration": DURATION[:1] + AMOUNT,
    },
    "pollux-workload": {
        "name": TEXT,
        "time": TIME[:2],
        "application": TEXT,
        "num_replicas": GPUS[:2],
        "batch_size": DURATION[:2],
    },
    "helios": {
        "submit_time": [
            ("yesterday", "must be a timestamp like"),
            ("-5", "must be a finite number >= 0"),
        ],
        "gpu_num": [
            ("-1", "must be an integer in [0, 1,000,000] (a whole GPU count)"),
            ("1.5", "must be an integer in [0, 1,000,000]"),
        ],
        "duration": [("-1", "must be a finite number >= 0")],
    },
}


def _bad_cell(fmt: str, column: str, value: str) -> str:
    header, row = FORMATS[fmt]
    names, cells = header.split(","), row.split(",")
    cells[names.index(column)] = value
    return f"{header}\n{row}\n{','.join(cells)}\n"


def _cells() -> dict[str, Case]:
    out: dict[str, Case] = {}
    for fmt, columns in COLUMNS.items():
        for column, bad in columns.items():
            for value, why in bad:
                files = {"s.yaml": trace_scenario(fmt), "t.csv": _bad_cell(fmt, column, value)}
                out[f"{fmt}.{column}={value or 'empty'}"] = (
                    RUN,
                    files,
                    f"t.csv: line 3, column {column!r}: {why}",
                )
    return out


def _file_level() -> dict[str, Case]:
    """The same file-level mistakes in every format."""
    out: dict[str, Case] = {}
    for fmt, (header, row) in FORMATS.items():
        first = header.split(",")[0]
        s = trace_scenario(fmt)
        table: dict[str, tuple[str | bytes, str]] = {
            "empty": ("", "t.csv: empty file (expected a header row)"),
            "header-only": (header + "\n", "t.csv: no jobs (header only)"),
            "missing-column": (
                header.replace(first, "nosuch", 1) + "\n" + row + "\n",
                f"t.csv: missing column(s) {first}; columns found: nosuch",
            ),
            "short-row": (
                f"{header}\n{row}\n{row.split(',')[0]},1\n",
                "t.csv: line 3 has 2 field(s)",
            ),
            "latin1": (
                (f"{header}\n{row}\n" + "\xe9" + row + "\n").encode("latin-1"),
                "t.csv: not UTF-8 text (line 3: byte 0xe9",
            ),
            "nul-byte": (f"{header}\n{row}\n\0{row}\n", "t.csv: line 3 holds a NUL byte"),
            "duplicated-column": (
                f"{header},{first}\n{row},x\n",
                f"column {first!r} appears 2 times in the header",
            ),
            "header-repeated": (
                f"{header}\n{row}\n{header}\n{row}\n",
                "t.csv: line 3 repeats the header row",
            ),
        }
        for name, (text, why) in table.items():
            out[f"{fmt}.{name}"] = (RUN, {"s.yaml": s, "t.csv": text}, why)
    return out


ITP = "job_id,submission_time,duration,num_gpu\n"
PAI_TASKS = (
    "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
)
TWO_JOBS = ITP + "a,0,60,1\nb,100,60,2\n"
GEN = "id,submit,gpus,runtime\n"

CASES: dict[str, Case] = {
    **_cells(),
    **_file_level(),
    # --- job ids, formats without a header, and each loader's own checks
    "tiresias-duplicate-id": (
        RUN,
        {"s.yaml": trace_scenario("tiresias"), "t.csv": _bad_cell("tiresias", "job_id", "j1")},
        "t.csv: line 3: job id 'j1' appears twice (first on line 2)",
    ),
    "itp-raw-duplicate-id": (
        RUN,
        {"s.yaml": trace_scenario("itp-raw"), "t.csv": ITP + "a,0,60,1\na,5,60,1\n"},
        "job id 'a' appears twice",
    ),
    "pollux-unknown-application": (
        RUN,
        {
            "s.yaml": trace_scenario("pollux-workload"),
            # the bad row first: the good one would need Pollux's runs under the trace root
            "t.csv": "name,time,application,num_replicas,batch_size\na,0,tetris,1,128\n",
        },
        "t.csv: line 2, column 'application': unknown model",
    ),
    "helios-only-cpu-jobs": (
        RUN,
        {
            "s.yaml": trace_scenario("helios"),
            "t.csv": _bad_cell("helios", "gpu_num", "0").replace(",1,4,", ",0,4,", 1),
        },
        "t.csv: no GPU jobs (every row has gpu_num 0 or duration 0)",
    ),
    "alibaba-missing-task-table": (
        RUN,
        {
            "s.yaml": trace_scenario("alibaba-pai"),
            "t.csv": "job_name,inst_id,user,status,start_time,end_time\nj,1,u,ok,0,10\n",
        },
        "pai_task_table.csv",
    ),
    "alibaba-no-gpu-tasks": (
        RUN,
        {
            "s.yaml": trace_scenario("alibaba-pai"),
            "t.csv": "job_name,inst_id,user,status,start_time,end_time\nj,1,u,ok,0,10\n",
            "pai_task_table.csv": PAI_TASKS + "j,t,1,ok,0,10,100,1,,\n",
        },
        "t.csv: no GPU jobs with finished tasks in",
    ),
    "alibaba-negative-plan-gpu": (
        RUN,
        {
            "s.yaml": trace_scenario("alibaba-pai"),
            "t.csv": "job_name,inst_id,user,status,start_time,end_time\nj,1,u,ok,0,10\n",
            "pai_task_table.csv": PAI_TASKS + "j,t,1,ok,0,10,100,1,-50,V100\n",
        },
        "pai_task_table.csv: line 2, column 'plan_gpu': must be a finite number >= 0 or empty "
        "(got '-50')",
    ),
    "alibaba-job-start-text": (
        RUN,
        {
            "s.yaml": trace_scenario("alibaba-pai"),
            "t.csv": "job_name,inst_id,user,status,start_time,end_time\nj,1,u,ok,soon,10\n",
            "pai_task_table.csv": PAI_TASKS + "j,t,1,ok,0,10,100,1,50,V100\n",
        },
        "t.csv: line 2, column 'start_time': not a number (got 'soon')",
    ),
    # --- the scenario's trace options against a file
    "window-without-jobs": (
        RUN,
        {"s.yaml": trace_scenario("itp-raw", time_window_s="[500, 600]"), "t.csv": TWO_JOBS},
        "t.csv: no job arrives in time window [500, 600) s; arrivals span [0, 100] s",
    ),
    "every-job-too-big": (
        RUN,
        {"s.yaml": trace_scenario("itp-raw", gpu_demand="filter"), "t.csv": ITP + "a,0,60,64\n"},
        "every job wants more than 8 GPUs",
    ),
    "target-load-one-instant": (
        RUN,
        {
            "s.yaml": trace_scenario("itp-raw", target_load="0.5"),
            "t.csv": ITP + "a,0,60,1\nb,0,60,1\n",
        },
        "cannot rescale arrivals to a load: all 2 job(s) arrive at the same time",
    ),
    "skip-every-row": (
        RUN,
        {
            "s.yaml": trace_scenario("itp-raw", on_error="skip"),
            "t.csv": ITP + "a,0,60,x\nb,0,60,y\n",
        },
        "t.csv: no jobs (header only) (2 malformed row(s) skipped; first: line 2, column "
        "'num_gpu': not a number (got 'x'))",
    ),
    "trace-file-is-a-folder": (
        RUN,
        {"s.yaml": trace_scenario("itp-raw"), "t.csv/x": "a"},
        "trace file not found: {d}/t.csv",
    ),
    "absolute-path-missing": (
        RUN,
        {"s.yaml": trace_scenario("itp-raw", "none.csv")},
        "trace file not found: {d}/none.csv (no such file; an absolute path)",
    ),
    "relative-path-without-root": (
        [*SIM, "{d}/s.yaml", "--traces-dir", "{d}/nowhere"],
        {"s.yaml": CLUSTER + "workload: {kind: trace, format: itp-raw, path: cluster01.csv}\n"},
        "trace file not found: {d}/nowhere/cluster01.csv (trace root {d}/nowhere)",
    ),
    # --- generic traces: the column mapping and units
    "generic-duration-too-long": (
        RUN,
        {"s.yaml": generic_trace(), "t.csv": GEN + "a,0,1,60\nb,10,1,1e308\n"},
        "t.csv: line 3, column 'runtime': a duration of 1e+308 s; it must be at most 3.154e+09 s "
        "(100 years) (got '1e+308')",
    ),
    "generic-duration-too-long-in-its-unit": (
        RUN,
        {"s.yaml": generic_trace(duration_unit_s="3600"), "t.csv": GEN + "a,0,1,1e300\n"},
        "t.csv: line 2, column 'runtime': a duration of 3.6e+303 s; it must be at most",
    ),
    "generic-end-too-late": (
        RUN,
        {
            "s.yaml": generic_trace().replace("duration: runtime", "end: runtime"),
            "t.csv": GEN + "a,0,1,1e300\n",
        },
        "t.csv: line 2, column 'runtime': a duration of 1e+300 s; it must be at most",
    ),
    "generic-end-before-arrival": (
        RUN,
        {
            "s.yaml": generic_trace().replace("duration: runtime", "end: runtime"),
            "t.csv": GEN + "a,100,1,50\n",
        },
        "line 2, column 'runtime': must be after the arrival (got '50.0')",
    ),
    "generic-mapped-column-absent": (
        RUN,
        {
            "s.yaml": generic_trace().replace("job_id: id", "job_id: ident"),
            "t.csv": GEN + "a,0,1,60\n",
        },
        "t.csv: missing column(s) ident; columns found: id, submit, gpus, runtime",
    ),
    "generic-model-column-empty": (
        RUN,
        {
            "s.yaml": generic_trace().replace("job_id: id", "job_id: id, model: m"),
            "t.csv": "id,submit,gpus,runtime,m\na,0,1,60,\n",
        },
        "line 2, column 'm': must not be empty",
    ),
    "generic-iterations-zero": (
        RUN,
        {
            "s.yaml": generic_trace().replace("job_id: id", "job_id: id, iterations: it"),
            "t.csv": "id,submit,gpus,runtime,it\na,0,1,60,0\n",
        },
        "line 2, column 'it': must be a finite number > 0 (got '0')",
    ),
    "generic-arrival-unit-negative": (
        RUN,
        {"s.yaml": generic_trace(arrival_unit_s="-60"), "t.csv": GEN + "a,0,1,60\n"},
        "workload.trace.arrival_unit_s: Input should be greater than 0 (got -60)",
    ),
    "generic-mixed-time-formats": (
        RUN,
        {"s.yaml": generic_trace(), "t.csv": GEN + "a,0,1,60\nb,2017-10-09 07:01:55x,1,60\n"},
        "line 3, column 'submit': must be a timestamp like 2017-10-09 07:01:55",
    ),
    "generic-number-after-timestamps": (
        RUN,
        {"s.yaml": generic_trace(), "t.csv": GEN + "a,2017-10-09 07:01:55,1,60\nb,1000,1,60\n"},
        "t.csv: line 3, column 'submit': a number, but line 2 ('submit') has a timestamp; the "
        "times of a trace must be all numbers (seconds) or all timestamps (got '1000')",
    ),
    "generic-timestamp-after-numbers": (
        RUN,
        {"s.yaml": generic_trace(), "t.csv": GEN + "a,0,1,60\nb,2017-10-09 07:01:55,1,60\n"},
        "line 3, column 'submit': a timestamp, but line 2 ('submit') has a number; the times "
        "of a trace must be all numbers (seconds) or all timestamps (got '2017-10-09 07:01:55')",
    ),
    "generic-end-a-timestamp-arrival-a-number": (
        RUN,
        {
            "s.yaml": generic_trace().replace("duration: runtime", "end: runtime"),
            "t.csv": GEN + "a,0,1,2017-10-09 07:01:55\n",
        },
        "line 2, column 'runtime': a timestamp, but line 2 ('submit') has a number",
    ),
    "helios-number-after-timestamps": (
        RUN,
        {
            "s.yaml": trace_scenario("helios"),
            "t.csv": _bad_cell("helios", "submit_time", "5"),
        },
        "line 3, column 'submit_time': a number, but line 2 ('submit_time') has a timestamp",
    ),
    "generic-quote-never-closed": (
        RUN,
        {"s.yaml": generic_trace(), "t.csv": GEN + 'a,0,1,60\n"b,5,1,60\n'},
        "t.csv: line 3 has 1 field(s), the header has 4",
    ),
}


def test_the_table_has_distinct_cases():
    assert len(CASES) >= 120
    assert len({(tuple(a), str(f), c) for a, f, c in CASES.values()}) == len(CASES)


@pytest.mark.parametrize(("args", "files", "culprit"), params(CASES))
def test_bad_trace_is_one_line_and_exit_2(tmp_path, monkeypatch, args, files, culprit):
    # The cases name their files by absolute path (or give --traces-dir); the test's folder as
    # the trace root keeps this machine's traces, or DLCLUSTER_TRACES=none, out of them (a
    # Pollux workload looks up Pollux's runs under the root, and reads them after its rows).
    monkeypatch.setenv("DLCLUSTER_TRACES", str(tmp_path))
    check_case(tmp_path, monkeypatch, args, files, culprit)


def test_a_missing_absolute_trace_names_the_file_not_the_trace_root(tmp_path):
    """The trace root applies to relative paths only: a missing absolute one says so."""
    from dlcluster_gym.errors import TraceError
    from dlcluster_gym.workload.traces import resolve_trace

    with pytest.raises(TraceError) as ei:
        resolve_trace(tmp_path / "none.csv", tmp_path / "root")
    assert str(ei.value) == (
        f"trace file not found: {tmp_path}/none.csv (no such file; an absolute path)"
    )
