"""Trace root resolution and loaders for public DL cluster traces.

Formats (CSV with a header; extra columns are ignored):

- ``philly``: Pollux's Philly extract ``timestamp,duration,num_gpus,gpu_time,cluster``;
  timestamps like ``2017-10-09 07:01:55``; arrival = seconds since the earliest timestamp.
- ``tiresias``: ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``.
- ``itp-raw``: ElasticFlow's Microsoft ITP traces ``job_id,submission_time,duration,num_gpu``.
- ``itp-extracted``: the same jobs with labels
  ``job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration``.

Every loader returns a :class:`TraceJobs` sorted by arrival (stable) and raises
:class:`~dlcluster_gym.errors.TraceError` naming the file, line, column and value on bad input.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np

from dlcluster_gym.errors import TraceError

TraceFormat = Literal["philly", "tiresias", "itp-raw", "itp-extracted"]
TRACE_FORMATS: tuple[str, ...] = ("philly", "tiresias", "itp-raw", "itp-extracted")
ENV_VAR = "DLCLUSTER_TRACES"

# Files of ../shared/traces used by presets and tests.
PHILLY_CSV = "pollux_adaptdl/traces/philly.csv"
TIRESIAS_60JOB_CSV = "tiresias/60_job.csv"
ITP_RAW_DIR = "elasticflow_itp/raw"
ITP_EXTRACTED_DIR = "elasticflow_itp/extracted"


# --------------------------------------------------------------------------- trace root


def default_trace_root() -> Path:
    """``../shared/traces`` next to the repository that holds the package."""
    repo = Path(__file__).resolve().parents[2]  # .../repo/dlcluster_gym/workload/traces.py
    return (repo / ".." / "shared" / "traces").resolve()


def trace_root(traces_dir: str | Path | None = None) -> Path:
    """The trace root: ``traces_dir``, else ``$DLCLUSTER_TRACES``, else ``../shared/traces``."""
    if traces_dir is not None:
        return Path(traces_dir).expanduser().resolve()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return default_trace_root()


def traces_available(traces_dir: str | Path | None = None) -> bool:
    """Whether the trace root exists (tests skip trace-backed cases when it does not)."""
    return trace_root(traces_dir).is_dir()


def resolve_trace(path: str | Path, traces_dir: str | Path | None = None) -> Path:
    """An absolute path as-is, else ``path`` under the trace root; raise if the file is absent."""
    p = Path(path).expanduser()
    full = p if p.is_absolute() else trace_root(traces_dir) / p
    if not full.is_file():
        raise TraceError(
            f"trace file not found: {full} (trace root {trace_root(traces_dir)}); set the trace "
            f"root with --traces-dir or the {ENV_VAR} environment variable"
        )
    return full


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, eq=False)
class TraceJobs:
    """Jobs of one trace, sorted by arrival (ties keep file order); arrays are parallel.

    ``iterations`` and ``model_names`` are None when the format has no such column.
    ``lines`` are 1-based line numbers in the file (for error messages).
    """

    path: Path
    format: str
    job_ids: tuple[str, ...]
    arrival_s: np.ndarray
    duration_s: np.ndarray
    num_gpus: np.ndarray
    lines: np.ndarray
    iterations: np.ndarray | None = None
    model_names: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def gpu_seconds(self) -> float:
        """Total GPU time (sum of num_gpus x duration)."""
        return float(np.sum(self.num_gpus * self.duration_s))

    def offered_load(self, num_gpus: int) -> float:
        """GPU time over (cluster GPUs x arrival span): the fraction of GPUs kept busy."""
        span = float(self.arrival_s.max() - self.arrival_s.min()) if len(self) else 0.0
        if span <= 0:
            return math.inf
        return self.gpu_seconds() / (num_gpus * span)

    def select(self, mask: np.ndarray) -> TraceJobs:
        """The jobs where ``mask`` is true (order kept)."""
        idx = np.flatnonzero(mask)
        return TraceJobs(
            path=self.path,
            format=self.format,
            job_ids=tuple(self.job_ids[i] for i in idx),
            arrival_s=self.arrival_s[idx],
            duration_s=self.duration_s[idx],
            num_gpus=self.num_gpus[idx],
            lines=self.lines[idx],
            iterations=None if self.iterations is None else self.iterations[idx],
            model_names=None
            if self.model_names is None
            else tuple(self.model_names[i] for i in idx),
        )


# --------------------------------------------------------------------------- parsing

_EPOCH = datetime(1970, 1, 1)


def _bad(path: Path, line: int, col: str, value: str, why: str) -> TraceError:
    return TraceError(f"{path}: line {line}, column {col!r}: {why} (got {value!r})")


def _p_time(v: str) -> float:
    x = float(v)
    if not math.isfinite(x) or x < 0:
        raise ValueError("must be a finite number >= 0")
    return x


def _p_duration(v: str) -> float:
    x = float(v)
    if not math.isfinite(x) or x <= 0:
        raise ValueError("must be a finite number > 0")
    return x


def _p_gpus(v: str) -> int:
    x = float(v)
    if not math.isfinite(x) or x != int(x) or x < 1:
        raise ValueError("must be a positive integer")
    return int(x)


def _p_timestamp(v: str) -> float:
    try:
        dt = datetime.fromisoformat(v.strip())
    except ValueError:
        raise ValueError("must be a timestamp like 2017-10-09 07:01:55") from None
    if dt.tzinfo is not None:
        dt = dt.replace(tzinfo=None) - dt.utcoffset()
    return (dt - _EPOCH).total_seconds()


def _p_str(v: str) -> str:
    s = v.strip()
    if not s:
        raise ValueError("must not be empty")
    return s


_Parser = Callable[[str], object]


def _read_columns(path: Path, columns: Sequence[tuple[str, _Parser]]) -> tuple[list, list[int]]:
    """Parse the named columns of a CSV: (one list per column, line numbers)."""
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise TraceError(f"{path}: empty file (expected a header row)")
        header = [h.strip() for h in header]
        missing = [c for c, _ in columns if c not in header]
        if missing:
            raise TraceError(
                f"{path}: missing column(s) {', '.join(missing)}; columns found: "
                f"{', '.join(header) or '(none)'}"
            )
        idx = [header.index(c) for c, _ in columns]
        parsers = [p for _, p in columns]
        names = [c for c, _ in columns]
        out: list[list] = [[] for _ in columns]
        lines: list[int] = []
        width = len(header)
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            line = reader.line_num
            if len(row) < width:
                raise TraceError(
                    f"{path}: line {line} has {len(row)} field(s), the header has {width}"
                )
            for k, (i, parse) in enumerate(zip(idx, parsers, strict=True)):
                v = row[i]
                try:
                    out[k].append(parse(v))
                except ValueError as exc:
                    msg = str(exc)
                    if msg.startswith("could not convert") or "invalid literal" in msg:
                        msg = "not a number"
                    raise _bad(path, line, names[k], v, msg) from None
            lines.append(line)
    if not lines:
        raise TraceError(f"{path}: no jobs (header only)")
    return out, lines


def _finish(
    path: Path,
    fmt: str,
    job_ids: Sequence[str],
    arrival: Sequence[float],
    duration: Sequence[float],
    gpus: Sequence[int],
    lines: Sequence[int],
    iterations: Sequence[float] | None,
    models: Sequence[str] | None,
    time_window_s: tuple[float, float] | None,
) -> TraceJobs:
    arr = np.asarray(arrival, dtype=np.float64)
    order = np.argsort(arr, kind="stable")
    jobs = TraceJobs(
        path=path,
        format=fmt,
        job_ids=tuple(job_ids[i] for i in order),
        arrival_s=arr[order],
        duration_s=np.asarray(duration, dtype=np.float64)[order],
        num_gpus=np.asarray(gpus, dtype=np.int64)[order],
        lines=np.asarray(lines, dtype=np.int64)[order],
        iterations=None if iterations is None else np.asarray(iterations, np.float64)[order],
        model_names=None if models is None else tuple(models[i] for i in order),
    )
    if time_window_s is None:
        return jobs
    start, end = (float(x) for x in time_window_s)
    if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
        raise TraceError(
            f"{path}: time_window_s must satisfy 0 <= start < end, got {time_window_s}"
        )
    mask = (jobs.arrival_s >= start) & (jobs.arrival_s < end)
    if not mask.any():
        raise TraceError(
            f"{path}: no job arrives in time window [{start:g}, {end:g}) s; arrivals span "
            f"[{jobs.arrival_s[0]:g}, {jobs.arrival_s[-1]:g}] s"
        )
    return jobs.select(mask)


# --------------------------------------------------------------------------- loaders


def load_philly(
    path: str | Path = PHILLY_CSV,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
) -> TraceJobs:
    """Pollux's Philly CSV; arrival = seconds since the earliest timestamp in the file."""
    p = resolve_trace(path, traces_dir)
    (ts, dur, gpus), lines = _read_columns(
        p, [("timestamp", _p_timestamp), ("duration", _p_duration), ("num_gpus", _p_gpus)]
    )
    t = np.asarray(ts, dtype=np.float64)
    t -= t.min()
    ids = [f"philly-{ln}" for ln in lines]
    return _finish(p, "philly", ids, t, dur, gpus, lines, None, None, time_window_s)


def load_tiresias(
    path: str | Path = TIRESIAS_60JOB_CSV,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
) -> TraceJobs:
    """Tiresias job CSV (``submit_time`` and ``duration`` in seconds)."""
    p = resolve_trace(path, traces_dir)
    (ids, gpus, t, its, models, dur), lines = _read_columns(
        p,
        [
            ("job_id", _p_str),
            ("num_gpu", _p_gpus),
            ("submit_time", _p_time),
            ("iterations", _p_duration),
            ("model_name", _p_str),
            ("duration", _p_duration),
        ],
    )
    return _finish(p, "tiresias", ids, t, dur, gpus, lines, its, models, time_window_s)


def load_itp_raw(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
) -> TraceJobs:
    """ElasticFlow ITP raw cluster CSV (all fields real; seconds)."""
    p = resolve_trace(path, traces_dir)
    (ids, t, dur, gpus), lines = _read_columns(
        p,
        [
            ("job_id", _p_str),
            ("submission_time", _p_time),
            ("duration", _p_duration),
            ("num_gpu", _p_gpus),
        ],
    )
    return _finish(p, "itp-raw", ids, t, dur, gpus, lines, None, None, time_window_s)


def load_itp_extracted(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
) -> TraceJobs:
    """ElasticFlow ITP extracted CSV (adds synthetic ``num_iteration`` and ``model_name``)."""
    p = resolve_trace(path, traces_dir)
    (ids, t, its, models, gpus, dur), lines = _read_columns(
        p,
        [
            ("job_id", _p_str),
            ("submission_time", _p_time),
            ("num_iteration", _p_duration),
            ("model_name", _p_str),
            ("num_gpu", _p_gpus),
            ("duration", _p_duration),
        ],
    )
    return _finish(p, "itp-extracted", ids, t, dur, gpus, lines, its, models, time_window_s)


_LOADERS: dict[str, Callable[..., TraceJobs]] = {
    "philly": load_philly,
    "tiresias": load_tiresias,
    "itp-raw": load_itp_raw,
    "itp-extracted": load_itp_extracted,
}


def load_trace(
    format: str,
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
) -> TraceJobs:
    """Load a trace of the given format (one of ``TRACE_FORMATS``)."""
    try:
        loader = _LOADERS[format]
    except KeyError:
        raise TraceError(
            f"unknown trace format {format!r}; known: {', '.join(TRACE_FORMATS)}"
        ) from None
    return loader(path, traces_dir=traces_dir, time_window_s=time_window_s)
