"""Megatron-Core refuses to train an MoE model with tensor parallelism and sequence parallelism off
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/moe_layer.py ``MoELayer.forward`` lines 636-640:
``if self.training and self.attn_tp_group.size() > 1 and not self.config.sequence_parallel: raise ValueError``).
predict refuses such a strategy (exit 2, at strategy.sequence_parallel) and plan counts such candidates infeasible
(``moe_sp_required``) and never ranks one, only for Megatron-Core's layer (layer_impl megatron_te); torchtitan and the
other layers keep pricing it (docs/model.md#tp-comm-moe), a dense model and tp 1 are untouched."""

from __future__ import annotations

import json

import numpy as np

from scalemodel.choices import LayerImpl
from scalemodel.engine.job import build_job, moe_sp_refused
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import TrainingSpec

_MOE = ["-c", "dgx-h100", "-m", "mixtral-8x7b", "-n", "64"]
_DENSE = ["-c", "dgx-h100", "-m", "llama3-8b", "-n", "64"]
_TITAN = ["--set", "strategy.layer_impl=torchtitan"]


def _job(model: str):  # type: ignore[no-untyped-def]
    return build_job(load_cluster("dgx-h100"), load_workload(model),
                     TrainingSpec(global_batch=256, micro_batch=1, precision="bf16", seq_len=4096))


def test_refused_where_megatron_core_raises_by_hand() -> None:
    """The rule, case by case: refused exactly at tp > 1, SP off, megatron_te, on an MoE model."""
    job = _job("mixtral-8x7b")
    tp = np.array([1, 2, 8, 2, 2, 2, 4])
    sp = np.array([False, False, False, True, False, False, False])
    te, titan, legacy = int(LayerImpl.MEGATRON_TE), int(LayerImpl.TORCHTITAN), int(LayerImpl.MEGATRON_LEGACY)
    impl = np.array([te, te, te, te, titan, legacy, int(LayerImpl.EAGER)])
    assert list(moe_sp_refused(job, tp, sp, impl)) == [False, True, True, False, False, False, False]
    assert not np.any(moe_sp_refused(_job("llama3-8b"), tp, sp, impl))  # no MoE layer: nothing to refuse


def test_predict_refuses_moe_with_tp_and_no_sequence_parallel(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", *_MOE, "--tp", "2")
    assert r.code == 2, r.err
    assert "Traceback" not in r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1, r.err
    err = lines[0]
    assert "strategy.sequence_parallel" in err and "tp 2" in err and "Megatron-Core" in err, err
    assert "sequence_parallel true" in err and "tp 1" in err, err  # what is allowed


def test_predict_prices_the_allowed_neighbours(cli) -> None:  # type: ignore[no-untyped-def]
    """SP on, tp 1, a torchtitan layer, and a dense model at tp 2 without SP are priced as before."""
    for args in (["--tp", "2", "--sequence-parallel"], ["--tp", "1"], ["--tp", "2", *_TITAN]):
        r = cli("predict", *_MOE, *args, "--json")
        assert r.code == 0, (args, r.err)
    assert cli("predict", *_DENSE, "--tp", "2", "--json").code == 0


def test_plan_marks_the_candidates_infeasible_and_never_ranks_one(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", *_MOE, "--top", "50", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["infeasible_by_reason"].get("moe_sp_required", 0) > 0
    assert out["ranked"]
    for p in out["ranked"]:
        s = p["strategy"]
        assert s["tp"] == 1 or s["sequence_parallel"], s
    # held to tp 2 without SP, no candidate is left, and the reason is this one
    r = cli("plan", *_MOE, "--constraint", "tp=2,sequence_parallel=false", "--json")
    out = json.loads(r.out) if r.out.strip() else {}
    assert not out.get("ranked"), r.out[-400:]
    assert out["infeasible_by_reason"].get("moe_sp_required", 0) > 0, r.out[-400:]


def test_plan_leaves_torchtitan_dense_and_tp1_alone(cli) -> None:  # type: ignore[no-untyped-def]
    for args in ([*_MOE, *_TITAN], _DENSE, [*_MOE, "--constraint", "tp=1"]):
        r = cli("plan", *args, "--top", "50", "--json")
        assert r.code == 0, (args, r.err)
        out = json.loads(r.out)
        assert "moe_sp_required" not in out["infeasible_by_reason"], args
        assert out["ranked"]
    # torchtitan at tp 2 without SP is a candidate plan ranks
    r = cli("plan", *_MOE, *_TITAN, "--constraint", "tp=2,sequence_parallel=false", "--json")
    assert r.code == 0 and json.loads(r.out)["ranked"], r.err
