"""Which layers keep Transformer Engine userbuffers under ``tp_comm_overlap`` (mtpub32, docs/model.md#ub-off).

Megatron-Core's TELinear (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/extensions/transformer_engine.py L1176-1186)
writes ``config.tp_comm_overlap = False`` on the one TransformerConfig every module shares when a linear's
``tp_comm_buffer_name`` is none of qkv / proj / fc1 / fc2, so every linear built after it runs without userbuffers:

- an MLA model: MLA's q_proj / q_down_proj (multi_latent_attention.py L510-546) is built right after the first
  layer's linear_proj: no layer keeps userbuffers (its one linear_proj is priced without them too);
- an MTP model (not MLA): the decoder is built first (gpt_model.py L233), then each MTP layer's eh_proj
  ("mtp_eh_proj", multi_token_prediction.py L1174-1184) and after it the block: the decoder's layers keep
  userbuffers, the MTP blocks run plain NCCL.

Counted by hand with every TP collective priced 1 s (``UNIT``) and GEMMs long enough to hide any of them (1,000 s
per layer, per MTP block, and the weight-gradient window): under userbuffers a phase's traffic C shows only its
forward floor C / (2 x 4) (model_parallel_comm._tp_comm_overlap); plain NCCL shows the whole forward (and hides the
backward's reduce-scatters under the weight-gradient GEMMs). 3 layers (1 dense, 2 MoE, etp 1, no shared experts,
tp 2 with SP): the dense layer runs 2 block collectives per pass, each MoE layer and each MoE MTP block 1
(tests/test_mtp_accounting.py), so the layers' forward C = 4 and D blocks' D.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.commands.common import build_specs
from scalemodel.cost import transformer
from scalemodel.engine import layer_compute, model_parallel_comm
from scalemodel.engine.job import build_job, grid_from_strategy

UNIT = {"tp": np.ones(1), "tp_last": np.ones(1), "cp": np.ones(1), "ep_tokens": np.ones(1), "pp": np.zeros(1),
        "pp_gather": np.zeros(1)}
LONG = 1e3  # seconds of GEMMs: longer than any traffic here
UB = {"tp": 2, "sequence_parallel": True, "etp": 1, "tp_comm_overlap": True}


def _job(mtp: int, mla: bool, overlap: bool = True) -> tuple[Any, Any]:
    cl, wl, tr, st = build_specs(cluster="dgx-h100", model="deepseek-v3", sets=[],
                                 training={"precision": "bf16", "global_batch": 64, "micro_batch": 1},
                                 strategy=dict(UB, tp_comm_overlap=overlap))
    job = build_job(cl, wl, tr, straggler_cv=0.0)
    lora = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "v_head_dim": 16} if mla else {}
    sh = transformer.shape(layers=3, hidden=64, heads=4, vocab=100, ffn_hidden=128, gated_mlp=True,
                           moe_experts=8, moe_top_k=2, moe_ffn_hidden=32, moe_first_dense=1,
                           tied_embeddings=False, mtp_layers=mtp, **lora)
    job = replace(job, shape=sh)
    return job, grid_from_strategy(st, tr, 8, job)


def _mp(job: Any, g: Any, coll: dict[str, np.ndarray] = UNIT) -> dict[str, float]:
    comp = layer_compute._compute_per_microbatch(job, g, np.ones(1) * 3.0, logits_on_stage=True)
    blocks = float(np.ravel(comp["mtp_blocks"])[0])
    comp = dict(comp, wgrad=np.ones(1) * LONG * (3.0 + blocks), gemm_per_layer=np.ones(1) * LONG,
                mtp_gemm=np.ones(1) * LONG * blocks)
    mp = model_parallel_comm._model_parallel_comm(job, g, comp, coll)
    return {k: float(np.ravel(mp[k])[0]) for k in ("tp", "hidden_fwd", "hidden_bwd", "chunking", "hidden_ub")}


@pytest.mark.parametrize("mtp", [0, 1, 2])
def test_mtp_blocks_run_plain_nccl_the_layers_userbuffers(mtp: int) -> None:
    """Each 1 s pair split as an all-gather of 0.5 s and a reduce-scatter of 0.5 s (``tp_fwd_ag``, ``tp_grad_ag``). The
    layers' forward C = 4 shows its floor, the last quarter of its 2 s of pipelined reduce-scatters, 1/2 (tp33: each
    part beside its own linears' GEMMs); the D blocks' forward D shows whole, their output-gradient gathers D/2
    block (review32d), the rest of their backward hides under their weight-gradient GEMMs: TP = 1/2 + 3/2 D (before
    mtpub32 the blocks pooled with the layers under userbuffers). Hidden on userbuffers' SMs: the layers' forward
    4 - 1/2 and backward 4 only, 7.5; the backward's hidden the layers' 4 and the blocks' D/2."""
    half = {"tp_fwd_ag": np.full(1, 0.5), "tp_grad_ag": np.full(1, 0.5)}
    got = _mp(*_job(mtp, mla=False), coll=dict(UNIT, **half))
    assert got["tp"] == pytest.approx(0.5 + 1.5 * mtp, rel=1e-12)
    assert got["hidden_ub"] == pytest.approx(7.5, rel=1e-12)
    assert got["hidden_fwd"] == pytest.approx(3.5, rel=1e-12)
    assert got["hidden_bwd"] == pytest.approx(4.0 + 0.5 * mtp, rel=1e-12)


def test_mtp_blocks_add_no_userbuffers_chunking() -> None:
    """The chunking cost (model_parallel_comm._tp_chunking) splits the layers' GEMMs only: the same with and without
    MTP blocks (before mtpub32 each block added its own GEMMs' split, tests/test_mtp_accounting.py)."""
    base, with_mtp = _mp(*_job(0, mla=False)), _mp(*_job(2, mla=False))
    assert base["chunking"] > 0.0
    assert with_mtp["chunking"] == pytest.approx(base["chunking"], rel=1e-12)


@pytest.mark.parametrize("mtp", [0, 1])
def test_mla_model_keeps_no_userbuffers(mtp: int) -> None:
    """An MLA model (with or without MTP) runs every TP collective as plain NCCL: the forward's 4 + D whole, the
    backward's hidden under the weight-gradient GEMMs, nothing chunked or on userbuffers' SMs (before mtpub32:
    TP (4 + D)/8, the forward's 7/8 hidden). MLA's further gathers (coll 'tp_att', MLA's down-projections' and
    up-projections' inputs) are not in UNIT: 0 here."""
    job, g = _job(mtp, mla=True)
    assert bool(np.ravel(job.shape.mla)[0])
    assert not bool(np.ravel(model_parallel_comm.userbuffers_on(job, g))[0])
    got = _mp(job, g)
    assert got["tp"] == pytest.approx(4.0 + mtp, rel=1e-12)
    assert (got["chunking"], got["hidden_ub"], got["hidden_fwd"]) == (0.0, 0.0, 0.0)
    assert got["hidden_bwd"] == pytest.approx(4.0 + mtp, rel=1e-12)
    # and so the same step as with tp_comm_overlap off
    assert got == _mp(*_job(mtp, mla=True, overlap=False))


def test_standard_model_keeps_userbuffers() -> None:
    """No MLA, no MTP: userbuffers on at tp 2 with SP and the overlap, off without the overlap."""
    job, g = _job(0, mla=False)
    assert bool(np.ravel(model_parallel_comm.userbuffers_on(job, g))[0])
    job, g = _job(0, mla=False, overlap=False)
    assert not bool(np.ravel(model_parallel_comm.userbuffers_on(job, g))[0])
