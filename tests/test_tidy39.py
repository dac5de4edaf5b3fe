"""tidy39: structural fixes of round 38's code that change no output, and a reference for hybrid deferred wgrad.

(1) A pinned recompute sub-field refused for the recompute mode it runs under carries that field on the refusal
(errors.InputError.needs_recompute, set by specs.training's rule through specs.base.field_error), which plan's
_build_specs keys on; it compared the refusal's ``where`` with the two places it expected the field written.
(6) The deferred output-layer wgrad's flush idle of a hybrid (Mamba) pattern whose ranks hold different kinds: each
rank's own backward (its own layers, Megatron's split of the pattern), computed rank by rank here.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from scalemodel.api import cluster_spec, strategy_spec, training_spec, workload_spec
from scalemodel.cost import pipeline
from scalemodel.cost.placement import parallel_groups
from scalemodel.engine import layer_compute, step
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.errors import InputError
from scalemodel.specs.base import SpecError

# --- (1) the refusal's marker ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "marked"), [
    # StrategySpec's rules that name recompute (specs.training): the field refused for the mode it runs under
    ({"recompute_layers": 2}, "recompute_layers"),
    ({"recompute_layers": 2, "recompute": "selective"}, "recompute_layers"),
    ({"recompute_method": "uniform"}, "recompute_method"),
    ({"recompute_method": "uniform", "recompute": "selective"}, "recompute_method"),
    ({"recompute_modules": "core_attn"}, "recompute_modules"),
    ({"recompute_modules": "core_attn", "recompute": "full"}, "recompute_modules"),
    # refusals of other rules carry no marker: a chunk of 0 layers under uniform is refused at recompute full too
    ({"recompute": "full", "recompute_layers": 0, "recompute_method": "uniform"}, ""),
    ({"tp": 0}, ""),
    ({"recompute": "bogus"}, "")])
def test_a_refusal_for_the_recompute_mode_names_its_field(fields: dict, marked: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError) as err:
        strategy_spec(**fields)
    assert err.value.needs_recompute == marked, err.value
    # located further (InputError.at, SpecError.located) it keeps the marker, and the text does not show it
    assert err.value.at("here").needs_recompute == marked
    assert "\x1d" not in str(err.value) and "recompute\x1d" not in err.value.allowed
    assert SpecError("x", ("a",), needs_recompute=marked).located(("b",)).needs_recompute == marked


def _refusal(cli, *args: str) -> str:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 2 and r.err.count("\n") == 1, (r.code, r.err)
    return r.err.strip()


_PLAN = ("plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32", "--top", "2", "--json")


@pytest.mark.parametrize(("item", "mode"), [("recompute_layers=2", "full"), ("recompute_method=uniform", "full"),
                                            ("recompute_modules=core_attn", "selective")])
def test_plan_keys_the_pinned_field_on_the_marker(cli, item: str, mode: str) -> None:  # type: ignore[no-untyped-def]
    """The route the marker serves: plan validates the pin at the mode it needs and searches that mode only; where
    recompute is pinned too (the refusal names both places) the spec's refusal stands, as predict's."""
    r = cli(*_PLAN, "--set", f"strategy.{item}")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert all(p["strategy"]["recompute"] == mode for p in doc["ranked"]) and doc["ranked"]
    other = "none"
    line = _refusal(cli, *_PLAN, "--set", f"strategy.{item}", "--set", f"strategy.recompute={other}")
    assert line.startswith(f"error: --set strategy.{item.split('=')[0]}: "), line
    assert f"needs recompute: {mode} (got '{other}')" in line, line


# --- (6) a hybrid pattern's deferred-wgrad flush idle, rank by rank ----------------------------------------------

MAMBA = {"state_dim": 16, "groups": 1, "head_dim": 32, "heads": 64}


def _hybrid_job(pattern: str):  # type: ignore[no-untyped-def]
    model = {"kind": "transformer", "name": "hy", "hidden": 1024, "heads": 8, "kv_heads": 4, "ffn_hidden": 4096,
             "vocab": 32000, "seq_len": 2048, "gated_mlp": True, "dropout": False, "layers": len(pattern),
             "hybrid": {"pattern": pattern, **({"mamba": MAMBA} if "M" in pattern else {})}}  # refused without M
    return build_job(cluster_spec("dgx-h100"), workload_spec(model), training_spec(global_batch=16, micro_batch=1))


def _grid(job, pp: int, recompute: str = "none"):  # type: ignore[no-untyped-def]
    return grid_from_strategy(strategy_spec(tp=1, pp=pp, schedule="1f1b", defer_embedding_wgrad=True,
                                            recompute=recompute), training_spec(global_batch=16, micro_batch=1),
                              pp, job)


def _engine_idle(job, g, monkeypatch) -> float:  # type: ignore[no-untyped-def]
    """The flush idle evaluate hands cost.pipeline.deferred_wgrad_idle: (p - 2) b_middle + b_first (v = 1)."""
    seen = []
    idle = pipeline.deferred_wgrad_idle

    def spy(pp, v, b_first, b_mid):  # type: ignore[no-untyped-def]
        seen.append((np.asarray(pp, dtype=float), np.asarray(b_first), np.asarray(b_mid)))
        return idle(pp, v, b_first, b_mid)
    monkeypatch.setattr(pipeline, "deferred_wgrad_idle", spy)
    step.evaluate(job, g)
    (pp, b_first, b_mid), = seen
    return float((np.maximum(pp - 2.0, 0.0) * b_mid + b_first).ravel()[0])


def _reference_idle(pattern: str, pp: int, recompute: str = "none") -> float:
    """The last micro-batch's backward passing ranks 0 .. p-2 after the last rank's: sum of their backward seconds,
    each rank priced as a model made of its own layers. Megatron's hybrid model takes the layer-type list as the
    pattern is written (megatron/core/ssm/mamba_hybrid_layer_allocation.py ``allocate_layers``, override pattern at
    NVIDIA/Megatron-LM@00caa53af3) and gives pipeline rank r the contiguous slice
    ``layer_type_list[r L/p : (r+1) L/p]`` (megatron/core/ssm/mamba_block.py ``_select_layers_for_pipeline_parallel``);
    a model whose pattern is that slice repeated p times has exactly the slice's kinds on a stage of L / p layers."""
    n = len(pattern) // pp
    total = 0.0
    for r in range(pp - 1):
        own = pattern[r * n:(r + 1) * n]
        job = _hybrid_job(own * pp)
        g = _grid(job, pp, recompute)
        groups = parallel_groups(job.network, tp=g.tp, cp=g.cp, dp=g.dp, ep=g.ep, pp=g.pp, etp=g.etp, layout=g.layout)
        with layer_compute.shared_layer_pieces():
            rank = step._stage(job, g, groups, np.full(1, float(n)), False, embedding=r == 0)
        total += float(step._stage_forward_backward(rank, end=r == 0, first=r == 0)[1].ravel()[0])
    return total


@pytest.mark.parametrize(("pattern", "pp", "recompute"), [
    ("M-M*-*MMM*--", 4, "none"),      # ranks M-M | *-* | MMM | *--: the middle ranks' kinds differ from each other
    ("M-M*-*MMM*--", 4, "full"),
    ("MMMM**--MMMM", 3, "none"),      # MMMM | **-- | MMMM: rank 0 all Mamba, the middle rank no Mamba
    ("*MMM-MMM*---MMMM", 4, "selective")])
def test_hybrid_deferred_wgrad_idle_is_each_ranks_own_backward(monkeypatch, pattern: str, pp: int,
                                                               recompute: str) -> None:
    job = _hybrid_job(pattern)
    assert _engine_idle(job, _grid(job, pp, recompute), monkeypatch) == pytest.approx(
        _reference_idle(pattern, pp, recompute), rel=1e-9)

