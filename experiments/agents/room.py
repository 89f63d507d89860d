"""The room each scenario leaves a deployable scheduler.

On each scenario and seed, the room is 1 - C / D: D the lowest average JCT of the deployable
reference heuristics (fcfs, dally, dally-manual, tiresias, gandiva-placement, las-slots, qssf,
qssf-preemptive), C the lowest of the clairvoyant references (srsf, srw). A policy that does
not apply to a scenario is skipped, and the page says so. Per scenario: the mean room over
seeds with its 95 % confidence interval, the best policy of each kind, and "no room" where
the mean is below 5 % (``dlcluster_gym.leaderboard.room``). Writes ``room.md``,
``room.json`` and ``table.md`` (the table alone, which docs/agents.md includes) under
``--out``; ``--render`` rewrites the pages from ``room.json`` without simulating.

Beside the references, on the scenarios whose jobs come from a generator (not a trace),
``gittins-slots`` runs (:data:`INFORMED`): it knows the distribution of Dally's generator's
job lengths and no job's length, and its fraction of the room closed shows how much of the
room knowing the distribution is worth (on one server its order is the best a scheduler
without the lengths can do). It is not a reference: it moves neither D nor C.

    python experiments/agents/room.py --workers 2
    python experiments/agents/room.py --scenarios dally-poisson-2rack --seeds 101-103 \
        --out runs/room
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from dlcluster_gym.leaderboard import room, tables

SCENARIOS = (
    "dally-poisson-2rack", "dally-poisson-4rack", "dally-poisson-16rack", "dally-batch-2rack",
    "dally-batch-8rack", "itp-cluster03", "itp-cluster05", "itp-cluster07",
    "dally-groups-poisson-4rack",
    "dally-groups-4rack-load12",
)  # fmt: skip
OUT = Path("experiments/results/room")
INFORMED = ("gittins-slots",)
"""Deployable policies that know the length distribution of the generator's jobs; run on
generated workloads only, reported as fractions of the room closed."""


def seed_list(text: str) -> list[int]:
    """``"101-105"`` or ``"101,103,105-107"`` -> the seeds, in order, each once."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first:
            raise argparse.ArgumentTypeError(f"range {part!r} runs backwards")
        seeds += [s for s in range(first, last + 1) if s not in seeds]
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed")
    return seeds


def is_trace(scenario: str) -> bool:
    from dlcluster_gym.config import load_scenario

    return load_scenario(scenario).workload.kind == "trace"


def _h(seconds: float) -> str:
    return "-" if not math.isfinite(seconds) else f"{seconds / 3600:.2f} h"


def pct_ci(mean: float, half: float) -> str:
    """``12.3 ± 4.5 %`` (no ± without a half-width; ``n/a`` without a mean)."""
    if not math.isfinite(mean):
        return "n/a"
    return f"{100 * mean:.1f}" + ("" if not math.isfinite(half) else f" ± {100 * half:.1f}") + " %"


def _s(seconds: float) -> str:
    return f"{seconds:,.0f}" if seconds >= 10 else f"{seconds:.1f}"


def _command(report: dict[str, Any]) -> str:
    return (
        f"`{report['command']}` ({_s(report['wall_s'])} s wall, {_s(report['cpu_s'])} CPU-s of "
        f"simulation, {report['workers']} worker{'' if report['workers'] == 1 else 's'} on "
        f"{report['cores']} cores)"
    )


def table(report: dict[str, Any], with_command: bool = True) -> str:
    """The room table with its notes (``table.md``, which docs/agents.md includes); with
    ``with_command``, a last line naming the command that wrote it and its wall time."""
    alone = [c for c in room.CLAIRVOYANT_REFERENCE if f"room_{c}_alone" in report["table"][0]]
    informed = [p for p in INFORMED if any(p in r.get("informed", {}) for r in report["table"])]
    lines = [
        "| scenario | seeds | best deployable | avg JCT | best clairvoyant | avg JCT | room | "
        "verdict |"
        + "".join(f" room, {c} alone |" for c in alone)
        + "".join(f" {p} closes |" for p in informed),
        "|---|---:|---|---:|---|---:|---:|---|" + "---:|" * (len(alone) + len(informed)),
    ]
    for r in report["table"]:
        closes = [r.get("informed", {}).get(p) for p in informed]
        lines.append(
            f"| `{r['scenario']}` | {len(r['seeds'])} | {r['best_deployable'] or '-'} | "
            f"{_h(r['best_deployable_avg_jct_s'])} | {r['best_clairvoyant'] or '-'} | "
            f"{_h(r['best_clairvoyant_avg_jct_s'])} | {pct_ci(r['room'], r['room_ci'])} | "
            f"{r['verdict']} |"
            + "".join(f" {pct_ci(r[f'room_{c}_alone'], r[f'room_{c}_alone_ci'])} |" for c in alone)
            + "".join(f" {_closed(f)} |" for f in closes)
        )
    mean, n = report["mean_room"], report["scenarios_with_room"]
    lines += [
        "",
        f"Mean room over the {n} scenario{'' if n == 1 else 's'} with room: "
        f"{pct_ci(mean, math.nan)}. Seeds {report['seeds_text']}.",
        "",
        "Room on a seed: 1 - C / D, D the lowest average JCT of the deployable reference "
        f"policies ({', '.join(room.DEPLOYABLE_REFERENCE)}) on that seed, C the lowest of the "
        f"clairvoyant ones ({', '.join(room.CLAIRVOYANT_REFERENCE)}). Room column: mean over "
        "seeds ± half-width of the 95 % Student-t confidence interval. Best: the policy of "
        "that kind with the lowest mean average JCT over the seeds (avg JCT: that mean); "
        "'room, ... alone': the room with only that clairvoyant reference as the ceiling. "
        + (
            f"'{', '.join(informed)} closes': its fraction of the room closed, sum(D - A) / "
            "sum(D - C) over the seeds with A its average JCT, ± half its 95 % paired "
            "bootstrap interval (it knows the length distribution of the generator's jobs, "
            "not their lengths; run on generated workloads only; '-': not run). "
            if informed
            else ""
        )
        + (
            f"Verdict '{room.NO_ROOM}': mean room below {room.NO_ROOM_BELOW:.0%}; such "
            "scenarios are left out of the mean above. A run that leaves jobs unfinished is "
            "never best."
        ),
    ]
    if report["skipped"]:
        lines += ["", "Policies that did not run:", ""]
        for sc, pols in report["skipped"].items():
            for p, why in pols.items():
                lines.append(f"- `{sc}`: `{p}` ({why})")
    if report["absent"]:
        lines += ["", f"Scenarios not run (not found): {', '.join(report['absent'])}."]
    if report["notes"]:
        lines += ["", *report["notes"]]
    if with_command:
        lines += ["", f"Written by {_command(report)}."]
    return "\n".join(lines) + "\n"


def _closed(f: dict[str, Any] | None) -> str:
    """A fraction of the room closed with its interval; '-' where not run, 'no room'."""
    if f is None:
        return "-"
    if f["verdict"] != room.ROOM:
        return f["verdict"]
    return pct_ci(f["fraction"], f["fraction_ci"])


def page(report: dict[str, Any]) -> str:
    """``room.md`` from ``room.json``'s content."""
    lines = [
        "# The room: best clairvoyant reference against best deployable heuristic",
        "",
        f"Command: {_command(report)}.",
        "",
        table(report, with_command=False),
        "Per seed (best of each kind on that seed):",
        "",
        "| scenario | seed | deployable | avg JCT | clairvoyant | avg JCT | room |",
        "|---|---:|---|---:|---|---:|---:|",
    ]
    for r in report["table"]:
        for s in r["per_seed"]:
            lines.append(
                f"| `{r['scenario']}` | {s['seed']} | {s['deployable'] or '-'} | "
                f"{_h(s['deployable_jct_s'])} | {s['clairvoyant'] or '-'} | "
                f"{_h(s['clairvoyant_jct_s'])} | {pct_ci(s['room'], math.nan)} |"
            )
    return "\n".join(lines) + "\n"


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` (the command, its times, the scenarios and seeds, and every run) with the
    room computed from its runs: the table (``room.room_table``, each row with the room that
    each clairvoyant reference alone would leave), the mean room over the scenarios with
    room, and the policies that did not run."""
    runs = report["runs"]
    jcts = {sc: {} for sc in report["scenarios"]} | room.jcts_of(runs)
    table = room.room_table(jcts)
    for c in room.CLAIRVOYANT_REFERENCE:
        alone = {p: k for p, k in room.REFERENCE.items() if k == "deployable" or p == c}
        for row, own in zip(table, room.room_table(jcts, alone), strict=True):
            row[f"room_{c}_alone"], row[f"room_{c}_alone_ci"] = own["room"], own["room_ci"]
    for row in table:
        own = jcts.get(row["scenario"], {})
        row["informed"] = {p: room.fraction_closed(own[p], row) for p in INFORMED if p in own}
    mean, n = room.mean_room(table)
    texts = sorted({tables.seed_ranges(v) for v in report["seeds"].values()})
    return {
        **report, "seeds_text": " and ".join(texts), "reference": room.REFERENCE,
        "no_room_below": room.NO_ROOM_BELOW, "table": table, "mean_room": mean,
        "scenarios_with_room": n, "skipped": room.skipped(runs),
    }  # fmt: skip


def write(out: Path, report: dict[str, Any]) -> None:
    """``room.json``, ``room.md`` and ``table.md`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "room.json").write_text(json.dumps(report, indent=1))
    (out / "room.md").write_text(page(report))
    (out / "table.md").write_text(table(report))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated presets or YAML files (default: %(default)s)",
    )
    ap.add_argument(
        "--seeds",
        type=seed_list,
        default=seed_list("101-105"),
        help="e.g. 101-105 (default) or 101,103",
    )
    ap.add_argument(
        "--trace-seeds",
        type=int,
        default=None,
        help="run only the first N seeds on trace scenarios (at least 3)",
    )
    ap.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    ap.add_argument(
        "--traces-dir",
        default=None,
        help="trace root (default: $DLCLUSTER_TRACES, else ../shared/traces)",
    )
    ap.add_argument("--out", type=Path, default=OUT, help="folder for room.md and room.json")
    ap.add_argument(
        "--render",
        action="store_true",
        help="rewrite the pages from --out's room.json; simulate nothing",
    )
    args = ap.parse_args(argv)
    if args.render:
        write(args.out, summarize(json.loads((args.out / "room.json").read_text())))
        return
    if args.trace_seeds is not None and args.trace_seeds < 3:
        ap.error("--trace-seeds: at least 3")
    from dlcluster_gym.config import load_scenario
    from dlcluster_gym.errors import DLClusterError

    scenarios, absent = [], []
    for sc in dict.fromkeys(s.strip() for s in args.scenarios.split(",") if s.strip()):
        try:
            load_scenario(sc)
            scenarios.append(sc)
        except DLClusterError:
            absent.append(sc)  # e.g. a preset another change has not added yet
    seeds: dict[str, list[int]] = {}
    notes = []
    for sc in scenarios:
        seeds[sc] = list(args.seeds)
        if args.trace_seeds is not None and is_trace(sc) and args.trace_seeds < len(args.seeds):
            seeds[sc] = list(args.seeds[: args.trace_seeds])
            notes.append(f"`{sc}` (a trace scenario) ran seeds {seeds[sc][0]}-{seeds[sc][-1]} "
                         f"only, to keep the run within its CPU budget.")  # fmt: skip
    started = time.perf_counter()
    _, rows = room.run_room(scenarios, seeds, args.workers, args.traces_dir)
    generated = [sc for sc in scenarios if not is_trace(sc)]
    if generated:
        _, more = room.run_room(generated, seeds, args.workers, args.traces_dir, INFORMED)
        rows += more
    wall = time.perf_counter() - started
    keep = ("scenario", "policy", "seed", "status", "reason", "avg_jct_s", "jobs_unfinished",
            "wall_s", "cpu_s")  # fmt: skip
    report = {
        "command": shlex.join(["python", "experiments/agents/room.py", *(argv or sys.argv[1:])]),
        "wall_s": wall, "cpu_s": sum(r.get("cpu_s", 0.0) for r in rows),
        "workers": args.workers, "cores": os.cpu_count(), "scenarios": scenarios,
        "seeds": seeds, "absent": absent, "notes": notes,
        "runs": [{k: r.get(k) for k in keep} for r in rows],
    }  # fmt: skip
    report = summarize(report)
    write(args.out, report)
    print(page(report))


if __name__ == "__main__":
    main()
