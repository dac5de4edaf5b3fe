"""Context parallelism's exchange (strategy cp_comm_type, docs/model.md#cp-comm): Transformer Engine's all_gather
(AttnFuncWithCPAndKVAllGather) and a2a (AttnFuncWithCPAndQKVOA2A) beside the default p2p ring
(transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py at NVIDIA/TransformerEngine@d0067d0).

The bytes each rank moves come from small step-by-step simulations of the collectives (ring all-gather and
reduce-scatter, pairwise all-to-all of head groups), the kernels' keys per query from counting every query's keys,
and the core's time from the closed form of the fitted curve eff = A k / (k + k0) (a call's time is then linear in
k + k0), never from the implementation's own output."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.compute import (
    cp_allgather_core_time,
    cp_gathered_bytes,
    cp_levels,
    cp_ring_bytes,
    layer_compute_time,
)
from scalemodel.cost.placement import place
from scalemodel.cost.transformer import shape
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.planner import PIN_AXES
from scalemodel.engine.step import Infeasible, evaluate
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import StrategySpec, TrainingSpec

E = 2.0  # bf16
L8B = dict(layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128_000, ffn_hidden=14336, gated_mlp=True)
W8B = TransformerWorkload(name="l8b", seq_len=16384, **L8B)  # type: ignore[arg-type]
CURVE = dict(attn_max=0.6, seq_half=1200.0, head_half=40.0)  # a Blackwell-like cuDNN curve (large seq_half)
H100 = dict(peak_flops=989.4e12, memory_bandwidth=3.35e12, memory_efficiency=0.88)


# ----------------------------------------------------------------------------------------------------------------
# step-by-step simulations of the bytes


def ring_allgather(block: float, p: int) -> tuple[list[float], list[list[float]]]:
    """Ring all-gather of one ``block`` per rank: at each of p - 1 steps every rank forwards to rank + 1 the block
    it received the step before (its own at step 0). Returns the bytes each rank holds at the end and the bytes
    each rank sends at each step."""
    held = [[r] for r in range(p)]  # block ids
    sent: list[list[float]] = []
    outgoing = list(range(p))
    for _ in range(p - 1):
        sent.append([block] * p)
        incoming = [outgoing[(r - 1) % p] for r in range(p)]
        for r in range(p):
            held[r].append(incoming[r])
        outgoing = incoming
    assert all(sorted(h) == list(range(p)) for h in held)
    return [block * len(h) for h in held], sent


def ring_reducescatter(full: float, p: int) -> tuple[list[float], list[list[float]]]:
    """Ring reduce-scatter of a ``full`` buffer per rank in p chunks: p - 1 steps, each rank sends one partial chunk
    to rank + 1 and adds the one it receives. Returns the bytes each rank ends with and those sent per step."""
    chunk = full / p
    sent = [[chunk] * p for _ in range(p - 1)]
    return [chunk] * p, sent


def alltoall_heads(tokens: int, heads: int, head_dim: int, p: int) -> tuple[float, float, float]:
    """Ulysses' all-to-all: rank r holds ``tokens`` tokens x ``heads`` heads; head group j (heads / p) goes to rank
    j. Returns (bytes held before, bytes sent to other ranks, bytes held after: p x tokens x heads / p)."""
    before = tokens * heads * head_dim * E
    per_dest = [tokens * (heads // p) * head_dim * E for _ in range(p)]
    sent = sum(b for j, b in enumerate(per_dest) if j != 0)  # rank 0's view (every rank alike)
    after = p * tokens * (heads // p) * head_dim * E
    return before, sent, after


def test_the_simulations_move_what_the_collectives_are_sized_by() -> None:
    """nccl-tests convention (collectives module): all-gather / reduce-scatter S = the gathered buffer, each rank
    sending (p - 1) / p S; all-to-all S = a rank's whole send buffer, (p - 1) / p of it leaving the rank."""
    p, block = 4, 8 * 2**20
    held, sent = ring_allgather(block, p)
    assert held == [p * block] * p and sum(s[0] for s in sent) == (p - 1) / p * (p * block)
    held, sent = ring_reducescatter(p * block, p)
    assert held == [block] * p and sum(s[0] for s in sent) == (p - 1) * block
    before, out, after = alltoall_heads(4096, 32, 128, p)
    assert before == after == 32 * 2**20 and out == (p - 1) / p * before


# ----------------------------------------------------------------------------------------------------------------
# the step's cp_comm


def _run(kind: str, *, cp: int = 4, recompute: str = "none", a2a: int = 1,  # type: ignore[no-untyped-def]
         **tr_kw: object):
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=4, micro_batch=1, precision="bf16", seq_len=16384, **tr_kw)  # type: ignore[arg-type]
    job = build_job(cl, W8B, tr)
    st = StrategySpec(tp=1, pp=1, cp=cp, dp=8 // cp, cp_comm_type=kind, recompute=recompute, cp_a2a_size=a2a)
    return job, evaluate(job, grid_from_strategy(st, tr, 8, job))


def test_step_prices_the_simulated_bytes_on_the_cp_group() -> None:
    """b 1, s 16384, cp 4, tp 1 on one DGX H100 (the cp group: 4 GPUs, stride 1): T = 4096 tokens a rank; the
    local K and V blocks 4096 x 8 x 128 x 2 B = 8 MiB each, Q and O 4096 x 32 x 128 x 2 B = 32 MiB each;
    m = 4 / (dp 2 x 1) = 2 micro-batches, 32 layers.
    all_gather: forward AG(K) + AG(V), backward AG(K) + AG(V) + RS(dK) + RS(dV), all exposed;
    a2a: Q, K, V, O forward and dO, dQ, dK, dV backward, all exposed."""
    job, ag = _run("all_gather")
    _, a2a = _run("a2a")
    pl = place(4, 1, job.network)
    k_block = 4096 * 8 * 128 * E
    q_block = 4096 * 32 * 128 * E
    gathered, _ = ring_allgather(k_block, 4)
    t_ag = float(coll.group_time("allgather", gathered[0], pl))
    t_rs = float(coll.group_time("reducescatter", gathered[0], pl))
    per_layer_ag = 2 * t_ag + 2 * t_ag + 2 * t_rs  # K and V: fwd gathers, bwd gathers and reduce-scatters
    assert float(ag.breakdown["cp_comm"][0]) == pytest.approx(2 * 32 * per_layer_ag, rel=1e-9)
    before_q, _, _ = alltoall_heads(4096, 32, 128, 4)
    before_k, _, _ = alltoall_heads(4096, 8, 128, 4)
    assert before_q == q_block and before_k == k_block
    a = 2 * float(coll.group_time("alltoall", before_q, pl)) + 2 * float(coll.group_time("alltoall", before_k, pl))
    assert float(a2a.breakdown["cp_comm"][0]) == pytest.approx(2 * 32 * 2 * a, rel=1e-9)


def test_recompute_repeats_the_forward_exchange() -> None:
    """Selective recompute of core_attn (Megatron-Core checkpoints TE's DotProductAttention, the exchange inside)
    and full recompute repeat the forward's collectives once per layer: + m L (AG(K) + AG(V))."""
    job, none = _run("all_gather")
    pl = place(4, 1, job.network)
    t_ag = float(coll.group_time("allgather", 4 * 4096 * 8 * 128 * E, pl))
    for rec in ("selective", "full"):
        _, r = _run("all_gather", recompute=rec)
        extra = float(r.breakdown["cp_comm"][0] - none.breakdown["cp_comm"][0])
        assert extra == pytest.approx(2 * 32 * 2 * t_ag, rel=1e-9), rec


def test_default_is_p2p_and_cp1_has_no_exchange() -> None:
    _, p2p = _run("p2p")
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=4, micro_batch=1, precision="bf16", seq_len=16384)
    job = build_job(cl, W8B, tr)
    plain = evaluate(job, grid_from_strategy(StrategySpec(tp=1, pp=1, cp=4, dp=2), tr, 8, job))
    assert float(plain.step_time[0]) == float(p2p.step_time[0])
    assert grid_from_strategy(StrategySpec(cp=4, dp=2), tr, 8, job).describe(0)["cp_comm_type"] == "p2p"
    steps = [float(_run(k, cp=1)[1].step_time[0]) for k in ("p2p", "all_gather", "a2a")]
    assert steps[0] == steps[1] == steps[2]


def test_a2a_needs_heads_per_tp_rank_divisible_by_cp() -> None:
    """TE asserts num_heads % cp_size == 0 for Q, K and V: 8 KV heads at tp 1 split over cp 8, not 16."""
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=2, micro_batch=1, precision="bf16", seq_len=16384)
    job = build_job(cl, W8B, tr)
    ok = evaluate(job, grid_from_strategy(StrategySpec(cp=8, dp=2, cp_comm_type="a2a"), tr, 16, job))
    bad = evaluate(job, grid_from_strategy(StrategySpec(cp=16, dp=1, cp_comm_type="a2a"), tr, 16, job))
    tp2 = evaluate(job, grid_from_strategy(StrategySpec(tp=2, cp=8, dp=1, cp_comm_type="a2a"), tr, 16, job))
    p2p = evaluate(job, grid_from_strategy(StrategySpec(cp=16, dp=1), tr, 16, job))
    assert int(ok.reason[0]) != Infeasible.HEADS_NOT_DIVISIBLE
    assert int(bad.reason[0]) == int(tp2.reason[0]) == Infeasible.HEADS_NOT_DIVISIBLE  # 8 / 16; 8 / 2 = 4 / 8
    assert int(p2p.reason[0]) != Infeasible.HEADS_NOT_DIVISIBLE


def test_all_gather_holds_the_gathered_kv_and_their_gradients() -> None:
    """One layer's backward holds k_ag, v_ag (the whole sequence) and dk, dv of the same length: 4 x b s g d e / t
    = 4 x 16384 x 8 x 128 x 2 = 256 MiB at b 1, t 1; the other exchanges hold no such buffer."""
    sh = shape(**L8B)  # type: ignore[arg-type]
    want = 4 * 16384 * 8 * 128 * E
    assert float(cp_gathered_bytes(sh, micro_batch=1, seq_len=16384, cp=4, cp_comm_type="all_gather")) == want
    for kind, cp in (("p2p", 4), ("a2a", 4), ("all_gather", 1)):
        assert float(cp_gathered_bytes(sh, micro_batch=1, seq_len=16384, cp=cp, cp_comm_type=kind)) == 0.0
    _, ag = _run("all_gather")
    _, p2p = _run("p2p")
    assert float(ag.memory["workspace"][0] - p2p.memory["workspace"][0]) == pytest.approx(want)


# ----------------------------------------------------------------------------------------------------------------
# the kernel calls


def _chunk_keys_by_count(s: int, cp: int, chunk: int, window: int = 0) -> float:
    """Mean keys per query of load-balanced chunk ``chunk`` (of 2 cp): query at position p attends min(p + 1, w)."""
    C = s // (2 * cp)
    keys = [min(p + 1, window) if window else p + 1 for p in range(chunk * C, (chunk + 1) * C)]
    return sum(keys) / C


@pytest.mark.parametrize("window", [0, 3000])
def test_all_gather_core_is_two_calls_at_their_own_keys(window: int) -> None:
    """s 8192, cp 2: C = 2048; rank 0 runs chunks 0 and 3 (1024.5 and 7168.5 keys per query without a window),
    rank 1 chunks 1 and 2 (3072.5, 5120.5). Each call: 2 C k (d + d_v) n flops at A k / (k + k0) d / (d + d0)."""
    sh = shape(**L8B, sliding_window=window, sliding_window_pattern=0)  # type: ignore[arg-type]
    s, cp, n, d = 8192, 2, 32.0, 128.0
    if not window:
        assert [_chunk_keys_by_count(s, cp, j) for j in range(4)] == [1024.5, 3072.5, 5120.5, 7168.5]

    def call(k: float) -> float:
        eff = CURVE["attn_max"] * k / (k + CURVE["seq_half"]) * d / (d + CURVE["head_half"])
        return 2 * 2048 * k * 2 * d * n / (H100["peak_flops"] * eff)

    ranks = [call(_chunk_keys_by_count(s, cp, 0, window)) + call(_chunk_keys_by_count(s, cp, 3, window)),
             call(_chunk_keys_by_count(s, cp, 1, window)) + call(_chunk_keys_by_count(s, cp, 2, window))]
    got = float(cp_allgather_core_time(sh, s, cp, d, d, n, **H100, **CURVE))
    assert got == pytest.approx(max(ranks), rel=1e-9)


def test_all_gather_and_a2a_cores_keep_the_whole_sequence_rate_p2p_does_not() -> None:
    """On eff = A k / (k + k0) a call's time is c (k + k0) per query, so without a window:
    all_gather: rank time = c C (k_a + k_b + 2 k0) = c (s / (2 cp)) (s + 1 + 2 k0) = t(cp 1) / cp;
    a2a: s queries with a / cp heads at (s + 1) / 2 keys = t(cp 1) / cp;
    p2p: s / cp queries at the (s + 1) / 2 keys of the FLOPs but the efficiency of (s / cp + 1) / 2: more."""
    sh = shape(**L8B)  # type: ignore[arg-type]
    run = dict(micro_batch=1, seq_len=32768, flash_attention=True, attention_fwd=CURVE, attention_bwd=CURVE,
               layer_impl="torchtitan", **H100)  # torchtitan: no p2p ring bookkeeping bytes either way
    one = layer_compute_time(sh, cp=1, **run)  # type: ignore[arg-type]
    k, k0 = (32768 + 1) / 2, CURVE["seq_half"]
    for cp in (2, 4, 8):
        ag = layer_compute_time(sh, cp=cp, cp_comm_type="all_gather", **run)  # type: ignore[arg-type]
        a2a = layer_compute_time(sh, cp=cp, cp_comm_type="a2a", **run)  # type: ignore[arg-type]
        p2p = layer_compute_time(sh, cp=cp, **run)  # type: ignore[arg-type]
        core1 = float(one.attention_core)
        assert float(ag.attention_core) == pytest.approx(core1 / cp, rel=1e-9)
        assert float(a2a.attention_core) == pytest.approx(core1 / cp, rel=1e-9)
        kc = (32768 / cp + 1) / 2
        assert float(p2p.attention_core) == pytest.approx(core1 / cp * (kc + k0) / kc * k / (k + k0), rel=1e-9)
        # backward alike (2.5x the FLOPs on the backward curve); the FLOPs of the layer are the same
        assert float(ag.backward) == pytest.approx(float(a2a.backward), rel=1e-9)
        assert float(ag.forward_flops) == float(a2a.forward_flops) == float(p2p.forward_flops)


def test_ring_bookkeeping_bytes_are_p2p_only() -> None:
    sh = shape(**L8B)  # type: ignore[arg-type]
    run = dict(micro_batch=1, seq_len=8192, flash_attention=True, layer_impl="megatron_te", cp=2, **H100)
    for kind in ("all_gather", "a2a"):
        te = layer_compute_time(sh, cp_comm_type=kind, **run)  # type: ignore[arg-type]
        titan = layer_compute_time(sh, cp_comm_type=kind, **{**run, "layer_impl": "torchtitan"})  # type: ignore[arg-type]
        ref_te = layer_compute_time(sh, cp_comm_type=kind, fp8_attention=True, **run)  # type: ignore[arg-type]
        assert float(te.attention_core) == float(ref_te.attention_core)
        assert float(titan.attention_core) == float(te.attention_core)


# ----------------------------------------------------------------------------------------------------------------
# inputs: the Megatron launch, the planner's pin, bad values


def _launch(tmp_path: Path, text: str) -> object:
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --context-parallel-size 4 " + text + " --micro-batch-size 1\n")
    return read_strategy_file(str(f))


def test_megatron_cp_comm_type_is_read(tmp_path: Path) -> None:
    for text, want in (("--cp-comm-type allgather", "all_gather"), ("--cp-comm-type a2a", "a2a"),
                       ("--cp-comm-type p2p", "p2p"), ("--cp-comm-type a2a a2a a2a", "a2a")):
        got = _launch(tmp_path, text)
        assert got.strategy.get("cp_comm_type") == want, text  # type: ignore[attr-defined]
    mixed = _launch(tmp_path, "--cp-comm-type p2p a2a")
    assert "cp_comm_type" not in mixed.strategy and any("per-layer" in u for u in mixed.unused)  # type: ignore[attr-defined]
    hier = _launch(tmp_path, "--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2")
    assert hier.strategy["cp_comm_type"] == "a2a+p2p" and hier.strategy["cp_a2a_size"] == 2  # type: ignore[attr-defined]
    assert hier.unused == []  # type: ignore[attr-defined]
    bare = _launch(tmp_path, "--cp-comm-type a2a+p2p")
    assert "cp_comm_type" not in bare.strategy and any("a2a+p2p" in u for u in bare.unused)  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="ring2"):
        _launch(tmp_path, "--cp-comm-type ring2")


def test_cp_comm_type_is_pinnable_and_checked() -> None:
    assert "cp_comm_type" in PIN_AXES and "cp_a2a_size" in PIN_AXES  # a searched axis plan can pin
    with pytest.raises(Exception, match="cp_comm_type"):
        StrategySpec(cp=2, cp_comm_type="ring2")
    assert StrategySpec(cp=2, cp_comm_type="Ulysses").cp_comm_type == "a2a"
    assert np.all(np.asarray([1]) > 0)


# ----------------------------------------------------------------------------------------------------------------
# a2a+p2p (hierarchical): an all-to-all level of cp_a2a_size ranks, the p2p ring across the groups


def test_levels_and_the_degenerate_hierarchies_are_p2p_and_a2a() -> None:
    """TE's attn_forward_func_with_cp turns a2a+p2p with a 1-rank a2a group into p2p and with a 1-rank p2p group
    into a2a: the step prices them the same."""
    assert [tuple(map(float, cp_levels(8, k, 2))) for k in ("p2p", "a2a", "a2a+p2p", "all_gather")] == [
        (1.0, 8.0), (8.0, 1.0), (2.0, 4.0), (1.0, 8.0)]
    assert float(_run("a2a+p2p", a2a=1)[1].step_time[0]) == pytest.approx(float(_run("p2p")[1].step_time[0]),
                                                                          rel=1e-12)
    assert float(_run("a2a+p2p", a2a=4)[1].step_time[0]) == pytest.approx(float(_run("a2a")[1].step_time[0]),
                                                                          rel=1e-12)


def test_hierarchical_bytes_on_the_a2a_group() -> None:
    """cp 4 = 2 (a2a) x 2 (p2p): the four all-to-alls each way of the same local Q, K, V, O (32, 8, 8, 32 MiB) on a
    2-rank group (stride 1); the ring's one K+V send/recv per step (16 MiB, to the rank 2 CP ranks away) hides
    under the core at s 16384, so cp_comm = m L 2 (A(Q) + A(K) + A(V) + A(O)) on 2 ranks."""
    job, hier = _run("a2a+p2p", a2a=2)
    pl = place(2, 1, job.network)
    before_q, sent_q, _ = alltoall_heads(4096, 32, 128, 2)
    before_k, sent_k, _ = alltoall_heads(4096, 8, 128, 2)
    assert sent_q == before_q / 2 and sent_k == before_k / 2  # half of each tensor leaves the rank
    a = 2 * float(coll.group_time("alltoall", before_q, pl)) + 2 * float(coll.group_time("alltoall", before_k, pl))
    assert float(hier.breakdown["cp_comm"][0]) == pytest.approx(2 * 32 * 2 * a, rel=1e-9)
    ring = float(coll.group_time("sendrecv", 2 * before_k, place(2, 2, job.network)))
    assert ring < 1e-4  # under a core of milliseconds


def test_hierarchical_core_is_the_ring_of_the_p2p_level_on_heads_over_a() -> None:
    """cp 4 with a2a 2: the ring runs over 2 ranks on s / 2 queries with a / 2 heads, so the core (and, for
    megatron_te, the ring's bookkeeping bytes: O and KV halve) is half of p2p at cp 2."""
    sh = shape(**L8B)  # type: ignore[arg-type]
    run = dict(micro_batch=1, seq_len=32768, flash_attention=True, attention_fwd=CURVE, attention_bwd=CURVE,
               layer_impl="torchtitan", **H100)
    hier = layer_compute_time(sh, cp=4, cp_comm_type="a2a+p2p", cp_a2a_size=2, **run)  # type: ignore[arg-type]
    p2p2 = layer_compute_time(sh, cp=2, **run)  # type: ignore[arg-type]
    assert float(hier.attention_core) == pytest.approx(float(p2p2.attention_core) / 2, rel=1e-9)
    f2, b2 = cp_ring_bytes(sh, micro_batch=1, seq_len=32768, cp=2)
    te = {**run, "layer_impl": "megatron_te"}
    hier_te = layer_compute_time(sh, cp=4, cp_comm_type="a2a+p2p", cp_a2a_size=2, **te)  # type: ignore[arg-type]
    hbm = H100["memory_bandwidth"] * H100["memory_efficiency"]
    assert float(hier_te.attention_core - hier.attention_core) == pytest.approx(float(f2) / 2 / hbm, rel=1e-9)
    assert float(hier_te.backward - hier.backward) == pytest.approx(float(b2) / 2 / hbm, rel=1e-9)


def test_hierarchical_feasibility() -> None:
    """The a2a level must divide cp and the heads (8 KV heads): cp 4 with a2a 3 or cp 16 with a2a 16 are not."""
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=16384)
    job = build_job(cl, W8B, tr)

    def reason(cp: int, a2a: int) -> int:
        st = StrategySpec(cp=cp, dp=16 // cp, cp_comm_type="a2a+p2p", cp_a2a_size=a2a)
        return int(evaluate(job, grid_from_strategy(st, tr, 16, job)).reason[0])

    assert reason(4, 2) != Infeasible.HEADS_NOT_DIVISIBLE and reason(16, 8) != Infeasible.HEADS_NOT_DIVISIBLE
    assert reason(4, 3) == reason(16, 16) == Infeasible.HEADS_NOT_DIVISIBLE


# ----------------------------------------------------------------------------------------------------------------
# sliding windows: Transformer Engine refuses them on the p2p ring


def _window_job(pattern: int = 0):  # type: ignore[no-untyped-def]
    w = TransformerWorkload(name="l8b-swa", seq_len=16384, sliding_window=4096, sliding_window_pattern=pattern,
                            **L8B)  # type: ignore[arg-type]
    tr = TrainingSpec(global_batch=16, micro_batch=1, precision="bf16", seq_len=16384)
    return build_job(load_cluster("dgx-h100"), w, tr), tr


# (cp, cp_comm_type, cp_a2a_size, layer_impl) -> refused? TE's attn_forward_func_with_cp (context_parallel.py
# lines 5020-5060 at d0067d0): a2a+p2p with a p2p group of 1 rank (A = cp) runs as a2a, with an a2a group of 1
# rank (A = 1) as p2p; then a window passes only with a2a or all_gather. The check is TE's: megatron_te only.
WINDOW_CASES = [
    (2, "p2p", 1, "megatron_te", True),
    (4, "p2p", 1, "megatron_te", True),
    (1, "p2p", 1, "megatron_te", False),  # no context parallelism
    (2, "all_gather", 1, "megatron_te", False),
    (2, "a2a", 1, "megatron_te", False),
    (4, "a2a+p2p", 2, "megatron_te", True),  # P = 2 ring ranks
    (2, "a2a+p2p", 2, "megatron_te", False),  # P = 1: TE runs a2a
    (2, "a2a+p2p", 1, "megatron_te", True),  # A = 1: TE runs p2p
    (2, "p2p", 1, "torchtitan", False),  # not Transformer Engine's layer
]


@pytest.mark.parametrize("cp, kind, a2a, impl, refused", WINDOW_CASES)
def test_predict_refuses_a_window_on_the_p2p_ring(cp: int, kind: str, a2a: int, impl: str, refused: bool) -> None:
    job, tr = _window_job()
    st = StrategySpec(cp=cp, dp=16 // cp, cp_comm_type=kind, cp_a2a_size=a2a, layer_impl=impl)
    if refused:
        with pytest.raises(InputError, match=re.escape(f"sliding-window attention (workload sliding_window 4096) "
                                                       f"with cp_comm_type {kind} at cp {cp}")) as err:
            grid_from_strategy(st, tr, 16, job)
        assert err.value.where == "strategy.cp_comm_type"
        assert "a2a or all_gather" in err.value.allowed
    else:
        grid_from_strategy(st, tr, 16, job)


def test_no_window_layer_no_refusal() -> None:
    """Pattern 1: every layer global (Gemma's every k-th, k = 1), so TE gets no window: p2p runs."""
    job, tr = _window_job(pattern=1)
    assert float(job.shape.local_layer_fraction) == 0.0
    grid_from_strategy(StrategySpec(cp=2, dp=8), tr, 16, job)
    # and a model without a window (W8B) at cp 2 p2p, as in the tests above
    plain = build_job(load_cluster("dgx-h100"), W8B, tr)
    reason = int(evaluate(plain, grid_from_strategy(StrategySpec(cp=2, dp=8), tr, 16, plain)).reason[0])
    assert reason != Infeasible.CP_WINDOW_UNSUPPORTED


def test_search_marks_a_window_on_the_p2p_ring_infeasible() -> None:
    """The same cases as one grid of candidates (the planner's path): code 17 exactly where TE refuses."""
    from scalemodel.choices import CpCommType, LayerImpl
    from scalemodel.engine.job import grid_from_arrays

    job, _ = _window_job()
    cols = list(zip(*WINDOW_CASES, strict=True))
    cp = np.asarray(cols[0])
    g = grid_from_arrays(gpus=16, dp=16 // cp, tp=1, pp=1, cp=cp, micro_batch=1, global_batch=16,
                         cp_comm_type=np.asarray([int(CpCommType.parse(k)) for k in cols[1]]),
                         cp_a2a_size=np.asarray(cols[2]),
                         layer_impl=np.asarray([int(LayerImpl.parse(i)) for i in cols[3]]))
    reason = evaluate(job, g).reason
    want = [int(Infeasible.CP_WINDOW_UNSUPPORTED) if r else 0 for r in cols[4]]
    assert [int(r) if r == Infeasible.CP_WINDOW_UNSUPPORTED else 0 for r in reason] == want
    assert Infeasible.CP_WINDOW_UNSUPPORTED.key == "cp_window_unsupported"


def test_cli_refusal_is_one_line_exit_2(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "--cluster", "dgx-h100", "--model", "mistral-7b", "--gpus", "16", "--cp", "2")
    assert r.code == 2 and r.out == ""
    assert r.err.count("\n") == 1 and r.err.startswith("error: strategy.cp_comm_type: Transformer Engine refuses "
                                                       "sliding-window attention (workload sliding_window 4096)")
    ok = cli("predict", "--cluster", "dgx-h100", "--model", "mistral-7b", "--gpus", "16", "--cp", "2",
             "--set", "strategy.cp_comm_type=a2a", "--json")
    assert ok.code == 0
