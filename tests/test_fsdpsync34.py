"""fsdpsync34: FSDP with its parameters kept gathered (reshard_after_forward false) and the routed experts left out
of FSDP (expert_dp 1, EP = dp, as NeMo Automodel's apply_fsdp ignored_params does) holds each expert weight once.

Before the fix the kept-gathered count added the GPU's routed experts to the dense gathered copy while the expert
states held them whole too: their 16-bit weights were counted twice (7.4 GB of automodel26's Nano row's 103.7 GB).
"""
from __future__ import annotations

import pytest

from scalemodel.cost.memory import memory_per_gpu
from scalemodel.cost.transformer import shape

# A 4-layer MoE model, every layer MoE: h = 1024, 8 heads (d = 128, no GQA), 8 experts of f_e = 512 (gated), top-2,
# no shared expert, RMSNorm, no biases, untied 32,000-token embedding. By hand, per layer:
#   attention  qkv 1024 x 3072 + o 1024 x 1024       = 4,194,304
#   router     8 x 1024                              = 8,192
#   norms      2 x 1024                              = 2,048
#   experts    8 x 3 x 1024 x 512                    = 12,582,912
# dense (non-expert) on one GPU: 4 x (attention + router + norms) + 2 x 32,000 x 1024 + final norm 1024
ATTN, ROUTER, NORMS, EXPERT = 1024 * 3072 + 1024 * 1024, 8 * 1024, 2 * 1024, 3 * 1024 * 512
DENSE = 4 * (ATTN + ROUTER + NORMS) + 2 * 32_000 * 1024 + 1024  # 82,636,800
EXPERTS = 4 * 8 * EXPERT  # 50,331,648 in the model
SHAPE = shape(layers=4, hidden=1024, heads=8, ffn_hidden=512, vocab=32_000, gated_mlp=True, biases=False,
              tied_embeddings=False, dropout=False, moe_experts=8, moe_top_k=2, moe_ffn_hidden=512)


@pytest.mark.parametrize("ep, expert_dp", [(8, 1), (2, 4)])
def test_kept_experts_are_held_once_by_hand(ep: int, expert_dp: int) -> None:
    """dp 8, zero fsdp, reshard_after_forward false. Weights (2 bytes each):
    dense   2 D / 8 (the shard) + 2 D (every unit's gathered copy)
    experts 2 X / ep / expert_dp (the shard) + 2 X / ep (the gathered copy) where expert_dp > 1; at expert_dp 1
            (EP = dp: nothing to gather, FSDP leaves them out) 2 X / ep, once."""
    kw = dict(micro_batch=1, seq_len=2048, dp=8, zero_stage="fsdp", reshard_after_forward=False)
    br = memory_per_gpu(SHAPE, ep=ep, expert_dp=expert_dp, **kw)
    x = EXPERTS / ep
    gathered_experts = 2 * x if expert_dp > 1 else 0.0
    assert float(br.weights) == pytest.approx(2 * DENSE / 8 + 2 * DENSE + 2 * x / expert_dp + gathered_experts,
                                              rel=1e-12)
    # the gradients and optimizer states are the shards: dense over dp, experts over expert_dp
    assert float(br.optimizer) == pytest.approx(12 * (DENSE / 8 + x / expert_dp), rel=1e-12)
