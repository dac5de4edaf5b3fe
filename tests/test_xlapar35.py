"""xlapar35: the parallel attention + MLP block under XLA's partitioner and remat (docs/model.md#xlapar35).

MaxText's parallel DecoderLayer (AI-Hypercomputer/maxtext@76bd53b0f MaxText/layers/models.py L235-290) normalises
once (``lnx``, constrained to ``activation_embed`` = 'tensor': base.yml L74-86), feeds ``lnx`` to the attention's
query / key / value projections and to the MLP's ``wi``, constrains ``attention_lnx`` and ``mlp_lnx`` each to the
embed-sharded layout and adds them. The TP count the model prices for it, per layer and pass (AG / RS of the s b h
activation over the tensor group), as XLA builds it:

    forward    1 AG   lnx gathered once for all four dots: PartitionedHlo::Reshard's per-HLO reshard cache
                      (xla/service/spmd/spmd_partitioner.cc, SpmdPartitionerOptions::cache_all_gather = true)
               1 RS   add(RS(attention partial sums), RS(MLP partial sums)) -> RS(add): ReduceScatterReassociate,
                      run on SPMD's collectives after partitioning ([assumption] on a TPU, whose pipeline is closed;
                      unjoined, the attention's RS runs beside the MLP's GEMMs and one RS is exposed either way)
    backward   1 AG   the summed output's gradient (one value for both branches; the CPU backend gathers it once
                      per consuming dot: docs/model.md#xlapar35, open)
               1 RS   d lnx = sum of the four input-gradient partial sums, reassociated as above
    remat      1 AG   lnx again (full remat: the recomputed forward, whose summed output's RS nothing reads;
                      jax_dots: the norm output is no dot, so its gather is repeated)

the layers' count with ``tp_allreduces_per_layer`` 1, which the model already priced: the increments match the
measured partitioner output (scripts/measure_xla_parallel_block.py). Not GPT-NeoX's count (tests/test_tp34.py:
forward 1 RS + 2 AG, backward 1 AG + 2 RS, all blocking): each ColumnParallelLinear there gathers and reduces its
own input. What xlapar35 changed is XLA's remat: a parallel block's recomputed forward leaves out the attention's
output projection as well as the down-projection (both outputs feed only the layer's sum).

By hand on a small layer (h 1024, 8 heads of 128, MLP 4h not gated, s 2048, micro-batch 1), 4 layers at tensor 4
with sequence parallelism on a TPU v5e pod: E = s h = 2,097,152 elements, AG = AG(2 E), RS = RS(2 E) bytes, priced by
the collective layer's best algorithm over the 4 chips (``api.collective``, independent of the engine's route).
"""

from __future__ import annotations

import numpy as np
import pytest

import scalemodel.api as api
from scalemodel.cost.compute import layer_compute_time
from scalemodel.cost.placement import parallel_groups
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.predict import predict
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

H, S, LAYERS, TP = 1024, 2048, 4, 4
E = float(S * H)
CLUSTER = "tpu-v5e-pod"


def _best(op: str) -> float:
    """One collective of the bf16 s h activation over the 4-chip tensor group, the collective layer's best price."""
    row = api.collective(CLUSTER, op, 2.0 * E, TP).rows[0]
    return float(next(a["time_s"] for a in row["algorithms"] if a["algorithm"] == row["best"]))


AG, RS = _best("allgather"), _best("reducescatter")


def _tp(parallel: bool, wgrad: float, cluster: str = CLUSTER, **strategy) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The stage's TP seconds per micro-batch (exposed ``tp`` and ``hidden_bwd``) of the small layer, parallel or
    sequential, with the layers' weight-gradient time ``wgrad`` set by hand; no embedding, no output layer."""
    wl = TransformerWorkload(name="small-parallel" if parallel else "small", layers=LAYERS, hidden=H, heads=8,
                             ffn_hidden=4 * H, gated_mlp=False, vocab=32_000, seq_len=S, tied_embeddings=False,
                             parallel_block=parallel, norms_per_layer=1 if parallel else 2)
    # the earlier partitioner's count (jaxlib <= 0.4.26); the later one's head-side gathers: tests/test_xlaver36.py
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=S, jax_release="0.4.23")
    job = build_job(load_cluster(cluster), wl, tr, straggler_cv=0.0)
    st = StrategySpec(**{"tp": TP, "sequence_parallel": True, **strategy})
    g = grid_from_strategy(st, tr, st.tp, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    c = mpc._mp_collectives(job, g, groups)
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    comp = dict(comp, wgrad=np.full(1, wgrad), embedding_uses=np.zeros(1), head_uses=np.zeros(1))
    out = mpc._model_parallel_comm(job, g, comp, c)
    return {k: float(np.ravel(out[k])[0]) for k in ("tp", "hidden_bwd")}


def test_the_collectives_are_the_activation_at_its_dtype() -> None:
    """The engine's per-collective prices are the collective layer's for 2 E bytes (so the counts below are counts)."""
    wl = TransformerWorkload(name="p", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=False,
                             vocab=32_000, seq_len=S, tied_embeddings=False, parallel_block=True, norms_per_layer=1)
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=S)
    job = build_job(load_cluster(CLUSTER), wl, tr, straggler_cv=0.0)
    g = grid_from_strategy(StrategySpec(tp=TP, sequence_parallel=True), tr, TP, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    c = mpc._mp_collectives(job, g, groups)
    assert float(np.ravel(c["tp"])[0]) == pytest.approx(AG + RS, rel=1e-9)
    assert float(np.ravel(c["tp_last"])[0]) == pytest.approx(RS, rel=1e-9)
    assert AG > 1e-5 and RS > 1e-5  # 4 MiB over 4 chips: tens of microseconds each


def test_forward_one_gather_one_scatter_backward_under_the_weight_gradients() -> None:
    """No remat, the weight-gradient GEMMs long (10 s): forward L (AG + RS) exposed; the backward's L (AG + RS) beside
    the weight-gradient GEMMs (an XLA scheduler's window: any GEMM of the layer, tp34). Half the sequential layer's."""
    got = _tp(True, 10.0)
    assert got["tp"] == pytest.approx(LAYERS * (AG + RS), rel=1e-9)
    assert got["hidden_bwd"] == pytest.approx(LAYERS * (AG + RS), rel=1e-9)
    seq = _tp(False, 10.0)
    assert seq["tp"] == pytest.approx(2 * LAYERS * (AG + RS), rel=1e-9)
    assert seq["hidden_bwd"] == pytest.approx(2 * LAYERS * (AG + RS), rel=1e-9)


def test_backward_exposed_past_a_short_window() -> None:
    """A weight-gradient window of one RS: the backward's L (AG + RS) less that one RS is exposed."""
    got = _tp(True, RS)
    assert got["tp"] == pytest.approx(LAYERS * (AG + RS) + LAYERS * (AG + RS) - RS, rel=1e-9)
    assert got["hidden_bwd"] == pytest.approx(RS, rel=1e-9)


def test_full_remat_gathers_lnx_again_and_drops_the_scatter() -> None:
    """Full remat: the recomputed forward gathers lnx again (its queries and wi need it) and drops the summed
    output's RS (no backward reads it): + L AG. The sequential layer repeats AG, RS, AG (its down-projection's RS
    dropped, xla_remat)."""
    got = _tp(True, 10.0, recompute="full")
    assert got["tp"] - _tp(True, 10.0)["tp"] == pytest.approx(LAYERS * AG, rel=1e-9)
    seq = _tp(False, 10.0, recompute="full")
    assert seq["tp"] - _tp(False, 10.0)["tp"] == pytest.approx(LAYERS * (2 * AG + RS), rel=1e-9)


def test_jax_dots_gathers_lnx_again() -> None:
    """MaxText's remat_policy=minimal (jax_dots): the dots' outputs are kept, the shared norm output is not: + L AG
    (the sequential layer's two norm outputs: + 2 L AG)."""
    got = _tp(True, 10.0, recompute="selective", recompute_modules="jax_dots")
    assert got["tp"] - _tp(True, 10.0)["tp"] == pytest.approx(LAYERS * AG, rel=1e-9)
    seq = _tp(False, 10.0, recompute="selective", recompute_modules="jax_dots")
    assert seq["tp"] - _tp(False, 10.0)["tp"] == pytest.approx(2 * LAYERS * AG, rel=1e-9)


def test_not_gpt_neox_count_under_xla() -> None:
    """The same block on GPUs under a framework's linears runs GPT-NeoX's count (QKV's and FC1's own gathers and
    input-gradient reductions, blocking: tests/test_tp34.py); under XLA (a TPU) one gather and one scatter a pass."""
    xla = _tp(True, 10.0)
    assert xla["tp"] == pytest.approx(LAYERS * (AG + RS), rel=1e-9)
    gpu = _tp(True, 10.0, cluster="dgx-h100")
    assert gpu["hidden_bwd"] == 0.0  # GPT-NeoX's blocking collectives: nothing beside the GEMMs


# --- XLA's remat of a parallel block: the O-projection is dead code too ------------------------------------------
# Measured (jax 0.10.2 CPU, GSPMD, 8 host devices as a 2 x 4 fsdp x tensor mesh, MaxText's shardings, one layer under
# jax.checkpoint(policy=None), the HLO after SPMD partitioning): the rematerialized dots of a sequential layer are
# Q, K, V, the core's two, O-proj and the up-projection (the down-projection absent); of a parallel layer Q, K, V, the
# core's two and the up-projection: neither O-proj nor the down-projection, whose outputs only feed the layer's sum.

IDEAL = dict(peak_flops=1e15, memory_bandwidth=1e30, gemm_max=1.0, gemm_half_dim=0.0)


def test_xla_remat_of_a_parallel_block_leaves_out_o_proj_and_down() -> None:
    """b 2, s 1024, h 4096 (32 heads of 128), f 16384, tp 4, every GEMM at peak: O-proj 2 T h h / t = 1.718e10 FLOP,
    down 2 T h f / t = 6.872e10 FLOP (T = 2048). The sequential layer's XLA recompute drops only the down GEMM."""
    kw = dict(micro_batch=2, seq_len=1024, tp=4, recompute="full", flash_attention=True, **IDEAL)
    par = shape(layers=1, hidden=4096, heads=32, ffn_hidden=16384, vocab=32000, parallel_block=True, norms_per_layer=1)
    seq = shape(layers=1, hidden=4096, heads=32, ffn_hidden=16384, vocab=32000)
    o_s, down_s = 2 * 2048 * 4096 * 4096 / 4 / 1e15, 2 * 2048 * 4096 * 16384 / 4 / 1e15
    torch_like = layer_compute_time(par, **kw)
    xla = layer_compute_time(par, xla_remat=True, **kw)
    assert float(torch_like.recompute) == pytest.approx(float(torch_like.forward))
    assert float(torch_like.recompute - xla.recompute) == pytest.approx(o_s + down_s, rel=1e-9)
    seq_t, seq_x = layer_compute_time(seq, **kw), layer_compute_time(seq, xla_remat=True, **kw)
    assert float(seq_t.recompute - seq_x.recompute) == pytest.approx(down_s, rel=1e-9)


def test_tpu_hardware_flops_of_a_parallel_block() -> None:
    """hardware - model = B L (layer forward - down - O-proj) on a TPU with full remat: 2 s (4 h^2 + 2 h f) + the
    full-key core 2 s^2 a (d + d) a layer, less 2 s h f and 2 s h h."""
    L, h, s, f, B = 4, 4096, 2048, 16384, 64
    wl = TransformerWorkload(name="p", layers=L, hidden=h, heads=32, ffn_hidden=f, seq_len=s, vocab=32768,
                             parallel_block=True, norms_per_layer=1)
    tr = TrainingSpec(global_batch=B, micro_batch=4, precision="bf16", seq_len=s)
    st = StrategySpec(tp=4, pp=1, dp=16, recompute="full", sequence_parallel=True, flash_attention=True)
    fl = predict(load_cluster("tpu-v5p-pod"), wl, 64, tr, st).flops
    layer_fwd = 2 * s * (4 * h * h + 2 * h * f) + 2 * s * s * 32 * (128 + 128)
    dead = 2 * s * h * f + 2 * s * h * h
    assert fl["hardware_flops_per_step"] - fl["model_flops_per_step"] == pytest.approx(B * L * (layer_fwd - dead),
                                                                                     rel=1e-9)
