"""The `memory` command: per-GPU memory breakdown and the largest micro-batch that fits."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from scalemodel.commands.common import ClusterOption, JsonOption, ModelOption, SetOption


def shape_of(workload: Any, position_embeddings: int = 0) -> Any:
    """A :class:`scalemodel.cost.transformer.Shape` from a TransformerWorkload (duck-typed)."""
    from scalemodel.cost.transformer import shape

    moe = workload.moe
    return shape(layers=workload.layers, hidden=workload.hidden, heads=workload.heads, vocab=workload.vocab,
                 kv_heads=workload.kv_heads, ffn_hidden=workload.ffn_hidden, gated_mlp=workload.gated_mlp,
                 tied_embeddings=workload.tied_embeddings, head_dim=getattr(workload, "head_dim", None),
                 moe_experts=moe.experts if moe else 0, moe_top_k=moe.top_k if moe else 0,
                 moe_ffn_hidden=moe.ffn_hidden if moe else None,
                 moe_shared_experts=moe.shared_experts if moe else 0, moe_every=moe.every if moe else 1,
                 moe_first_dense=getattr(moe, "first_dense", 0) if moe else 0,
                 position_embeddings=position_embeddings)


WEIGHT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 2.0}


def _schedule(text: str) -> tuple[str, int]:
    from scalemodel.errors import InputError

    t = text.lower()
    if t in ("1f1b", "gpipe"):
        return t, 1
    if t.startswith("interleaved:"):
        try:
            v = int(t.split(":", 1)[1])
        except ValueError:
            v = 0
        if v >= 1:
            return "interleaved", v
    raise InputError(f"unknown schedule {text!r}", where="--schedule", allowed="1f1b, gpipe or interleaved:V (V >= 1)")


def compute(model: str, cluster: str, gpus: int, *, tp: int, pp: int, cp: int, ep: int, micro_batch: int,
            seq_len: int | None, global_batch: int | None, zero: str, recompute: str, sequence_parallel: bool,
            schedule: str, precision: str, optimizer_bytes: float, grad_bytes: float | None,
            flash_attention: bool, fragmentation: float, workspace: float, sets: list[str]) -> dict[str, Any]:
    """Everything the report needs, as plain numbers."""
    import numpy as np

    from scalemodel.cost import memory as M
    from scalemodel.errors import InputError
    from scalemodel.specs import load_cluster, load_workload, split_overrides

    routed = split_overrides(sets)
    spec = load_cluster(cluster, routed["cluster"])
    wl = load_workload(model, routed["model"])
    spec.require_gpus(gpus)
    for name, v in (("--gpus", gpus), ("--tp", tp), ("--pp", pp), ("--cp", cp), ("--ep", ep),
                    ("--micro-batch", micro_batch)):
        if v < 1:
            raise InputError(f"{name} must be >= 1, got {v}", where=name, allowed="an integer >= 1")
    if gpus % (tp * pp * cp):
        raise InputError(f"{gpus} GPUs are not a multiple of tp*pp*cp = {tp * pp * cp}", where="--gpus",
                         allowed="gpus = dp * tp * pp * cp")
    dp = gpus // (tp * pp * cp)
    if dp % ep:
        raise InputError(f"ep {ep} must divide the data-parallel degree {dp}", where="--ep",
                         allowed="a divisor of gpus / (tp*pp*cp)")
    if precision not in WEIGHT_BYTES:
        raise InputError(f"unknown precision {precision!r}", where="--precision", allowed=", ".join(WEIGHT_BYTES))
    sched, v = _schedule(schedule)
    wb = WEIGHT_BYTES[precision]
    gb = wb if grad_bytes is None else grad_bytes
    acc = spec.accelerator
    z = M.zero_code(zero)
    inputs = {"model": wl.name, "cluster": spec.name, "gpus": gpus, "dp": dp, "tp": tp, "pp": pp, "cp": cp,
              "ep": ep, "micro_batch": micro_batch, "zero": zero, "recompute": recompute,
              "sequence_parallel": sequence_parallel, "schedule": schedule, "precision": precision,
              "weight_bytes_per_param": wb, "grad_bytes_per_param": gb, "optimizer_bytes_per_param": optimizer_bytes,
              "flash_attention": flash_attention, "fragmentation": fragmentation, "workspace_bytes": workspace,
              "set": sets}
    if wl.kind == "generic":
        if tp * pp * cp * ep != 1:
            raise InputError("a generic workload supports data parallelism only", where="--tp/--pp/--cp/--ep",
                             allowed="tp = pp = cp = ep = 1")
        st = M.model_state_bytes(float(wl.params), dp=dp, zero_stage=z, weight_bytes=wb, grad_bytes=gb,
                                 optimizer_bytes=optimizer_bytes)
        act1 = float(wl.activation_bytes_per_sample or 0.0) * wb / 4.0  # catalog figures are fp32
        weights, grads, opt = float(st.weights), float(st.gradients), float(st.optimizer)
        params_gpu, s_len, m = float(wl.params), None, 1
    else:
        s_len = seq_len or wl.seq_len
        m = max(1, global_batch // (micro_batch * dp)) if global_batch else pp
        if global_batch is not None and global_batch % (micro_batch * dp):
            raise InputError(f"global batch {global_batch} is not a multiple of micro-batch x dp = "
                             f"{micro_batch * dp}", where="--global-batch", allowed="a multiple of micro_batch * dp")
        sh = shape_of(wl)
        if float(sh.layers) % pp:
            raise InputError(f"{wl.layers} layers do not split evenly over pp = {pp}", where="--pp",
                             allowed="a divisor of the layer count")
        kw = dict(seq_len=s_len, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, zero_stage=z, recompute=recompute,
                  sequence_parallel=sequence_parallel, num_microbatches=m, schedule=sched, virtual_stages=v,
                  weight_bytes=wb, grad_bytes=gb, optimizer_bytes=optimizer_bytes, flash_attention=flash_attention,
                  fragmentation=fragmentation, workspace=workspace)
        one = M.memory_per_gpu(sh, micro_batch=1, **kw)
        weights, grads, opt = float(one.weights), float(one.gradients), float(one.optimizer)
        act1 = float(one.activations)
        params_gpu = float(M.params_per_gpu(sh, tp=tp, pp=pp, ep=ep).total)
    states = weights + grads + opt
    act = act1 * micro_batch
    frag = fragmentation * (states + act)
    total = states + act + frag + workspace
    cap = float(acc.memory)
    bmax = int(M.max_micro_batch(states, act1, cap, fragmentation=fragmentation, workspace=workspace)) \
        if act1 > 0 else None
    breakdown = {"weights": weights, "gradients": grads, "optimizer": opt, "activations": act,
                 "fragmentation": frag, "workspace": workspace, "total": total}
    assert all(np.isfinite(list(breakdown.values())))
    return {"inputs": inputs, "seq_len": s_len, "num_microbatches": m, "params_per_gpu": params_gpu,
            "per_gpu_bytes": breakdown, "activation_bytes_per_micro_batch_sample": act1,
            "capacity_bytes": cap, "fits": bool(total <= cap), "max_micro_batch": bmax,
            "accelerator": acc.name}


def register(app: typer.Typer) -> None:
    """Add this command to the app."""

    @app.command("memory")
    def memory(
        model: ModelOption,
        cluster: ClusterOption,
        gpus: Annotated[int, typer.Option("--gpus", "-n", help="Total GPUs (dp = gpus / (tp pp cp)).")],
        tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel degree.")] = 1,
        pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree.")] = 1,
        cp: Annotated[int, typer.Option("--cp", help="Context-parallel degree.")] = 1,
        ep: Annotated[int, typer.Option("--ep", help="Expert-parallel degree (divides dp).")] = 1,
        micro_batch: Annotated[int, typer.Option("--micro-batch", "-b", help="Sequences per micro-batch.")] = 1,
        seq_len: Annotated[int | None, typer.Option("--seq-len", help="Default: the workload's.")] = None,
        global_batch: Annotated[int | None, typer.Option(
            "--global-batch", help="Sequences per step (sets the micro-batch count; default pp).")] = None,
        zero: Annotated[str, typer.Option("--zero", help="0|1|2|3|fsdp")] = "0",
        recompute: Annotated[str, typer.Option("--recompute", help="none|selective|full")] = "none",
        sequence_parallel: Annotated[bool, typer.Option("--sequence-parallel", help="Megatron SP.")] = False,
        schedule: Annotated[str, typer.Option("--schedule", help="1f1b|interleaved:V|gpipe")] = "1f1b",
        precision: Annotated[str, typer.Option("--precision", help="bf16|fp16|fp8|fp32|tf32")] = "bf16",
        optimizer_bytes: Annotated[float, typer.Option(
            "--optimizer-bytes", help="Optimizer bytes/param (12 = Adam fp32 master + m + v).")] = 12.0,
        grad_bytes: Annotated[float | None, typer.Option(
            "--grad-bytes", help="Gradient bytes/param (default = weight bytes, ZeRO's 16 B; 4 = Megatron's 18 B).")]
        = None,
        flash_attention: Annotated[bool, typer.Option(
            "--flash-attention/--no-flash-attention", help="Fused attention (default on): no s^2 scores.")] = True,
        fragmentation: Annotated[float, typer.Option("--fragmentation", help="Allowance as a fraction.")] = 0.05,
        workspace: Annotated[str, typer.Option("--workspace", help="Fixed allowance (context, buffers).")] = "1GB",
        sets: SetOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Per-GPU memory: weights, gradients, optimizer, activations (Korthikanti), ZeRO; largest micro-batch."""
        from scalemodel.commands.common import quantity
        from scalemodel.errors import InputError
        from scalemodel.report.memory import render_memory

        if not 0 <= fragmentation < 10:
            raise InputError("fragmentation must be in [0, 10)", where="--fragmentation", allowed="e.g. 0.05")
        if optimizer_bytes < 0 or (grad_bytes is not None and grad_bytes < 0):
            raise InputError("bytes per parameter must be >= 0", where="--optimizer-bytes/--grad-bytes")
        ws = quantity(workspace, "bytes", "--workspace")
        result = compute(model, cluster, gpus, tp=tp, pp=pp, cp=cp, ep=ep, micro_batch=micro_batch,
                         seq_len=seq_len, global_batch=global_batch, zero=zero, recompute=recompute,
                         sequence_parallel=sequence_parallel, schedule=schedule, precision=precision,
                         optimizer_bytes=optimizer_bytes, grad_bytes=grad_bytes, flash_attention=flash_attention,
                         fragmentation=fragmentation, workspace=ws, sets=list(sets or []))
        render_memory(result, as_json=as_json)
