"""mla35: each of MLA's column-parallel linears under its own GEMM (docs/model.md#mla-per-linear).

Megatron-Core builds MLA's linear_q_up_proj and linear_kv_up_proj as column-parallel Transformer Engine linears in
every build, and linear_q_down_proj / linear_kv_down_proj as TEColumnParallelLinear in the column build
(NVIDIA/Megatron-LM@7094270c6f megatron/core/models/gpt/gpt_layer_specs.py L117-126, which NeMo 25.04's DeepSeek-V3
rows run), TELinear 'duplicated' otherwise. With sequence parallelism each such linear gathers its own input inside
the module, re-gathers it before its data-gradient GEMM (waited before its weight-gradient GEMM) and reduce-scatters
its input gradient after its data-gradient GEMM (waited after its weight-gradient GEMM), all inside its own backward
(NVIDIA/TransformerEngine@c55e425ac5 linear.py L510-527 / L582-588 / L609-611 / L676-679, layernorm_linear.py
L595-612 / L662-668 / L689-691 / L753-756). So each collective hides only under its own linear's GEMM; until mla35
the block's column linears were one pool under their summed GEMMs.

By hand on tests/test_sp31.py's MLA block: h 1024, 8 heads, d_nope 64, d_rope 32 (d 96), d_v 64, r_q 256, r_kv 128,
gated f 4096, s 2048, micro-batch 1, 4 layers at tp 4 on one DGX H100, bf16. Weight elements (input x output):

    q_up    256 x 8·96          = 196,608      input 256 wide
    kv_up   128 x 8·(64 + 64)   = 131,072      input 128
    q_down  1024 x 256          = 262,144      input 1024  (column build only)
    kv_down 1024 x (128 + 32)   = 163,840      input 1024  (column build only)
    o       512 x 1024          = 524,288;  fc1 1024 x 8192 = 8,388,608;  fc2 4096 x 1024 = 4,194,304
    T (every weight of a layer) = 13,860,864

A linear's forward GEMM on a rank is 2·s·(weight)/tp FLOPs: q_up 2·2048·196,608/4 = 201,326,592, kv_up 134,217,728,
q_down 268,435,456, kv_down 167,772,160; its share of a layer's GEMM time G is weight / T. Each linear's collective
moves s·(input width)·2 bytes over the 4 ranks: q_up 1,048,576, kv_up 524,288, q_down and kv_down 4,194,304 bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine import layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.specs import TransformerWorkload
from scalemodel.specs.workload import MLASpec
from tests.test_sp32 import _t, v
from tests.test_tp33 import LAYERS, TP, S, _setup

WEIGHTS = {"q_up": 196_608, "kv_up": 131_072, "q_down": 262_144, "kv_down": 163_840}
INPUTS = {"q_up": 256, "kv_up": 128, "q_down": 1024, "kv_down": 1024}
T_LAYER = 13_860_864


def _mla_setup(column: bool, sp: bool = True, precision: str = "bf16", recipe: str | None = None):  # type: ignore[no-untyped-def]
    mla = MLASpec(kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    wl = TransformerWorkload(name="mla", layers=LAYERS, hidden=1024, heads=8, ffn_hidden=4096, gated_mlp=True,
                             vocab=32_000, seq_len=S, tied_embeddings=False, mla=mla)
    return _setup(precision, recipe, wl=wl, mla_column_down_proj=column, sequence_parallel=sp)


def _comp(job, g, gemm: float) -> dict:  # type: ignore[no-untyped-def, type-arg]
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    return dict(comp, gemm_per_layer=np.full(1, gemm), wgrad=np.full(1, 10.0), embedding_uses=np.zeros(1),
                head_uses=np.zeros(1))


def test_linears_widths_and_weights_by_hand() -> None:
    job, _, _ = _mla_setup(True)
    got = {name: (float(w), float(n)) for name, w, n in mpc.mla_column_linears(job.shape)}
    assert got == {k: (float(INPUTS[k]), float(WEIGHTS[k])) for k in WEIGHTS}
    # the FLOPs a rank runs for each: 2 s weight / tp
    flops = {k: 2 * S * WEIGHTS[k] / TP for k in WEIGHTS}
    assert flops == {"q_up": 201_326_592, "kv_up": 134_217_728, "q_down": 268_435_456, "kv_down": 167_772_160}


@pytest.mark.parametrize("column", [False, True])
def test_block_linears_one_entry_per_mla_linear(column: bool) -> None:
    job, g, _ = _mla_setup(column)
    col, _row, total = mpc._block_linears(job.shape, 1.0, 1.0, 0.0, 0.0, g.mla_column_down_proj)
    assert total == pytest.approx(T_LAYER, rel=1e-12)
    mla = {slot: (float(np.ravel(n)[0]), f) for n, f, slot in col if slot >= 0}
    m = 1.0 if column else 0.0
    assert mla == {0: (1.0, 196_608.0), 1: (1.0, 131_072.0), 2: (m, 262_144.0), 3: (m, 163_840.0)}
    # the shares the pool used are unchanged: the block's column side a = (q_up + kv_up + [column] downs + fc1) / T
    a, _ = mpc._ub_block_shares(job.shape, 1.0, 1.0, 0.0, 0.0, g.mla_column_down_proj)
    assert a == pytest.approx((196_608 + 131_072 + m * (262_144 + 163_840) + 8_388_608) / T_LAYER, rel=1e-12)


@pytest.mark.parametrize("column", [False, True])
def test_each_linear_prices_its_own_width(column: bool) -> None:
    """coll['tp_mla_rs'] / ['tp_mla_rg']: one all-gather of s·w·2 bytes over the 4 ranks per slot (bf16: the input
    gradient's reduce-scatter priced as the forward's gather at eb, docs/model.md#mla-tp; the re-gather at the saved
    dtype, here eb too); 0 for the down-projections of the duplicated build."""
    job, _, c = _mla_setup(column)
    for i, name in enumerate(("q_up", "kv_up", "q_down", "kv_down")):
        # the duplicated build's TELinear down-projections gather nothing
        want = _t("allgather", S * INPUTS[name] * 2.0, job) if column or "up" in name else 0.0
        assert v(c["tp_mla_rs"][i]) == pytest.approx(want, rel=1e-12)
        assert v(c["tp_mla_rg"][i]) == pytest.approx(want, rel=1e-12)
    # the pool's mirrors now total the linears' own: traffic per block = sum of the TE column linears' collectives
    pooled = v(c["tp"] - c["tp_fwd_ag"] + c["tp_att_grad_rs"] - c["tp_att_plain"])
    names = ("q_up", "kv_up") + (("q_down", "kv_down") if column else ())
    assert pooled == pytest.approx(sum(_t("allgather", S * INPUTS[k] * 2.0, job) for k in names), rel=1e-12)


def _excess(gemm: float, names: tuple[str, ...], job) -> float:  # type: ignore[no-untyped-def]
    """One block's exposed input-gradient seconds: each linear's collective past its own GEMM (weight / T of G)."""
    return sum(max(_t("allgather", S * INPUTS[k] * 2.0, job) - WEIGHTS[k] / T_LAYER * gemm, 0.0) for k in names)


@pytest.mark.parametrize("column", [False, True])
def test_input_gradient_windows_by_hand(column: bool) -> None:
    """G set so that kv_down's reduce-scatter (4 MiB) outlasts its own weight-gradient GEMM while q_up's GEMM has
    spare time: per linear kv_down's excess shows; the old pool (the block's summed GEMMs) hid it."""
    job, g, c = _mla_setup(column)
    big = _t("allgather", S * 1024 * 2.0, job)
    gemm = 1.2 * big * T_LAYER / 262_144  # q_down's GEMM 1.2 x its gather, kv_down's 0.75 x
    comp = _comp(job, g, gemm)
    names = ("q_up", "kv_up") + (("q_down", "kv_down") if column else ())
    traffic, exposed, hidden = mpc._input_grad_windows(job, g, comp, c)
    # the attention block's linears plus FC1 (its h-wide reduce-scatter under 8,388,608 / T of G: hidden)
    fc1 = _t("reducescatter", S * 1024 * 2.0, job)
    want_traffic = LAYERS * (sum(_t("allgather", S * INPUTS[k] * 2.0, job) for k in names) + fc1)
    assert v(traffic) == pytest.approx(want_traffic, rel=1e-12)
    assert v(exposed) == pytest.approx(LAYERS * _excess(gemm, names, job), rel=1e-12)
    assert v(hidden) == pytest.approx(want_traffic - LAYERS * _excess(gemm, names, job), rel=1e-12)
    if column:
        kv_down = big - 163_840 / T_LAYER * gemm
        assert kv_down == pytest.approx(0.25 * big, rel=1e-12) and v(exposed) >= LAYERS * kv_down * (1 - 1e-12)
        pool = max(sum(_t("allgather", S * INPUTS[k] * 2.0, job) for k in names)
                   - sum(WEIGHTS[k] for k in names) / T_LAYER * gemm, 0.0)
        assert pool == 0.0  # the pool hid all of it under q_up's and q_down's spare time


@pytest.mark.parametrize("column", [False, True])
def test_regathers_by_hand(column: bool) -> None:
    job, g, c = _mla_setup(column)
    gemm = 1.2 * _t("allgather", S * 1024 * 2.0, job) * T_LAYER / 262_144
    got = mpc.sp_regather(job, g, _comp(job, g, gemm), c)
    names = ("q_up", "kv_up") + (("q_down", "kv_down") if column else ())
    fc1 = _t("allgather", S * 1024 * 2.0, job)  # FC1's h-wide re-gather, under its long GEMM
    assert v(got["total"]) == pytest.approx(
        LAYERS * (sum(_t("allgather", S * INPUTS[k] * 2.0, job) for k in names) + fc1), rel=1e-12)
    assert v(got["exposed"]) == pytest.approx(LAYERS * _excess(gemm, names, job), rel=1e-12)


def test_fp8_regathers_at_one_byte() -> None:
    """Per-tensor FP8: the re-gathers move the saved 1-byte input, the reduce-scatters the 16-bit gradient."""
    job, _, c = _mla_setup(True, precision="fp8", recipe="delayed")
    for i, name in enumerate(("q_up", "kv_up", "q_down", "kv_down")):
        assert v(c["tp_mla_rg"][i]) == pytest.approx(_t("allgather", S * INPUTS[name] * 1.0, job), rel=1e-12)
        assert v(c["tp_mla_rs"][i]) == pytest.approx(_t("allgather", S * INPUTS[name] * 2.0, job), rel=1e-12)


def test_without_sp_the_block_stays_one_pool() -> None:
    """No SP: the count's one all-reduce a block (MLA's own all-reduces are not priced there, docs/model.md#mla-tp),
    under the block's summed column GEMMs as before: shared out pro rata, sum_i max(c w_i / W - w_i, 0) =
    max(c - W, 0)."""
    job, g, c = _mla_setup(True, sp=False)
    ar = _t("allreduce", S * 1024 * 2.0, job)
    w_att = (196_608 + 131_072 + 262_144 + 163_840) / T_LAYER
    gemm = 0.5 * ar / w_att  # the block's column GEMMs half the all-reduce
    _, exposed, _ = mpc._input_grad_windows(job, g, _comp(job, g, gemm), c)
    fc1 = max(ar - 8_388_608 / T_LAYER * gemm, 0.0)
    assert v(exposed) == pytest.approx(LAYERS * (max(ar - w_att * gemm, 0.0) + fc1), rel=1e-12)


def test_step_is_slower_only_where_a_linear_outlasts_its_gemm() -> None:
    """Whole model, column build: the per-linear exposed input-gradient and re-gather time is at least the pooled
    one, and at most the traffic (no overlap hides more than runs under it)."""
    job, g, c = _mla_setup(True)
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    traffic, exposed, hidden = mpc._input_grad_windows(job, g, comp, c)
    assert 0.0 <= v(exposed) <= v(traffic) and v(hidden) >= 0.0
    a = mpc._ub_shares(job.shape, g.mla_column_down_proj)[0]
    pooled = max(v(traffic) - LAYERS * a * v(comp["gemm_per_layer"]), 0.0)
    assert v(exposed) >= pooled * (1 - 1e-12)
