"""The parts of a step-time breakdown: one table for the engine, the tables, the plots and the JSON.

Each part is a term of the step-time sum in :func:`scalemodel.engine.step.evaluate` (the JSON key of
``breakdown_s``); ``memory_forced`` is the extra cause of a scaling sweep's loss attribution with
``best=True`` (:mod:`scalemodel.engine.scaling`), not a step-time term.
"""

from __future__ import annotations

import msgspec


class Part(msgspec.Struct, frozen=True):  # msgspec: built in C, unlike a dataclass (~0.5 ms, Python 3.11)
    """One breakdown part: JSON key (the tables' and --json's name of it), phrase for sentences, one-line description,
    matplotlib colour and rich terminal style."""

    name: str
    words: str
    description: str
    colour: str
    style: str


#: The step-time breakdown, in the order of the sum (and of every table and JSON object).
BREAKDOWN: tuple[Part, ...] = (
    Part("compute", "compute", "GPU compute (GEMMs and memory-bound kernels)", "0.6", "white"),
    Part("contention", "compute slowed by hidden communication",
         "compute slowed by the collectives hidden under it (they occupy SMs)", "0.8", "bright_white"),
    Part("tp_comm", "exposed TP communication",
         "tensor-parallel all-reduces not hidden by compute (and FP8 / NVFP4 amax all-reduces)",
         "tab:purple", "magenta"),
    Part("cp_comm", "exposed CP communication", "context-parallel attention exchange not hidden by compute",
         "orchid", "bright_magenta"),
    Part("ep_comm", "MoE all-to-all",
         "MoE token dispatch and combine not hidden by compute (all-to-alls, or the DeepEP / all-gather dispatcher's; "
         "Megatron-Core's also sends the routing probabilities and gathers the per-expert token counts)",
         "tab:blue", "blue"),
    Part("pp_comm", "pipeline send/recv", "pipeline send/recv of activations", "tab:cyan", "cyan"),
    Part("host", "wait on the host",
         "GPU idle while the host issues each MoE layer's kernels after its host synchronisation, and while it "
         "gathers the training metrics' states once a step", "tab:olive",
         "green"),
    Part("offload", "exposed activation offload",
         "activation copies to and from host memory not hidden by the layers' compute", "sienna", "bright_cyan"),
    Part("bubble", "pipeline bubble",
         "pipeline bubble (stages idle while the pipeline fills and drains)", "gold", "yellow"),
    Part("dp_comm", "exposed gradient sync", "gradient synchronisation not hidden under the backward pass",
         "tab:red", "red"),
    Part("embed_comm", "word-embedding gradient all-reduce",
         "all-reduce of the word-embedding gradient between the first and last pipeline stage, after the flush: the "
         "embedding tied to the output layer, or shared with the last stage's multi-token prediction (MTP) modules",
         "tab:olive", "bright_green"),
    Part("optimizer", "optimizer step",
         "optimizer step (memory-bound on the GPU; with offload_states the CPU step and its host copies)", "0.35",
         "bright_black"),
    Part("straggler", "straggler wait", "waiting for the slowest worker", "tab:orange", "bright_red"),
    Part("jitter", "clock-jitter wait",
         "waiting for the slowest of the GPUs that synchronise within the step, whose clocks swing at the power limit",
         "tab:gray", "bright_black"),
    Part("imbalance", "load imbalance", "load imbalance", "khaki", "bright_yellow"),
    Part("overhead", "fixed per-step overhead",
         "fixed per-step overhead outside the modelled parts (the cluster's step_overhead, e.g. calibrated)",
         "tab:pink", "bright_cyan"),
)
#: The scaling-sweep cause beyond the breakdown (``best=True`` only).
MEMORY_FORCED = Part("memory_forced", "memory-forced strategy", "memory limit forcing a slower strategy",
                     "tab:brown", "bright_blue")

#: JSON keys of the breakdown, in order.
BREAKDOWN_KEYS: tuple[str, ...] = tuple(p.name for p in BREAKDOWN)
#: Cause names of a scaling sweep's loss attribution, in display order.
CAUSES: tuple[str, ...] = BREAKDOWN_KEYS + (MEMORY_FORCED.name,)
#: Every part and cause by name.
PARTS: dict[str, Part] = {p.name: p for p in (*BREAKDOWN, MEMORY_FORCED)}
