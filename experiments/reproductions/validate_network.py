"""Validate the network model (``perf.network`` + ``perf.contention``) the engine uses.

Usage: python experiments/reproductions/validate_network.py [--traces-dir DIR] [--fit]
       [--skip-rankings]

Writes experiments/results/network/report.md, iteration_vs_network.png and rankings.csv:

1. Pollux placements (OSDI'21 measurements on 4 x T4 nodes with one 50 Gb/s NIC): for each model
   and local batch, measured step_time(spread) / step_time(packed) against the engine's
   prediction (1 + f_spread) / (1 + f_packed) on the ``pollux-testbed`` preset, with compute =
   the measured 1-GPU step time at that batch. ``--fit`` re-fits the preset's one free
   parameter, ``transport_efficiency``, on cifar10 and imagenet only; the four reported models
   (bert, yolov3, ncf, deepspeech2) are never used to fit.
2. HotNets'22 Table 1 fair-share iteration times from the engine's own model
   (``perf.testbed.hotnets_engine_ms``: the jobs as the engine runs them with the
   ``cassini-testbed`` profiles, on one ToR uplink, ``perf.contention.link_stretch``, aligned
   phases), beside the same function on the profiles' own Up shape and the event-driven fluid
   model of ``perf.testbed``.
3. Dally Table 1 reproduced by the ``dally-table1`` profiles on the Dally cluster.
4. One job's iteration time against NIC bandwidth and ToR oversubscription (must be monotone).
5. How much the network matters: average JCT and policy ranking with sharing on vs off on the
   Poisson scenario of each realistic preset.

Traces: $DLCLUSTER_TRACES, else ../shared/traces relative to the repository root.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_cluster, load_scenario
from dlcluster_gym.perf import network as nw
from dlcluster_gym.perf import testbed as tb
from dlcluster_gym.workload.models import DDP_BACKWARD_FRACTION, get_model
from dlcluster_gym.workload.profiles import model_profile

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "experiments" / "results" / "network"
REPORTED = ("bert", "yolov3", "ncf", "deepspeech2")
FIT_ON = ("cifar10", "imagenet")
PAIRS = (("2", "11"), ("3", "111"), ("4", "22"), ("4", "1111"), ("44", "2222"))
POLICIES = ("fcfs", "dally", "tiresias", "gandiva", "themis", "cassini")
PRESETS = ("a100-4nic-tor3", "h100-rail-spine2", "pollux-testbed")
# Section 5's scenarios: each preset's Poisson scenario and its trace scenario.
RANKED = (
    *(f"{p}-poisson" for p in PRESETS),
    "a100-4nic-tor3-itp07",
    "h100-rail-spine2-itp07",
    "pollux-testbed-workload1",
)


def traces_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("DLCLUSTER_TRACES")
    return Path(env) if env else ROOT.parent / "shared" / "traces"


# ----------------------------------------------------------------------------- 1. Pollux


def gpus_of(placement: str, per_node: int = 4) -> np.ndarray:
    """Pollux placement string (GPUs on each node) -> GPU ids on the testbed preset."""
    return np.array([m * per_node + i for m, c in enumerate(placement) for i in range(int(c))])


def load_steps(root: Path, model: str) -> dict[tuple[str, int], float]:
    acc: dict[tuple[str, int], list[float]] = defaultdict(list)
    path = root / "pollux_adaptdl" / "traces" / model / "placements.csv"
    with path.open() as f:
        for row in csv.DictReader(f):
            acc[(row["placement"], int(row["local_bsz"]))].append(float(row["step_time"]))
    return {k: statistics.fmean(v) for k, v in acc.items()}


def pollux_rows(
    root: Path, cluster: Cluster, models, source: str = "physics", backward: float | None = None
) -> list[tuple]:
    """Per (model, packed, spread): batches, measured and engine ratio, relative error.
    ``backward``: override the profiles' ``CommParams.backward_fraction`` (DDP overlap rule)."""
    rows = []
    for model in models:
        steps = load_steps(root, model)
        base = model_profile(model, source)
        if backward is not None:
            base = replace(base, comm=replace(base.comm, backward_fraction=backward))
        for packed, spread in PAIRS:
            ms, ps = [], []
            for (pl, bsz), t_pack in steps.items():
                if pl != packed or (spread, bsz) not in steps or ("1", bsz) not in steps:
                    continue
                prof = replace(base, compute_s=steps[("1", bsz)])
                f_pack = nw.placement_overhead(cluster, prof, gpus_of(packed))
                f_spread = nw.placement_overhead(cluster, prof, gpus_of(spread))
                ms.append(steps[(spread, bsz)] / t_pack)
                ps.append((1 + f_spread) / (1 + f_pack))
            if ms:
                m, p = statistics.fmean(ms), statistics.fmean(ps)
                rows.append((model, packed, spread, len(ms), m, p, (p - m) / m))
    return rows


def mae(rows: list[tuple], models) -> float:
    per = [statistics.fmean(abs(r[6]) for r in rows if r[0] == m) for m in models]
    return statistics.fmean(per)


def pollux_cluster(efficiency: float | None = None) -> Cluster:
    data = load_cluster("pollux-testbed").model_dump()
    if efficiency is not None:
        data["transport_efficiency"] = efficiency
    return Cluster(data)


def fit_efficiency(
    root: Path, source: str = "physics", backward: float | None = None
) -> tuple[float, list[tuple[float, float]]]:
    """``transport_efficiency`` minimising the MAE on :data:`FIT_ON` only (0.01 grid)."""
    grid = [round(x, 2) for x in np.arange(0.05, 1.0001, 0.01)]
    curve = [
        (e, mae(pollux_rows(root, pollux_cluster(e), FIT_ON, source, backward), FIT_ON))
        for e in grid
    ]
    return min(curve, key=lambda c: c[1])[0], curve


BACKWARD_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, DDP_BACKWARD_FRACTION, 0.8)


def pollux_overlap_sweep(root: Path) -> tuple[list[str], dict[str, float]]:
    """Issue 15 item 6 step 3: PyTorch DDP's bucket overlap (``workload.models.ddp_exposed_s``)
    for every model alike. Per backward fraction, ``transport_efficiency`` is re-fitted on the
    fit models only; the literature rule is 2/3 (``DDP_BACKWARD_FRACTION``), and the fraction
    the fit models choose is the one with the lowest error on them. Held-out errors are
    reported for every row and select nothing. Returns the table and a summary."""
    out = [
        "| backward fraction | efficiency fitted on " + ", ".join(FIT_ON) + " | MAE there | "
        "held-out MAE | " + " | ".join(REPORTED) + " |",
        "|---:|---:|---:|---:|" + "---:|" * len(REPORTED),
    ]
    res = []
    for bf in BACKWARD_GRID:
        best, curve = fit_efficiency(root, backward=bf)
        fit_err = min(c[1] for c in curve)
        rows = pollux_rows(root, pollux_cluster(best), REPORTED, backward=bf)
        per = [statistics.fmean(abs(r[6]) for r in rows if r[0] == m) for m in REPORTED]
        res.append((bf, best, fit_err, statistics.fmean(per)))
        tag = " (literature rule)" if bf == DDP_BACKWARD_FRACTION else ""
        out.append(
            f"| {bf:.2f}{tag} | {best:.2f} | {fit_err:.1%} | {statistics.fmean(per):.1%} | "
            + " | ".join(f"{x:.1%}" for x in per)
            + " |"
        )
    chosen = min(res, key=lambda r: r[2])
    rule = next(r for r in res if r[0] == DDP_BACKWARD_FRACTION)
    summary = {
        "rule_efficiency": rule[1],
        "rule_fit": rule[2],
        "rule_heldout": rule[3],
        "chosen": chosen[0],
        "chosen_heldout": chosen[3],
    }
    out += [
        "",
        f"Literature rule (backward = 2/3 of compute): held-out MAE {rule[3]:.1%} (efficiency "
        f"{rule[1]:.2f}, MAE on the fit models {rule[2]:.1%}). Fraction the fit models choose: "
        f"{chosen[0]:.2f}, held-out MAE {chosen[3]:.1%}. Rows are not selected on the held-out "
        "column.",
    ]
    return out, summary


LATENCIES_US = (20, 100, 250, 500, 1000, 2000)
POLLUX_GAP = (
    "Why not <= 15 %: the measured 2-rank cross-node sync time per gradient byte differs "
    "about 5x between models at the same placement (a middle local batch of "
    "placements.csv, `11`: bert 0.76 s for 440 MB, deepspeech2 0.12 s for 346 MB, cifar10 "
    "0.018 s for 45 MB), which one shared transport parameter cannot follow; the residual is "
    "per-model (how much of the all-reduce hides behind backward compute, which the zoo sets "
    "to 0 for all six). A per-message latency, fitted with the efficiency on the fit models "
    "only, makes the held-out error worse ([pollux_latency.md](pollux_latency.md)): the fit "
    "models prefer a large latency, the held-out NCF does not. Fitting anything on the "
    "held-out models would reach the target and is not done."
)


def pollux_latency_sweep(root: Path) -> list[str]:
    """Issue 15 item B: would a per-message latency of NCCL's socket transport (one more
    physical detail; the catalog's eth-50 has 20 us) lower the held-out error? For each
    latency, ``transport_efficiency`` is re-fitted on the fit models only, and the fit and
    held-out errors are reported. The latency is NOT chosen on the held-out models."""
    grid = [round(x, 2) for x in np.arange(0.10, 1.0001, 0.02)]
    out = [
        "| NIC latency per step (us) | efficiency fitted on " + ", ".join(FIT_ON) + " | MAE "
        "there | held-out MAE | " + " | ".join(REPORTED) + " |",
        "|---:|---:|---:|---:|" + "---:|" * len(REPORTED),
    ]
    for lat in LATENCIES_US:

        def cl(e: float, lat: float = lat) -> Cluster:
            data = load_cluster("pollux-testbed").model_dump()
            data["transport_efficiency"] = e
            for tier in ("rack", "network"):
                data["tiers"][tier] = {"preset": "eth-50", "latency_us": lat}
            return Cluster(data)

        curve = [(e, mae(pollux_rows(root, cl(e), FIT_ON), FIT_ON)) for e in grid]
        best, fit_err = min(curve, key=lambda c: c[1])
        rows = pollux_rows(root, cl(best), REPORTED)
        per = [statistics.fmean(abs(r[6]) for r in rows if r[0] == m) for m in REPORTED]
        out.append(
            f"| {lat} | {best:.2f} | {fit_err:.1%} | {statistics.fmean(per):.1%} | "
            + " | ".join(f"{x:.1%}" for x in per)
            + " |"
        )
    return out


def orderings(
    root: Path, cluster: Cluster, source: str = "physics"
) -> list[tuple[str, str, str, str, str]]:
    """Per model, measured (mean over batches) and engine: is `22` slower than `1111`, and is
    `2222` faster than `44`."""
    out = []
    for model in REPORTED:
        steps = load_steps(root, model)
        prof = model_profile(model, source)

        def mean(pl: str, other: str, s=steps) -> float:
            return statistics.fmean(
                s[(pl, b)] / s[(other, b)] for (q, b) in s if q == pl and (other, b) in s
            )

        def f(pl: str, p=prof) -> float:
            return nw.placement_overhead(cluster, p, gpus_of(pl))

        yes = {True: "yes", False: "NO"}
        out.append(
            (
                model,
                yes[mean("22", "1111") > 1],
                yes[f("22") > f("1111")],
                yes[mean("2222", "44") < 1],
                yes[f("2222") < f("44")],
            )
        )
    return out


# ----------------------------------------------------------------------------- 2. HotNets


def hotnets_rows() -> list[tuple]:
    """Per job: key, paper fair ms, engine ms (the profile file's ``flow_rate``), engine ms
    before (``line-rate``), fluid ms, engine error; ``None`` between groups."""
    rows = []
    for g in tb.HOTNETS_TABLE_1:
        _, engine = tb.hotnets_engine_ms(g.jobs, "engine")
        _, shape = tb.hotnets_engine_ms(g.jobs, "engine", flow_rate="line-rate")
        fluid = np.array(tb.shared_link_iteration_times(
            [tb.testbed_profile(m, b) for m, b in g.jobs])) * 1e3  # fmt: skip
        for k, (model, batch) in enumerate(g.jobs):
            paper = g.fair_ms[k]
            rows.append(
                (f"{model}:{batch}", paper, engine[k], shape[k], fluid[k], engine[k] / paper - 1)
            )
        rows.append(None)  # group separator
    return rows


HOTNETS_WHY = [
    "The testbed profiles declare the rate their flows reach (`flow_rate: up-rate` in "
    "`configs/profiles/cassini-testbed.yaml`, `CommParams.rate_cap_Bps`): a testbed job sends "
    "its bytes over its whole Up phase at its profiled Up rate (35-45 Gb/s), not at the "
    "50 Gb/s line rate in shorter bursts. That is the profile's own shape, so a fair share "
    "below the Up rate stretches the job as the profile says.",
    "",
    "Why groups 1, 3 and 4 still miss: the profiles are fixed from solo and unfair "
    "(~isolated) numbers and the fair times are predicted, not fitted.",
    "",
    "- Group 4 (WideResNet101 800 + VGG16 1400, +10 %): the two iteration times are equal "
    "(280 vs 278.5 ms), so with aligned starts their Up phases overlap on every iteration and "
    "fair sharing stretches both by the full overlap (125 ms at 35 Gb/s on a 25 Gb/s share: "
    "+50 ms). That is HotNets' own account of fair sharing (sec. 2, Fig. 2a: under fair "
    "sharing both jobs 'continue to occupy ~50 % of the available bandwidth across all "
    "iterations'; sliding apart is the effect of *unfairness*), and the Cassini circle the "
    "engine uses keeps phases where the time shifts put them (thesis 4.2). The paper measured "
    "only +8 % over its unfair 273 ms: the real phases overlapped less. The fluid model of "
    "`perf.testbed` (phases slide with the 1.5 ms period difference) is within 4 %; we keep "
    "it for reproductions and do not make the engine's stretch slide, because that is not "
    "the papers' model of fair sharing and it would change every Cassini result.",
    "- Group 1 (BERT 8 + VGG19 1200): VGG19 at batch 1200 is not measured anywhere; scaling "
    "its Down linearly from the derived 1400-batch profile gives 291 ms alone, and the paper's "
    "297 ms fair time means VGG19 hardly slowed, which max-min sharing cannot give while "
    "VGG19's Up phase (half its iteration) sends at 35 Gb/s, above its 25 Gb/s fair share. "
    "BERT itself is within 5 %.",
    "- Group 3 (three jobs on one link): the paper's fair times (320 / 494 / 466 ms) mean the "
    "jobs moved about 35 Gb/s through the 50 Gb/s link on average (bits per iteration over "
    "the fair time), i.e. the link carried about 70 % of its capacity, where max-min sharing "
    "of these profiles keeps it about 92 % busy: the measured sharing lost capacity (DCQCN "
    "with three senders) that every model here (engine, fluid) lacks, so all three jobs are "
    "18-30 % fast. HotNets Fig. 1b shows two fair DCQCN jobs at ~21 Gb/s each (84 % of the "
    "link); we have no three-sender figure, so no DCQCN efficiency is modelled.",
    "",
]


# ----------------------------------------------------------------------------- 4. plot


def iteration_curves() -> tuple[list, list, list, list]:
    """bert-large on 64 GPUs (2 racks x 4 machines x 8): iteration time (s) vs the NIC speed
    (4 NICs per machine) and vs the ToR oversubscription (4 x 200 Gb/s NICs)."""
    base = {
        "racks": 2,
        "machines_per_rack": 4,
        "gpus_per_machine": 8,
        "nics_per_machine": 4,
        "tiers": {"machine": "nvswitch", "rack": "ib-200", "network": "ib-200"},
    }
    prof = get_model("bert-large")
    gpus = np.arange(64)

    def it(**kw) -> float:
        cl = Cluster({**base, **kw})
        return prof.compute_s * (1.0 + nw.placement_overhead(cl, prof, gpus))

    speeds = [25, 50, 100, 200, 400, 800]
    ratios = [1, 1.5, 2, 3, 4, 6, 8]
    by_speed = [it(nic_gbps=s) for s in speeds]
    by_ratio = [it(nic_gbps=200, rack_uplink_oversubscription=r) for r in ratios]
    return speeds, by_speed, ratios, by_ratio


def plot(curves, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speeds, by_speed, ratios, by_ratio = curves
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    ax[0].plot(speeds, np.array(by_speed) * 1e3, "o-")
    ax[0].set_xscale("log", base=2)
    ax[0].set_xlabel("NIC speed (Gb/s), 4 NICs per 8-GPU machine")
    ax[0].set_ylabel("iteration time (ms)")
    ax[1].plot(ratios, np.array(by_ratio) * 1e3, "o-", color="C1")
    ax[1].set_xlabel("ToR uplink oversubscription (x:1), 4 x 200 Gb/s NICs")
    fig.suptitle("bert-large on 64 GPUs over 2 racks, alone (physics profile)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- 5. rankings


MODES = {"on": {"contention": True}, "off": {"contention": False}, "ideal": {"network": "ideal"}}


def rankings(root: Path) -> list[dict]:
    """Every policy on each preset's Poisson and trace scenario (``RANKED``) with sharing on,
    off, and no network."""
    from dlcluster_gym import simulate

    out = []
    for name in RANKED:
        for mode, override in MODES.items():
            sc = load_scenario(name, **override)
            for pol in POLICIES:
                s = simulate(sc, pol, traces_dir=root).summary
                out.append(
                    {
                        "scenario": name,
                        "mode": mode,
                        "policy": pol,
                        "avg_jct_s": s["avg_jct_s"],
                        "makespan_s": s["makespan_s"],
                        "avg_comm_overhead": s["avg_comm_overhead"],
                        "avg_contention_slowdown": s.get("avg_contention_slowdown", 1.0),
                    }
                )
            print(f"  {name} {mode} done", file=sys.stderr)
    return out


# ----------------------------------------------------------------------------- report


def _emit(name: str, lines: list[str]) -> int:
    """Write one report page under OUT, echo it, and return the exit status 0."""
    (OUT / name).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces-dir", default=None)
    ap.add_argument(
        "--fit", action="store_true", help="re-fit transport_efficiency (cifar10, imagenet)"
    )
    ap.add_argument(
        "--skip-rankings",
        action="store_true",
        help="do not rerun section 5 (slowest); the report keeps the last full run's",
    )
    ap.add_argument(
        "--pollux-overlap",
        action="store_true",
        help="only write pollux_overlap.md (DDP backward-overlap sweep, fit models only)",
    )
    ap.add_argument(
        "--pollux-latency",
        action="store_true",
        help="only write pollux_latency.md (per-message latency sweep, fit models only)",
    )
    args = ap.parse_args()
    root = traces_dir(args.traces_dir)
    if not (root / "pollux_adaptdl" / "traces").is_dir():
        print(
            f"traces folder not found: {root / 'pollux_adaptdl' / 'traces'} "
            "(set DLCLUSTER_TRACES or pass --traces-dir)",
            file=sys.stderr,
        )
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    if args.pollux_latency:
        text = [
            "# Pollux placements: per-message latency sweep",
            "",
            "Command: `python experiments/reproductions/validate_network.py --pollux-latency`",
            "",
            *pollux_latency_sweep(root),
            "",
        ]
        return _emit("pollux_latency.md", text)
    if args.pollux_overlap:
        table, _ = pollux_overlap_sweep(root)
        text = [
            "# Pollux placements: PyTorch DDP backward-overlap rule",
            "",
            "Command: `python experiments/reproductions/validate_network.py --pollux-overlap`",
            "",
            "Exposed communication = `max(c, C - B (n - 1) / n)` for `n` 25 MB gradient buckets "
            "of `c = C / n` each, ready evenly through a backward pass of `B = fraction x "
            "compute` (`workload.models.ddp_exposed_s`, profile source `physics-ddp` at 2/3); "
            "0 = no overlap (`physics`).",
            "",
            *table,
            "",
        ]
        return _emit("pollux_overlap.md", text)
    cluster = pollux_cluster()
    eff = cluster.config.transport_efficiency
    lines = [
        "# Network model validation",
        "",
        "Command: `python experiments/reproductions/validate_network.py"
        + (" --fit`" if args.fit else "`"),
        "",
    ]
    lines += ["## 1. Pollux placements (pollux-testbed preset)", ""]
    if args.fit:
        best, curve = fit_efficiency(root)
        lines += [
            f"Fitted on {', '.join(FIT_ON)} only: transport_efficiency = {best:.2f} "
            f"(MAE there {min(c[1] for c in curve):.1%}); preset value {eff:.2f}.",
            "",
        ]
    rows = pollux_rows(root, cluster, REPORTED + FIT_ON)
    lines += [
        f"One 50 Gb/s NIC per 4-T4 node, `collective: flat-ring`, transport_efficiency {eff:.2f}"
        f" (fitted on {', '.join(FIT_ON)}; the four reported models are held out of the fit).",
        "Ratio = step_time(spread) / step_time(packed) at the same local batch, averaged over "
        "the batches measured for both placements and for one GPU.",
        "",
        "| model | packed vs spread | batches | measured | engine | error |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for m, pk, sp, n, meas, pred, err in rows:
        tag = "" if m in REPORTED else " (fit)"
        lines.append(f"| {m}{tag} | {pk} vs {sp} | {n} | {meas:.3f} | {pred:.3f} | {err:+.1%} |")
    per = {m: statistics.fmean(abs(r[6]) for r in rows if r[0] == m) for m in REPORTED}
    total = statistics.fmean(per.values())
    lines += [
        "",
        "Mean absolute relative error: "
        + ", ".join(f"{m} {e:.1%}" for m, e in per.items())
        + f"; **mean over the four: {total:.1%}** (target <= 15 %; before this model: 34.9 %).",
        "",
        POLLUX_GAP,
        "",
    ]
    ddp_eff, _ = fit_efficiency(root, "physics-ddp")
    ddp_rows = pollux_rows(root, pollux_cluster(ddp_eff), REPORTED, "physics-ddp")
    ddp_per = {m: statistics.fmean(abs(r[6]) for r in ddp_rows if r[0] == m) for m in REPORTED}
    lines += [
        "Compute/communication overlap: PyTorch DDP's bucket "
        "all-reduce behind the backward pass, one rule for every model (profile source "
        "`physics-ddp`, backward = 2/3 of compute, `workload.models.ddp_exposed_s`; fixed "
        "from the literature before any error was computed), efficiency re-fitted on "
        f"{', '.join(FIT_ON)} ({ddp_eff:.2f}): "
        + ", ".join(f"{m} {e:.1%}" for m, e in ddp_per.items())
        + f"; **mean over the four: {statistics.fmean(ddp_per.values()):.1%}**, worse than "
        "without overlap. The fit models themselves prefer no overlap (a backward fraction "
        "fitted on them is 0, [pollux_overlap.md](pollux_overlap.md)), so the preset keeps "
        "`physics`. The measured sync times say why: imagenet hides its all-reduce almost "
        "entirely at `11` (sync 6 ms for 100 MB) but not at `22` (132 ms), bert hides "
        "nothing at any placement; no placement-independent overlap rule follows both.",
        "",
    ]
    lines += [
        "| model | `22` slower than `1111`: measured | engine | `2222` faster than `44`: "
        "measured | engine |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {' | '.join(r)} |" for r in orderings(root, cluster)]
    lines += [
        "",
        "## 2. HotNets'22 Table 1, fair sharing, from the engine's sharing model",
        "",
        "Each job as the engine runs it (profile source `cassini-testbed`, "
        "`configs/profiles/cassini-testbed.yaml`, at the group's batch; two workers on two "
        "servers under two ToRs of the `cassini-testbed` cluster), all jobs of a group on one "
        "50 Gb/s ToR uplink, phases aligned (the jobs start together, no shifts); iteration = "
        "isolated iteration + extra Up time from `link_stretch` (the engine's function); "
        "each job's flows reach at most its profiled Up rate (`flow_rate: up-rate`). 'before': "
        "the same with the bytes at the 50 Gb/s line rate (`flow_rate: line-rate`, main before "
        "this change). 'fluid': "
        "the event-driven max-min simulation of `perf.testbed` (phases slide). Paper numbers "
        "feeding the profiles: VGG16 255/141 ms, ResNet50 165 ms and 59 ms, the 50 Gb/s link, "
        "HotNets' *unfair* (~isolated) times and DLRM's fair 1300 ms (its Up length); the "
        "*fair* times below are predictions (`tb.hotnets_engine_ms`, `tb.testbed_profile`).",
        "",
        "| job | paper (ms) | engine (ms) | before: line-rate (ms) | fluid (ms) | engine error "
        "| before error |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    within = within_before = count = 0
    for r in hotnets_rows():
        if r is None:
            continue
        count += 1
        within += abs(r[5]) <= 0.10
        before = r[3] / r[1] - 1
        within_before += abs(before) <= 0.10
        lines.append(
            f"| {r[0]} | {r[1]:.0f} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:+.1%} "
            f"| {before:+.1%} |"
        )
    lines += [
        "",
        f"{within} of {count} jobs within 10 % of the paper (target: all; before: "
        f"{within_before} of {count}).",
        "",
    ]
    lines += HOTNETS_WHY
    t1 = nw.table1_overheads()
    worst = max(abs(t1[m][k] / v - 1) for m, row in nw.DALLY_TABLE1.items() for k, v in row.items())
    lines += [
        "## 3. Dally Table 1 (dally-table1 profiles, Dally cluster)",
        "",
        f"Largest relative difference over the 18 cells: {worst:.1e} (the factors are stored "
        "to 6 significant digits). `dlcluster models --overheads` prints the table.",
        "",
    ]
    curves = iteration_curves()
    plot(curves, OUT / "iteration_vs_network.png")
    mono = all(a >= b for a, b in zip(curves[1], curves[1][1:], strict=False)) and all(
        a <= b for a, b in zip(curves[3], curves[3][1:], strict=False)
    )
    lines += [
        "## 4. One job against the network",
        "",
        "![iteration time](iteration_vs_network.png)",
        "",
        "| NIC Gb/s | " + " | ".join(str(s) for s in curves[0]) + " |",
        "|---|" + "---:|" * len(curves[0]),
        "| iteration (ms) | " + " | ".join(f"{x * 1e3:.1f}" for x in curves[1]) + " |",
        "",
        "| ToR oversubscription | " + " | ".join(f"{r:g}:1" for r in curves[2]) + " |",
        "|---|" + "---:|" * len(curves[2]),
        "| iteration (ms) | " + " | ".join(f"{x * 1e3:.1f}" for x in curves[3]) + " |",
        "",
        f"Monotone: {'yes' if mono else 'NO'}.",
        "",
    ]
    if not args.skip_rankings:
        rank = rankings(root)
        with (OUT / "rankings.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rank[0]))
            w.writeheader()
            w.writerows(rank)
        lines += [
            "## 5. How much the network matters (Poisson and trace scenario of each preset)",
            "",
            "Average JCT (hours) with link sharing between jobs on (the default), off (each job "
            "still pays its own NICs and uplinks), and with no network cost at all (`network: "
            "ideal`); rank 1 = lowest average JCT among the deployable policies. Themis and "
            "Th+Cassini read each job's remaining iterations: they are clairvoyant, shown "
            "unranked (`-`) as references.",
            "",
        ]
        from dlcluster_gym.scheduler import policy_kind

        kinds = {p: policy_kind(p) for p in POLICIES}
        for name in RANKED:
            by = {m: {r["policy"]: r for r in rank if r["scenario"] == name and r["mode"] == m}
                  for m in MODES}  # fmt: skip
            deployable = [p for p in POLICIES if kinds[p] == "deployable"]
            rk = {m: {p: str(i + 1) for i, p in enumerate(sorted(deployable, key=lambda p, m=m:
                                                                 by[m][p]["avg_jct_s"]))}
                  for m in MODES}  # fmt: skip
            lines += [
                f"**{name}**",
                "",
                "| policy | JCT on (h) | off (h) | ideal (h) | on / ideal | rank on / off / ideal "
                "| comm overhead | contention slowdown |",
                "|---|---:|---:|---:|---:|---|---:|---:|",
            ]
            for p in sorted(POLICIES, key=lambda p: kinds[p] != "deployable"):
                on, off, ide = (by[m][p]["avg_jct_s"] for m in MODES)
                label = p if kinds[p] == "deployable" else f"{p} ({kinds[p]})"
                ranks = " / ".join(rk[m].get(p, "-") for m in MODES)
                lines.append(
                    f"| {label} | {on / 3600:.2f} | {off / 3600:.2f} | {ide / 3600:.2f} | "
                    f"{on / ide:.3f} | {ranks} | "
                    f"{by['on'][p]['avg_comm_overhead']:.3f} | "
                    f"{by['on'][p]['avg_contention_slowdown']:.3f} |"
                )
            lines.append("")
    else:  # keep the last full run's section 5 (and rankings.csv) as they are
        old = (OUT / "report.md").read_text() if (OUT / "report.md").exists() else ""
        at = old.find("## 5. ")
        if at >= 0:
            lines += [*old[at:].rstrip("\n").split("\n"), ""]
    text = "\n".join(lines) + "\n"
    (OUT / "report.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
