"""Render `scalemodel memory` results: a breakdown table or the JSON document."""

from __future__ import annotations

from scalemodel.engine.memory import MemoryResult
from scalemodel.engine.predict import batch_detail
from scalemodel.engine.step import Infeasible
from scalemodel.report.output import emit_json, new_console, print_table
from scalemodel.report.predict import strategy_header
from scalemodel.units import format_quantity as fq

_ROWS = [("weights", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer states"),
         ("activations", "activations"), ("fragmentation", "fragmentation allowance"),
         ("workspace", "workspace allowance")]


def render_memory(result: MemoryResult, *, as_json: bool) -> None:
    if as_json:
        emit_json(result.payload(), "memory")
        return
    from rich.table import Table  # tables only

    inp = result.inputs
    br = result.per_gpu_bytes
    cap = result.capacity_bytes
    console = new_console()
    # predict's header (one route: memory wrote "dp 64 tp 4" and left out the schedule and global batch), on the
    # cluster the other commands name, with the accelerator whose memory the table counts; a line of its own: a
    # table title wraps at the table's width
    cluster = str(inp.get("cluster") or "")
    where = result.accelerator if cluster in ("", result.accelerator) else f"{cluster} ({result.accelerator})"
    console.print(strategy_header(inp["model"], inp["gpus"], where, inp,
                                  f", seq {result.seq_len:,}" if result.seq_len else ""))
    # not feasible for a reason other than memory, as predict says: whether or not the model fits (the reason came
    # first, step.feasibility's, and a model too big for memory hid it)
    other_reason = result.infeasible_reason not in (None, Infeasible.OUT_OF_MEMORY.text)
    if other_reason:
        console.print(f"[bold red]infeasible:[/bold red] {result.infeasible_reason}")
        if result.infeasible_reason == Infeasible.BATCH_NOT_DIVISIBLE.text and inp.get("global_batch"):
            # the values and what would divide, as predict's "here:" line
            console.print(f"  here: {batch_detail(int(inp['global_batch']), int(inp['dp']), int(inp['micro_batch']))}")
    t = Table()
    t.add_column("per GPU")
    t.add_column("bytes", justify="right")
    t.add_column("share", justify="right")
    for key, label in _ROWS:
        t.add_row(label, fq(br[key], "bytes"), f"{br[key] / br['total']:.1%}" if br["total"] > 0 else "-")
    t.add_row("total", fq(br["total"], "bytes"), f"{br['total'] / cap:.1%} of {fq(cap, 'bytes', binary=False)}")
    print_table(console, t)
    verdict = "fits" if result.fits else "does NOT fit"
    if other_reason:
        verdict = ("fits in memory, but the strategy is infeasible (above)" if result.fits else
                   "does NOT fit, and the strategy is infeasible for the reason above too")
    # the table's own label ('optimizer states'), not the --json key ('optimizer') the table nowhere shows
    biggest = max(_ROWS, key=lambda row: br[row[0]])[1]
    where = "this GPU" if result.peak_stage_role == "only" else (
        f"a GPU of the {result.peak_stage_role} pipeline stage (rank {result.peak_stage} of pp {inp['pp']}, the "
        "stage with the most memory, whose bytes are above)")
    # the count leads ('11.03 B' in a byte table reads as bytes; a count last wrapped onto a line of its own)
    console.print(f"{verdict}; largest part: {biggest}. {result.params_per_gpu:,.0f} parameters on {where}.")
    if result.host_bytes_per_node is not None:  # offload_states: the node's host memory (docs/model.md#host-memory)
        console.print(_host_line(result.host_bytes_per_node, result.host_capacity_bytes, inp))
    bmax = result.max_micro_batch
    if bmax is None:
        console.print("largest micro-batch: no activation size known for this workload")
    elif bmax == 0:
        console.print(_nothing_fits(result))
    elif inp.get("global_batch") and inp["global_batch"] % inp["dp"]:
        # engine.memory._largest_micro_batch: no b divides B / dp, so b is bounded by memory alone
        console.print(f"largest micro-batch that fits: {bmax} (by memory alone: global batch {inp['global_batch']} "
                      f"gives dp {inp['dp']} no whole micro-batch)")
    else:
        console.print(f"largest micro-batch that fits: {bmax}")


def _host_line(host: float, cap: float | None, inp: dict) -> str:
    """The host side of offload_states: the bytes its states take per node against the cluster's host_memory, or
    that the capacity is unknown (then not checked: no verdict is implied)."""
    head = f"host memory per node (offload_states {inp.get('offload_states')}): {fq(host, 'bytes', binary=False)}"
    if cap is None:
        return (f"{head}; cluster {inp.get('cluster')} gives no host_memory, so whether it fits is NOT checked "
                "(--set cluster.host_memory=2TB to check it)")
    verdict = "fits" if host <= cap else "does NOT fit (host memory)"
    return f"{head} of {fq(cap, 'bytes', binary=False)} ({host / cap:.0%}): {verdict}"


def _nothing_fits(result: MemoryResult) -> str:
    """Why no micro-batch fits: the model states with their allowance, (states) (1 + fragmentation) + workspace
    (docs/model.md#memory), past the capacity, or the activations of one sample per micro-batch (with the
    micro-batches the schedule keeps in flight) past what the states leave. More PP is not offered for the
    latter: under 1F1B the first stage keeps p micro-batches of L / p layers, the same L layers' worth. The levers
    named are those the strategy has not used up (:func:`_levers`)."""
    br, cap = result.per_gpu_bytes, result.capacity_bytes
    states = br["weights"] + br["gradients"] + br["optimizer"]
    held = states * (1.0 + float(result.inputs["fragmentation"])) + br["workspace"]
    if held >= cap:
        return (f"no micro-batch fits: model states alone ({fq(held, 'bytes')} with the allowances) exceed the "
                f"{fq(cap, 'bytes', binary=False)}; try {_levers(result.inputs, states_only=True)}")
    return (f"no micro-batch fits: the model states take {fq(held, 'bytes')} with the allowances, and the "
            f"activations at micro-batch 1 do not fit in the {fq(cap - held, 'bytes')} left; try "
            f"{_levers(result.inputs, states_only=False)}")


def _levers(inp: dict, *, states_only: bool) -> str:
    """What would shrink the part that does not fit, leaving out what the strategy already runs: full recompute
    was told 'try recompute', sequence parallelism 'try sequence parallelism'. A higher ZeRO stage shards more of the
    states over dp (ZeRO-1 the optimizer, -2 the gradients, -3/FSDP the weights; nothing at dp 1), which also leaves
    the activations more room; under hsdp, which has no stage above it, FSDP over every replica does (it was told
    'try a ZeRO stage above hsdp'); sequence parallelism acts only at tp > 1."""
    zero = str(inp["zero"])
    dp = int(inp["dp"])
    out: list[str] = []
    if not states_only:
        recompute = str(inp["recompute"])
        if recompute == "none":
            out.append("recompute (selective or full)")
        elif recompute == "selective":
            out.append("full recompute")
        if int(inp["tp"]) > 1 and not inp["sequence_parallel"]:
            out.append("sequence parallelism")
    if dp > 1 and zero not in ("3", "fsdp"):
        # hsdp is FSDP within its shard group: no stage lies above it, the lever is sharding over every replica
        out.append("ZeRO" if zero == "0" else "zero fsdp (hsdp shards the states over its shard group only)"
                   if zero == "hsdp" else f"a ZeRO stage above {zero}")
    out.append("more TP or PP" if states_only else "more TP or CP")
    return out[0] if len(out) == 1 else ", ".join(out[:-1]) + " or " + out[-1]
