"""tp33: each TP collective of a linear's backward hides only under that linear's own GEMMs (docs/model.md#tp33).

A column-parallel linear (QKV, FC1) issues the reduce-scatter (SP) or all-reduce (no SP) of its input gradient async
right after its data-gradient GEMM and waits on it before its backward returns, after its weight-gradient GEMM
(NVIDIA/TransformerEngine@c55e425ac5, v2.2, pytorch/module/linear.py L582-588 / L676-679, layernorm_linear.py
L662-668 / L753-756; v1.11 @c27ee60ec7 linear.py L502-506 / L574; v2.8 @40c69e751a linear.py L737-743 / L924-927):
its window is its own weight-gradient GEMM, not the layer's. Under userbuffers the same linears run the bulk
overlaps inside their own backward (the input re-gather beside the data-gradient GEMM, ``ub_bulk_dgrad``, the
input-gradient reduce-scatter beside the weight-gradient GEMM, ``ub_bulk_wgrad``; v2.2 linear.py L457-472 / L572 /
L652), and a row-parallel linear (O-proj, FC2) its output-gradient ring-exchange gather beside its own data-gradient
GEMM (``ub_overlap_ag``, L441-445); in the forward the ring-exchange gathers run beside QKV / FC1, the pipelined
reduce-scatters beside O-proj / FC2. Until tp33 the backward pooled all of it under the whole layer's weight-gradient
GEMMs (no userbuffers) or under 2 x the whole layer's forward GEMMs (userbuffers), the forward under all of them.

By hand on a small GPT layer (h 1024, 8 heads of 128, MLP 4h not gated, s 2048, micro-batch 1), 4 layers at tensor
4 on one DGX H100: the column-parallel linears hold a = (3h^2 + 4h^2) / 12h^2 = 7/12 of a layer's weight-GEMM FLOPs,
the row-parallel ones r = 5/12. With G the forward GEMM seconds a layer (set by hand) and n = 8 block collectives a
pass (2 a layer), E = s h = 2,097,152 elements, RS = RS(2 E), AG = AG(q E) (q: 2 bytes bf16, 1 byte per-tensor FP8),
each one NCCL collective over the 4 ranks (tests/test_collectives.py prices them):

    no userbuffers, SP:  exposed = n (RS + AG) + n AG(q_g E) + max(n RS - 4 a G, 0) + max(n AG - 4 a G, 0)
                         hidden  = min(n RS, 4 a G) + min(n AG, 4 a G)
    no SP (async AR):    exposed = n AR + max(n AR - 4 a G, 0),   hidden = min(n AR, 4 a G)
    userbuffers:         exposed = max(n AG - 3 a G, 0) + max(n RS - 3 r G, n RS / 4)
                                   + max(n AG - 3 r G, 0) + max(n RS - 4 a G, 0) + max(n AG - 4 a G, 0)

(the ring exchanges' last GEMM chunk, 1/tp, and the pipeline's first, 1/4, have nothing beside them: review33b)

The weight-gradient time ``wgrad`` handed in is 10 s: the old window, under which every reduce-scatter hid.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MLASpec
from tests.test_sp32 import _t, v  # the same t 4 group's collective time and scalar reader

H, S, LAYERS, TP = 1024, 2048, 4, 4
E = float(S * H)
N = LAYERS * 2  # block collectives a pass
A, R = 7 / 12, 5 / 12


def _setup(precision: str = "bf16", recipe: str | None = None, wl: TransformerWorkload | None = None,
           **strategy):  # type: ignore[no-untyped-def]
    wl = wl or TransformerWorkload(name="gpt-small", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H,
                                   gated_mlp=False, vocab=32_000, seq_len=S, tied_embeddings=False)
    extra = {"fp8_recipe": recipe} if recipe else {}
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision=precision, seq_len=S, **extra)
    job = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    st = StrategySpec(**{"tp": TP, "sequence_parallel": True, **strategy})
    g = grid_from_strategy(st, tr, st.tp, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, mpc._mp_collectives(job, g, groups)


def _tp(job, g, c, gemm: float, wgrad: float = 10.0) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The stage's TP seconds per micro-batch with the layers' forward GEMM time ``gemm`` a layer and the whole
    weight-gradient time ``wgrad`` set by hand (no embedding, no output layer: only the layers' collectives)."""
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    comp = dict(comp, wgrad=np.full(1, wgrad), gemm_per_layer=np.full(1, gemm), embedding_uses=np.zeros(1),
                head_uses=np.zeros(1))
    out = mpc._model_parallel_comm(job, g, comp, c)
    return {k: v(out[k]) for k in ("tp", "hidden_bwd", "hidden_fwd", "ub_sms")}


def test_shares_of_the_small_layer() -> None:
    job, _, _ = _setup()
    a, r = mpc._ub_shares(job.shape)
    assert a == pytest.approx(A, rel=1e-12) and r == pytest.approx(R, rel=1e-12)


@pytest.mark.parametrize(("precision", "recipe", "q"), [("bf16", None, 2.0), ("fp8", "delayed", 1.0)])
def test_sp_without_userbuffers_by_hand(precision: str, recipe: str | None, q: float) -> None:
    """SP, no userbuffers: the column linears' GEMMs 4 a G = 3/4 of the 8 reduce-scatters' time. A quarter of the
    reduce-scatters is exposed (the whole layer's 10 s wgrad hid them all before tp33), the re-gathers hide under the
    same window (each linear's data-gradient GEMM takes as long as its weight-gradient one)."""
    job, g, c = _setup(precision, recipe)
    rs, ag, ag_g = _t("reducescatter", 2 * E, job), _t("allgather", q * E, job), _t("allgather", q * E, job)
    w = 0.75 * N * rs
    gemm = w / (LAYERS * A)
    # tp34: each column linear's collectives under its own GEMMs, QKV 3/12 and FC1 4/12 of a layer's G
    exp_rs = LAYERS * sum(max(rs - f * gemm, 0.0) for f in (3 / 12, 4 / 12))
    exp_ag = LAYERS * sum(max(ag - f * gemm, 0.0) for f in (3 / 12, 4 / 12))
    got = _tp(job, g, c, gemm)
    assert got["tp"] == pytest.approx(N * (rs + ag) + N * ag_g + exp_rs + exp_ag, rel=1e-12)
    assert exp_rs == pytest.approx(0.25 * N * rs, rel=1e-12)  # both linears past their GEMMs: the pool's quarter
    assert got["hidden_bwd"] == pytest.approx(N * rs - exp_rs + N * ag - exp_ag, rel=1e-12)
    assert got["hidden_fwd"] == 0.0
    # per layer: exposed 2 (RS + AG) + 2 AG(q_g) + RS / 2 + the re-gathers' excess; nothing beyond its GEMMs hides
    assert got["hidden_bwd"] <= 2 * w * (1 + 1e-12)


def test_no_sp_allreduce_under_the_column_linears_wgrad_only() -> None:
    """No SP: Megatron's / TE's async all-reduce of the column linears' input gradients (QKV, FC1) runs under their own
    weight-gradient GEMMs, 4 a G = half of the 8 all-reduces: half exposed; tp_async_allreduce off: all exposed."""
    job, g, c = _setup(sequence_parallel=False)
    ar = v(c["tp_ar"])
    assert ar == pytest.approx(_t("allreduce", 2 * E, job), rel=1e-12)
    gemm = 0.5 * N * ar / (LAYERS * A)
    got = _tp(job, g, c, gemm)
    assert got["tp"] == pytest.approx(N * ar + 0.5 * N * ar, rel=1e-12)
    assert got["hidden_bwd"] == pytest.approx(0.5 * N * ar, rel=1e-12)
    job, g, c = _setup(sequence_parallel=False, tp_async_allreduce=False)
    got = _tp(job, g, c, gemm)
    assert got["tp"] == pytest.approx(2 * N * ar, rel=1e-12) and got["hidden_bwd"] == 0.0


@pytest.mark.parametrize(("precision", "recipe", "q"), [("bf16", None, 2.0), ("fp8", "delayed", 1.0)])
def test_userbuffers_each_overlap_beside_its_own_gemm(precision: str, recipe: str | None, q: float) -> None:
    """tp_comm_overlap: 4 a G = half the 8 reduce-scatters' time. Each part beside its own linears' GEMMs: the
    forward's ring-exchange gathers beside QKV / FC1 (4 a G), its pipelined reduce-scatters beside O-proj / FC2 (4 r G,
    the last chunk's quarter exposed at least); the backward's output-gradient gathers (one usage, q) under 4 r G, the
    reduce-scatters and the re-gathers under 4 a G each (before tp33: the forward's under all 4 G with the floor C / 8,
    the backward's under 2 x 4 G). The ring exchanges (tp = 4 chunks) run their last GEMM chunk and the pipeline (4
    chunks) its first with no traffic beside it: 3/4 of their windows (review33b; tests/test_review33b.py simulates
    TE's chunk timelines)."""
    job, g, c = _setup(precision, recipe, tp_comm_overlap=True)
    rs, ag = _t("reducescatter", 2 * E, job), _t("allgather", q * E, job)
    gemm = 0.5 * N * rs / (LAYERS * A)
    wa, wr = LAYERS * A * gemm, LAYERS * R * gemm
    fwd_c = N * (rs + ag)
    fwd_ring = min(N * ag, 0.75 * wa)  # the forward's ring-exchange gathers beside QKV / FC1
    fwd = max(N * ag - 0.75 * wa, 0.0) + max(N * rs - 0.75 * wr, N * rs / 4)
    parts = ((N * ag, 0.75 * wr), (N * rs, wa), (N * ag, wa))  # ring gathers, bulk reduce-scatters, bulk re-gathers
    got = _tp(job, g, c, gemm)
    assert got["tp"] == pytest.approx(fwd + sum(max(x - w, 0.0) for x, w in parts), rel=1e-12)
    hidden = [min(x, w) for x, w in parts]
    assert got["hidden_bwd"] == pytest.approx(sum(hidden), rel=1e-12)
    assert got["hidden_fwd"] == pytest.approx(fwd_c - fwd, rel=1e-12)
    # the userbuffers SMs: the forward's ring half at 1 SM, the RS-side GEMMs on S - 16 SMs, the backward's ring
    # gathers at 1 SM and its bulk overlaps at 16 SMs (TE initialize_ub defaults)
    s = float(job.compute_units)
    want = (fwd_ring / s + wr * 16 / (s - 16) + hidden[0] / s + (hidden[1] + hidden[2]) * 16 / s
            if job.collective_share > 0 else 0.0)
    assert got["ub_sms"] == pytest.approx(want, rel=1e-12)


def test_tp_comm_overlap_parts_sum_each_excess() -> None:
    """_tp_comm_overlap's backward parts: sum_i max(C_i - W_i, 0), not max(sum C - sum W, 0): 3 s under 1 s and 1 s
    under 3 s expose 2 s (the pooled reading hid all 4 s under 4 s)."""
    ov = mpc._tp_comm_overlap(0.0, 0.0, (3.0, 1.0), 0.0, 0.0, (1.0, 3.0))
    assert v(ov["exposed"]) == pytest.approx(2.0)
    assert v(ov["hidden_bwd"]) == pytest.approx(2.0)
    assert [v(h) for h in ov["hidden_bwd_parts"]] == pytest.approx([1.0, 1.0])


def test_mla_rope_key_is_not_regathered_and_its_mirror_blocks() -> None:
    """MLA (duplicated down-projections, h 1024, r_q 256, r_kv 128, d_rope 32): the up-projections' inputs are TE
    column linears' saved shards, re-gathered; the RoPE key is gathered by Megatron's plain
    ``gather_from_sequence_parallel_region`` (multi_latent_attention.py L763-765 at d98e8a64dd), whose backward is a
    blocking reduce-scatter and which saves nothing to re-gather. Beyond the count's h-wide one a block re-gathers
    AG(q s r_q) + AG(q s r_kv) - AG(q E), and exposes RS of the RoPE key (priced as its gather, 2 bytes)."""
    mla = MLASpec(kv_lora_rank=128, q_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    wl = TransformerWorkload(name="mla", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=True,
                             vocab=32_000, seq_len=S, tied_embeddings=False, mla=mla)
    for precision, recipe, q in (("bf16", None, 2.0), ("fp8", "delayed", 1.0)):
        job, g, c = _setup(precision, recipe, wl=wl)
        want = _t("allgather", q * S * 256, job) + _t("allgather", q * S * 128, job) - _t("allgather", q * E, job)
        assert v(c["tp_att_regather"]) == pytest.approx(want, rel=1e-9)
        rope = _t("allgather", 2.0 * S * 32, job)
        assert v(c["tp_att_plain"]) == pytest.approx(rope, rel=1e-12)
        exposed, _pool = mpc._sp_backward_pool(job, g, c, 0.0, N, LAYERS)
        assert v(exposed) == pytest.approx(N * v(c["tp_grad_ag"]) + LAYERS * rope, rel=1e-12)
