"""PPO training throughput: MaskablePPO env steps per second with 1, 2 and 4 envs.

Each row trains a fresh MaskablePPO (MLP 64 x 64, ``n_steps`` 512 per env, batch 128, 10
epochs: SB3's defaults except n_steps/batch) for ``--timesteps`` steps and reports env steps
per wall-clock second of ``learn()`` (env creation and the first resets excluded), per CPU
second (this process plus the worker processes: robust to other load), and where
the time went: the envs' ``step``/``reset`` and action masks as the learner waits for them
(``env_s``; with ``SubprocVecEnv`` only the part not overlapped with the learner), the rest of
the rollout (policy forward, buffer: ``policy_s``) and the PPO updates (``update_s``). Rows: the
Scheduler env and the Placement env on ``--scenario`` with their default kwargs, 1 env, 2 and 4
envs in one process (``DummyVecEnv``) and in worker processes (``SubprocVecEnv``).

Torch threads: one (``agents.threads.use_one_thread``) unless ``--threads default``, which
leaves torch at its default (one thread per core) to measure the difference; torch's
distribution argument checks are off in both (``agents.threads.skip_distribution_checks``,
as in every training entry point). ``--profile``
writes a cProfile of each row to ``--out``/bench_ppo_<row>.prof and prints its top entries.

Writes ``--out``/bench_ppo.json and ``bench_ppo.md`` (the table, the command, the date and the
load average at the start). Needs the ``agents`` extra.

Target: 600 steps/s on the newest Scheduler env with 2 envs (the page's last line says
whether it is met).

Usage: python experiments/benchmarks/bench_ppo.py [--timesteps N]
       [--envs Scheduler-v4 Scheduler-v3 Placement-v3] [--n-envs 1 2 4]
       [--vec dummy subproc] [--threads one|default] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import os
import platform
import pstats
import resource
import sys
import time
from pathlib import Path
from typing import Any

import dlcluster_gym  # noqa: F401  (registers the envs)

OUT = Path(__file__).resolve().parents[1] / "results" / "agents"
TARGET_SCHEDULER = 600.0
"""PPO steps/s on the newest Scheduler env with 2 envs on 2 cores (the best vec env)."""
TARGET_ENVS = 2


class _Timer:
    """Wraps a bound method and adds its wall time to ``total``."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.total = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.total += time.perf_counter() - t0


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench(
    env_id: str,
    scenario: str,
    n_envs: int,
    vec: str,
    timesteps: int,
    threads: str,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One row: a fresh MaskablePPO trained for ``timesteps`` steps on ``n_envs`` envs."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from dlcluster_gym.agents.threads import skip_distribution_checks, use_one_thread

    skip_distribution_checks()  # as every training entry point (agents/threads.py)
    if threads == "one":
        use_one_thread()
    n_threads = torch.get_num_threads()
    cls = SubprocVecEnv if vec == "subproc" else DummyVecEnv
    t_setup = time.perf_counter()
    venv = make_vec_env(
        f"DLCluster/{env_id}",
        n_envs=n_envs,
        seed=0,
        env_kwargs={"scenario": scenario},
        vec_env_cls=cls,
        # spawned workers are this process's children: their CPU time is counted at close
        vec_env_kwargs={"start_method": "spawn"} if vec == "subproc" else None,
    )
    model = MaskablePPO("MlpPolicy", venv, n_steps=512, batch_size=128, seed=0, device="cpu")
    setup_s = time.perf_counter() - t_setup
    env_wait, masks = _Timer(venv.step_wait), _Timer(venv.env_method)
    venv.step_wait = env_wait  # type: ignore[method-assign]
    venv.env_method = masks  # type: ignore[method-assign]  (MaskablePPO asks for the masks)
    collect, update = _Timer(model.collect_rollouts), _Timer(model.train)
    model.collect_rollouts = collect  # type: ignore[method-assign]
    model.train = update  # type: ignore[method-assign]
    prof = cProfile.Profile() if profile is not None else None
    c0, cc0 = time.process_time(), _children_cpu()
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    model.learn(total_timesteps=timesteps)
    if prof is not None:
        prof.disable()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    venv.close()  # joins SubprocVecEnv's workers, so their CPU time is counted below
    workers_cpu = _children_cpu() - cc0
    n = int(model.num_timesteps)
    row = {
        "env": env_id,
        "scenario": scenario,
        "n_envs": n_envs,
        "vec_env": "SubprocVecEnv" if vec == "subproc" else "DummyVecEnv",
        "torch_threads": n_threads,
        "steps": n,
        "setup_s": round(setup_s, 2),
        "wall_s": round(wall, 2),
        "env_s": round(env_wait.total + masks.total, 2),
        "policy_s": round(collect.total - env_wait.total - masks.total, 2),
        "update_s": round(update.total, 2),
        "cpu_s": round(cpu, 2),
        "workers_cpu_s": round(workers_cpu, 2),
        "steps_per_s": round(n / wall, 1),
        "steps_per_cpu_s": round(n / (cpu + workers_cpu), 1),
    }
    if prof is not None and profile is not None:
        prof.dump_stats(profile)
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        row["profile"] = str(profile)
        print(s.getvalue(), file=sys.stderr)
    return row


def _table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| env | envs | vec env | steps/s | wall s | env s | policy s | update s | CPU s "
        "(main + workers) | steps/CPU s |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = [
        f"| {r['env']} | {r['n_envs']} | {r['vec_env']} | **{r['steps_per_s']:.0f}** | "
        f"{r['wall_s']:.1f} | {r['env_s']:.1f} | {r['policy_s']:.1f} | {r['update_s']:.1f} | "
        f"{r['cpu_s']:.1f} + {r['workers_cpu_s']:.1f} | {r['steps_per_cpu_s']:.0f} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def _machine() -> dict[str, Any]:
    from importlib.metadata import version

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "versions": {p: version(p) for p in ("torch", "stable-baselines3", "sb3-contrib")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timesteps", type=int, default=8192)
    ap.add_argument("--envs", nargs="*", default=["Scheduler-v4", "Scheduler-v3", "Placement-v3"])
    ap.add_argument("--scenario", default="dally-poisson-4rack")
    ap.add_argument("--n-envs", nargs="*", type=int, default=[1, 2, 4])
    ap.add_argument("--vec", nargs="*", choices=["dummy", "subproc"], default=["dummy", "subproc"])
    ap.add_argument("--threads", choices=["one", "default"], default="one")
    ap.add_argument("--profile", action="store_true", help="cProfile each row (slower)")
    ap.add_argument("--out", type=Path, default=OUT, help="folder for bench_ppo.json/.md")
    ap.add_argument("--name", default="bench_ppo", help="file name stem of the outputs")
    args = ap.parse_args()
    load = os.getloadavg()
    started = dt.datetime.now().astimezone()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for env_id in args.envs:
        for n in args.n_envs:
            for vec in args.vec:
                if vec == "subproc" and n == 1:
                    continue  # one env in a worker process only adds pipe round trips
                prof = args.out / f"{args.name}_{env_id}_{n}_{vec}.prof" if args.profile else None
                row = bench(env_id, args.scenario, n, vec, args.timesteps, args.threads, prof)
                print(json.dumps(row), flush=True)
                rows.append(row)
    command = "python experiments/benchmarks/bench_ppo.py " + " ".join(sys.argv[1:])
    report = {
        "command": command.strip(),
        "date": started.isoformat(timespec="seconds"),
        "load_average_at_start": [round(x, 2) for x in load],
        "machine": _machine(),
        "ppo": {"policy": "MlpPolicy 64x64", "n_steps": 512, "batch_size": 128, "n_epochs": 10},
        "target_scheduler_steps_per_s": TARGET_SCHEDULER,
        "rows": rows,
    }
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    m = report["machine"]
    md = (
        "# PPO training throughput (MaskablePPO)\n\n"
        f"`{report['command']}`, {report['date']}; {m['cpu']}, {m['cores']} cores, load "
        f"average at start {', '.join(f'{x:.2f}' for x in load)} (1, 5, 15 min); torch "
        f"{m['versions']['torch']}, stable-baselines3 {m['versions']['stable-baselines3']}, "
        f"sb3-contrib {m['versions']['sb3-contrib']}.\n\n"
        f"Scenario `{args.scenario}`, the envs' default kwargs; MLP 64 x 64, n_steps 512 per "
        "env, batch 128, 10 epochs; torch threads: "
        f"{'one' if args.threads == 'one' else 'torch default'}. steps/s = env steps per wall "
        "second of `learn()`. env s: waiting for the envs' step/reset and action masks; "
        "policy s: the rest of the rollout (policy forward, buffer); update s: PPO's gradient "
        "epochs. CPU s: this process during `learn()`, plus the worker processes over their "
        "whole life (start-up included); steps/CPU s is the figure least affected by other "
        "load on the machine. "
        f"Target: {TARGET_SCHEDULER:.0f} steps/s on the newest Scheduler env with "
        f"{TARGET_ENVS} envs.\n\n" + _table(rows) + target_line(rows)
    )
    (args.out / f"{args.name}.md").write_text(md)
    print(md)


def target_line(rows: list[dict]) -> str:
    """The verdict on ``TARGET_SCHEDULER``: the newest Scheduler env's best row with
    ``TARGET_ENVS`` envs ("" when the run has none)."""
    from dlcluster_gym.envs import latest

    env_id = f"Scheduler-v{latest('Scheduler')}"
    mine = [r for r in rows if r["env"] == env_id and r["n_envs"] == TARGET_ENVS]
    if not mine:
        return ""
    best = max(mine, key=lambda r: r["steps_per_s"])
    got, target = best["steps_per_s"], TARGET_SCHEDULER
    verdict = "met" if got >= target else f"missed by {target - got:,.0f} ({target / got:.2f}x)"
    return (
        f"\n{env_id} with {TARGET_ENVS} envs: {got:,.0f} steps/s ({best['vec_env']}), target "
        f"{target:,.0f}: {verdict}.\n"
    )


if __name__ == "__main__":
    main()
