"""Cut the Philly trace into time windows, size a cluster for each, and write the philly-vc split.

Usage: python experiments/workloads/philly_windows.py [--traces-dir DIR] [--days 2] [--tail-days D]
       [--min-jobs 100] [--check fcfs,las-slots,qssf] [--check-window LABEL]

From day 14 (before it the trace holds almost no jobs) to its end, Philly (Pollux's extract,
``pollux_adaptdl/traces/philly.csv``, with each job's virtual cluster) is cut into disjoint
windows of ``--days`` days (a last window shorter than that is dropped). Arrivals are kept as
they are (no rescaling), so each window keeps the real arrival pattern: bursts, quiet nights,
the VCs' mix. For each window a cluster is sized so that the window's offered load lies in
0.8-1.0:

    load = sum over the window's jobs of GPUs x min(duration, window + tail)
           / (cluster GPUs x window length)

Durations are capped at the window length plus a tail (``--tail-days``, default half a
window): an episode runs its window's jobs to completion, so work past the window's end still
meets the queue while it drains, but a few multi-week jobs (the longest runs 54 days) would
otherwise count weeks of GPU time against a window whose other jobs finish long before they
do. Cluster sizes are whole racks of the Dally machine shape (8 machines of 8 A100 GPUs,
NVSwitch, the network tiers of ``dally-8rack``); where no number of whole racks gives a load
in 0.8-1.0 (a light window between two rack counts), 1-8 racks of 1-7 such machines. Among
the sizes whose load lies in 0.8-1.0 the one nearest 0.9 is taken (ties: fewer jobs left
out, then the smaller cluster). The preset uses ``gpu_demand:
filter``: a job wanting more GPUs than its window's cluster is left out at load (the table
counts them; the load counts only the jobs kept). Windows with fewer than ``--min-jobs``
jobs are dropped (an episode of a handful of jobs leaves a scheduler nothing to decide), as
are windows no size fits.

The windows are split by time: the earliest 60 % train, the next 15 % validation, the latest
25 % test (a temporal split, as a deployment trains on the past and runs on the future).
Seeds (they draw each job's model): train 1000-1999, validation 501-502, test 101-110.

Writes ``configs/splits/philly-vc.yaml`` (entries over the preset ``philly-vc`` with the
window and the cluster as overrides) and ``experiments/results/splits/philly-vc.md`` (the
table; docs/agents.md includes it). ``--check POLICIES`` also runs one test window (the one
of most jobs, or ``--check-window LABEL``) under each policy and writes
``experiments/results/splits/philly-vc-check.md`` (wall time and average JCT).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from dlcluster_gym.config import load_cluster, load_scenario
from dlcluster_gym.workload.traces import load_philly

ROOT = Path(__file__).resolve().parents[2]
SPLIT = ROOT / "configs" / "splits" / "philly-vc.yaml"
PAGE = ROOT / "experiments" / "results" / "splits" / "philly-vc.md"
CHECK_PAGE = ROOT / "experiments" / "results" / "splits" / "philly-vc-check.md"
PRESET = "philly-vc"
DALLY = "dally-8rack"  # the preset's cluster: the machine shape and network every window uses
DAY = 86400.0
LOAD_RANGE = (0.8, 1.0)
TARGET = 0.9
MAX_RACKS = 64
SHARES = {"train": 0.60, "validation": 0.15}  # test: the rest (about 25 %)
SEEDS = {"train": "1000-1999", "validation": "501-502", "test": "101-110"}


@dataclass(frozen=True)
class Size:
    """A cluster: ``racks`` racks of ``machines`` machines of the Dally shape."""

    racks: int
    machines: int
    gpus_per_machine: int

    @property
    def gpus(self) -> int:
        return self.racks * self.machines * self.gpus_per_machine

    @property
    def name(self) -> str:
        if self.machines == 8:
            return f"{self.racks}rack"
        return f"{self.racks}x{self.machines}m"


@dataclass
class Window:
    start_s: float
    end_s: float
    jobs: int
    vcs: int
    max_gpus: int
    size: Size | None = None
    load: float = float("nan")
    filtered: int = 0
    part: str = ""
    dropped: str = ""
    loads: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"philly-d{self.start_s / DAY:03.0f}-{self.end_s / DAY:03.0f}"


def candidate_sizes(gpus_per_machine: int, machines_per_rack: int) -> list[list[Size]]:
    """Cluster sizes by preference: whole racks (1..MAX_RACKS); else racks of fewer machines
    (1..machines_per_rack-1 machines in each of 1..machines_per_rack racks)."""
    whole = [Size(r, machines_per_rack, gpus_per_machine) for r in range(1, MAX_RACKS + 1)]
    small = [
        Size(r, m, gpus_per_machine)
        for r in range(1, machines_per_rack + 1)
        for m in range(1, machines_per_rack)
    ]
    return [whole, small]


def size_window(
    w: Window, gpus: np.ndarray, dur: np.ndarray, cap_s: float, sizes: list[list[Size]]
) -> None:
    """Pick ``w.size`` (module doc), or set ``w.dropped``."""
    span = w.end_s - w.start_s
    work = gpus * np.minimum(dur, cap_s)
    for tier in sizes:
        best: tuple | None = None
        for s in tier:
            kept = gpus <= s.gpus
            if not kept.any():
                continue
            load = float(work[kept].sum() / (s.gpus * span))
            if LOAD_RANGE[0] <= load <= LOAD_RANGE[1]:
                key = (abs(load - TARGET), int((~kept).sum()), s.gpus, s.racks)
                if best is None or key < best[0]:
                    best = (key, s, load, int((~kept).sum()))
        if best is not None:
            _, w.size, w.load, w.filtered = best
            return
    w.dropped = f"no cluster size gives load {LOAD_RANGE[0]:.1f}-{LOAD_RANGE[1]:.1f}"


def cut(traces_dir: str | None, days: float, start_day: float, tail_days: float,
        min_jobs: int, shape: Size) -> tuple[list[Window], int]:  # fmt: skip
    """The windows of the trace, sized; and the number of jobs the trace holds."""
    trace = load_philly(traces_dir=traces_dir)
    a, d, g = trace.arrival_s, trace.duration_s, trace.num_gpus
    vcs = np.asarray(trace.vcs) if trace.vcs else np.zeros(len(a), dtype=str)
    span = days * DAY
    sizes = candidate_sizes(shape.gpus_per_machine, shape.machines)
    windows = []
    start = start_day * DAY
    while start + span <= a[-1]:
        m = (a >= start) & (a < start + span)
        w = Window(start, start + span, int(m.sum()), len(set(vcs[m])),
                   int(g[m].max()) if m.any() else 0)  # fmt: skip
        if w.jobs < min_jobs:
            w.dropped = f"fewer than {min_jobs} jobs"
        else:
            size_window(w, g[m], d[m], span + tail_days * DAY, sizes)
        windows.append(w)
        start += span
    kept = [w for w in windows if not w.dropped]
    n = len(kept)
    n_train = round(SHARES["train"] * n)
    n_val = max(1, round(SHARES["validation"] * n))
    for i, w in enumerate(kept):
        w.part = "train" if i < n_train else "validation" if i < n_train + n_val else "test"
    return windows, len(a)


def overrides(w: Window, group: dict) -> dict:
    """The preset overrides of a window: its time window and its cluster."""
    assert w.size is not None
    g = {**group, "racks": w.size.racks, "machines_per_rack": w.size.machines}
    desc = (f"{w.size.racks} x {w.size.machines} machines x {w.size.gpus_per_machine} "
            f"{g['gpu_type']} ({w.size.gpus} GPUs), the Dally machine and network")  # fmt: skip
    return {
        "workload": {"time_window_s": [int(w.start_s), int(w.end_s)]},
        "cluster": {"name": f"philly-vc-{w.size.name}", "description": desc, "groups": [g]},
    }


def _days(x: float) -> str:
    return f"{x:g} day" + ("" if x == 1 else "s")


def split_yaml(windows: list[Window], group: dict, command: str, days: float,
               tail_days: float) -> str:  # fmt: skip
    kept = [w for w in windows if not w.dropped]
    counts = {p: sum(w.part == p for w in kept) for p in SEEDS}
    lines = [
        f"# Written by `{command}`; do not edit by hand (rerun the script).",
        f"# {len(kept)} windows of {days:g} days of the Philly trace from day "
        f"{kept[0].start_s / DAY:g} on, each on a cluster sized to offered load "
        f"{LOAD_RANGE[0]:.1f}-{LOAD_RANGE[1]:.1f}",
        f"# (durations capped at the window + {_days(tail_days)}); arrivals as in the trace.",
        "# Temporal split: the earliest windows train, then validation, the latest test.",
        f"description: Philly VC windows ({days:g} days, {len(kept)} windows, each on a cluster "
        f"sized to load {LOAD_RANGE[0]:.1f}-{LOAD_RANGE[1]:.1f}, arrivals as in the trace); "
        f"temporal split {counts['train']}/{counts['validation']}/{counts['test']} windows "
        "train/validation/test",
        f"scenario: {PRESET}",
    ]
    for part, seeds in SEEDS.items():
        lines += [f"{part}:", f"  seeds: {seeds}", "  scenarios:"]
        for w in kept:
            if w.part == part:
                entry = {"label": w.label, "overrides": overrides(w, group)}
                text = yaml.safe_dump(entry, default_flow_style=True, width=10_000,
                                      sort_keys=False).strip()  # fmt: skip
                lines.append(f"    - {text}")
    return "\n".join(lines) + "\n"


def table(windows: list[Window]) -> str:
    rows = ["| window | days | jobs | VCs | largest job (GPUs) | cluster | GPUs | jobs left out "
            "| load | part |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for w in windows:
        days = f"{w.start_s / DAY:g}-{w.end_s / DAY:g}"
        if w.dropped:
            rows.append(f"| {w.label} | {days} | {w.jobs:,} | {w.vcs} | {w.max_gpus} | - | - "
                        f"| - | - | dropped: {w.dropped} |")  # fmt: skip
            continue
        assert w.size is not None
        rows.append(
            f"| {w.label} | {days} | {w.jobs:,} | {w.vcs} | {w.max_gpus} | {w.size.name} | "
            f"{w.size.gpus} | {w.filtered} | {w.load:.3f} | {w.part} |"
        )
    return "\n".join(rows)


def page(windows: list[Window], n_trace: int, command: str, days: float, tail_days: float,
         min_jobs: int, base: str) -> str:  # fmt: skip
    kept = [w for w in windows if not w.dropped]
    parts = {}
    for p in SEEDS:
        ws = [w for w in kept if w.part == p]
        parts[p] = (
            f"{len(ws)} windows (days {ws[0].start_s / DAY:g}-{ws[-1].end_s / DAY:g}), "
            f"{sum(w.jobs - w.filtered for w in ws):,} jobs, clusters of "
            f"{min(w.size.gpus for w in ws)}-{max(w.size.gpus for w in ws)} GPUs, seeds "
            f"{SEEDS[p]}"
        )
    loads = [w.load for w in kept]
    dropped = [w for w in windows if w.dropped]
    return "\n".join([
        "<!-- written by experiments/workloads/philly_windows.py; do not edit by hand -->",
        "",
        f"`{command}` cut the Philly trace ({n_trace:,} jobs) from day "
        f"{windows[0].start_s / DAY:g} on into {len(windows)} windows of {days:g} days and kept "
        f"{len(kept)}: offered loads {min(loads):.3f}-{max(loads):.3f} (mean "
        f"{np.mean(loads):.3f}) on clusters of {min(w.size.gpus for w in kept)}-"
        f"{max(w.size.gpus for w in kept)} GPUs, durations capped at the window + "
        f"{_days(tail_days)} for the load, arrivals as in the trace. "
        f"Jobs larger than their window's cluster are left out (`gpu_demand: filter`): "
        f"{sum(w.filtered for w in kept)} in all. Dropped: {len(dropped)} windows "
        f"({sum('fewer' in w.dropped for w in dropped)} with fewer than {min_jobs} jobs, "
        f"{sum('no cluster' in w.dropped for w in dropped)} that no size fits).",
        "",
        *(f"- {p}: {text}" for p, text in parts.items()),
        "",
        base,
        "",
        table(windows),
        "",
    ])  # fmt: skip


def check(windows: list[Window], group: dict, policies: list[str], label: str | None,
          traces_dir: str | None, seed: int, command: str) -> str:  # fmt: skip
    """Run one test window under each policy; a markdown page of wall times and JCTs."""
    from dlcluster_gym import simulate
    from dlcluster_gym.splits import entry_scenario

    tests = [w for w in windows if w.part == "test"]
    if label:
        w = next((x for x in tests if x.label == label), None)
    else:  # the largest: the slowest to simulate, and the most for a policy to decide
        w = max(tests, key=lambda x: x.jobs)
    if w is None:
        sys.exit(f"--check-window {label}: not a test window ({', '.join(x.label for x in tests)})")
    cfg = entry_scenario(PRESET, overrides(w, group))
    rows = ["| policy | wall s | avg JCT h | P99 JCT h | jobs | unfinished |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for p in policies:
        t0 = time.perf_counter()
        res = simulate(cfg, p, seed=seed, traces_dir=traces_dir)
        wall = time.perf_counter() - t0
        s = res.summary
        rows.append(f"| {p} | {wall:.1f} | {s['avg_jct_s'] / 3600:.2f} | "
                    f"{s['p99_jct_s'] / 3600:.2f} | {s['jobs_total']:,} | "
                    f"{s.get('jobs_unfinished', 0)} |")  # fmt: skip
        print(rows[-1], flush=True)
    import os

    return "\n".join([
        "<!-- written by experiments/workloads/philly_windows.py --check; do not edit by hand -->",
        "",
        f"`{command}`: test window {w.label} ({w.jobs:,} jobs, {w.size.gpus} GPUs, load "
        f"{w.load:.3f}), seed {seed}, one process each on a machine of {os.cpu_count()} cores.",
        "",
        *rows,
        "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces-dir", default=None, help="trace root (default: as the package)")
    ap.add_argument("--days", type=float, default=2.0, help="window length in days")
    ap.add_argument("--start-day", type=float, default=14.0)
    ap.add_argument(
        "--tail-days",
        type=float,
        default=None,
        help="durations capped at window + tail for the load (default: days / 2)",
    )
    ap.add_argument("--min-jobs", type=int, default=100)
    ap.add_argument("--split-out", type=Path, default=SPLIT)
    ap.add_argument("--page-out", type=Path, default=PAGE)
    ap.add_argument("--check", default="", help="comma-separated policies to run on a test window")
    ap.add_argument("--check-window", default=None, help="the test window's label")
    ap.add_argument("--check-seed", type=int, default=101)
    args = ap.parse_args(argv)
    if not args.days > 0:
        ap.error("--days must be > 0")
    tail = args.days / 2 if args.tail_days is None else args.tail_days
    command = shlex.join(
        ["python", "experiments/workloads/philly_windows.py", *(argv or sys.argv[1:])]
    )
    base = load_scenario(PRESET)
    dally = load_cluster(DALLY)
    if base.cluster.tiers != dally.tiers or base.cluster.groups != dally.groups:
        sys.exit(f"preset {PRESET}: its cluster must be {DALLY}'s (the Dally network)")
    group = base.cluster.groups[0].model_dump(mode="json", exclude_none=True)
    shape = Size(1, group["machines_per_rack"], group["gpus_per_machine"])
    windows, n_trace = cut(args.traces_dir, args.days, args.start_day, tail, args.min_jobs, shape)
    whole = load_philly(traces_dir=args.traces_dir, time_window_s=base.workload.time_window_s)
    lo, hi = (x / DAY for x in base.workload.time_window_s)
    base_line = (
        f"The preset `{PRESET}` alone (no overrides) runs days {lo:g}-{hi:g} of the trace "
        f"({len(whole):,} jobs) on `{DALLY}` ({base.cluster.num_gpus} GPUs): "
        f"offered load {whole.offered_load(base.cluster.num_gpus):.2f} (GPU time over GPUs x "
        "arrival span, durations not capped)."
    )
    print(table(windows))
    args.split_out.parent.mkdir(parents=True, exist_ok=True)
    args.split_out.write_text(split_yaml(windows, group, command, args.days, tail))
    args.page_out.parent.mkdir(parents=True, exist_ok=True)
    args.page_out.write_text(
        page(windows, n_trace, command, args.days, tail, args.min_jobs, base_line)
    )
    print(f"wrote {args.split_out} and {args.page_out}")
    if args.check:
        policies = [p.strip() for p in args.check.split(",") if p.strip()]
        text = check(windows, group, policies, args.check_window, args.traces_dir,
                     args.check_seed, command)  # fmt: skip
        CHECK_PAGE.write_text(text)
        print(f"wrote {CHECK_PAGE}")


if __name__ == "__main__":
    main()
