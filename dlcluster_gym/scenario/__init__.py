"""A scenario's jobs, sized for its cluster and network model.

``workload`` holds what a workload *is*: jobs as a trace or a generator gives them (model,
GPU demand, arrival, submission attributes, and a length), model profiles and trace loaders.
It knows no cluster and no network. This layer, above ``config``, ``cluster`` and ``perf``,
turns a scenario's workload config into the jobs the engine runs:

- ``scenario.build``: ``build_workload(scenario, cluster, rng, traces_dir)`` draws or reads the
  jobs (``workload.generators``, ``workload.traces``, ``workload.ps``), converts their
  durations, sorts them by arrival and numbers them;
- ``scenario.sizing``: the conversion of a duration into iterations;
- ``scenario.crius``: Crius's large-model jobs, whose GPU amount, GPU type and length come
  from their parallelism plans (``perf.parallelism``).

Durations into iterations
-------------------------

A job's length is iterations or a duration in seconds (``workload.job.Job``). A duration is a
run time measured on some placement of some network, so it becomes iterations only once the
cluster and the network model are known, in one place, ``scenario.sizing``:

    iterations = duration / iteration time

where the iteration time is the one the duration was measured at:

- generated jobs (``kind: dally``, ``kind: synthetic`` with ``log10_duration_min``): the job's
  iteration time at packed consolidation (fill machines, then racks, of the cluster's first
  machine group), ``compute_s x (1 + exposed communication / compute)`` from the network model
  (``perf.network``). The generators' fitted and drawn run times, and the arrival rate that
  offers a load, are defined at that placement, whatever the scenario's ``network`` says, so
  under ``network: ideal`` such a job runs for less than its drawn duration;
- trace jobs without iteration counts (``kind: trace``): the iteration time at the
  workload's ``duration_tier`` (``machine``: packed; ``rack``: the GPUs dealt round-robin over
  the machines of as few racks as possible; ``network``: one GPU per rack), or the compute
  time alone under ``network: ideal``, where the engine charges no communication. Either
  way a job alone on the cluster, placed at that tier, runs for its trace duration;
- Crius jobs (``kind: crius``): the iteration time of the job's best parallelism plan on its
  requested GPU type and amount, and at least one iteration.

A job that arrives with iterations (a trace's iteration counts, ``kind: synthetic`` with
``iterations``, parameter-server jobs) keeps them.
"""
