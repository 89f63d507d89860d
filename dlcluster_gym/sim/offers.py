"""Resource offers: one placement decision, asked of whoever decides (a heuristic or an agent).

A policy that supports offers implements ``offers(view)``, a generator that yields
:class:`Offer` objects (a job and a fixed list of candidate placements) and receives, through
``send``, the chosen action: ``WAIT`` or the index of a candidate. When it is done it returns
the actions for the instant. ``drive`` answers every offer with a choice function; that is how
the policy runs natively (``schedule``), and the Placement env answers the same offers with an
agent's actions instead, so the two are the same code path.

Candidates (fixed slots, so the action space never depends on the cluster):

=========  ================  ==============================================================
action     name              placement
=========  ================  ==============================================================
0          wait              decline the offer (the job stays in the wait queue)
1          machine           best fit on one machine (fewest free GPUs that hold the job)
2          rack              best-fit rack, packed onto its machines with most free GPUs
3          network           any GPUs, packed onto as few racks and machines as greedy gives
4          fewest-machines   as few machines as the job could ever use, racks ignored
5          packed            greedy packing onto the machines with most free GPUs
6          first-fit         the lowest-numbered free GPUs, whatever tiers they span
=========  ================  ==============================================================

``machine``/``rack``/``network`` are Dally's three levels (Algorithm 1), ``fewest-machines``
and ``packed`` are Tiresias's placements for high- and low-skew jobs, ``first-fit`` is
Gandiva's network-agnostic placement. A candidate that does not exist on the current free
GPUs is masked.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.view import Plan

WAIT, MACHINE, RACK, NETWORK, FEWEST_MACHINES, PACKED, FIRST_FIT = range(7)
ACTION_NAMES: tuple[str, ...] = (
    "wait",
    "machine",
    "rack",
    "network",
    "fewest-machines",
    "packed",
    "first-fit",
)
NUM_CANDIDATES = len(ACTION_NAMES) - 1
NUM_ACTIONS = len(ACTION_NAMES)

HOUR = 3600.0
_ONLY_WAIT = (True, False, False, False, False, False, False)
MANUAL_TIMERS_S = (12 * HOUR, 24 * HOUR)  # Dally 4.3.2: 12 h, then another 12 h


def manual_timers(cluster: Cluster, demand: int) -> tuple[float, float]:
    """Dally's manual (T_Mc, T_Rk) with the 4.3.2 zeros for jobs too large for a level."""
    if demand > cluster.max_gpus_per_rack:
        return 0.0, 0.0
    if demand > cluster.max_gpus_per_machine:
        return 0.0, MANUAL_TIMERS_S[1]
    return MANUAL_TIMERS_S


def _candidate(plan: Plan, n: int, action: int) -> np.ndarray | None:
    c = plan.cluster
    fm, fpm, fpr = plan.free_mask, plan.free_per_machine, plan.free_per_rack
    if plan.num_free < n:
        return None
    if action == MACHINE or (action == FEWEST_MACHINES and n <= c.max_gpus_per_machine):
        return placement.on_one_machine(c, fm, fpm, n)
    if action == RACK:
        return placement.on_one_rack(c, fm, fpm, fpr, n)
    if action == NETWORK:
        return placement.spread_packed(c, fm, fpm, fpr, n)
    if action == FEWEST_MACHINES:
        return placement.fewest_machines(c, fm, fpm, n, strict=True)
    if action == PACKED:
        gpus = placement.on_one_machine(c, fm, fpm, n)
        return gpus if gpus is not None else placement.fewest_machines(c, fm, fpm, n, False)
    if action == FIRST_FIT:
        return placement.first_fit(fm, n)
    raise ValueError(f"action {action} is not a candidate (1..{NUM_CANDIDATES})")


class Offer:
    """One resource offer to one job: which candidate placements exist (``mask``, computed
    from free-GPU counts) and, on demand, their GPUs (computed once, then cached).

    ``timers`` are the base policy's (T_Mc, T_Rk) for the job (Dally's manual ones when the
    base policy has none); ``victims`` is how many running jobs the base policy preempted to
    make this offer. The plan must not change until the offer is answered.
    """

    __slots__ = ("_gpus", "demand", "job", "mask", "plan", "starvation_s", "timers", "victims")

    def __init__(
        self,
        plan: Plan,
        job: int,
        demand: int,
        starvation_s: float,
        timers: tuple[float, float],
        victims: int = 0,
    ) -> None:
        self.plan = plan
        self.job = job
        self.demand = demand
        self.starvation_s = starvation_s
        self.timers = timers
        self.victims = victims
        self._gpus: list[np.ndarray | bool | None] = [False] * NUM_ACTIONS  # False: not yet
        c = plan.cluster
        if demand <= plan.num_free:
            # (wait, machine, rack, network, fewest-machines, packed, first-fit)
            on_machine = demand <= max(plan.free_per_machine.tolist())
            if demand <= c.max_gpus_per_machine:
                fewest = on_machine
            else:  # its GPUs are chosen when asked for (``placement``)
                fewest = placement.fewest_machines_exists(c, plan.free_per_machine, demand)
            on_rack = demand <= max(plan.free_per_rack.tolist())
            self.mask = np.array((True, on_machine, on_rack, True, fewest, True, True))
        else:
            self.mask = np.array(_ONLY_WAIT)

    def placement(self, action: int) -> np.ndarray | None:
        """GPUs of ``action`` (None for wait or an absent candidate)."""
        if action == WAIT or not self.mask[action]:
            return None
        g = self._gpus[action]
        if g is False:
            alias = self._alias(action)
            if alias != action:
                g = self.placement(alias)
            else:
                g = _candidate(self.plan, self.demand, action)
            self._gpus[action] = g
        return g  # type: ignore[return-value]

    def _alias(self, action: int) -> int:
        """The candidate that ``action`` coincides with (itself when none): a job that fits
        on one machine gets the same best-fit machine from fewest-machines and packed."""
        if action in (FEWEST_MACHINES, PACKED) and self.mask[MACHINE]:
            return MACHINE
        return action

    @property
    def past_machine_timer(self) -> bool:
        return self.starvation_s >= self.timers[0]

    @property
    def past_rack_timer(self) -> bool:
        return self.starvation_s >= self.timers[1]


def make_offer(
    plan: Plan,
    job: int,
    demand: int,
    starvation_s: float,
    timers: tuple[float, float] | None = None,
    victims: int = 0,
) -> Offer:
    """An offer of the plan's free GPUs to ``job`` (timers default to Dally's manual ones)."""
    if timers is None:
        timers = manual_timers(plan.cluster, demand)
    return Offer(plan, job, demand, starvation_s, timers, victims)


OfferGen = Generator[Offer, int, Sequence[Action]]
Chooser = Callable[[Offer], int]


def drive(gen: OfferGen, choose: Chooser) -> Sequence[Action]:
    """Run an offers generator to the end, answering every offer with ``choose``."""
    try:
        offer = next(gen)
        while True:
            offer = gen.send(choose(offer))
    except StopIteration as stop:
        return stop.value
