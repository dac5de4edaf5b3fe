"""Review 17b: findings in the hybrid per-rank pricing, the allgather dispatcher, the SP defaults and the DDP bucket.

1. Interleaved 1F1B at m = p: Megatron-Core's warm-up (NVIDIA/Megatron-LM@d98e8a64dd
   megatron/core/pipeline_parallel/schedules.py ``get_pp_rank_microbatches``, lines 953-977) is
   (p - r - 1) 2 + (v - 1) p forwards, capped at the m v forwards there are. At m = p the first ranks run every
   forward as a warm-up one and hold every micro-batch of every chunk: p micro-batches of their layers, as 1F1B's
   rank 0. The closed form priced min(m, p) (1 + (p-1)/(p v)) = p + (p-1)/v there, (p-1)/v micro-batches more
   (p 4, v 2, m 4: 5.5 against 4, +37.5 % of the first stage's layer activations).
2. The Megatron-LM reader sets ``moe_allgather_dispatcher`` as Megatron's default for a file with --num-experts and
   no --moe-token-dispatcher-type; at etp x ep 1 (nothing to gather, in Megatron too) predict warned that the
   strategy field "is not priced", a field the user never wrote.
3. The planner's explicit bucket sizes: 25e6 B was called PyTorch DDP's bucket_cap_mb range, but DDP reads
   bucket_cap_mb in MiB (25 -> 26,214,400 B).
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.cost.memory import inflight_microbatches
from scalemodel.engine import pipeline_ranks, stage_memory
from scalemodel.engine.job import build_job, grid_from_strategy

# --- 1. interleaved micro-batches in flight at m = p ----------------------------------------------------------------

def _held_by_hand(p: int, v: int, m: int, r: int) -> float:
    """Most micro-batches of rank r's layers held at once under Megatron-Core's interleaved schedule with equal chunks,
    simulated from its rules: forwards in groups of p micro-batches, each group through chunk 0, then chunk 1, ...
    (get_schedule_table); min((p - r - 1) 2 + (v - 1) p, m v) warm-up forwards, then one forward and one backward a
    step (the backward frees one chunk of one micro-batch), then the cool-down backwards. One forward holds one chunk
    of one micro-batch: 1/v of the rank's layers."""
    total = m * v
    warm = min((p - r - 1) * 2 + (v - 1) * p, total)
    held = best = 0
    for k in range(total):
        held += 1  # forward k
        best = max(best, held)
        if k >= warm:
            held -= 1  # the backward paired with it
    return best / v


@pytest.mark.parametrize("p,v", [(2, 2), (2, 3), (4, 2), (4, 4), (8, 2), (8, 3)])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_interleaved_inflight_follows_the_warm_up_cap(p: int, v: int, k: int) -> None:
    m = k * p  # Megatron's interleaved schedule takes m a multiple of its group size, p by default
    for r in range(p):
        assert float(inflight_microbatches(p, m, "interleaved", v, stage_rank=r)) == pytest.approx(
            _held_by_hand(p, v, m, r), rel=1e-12)


def test_at_m_equal_p_the_first_ranks_hold_every_micro_batch() -> None:
    """p 4, v 2, m 4: rank 0's warm-up is 2 x 3 + 1 x 4 = 10 >= m v = 8 forwards, all of them: 4 micro-batches of
    its layers, not 4 + 3/2 = 5.5; rank 1's 8 >= 8, also 4 (not 4.5); rank 2's 6 < 8: 7 / 2 = 3.5; rank 3 2.5."""
    assert [float(inflight_microbatches(4, 4, "interleaved", 2, stage_rank=r)) for r in range(4)] == [4.0, 4.0, 3.5,
                                                                                                      2.5]
    # past m = p the warm-up binds and Narayanan's p (1 + (p-1)/(p v)) holds
    assert float(inflight_microbatches(4, 8, "interleaved", 2)) == pytest.approx(4 * (1 + 3 / 8))


def test_first_stage_at_m_equal_p_holds_what_1f1b_holds() -> None:
    """End to end: a dense model on pp 4 at m = 4 = p. Rank 0 holds all 4 micro-batches of its 4 layers under 1F1B
    (min(m, p)) and under interleaved:2 (every forward a warm-up one): the same activation bytes on the first stage,
    which was 5.5 / 4 of them (interleaved priced 1,477,836,800 B against 1F1B's 1,074,790,400 B)."""
    model = dict(kind="transformer", name="dense", hidden=1024, heads=8, kv_heads=8, ffn_hidden=4096, vocab=32000,
                 seq_len=2048, layers=16, dropout=False)
    training = training_spec(global_batch=16, micro_batch=1)
    job = build_job(cluster_spec("dgx-h100"), workload_spec(model), training)
    acts = {}
    for schedule in ("1f1b", "interleaved:2"):
        g = grid_from_strategy(strategy_spec(pp=4, schedule=schedule), training, 16, job)
        m = pipeline_ranks.microbatches(g)
        assert float(np.ravel(m)[0]) == 4  # 16 / (dp 4 x micro-batch 1)
        peak = stage_memory.memory_peak_stage(job, g, m)
        assert float(np.ravel(peak.rank)[0]) == 0
        acts[schedule] = float(np.ravel(peak.parts["activations"])[0])
    assert acts["interleaved:2"] == pytest.approx(acts["1f1b"], rel=1e-12)



def _hybrid_peak(pattern: str, global_batch: int) -> tuple[float, float, float]:
    mamba = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 16}
    model = dict(kind="transformer", name="chunks", hidden=1024, heads=8, kv_heads=4, ffn_hidden=2048, vocab=32000,
                 seq_len=2048, gated_mlp=True, dropout=False, layers=len(pattern.replace("|", "")),
                 hybrid={"pattern": pattern, "mamba": mamba})
    training = training_spec(global_batch=global_batch, micro_batch=1)
    job = build_job(cluster_spec("dgx-h100"), workload_spec(model), training)
    g = grid_from_strategy(strategy_spec(pp=2, schedule="interleaved:2"), training, 16, job)
    m = pipeline_ranks.microbatches(g)
    peak = stage_memory.memory_peak_stage(job, g, m)
    return (float(np.ravel(m)[0]), float(np.ravel(peak.parts["activations"])[0]), float(np.ravel(peak.rank)[0]))


@pytest.mark.parametrize("global_batch", [16, 32, 64])  # m = 2 = p, 4, 8 (dp 8, micro-batch 1)
def test_a_ranks_chunks_in_another_order_hold_the_same_bytes(global_batch: int) -> None:
    """Rank 0 of MMMM*|M|*MMMM|M holds chunks MMMM* and *MMMM: the same kinds as MMMM*|M|MMMM*|M's MMMM* and MMMM*,
    so the same activation bytes at every m. The first string pair is priced by the schedule simulation
    (stage_memory._chunk_peak: the chunks differ as written), the second by the closed form (equal chunks); at m = p
    they disagreed (the simulation's 2 micro-batches of the rank's layers against the closed form's 2.5: 389,283,840 B
    against 486,604,800 B)."""
    a, b = _hybrid_peak("MMMM*|M|*MMMM|M", global_batch), _hybrid_peak("MMMM*|M|MMMM*|M", global_batch)
    assert a[2] == b[2] == 0  # rank 0, its 10 layers, is the peak
    assert a[1] == pytest.approx(b[1], rel=1e-12)


# --- 2. Megatron's default allgather dispatcher is not warned about where it has nothing to gather ------------------

_LAUNCH = ("torchrun pretrain_gpt.py --tensor-model-parallel-size 1 --expert-model-parallel-size 1 --num-layers 4 "
           "--hidden-size 1024 --num-attention-heads 8 --seq-length 2048 --num-experts 8 --moe-router-topk 2 "
           "--micro-batch-size 1 --global-batch-size 64 --bf16")
_UNPRICED = "moe_allgather_dispatcher is not priced"


@pytest.mark.parametrize("extra,options,warned", [
    ("", (), False),  # Megatron's default for --num-experts: the file chose no dispatcher
    (" --moe-token-dispatcher-type allgather", (), True),  # named in the file: a choice that does nothing here
    ("", ("--set", "strategy.moe_allgather_dispatcher=true"), True),  # asked for on the command line
])
def test_the_default_dispatcher_at_tp_ep_1_is_not_an_unpriced_field(cli, tmp_path, extra: str,  # type: ignore[no-untyped-def]
                                                                     options: tuple[str, ...], warned: bool) -> None:
    f = tmp_path / "run.sh"
    f.write_text(_LAUNCH + extra + "\n")
    r = cli("predict", "--strategy", str(f), "-m", "mixtral-8x7b", "-n", "8", "--json", *options)
    assert r.code == 0, r.err
    assert (_UNPRICED in r.err) is warned, r.err


def test_the_default_dispatcher_is_still_priced_where_it_gathers(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same file with --ep 8: Megatron's default dispatcher gathers over the 8 EP ranks, and predict prices it
    (the strategy echoed carries it), without a warning."""
    import json
    f = tmp_path / "run.sh"
    f.write_text(_LAUNCH + "\n")
    r = cli("predict", "--strategy", str(f), "-m", "mixtral-8x7b", "-n", "8", "--ep", "8", "--json")
    assert r.code == 0, r.err
    assert _UNPRICED not in r.err
    assert json.loads(r.out)["strategy"]["moe_allgather_dispatcher"] is True


# --- 3. the planner's explicit bucket sizes are sizes a framework setting gives ------------------------------------

def test_planner_buckets_are_ddp_bucket_cap_mb_in_mib() -> None:
    """PyTorch DDP reads bucket_cap_mb in MiB: ``self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)``
    (pytorch/pytorch@25562d3d41 torch/nn/parallel/distributed.py). The planner's DDP-range sizes are bucket_cap_mb 5
    and 25 (5,242,880 and 26,214,400 B), not 5e6 and 25e6 B, which no bucket_cap_mb a user writes gives."""
    from scalemodel.engine import planner
    assert 5 * 1024 * 1024 in planner.BUCKET_BYTES and 26_214_400 in planner.BUCKET_BYTES
    assert 5e6 not in planner.BUCKET_BYTES and 25e6 not in planner.BUCKET_BYTES


# --- 4. the EP overlap's steady state starts after Megatron's extra warm-up forward --------------------------------

@pytest.mark.parametrize("pp,v,m", [(2, 2, 8), (4, 4, 8), (4, 2, 4), (8, 2, 8)])
def test_moe_a2a_overlap_steady_share_counts_the_extra_warm_up_forward(pp: int, v: int, m: int) -> None:
    """Megatron-Core's last pipeline rank runs (p - r - 1) 2 + (V - 1) p = (V - 1) p warm-up forwards, one more with
    overlap_moe_expert_parallel_comm ("we schedule one extra micro-batch forward step before the 1f1b stages",
    NVIDIA/Megatron-LM@d98e8a64dd schedules.py lines 964-970), capped at the m V there are; only the m V - w
    forward / backward pairs after it are merged, so the overlapped share is (m V - w) / (m V). It was
    (m V - (V - 1) p) / (m V)."""
    from scalemodel.choices import ScheduleKind
    from scalemodel.engine.job import grid_from_arrays
    from scalemodel.engine.model_parallel_comm import moe_a2a_steady_share
    g = grid_from_arrays(gpus=pp * 8, dp=8, tp=1, pp=pp, ep=8, micro_batch=1, global_batch=8 * m,
                         schedule=int(ScheduleKind.INTERLEAVED), virtual_stages=v, moe_a2a_overlap=True)
    warm = min((pp - (pp - 1) - 1) * 2 + (v - 1) * pp + 1, m * v)
    assert float(np.ravel(moe_a2a_steady_share(g))[0]) == pytest.approx((m * v - warm) / (m * v), rel=1e-12)
