"""Results of one run: per-job records, cluster time series and the papers' summary metrics.

Definitions (all times in seconds):
- JCT = finish - arrival; queueing = JCT - time holding GPUs (Dally 5.1.4).
- makespan = last finish - first arrival (Dally 5.1.4).
- comm overhead of a job = exposed communication seconds / compute seconds; ``avg_comm_overhead``
  averages it over finished jobs, ``avg_comm_s`` averages the exposed seconds.
- GPU utilization = integral of allocated GPUs over time / (GPUs x makespan).
- link contention (scenario ``contention``): ``contention_s`` of a job = extra exposed-comm
  seconds due to sharing links; its ``contention_slowdown`` = busy time (compute + exposed
  comm) / the same without the extra, 1.0 without contention; ``avg_contention_slowdown``
  averages it over finished jobs. ``avg_link_utilization`` = time average over the run of the
  ``link_util_mean`` series (mean carried demand / capacity over the links carrying jobs at
  each decision instant; only with contention on, where links are modeled). With contention on
  the time series also has ``link_util_mean`` / ``link_util_max`` (over links carrying jobs;
  0 when none), ``links_active`` and ``links_contended`` (links whose stretch exceeds 1).
Only ``wall_s`` depends on the machine; every other field is a function of scenario, policy
and seed.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.sim.state import DONE, DROPPED, EngineState

SUMMARY_KEYS = (
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
    "avg_contention_slowdown",
    "avg_link_utilization",
    "gpu_utilization",
    "throughput_jobs_per_h",
    "jobs_total",
    "jobs_completed",
    "jobs_unfinished",
    "jobs_dropped",
    "preemptions",
    "migrations",
    "resizes",
    "sim_events",
)


def _version() -> str:
    from dlcluster_gym.version import __version__

    return __version__


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else math.nan


def _mean(a: np.ndarray) -> float:
    return float(a.mean()) if a.size else math.nan


def tiers_label(mask: int) -> str:
    """'machine|rack' for a bitmask of tiers used."""
    return "|".join(t.label for t in Tier if mask & (1 << int(t)))


@dataclass
class Results:
    """Everything one run produced, tagged with what produced it."""

    scenario: str
    policy: str
    seed: int
    version: str
    summary: dict[str, Any]
    jobs: dict[str, np.ndarray]
    timeseries: dict[str, np.ndarray]
    policy_params: dict[str, Any] = field(default_factory=dict)
    scenario_config: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] | None = None
    is_bound: bool = False  # True for analytical bounds such as `ideal`
    # deployable, clairvoyant or bound (scheduler.KINDS); "" where not recorded
    kind: str = ""

    def metrics(self) -> dict[str, Any]:
        """Summary plus identity fields: the flat JSON object `simulate --format json` prints."""
        out = dict(self.summary)
        out.update(
            scenario=self.scenario,
            policy=self.policy,
            seed=self.seed,
            version=self.version,
            bound=self.is_bound,
            kind=self.kind or ("bound" if self.is_bound else ""),
        )
        if self.policy_params:
            out["policy_params"] = self.policy_params
        return out

    def job_rows(self) -> list[dict[str, Any]]:
        keys = list(self.jobs)
        cols = [self.jobs[k].tolist() for k in keys]
        return [dict(zip(keys, row, strict=True)) for row in zip(*cols, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": _jsonable(self.metrics()),
            "scenario_config": self.scenario_config,
            "jobs": {k: _jsonable(v.tolist()) for k, v in self.jobs.items()},
            "timeseries": {k: v.tolist() for k, v in self.timeseries.items()},
        }

    def save(self, out_dir: str | Path) -> Path:
        """Write metrics.json, results.json, jobs.csv, timeseries.csv, events.jsonl (if recorded)
        and jobs.parquet (if pyarrow is installed), each file atomically."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _atomic_write(out / "metrics.json", json.dumps(_jsonable(self.metrics()), indent=2))
        _atomic_write(out / "results.json", json.dumps(self.to_dict()))
        _write_csv(out / "jobs.csv", self.jobs)
        _write_csv(out / "timeseries.csv", self.timeseries)
        if self.events is not None:
            write_events(out / "events.jsonl", self.events)
        with contextlib.suppress(ImportError):  # Parquet is optional (pyarrow)
            self.to_parquet(out / "jobs.parquet")
        return out

    def to_parquet(self, path: str | Path) -> Path:
        """Per-job records as Parquet (needs pyarrow)."""
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError("Parquet output needs pyarrow: pip install pyarrow") from exc
        table = pa.table(dict(self.jobs.items()))
        tmp = Path(str(path) + ".tmp")
        pq.write_table(table, str(tmp))
        tmp.replace(path)
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> Results:
        """Read a results.json written by ``save``."""
        p = Path(path)
        if p.is_dir():
            p = p / "results.json"
        data = _read_results(p)
        m = data["metrics"]
        summary = {
            k: (math.nan if m.get(k) is None else m[k])
            for k in m
            if k not in ("scenario", "policy", "seed", "version", "bound", "kind", "policy_params")
        }
        return cls(
            scenario=m["scenario"],
            policy=m["policy"],
            seed=m["seed"],
            version=m["version"],
            summary=summary,
            jobs={k: np.asarray(v) for k, v in data["jobs"].items()},
            timeseries={k: np.asarray(v) for k, v in data["timeseries"].items()},
            policy_params=m.get("policy_params", {}),
            scenario_config=data.get("scenario_config", {}),
            is_bound=m.get("bound", False),
            kind=m.get("kind") or "",
        )


RESULTS_SECTIONS = ("metrics", "jobs", "timeseries")
IDENTITY_KEYS = ("scenario", "policy", "seed", "version")


def read_json_object(p: Path, what: str, fix: str = "") -> dict[str, Any]:
    """The JSON object in file ``p``; a :class:`~dlcluster_gym.errors.ConfigError` naming the
    file and ``what`` it should be (then ``fix``, how to repair it) when it is unreadable, not
    JSON or not an object."""
    fix = f" ({fix})" if fix else ""
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not UTF-8 text; expected {what}{fix}") from None
    except ValueError as exc:
        raise ConfigError(f"{p}: not valid JSON ({exc}); expected {what}{fix}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{p}: holds a JSON {type(data).__name__}, not {what} (a JSON object){fix}"
        )
    return data


def _read_results(p: Path) -> dict[str, Any]:
    """A results.json checked for what ``Results.load`` reads (one-line errors naming it)."""
    what = "the results.json of `dlcluster simulate --out`"
    data = read_json_object(p, what)
    for key in RESULTS_SECTIONS:
        if not isinstance(data.get(key), dict):
            raise ConfigError(
                f"{p}: {key!r} must be a JSON object, got {data.get(key, '(missing)')!r:.60}; "
                f"expected {what}"
            )
    missing = [k for k in IDENTITY_KEYS if k not in data["metrics"]]
    if missing:
        raise ConfigError(f"{p}: metrics lacks {', '.join(missing)}; expected {what}")
    for key in SUMMARY_KEYS:
        v = data["metrics"].get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise ConfigError(f"{p}: metrics.{key} must be a number, got {v!r:.60}")
    for section in ("jobs", "timeseries"):
        lengths = set()
        for key, col in data[section].items():
            if not isinstance(col, list):
                raise ConfigError(
                    f"{p}: {section}.{key} must be a list (one value per "
                    f"{'job' if section == 'jobs' else 'instant'}), got {col!r:.60}; "
                    f"expected {what}"
                )
            lengths.add(len(col))
        if len(lengths) > 1:
            raise ConfigError(
                f"{p}: the {section} columns have different lengths ({sorted(lengths)}); "
                f"expected {what}"
            )
    return data


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return _jsonable(float(x))
    return x


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _write_csv(path: Path, cols: dict[str, np.ndarray]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(cols))
        for row in zip(*(c.tolist() for c in cols.values()), strict=True):
            w.writerow(row)
    tmp.replace(path)


def write_events(path: str | Path, events: list[dict[str, Any]]) -> None:
    """One JSON object per line."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


def contention_slowdown(
    compute_s: np.ndarray, comm_s: np.ndarray, contention_s: np.ndarray
) -> np.ndarray:
    """Per job, busy time / busy time without the contention stretch (1 where no work done)."""
    busy = compute_s + comm_s
    base = busy - contention_s
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(base > 0, busy / base, 1.0)


def _time_average(t: np.ndarray, v: np.ndarray) -> float:
    """Time average of a step series sampled at ``t`` (each value holds until the next)."""
    if t.size < 2 or t[-1] <= t[0]:
        return float(v[0]) if v.size else math.nan
    return float(np.sum(np.diff(t) * v[:-1]) / (t[-1] - t[0]))


def overhead_ratio(comm_s: np.ndarray, compute_s: np.ndarray) -> np.ndarray:
    """Per-job exposed communication / compute (0 where no compute was done)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(compute_s > 0, comm_s / compute_s, 0.0)


def summarize(
    arrival: np.ndarray,
    finish: np.ndarray,
    run_s: np.ndarray,
    comm_s: np.ndarray,
    compute_s: np.ndarray,
    gpus: np.ndarray,
    num_gpus_cluster: int,
    busy_integral: float | None = None,
) -> dict[str, float]:
    """The papers' summary metrics from per-job arrays (NaN finish = unfinished)."""
    done = ~np.isnan(finish)
    jct = (finish - arrival)[done]
    queue = (finish - arrival - run_s)[done]
    makespan = float(finish[done].max() - arrival.min()) if done.any() else math.nan
    overhead = overhead_ratio(comm_s[done], compute_s[done])
    if busy_integral is None:
        busy_integral = float((run_s[done] * gpus[done]).sum())
    has_gpus = num_gpus_cluster > 0 and makespan and makespan > 0  # CPU-only: no GPU util
    util = busy_integral / (num_gpus_cluster * makespan) if has_gpus else math.nan
    return {
        "makespan_s": makespan,
        "avg_jct_s": _mean(jct),
        "median_jct_s": _pct(jct, 50),
        "p95_jct_s": _pct(jct, 95),
        "p99_jct_s": _pct(jct, 99),
        "avg_queue_s": _mean(queue),
        "p95_queue_s": _pct(queue, 95),
        "p99_queue_s": _pct(queue, 99),
        "avg_comm_s": _mean(comm_s[done]),
        "avg_comm_overhead": _mean(overhead),
        "gpu_utilization": util,
        "throughput_jobs_per_h": (
            float(done.sum()) / makespan * 3600.0 if makespan and makespan > 0 else math.nan
        ),
    }


def build_results(engine: EngineState, wall_s: float) -> Results:
    """Collect an engine's state into a Results object."""
    jobs = engine.jobs
    arrival = np.array([j.arrival_s for j in jobs], dtype=np.float64)
    ngpu = np.array([j.num_gpus for j in jobs], dtype=np.int64)
    admitted = engine.status != DROPPED
    ts = engine.timeseries()
    busy_integral = float(np.sum(np.diff(ts["t"]) * ts["busy_gpus"][:-1])) if ts["t"].size else 0.0
    summary = summarize(
        arrival[admitted],
        engine.finish[admitted],
        engine.run_s[admitted],
        engine.comm_s[admitted],
        engine.compute_s[admitted],
        ngpu[admitted],
        engine.cluster.num_gpus,
        busy_integral,
    )
    n_done = int((engine.status == DONE).sum())
    slowdown = contention_slowdown(engine.compute_s, engine.comm_s, engine.contention_s)
    finished = engine.status == DONE
    summary["avg_contention_slowdown"] = _mean(slowdown[finished])
    if "link_util_mean" in ts:
        summary["avg_link_utilization"] = _time_average(ts["t"], ts["link_util_mean"])
    summary.update(
        jobs_total=int(admitted.sum()),
        jobs_completed=n_done,
        jobs_unfinished=int(admitted.sum()) - n_done,
        jobs_dropped=int((~admitted).sum()),
        preemptions=int(engine.preemptions.sum()),
        migrations=int(engine.migrations.sum()),
        resizes=int(engine.resizes.sum()),
        sim_events=int(engine.sim_events),
        wall_s=wall_s,
    )
    status_names = np.array(["pending", "waiting", "running", "finished", "dropped"])
    overhead = overhead_ratio(engine.comm_s, engine.compute_s)
    job_cols = {
        "job_id": np.arange(len(jobs)),
        "name": np.array([j.name or str(j.job_id) for j in jobs]),
        "model": np.array([j.model for j in jobs]),
        "num_gpus": ngpu,
        "iterations": engine.iterations,
        "arrival_s": arrival,
        "first_start_s": engine.first_start,
        "finish_s": engine.finish,
        "jct_s": engine.finish - arrival,
        "queue_s": engine.finish - arrival - engine.run_s,
        "run_s": engine.run_s,
        "overhead_s": engine.overhead_s,
        "compute_s": engine.compute_s,
        "comm_s": engine.comm_s,
        "comm_overhead": overhead,
        "contention_s": engine.contention_s,
        "contention_slowdown": slowdown,
        "preemptions": engine.preemptions,
        "migrations": engine.migrations,
        "tiers": np.array([tiers_label(int(m)) for m in engine.tiers_used]),
        "status": status_names[engine.status],
    }
    params = getattr(engine.policy, "params", {}) or {}
    return Results(
        scenario=engine.scenario.name,
        policy=engine.policy_name,
        seed=engine.scenario.seed,
        version=_version(),
        summary=summary,
        jobs=job_cols,
        timeseries=ts,
        policy_params=dict(params),
        scenario_config=engine.scenario.model_dump(mode="json"),
        events=engine.event_log,
    )
