"""Engine speed benchmark: prints jobs/s and events/s for a few scenario x policy cells.

Targets (issue #2, one core of the 2-core reference machine):
  fcfs on philly-1024gpu (82,247 Philly jobs, 1,024 GPUs)   <= 30 s
  fcfs on dally-batch-8rack                                   <= 1 s
Targets (issue #4): dally on dally-batch-8rack <= 2 s, on philly-1024gpu <= 60 s.

Link sharing (issues #3, #15): every cell runs with sharing off and on (target: within 2x of
off). On the Dally presets (one NIC per GPU, no oversubscription) no link is ever
over-subscribed, so that measures the bookkeeping and fast path; ``--oversubscription X`` adds
rows with ToR uplinks over-subscribed X:1 (default 4 for the synthetic cells; 0: none). A cell
``SCENARIO:POLICY@a`` runs the scenario on preset (a)'s network (``a100-4nic-tor3``: four
200 Gb/s NICs per 8-GPU machine, 3:1 ToR uplinks) with the scenario's own machine count
(issue #15 target: ``philly-1024gpu`` fcfs and dally at most 2x the sharing-off time).

Usage: python experiments/bench_engine.py [--repeat N] [--cells SCENARIO:POLICY ...]
       [--oversubscription X] [--json]
Trace-backed cells are skipped with a message when the trace root is absent.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from dlcluster_gym.api import prepare
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import TraceError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.engine import Engine

DEFAULT_CELLS = (
    "dally-batch-8rack:fcfs",
    "dally-poisson-8rack:fcfs",
    "philly-1024gpu:fcfs",
    "dally-batch-8rack:dally",
    "dally-batch-8rack:tiresias",
    "philly-1024gpu:dally",
    "philly-1024gpu:fcfs@a",
    "philly-1024gpu:dally@a",
)
TARGETS = {
    "philly-1024gpu:fcfs": 30.0,
    "dally-batch-8rack:fcfs": 1.0,
    "dally-batch-8rack:dally": 2.0,
    "philly-1024gpu:dally": 60.0,
}
CONTENDED_CELLS = ("dally-batch-8rack:fcfs", "dally-poisson-8rack:fcfs")


LAYOUT_A = {  # preset (a), a100-4nic-tor3: the network only (machine counts stay)
    "nics_per_machine": 4,
    "nic_gbps": 200,
    "rack_uplink_oversubscription": 3.0,
    "tiers": {"machine": "nvswitch", "rack": "ib-200", "network": "ib-200"},
}


def _spec(scenario: str, contention: bool, oversubscription: float | None, layout: bool) -> dict:
    data = load_scenario(scenario).model_dump()
    data["contention"] = contention
    if layout:
        groups = data["cluster"]["groups"]
        for g in groups:
            g.update(nics_per_machine=4, nic_gbps=200)
        data["cluster"].update(
            {k: v for k, v in LAYOUT_A.items() if k not in ("nics_per_machine", "nic_gbps")}
        )
    if oversubscription:
        data["cluster"]["rack_uplink_oversubscription"] = oversubscription
    return data


def bench(
    cell: str, repeat: int, contention: bool = False, oversubscription: float | None = None
) -> dict:
    name, _, layout = cell.partition("@")
    scenario, policy = name.split(":", 1)
    t0 = time.perf_counter()
    spec = _spec(scenario, contention, oversubscription, layout == "a")
    cfg, cluster, jobs, _ = prepare(spec)
    load_s = time.perf_counter() - t0
    best = None
    for _ in range(repeat):
        engine = Engine(cfg, cluster, jobs, make_policy(policy), np.random.default_rng(0))
        t1 = time.perf_counter()
        res = engine.run()
        sim_s = time.perf_counter() - t1
        if best is None or sim_s < best[0]:
            best = (sim_s, res)
    sim_s, res = best
    n = res.summary["jobs_completed"]
    label = cell
    if contention:
        label += f" +share{f' os{oversubscription:g}' if oversubscription else ''}"
    return {
        "cell": label,
        "contention": contention,
        "oversubscription": oversubscription or cfg.cluster.rack_uplink_oversubscription,
        "jobs": len(jobs),
        "gpus": cluster.num_gpus,
        "load_s": round(load_s, 3),
        "sim_s": round(sim_s, 3),
        "total_s": round(load_s + sim_s, 3),
        "jobs_per_s": round(n / sim_s),
        "events_per_s": round(res.summary["sim_events"] / sim_s),
        "target_s": TARGETS.get(cell) if not contention else None,
        "jobs_completed": n,
        "avg_jct_s": res.summary["avg_jct_s"],
        "avg_contention_slowdown": res.summary.get("avg_contention_slowdown", 1.0),
    }


def _row(r: dict, base: dict | None) -> str:
    target = f"<={r['target_s']:g}s" if r["target_s"] else ""
    ratio = f"{r['sim_s'] / base['sim_s']:.2f}x" if base and base["sim_s"] > 0 else ""
    return (
        f"{r['cell']:<36}{r['jobs']:>8}{r['gpus']:>6}{r['load_s']:>8.2f}{r['sim_s']:>8.2f}"
        f"{r['total_s']:>9.2f}{r['jobs_per_s']:>9}{r['events_per_s']:>10}{target:>8}"
        f"{ratio:>8}{r['avg_contention_slowdown']:>9.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cells", nargs="*", default=list(DEFAULT_CELLS))
    ap.add_argument(
        "--oversubscription",
        type=float,
        default=4.0,
        help="ToR oversubscription for the extra contended rows (0: none)",
    )
    ap.add_argument("--json", action="store_true", help="one JSON object per cell")
    args = ap.parse_args()
    print(
        f"# {platform.processor() or platform.machine()}, python {platform.python_version()}, "
        f"best of {args.repeat}; 'vs off' = sim s / sim s of the same cell without contention"
    )
    header = (
        f"{'cell':<36}{'jobs':>8}{'GPUs':>6}{'load s':>8}{'sim s':>8}{'total s':>9}"
        f"{'jobs/s':>9}{'events/s':>10}{'target':>8}{'vs off':>8}{'slowdown':>9}"
    )
    if not args.json:
        print(header)
    for cell in args.cells:
        runs = [(False, None), (True, None)]
        if args.oversubscription and cell in CONTENDED_CELLS:
            runs.append((True, args.oversubscription))
        base = None
        for contention, oversub in runs:
            try:
                r = bench(cell, args.repeat, contention, oversub)
            except TraceError as exc:
                print(f"{cell:<36} skipped: {exc}")
                break
            if args.json:
                print(json.dumps(r))
            else:
                print(_row(r, base))
            base = base or r


if __name__ == "__main__":
    main()
