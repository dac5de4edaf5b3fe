"""Megatron-Core's allgather token dispatcher (strategy moe_allgather_dispatcher, docs/model.md#ep-allgather), from
NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/token_dispatcher.py MoEAllGatherTokenDispatcher: per MoE
layer, forward all-gathers of the routing map (bool), the probabilities and the tokens over the etp x ep group and a
reduce-scatter of the combine; backward the reduce-scatters of the tokens' and probabilities' gradients and the
all-gather of the combine's. The bytes are worked out by hand here; their time is the collectives model's for those
bytes on the placed group (the primitive, tested in tests/test_collectives*.py)."""
from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import collectives as coll
from scalemodel.cost.placement import parallel_groups, place
from scalemodel.engine import layer_compute, model_parallel_comm, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs import TransformerWorkload, load_cluster
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import MoESpec

H, S, B, K, E, LAYERS = 4096, 4096, 1, 2, 8, 8
EB = 2.0  # bf16


def _job(shared: int = 0):  # type: ignore[no-untyped-def]
    wl = TransformerWorkload(name="moe", layers=LAYERS, hidden=H, heads=32, kv_heads=8, ffn_hidden=14336,
                             gated_mlp=True, vocab=32000, seq_len=S, tied_embeddings=False,
                             moe=MoESpec(experts=E, top_k=K, ffn_hidden=2048, shared_experts=shared))
    tr = TrainingSpec(global_batch=16, micro_batch=B, precision="bf16", seq_len=S)
    return build_job(load_cluster("dgx-h100"), wl, tr), tr


def _coll(**strategy):  # type: ignore[no-untyped-def]
    job, tr = _job()
    st = StrategySpec(**strategy)
    g = grid_from_strategy(st, tr, st.tp * st.pp * st.cp * (st.dp or 1), job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    return job, g, model_parallel_comm._mp_collectives(job, g, groups)


def _t(op: str, nbytes: float, ranks: int) -> float:
    network = _job()[0].network
    return float(coll.group_time(op, np.asarray(nbytes), place(float(ranks), 1.0, network)))


def _by_hand(rows: float, ranks: int) -> float:
    """(fwd + bwd) / 4 of the dispatcher's collectives, gathered sizes P R x (bytes a row)."""
    size = ranks * rows
    fwd = (_t("allgather", size * E, ranks) + _t("allgather", size * E * EB, ranks)
           + _t("allgather", size * H * EB, ranks) + _t("reducescatter", size * H * EB, ranks))
    bwd = (_t("reducescatter", size * E * EB, ranks) + _t("reducescatter", size * H * EB, ranks)
           + _t("allgather", size * H * EB, ranks))
    return (fwd + bwd) / 4.0


def test_allgather_dispatch_by_hand_ep4() -> None:
    """tp 1, ep 4: every rank's b s = 4096 tokens gathered over the 4 EP ranks (64 MiB of tokens), no k in it."""
    _, _, c = _coll(tp=1, dp=4, ep=4, moe_allgather_dispatcher=True)
    assert 4 * B * S * H * EB == 128 * 2**20
    assert float(np.ravel(model_parallel_comm.ep_op_mean(c))[0]) == pytest.approx(_by_hand(B * S, 4), rel=1e-12)
    # not the alltoall dispatcher's price of the same layout
    _, _, a2a = _coll(tp=1, dp=4, ep=4)
    mean = model_parallel_comm.ep_op_mean
    assert float(np.ravel(mean(a2a))[0]) != pytest.approx(float(np.ravel(mean(c))[0]), rel=1e-3)


def test_allgather_dispatch_spans_etp_x_ep() -> None:
    """tp = etp = 2 with SP, ep 2: the rank's b s / tp rows over the 4 tp_ep ranks; the alltoall dispatcher's
    expert-TP pair (moe_disp) is not added beside it."""
    job, g, c = _coll(tp=2, dp=2, ep=2, sequence_parallel=True, moe_allgather_dispatcher=True)
    assert float(np.ravel(model_parallel_comm.ep_op_mean(c))[0]) == pytest.approx(_by_hand(B * S / 2, 4), rel=1e-12)
    adj, ext, block = model_parallel_comm._moe_tp_collectives(job, g, c)
    assert float(np.ravel(ext)[0]) == 0.0 and float(np.ravel(block)[0]) == 0.0


def test_allgather_layer_count_four_ops_make_fwd_plus_bwd() -> None:
    """The step counts 4 of ep_op_mean(coll) per MoE layer and micro-batch: the layer's forward + backward traffic."""
    job, g, c = _coll(tp=1, dp=4, ep=4, moe_allgather_dispatcher=True)
    per_layer = 4.0 * _by_hand(B * S, 4)
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(float(LAYERS)), logits_on_stage=True)
    comp = step._overlap_windows(raw, job.overlap_efficiency)
    mp = model_parallel_comm._model_parallel_comm(job, g, comp, c)
    assert float(np.ravel(mp["ep"])[0]) == pytest.approx(LAYERS * per_layer, rel=1e-9)


@pytest.mark.parametrize("other", [{"moe_flex_dispatcher": True}, {"moe_a2a_overlap": True}])
def test_refused_beside_flex_or_a2a_overlap(other: dict[str, bool]) -> None:
    from scalemodel.engine import job as jobmod
    job, tr = _job()
    st = StrategySpec(tp=1, dp=4, ep=4, moe_allgather_dispatcher=True, **other)
    with pytest.raises(InputError, match="allgather"):
        jobmod._check_allgather_dispatcher(job, st)


def test_shared_expert_overlap_refused_with_shared_experts_only() -> None:
    from scalemodel.engine import job as jobmod
    st = StrategySpec(tp=1, dp=4, ep=4, moe_allgather_dispatcher=True, moe_shared_expert_overlap=True)
    jobmod._check_allgather_dispatcher(_job(0)[0], st)  # no shared experts: Megatron-Core raises nothing
    with pytest.raises(InputError, match="moe_shared_expert_overlap"):
        jobmod._check_allgather_dispatcher(_job(1)[0], st)


@pytest.mark.parametrize("text,want", [
    ("--num-experts 8 --moe-token-dispatcher-type allgather", True),
    ("--num-experts 8", True),  # Megatron-Core's default dispatcher (transformer_config.py line 891)
    ("--moe-token-dispatcher-type allgather", True),  # named, the model from --model
    ("--num-experts 8 --moe-token-dispatcher-type alltoall", None),
    ("--num-experts 8 --moe-token-dispatcher-type flex", None),
    ("--micro-batch-size 1", None),  # no MoE model in the file, no dispatcher named
])
def test_megatron_reader_maps_the_flag(tmp_path, text: str, want: bool | None) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.specs.frameworks import read_strategy_file
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --expert-model-parallel-size 4 {text}\n")
    assert read_strategy_file(f).strategy.get("moe_allgather_dispatcher") is want


def test_plan_pins_it_and_prices_it(cli) -> None:  # type: ignore[no-untyped-def]
    """--set strategy.moe_allgather_dispatcher=true: every ranked plan carries it, and its step is predict's."""
    import json
    args = ["-m", "mixtral-8x7b", "-n", "64", "--json"]
    r = cli("plan", *args, "--top", "2", "--set", "strategy.moe_allgather_dispatcher=true",
            "--constraint", "ep=8")
    assert r.code == 0, r.err
    ranked = json.loads(r.out)["ranked"]
    assert ranked and all(p["strategy"]["moe_allgather_dispatcher"] for p in ranked)
    assert not any(p["strategy"]["moe_flex_dispatcher"] or p["strategy"]["moe_a2a_overlap"] for p in ranked)
    r2 = cli("plan", *args, "--top", "1", "--set", "strategy.moe_allgather_dispatcher=true",
             "--constraint", "moe_flex_dispatcher=true")
    assert r2.code == 2 and "moe_flex_dispatcher" in r2.err and "Traceback" not in r2.err


def test_plan_pins_it_beside_shared_expert_overlap_as_predict(cli) -> None:  # type: ignore[no-untyped-def]
    """Megatron-Core refuses moe_shared_expert_overlap beside the allgather dispatcher only where
    moe_shared_expert_intermediate_size is set (transformer_config.py lines 1813-1826 @d98e8a64dd), as predict does
    (test_shared_expert_overlap_refused_with_shared_experts_only): plan ran the pair for Mixtral (no shared
    experts) into a refusal that predict does not make; for a model with shared experts it refuses it."""
    import json
    both = ["--set", "strategy.moe_allgather_dispatcher=true", "--set", "strategy.moe_shared_expert_overlap=true",
            "--constraint", "ep=8"]
    r = cli("plan", "-m", "mixtral-8x7b", "-n", "64", "--json", "--top", "1", *both)
    assert r.code == 0, r.err
    best = json.loads(r.out)["ranked"][0]["strategy"]
    assert best["moe_allgather_dispatcher"] and best["moe_shared_expert_overlap"]
    r2 = cli("plan", "-m", "nemotron-3-nano", "-n", "64", "--json", "--top", "1", *both)
    assert r2.code == 2 and "moe_shared_expert_overlap" in r2.err and "Traceback" not in r2.err


def test_recomputed_forward_runs_the_forward_gathers() -> None:
    """Selective recompute of moe re-runs the dispatcher's forward (token_dispatch's three all-gathers and
    token_combine's reduce-scatter), not the mean of its forward and backward: per MoE layer fwd + bwd + fwd. It was
    priced 6 x the mean, the routing map's gather (no backward: under no_grad) counted 1.5 times, not twice."""
    job, tr = _job()
    st = StrategySpec(tp=1, dp=4, ep=4, moe_allgather_dispatcher=True, recompute="selective",
                      recompute_modules="moe")
    g = grid_from_strategy(st, tr, 4, job)
    groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
    c = model_parallel_comm._mp_collectives(job, g, groups)
    raw = layer_compute._compute_per_microbatch(job, g, np.asarray(float(LAYERS)), logits_on_stage=True)
    mp = model_parallel_comm._model_parallel_comm(job, g, step._overlap_windows(raw, job.overlap_efficiency), c)
    size = 4 * B * S
    fwd = (_t("allgather", size * E, 4) + _t("allgather", size * E * EB, 4)
           + _t("allgather", size * H * EB, 4) + _t("reducescatter", size * H * EB, 4))
    bwd = (_t("reducescatter", size * E * EB, 4) + _t("reducescatter", size * H * EB, 4)
           + _t("allgather", size * H * EB, 4))
    assert float(np.ravel(mp["ep"])[0]) == pytest.approx(LAYERS * (2 * fwd + bwd), rel=1e-9)
