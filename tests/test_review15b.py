"""Review of the moegaps branch (shared-expert overlap, recomputed shared-expert / MoE TP collectives): each test
fails without its fix. Expected behaviour from Megatron-Core's source at the commit named in each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import StrategySpec, TrainingSpec


def _grid(model: TransformerWorkload, **strategy):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), model, tr)
    st = StrategySpec(**strategy)
    return job, grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)


def _moe(shared: int) -> TransformerWorkload:
    return TransformerWorkload(name="moe", layers=8, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                               gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                               moe={"experts": 64, "top_k": 4, "ffn_hidden": 1024, "shared_experts": shared})


# --- Megatron-Core refuses shared_experts recompute with the overlap only when the model has shared experts ---

def test_shared_experts_recompute_with_the_overlap_runs_without_shared_experts() -> None:
    """NVIDIA/Megatron-LM@d98e8a64dd transformer_config.py lines 1991-1998: the ValueError is raised under
    ``moe_shared_expert_intermediate_size is not None and moe_shared_expert_overlap``; a model without shared experts
    runs both (each does nothing there). With shared experts it is refused, as before."""
    kw = dict(ep=8, dp=8, moe_shared_expert_overlap=True, recompute="selective",
              recompute_modules="core_attn,shared_experts")
    _grid(_moe(0), **kw)  # no error
    with pytest.raises(InputError, match="shared_experts"):
        _grid(_moe(2), **kw)


# --- the Megatron args reader: --moe-shared-expert-overlap needs the alltoall or flex dispatcher ---

@pytest.mark.parametrize("dispatcher", ["", " --moe-token-dispatcher-type allgather"])
def test_args_reader_shared_expert_overlap_needs_alltoall_or_flex(tmp_path: Path, dispatcher: str) -> None:
    """Megatron-Core raises 'moe_shared_expert_overlap only works with alltoall or flex token dispatcher' for a model
    with shared experts (transformer_config.py@d98e8a64dd lines 1813-1826), and --moe-token-dispatcher-type defaults
    to allgather (arguments.py@0d7e02bd26 line 3133): a launch naming the shared experts' size is refused (InputError
    at the flag: exit 2), one without prices no overlap and names the flag as not used."""
    f = tmp_path / "moe.sh"
    base = "torchrun pretrain_gpt.py --expert-model-parallel-size 8 --moe-shared-expert-overlap" + dispatcher
    f.write_text(base + " --moe-shared-expert-intermediate-size 2048\n")
    with pytest.raises(InputError, match="alltoall or flex") as err:
        read_strategy_file(f)
    assert "--moe-shared-expert-overlap" in str(err.value)
    f.write_text(base + "\n")
    sf = read_strategy_file(f)
    assert "moe_shared_expert_overlap" not in sf.strategy
    assert any("--moe-shared-expert-overlap" in u and "alltoall or flex" in u for u in sf.unused)


@pytest.mark.parametrize("dispatcher", ["alltoall", "flex"])
def test_args_reader_keeps_the_overlap_beside_alltoall_and_flex(tmp_path: Path, dispatcher: str) -> None:
    f = tmp_path / "moe.sh"
    f.write_text("torchrun pretrain_gpt.py --expert-model-parallel-size 8 --moe-shared-expert-overlap "
                 f"--moe-token-dispatcher-type {dispatcher} --moe-shared-expert-intermediate-size 2048\n")
    assert read_strategy_file(f).strategy["moe_shared_expert_overlap"] is True


def test_cli_args_file_allgather_shared_expert_overlap_exits_2(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "moe.sh"
    f.write_text("torchrun pretrain_gpt.py --expert-model-parallel-size 8 --pipeline-model-parallel-size 8 "
                 "--moe-shared-expert-overlap --moe-shared-expert-intermediate-size 2048\n")
    r = cli("predict", "-c", "dgx-h100", "-m", "deepseek-v3", "-n", "256", "--strategy", str(f))
    assert r.code == 2 and "Traceback" not in r.err and "--moe-shared-expert-overlap" in r.err


# --- ep_dispatch_sms is priced under moe_shared_expert_overlap only where the overlap hides something ---

@pytest.mark.parametrize("model, ep, warned", [
    ("mixtral-8x7b", 8, True),  # no shared experts: the overlap hides nothing, so the dispatcher's SMs slow nothing
    ("deepseek-v3", 8, False),  # shared experts beside the all-to-alls: the hidden traffic slows them (contention)
])
def test_ep_dispatch_sms_warned_when_the_shared_expert_overlap_hides_nothing(cli, model: str, ep: int,  # type: ignore[no-untyped-def]
                                                                             warned: bool) -> None:
    args = ["predict", "-c", "dgx-h100", "-m", model, "-n", "256" if model == "deepseek-v3" else "64",
            "--set", f"strategy.ep={ep}", "--set", "strategy.moe_shared_expert_overlap=true",
            "--set", "strategy.ep_dispatch_sms=20"]
    if model == "deepseek-v3":
        args += ["--set", "strategy.pp=8"]
    r = cli(*args)
    assert r.code == 0, r.err
    assert ("strategy.ep_dispatch_sms = 20 is not priced" in r.err) == warned, r.err


# --- coverage: the engine's wiring of the shared-expert overlap, by hand end to end ---

def _gemm_by_hand(job, m: float, n: float, k: float) -> float:  # type: ignore[no-untyped-def]
    d0, eb = job.gemm_half_dim, job.elem_bytes
    eff = job.gemm_max * m / (m + d0) * n / (n + d0) * k / (k + d0)
    return max(2 * m * n * k / (job.peak_flops * eff), (m * k + k * n + m * n) * eb / (
        job.memory_bandwidth * job.memory_efficiency))


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_engine_hides_each_blocks_shared_expert_compute_under_slow_all_to_alls(recompute: str) -> None:
    """8 MoE layers of 2 shared experts of 1024 (one SwiGLU MLP of W = 2048 on T = 4096 tokens, h 4096), ep 16
    across two DGX-H100 nodes: each all-to-all outlasts every shared-expert piece, so each block hides all of them,
    fc1_f + fc2_f forward and fc2_b + fc1_b = 2 (fc1_f + fc2_f) backward, and full recompute its forward pair once
    more (docs/model.md#shared-expert-overlap). The step's EP time drops by micro-batches x 8 x that; the pieces
    from the roofline by hand."""
    tr = TrainingSpec(global_batch=32, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), _moe(2), tr)
    from scalemodel.engine.step import evaluate
    ep_comm = []
    for on in (False, True):
        st = StrategySpec(ep=16, dp=16, recompute=recompute, moe_shared_expert_overlap=on)
        ep_comm.append(float(evaluate(job, grid_from_strategy(st, tr, 16, job)).breakdown["ep_comm"][0]))
    T, h, W = 4096.0, 4096.0, 2048.0
    f1 = _gemm_by_hand(job, T, 2 * W, h) + 3 * job.elem_bytes * T * W / (job.memory_bandwidth * job.memory_efficiency)
    f2 = _gemm_by_hand(job, T, h, W)
    m = 32 // 16
    a2a = ep_comm[0] / (m * 8 * (6 if recompute == "full" else 4))  # one all-to-all
    assert a2a > 2 * f1  # the regime: every piece shorter than the all-to-all beside it
    per_block = 3 * (f1 + f2) + (f1 + f2 if recompute == "full" else 0.0)
    assert ep_comm[0] - ep_comm[1] == pytest.approx(m * 8 * per_block, rel=1e-9)
