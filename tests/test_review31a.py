"""review31a: this round's changes checked against their sources (validation/README.md#review31a).

1. mem31's ZeRO-3 / FSDP gathered unit: a routed expert's fc2 bias is whole on every expert-TP rank, as a dense
   RowParallelLinear's: Megatron-Core NVIDIA/Megatron-LM@d98e8a64dd tensor_parallel/layers.py L1484
   ``self.bias = Parameter(torch.empty(self.output_size, ...))`` for every RowParallelLinear, expert or not (the
   expert ones built on the expert-TP group, L1033-1035); transformer.expert_param_tensors marks it so. The unit
   divided the whole expert, bias included, by etp.
2. data31's per-row bucket (framework.bucket_elements, "rows whose own log prints another bucket"): the Nebius 1 x 8
   B300 NVFP4 run (mlpt51_b300_llama31_8b_8_nvfp4) prints ``DistributedDataParallelConfig(... bucket_size=768000000
   ...)`` in each of its ten result files (mlcommons/training_results_v5.1@441d65f4
   Nebius/results/nebius_b300_n1/llama31_8b/result_{1..10}.txt) and was priced at the source's 128 Mi.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_yaml, script_module
from test_validation import NEW_CASES, needs_new_cases

from scalemodel.cost import memory, transformer


def _f(x) -> float:  # type: ignore[no-untyped-def]
    return float(np.ravel(x)[0])


# An MoE layer with biases (LayerNorm, plain MLP experts): h 512, 8 heads (MHA, d 64), 8 experts of width 256, no
# shared expert, tp 2, ep 2, etp 2. By hand, on one GPU:
#   attention split: qkv 512 x 1536 = 786,432 + its bias 1,536; o 512 x 512 = 262,144        -> 1,050,112 / 2
#   whole: o's bias 512; two LayerNorms, gain and bias, 4 x 512 = 2,048; router 8 x 512 = 4,096 and, since bias31,
#   its bias 8 (moe/router.py L67-69 with add_bias_linear)                                  -> 6,664
#   routed experts, 8 / ep 2 = 4, each: fc1 256 x 512 + fc2 512 x 256 + fc1's bias 256, split over etp 2
#   (262,400 / 2 = 131,200) and fc2's bias 512 whole                                       -> 4 x 131,712 = 526,848
UNIT = 1_050_112 / 2 + 6_664 + 4 * (262_400 / 2 + 512)


def test_gathered_unit_holds_the_expert_row_parallel_bias_whole() -> None:
    """1,058,568 elements (before: the experts' 4 x 262,912 / 2 = 525,824, 1,024 short; 1,058,560 before bias31
    counted the router's bias)."""
    sh = transformer.shape(layers=2, hidden=512, heads=8, vocab=1000, biases=True, moe_experts=8, moe_top_k=2,
                           moe_ffn_hidden=256, ffn_hidden=256)
    assert UNIT == 1_058_568
    assert _f(memory.gathered_unit(sh, tp=2, ep=2, etp=2)) == pytest.approx(UNIT, rel=1e-12)
    # at etp 1 every expert tensor is whole: 4 x 262,912 (nothing to split, before or after)
    assert _f(memory.gathered_unit(sh, tp=2, ep=2, etp=1)) == pytest.approx(1_050_112 / 2 + 6_664 + 4 * 262_912,
                                                                            rel=1e-12)


@needs_new_cases
def test_printed_768e6_bucket_reaches_every_row_that_prints_it() -> None:
    """The rows whose result files print bucket_size=768000000 (read at 441d65f4: Oracle 8 x 8, Dell 2 x XE9680L and
    2 x XE9685L, Nebius 1 x 8 B300 NVFP4) are priced with 768e6 elements (x 2 bytes of BF16 gradients); those that
    print 134217728 (Verda, Supermicro B300, Nebius 2 x 8 / 4 x 8 B200 NVFP4, Dell B300 FP8) with 128 Mi."""
    vt = script_module("validate_training")
    cases = {c["id"]: c for c in load_yaml(NEW_CASES)}
    printed = {"mlpt51_b200_llama31_8b_64_oracle": 768_000_000, "mlpt51_b200_llama31_8b_16_xe9680l": 768_000_000,
               "mlpt51_b200_llama31_8b_16_xe9685l": 768_000_000, "mlpt51_b300_llama31_8b_8_nvfp4": 768_000_000,
               "mlpt51_b200_llama31_8b_64_verda": 134_217_728, "mlpt51_b300_llama31_8b_8_smc": 134_217_728,
               "mlpt51_b200_llama31_8b_16_nvfp4": 134_217_728, "mlpt51_b200_llama31_8b_32_nvfp4": 134_217_728,
               "mlpt51_b300_llama31_8b_8": 134_217_728}
    for cid, elements in printed.items():
        assert vt.megatron_options(cases[cid], "1", "fp8", 2.0)["bucket_size"] == 2.0 * elements, cid
