"""Framework features the published runs use: partial full recompute, activation CPU offload,
TP communication overlap (userbuffers) and the overlapped parameter all-gather of the distributed
optimizer. Each against a value computed by hand from the formula's source, not from the code."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.cost import compute, memory, transformer
from scalemodel.engine import planner
from scalemodel.engine.dp_comm import _expose_param_gather
from scalemodel.engine.job import build_job, grid_from_arrays, grid_from_strategy
from scalemodel.engine.model_parallel_comm import _tp_comm_overlap
from scalemodel.engine.pipeline_ranks import microbatches
from scalemodel.engine.stage_memory import memory_parts
from scalemodel.engine.step import Infeasible, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload
from scalemodel.specs.frameworks import read_strategy_file


def val(a) -> float:  # type: ignore[no-untyped-def]
    return float(np.asarray(a).reshape(-1)[0])


@pytest.fixture(scope="module")
def h100_job():  # type: ignore[no-untyped-def]
    return build_job(load_cluster("dgx-h100"), load_workload("gpt-1.7b"), TrainingSpec(global_batch=64, seq_len=2048))


def run(job, gpus=8, mb=1, **strategy):  # type: ignore[no-untyped-def]
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, TrainingSpec(global_batch=64, micro_batch=mb, seq_len=2048), gpus, job)
    return g, evaluate(job, g)


# ------------------------------------------------------------------ partial recompute


def test_partial_recompute_adds_the_recomputed_layers_forward_only(h100_job) -> None:  # type: ignore[no-untyped-def]
    """Block method, N of L layers: backward grows by N one-layer forwards (Megatron transformer_block.py)."""
    sh = h100_job.shape
    L = int(sh.layers)
    kw = dict(micro_batch=1.0, seq_len=2048, peak_flops=h100_job.peak_flops, memory_bandwidth=h100_job.memory_bandwidth,
              gemm_max=h100_job.gemm_max, gemm_half_dim=h100_job.gemm_half_dim,
              memory_efficiency=h100_job.memory_efficiency, flash_attention=True,
              attention_fwd=h100_job.attention_fwd, attention_bwd=h100_job.attention_bwd)  # the job's kernel (cudnn)
    layer_fwd = val(compute.layer_compute_time(sh, **kw).forward)  # one layer's forward, by the roofline
    _, none = run(h100_job, recompute="none")
    for n in (0, 5, L):
        _, part = run(h100_job, recompute="full", recompute_layers=n)
        m = val(none.microbatches)
        extra = (val(part.breakdown["compute"]) - val(none.breakdown["compute"])) / m
        assert extra == pytest.approx(n * layer_fwd, rel=1e-9)
    _, full = run(h100_job, recompute="full")
    _, all_n = run(h100_job, recompute="full", recompute_layers=L)
    assert val(full.step_time) == pytest.approx(val(all_n.step_time), rel=1e-12)


def test_partial_recompute_memory_is_korthikanti_rows_by_hand() -> None:
    """GPT (f = 4h, MHA), no flash, no SP, t = 1: a_none = sbh(34 + 5as/h), a_full = 2sbh (Korthikanti
    Table 2, bytes for 16-bit); r of n layers recomputed keep r a_full + (n - r) a_none + one working layer; the
    only stage (p = 1) also keeps the fp32 logits 4sbV and the final norm's and output layer's inputs 4sbh (§4.3)."""
    sh = transformer.shape(layers=8, hidden=256, heads=4, vocab=1000)
    s, b, h, a = 512, 2, 256, 4
    a_none = s * b * h * (34 + 5 * a * s / h)
    a_full = 2 * s * b * h
    for r in (0, 3, 8):
        got = val(memory.activation_bytes(sh, micro_batch=b, seq_len=s, recompute="full", recomputed_layers=r))
        working = a_none if r > 0 else 0.0
        emb, logits, head_in = s * b * h, 4 * s * b * 1000, 4 * s * b * h
        assert got == pytest.approx(r * a_full + (8 - r) * a_none + working + emb + logits + head_in, rel=1e-12)


def test_uniform_recompute_memory_by_hand(h100_job) -> None:  # type: ignore[no-untyped-def]
    """Uniform, chunks of N = 3 over 8 layers: ceil(8/3) = 3 checkpointed inputs (2sbh) + one chunk of 3 layers
    re-materialised (sbh(34 + 5as/h) each), the embedding mask sbh, logits 4sbV and head inputs 4sbh; time as full
    recompute."""
    sh = transformer.shape(layers=8, hidden=256, heads=4, vocab=1000)
    s, b, h, a = 512, 2, 256, 4
    a_none = s * b * h * (34 + 5 * a * s / h)
    got = val(memory.activation_bytes(sh, micro_batch=b, seq_len=s, recompute="full", recompute_chunk=3))
    assert got == pytest.approx(3 * 2 * s * b * h + 3 * a_none + s * b * h + 4 * s * b * 1000 + 4 * s * b * h,
                                rel=1e-12)
    _, full = run(h100_job, recompute="full")
    _, uni = run(h100_job, recompute="full", recompute_layers=4, recompute_method="uniform")
    assert val(uni.step_time) == pytest.approx(val(full.step_time), rel=1e-12)
    assert val(uni.memory["activations"]) != val(full.memory["activations"])


def test_recompute_layers_needs_full_recompute() -> None:
    with pytest.raises(ValueError, match="recompute: full"):
        StrategySpec(recompute="selective", recompute_layers=2)


def test_megatron_block_recompute_is_read(tmp_path: Path) -> None:
    f = tmp_path / "run.sh"
    f.write_text("--recompute-granularity full --recompute-method block --recompute-num-layers 5 "
                 "--tp-comm-overlap --overlap-param-gather --sequence-parallel\n")
    sf = read_strategy_file(f)
    assert sf.strategy["recompute"] == "full" and sf.strategy["recompute_layers"] == 5
    assert sf.strategy["tp_comm_overlap"] is True and sf.strategy["overlap_param_gather"] is True
    f.write_text("--recompute-granularity full --recompute-method uniform --recompute-num-layers 4\n")
    sf = read_strategy_file(f)
    assert (sf.strategy["recompute_layers"], sf.strategy["recompute_method"]) == (4, "uniform")
    assert "tp_async_allreduce" not in sf.strategy  # Megatron's default since 2021-09: asynchronous
    f.write_text("--tensor-model-parallel-size 8 --no-async-tensor-model-parallel-allreduce\n")
    assert read_strategy_file(f).strategy["tp_async_allreduce"] is False
    # with --sequence-parallel Megatron's reduce-scatters run async under the wgrad GEMMs whatever the flag says
    f.write_text("--tensor-model-parallel-size 8 --sequence-parallel --no-async-tensor-model-parallel-allreduce\n")
    sf = read_strategy_file(f)
    assert "tp_async_allreduce" not in sf.strategy and sf.strategy["sequence_parallel"] is True
    assert any(u.startswith("--no-async-tensor-model-parallel-allreduce with --sequence-parallel") for u in sf.unused)
    for given in ("--no-async-tensor-model-parallel-allreduce=false",
                  "--no-async-tensor-model-parallel-allreduce true"):
        f.write_text(f"--tensor-model-parallel-size 8 {given}\n")  # a switch: argparse refuses a value
        with pytest.raises(InputError, match="a switch takes no value"):
            read_strategy_file(f)


# ------------------------------------------------------------------ TP comm overlap


def test_tp_overlap_exposes_the_excess_or_the_last_ring_step() -> None:
    """exposed = max(C - W, floor) per phase, floor C/8 forward (last of 4 pipeline RS chunks), 0 backward."""
    ov = _tp_comm_overlap(10.0, 2.0, 2.0, 4.0, 8.0, 8.0)
    # forward: max(10 - 4, 10/8) = 6; recompute: max(2 - 8, 2/8) = 0.25; backward: max(2 - 8, 0) = 0
    assert val(ov["exposed"]) == pytest.approx(6.25)
    assert val(ov["hidden_fwd"]) == pytest.approx(4.0)  # = W: never more than the GEMMs beside it
    assert val(ov["hidden_bwd"]) == pytest.approx(1.75 + 2.0)


def test_tp_overlap_chunking_matches_the_roofline_of_split_gemms(h100_job) -> None:  # type: ignore[no-untyped-def]
    """The closed form (M + n d0)/(M + d0) of a GEMM split into n chunks of M/n rows, checked against the
    roofline itself (compute-bound shapes)."""
    kw = dict(peak_flops=h100_job.peak_flops, memory_bandwidth=h100_job.memory_bandwidth,
              gemm_max=h100_job.gemm_max, gemm_half_dim=h100_job.gemm_half_dim)
    M, N, K, n = 8192.0, 8192.0, 8192.0, 8
    whole = val(compute.gemm_time(M, N, K, **kw))
    chunks = val(compute.gemm_time(M / n, N, K, n, **kw))
    d0 = h100_job.gemm_half_dim
    assert chunks - whole == pytest.approx(whole * (n - 1) * d0 / (M + d0), rel=1e-9)


def test_tp_overlap_hides_tp_traffic_and_needs_sequence_parallelism(h100_job) -> None:  # type: ignore[no-untyped-def]
    _, base = run(h100_job, tp=8, sequence_parallel=True)
    _, ub = run(h100_job, tp=8, sequence_parallel=True, tp_comm_overlap=True)
    assert val(ub.breakdown["tp_comm"]) < val(base.breakdown["tp_comm"])
    assert val(ub.breakdown["contention"]) > val(base.breakdown["contention"])  # chunked GEMMs, shared SMs
    # Megatron refuses --tp-comm-overlap without sequence parallelism: the switch changes nothing there
    _, no_sp = run(h100_job, tp=8)
    _, no_sp_ub = run(h100_job, tp=8, tp_comm_overlap=True)
    assert val(no_sp_ub.step_time) == val(no_sp.step_time)


# ------------------------------------------------------------------ overlapped parameter gather


def test_param_gather_under_the_first_forward_by_hand() -> None:
    g = grid_from_arrays(gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=8, zero=1, overlap_param_gather=True)
    comp = {"backward_free": np.asarray(3.0), "forward_free": np.asarray(4.0)}
    # G = 10 with its all-gather AG = 5 (ZeRO-1, gradients and parameters of one dtype: half of RS + AG):
    # RS max(5 - 3, 0.5) = 2 under the backward, AG max(5 - 4, 0.5) = 1 under the next forward
    ag = np.asarray(5.0)
    assert val(_expose_param_gather(g, comp, np.asarray(10.0), np.asarray(0.1), ag)) == pytest.approx(3.0)
    g0 = replace(g, overlap_param_gather=np.asarray(False))
    assert val(_expose_param_gather(g0, comp, np.asarray(10.0), np.asarray(0.1), ag)) == pytest.approx(7.0)  # max(7, 1)
    g3 = replace(g, zero=np.asarray(4))  # FSDP: its own per-layer gathers (no ZeRO-1/2 AG); the switch does not apply
    assert val(_expose_param_gather(g3, comp, np.asarray(10.0), np.asarray(0.1), np.asarray(0.0))) == pytest.approx(7.0)
    # no guessed all-gather: the caller passes _dp_comm's param_gather (a half-of-grads default priced a ZeRO-1 run
    # with fp32 gradients as if RS and AG moved the same bytes)
    with pytest.raises(TypeError):
        _expose_param_gather(g, comp, np.asarray(10.0), np.asarray(0.1))  # type: ignore[call-arg]


# ------------------------------------------------------------------ activation offload


def test_offload_time_and_memory_by_hand(h100_job) -> None:  # type: ignore[no-untyped-def]
    """k offloaded layers: k (max(0, c - f) + max(0, c - 2f)) per micro-batch, c = A / 63 GB/s (PCIe Gen5
    x16 per direction); the GPU keeps k layers' activations fewer."""
    sh = h100_job.shape
    k = 6
    _, base = run(h100_job, mb=8, dp=8)
    g, off = run(h100_job, mb=8, dp=8, offload_layers=k)
    assert bool(off.feasible[0])
    s, b, h, a = 2048, 8, float(sh.hidden), float(sh.heads)
    a_layer = s * b * h * 34 + 4 * a * s * b  # Korthikanti none row with flash (scores: 4 a s b, the LSE)
    assert val(base.memory["activations"]) - val(off.memory["activations"]) == pytest.approx(k * a_layer, rel=1e-9)
    c = a_layer / 63e9
    kw = dict(micro_batch=8.0, seq_len=2048, peak_flops=h100_job.peak_flops, memory_bandwidth=h100_job.memory_bandwidth,
              gemm_max=h100_job.gemm_max, gemm_half_dim=h100_job.gemm_half_dim,
              memory_efficiency=h100_job.memory_efficiency, flash_attention=True,
              attention_fwd=h100_job.attention_fwd, attention_bwd=h100_job.attention_bwd)  # the job's kernel (cudnn)
    f = val(compute.layer_compute_time(sh, **kw).forward)
    per_mb = k * (max(c - f, 0.0) + max(c - 2 * f, 0.0))
    m = val(microbatches(g))
    assert val(off.breakdown["offload"]) == pytest.approx(m * per_mb, rel=1e-9)
    slow = replace(h100_job, host_bandwidth=1e9)  # a slow link: copies exposed beyond the compute
    assert val(evaluate(slow, g).breakdown["offload"]) > val(off.breakdown["offload"])


def test_offload_rules_follow_megatron(h100_job) -> None:  # type: ignore[no-untyped-def]
    for bad in (dict(pp=2, offload_layers=2), dict(recompute="full", offload_layers=2),
                dict(offload_layers=int(h100_job.shape.layers))):
        _, res = run(h100_job, **bad)
        assert not bool(res.feasible[0]) and int(res.reason[0]) == int(Infeasible.OFFLOAD_INVALID)
    no_link = replace(h100_job, host_bandwidth=0.0)
    with pytest.raises(InputError, match="host_bandwidth"):
        grid_from_strategy(StrategySpec(offload_layers=2), TrainingSpec(global_batch=64), 8, no_link)


def test_new_fields_pin_in_plan() -> None:
    st = StrategySpec(recompute="full", recompute_layers=4, offload_layers=0, tp_comm_overlap=True,
                      overlap_param_gather=True)
    _cons, fixed, _sync = planner.pins(st, ["recompute_layers", "tp_comm_overlap", "overlap_param_gather",
                                            "offload_layers", "recompute_method"])
    assert fixed == {"recompute_layers": 4, "tp_comm_overlap": True, "overlap_param_gather": True,
                     "offload_layers": 0, "recompute_uniform": False}


def test_memory_parts_pass_the_new_fields(h100_job) -> None:  # type: ignore[no-untyped-def]
    g = grid_from_arrays(gpus=8, dp=8, tp=1, pp=1, micro_batch=1, global_batch=64, recompute=2, recompute_layers=0)
    g_none = replace(g, recompute=np.asarray(0))
    m = microbatches(g)
    assert val(memory_parts(h100_job, g, m)["activations"]) == pytest.approx(
        val(memory_parts(h100_job, g_none, m)["activations"]))  # 0 layers recomputed = no recompute


def test_recompute_method_is_a_vocabulary_choice() -> None:
    """recompute_method parses through choices.RecomputeMethod (case-insensitive) and a wrong value is one
    clear error naming the field and the allowed values."""
    from scalemodel.choices import RecomputeMethod

    # with recompute full: uniform with selective or none is refused since round 17 (test_hostile_inputs_round17)
    assert StrategySpec(recompute="full", recompute_method="Uniform").recompute_method == "uniform"
    assert RecomputeMethod.parse("block") == RecomputeMethod.BLOCK
    with pytest.raises(Exception, match="recompute method 'sideways'.*block or uniform"):
        StrategySpec(recompute_method="sideways")
