"""training.moe_router_dtype (docs/model.md#router-dtype): with Megatron-Core's router in fp32 the routing
probabilities are fp32 (router.py casts the logits; moe_utils.topk_routing_with_score_function returns
probs.type_as(logits), NVIDIA/Megatron-LM@d98e8a64dd), and the dispatchers cast to them on the wire: the allgather
dispatcher gathers the probabilities and reduce-scatters the combine in their dtype (token_dispatcher.py line 366),
the alltoall dispatcher's expert-TP reduce-scatter before the combine too (line 830). Bytes by hand; time from the
collectives model on the placed group."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import model_parallel_comm
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MoESpec

H, S, B, K, E = 4096, 4096, 1, 2, 8
EB, PB = 2.0, 4.0


def _coll(router: str | None, **strategy):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="moe", layers=8, hidden=H, heads=32, kv_heads=8, ffn_hidden=14336,
                             gated_mlp=True, vocab=32000, seq_len=S, tied_embeddings=False,
                             moe=MoESpec(experts=E, top_k=K, ffn_hidden=2048))
    # the mean EP rank (moe_rank_imbalance 1): the bytes by hand below are the mean rank's; the busiest rank's factor
    # is tests/test_moe_routing_imbalance.py's subject
    tr = TrainingSpec(global_batch=16, micro_batch=B, precision="bf16", seq_len=S, moe_router_dtype=router,
                      moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), wl, tr)
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, model_parallel_comm._mp_collectives(job, g, groups)


def _t(op: str, nbytes: float, ranks: int) -> float:
    network = build_job(load_cluster("dgx-h100"), TransformerWorkload(
        name="d", layers=2, hidden=256, heads=4, vocab=1000, seq_len=128), TrainingSpec(global_batch=8)).network
    return float(coll.group_time(op, np.asarray(nbytes), place(float(ranks), 1.0, network)))


def test_allgather_dispatcher_fp32_probabilities_and_combine() -> None:
    size = 4 * B * S  # tp 1, ep 4: P R rows
    fwd = (_t("allgather", size * E, 4) + _t("allgather", size * E * PB, 4) + _t("allgather", size * H * EB, 4)
           + _t("reducescatter", size * H * PB, 4))
    bwd = (_t("reducescatter", size * E * PB, 4) + _t("reducescatter", size * H * EB, 4)
           + _t("allgather", size * H * PB, 4))
    _, c = _coll("fp32", tp=1, dp=4, ep=4, moe_allgather_dispatcher=True)
    assert float(np.ravel(model_parallel_comm.ep_op_mean(c))[0]) == pytest.approx((fwd + bwd) / 4.0, rel=1e-12)
    _, c16 = _coll(None, tp=1, dp=4, ep=4, moe_allgather_dispatcher=True)
    mean = model_parallel_comm.ep_op_mean
    assert float(np.ravel(mean(c16))[0]) < float(np.ravel(mean(c))[0])


def test_alltoall_expert_tp_reduce_scatter_in_fp32() -> None:
    """etp = tp = 4 with SP: forward AG (bf16) + RS (fp32), backward RS (bf16) + AG (fp32); the pair's mean; and the
    routing probabilities' AG (forward) and their gradient's RS (backward), one a gathered row in the router's
    dtype (docs/model.md#ep-probs-counts)."""
    d = 4 * (B * S / 4) * K * H * EB
    p = 4 * (B * S / 4) * K * PB
    want = 0.5 * (_t("allgather", d, 4) + _t("reducescatter", d, 4)
                  + _t("allgather", d * PB / EB, 4) + _t("reducescatter", d * PB / EB, 4)
                  + _t("allgather", p, 4) + _t("reducescatter", p, 4))
    _, c = _coll("fp32", tp=4, dp=2, ep=2, sequence_parallel=True)
    assert float(np.ravel(c["moe_disp"])[0]) == pytest.approx(want, rel=1e-12)
    _, c16 = _coll(None, tp=4, dp=2, ep=2, sequence_parallel=True)
    p16 = p * EB / PB
    assert float(np.ravel(c16["moe_disp"])[0]) == pytest.approx(
        _t("allgather", d, 4) + _t("reducescatter", d, 4)
        + 0.5 * (_t("allgather", p16, 4) + _t("reducescatter", p16, 4)),
        rel=1e-12)


def test_the_alltoall_itself_stays_in_the_activations_dtype() -> None:
    """The EP all-to-all of the tokens carries bf16 either way (the combine casts back before it)."""
    _, c = _coll("fp32", tp=1, dp=4, ep=4)
    _, c16 = _coll(None, tp=1, dp=4, ep=4)
    assert float(np.ravel(c["ep_tokens"])[0]) == float(np.ravel(c16["ep_tokens"])[0])


@pytest.mark.parametrize("flag,want", [("--moe-router-dtype fp32", "fp32"), ("--moe-router-dtype fp64", "fp64"),
                                       ("", None)])
def test_megatron_reader(tmp_path, flag: str, want: str | None) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.specs.frameworks import read_strategy_file
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --micro-batch-size 1 {flag}\n")
    sf = read_strategy_file(f)
    assert sf.training.get("moe_router_dtype") == want
    assert not any("--moe-router-dtype" in u for u in sf.unused)


def test_megatron_reader_refuses_other_dtypes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.errors import InputError
    from scalemodel.specs.frameworks import read_strategy_file
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --moe-router-dtype bf16\n")
    with pytest.raises(InputError, match="router dtype"):
        read_strategy_file(f)


def test_eager_expert_bias_promoted_to_fp32_by_hand() -> None:
    """TEGroupedMLP._apply_bias's list path (experts.py lines 363-379 @d98e8a64dd): t + b p with fp32 p runs in fp32
    and is cast back by .to(intermediate_parallel.dtype). Per routed row and element of h (e 2, c 4):
    forward  b*p writes 4; t + bp reads 2 + 4, writes 4; cat reads 4, writes 4; .to reads 4, writes 2  = 28
    backward .to's backward reads 2 writes 4; t's gradient cast reads 4 writes 2; grad*p reads 4 writes 4, its sum
             reads 4; grad*b reads 4 writes 4, its sum reads 4                                           = 36"""
    from scalemodel.cost import compute
    from scalemodel.cost.transformer import shape
    sh = shape(layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000, moe_experts=8, moe_top_k=2)
    rows = 128 * 2  # b s k on one GPU with ep 1: every routed row is local
    f, b = compute.eager_expert_bias_bytes(sh, micro_batch=1, seq_len=128, prob_bytes=4.0)
    assert float(f) == rows * 1024 * 28 and float(b) == rows * 1024 * 36
    f16, b16 = compute.eager_expert_bias_bytes(sh, micro_batch=1, seq_len=128, prob_bytes=2.0)
    assert float(f16) == rows * 1024 * 12 == float(b16)
