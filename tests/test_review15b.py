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
