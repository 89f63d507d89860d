"""Run a suite's cells on local processes or a Ray cluster; one file pair per finished cell.

Workers only compute: :func:`run_cell` returns the cell's row and its plot arrays, and the
driver writes ``cells/<id>.npz`` then ``cells/<id>.json`` (each atomically; the JSON marks the
cell finished). A run killed half way therefore loses only the cells in flight, and
``resume=True`` skips every cell whose JSON exists.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.errors import ConfigError, DLClusterError, NotApplicableError
from dlcluster_gym.leaderboard.suite import AGENT_PREFIX, Cell, Suite, agent_support
from dlcluster_gym.sim.results import SUMMARY_KEYS, _jsonable

CELLS_DIR = "cells"
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
    from dlcluster_gym import __version__

    return __version__


def scenario_hash(scenario: str, seed: int) -> tuple[str, int]:
    """(short hash of the scenario config a cell runs, its cluster's GPU count); the hash
    changes whenever the preset does."""
    from dlcluster_gym.config import load_scenario

    cfg = load_scenario(scenario, seed=seed)
    text = json.dumps(cfg.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12], cfg.cluster.num_gpus


def _base_row(cell: Cell, suite: str) -> dict[str, Any]:
    return {
        "id": cell.id,
        "suite": suite,
        "scenario": cell.scenario,
        "entrant": cell.entrant,
        "policy": cell.policy,
        "params": cell.params_json(),
        "seed": cell.seed,
        "version": _version(),
    }


def run_cell(
    cell: Cell, suite: str = "", traces_dir: str | Path | None = None
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Run one cell: (row, arrays for plots). Never raises for a policy's failure: a
    :class:`NotApplicableError` gives status ``n/a``, any other exception status ``error``."""
    from dlcluster_gym.api import simulate

    row = _base_row(cell, suite)
    t0 = time.perf_counter()
    try:
        row["scenario_hash"], num_gpus = scenario_hash(cell.scenario, cell.seed)
        res = simulate(
            cell.scenario,
            resolve_entrant(cell.policy, cell.params),
            cell.seed,
            policy_params=cell.params,
            traces_dir=traces_dir,
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
    """The rows written under ``out`` (all, or those in ``ids``, in that order)."""
    cells = out / CELLS_DIR
    if ids is None:
        ids = sorted(finished_ids(out))
    return [
        json.loads((cells / f"{i}.json").read_text())
        for i in ids
        if (cells / f"{i}.json").is_file()
    ]


def read_arrays(out: Path, cell_id: str) -> dict[str, np.ndarray]:
    """The plot arrays of a cell (empty for n/a and failed cells)."""
    p = out / CELLS_DIR / f"{cell_id}.npz"
    if not p.is_file():
        return {}
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


# --------------------------------------------------------------------------- backends

Result = tuple[dict[str, Any], dict[str, np.ndarray]]


def _local(cells: list[Cell], suite: str, traces_dir: Any, workers: int) -> Iterator[Result]:
    ctx = get_context("spawn")  # no inherited threads or state; same behaviour on every OS
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        pending = {pool.submit(run_cell, c, suite, traces_dir) for c in cells}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()
        finally:
            for fut in pending:
                fut.cancel()


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
) -> Iterator[Result]:
    ray = ray_init(address, workers, timeout_s)
    try:
        task = ray.remote(num_cpus=1)(run_cell)
        td = None if traces_dir is None else str(traces_dir)
        pending = [task.remote(c, suite, td) for c in cells]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield ray.get(ref)
    finally:
        ray.shutdown()


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
) -> list[dict[str, Any]]:
    """Run every cell not yet finished under ``out``; return all rows of the suite in order.

    ``out`` must not already hold cells unless ``resume`` is set. Writes ``out/suite.json``
    (the resolved suite, read back by :func:`~dlcluster_gym.leaderboard.render_leaderboard`).
    """
    out = Path(out)
    cells = suite.cells()
    done = finished_ids(out)
    if done and not resume:
        raise ConfigError(
            f"{out} already holds {len(done)} finished cell(s); pass --resume to continue that "
            "run, or choose another --out"
        )
    todo = [c for c in cells if c.id not in done]
    workers = max(1, workers or os.cpu_count() or 1)
    if backend not in ("local", "ray"):
        raise ConfigError(f"unknown backend {backend!r}; valid backends: local, ray")
    from dlcluster_gym.leaderboard.report import save_suite

    save_suite(out, suite)
    if todo:
        if backend == "local":
            results = _local(todo, suite.name, traces_dir, workers)
        else:
            results = _ray(todo, suite.name, traces_dir, workers, ray_address, ray_timeout_s)
        from tqdm import tqdm

        with tqdm(
            total=len(cells), initial=len(cells) - len(todo), unit="cell", disable=not progress,
            desc=suite.name, dynamic_ncols=True,
        ) as bar:  # fmt: skip
            for row, arrays in results:
                write_cell(out, row, arrays)
                bar.update(1)
                if on_cell is not None:
                    on_cell(row)
    return read_rows(out, [c.id for c in cells])
