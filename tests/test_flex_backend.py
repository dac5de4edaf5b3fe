"""The flex dispatcher's backend (StrategySpec.moe_flex_backend, docs/model.md#ep-hierarchical): DeepEP's bytes per
token copy and each backend's own SM count when ep_dispatch_sms is unset, checked by hand.

Sources: DeepEP's slot ``align_up(hidden + sizeof(SourceMeta) + 4 (idx + weights), 16)`` (deepseek-ai/DeepEP
@92fe2de csrc/kernels/internode.cu L42-46) with Megatron-Core's four calls per layer (fused_a2a.py @d98e8a64dd:
forward dispatch k indices + k weights, forward combine none, backward combine k weights, backward cached dispatch
none); HybridEP's ``value_or((num_of_nodes == 1) ? 24 : 8)`` (DeepEP hybrid-ep @94a9f8f csrc/hybrid_ep/config.cuh
L366-367); DeepEP's 20 (Megatron-LM @d98e8a64dd token_dispatcher.py L1287-1292)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost import ep_dispatch
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_job, flex_default_sms, grid_from_strategy
from scalemodel.engine.network import build_network
from scalemodel.engine.planner import ALLOW, PIN_AXES, configurations, pins
from scalemodel.engine.step import evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.constraints import normalize_constraints
from scalemodel.specs.training import StrategySpec, TrainingSpec

QWEN3_30B = TransformerWorkload(name="qwen3-30b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                                ffn_hidden=6144, gated_mlp=True, vocab=151936, seq_len=4096, tied_embeddings=False,
                                moe={"experts": 128, "top_k": 8, "ffn_hidden": 768})


@pytest.mark.parametrize("row,k,want", [
    # BF16 hidden 7168, top-8: slots 14336+8+64=14408 -> 14416; 14344 -> 14352; 14336+8+32=14376 -> 14384; 14352
    (7168 * 2, 8, (14416 + 14352 + 14384 + 14352) / 4),
    # hidden 2048: 4168 -> 4176; 4104 -> 4112; 4136 -> 4144; 4112
    (2048 * 2, 8, (4176 + 4112 + 4144 + 4112) / 4),
    # a row off the 16-byte grid, top-1: 4100+8+8=4116 -> 4128; 4108 -> 4112; 4112 -> 4112; 4112
    (4100, 1, (4128 + 4112 + 4112 + 4112) / 4),
])
def test_deepep_mean_slot_by_hand(row: int, k: int, want: float) -> None:
    assert float(ep_dispatch.deepep_mean_slot_bytes(row, k)) == pytest.approx(want, rel=1e-12)


def _ep(backend: str, ep: int = 16) -> float:
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096,
                      moe_rank_imbalance=1.0)  # the mean rank, as priced by hand (busiest: test_moe_routing_imbalance)
    job = build_job(cl, QWEN3_30B, tr)
    st = StrategySpec(tp=1, pp=1, ep=ep, dp=16, moe_flex_dispatcher=True, moe_flex_backend=backend)
    return float(evaluate(job, grid_from_strategy(st, tr, 16, job)).breakdown["ep_comm"][0])


def test_step_prices_each_backends_bytes() -> None:
    """ep 16 over two DGX-H100 nodes, 4096 tokens of hidden 2048 a rank, 128 experts, top-8: DeepEP moves each copy
    as its mean slot of 4136 B (above), HybridEP the 4096-B row plus, on two of the four calls, 4 B x 64 experts of
    the destination node. The step's ep_comm of the two backends stands in the ratio of those per-layer times."""
    pl = place(16, 1, build_network(load_cluster("dgx-h100")))
    T = 4096
    deepep = float(ep_dispatch.hierarchical_alltoall_time(T * 4136.0, 128, 8, pl))
    hybrid = 0.5 * float(ep_dispatch.hierarchical_alltoall_time(T * 4096.0, 128, 8, pl)
                         + ep_dispatch.hierarchical_alltoall_time(T * (4096.0 + 4.0 * 64), 128, 8, pl))
    # HybridEP's routing-map all-gather before each forward dispatch (docs/model.md#hybridep-preprocess): 16 ranks x
    # 4096 tokens x 128 one-byte flags, a quarter of it on each of the 4 calls
    hybrid += 0.25 * float(coll.group_time("allgather", np.asarray(16 * T * 128.0), pl))
    assert _ep("deepep") / _ep("hybridep") == pytest.approx(deepep / hybrid, rel=1e-9)
    # DeepEP's metadata (40 B a copy on average) is less than HybridEP's probabilities (128 B on average)
    assert _ep("deepep") < _ep("hybridep")


def test_default_sm_counts_by_backend_and_domain() -> None:
    assert flex_default_sms(0, False) == 20 and flex_default_sms(0, True) == 20
    assert flex_default_sms(1, False) == 24 and flex_default_sms(1, True) == 8
    np.testing.assert_array_equal(flex_default_sms(np.array([0, 1, 1]), np.array([True, False, True])), [20, 24, 8])


def _run(backend: str, sms: int | None, gpus: int, dp: int, ep: int, overlap: bool = True):
    tr = TrainingSpec(global_batch=16 * dp, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), QWEN3_30B, tr)
    st = StrategySpec(tp=8, dp=dp, ep=ep, etp=1, pp=2, schedule="interleaved:2", moe_a2a_overlap=overlap,
                      sequence_parallel=True,  # Megatron-Core needs SP for MoE at tp > 1 (test_moe_sp_required.py)
                      ep_dispatch_sms=sms, moe_flex_dispatcher=True, moe_flex_backend=backend)
    return evaluate(job, grid_from_strategy(st, tr, gpus, job))


@pytest.mark.parametrize("gpus,dp,ep,sms", [
    (16, 1, 8, 24),   # EP group: 8 ranks 1 GPU apart, one DGX-H100 node: HybridEP's num_of_nodes = 1 -> 24
    (32, 2, 16, 8),   # 16 ranks over two nodes: num_of_nodes = 2 -> 8
])
def test_hybridep_unset_count_is_its_own_default(gpus: int, dp: int, ep: int, sms: int) -> None:
    """The hidden EP time H (ep_comm exposed without the overlap minus with it) costs sms/132 x H of contention on
    the H100's 132 SMs, and the unset count prices exactly as the named one; DeepEP's unset count is 20."""
    off = _run("hybridep", None, gpus, dp, ep, overlap=False)
    on = _run("hybridep", None, gpus, dp, ep)
    h = float(off.breakdown["ep_comm"][0]) - float(on.breakdown["ep_comm"][0])
    assert h > 0
    grown = float(on.breakdown["contention"][0]) - float(off.breakdown["contention"][0])
    assert grown == pytest.approx(sms / 132 * h, rel=1e-9)
    assert float(on.step_time[0]) == float(_run("hybridep", sms, gpus, dp, ep).step_time[0])
    assert float(_run("deepep", None, gpus, dp, ep).step_time[0]) == float(_run("deepep", 20, gpus, dp, ep)
                                                                           .step_time[0])


def test_field_parses_echoes_and_refuses() -> None:
    assert StrategySpec(moe_flex_backend="HYBRID_EP").moe_flex_backend == "hybridep"
    assert StrategySpec().moe_flex_backend == "deepep"
    tr = TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), QWEN3_30B, tr)
    g = grid_from_strategy(StrategySpec(ep=16, dp=16, moe_flex_dispatcher=True, moe_flex_backend="hybridep"),
                           tr, 16, job)
    assert g.describe(0)["moe_flex_backend"] == "hybridep"
    with pytest.raises(Exception, match="flex dispatcher backend"):
        StrategySpec(moe_flex_backend="ncclep")


def test_hybridep_without_the_flex_dispatcher_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "-m", "mixtral-8x7b", "-n", "64", "--tp", "8", "--sequence-parallel", "--ep", "8", "--set",
            "strategy.moe_flex_backend=hybridep", "--json")
    assert r.code == 0 and "strategy.moe_flex_backend = hybridep is not priced: moe_flex_dispatcher is off" in r.err
    r = cli("predict", "-m", "mixtral-8x7b", "-n", "64", "--tp", "8", "--sequence-parallel", "--ep", "8", "--set",
            "strategy.moe_flex_backend=hybridep", "--set", "strategy.moe_flex_dispatcher=true", "--json")
    assert r.code == 0 and "moe_flex_backend" not in r.err, r.err
    assert json.loads(r.out)["strategy"]["moe_flex_backend"] == "hybridep"


def test_megatron_backend_flag_is_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.specs.frameworks import read_strategy_file
    text = ("torchrun pretrain_gpt.py --micro-batch-size 1 --expert-model-parallel-size 8 "
            "--moe-token-dispatcher-type flex")
    for flag, want in (("", None), ("--moe-flex-dispatcher-backend deepep", "deepep"),
                       ("--moe-flex-dispatcher-backend hybridep", "hybridep"),
                       ("--moe-flex-dispatcher-backend ncclep", None)):
        f = tmp_path / "run.sh"
        f.write_text(f"{text} {flag}\n")
        sf = read_strategy_file(f)
        assert sf.strategy.get("moe_flex_backend") == want, flag
    f.write_text(text.replace("flex", "alltoall") + " --moe-flex-dispatcher-backend hybridep\n")
    sf = read_strategy_file(f)
    assert "moe_flex_backend" not in sf.strategy
    assert any("--moe-flex-dispatcher-backend hybridep" in u for u in sf.unused)


def test_planner_searches_the_backend_only_under_moe_dispatch() -> None:
    assert "moe_flex_backend" in ALLOW["moe-dispatch"] and "moe_flex_backend" in PIN_AXES
    tr = TrainingSpec(global_batch=32, seq_len=2048)
    job = build_job(load_cluster("dgx-h100"), QWEN3_30B, tr)
    base = normalize_constraints({"micro_batch": 1, "cp": 1})
    plain = configurations(job, 16, 32, base)
    assert not np.any(plain["moe_flex_backend"])
    flags = frozenset({"moe_flex_dispatcher", "moe_a2a_overlap"})
    without = configurations(job, 16, 32, base, flags)
    asked = configurations(job, 16, 32, base, flags | {"moe_flex_backend"})
    # each flex row of ep > 1 once per backend; NCCL rows once (deepep, which prices nothing there)
    flex_rows = int(np.sum(without["moe_flex_dispatcher"]))
    assert len(asked["dp"]) == len(without["dp"]) + flex_rows
    assert not np.any(asked["moe_flex_backend"][~asked["moe_flex_dispatcher"]])
    assert int(np.sum(asked["moe_flex_backend"])) == flex_rows
    cons, _fixed, _sync = pins(StrategySpec(moe_flex_backend="hybridep"), ["moe_flex_backend"])
    assert cons["moe_flex_backend"] == [("=", 1)]
    with pytest.raises(InputError, match="flex dispatcher backend"):
        normalize_constraints({"moe_flex_backend": "nccl"})
