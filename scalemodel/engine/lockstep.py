"""The step's ``jitter`` part: GPUs that synchronise many times a second run at the pace of the slowest of them
(docs/model.md#jitter).

A GPU at its power limit does not hold one clock: its power management swings the clock, and the compute rate with
it, around the sustained level the compute curves price (hardware/measurements/raw: one H200 at 700 W, 8192^3 GEMMs
back to back, window-to-window CV 0.9-1.7 % after the first 3 s, swinging with a period of about half a second).
Each GPU swings on its own. GPUs that wait for each other at intervals shorter than that (a tensor-parallel
collective every few hundred microseconds, a pipeline send/recv every micro-batch) move together at the pace of the
slowest of the group at each moment; with independent rates of mean 1 and CV ``cv``, the group's busy compute
stretches by the expected maximum of ``G`` of them:

    jitter = busy x (E[max of G normals of mean 1 and CV cv] - 1)          (0 when cv = 0 or G = 1)

with ``busy`` the seconds of compute a GPU runs in the step (its micro-batches and the bubble's share of them) and
``G`` the GPUs locked together (:func:`lockstep_group`). The order statistic is the normal's
(:func:`scalemodel.cost.stragglers.normal_expected_max`; the measured windows' own resampled maxima agree within
sampling to G = 2048, docs/model.md#jitter). A synchronisation once a step (the data-parallel gradient sync of DDP
or ZeRO-1/2) averages the swing over the whole step and is left to the straggler part's per-step variability.
"""

from __future__ import annotations

import numpy as np

from scalemodel.choices import Zero
from scalemodel.cost.stragglers import normal_expected_max
from scalemodel.engine.dp_comm import _state_replicas
from scalemodel.engine.job import Job, StrategyGrid
from scalemodel.engine.model_parallel_comm import delayed_amax_on


def lockstep_group(job: Job, g: StrategyGrid, sync: str = "bsp") -> np.ndarray:
    """GPUs that wait for each other within a step, per candidate: one model replica, ``tp cp pp`` (the TP and CP
    collectives of every layer, the pipeline's send/recv of every micro-batch), times the data-parallel replicas a
    per-layer or per-chunk collective also ties to it:

    * ``dp`` under Transformer Engine's delayed scaling (:func:`~scalemodel.engine.model_parallel_comm.
      delayed_amax_on`): a blocking amax all-reduce over the stage's ``tp cp dp`` GPUs in every chunk's forward
      and backward;
    * ``dp`` where each micro-batch's loss is all-reduced over the data-parallel group on the last stage before its
      backward (strategy ``loss_dp_allreduce``: :func:`~scalemodel.engine.dp_comm.loss_allreduce_time`);
    * the replicas the states are sharded over under ZeRO-3, FSDP and HSDP (:func:`~scalemodel.engine.dp_comm.
      _state_replicas`: ``dp``, HSDP's shard group, or under ``hier:G`` its group of ``min(dp, G)``, whose
      groups step apart): every layer's parameter all-gather;
    * ``ceil(ep etp / (tp cp))`` (at most ``dp``) in a MoE model: every MoE layer's expert all-to-all over the
      ``ep etp`` ranks, carved from the stage's ``tp cp dp`` (Megatron-Core's expert groups; ``etp`` 0 is ``tp``).
    """
    tp, cp, pp, dp = (np.asarray(x, dtype=float) for x in (g.tp, g.cp, g.pp, g.dp))
    replicas = np.where(delayed_amax_on(job, g) | np.asarray(g.loss_dp_allreduce, dtype=bool), dp, 1.0)
    zero = np.asarray(g.zero)
    sharded = (zero == int(Zero.PARAMETERS)) | (zero == int(Zero.FSDP)) | (zero == int(Zero.HSDP))
    if np.any(sharded):
        replicas = np.maximum(replicas, np.where(sharded, _state_replicas(job, g, sync), 1.0))
    if job.expert_params > 0:
        etp = np.where(np.asarray(g.etp) > 0, g.etp, tp).astype(float)
        expert = np.minimum(dp, np.maximum(np.ceil(np.asarray(g.ep, dtype=float) * etp / (tp * cp)), 1.0))
        replicas = np.maximum(replicas, expert)
    return np.asarray(tp * cp * pp * replicas, dtype=float)


def jitter_wait(job: Job, g: StrategyGrid, busy_s: np.ndarray, sync: str = "bsp") -> np.ndarray:
    """Seconds the slowest of the :func:`lockstep_group` GPUs adds to ``busy_s`` seconds of compute, at the
    accelerator's ``clock_jitter_cv`` (module docstring); zeros(1) when the accelerator has none."""
    if job.clock_jitter_cv <= 0.0:
        return np.zeros(1)
    stretch = job.clock_jitter_cv * normal_expected_max(lockstep_group(job, g, sync))
    return np.asarray(np.asarray(busy_s, dtype=float) * stretch, dtype=float)
