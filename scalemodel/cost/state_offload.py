"""Optimizer-state and parameter offload to host memory: the bytes over the GPU-host link and the CPU optimizer step.

Formulas and sources: docs/model.md#state-offload. Codes: ``mode`` is :class:`scalemodel.choices.StateOffload`
(0 none, 1 optimizer, 2 optimizer+params), ``zero`` :class:`scalemodel.choices.Zero` (1, 2, 3; 4 fsdp, 5 hsdp).
Every function takes plain numbers or numpy arrays (broadcast) in SI units.

The bytes are per parameter of the rank's state shard ``n`` (the parameters whose optimizer states the rank
updates: the same share the optimizer step and the memory model count), per step:

================  ===========================  ===============================  ==========================
mode, zero        D2H during the step          H2D during the step              H2D after the CPU step
================  ===========================  ===============================  ==========================
optimizer, 1      4 + [m>1] gb                 [m>1] gb                         wb
optimizer, 2      4 + [m>1] m gb               [m>1] (m-1) gb                   wb
optimizer, 3      4 + m gb                     m gb                             wb
+params, 3        4 + m gb                     m gb + G wb                      0
+params, fsdp     s m                          s G                              0
================  ===========================  ===============================  ==========================

(m micro-batches, G parameter all-gathers a step, gb / wb the 16-bit gradient / weight bytes, s FSDP's shard element:
4 for a model built in fp32, 2 for one built in bf16.) DeepSpeed at
deepspeedai/DeepSpeed@edaa7221: ZeRO 1/2 (deepspeed/runtime/zero/stage_1_and_2.py) casts the reduced gradient
partition to the fp32 master dtype on the GPU and copies it into the host's fp32 gradient
(``async_inplace_copy_grad_to_fp32_buffer_from_gpu``: ``src_tensor.to(master_weights_and_grads_dtype)``, then
``dest_tensor.copy_``), and with gradient accumulation keeps a 16-bit host accumulator it copies out after each
reduction and back in before the next (``async_accumulate_grad_in_cpu_via_gpu``: ``copy_gradients_to_cpu`` every
time, ``accumulate_gradients`` from the second micro-step); stage 2 reduces after every micro-batch's backward, stage
1 once at the boundary. After ``_optimizer_step`` it casts the fp32 partition into a 16-bit host buffer and copies
that to the GPU (``bit16_partitions[partition_id].data.copy_(bit16_partition_buffer.data, non_blocking=True)``).
ZeRO-3 (stage3.py ``partition_grads``) keeps its gradient-partition buffer on the host (``self.device`` is cpu
under offload_optimizer): each micro-batch copies the reduced partition out and back (``grad_buffer.copy_`` then
``grad_buffer.to(grad_partition.device)``; later micro-steps add on the GPU and copy back), and at the boundary
copies its fp32 cast into the optimizer's gradient (``_offload_grad_partition_at_boundary``); after the step
``_reassign_or_swap_out_partitioned_parameters`` copies the fp32 partition into the 16-bit one, a host-to-GPU copy
when the parameters stay on the GPU (a CPU-to-CUDA ``copy_`` converts on the host: 2 bytes cross) and a host copy
under offload_param, whose 16-bit shards then cross once per all-gather (ZeRO-Infinity, arXiv 2104.07857: the
parameter partitions live in CPU memory and are moved to the GPU for the all-gather; paraphrased from summaries, its
section text not read here). PyTorch FSDP ``CPUOffload(offload_params=True)``
(torch/distributed/fsdp/_flat_param.py ``FlatParamHandle._use_low_precision_shard``:
``flat_param._mp_shard.copy_(flat_param._local_shard.to(self.device, non_blocking=True))``) copies the full-precision
(fp32) shard to the GPU before each all-gather and casts it there; the reduced gradient shard is copied back in the
parameter dtype after every reduce-scatter (``_offload_grad``), 4 bytes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

#: Parameters a host updates per second with DeepSpeedCPUAdam: 11.6e9 / 8.2 s. "it reduces the optimizer time from 56
#: seconds to 8.2 seconds to an 11.6B parameter GPT2 model" (R. Yazdani Aminabadi, DeepSpeed team, deepspeedai/
#: DeepSpeed pull request #735 "CPU-Adam fix for scalar mode", 2021-02-08); hardware/measurements/cpu_adam.yaml.
CPU_ADAM_PARAMS_PER_S = 11.6e9 / 8.2

#: The fp32 master-gradient element DeepSpeed copies to the host at the gradient-accumulation boundary, and the
#: fp32 gradient / parameter shard element PyTorch FSDP's CPU offload moves.
FP32_BYTES = 4.0


def host_copy_bytes(n_shard: ArrayLike, *, mode: ArrayLike, zero: ArrayLike, microbatches: ArrayLike,
                    gathers: ArrayLike, weight_bytes: ArrayLike = 2.0, grad_bytes: ArrayLike = 2.0,
                    shard_bytes: ArrayLike = FP32_BYTES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(device-to-host bytes during the step, host-to-device bytes during the step, host-to-device bytes after the
    CPU step) of one GPU per step, by the table of the module docstring; all 0 where ``mode`` is 0. ``shard_bytes``:
    the element of FSDP's sharded parameter and gradient, the dtype the model was built in (the table's 4: an fp32
    model under a bf16 MixedPrecisionPolicy; 2 for a model built in bf16, as Automodel's:
    :func:`scalemodel.cost.memory.fsdp2_shard_bytes`; review35c)."""
    n = np.asarray(n_shard, dtype=float)
    md, z = np.asarray(mode), np.asarray(zero)
    m = np.asarray(microbatches, dtype=float)
    g_n = np.asarray(gathers, dtype=float)
    wb, gb = np.asarray(weight_bytes, dtype=float), np.asarray(grad_bytes, dtype=float)
    acc = (m > 1).astype(float)
    fsdp = z >= 4
    sb = np.asarray(shard_bytes, dtype=float)
    d2h = np.select([z == 1, z == 2, fsdp], [FP32_BYTES + acc * gb, FP32_BYTES + acc * m * gb, sb * m],
                    FP32_BYTES + m * gb)
    h2d = np.select([z == 1, z == 2, fsdp], [acc * gb, acc * (m - 1.0) * gb, sb * g_n], m * gb)
    params = md == 2
    h2d = h2d + np.where(params & ~fsdp, g_n * wb, 0.0)
    after = np.where(params, 0.0, wb)
    on = md > 0
    return (np.where(on, n * d2h, 0.0), np.where(on, n * h2d, 0.0), np.where(on, n * after, 0.0))


def host_state_bytes(n_shard: ArrayLike, *, mode: ArrayLike, zero: ArrayLike, microbatches: ArrayLike,
                     optimizer_bytes: ArrayLike = 12.0, weight_bytes: ArrayLike = 2.0, grad_bytes: ArrayLike = 2.0,
                     shard_weight_bytes: ArrayLike = 0.0, shard_grad_bytes: ArrayLike = FP32_BYTES,
                     largest_param: ArrayLike = 0.0) -> np.ndarray:
    """Host-memory bytes one rank keeps under strategy offload_states (docs/model.md#host-memory), 0 where ``mode``
    is 0: per parameter of its state shard ``n`` (K ``optimizer_bytes``: the fp32 master and Adam's m and v; wb / gb
    the model's 16-bit weight / gradient element; sw / sg FSDP's shard elements, :func:`scalemodel.cost.memory.
    fsdp2_shard_bytes`), plus one buffer of the largest parameter tensor ``largest_param`` (elements) at ZeRO 1/2:

    ================  ====================================  ============================================
    mode, zero        bytes                                 DeepSpeed / PyTorch allocation on the host
    ================  ====================================  ============================================
    optimizer, 1-2    n (K + 4 + wb + [m>1] wb) + P wb      master, fp32 grad, 16-bit copy-back buffer,
                                                            16-bit accumulator; P-element grad buffer
    optimizer, 3      n (K + 4 + gb)                        master, fp32 grad, gradient-partition buffer
    +params, 3        n (K + 4 + gb + wb)                   the above and the 16-bit parameter partition
    +params, fsdp     n (K + sw + sg)                       shard (the master where fp32), its grad, m, v
    ================  ====================================  ============================================

    deepspeedai/DeepSpeed@edaa7221, ``self.device`` 'cpu' under offload (stage_1_and_2.py L238, stage3.py L328),
    pinned by default (runtime/zero/offload_config.py L45, L75 ``pin_memory: bool = True``): ZeRO 1/2
    (stage_1_and_2.py) L492 the fp32 master partition, L499 ``temp_buffer_bit16`` of its shape in the model dtype
    (the copy-back buffer), L840 the fp32 gradient partition (``initialize_optimizer_states``), L1527 the accumulator
    ``torch.zeros(param.numel(), dtype=param.dtype)`` per parameter of the partition where a step has more than one
    micro-batch (``copy_grads_in_partition`` L1656: ``micro_step_id > 0 or not is_gradient_accumulation_boundary()``),
    L585 ``temp_grad_buffer_for_cpu_offload`` of the largest parameter's elements in the model dtype; ZeRO 3
    (stage3.py) L1108 the fp32 master (``converted``), L1288 the fp32 gradient (``subgroup_gradient_buffer``), L742
    ``grad_partitions_flat_buffer`` in ``gradient_accumulation_dtype`` (the model dtype unless data_types.
    grad_accum_dtype is set: engine.py L1492), and under offload_param L857 ``param_groups_fp16_flat_cpu_memory`` in
    the model dtype; DeepSpeedCPUAdam's ``exp_avg`` and ``exp_avg_sq`` ``zeros_like(p.data)`` on the master's device
    (ops/adam/cpu_adam.py L151-154), counted in K. PyTorch FSDP ``CPUOffload(offload_params=True)``
    (pytorch/pytorch@01caf79e torch/distributed/fsdp/_flat_param.py ``FlatParamHandle.init_flat_param_attributes``):
    the local shard pinned on the CPU and ``_cpu_grad = torch.zeros_like(flat_param._local_shard, device=cpu_device)
    .pin_memory()``, both at the parameter's own dtype; the optimizer, built on these CPU parameters, keeps its state
    there. Not counted: stage3.py L1256's ``gradient_buffer`` (a local of ``initialize_optimizer_states``, freed when
    it returns under offload), the CUDA/NCCL host allocations, the dataloader and the process images."""
    n = np.asarray(n_shard, dtype=float)
    md, z = np.asarray(mode), np.asarray(zero)
    m = np.asarray(microbatches, dtype=float)
    k, wb, gb = (np.asarray(x, dtype=float) for x in (optimizer_bytes, weight_bytes, grad_bytes))
    sw, sg = np.asarray(shard_weight_bytes, dtype=float), np.asarray(shard_grad_bytes, dtype=float)
    acc = (m > 1).astype(float)
    per = np.select([z <= 2, z == 3, z >= 4],
                    [k + FP32_BYTES + wb + acc * wb, k + FP32_BYTES + gb + np.where(md == 2, wb, 0.0), k + sw + sg])
    extra = np.where(z <= 2, np.asarray(largest_param, dtype=float) * wb, 0.0)
    return np.where(md > 0, n * per + extra, 0.0)


def cpu_adam_seconds(n_shard: ArrayLike, ranks_per_host: ArrayLike,
                     params_per_s: ArrayLike = CPU_ADAM_PARAMS_PER_S) -> np.ndarray:
    """Seconds of the CPU-Adam step of one rank's ``n_shard`` parameters while ``ranks_per_host`` ranks of the same
    host step theirs at once: the host's rate ``params_per_s`` (:data:`CPU_ADAM_PARAMS_PER_S`) shared between them
    (the step reads and writes the fp32 master, m, v and gradient in host DRAM; the ranks share its cores and memory
    bandwidth)."""
    k = np.maximum(np.asarray(ranks_per_host, dtype=float), 1.0)
    return np.asarray(n_shard, dtype=float) * k / np.asarray(params_per_s, dtype=float)


def param_fetch_bytes(n_shard: ArrayLike, *, mode: ArrayLike, zero: ArrayLike, gathers: ArrayLike,
                      weight_bytes: ArrayLike = 2.0, shard_bytes: ArrayLike = FP32_BYTES) -> np.ndarray:
    """Host-to-device bytes of one GPU per step that copy parameter shards for the all-gathers (the parameters on
    the host): the part of :func:`host_copy_bytes`'s in-step H2D that rides the parameter fetch, beside the
    gradient path's copies, not behind them: ``G wb`` a shard parameter under optimizer+params at ZeRO-3 (DeepSpeed
    fetches the 16-bit shard for each gather), ``s G`` under FSDP / HSDP (``_use_low_precision_shard`` on the unshard
    stream before each gather); 0 otherwise."""
    n = np.asarray(n_shard, dtype=float)
    md, z = np.asarray(mode), np.asarray(zero)
    g_n = np.asarray(gathers, dtype=float)
    per = np.where(z >= 4, np.asarray(shard_bytes, dtype=float) * g_n,
                   np.where(md == 2, g_n * np.asarray(weight_bytes, dtype=float), 0.0))
    return np.asarray(np.where(md > 0, n * per, 0.0))


def offload_step_seconds(d2h: ArrayLike, h2d: ArrayLike, h2d_after: ArrayLike, cpu_s: ArrayLike,
                         host_bandwidth: ArrayLike, compute_s: ArrayLike, fetch: ArrayLike = 0.0,
                         fetch_compute_s: ArrayLike = 0.0) -> np.ndarray:
    """Seconds the step spends on the host offload with the copies during the step priced as a fluid under the
    compute they run beside, then the CPU step and the copy back after it (:func:`optimizer_part_seconds`)::

        t = max(0, (D2H + H2D - F) / B - C, F / B - C_F, H2D / B - max(C, C_F)) + t_cpu + H2D_after / B

    :func:`scalemodel.engine.dp_comm.offloaded_optimizer` prices ZeRO 1/2 with it, and any offloaded candidate beside
    activation offload (which predict refuses, state_offload_invalid, and plan keeps as infeasible) or priced
    without its data-parallel traffic. Offloaded ZeRO-3 / FSDP / HSDP keep only the tail: the copies during the step
    are what the units' chain adds past the units' own exposure (offz340: :func:`scalemodel.engine.dp_comm.
    host_chain`, each unit's copies on its collectives' streams; docs/model.md#state-offload).

    ``B`` the GPU-host link per GPU per direction. The gradient path's copies, out and back, run one after another
    on one stream, behind the gradients' reductions (review36): DeepSpeed issues every gradient copy of ZeRO 1/2
    inside ``reduce_ipg_grads``' one ``with stream(stream)`` block, the host accumulator's copy in, its add, then
    its copy out (``async_accumulate_grad_in_cpu_via_gpu``), then the fp32 copy, after ``average_tensor`` on the same
    stream (deepspeedai/DeepSpeed@edaa7221 stage_1_and_2.py L1719-1754, L1533-1560, L1650-1666), so they add, not
    overlap: ``D2H + H2D - F`` (ZeRO-3's ``partition_grads`` and FSDP's ``foreach_reduce`` order their copies on
    the reduce-scatter's stream the same way, stage3.py L1591-1608, L1886-1934; the chain prices that unit by
    unit). ``F`` (:func:`param_fetch_bytes`): the parameter shards' copies in before the gathers, on the fetch path
    beside them, sharing the link's host-to-device direction with the gradients' copies back (the last term).
    ``C`` / ``C_F``: the compute those copies run beside, less the collectives queued ahead of them on their stream
    (:func:`scalemodel.engine.dp_comm.offloaded_optimizer`; never hidden past the compute that exists)."""
    b = np.asarray(host_bandwidth, dtype=float)
    f, h = np.asarray(fetch, dtype=float), np.asarray(h2d, dtype=float)
    c, c_f = np.asarray(compute_s, dtype=float), np.asarray(fetch_compute_s, dtype=float)
    grads = (np.asarray(d2h, dtype=float) + h - f) / b
    # the fetches and the gradients' copies back share the link's one host-to-device direction: all H2D bytes cross
    # it under whichever window is longer
    during = np.maximum(np.maximum(grads - c, f / b - c_f), h / b - np.maximum(c, c_f))
    return optimizer_part_seconds(np.maximum(during, 0.0), cpu_s, h2d_after, b)


def optimizer_part_seconds(during_s: ArrayLike, cpu_s: ArrayLike, h2d_after: ArrayLike,
                           host_bandwidth: ArrayLike) -> np.ndarray:
    """The optimizer part of an offloaded step: ``during_s``, the host copies' seconds exposed during the step
    (:func:`offload_step_seconds`' fluid form, or the units' chain at ZeRO-3 / FSDP / HSDP), then the CPU step
    ``cpu_s`` (:func:`cpu_adam_seconds`) and the updated 16-bit partition's copy back after it,
    ``t = during + t_cpu + H2D_after / B``: the CPU step waits for the last gradient and the GPU for its result (no
    one-step delayed update: the ZeRO-Offload paper's DPU, §5.2, is no option of deepspeed/runtime/zero at
    edaa7221)."""
    return np.asarray(during_s, dtype=float) + np.asarray(cpu_s, dtype=float) \
        + np.asarray(h2d_after, dtype=float) / np.asarray(host_bandwidth, dtype=float)
