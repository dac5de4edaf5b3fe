"""Every InputError says what was wrong AND what is allowed (DESIGN: ``error: <where>: <what>; <what is allowed>``).

Two checks: every ``InputError(...)`` call in the package passes a non-empty ``allowed=`` (read from the source, so a
new one without it fails here), and the cost-model checks, which the CLI's own option checks usually reach first,
give the full one-line message when a library caller triggers them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalemodel.cost import (
    balance,
    checks,
    compression,
    compute,
    efficiency,
    ps,
    staleness,
    stragglers,
    sync,
    transformer,
)
from scalemodel.errors import InputError

PACKAGE = Path(__file__).resolve().parents[1] / "scalemodel"


def _calls_without_allowed() -> list[str]:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name != "InputError":
                continue
            allowed = next((k.value for k in node.keywords if k.arg == "allowed"), None)
            empty = isinstance(allowed, ast.Constant) and not allowed.value
            if allowed is None or empty:
                missing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return missing


def test_every_input_error_names_what_is_allowed() -> None:
    assert _calls_without_allowed() == []


def _small_shape(**kw: Any) -> transformer.Shape:
    return transformer.shape(**{"layers": 2, "hidden": 8, "heads": 2, "vocab": 10, **kw})


BAD: list[tuple[str, Callable[[], Any]]] = [
    ("speeds", lambda: balance.ideal_makespan([1.0], [0.0])),
    ("work", lambda: balance.ideal_makespan([-1.0], [1.0])),
    ("task_work", lambda: balance.dynamic_makespan([1.0], [1.0], 0.0)),
    ("overhead_s", lambda: balance.dynamic_makespan([1.0], [1.0], 1.0, overhead_s=-1.0)),
    ("balance", lambda: balance.noisy_dynamic_makespan(0, 4, 1.0)),
    ("sequence_lengths", lambda: balance.length_cost_cv([])),
    ("micro_batch", lambda: balance.length_cost_cv([1.0, 2.0], 0.5)),
    ("x", lambda: checks.positive("x", 0.0)),
    ("x", lambda: checks.nonnegative("x", -1.0)),
    ("x", lambda: checks.fraction("x", 2.0)),
    ("ranks", lambda: compression.allreduce_compressed_time(0, 1e6, 1e9)),
    ("bandwidth", lambda: compression.allreduce_compressed_time(4, 1e6, 0.0)),
    ("size", lambda: compression.allreduce_compressed_time(4, -1.0, 1e9)),
    ("ratio", lambda: compression.allreduce_compressed_time(4, 1e6, 1e9, 0.5)),
    ("density", lambda: compression.allgather_sparse_time(4, 1e6, 1e9, 2.0)),
    ("index_overhead", lambda: compression.allgather_sparse_time(4, 1e6, 1e9, 0.1, index_overhead=0.5)),
    ("break_even", lambda: compression.sparse_break_even_density(1)),
    ("compute_efficiency.gemm_half_dim", lambda: compute.gemm_efficiency(8, 8, 8, gemm_half_dim=-1.0)),
    ("memory_time", lambda: compute.memory_time(-1.0, memory_bandwidth=1e12)),
    ("sync_efficiency", lambda: efficiency.time_to_target(1e3, 64, 128, 1.0, sync_efficiency=0.0)),
    ("b_big", lambda: efficiency.noise_scale_from_norms(64, 32, 1.0, 0.5)),
    ("workers", lambda: ps.allreduce_ring_time(0, 1e6, 1e9)),
    ("latency", lambda: ps.allreduce_ring_time(4, 1e6, 1e9, -1.0)),
    ("servers", lambda: ps.ps_time(4, 0, 1e6, 1e9)),
    ("servers", lambda: ps.byteps_split(2, 4, 1e6)),
    ("workers", lambda: ps.ps_beats_allreduce_servers(1)),
    ("cv_shard", lambda: ps.shard_fmax_heuristic(4, -0.1)),
    ("shards", lambda: ps.shard_fmax_from_sizes([], 4)),
    ("partition_bytes", lambda: ps.shard_fmax_from_sizes([1e6], 4, partition_bytes=0.0)),
    ("step_mean_s", lambda: ps.async_ps_rate(4, -1.0, 2, 1e6, 1e9)),
    ("partition_bytes", lambda: ps.round_robin_fmax(4, 1e6, 0.0)),
    ("server_bw", lambda: ps.ps_exchange(4, 2, 1e6, 1e9, 0.0)),
    ("server_memory_bw", lambda: ps.ps_exchange(4, 2, 1e6, 1e9, server_memory_bw=0.0)),
    ("chunks", lambda: ps.ps_exchange(4, 2, 1e6, 1e9, chunks=0.5)),
    ("points", lambda: staleness.fit_kappa([1.0, 2.0], [1.1])),
    ("points", lambda: staleness.fit_kappa([-1.0], [1.1])),
    ("mean", lambda: stragglers.expected_max(8, 0.0, 0.1)),
    ("cv", lambda: stragglers.expected_max(8, 1.0, -0.1)),
    ("cv", lambda: stragglers.expected_max(8, 1.0, 2e14, "weibull")),  # past the top, 1e14 (fuzz32; 20 before)
    ("workers", lambda: stragglers.expected_max(0, 1.0, 0.1)),
    ("k", lambda: stragglers.expected_kth(9, 8, 1.0, 0.1)),
    ("quantile", lambda: stragglers.quantile(1.5, 1.0, 0.1)),
    ("quantile", lambda: stragglers.quantile_max(0.0, 8, 1.0, 0.1)),
    ("workers", lambda: stragglers.harmonic(-1)),
    ("dist", lambda: stragglers.expected_kth_shifted_exp(1, 8, -1.0, 1.0)),
    ("tau", lambda: stragglers.expected_max_of_sum(0.5, 8, 1.0, 0.1)),
    ("t0", lambda: stragglers.failslow_step(-1.0, 8, 0.1, 2.0)),
    ("p_slow", lambda: stragglers.failslow_step(1.0, 8, 1.5, 2.0)),
    ("slowdown", lambda: stragglers.failslow_step(1.0, 8, 0.1, 0.5)),
    ("slowdowns", lambda: stragglers.persistent_step(1.0, [0.0, 1.0])),
    ("samples", lambda: stragglers.empirical_expected_kth([], 1, 8)),
    ("samples", lambda: stragglers.empirical_expected_kth([0.0, 1.0], 1, 8)),
    ("quantile", lambda: stragglers.empirical_quantile_max([1.0], 1.0, 8)),
    ("samples", lambda: stragglers.empirical_mean_cv([])),
    ("mean", lambda: stragglers.expected_max(8, float("nan"), 0.1)),
    ("dist", lambda: stragglers.mean_cv_from_params("gamma", shape=2.0)),
    ("staleness", lambda: sync.staleness_efficiency(-1.0)),
    ("kappa", lambda: sync.staleness_efficiency(1.0, -1.0)),
    ("workers", lambda: sync.sync_step("bsp", 0, 1.0, 0.1)),
    ("comm_s", lambda: sync.sync_step("bsp", 8, 1.0, 0.1, comm_s=-1.0)),
    ("layers", lambda: _small_shape(layers=0)),
    ("shape", lambda: _small_shape(ffn_hidden=-1)),
    ("moe.top_k", lambda: _small_shape(moe_experts=4, moe_top_k=5)),
    ("kv_heads", lambda: _small_shape(kv_heads=3, heads=4)),
    ("qk_rope_head_dim", lambda: _small_shape(kv_lora_rank=4, qk_rope_head_dim=4)),
]


@pytest.mark.parametrize("where,call", BAD, ids=[f"{i}-{w}" for i, (w, _) in enumerate(BAD)])
def test_cost_model_errors_say_what_is_allowed(where: str, call: Callable[[], Any]) -> None:
    with np.errstate(all="ignore"), pytest.raises(InputError) as info:
        call()
    err = info.value
    assert err.where == where, err.message()
    assert err.what.strip() and err.allowed.strip(), err.message()
    assert err.message() == f"{where}: {' '.join(err.what.split())}; {err.allowed}"
