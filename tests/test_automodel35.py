"""NeMo Automodel's fake balanced gate (training.moe_routing cyclic; docs/model.md#moe-cyclic-routing, automodel35):
token t of every rank's micro-batch goes to experts (t k + j) mod E. The bytes of DeepEP's dispatch are checked
against a replay of the kernels' sends on the gate's own index formula, the time by hand on a two-tier network, the
rank load and the count spread against a count of the gate's assignments, and the validator's and CLI's switch."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

from scalemodel.cost import compute, ep_dispatch, moe_routing
from scalemodel.cost.network import Network, Tier
from scalemodel.cost.placement import place
from scalemodel.engine import model_parallel_comm as mpc
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec


def automodel_indices(tokens: int, experts: int, top_k: int) -> np.ndarray:
    """FakeBalancedGate.forward, noise 0 (NVIDIA-NeMo/Automodel components/moe/layers.py @89e3a9fdd L544-546):
    ``torch.arange(x.size(0) * a_exp).view(-1, a_exp) % n_exp``."""
    return np.arange(tokens * top_k).reshape(-1, top_k) % experts


def replay(experts: int, top_k: int, ep: int, per_domain: int, tokens: int, etp: int = 1):
    """Every rank routes its ``tokens`` with the gate above (the same indices on every rank); DeepEP's internode
    dispatch sends each token once to each other domain holding a rank it goes to, to the rank of the source's local
    index there, and that rank (in the own domain the source) copies it over NVLink to each other rank of the domain
    it goes to (deepseek-ai/DeepEP internode.cu kRDMASender / kRDMAAndNVLForwarder). With expert TP the etp ranks of
    an EP index hold a slice of each of its experts (stride 1) and all of them get the token. Returns (RDMA copies
    sent per source token, NVLink copies per source token, RDMA copies received by the busiest receiver over the
    mean receiver, NVLink copies received likewise)."""
    p = ep * etp
    per_rank = experts // ep
    idx = automodel_indices(tokens, experts, top_k)
    sent_rdma = sent_nvl = 0
    got_rdma, got_nvl = np.zeros(p), np.zeros(p)
    for src in range(p):
        dom, local = divmod(src, per_domain)
        for row in idx:
            targets = {int(e) // per_rank * etp + s for e in row for s in range(etp)}
            for d in {t // per_domain for t in targets}:
                forwarder = d * per_domain + local
                if d != dom:
                    sent_rdma += 1
                    got_rdma[forwarder] += 1
                for t in targets:
                    if t // per_domain == d and t != forwarder:
                        sent_nvl += 1
                        got_nvl[t] += 1
    n = p * tokens

    def busy(got: np.ndarray) -> float:
        return float(got.max() / got.mean()) if got.mean() > 0 else 1.0

    return sent_rdma / n, sent_nvl / n, busy(got_rdma), busy(got_nvl)


@pytest.mark.parametrize("experts,top_k,ep,per_domain,etp", [
    (256, 8, 64, 8, 1),   # DeepSeek-V3 at EP 64 on 8 DGX-H100s (automodel26's row)
    (128, 6, 8, 8, 1),    # Nemotron 3 Nano at EP 8 in one node (automodel26's row)
    (128, 8, 16, 8, 1), (64, 6, 16, 4, 1), (96, 8, 24, 8, 1), (32, 3, 8, 2, 1), (64, 4, 8, 8, 2), (64, 6, 8, 4, 2)])
def test_bytes_and_loads_match_the_gate_replayed(experts, top_k, ep, per_domain, etp) -> None:
    period = experts // np.gcd(experts, top_k)
    rdma, nvl, busy_rdma, busy_nvl = replay(experts, top_k, ep, per_domain, 2 * period, etp)
    inter, intra, f_inter, f_intra = ep_dispatch.cyclic_hierarchical(1.0, experts, top_k, ep * etp, per_domain, etp)
    assert float(inter) == pytest.approx(rdma, rel=1e-12, abs=1e-12)
    assert float(intra) == pytest.approx(nvl, rel=1e-12, abs=1e-12)
    assert float(f_inter) == pytest.approx(busy_rdma, rel=1e-12)
    assert float(f_intra) == pytest.approx(busy_nvl, rel=1e-12)


def test_the_two_rows_by_hand() -> None:
    """DeepSeek-V3 (256 experts, top-8) at EP 64 over 8 nodes: a token's 8 experts are experts 8j..8j+7, on the 2
    GPUs 2j, 2j+1 of one node: 7/8 of the tokens cross RDMA once, and NVLink carries 2 copies a token less the one
    in 4 that lands on the forwarder, 7/4. Random top-8 sends 7 q(8) and 56 q(64). Nemotron 3 Nano (128, top-6) at
    EP 8 in one node: a window starts at an even expert (gcd 2), and spans 2 GPUs when it starts at 12 or 14 of a
    GPU's 16: 1.25 GPUs a token, 7/8 of them not the source, 35/32."""
    inter, intra, f_i, f_n = ep_dispatch.cyclic_hierarchical(1.0, 256, 8, 64, 8)
    assert (float(inter), float(intra), float(f_i), float(f_n)) == pytest.approx((7 / 8, 7 / 4, 1.0, 1.0))
    r_inter, r_intra = ep_dispatch.hierarchical_bytes(1.0, 256, 8, 64, 8)
    assert float(r_inter) / float(inter) > 5.0 and float(r_intra) / float(intra) > 3.5
    inter, intra, _, _ = ep_dispatch.cyclic_hierarchical(1.0, 128, 6, 8, 8)
    assert (float(inter), float(intra)) == pytest.approx((0.0, 35 / 32))
    hits, busy = moe_routing.cyclic_part_hits(128, 6, np.array([1, 8, 128]))
    assert hits == pytest.approx([1.0, 1.25, 6.0]) and busy == pytest.approx([1.0, 1.0, 1.0])


def test_every_expert_gets_the_same_count() -> None:
    """The reason the step prices no busiest-rank excess nor count spread under cyclic routing: over whole periods
    the gate gives every expert exactly N k / E copies."""
    for E, k, n in ((256, 8, 4096), (128, 6, 16384), (64, 6, 96)):
        counts = np.bincount(automodel_indices(n, E, k).ravel(), minlength=E)
        assert counts.min() == counts.max() == n * k // E


def _two_tier() -> Network:
    return Network(tiers=(Tier("nvlink", 8, 400e9, 2e-6, efficiency=0.9),
                          Tier("ib", 1024, 50e9, 5e-6, efficiency=0.8)), gpus_per_node=8)


def test_time_by_hand_on_two_tiers() -> None:
    """128 experts, top-8, 16 ranks on 2 nodes of 8 (NVLink 360 GB/s, NIC 40 GB/s effective; kernel efficiencies
    0.92 / 0.94): each token's window is one GPU's 8 experts, so half the tokens cross RDMA once and 7/8 take one
    NVLink copy. A stated imbalance still wins over the gate's 1."""
    net = _two_tier()
    x = 4096 * 2048 * 2.0
    want = max(x / 2 / (40e9 * 0.94), x * 7 / 8 / (360e9 * 0.92)) + 2e-6 + 5e-6
    got = ep_dispatch.hierarchical_alltoall_time(x, 128, 8, place(16, 1, net), tokens=4096, routing="cyclic")
    assert float(got) == pytest.approx(want, rel=1e-12)
    worse = ep_dispatch.hierarchical_alltoall_time(x, 128, 8, place(16, 1, net), imbalance=1.5, routing="cyclic")
    assert float(worse) == pytest.approx(max(1.5 * x / 2 / (40e9 * 0.94), 1.5 * x * 7 / 8 / (360e9 * 0.92))
                                         + 7e-6, rel=1e-12)
    rand = ep_dispatch.hierarchical_alltoall_time(x, 128, 8, place(16, 1, net), tokens=4096)
    assert float(rand) > float(got)


def test_the_cli_prices_it_and_says_so_without_moe_layers(cli) -> None:  # type: ignore[no-untyped-def]
    """Through --set: DeepSeek-V3 at EP 64 with DeepEP runs a shorter step under the cyclic gate (fewer RDMA copies,
    no busiest rank), and a dense model is warned, not priced."""
    moe = ["predict", "-c", "dgx-h100", "-m", "deepseek-v3", "-n", "256", "--ep", "64", "--pp", "4", "--json",
           "--set", "strategy.moe_flex_dispatcher=true", "--set", "strategy.recompute=full",
           "--set", "strategy.zero=fsdp"]
    rand = json.loads(cli(*moe).out)
    cyc = json.loads(cli(*moe, "--set", "training.moe_routing=cyclic").out)
    assert cyc["breakdown_s"]["ep_comm"] < 0.5 * rand["breakdown_s"]["ep_comm"]
    assert cyc["breakdown_s"]["compute"] <= rand["breakdown_s"]["compute"]
    dense = json.loads(cli("predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--json", "--set",
                           "training.moe_routing=cyclic").out)
    assert "training.moe_routing = cyclic is not priced: the model has no MoE layers" in dense["warnings"]


@needs_new_cases
def test_the_validator_sets_it_for_the_fake_balanced_gate_rows_only() -> None:
    """The automodel26 MoE rows (backend.fake_balanced_gate true in both YAMLs) carry it; no other row does."""
    v = script_module("validate_training")
    assert sorted(v.rows_with("moe_routing")) == ["automodel26_h100_dsv3_fsdp64_ep64_256",
                                                  "automodel26_h100_nemotron3_nano"]
    cases = {c["id"]: c for c in load_yaml(NEW_CASES) if c["id"] == "automodel26_h100_nemotron3_nano"}
    r = v.predict_new_case(cases["automodel26_h100_nemotron3_nano"])
    assert r.training.moe_routing == "cyclic" and r.settings["moe_routing"] == "cyclic"


# --- the shared experts on Automodel's side stream (strategy.moe_shared_expert_stream) --------------------------------

SHARED_MOE = TransformerWorkload(name="moe-shared", layers=8, hidden=2048, heads=16, kv_heads=4, head_dim=128,
                                 ffn_hidden=6144, gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                                 moe={"experts": 64, "top_k": 6, "ffn_hidden": 1024, "shared_experts": 2})


def _stream_job(**strategy):  # type: ignore[no-untyped-def]
    tr = TrainingSpec(global_batch=64, micro_batch=1, precision="bf16", seq_len=4096)
    job = build_job(load_cluster("dgx-h100"), SHARED_MOE, tr)
    st_ = StrategySpec(tp=1, pp=1, ep=8, dp=16, moe_flex_dispatcher=True, **strategy)
    return job, grid_from_strategy(st_, tr, 16, job)


@pytest.mark.parametrize("scale", [0.2, 0.7, 1.5, 50.0])
def test_side_stream_hides_one_all_to_all_each_way(scale) -> None:
    """Automodel's MoE.forward (layers.py @bb0c0bfb0 L615-629): the whole shared MLP beside the dispatch forward,
    its backward beside the combine's backward. With one all-to-all a = scale x the shared forward (fc1 + fc2) the
    hidden time per block is min(a, fc1_f + fc2_f) forward and min(a, fc1_b + fc2_b) backward, plus one forward per
    recomputed pass; Megatron-Core's split, for contrast, hides min(a, fc1) + min(a, fc2) each way."""
    job, g = _stream_job(moe_shared_expert_stream=True)
    f1, f2, b1, b2 = (float(np.ravel(v)[0]) for v in compute.shared_expert_times(
        job.shape, micro_batch=1.0, seq_len=4096, peak_flops=job.peak_flops, memory_bandwidth=job.memory_bandwidth,
        gemm_max=job.gemm_max, gemm_half_dim=job.gemm_half_dim, memory_efficiency=job.memory_efficiency,
        elem_bytes=job.elem_bytes))
    a = scale * (f1 + f2)
    blocks, rec = 8.0, 8.0
    mp = {"ep": np.array([1e3]), "hidden_fwd": np.zeros(1), "hidden_bwd": np.zeros(1), "hidden_ep": np.zeros(1)}
    out = mpc._with_shared_expert_overlap(job, g, mp, np.array([a]), blocks, rec)
    want_f = blocks * min(a, f1 + f2)
    want_b = blocks * min(a, b1 + b2) + rec * min(a, f1 + f2)
    assert float(out["hidden_fwd"][0]) == pytest.approx(want_f, rel=1e-12)
    assert float(out["hidden_bwd"][0]) == pytest.approx(want_b, rel=1e-12)
    assert float(out["ep"][0]) == pytest.approx(1e3 - want_f - want_b, rel=1e-12)
    job_m, g_m = _stream_job(moe_shared_expert_overlap=True)
    meg = mpc._with_shared_expert_overlap(job_m, g_m, dict(mp), np.array([a]), blocks, rec)
    assert float(meg["hidden_fwd"][0]) == pytest.approx(blocks * (min(a, f1) + min(a, f2)), rel=1e-12)
    assert float(out["hidden_fwd"][0]) <= float(meg["hidden_fwd"][0]) * (1 + 1e-12)


def test_side_stream_refusals_and_warnings(cli) -> None:  # type: ignore[no-untyped-def]
    """Refused beside Megatron-Core's split and the EP overlap (exit 2, naming the field); not priced, with a
    warning, for a model without shared experts."""
    base = ["predict", "-c", "dgx-h100", "-m", "deepseek-v3", "-n", "256", "--ep", "64", "--pp", "4", "--json",
            "--set", "strategy.moe_shared_expert_stream=true"]
    both = cli(*base, "--set", "strategy.moe_shared_expert_overlap=true")
    assert both.code == 2 and "strategy.moe_shared_expert_stream" in both.err
    on = json.loads(cli(*base).out)
    off = json.loads(cli(*base[:-2]).out)
    assert on["breakdown_s"]["ep_comm"] < off["breakdown_s"]["ep_comm"]
    mix = json.loads(cli("predict", "-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64", "--ep", "8", "--json",
                         "--set", "strategy.moe_shared_expert_stream=true").out)
    assert "strategy.moe_shared_expert_stream is not priced: the model has no shared experts" in mix["warnings"]


def test_plan_pins_the_side_stream_and_keeps_the_ep_overlap_off(cli) -> None:  # type: ignore[no-untyped-def]
    """plan takes a pinned moe_shared_expert_stream as predict does: every ranked plan carries it and none runs
    moe_a2a_overlap (predict refuses the pair); pinned beside Megatron-Core's split it is refused (exit 2)."""
    args = ["plan", "-m", "nemotron-3-nano", "-n", "64", "--top", "3", "--json", "--constraint", "ep=8",
            "--set", "strategy.moe_shared_expert_stream=true"]
    r = cli(*args)
    assert r.code == 0, r.err
    ranked = json.loads(r.out)["ranked"]
    assert ranked and all(p["strategy"]["moe_shared_expert_stream"] and not p["strategy"]["moe_a2a_overlap"]
                          for p in ranked)
    both = cli(*args, "--set", "strategy.moe_shared_expert_overlap=true")
    assert both.code == 2 and "moe_shared_expert_stream" in both.err
