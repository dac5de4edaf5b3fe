"""Memory per GPU: model states (weights, gradients, optimizer), activations, workspace.

Pure functions on floats / numpy arrays (broadcasting); bytes in, bytes out.

**Model states** for Ψ parameters held by a GPU, with bytes per parameter explicit:
weights ``wb`` (2 for bf16/fp16), gradients ``gb`` (2 in the ZeRO paper, 4 = fp32 main grads in
Megatron), optimizer ``K`` (12 for mixed-precision Adam: fp32 master weights, m, v). Presets:
``"zero"`` = 2+2+12 = 16 B/param [Rajbhandari et al. 2019, arXiv:1910.02054 §3], ``"megatron"``
= 2+4+12 = 18 B/param (Megatron theoretical_memory_usage.py). ZeRO over N_d data-parallel ranks
[arXiv:1910.02054 §5, Figure 1]:

    stage 0   (wb + gb + K) Ψ
    stage 1   (wb + gb) Ψ + K Ψ / N_d                  (= Megatron distributed optimizer 6 + 12/d)
    stage 2   wb Ψ + (gb + K) Ψ / N_d
    stage 3   (wb + gb + K) Ψ / N_d  + wb * gathered    (FSDP full-shard is the same as stage 3;
                                                        ``gathered`` = parameters all-gathered at once:
                                                        2 layers, or the whole stage without reshard)
    PyTorch FSDP2 (``fsdp2``): the shard's weight and gradient bytes are the parameter's own dtype's,
    :func:`fsdp2_shard_bytes` (0 + 4 with an fp32 master in K, else wb + wb), not wb + gb
    (docs/model.md#fsdp2-shard-dtype)

**Activations** per layer, 16-bit, after Korthikanti et al. 2022 [arXiv:2205.05198] §4 / Table 2,
generalised to GQA (g kv heads, d = h/a), any MLP width f and gated MLPs (s = local sequence
s/cp, t = TP degree):

    replicated (÷t only with sequence parallelism): 10 s b h
        (2 norm inputs 4sbh, QKV input 2sbh, MLP input 2sbh, 2 dropout masks 2sbh; the masks only when the
        model trains with dropout: with p = 0 PyTorch's dropout returns its input and stores no mask,
        aten/src/ATen/native/Dropout.cpp, so 8 s b h for Llama 3, Qwen3, DeepSeek-V3)
    split by t:  Q 2sbh + K,V 4 s b g d + O-proj input 2sbh + MLP act
        MLP act = 4 s b f (GeLU input and output) or 6 s b f (gated: gate, up, product)
        MoE MLP act = k (2 s b h + act(f_e)) + shared * act(f_e)
    attention scores (÷t): 5 a s s_kv b  (softmax output 2, dropout mask 1, dropout output 2);
        0 with selective recompute; 4 a s b (fp32 log-sum-exp) with flash attention
    full recompute: 2 s b h per layer (the layer input; ÷t with SP), plus one layer's full
        activations as the working set while it is recomputed

With f = 4h, g = a this gives Table 2 exactly: sbh(34 + 5as/h), sbh(10 + 24/t + 5as/(ht)),
sbh/t(34 + 5as/h), sbh(10 + 24/t), 34 sbh/t, 2 sbh.

**Element size** (``elem_bytes`` e, mem31b): the 2-byte tensors above are e-byte ones (4 in an fp32 / tf32 run), the
dropout masks 1 byte, flash attention's log-sum-exp fp32, the loss's saved logits ``logits_bytes`` and quantized
inputs their own size in every run: a layer sbh (16 e + 2) + (2 e + 1) a s^2 b, 66 sbh + 9 a s^2 b at e = 4
(docs/model.md#activations-32-bit).

**FP8 GEMM inputs** (``fp8_inputs``): Transformer Engine keeps, for the weight-gradient GEMM, the
quantised copy of each linear layer's input, 1 byte an element (TE 2.x ``_Linear.forward``: "Discard
row-wise data since it is not needed in backward pass", ``inputmat.update_usage(rowwise_usage=False,
columnwise_usage=True)``; ``saved_inputmat = inputmat``), while norms, the attention core and the
activation functions keep their 16-bit inputs. Per layer this changes: QKV and MLP inputs 2sbh -> 1sbh
each; the O-projection input 2sbh -> 1sbh fp8 copy, plus the 16-bit attention output 2sbh that a fused
(flash) attention keeps for its own backward (3sbh with flash attention); the down-projection input
(activation output) 2 -> 1 byte per element of f: MLP act = 5 s b f gated (gate and up 4, product 1),
3 s b f with GeLU. Q, K, V stay 16-bit (the attention core runs in bf16). ``fp8_inputs`` may also give the bytes
of the saved copy: an NVFP4 run's column-wise copy is 1/2 + 1/16 = 0.5625 bytes an element (E2M1 and one E4M3
scale per 16; :func:`quantized_input_bytes`, docs/model.md#nvfp4), an MXFP8 run's 1 + 1/32 = 1.03125 (one E8M0
scale per 32), replacing the 1 byte above wherever it appears (the O-projection's: 0.5625, or 2.5625 with the flash
core's 16-bit output).

**Selective recompute modules** (``recompute_modules``, bits of :data:`RECOMPUTE_MODULES`), Megatron-Core
``--recompute-modules`` (transformer_config.py ``recompute_modules``; the recomputed outputs are freed by
``CheckpointWithoutOutput`` and re-materialised before their consumer's backward):
    core_attn    the attention scores (Korthikanti's selective recompute, the default)
    mla_up_proj  MLA's up-projected Q, K, V (2 s b a d + 2 s b a (d + d_v)): only the latents stay
                 (multi_latent_attention.py ``recompute_up_proj`` / ``qkv_up_checkpoint``)
    moe_act      the routed experts' activation output (the down-projection input): 2 s b f_e per
                 routed copy less (1 under fp8)
    moe          the whole MoE block (moe_layer.py ``moe_layer_recompute``: ``tensor_parallel.checkpoint`` /
                 ``te_checkpoint`` of its forward, which saves the inputs only): none of its split bytes (router,
                 dispatched tokens, experts' and shared experts' inputs and activations); its input, the
                 pre-norm's 16-bit output 2 s b h (÷t with SP; fp8 too, instead of the 1-byte GEMM copy), with the
                 norm's input and dropout mask outside the checkpoint. While one MoE block is recomputed its
                 split bytes and, quantized, the copies of its input its TE linears keep beside the 16-bit input
                 are the working set (:func:`activation_bytes`)
    layernorm    the norms that are modules of their own (transformer.recomputed_norms: an MoE layer's pre-MLP
                 TENorm, an MLA layer's input TENorm; Transformer Engine fuses the others into LayerNormLinear,
                 where Megatron-Core recomputes nothing): transformer_layer.py runs them under
                 ``CheckpointWithoutOutput``, which frees their output after the forward and re-runs the norm
                 before the backward. Less per such norm: its output as its readers kept it, the QKV input
                 (the attention block's gemm bytes) s b h, the MoE block's input (gemm bytes; 2 under moe, whose
                 checkpoint saves the 16-bit tensor the norm's checkpoint then frees), / t with SP. Under fp8
                 Megatron-Core makes the readers keep the 16-bit original (``set_save_original_input`` on MLA's
                 down-projections and the shared experts' linear_fc1), which is freed too. Working set
                 (:func:`activation_bytes`): the one norm output the backward has refilled, 2 s b h (/ t with
                 SP); with moe, inside the MoE block's.
    mlp          a dense (not MoE) layer's MLP block (transformer_layer.py ``recompute_mlp``: ``self.mlp`` under
                 ``tensor_parallel.checkpoint`` / ``te_checkpoint``, which saves its input, the residual stream the
                 norm fused into linear_fc1 reads, counted already as that norm's input): the MLP's split bytes
                 and its GEMM input (the fused norm's output, gemm bytes s b h, / t with SP) go. Working set
                 (:func:`activation_bytes`): one dense MLP block's no-recompute bytes less its recomputed ones.
    shared_experts  an MoE layer's shared experts (moe_layer.py ``shared_experts_recompute``: their forward under
                 ``tensor_parallel.checkpoint`` / ``te_checkpoint``, which saves the block input the router keeps
                 anyway): their activation bytes c (act + gemm bytes) s b f_e / t go; one layer's as working set.
                 Under fp8 with recipes other than delayed Megatron-Core already had linear_fc1 keep the original
                 input (shared_experts.py lines 147-161), so the model's one MoE-input count stays.
    jax_dots     JAX ``jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims`` (MaxText
                 ``remat_policy=minimal``, MaxText/layers/models.py): the layer keeps its input (the scan
                 carry) and the weight-matmul outputs its backward reads, all else is recomputed:
                 2 s b (h + a d + g d + g d_v + f_in) / t with f_in = 2f gated, f otherwise (MoE:
                 k f_e + shared f_e per up-projection). The O- and down-projection outputs are saveable
                 but feed only additions, whose backward reads no value, so JAX keeps no residual of them;
                 the norm outputs, attention output and activation output are recomputed from the saved
                 values. MaxText's logical_axis_rules shard activation_embed, _heads and _mlp over the
                 tensor axis, hence / t (the carry / t only with sequence parallelism).
    jax_qkvo     MaxText ``remat_policy`` save_dot_except_mlp / save_dot_except_mlpwi, or custom with
                 query_proj, key_proj, value_proj, out_proj (and mlpwo) 'device' (``save_only_these_names``;
                 transformer.mlp_up_flops): the layer keeps its input (decoder_layer_input, the scan carry),
                 Q, K, V after RoPE and the output projection's output, which the backward needs to rebuild the
                 residual sum the pre-MLP norm reads: 2 s b (2 h) + 2 s b (a d + g d + g d_v) / t (the two
                 residual-stream tensors / t only with sequence parallelism, as jax_dots' carry). mlpwo is no
                 residual (only the residual sum reads it); the norm outputs, attention output, up-projections
                 and activation are recomputed. Dense layers, or MoE layers with moe named too (MaxText's
                 policy names nothing in the MoE block, so it keeps the same set and recomputes the block whole);
                 engine.job refuses MLA, a parallel block and a hybrid layer pattern.
    jax_qkv      MaxText ``remat_policy`` save_qkv_proj, or custom / qkv_proj_offloaded with query_proj,
                 key_proj, value_proj kept or offloaded and out_proj 'remat' (src/MaxText/layers/decoders.py
                 ``get_remat_policy`` at AI-Hypercomputer/maxtext@92e59fdf5): jax_qkvo's set without the
                 output projection's output, which the backward rebuilds by running that GEMM again
                 (transformer.out_proj_flops): 2 s b h + 2 s b (a d + g d + g d_v) / t (the layer input / t only
                 with sequence parallelism). Dense layers, or MoE layers with moe, as jax_qkvo.
    jax_context  beside jax_qkvo or jax_qkv: MaxText ``custom`` with ``context`` 'device' too (the splash
                 kernel's output and residuals, transformer.recomputed_modules): the policy's set plus the
                 attention output e s b a d_v / t and the fp32 log-sum-exp 4 a s b / t (the flash residual the
                 other selective policies count, ``scores_full``); the core is not recomputed.
    titan_op     torchtitan's op-level selective AC (transformer.titan_op_gemms): the layer keeps its input
                 (the checkpoint's) and the saved-list outputs its backward reads: Q (wq) 2 s b a d, V (wv)
                 2 s b g d, the SDPA output 2 s b a d_v and its fp32 log-sum-exp 4 a s b, the MLP's first up-
                 projection (w1) 2 s b f, all / t (the input / t only with sequence parallelism); 16-bit under
                 fp8 too (Float8Linear's mm returns the input's dtype). w2's output is on the save list too, but
                 only the residual sum reads it: torch.compile's partitioner (both torchtitan validation runs) saves
                 only what the backward reads, eager SAC caches it as well (2 s b h more, not counted).

The first pipeline stage holds the most activations: its L/p layers times the in-flight micro-batches of the
schedule: 1F1B min(m, p) [Narayanan et al. 2021 §2.2; Korthikanti §4.2.3], interleaved
min(m, p) * (1 + (p-1)/(p v)) (Megatron theoretical_memory_usage.py), GPipe m; plus the
embedding dropout mask s b h per in-flight micro-batch (with dropout). The stage with the output layer
(the last; the only one when p = 1) keeps the fp32 logits 4 s b V / t (what the strategy's loss_impl saves per
logit: :func:`scalemodel.cost.compute.loss_saved_bytes`) and the final norm's and output layer's
inputs 4 s b h (/ t with sequence parallelism; Korthikanti §4.3) and holds the output weight V h / t with
its gradient and optimizer states, so with few micro-batches in flight or a large vocabulary it can be the
peak (the engine prices first, busiest middle and last stage and takes the largest).

**Allowance**: total = (states + activations) * (1 + fragmentation) + workspace (CUDA context,
cuBLAS/NCCL buffers). Defaults 5 % and 1 GB are assumptions, not measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

import msgspec
import numpy as np

from scalemodel.choices import ROWWISE_FP8_RECIPES, Recompute, ScheduleKind, Zero, codes, sharding_stage
from scalemodel.cost import pipeline
from scalemodel.cost.checks import nonnegative as _nonneg
from scalemodel.cost.checks import positive as _pos
from scalemodel.cost.mamba import MambaDims
from scalemodel.cost.transformer import (
    RECOMPUTE_MODULES,
    Shape,
    attention_params,
    embedding_params,
    expert_param_tensors,
    expert_params,
    latent_projection_params,
    layer_param_tensors,
    linear_weights_per_layer,
    mamba_params,
    mlp_params,
    mtp_module_params,
    norm_params,
    recompute_code,
    recomputed_modules,
    recomputed_norms,
    router_params,
    tensors_on_tp_rank,
    tp_whole_elements,
)
from scalemodel.errors import InputError

ArrayLike = Any

#: (weight, gradient, optimizer) bytes per parameter for mixed-precision Adam.
BYTES_PER_PARAM: dict[str, tuple[float, float, float]] = {
    "zero": (2.0, 2.0, 12.0),  # Rajbhandari et al. 2019: 16 B/param
    "megatron": (2.0, 4.0, 12.0),  # Megatron theoretical_memory_usage.py: 18 B/param
}


DEFAULT_FRAGMENTATION = 0.05
DEFAULT_WORKSPACE = 1.0e9



def recompute_modules_code(text: str) -> int:
    """Comma-separated module names (see :data:`RECOMPUTE_MODULES`) -> their bits; "" -> 0 (the default)."""
    code = 0
    for name in (n.strip() for n in text.split(",")):
        if not name:
            continue
        if name not in RECOMPUTE_MODULES:
            raise InputError(f"unknown recompute module {name!r}", where="strategy.recompute_modules",
                             allowed=", ".join(RECOMPUTE_MODULES))
        code |= RECOMPUTE_MODULES[name]
    return code


def zero_code(value: ArrayLike) -> np.ndarray:
    """ZeRO stage(s) as labels or :class:`~scalemodel.choices.Zero` codes -> the sharding stage 0-3
    (FSDP shards parameters, gradients and optimizer states like ZeRO-3)."""
    return np.asarray(sharding_stage(codes(Zero, value, "zero")))


# --- model states -----------------------------------------------------------------------------


class ModelStates(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer


#: Optimizer bytes per parameter from which an fp32 master copy is among them (the K = 12 convention: fp32 master
#: 4 + Adam m 4 + v 4; :func:`fsdp2_shard_bytes`).
MASTER_OPTIMIZER_BYTES = 12.0


def fsdp2_shard_bytes(weight_bytes: ArrayLike, optimizer_bytes: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(weight, gradient) bytes per sharded parameter under PyTorch FSDP2 (``fully_shard``), beside the optimizer's
    ``optimizer_bytes``.

    FSDP2 keeps one sharded tensor per parameter, ``FSDPParam.sharded_param``, at the dtype the model was built in
    (``orig_dtype = self.sharded_param.dtype``, ``FSDPParam.init_dtype_attrs``), and its gradient at that same dtype:
    ``foreach_reduce`` reduce-scatters in the reduce dtype, then ``target_dtype = orig_dtype``, ``grad_output =
    _to_dtype_if_needed(reduce_output, target_dtype)`` and views ``sharded_param.grad`` out of it (torch/distributed/
    fsdp/_fully_shard/_fsdp_collectives.py and _fsdp_param.py at pytorch/pytorch@010ae4a8951; at the release torch
    2.7.0: _fsdp_param.py L421, _fsdp_collectives.py L459 ``reduce_output = _to_dtype_if_needed(reduce_output,
    orig_dtype)``, L493-496). The param_dtype copy
    the all-gather reads is a temporary (``_get_param_all_gather_inputs``: ``flat_foreach_copy_input = torch.empty(...,
    dtype=param_dtype)``, copied into the all-gather output and dropped), so no 16-bit shard is held. Parameters FSDP
    ignores (Automodel's experts where EP = dp) are plain ones: AccumulateGrad keeps their gradient at their dtype too.

    The model's built dtype, read from the byte convention: fp32 where the optimizer bytes count an fp32 master copy
    (``optimizer_bytes`` >= :data:`MASTER_OPTIMIZER_BYTES`, torchtitan's fp32 model under MixedPrecisionPolicy
    param_dtype bf16): that master *is* the sharded parameter, so no weight bytes of its own and a 4-byte gradient;
    else (no master: Automodel's bf16 model, ``optimizer_bytes`` 4) ``weight_bytes`` for both."""
    wb = _nonneg("weight_bytes", weight_bytes)
    master = _nonneg("optimizer_bytes", optimizer_bytes) >= MASTER_OPTIMIZER_BYTES
    return np.where(master, 0.0, wb), np.where(master, 4.0, wb)


def model_state_bytes(params: ArrayLike, *, dp: ArrayLike = 1, zero_stage: ArrayLike = 0,
                      weight_bytes: ArrayLike = 2.0, grad_bytes: ArrayLike = 2.0,
                      optimizer_bytes: ArrayLike = 12.0, gathered_params: ArrayLike = 0.0,
                      fsdp2: ArrayLike = False, host_states: ArrayLike = 0) -> ModelStates:
    """Bytes of weights, gradients and optimizer states for ``params`` parameters on one GPU.

    ZeRO stage 1 shards the optimizer over ``dp``, stage 2 also the gradients, stage 3 (= FSDP)
    also the weights, which then need ``gathered_params`` gathered at a time (see module docstring).
    ``fsdp2`` (stage 3 on PyTorch FSDP2): the shard's weight and gradient bytes are :func:`fsdp2_shard_bytes`' (the
    parameter's own dtype), not ``weight_bytes`` and the reduce dtype ``grad_bytes``; the gathered copies stay
    ``weight_bytes`` (MixedPrecisionPolicy param_dtype).
    ``host_states``: what lives in host memory instead (:func:`host_offloaded`).
    """
    psi = _nonneg("params", params)
    n = _pos("dp", dp)
    z = zero_code(zero_stage)
    wb, gb, k = (_nonneg(nm, v) for nm, v in (("weight_bytes", weight_bytes), ("grad_bytes", grad_bytes),
                                              ("optimizer_bytes", optimizer_bytes)))
    gathered = _nonneg("gathered_params", gathered_params)
    shard_w, shard_g = wb, gb
    if np.any(fsdp2):
        f2 = np.asarray(fsdp2, dtype=bool) & (z >= 3)
        w2, g2 = fsdp2_shard_bytes(wb, k)
        shard_w, shard_g = np.where(f2, w2, wb), np.where(f2, g2, gb)
    opt = np.where(z >= 1, k * psi / n, k * psi)
    grads = np.where(z >= 2, shard_g * psi / n, gb * psi)
    weights = np.where(z >= 3, shard_w * psi / n + wb * gathered, wb * psi)
    return host_offloaded(ModelStates(weights=weights, gradients=grads, optimizer=opt), host_states, z,
                          weight_shard=shard_w * psi / n, grad_shard=shard_g * psi / n)


def host_offloaded(states: ModelStates, host_states: ArrayLike, zero: ArrayLike, *, weight_shard: ArrayLike,
                   grad_shard: ArrayLike) -> ModelStates:
    """``states`` less what strategy offload_states keeps in host memory (docs/model.md#state-offload).

    ``host_states`` 1 (optimizer; DeepSpeed offload_optimizer, ZeRO-Offload): the optimizer states (fp32 master,
    Adam's m and v) leave the GPU, and at ZeRO >= 2 the gradient shard too (DeepSpeed keeps the reduced partition
    in host memory: stage_1_and_2.py ``copy_grads_in_partition`` returns before allocating its GPU
    ``grads_in_partition`` under cpu_offload, stage3.py allocates ``grad_partitions_flat_buffer`` on ``self.device``,
    the CPU under offload_optimizer; deepspeedai/DeepSpeed@edaa7221); at ZeRO 1 the unsharded gradients stay.
    2 (optimizer+params; ZeRO-3 offload_param, FSDP CPUOffload): the parameter shard ``weight_shard`` and the
    gradient shard ``grad_shard`` leave too; the gathered units stay. ``zero`` the sharding stage (0-3)."""
    h = np.asarray(host_states)
    if not np.any(h > 0):
        return states
    z = np.asarray(zero)
    grads_out = (h >= 2) | ((h >= 1) & (z >= 2))
    return ModelStates(weights=np.where((h >= 2) & (z >= 3), states.weights - weight_shard, states.weights),
                       gradients=np.where(grads_out & (z >= 2), states.gradients - grad_shard, states.gradients),
                       optimizer=np.where(h >= 1, 0.0, states.optimizer))


class ParamsPerGpu(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    dense: np.ndarray  # replicated over all DP ranks (sharded by ZeRO over dp)
    expert: np.ndarray  # MoE routed experts (replicated over dp/ep ranks)

    @property
    def total(self) -> np.ndarray:
        return self.dense + self.expert


def _stage_share(sh: Shape, p: np.ndarray, stage_layers: ArrayLike | None) -> np.ndarray:
    """Fraction of the layers on the first pipeline stage: 1/p, or its layer count / L when given
    (uneven stages; dense and MoE layers are taken in proportion)."""
    if stage_layers is None:
        return 1.0 / p
    return _nonneg("stage_layers", stage_layers) / sh.layers


def _mtp_weights(sh: Shape, mtp_modules: ArrayLike, routed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of ``mtp_modules`` D MTP modules on a stage: those with weights of their own (D, or one with ``mtp_shared``,
    Megatron-Core mtp_use_repeated_layer), and ``routed``, each one's routed-expert parameters
    (:class:`_ModelParams`' ``mtp_routed``: 0 unless the last layer is MoE), passed through so that
    :func:`params_per_gpu` and :func:`memory_per_gpu` read the one count."""
    d_all = _nonneg("mtp_modules", mtp_modules)
    return np.where(sh.mtp_shared, np.minimum(d_all, 1.0), d_all), routed


class _ModelParams(NamedTuple):
    """The terms of :func:`params_per_gpu` that read the model's shape alone (no strategy or stage argument):
    ``whole`` :func:`~scalemodel.cost.transformer.tp_whole_elements`, ``body`` the layers' parameters before the
    stage's share, ``word`` V h, ``embedding`` :func:`~scalemodel.cost.transformer.embedding_params`, ``routed`` one
    layer's routed experts' parameters, ``mtp_routed`` an MTP module's (0 unless the last layer is MoE) and
    ``mtp_own`` an MTP module's parameters less those."""

    whole: Any
    body: np.ndarray
    word: Any
    embedding: np.ndarray
    routed: np.ndarray
    mtp_routed: np.ndarray
    mtp_own: np.ndarray


@lru_cache(maxsize=64)
def _model_params(sh: Shape) -> _ModelParams:
    """:class:`_ModelParams` of ``sh``: the same expressions :func:`params_per_gpu` evaluated on every call before
    (speed34), so every value is the one it was to the bit. Computed once per shape (keyed on its identity: Shape has
    eq=False, and a frozen shape's arrays are fixed), across evaluations too (evalspeed41: a calibration evaluates
    the same three shapes ~300 times, each ~7 calls); the :func:`_once` memo keeps its role for the other terms."""
    shared = sh.moe_shared_experts * mlp_params(sh, sh.moe_ffn_hidden) + router_params(sh)
    latent = latent_projection_params(sh)
    body = (sh.attention_layers * attention_params(sh) + sh.layers * norm_params(sh) + sh.mlp_layers * mlp_params(sh)
            + sh.moe_layers * (shared + latent) + sh.mamba_layers * mamba_params(sh))
    mtp_routed = np.where(sh.last_layer_moe, sh.moe_experts * expert_params(sh), 0.0)
    return _ModelParams(whole=tp_whole_elements(sh), body=body, word=sh.vocab * sh.hidden,
                        embedding=embedding_params(sh), routed=sh.moe_experts * expert_params(sh),
                        mtp_routed=mtp_routed, mtp_own=mtp_module_params(sh) - mtp_routed)


def _once(shared: dict[str, Any] | None, key: str, args: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """``make()``, computed once per ``shared`` dict for the same ``args`` (compared by identity; the dict holds
    them, so no id is reused while the value is kept): the memo of the terms :func:`memory_per_gpu` and
    :func:`params_per_gpu` share between the stages of one strategy grid. ``shared`` None: computed each call."""
    if shared is None:
        return make()
    hit = shared.get(key)
    if hit is not None and len(hit[0]) == len(args) and all(a is b for a, b in zip(hit[0], args, strict=True)):
        return hit[1]
    value = make()
    shared[key] = (args, value)
    return value


def params_per_gpu(sh: Shape, *, tp: ArrayLike = 1, pp: ArrayLike = 1, ep: ArrayLike = 1,
                   stage_layers: ArrayLike | None = None, etp: ArrayLike | None = None,
                   embedding: ArrayLike = True, mtp_modules: ArrayLike = 0.0, head: ArrayLike = False,
                   shared: dict[str, Any] | None = None) -> ParamsPerGpu:
    """Parameters on one GPU of a pipeline stage (by default the first, which also holds the embedding).

    dense  = (all - whole) / t + whole
      all    = L/p (attention + norms) + dense_layers/p * mlp + moe_layers/p * (shared + router + latent)
               + V h (x2 when p = 1 and untied) + positions + final norm (p = 1; p > 1: positions with the
               embedding, the final norm with ``head``)
               (a hybrid pattern: attention_layers/p attention + L/p norms + mlp_layers/p mlp + moe_layers/p
               (shared + router + latent) + mamba_layers/p Mamba mixer, its tensors all split by t as Megatron's)
      whole  = the tensors every TP rank holds at full size (:func:`~scalemodel.cost.transformer.tp_whole_elements`:
               L/p x the layers' mean of norms, router, row-parallel biases, MLA's down-projections and latent
               norms, LatentMoE's projections; the position table and final norm where they are)
    expert = moe_layers/p * E * expert(f_e) / (ep * etp), etp the expert-TP degree (default t; MoE parallel
             folding, Liu et al. 2025 arXiv 2504.14960); an expert on l-wide tokens under LatentMoE

    Megatron-LM's theoretical_memory_usage.py divides the norms and the router by t too ("most loaded shard =
    (layers/pp + embedding)/tp"); Megatron-Core builds them whole on every TP rank (NVIDIA/Megatron-LM@d98e8a64dd:
    TENorm and the norm of TELayerNormColumnParallelLinear take hidden_size; moe/router.py ``torch.empty(
    (num_moe_experts, hidden_size))``; RowParallelLinear's bias ``torch.empty(self.output_size)``; MLA's and
    LatentMoE's ``parallel_mode="duplicated"``), and their gradients and optimizer states with them, so they count
    whole here. With uneven stages the first stage's ``stage_layers`` replace L/p. ``embedding`` false prices a stage
    without the embedding table (a middle stage, p > 1).

    ``mtp_modules`` D: the multi-token prediction modules on this stage (the last; all of the model's when
    p = 1): D :func:`~scalemodel.cost.transformer.mtp_module_params` (one module's with ``mtp_shared``), their routed
    experts in ``expert``, their whole tensors (``tp_whole_elements(sh).mtp_module``) whole, the rest / t. ``head``
    (p > 1): the stage also holds the output layer V h and the final norm, as the last stage does: untied, its own
    weight; tied, the last stage allocates an output weight of its own too (Megatron-Core gpt_model.py builds
    ``output_layer`` with ``skip_weight_param_allocation=self.pre_process and
    self.share_embeddings_and_output_weights``, so only a stage that also embeds skips it), kept equal to the first
    stage's embedding by the embedding-group all-reduce. With MTP the last stage holds a copy of the word embedding
    (``embedding`` true; gpt_model.py builds the embedding "if self.pre_process or self.mtp_process"): an extra V h,
    tied or not. Tied, the forward reads the copy as the output weight (``shared_embedding_or_output_weight`` returns
    the embedding's weight where ``mtp_process``), but ``output_layer`` was built with its own weight all the same
    (the stage does not ``pre_process``), a parameter with its gradient buffer and optimizer states
    (NVIDIA/Megatron-LM@d98e8a64dd gpt_model.py lines 173-174 and 277-291, language_module.py lines 345-363; review18a:
    it was priced as the copy alone).

    ``shared``: a dict kept by the caller across calls on one model (:func:`memory_per_gpu`'s); the terms that read
    the shape alone (:class:`_ModelParams`) are then computed once for them (:func:`_once`).
    """
    t, p, e = _pos("tp", tp), _pos("pp", pp), _pos("ep", ep)
    share = _stage_share(sh, p, stage_layers)
    mp = _once(shared, "model params", (sh,), lambda: _model_params(sh))
    whole = mp.whole
    body = mp.body * share
    body_whole = sh.layers * share * whole.per_layer
    word = mp.word
    has_emb = np.asarray(embedding, dtype=bool)
    on_head = np.asarray(head, dtype=bool)
    # p = 1: embedding_params (word tables, positions, final norm); p > 1: the word table and positions with the
    # embedding, the final norm with the output layer
    final_norm = np.where((p > 1) & on_head, whole.final_norm, 0.0)
    emb = np.where((p == 1), mp.embedding, (word + whole.position) * has_emb + final_norm)
    emb_whole = np.where((p == 1), whole.position + whole.final_norm, whole.position * has_emb + final_norm)
    d_mtp, mtp_routed = _mtp_weights(sh, mtp_modules, mp.mtp_routed)
    routed = mp.routed
    # the output layer's own V h on the last stage (p > 1), tied or not, beside an MTP embedding copy or not: only a
    # stage that also pre_processes skips its allocation, and at p > 1 the last stage never does
    out_head = np.where((p > 1) & on_head, word, 0.0)
    held_whole = body_whole + emb_whole + d_mtp * whole.mtp_module
    dense = (body + emb + out_head + d_mtp * mp.mtp_own - held_whole) / t + held_whole
    u = t if etp is None else _pos("etp", etp)
    expert = (sh.moe_layers * share * routed + d_mtp * mtp_routed) / (e * u)
    return ParamsPerGpu(dense=dense, expert=expert)


# --- activations ------------------------------------------------------------------------------


def activation_bytes_per_layer(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                               cp: ArrayLike = 1, sequence_parallel: ArrayLike = False,
                               recompute: ArrayLike = "none", moe: bool = False,
                               flash_attention: ArrayLike = False, fp8_inputs: ArrayLike = False,
                               recompute_modules: ArrayLike = 0, attention: bool = True,
                               mlp: bool = True, attention_inputs: ArrayLike | None = None,
                               latent_inputs: ArrayLike | None = None, etp: ArrayLike | None = None,
                               proj_inputs: ArrayLike | None = None, linear_inputs: ArrayLike | None = None,
                               elem_bytes: ArrayLike = 2.0, moe_capacity: ArrayLike = 1.0,
                               moe_einsum: ArrayLike = False) -> np.ndarray:
    """Activation bytes one layer keeps for one micro-batch (Korthikanti Table 2, generalised; FP8 GEMM
    inputs and the selective-recompute modules as in the module docstring). ``attention`` / ``mlp`` False: one
    block of a hybrid pattern's layer, with one norm, one GEMM input and one dropout mask of the residual stream
    (half the replicated bytes) and that block's own split bytes. ``attention_inputs`` / ``latent_inputs`` (None:
    ``fp8_inputs``'s): the saved GEMM-input bytes of the attention block's linears (the QKV input, the O-projection
    input) and of LatentMoE's projections (fc2_latent_proj's input; fc1_latent_proj keeps its own copy of the
    norm output the shared experts read, one more g s b h) when they run at another precision than the layer's
    (training.module_precision; 0 = 16-bit, docs/model.md#module-precision). ``proj_inputs`` (None: the attention
    block's): the saved input bytes of the attention's linear_proj alone; 0 where Megatron-Core has it keep the 16-bit
    original (``set_save_original_input``, training.proj_original_input): the O-projection input is then held once,
    e bytes, the tensor the fused attention saves as its output (docs/model.md#proj-original-input).
    ``linear_inputs`` (None: ``fp8_inputs``'s): the saved input bytes of the linears without a fused norm, linear_fc2
    (the dense MLP's and the shared experts') and the routed experts' FC1 and FC2; 0 = e bytes, the 16-bit input
    Transformer Engine 1.x's Linear and GroupedLinear keep for a 16-bit weight-gradient GEMM (strategy fp8_wgrad
    false; the norm-fused QKV and dense FC1 keep their FP8 norm output: docs/model.md#fp8-wgrad).
    ``etp`` (u, default t): the routed experts' saved FC1 input is the u T k / t rows the EP exchange and the expert-TP
    all-gather bring to the GPU, each whole w wide (u k s b w / t bytes a GEMM-input byte; Megatron-Core's all-to-all
    dispatcher gathers the received tokens over expt_tp before the experts, token_dispatcher.py ``dispatch_postprocess``
    L741-751, NVIDIA/Megatron-LM@d98e8a64dd; the flex dispatcher sends etp copies a token, L1836-1849), while their
    activation, f_e / u wide on u T k / t rows, stays k s b f_e / t. ``elem_bytes`` e: bytes of an activation element
    (the job's, 4 in an fp32 / tf32 run, else 2), which every element-sized term below is counted at; the dropout
    masks (1 byte), flash attention's fp32 log-sum-exp and the quantized GEMM inputs keep their own size
    (docs/model.md#activations, "32-bit runs"). ``moe_capacity`` c (default 1): the routed experts' rows over the
    dropless k s b, c under drop-and-pad (training.moe_pad_to_capacity: every expert's buffer is its capacity, c x the
    mean); ``moe_einsum`` (XLA's drop-and-pad, MaxText dense_matmul: docs/model.md#maxtext-dropping-moe) adds what
    its einsums save for the backward: the combine mask (e bytes) and the bool dispatch mask (1) of s b c k s_full
    elements, whole on every tensor rank, and the experts' output buffer the combine mask's gradient reads, c k s b h
    at e bytes (h split by t)."""
    b = _pos("micro_batch", micro_batch)
    s_full = _pos("seq_len", seq_len)
    t = _pos("tp", tp)
    s = s_full / _pos("cp", cp)
    sp = np.asarray(sequence_parallel, dtype=bool)
    flash = np.asarray(flash_attention, dtype=bool)
    q_in = np.asarray(fp8_inputs, dtype=float)  # True = 1 byte (FP8); a number = NVFP4's 0.5625 (quantized_input_bytes)
    fp8 = q_in > 0.0
    e = _pos("elem_bytes", elem_bytes)  # an activation element (2 in 16-bit and fp8 / fp4 runs, 4 in 32-bit ones)
    code = recompute_code(recompute)
    again = recomputed_modules(sh, code, recompute_modules)  # jax_dots takes its own branch below
    core_attn, mla_up, moe_act, dots = again.attention_core, again.mla_up_proj, again.moe_act, again.jax_dots
    h, a, g, d, dv = sh.hidden, sh.heads, sh.kv_heads, sh.head_dim, sh.v_head_dim
    sbh = s * b * h
    gemm_in = np.where(fp8, q_in, e)  # bytes of a saved GEMM input element
    q_att = q_in if attention_inputs is None else np.asarray(attention_inputs, dtype=float)
    gemm_att = np.where(q_att > 0.0, q_att, e)  # the attention block's (training.module_precision)
    own_lat = latent_inputs is not None
    gemm_lat = gemm_in if latent_inputs is None else np.where(np.asarray(latent_inputs, dtype=float) > 0.0,
                                                               np.asarray(latent_inputs, dtype=float), e)
    # per element of the MLP width: gated = gate and up (e each, activation input) + product (GEMM input);
    # GeLU = its input (e) + its output (GEMM input)
    act_in = np.where(sh.gated_mlp, 2.0 * e, e)
    # linear_fc2's and the MoE experts' saved inputs (linears without a fused norm): 16-bit under linear_inputs 0
    gemm_lin = gemm_in if linear_inputs is None else np.where(np.asarray(linear_inputs, dtype=float) > 0.0,
                                                              np.asarray(linear_inputs, dtype=float), e)
    act_per_f = (act_in + gemm_lin) * s * b
    if moe:
        fe = sh.moe_ffn_hidden
        routed = act_in * s * b + np.where(moe_act, 0.0, gemm_lin * s * b)
        u = t if etp is None else _pos("etp", etp)
        # the routed experts' input at their width w (LatentMoE: l), on u T k / t rows a GPU (u x the k T / t the
        # split by t leaves) + LatentMoE's fc2_latent_proj input (the combined l-wide tokens); fc1_latent_proj reads
        # the norm output the shared experts and router read
        cap = _pos("moe_capacity", moe_capacity)  # the routed rows over k s b (drop-and-pad: the capacity factor)
        mlp_bytes = (sh.moe_top_k * cap * (u * gemm_lin * s * b * sh.moe_width + routed * fe)
                     + sh.moe_shared_experts * act_per_f * fe + gemm_lat * s * b * sh.moe_latent)
        if np.any(moe_einsum):  # the einsum dispatch's masks (whole a tensor rank: x t against the split's / t)
            # and the experts' output buffer E C h the combine's backward reads
            masks = (1.0 + e) * s * b * cap * sh.moe_top_k * s_full
            mlp_bytes = mlp_bytes + np.where(np.asarray(moe_einsum, dtype=bool),
                                             t * masks + e * cap * sh.moe_top_k * s * b * h, 0.0)
        up_width = (sh.moe_top_k + sh.moe_shared_experts) * fe
    else:
        mlp_bytes = act_per_f * sh.ffn_hidden
        up_width = sh.ffn_hidden
    # 2 norm inputs + QKV and MLP inputs + 2 dropout masks; a parallel block shares the layer input
    # of its norms (2 sbh) and keeps one norm output per norm (fp8: one 1-byte copy per reading GEMM)
    masks = np.where(sh.dropout, 2.0, 0.0)  # two 1-byte dropout masks (none when the model has no dropout)
    replicated = np.where(sh.parallel_block,
                          np.where(fp8, e + gemm_att + q_in, e + e * sh.norms_per_layer) + masks,
                          2.0 * e + gemm_att + gemm_in + masks) * sbh
    # fc1_latent_proj at its own precision: its own saved copy of the norm output the shared experts read; inside
    # the MoE block's checkpoint under selective recompute of moe, so dropped there (the working set re-saves it)
    lat_copy = (np.where((sh.moe_latent > 0) & ~np.asarray(again.moe, dtype=bool), gemm_lat, 0.0) * sbh
                if (moe and mlp and own_lat) else 0.0)
    replicated = replicated + lat_copy
    # Q, K, V as attention inputs (MLA: up-projected K of width d and V of width d_v per head), and the O-projection
    # input; MLA's latents r_q and r_kv + d_rope the up-projections read are the down-projections' outputs, held as
    # the residual stream is: s / t tokens a rank under sequence parallelism, all s without (the duplicated
    # down-projections run on every token on every rank: docs/model.md#mla-tp), so in the replicated bytes
    att = 1.0 if attention else 0.0
    latents = att * np.where(sh.mla, e * s * b * (sh.q_lora_rank + sh.kv_lora_rank + sh.qk_rope_head_dim), 0.0)
    q = np.where(mla_up, 0.0, e * s * b * a * d)
    kv = np.where(sh.mla, np.where(mla_up, 0.0, e * s * b * a * (d + dv)), 2.0 * e * s * b * g * d)
    q_o = q_att if proj_inputs is None else np.asarray(proj_inputs, dtype=float)  # linear_proj's saved input
    o_bytes = np.where(q_o > 0.0, np.where(flash, e + q_o, q_o), e)
    split = att * (q + kv + o_bytes * s * b * a * dv) + (mlp_bytes if mlp else 0.0)
    keys = sh.attended_keys(s_full)
    # softmax output (e) + dropout mask (1) + dropout output (e) per score; flash: the fp32 log-sum-exp per query row
    scores_full = np.where(flash, 4.0 * a * s * b, (2.0 * e + 1.0) * a * s * keys * b)
    scores = att * np.where(core_attn, np.where(flash, scores_full, 0.0), scores_full)
    if not (attention and mlp):  # one block of a hybrid's layer: one norm input, GEMM input and mask
        one = (e + (gemm_att if attention else gemm_in) + masks / 2.0) * sbh + lat_copy
        replicated = np.where(sh.parallel_block, replicated / 2.0, one)
    if moe and mlp and np.any(again.moe):
        # selective moe: the checkpointed MoE block keeps only its input, the pre-norm's e-byte output (its own
        # norm input and dropout mask sit outside the checkpoint and stay); its split bytes are recomputed
        split = np.where(again.moe, split - mlp_bytes, split)
        replicated = replicated + np.where(again.moe & ~np.asarray(sh.parallel_block, dtype=bool),
                                           (e - gemm_in) * sbh, 0.0)
    # selective shared_experts: the shared experts under their checkpoint keep only its input (the block input the
    # router keeps too): their activation bytes go (all of the block's split bytes are gone already under moe)
    if moe and mlp and np.any(again.shared_experts):
        shared_act = sh.moe_shared_experts * act_per_f * sh.moe_ffn_hidden
        split = np.where(again.shared_experts & ~again.moe, split - shared_act, split)
    # selective mlp: a dense MLP block (not an MoE layer's) under Megatron-Core's tensor_parallel.checkpoint keeps only
    # its input, the residual stream the norm fused into linear_fc1 reads (the norm input already counted): its split
    # bytes and its GEMM input (the fused norm's output) go
    if mlp and not moe and np.any(again.mlp):
        drop = again.mlp & ~np.asarray(sh.parallel_block, dtype=bool)
        split = np.where(drop, split - mlp_bytes, split)
        replicated = replicated - np.where(drop, gemm_in * sbh, 0.0)
    # selective layernorm: a norm that is a module of its own (recomputed_norms) keeps no output; its input stays.
    # Freed: what the layer counts as that norm output's readers' saved input: MLA's QKV (down-projection) input at
    # the attention block's precision (gemm_att: 16-bit where training.module_precision keeps attention out of fp8),
    # the MoE block's input (e bytes under moe, which checkpoints it; the GEMM copy's bytes otherwise)
    ln_in, ln_pre = recomputed_norms(sh, again.layernorm, attention=attention, mlp=mlp, moe=moe)
    if np.any(ln_in | ln_pre):
        moe_in = np.where(again.moe, e, gemm_in)
        replicated = replicated - (np.where(ln_in, gemm_att, 0.0) + np.where(ln_pre, moe_in, 0.0)) * sbh
    none_or_selective = np.where(sp, (replicated + latents) / t, replicated + latents) + (split + scores) / t
    full = np.where(sp, e * sbh / t, e * sbh)
    kept = none_or_selective
    if np.any(again.titan_op):  # (skipped when no candidate uses it: the planner prices millions of rows)
        # torchtitan's op policy: the layer input and the saved outputs the backward reads (wq, wv, w1, SDPA)
        titan = full + (e * s * b * (a * d + g * d + a * dv + sh.ffn_hidden) + scores_full) / t
        kept = np.where(again.titan_op, titan, kept)
    if np.any(dots):
        # JAX dots-saveable policy: the layer input and the matmul outputs the backward reads
        qkv_out = e * s * b * (a * d + g * d + g * dv)
        up_out = e * s * b * np.where(sh.gated_mlp, 2.0, 1.0) * up_width
        kept = np.where(dots, np.where(sp, e * sbh / t, e * sbh) + (qkv_out + up_out) / t, kept)
    if np.any(again.jax_qkvo):
        # MaxText save_dot_except_mlp(wi): the layer input and the output projection (residual-stream wide) and the
        # Q, K, V the backward reads (jax_qkv: not the output projection, which its backward runs again)
        residuals = np.where(again.out_proj, e, 2.0 * e) * sbh
        qkvo = np.where(sp, residuals / t, residuals) + e * s * b * (a * d + g * d + g * dv) / t
        if np.any(again.context):  # jax_context: the kernel's output and log-sum-exp kept (the core not recomputed)
            qkvo = qkvo + np.where(again.context, att * (e * s * b * a * dv + 4.0 * a * s * b) / t, 0.0)
        kept = np.where(again.jax_qkvo & ~np.asarray(dots, dtype=bool), qkvo, kept)
    return np.where(code == Recompute.FULL, full, kept)


def inflight_microbatches(pp: ArrayLike, num_microbatches: ArrayLike, schedule: ArrayLike = "1f1b",
                          virtual_stages: ArrayLike = 1, stage_rank: ArrayLike = 0) -> np.ndarray:
    """Micro-batches whose activations pipeline stage ``stage_rank`` holds at its peak (as a multiple of
    its layers).

    Stage 0: 1F1B min(m, p); interleaved min(p (1 + (p-1)/(p v)), m); GPipe m; 1 without pipelining.
    Stage r (Megatron-Core megatron/core/pipeline_parallel/schedules.py, warm-up forwards before the first
    backward, plus the one in flight): 1F1B p - r - 1 + 1, i.e. min(m, p - r); interleaved
    min((p - r - 1) 2 + (v - 1) p + 1, m v) model chunks of 1/v of the stage's layers (the warm-up is capped at
    the m v forwards there are: ``get_pp_rank_microbatches``, NVIDIA/Megatron-LM@d98e8a64dd lines 953-977), i.e.
    min(p + (p - 1 - 2r)/v, m): 2r/v fewer than stage 0 where that is below m, m where every forward is a warm-up
    one (m = p for the first ranks; equal chunks: :func:`scalemodel.cost.pipeline.interleaved_chunks_held`'s
    simulation gives the same); GPipe m on every stage.
    """
    p = _pos("pp", pp)
    m = _pos("num_microbatches", num_microbatches)
    v = _pos("virtual_stages", virtual_stages)
    r = _nonneg("stage_rank", stage_rank)
    first = pipeline.inflight_microbatches(p, m, schedule, v)
    code = pipeline.schedule_code(schedule)
    interleaved = np.minimum(p + (p - 1.0 - 2.0 * r) / v, m)
    lower = np.where(code == ScheduleKind.INTERLEAVED, interleaved,
                     np.where(code == ScheduleKind.GPIPE, first, np.minimum(m, np.maximum(p - r, 1.0))))
    return np.where(p == 1, 1.0, np.maximum(lower, 1.0))


def head_input_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                     sequence_parallel: ArrayLike = False, mtp_modules: ArrayLike = 0.0,
                     elem_bytes: ArrayLike = 2.0) -> np.ndarray:
    """Bytes the stage with the output layer keeps per micro-batch for the backward of the final norm and the
    output layer: their inputs, e s b h each (e = ``elem_bytes``: 2 at 16 bits, 4 in an fp32 / tf32 run), 2 e s b h
    (``seq_len`` s the local sequence, s/cp), / t with sequence parallelism (the norm runs on the sequence shard
    and the column-parallel output layer saves its shard, all-gathering it again for the weight gradient; without
    it every tp rank holds the whole input).
    Korthikanti et al. 2022 (arXiv:2205.05198) §4.3: the layer norm before the output layer (sequence parallel)
    needs 2sbh/t, the output layer projection 2sbh/t, the fp32 cross entropy 4sbv/t, in all 4sbh/t (1 + v/h),
    which the paper adds for p = 1 only because it prices the first stage; with a pipeline the last stage holds
    them (Megatron-LM theoretical_memory_usage.py, "Inputs to output layer and CE loss", likewise at p = 1). The
    4sbv/t is :func:`activation_bytes`'s logits. Each of D multi-token prediction modules feeds the shared
    output layer once more: e s b h more per module (its final norm's input is in its own 5 e s b h,
    :func:`activation_bytes`). Both sit outside the checkpointed transformer layers, so full recompute keeps them.
    """
    t = _pos("tp", tp)
    sbh = _pos("seq_len", seq_len) * _pos("micro_batch", micro_batch) * sh.hidden
    per = np.where(np.asarray(sequence_parallel, dtype=bool), 1.0 / t, 1.0)
    e = _pos("elem_bytes", elem_bytes)
    return (2.0 * e + e * _nonneg("mtp_modules", mtp_modules)) * sbh * per


def _layer_bytes(sh: Shape, rec: ArrayLike, moe: bool | str, memo: dict[Any, np.ndarray],
                 kw: dict[str, Any]) -> np.ndarray:
    """One layer's bytes at recompute ``rec`` (the strategy's array, or a label), computed once per ``memo``
    (keyed by the label, "strategy" for an array, and the kind); ``moe`` a bool, or a hybrid layer's kind
    (attention, mlp, moe, mamba); ``kw`` :func:`layers_activation_bytes`' arguments."""
    key = (rec if isinstance(rec, str) else "strategy", moe)
    if key not in memo:
        per = {k: v for k, v in kw.items() if k != "out_proj_inputs"}
        if moe == "mamba":
            assert sh.mamba is not None
            memo[key] = mamba_activation_bytes(
                sh.mamba, micro_batch=kw["micro_batch"], seq_len=kw["seq_len"], tp=kw["tp"], cp=kw["cp"],
                sequence_parallel=kw["sequence_parallel"], recompute=rec, fp8_inputs=kw["fp8_inputs"],
                dropout=sh.dropout, out_proj_inputs=kw["out_proj_inputs"], elem_bytes=kw["elem_bytes"])
        elif isinstance(moe, str):
            memo[key] = activation_bytes_per_layer(sh, recompute=rec, moe=moe == "moe", attention=moe == "attention",
                                                   mlp=moe != "attention", **per)
        else:
            memo[key] = activation_bytes_per_layer(sh, recompute=rec, moe=moe, **per)
    return memo[key]


def _hybrid_kinds(sh: Shape) -> list[tuple[str, float]]:
    """A hybrid pattern's layer kinds the model has, with their layer counts (none without a pattern)."""
    return [] if sh.hybrid is None else [
        (k, float(n)) for k, n in (("attention", sh.hybrid.attention), ("mlp", sh.hybrid.mlp),
                                   ("moe", sh.hybrid.moe), ("mamba", sh.hybrid.mamba)) if n > 0]


def layers_activation_bytes(sh: Shape, recompute: ArrayLike, memo: dict[Any, np.ndarray] | None = None, *,
                            micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1, cp: ArrayLike = 1,
                            sequence_parallel: ArrayLike = False, flash_attention: ArrayLike = False,
                            fp8_inputs: ArrayLike = False, recompute_modules: ArrayLike = 0,
                            attention_inputs: ArrayLike | None = None, latent_inputs: ArrayLike | None = None,
                            out_proj_inputs: ArrayLike | None = None, etp: ArrayLike | None = None,
                            elem_bytes: ArrayLike = 2.0, moe_capacity: ArrayLike = 1.0,
                            moe_einsum: ArrayLike = False, proj_inputs: ArrayLike | None = None,
                            linear_inputs: ArrayLike | None = None) -> np.ndarray:
    """Activation bytes of all of the model's layers for one micro-batch at ``recompute``: dense_layers x a dense
    layer + moe_layers x an MoE layer (:func:`activation_bytes_per_layer`), a hybrid pattern each kind's layers x its
    layer (a Mamba layer :func:`mamba_activation_bytes`); a kind the model has none of adds exactly 0 (its bytes are
    finite), so it is not computed. The one count of the layers' saved tensors: what :func:`activation_bytes` keeps
    on the GPU, and (/ layers, at recompute none) what activation offload sends to the host and takes off it
    (engine.dp_comm._offload_time, docs/model.md#offload). ``memo`` shares the layers between calls whose other
    arguments are the same."""
    memo = {} if memo is None else memo
    kw: dict[str, Any] = dict(
        micro_batch=micro_batch, seq_len=seq_len, tp=tp, cp=cp, sequence_parallel=sequence_parallel,
        flash_attention=flash_attention, fp8_inputs=fp8_inputs, recompute_modules=recompute_modules,
        attention_inputs=attention_inputs, latent_inputs=latent_inputs, out_proj_inputs=out_proj_inputs, etp=etp,
        elem_bytes=elem_bytes, moe_capacity=moe_capacity, moe_einsum=moe_einsum, proj_inputs=proj_inputs,
        linear_inputs=linear_inputs)
    if sh.hybrid is not None:
        return sum((n * _layer_bytes(sh, recompute, k, memo, kw) for k, n in _hybrid_kinds(sh)), np.zeros(()))
    n_dense, n_moe = sh.dense_layers, sh.moe_layers
    if not np.any(n_moe):
        return np.asarray(n_dense * _layer_bytes(sh, recompute, False, memo, kw))
    if not np.any(n_dense):
        return np.asarray(n_moe * _layer_bytes(sh, recompute, True, memo, kw))
    return np.asarray(n_dense * _layer_bytes(sh, recompute, False, memo, kw)
                      + n_moe * _layer_bytes(sh, recompute, True, memo, kw))


def activation_bytes(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                     pp: ArrayLike = 1, cp: ArrayLike = 1, sequence_parallel: ArrayLike = False,
                     recompute: ArrayLike = "none", num_microbatches: ArrayLike = 1,
                     schedule: ArrayLike = "1f1b", virtual_stages: ArrayLike = 1,
                     flash_attention: ArrayLike = False, stage_layers: ArrayLike | None = None,
                     recomputed_layers: ArrayLike | None = None, offloaded_layers: ArrayLike = 0.0,
                     offloaded_layer_bytes: ArrayLike = 0.0,
                     recompute_chunk: ArrayLike = 0.0, fp8_inputs: ArrayLike = False,
                     recompute_modules: ArrayLike = 0, embedding: ArrayLike = True,
                     stage_rank: ArrayLike = 0, mtp_modules: ArrayLike = 0.0, head: ArrayLike = False,
                     logits_bytes: ArrayLike = 4.0, per_layer: dict[Any, np.ndarray] | None = None,
                     shared_input_copy: ArrayLike = True, attention_inputs: ArrayLike | None = None,
                     latent_inputs: ArrayLike | None = None,
                     out_proj_inputs: ArrayLike | None = None, inflight: ArrayLike | None = None,
                     etp: ArrayLike | None = None, elem_bytes: ArrayLike = 2.0, moe_capacity: ArrayLike = 1.0,
                     moe_einsum: ArrayLike = False, proj_inputs: ArrayLike | None = None,
                     linear_inputs: ArrayLike | None = None) -> np.ndarray:
    """Peak activation bytes on the first pipeline stage (see module docstring); ``stage_layers``
    replaces L/p for uneven stages. ``inflight``: the stage's micro-batches in flight, replacing
    :func:`inflight_microbatches` (the result is affine in it: at 1 less at 0 it is one micro-batch's bytes of the
    stage's layers, what a hybrid rank's unequal interleaved chunks are priced from, engine.stage_memory._chunk_peak).

    Selective recompute of moe: one MoE block is re-materialised at a time in the backward, and its recomputed
    forward saves again what its forward saved, beside the checkpoint's 16-bit input (kept per layer): the block's
    split bytes (the no-recompute ones; moe_act's activation output too, back for the down-projection's backward)
    and, in a quantized run, the quantized copies of the block input its Transformer Engine linears keep:

        working = split(MoE block) + ([LatentMoE] q_l + [shared experts] c q) s b h (/ t with SP)

    q = ``fp8_inputs``, q_l fc1_latent_proj's (``latent_inputs`` when LatentMoE runs at its own precision,
    training.module_precision moe_latent: 0 for BF16, 1.03125 for MXFP8; else q); 0 in a 16-bit run, where the
    router, the shared experts and LatentMoE's fc1_latent_proj keep the checkpoint's input itself (the same storage:
    ``detach_variable`` in ``CheckpointFunction.backward``). The
    router keeps the 16-bit input in every precision (moe_utils.py ``RouterGatingLinearFunction.forward``
    ``ctx.save_for_backward(inp, weight, bias)``), fc1_latent_proj its quantized copy (a TE linear, no
    ``set_save_original_input``); the shared experts' linear_fc1 only where ``shared_input_copy`` c (Megatron-Core
    shared_experts.py calls ``set_save_original_input(self.linear_fc1)`` for fp8 recipes other than 'delayed' with
    TE >= 2.6 and for fp4 with TE >= 2.7, "the output of pre_mlp_layernorm is saved by router", so c holds for the
    delayed recipe only; NVIDIA/Megatron-LM@002255075c lines 136-150, 147-161 at d98e8a64dd; moe_utils.py line 1262).

    Partial full recompute (Megatron-LM ``--recompute-method block --recompute-num-layers N``,
    transformer_block.py ``_checkpointed_forward``): of the stage's n layers, ``recomputed_layers`` r keep
    only their input (the full-recompute row, 2 sbh) and the other n - r keep everything (the no-recompute
    row): per micro-batch  r a_full + (n - r) a_none  with a = the stage's average layer (dense and MoE
    layers in proportion); r = n (or None) is full recompute. The working set of one re-materialised
    layer is added while r > 0.

    Activation offload (Megatron-Core ``cpu_offloading_num_layers``, no recompute and no pipeline):
    the activations of ``offloaded_layers`` k layers go to host memory once their forward ends and
    come back before their backward, so the GPU keeps (n - k) a_none at the peak (the copy in transit
    is not counted: a lower bound). Named tensors offloaded from every layer (strategy offload_tensors,
    ``offloaded_layer_bytes`` per layer and micro-batch, engine.dp_comm.offloaded_tensor_bytes) leave each of the
    stage's n layers: n x those bytes fewer per micro-batch.

    Uniform full recompute (``--recompute-method uniform --recompute-num-layers N``, ``recompute_chunk``
    N > 1): each model chunk's layers are checkpointed in groups of N, keeping one input (the
    full-recompute row) per group, v ceil(n / (v N)) of them on the stage, and the backward
    re-materialises one group at a time: N layers of the no-recompute row are the working set.

    ``mtp_modules`` D (the multi-token prediction modules on this stage): per in-flight micro-batch each keeps
    a layer of the last layer's kind (the stage's recompute mode) and the inputs of its enorm, hnorm, eh_proj
    (2h wide) and final norm, 5 x 2 s b h (/ t with sequence parallelism; 2 s b h, the module's input, under
    full recompute); and the stage keeps one more output head's fp32 logits, 4 s b V / t each (the loss's
    softmax, kept for its backward), on the stage with the head: (1 + D) heads.

    ``head``: the stage holds the output layer and the loss (the last stage, p > 1; always when p = 1): its fp32
    logits 4 s b V / t, for one micro-batch under 1F1B and interleaving (the last stage runs each micro-batch's
    last-chunk forward right before its backward: Megatron-Core schedules.py, no warm-up forwards of the last
    chunk on the last rank), for all m under GPipe (every forward before any backward). The fp32 cross entropy is
    Korthikanti et al. 2022 §4's 4sbv/t, the vocabulary part of Megatron-LM theoretical_memory_usage.py's "Inputs to
    output layer and CE loss" 4sbh (1 + v/h) / t; Megatron-Core's vocab-parallel cross entropy, unfused and
    ``cross_entropy_loss_fusion`` with the native implementation alike, casts the logits shard ``.float()``
    (calculate_logits_max) and saves the fp32 softmax ``exp_logits`` for its backward
    (tensor_parallel/cross_entropy.py, fusions/fused_cross_entropy.py). With them, as often as the logits, the
    final norm's and output layer's 16-bit inputs (:func:`head_input_bytes`, the 4sbh/t of the same formula). Not
    counted: the 16-bit logits while the loss runs (freed once it has cast them). ``logits_bytes`` replaces the 4
    bytes a logit for the implementations that keep something else (strategy loss_impl,
    :func:`scalemodel.cost.compute.loss_saved_bytes`: Transformer Engine's and flash-attn's fused losses keep the
    16-bit logits tensor, 2 bytes, and no fp32 copy).

    ``per_layer``: a dict shared by calls whose per-layer arguments (micro_batch, seq_len, tp, cp,
    sequence_parallel, recompute, flash_attention, fp8_inputs, recompute_modules) are the same, e.g. the
    stages of one strategy grid: each :func:`activation_bytes_per_layer` is then computed once for all of them.
    ``attention_inputs``, ``latent_inputs``, ``out_proj_inputs``: modules' saved GEMM inputs at their own precision
    (:func:`activation_bytes_per_layer`, :func:`mamba_activation_bytes`; training.module_precision); ``proj_inputs``:
    linear_proj's (:func:`activation_bytes_per_layer`; training.proj_original_input, strategy fp8_wgrad);
    ``linear_inputs``: linear_fc2's and the experts' linears' (strategy fp8_wgrad false).
    ``elem_bytes`` e: bytes of an activation element (the job's: 4 in an fp32 / tf32 run, else 2), the size of every
    element-sized term here and in the per-layer functions (the 16-bit terms of the text above are e-byte ones; the
    1-byte dropout masks, the fp32 logits and log-sum-exp and the quantized inputs keep their size).
    """
    kw = dict(micro_batch=micro_batch, seq_len=seq_len, tp=tp, cp=cp, sequence_parallel=sequence_parallel,
              flash_attention=flash_attention, fp8_inputs=fp8_inputs, recompute_modules=recompute_modules,
              attention_inputs=attention_inputs, latent_inputs=latent_inputs, etp=etp, elem_bytes=elem_bytes,
              moe_capacity=moe_capacity, moe_einsum=moe_einsum, proj_inputs=proj_inputs,
              linear_inputs=linear_inputs)
    e = _pos("elem_bytes", elem_bytes)
    memo: dict[Any, np.ndarray] = {} if per_layer is None else per_layer
    n_moe = sh.moe_layers
    hybrid_kinds = _hybrid_kinds(sh)

    def layer(rec: ArrayLike, moe: bool | str) -> np.ndarray:
        return _layer_bytes(sh, rec, moe, memo, {**kw, "out_proj_inputs": out_proj_inputs})

    def layers(rec: ArrayLike) -> np.ndarray:
        return layers_activation_bytes(sh, rec, memo, out_proj_inputs=out_proj_inputs, **kw)

    p = _pos("pp", pp)
    t = _pos("tp", tp)
    code = recompute_code(recompute)
    per_stage = layers(recompute) * _stage_share(sh, p, stage_layers)
    n_stage = sh.layers * _stage_share(sh, p, stage_layers)
    partial = recomputed_layers is not None and np.any(_nonneg("recomputed_layers", recomputed_layers) < n_stage)
    offloaded = _nonneg("offloaded_layers", offloaded_layers)
    if partial or np.any(offloaded > 0):
        avg_none = layers("none") / sh.layers
        if partial:
            avg_full = layers("full") / sh.layers
            r = np.minimum(np.asarray(recomputed_layers, dtype=float), n_stage)
            per_stage = np.where(code == Recompute.FULL, r * avg_full + (n_stage - r) * avg_none, per_stage)
            code = np.where((code == Recompute.FULL) & (r <= 0), Recompute.NONE, code)  # no working set
        per_stage = np.maximum(per_stage - np.minimum(offloaded, n_stage) * avg_none, 0.0)
    per_stage = np.maximum(per_stage - n_stage * _nonneg("offloaded_layer_bytes", offloaded_layer_bytes), 0.0)
    chunk = _nonneg("recompute_chunk", recompute_chunk)
    uniform = (code == Recompute.FULL) & (chunk > 1)
    if np.any(uniform):
        avg_full = layers("full") / sh.layers
        v = _pos("virtual_stages", virtual_stages)
        checkpoints = v * np.ceil(n_stage / v / np.maximum(chunk, 1.0))
        per_stage = np.where(uniform, checkpoints * avg_full, per_stage)
    inflight = (inflight_microbatches(p, num_microbatches, schedule, virtual_stages, stage_rank) if inflight is None
                else np.asarray(inflight, dtype=float))
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len) / _pos("cp", cp)
    sp = np.asarray(sequence_parallel, dtype=bool)
    # the embedding dropout mask, on the stage holding the embedding
    emb = s * b * sh.hidden * np.where(sp, 1.0 / t, 1.0) * sh.dropout * (np.asarray(embedding, dtype=bool) | (p == 1))
    d_mtp = _nonneg("mtp_modules", mtp_modules)
    if np.any(d_mtp):  # (without MTP modules the term is 0 x finite bytes: exactly nothing to add)
        last_l = np.where(sh.last_layer_moe, layer(recompute, True), layer(recompute, False)) if np.any(
            sh.last_layer_moe) else layer(recompute, False)
        mtp_inputs = np.where(code == Recompute.FULL, e, 5.0 * e) * s * b * sh.hidden * np.where(sp, 1.0 / t, 1.0)
        per_stage = per_stage + d_mtp * (last_l + mtp_inputs)
    on_stage = (p == 1) | np.asarray(head, dtype=bool) | (d_mtp > 0)
    held = np.where((pipeline.schedule_code(schedule) == ScheduleKind.GPIPE) & (p > 1),
                    _pos("num_microbatches", num_microbatches), 1.0)  # GPipe: every forward before any backward
    logits = np.where(on_stage, (1.0 + d_mtp) * _pos("logits_bytes", logits_bytes) * s * b * sh.vocab / t, 0.0) * held
    logits = logits + head_input_bytes(sh, micro_batch=b, seq_len=s, tp=t, sequence_parallel=sp,
                                       mtp_modules=d_mtp, elem_bytes=e) * np.where(on_stage, held, 0.0)
    # full recompute re-materialises one layer at a time: its full activations are the working set
    if sh.hybrid is not None:
        work = np.max(np.broadcast_arrays(*[layer("none", kind) for kind, _ in hybrid_kinds]), axis=0)
    else:
        work_dense = layer("none", False)
        work = np.where(n_moe > 0, np.maximum(work_dense, layer("none", True)), work_dense) if np.any(
            n_moe > 0) else work_dense
    working = np.where(code == Recompute.FULL, work * np.where(uniform, np.minimum(chunk, n_stage), 1.0), 0.0)
    again_moe = recomputed_modules(sh, code, recompute_modules).moe
    if np.any(n_moe > 0) and np.any(again_moe):
        # selective moe: one MoE block re-materialised at a time (docstring): its split bytes, the difference of its
        # no-recompute and recomputed rows less the (e - g) s b h the kept e-byte input adds over the no-recompute
        # row's MLP-input copy (g the saved GEMM-input bytes; not with a parallel block, whose norm output is shared),
        # + the quantized copies of its input its linears save again beside that 16-bit input
        block = (activation_bytes_per_layer(sh, recompute="none", moe=True, attention=False, mlp=True, **kw)
                 - activation_bytes_per_layer(sh, recompute="selective", moe=True, attention=False, mlp=True,
                                              **kw))
        q = np.asarray(fp8_inputs, dtype=float)
        g = np.where(q > 0.0, q, e)
        sbh_in = s * b * sh.hidden * np.where(sp, 1.0 / t, 1.0)
        # fc1_latent_proj's copy at its own precision (training.module_precision moe_latent; 0 = BF16: it keeps the
        # checkpoint's input itself); the block's no-recompute row holds its own-precision copy (gemm bytes, e when
        # BF16), which the copy here replaces
        has_lat = np.where(sh.moe_latent > 0, 1.0, 0.0)
        if latent_inputs is None:
            q_lat, own_copy = q, 0.0
        else:
            q_lat = np.asarray(latent_inputs, dtype=float)
            own_copy = has_lat * np.where(q_lat > 0.0, q_lat, e) * sbh_in
        copies = has_lat * q_lat + np.where(
            (sh.moe_shared_experts > 0) & np.asarray(shared_input_copy, dtype=bool), 1.0, 0.0) * q
        held = np.where(np.asarray(sh.parallel_block, dtype=bool), 0.0, e - g)
        working = working + np.where(again_moe, block - own_copy + (held + copies) * sbh_in, 0.0)
    # selective layernorm: the backward refills one norm's output at a time (e s b h, / t with SP) before the
    # block that reads it; under moe that is already in the MoE block's working set above (its checkpoint's input; an
    # MLA input norm is refilled later, in the attention's backward, beside less)
    again = recomputed_modules(sh, code, recompute_modules)
    ln_in, ln_pre = recomputed_norms(sh, again.layernorm, moe=True)
    any_norm = np.where(n_moe > 0, ln_in | ln_pre, ln_in)
    if np.any(any_norm):
        ln_ws = e * s * b * sh.hidden * np.where(sp, 1.0 / t, 1.0)
        working = working + np.where(any_norm & ~((n_moe > 0) & again.moe), ln_ws, 0.0)
    dense_mlps = sh.mlp_layers + sh.mtp_layers - sh.mtp_moe_layers
    if np.any(again.mlp) and np.any(dense_mlps > 0):
        # selective mlp: one dense MLP block re-materialised at a time (its checkpoint re-runs the fused norm, the
        # up-projection and the activation): what its layer drops, the no-recompute row less the recomputed one;
        # not at the same time as an MoE block's or a norm's (other layers, or later in the layer's backward)
        mlp_block = (activation_bytes_per_layer(sh, recompute="none", attention=False, mlp=True, **kw)
                     - activation_bytes_per_layer(sh, recompute="selective", attention=False, mlp=True, **kw))
        working = np.where(again.mlp & (dense_mlps > 0), np.maximum(working, mlp_block), working)
    if np.any(again.shared_experts) and np.any(n_moe > 0):
        # selective shared_experts: one layer's shared experts re-materialised at a time (inside the MoE block's
        # working set under moe)
        shared_ws = sh.moe_shared_experts * sh.moe_ffn_hidden * s * b * (
            np.where(sh.gated_mlp, 2.0 * e, e) + np.where(np.asarray(fp8_inputs, dtype=float) > 0.0,
                                                          np.asarray(fp8_inputs, dtype=float), e)) / t
        working = np.where(again.shared_experts & ~again.moe & (n_moe > 0), np.maximum(working, shared_ws), working)
    return (per_stage + emb) * inflight + logits + working


# --- totals -----------------------------------------------------------------------------------


class MemoryBreakdown(msgspec.Struct, frozen=True, eq=False):  # numpy fields: == has no single truth value
    """Per-GPU bytes (arrays). ``total`` = (states + activations) * (1 + frag) + workspace."""

    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray
    fragmentation: np.ndarray
    workspace: np.ndarray

    @property
    def states(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> np.ndarray:
        return self.states + self.activations + self.fragmentation + self.workspace


def expert_data_parallel(dp: ArrayLike, *, tp: ArrayLike = 1, cp: ArrayLike = 1, ep: ArrayLike = 1,
                         etp: ArrayLike | None = None) -> np.ndarray:
    """Ranks the routed experts' states are replicated over (and ZeRO shards them over): the tp cp dp ranks of
    a pipeline stage over etp ep, at least 1 (Megatron-Core's expert grid, MoE parallel folding, Liu et al.
    2025, arXiv 2504.14960: edp = world / (pp etp ep); dp / ep when etp = tp and cp = 1). ``dp``: the
    data-parallel replicas the states are sharded over (the HSDP or hier group where it applies)."""
    t = _pos("tp", tp)
    u = t if etp is None else _pos("etp", etp)
    return np.asarray(np.maximum(_pos("dp", dp) * t * _pos("cp", cp) / (_pos("ep", ep) * u), 1.0))


def gathered_unit(sh: Shape, *, tp: ArrayLike = 1, ep: ArrayLike = 1, etp: ArrayLike | None = None) -> np.ndarray:
    """Elements of the largest ZeRO-3 / FSDP unit, one transformer layer, on one GPU: a dense layer's or an MoE
    layer's tensors (:func:`~scalemodel.cost.transformer.layer_param_tensors`) on one of ``tp`` ranks
    (:func:`~scalemodel.cost.transformer.tensors_on_tp_rank`: the TP-split ones / tp, every other one whole), the MoE
    layer's with its E / ep routed experts on one of ``etp`` ranks (default tp; their fc2 bias whole, as every
    row-parallel bias), the larger of the two (a dense one only
    where the model has dense layers, or no MoE ones). Whole on every TP rank (Megatron-Core at
    NVIDIA/Megatron-LM@d98e8a64dd, docs/model.md#tp-whole-params): the norms (TENorm and the norm inside
    TELayerNormColumnParallelLinear, extensions/transformer_engine.py, ``hidden_size`` wide), the router
    (moe/router.py ``torch.empty((num_moe_experts, hidden_size))``; torchtitan's Llama 4 gate an ``nn.Linear`` its
    TP plan leaves unsplit), a RowParallelLinear's bias, MLA's down-projections and latent norms and LatentMoE's
    projections. A hybrid pattern's unit is counted as attention beside its MLP / MoE block, no Mamba mixer."""
    t = _pos("tp", tp)
    u = t if etp is None else _pos("etp", etp)
    dense = tensors_on_tp_rank(layer_param_tensors(sh, moe=False), t)
    # each routed expert's tensors on one of etp ranks: fc1, fc2 and fc1's bias / etp, fc2's bias whole (a
    # RowParallelLinear's, expert or not: tensor_parallel/layers.py L1484 at d98e8a64dd; review31a)
    routed = sh.moe_experts / _pos("ep", ep) * tensors_on_tp_rank(expert_param_tensors(sh), u)
    moe = tensors_on_tp_rank(layer_param_tensors(sh, moe=True), t) + routed
    return np.maximum(np.where((sh.mlp_layers > 0) | (sh.moe_layers <= 0), dense, 0.0),
                      np.where(sh.moe_layers > 0, moe, 0.0))


def memory_per_gpu(sh: Shape, *, micro_batch: ArrayLike, seq_len: ArrayLike, dp: ArrayLike = 1,
                   tp: ArrayLike = 1, pp: ArrayLike = 1, cp: ArrayLike = 1, ep: ArrayLike = 1,
                   zero_stage: ArrayLike = 0, recompute: ArrayLike = "none",
                   sequence_parallel: ArrayLike = False, num_microbatches: ArrayLike = 1,
                   schedule: ArrayLike = "1f1b", virtual_stages: ArrayLike = 1,
                   weight_bytes: ArrayLike = 2.0, grad_bytes: ArrayLike = 2.0,
                   optimizer_bytes: ArrayLike = 12.0, flash_attention: ArrayLike = False,
                   fragmentation: ArrayLike = DEFAULT_FRAGMENTATION,
                   workspace: ArrayLike = DEFAULT_WORKSPACE, stage_layers: ArrayLike | None = None,
                   etp: ArrayLike | None = None, recomputed_layers: ArrayLike | None = None,
                   offloaded_layers: ArrayLike = 0.0, recompute_chunk: ArrayLike = 0.0,
                   offloaded_layer_bytes: ArrayLike = 0.0,
                   fp8_inputs: ArrayLike = False, recompute_modules: ArrayLike = 0,
                   embedding: ArrayLike = True, stage_rank: ArrayLike = 0,
                   reshard_after_forward: ArrayLike = True, fp8_gather: ArrayLike = False,
                   expert_dp: ArrayLike | None = None, mtp_modules: ArrayLike = 0.0,
                   head: ArrayLike = False, fp8_params: ArrayLike = False, fp8_param_bytes: ArrayLike = 1.0,
                   logits_bytes: ArrayLike = 4.0, per_layer: dict[Any, np.ndarray] | None = None,
                   root_unit: ArrayLike = False, activations: ArrayLike | None = None,
                   shared_input_copy: ArrayLike = True, deferred_sync: ArrayLike = False,
                   fp8_linear_per_layer: ArrayLike | None = None, attention_inputs: ArrayLike | None = None,
                   latent_inputs: ArrayLike | None = None,
                   out_proj_inputs: ArrayLike | None = None, inflight: ArrayLike | None = None,
                   weight_workspace: ArrayLike = 0.0, expert_workspace: ArrayLike = 0.0,
                   mtp_workspace: ArrayLike = 0.0, mtp_expert_workspace: ArrayLike = 0.0,
                   elem_bytes: ArrayLike = 2.0, fsdp2: ArrayLike = False,
                   shared: dict[str, Any] | None = None,
                   moe_capacity: ArrayLike = 1.0, moe_einsum: ArrayLike = False,
                   host_states: ArrayLike = 0, proj_inputs: ArrayLike | None = None,
                   linear_inputs: ArrayLike | None = None) -> MemoryBreakdown:
    """Per-GPU memory of a transformer under a parallel strategy (first pipeline stage, holding
    ``stage_layers`` layers when the stages are uneven, else L/p). ``moe_capacity``, ``moe_einsum``: the routed
    experts' capacity rows and XLA's einsum-dispatch buffers (:func:`activation_bytes_per_layer`).

    Dense parameters are sharded by ZeRO over ``dp``; expert parameters over the expert-DP replicas,
    tp cp dp / (etp ep) (Megatron-Core's expert grid, MoE parallel folding; dp/ep when etp = tp, cp = 1).
    ZeRO-3 gathers one layer at a time, with one more prefetched (2 x :func:`gathered_unit`, the largest layer's
    tensors on one GPU: the TP-split ones / tp, the rest whole, that layer's own, not the layers' mean); with
    ``reshard_after_forward`` false (PyTorch fully_shard reshard_after_forward=False) every unit keeps its
    gathered weights from its forward to its backward, so the stage's whole unsharded parameters
    (dense, and the experts where FSDP shards them: ``expert_dp`` > 1) are held at once. ``deferred_sync``
    (strategy fsdp_defer_grad_sync, FSDP2 with its gradient sync and reshard after backward off until the last of
    ``num_microbatches`` > 1; docs/model.md#fsdp-deferred-sync): the units a backward gathered stay gathered into the
    next forward, so the whole stage is held as without reshard, and the unsharded gradients of those parameters
    accumulate at ``grad_bytes`` (the reduce dtype: FSDP2 casts them to it when it differs from the parameters')
    until the last backward reduce-scatters them. ``fp8_gather`` (torchao enable_fsdp_float8_all_gather, Megatron-FSDP's
    fp8_param_gather): the gathered copies of the linear weights on this TP rank
    (:func:`~scalemodel.cost.transformer.linear_weights_per_layer` at ``tp``: the split ones / tp, MLA's
    down-projections and LatentMoE's projections whole, as the engine's ``_gathered_bytes`` counts the wire) are
    float8, 1 byte each, at most the gathered bytes; the rest stays at ``weight_bytes``. ``root_unit`` (PyTorch
    FSDP's root unit, one pipeline stage: the engine's ``fsdp_root_params``): the embedding, output layer and final norm
    (:func:`~scalemodel.cost.transformer.embedding_params` / tp) stay gathered from the forward to the end of the
    backward, on top of the two layers (already counted when every unit stays gathered). ``embedding`` false:
    a pipeline stage without the embedding (its table and dropout mask); ``stage_rank`` the stage whose
    micro-batches in flight are counted (:func:`inflight_microbatches`). ``expert_dp``: the ranks the expert
    states are sharded over when ``dp`` is not the plain data-parallel degree (the engine passes dp x cp as
    ``dp``); default :func:`expert_data_parallel` of ``dp``. ``mtp_modules`` and ``head``: the
    multi-token prediction modules and the output layer on the stage (:func:`params_per_gpu`,
    :func:`activation_bytes`). ``fp8_params`` (ZeRO 0-2; Megatron-Core --fp8-param-gather, "keep the compute
    param in fp8 (do not use any other intermediate dtype)", megatron/training/arguments.py): the stage's linear
    weights on this TP rank (``stage x`` :func:`~scalemodel.cost.transformer.linear_weights_per_layer` at ``tp``: the
    split ones / tp, MLA's down-projections and LatentMoE's projections whole) and every routed
    expert parameter are held at ``fp8_param_bytes`` (1 for per-tensor FP8, the transposed copy not held; 2 (1/2 +
    1/16) = 1.125 for NVFP4, both copies with their scales: :func:`scalemodel.cost.compute.param_gather_bytes`)
    instead of ``weight_bytes`` (the fp32 master copy is in the optimizer states); ``fp8_linear_per_layer``
    (default: all of linear_weights_per_layer at ``tp``) the linear weights per layer on this TP rank that are FP8
    parameters, less those of
    modules at their own precision (training.module_precision: Megatron-Core builds them under their own
    ``fp8_model_init``, BF16; docs/model.md#module-precision). ``per_layer``:
    :func:`activation_bytes`'s memo, shared by the stages of one strategy grid.
    ``activations``: this stage's :func:`activation_bytes` when a call with the same activation arguments has
    already computed them (none of the model-state arguments, dp, zero_stage, expert_dp, the byte sizes, enters
    them); then they are not computed again. ``shared_input_copy``: :func:`activation_bytes`' (the selective-moe
    working set). ``weight_workspace``: bytes per transformer layer on this TP rank (the TP-split weights' / tp, the
    whole ones whole: :func:`~scalemodel.cost.transformer.linear_weights_per_layer` at tp) of the quantized
    copies Transformer Engine caches of the layer's dense linear weights between micro-batches and steps, each
    module's weights at its own recipe's :func:`weight_workspace_bytes` (0 = none); ``expert_workspace``: bytes per
    routed-expert parameter of the same (GroupedLinear's). Held on top of the weights, at any ZeRO stage: the
    stage's ``stage x weight_workspace`` and ``expert_workspace x`` its routed expert parameters, whole (the
    engine's :func:`scalemodel.engine.stage_memory.weight_workspace` says which strategies hold them;
    docs/model.md#weight-workspace). ``mtp_workspace``: the same bytes per MTP module with weights
    (:func:`~scalemodel.cost.transformer.mtp_linear_weights` on this TP rank, at the block's recipe) and
    ``mtp_expert_workspace`` per routed-expert parameter of the MTP modules (their share of ``expert``, priced at it
    instead of ``expert_workspace``). ``elem_bytes``: bytes of an activation element (:func:`activation_bytes`; the
    engine passes the job's, 4 in an fp32 / tf32 run, else 2). ``fsdp2``: zero fsdp / hsdp on PyTorch FSDP2, whose
    shards and their gradients are held at the parameters' own dtype (:func:`model_state_bytes`,
    :func:`fsdp2_shard_bytes`; the deferred accumulators above stay at the reduce dtype). ``shared``: a dict the
    caller keeps across the calls
    for the stages of one strategy grid (:func:`scalemodel.engine.stage_memory.memory_peak_stage`'s): the terms no
    stage argument enters (the checked degrees, the expert-DP ranks, the gathered ZeRO-3 unit and linear weights, the
    cached-copy bytes, :func:`params_per_gpu`'s shape terms) are computed on the first call and read by the next ones
    with the same argument objects (:func:`_once`); the values are those computed without it, to the bit.
    """
    n_dp, e, t, frag, ws = _once(shared, "degrees", (dp, ep, tp, fragmentation, workspace), lambda: (
        _pos("dp", dp), _pos("ep", ep), _pos("tp", tp), _nonneg("fragmentation", fragmentation),
        _nonneg("workspace", workspace)))
    pg = params_per_gpu(sh, tp=tp, pp=pp, ep=ep, stage_layers=stage_layers, etp=etp, embedding=embedding,
                        mtp_modules=mtp_modules, head=head, shared=shared)
    u, edp, gathered, linear, keep, any_keep, deferred = _once(
        shared, "units", (sh, dp, ep, tp, etp, cp, expert_dp, reshard_after_forward, root_unit, deferred_sync,
                          num_microbatches),
        lambda: _gathered_units(sh, n_dp, e, t, etp, cp, expert_dp, reshard_after_forward, root_unit, deferred_sync,
                                num_microbatches))
    # the stage's FSDP-managed parameters on this GPU, unsharded: the routed experts only where FSDP shards them
    # (expert_dp > 1): at expert_dp 1 (EP = dp, left out of FSDP as Automodel's apply_fsdp ignored_params does) the
    # expert states below hold them whole, once (fsdpsync34: they were counted a second time as a gathered copy, 7.4 GB
    # on automodel26's Nano row). Held gathered where every unit stays gathered, and as the deferred-sync gradients.
    managed = pg.dense + np.where(edp > 1, pg.expert, 0.0) if any_keep else 0.0
    if any_keep:  # every unit of the stage stays gathered from its forward to its backward
        stage = sh.layers * _stage_share(sh, _pos("pp", pp), stage_layers)
        gathered = np.where(keep, managed, gathered)
        linear = np.where(keep, stage * linear_weights_per_layer(sh, t), linear)
    if np.any(fp8_gather):  # float8 gathered copies of the linear weights: 1 byte of each wb is held
        wb = _nonneg("weight_bytes", weight_bytes)
        gathered = np.where(np.asarray(fp8_gather, dtype=bool), gathered - np.minimum(linear, gathered) * (
            1.0 - 1.0 / np.maximum(wb, 1.0)), gathered)
    kw = dict(zero_stage=zero_stage, weight_bytes=weight_bytes, grad_bytes=grad_bytes,
              optimizer_bytes=optimizer_bytes, fsdp2=fsdp2, host_states=host_states)  # host_offloaded: offload_states
    dense = model_state_bytes(pg.dense, dp=n_dp, gathered_params=gathered, **kw)
    if np.any(deferred):  # FSDP2's unsharded gradient accumulators, held from the first backward to the last
        held = np.where(deferred, _nonneg("grad_bytes", grad_bytes) * managed, 0.0)  # (deferred: any_keep holds)
        dense = ModelStates(weights=dense.weights, gradients=dense.gradients + held, optimizer=dense.optimizer)
    # a stage without routed experts holds exactly 0 expert bytes: those states are not priced (adding 0.0 to the
    # dense ones changes no bit)
    expert = model_state_bytes(pg.expert, dp=edp, **kw) if np.any(pg.expert) else None
    cached, cached_e, cached_m, cached_me, any_cached = _once(
        shared, "workspaces", (weight_workspace, expert_workspace, mtp_workspace, mtp_expert_workspace),
        lambda: _workspaces(weight_workspace, expert_workspace, mtp_workspace, mtp_expert_workspace))
    if np.any(fp8_params):
        stage = sh.layers * _stage_share(sh, _pos("pp", pp), stage_layers)
        per = linear_weights_per_layer(sh, t) if fp8_linear_per_layer is None else _nonneg(
            "fp8_linear_per_layer", fp8_linear_per_layer)
        lin = np.minimum(stage * per, pg.dense)  # the stage's quantized linear weights on this GPU
        # FP8 primary weights replace the replicated 16-bit ones (ZeRO 0-2)
        on = np.asarray(fp8_params, dtype=bool) & (zero_code(zero_stage) < 3)
        held = _nonneg("fp8_param_bytes", fp8_param_bytes)
        save = np.where(on, np.maximum(_nonneg("weight_bytes", weight_bytes), held) - held, 0.0)
        dense = ModelStates(weights=dense.weights - save * lin, gradients=dense.gradients, optimizer=dense.optimizer)
        if expert is not None:
            expert = ModelStates(weights=expert.weights - save * pg.expert,
                                 gradients=expert.gradients, optimizer=expert.optimizer)
    if any_cached:  # TE's cached quantized copies
        stage = sh.layers * _stage_share(sh, _pos("pp", pp), stage_layers)
        # an MTP module's routed experts: params_per_gpu's count (its memo where ``shared`` keeps one)
        d_mtp, mtp_routed = _mtp_weights(sh, mtp_modules, _once(shared, "model params", (sh,),
                                                                lambda: _model_params(sh)).mtp_routed)
        dense = ModelStates(weights=dense.weights + stage * cached + d_mtp * cached_m, gradients=dense.gradients,
                            optimizer=dense.optimizer)
        if expert is not None:
            mtp_e = d_mtp * mtp_routed / (e * u)  # the MTP modules' routed experts on this GPU (params_per_gpu's)
            expert = ModelStates(weights=expert.weights + cached_e * (pg.expert - mtp_e) + cached_me * mtp_e,
                                 gradients=expert.gradients, optimizer=expert.optimizer)
    if activations is not None:
        act = np.asarray(activations, dtype=float)
    else:
        act = activation_bytes(sh, micro_batch=micro_batch, seq_len=seq_len, tp=tp, pp=pp, cp=cp,
                               sequence_parallel=sequence_parallel, recompute=recompute,
                               num_microbatches=num_microbatches, schedule=schedule,
                               virtual_stages=virtual_stages, flash_attention=flash_attention,
                               stage_layers=stage_layers, recomputed_layers=recomputed_layers,
                               offloaded_layers=offloaded_layers, recompute_chunk=recompute_chunk,
                               offloaded_layer_bytes=offloaded_layer_bytes,
                               fp8_inputs=fp8_inputs, recompute_modules=recompute_modules, embedding=embedding,
                               stage_rank=stage_rank, mtp_modules=mtp_modules, head=head, logits_bytes=logits_bytes,
                               per_layer=per_layer, shared_input_copy=shared_input_copy,
                               attention_inputs=attention_inputs, latent_inputs=latent_inputs,
                               out_proj_inputs=out_proj_inputs, inflight=inflight, etp=etp,
                               elem_bytes=elem_bytes, moe_capacity=moe_capacity, moe_einsum=moe_einsum,
                               proj_inputs=proj_inputs, linear_inputs=linear_inputs)
    if expert is None:
        return MemoryBreakdown(weights=dense.weights, gradients=dense.gradients, optimizer=dense.optimizer,
                               activations=act, fragmentation=frag * (dense.total + act),
                               workspace=ws + np.zeros_like(act))
    states = dense.total + expert.total
    return MemoryBreakdown(
        weights=dense.weights + expert.weights, gradients=dense.gradients + expert.gradients,
        optimizer=dense.optimizer + expert.optimizer, activations=act,
        fragmentation=frag * (states + act), workspace=ws + np.zeros_like(act))


def _gathered_units(sh: Shape, n_dp: np.ndarray, e: np.ndarray, t: np.ndarray, etp: ArrayLike | None, cp: ArrayLike,
                    expert_dp: ArrayLike | None, reshard_after_forward: ArrayLike, root_unit: ArrayLike,
                    deferred_sync: ArrayLike, num_microbatches: ArrayLike
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool, np.ndarray]:
    """:func:`memory_per_gpu`'s terms that read no stage argument, in its order: the expert-TP degree u, the expert-DP
    ranks, the ZeRO-3 parameters gathered at a time and the linear weights among them (before a stage that keeps
    every unit gathered), the units kept gathered (``reshard_after_forward`` false, or the gradient sync deferred
    over more than one micro-batch: fsdpsync34), whether any is, and where the sync is deferred."""
    u = t if etp is None else _pos("etp", etp)
    edp = expert_data_parallel(n_dp, tp=t, cp=cp, ep=e, etp=u) if expert_dp is None else _pos("expert_dp", expert_dp)
    # two units on one TP rank, the largest unit's own count (not the layers' mean): the TP-split parameters / t, the
    # linears every rank holds whole, MLA's down-projections of its attention and LatentMoE's projections (with
    # their biases) of its MoE block, whole: the count of the workspace and FP8 bytes (mem30c; review30b: the whole
    # linears were the layers' mean, short of a hybrid's MoE unit's 2 h l; before mem30c every parameter / t)
    layer = gathered_unit(sh, tp=t, ep=e, etp=u)
    gathered = 2.0 * layer
    linear = 2.0 * linear_weights_per_layer(sh, t)  # on one TP rank: MLA down / latent projections whole (mtp30)
    deferred = np.asarray(deferred_sync, dtype=bool) & (np.asarray(num_microbatches) > 1)
    keep = ~np.asarray(reshard_after_forward, dtype=bool) | deferred
    # PyTorch FSDP's root unit is not resharded after the forward (engine.layer_compute.fsdp_root_params)
    if np.any(root_unit):
        gathered = np.where(np.asarray(root_unit, dtype=bool), gathered + embedding_params(sh) / t, gathered)
    return u, edp, gathered, linear, keep, bool(np.any(keep)), deferred


def _workspaces(weight_workspace: ArrayLike, expert_workspace: ArrayLike, mtp_workspace: ArrayLike,
                mtp_expert_workspace: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """:func:`memory_per_gpu`'s cached-copy bytes, checked, and whether any is held."""
    cached, cached_e = _nonneg("weight_workspace", weight_workspace), _nonneg("expert_workspace", expert_workspace)
    cached_m = _nonneg("mtp_workspace", mtp_workspace)
    cached_me = _nonneg("mtp_expert_workspace", mtp_expert_workspace)
    return (cached, cached_e, cached_m, cached_me,
            bool(np.any(cached) or np.any(cached_e) or np.any(cached_m) or np.any(cached_me)))


def fits(total_bytes: ArrayLike, capacity_bytes: ArrayLike) -> np.ndarray:
    """True where the per-GPU total fits the accelerator memory."""
    return np.asarray(total_bytes, dtype=float) <= _pos("capacity", capacity_bytes)


def max_micro_batch(states_bytes: ArrayLike, activation_bytes_per_sample: ArrayLike,
                    capacity_bytes: ArrayLike, *, fragmentation: ArrayLike = DEFAULT_FRAGMENTATION,
                    workspace: ArrayLike = DEFAULT_WORKSPACE) -> np.ndarray:
    """Largest integer micro-batch b with (states + b * act1) * (1 + frag) + workspace <= capacity.

    Activations are linear in b (every term of Korthikanti's table has one factor b), so
    b_max = floor((capacity - workspace - states (1 + frag)) / (act1 (1 + frag))), 0 if none fits.
    """
    f1 = 1.0 + _nonneg("fragmentation", fragmentation)
    room = _pos("capacity", capacity_bytes) - _nonneg("workspace", workspace) - _nonneg("states", states_bytes) * f1
    per = _pos("activation_bytes_per_sample", activation_bytes_per_sample) * f1
    b = np.floor(room / per)
    if np.any(~np.isfinite(b)) or np.any(b > 2**53):
        raise InputError("the largest micro-batch is unbounded (activation bytes near zero or memory near infinite)",
                         where="max_micro_batch", allowed="finite, physical activation sizes and capacities")
    return np.maximum(b, 0.0).astype(np.int64)


# --- activation memory --------------------------------------------------------------------------


def quantized_input_bytes(recipe: str) -> float:
    """Bytes of one saved GEMM-input element of a low-precision run (the ``fp8_inputs`` of the activation functions):
    TE's ``_Linear.forward`` keeps the column-wise copy only ("Discard row-wise data since it is not needed in
    backward pass"), its data and its scales (NVIDIA/TransformerEngine@d0067d0 transformer_engine/pytorch/tensor):
    0 (16-bit, not quantized) without a recipe; 1 for delayed and tensorwise (current) scaling (float8_tensor.py: a
    uint8 ``_transpose``, or the data itself where the GEMM takes non-TN layouts, and one fp32 scale per tensor);
    1 + 1/32 = 1.03125 for mxfp8 (mxfp8_tensor.py ``_columnwise_data`` uint8 and ``_columnwise_scale_inv`` uint8 of
    shape (M / 32, N), one E8M0 scale per MXFP8_BLOCK_SCALING_SIZE = 32 elements, padded to multiples of 4 x 128,
    not counted); 1 + 4/128 = 1.03125 for blockwise (float8_blockwise_tensor.py ``_columnwise_data`` and one fp32
    ``_columnwise_scale_inv`` per 1 x 128 tile); 1/2 + 1/16 = 0.5625 for nvfp4 (E2M1 values and one E4M3 scale per
    16 elements); 0 for torchao's row-wise recipes, which save the 16-bit input and weight and cast them again in
    the backward (pytorch/ao@4fc4068d6
    torchao/float8/float8_linear.py line 45, ``ctx.save_for_backward(input_hp, weight_hp_t)``)."""
    if not recipe or recipe in ROWWISE_FP8_RECIPES:
        return 0.0
    return {"nvfp4": 0.5 + 1.0 / 16.0, "mxfp8": 1.0 + 1.0 / 32.0, "blockwise": 1.0 + 4.0 / 128.0}.get(recipe, 1.0)


def weight_workspace_bytes(recipe: str, transpose_copy: bool = False) -> float:
    """Bytes per weight element of the quantized copy Transformer Engine keeps of a 16-bit linear weight between
    micro-batches and steps, its "weight workspace": 0 without a Transformer Engine recipe (16-bit, torchao's row-wise
    recipes, which cast the weight on every call).

    Source: with ``is_first_microbatch`` given (True / False, not None) TE's ``Linear.forward`` names the cache
    (``cache_name = None if (is_first_microbatch is None or self.is_fsdp2) else "weight"``), quantizes the weight into
    it on the first micro-batch only (``update_ws = is_first_microbatch is None or is_first_microbatch``) and stores
    it in the module's ``self._fp8_workspaces[cache_name]``, a module attribute that lives across steps (cleared only
    when the recipe type changes): transformer_engine/pytorch/module/linear.py L405-432, L1805-1807, L1906-1909,
    base.py ``quantize_weight`` L669-730, ``_fp8_workspaces`` L792, L1384 at NVIDIA/TransformerEngine@4220403e8
    (v2.16); the same in v2.8 (@40c69e751 linear.py L253-259, ``get_weight_workspace(cache_name=...)``), and in
    layernorm_linear.py, layernorm_mlp.py and grouped_linear.py (the experts). Under a CUDA graph
    (``skip_fp8_weight_update``) ``is_first_microbatch`` is forced False, so the cache is named too (linear.py
    L1756-1762). The quantizer is set for both usages in training (``columnwise_usage = is_grad_enabled and
    inp.requires_grad``, L409-417): the row-wise copy for the forward GEMM, the column-wise one for the backward's
    data-gradient GEMM. Megatron-Core's TE layers pass ``is_first_microbatch`` unless
    ``disable_parameter_transpose_cache`` (default False, transformer_config.py L1175), set True on each model chunk's
    first micro-batch (``set_is_first_microbatch``, pipeline_parallel/schedules.py L496-497) and False after the call
    (extensions/transformer_engine.py L1338-1345, L1587-1602, grouped L2721-2728, at NVIDIA/Megatron-LM@d98e8a64dd).

        delayed, tensorwise  1 + t: the E4M3 data and, with ``transpose_copy`` (t = 1: GEMMs without non-TN FP8
                             support, every accelerator but Blackwell), its transpose (fp32 scales per tensor):
                             ``with_transpose = columnwise_usage && !is_non_tn_fp8_gemm_supported``, the data kept
                             for either usage otherwise (csrc/quantizer.cpp L285-299, current scaling L462-464)
        blockwise            2 (1 + 4 / 128^2): row-wise and column-wise data, an fp32 scale per 128 x 128 tile
        mxfp8                2 (1 + 1/32): row-wise and column-wise data, an E8M0 scale per 32 elements each
        nvfp4                2 (1/2 + 1/16) = 1.125: row-wise and column-wise E2M1 data, an E4M3 scale per 16
    """
    if not recipe or recipe in ROWWISE_FP8_RECIPES:
        return 0.0
    if recipe in ("delayed", "tensorwise"):
        return 2.0 if transpose_copy else 1.0
    if recipe == "blockwise":  # weights take 128 x 128 tiles (a saved input 1 x 128 blocks)
        return 2.0 * (1.0 + 4.0 / 128.0**2)
    return 2.0 * quantized_input_bytes(recipe)  # row- and column-wise copies, each as one saved input's


def mamba_activation_bytes(md: MambaDims, *, micro_batch: ArrayLike, seq_len: ArrayLike, tp: ArrayLike = 1,
                           cp: ArrayLike = 1, sequence_parallel: ArrayLike = False, recompute: ArrayLike = "none",
                           fp8_inputs: ArrayLike = False, dropout: ArrayLike = False,
                           out_proj_inputs: ArrayLike | None = None, elem_bytes: ArrayLike = 2.0) -> np.ndarray:
    """Activation bytes one Mamba layer keeps for one micro-batch (s b = tokens on the GPU, t = tp), what autograd
    saves on Megatron-Core's training path (mamba_mixer.py ``_ssm_training``; ssd_combined.py
    ``MambaSplitConv1dScanCombinedFn.forward`` ``ctx.save_for_backward(zxbcdt, ..., out_x, ...)``):

        replicated (/t with SP)  2 s b h [layer input, the fused norm's] + g s b h [in_proj input, the norm output]
                                 + s b h [1-byte dropout mask, when the model has dropout]
        split (/t)               2 s b (2 d_in + 2GN + H) [zxbcdt] + 2 s b d_in [out_x, the scan output]
                                 + 2 s b d_in [the contiguous copy the gated RMSNorm saves]
                                 + g s b d_in [out_proj input]

    g = ``fp8_inputs`` with quantized GEMM inputs (:func:`quantized_input_bytes`: 1 per-tensor FP8, 1.03125 MXFP8,
    0.5625 NVFP4), else 2; out_proj's g from ``out_proj_inputs`` when it runs at another precision
    (training.module_precision mamba_out_proj; None: ``fp8_inputs``'s). The chunk states, the conv output and
    dA_cumsum are recomputed in the backward, not kept. Full recompute keeps the layer input 2 s b h (/t with SP), as
    for the other layers. Every 2 above is ``elem_bytes`` e (4 in an fp32 / tf32 run: the in_proj output, the scan
    output and the norm's copy are at the parameters' dtype there; the 1-byte mask and quantized g keep theirs)."""
    b = _pos("micro_batch", micro_batch)
    s = _pos("seq_len", seq_len) / _pos("cp", cp)
    t = _pos("tp", tp)
    sp = np.asarray(sequence_parallel, dtype=bool)
    q_in = np.asarray(fp8_inputs, dtype=float)  # True = 1 byte; NVFP4 0.5625 (quantized_input_bytes)
    e = _pos("elem_bytes", elem_bytes)
    g = np.where(q_in > 0.0, q_in, e)
    sbh = s * b * md.hidden
    mask = np.where(np.asarray(dropout, dtype=bool), 1.0, 0.0)
    replicated = (e + g + mask) * sbh
    q_out = q_in if out_proj_inputs is None else np.asarray(out_proj_inputs, dtype=float)
    g_out = np.where(q_out > 0.0, q_out, e)
    split = s * b * (e * md.in_proj_width + 2.0 * e * md.d_inner + g_out * md.d_inner)
    kept = np.where(sp, replicated / t, replicated) + split / t
    full = np.where(sp, e * sbh / t, e * sbh)
    return np.where(recompute_code(recompute) == Recompute.FULL, full, kept)
