"""Trace root resolution and loaders for public DL cluster traces.

Formats (CSV with a header unless noted; extra columns are ignored; times in seconds):

- ``philly``: Pollux's Philly extract ``timestamp,duration,num_gpus,gpu_time,cluster``;
  timestamps like ``2017-10-09 07:01:55``; arrival = seconds since the earliest timestamp.
- ``tiresias``: ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``.
- ``itp-raw``: ElasticFlow's Microsoft ITP traces ``job_id,submission_time,duration,num_gpu``.
- ``itp-extracted``: the same jobs with labels
  ``job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration``.
- ``elasticflow-philly``: ElasticFlow's Philly CSV
  ``job_id,submit_time,...,model_name,...,num_gpu,...,duration,iteration``.
- ``pollux-workload``: Pollux workloads ``name,time,application,num_replicas,batch_size``;
  iterations come from Pollux's measured runs to convergence (see :func:`load_pollux_workload`).
- ``helios``: ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,
  end_time,duration,queue``; CPU-only (``gpu_num`` 0) and zero-length jobs are left out.
- ``alibaba-pai``: Alibaba PAI v2020 ``pai_job_table`` + ``pai_task_table`` (header optional).
- ``generic``: any CSV, with a column mapping (:func:`load_generic`).

Every loader returns a :class:`TraceJobs` sorted by arrival (stable) and raises
:class:`~dlcluster_gym.errors.TraceError` naming the file, line, column and value on bad input;
with ``on_error="skip"`` malformed rows are skipped, counted and reported in one warning.
"""

from __future__ import annotations

import csv
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dlcluster_gym.errors import TraceError

TraceFormat = Literal[
    "philly",
    "tiresias",
    "itp-raw",
    "itp-extracted",
    "elasticflow-philly",
    "pollux-workload",
    "helios",
    "alibaba-pai",
    "generic",
]
TRACE_FORMATS: tuple[str, ...] = (
    "philly",
    "tiresias",
    "itp-raw",
    "itp-extracted",
    "elasticflow-philly",
    "pollux-workload",
    "helios",
    "alibaba-pai",
    "generic",
)
OnError = Literal["fail", "skip"]
ENV_VAR = "DLCLUSTER_TRACES"

# Files of ../shared/traces used by presets and tests.
PHILLY_CSV = "pollux_adaptdl/traces/philly.csv"
TIRESIAS_60JOB_CSV = "tiresias/60_job.csv"
ITP_RAW_DIR = "elasticflow_itp/raw"
ITP_EXTRACTED_DIR = "elasticflow_itp/extracted"
ELASTICFLOW_PHILLY_CSV = "elasticflow_pkusys/philly_103959.csv"
POLLUX_WORKLOAD_DIR = "pollux_adaptdl/workloads"
POLLUX_TRACES_DIR = "pollux_adaptdl/traces"


# --------------------------------------------------------------------------- trace root


def default_trace_root() -> Path:
    """``../shared/traces`` next to the repository that holds the package."""
    repo = Path(__file__).resolve().parents[2]  # .../repo/dlcluster_gym/workload/traces.py
    return (repo / ".." / "shared" / "traces").resolve()


NO_TRACE_ROOT = "none"
"""``DLCLUSTER_TRACES=none``: no trace root, even where ``../shared/traces`` exists (a fresh
clone's view: trace tests skip, trace lookups raise). An empty value counts as unset."""


def trace_root(traces_dir: str | Path | None = None) -> Path:
    """The trace root: ``traces_dir``, else ``$DLCLUSTER_TRACES``, else ``../shared/traces``.

    Raises :class:`~dlcluster_gym.errors.TraceError` when ``traces_dir`` is None and
    ``$DLCLUSTER_TRACES`` is ``none`` (:data:`NO_TRACE_ROOT`, any case): no trace root.
    """
    if traces_dir is not None:
        return Path(traces_dir).expanduser().resolve()
    env = os.environ.get(ENV_VAR, "").strip()
    if env.lower() == NO_TRACE_ROOT:
        raise TraceError(
            f"no trace root is configured ({ENV_VAR}={env}); give one with --traces-dir DIR "
            f"or {ENV_VAR}=DIR (`dlcluster traces fetch all --to DIR` downloads the traces)"
        )
    if env:
        return Path(env).expanduser().resolve()
    return default_trace_root()


def traces_available(traces_dir: str | Path | None = None) -> bool:
    """Whether the trace root exists (tests skip trace-backed cases when it does not); false
    under ``DLCLUSTER_TRACES=none`` with no ``traces_dir``."""
    try:
        return trace_root(traces_dir).is_dir()
    except TraceError:
        return False


def resolve_trace(path: str | Path, traces_dir: str | Path | None = None) -> Path:
    """An absolute path as-is, else ``path`` under the trace root; raise if the file is absent
    (or, for a relative path, if there is no trace root: ``DLCLUSTER_TRACES=none``)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        full = p
    else:
        try:
            full = trace_root(traces_dir) / p
        except TraceError as exc:
            raise TraceError(f"trace file {p} needs the trace root: {exc}") from None
    if not full.is_file() and p.is_absolute():  # the trace root does not apply
        what = "a folder, not a file" if full.is_dir() else "no such file"
        raise TraceError(f"trace file not found: {full} ({what}; an absolute path)")
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

    ``iterations`` and ``model_names`` are None when the format has no such column, and so
    are the submission attributes ``vcs`` (virtual cluster or queue), ``users`` and
    ``job_names`` (the name a job was submitted with; recurring jobs share it).
    ``lines`` are 1-based line numbers in the file (for error messages). ``skipped`` counts
    malformed rows left out under ``on_error="skip"``.
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
    skipped: int = 0
    vcs: tuple[str, ...] | None = None
    users: tuple[str, ...] | None = None
    job_names: tuple[str, ...] | None = None

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

        def pick(values: tuple[str, ...] | None) -> tuple[str, ...] | None:
            return None if values is None else tuple(values[i] for i in idx)

        return TraceJobs(
            path=self.path,
            format=self.format,
            job_ids=tuple(self.job_ids[i] for i in idx),
            arrival_s=self.arrival_s[idx],
            duration_s=self.duration_s[idx],
            num_gpus=self.num_gpus[idx],
            lines=self.lines[idx],
            iterations=None if self.iterations is None else self.iterations[idx],
            model_names=pick(self.model_names),
            skipped=self.skipped,
            vcs=pick(self.vcs),
            users=pick(self.users),
            job_names=pick(self.job_names),
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


# A trace job running longer than the engine's default horizon (100 years) could never finish:
# such a duration is a malformed value, refused at its row.
MAX_DURATION_S = 100 * 365 * 86400.0
MAX_AMOUNT = 1e12  # iterations or a batch size: far beyond any real job's, well below overflow


def _p_positive(v: str) -> float:
    x = float(v)
    if not math.isfinite(x) or x <= 0:
        raise ValueError("must be a finite number > 0")
    return x


def _p_duration(v: str) -> float:
    """A duration in seconds: finite, > 0 and at most :data:`MAX_DURATION_S`."""
    x = _p_positive(v)
    if x > MAX_DURATION_S:
        raise ValueError(f"must be at most {MAX_DURATION_S:.4g} s (100 years)")
    return x


def _p_amount(v: str) -> float:
    """Iterations or a batch size: finite, > 0 and at most :data:`MAX_AMOUNT`."""
    x = _p_positive(v)
    if x > MAX_AMOUNT:
        raise ValueError(f"must be at most {MAX_AMOUNT:.0e}")
    return x


MAX_JOB_GPUS = 1_000_000  # a job asking for more is a malformed row (config.MAX_GPUS)


def _whole(v: str) -> int | None:
    """The integer a count's text means (``4``, ``4.0``, ``4e0``), or None when the text has a
    fractional part (``1.5``, and ``1.0000000000000001``, which a float would round to 1) or
    is not a finite number."""
    try:
        d = Decimal(v.strip())
    except InvalidOperation:
        raise ValueError("not a number") from None
    if not d.is_finite() or d != d.to_integral_value():
        return None
    return int(d)


def _p_gpus(v: str) -> int:
    x = _whole(v)
    if x is None or x < 1 or x > MAX_JOB_GPUS:
        raise ValueError(f"must be a positive integer <= {MAX_JOB_GPUS:,} (a whole GPU count)")
    return x


def _p_timestamp(v: str) -> float:
    try:
        dt = datetime.fromisoformat(v.strip())
    except ValueError:
        raise ValueError("must be a timestamp like 2017-10-09 07:01:55") from None
    if dt.tzinfo is not None:
        dt = dt.replace(tzinfo=None) - dt.utcoffset()
    return (dt - _EPOCH).total_seconds()


def _p_local_timestamp(v: str) -> float:
    """A timestamp without a time zone (Philly's are local times of one cluster: an offset on
    some rows would shift them against the others)."""
    try:
        dt = datetime.fromisoformat(v.strip())
    except ValueError:
        raise ValueError("must be a timestamp like 2017-10-09 07:01:55") from None
    if dt.tzinfo is not None:
        raise ValueError(
            "has a time zone; this format's timestamps are local times without one, like "
            "2017-10-09 07:01:55"
        )
    return (dt - _EPOCH).total_seconds()


def _p_str(v: str) -> str:
    s = v.strip()
    if not s:
        raise ValueError("must not be empty")
    return s


def _p_attr(v: str) -> str:
    """A submission attribute (VC, user, job name): any text, empty allowed."""
    return v.strip()


ATTRIBUTES: tuple[str, ...] = ("vc", "user", "job_name")
"""The submission attributes a trace may carry (``TraceJobs.vcs``/``users``/``job_names``)."""


def _header(path: Path) -> list[str]:
    """The stripped column names of a CSV's first row (empty for an empty file)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return [h.strip() for h in next(csv.reader(f), [])]
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except csv.Error as exc:
        raise TraceError(f"{path}: not a readable CSV file ({exc})") from None


_Parser = Callable[[str], object]


class _Stamp(float):
    """Seconds since 1970 read from a timestamp (a float that remembers it was one)."""

    __slots__ = ()


def _p_number_or_timestamp(v: str) -> float:
    """Seconds as a number, or an ISO timestamp (seconds since 1970, as a :class:`_Stamp`);
    :func:`_one_time_form` then checks that a trace does not mix the two."""
    try:
        return _p_time(v)
    except ValueError as exc:
        if "finite" in str(exc):
            raise
    return _Stamp(_p_timestamp(v))


def _time_text(x: float) -> str:
    if isinstance(x, _Stamp):
        return str(datetime.fromtimestamp(x, timezone.utc).replace(tzinfo=None))
    return f"{x:g}"


def _one_time_form(path: Path, columns: Mapping[str, Sequence[float]], lines: list[int]) -> None:
    """The time columns of a trace (read by :func:`_p_number_or_timestamp`) hold numbers only
    or timestamps only: a number among timestamps would be read as seconds while the
    timestamps are seconds since 1970 (a 50-year gap). The error names the first row of the
    other form and the row whose form it differs from."""
    first: tuple[bool, str, int] | None = None
    for k, line in enumerate(lines):
        for name, values in columns.items():
            stamp = isinstance(values[k], _Stamp)
            if first is None:
                first = (stamp, name, line)
            elif stamp != first[0]:
                form = ("a timestamp", "a number") if stamp else ("a number", "a timestamp")
                raise _bad(
                    path, line, name, _time_text(values[k]),
                    f"{form[0]}, but line {first[2]} ({first[1]!r}) has {form[1]}; the times "
                    "of a trace must be all numbers (seconds) or all timestamps",
                )  # fmt: skip


def _p_gpus0(v: str) -> int:
    x = _whole(v)
    if x is None or x < 0 or x > MAX_JOB_GPUS:
        raise ValueError(f"must be an integer in [0, {MAX_JOB_GPUS:,}] (a whole GPU count)")
    return x


def _p_nonneg(v: str) -> float:
    x = float(v)
    if not math.isfinite(x) or x < 0:
        raise ValueError("must be a finite number >= 0")
    return x


class _Skips:
    """Malformed rows left out under ``on_error="skip"`` (count and the first few reasons)."""

    def __init__(self, path: Path, on_error: str) -> None:
        if on_error not in ("fail", "skip"):
            raise TraceError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
        self.path, self.on_error, self.count, self.first = path, on_error, 0, []

    def bad(self, err: TraceError) -> None:
        if self.on_error == "fail":
            raise err
        self.count += 1
        if len(self.first) < 3:
            self.first.append(str(err).removeprefix(f"{self.path}: "))

    def warn(self) -> None:
        if self.count:
            warnings.warn(
                f"{self.path}: skipped {self.count} malformed row(s); first: "
                + "; ".join(self.first),
                stacklevel=3,
            )


def _read_columns(
    path: Path,
    columns: Sequence[tuple[str, _Parser]],
    on_error: str = "fail",
    names: Sequence[str] | None = None,
) -> tuple[list, list[int], int]:
    """Parse the named columns of a CSV: (one list per column, line numbers, rows skipped).

    ``names`` are the column names of a header-less file, used when its first row is not a
    header (Alibaba PAI tables ship without one).
    """
    try:
        return _read_csv(path, columns, on_error, names)
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except csv.Error as exc:
        raise TraceError(f"{path}: not a readable CSV file ({exc})") from None


def _not_utf8(path: Path) -> TraceError:
    """A file that is not UTF-8 text: where the first bad byte is, and what to do."""
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
        where = ""
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        where = f" (line {line}: byte 0x{raw[exc.start]:02x} at offset {exc.start})"
    return TraceError(
        f"{path}: not UTF-8 text{where}; a trace must be a UTF-8 CSV file (re-save it as "
        "UTF-8, e.g. iconv -f latin1 -t utf-8)"
    )


def _read_csv(
    path: Path,
    columns: Sequence[tuple[str, _Parser]],
    on_error: str,
    names: Sequence[str] | None,
) -> tuple[list, list[int], int]:
    skips = _Skips(path, on_error)
    with path.open(newline="", encoding="utf-8-sig") as f:  # a UTF-8 BOM is not a column name
        reader = csv.reader(f)
        first = next(reader, None)
        if first is None:
            raise TraceError(f"{path}: empty file (expected a header row)")
        header = [h.strip() for h in first]
        pending: list[list[str]] = []
        if names is not None and not set(c for c, _ in columns) <= set(header):
            header, pending = list(names), [first]
        missing = [c for c, _ in columns if c not in header]
        if missing:
            raise TraceError(
                f"{path}: missing column(s) {', '.join(missing)}; columns found: "
                f"{', '.join(header) or '(none)'}"
            )
        for c, _ in columns:
            if header.count(c) > 1:
                at = [i + 1 for i, h in enumerate(header) if h == c]
                raise TraceError(
                    f"{path}: column {c!r} appears {len(at)} times in the header (columns "
                    f"{', '.join(map(str, at))}); column names must be unique"
                )
        idx = [header.index(c) for c, _ in columns]
        parsers = [p for _, p in columns]
        cols = [c for c, _ in columns]
        out: list[list] = [[] for _ in columns]
        lines: list[int] = []
        width = len(header)
        for row in _chain(pending, reader):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            line = reader.line_num
            if any("\0" in c for c in row):
                raise TraceError(
                    f"{path}: line {line} holds a NUL byte; a trace must be a text (CSV) file, "
                    "not a binary one"
                )
            if not pending and [h.strip() for h in row] == header:
                raise TraceError(
                    f"{path}: line {line} repeats the header row (two files joined?); a trace "
                    "has one header, on line 1"
                )
            if len(row) < width:
                skips.bad(
                    TraceError(
                        f"{path}: line {line} has {len(row)} field(s), the header has {width}"
                    )
                )
                continue
            values = []
            for i, parse, name in zip(idx, parsers, cols, strict=True):
                v = row[i]
                try:
                    values.append(parse(v))
                except ValueError as exc:
                    msg = str(exc)
                    if msg.startswith("could not convert") or "invalid literal" in msg:
                        msg = "not a number"
                    skips.bad(_bad(path, line, name, v, msg))
                    break
            else:
                for k, v in enumerate(values):
                    out[k].append(v)
                lines.append(line)
    if not lines:  # the error says what the warning would have said
        why = (
            f" ({skips.count} malformed row(s) skipped; first: {skips.first[0]})"
            if skips.count
            else ""
        )
        raise TraceError(f"{path}: no jobs (header only){why}")
    skips.warn()
    return out, lines, skips.count


def _chain(pending: list[list[str]], reader: Any) -> Any:
    yield from pending
    yield from reader


def _check_unique(path: Path, job_ids: Sequence[str], lines: Sequence[int]) -> None:
    """A job id given twice is an error naming both lines (two rows for one job would
    silently double its work)."""
    if len(set(job_ids)) == len(job_ids):
        return
    seen: dict[str, int] = {}
    for jid, line in zip(job_ids, lines, strict=False):
        if jid in seen:
            raise TraceError(
                f"{path}: line {line}: job id {jid!r} appears twice (first on line {seen[jid]}); "
                "job ids must be unique"
            )
        seen[jid] = line


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
    skipped: int = 0,
    attrs: Mapping[str, Sequence[str]] | None = None,
) -> TraceJobs:
    """The loaded rows as :class:`TraceJobs` sorted by arrival; ``attrs`` maps submission
    attributes (``ATTRIBUTES``) to one value per row."""
    _check_unique(path, job_ids, lines)
    arr = np.asarray(arrival, dtype=np.float64)
    order = np.argsort(arr, kind="stable")
    got = {k: tuple(str(v[i]) for i in order) for k, v in (attrs or {}).items()}
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
        skipped=skipped,
        vcs=got.get("vc"),
        users=got.get("user"),
        job_names=got.get("job_name"),
    )
    if not len(jobs):
        raise TraceError(f"{path}: no jobs left after filtering")
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
    on_error: OnError = "fail",
) -> TraceJobs:
    """Pollux's Philly CSV; arrival = seconds since the earliest timestamp in the file. The
    ``cluster`` column, Philly's virtual cluster (the team queue a job was submitted to), is
    kept as each job's VC when the file has it."""
    p = resolve_trace(path, traces_dir)
    spec = [("timestamp", _p_local_timestamp), ("duration", _p_duration), ("num_gpus", _p_gpus)]
    has_vc = "cluster" in _header(p)
    if has_vc:
        spec.append(("cluster", _p_attr))
    values, lines, skipped = _read_columns(p, spec, on_error)
    ts, dur, gpus = values[:3]
    t = np.asarray(ts, dtype=np.float64)
    t -= t.min()
    ids = [f"philly-{ln}" for ln in lines]
    attrs = {"vc": values[3]} if has_vc else None
    return _finish(p, "philly", ids, t, dur, gpus, lines, None, None, time_window_s, skipped, attrs)


def load_tiresias(
    path: str | Path = TIRESIAS_60JOB_CSV,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
) -> TraceJobs:
    """Tiresias job CSV (``submit_time`` and ``duration`` in seconds)."""
    p = resolve_trace(path, traces_dir)
    (ids, gpus, t, its, models, dur), lines, skipped = _read_columns(
        p,
        [
            ("job_id", _p_str),
            ("num_gpu", _p_gpus),
            ("submit_time", _p_time),
            ("iterations", _p_amount),
            ("model_name", _p_str),
            ("duration", _p_duration),
        ],
        on_error,
    )
    return _finish(p, "tiresias", ids, t, dur, gpus, lines, its, models, time_window_s, skipped)


def load_itp_raw(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
) -> TraceJobs:
    """ElasticFlow ITP raw cluster CSV (all fields real; seconds)."""
    p = resolve_trace(path, traces_dir)
    (ids, t, dur, gpus), lines, skipped = _read_columns(
        p,
        [
            ("job_id", _p_str),
            ("submission_time", _p_time),
            ("duration", _p_duration),
            ("num_gpu", _p_gpus),
        ],
        on_error,
    )
    return _finish(p, "itp-raw", ids, t, dur, gpus, lines, None, None, time_window_s, skipped)


def load_itp_extracted(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
) -> TraceJobs:
    """ElasticFlow ITP extracted CSV (adds synthetic ``num_iteration`` and ``model_name``)."""
    p = resolve_trace(path, traces_dir)
    (ids, t, its, models, gpus, dur), lines, skipped = _read_columns(
        p,
        [
            ("job_id", _p_str),
            ("submission_time", _p_time),
            ("num_iteration", _p_amount),
            ("model_name", _p_str),
            ("num_gpu", _p_gpus),
            ("duration", _p_duration),
        ],
        on_error,
    )
    return _finish(
        p, "itp-extracted", ids, t, dur, gpus, lines, its, models, time_window_s, skipped
    )


def load_elasticflow_philly(
    path: str | Path = ELASTICFLOW_PHILLY_CSV,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
) -> TraceJobs:
    """ElasticFlow's Philly CSV (``submit_time``, ``num_gpu``, ``duration``, ``iteration``,
    ``model_name``; the ``real_*`` columns are ignored)."""
    p = resolve_trace(path, traces_dir)
    (ids, t, models, gpus, dur, its), lines, skipped = _read_columns(
        p,
        [
            ("job_id", _p_str),
            ("submit_time", _p_time),
            ("model_name", _p_str),
            ("num_gpu", _p_gpus),
            ("duration", _p_duration),
            ("iteration", _p_amount),
        ],
        on_error,
    )
    return _finish(
        p, "elasticflow-philly", ids, t, dur, gpus, lines, its, models, time_window_s, skipped
    )


def pollux_iterations(application: str, batch_size: float, pollux_traces: Path) -> float:
    """Iterations a Pollux application needs to converge at ``batch_size``: the last
    ``iteration`` of ``<app>/validation-<B>.csv``, B the measured batch size nearest in log."""
    files = {}
    for f in (pollux_traces / application).glob("validation-*.csv"):
        try:
            files[int(f.stem.split("-", 1)[1])] = f
        except ValueError:
            continue
    if not files:
        raise TraceError(
            f"no Pollux convergence runs for application {application!r} under "
            f"{pollux_traces / application} (expected validation-<batch>.csv files)"
        )
    nearest = min(files, key=lambda b: (abs(math.log(b / batch_size)), b))
    rows = files[nearest].read_text().strip().splitlines()
    header = rows[0].split(",")
    return float(rows[-1].split(",")[header.index("iteration")])


def load_pollux_workload(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
    pollux_traces: str | Path = POLLUX_TRACES_DIR,
) -> TraceJobs:
    """A Pollux workload CSV (``name,time,application,num_replicas,batch_size``).

    The file has no durations. Iterations are those Pollux measured to converge at the
    nearest batch size (:func:`pollux_iterations`, under ``pollux_traces`` in the trace root);
    ``duration_s`` is an estimate, iterations x the zoo model's one-GPU compute time (used only
    for load calculations). The application is the model name (all six are in the zoo).
    """
    from dlcluster_gym.errors import UnknownNameError
    from dlcluster_gym.workload.models import get_model

    p = resolve_trace(path, traces_dir)
    root = Path(pollux_traces)
    root = root if root.is_absolute() else trace_root(traces_dir) / root
    (ids, t, apps, gpus, bsz), lines, skipped = _read_columns(
        p,
        [
            ("name", _p_str),
            ("time", _p_time),
            ("application", _p_str),
            ("num_replicas", _p_gpus),
            ("batch_size", _p_amount),
        ],
        on_error,
    )
    its, dur = [], []
    cache: dict[tuple[str, float], float] = {}
    for app, b, line in zip(apps, bsz, lines, strict=True):
        try:
            compute = get_model(app).compute_s
        except UnknownNameError as exc:
            raise _bad(p, line, "application", app, f"unknown model; known: {exc.valid}") from None
        if (app, b) not in cache:
            cache[app, b] = pollux_iterations(app, b, root)
        its.append(cache[app, b])
        dur.append(cache[app, b] * compute)
    return _finish(
        p, "pollux-workload", ids, t, dur, gpus, lines, its, apps, time_window_s, skipped
    )


def load_helios(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
) -> TraceJobs:
    """Helios (SenseTime) job log; ``submit_time`` a timestamp or seconds, ``duration`` in
    seconds. CPU-only jobs (``gpu_num`` 0) and zero-length jobs are left out (not errors);
    arrival = seconds since the earliest submission kept. The submission attributes ``user``,
    ``vc`` and the job's name (column ``jobname`` or ``job_name``) are kept when present."""
    p = resolve_trace(path, traces_dir)
    header = _header(p)
    spec = [
        ("job_id", _p_str),
        ("submit_time", _p_number_or_timestamp),
        ("gpu_num", _p_gpus0),
        ("duration", _p_nonneg),
    ]
    name_col = next((c for c in ("jobname", "job_name") if c in header), None)
    present = [(k, c) for k, c in (("user", "user"), ("vc", "vc"), ("job_name", name_col))
               if c is not None and c in header]  # fmt: skip
    spec += [(c, _p_attr) for _, c in present]
    values, lines, skipped = _read_columns(p, spec, on_error)
    ids, t, gpus, dur = values[:4]
    _one_time_form(p, {"submit_time": t}, lines)
    keep = [i for i in range(len(lines)) if gpus[i] > 0 and dur[i] > 0]
    if not keep:
        raise TraceError(f"{p}: no GPU jobs (every row has gpu_num 0 or duration 0)")
    ta = np.asarray([t[i] for i in keep], dtype=np.float64)
    ta -= ta.min()
    return _finish(
        p,
        "helios",
        [ids[i] for i in keep],
        ta,
        [dur[i] for i in keep],
        [gpus[i] for i in keep],
        [lines[i] for i in keep],
        None,
        None,
        time_window_s,
        skipped,
        {k: [values[4 + n][i] for i in keep] for n, (k, _) in enumerate(present)},
    )


PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)


def _p_opt_float(v: str) -> float:
    v = v.strip()
    if not v:
        return math.nan
    x = float(v)
    if math.isinf(x) or x < 0:
        raise ValueError("must be a finite number >= 0 or empty")
    return x


def load_alibaba_pai(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
    task_path: str | Path | None = None,
) -> TraceJobs:
    """Alibaba PAI v2020 ``pai_job_table`` (``path``) joined with ``pai_task_table``
    (``task_path``, default ``pai_task_table.csv`` beside the job table).

    Per job: arrival = the job table's ``start_time`` (its submission), relative to the
    earliest; duration = last task ``end_time`` - first task ``start_time``; GPUs = ceil(sum
    over tasks of ``inst_num`` x ``plan_gpu`` / 100) (``plan_gpu`` is in percent of a GPU).
    Jobs without GPU tasks or without finished task times are left out (not errors).
    """
    p = resolve_trace(path, traces_dir)
    tp = resolve_trace(task_path if task_path is not None else p.with_name("pai_task_table.csv"))
    (jnames, jstart), jlines, skipped = _read_columns(
        p, [("job_name", _p_str), ("start_time", _p_nonneg)], on_error, PAI_JOB_COLUMNS
    )
    (tnames, inst, tstart, tend, pgpu), _, tskipped = _read_columns(
        tp,
        [
            ("job_name", _p_str),
            ("inst_num", _p_opt_float),
            ("start_time", _p_opt_float),
            ("end_time", _p_opt_float),
            ("plan_gpu", _p_opt_float),
        ],
        on_error,
        PAI_TASK_COLUMNS,
    )
    gpu_pct: dict[str, float] = {}
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for name, n, s, e, g in zip(tnames, inst, tstart, tend, pgpu, strict=True):
        if not math.isnan(g) and not math.isnan(n):
            gpu_pct[name] = gpu_pct.get(name, 0.0) + n * g
        if not (math.isnan(s) or math.isnan(e)) and e > s:
            first[name] = min(first.get(name, s), s)
            last[name] = max(last.get(name, e), e)
    ids, arr, dur, gpus, lines = [], [], [], [], []
    for name, start, line in zip(jnames, jstart, jlines, strict=True):
        pct = gpu_pct.get(name, 0.0)
        if pct <= 0 or name not in first:
            continue
        ids.append(name)
        arr.append(start)
        dur.append(last[name] - first[name])
        gpus.append(max(1, math.ceil(pct / 100.0 - 1e-9)))
        lines.append(line)
    if not ids:
        raise TraceError(f"{p}: no GPU jobs with finished tasks in {tp}")
    a = np.asarray(arr, dtype=np.float64)
    a -= a.min()
    return _finish(
        p, "alibaba-pai", ids, a, dur, gpus, lines, None, None, time_window_s, skipped + tskipped
    )


GENERIC_KEYS = (
    "arrival", "duration", "end", "num_gpus", "job_id", "model", "iterations", *ATTRIBUTES,
)  # fmt: skip


def load_generic(
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
    columns: Mapping[str, str] | None = None,
    time_unit_s: float = 1.0,
    arrival_unit_s: float | None = None,
    duration_unit_s: float | None = None,
) -> TraceJobs:
    """Any CSV with a header, given ``columns``: our field -> the file's column name.

    Required: ``arrival`` (seconds or timestamps), ``num_gpus``, and ``duration`` or ``end``
    (a finish time in the same unit as arrival); with both, they must agree (end = arrival +
    duration, to 1e-6 relative). Optional: ``job_id``, ``model``, ``iterations``, and the
    submission attributes ``vc``, ``user``, ``job_name`` (text, empty allowed). Numeric
    times are multiplied by ``time_unit_s`` (60 for minutes); ``arrival_unit_s`` (arrival and
    end) and ``duration_unit_s`` override it per column, e.g. epoch-second arrivals with
    durations in minutes. Arrival = time since the earliest arrival.
    """
    cols = dict(columns or {})
    unknown = sorted(set(cols) - set(GENERIC_KEYS))
    if unknown:
        raise TraceError(
            f"generic trace columns: unknown key(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(GENERIC_KEYS)}"
        )
    need = ["arrival", "num_gpus"]
    missing = [k for k in need if k not in cols]
    if missing or ("duration" not in cols and "end" not in cols):
        raise TraceError(
            "generic trace columns must map arrival, num_gpus and duration (or end); "
            f"got {cols or '{}'}"
        )
    units = {"time_unit_s": time_unit_s, "arrival_unit_s": arrival_unit_s,
             "duration_unit_s": duration_unit_s}  # fmt: skip
    for name, unit in units.items():
        if unit is not None and not (
            isinstance(unit, int | float) and math.isfinite(unit) and unit > 0
        ):
            raise TraceError(f"{name} must be a finite number > 0, got {unit!r}")
    a_unit = arrival_unit_s or time_unit_s
    d_unit = duration_unit_s or time_unit_s
    p = resolve_trace(path, traces_dir)
    spec: list[tuple[str, _Parser]] = [
        (cols["arrival"], _p_number_or_timestamp),
        (cols["num_gpus"], _p_gpus),
    ]
    spec.append(
        (cols["duration"], _p_positive)  # in duration_unit_s: bounded once in seconds below
        if "duration" in cols
        else (cols["end"], _p_number_or_timestamp)
    )
    optional = [k for k in ("job_id", "model", "iterations", *ATTRIBUTES) if k in cols]
    if "duration" in cols and "end" in cols:
        optional.append("end")
    for k in optional:
        parse = {"iterations": _p_amount, "end": _p_number_or_timestamp}.get(
            k, _p_attr if k in ATTRIBUTES else _p_str
        )
        spec.append((cols[k], parse))
    values, lines, skipped = _read_columns(p, spec, on_error)
    extra = dict(zip(optional, values[3:], strict=True))
    times = {cols["arrival"]: values[0]}
    if "end" in cols:
        times[cols["end"]] = extra["end"] if "duration" in cols else values[2]
    _one_time_form(p, times, lines)
    t = np.asarray(values[0], dtype=np.float64)
    if "duration" in cols:
        dur = np.asarray(values[2], dtype=np.float64) * d_unit
        if "end" in extra:
            end_s = (np.asarray(extra["end"], dtype=np.float64) - t) * a_unit
            off = np.abs(end_s - dur) > 1e-6 * np.maximum(1.0, np.abs(end_s))
            if off.any():
                i = int(np.flatnonzero(off)[0])
                raise _bad(
                    p, lines[i], cols["end"], str(extra["end"][i]),
                    f"end - arrival is {end_s[i]:g} s but {cols['duration']!r} says "
                    f"{dur[i]:g} s; map only one of duration and end, or fix the row",
                )  # fmt: skip
    else:
        dur = (np.asarray(values[2], dtype=np.float64) - t) * a_unit
        bad = np.flatnonzero(dur <= 0)
        if bad.size:
            i = int(bad[0])
            raise _bad(p, lines[i], cols["end"], str(values[2][i]), "must be after the arrival")
    long = np.flatnonzero(~(dur <= MAX_DURATION_S))  # inf and nan included
    if long.size:
        i = int(long[0])
        col = cols["duration"] if "duration" in cols else cols["end"]
        raise _bad(
            p, lines[i], col, str(values[2][i]),
            f"a duration of {dur[i]:.4g} s; it must be at most {MAX_DURATION_S:.4g} s (100 years)",
        )  # fmt: skip
    t = (t - t.min()) * a_unit
    ids = extra.get("job_id") or [f"job-{ln}" for ln in lines]
    return _finish(
        p, "generic", ids, t, dur, values[1], lines, extra.get("iterations"), extra.get("model"),
        time_window_s, skipped, {k: extra[k] for k in ATTRIBUTES if k in extra},
    )  # fmt: skip


_LOADERS: dict[str, Callable[..., TraceJobs]] = {
    "philly": load_philly,
    "tiresias": load_tiresias,
    "itp-raw": load_itp_raw,
    "itp-extracted": load_itp_extracted,
    "elasticflow-philly": load_elasticflow_philly,
    "pollux-workload": load_pollux_workload,
    "helios": load_helios,
    "alibaba-pai": load_alibaba_pai,
    "generic": load_generic,
}


def load_trace(
    format: str,
    path: str | Path,
    traces_dir: str | Path | None = None,
    time_window_s: tuple[float, float] | None = None,
    on_error: OnError = "fail",
    **options: Any,
) -> TraceJobs:
    """Load a trace of the given format (one of ``TRACE_FORMATS``); ``options`` go to the
    format's loader (``columns`` for generic, ``task_path`` for alibaba-pai)."""
    try:
        loader = _LOADERS[format]
    except KeyError:
        raise TraceError(
            f"unknown trace format {format!r}; known: {', '.join(TRACE_FORMATS)}"
        ) from None
    return loader(path, traces_dir=traces_dir, time_window_s=time_window_s, on_error=on_error,
                  **options)  # fmt: skip


# --------------------------------------------------------------------------- transforms


def limit_gpus(jobs: TraceJobs, max_gpus: int, mode: Literal["cap", "filter"]) -> TraceJobs:
    """Jobs wanting more than ``max_gpus``: ``cap`` gives them ``max_gpus`` (same duration),
    ``filter`` leaves them out. Raises if nothing is left."""
    if max_gpus < 1:
        raise TraceError(f"max_gpus must be >= 1, got {max_gpus}")
    over = jobs.num_gpus > max_gpus
    if mode == "cap":
        return replace(jobs, num_gpus=np.minimum(jobs.num_gpus, max_gpus))
    if mode != "filter":
        raise TraceError(f"gpu limit mode must be 'cap' or 'filter', got {mode!r}")
    if over.all():
        raise TraceError(f"{jobs.path}: every job wants more than {max_gpus} GPUs")
    return jobs.select(~over)


def rescale_arrivals(jobs: TraceJobs, num_gpus: int, target_load: float) -> TraceJobs:
    """Stretch or compress inter-arrival times so the offered load on ``num_gpus`` GPUs
    (:meth:`TraceJobs.offered_load`) equals ``target_load``; the first arrival stays put."""
    if not (math.isfinite(target_load) and target_load > 0):
        raise TraceError(f"target_load must be a finite number > 0, got {target_load!r}")
    load = jobs.offered_load(num_gpus)
    if not math.isfinite(load):
        raise TraceError(
            f"{jobs.path}: cannot rescale arrivals to a load: all {len(jobs)} job(s) arrive "
            "at the same time"
        )
    t0 = jobs.arrival_s[0]
    return replace(jobs, arrival_s=t0 + (jobs.arrival_s - t0) * (load / target_load))


# Pollux (OSDI'21, section 5.1) sorts Philly jobs into size classes by GPU time and gives each
# job a model of its class: small < 1 GPU-hour, medium 1-10, large 10-100, xlarge >= 100.
POLLUX_BUCKETS: tuple[tuple[float, tuple[str, ...]], ...] = (
    (1.0, ("cifar10", "ncf")),
    (10.0, ("deepspeech2", "bert")),
    (100.0, ("yolov3",)),
    (math.inf, ("imagenet",)),
)


def pollux_models(jobs: TraceJobs, rng: np.random.Generator) -> tuple[str, ...]:
    """A model per job by Pollux's GPU-time classes (:data:`POLLUX_BUCKETS`), uniform within
    the class, drawn from ``rng`` (one draw per job, in arrival order)."""
    gpu_hours = jobs.num_gpus * jobs.duration_s / 3600.0
    u = rng.random(len(jobs))
    out = []
    for h, x in zip(gpu_hours.tolist(), u.tolist(), strict=True):
        models = next(m for limit, m in POLLUX_BUCKETS if h < limit)
        out.append(models[int(x * len(models))])
    return tuple(out)
