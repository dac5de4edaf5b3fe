"""mem31: the ZeRO-3 / FSDP gathered unit (memory_per_gpu's Psi_g) holds the tensors every TP rank holds whole, whole:
the norms and, in an MoE layer, the router, which before were divided by t (the norms) or left out (the router, and
the shared experts); the routed experts split over the expert-TP degree, not t. One statement of the per-rank rule
(transformer.linear_weight_parts / on_tp_rank) checked against hand counts.

Megatron-Core at NVIDIA/Megatron-LM@d98e8a64dd builds the norms hidden_size wide on every TP rank (TENorm, the norm
inside TELayerNormColumnParallelLinear, extensions/transformer_engine.py), the router whole (moe/router.py
``torch.empty((num_moe_experts, hidden_size))``) and a RowParallelLinear's bias whole (tensor_parallel/layers.py
``torch.empty(self.output_size)``); torchtitan's Llama 4 router gate is an ``nn.Linear`` its TP plan leaves unsplit.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.cost import memory, transformer


def _f(x) -> float:  # type: ignore[no-untyped-def]
    return float(np.ravel(x)[0])


def _gathered(sh: transformer.Shape, tp: int, **kw: int) -> float:
    """Weights held at ZeRO-3 beyond the shard, in elements (2 B each): w(dp 2) - shard/2 with shard/2 = w(1) - w(2)."""
    w = [_f(memory.memory_per_gpu(sh, micro_batch=1, seq_len=1024, dp=d, tp=tp, zero_stage=3, weight_bytes=2.0,
                                  **kw).weights) for d in (1, 2)]
    return (2.0 * w[1] - w[0]) / 2.0


# A dense GPT-style layer with biases (LayerNorm): h 1024, 16 heads (MHA, d 64), f 4096, by hand:
#   split: qkv 1024 x 3072 = 3,145,728 + its bias 3,072; fc1 1024 x 4096 = 4,194,304 + its bias 4,096;
#          fc2 4,194,304 (o 1,048,576 too)                         -> 3,145,728 + 3,072 + 1,048,576 + 8,388,608 + 4,096
#   whole: the o and fc2 biases 1,024 each; two LayerNorms, gain and bias, 4 x 1,024   -> 6,144
DENSE_SPLIT = 3_145_728 + 3_072 + 1_048_576 + 8_388_608 + 4_096  # 12,590,080
DENSE_WHOLE = 6_144


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_dense_unit_holds_norms_and_row_parallel_biases_whole(tp: int) -> None:
    """2 x (12,590,080 / t + 6,144): t 4 6,307,328 elements (before, everything / t: 6,298,112)."""
    sh = transformer.shape(layers=4, hidden=1024, heads=16, vocab=1000, biases=True)
    assert _f(transformer.param_count(sh)) > 0
    assert _f(transformer.layer_params(sh)) == DENSE_SPLIT + DENSE_WHOLE  # the hand count is the whole layer
    assert _gathered(sh, tp) == pytest.approx(2 * (DENSE_SPLIT / tp + DENSE_WHOLE), rel=1e-12)
    if tp == 4:
        assert 2 * (DENSE_SPLIT / tp + DENSE_WHOLE) == 6_307_328


# An MoE layer (no biases, RMSNorm): h 512, 8 heads (MHA, d 64), 8 experts of gated width 256, one shared expert,
# ep 2, etp 1, tp 2, by hand:
#   attention split: qkv 512 x 1536 + o 512 x 512 = 786,432 + 262,144 = 1,048,576
#   shared expert split: 3 x 512 x 256 = 393,216
#   whole: router 8 x 512 = 4,096; two RMSNorm gains 2 x 512 = 1,024            -> 5,120
#   routed experts on this GPU: 8 / ep 2 = 4 experts x 3 x 512 x 256 = 1,572,864, whole at etp 1
MOE_SPLIT = 1_048_576 + 393_216
MOE_WHOLE = 4_096 + 1_024
ROUTED = 4 * 3 * 512 * 256


def test_moe_unit_holds_router_whole_and_experts_at_etp() -> None:
    """2 x (1,441,792 / 2 + 5,120 + 1,572,864) = 4,597,760 elements (before: 2 x ((1,048,576 + 1,024) / 2
    + 1,572,864 / 2) = 2,622,464: the router and shared expert missing, the routed experts / t)."""
    sh = transformer.shape(layers=2, hidden=512, heads=8, vocab=1000, gated_mlp=True, moe_experts=8, moe_top_k=2,
                           moe_ffn_hidden=256, ffn_hidden=256, moe_shared_experts=1)
    by_hand = 2 * (MOE_SPLIT / 2 + MOE_WHOLE + ROUTED)
    assert by_hand == 4_597_760
    assert _gathered(sh, 2, ep=2, etp=1) == pytest.approx(by_hand, rel=1e-12)
    assert _f(memory.gathered_unit(sh, tp=2, ep=2, etp=1)) == pytest.approx(by_hand / 2, rel=1e-12)


def test_linear_weight_parts_by_hand() -> None:
    """The one per-rank rule: the dense layer's linears 12,582,912 split, none whole; at t 4 3,145,728 a rank; an
    MTP module adds eh_proj 2 x 1024^2 = 2,097,152 split, returned apart (524,288 at t 4)."""
    sh = transformer.shape(layers=4, hidden=1024, heads=16, vocab=1000, biases=True, mtp_layers=1)
    parts = transformer.linear_weight_parts(sh)
    assert _f(parts["attention"][0]) == 3_145_728 + 1_048_576 and _f(parts["attention"][1]) == 0
    assert _f(transformer.linear_weights_per_layer(sh, 4)) == (3_145_728 + 1_048_576 + 8_388_608) / 4
    block, eh = transformer.mtp_linear_weights(sh, 4)
    assert _f(block) == (3_145_728 + 1_048_576 + 8_388_608) / 4 and _f(eh) == 2_097_152 / 4
