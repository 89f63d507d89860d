"""Reproduce Gavel's heterogeneity-aware vs heterogeneity-agnostic comparison (OSDI'20,
section 7, continuous-single and continuous-multiple traces): average JCT against the input
job rate.

The scenarios are ``gavel-continuous-single`` (1-GPU jobs) and ``gavel-continuous-multiple``
(1-8 GPUs), both with durations of 10^x minutes on V100s, Poisson arrivals, 36 V100 + 36
P100 + 36 K80, no network and 6-minute rounds. Each policy runs with the GPU types profiled
as the engine runs them (``gavel-las``; with ``--policies`` also ``gavel-ftf-history``) and
with every type profiled at the V100's speed (the ``-agnostic`` variants). As in Gavel's
evaluation, the average JCT is over a window of job ids (``--window``).

Writes, under --out (default experiments/results/gavel/):
  runs.csv         per trace, rate, seed and policy: windowed average JCT, makespan, wall
                   time, the command (running some --traces keeps the other traces' rows)
  jct_vs_rate.png  windowed average JCT against the input job rate (Gavel Figs. 8-9's axes)
  report.md        the tables per trace and the claims table (`claims.py` beside it)

Usage: python experiments/reproductions/reproduce_gavel.py [--traces single multiple]
           [--seeds S ...] [--rates R ...] [--workers 2]   (about 40 minutes on 2 cores)
       python experiments/reproductions/reproduce_gavel.py --report-only   (report.md from runs.csv)
"""

from __future__ import annotations

import argparse
import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from claims import (  # a neighbour script
    MIN_SEEDS,
    Claim,
    about,
    claims_section,
    paired_ci,
    speedup_pct,
    up_to,
)
from tqdm import tqdm

from dlcluster_gym import simulate
from dlcluster_gym.config import ScenarioConfig, load_scenario
from dlcluster_gym.workers import die_with_parent


@dataclass(frozen=True)
class Trace:
    """One of Gavel's simulated traces: our scenario, its input rates, and Gavel's own
    result for it (LAS, agnostic over aware average JCT at a rate)."""

    scenario: str
    rates: tuple[float, ...]  # jobs per hour
    figure: str
    gavel_rate: float
    gavel_agnostic_h: float
    gavel_aware_h: float


TRACES = {
    "single": Trace("gavel-continuous-single", (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), "Fig. 8",
                    5.6, 96.0, 29.0),
    "multiple": Trace("gavel-continuous-multiple", (0.5, 1.0, 2.0, 3.0), "Fig. 9",
                      2.8, 169.9, 55.8),
}  # fmt: skip
PAIRS = {"gavel-las": "gavel-las-agnostic", "gavel-ftf-history": "gavel-ftf-history-agnostic"}
POLICIES = tuple(p for pair in PAIRS.items() for p in pair)
# Gavel's Figures 8 and 9 are max-min fairness; finish-time fairness (its Figure 10) is
# optional here: its bisection over LPs at every round makes a run several minutes long.
DEFAULT_POLICIES = ("gavel-las", "gavel-las-agnostic")
SEEDS = tuple(range(1, MIN_SEEDS + 1))  # the claims rule's minimum for "reproduced"
JOBS = 1000
WINDOW = (200, 800)  # job ids measured: after the cluster fills, before arrivals stop
OUT = Path(__file__).resolve().parents[1] / "results" / "gavel"


def scenario(trace: str, rate: float, jobs: int) -> ScenarioConfig:
    """The trace's scenario at ``rate`` jobs/hour with ``jobs`` jobs."""
    sc = load_scenario(TRACES[trace].scenario)
    wl = sc.workload.model_copy(update={"rate_per_hour": rate, "num_jobs": jobs})
    return sc.model_copy(update={"workload": wl})


def run(
    trace: str, policy: str, rate: float, seed: int, jobs: int, window: tuple[int, int]
) -> dict:
    """One run: ``policy`` on the trace's scenario at ``rate`` jobs/hour with ``jobs`` jobs."""
    res = simulate(scenario(trace, rate, jobs), policy, seed)
    ids = np.asarray(res.jobs["job_id"])
    jct = np.asarray(res.jobs["jct_s"], dtype=np.float64)
    sel = (ids >= window[0]) & (ids < window[1])
    return {
        "trace": trace,
        "policy": policy,
        "rate_per_hour": rate,
        "seed": seed,
        "window_first": window[0],
        "window_end": window[1],
        "window_avg_jct_h": float(np.nanmean(jct[sel])) / 3600.0,
        "avg_jct_h": float(res.summary["avg_jct_s"]) / 3600.0,
        "makespan_h": float(res.summary["makespan_s"]) / 3600.0,
        "jobs_completed": int(res.summary["jobs_completed"]),
        "wall_s": float(res.summary["wall_s"]),
    }


def planned_runs(args: argparse.Namespace) -> list[tuple[str, str, float, int]]:
    """(trace, policy, rate, seed) of every run: each trace at --rates, else its own."""
    return [
        (t, p, r, s)
        for t in args.traces
        for r in (args.rates or TRACES[t].rates)
        for s in args.seeds
        for p in args.policies
    ]


def run_all(args: argparse.Namespace) -> pd.DataFrame:
    plan = planned_runs(args)
    window = (args.window[0], args.window[1])
    if args.workers == 1:
        rows = [run(*cell, args.jobs, window) for cell in tqdm(plan, desc="gavel runs")]
    else:
        with ProcessPoolExecutor(
            args.workers, initializer=die_with_parent, initargs=(os.getpid(),)
        ) as pool:
            futures = [pool.submit(run, *cell, args.jobs, window) for cell in plan]
            rows = [f.result() for f in tqdm(futures, desc="gavel runs", unit="run")]
    df = pd.DataFrame(rows)
    df["command"] = command_line(args)
    return df


def gains(
    df: pd.DataFrame, labelled: bool = False
) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """Per (trace, pair, rate): the agnostic policy's windowed average JCT over the aware
    one's (mean over seeds of each), as a gain in % ((ratio - 1) x 100), and its 95 %
    interval over a paired bootstrap of the seeds both policies ran."""
    out: dict[str, float] = {}
    ci: dict[str, tuple[float, float]] = {}
    jct = df.set_index(["trace", "policy", "rate_per_hour", "seed"])[
        "window_avg_jct_h"
    ].sort_index()
    for trace in TRACES:
        for aware, agnostic in PAIRS.items():
            for rate in sorted(df.loc[df["trace"] == trace, "rate_per_hour"].unique()):
                try:
                    awa, agn = jct.loc[(trace, aware, rate)], jct.loc[(trace, agnostic, rate)]
                except KeyError:
                    continue
                name = aware.removeprefix("gavel-").removesuffix("-history").upper()
                label = f"{trace} {name} {rate:g}/h" if labelled else f"{name} {rate:g}/h"
                out[label] = speedup_pct(agn.to_numpy(), awa.to_numpy())
                both = awa.index.intersection(agn.index)
                ci[label] = paired_ci(speedup_pct, agn[both].to_numpy(), awa[both].to_numpy())
    return out, ci


def _window(df: pd.DataFrame) -> tuple[int, int]:
    return int(df["window_first"].iloc[0]), int(df["window_end"].iloc[0])


def plot(df: pd.DataFrame, out: Path) -> None:
    first, end = _window(df)
    traces = [t for t in TRACES if (df["trace"] == t).any()]
    fig, axes = plt.subplots(1, len(traces), figsize=(6 * len(traces), 4), squeeze=False)
    for ax, trace in zip(axes[0], traces, strict=True):
        sub = df[df["trace"] == trace]
        mean = sub.groupby(["policy", "rate_per_hour"])["window_avg_jct_h"].mean().unstack(0)
        for policy in mean.columns:
            style = "--" if policy.endswith("-agnostic") else "-"
            ax.plot(mean.index, mean[policy], style, marker="o", label=policy)
        ax.set_xlabel("input job rate (jobs/hour)")
        ax.set_ylabel(f"average JCT of jobs {first}-{end - 1} (hours)")
        ax.set_title(f"{TRACES[trace].scenario} (mean over seeds)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "jct_vs_rate.png", dpi=120)
    plt.close(fig)


def command_line(args: argparse.Namespace) -> str:
    command = "python experiments/reproductions/reproduce_gavel.py"
    for flag, value, default in (
        ("--traces", args.traces, list(TRACES)),
        ("--rates", args.rates or [], []),
        ("--seeds", args.seeds, list(SEEDS)),
        ("--policies", args.policies, list(DEFAULT_POLICIES)),
        ("--window", args.window, list(WINDOW)),
    ):
        if list(value) != default:
            command += f" {flag} " + " ".join(f"{v:g}" if isinstance(v, float) else str(v)
                                              for v in value)  # fmt: skip
    if args.jobs != JOBS:
        command += f" --jobs {args.jobs}"
    return command


GAP_REASON = (
    "the gain falls with the input rate here, where Gavel's grows until agnostic LAS breaks "
    "down. In runs of Gavel's length (5,000 jobs, jobs 4000-4999 measured; "
    "experiments/results/gavel/long/report.md) the aware policy itself saturates by 6 jobs/h "
    "(99 h, agnostic 115 h, +16 %; at 4.5 jobs/h 40 h vs 59 h, +46 %) where Gavel's holds "
    "29 h at 5.6 jobs/h: this cluster serves less work per hour than Gavel's. Its per-type "
    "speeds differ from Gavel's measured ones (recommendation jobs run 3.75x slower on a K80 "
    "than on a V100 here, about as fast in Gavel's data; docs/concepts.md), a likely cause "
    "no run here isolates. The large gains at the lowest rates come from another mechanism: "
    "the agnostic LP, seeing every type alike, leaves jobs on K80s and P100s while V100s idle"
)


def nearest(sub: pd.DataFrame, rate: float) -> float:
    """Our input rate closest to ``rate`` (the larger on a tie)."""
    rates = sorted(sub["rate_per_hour"].unique())
    return min(rates, key=lambda r: (abs(r - rate), -r))


def write_report(df: pd.DataFrame, out: Path) -> str:
    seeds = sorted(df["seed"].unique())
    first, end = _window(df)
    commands = " and ".join(f"`{c}`" for c in dict.fromkeys(df["command"]))
    lines = [
        "# Gavel: heterogeneity-aware vs heterogeneity-agnostic policies",
        "",
        f"Generated by {commands}; the {len(df)} runs took {df['wall_s'].sum():.0f} s in all "
        f"(wall time per run, summed). {int(df['jobs_completed'].max())} jobs per run, seeds "
        f"{', '.join(map(str, seeds))}; the average JCT is over jobs {first}-{end - 1} (a window "
        "of job ids, as in Gavel's evaluation), in hours, mean over "
        "seeds. Job speeds per GPU type come from the engine's model (docs/concepts.md, 'GPU "
        "types'), fitted to Gavel's measured throughputs, not from GPUs.",
        "",
        "![average JCT against the input job rate](jct_vs_rate.png)",
    ]
    every, every_ci = gains(df, labelled=True)
    claims = [
        Claim(
            "Abstract: heterogeneity-aware policies improve average JCT by up to 3.5x over "
            "heterogeneity-agnostic ones; gain = (agnostic / aware - 1) x 100",
            up_to(250.0),
            every,
            "`gavel-las` vs `gavel-las-agnostic` (and `gavel-ftf-history` vs its agnostic "
            "variant where run) on both traces, per input rate",
            reason=GAP_REASON,
            seeds=len(seeds),
            ci=every_ci,
        )
    ]
    for trace, spec in TRACES.items():
        sub = df[df["trace"] == trace]
        if sub.empty:
            continue
        stats = (
            sub.groupby(["rate_per_hour", "policy"])["window_avg_jct_h"]
            .agg(["mean", "std", "count"])
            .reset_index()
        )
        lines += [
            "",
            f"## `{spec.scenario}` (Gavel {spec.figure})",
            "",
            "| rate (jobs/h) | policy | avg JCT (h) | std over seeds (h) | makespan (h) |",
            "|---:|---|---:|---:|---:|",
        ]
        span = sub.groupby(["rate_per_hour", "policy"])["makespan_h"].mean()
        for r in stats.itertuples():
            std = "-" if r.count < 2 or not math.isfinite(r.std) else f"{r.std:.1f}"
            mk = span[(r.rate_per_hour, r.policy)]
            lines.append(
                f"| {r.rate_per_hour:g} | `{r.policy}` | {r.mean:.1f} | {std} | {mk:.0f} |"
            )
        ratio = spec.gavel_agnostic_h / spec.gavel_aware_h
        rate = nearest(sub, spec.gavel_rate)
        at_rate, at_rate_ci = gains(sub[sub["rate_per_hour"] == rate])
        claims.append(
            Claim(
                f"{spec.figure} ({trace}, Gavel's published results): LAS agnostic "
                f"{spec.gavel_agnostic_h:g} h vs aware {spec.gavel_aware_h:g} h at "
                f"{spec.gavel_rate:g} jobs/h, {ratio:.2f}x",
                about((ratio - 1.0) * 100.0),
                at_rate,
                f"`gavel-las` vs `gavel-las-agnostic` on `{spec.scenario}` at our input rate "
                f"nearest to Gavel's ({rate:g} jobs/h)",
                reason=GAP_REASON,
                seeds=int(sub["seed"].nunique()),
                ci=at_rate_ci,
            )
        )
    lines += ["", *claims_section(CLAIMS_HEADING, "", claims)]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text


CLAIMS_HEADING = "Claims (section 7): paper vs ours"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(TRACES), choices=list(TRACES))
    ap.add_argument("--rates", type=float, nargs="+", default=None,
                    help="jobs/hour for every trace (default: each trace's own)")  # fmt: skip
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--policies", nargs="+", default=list(DEFAULT_POLICIES), choices=POLICIES)
    ap.add_argument("--jobs", type=int, default=JOBS, help="jobs per run")
    ap.add_argument("--window", type=int, nargs=2, default=list(WINDOW), metavar=("FIRST", "END"))
    ap.add_argument("--workers", type=int, default=2, help="parallel runs (processes)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report-only", action="store_true", help="report.md from runs.csv")
    args = ap.parse_args(argv)
    if not 0 <= args.window[0] < args.window[1] <= args.jobs:
        ap.error(f"--window must be FIRST END with 0 <= FIRST < END <= --jobs, got {args.window}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / "runs.csv"
    if args.report_only:
        df = pd.read_csv(csv)
    else:
        df = run_all(args)
        if csv.exists():  # keep the other traces' committed runs
            old = pd.read_csv(csv)
            df = pd.concat([old[~old["trace"].isin(args.traces)], df], ignore_index=True)
        df.to_csv(csv, index=False)
    plot(df, args.out)
    print(write_report(df, args.out))


if __name__ == "__main__":
    main()
