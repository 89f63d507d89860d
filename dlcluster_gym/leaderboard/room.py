"""The room a scenario leaves a deployable scheduler: how far the best clairvoyant reference
is below the best deployable heuristic, and how much of that gap an agent closes.

On one seed, with ``D`` the lowest average JCT of the deployable policies of the reference
set (:data:`REFERENCE`) and ``C`` the lowest of its clairvoyant ones::

    room = 1 - C / D

Per scenario (:func:`scenario_room`): the mean room over seeds with its 95 % Student-t
confidence interval, the best policy of each kind (the lowest mean average JCT over seeds)
and a verdict: ``"no room"`` when the mean room is below :data:`NO_ROOM_BELOW` (such a
scenario cannot show a deployable scheduler doing much better than the heuristics, and is
left out of every mean over scenarios), ``"room"`` otherwise, ``"n/a"`` when one kind has no
policy that ran.

An agent's fraction of the room closed (:func:`fraction_closed`) is
``sum(D - A) / sum(D - C)`` over the seeds, with ``A`` its average JCT: 0 at the best
heuristic, 1 at the clairvoyant reference, above 1 when it beats the reference, negative
when it is worse than the best heuristic. Both are pure functions of per-seed average
JCTs; :func:`run_room` runs the reference set to get them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.leaderboard.tables import mean_ci, paired_ci

DEPLOYABLE_REFERENCE: tuple[str, ...] = (
    "fcfs", "dally", "dally-manual", "tiresias", "gandiva-placement", "las-slots", "qssf",
    "qssf-preemptive",
)  # fmt: skip
"""The deployable heuristics whose best on a seed is the room's floor."""
CLAIRVOYANT_REFERENCE: tuple[str, ...] = ("srsf", "srw")
"""The clairvoyant references whose best on a seed is the room's ceiling: ``srsf`` (least
true remaining GPU-service first, preempting, with ``las-slots``'s placement) and ``srw``
(shortest true remaining work first, non-preemptive, waiting for the best tier)."""
REFERENCE: dict[str, str] = {
    **dict.fromkeys(DEPLOYABLE_REFERENCE, "deployable"),
    **dict.fromkeys(CLAIRVOYANT_REFERENCE, "clairvoyant"),
}
"""Reference policy -> kind."""
TIMER_GRID_H: tuple[float, ...] = (0.0, 1.0, 3.0, 6.0, 12.0, 24.0, 48.0, 84.0, 168.0)
"""Machine timers (hours) of the fixed-timer grid, the delay-timer agents' ceiling."""
TIMER_DEPLOYABLE: tuple[str, ...] = ("dally", "dally-manual")
"""The deployable heuristics in the delay-timer agents' own decision (Dally's timers,
auto-tuned or fixed at the paper's 12 h + 12 h), whose best on a seed is the timer room's
floor."""


def timer_label(hours: float) -> str:
    """The grid entrant of machine timer ``hours``: ``timers-12h``."""
    return f"timers-{hours:g}h"


def timer_entrants(grid_h: Sequence[float] = TIMER_GRID_H) -> dict[str, tuple[str, dict]]:
    """The fixed-timer grid as entrants (label -> (policy, params)): ``dally-manual`` with
    machine timer T and rack timer 2T for each T of ``grid_h``, the paper's shape (4.3.2:
    the rack timer runs another T after the machine timer). The best of them on a seed,
    chosen after the fact, is a clairvoyant reference: no scheduler knows which fixed
    timer a seed's workload will favour."""
    return {
        timer_label(h): ("dally-manual", {"machine_timer_s": h * 3600.0,
                                          "rack_timer_s": 2.0 * h * 3600.0})
        for h in grid_h
    }  # fmt: skip


def timer_reference(grid_h: Sequence[float] = TIMER_GRID_H) -> dict[str, str]:
    """Entrant -> kind for the timer room: :data:`TIMER_DEPLOYABLE` deployable, every grid
    entrant clairvoyant (its best per seed is chosen after the fact)."""
    return {
        **dict.fromkeys(TIMER_DEPLOYABLE, "deployable"),
        **dict.fromkeys(timer_entrants(grid_h), "clairvoyant"),
    }


NO_ROOM_BELOW = 0.05
"""A scenario whose mean room is below this is "no room"."""
ROOM, NO_ROOM, NOT_AVAILABLE = "room", "no room", "n/a"

Jcts = Mapping[str, Mapping[int, float]]
"""Policy -> seed -> average JCT (s); ``inf`` for a run that left jobs unfinished."""


def _best_on(jct: Jcts, policies: Sequence[str], seed: int) -> tuple[str | None, float]:
    """(policy, average JCT) of the lowest finite average JCT on ``seed``."""
    cands = [
        (float(jct[p][seed]), p) for p in policies if math.isfinite(jct[p].get(seed, math.inf))
    ]
    if not cands:
        return None, math.nan
    value, name = min(cands, key=lambda t: t[0])  # a tie: the first in ``policies``
    return name, value


def _best_by_mean(
    jct: Jcts, policies: Sequence[str], seeds: Sequence[int]
) -> tuple[str | None, float]:
    """(policy, mean average JCT over ``seeds``) of the lowest mean; a policy with a
    non-finite value on any of them is never best."""
    means = []
    for p in policies:
        vals = np.array([jct[p].get(s, math.inf) for s in seeds], dtype=np.float64)
        if vals.size and np.isfinite(vals).all():
            means.append((float(vals.mean()), p))
    if not means:
        return None, math.nan
    value, name = min(means, key=lambda t: t[0])
    return name, value


def scenario_room(
    jct: Jcts,
    kinds: Mapping[str, str] | None = None,
    threshold: float = NO_ROOM_BELOW,
) -> dict[str, Any]:
    """The room of one scenario from the per-seed average JCTs of its policies.

    ``kinds`` (policy -> ``deployable`` / ``clairvoyant``; default :data:`REFERENCE`) says
    which policies count; the others in ``jct`` are ignored. Seeds: those any counted
    policy ran (on each, the best of the policies that ran it). Returns the seeds, the
    policies of each kind, ``best_deployable`` and ``best_clairvoyant`` (name and mean
    average JCT in ``..._avg_jct_s``, by the lowest mean over seeds; a policy that missed a
    seed is never best), ``per_seed`` (each seed's best of each kind, its average JCT and
    the room on that seed), ``room`` and ``room_ci`` (mean and 95 % CI half-width over
    the seeds where both kinds have a finite run; NaN half-width with one seed) and
    ``verdict`` (:data:`ROOM`, :data:`NO_ROOM` below ``threshold``, :data:`NOT_AVAILABLE`
    when no seed has a finite run of both kinds)."""
    kinds = REFERENCE if kinds is None else kinds
    by_kind = {k: [p for p in jct if kinds.get(p) == k] for k in ("deployable", "clairvoyant")}
    counted = [*by_kind["deployable"], *by_kind["clairvoyant"]]
    seeds = sorted(set().union(*(set(jct[p]) for p in counted)))
    per_seed = []
    for s in seeds:
        d_name, d = _best_on(jct, by_kind["deployable"], s)
        c_name, c = _best_on(jct, by_kind["clairvoyant"], s)
        room = 1.0 - c / d if d_name and c_name and d > 0 else math.nan
        per_seed.append({"seed": s, "deployable": d_name, "deployable_jct_s": d,
                         "clairvoyant": c_name, "clairvoyant_jct_s": c, "room": room})  # fmt: skip
    rooms = [r["room"] for r in per_seed if math.isfinite(r["room"])]
    out: dict[str, Any] = {"seeds": seeds, "deployable": by_kind["deployable"],
                           "clairvoyant": by_kind["clairvoyant"]}  # fmt: skip
    for k in ("deployable", "clairvoyant"):
        out[f"best_{k}"], out[f"best_{k}_avg_jct_s"] = _best_by_mean(jct, by_kind[k], seeds)
    out["per_seed"] = per_seed
    if not rooms:
        out.update(room=math.nan, room_ci=math.nan, verdict=NOT_AVAILABLE)
        return out
    out["room"], out["room_ci"] = mean_ci(np.asarray(rooms))
    out["verdict"] = ROOM if out["room"] >= threshold else NO_ROOM
    return out


def room_table(
    jcts: Mapping[str, Jcts],
    kinds: Mapping[str, str] | None = None,
    threshold: float = NO_ROOM_BELOW,
) -> list[dict[str, Any]]:
    """:func:`scenario_room` of each scenario of ``jcts`` (scenario -> policy -> seed ->
    average JCT), each with its ``scenario`` name, in order."""
    return [{"scenario": sc, **scenario_room(j, kinds, threshold)} for sc, j in jcts.items()]


def mean_room(table: Iterable[Mapping[str, Any]]) -> tuple[float, int]:
    """(mean room, number of scenarios) over the scenarios of ``table`` with room (the
    "no room" and "n/a" ones left out)."""
    rooms = [r["room"] for r in table if r["verdict"] == ROOM]
    return (float(np.mean(rooms)) if rooms else math.nan), len(rooms)


def _ratio_of_sums(gains: np.ndarray, rooms: np.ndarray) -> float:
    """sum(gains) / sum(rooms); NaN where the rooms sum to zero or less."""
    den = float(rooms.sum())
    return float(gains.sum()) / den if den > 0 else math.nan


def fraction_closed(agent: Mapping[int, float], room: Mapping[str, Any]) -> dict[str, Any]:
    """How much of a scenario's room an agent closes, paired per seed.

    ``agent``: seed -> the agent's average JCT (s; ``inf`` for a run that left jobs
    unfinished); ``room``: :func:`scenario_room`. Over the seeds of ``room`` the agent ran and
    where both kinds have a finite run, with ``D``, ``C`` each seed's best deployable and
    clairvoyant average JCTs and ``A`` the agent's: ``fraction = sum(D - A) / sum(D - C)``,
    the ratio of the mean gain to the mean room (a mean of per-seed ratios would be ruled
    by the seeds whose room is near zero, where any difference divides by almost nothing).
    ``fraction_lo`` / ``fraction_hi``: its 95 % paired bootstrap interval over the seeds
    (``leaderboard.tables.paired_ci``: a fixed generator, so the same inputs give the same
    interval; resamples whose room sums to zero or less are left out), and
    ``fraction_ci`` half its width. Also ``seeds`` (how many) and the scenario's
    ``verdict``; the fraction is NaN unless the verdict is :data:`ROOM`, and ``-inf`` when
    the agent left jobs unfinished on a seed."""
    out: dict[str, Any] = {"fraction": math.nan, "fraction_ci": math.nan,
                           "fraction_lo": math.nan, "fraction_hi": math.nan, "seeds": 0,
                           "verdict": room["verdict"]}  # fmt: skip
    if room["verdict"] != ROOM:
        return out
    gains, rooms = [], []
    for r in room["per_seed"]:
        d, c = r["deployable_jct_s"], r["clairvoyant_jct_s"]
        if r["seed"] not in agent or not (math.isfinite(d) and math.isfinite(c)):
            continue
        a = float(agent[r["seed"]])
        gains.append(d - a if math.isfinite(a) else -math.inf)
        rooms.append(d - c)
    out["seeds"] = len(gains)
    if not gains:
        return out
    if any(math.isinf(g) for g in gains):
        out["fraction"] = -math.inf
        return out
    g, w = np.asarray(gains), np.asarray(rooms)
    out["fraction"] = _ratio_of_sums(g, w)
    if math.isnan(out["fraction"]):
        return out
    lo, hi = paired_ci(_ratio_of_sums, g, w)
    if math.isfinite(lo):
        out["fraction_lo"], out["fraction_hi"] = lo, hi
        out["fraction_ci"] = (hi - lo) / 2.0
    return out


def mean_fraction(fractions: Iterable[Mapping[str, Any]]) -> tuple[float, int]:
    """(mean fraction closed, number of scenarios) over the :func:`fraction_closed` results
    of scenarios with room (the others left out)."""
    vals = [
        f["fraction"] for f in fractions if f["verdict"] == ROOM and not math.isnan(f["fraction"])
    ]
    return (float(np.mean(vals)) if vals else math.nan), len(vals)


# --------------------------------------------------------------------------- running


def run_room(
    scenarios: Sequence[str],
    seeds: Sequence[int] | Mapping[str, Sequence[int]],
    workers: int = 1,
    traces_dir: str | Path | None = None,
    policies: Sequence[str] = (*DEPLOYABLE_REFERENCE, *CLAIRVOYANT_REFERENCE),
    progress: bool | Callable[[dict[str, Any]], None] = True,
    entrants: Mapping[str, tuple[str, dict]] | None = None,
) -> tuple[dict[str, dict[str, dict[int, float]]], list[dict[str, Any]]]:
    """Run ``policies`` (and ``entrants``: label -> (policy, params), e.g.
    :func:`timer_entrants`) on each scenario (a preset name or a YAML path) and seed (the same
    seeds for all, or scenario -> seeds) with ``workers`` processes (the leaderboard's cell
    runner, workers that end with this process; 1: in this process). Returns (average JCTs:
    scenario -> entrant -> seed -> seconds, ``inf`` where jobs were left unfinished, for
    :func:`room_table`; every run's leaderboard row, ``status`` ``n/a`` for a policy that
    does not apply to the scenario (its ``reason`` says why) and ``error`` for one that
    failed). ``progress``: a progress bar (``True``, on a terminal) or a callback per row."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from tqdm import tqdm

    from dlcluster_gym.leaderboard.runner import run_cell
    from dlcluster_gym.leaderboard.suite import Cell, cell_id, load_bases
    from dlcluster_gym.workers import die_with_parent

    bases = load_bases(None)
    runs = {p: (p, {}) for p in policies} | dict(entrants or {})
    cells = [
        Cell(cell_id(sc, label, s), sc, label, p, dict(params), int(s)).located(bases)
        for sc in scenarios
        for s in (seeds[sc] if isinstance(seeds, Mapping) else seeds)
        for label, (p, params) in runs.items()
    ]
    order = {c.id: i for i, c in enumerate(cells)}
    rows: list[dict[str, Any]] = []
    bar = tqdm(total=len(cells), unit="run", desc="room", dynamic_ncols=True,
               disable=None if progress is True else True)  # fmt: skip

    def done(row: dict[str, Any]) -> None:
        rows.append(row)
        bar.update(1)
        if callable(progress):
            progress(row)

    with bar:
        if workers <= 1:
            for c in cells:
                done(run_cell(c, "room", traces_dir)[0])
        else:
            with ProcessPoolExecutor(
                max_workers=workers, mp_context=get_context("spawn"),
                initializer=die_with_parent, initargs=(os.getpid(),),
            ) as pool:  # fmt: skip
                futs = [pool.submit(run_cell, c, "room", traces_dir) for c in cells]
                for fut in as_completed(futs):
                    done(fut.result()[0])
    rows.sort(key=lambda r: order[r["id"]])
    return {sc: {} for sc in scenarios} | jcts_of(rows), rows


def jcts_of(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[int, float]]]:
    """Scenario -> entrant (the policy where a row names none) -> seed -> average JCT (s) of
    the runs in ``rows`` that finished with status ``ok`` (``inf`` where jobs were left
    unfinished), for :func:`room_table`."""
    jcts: dict[str, dict[str, dict[int, float]]] = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        value = math.inf if r.get("jobs_unfinished", 0) else float(r["avg_jct_s"])
        name = r.get("entrant") or r["policy"]
        jcts.setdefault(r["scenario"], {}).setdefault(name, {})[int(r["seed"])] = value
    return jcts


def skipped(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Scenario -> policy -> why it has no average JCT there (the first such run's
    ``status``: reason), from :func:`run_room`'s rows."""
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        if r["status"] != "ok":
            out.setdefault(r["scenario"], {}).setdefault(
                r["policy"], f"{r['status']}: {str(r.get('reason', '')).splitlines()[0]}"
            )
    return out
