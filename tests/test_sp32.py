"""sp32: the row-parallel linears' output-gradient all-gathers under sequence parallelism, and the dtype of the
sequence-parallel all-gathers of an FP8 run (docs/model.md#tp-comm, #sp-regather).

(a) With sequence parallelism a row-parallel linear (O-proj, FC2) reduce-scatters its output in the forward, so its
backward all-gathers the output gradient before either backward GEMM can run: Transformer Engine's
``grad_output_preprocess`` calls ``gather_along_first_dim`` with its default ``async_op=False`` (NVIDIA/
TransformerEngine@c27ee60ec7, v1.11, pytorch/module/base.py L754-760 / L794-795, distributed.py L825-829;
@c55e425ac5, v2.2, base.py L824-830 / L851-856; @40c69e751a, v2.8, base.py L1145-1151 / L1187-1192), and
Megatron-Core's local linears the same (``_ReduceScatterToSequenceParallelRegion.backward`` returns
``_gather_along_first_dim(grad_output)``, a blocking ``_all_gather_base``: NVIDIA/Megatron-LM@1afee592e8 core_r0.9.0
megatron/core/tensor_parallel/mappings.py L107-131 / L383-386, @d98e8a64dd L118-146 / L372-380). Nothing runs under
it: exposed. With userbuffers (tp_comm_overlap) it is the ring-exchange all-gather under the data-gradient GEMM
(v2.2 linear.py L905-907 ``ub_overlap_ag_dgrad``, L440-445 CommOverlapType.AG): overlapped as before.

(b) An FP8 run's linears quantize before they gather: the forward's column-parallel input gathers move the
re-gathers' dtype (1 byte for per-tensor FP8, MXFP8 1 + 1/32), and the output-gradient gathers the gradient's with
the usages both backward GEMMs need (per-tensor FP8 1 byte, gathered row-wise and transposed locally; MXFP8 row-wise
and column-wise, 2 x (1 + 1/32)).

Checked by hand on a small GPT layer (h 1024, 8 heads of 128, MLP 4h, not gated, s 2048, micro-batch 1) at tensor 4
with SP on one DGX H100 (DGX B200 for MXFP8): the activation b s h is 2048 x 1024 = 2,097,152 elements; each
collective is priced as one NCCL collective of its buffer over the 4 ranks at stride 1 (checked in
tests/test_collectives.py). A sequential layer runs per micro-batch, with q the gathered input's bytes an element and
q_g the gradient's:

    forward    2 RS(2 E) + 2 AG(q E)                  exposed
    backward   2 AG(q_g E)                            exposed (a)
               2 RS(2 E)                              under the weight-gradient GEMMs W
               2 AG(q E)  (the input re-gathers)      under the data-gradient GEMMs of QKV and FC1, 7/12 G (sp31)
"""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.cost import collectives as coll
from scalemodel.cost import transformer
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

H, S, LAYERS, TP = 1024, 2048, 4, 4
E = S * 1 * H  # the activation b s h, elements


def _setup(precision: str = "bf16", recipe: str | None = None, cluster: str = "dgx-h100", **strategy):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="gpt-small", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=False,
                             vocab=32_000, seq_len=S, tied_embeddings=False)
    extra = {"fp8_recipe": recipe} if recipe else {}
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision=precision, seq_len=S, **extra)
    job = build_job(load_cluster(cluster), wl, tr, straggler_cv=0.0)
    st = StrategySpec(**{"tp": TP, "sequence_parallel": True, **strategy})
    g = grid_from_strategy(st, tr, st.tp * st.pp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, mpc._mp_collectives(job, g, groups)


def _t(op: str, nbytes: float, job) -> float:  # type: ignore[no-untyped-def]
    return float(coll.group_time(op, np.asarray(nbytes), place(float(TP), 1.0, job.network)))


def v(a) -> float:  # type: ignore[no-untyped-def]
    return float(np.asarray(a).reshape(-1)[0])


CASES = [  # precision, recipe, cluster, q (the gathered input), q_g (the gathered gradient), bytes an element
    ("bf16", None, "dgx-h100", 2.0, 2.0),
    ("fp8", "delayed", "dgx-h100", 1.0, 1.0),
    ("fp8", "tensorwise", "dgx-h100", 1.0, 1.0),
    ("fp8", "mxfp8", "dgx-b200", 1.0 + 1 / 32, 2.0 * (1.0 + 1 / 32)),
]


@pytest.mark.parametrize(("precision", "recipe", "cluster", "q", "q_g"), CASES)
def test_gathered_bytes_by_hand(precision: str, recipe: str | None, cluster: str, q: float, q_g: float) -> None:
    """The forward pair is RS(2 E) + AG(q E); the backward's output-gradient gather AG(q_g E): bf16 4 MiB each;
    per-tensor FP8 2 MiB gathers (the RS stays 4 MiB: the row-parallel GEMM writes bf16); MXFP8's gradient 4 MiB x
    33/32 (two usages with their E8M0 scales), more than bf16's."""
    job, _, c = _setup(precision, recipe, cluster)
    assert mpc.sp_regather_elem_bytes(job) == pytest.approx(q, rel=1e-12)
    assert mpc.sp_grad_gather_elem_bytes(job) == pytest.approx(q_g, rel=1e-12)
    assert v(c["tp_fwd_ag"]) == pytest.approx(_t("allgather", E * q, job), rel=1e-12)
    assert v(c["tp"]) == pytest.approx(_t("reducescatter", E * 2.0, job) + _t("allgather", E * q, job), rel=1e-12)
    assert v(c["tp_grad_ag"]) == pytest.approx(_t("allgather", E * q_g, job), rel=1e-12)
    # the embedding's and the output layer's gathers are not TE linears': the activations' bytes
    assert v(c["tp_ag"]) == pytest.approx(_t("allgather", E * 2.0, job), rel=1e-12)


@pytest.mark.parametrize(("recipe", "q_g"), [("blockwise", 2 * (1 + 4 / 128)), ("nvfp4", 2 * (0.5 + 1 / 16))])
def test_block_scaled_gradients_gather_both_usages(recipe: str, q_g: float) -> None:
    """Blockwise FP8 (1 x 128 tiles, an fp32 scale each) and NVFP4 (E2M1, an E4M3 scale per 16): the gradient's
    row-wise and column-wise copies (``_all_gather_fp8_blockwise`` / ``_all_gather_nvfp4``, v2.8 distributed.py
    L1165-1190 / L1361-1430); the input's one (the forward gather's, the re-gather's row- or column-wise copy)."""
    if recipe == "nvfp4":  # precision fp4 runs the nvfp4 recipe
        job, _, _ = _setup("fp4", None, "dgx-b200")
        assert job.fp8_recipe == "nvfp4"
    else:
        job, _, _ = _setup("fp8", recipe)
    assert mpc.sp_grad_gather_elem_bytes(job) == pytest.approx(q_g, rel=1e-12)
    assert mpc.sp_regather_elem_bytes(job) == pytest.approx(q_g / 2, rel=1e-12)


def test_bf16_layers_gather_bf16_gradients() -> None:
    """training.bf16_layers 1 of 4 in an MXFP8 run: the mean gradient element 1/4 x 2 + 3/4 x 2 x 33/32."""
    wl = TransformerWorkload(name="gpt-small", layers=LAYERS, hidden=H, heads=8, ffn_hidden=4 * H, gated_mlp=False,
                             vocab=32_000, seq_len=S, tied_embeddings=False)
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="fp8", seq_len=S, bf16_layers=1, fp8_recipe="mxfp8")
    job = build_job(load_cluster("dgx-b200"), wl, tr)
    assert mpc.sp_grad_gather_elem_bytes(job) == pytest.approx(0.25 * 2.0 + 0.75 * 2.0 * 33 / 32, rel=1e-12)


def _tp(job, g, c, wgrad: float, gemm: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The stage's TP seconds per micro-batch with the weight-gradient window ``wgrad`` and the layers' forward GEMM
    time ``gemm`` a layer set by hand (no embedding, no output layer on the stage: only the layers' collectives)."""
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    comp = dict(comp, wgrad=np.full(1, wgrad), gemm_per_layer=np.full(1, gemm), embedding_uses=np.zeros(1),
                head_uses=np.zeros(1))
    out = mpc._model_parallel_comm(job, g, comp, c)
    return {"tp": v(out["tp"]), "hidden_bwd": v(out["hidden_bwd"]), "hidden_fwd": v(out["hidden_fwd"])}


@pytest.mark.parametrize(("precision", "recipe", "cluster", "q", "q_g"), CASES)
@pytest.mark.parametrize("window", ["none", "long"])
def test_layers_exposed_and_hidden_by_hand(precision: str, recipe: str | None, cluster: str, q: float, q_g: float,
                                           window: str) -> None:
    """4 layers, no userbuffers. With no GEMM under anything (W = G = 0) every collective is exposed:
        8 RS + 8 AG(q) forward, 8 AG(q_g) + 8 RS + 8 AG(q) backward;
    with 10 ms GEMMs the reduce-scatters hide under W and the re-gathers under 7/12 G, but the output-gradient
    gathers stay exposed:  exposed 8 RS + 8 AG(q) + 8 AG(q_g),  hidden 8 RS + 8 AG(q)."""
    job, g, c = _setup(precision, recipe, cluster)
    rs, ag, ag_g = _t("reducescatter", E * 2.0, job), _t("allgather", E * q, job), _t("allgather", E * q_g, job)
    n = LAYERS * 2  # block collectives a pass: 2 a sequential layer
    got = _tp(job, g, c, 0.0, 0.0) if window == "none" else _tp(job, g, c, 10e-3, 10e-3)
    fwd = n * (rs + ag)
    if window == "none":
        assert got["tp"] == pytest.approx(fwd + n * (ag_g + rs + ag), rel=1e-12)
        assert got["hidden_bwd"] == 0.0
    else:
        assert got["tp"] == pytest.approx(fwd + n * ag_g, rel=1e-12)
        assert got["hidden_bwd"] == pytest.approx(n * (rs + ag), rel=1e-12)
    assert got["hidden_fwd"] == 0.0


def test_window_hides_only_what_fits() -> None:
    """bf16, the column-parallel linears' GEMMs (7/12 of the layers' forward GEMM time, tp33: the window of both their
    input-gradient reduce-scatters and their re-gathers) W = the 8 reduce-scatters' time / 2: half of the reduce-
    scatters hides, and W of the re-gathers; the gathers of the gradient are all exposed (no traffic hides longer
    than the compute under it)."""
    job, g, c = _setup()
    rs, ag = _t("reducescatter", E * 2.0, job), _t("allgather", E * 2.0, job)
    n = LAYERS * 2
    w = n * rs / 2
    got = _tp(job, g, c, 10.0, w / (LAYERS * 7 / 12))  # the whole layer's wgrad (10 s) is no longer the window
    assert got["hidden_bwd"] == pytest.approx(w + min(n * ag, w), rel=1e-12)
    assert got["tp"] == pytest.approx(n * (rs + ag) + n * ag + n * rs / 2 + max(n * ag - w, 0.0), rel=1e-12)


@pytest.mark.parametrize(("precision", "recipe", "q"), [("bf16", None, 2.0), ("fp8", "delayed", 1.0)])
def test_userbuffers_keep_the_gradient_gather_overlapped(precision: str, recipe: str | None, q: float) -> None:
    """tp_comm_overlap: the output-gradient gather is userbuffers' ring exchange under the data-gradient GEMM, one
    usage (the forward gathers' q). With 10 ms GEMMs a layer the forward's exposed part is the pipeline floor, the
    last quarter of its 8 reduce-scatters (tp33; C / 8 of the pair before, equal only where AG(q) = RS), the
    backward's 8 (RS + AG(q)) + 8 AG(q) re-gathers all hide beside their own linears' GEMMs:
        exposed 2 RS,  hidden backward 8 (RS + AG(q)) + 8 AG(q),  hidden forward 8 (RS + AG(q)) - 2 RS."""
    job, g, c = _setup(precision, recipe, tp_comm_overlap=True)
    rs, ag = _t("reducescatter", E * 2.0, job), _t("allgather", E * q, job)
    n = LAYERS * 2
    got = _tp(job, g, c, 10e-3, 10e-3)
    assert got["tp"] == pytest.approx(n * rs / 4, rel=1e-12)
    assert got["hidden_bwd"] == pytest.approx(n * (rs + ag) + n * ag, rel=1e-12)
    assert got["hidden_fwd"] == pytest.approx(n * (rs + ag) - n * rs / 4, rel=1e-12)


def test_without_sequence_parallelism_nothing_changes() -> None:
    """No SP: the 2 all-reduces a layer each way, the backward's under W (Megatron's async all-reduce); the row-
    parallel backward is the identity (no gather): with W = 10 ms only the forward's 8 AR are exposed, at the
    activations' 2 bytes in an fp8 run too (the all-reduce of the row-parallel GEMM's bf16 output)."""
    for precision, recipe in (("bf16", None), ("fp8", "delayed")):
        job, g, c = _setup(precision, recipe, sequence_parallel=False)
        assert v(c["tp"]) == pytest.approx(v(c["tp_ar"]), rel=1e-12)
        assert v(c["tp_grad_ag"]) == 0.0 and v(c["tp_fwd_ag"]) == 0.0
        got = _tp(job, g, c, 10e-3, 10e-3)
        assert got["tp"] == pytest.approx(LAYERS * 2 * v(c["tp_ar"]), rel=1e-12)
        assert got["hidden_bwd"] == pytest.approx(LAYERS * 2 * v(c["tp_ar"]), rel=1e-12)


def test_nanotron_gathers_stay_at_the_activations_bytes() -> None:
    """nanotron's own linears (docs/model.md#nanotron) gather the unquantized activation: an fp8-named run's pair and
    gradient gather at 2 bytes."""
    job, _, c = _setup("fp8", "delayed", nanotron_trainer=True)
    assert v(c["tp_fwd_ag"]) == pytest.approx(_t("allgather", E * 2.0, job), rel=1e-12)
    assert v(c["tp_grad_ag"]) == pytest.approx(_t("allgather", E * 2.0, job), rel=1e-12)


def test_shared_experts_off_userbuffers_gather_the_unquantized_activation() -> None:
    """moe_shared_expert_overlap: the shared experts' pair runs as Megatron's plain gather / reduce-scatter
    (pre_forward_comm / post_forward_comm, docs/model.md#tp-comm-moe), not the TE linears' quantized one: ``ext`` and
    ``block`` carry RS + AG of the activation at its own bytes, while the layers' count carries the quantized pair.
    Collectives by hand: the pair 1 s, its RS 0.75 s, the unquantized AG 0.5 s (the quantized AG 0.25 s)."""
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model="deepseek-v3", sets=[],
                                 training={"precision": "fp8", "fp8_recipe": "delayed", "global_batch": 64,
                                           "micro_batch": 1},
                                 strategy={"tp": 2, "sequence_parallel": True, "etp": 1,
                                           "moe_shared_expert_overlap": True})
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    sh = transformer.shape(layers=3, hidden=64, heads=4, vocab=100, ffn_hidden=128, gated_mlp=True, moe_experts=8,
                           moe_top_k=2, moe_ffn_hidden=32, moe_first_dense=1, moe_shared_experts=1,
                           tied_embeddings=False)
    job = replace(job, shape=sh)
    g = grid_from_strategy(st, tr, 8, job)
    c = {"tp": np.ones(1), "tp_rs": np.full(1, 0.75), "tp_ag": np.full(1, 0.5)}
    adj, ext, block = mpc._moe_tp_collectives(job, g, c)
    assert v(adj) == -1.0  # the shared pair leaves the layers' count
    assert v(ext) == pytest.approx(1.25, rel=1e-12) and v(block) == pytest.approx(1.25, rel=1e-12)
    off = replace(g, moe_shared_expert_overlap=np.zeros_like(g.moe_shared_expert_overlap))
    adj, ext, block = mpc._moe_tp_collectives(job, off, c)
    assert v(adj) == 0.0 and v(ext) == 0.0 and v(block) == pytest.approx(1.0, rel=1e-12)  # the TE linears' pair
