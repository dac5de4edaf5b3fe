"""The flex dispatcher runs no expert-TP all-gather / reduce-scatter (docs/model.md#tp-comm-moe): Megatron-Core's
MoEFlexTokenDispatcher folds expert TP into its dispatch over the tp_ep group (NVIDIA/Megatron-LM@d98e8a64dd
megatron/core/transformer/moe/token_dispatcher.py lines 1831-1856), whose etp copies the hierarchical dispatch prices
(scalemodel/cost/ep_dispatch.py). Merging moetp (the alltoall dispatcher's expert-TP pair, priced also for flex as a
stand-in for those copies) with smallfix15b (the copies priced in the flex dispatch) counted them twice; the pair
belongs to the alltoall dispatcher only."""

from __future__ import annotations

import numpy as np

from scalemodel.engine import model_parallel_comm
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload


def _collectives(flex: bool, etp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    tr = TrainingSpec(global_batch=1024)
    job = build_job(load_cluster("dgx-h100"), load_workload("deepseek-v3"), tr)
    st = StrategySpec(tp=2, pp=8, ep=16, etp=etp, dp=16, sequence_parallel=True, moe_flex_dispatcher=flex)
    g = grid_from_strategy(st, tr, 256, job)
    coll = {"tp": np.asarray(0.004), "moe_disp": np.asarray(0.003)}
    adj, ext, block = model_parallel_comm._moe_tp_collectives(job, g, coll)
    return adj, ext, block, coll


def test_alltoall_dispatcher_runs_the_expert_tp_pair_at_etp_2() -> None:
    _, ext, block, coll = _collectives(flex=False, etp=2)
    # shared experts (DeepSeek-V3 has one): their pair per, plus the dispatcher's pair d, both in the block
    assert float(block) == float(coll["tp"]) + float(coll["moe_disp"])
    assert float(ext) == float(coll["moe_disp"])


def test_flex_dispatcher_runs_no_expert_tp_pair() -> None:
    _, ext, block, coll = _collectives(flex=True, etp=2)
    assert float(block) == float(coll["tp"])  # the shared experts' pair only
    assert float(ext) == 0.0
