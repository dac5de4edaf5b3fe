"""Megatron-Core's unfused token permutations (strategy moe_permute_fusion false; docs/model.md#moe-permute-fusion).

Counts are built here kernel by kernel from NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/moe/moe_utils.py
(``permute``: ``tokens.index_select(0, sorted_indices)``; ``unpermute``: ``torch.zeros(restore_shape)`` then
``scatter_add_``; their autograd gradients ``zeros(D).index_add_`` and ``grad.gather``) and TE's fused kernels (read
each source row once, write each copy once, and back), not from the implementation's formula.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ROOT, load_yaml, script_module
from grid_helpers import HBM as H100_HBM
from grid_helpers import TINY_MOE

from scalemodel.cost import compute
from scalemodel.cost.transformer import shape
from scalemodel.engine import layer_compute
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster

H, E, K, FE = 1024, 8, 2, 256
SH = shape(layers=2, hidden=H, heads=8, vocab=1000, gated_mlp=True, ffn_hidden=2048, moe_experts=E, moe_top_k=K,
           moe_ffn_hidden=FE)
T, TP, EP = 4096, 2, 2  # tp 2 with SP: the rank routes n = 2048 tokens; ep 2: L = 4 local experts of 8
n = T / TP
R = 1 * T * K / TP  # etp 1: the 4096 rows the exchange brings
G = 1 * EP * n  # the tp_ep group's tokens (allgather)
N = G * (1 - math.comb(E - 4, K) / math.comb(E, K))  # those with one of their 2 experts among the 4 here: x 22/28


def _unfused_pass(S: float, C: float, D: float) -> dict[str, float]:
    """One forward of an unfused permute (S source rows, C copies) and unpermute (back into D rows), op by op."""
    return {"index_select: read C copies' source rows": C, "index_select: write C": C,
            "zeros(D)": D, "scatter_add_: read C": C, "scatter_add_: S rows read": S, "scatter_add_: S rows written": S}


def _unfused_backward(S: float, C: float, D: float) -> dict[str, float]:
    """The backward: unpermute's (scatter_add_'s source gradient, a gather) then permute's (index_select's: zeros
    and index_add_)."""
    return {"gather: read C": C, "gather: write C": C,
            "zeros(D)": D, "index_add_: read C": C, "index_add_: S rows read": S, "index_add_: S rows written": S}


def _fused_pass(S: float, C: float, D: float) -> float:
    """TE's moe_permute (read S, write C) and moe_unpermute (read C, write D)."""
    return S + C + C + D


def test_unfused_backward_moves_what_its_forward_does() -> None:
    for S, C, D in ((n, n * K, n), (N, R, N), (N, R, G)):
        assert sum(_unfused_backward(S, C, D).values()) == sum(_unfused_pass(S, C, D).values())


@pytest.mark.parametrize("code,S,C,D,sort", [
    (compute.MOE_DISPATCH_ALLTOALL, n, n * K, n, 4 * R),  # + sort_chunks_by_idxs there and back (L = 4 > 1)
    (compute.MOE_DISPATCH_FLEX, N, R, N, 0.0),  # DeepEP: the received tokens into the local experts' rows
    (compute.MOE_DISPATCH_ALLGATHER, N, R, G, 0.0),  # the gathered tokens' local copies, unpermuted into G rows
])
def test_permutation_bytes_both_paths_by_hand(code: int, S: float, C: float, D: float, sort: float) -> None:
    """alltoall: fused 2 x 2048 x 3 + 16384 = 28672 rows, unfused 4096 + 4096 + 2048 + 4096 + 2 x 2048 + 16384 =
    34816 (+ n (k + 1) = 6144); flex N + R more; allgather N + R more. 2 bytes x 1024 wide a row."""
    fused = compute.moe_permutation_bytes(SH, tokens=T, own=n, tp=TP, ep=EP, etp=1, dispatch=code)
    unfused = compute.moe_permutation_bytes(SH, tokens=T, own=n, tp=TP, ep=EP, etp=1, dispatch=code, fused=False)
    assert float(fused) == pytest.approx(2 * H * (_fused_pass(S, C, D) + sort), rel=1e-12)
    assert float(unfused) == pytest.approx(2 * H * (sum(_unfused_pass(S, C, D).values()) + sort), rel=1e-12)
    if code == compute.MOE_DISPATCH_ALLTOALL:
        assert float(unfused) == 2 * H * 34816 and float(fused) == 2 * H * 28672


def test_broadcasts_over_a_fusion_array() -> None:
    got = compute.moe_permutation_bytes(SH, tokens=T, own=n, tp=TP, ep=EP, fused=np.array([True, False]))
    assert got.shape == (2,) and float(got[1] - got[0]) == pytest.approx(2 * H * n * (K + 1), rel=1e-12)


def test_layer_forward_and_backward_each_move_the_extra_rows() -> None:
    """The layer's forward and backward memory time each grow by the unfused pass's n (k + 1) rows (all-to-all)."""
    kw = dict(micro_batch=2, seq_len=2048, tp=TP, ep=EP, etp=1, sequence_parallel=True, moe=True,
              flash_attention=True, peak_flops=1000e12, memory_bandwidth=3e12, memory_efficiency=0.85)
    on, off = (compute.layer_compute_time(SH, moe_permute_fusion=f, **kw) for f in (True, False))
    extra = 2 * H * n * (K + 1) / (3e12 * 0.85)
    assert float(off.forward_memory - on.forward_memory) == pytest.approx(extra, rel=1e-9)
    assert float(off.backward - on.backward) == pytest.approx(extra, rel=1e-9)


@pytest.mark.parametrize("backend,moves", [("deepep", True), ("hybridep", False)])
def test_step_flex_backends(backend: str, moves: bool) -> None:
    """tiny-moe (3 MoE layers of 4; E 64, k 4, h 1024), 4096 tokens a micro-batch, tp 1, ep 8 (L = 8): DeepEP's
    permute follows moe_permute_fusion (N + R rows more a layer: N = 8 x 4096 (1 - C(56, 4) / C(64, 4)), R = 16384);
    HybridEP permutes in its own kernel either way."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), TINY_MOE, tr)
    layers = np.asarray([4.0])
    grids = [grid_from_strategy(StrategySpec(dp=8, ep=8, moe_flex_dispatcher=True, moe_flex_backend=backend,
                                             moe_permute_fusion=f), tr, 8, job) for f in (True, False)]
    fwd = [float(layer_compute._compute_per_microbatch(job, g, layers)["forward"][0]) for g in grids]
    N8 = 8 * 4096 * (1 - math.comb(56, 4) / math.comb(64, 4))
    want = 3 * 2 * 1024 * (N8 + 16384) / H100_HBM if moves else 0.0
    assert fwd[1] - fwd[0] == pytest.approx(want, rel=1e-6, abs=1e-15)


def test_step_alltoall_unfused() -> None:
    """The all-to-all dispatcher, tp 1: 4096 tokens x (k + 1) = 20480 rows more a MoE layer's forward."""
    tr = TrainingSpec(global_batch=16, micro_batch=2, moe_rank_imbalance=1.0)
    job = build_job(load_cluster("dgx-h100"), TINY_MOE, tr)
    layers = np.asarray([4.0])
    grids = [grid_from_strategy(StrategySpec(dp=8, ep=8, moe_permute_fusion=f), tr, 8, job) for f in (True, False)]
    fwd = [float(layer_compute._compute_per_microbatch(job, g, layers)["forward"][0]) for g in grids]
    assert fwd[1] - fwd[0] == pytest.approx(3 * 2 * 1024 * 4096 * 5 / H100_HBM, rel=1e-6)


@pytest.mark.parametrize("text,want", [
    ("--num-experts 8", False),  # Megatron-Core's default: unfused
    ("--num-experts 8 --moe-permute-fusion", True),
    ("--moe-token-dispatcher-type alltoall", False),  # an MoE launch, the model from --model
    # review17f: the prefix's --expert-model-parallel-size 4 makes it an MoE launch (Megatron-Core raises on ep > 1
    # without num_moe_experts, transformer_config.py L1595 at d98e8a64dd): unfused, not the spec's default
    ("--micro-batch-size 1", False),
])
def test_megatron_reader(tmp_path, text: str, want: bool | None) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.specs.frameworks import read_strategy_file
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --expert-model-parallel-size 4 {text}\n")
    got = read_strategy_file(f)
    assert got.strategy.get("moe_permute_fusion") is want
    assert not any("moe-permute-fusion" in u for u in got.unused)


def test_every_validated_moe_row_has_a_stated_setting() -> None:
    """Each MoE row's recipe family is one whose setting scripts/validate_training.py states (True), or the row is
    listed as unfused with its reason. The script and the cases file are the session's (conftest.script_module,
    load_yaml: parsed once, a copy each), not an import and a pure-Python parse of their own (~3.5 s of CPU, ci33)."""
    vt = script_module("validate_training")
    cases = load_yaml(ROOT / "validation" / "training_cases.yaml")
    cases = cases["cases"] if isinstance(cases, dict) else cases
    moe = [c["id"] for c in cases
           if isinstance(c.get("model"), dict) and (c["model"].get("experts") or c["model"].get("moe"))]
    megatron = [i for i in moe if i.split("_")[0] in vt.MEGATRON_CORE]
    assert "nemo2502_b200_mixtral_8x7b" in megatron
    stated = vt.RECIPE_MOE_PERMUTE_FUSION_TRUE_SOURCES
    for i in megatron:
        case = next(c for c in cases if c["id"] == i)
        assert "moe_permute_fusion" in (case.get("framework") or {}) or i.split("_")[0] in stated, i


def _predict(cli, *args: str) -> dict:  # type: ignore[no-untyped-def]
    import json
    r = cli("predict", "-c", "dgx-h100", "-n", "64", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_unpriced_setting_is_said(cli) -> None:  # type: ignore[no-untyped-def]
    """false on a dense model, or with HybridEP, prices nothing and says so; on an MoE all-to-all run it prices."""
    off = ["--set", "strategy.moe_permute_fusion=false"]
    dense = _predict(cli, "-m", "llama3-8b", *off)
    assert "strategy.moe_permute_fusion = false is not priced: the model has no MoE layers" in dense["warnings"]
    moe = ["-m", "mixtral-8x7b", "--ep", "8"]
    a2a, a2a_off = _predict(cli, *moe), _predict(cli, *moe, *off)
    assert a2a_off["step_time_s"] > a2a["step_time_s"]
    assert not any("moe_permute_fusion" in w for w in a2a_off["warnings"])
    hy = [*moe, "--set", "strategy.moe_flex_dispatcher=true", "--set", "strategy.moe_flex_backend=hybridep"]
    h, h_off = _predict(cli, *hy), _predict(cli, *hy, *off)
    assert h_off["step_time_s"] == h["step_time_s"]
    assert any("HybridEP permutes the tokens in its own kernel" in w for w in h_off["warnings"])
