"""Reproduce the Cassini evaluation (Cassini thesis 4.5): Th+Cassini vs Themis, Ideal and
Random on the testbed Poisson traces (the 4.5.2 mix and the model-parallel trace), with the
per-link sharing that explains the gains, plus the compatibility tables.

Writes, under --out (default experiments/results/cassini/):
  runs.csv          one row per (scenario, policy, seed): average JCT, average / P99
                    iteration time, contention slowdown, migrations, link sharing
  iter_cdf.png      CDF of per-job iteration times (Fig. 4.11(b) layout), seed 1
  report.md         the tables, the claims table (`claims.py` beside it), the acceptance
                    check, and the compatibility reproductions
                    (HotNets Table 1, Cassini Table 4.3, the 40 + 60 ms example) from
                    experiments/reproductions/cassini_compat.py when that script is present

Usage: python experiments/reproductions/reproduce_cassini.py [--seeds 1 2 ... 20]
          [--scenarios NAME ...] [--workers N] [--out DIR]
       python experiments/reproductions/reproduce_cassini.py --report-only [--out DIR]
          (report.md from the runs.csv and compat.md under --out, no simulation re-run)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from claims import Claim, about, claims_section, paired_ci, speedup_pct  # a neighbour script

from dlcluster_gym import simulate
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.perf.contention import SharedLinks

SCENARIOS = {
    "cassini-testbed-poisson": (
        "4.5.2, Fig. 4.11: data- and model-parallel mix",
        "1.6x / 1.8x",
        (1.6, 1.8),
    ),
    "cassini-testbed-poisson-mp": (
        "4.5.2, Fig. 4.12: model-parallel jobs",
        "1.2x / 1.6x",
        (1.2, 1.6),
    ),
}
# What produced the claims' numbers (Th+Cassini over Themis).
MECHANISM = (
    "`cassini`: Th+Cassini, Themis's aggregate-improvement arbiter (arbiter=auction) over bids "
    "for worker counts tuned by finish-time fairness (workers=tuned) with Cassini's placement "
    "candidates (candidates=auction, up to 10) vs `themis` (arbiter=auction, placement=penalty, "
    "workers=tuned)"
)
# (label, policy, policy parameters)
POLICIES = {
    "ideal": ("Ideal (bound)", "ideal", {}),
    "cassini": ("Th+Cassini", "cassini", {}),
    "cassini-new-only": ("Th+Cassini, candidates=new-only", "cassini", {"candidates": "new-only"}),
    "themis": ("Themis", "themis", {}),
    "random": ("Random", "random", {}),
    # Themis's jobs bidding for their demand only (worker counts not tuned), with and without
    # Cassini
    "themis-demand": ("Themis, workers=demand", "themis-demand", {}),
    "cassini-demand": ("Th+Cassini, workers=demand", "cassini-demand", {}),
}


def sharing(res, cluster) -> dict:
    """Per shared link, the time-weighted number of jobs crossing it (from the event log):
    the fraction of running jobs' link-time spent on a link with another job, the largest
    number of jobs ever on one link, and the share of the busy link-time with 2+ jobs."""
    links = SharedLinks(cluster)
    on: dict[int, set[int]] = {}
    job_links: dict[int, list[int]] = {}
    busy = shared = job_time = job_shared = 0.0
    most = 0
    last = 0.0
    for e in res.events:
        t = e["t"]
        dt = t - last
        last = t
        for members in on.values():
            k = len(members)
            if k:
                busy += dt
                job_time += dt * k
                if k > 1:
                    shared += dt
                    job_shared += dt * k
        job = e.get("job")
        if e["event"] in ("finish", "preempt", "migrate") and job in job_links:
            for link in job_links.pop(job):
                on[link].discard(job)
        if e["event"] in ("start", "migrate"):
            ls = links.links(e["gpus"]).tolist()
            job_links[job] = ls
            for link in ls:
                on.setdefault(link, set()).add(job)
                most = max(most, len(on[link]))
    return {
        "link_time_shared": shared / busy if busy else 0.0,
        "job_link_time_shared": job_shared / job_time if job_time else 0.0,
        "max_sharers": most,
    }


def run(scenario: str, key: str, seed: int) -> dict:
    _, policy, params = POLICIES[key]
    res = simulate(scenario, policy, seed=seed, policy_params=params, record_events=True)
    j = res.jobs
    it = (j["compute_s"] + j["comm_s"]) / j["iterations"]
    s = res.summary
    share = sharing(res, Cluster(load_scenario(scenario).cluster)) if key != "ideal" else {}
    return {
        "scenario": scenario,
        "policy": key,
        "seed": seed,
        "avg_jct_s": s["avg_jct_s"],
        "p99_jct_s": s["p99_jct_s"],
        "avg_iter_ms": 1e3 * float(np.mean(it)),
        "p99_iter_ms": 1e3 * float(np.percentile(it, 99)),
        "contention_slowdown": s.get("avg_contention_slowdown", 1.0),
        "migrations": int(j["migrations"].sum()),
        "makespan_s": s["makespan_s"],
        "wall_s": s["wall_s"],
        **share,
        "iter_ms": (1e3 * it).tolist(),
    }


def _plot(rows: list[dict], seed: int, out: Path) -> None:
    scens = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, axes = plt.subplots(1, len(scens), figsize=(5.5 * len(scens), 3.8))
    for ax, scen in zip(np.atleast_1d(axes), scens, strict=True):
        for r in rows:
            if r["seed"] == seed and r["scenario"] == scen:
                x = np.sort(r["iter_ms"])
                ax.plot(x, np.arange(1, x.size + 1) / x.size, label=POLICIES[r["policy"]][0])
        ax.set_xlabel("iteration time (ms)")
        ax.set_ylabel("CDF over jobs")
        ax.set_xscale("log")
        ax.legend(fontsize=7)
        ax.set_title(f"{scen}, seed {seed}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "iter_cdf.png", dpi=110)
    plt.close(fig)


def _scenario_section(df: pd.DataFrame, scen: str, seeds: list[int]) -> list[str]:
    what, paper, _ = SCENARIOS[scen]
    d = df[df.scenario == scen]
    mean = d.groupby("policy").mean(numeric_only=True).reindex(list(POLICIES))
    lines = [
        f"## `{scen}` ({what}; mean over seeds {', '.join(map(str, seeds))})",
        "",
        "| policy | avg JCT (s) | P99 JCT (s) | avg iteration (ms) | P99 iteration (ms) | "
        "contention slowdown | migrations | job link-time shared | max jobs on a link |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p, r in mean.iterrows():
        shared = "" if p == "ideal" else f"{r.job_link_time_shared:.1%}"
        most = "" if p == "ideal" else f"{r.max_sharers:.0f}"
        lines.append(
            f"| {POLICIES[p][0]} | {r.avg_jct_s:,.0f} | {r.p99_jct_s:,.0f} | "
            f"{r.avg_iter_ms:.1f} | {r.p99_iter_ms:.1f} | {r.contention_slowdown:.4f} | "
            f"{r.migrations:.1f} | {shared} | {most} |"
        )
    th, ca, idl = mean.loc["themis"], mean.loc["cassini"], mean.loc["ideal"]
    lines += [
        "",
        f"Th+Cassini vs Themis: average iteration time **{th.avg_iter_ms / ca.avg_iter_ms:.3f}x**, "
        f"P99 iteration time **{th.p99_iter_ms / ca.p99_iter_ms:.3f}x**, average JCT "
        f"{th.avg_jct_s / ca.avg_jct_s:.3f}x better (paper: {paper}). Ideal vs Themis: "
        f"{th.avg_iter_ms / idl.avg_iter_ms:.3f}x / {th.p99_iter_ms / idl.p99_iter_ms:.3f}x: "
        "no placement can gain more than that on this model. Random vs Ideal: "
        f"{mean.loc['random'].avg_iter_ms / idl.avg_iter_ms:.3f}x.",
        "",
    ]
    if {"themis-demand", "cassini-demand"} <= set(d.policy):
        td, cd = mean.loc["themis-demand"], mean.loc["cassini-demand"]
        lines += [
            "With bids for the demand only (`workers=demand`, our variant: no job runs on "
            "fewer GPUs than its demand): Th+Cassini vs Themis, average iteration time "
            f"{td.avg_iter_ms / cd.avg_iter_ms:.3f}x, P99 iteration time "
            f"{td.p99_iter_ms / cd.p99_iter_ms:.3f}x, average JCT "
            f"{td.avg_jct_s / cd.avg_jct_s:.3f}x better. Themis (tuned worker counts) vs "
            f"demand-only Themis: average JCT {td.avg_jct_s / th.avg_jct_s:.3f}x better, P99 "
            f"JCT {td.p99_jct_s / th.p99_jct_s:.3f}x; average iteration time "
            f"{th.avg_iter_ms / td.avg_iter_ms:.3f}x the demand-only one's (a job on fewer "
            "GPUs takes longer per iteration; model-parallel jobs bid for their demand only).",
            "",
        ]
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 21)))
    ap.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=Path("experiments/results/cassini"))
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="rebuild report.md from runs.csv (and compat.md) under --out without running "
        "the simulations; the runs there set --seeds and --scenarios, the figure is kept",
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        df = pd.read_csv(args.out / "runs.csv")
        args.seeds = sorted(int(s) for s in df.seed.unique())
        args.scenarios = [sc for sc in SCENARIOS if sc in set(df.scenario)]
        note = f"{len(df)} runs; this report was rebuilt from their runs.csv with --report-only"
        lines = write_report(df, args, note, run_compat=False)
    else:
        t0 = time.perf_counter()
        cells = [(sc, p, s) for sc in args.scenarios for s in args.seeds for p in POLICIES]
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            rows = list(pool.map(run, *zip(*cells, strict=True)))
        wall = time.perf_counter() - t0
        df = pd.DataFrame([{k: v for k, v in r.items() if k != "iter_ms"} for r in rows])
        df.to_csv(args.out / "runs.csv", index=False)
        _plot(rows, args.seeds[0], args.out)
        lines = write_report(df, args, f"{len(rows)} runs, {wall:.0f} s wall", run_compat=True)
    print("\n".join(lines))


def write_report(
    df: pd.DataFrame, args: argparse.Namespace, note: str, run_compat: bool
) -> list[str]:
    """report.md from the runs; ``run_compat``: regenerate compat.md first (else the one
    under --out is included as it is)."""
    lines = [
        "# Cassini reproduction (Cassini thesis 4.5)",
        "",
        f"Generated by `python experiments/reproductions/reproduce_cassini.py --seeds "
        f"{' '.join(map(str, args.seeds))}` ({note}).",
        "",
        "Cluster `cassini-testbed`: 24 single-A100 servers with 50 Gb/s NICs under 12 ToRs of 2 "
        "servers, 2:1 over-subscribed ToR uplinks (50 Gb/s each). Poisson arrivals at load "
        "0.9, 1-12 GPUs, 200-1000 iterations, link sharing on, model profiles from the "
        "`cassini-testbed` source (`configs/profiles/cassini-testbed.yaml`, as the engine runs "
        "them: `dlcluster models --overheads --profile cassini-testbed`). Iteration time of a "
        "job = (compute + exposed communication incl. contention) / iterations. Themis's "
        "arbiter picks the bids that maximize the summed finish-time-fairness improvement "
        "(`arbiter=auction`: fairness knob 0.2, partial allocation, leftovers; "
        "`baselines/themis.py`). Th+Cassini's candidates move running jobs too "
        "(`candidates=auction`, thesis 4.4.2 step 1); the "
        "`new-only` row is the earlier behaviour. Themis's jobs bid for fewer GPUs than their "
        "demand too (`workers=tuned`: powers of two below it; 4.5.1's worker counts tuned by "
        "finish-time fairness); the `workers=demand` rows (our variant) bid for the demand "
        "only. The claims compare the default rows. "
        "'job link-time shared': of the time running "
        "jobs spend on shared links (NICs, ToR uplinks), the part spent on a link that carries "
        "another job.",
        "",
    ]
    for scen in args.scenarios:
        lines += _scenario_section(df, scen, args.seeds)
    lines += _paper_table(df)
    lines += _why(df)
    lines += [
        "## Acceptance: per seed, Cassini's average JCT no worse than Themis's and "
        "its average iteration time better (`cassini-testbed-poisson`)",
        "",
    ]
    base = df[df.scenario == "cassini-testbed-poisson"]
    for seed in args.seeds:
        s = base[base.seed == seed].set_index("policy")
        jct_ok = s.loc["cassini", "avg_jct_s"] <= s.loc["themis", "avg_jct_s"]
        it_ok = s.loc["cassini", "avg_iter_ms"] < s.loc["themis", "avg_iter_ms"]
        lines.append(
            f"- seed {seed}: avg JCT {s.loc['cassini', 'avg_jct_s']:,.1f} vs "
            f"{s.loc['themis', 'avg_jct_s']:,.1f} s **{'pass' if jct_ok else 'FAIL'}**; avg "
            f"iteration {s.loc['cassini', 'avg_iter_ms']:.1f} vs "
            f"{s.loc['themis', 'avg_iter_ms']:.1f} ms **{'pass' if it_ok else 'FAIL'}**"
        )
    lines += ["", "![iteration time CDF](iter_cdf.png)", ""]
    compat = Path(__file__).with_name("cassini_compat.py")
    md = args.out / "compat.md"
    if run_compat and compat.exists():
        proc = subprocess.run(
            [sys.executable, str(compat), "--out", str(md)],
            check=True,
            capture_output=True,
            text=True,
        )
        lines += ["## Compatibility reproductions", ""]
        lines += [md.read_text() if md.exists() else proc.stdout]
    elif md.exists():
        lines += ["## Compatibility reproductions", "", md.read_text()]
    (args.out / "report.md").write_text("\n".join(lines))
    return lines


def _why(df: pd.DataFrame) -> list[str]:
    """Why the gain stays below the paper's, from the runs."""
    lines = ["## Why Th+Cassini gains less here than in the thesis", ""]
    for scen in df.scenario.unique():
        mean = df[df.scenario == scen].groupby("policy").mean(numeric_only=True)
        idl, th, rnd = mean.loc["ideal"], mean.loc["themis"], mean.loc["random"]
        gap = th.avg_iter_ms / idl.avg_iter_ms
        lines.append(
            f"- `{scen}`: Themis is only {gap - 1:.1%} above Ideal in average iteration "
            f"time and Random {rnd.avg_iter_ms / idl.avg_iter_ms - 1:.1%}, so no placement "
            f"can gain more than {gap:.3f}x over Themis (the target is 1.3x). Themis's jobs "
            f"spend {th.job_link_time_shared:.1%} of their link-time on a link with another "
            f"job, at most {th.max_sharers:.0f} jobs on a link; Th+Cassini "
            f"{mean.loc['cassini'].job_link_time_shared:.1%}."
        )
    lines += [
        "- Where the sharing can happen: on `cassini-testbed` every NIC serves one GPU, so "
        "only the 12 ToR uplinks are shared between jobs, and each has 2 servers below it: at "
        "most 2 jobs per link, and a job inside one ToR crosses no uplink. The thesis gives "
        "only '13 logical switches, 48 links, 2:1' (Fig. 4.10), so this layout is our choice "
        "(`configs/clusters/cassini-testbed.yaml`); 1-GPU jobs (1/12 of the trace) never "
        "communicate.",
        "- What the model leaves out: the engine shares a link max-min at full efficiency. "
        "The testbed's DCQCN did not: HotNets Table 1's three-job group ran 1.6-2x slower "
        "than isolated with about 70 % of the 50 Gb/s link used on average, where max-min "
        "sharing keeps it 92 % busy, so the engine predicts 18-30 % less time "
        "(`experiments/results/network/report.md`, section 2). The thesis's 1.6x includes "
        "that loss, which placements that avoid sharing also avoid.",
        "- What Cassini's candidates can do: moving running jobs (`candidates=auction`) "
        "removes some of the sharing that new-only candidates cannot (compare the two Th+"
        "Cassini rows); each move costs a checkpoint and restore, which enters JCT, not "
        "iteration time.",
        "",
    ]
    return lines


def _claims(df: pd.DataFrame) -> list[Claim]:
    """Th+Cassini over Themis per trace and metric (mean over seeds), as gains in %."""
    out = []
    for scen in df.scenario.unique():
        what, _, paper = SCENARIOS[scen]
        mean = df[df.scenario == scen].groupby("policy").mean(numeric_only=True)
        wide = {
            col: df[df.scenario == scen].pivot_table(index="seed", columns="policy", values=col)
            for col in ("avg_iter_ms", "p99_iter_ms")
        }
        th, ca, idl = mean.loc["themis"], mean.loc["cassini"], mean.loc["ideal"]
        for k, (metric, col) in enumerate((("average", "avg_iter_ms"), ("P99", "p99_iter_ms"))):
            ours, room = th[col] / ca[col], th[col] / idl[col]
            only, bound = ("only ", " (below the paper's gain)") if room < paper[k] else ("", "")
            reason = (
                f"Ideal, a bound on any placement, is {only}{room:.3f}x faster than Themis on "
                f"this trace{bound}; Themis's jobs spend {th.job_link_time_shared:.1%} of "
                f"their link-time on a shared link, at most {th.max_sharers:.0f} jobs on a "
                "link, and the engine shares a link max-min at full efficiency, without the "
                "DCQCN loss the thesis's gains include (section 'Why Th+Cassini gains less "
                "here than in the thesis')"
            )
            ref, desc = what.split(": ", 1)
            paired = wide[col][["themis", "cassini"]].dropna()
            ci = paired_ci(speedup_pct, paired["themis"].to_numpy(), paired["cassini"].to_numpy())
            out.append(
                Claim(
                    f"{ref}(b): Th+Cassini improves the {metric} iteration time {paper[k]}x "
                    f"over Themis (+{100 * (paper[k] - 1):.0f} %), {desc} (`{scen}`)",
                    about(100 * (paper[k] - 1)),
                    {"mean over seeds": 100 * (ours - 1)},
                    MECHANISM,
                    reason,
                    shown=f"{100 * (ours - 1):+.1f} % [{ci[0]:+.1f}, {ci[1]:+.1f}] ({ours:.3f}x)",
                    ci={"mean over seeds": ci},
                    seeds=int(df[df.scenario == scen].seed.nunique()),
                )
            )
    return out


def _paper_table(df: pd.DataFrame) -> list[str]:
    return claims_section(
        "Paper vs ours (Th+Cassini over Themis, iteration time, mean over seeds)",
        "Ours: Themis's mean iteration time over Th+Cassini's, as a gain in % (the ratio in "
        "brackets). Ideal's headroom over Themis, the most any placement could gain, is in "
        "the reason column and in the tables above.",
        _claims(df),
    )


if __name__ == "__main__":
    main()
