"""Run a suite's cells on local processes or a Ray cluster; one file pair per finished cell.

Workers only compute: :func:`run_cell` returns the cell's row and its plot arrays, and the
driver writes ``cells/<id>.npz`` then ``cells/<id>.json`` (each atomically; the JSON marks the
cell finished). A run killed half way therefore loses only the cells in flight, and
``resume=True`` reuses a finished cell only when everything that determines it (suite,
scenario config hash, policy, parameters, seed, package version, and the hash of the code and
presets that computed it, an agent's checkpoint included: ``leaderboard.fingerprint``) is
unchanged and it did not fail; other cells rerun, with a warning naming them and why.

Every row records its entrant's ``kind`` (deployable, clairvoyant or bound:
:func:`~dlcluster_gym.scheduler.policy_kind`). It follows from the policy, its parameters and
the code, which the fingerprint covers, so it is not a fingerprint key of its own; a row
written before kinds were recorded gets its kind from its policy and parameters when read.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import signal
import socket
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.errors import ConfigError, DLClusterError, NotApplicableError
from dlcluster_gym.leaderboard.fingerprint import cell_code
from dlcluster_gym.leaderboard.suite import (
    AGENT_PREFIX,
    Cell,
    Suite,
    agent_support,
    entrant_kind,
    file_hash,
)
from dlcluster_gym.sim.results import SUMMARY_KEYS, _jsonable
from dlcluster_gym.workers import die_with_parent

CELLS_DIR = "cells"
SUITE_FILE = "suite.json"  # the resolved suite of a run directory (see save_suite)
TIMESERIES_POINTS = 1000  # time series are resampled on this many instants for plots
STATUS_OK, STATUS_NA, STATUS_ERROR = "ok", "n/a", "error"


def resolve_entrant(policy: str, params: dict[str, Any]) -> str:
    """What ``simulate`` gets for an entrant: the one place entrants are resolved.

    Registered names and ``pkg.mod:Class`` paths go through the policy registry; so do
    ``agent:PATH`` entrants once the registry supports them (until then, a clear error).
    """
    if policy.startswith(AGENT_PREFIX) and not agent_support(policy):
        raise ConfigError(
            f"entrant {policy!r}: this installation has no agent support yet (agent:PATH "
            "entrants need the agents package)"
        )
    return policy


def _resample(t: np.ndarray, v: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A step series sampled at ``n`` evenly spaced instants (value = last sample at or before)."""
    if t.size <= n:
        return t.astype(np.float64), v.astype(np.float64)
    grid = np.linspace(t[0], t[-1], n)
    idx = np.searchsorted(t, grid, side="right") - 1
    return grid, v[np.clip(idx, 0, t.size - 1)].astype(np.float64)


def _version() -> str:
    from dlcluster_gym.version import __version__

    return __version__


UNHASHED_WHEN_UNSET: tuple[tuple[str, str], ...] = (("workload", "groups"),)
"""Scenario options added after leaderboards were published, left out of the hash while
unset (None), so that the hash of a preset that does not use them stays what it was."""


def scenario_hash(scenario: str, seed: int) -> tuple[str, int]:
    """(short hash of the scenario config a cell runs, its cluster's GPU count); the hash
    changes whenever the preset does."""
    from dlcluster_gym.config import load_scenario

    cfg = load_scenario(scenario, seed=seed)
    data = cfg.model_dump(mode="json")
    for section, key in UNHASHED_WHEN_UNSET:
        if data.get(section, {}).get(key, 0) is None:
            del data[section][key]
    text = json.dumps(data, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12], cfg.cluster.num_gpus


def _base_row(cell: Cell, suite: str) -> dict[str, Any]:
    return {
        "id": cell.id,
        "suite": suite,
        "scenario": cell.scenario,
        "entrant": cell.entrant,
        "policy": cell.policy,
        "params": cell.params_json(),
        "kind": entrant_kind(cell.run_policy, cell.params_json()),
        "seed": cell.seed,
        "version": _version(),
        "code": cell_code(cell.run_policy),
        # an agent's checkpoint by content (its path is the suite's, relative to the suite file)
        "checkpoint": None if cell.checkpoint_file is None else file_hash(cell.checkpoint_file),
    }


def run_cell(
    cell: Cell,
    suite: str = "",
    traces_dir: str | Path | None = None,
    time_limit_s: float | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Run one cell: (row, arrays for plots). Never raises for a policy's failure: a
    :class:`NotApplicableError` gives status ``n/a``, any other exception status ``error``,
    and so does running past ``time_limit_s`` seconds of wall clock (a ``TimeLimitError``
    naming the policy and the simulated time; ``sim.limits`` says how it interrupts)."""
    from dlcluster_gym.api import simulate

    row = _base_row(cell, suite)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        row["scenario_hash"], num_gpus = scenario_hash(cell.run_scenario, cell.seed)
        res = simulate(
            cell.run_scenario,
            resolve_entrant(cell.run_policy, cell.params),
            cell.seed,
            policy_params=cell.params,
            traces_dir=traces_dir,
            time_limit_s=time_limit_s,
            time_limit_of="the cell",
        )
    except NotApplicableError as exc:
        row.update(status=STATUS_NA, reason=str(exc), wall_s=time.perf_counter() - t0)
        return row, {}
    except Exception as exc:  # a failing policy is one failed cell, not a failed suite
        reason = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, DLClusterError):
            reason += "\n" + "".join(traceback.format_exception(exc)[-3:])
        row.update(status=STATUS_ERROR, reason=reason, wall_s=time.perf_counter() - t0)
        return row, {}
    row.update(status=STATUS_OK, reason="", bound=res.is_bound)
    row["num_gpus"] = num_gpus
    row.update({k: res.summary.get(k, math.nan) for k in SUMMARY_KEYS})
    row["wall_s"] = res.summary.get("wall_s", time.perf_counter() - t0)
    row["cpu_s"] = time.process_time() - c0  # the cell's process CPU seconds, load included
    jobs, ts = res.jobs, res.timeseries
    finished = ~np.isnan(np.asarray(jobs["finish_s"], dtype=np.float64))
    arrays: dict[str, np.ndarray] = {
        "jct_s": np.asarray(jobs["jct_s"], dtype=np.float64)[finished],
        "comm_overhead": np.asarray(jobs["comm_overhead"], dtype=np.float64)[finished],
    }
    if ts.get("t") is not None and np.asarray(ts["t"]).size:
        t = np.asarray(ts["t"], dtype=np.float64)
        for key in ("busy_gpus", "remaining"):
            if key in ts:
                arrays["ts_t"], arrays[f"ts_{key}"] = _resample(
                    t, np.asarray(ts[key]), TIMESERIES_POINTS
                )
    return _jsonable(row), arrays


# --------------------------------------------------------------------------- storage


def _atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save_suite(out: Path, suite: Suite) -> None:
    """Record the resolved suite next to its cells (what render and verify read back)."""
    out.mkdir(parents=True, exist_ok=True)
    data = asdict(suite)
    data["entrants"] = [e.model_dump() for e in suite.entrants]
    data["cells"] = [c.id for c in suite.cells()]
    _atomic_bytes(out / SUITE_FILE, json.dumps(data, indent=1).encode())


def write_cell(out: Path, row: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Arrays first, then the row: a cell counts as finished once its JSON exists."""
    cells = out / CELLS_DIR
    cells.mkdir(parents=True, exist_ok=True)
    if arrays:
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        _atomic_bytes(cells / f"{row['id']}.npz", buf.getvalue())
    _atomic_bytes(cells / f"{row['id']}.json", json.dumps(row, indent=1).encode())


def finished_ids(out: Path) -> set[str]:
    """Ids of the cells already written under ``out``."""
    return {p.stem for p in (out / CELLS_DIR).glob("*.json")}


def read_rows(out: Path, ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows written under ``out`` (all, or those in ``ids``, in that order); a row without
    a ``kind`` (written before kinds were recorded) gets its entrant's kind."""
    cells = out / CELLS_DIR
    if ids is None:
        ids = sorted(finished_ids(out))
    rows = [read_row(cells / f"{i}.json") for i in ids if (cells / f"{i}.json").is_file()]
    return [with_kind(r) for r in rows]


# What every row has, with its type (rows of every version of the package have these).
ROW_FIELDS: dict[str, Any] = {
    "id": str, "scenario": str, "entrant": str, "policy": str, "params": (str, dict),
    "seed": int, "status": str,
}  # fmt: skip
STATUSES = (STATUS_OK, STATUS_NA, STATUS_ERROR)


def read_row(path: Path) -> dict[str, Any]:
    """One ``cells/<id>.json``, checked for what tables, reports and ``--verify`` read: a
    :class:`ConfigError` naming the file and the field when it is damaged."""
    from dlcluster_gym.sim.results import read_json_object

    fix = "a damaged run directory: delete the file and rerun with --resume"
    row = read_json_object(path, "a leaderboard cell row", fix)
    for key, kind in ROW_FIELDS.items():
        value = row.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, kind):
            names = (
                kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            )
            raise ConfigError(f"{path}: {key} must be a {names}, got {value!r:.60} ({fix})")
    if row["id"] != path.stem:
        raise ConfigError(f"{path}: id {row['id']!r} does not match the file name ({fix})")
    if row["status"] not in STATUSES:
        raise ConfigError(
            f"{path}: status {row['status']!r} is not one of {', '.join(STATUSES)} ({fix})"
        )
    if row["status"] == STATUS_OK:
        for key in SUMMARY_KEYS:
            v = row.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise ConfigError(f"{path}: {key} must be a number, got {v!r:.60} ({fix})")
    if isinstance(row["params"], str):
        try:
            params = json.loads(row["params"])
        except ValueError:
            params = None
        if not isinstance(params, dict):
            raise ConfigError(
                f"{path}: params must be a JSON object, got {row['params']!r:.60} ({fix})"
            )
    return row


def with_kind(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its entrant's ``kind``: the recorded one, else computed from its policy and
    parameters (placed after ``params``, where new rows have it)."""
    if row.get("kind") or "policy" not in row:
        return row
    kind = entrant_kind(row["policy"], row.get("params") or {})
    out: dict[str, Any] = {}
    for key, value in row.items():
        out[key] = value
        if key == "params":
            out["kind"] = kind
    out.setdefault("kind", kind)
    return out


# The per-job data of a cell (``cells/<id>.npz``): the finished jobs' JCTs and communication
# overheads (one value per job), and the resampled time series (one value per instant).
JOB_ARRAYS = ("jct_s", "comm_overhead")
SERIES_ARRAYS = ("ts_t", "ts_busy_gpus", "ts_remaining")
ARRAYS_FIX = "a damaged run directory: rerun the suite with --resume to rewrite it"


class BadArrays(ValueError):
    """A ``cells/<id>.npz`` that is not the per-job data of a cell (the message says why)."""


def load_arrays(p: Path) -> dict[str, np.ndarray]:
    """The arrays of the cell file ``p``, checked: a NumPy ``.npz`` archive holding the 1-D
    float arrays :func:`run_cell` writes and nothing else; :class:`BadArrays` says what is
    wrong with a corrupted, truncated or foreign file."""
    import zipfile

    try:
        z = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        # NumPy reads a file that is neither a zip archive nor an array as a pickle
        why = "" if "pickled" in str(exc) else f" ({exc!s:.120})"
        raise BadArrays(f"not a NumPy .npz archive{why}") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise BadArrays("a single NumPy array (.npy), not a cell's .npz archive of per-job data")
    try:
        with z:
            names = list(z.files)
            extra = sorted(set(names) - {*JOB_ARRAYS, *SERIES_ARRAYS})
            if extra:
                raise BadArrays(
                    f"holds {extra[0]!r}, not an array of a cell's per-job data "
                    f"(expected {', '.join(JOB_ARRAYS + SERIES_ARRAYS)})"
                )
            arrays = {k: z[k] for k in names}
    except BadArrays:
        raise
    except Exception as exc:  # a damaged member: zlib, zipfile and format errors
        raise BadArrays(f"a damaged .npz archive ({type(exc).__name__}: {exc})"[:200]) from None
    missing = [k for k in JOB_ARRAYS if k not in arrays]
    if missing:
        raise BadArrays(f"lacks the array {missing[0]!r}")
    for k, a in arrays.items():
        if a.ndim != 1 or a.dtype.kind != "f":
            raise BadArrays(f"{k} must be a 1-D array of floats, got {a.dtype} of shape {a.shape}")
    if arrays["jct_s"].size != arrays["comm_overhead"].size:
        raise BadArrays("jct_s and comm_overhead have different lengths")
    series = [k for k in SERIES_ARRAYS if k in arrays]
    if series and ("ts_t" not in arrays or len({arrays[k].size for k in series}) > 1):
        raise BadArrays(f"the time series ({', '.join(series)}) lack ts_t or differ in length")
    return arrays


def read_arrays(out: Path, cell_id: str) -> dict[str, np.ndarray]:
    """The plot arrays of a cell (empty for n/a and failed cells, and when the file is not
    there); a :class:`ConfigError` naming the file when it is damaged (:func:`load_arrays`)."""
    p = out / CELLS_DIR / f"{cell_id}.npz"
    if not p.is_file():
        return {}
    try:
        return load_arrays(p)
    except BadArrays as err:
        raise ConfigError(f"{p}: {err} ({ARRAYS_FIX})") from None


# --------------------------------------------------------------------------- backends

Result = tuple[dict[str, Any], dict[str, np.ndarray]]


class Terminated(KeyboardInterrupt):
    """SIGTERM received while a suite runs: raised in the main thread, so that the workers are
    stopped and the finished cells kept (the directory stays resumable), as with Ctrl-C."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` in the main thread for the duration."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated("terminated by SIGTERM")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _local(
    cells: list[Cell], suite: str, traces_dir: Any, workers: int, limit: float | None
) -> Iterator[Result]:
    ctx = get_context("spawn")  # no inherited threads or state; same behaviour on every OS
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)
    )
    finished = False
    try:
        pending = {pool.submit(run_cell, c, suite, traces_dir, limit) for c in cells}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
        finished = True
    finally:
        if not finished:  # interrupted (SIGTERM, Ctrl-C, an error): stop the workers now
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                with contextlib.suppress(Exception):
                    proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail fast when a Ray address's host:port does not accept connections."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"Ray address {address!r}: expected HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ConfigError(
            f"Ray address {address!r} is unreachable ({exc}; waited at most {timeout_s:g} s); "
            "start a cluster with `ray start --head` or omit --ray-address for a local instance"
        ) from None


def ray_init(address: str | None, workers: int, timeout_s: float = 30.0) -> Any:
    """Connect to the Ray cluster at ``address`` (or start a local one), within ``timeout_s``."""
    if isinstance(timeout_s, bool) or not (
        isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0
    ):
        raise ConfigError(f"Ray timeout must be a finite number of seconds > 0, got {timeout_s!r}")
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray backend needs Ray: pip install 'dlcluster-gym[ray]' (or pip install ray)"
        ) from None
    if address:
        _check_reachable(address, min(timeout_s, 10.0))
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if not address:
        # A local instance starts in this (the main) thread: Ray ties the processes it
        # spawns to the lifetime of the thread that spawned them.
        try:
            ray.init(address="local", num_cpus=workers, **kwargs)  # never a stale cluster
        except Exception as exc:
            raise ConfigError(f"cannot start a local Ray instance: {exc}") from None
        return ray
    error: list[BaseException] = []

    def init() -> None:
        try:
            ray.init(address=address, **kwargs)
        except BaseException as exc:  # reported to the caller below
            error.append(exc)

    th = threading.Thread(target=init, daemon=True)
    th.start()
    th.join(timeout_s)
    if th.is_alive():
        raise ConfigError(f"Ray at {address!r} did not answer within {timeout_s:g} s")
    if error:
        raise ConfigError(f"cannot connect to Ray at {address!r}: {error[0]}")
    return ray


def _ray(
    cells: list[Cell],
    suite: str,
    traces_dir: Any,
    workers: int,
    address: str | None,
    timeout_s: float,
    limit: float | None,
) -> Iterator[Result]:
    ray = ray_init(address, workers, timeout_s)
    try:
        task = ray.remote(num_cpus=1)(run_cell)
        td = None if traces_dir is None else str(traces_dir)
        pending = [task.remote(c, suite, td, limit) for c in cells]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield ray.get(ref)
    finally:
        ray.shutdown()


# --------------------------------------------------------------------------- resume

# What determines a cell's row: a finished cell is reused only when all of these are equal.
FINGERPRINT_KEYS = (
    "suite", "scenario", "policy", "params", "seed", "version", "scenario_hash", "code",
)  # fmt: skip


def fingerprint(cell: Cell, suite: str) -> dict[str, Any]:
    """What a row of ``cell`` records about its inputs (:data:`FINGERPRINT_KEYS`); the
    scenario hash is None when the scenario no longer loads (the cell then reruns)."""
    row = {k: v for k, v in _base_row(cell, suite).items() if k in FINGERPRINT_KEYS}
    try:
        row["scenario_hash"] = scenario_hash(cell.run_scenario, cell.seed)[0]
    except DLClusterError:
        row["scenario_hash"] = None
    return row


RERUN_WHY = "its entrant is rerun (--rerun)"


def stale_cells(
    out: Path, suite: Suite, done: set[str], rerun: Collection[str] | None = None
) -> dict[str, str]:
    """Finished cells of ``suite`` under ``out`` to run again: those whose recorded inputs
    differ from what the suite would run now (scenario YAML edited, other parameters, another
    package version) and those that failed (status error: a missing trace root, say):
    cell id -> why. ``rerun`` (entrant names): those entrants' cells run again, and the
    other cells are kept though other code computed them (their other inputs must match)."""
    stale: dict[str, str] = {}
    hashes: dict[tuple[str, int], Any] = {}
    keys = FINGERPRINT_KEYS if rerun is None else tuple(k for k in FINGERPRINT_KEYS if k != "code")
    for cell in suite.cells():
        if cell.id not in done:
            continue
        if rerun is not None and cell.entrant in rerun:
            stale[cell.id] = RERUN_WHY
            continue
        try:
            row = read_row(out / CELLS_DIR / f"{cell.id}.json")
        except (OSError, ConfigError) as err:
            stale[cell.id] = f"unreadable cell file: {str(err).split(': ', 1)[-1][:80]}"
            continue
        npz = out / CELLS_DIR / f"{cell.id}.npz"
        try:
            if row.get("status") == STATUS_OK and npz.is_file():
                load_arrays(npz)
        except BadArrays as err:
            stale[cell.id] = f"damaged per-job data {npz.name}: {str(err)[:80]}"
            continue
        key = (cell.scenario, cell.seed)
        if key not in hashes:
            hashes[key] = fingerprint(cell, suite.name)["scenario_hash"]
        want = {k: v for k, v in _base_row(cell, suite.name).items() if k in FINGERPRINT_KEYS}
        want["scenario_hash"] = hashes[key]
        diffs = [_why(k, row.get(k), want[k]) for k in keys if row.get(k) != want[k]]
        if row.get("status") == STATUS_ERROR:  # a failure is not a result: try again
            diffs.append("it failed: " + str(row.get("reason", "")).splitlines()[0][:80])
        if diffs:
            stale[cell.id] = "; ".join(diffs)
    return stale


def _why(key: str, recorded: Any, now: Any) -> str:
    if key == "code":
        return (
            f"code: computed by other code ({recorded or 'not recorded'}; now {now}: sources, "
            "presets or the agent checkpoint changed)"
        )
    return f"{key}: recorded {recorded!r}, now {now!r}"


def check_owner(out: Path, suite: Suite) -> None:
    """A run directory belongs to one suite: refuse one written by another suite."""
    other = None
    p = out / SUITE_FILE
    if p.is_file():  # an unreadable one is rewritten (save_suite); the cells still tell
        try:
            other = json.loads(p.read_text()).get("name")
        except (OSError, ValueError, AttributeError):
            other = None
    owners = {i: _row_suite(out / CELLS_DIR / f"{i}.json") for i in finished_ids(out)}
    # an unreadable cell (None) is no other suite's: stale_cells reruns it
    foreign = sorted(i for i, who in owners.items() if who is not None and who != suite.name)
    if other is not None and other != suite.name:
        raise ConfigError(
            f"{out} holds a run of suite {other!r}, not {suite.name!r}; a run directory belongs "
            "to one suite: choose another --out"
        )
    if foreign:
        raise ConfigError(
            f"{out} holds {len(foreign)} cell(s) of another suite (e.g. {foreign[0]}); a run "
            f"directory belongs to one suite ({suite.name!r}): choose another --out"
        )


def _row_suite(path: Path) -> Any:
    try:
        return json.loads(path.read_text()).get("suite")
    except (OSError, ValueError, AttributeError):
        return None


def run_suite(
    suite: Suite,
    out: str | Path,
    *,
    backend: str = "local",
    workers: int | None = None,
    resume: bool = False,
    traces_dir: str | Path | None = None,
    ray_address: str | None = None,
    ray_timeout_s: float = 30.0,
    progress: bool = True,
    on_cell: Callable[[dict[str, Any]], None] | None = None,
    time_limit_s: float | None = None,
    rerun: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """Run every cell not yet finished under ``out``; return all rows of the suite in order.

    ``out`` must not already hold cells unless ``resume`` is set. Writes ``out/suite.json``
    (the resolved suite, read back by :func:`~dlcluster_gym.leaderboard.render_leaderboard`).
    ``time_limit_s``: wall-clock seconds per cell (default: the suite's ``time_limit_s``;
    None there too: no limit); a cell past it is an ``error`` cell and the run goes on.
    ``workers``: processes on this machine (default: its cores; more than its cores is capped
    at them, with a warning), or on a remote Ray cluster (``ray_address``) not capped.
    ``rerun`` (entrant names; implies ``resume``): run those entrants' cells again and keep
    every other finished cell even where other code computed it (each row records its
    ``code``; ``--verify`` replays them on the current code).
    """
    from dlcluster_gym.sim.limits import check_time_limit

    limit = check_time_limit(
        time_limit_s if time_limit_s is not None else suite.time_limit_s, "time_limit_s"
    )
    out = Path(out)
    cells = suite.cells()
    done = finished_ids(out)
    if rerun is not None:
        if not rerun:
            raise ConfigError("rerun: name the entrants whose cells to run again")
        unknown = sorted(set(rerun) - {c.entrant for c in cells})
        if unknown:
            names = ", ".join(dict.fromkeys(c.entrant for c in cells))
            raise ConfigError(f"rerun: {', '.join(unknown)} not an entrant of suite "
                              f"{suite.name!r} ({names})")  # fmt: skip
        if not done:
            raise ConfigError(f"rerun: {out} holds no finished cell of a run to update; run "
                              "the suite without --rerun first")  # fmt: skip
        resume = True
    if done and not resume:
        raise ConfigError(
            f"{out} already holds {len(done)} finished cell(s); pass --resume to continue that "
            "run, or choose another --out"
        )
    check_owner(out, suite)
    stale = stale_cells(out, suite, done, None if rerun is None else set(rerun))
    unasked = {i: why for i, why in stale.items() if why != RERUN_WHY}
    if unasked:
        shown = "; ".join(f"{i} ({why})" for i, why in list(unasked.items())[:5])
        more = f"; and {len(unasked) - 5} more" if len(unasked) > 5 else ""
        warnings.warn(
            f"rerunning {len(unasked)} cell(s) that failed or whose inputs changed since they "
            f"ran: {shown}{more}",
            stacklevel=2,
        )
    if stale:
        for cell_id in stale:
            for ext in (".json", ".npz"):
                (out / CELLS_DIR / f"{cell_id}{ext}").unlink(missing_ok=True)
        done -= set(stale)
    todo = [c for c in cells if c.id not in done]
    cores = os.cpu_count() or 1
    workers = max(1, workers or cores)
    if backend not in ("local", "ray"):
        raise ConfigError(f"unknown backend {backend!r}; valid backends: local, ray")
    if workers > cores and not (backend == "ray" and ray_address):  # processes on this machine
        warnings.warn(
            f"workers {workers:,} is more than the {cores} core(s) of this machine; running "
            f"{cores} worker process(es)",
            stacklevel=2,
        )
        workers = cores
    save_suite(out, suite)
    if todo:
        from tqdm import tqdm

        with sigterm_raises():
            if backend == "local":
                results = _local(todo, suite.name, traces_dir, workers, limit)
            else:
                results = _ray(
                    todo, suite.name, traces_dir, workers, ray_address, ray_timeout_s, limit
                )
            # disable=None: no bar when stderr is not a terminal (a redirected log stays clean)
            with contextlib.closing(results), tqdm(
                total=len(cells), initial=len(cells) - len(todo), unit="cell",
                disable=None if progress else True, desc=suite.name, dynamic_ncols=True,
            ) as bar:  # fmt: skip
                for row, arrays in results:
                    write_cell(out, row, arrays)
                    bar.update(1)
                    if on_cell is not None:
                        on_cell(row)
    return read_rows(out, [c.id for c in cells])
