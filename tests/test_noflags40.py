"""noflags40: three Megatron-LM launch switches the model now prices (docs/model.md#tp-comm-parts, #eager-activation,
#fp8-wgrad), each checked against a value worked by hand.

(1) tp_comm_overlap's parts. Megatron-Core hands Transformer Engine ``ub_overlap_ag`` / ``ub_overlap_rs`` /
``ub_bulk_dgrad`` / ``ub_bulk_wgrad`` from ModelParallelConfig.tp_comm_overlap_ag / _rs / tp_comm_bulk_dgrad / _wgrad
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/extensions/transformer_engine.py L1192-1200, L1458-1466); a part off runs
its collective with NCCL (NVIDIA/TransformerEngine@c55e425ac5 pytorch/module/layernorm_linear.py L216-227: the forward
gather blocking; L423-428: the row-parallel forward reduce-scatter blocking; L596-612: the backward re-gather async
beside the data-gradient GEMM; L655-668: the input-gradient reduce-scatter async beside the weight-gradient GEMM;
linear.py's row-parallel output-gradient gather blocking). On tests/test_tp33.py's layer (h 1024, tp 4, 4 layers,
a = 7/12, r = 5/12, N = 8 block collectives a pass, G the forward GEMM seconds a layer), with userbuffers:

    exposed = max(N AG - 3/4 4aG, 0) + max(N RS - 3/4 4rG, N RS / 4)         forward: ring gathers, pipeline RS
            + max(N AG - 3/4 4rG, 0) + max(N RS - 4aG, 0) + max(N AG - 4aG, 0)   backward: ring, bulk RS, bulk AG

and a part off: its window 0 where NCCL blocks (overlap_ag: the two ring terms become N AG; overlap_rs: the pipeline
term N RS), the same window where NCCL runs async (the bulk parts), its hidden seconds then at NCCL's share, not on
userbuffers' 16 SMs. All four off is the run without userbuffers, to the bit.

(2) eager_activation: Megatron-Core's MLP with bias_activation_fusion False (mlp.py L320-340 at d98e8a64dd): gated
forward silu 2e F + the glu_linear_offset add 2e F + the multiply 3e F (fused 3e F), backward the multiply's two
products 3e F each + silu_backward 3e F + chunk's cat 4e F (fused 5e F).

(3) fp8_wgrad false: a delayed-scaling run's weight-gradient GEMMs at the 16-bit curve (TE 1.x DelayedScaling
override_linear_precision, Megatron-Core fp8_utils.py L772-776); the backward grows by the layer's forward weight
GEMMs at BF16 less those at FP8.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalemodel.cost import compute
from scalemodel.engine import layer_compute
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.planner import PIN_FIXED
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import StrategySpec, TrainingSpec
from tests.test_sp32 import v
from tests.test_tp33 import LAYERS, A, E, N, R, _setup, _t, _tp

PARTS = ("tp_comm_overlap_ag", "tp_comm_overlap_rs", "tp_comm_bulk_dgrad", "tp_comm_bulk_wgrad")


# ---------------------------------------------------------------------------------------------------------------
# (1) tp_comm_overlap's parts

def _mp(job, g, c, gemm: float) -> dict[str, float]:  # type: ignore[no-untyped-def]
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * LAYERS, logits_on_stage=False)
    comp = dict(comp, wgrad=np.full(1, 10.0), gemm_per_layer=np.full(1, gemm), embedding_uses=np.zeros(1),
                head_uses=np.zeros(1))
    out = mpc._model_parallel_comm(job, g, comp, c)
    return {k: v(out[k]) for k in ("tp", "hidden_fwd", "hidden_bwd", "hidden_ub", "ub_sms", "chunking")}


@pytest.mark.parametrize("off", [(), ("tp_comm_overlap_ag",), ("tp_comm_overlap_rs",), ("tp_comm_bulk_dgrad",),
                                 ("tp_comm_bulk_wgrad",), ("tp_comm_overlap_ag", "tp_comm_bulk_wgrad")])
@pytest.mark.parametrize(("precision", "recipe", "q"), [("bf16", None, 2.0), ("fp8", "delayed", 1.0)])
def test_each_part_off_by_hand(off: tuple[str, ...], precision: str, recipe: str | None, q: float) -> None:
    job, g, c = _setup(precision, recipe, tp_comm_overlap=True, **{p: False for p in off})
    rs, ag = _t("reducescatter", 2 * E, job), _t("allgather", q * E, job)
    gemm = 0.5 * N * rs / (LAYERS * A)  # the reduce-scatters twice the all-gather side's GEMMs: every regime reached
    wa, wr = LAYERS * A * gemm, LAYERS * R * gemm
    ag_on, rs_on = "tp_comm_overlap_ag" not in off, "tp_comm_overlap_rs" not in off
    fwd_ag_w, fwd_rs_w, ring_w = 0.75 * wa * ag_on, 0.75 * wr * rs_on, 0.75 * wr * ag_on
    fwd = max(N * ag - fwd_ag_w, 0.0) + max(N * rs - fwd_rs_w, N * rs / 4)
    parts = ((N * ag, ring_w), (N * rs, wa), (N * ag, wa))  # ring gathers, bulk reduce-scatters, bulk re-gathers
    hidden = [min(x, w) for x, w in parts]
    got = _tp(job, g, c, gemm)
    assert got["tp"] == pytest.approx(fwd + sum(max(x - w, 0.0) for x, w in parts), rel=1e-12)
    assert got["hidden_bwd"] == pytest.approx(sum(hidden), rel=1e-12)
    fwd_ring = min(N * ag, fwd_ag_w)
    assert got["hidden_fwd"] == pytest.approx(N * (rs + ag) - fwd, rel=1e-12)
    # userbuffers' SMs: the ring gathers at 1 SM, the pipeline's RS-side GEMMs on S - 16 SMs (only with its
    # reduce-scatters overlapped), the bulk overlaps at 16 SMs while they run, a bulk part off on NCCL's channels
    bulk = hidden[1] * ("tp_comm_bulk_wgrad" not in off) + hidden[2] * ("tp_comm_bulk_dgrad" not in off)
    s = float(job.compute_units)
    want = (fwd_ring / s + rs_on * wr * 16 / (s - 16) + hidden[0] / s + bulk * 16 / s
            if job.collective_share > 0 else 0.0)
    assert got["ub_sms"] == pytest.approx(want, rel=1e-12)
    mp = _mp(job, g, c, gemm)
    assert mp["hidden_ub"] == pytest.approx(N * (rs + ag) - fwd + hidden[0] + bulk, rel=1e-12)


def test_all_parts_off_is_the_run_without_userbuffers() -> None:
    """Every part off, each collective runs as NCCL runs it without --tp-comm-overlap: the same TP seconds, hidden
    seconds, and nothing on userbuffers' SMs or split GEMMs (bf16 and per-tensor FP8 gathers)."""
    for precision, recipe in (("bf16", None), ("fp8", "delayed")):
        job, g, c = _setup(precision, recipe, tp_comm_overlap=True, **{p: False for p in PARTS})
        jn, gn, cn = _setup(precision, recipe, tp_comm_overlap=False)
        rs = _t("reducescatter", 2 * E, job)
        for gemm in (0.1 * rs, 0.5 * N * rs / (LAYERS * A), 10 * rs):
            got, want = _mp(job, g, c, gemm), _mp(jn, gn, cn, gemm)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-18)
            assert got["hidden_ub"] == 0.0 and got["ub_sms"] == 0.0 and got["chunking"] == 0.0


def test_parts_move_traffic_between_exposed_and_hidden_only() -> None:
    """Every one of the 16 part combinations, GEMMs from far shorter to far longer than the traffic: the layers' TP
    traffic is conserved (exposed + hidden the same seconds), the hidden seconds on userbuffers' SMs are a part of the
    hidden ones, and switching a part off never hides more."""
    rs = None
    for gemm_scale in (0.05, 1.0, 20.0):
        base = None
        for bits in range(16):
            off = [p for i, p in enumerate(PARTS) if bits >> i & 1]
            job, g, c = _setup(tp_comm_overlap=True, **{p: False for p in off})
            rs = rs or _t("reducescatter", 2 * E, job)
            got = _mp(job, g, c, gemm_scale * rs)
            total = got["tp"] + got["hidden_fwd"] + got["hidden_bwd"]
            base = base or got
            assert total == pytest.approx(base["tp"] + base["hidden_fwd"] + base["hidden_bwd"], rel=1e-12)
            assert 0.0 <= got["hidden_ub"] <= got["hidden_fwd"] + got["hidden_bwd"] + 1e-18
            assert got["hidden_fwd"] + got["hidden_bwd"] <= base["hidden_fwd"] + base["hidden_bwd"] + 1e-18


@pytest.mark.parametrize("off", [(), ("tp_comm_overlap_ag",), ("tp_comm_overlap_rs",), ("tp_comm_bulk_dgrad",)])
def test_chunking_only_where_the_gemm_is_split(off: tuple[str, ...]) -> None:
    """The split GEMMs (docs/model.md#tp-comm-overlap): dt = G d0 / (T + d0) (L (a (t - 1) + r (4 - 1)) + L r (t - 1)),
    the ring exchanges' terms (a (t - 1) forward, r (t - 1) data-gradient) only with overlap_ag, the pipeline's
    r (4 - 1) only with overlap_rs; the bulk overlaps split nothing."""
    job, g, c = _setup(tp_comm_overlap=True, **{p: False for p in off})
    gemm = 1e-3
    T = 2048.0  # micro-batch 1 x s 2048, cp 1
    d0 = job.gemm_half_dim
    ag_on, rs_on = "tp_comm_overlap_ag" not in off, "tp_comm_overlap_rs" not in off
    per_layer = ag_on * A * 3 + rs_on * R * 3 + ag_on * R * 3
    assert _mp(job, g, c, gemm)["chunking"] == pytest.approx(gemm * d0 / (T + d0) * LAYERS * per_layer, rel=1e-12)


@pytest.mark.parametrize("way", ["no", "disable"])
def test_reader_sets_the_parts_with_tp_comm_overlap(tmp_path, way: str) -> None:  # type: ignore[no-untyped-def]
    base = "torchrun pretrain_gpt.py --tensor-model-parallel-size 4 --sequence-parallel --micro-batch-size 1 "
    f = tmp_path / "run.sh"
    names = " ".join(f"--{way}-tp-comm-{p.removeprefix('tp_comm_').replace('_', '-')}" for p in PARTS)
    f.write_text(base + "--tp-comm-overlap " + names + "\n")
    sf = read_strategy_file(str(f))
    assert all(sf.strategy[p] is False for p in PARTS), sf.strategy
    assert sf.fields["tp_comm_overlap_ag"] == f"--{way}-tp-comm-overlap-ag"
    # without --tp-comm-overlap Megatron-Core reads none of them: nothing set, nothing named
    f.write_text(base + names + "\n")
    sf = read_strategy_file(str(f))
    assert not any(p in sf.strategy for p in PARTS) and not any("tp-comm" in u for u in sf.unused), sf.unused


def test_split_parts_change_nothing_and_are_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """tp_comm_split_ag / _rs reach Transformer Engine only below 1.5 or where the config lacks tp_comm_overlap_ag
    (extensions/transformer_engine.py L1192-1200): named, nothing set."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap "
                 "--no-tp-comm-split-ag --disable-tp-comm-split-rs\n")
    sf = read_strategy_file(str(f))
    assert not any(p in sf.strategy for p in PARTS)
    assert sum("changes nothing with Transformer Engine >= 1.5" in u for u in sf.unused) == 2, sf.unused


def test_a_part_off_without_userbuffers_warns_and_moves_nothing(cli) -> None:  # type: ignore[no-untyped-def]
    base = ("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--tp", "4", "--json")
    r = cli(*base, "--set", "strategy.tp_comm_overlap_rs=false")
    assert r.code == 0 and "tp_comm_overlap_rs = false is not priced" in r.err, r.err
    assert json.loads(r.out)["step_time_s"] == json.loads(cli(*base).out)["step_time_s"]


# ---------------------------------------------------------------------------------------------------------------
# (2) eager_activation

def _wl(**kw) -> TransformerWorkload:  # type: ignore[no-untyped-def]
    base = dict(name="m", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32_000, seq_len=2048,
                tied_embeddings=False)
    return TransformerWorkload(**{**base, **kw})


@pytest.mark.parametrize(("kw", "fwd_per_f", "bwd_per_f"), [
    (dict(gated_mlp=True, biases=False), 4.0, 8.0),     # silu 2 + offset add 2 + mul 3 - fused 3; 13 - 5
    (dict(gated_mlp=True, biases=True), 8.0, 8.0),      # + the bias add over 2F: read 2F, write 2F
    (dict(gated_mlp=False, biases=True), 2.0, 0.0),     # bias add 2 + gelu 2 - fused 2; backward the same kernels
    (dict(gated_mlp=False, biases=False), 0.0, 0.0),    # ATen gelu either way (validate_args)
    (dict(gated_mlp=False, biases=False, squared_relu=True), 0.0, 0.0),  # never fused
])
def test_eager_activation_bytes_by_hand(kw, fwd_per_f: float, bwd_per_f: float) -> None:  # type: ignore[no-untyped-def]
    job, _, _ = _setup(wl=_wl(**kw))
    f, b = compute.eager_activation_bytes(job.shape, micro_batch=2, seq_len=2048, tp=4, cp=1, elem_bytes=2.0)
    F, T, e = 4096 / 4, 2 * 2048, 2.0
    assert v(f) == pytest.approx(fwd_per_f * e * F * T, rel=1e-12)
    assert v(b) == pytest.approx(bwd_per_f * e * F * T, rel=1e-12)


@pytest.mark.parametrize(("recompute", "again"), [("none", 0.0), ("full", 1.0), ("selective", 0.0)])
def test_eager_activation_in_the_layer(recompute: str, again: float) -> None:
    """A gated dense model, tp 4: the layer's forward grows by 4e F T / (HBM bandwidth x efficiency), its backward by
    8e F T / (...), full recompute repeats the forward's; selective recompute (core_attn) does not; with
    recompute_modules mlp it does (next test)."""
    wl = _wl(gated_mlp=True, biases=False)
    job, g0, _ = _setup(wl=wl, recompute=recompute)
    _, g1, _ = _setup(wl=wl, recompute=recompute, eager_activation=True)
    layers = np.ones(1) * LAYERS
    c0 = layer_compute._compute_per_microbatch(job, g0, layers, logits_on_stage=False)
    c1 = layer_compute._compute_per_microbatch(job, g1, layers, logits_on_stage=False)
    bw = job.memory_bandwidth * job.memory_efficiency
    F, T = 4096 / 4, 2048.0
    f_t, b_t = 4 * 2.0 * F * T / bw, 8 * 2.0 * F * T / bw
    assert v(c1["forward"] - c0["forward"]) == pytest.approx(LAYERS * f_t, rel=1e-9)
    assert v(c1["backward"] - c0["backward"]) == pytest.approx(LAYERS * (b_t + again * f_t), rel=1e-9)


def test_eager_activation_selective_mlp_recompute_repeats_it() -> None:
    wl = _wl(gated_mlp=True, biases=False)
    kw = dict(wl=wl, recompute="selective", recompute_modules="mlp")
    job, g0, _ = _setup(**kw)
    _, g1, _ = _setup(**kw, eager_activation=True)
    layers = np.ones(1) * LAYERS
    c0 = layer_compute._compute_per_microbatch(job, g0, layers, logits_on_stage=False)
    c1 = layer_compute._compute_per_microbatch(job, g1, layers, logits_on_stage=False)
    f_t = 4 * 2.0 * (4096 / 4) * 2048.0 / (job.memory_bandwidth * job.memory_efficiency)
    b_t = 2 * f_t
    assert v(c1["backward"] - c0["backward"]) == pytest.approx(LAYERS * (b_t + f_t), rel=1e-9)


@pytest.mark.parametrize(("flags", "on"), [
    ("--swiglu --no-bias-swiglu-fusion", True),
    ("--no-bias-gelu-fusion", True),
    ("--no-bias-swiglu-fusion", False),  # without --swiglu Megatron-LM reads bias_gelu_fusion
    ("--swiglu --no-bias-gelu-fusion", False),
    ("--disable-bias-linear --no-bias-gelu-fusion", False),  # validate_args turns the fusion off itself
])
def test_reader_sets_eager_activation(tmp_path, flags: str, on: bool) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --tensor-model-parallel-size 2 {flags}\n")
    sf = read_strategy_file(str(f))
    assert sf.strategy.get("eager_activation", False) is on, sf.strategy
    assert not any("fusion (not read" in u for u in sf.unused), sf.unused


def test_eager_activation_warns_where_nothing_is_fused(cli) -> None:  # type: ignore[no-untyped-def]
    base = ("predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--json")
    r = cli(*base, "--set", "strategy.eager_activation=true")
    assert r.code == 0 and "eager_activation is not priced: the model has no dense MLP layers" in r.err, r.err
    assert json.loads(r.out)["step_time_s"] == json.loads(cli(*base).out)["step_time_s"]


def test_eager_activation_names_the_unpriced_experts(cli) -> None:  # type: ignore[no-untyped-def]
    """DeepSeek-V3's 3 dense layers are priced, its routed experts' eager branch is not, and says so."""
    r = cli("predict", "-c", "dgx-h100", "-m", "deepseek-v3", "-n", "256", "--ep", "64", "--pp", "4", "--json",
            "--set", "strategy.eager_activation=true")
    assert r.code == 0 and "eager_activation is priced in the dense MLP layers only" in r.err, r.err


# ---------------------------------------------------------------------------------------------------------------
# (3) fp8_wgrad

def _fp8_job(recipe: str, **strategy):  # type: ignore[no-untyped-def]
    wl = _wl(gated_mlp=True, biases=False)
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="fp8", seq_len=2048, fp8_recipe=recipe)
    job = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    st = StrategySpec(tp=2, **strategy)
    return job, grid_from_strategy(st, tr, st.tp, job)


def test_16bit_wgrad_backward_by_hand() -> None:
    """Delayed scaling, fp8_wgrad false: backward += L (G_bf16 - G_fp8), the layer's forward weight GEMMs on H100's
    BF16 and FP8 curves (each: 2 T P_w / t FLOPs at peak x the curve's efficiency, compute.gemm_time); the forward
    and the recompute unchanged; "wgrad" (the windows' weight-gradient time) is L G_bf16."""
    job, g0 = _fp8_job("delayed")
    _, g1 = _fp8_job("delayed", fp8_wgrad=False)
    layers = np.ones(1) * LAYERS
    c0 = layer_compute._compute_per_microbatch(job, g0, layers, logits_on_stage=False)
    c1 = layer_compute._compute_per_microbatch(job, g1, layers, logits_on_stage=False)
    # the BF16 forward weight GEMMs, priced by the same model's BF16 run of this layer
    wl = _wl(gated_mlp=True, biases=False)
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=2048)
    jb = build_job(load_cluster("dgx-h100"), wl, tr, straggler_cv=0.0)
    st = StrategySpec(tp=2)
    cb = layer_compute._compute_per_microbatch(jb, grid_from_strategy(st, tr, 2, jb), layers, logits_on_stage=False)
    g_fp8, g_bf16 = v(c0["gemm_per_layer"]), v(cb["gemm_per_layer"])
    assert g_bf16 > 1.5 * g_fp8  # H100: 989 against 1979 TFLOP/s dense
    assert v(c1["backward"] - c0["backward"]) == pytest.approx(LAYERS * (g_bf16 - g_fp8), rel=1e-9)
    assert v(c1["forward"]) == v(c0["forward"])
    assert v(c1["wgrad"]) == pytest.approx(LAYERS * g_bf16, rel=1e-12)
    assert v(c0["wgrad"]) == pytest.approx(LAYERS * g_fp8, rel=1e-12)


@pytest.mark.parametrize("recipe", ["tensorwise", "blockwise"])
def test_fp8_wgrad_only_under_delayed_scaling(recipe: str) -> None:
    """Megatron-Core passes fp8_wgrad to DelayedScaling only (fp8_utils.py L772-809): other recipes unchanged."""
    job, g0 = _fp8_job(recipe)
    _, g1 = _fp8_job(recipe, fp8_wgrad=False)
    layers = np.ones(1) * LAYERS
    c0 = layer_compute._compute_per_microbatch(job, g0, layers, logits_on_stage=False)
    c1 = layer_compute._compute_per_microbatch(job, g1, layers, logits_on_stage=False)
    assert v(c1["backward"]) == v(c0["backward"])


def test_fp8_wgrad_warns_off_delayed_and_reader_names_it(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = ("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--json")
    r = cli(*base, "--set", "strategy.fp8_wgrad=false")
    assert r.code == 0 and "fp8_wgrad = false is not priced: the run is not fp8" in r.err, r.err
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --fp8-format hybrid --no-fp8-wgrad\n")
    sf = read_strategy_file(str(f))
    assert "fp8_wgrad" not in sf.strategy
    assert any(u.startswith("--no-fp8-wgrad (not read: Transformer Engine >= 2.0 ignores it") for u in sf.unused)


def test_fields_are_planner_fixed() -> None:
    assert {"eager_activation", "fp8_wgrad", *PARTS} <= set(PIN_FIXED)
