"""A hybrid pattern's ranks priced faster, to the bit (engine.layer_compute._kind_times, the ranks' shared per-layer
activation memo in stage_memory._segment_memory, cost.transformer.tp_whole_elements remembered per shape).

A rank of a hybrid pattern is the job with its own kind counts (pipeline_ranks._part_job). One layer's time of a kind,
one layer's activation bytes of a kind and a shape's whole-per-TP-rank elements do not change with the other ranks, so
they are priced once per grid and shared. The reference here prices every candidate alone with none of those memos
(each rank computes its own), and every number must be equal, not close: the planner's grids (several pp, with and
without '|', interleaved, uneven first stage, recompute and ZeRO on other axes) against each candidate by itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.choices import ScheduleKind
from scalemodel.cost import transformer
from scalemodel.engine import layer_compute, pipeline_ranks, stage_memory, step
from scalemodel.engine.job import build_job, grid_from_arrays, grid_from_strategy

GB, GPUS = 64, 16
BASE = dict(kind="transformer", name="ranks", hidden=1024, heads=8, kv_heads=4, ffn_hidden=2048, vocab=32000,
            seq_len=2048, gated_mlp=True, dropout=False, moe={"experts": 32, "top_k": 4, "ffn_hidden": 1024})
MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 16}


def _hybrid(pattern: str) -> dict:  # type: ignore[type-arg]
    """The hybrid block: the Mamba-2 widths only where the pattern has M layers (refused without one)."""
    return {"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})}


def _job_grid(pattern: str, micro_batch: int = 1, **strategy):
    training = training_spec(global_batch=GB, micro_batch=micro_batch)
    model = dict(BASE, layers=len(pattern.replace("|", "")), hybrid=_hybrid(pattern))
    job = build_job(cluster_spec("dgx-h100"), workload_spec(model), training)
    return job, grid_from_strategy(strategy_spec(**strategy), training, GPUS, job)


class _Never(dict):
    """A memo that never remembers (tp_whole_elements recomputed on every call)."""

    def get(self, key, default=None):
        return default


def _without_memos(monkeypatch):
    """Every rank priced on its own: no shared kind times, no shared per-layer activations, no shape memo."""
    monkeypatch.setattr(layer_compute, "_kind_times", lambda job, g: {})
    kwargs = stage_memory._memory_kwargs
    monkeypatch.setattr(stage_memory, "_memory_kwargs", lambda *a, **k: dict(kwargs(*a, **k), per_layer=None))
    monkeypatch.setattr(transformer, "_WHOLE_MEMO", _Never())


def _flat(res) -> dict[str, np.ndarray]:
    out = {"step_time": res.step_time, "feasible": res.feasible, "microbatches": res.microbatches}
    out.update({f"breakdown.{k}": v for k, v in res.breakdown.items()})
    out.update({f"memory.{k}": v for k, v in res.memory.items()})
    out.update({f"extras.{k}": v for k, v in res.extras.items()})
    return {k: np.asarray(v) for k, v in out.items()}


CASES = [
    # '|' segments: pp 1, pp 2 interleaved (2 virtual stages over 4 segments), pp 4
    ("EEE|M*M*|E-E|MMMM", [dict(pp=1), dict(pp=2, schedule="interleaved:2"), dict(pp=4, micro_batch=2)]),
    # no '|': Megatron's split by count at pp 1, 2, 4 and pp 2 with 3 first-stage layers (the rows' micro-batches
    # differ, so each row group's layer times are its own)
    ("EEEMMMM*EE-M", [dict(pp=1), dict(pp=2, micro_batch=2), dict(pp=4), dict(pp=2, first_stage_layers=3)]),
]


@pytest.mark.parametrize("pattern,rows", CASES)
def test_a_grid_of_hybrid_candidates_is_bit_identical_to_each_priced_alone(pattern, rows, monkeypatch):
    job, _ = _job_grid(pattern, pp=2, ep=2)
    n = len(rows)
    pp = np.array([r["pp"] for r in rows]).reshape(n, 1, 1)
    inter = np.array([r.get("schedule", "").startswith("interleaved") for r in rows]).reshape(n, 1, 1)
    first = np.array([r.get("first_stage_layers", -1) for r in rows]).reshape(n, 1, 1)
    zero = np.array([0, 3]).reshape(1, 2, 1)
    rec = np.array([0, 2]).reshape(1, 1, 2)
    mb = np.array([r.get("micro_batch", 1) for r in rows]).reshape(n, 1, 1)
    g = grid_from_arrays(gpus=GPUS, dp=GPUS // pp, tp=1, pp=pp, ep=2, micro_batch=mb, global_batch=GB,
                         schedule=np.where(inter, int(ScheduleKind.INTERLEAVED), int(ScheduleKind.ONE_F_ONE_B)),
                         virtual_stages=np.where(inter, 2, 1), first_stage_layers=first, zero=zero, recompute=rec,
                         moe_layer_host_s=1e-3)
    res = _flat(step.evaluate(job, g))
    cf = np.broadcast_to(step.compute_floor(job, g), g.shape)
    df = np.broadcast_to(step.dp_exposed_floor(job, g), g.shape)
    peak = np.broadcast_to(stage_memory.memory_peak_stage(job, g, pipeline_ranks.microbatches(g)).parts["total"],
                           g.shape)
    _without_memos(monkeypatch)
    for i, row in enumerate(rows):
        for j, z in enumerate(("0", "3")):
            for k, recompute in enumerate(("none", "full")):
                one_job, one = _job_grid(pattern, ep=2, zero=z, recompute=recompute, moe_layer_host_s=1e-3, **row)
                alone = _flat(step.evaluate(one_job, one))
                assert bool(alone["feasible"].ravel()[0]), (row, z, recompute)
                for key, v in alone.items():
                    assert np.ravel(v)[0] == np.broadcast_to(res[key], g.shape)[i, j, k], (key, row, z, recompute)
                assert np.ravel(step.compute_floor(one_job, one))[0] == cf[i, j, k]
                assert np.ravel(step.dp_exposed_floor(one_job, one))[0] == df[i, j, k]
                alone_peak = stage_memory.memory_peak_stage(one_job, one,
                                                            pipeline_ranks.microbatches(one)).parts["total"]
                assert np.ravel(alone_peak)[0] == peak[i, j, k]


def test_the_memos_are_used_and_their_values_read_only():
    """The grid's ranks share each kind's layer time (one entry per kind of the pattern) and the shape's
    whole-per-TP-rank elements are one object, frozen."""
    job, g = _job_grid("EEEMMMM*EE-M", pp=4, ep=2)
    step.evaluate(job, g)
    kinds = layer_compute._KIND_MEMO["last"][2]
    assert set(kinds) == {"attention", "mlp", "moe", "mamba"}
    w = transformer.tp_whole_elements(job.shape)
    assert w is transformer.tp_whole_elements(job.shape)
    with pytest.raises(ValueError):
        w.per_layer[...] = 0.0
