"""What the shipped agents achieve held out, against the goals set for them.

Reads the evaluation pages already written (nothing is simulated):

- ``experiments/results/agents/heldout/eval.json`` (``train_agents.py heldout``: the three
  shipped agents, seeds 101-110);
- ``experiments/results/agents/delay_timer_binding/eval.json`` (the delay-timer agent where
  the timers bind, seeds 101-110);
- ``experiments/results/agents/scratch_eval.json`` (``learn_from_scratch.py``: the
  from-scratch recipe, seeds 201-210);
- for the room each agent closes: ``groups_split_eval/eval.json`` (the scheduler agent on
  the ``dally-groups`` split's test part), ``groups_split_eval_history/eval.json`` (the
  scheduler agent retrained with the history features, ``scheduler_groups.yaml``, on the
  same; its ``train_summary.json`` beside it), ``ppo_defaults_30min/ppo_defaults.json`` (plain
  PPO for 30 minutes, ``ppo_defaults.py``) and ``experiments/results/room/timers.json`` (the
  delay-timer room, ``timer_room.py``);

and writes ``experiments/results/agents/goals.md`` and ``room_closed.md``, which
docs/agents.md includes, and the held-out table and the room table of README.md (between
their markers).

    python experiments/agents/agent_goals.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import ppo_defaults  # neighbour scripts: the same computations as their pages
import timer_room
from room import pct_ci

from dlcluster_gym.leaderboard import room, tables

RESULTS = Path(__file__).resolve().parents[1] / "results" / "agents"
PAGES = {
    "heldout": RESULTS / "heldout" / "eval.json",
    "binding": RESULTS / "delay_timer_binding" / "eval.json",
    "scratch": RESULTS / "scratch_eval.json",
    "groups": RESULTS / "groups_split_eval" / "eval.json",
    "history": RESULTS / "groups_split_eval_history" / "eval.json",
    "ppo30": RESULTS / "ppo_defaults_30min" / "ppo_defaults.json",
    "timers": RESULTS.parent / "room" / "timers.json",
}


def _load(name: str) -> dict:
    data = json.loads(PAGES[name].read_text())
    return data.get("report", data)  # scratch_eval.json wraps the evaluation report


def paired_ratio(report: dict, policy: str, other: str) -> float:
    """``dlcluster evaluate``'s aggregate of ``policy`` with ``other`` as the reference: the
    geometric mean over decisive scenarios of the mean per-seed average-JCT ratio."""
    from dlcluster_gym.agents.evaluate import aggregate, scenario_stats

    stats = scenario_stats(report["rows"], other, report["tie_rtol"])
    return next(a["ratio_geomean"] for a in aggregate(stats) if a["policy"] == policy)


def _aggregate(report: dict, policy: str, key: str = "ratio_geomean") -> float:
    return next(a[key] for a in report["aggregate"] if a["policy"] == policy)


def _worst_p99(report: dict, policy: str) -> tuple[float, str]:
    rows = [s for s in report["stats"] if s["policy"] == policy and s["decision"]]
    worst = max(rows, key=lambda s: s["p99_ratio"])
    return worst["p99_ratio"], worst["scenario"]


def _best_all(report: dict, agent: str) -> dict:
    return next(b for b in report["best"] if b["agent"] == agent and b["scenario"] == "ALL")


def _mark(ok: bool) -> str:
    return "met" if ok else "**not met**"


def goals_table() -> str:
    held, bind, scratch = _load("heldout"), _load("binding"), _load("scratch")
    sched_teacher = paired_ratio(held, "scheduler", "las-slots")
    srw_teacher = paired_ratio(held, "srw", "las-slots")
    best = _best_all(held, "scheduler")
    p99, p99_where = _worst_p99(held, "scheduler")
    p99_geo = _aggregate(held, "scheduler", "p99_ratio_geomean")
    dt_dally = _aggregate(bind, "delay-timer")
    dt_manual = paired_ratio(bind, "delay-timer", "dally-manual")
    dt_const = paired_ratio(bind, "delay-timer", "manual-84h")
    dt_long = paired_ratio(bind, "delay-timer", "manual-168h")
    pl_dally = _aggregate(held, "placement")
    pl_p99 = _aggregate(held, "placement", "p99_ratio_geomean")
    pl_ok = pl_dally < 1.0 and _worst_p99(held, "placement")[0] <= 1.0
    scratch_dally = _aggregate(scratch, "agent")
    scratch_sto = _aggregate(scratch, "agent-stochastic")
    rows = [
        ("learned from scratch (Scheduler-v3 recipe): average JCT at most Dally's",
         f"{scratch_dally:.3f}x Dally (stochastic policy {scratch_sto:.3f}x)",
         _mark(scratch_dally <= 1.0), "scratch_eval.md"),
        ("scheduler agent: average JCT at least 5 % below its teacher `las-slots`",
         f"{sched_teacher:.3f}x `las-slots`", _mark(sched_teacher <= 0.95), "heldout/eval.md"),
        ("scheduler agent: average JCT <= 0.90x the best deployable heuristic",
         f"{best['vs_best_deployable']:.3f}x `{best['best_deployable']}`; the clairvoyant "
         f"`srw` is {srw_teacher:.3f}x `las-slots`",
         _mark(best["vs_best_deployable"] <= 0.90), "heldout/eval.md"),
        ("scheduler agent: P99 JCT <= 1.10x Dally's",
         f"geometric mean {p99_geo:.3f}x; worst scenario {p99:.3f}x ({p99_where})",
         _mark(p99 <= 1.10), "heldout/eval.md"),
        ("delay-timer agent where the timers bind: below Dally's auto-tuner and Dally-manual",
         f"{dt_dally:.3f}x Dally, {dt_manual:.3f}x Dally-manual; {dt_const:.3f}x the fixed "
         f"timers of an untrained network (`manual-84h`), {dt_long:.3f}x the longest fixed "
         "timers it can set (`manual-168h`)",
         _mark(dt_dally < 1.0 and dt_manual < 1.0), "delay_timer_binding/eval.md"),
        ("placement agent: below Dally without losing the tail, else left out of the "
         "default suites",
         f"{pl_dally:.3f}x Dally, P99 {pl_p99:.3f}x",
         "left out of the default suites" if not pl_ok else "met", "heldout/eval.md"),
    ]  # fmt: skip
    lines = ["| goal | held out | | page |", "|---|---|---|---|"]
    # pages as plain names: this table is also included into docs/agents.md, where a link
    # relative to this folder would not resolve
    lines += [f"| {g} | {v} | {m} | `{p}` |" for g, v, m, p in rows]
    note = (
        "Ratios: geometric mean over the decisive scenarios of the mean per-seed ratio "
        "(`dlcluster evaluate`'s aggregate). Pages: under `experiments/results/agents/`. "
        "Written by `python experiments/agents/agent_goals.py` from those pages; it simulates "
        "nothing."
    )
    return "\n".join(lines) + "\n\n" + note + "\n"


def _wall(seconds: float) -> str:
    return f"{seconds:,.0f} s wall"


def room_closed_rows() -> list[tuple[str, str, str, str, str, str]]:
    """(agent, where, room, fraction closed, target, command and wall time) per agent, from
    the pages (nothing is simulated)."""
    rows = [_split_row("groups", "scheduler agent (shipped)")]
    history = _split_row(
        "history", "scheduler agent retrained with the history features (not shipped)"
    )
    summary = json.loads((PAGES["history"].parent / "train_summary.json").read_text())
    rows.append((*history[:5], f"`{HISTORY_TRAIN}` ({_wall(summary['wall_s'])}); {history[5]}"))
    ppo = json.loads(PAGES["ppo30"].read_text())
    for row in ppo["rows"]:
        rm, fr = ppo_defaults.room_closed(row)
        frac = pct_ci(fr["fraction"], fr["fraction_ci"]) if rm["verdict"] == room.ROOM else "-"
        rows.append((
            f"plain PPO on `{row['env'].split('/')[-1]}`'s defaults, "
            f"{row['train_s'] / 60:.0f} min ({row['steps']:,} steps)",
            f"`{row['scenario']}`, validation seeds {tables.seed_ranges(row['seeds'])}",
            f"{pct_ci(rm['room'], rm['room_ci'])} ({rm['verdict']})", frac,
            ">= 25 % in <= 30 minutes on 2 cores: "
            + ("met" if rm["verdict"] == room.ROOM and fr["fraction"] >= 0.25 else "**not met**"),
            f"`{ppo['command']}` ({_wall(ppo['wall_s'])})",
        ))  # fmt: skip
    timers = json.loads(PAGES["timers"].read_text())
    ev = json.loads((RESULTS.parents[2] / timers["eval"]).read_text())
    summary = timer_room.summarize(timers, ev.get("report", ev))
    per = "; ".join(
        f"`{r['scenario']}` {pct_ci(f['fraction'], f['fraction_ci'])}"
        for r, f in zip(summary["table"], summary["fractions"], strict=True)
        if r["verdict"] == room.ROOM
    )
    rows.append((
        "delay-timer agent (shipped)",
        f"the `dally-timers-*` presets, seeds {summary['seeds_text']} (its validation "
        "scenarios, held-out seeds)",
        f"{pct_ci(summary['mean_room'], math.nan)} on average over "
        f"{summary['scenarios_with_room']} scenarios with room",
        f"{pct_ci(summary['mean_fraction'], math.nan)} on average ({per})",
        "report it (the best fixed timer per seed, chosen after the fact, is the ceiling)",
        f"`{timers['command']}` ({_wall(timers['wall_s'])}; the agent's runs from its "
        "evaluation page)",
    ))  # fmt: skip
    rows.append((
        "placement agent (shipped)", "-",
        "no clairvoyant reference: the best schedule is a search over every offer's answer, "
        "and no timer rule is among its actions", "-",
        "report its room, or say why no reference exists", "-",
    ))  # fmt: skip
    return rows


HISTORY_TRAIN = (
    "dlcluster train --agent scheduler --config experiments/agents/scheduler_groups.yaml "
    "--out runs/groups"
)


def _split_row(page: str, agent: str) -> tuple[str, str, str, str, str, str]:
    """The room-closed row of an agent evaluated on a named split (``dlcluster evaluate
    --split``): its room per test scenario and the fraction it closes."""
    ev = _load(page)
    with_room = [r for r in ev["room"]["scenarios"] if r["verdict"] == room.ROOM]
    rooms = "; ".join(
        f"`{r['scenario']}` {pct_ci(r['room'], r['room_ci'])} ({r['verdict']})"
        for r in ev["room"]["scenarios"]
    )
    closed = [c for c in ev["room"]["closed"] if c["verdict"] == room.ROOM]
    fraction = (
        "; ".join(f"`{c['scenario']}` {pct_ci(c['fraction'], c['fraction_ci'])}" for c in closed)
        if closed else "none to close: no test scenario has room"
    )  # fmt: skip
    seeds = sorted({tables.seed_ranges(v) for v in ev["seeds"].values()})
    return (
        agent,
        f"`{ev.get('split', 'dally-groups')}`, seeds {', '.join(seeds)} (held out)",
        rooms, fraction, ">= 50 % on average over scenarios with room: "
        + (_mark(room.mean_fraction(closed)[0] >= 0.5) if with_room else "not measurable here"),
        f"`{ev['command']}` ({_wall(ev['wall_s'])})",
    )  # fmt: skip


def room_closed_table() -> str:
    """Each agent's room and its fraction of it closed, for docs/agents.md and README.md."""
    lines = [
        "| agent | where | room | fraction of the room closed | target | command |",
        "|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in room_closed_rows()]
    note = (
        "Room: 1 - best clairvoyant / best deployable average JCT per seed, mean ± the "
        "half-width of its 95 % confidence interval; 'no room' below 5 %. Fraction closed: "
        "sum(D - A) / sum(D - C) over the seeds (D, C the best deployable and clairvoyant "
        "average JCT, A the agent's) ± half its 95 % paired bootstrap interval; 0 is level "
        "with the best heuristic. Written by `python experiments/agents/agent_goals.py` "
        "from the pages the commands wrote; it simulates nothing."
    )
    return "\n".join(lines) + "\n\n" + note + "\n"


README = RESULTS.parents[2] / "README.md"
BEGIN = "<!-- agents-heldout: written by python experiments/agents/agent_goals.py -->"
END = "<!-- agents-heldout: end -->"
ROOM_BEGIN = "<!-- agents-room: written by python experiments/agents/agent_goals.py -->"
ROOM_END = "<!-- agents-room: end -->"
# (column, policy in heldout/eval.json)
README_COLUMNS = (
    ("scheduler agent", "scheduler"),
    ("delay-timer agent", "delay-timer"),
    ("placement agent", "placement"),
    ("las-slots (teacher)", "las-slots"),
    ("Dally-manual", "dally-manual"),
    ("Tiresias", "tiresias"),
    ("srw (clairvoyant)", "srw"),
)


def readme_table() -> str:
    """The shipped agents held out, for README.md: per scenario, each column's average JCT
    over Dally's on the same seed (mean over seeds, 95 % CI), and the geometric mean."""
    held, scratch = _load("heldout"), _load("scratch")
    scratch_run = json.loads(PAGES["scratch"].read_text())  # its command, steps and time
    stats = {(s["scenario"], s["policy"]): s for s in held["stats"]}
    scenarios = list(held["seeds"])
    seeds = sorted({tuple(v) for v in held["seeds"].values()})
    seed_text = ", ".join(f"{v[0]}-{v[-1]}" for v in seeds)
    lines = [
        "| scenario | " + " | ".join(c for c, _ in README_COLUMNS) + " |",
        "|---|" + "---:|" * len(README_COLUMNS),
    ]
    for sc in scenarios:
        cells = []
        for _, pol in README_COLUMNS:
            st = stats[(sc, pol)]
            cells.append(f"{st['ratio']:.3f} ± {st['ratio_ci']:.3f}")
        tag = "" if stats[(sc, "dally")]["decision"] else " (no decision)"
        lines.append(f"| `{sc}`{tag} | " + " | ".join(cells) + " |")
    geo = [f"{_aggregate(held, pol):.3f}" for _, pol in README_COLUMNS]
    lines.append("| geometric mean | " + " | ".join(geo) + " |")
    note = (
        f"Average JCT / Dally's on the same seed: mean over seeds {seed_text} ± the half-width "
        "of its 95 % confidence interval (seeds never used for training or selection; the "
        "8-rack clusters and ITP cluster01 never trained on). Written by "
        "`python experiments/agents/agent_goals.py` from "
        f"`{held['command']}` ({held['wall_s']:,.0f} s wall on {held['cores']} cores)"
        + "".join(
            f"; its {' and '.join(r['policies'])} runs again by `{r['command']}` "
            f"({r['wall_s']:,.0f} s wall)"
            for r in held.get("reruns", [])
        )
        + ". "
        f"The from-scratch recipe: {_aggregate(scratch, 'agent'):.3f}x Dally held out after "
        f"{scratch_run['steps']:,} steps ({scratch_run['train_wall_s']:,.0f} s of training; "
        "`python experiments/agents/learn_from_scratch.py`)."
    )
    return "\n".join(lines) + "\n\n" + note + "\n"


def _replace_block(text: str, begin: str, end: str, block: str) -> str:
    if begin not in text or end not in text:
        raise SystemExit(f"{README}: the markers {begin!r} and {end!r} are missing")
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    return f"{head}{begin}\n{block}{end}{tail}"


def readme_with_table(text: str) -> str:
    """``text`` (README.md) with the blocks between the markers replaced by ``readme_table``
    and ``room_closed_table``."""
    text = _replace_block(text, BEGIN, END, readme_table())
    return _replace_block(text, ROOM_BEGIN, ROOM_END, room_closed_table())


def main() -> None:
    out = RESULTS / "goals.md"
    out.write_text(goals_table())
    print(out.read_text())
    (RESULTS / "room_closed.md").write_text(room_closed_table())
    print((RESULTS / "room_closed.md").read_text())
    README.write_text(readme_with_table(README.read_text()))
    print(f"{README}: held-out and room tables rewritten")


if __name__ == "__main__":
    main()
