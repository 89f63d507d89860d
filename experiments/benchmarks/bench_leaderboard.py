"""How long a leaderboard run took, read from its run directory.

The run's wall time is the span from the first cell's start (its file's modification time less
its recorded wall time) to the last cell's finish (the latest modification time), so run this
right after the run, before a checkout resets the files' times. Also: the cells' summed wall
and CPU time, the slowest cells, and the time per scenario and per entrant, against a target.

    python experiments/benchmarks/bench_leaderboard.py \\
        --run experiments/results/leaderboards/traces-full --target-min 30 \\
        --out experiments/results/performance/traces-full-time.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_out import markdown_copy  # a neighbour script


def run_window_s(run: Path, df: pd.DataFrame) -> float | None:
    """First cell start to last cell finish, from the cell files' modification times; None
    when the files are missing or their times cannot span the run (a fresh checkout)."""
    starts, ends = [], []
    for cid, wall in zip(df["id"], df["wall_s"].astype(float), strict=True):
        f = run / "cells" / f"{cid}.json"
        if not f.exists():
            return None
        t = f.stat().st_mtime
        starts.append(t - wall)
        ends.append(t)
    if len(df) > 1 and max(ends) - min(ends) < 1.0:
        return None  # every file has the same time: a checkout's, not the run's
    return max(ends) - min(starts)


def _table(df: pd.DataFrame, by: str, top: int) -> list[str]:
    """Cells, summed wall and CPU seconds, share and slowest cell per ``by``, largest first."""
    g = df.groupby(by).agg(
        cells=("id", "size"),
        wall=("wall_s", "sum"),
        cpu=("cpu_s", "sum"),
        slowest=("wall_s", "max"),
    )
    g = g.sort_values("wall", ascending=False)
    total = float(df["wall_s"].sum())
    out = [f"| {by} | cells | wall s | share | CPU s | slowest cell s |"]
    out.append("|---|---:|---:|---:|---:|---:|")

    def row(name: str, cells: int, wall: float, cpu: float, slowest: float) -> str:
        share = 100 * wall / total
        return f"| {name} | {cells} | {wall:,.0f} | {share:.1f} % | {cpu:,.0f} | {slowest:,.0f} |"

    for name, r in g.head(top).iterrows():
        out.append(row(f"`{name}`", int(r.cells), r.wall, r.cpu, r.slowest))
    if len(g) > top:
        rest = g.iloc[top:]
        out.append(row(f"{len(rest)} others", int(rest.cells.sum()), rest.wall.sum(),
                       rest.cpu.sum(), rest.slowest.max()))  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="experiments/results/leaderboards/traces-full",
                    help="the leaderboard's run directory (results.csv, cells/)")  # fmt: skip
    ap.add_argument("--target-min", type=float, default=30.0, help="wall-time target, minutes")
    ap.add_argument("--top", type=int, default=12, help="rows per table")
    ap.add_argument("--out", metavar="FILE", help="also write the page as markdown")
    args = ap.parse_args()
    run = Path(args.run)
    csv = run / "results.csv"
    if not csv.exists():
        raise SystemExit(f"{csv}: no such file (the run directory of a leaderboard run)")
    df = pd.read_csv(csv)
    codes = df["code"].astype(str).nunique() if "code" in df else 1
    with markdown_copy(args.out, f"Leaderboard run time: {run.name}"):
        window = run_window_s(run, df)
        total, cpu = float(df["wall_s"].sum()), float(df["cpu_s"].sum())
        slow = df.loc[df["wall_s"].idxmax()]
        print(f"# {len(df)} cells; their wall times sum to {total:,.0f} s ({cpu:,.0f} CPU s); "
              f"the slowest cell is `{slow['id']}` at {slow['wall_s']:,.0f} s.")  # fmt: skip
        if codes > 1:
            print(f"# The cells come from {codes} versions of the code (`--rerun`): they are "
                  "not one run, so no run wall time is given.")  # fmt: skip
        elif window is None:
            print("# The cell files' times do not span the run (a fresh checkout?): no run wall "
                  "time is given.")  # fmt: skip
        else:
            target = 60.0 * args.target_min
            verdict = (
                "met"
                if window <= target
                else f"missed by {(window - target) / 60:,.1f} min ({window / target:.2f}x)"
            )
            print(f"# Run wall time, first cell start to last cell finish: {window / 60:,.1f} min "
                  f"({window:,.0f} s); target {args.target_min:g} min: {verdict}.")  # fmt: skip
        print("# Per scenario:")
        print("\n".join(_table(df, "scenario", args.top)))
        print("# Per entrant:")
        print("\n".join(_table(df, "entrant", args.top)))


if __name__ == "__main__":
    main()
