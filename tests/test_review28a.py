"""review28a: defects found reviewing fp4a28 (FP8 attention in fp4 runs, training.nvfp4_disable) and fp4p28
(strategy.fp4_param_gather), each with the value counted by hand or the source's own rule.

* Selective recompute of core_attn reruns the FP8 core's forward, Q, K, V copy and casts included: Megatron-Core
  runs ``self.core_attention`` under ``tensor_parallel.checkpoint`` (attention.py ``checkpoint_core_attention``
  L183-186, ``_checkpointed_attention_forward`` L216-254 at NVIDIA/Megatron-LM@d33919011), and Transformer Engine's
  ``FusedAttnFunc.forward`` quantizes Q, K, V on every call (``combine_and_quantize``, backends.py L1114 at
  NVIDIA/TransformerEngine@40c69e751). fp4a28 priced them on full recompute only.
* NVFP4 parameters need the 2D (16 x 16) weight scales: TE v2.16 (4220403e8) ``_cast_master_weights_to_nvfp4_2d``
  raises "NVFP4 2D quantization must be enabled." (pytorch/tensor/utils.py L607-608), so fp4_param_gather with
  training.nvfp4_disable 2d_quantization is refused (one error line, exit 2).
* FP8 parameters (fp8_param_gather) hold a transposed FP8 copy beside their data where the GEMMs take TN only
  (every accelerator but Blackwell): TE ``post_all_gather_processing`` -> ``Float8TensorStorage._create_transpose``
  (pytorch/tensor/utils.py L951-956, storage/float8_tensor_storage.py L221-227 at v2.16), kept in the tensor's
  ``_transpose`` buffer; not held since the merge (a TE 1.x run fits only without it): 1 byte, as fp4p28 had it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_hostile_inputs import accepted, refused

from scalemodel.commands.common import build_specs
from scalemodel.cost import compute
from scalemodel.engine import layer_compute, stage_memory
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.specs import TrainingSpec, load_cluster
from tests.test_distopt import TINY, _grid
from tests.test_megatron_ddp import LINEAR_PER_LAYER

GB200_RATE = 8e12 * 0.85  # gb200: 8 TB/s x the catalog's memory efficiency 0.85
CS = 1.199  # the tensorwise (Float8CurrentScaling) cast-kernel factor on Blackwell (TE-GEMMPROF-B300)
#: Llama 3 8B, b 1, s 8192, tp 1: Q, K, V 8192 x (4096 + 1024 + 1024) = 50,331,648 elements, copied (2 + 2 bytes)
#: and cast (2 + 2 + 1 bytes): 201,326,592 B at the HBM rate + 251,658,240 B at CS x it
QKV_FWD_S = 201_326_592.0 / GB200_RATE + CS * 251_658_240.0 / GB200_RATE


def _job(strategy: dict[str, Any], **training: Any) -> tuple[Any, Any]:
    tr_in = {"precision": "fp4", "global_batch": 8, "micro_batch": 1, "seq_len": 8192, **training}
    cl, wl, trs, stg = build_specs(cluster="gb200-nvl72", model="llama3-8b", sets=[], training=tr_in,
                                   strategy={"dp": 8, **strategy})
    j = build_job(cl, wl, trs, straggler_cv=0.0)
    return j, grid_from_strategy(stg, trs, 8, j)


def _f(x: Any) -> float:
    return float(np.ravel(x)[0])


def _recompute_casts(j: Any, g: Any) -> Any:
    """The recompute's core casts given the layer's forward core casts, as the engine passes them (fix29)."""
    return layer_compute.fp8_attention_recompute_casts(j, g, layer_compute.fp8_attention_casts(j, g)[0])


def test_selective_core_attn_recompute_repeats_the_qkv_casts_by_hand() -> None:
    j, g = _job({"recompute": "selective"}, fp8_attention=True)  # Megatron-Core's default modules: core_attn
    assert _f(_recompute_casts(j, g)) == pytest.approx(QKV_FWD_S, rel=1e-12)
    assert _f(QKV_FWD_S) == pytest.approx(74.0e-6, rel=2e-3)
    for strategy in ({}, {"recompute": "full"}):  # none; full repeats them with the layer's forward casts instead
        j0, g0 = _job(strategy, fp8_attention=True)
        assert _f(_recompute_casts(j0, g0)) == 0.0
    j1, g1 = _job({"recompute": "selective"})  # no FP8 core: nothing to repeat
    assert _f(_recompute_casts(j1, g1)) == 0.0


def test_the_stage_backward_gains_one_qkv_cast_per_layer(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same job with the attention casts priced and not (nvfp4 out of the current-scaling recipes; the FP8
    core's time is the same): with selective core_attn the stage's backward grows by 32 layers x (the dO casts +
    the recomputed Q, K, V casts), without recompute by 32 x the dO casts only."""
    dq = CS * 167_772_160.0 / GB200_RATE  # dO: 8192 x 4096 elements x (2 + 2 + 1) bytes
    layers = np.array([32.0])
    for strategy, want in (({"recompute": "selective"}, 32 * (dq + QKV_FWD_S)), ({}, 32 * dq)):
        j, g = _job(strategy, fp8_attention=True)
        b1 = layer_compute._compute_per_microbatch(j, g, layers)["backward"]
        with monkeypatch.context() as m:
            m.setattr(compute, "FP8_ATTENTION_CS_RECIPES", ("tensorwise",))
            b0 = layer_compute._compute_per_microbatch(j, g, layers)["backward"]
        assert _f(b1 - b0) == pytest.approx(want, rel=1e-9)


def test_fp4_param_gather_refuses_2d_quantization_off(cli) -> None:  # type: ignore[no-untyped-def]
    base = ["predict", "-c", "gb200-nvl72", "-m", "llama3-70b", "-n", "64", "--tp", "2", "--pp", "4", "--zero", "1",
            "--precision", "fp4", "--set", "strategy.fp4_param_gather=true"]
    refused(cli, *base, "--set", "training.nvfp4_disable=[rht, 2d_quantization]", "--json",
            match="strategy.fp4_param_gather")
    line = refused(cli, *base, "--set", "training.nvfp4_disable=[2d_quantization]", "--json")
    assert "2d_quantization" in line and "NVFP4 2D quantization must be enabled" in line
    # RHT and stochastic rounding off leave the weights' 2D scales: taken
    out = accepted(cli, *base, "--set", "training.nvfp4_disable=[rht, stochastic_rounding]")
    assert out["strategy"]["fp4_param_gather"] is True


@pytest.mark.parametrize(("cluster", "workspace"), [("dgx-h100", 2.0), ("dgx-b200", 1.0)])
def test_fp8_parameters_hold_one_byte_and_no_workspace(cluster: str, workspace: float) -> None:
    """fp8_param_gather, ZeRO 1, dp 8, TINY (4 layers x 16,777,216 linear weight elements): the replica holds the
    FP8 data, 1 byte an element (TE 2.x's transposed copy on Hopper is not held: a TE 1.x run fits only without it,
    docs/model.md#fp8-param-gather); without FP8 parameters the BF16 weight (2) and TE's cached FP8 copy (mem28,
    docs/model.md#weight-workspace: 2 on Hopper with its transpose, 1 on Blackwell): 3 / 2 bytes saved."""
    held = 1.0
    job = build_job(load_cluster(cluster), TINY, TrainingSpec(precision="fp8", grad_bytes_per_param=4.0))
    m = np.asarray([1.0])
    on = stage_memory.memory_parts(job, _grid(job, zero="1", fp8_param_gather=True), m)["weights"]
    off = stage_memory.memory_parts(job, _grid(job, zero="1"), m)["weights"]
    assert _f(off - on) == pytest.approx((2.0 + workspace - held) * 4 * LINEAR_PER_LAYER, rel=1e-12)
    assert compute.param_gather_bytes("delayed") == (1.0, held)
