"""Megatron-Core refuses to train an MoE model with tensor parallelism and sequence parallelism off
(NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/moe_layer.py ``MoELayer.forward`` lines 636-640:
``if self.training and self.attn_tp_group.size() > 1 and not self.config.sequence_parallel: raise ValueError``).
predict refuses such a strategy (exit 2, at strategy.sequence_parallel) and plan counts such candidates infeasible
(``moe_sp_required``) and never ranks one, only for Megatron-Core's layer (layer_impl megatron_te); torchtitan and the
other layers keep pricing it (docs/model.md#tp-comm-moe), a dense model and tp 1 are untouched. An unset
sequence_parallel (the spec's null) on such a layout is priced on, Megatron-Core's only trainable choice, with a notice
(docs/model.md#moe-sp-required)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import scalemodel
from scalemodel.choices import LayerImpl
from scalemodel.engine.job import build_job, moe_sp_refused, resolve_sequence_parallel
from scalemodel.errors import InputError
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


_NO_SP = ["--set", "strategy.sequence_parallel=false"]


def test_predict_refuses_moe_with_tp_and_sequence_parallel_false(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", *_MOE, "--tp", "2", *_NO_SP)
    assert r.code == 2, r.err
    assert "Traceback" not in r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1, r.err
    err = lines[0]
    assert "--set strategy.sequence_parallel" in err and "tp 2" in err and "Megatron-Core" in err, err
    assert "sequence_parallel true or unset" in err and "tp 1" in err and "layer_impl" in err, err  # what is allowed


def test_a_strategy_file_and_the_python_api_are_refused_too(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("strategy:\n  tp: 4\n  sequence_parallel: false\n")
    r = cli("predict", *_MOE, "--strategy", str(f))
    assert r.code == 2 and "s.yaml: strategy.sequence_parallel" in r.err and "tp 4" in r.err, r.err
    r = cli("scale", "-c", "dgx-h100", "-m", "mixtral-8x7b", "--gpus", "64,128", "--tp", "2",
            "--no-sequence-parallel")
    assert r.code == 2 and "sequence_parallel" in r.err and "Megatron-Core" in r.err, r.err
    with pytest.raises(InputError, match="sequence_parallel false"):
        scalemodel.predict("dgx-h100", "mixtral-8x7b", 64, global_batch=256, tp=2, sequence_parallel=False)


def test_unset_is_priced_on_with_a_notice(cli) -> None:  # type: ignore[no-untyped-def]
    """Unset (no --sequence-parallel, no --set) on an MoE model at tp 2 under Megatron-Core: the step is the SP-on
    step, bit for bit, and one warning line says why; given true, no notice."""
    unset = cli("predict", *_MOE, "--tp", "2", "--json")
    on = cli("predict", *_MOE, "--tp", "2", "--sequence-parallel", "--json")
    assert unset.code == 0 and on.code == 0, unset.err + on.err
    u, o = json.loads(unset.out), json.loads(on.out)
    assert u["step_time_s"] == o["step_time_s"] and u["breakdown_s"] == o["breakdown_s"]
    assert u["strategy"]["sequence_parallel"] is True
    notes = [w for w in u["warnings"] if "sequence_parallel is unset" in w]
    assert len(notes) == 1 and "priced on" in notes[0] and "--sequence-parallel" in notes[0], u["warnings"]
    assert not any("sequence_parallel" in w for w in o["warnings"]), o["warnings"]
    # the memory command prices and echoes the same
    m = json.loads(cli("memory", *_MOE, "--tp", "2", "--json").out)
    assert m["inputs"]["sequence_parallel"] is True


def test_unset_stays_off_where_nothing_requires_it(cli) -> None:  # type: ignore[no-untyped-def]
    """tp 1 and a dense model at tp 2: unset is off, as before, with no notice (the step equals the one with
    sequence_parallel false given). A torchtitan layer at tp 2 is priced on since session 17, torchtitan's default
    (tests/test_lead17.py)."""
    for model_args, extra in ((_MOE, ["--tp", "1"]), (_DENSE, ["--tp", "2"])):
        unset = cli("predict", *model_args, *extra, "--json")
        off = cli("predict", *model_args, *extra, *_NO_SP, "--json")
        assert unset.code == 0 and off.code == 0, (extra, unset.err, off.err)
        u, f = json.loads(unset.out), json.loads(off.out)
        assert u["strategy"]["sequence_parallel"] is False and u["step_time_s"] == f["step_time_s"], extra
        assert not any("sequence_parallel is unset" in w for w in u["warnings"]), u["warnings"]


def test_resolve_sequence_parallel_by_hand() -> None:
    from scalemodel.specs.training import StrategySpec
    moe, dense = _job("mixtral-8x7b"), _job("llama3-8b")
    assert StrategySpec().sequence_parallel is None  # unset is told apart from false
    cases = [(moe, {"tp": 2}, True), (moe, {"tp": 2, "sequence_parallel": False}, False),
             (moe, {"tp": 1}, False), (moe, {"tp": 2, "layer_impl": "torchtitan"}, True),
             (dense, {"tp": 2, "layer_impl": "torchtitan"}, True),
             (dense, {"tp": 1, "layer_impl": "torchtitan"}, False),
             (dense, {"tp": 2, "layer_impl": "torchtitan", "sequence_parallel": False}, False),
             (moe, {"tp": 2, "layer_impl": "megatron_legacy"}, False), (dense, {"tp": 8}, False),
             (dense, {"tp": 8, "sequence_parallel": True}, True)]
    for job, fields, want in cases:
        assert resolve_sequence_parallel(job, StrategySpec(**fields)).sequence_parallel is want, fields


def test_predict_prices_the_allowed_neighbours(cli) -> None:  # type: ignore[no-untyped-def]
    """SP on, tp 1, a torchtitan layer without SP, and a dense model at tp 2 without SP are priced."""
    # each priced as given: the echoed (tp, sequence_parallel) is the one asked for (ux37)
    for args, want in ((["--tp", "2", "--sequence-parallel"], (2, True)), (["--tp", "1", *_NO_SP], (1, False)),
                       (["--tp", "2", *_TITAN, *_NO_SP], (2, False))):
        r = cli("predict", *_MOE, *args, "--json")
        assert r.code == 0, (args, r.err)
        s = json.loads(r.out)["strategy"]
        assert (s["tp"], s["sequence_parallel"]) == want, args
    r = cli("predict", *_DENSE, "--tp", "2", *_NO_SP, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["strategy"]["sequence_parallel"] is False


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


def test_scale_best_held_to_sp_off_names_the_reason(cli) -> None:  # type: ignore[no-untyped-def]
    """scale --best pinned to tp 2 without SP on an MoE model: no candidate is left, and the one-line error says
    why (it was "no feasible strategy" alone)."""
    r = cli("scale", "-c", "dgx-h100", "-m", "mixtral-8x7b", "--gpus", "64", "--tp", "2", "--no-sequence-parallel",
            "--best")
    assert r.code == 2 and "Traceback" not in r.err, r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and "no feasible strategy" in lines[0] and "moe_sp_required" in lines[0], r.err
