"""sp31: the backward's input re-gathers under sequence parallelism (docs/model.md#sp-regather).

A column-parallel linear with sequence parallelism saves its input shard (b s/t h), not the gathered input, and
all-gathers it again in the backward for its weight gradient, issued before the data-gradient GEMM and waited on
after it (Megatron-LM@1afee592e8 core_r0.9.0 megatron/core/tensor_parallel/layers.py L431-453; Transformer Engine
@c55e425ac5 v2.2 pytorch/module/layernorm_linear.py L595-612 / L689-691). Per sequential layer the backward so runs 4
all-gathers (2 re-gathers of the QKV and FC1 inputs, 2 of the row-parallel output gradients) and 2 reduce-scatters,
where the forward runs 2 and 2. The re-gather moves the saved shard's dtype: bf16 2 bytes an element, an FP8 linear's
quantized copy 1 byte (MXFP8 1 + 1/32 with its E8M0 scales).

Checked by hand on a small GPT layer (h 1024, 8 heads of 128, MLP 4h, not gated, s 2048, micro-batch 1) at tensor 4
on one DGX H100: the gathered buffer b s h is 2048 x 1024 = 2,097,152 elements, 4 MiB in bf16, 2 MiB in fp8, each
priced as one all-gather of that buffer over the 4 ranks at stride 1 (the collective layer's own price, checked in
tests/test_collectives.py). The GEMM window: the data-gradient GEMMs of the gathering linears, QKV 3h^2 and FC1 4h^2
of the layer's 12h^2 weight FLOPs a token, a = 7/12 of the forward GEMM time.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MLASpec

H, S, LAYERS, TP = 1024, 2048, 4, 4
ELEMENTS = S * 1 * H  # the gathered buffer b s h


def _setup(precision: str = "bf16", recipe: str | None = None, cluster: str = "dgx-h100", **strategy):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="gpt-small", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=False,
                             vocab=32_000, seq_len=S, tied_embeddings=False)
    extra = {"fp8_recipe": recipe} if recipe else {}
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision=precision, seq_len=S, **extra)
    job = build_job(load_cluster(cluster), wl, tr)
    st = StrategySpec(**{"tp": TP, "sequence_parallel": True, **strategy})
    g = grid_from_strategy(st, tr, st.tp * st.pp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, mpc._mp_collectives(job, g, groups)


def _ag(nbytes: float, ranks: int, job) -> float:  # type: ignore[no-untyped-def]
    return float(coll.group_time("allgather", np.asarray(nbytes), place(float(ranks), 1.0, job.network)))


def _rs(nbytes: float, ranks: int, job) -> float:  # type: ignore[no-untyped-def]
    return float(coll.group_time("reducescatter", np.asarray(nbytes), place(float(ranks), 1.0, job.network)))


def v(a) -> float:  # type: ignore[no-untyped-def]
    return float(np.asarray(a).reshape(-1)[0])


@pytest.mark.parametrize(("precision", "recipe", "cluster", "elem_bytes"), [
    ("bf16", None, "dgx-h100", 2.0),            # the saved bf16 shard
    ("fp8", "delayed", "dgx-h100", 1.0),        # TE saves the FP8 row-wise copy (the norm writes FP8)
    ("fp8", "tensorwise", "dgx-h100", 1.0),     # current scaling: the same per-tensor FP8 data
    ("fp8", "mxfp8", "dgx-b200", 1.0 + 1 / 32),  # the column-wise MXFP8 copy with one E8M0 scale per 32
])
def test_per_layer_backward_bytes_by_hand(precision: str, recipe: str | None, cluster: str, elem_bytes: float) -> None:
    """The layer's backward TP traffic: 2 RS + 2 AG (the data-gradient reduce-scatters of QKV and FC1, the
    output-gradient gathers of O-proj and FC2: their dtypes in tests/test_sp32.py) and 2 re-gathers of the saved
    dtype: bf16 4 MiB each, fp8 2 MiB each (1 byte an element), MXFP8 2 MiB x 33/32."""
    job, _, c = _setup(precision, recipe, cluster)
    assert mpc.sp_regather_elem_bytes(job) == pytest.approx(elem_bytes, rel=1e-12)
    regather = _ag(ELEMENTS * elem_bytes, TP, job)
    assert v(c["tp_regather"]) == pytest.approx(regather, rel=1e-12)
    # the forward pair: the RS of the activation at its 2 bytes, the AG at the gathered dtype (sp32: TE quantizes
    # before it gathers, the re-gather's dtype; tests/test_sp32.py)
    pair = _rs(ELEMENTS * 2.0, TP, job) + _ag(ELEMENTS * elem_bytes, TP, job)
    assert v(c["tp"]) == pytest.approx(pair, rel=1e-12)
    # a sequential layer's backward: the count's 2 pairs and the 2 re-gathers (sp_regather with gathers = 2)
    assert 2 * v(c["tp"]) + 2 * v(c["tp_regather"]) == pytest.approx(2 * pair + 2 * regather, rel=1e-12)
    if elem_bytes < 2.0:  # fp8 halves the re-gather's bytes: cheaper than the bf16 one, but not free
        bf16_job, _, bf16 = _setup()
        assert 0.0 < v(c["tp_regather"]) < v(bf16["tp_regather"])
        assert v(bf16["tp_regather"]) == pytest.approx(_ag(ELEMENTS * 2.0, TP, bf16_job), rel=1e-12)


def test_bf16_layers_of_an_fp8_run_gather_bf16() -> None:
    """training.bf16_layers: the layers kept in BF16 save a bf16 shard; the mean element is share x 2 + (1 - share)."""
    wl = TransformerWorkload(name="gpt-small", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=False,
                             vocab=32_000, seq_len=S, tied_embeddings=False)
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="fp8", seq_len=S, bf16_layers=1,
                     fp8_recipe="tensorwise")
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    assert mpc.sp_regather_elem_bytes(job) == pytest.approx(0.25 * 2.0 + 0.75 * 1.0, rel=1e-12)


def _comp(gemm_per_layer: float) -> dict[str, np.ndarray]:
    return {"layers_per_stage": np.asarray([float(LAYERS)]), "gemm_per_layer": np.asarray([gemm_per_layer])}


def test_exposed_part_when_the_gemm_is_shorter_than_the_gather() -> None:
    """C = L x 2 re-gathers; W = 7/12 of the layers' forward GEMM time (QKV 3h^2 + FC1 4h^2 of 12h^2). With a
    forward GEMM of 10 us a layer, W = 4 x 7/12 x 10 us = 23.3 us against C = 8 AG(4 MiB) (tens of us on NVLink):
    exposed C - W, hidden W; with 10 ms a layer the GEMMs hide it all."""
    job, g, c = _setup()
    assert mpc._ub_shares(job.shape)[0] == pytest.approx(7 / 12, rel=1e-12)
    ag = _ag(ELEMENTS * 2.0, TP, job)
    total = LAYERS * 2 * ag
    short = 10e-6
    window = LAYERS * 7 / 12 * short
    assert total > window  # the case this test is about
    got = mpc.sp_regather(job, g, _comp(short), c)
    assert v(got["total"]) == pytest.approx(total, rel=1e-12)
    assert v(got["exposed"]) == pytest.approx(total - window, rel=1e-12)
    assert v(got["hidden"]) == pytest.approx(window, rel=1e-12)
    long = mpc.sp_regather(job, g, _comp(10e-3), c)
    assert v(long["exposed"]) == 0.0 and v(long["hidden"]) == pytest.approx(total, rel=1e-12)


@pytest.mark.parametrize("strategy", [dict(sequence_parallel=False), dict(tp=1), dict(nanotron_trainer=True)])
def test_no_regather_without_sequence_parallelism_at_tp1_or_under_nanotron(strategy: dict) -> None:
    """Without SP (or at tp 1) the saved input is the whole one; nanotron's own linears are priced by
    nanotron_tp_time (their re-gathers included)."""
    job, g, c = _setup(**strategy)
    got = mpc.sp_regather(job, g, _comp(10e-6), c)
    assert v(got["total"]) == 0.0 and v(got["exposed"]) == 0.0 and v(got["hidden"]) == 0.0


def test_mla_blocks_regather_each_gathered_input_at_the_saved_dtype() -> None:
    """MLA's column-parallel linears each gather their own input (docs/model.md#mla-tp): each is re-gathered in the
    backward. A small MLA block (h 1024, q_lora 256, kv_lora 128, rope 32) with column-parallel down-projections
    gathers, a token, the up-projections' r_q 256 and r_kv 128 and the down-projections' h, r_q 256, h and
    r_kv + d_rope 160 (transformer.mla_up_proj_gathers / mla_down_proj_gathers, checked by hand in
    tests/test_mla_tp.py): the TE column linears' inputs are re-gathered (r_q, r_kv, h, h), the column build's latents
    (gather_from_tensor_model_parallel_region: r_q and r_kv + d_rope) are Megatron's plain autograd gathers, which save
    nothing to re-gather (tp33; until then counted): in an fp8 run (1 byte) the block's re-gathers beyond the h-wide
    one the count holds are AG(s 256) + AG(s 128) + AG(s h) at 1 byte; a bf16 run's are the forward's gathers less
    the two latents'."""
    mla = MLASpec(kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    wl = TransformerWorkload(name="mla", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=True,
                             vocab=32_000, seq_len=S, tied_embeddings=False, mla=mla)
    for precision, q in (("fp8", 1.0), ("bf16", 2.0)):
        tr = TrainingSpec(global_batch=16, micro_batch=1, precision=precision, seq_len=S)
        job = build_job(load_cluster("dgx-h100"), wl, tr)
        st = StrategySpec(tp=TP, sequence_parallel=True, mla_column_down_proj=True)
        g = grid_from_strategy(st, tr, TP, job)
        groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp,
                                 layout=g.layout)
        c = mpc._mp_collectives(job, g, groups)
        want = sum(_ag(S * w * q, TP, job) for w in (256, 128, H))
        assert v(c["tp_att_regather"]) == pytest.approx(want, rel=1e-9)
        if precision == "bf16":
            latents = _ag(S * 256 * 2.0, TP, job) + _ag(S * (128 + 32) * 2.0, TP, job)
            assert v(c["tp_att_regather"]) == pytest.approx(v(c["tp_att"]) - latents, rel=1e-9)
