"""Review 17a: the busiest EP rank (docs/model.md#moe-rank-imbalance) checked by a Monte Carlo of its own, the token
count it is applied to (per micro-batch, per EP rank), and a dispatch that drops and pads to capacity, where no rank
is busier than the capacity (training_cases.yaml framework.moe_capacity_factor)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import script_module, training_cases

from scalemodel.cost import moe_routing
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.step import evaluate
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec

MOE = TransformerWorkload(name="moe-64x8", layers=4, hidden=2048, heads=16, kv_heads=4, ffn_hidden=8192,
                          gated_mlp=True, vocab=32000, seq_len=4096, tied_embeddings=False,
                          moe={"experts": 64, "top_k": 8, "ffn_hidden": 1024})


def _busiest_rank_loads(rng: np.random.Generator, dispatches: int, tokens: int, experts: int, top_k: int,
                        ranks: int, slices: int = 1) -> np.ndarray:
    """The busiest rank's routed copies in each of ``dispatches`` independent dispatches, simulated by sampling each
    token's k distinct experts as the first k of a uniformly random permutation of the E experts (argsort of
    uniforms: a uniform k-subset, the routing of random logits + top-k), rank r holding experts [r E/p, (r+1) E/p).
    ``slices`` > 1: an EP index's load is the sum of that many independent dispatches (the etp slices' tokens, which
    the expert-TP all-gather puts on one index)."""
    per_rank = experts // ranks
    out = np.empty(dispatches)
    for d in range(dispatches):
        load = np.zeros(ranks)
        for _ in range(slices):
            chosen = np.argsort(rng.random((tokens, experts)), axis=1)[:, :top_k]
            load += np.bincount((chosen // per_rank).ravel(), minlength=ranks)
        out[d] = load.max()
    return out


@pytest.mark.parametrize("tokens,experts,top_k,ranks,slices,dispatches", [
    (1024, 16, 2, 8, 1, 1500),   # few experts, two a rank: mu = 256
    (512, 64, 8, 8, 1, 800),     # 64 experts top-8 at EP 8: mu = 512
    (256, 64, 8, 8, 2, 800),     # the same rows from two expert-TP slices: mu = 2 x 256
])
def test_expected_busiest_rank_against_own_monte_carlo(tokens: int, experts: int, top_k: int, ranks: int,
                                                       slices: int, dispatches: int) -> None:
    """E[max_r X_r] per dispatch (the mean of the per-dispatch maximum: a step waits for each layer's busiest rank
    and sums them) against the closed form 1 + e_p sqrt((E - k)/((E - 1) mu)) at mu = slices x tokens x k / p. The
    tolerance: 4 standard errors of the simulated mean plus the Gaussian step's stated error, 0.5/sqrt(mu) of the
    excess. It is not the maximum of the ranks' means (which is mu: f = 1), nor a marginal-sd estimate
    sd(X_r) e_p = sqrt(1 - 1/p) of the excess, which this simulation tells apart at p = 8 (6.5 % of the excess)
    only loosely: that estimate is checked to be further off than the form."""
    rng = np.random.default_rng(17_0_1205 + experts + slices)
    busiest = _busiest_rank_loads(rng, dispatches, tokens, experts, top_k, ranks, slices)
    mu = slices * tokens * top_k / ranks
    f = float(moe_routing.copy_load_factor(mu, experts, top_k, ranks))
    excess = (f - 1.0) * mu
    se = busiest.std(ddof=1) / math.sqrt(dispatches)
    assert abs(busiest.mean() - f * mu) <= 4.0 * se + 0.5 / math.sqrt(mu) * excess
    marginal = math.sqrt(1.0 - 1.0 / ranks) * excess
    assert abs(busiest.mean() - mu - excess) <= abs(busiest.mean() - mu - marginal) + 4.0 * se


def test_cap_is_the_most_one_rank_can_take() -> None:
    """Two experts a rank of 16, top-4 (p 8): a token puts at most 2 of its 4 copies on one rank, so the busiest
    rank takes at most 2 N of the N k = 4 N copies, mean N k / p = N / 2: max / mean <= 4 = p min(k, E/p) / k. At
    mu = 0.1 the normal form, 1 + 1.4236 sqrt(12 / 1.5) = 5.03, is above it; the cap holds it there."""
    assert float(moe_routing.copy_load_cap(16, 4, 8)) == 4.0
    assert 1.0 + 1.4236 * math.sqrt(12.0 / (15.0 * 0.1)) > 4.0
    assert float(moe_routing.copy_load_factor(0.1, 16, 4, 8)) == 4.0
    # E / k at one expert a rank (E 8, k 2, p 8): a rank takes at most every token once, N of 2 N copies, mean N / 4
    assert float(moe_routing.copy_load_cap(8, 2, 8)) == 4.0


def _predict(micro_batch: int, tp: int, etp: int, imbalance: float | None) -> dict[str, float]:
    cl = load_cluster("dgx-h100")
    tr = TrainingSpec(global_batch=64, micro_batch=micro_batch, precision="bf16", seq_len=4096,
                      moe_rank_imbalance=imbalance)
    job = build_job(cl, MOE, tr)
    st = StrategySpec(tp=tp, pp=1, ep=8, etp=etp, dp=16 // tp, sequence_parallel=tp > 1)
    res = evaluate(job, grid_from_strategy(st, tr, 16, job))
    return {k: float(v[0]) for k, v in res.breakdown.items()} | {"step": float(res.step_time[0])}


@pytest.mark.parametrize("micro_batch,tp", [(2, 1), (1, 2)])
def test_default_factor_is_that_of_one_micro_batch_per_ep_rank(micro_batch: int, tp: int) -> None:
    """The default prices each MoE layer at the busiest EP rank of one micro-batch's dispatch: mu = b s k / tp
    copies a rank (b s / tp tokens a rank under sequence parallelism at etp 1, ep ranks each sending theirs), for the
    expert GEMMs and the all-to-all alike. So the default equals the stated factor copy_load_factor(b s k / tp, E, k,
    ep) in every term, and differs from the factor of another token count (a whole step's, m b s k / tp)."""
    mu = micro_batch * 4096 * 8 / tp
    f = float(moe_routing.copy_load_factor(mu, 64, 8, 8))
    # 1.42360: the expected maximum of 8 standard normals (Tippett 1925; 8 x phi(x) Phi(x)^7 integrated = 1.4236003)
    assert f == pytest.approx(1.0 + 1.42360 * math.sqrt(56.0 / (63.0 * mu)), rel=1e-5)
    dflt, stated = _predict(micro_batch, tp, 1, None), _predict(micro_batch, tp, 1, f)
    for key in ("compute", "ep_comm", "step"):
        assert dflt[key] == pytest.approx(stated[key], rel=1e-12)
    other = _predict(micro_batch, tp, 1, float(moe_routing.copy_load_factor(4 * mu, 64, 8, 8)))
    assert other["compute"] < dflt["compute"]


def test_expert_tp_slices_add_their_rows_on_one_ep_index() -> None:
    """etp = tp = 2: each expert-TP slice's all-to-all delivers b s k / tp copies to an EP index on average, and the
    expert-TP all-gather puts both slices' rows on it, so its GEMMs run the busiest index of etp b s k / tp copies
    (two independent slices summed: the Monte Carlo's slices = 2 case), while the all-to-all is priced at one
    slice's busiest receiver (docs/model.md#moe-rank-imbalance): the default's compute equals the stated factor at
    mu = etp b s k / tp and its ep_comm the stated factor at mu = b s k / tp."""
    f_slice = float(moe_routing.copy_load_factor(4096 * 8 / 2, 64, 8, 8))
    f_index = float(moe_routing.copy_load_factor(2 * 4096 * 8 / 2, 64, 8, 8))
    dflt = _predict(1, 2, 2, None)
    assert dflt["compute"] == pytest.approx(_predict(1, 2, 2, f_index)["compute"], rel=1e-12)
    assert dflt["ep_comm"] == pytest.approx(_predict(1, 2, 2, f_slice)["ep_comm"], rel=1e-12)


def _drop_and_pad_rank_rows(rng: np.random.Generator, tokens: int, experts: int, top_k: int, ranks: int,
                            capacity_factor: float) -> np.ndarray:
    """Rows each EP rank runs under Megatron-Core's drop_and_pad (NVIDIA/Megatron-LM@791b70e031
    megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess, moe_utils.py
    get_capacity): each source rank routes its ``tokens`` (random top-k here), keeps at most capacity = ceil(T k / E
    x c) per expert (dropping the rest), pads each expert's rows up to it and sends them; a rank runs what its E / p
    experts received from all p sources (tp 1)."""
    capacity = math.ceil(tokens * top_k / experts * capacity_factor)
    received = np.zeros(experts)
    for _ in range(ranks):
        chosen = np.argsort(rng.random((tokens, experts)), axis=1)[:, :top_k]
        routed = np.bincount(chosen.ravel(), minlength=experts)
        kept = np.minimum(routed, capacity)
        received += kept + (capacity - kept)  # dropped beyond the capacity, padded up to it
    return received.reshape(ranks, experts // ranks).sum(axis=1)


def test_drop_and_pad_prices_every_rank_at_the_capacity() -> None:
    """NeMo 2.2's Mixtral 8x7B row (E 8, k 2, EP 8, micro-batch 2 x 4096 tokens, MegatronTokenDropCallback's
    capacity factor 1.0 with padding): every rank runs exactly c x the dropless mean, whatever the routing, so the
    validator states moe_rank_imbalance c = 1.0 for it; it priced random routing's busiest rank (f = 1.0103)."""
    rng = np.random.default_rng(1701)
    T, E, k, p = 8192, 8, 2, 8
    rows = _drop_and_pad_rank_rows(rng, T, E, k, p, 1.0)
    mean_dropless = p * T * k / p
    assert rows.max() == rows.min() == mean_dropless  # every rank at the mean: max / mean = 1
    assert float(moe_routing.copy_load_factor(T * k, E, k, p)) == pytest.approx(1.0103, abs=1e-4)
    vt = script_module("validate_training")
    res = vt.predict_new_case(training_cases()["nemo2502_b200_mixtral_8x7b"])
    assert res.training.moe_rank_imbalance == rows.max() / mean_dropless
    assert res.settings["moe_rank_imbalance"] == 1.0
    # every other MoE row is dropless: the random-routing default; NeMo 25.04's GB200 Mixtral row runs the same
    # MegatronTokenDropCallback (NeMo v2.3.0 recipes/mixtral_8x7b.py L224-226), and so do NeMo@7a8f1cc7bc's
    # pretrain_grok1_314b.py (dgxc2505 Grok-1, dgxc21 / data21c), pretrain_deepseek_v3.py (USE_TOKEN_DROP, data21c)
    # and the Llama 4 Maverick perf script (data22, review22e: the token-drop callback at capacity 1.0); since
    # mtmoe35 MaxText's tiering Mixtral row too (tuning_params capacity_factor 1.25, the einsum dispatch)
    dgxc2505 = {i for i in training_cases() if i.startswith("dgxc2505_")
                and any(m in i for m in ("_grok1_314b_", "_dsv3_", "_llama4_maverick_"))}
    drop = vt.rows_with("moe_capacity_factor")  # the rows' framework field (validation/README.md)
    maxtext = "mttier25_v6e_mixtral_8x7b_256"
    # moedata41: Megatron-MoE-ModelZoo's Mixtral-8x22B token-drop line (--moe-expert-capacity-factor 1.0
    # --moe-pad-expert-input-to-capacity, b09773a)
    zoo = "moezoo25_h100_mixtral_8x22b_drop"
    assert set(drop) == {"nemo2502_b200_mixtral_8x7b", "nemo2504_gb200_mixtral_8x7b", maxtext, zoo} | dgxc2505
    assert len(dgxc2505) == 17 and all(c == 1.0 for i, c in drop.items() if i != maxtext)
    assert drop[maxtext] == 1.25


def test_nanotron_refuses_overlap_param_gather(cli) -> None:  # type: ignore[no-untyped-def]
    """nanotron's ZeroDistributedOptimizer.step all-gathers the updated shards synchronously after the update
    (optim/zero.py _all_gather_params at c2528430); it has nothing like Megatron-LM's --overlap-param-gather. With
    16-bit gradients (DDP's buckets: last bucket < 1) the switch hid nanotron's gather under the next forward (dp_comm
    8.0 -> 1.6 ms for a 16-layer 2048-wide model on 64 H100s); it is refused with the switch, one line, exit 2, in
    predict and plan alike, as the other things nanotron does not run are."""
    from scalemodel.errors import InputError

    with pytest.raises(InputError, match="nanotron_trainer.*overlap_param_gather"):
        StrategySpec(zero="1", nanotron_trainer=True, overlap_param_gather=True)
    assert not StrategySpec(zero="1", nanotron_trainer=True).overlap_param_gather
    for command in (("predict", "--tp", "8", "--zero", "1"), ("plan",)):
        r = cli(command[0], "-m", "llama3-70b", "-c", "dgx-h100", "-n", "512", *command[1:],
                "--set", "strategy.nanotron_trainer=true", "--set", "strategy.overlap_param_gather=true")
        lines = [x for x in r.err.splitlines() if x.strip()]
        assert r.code == 2 and len(lines) == 1 and "overlap_param_gather" in lines[0], r.err


def test_deepspeed_pipeline_refuses_overlap_param_gather(cli) -> None:  # type: ignore[no-untyped-def]
    """DeepSpeed's ZeRO-1/2 optimizer gathers the updated partitions at the end of step() (v0.19.5
    deepspeed/runtime/zero/stage_1_and_2.py L2367-2370, all_gather_dp_groups, "ready for next round forward"), the
    same synchronous gather as nanotron's: Megatron-LM's --overlap-param-gather does not exist there. Before, the
    switch hid the gather under the next forward; it is refused, one line, exit 2, in predict and plan."""
    from scalemodel.errors import InputError

    with pytest.raises(InputError, match="deepspeed_pipeline.*overlap_param_gather"):
        StrategySpec(zero="1", deepspeed_pipeline=True, overlap_param_gather=True)
    assert StrategySpec(zero="1", deepspeed_pipeline=True).deepspeed_pipeline
    for command in (("predict", "--tp", "8", "--pp", "4", "--zero", "1"), ("plan",)):
        r = cli(command[0], "-m", "llama3-70b", "-c", "dgx-h100", "-n", "512", *command[1:],
                "--set", "strategy.deepspeed_pipeline=true", "--set", "strategy.overlap_param_gather=true")
        lines = [x for x in r.err.splitlines() if x.strip()]
        assert r.code == 2 and len(lines) == 1 and "overlap_param_gather" in lines[0], r.err
