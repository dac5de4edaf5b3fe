"""A Megatron-LM launch (a script, or a bare list of flags) as a ``--strategy FILE``.

The flags of ``megatron/training/arguments.py`` as argparse reads them: the words bash passes to the launch command
(:func:`_megatron_tokens`, on the shell reading of :mod:`scalemodel.specs.shell_words`), then ``--tensor-model-
parallel-size``, ``--pipeline-model-parallel-size``, ``--context-parallel-size``, ``--expert-model-parallel-size``,
the batch and sequence sizes, ``--sequence-parallel``, recompute (granularity, method, modules), virtual pipeline
stages and ``--pipeline-model-parallel-layout`` (:mod:`scalemodel.specs.stage_layers`), precision (fp8, fp4), the MoE
dispatcher and its options, the context-parallel exchange, the loss, and Megatron-Core DDP's buckets, with
Megatron-LM's defaults (at :data:`_MEG_AT`) for what the file leaves out (marked with :meth:`StrategyFile.default`).
The entry point that tells the formats apart is :func:`scalemodel.specs.frameworks.read_strategy_file`.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from scalemodel.errors import InputError, folded
from scalemodel.specs import files
from scalemodel.specs.shell_words import (
    _BLANK_AFTER_BACKSLASH,
    _drop_heredocs,
    _logical_lines,
    _read_variables,
    _references,
    _Segment,
    _shown,
    _split_commands,
)
from scalemodel.specs.stage_layers import _layout_text, megatron_layout_stages
from scalemodel.specs.strategy_file import StrategyFile, _bucket_bytes, _grad_bytes
from scalemodel.specs.training import TP_COMM_PARTS, ZERO_NOT_READ

_MEG_INT = {"--tensor-model-parallel-size": ("strategy", "tp"), "--pipeline-model-parallel-size": ("strategy", "pp"),
            "--context-parallel-size": ("strategy", "cp"), "--expert-model-parallel-size": ("strategy", "ep"),
            "--micro-batch-size": ("training", "micro_batch"), "--global-batch-size": ("training", "global_batch"),
            "--seq-length": ("training", "seq_len"), "--train-samples": ("training", "train_samples"),
            "--decoder-first-pipeline-num-layers": ("strategy", "first_stage_layers"),
            "--decoder-last-pipeline-num-layers": ("strategy", "last_stage_layers"),
            "--expert-tensor-parallel-size": ("strategy", "etp"),
            # type=int (arguments.py at core_v0.15.0; generated from ModelParallelConfig.wgrad_deferral_limit at
            # d98e8a64dd): strategy wgrad_deferral_limit, read with --defer-embedding-wgrad-compute (fuzz37)
            "--wgrad-deferral-limit": ("strategy", "wgrad_deferral_limit")}
_MEG_SWITCH = {"--sequence-parallel": ("strategy", "sequence_parallel", True),
               # store_true, dest defer_embedding_wgrad_compute (arguments.py L1415 at core_r0.8.0 to core_v0.15.0;
               # generated from ModelParallelConfig at d98e8a64dd, argument_utils.py _format_arg_name): strategy
               # defer_embedding_wgrad, priced since session 36; until fuzz37 a harmless prefix, dropped unsaid
               "--defer-embedding-wgrad-compute": ("strategy", "defer_embedding_wgrad", True),
               "--use-distributed-optimizer": ("strategy", "zero", "1"),
               "--use-tp-pp-dp-mapping": ("strategy", "layout", "tp-cp-pp-dp"),
               "--overlap-grad-reduce": ("strategy", "overlap", True),
               "--tp-comm-overlap": ("strategy", "tp_comm_overlap", True),
               # NVIDIA/Megatron-LM megatron/arguments.py: a switch (store_true at 3f652469, 2021-09-02, "Disable
               # asynchronous execution of tensor-model-parallel all-reduce with weight gradient compuation of a
               # column-linear layer"; store_false, dest async_tensor_model_parallel_allreduce, from 2022, e.g.
               # 23.04). With --sequence-parallel it is not read (_megatron). Since 5fffdfc7 (2024-04-29,
               # core_r0.8.0) its help is "DEPRECATED. This flag is ignored." and 639c08ab (2026-01-29,
               # core_v0.16.0) removed it: read as the releases that honoured it
               "--no-async-tensor-model-parallel-allreduce": ("strategy", "tp_async_allreduce", False),
               "--overlap-param-gather": ("strategy", "overlap_param_gather", True),
               # store_true, "overlap param all-gather of first bucket with optimizer step" (megatron/training/
               # arguments.py L2321 at core_v0.13.1, L2631 at core_v0.15.0, L3150 at d98e8a64dd; validate_args asserts
               # the distributed optimizer, --overlap-param-gather and interleaving, L1066-1074 at d98e8a64dd): strategy
               # overlap_param_gather_with_optimizer_step, priced since session 39
               # (docs/model.md#optimizer-step-gather); until fuzz40 warned as not used and priced without it
               "--overlap-param-gather-with-optimizer-step": ("strategy", "overlap_param_gather_with_optimizer_step",
                                                              True),
               # megatron/training/arguments.py: store_false switches (dest align_grad_reduce at 92c8482e6 and
               # d98e8a64dd; dest delay_grad_reduce, the same grad_sync_func, at f2e5db402c; dest align_param_gather):
               # the interleaved schedule's per-chunk data-parallel sync (docs/model.md#interleaved-dp-sync)
               "--no-align-grad-reduce": ("strategy", "align_grad_reduce", False),
               # d98e8a64dd generates the switch from DistributedInitConfig.align_grad_reduce (default True) with
               # ArgumentGroupFactory, which names a store_false bool both --no-X and --disable-X
               # (megatron/training/argument_utils.py L189-196; arguments.py _add_distributed_args L3092)
               "--disable-align-grad-reduce": ("strategy", "align_grad_reduce", False),
               "--no-delay-grad-reduce": ("strategy", "align_grad_reduce", False),
               "--no-align-param-gather": ("strategy", "align_param_gather", False),
               # store_false, dest gradient_accumulation_fusion (arguments.py at 847781764f, L2183-2187):
               # Megatron-Core DDP's hook adds each 16-bit weight gradient into main_grad
               # (docs/model.md#grad-accum-fusion)
               "--no-gradient-accumulation-fusion": ("strategy", "grad_accumulation_fusion", False),
               "--fp8-param-gather": ("strategy", "fp8_param_gather", True),
               # megatron/training/arguments.py at d1410e15e1: store_true, sets TransformerConfig.fp4_param
               # (argument_utils.py L308) and DistributedDataParallelConfig.fp4_param_gather
               "--fp4-param-gather": ("strategy", "fp4_param_gather", True),
               "--overlap-moe-expert-parallel-comm": ("strategy", "moe_a2a_overlap", True),
               # megatron/training/arguments.py at core_v0.15.0 (0d7e02bd26) line 3060: store_true, "Enable
               # overlapping between shared expert computations and dispatcher communications"
               "--moe-shared-expert-overlap": ("strategy", "moe_shared_expert_overlap", True),
               "--use-flash-attn": ("strategy", "flash_attention", True),
               # megatron/training/arguments.py at 24bad8e677: store_false, dest apply_rope_fusion ("Disable rope
               # fusion"): Megatron-Core's eager RoPE (strategy eager_rope, docs/model.md#eager-layer-ops)
               "--no-rope-fusion": ("strategy", "eager_rope", True),
               "--recompute-activations": ("strategy", "recompute", "selective"),
               "--bf16": ("training", "precision", "bf16"), "--fp16": ("training", "precision", "fp16"),
               "--accumulate-allreduce-grads-in-fp32": ("training", "grad_bytes_per_param", 4.0),
               "--grad-reduce-in-bf16": ("training", "grad_bytes_per_param", 2.0)}
#: Megatron-LM's ``--no-*`` flags that describe the model (read with --model): store_false --no-position-embedding
#: (dest add_position_embedding), --no-rope-freq (a value: which layers skip RoPE), and d98e8a64dd's generated
#: --no-pad-vocab-size, --no-yarn-correction-range-round-to-int, --no-dsa-indexer-rotate-activation,
#: --no-dsa-indexer-scoring-relu (TransformerConfig / TokenizerConfig bools defaulting True)
_MEG_NO_MODEL = ("--no-position-embedding", "--no-rope-freq", "--no-pad-vocab-size",
                 "--no-yarn-correction-range-round-to-int", "--no-dsa-indexer-rotate-activation",
                 "--no-dsa-indexer-scoring-relu")
#: Flags that describe the model (read with --model, not from a strategy) or change nothing modelled.
_MEG_MODEL = ("--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
              "--max-position-embeddings",
              "--group-query-attention", "--num-query-groups", "--swiglu", "--untie-embeddings-and-output-weights",
              "--num-experts", "--moe-router-topk", "--kv-channels", "--normalization", "--position-embedding-type",
              "--disable-bias-linear", "--vocab-size", "--moe-ffn-hidden-size", "--multi-latent-attention",
              "--make-vocab-size-divisible-by", "--padded-vocab-size", "--use-rotary-position-embeddings",
              "--rotary-base", "--rotary-percent", "--qk-layernorm", "--moe-shared-expert-intermediate-size",
              *_MEG_NO_MODEL)
_MEG_HARMLESS_PREFIXES = ("--lr", "--min-lr", "--weight-decay", "--clip-grad", "--adam-", "--init-method", "--log",
                          "--save", "--load", "--data-", "--tokenizer", "--vocab-file", "--merge-file", "--split",
                          "--eval-", "--tensorboard", "--wandb", "--seed", "--distributed-backend", "--train-iters",
                          "--exit-", "--hidden-dropout", "--attention-dropout", "--bias-", "--masked-",
                          # store, choices=['apply_wd_to_qk_layernorm'] (arguments.py L2672 at d98e8a64dd): optimizer
                          "--no-weight-decay-cond-type",
                          "--use-mcore-models", "--attention-softmax-in-fp32",
                          "--timing-log",
                          "--distributed-timeout", "--ckpt-", "--async-save", "--manual-gc", "--num-workers",
                          "--mock-data", "--loss-scale", "--initial-loss-scale", "--hysteresis", "--moe-aux-loss",
                          "--moe-router-load-balancing", "--moe-token-dispatcher", "--moe-grouped-gemm",
                          "--use-checkpoint-args", "--finetune", "--dataloader-type", "--num-dataset-builder",
                          "--micro-batch-size-per-gpu", "--rampup-batch-size", "--apply-layernorm-1p",
                          "--norm-epsilon", "--layernorm-epsilon", "--cross-entropy",
                          "--deterministic-mode",
                          "--nproc", "--nnodes", "--node-rank", "--master", "--rdzv", "--max-restarts")
_MEG_KNOWN_VALUE = {"--recompute-granularity", "--recompute-method", "--recompute-modules", "--recompute-num-layers",
                    "--optimizer",
                    # read for strategy check_for_nan_in_grad (_nan_check: --fp16 without it turns the check off)
                    "--loss-scale",
                    "--num-layers-per-virtual-pipeline-stage", "--virtual-pipeline-model-parallel-size",
                    "--num-virtual-stages-per-pipeline-rank",
                    "--fp8-format", "--fp8-recipe", "--pipeline-model-parallel-layout", "--ddp-bucket-size",
                    "--ddp-num-buckets", "--attention-backend",
                    # read for strategy.moe_fp8_padding (who pads an fp8 run's tokens per expert: _moe_fp8_padding;
                    # its switches are in _MEG_STORE_TRUE) and strategy.moe_flex_dispatcher (flex: hierarchical)
                    "--moe-token-dispatcher-type",
                    # read for strategy.loss_impl (which cross-entropy runs: _loss_impl; --cross-entropy-loss-fusion,
                    # a switch, is in _MEG_STORE_TRUE)
                    "--cross-entropy-fusion-impl",
                    # read for precision fp4 (NVFP4) and training.bf16_layers (_low_precision_extras)
                    "--fp4-format", "--fp4-recipe", "--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16",
                    # read for strategy.cp_comm_type (_cp_comm_type; both nargs='+')
                    "--cp-comm-type", "--hierarchical-context-parallel-sizes",
                    # read for strategy.ep_dispatch_sms under the flex dispatcher (_flex_dispatcher_sms)
                    "--moe-flex-dispatcher-backend", "--moe-deepep-num-sms", "--moe-hybridep-num-sms",
                    "--moe-flex-dispatcher-num-sms",
                    # read for training.moe_router_dtype (the routing probabilities' dtype: docs/model.md#router-dtype)
                    "--moe-router-dtype",
                    # fuzz41: training.moe_rank_imbalance with the padding switch (_moe_capacity); the partial
                    # distributed optimizer's instance count (_optimizer_instances)
                    "--moe-expert-capacity-factor", "--num-distributed-optimizer-instances",
                    # not priced, their values checked against argparse's choices (_MEG_CHOICES)
                    "--transformer-impl", "--data-parallel-sharding-strategy"}
#: Flags read only to refuse what Megatron-LM's argparse refuses (a value outside ``choices=``; "no value" for a flag
#: without one), at NVIDIA/Megatron-LM@d98e8a64dd: --transformer-impl is generated from TransformerConfig.
#: transformer_impl, Literal['local', 'transformer_engine', 'inference_optimized'] (megatron/core/transformer/
#: transformer_config.py L1314; core_v0.15.0's arguments.py lists the first two); --data-parallel-sharding-strategy
#: choices=['no_shard', 'optim', 'optim_grads', 'optim_grads_params'] (megatron/training/arguments.py L3190-3192).
#: Either was passed over as harmless whatever it said (review24b).
_MEG_CHOICES = {"--transformer-impl": ("transformer implementation", ("local", "transformer_engine",
                                                                       "inference_optimized")),
                "--data-parallel-sharding-strategy": ("sharding strategy", ("no_shard", "optim", "optim_grads",
                                                                           "optim_grads_params"))}


#: Megatron-LM's --fp8-recipe choices: TransformerConfig.fp8_recipe, Optional[Literal['tensorwise', 'delayed', 'mxfp8',
#: 'blockwise', 'custom']] (megatron/core/transformer/transformer_config.py; argparse's choices= are generated from it;
#: 'custom' is read and not priced)
_MEG_FP8_RECIPES = ("tensorwise", "delayed", "mxfp8", "blockwise", "custom")


#: Megatron-LM's --cp-comm-type words (megatron/training/arguments.py: "p2p, a2a, allgather or a2a+p2p"; Transformer
#: Engine's attn_forward_func_with_cp spells allgather "all_gather") -> strategy.cp_comm_type
_MEG_CP_COMM = {"p2p": "p2p", "a2a": "a2a", "allgather": "all_gather", "all_gather": "all_gather"}


def _unexpanded(value: str) -> bool:
    """Whether a flag's value holds a shell variable or command substitution (``$X``, ``${X}``, backquotes), which
    the reader does not expand: the flag is named as not used rather than read."""
    return "$" in value or "`" in value


def _cp_comm_type(args: dict[str, str | None], out: StrategyFile) -> None:
    """How a Megatron-LM launch's context parallelism exchanges K and V (strategy cp_comm_type,
    docs/model.md#cp-comm): ``--cp-comm-type`` (nargs='+', default ['p2p']; one word for every layer, or one per
    layer). One kind for all layers is read; a2a+p2p with --hierarchical-context-parallel-sizes A P (nargs='+')
    gives cp_a2a_size A. Per-layer lists that mix kinds are not modelled: noted, priced as p2p."""
    if "--cp-comm-type" in args:
        words = (args["--cp-comm-type"] or "").split()
        kinds = {w.lower() for w in words}
        if not words:
            raise InputError("expected a communication type, got no value", where="--cp-comm-type",
                             allowed="p2p, a2a, allgather or a2a+p2p (Megatron-LM's)")
        bad = sorted(k for k in kinds if k not in _MEG_CP_COMM and k != "a2a+p2p")
        if bad:
            raise InputError(f"unknown context-parallel communication type {bad[0][:40]!r}", where="--cp-comm-type",
                             allowed="p2p, a2a, allgather or a2a+p2p (Megatron-LM's)")
        sizes = (args.get("--hierarchical-context-parallel-sizes") or "").split()
        if len(kinds) == 1 and "a2a+p2p" not in kinds:
            out.strategy["cp_comm_type"] = _MEG_CP_COMM[kinds.pop()]
            out.fields["cp_comm_type"] = "--cp-comm-type"
        elif kinds == {"a2a+p2p"} and len(sizes) == 2 and all(re.fullmatch(r"[1-9][0-9]{0,5}", x) for x in sizes):
            # Megatron-LM's validate_args asserts context_parallel_size == prod(the sizes) (megatron/training/
            # arguments.py at d98e8a64); "2 2" under --context-parallel-size 8 was priced as a2a groups of 2 and a
            # ring of 4, the ring size the file gave dropped. A cp the file leaves to a $VARIABLE is not checked.
            cp = out.strategy.get("cp", None if "--context-parallel-size" in args else 1)
            if cp is not None and int(sizes[0]) * int(sizes[1]) != cp:
                given = (f"--context-parallel-size {cp}" if "--context-parallel-size" in args else
                         f"the context-parallel size {cp} (no --context-parallel-size: Megatron-LM's default)")
                raise InputError(f"{sizes[0]} x {sizes[1]} = {int(sizes[0]) * int(sizes[1])} is not {given}",
                                 where="--hierarchical-context-parallel-sizes",
                                 allowed=f"two sizes A P with A x P = {cp} (Megatron-LM asserts it): A ranks per "
                                         "all-to-all group, P in the p2p ring")
            # Megatron-Core hands TE cp_group = the hierarchical groups in this order: [a2a, p2p]
            out.strategy["cp_comm_type"] = "a2a+p2p"
            out.strategy["cp_a2a_size"] = int(sizes[0])
            out.fields["cp_comm_type"] = "--cp-comm-type"
            out.fields["cp_a2a_size"] = "--hierarchical-context-parallel-sizes"
            return
        else:
            out.unused.append(f"--cp-comm-type {' '.join(words)[:40]} (per-layer mixes, and a2a+p2p without two "
                              "--hierarchical-context-parallel-sizes, are not modelled: priced as p2p)")
    if args.get("--hierarchical-context-parallel-sizes") is not None:
        sizes_text = str(args["--hierarchical-context-parallel-sizes"])[:40]
        out.unused.append(f"--hierarchical-context-parallel-sizes {sizes_text} (read only as the two sizes of "
                          "--cp-comm-type a2a+p2p)")


def _loss_impl(args: dict[str, str | None], out: StrategyFile) -> None:
    """Which cross-entropy a Megatron-LM launch runs (strategy loss_impl, docs/model.md#loss): without
    --cross-entropy-loss-fusion the unfused vocab_parallel_cross_entropy (megatron, the default); with it the
    implementation --cross-entropy-fusion-impl names, native (its default: megatron_fused) or te
    (megatron/core/models/common/language_module/language_module.py compute_language_model_loss and
    megatron/training/arguments.py ``choices=['native', 'te']``, core_v0.15.0). The impl flag alone changes nothing."""
    impl = args.get("--cross-entropy-fusion-impl")
    if "--cross-entropy-fusion-impl" in args and impl not in ("native", "te"):
        shown = "no value" if impl is None else repr(impl[:40])
        raise InputError(f"unknown cross-entropy fusion implementation: {shown}", where="--cross-entropy-fusion-impl",
                         allowed="native or te (Megatron-LM's choices)")
    if "--cross-entropy-loss-fusion" in args:
        out.strategy["loss_impl"] = "te" if impl == "te" else "megatron_fused"
    elif impl is not None:
        out.unused.append(f"--cross-entropy-fusion-impl {impl} without --cross-entropy-loss-fusion (Megatron-Core runs "
                          "the unfused cross-entropy)")


#: A launch command's line in a Megatron-LM script: torchrun / python / deepspeed / srun / mpirun as a word, or a
#: word naming a .py script (pretrain_gpt.py). The first such logical line is the command.
_LAUNCH_COMMAND = re.compile(r"(?:^|[\s/])(?:torchrun|deepspeed|python[0-9.]*|srun|mpirun)(?:\s|$)|\S\.py(?:\s|$)")


def _megatron_tokens(text: str, out: StrategyFile | None = None) -> list[str]:
    """The words bash passes to a Megatron-LM launch (a script, or a bare list of flags), split as the shell splits
    them, with the string and array variables that hold flags expanded where the launch names them.

    A script with a launch command (:data:`_LAUNCH_COMMAND`): of the commands that name a launch word, the launch is
    the one with the most Megatron-LM flags once its variables are expanded (then the most flags, then the first);
    the other such commands (``python tools/preprocess_data.py ...`` on a line of its own, or before ``&&``) and the
    other commands of the launch's own line pass it nothing. A line that starts with a flag but belongs to no command
    (the command ended on a line without a trailing backslash, and the line is in no array or quoted string) is not
    passed by bash (it runs it as a command of its own, "command not found"). In any file, commands that print their
    arguments (:data:`~scalemodel.specs.shell_words._OUTPUT_COMMANDS`) and here-document texts pass nothing. What is
    left out is said in
    ``out.unused`` where it holds a flag. The words of other commands (a function call that forwards "$@", an
    ``if``) are kept where they are, as before."""
    logical = _logical_lines(_drop_heredocs(text, out))
    has_launch = any(_LAUNCH_COMMAND.search(body) and not body.lstrip().startswith("--") for _, body in logical)
    segments: list[_Segment] = []
    for no, body in logical:
        try:
            # comments='': _logical_lines dropped the comments as bash does (a '#' at a word's start); shlex's own
            # comments cut every word at a '#' (review17f: "--wandb-exp-name run#3 --tensor-model-parallel-size 2"
            # lost the tensor-parallel size and every flag after it without a word; bash passes "run#3" whole).
            # punctuation_chars: bash's control operators are words of their own ("--micro-batch-size 1; echo" was
            # refused as the count '1;'; "... && echo --pipeline-model-parallel-size 4" priced pp 4)
            lex = shlex.shlex(body, posix=True, punctuation_chars=";&|")
            lex.whitespace_split, lex.commenters = True, ""
            line_words = list(lex)
        except ValueError as exc:
            raise InputError(f"cannot split the arguments: {folded(exc)}", where="strategy file",
                             allowed="shell-quoted Megatron-LM flags, e.g. --tensor-model-parallel-size 8") from None
        dashes = has_launch and body.lstrip().startswith("--")
        for j, (op, words) in enumerate(_split_commands(line_words)):
            if words or j == 0:
                segments.append(_Segment(no, j, op, words, dashes))
    strings, arrays, used = _read_variables(segments, out)
    launch = _choose_launch(segments) if has_launch else None
    first_launch = next((no for no, body in logical if _LAUNCH_COMMAND.search(body)
                         and not body.lstrip().startswith("--")), None)
    command = launch.no if launch is not None else first_launch
    kept: list[str] = []
    passed: set[str] = set()
    dropped: set[str] = set()  # variables named by commands left out
    for s in segments:
        if s.dashes:
            if out is not None and s.j == 0:
                no = s.no
                where = (f"the launch command of line {command} ended before it, on a line without a trailing "
                         "backslash" if command is not None and no > command else
                         f"before the launch command of line {command}, on no command's line")
                blank = _BLANK_AFTER_BACKSLASH.search(text.split("\n")[no - 2]) if no >= 2 else None
                if blank:  # "... \ " : bash reads "\ " as an escaped blank, and the newline ends the command
                    where += f" (line {no - 1} ends in a backslash and a blank: that does not continue a line)"
                body = next(b for n, b in logical if n == no)
                out.unused.append(f"{_shown(body.split(), 60)} (line {no}: {where}: bash does not pass it)")
            continue
        if s.kind == "define":
            continue
        flagged = any(w.startswith("--") for w in s.expanded)
        if launch is not None and s is not launch and (s.no == launch.no or _is_launch_word(s)):
            dropped |= _references(s.words)
            if flagged and out is not None:
                if s.no == launch.no:
                    ops = [t.op for t in segments if t.no == s.no]
                    where = f"after {s.op!r}" if s.j else f"before {ops[1]!r}"
                else:
                    where = f"a command of its own; the launch is on line {launch.no}"
                out.unused.append(f"{_shown(s.words)} (line {s.no}: another command than the launch, {where}: bash "
                                  "does not pass it to the launch)")
            continue
        if s.kind == "output":
            dropped |= _references(s.words)
            if flagged and out is not None:
                out.unused.append(f"{_shown(s.words)} (line {s.no}: {s.words[0]} prints its arguments: bash passes "
                                  "none of them to the launch)")
            continue
        passed |= _references(s.words)
        kept.extend(s.expanded)
    if out is not None:
        for name, value in {**strings, **arrays}.items():
            if not any(w.startswith("--") for w in value):
                continue
            if name not in used:
                out.unused.append(f"{name}={_shown(value)} (a variable no word of the file expands: bash passes none "
                                  "of it)")
            elif name in dropped and name not in passed:
                out.unused.append(f"{name}={_shown(value)} (expanded only by commands that are not the launch: bash "
                                  "passes none of it to the launch)")
    return kept


def _is_launch_word(s: _Segment) -> bool:
    return bool(s.words) and _LAUNCH_COMMAND.search(" ".join(s.words)) is not None


def _choose_launch(segments: list[_Segment]) -> _Segment | None:
    """Of the commands naming a launch word, the one with the most Megatron-LM flags after expansion (then the most
    flags, then the first)."""
    known = (*_MEG_INT, *_MEG_KNOWN_VALUE, *_MEG_STORE_TRUE, *_MEG_MODEL)
    candidates = [s for s in segments if s.kind == "command" and not s.dashes and _is_launch_word(s)]
    if not candidates:
        return None

    def rank(k: int) -> tuple[int, int, int]:
        flags = [w.partition("=")[0].replace("_", "-") for w in candidates[k].expanded if w.startswith("--")]
        return sum(f in known for f in flags), len(flags), -k

    return candidates[max(range(len(candidates)), key=rank)]


#: A word that looks like a Megatron flag but starts with an en/em dash, a minus sign or a doubled hyphen-like
#: character (copied from a rendered document): skipped as a positional, so the setting was dropped without a word.
_TYPOGRAPHIC_FLAG = re.compile(r"^(?:[\u2010-\u2015\u2212\ufe58\ufe63\uff0d]|-[\u2010-\u2015\u2212])[a-z]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


#: Megatron-LM ``--attention-backend`` (megatron/core/transformer/enums.py ``AttnBackend``: flash, fused, unfused,
#: local, auto; arguments.py parses it as ``AttnBackend[name]``) -> training.attention_kernel: fused = Transformer
#: Engine's FusedAttention (cuDNN), flash = its FlashAttention (flash-attn 2), auto (its default) = TE's own choice,
#: training.attention_kernel's default auto, so nothing is set. unfused and
#: local run the unfused core (strategy flash_attention false).
_MEG_ATTENTION_BACKEND = {"fused": "cudnn", "flash": "fa2"}


def _choice_flags(args: dict[str, str | None]) -> None:
    """Refuse a :data:`_MEG_CHOICES` flag's value outside Megatron-LM's argparse choices (or no value at all)."""
    for flag, (noun, choices) in _MEG_CHOICES.items():
        _choice(args, flag, noun, choices)


def _choice(args: dict[str, str | None], flag: str, noun: str, choices: tuple[str, ...]) -> None:
    """Refuse ``flag``'s value outside Megatron-LM's argparse ``choices`` (or no value at all) as argparse does."""
    if flag in args and args[flag] not in choices:
        value = args[flag]
        shown = "no value" if value is None else repr(value[:40])
        raise InputError(f"unknown {noun}: {shown}", where=flag,
                         allowed=f"{', '.join(choices[:-1])} or {choices[-1]} (Megatron-LM's choices)")


def _attention_backend(args: dict[str, str | None], out: StrategyFile) -> None:
    """training.attention_kernel (or strategy flash_attention false) from a launch's --attention-backend."""
    if "--attention-backend" not in args:
        return
    backend = args["--attention-backend"]
    if backend in _MEG_ATTENTION_BACKEND:
        out.training["attention_kernel"] = _MEG_ATTENTION_BACKEND[backend]
        out.training_fields["attention_kernel"] = "--attention-backend"  # a refusal names the flag written
    elif backend == "auto":
        pass  # training.attention_kernel's own default
    elif backend in ("unfused", "local"):
        out.strategy["flash_attention"] = False
    else:
        shown = "no value" if backend is None else repr(str(backend)[:40])
        raise InputError(f"unknown attention backend: {shown}", where="--attention-backend",
                         allowed="flash, fused, unfused, local or auto (Megatron-LM AttnBackend)")


def _moe_fp8_padding(args: dict[str, str | None], moe: bool) -> bool:
    """Whether a Megatron-LM launch pads an fp8 run's routed tokens in the experts (strategy moe_fp8_padding,
    docs/model.md#fp8-expert-padding): --fp8-format with experts (``moe``: --num-experts) and --moe-grouped-gemm
    (TEGroupedMLP; not --moe-use-legacy-grouped-gemm), a dispatcher that leaves the padding to the experts and no
    --moe-router-padding-for-quantization (or its alias --moe-router-padding-for-fp8), which pads the routing map
    instead. The dispatchers that leave it (megatron/core/transformer/moe/token_dispatcher.py at 32f2c9cfdd and
    2d1fa8d372): allgather (--moe-token-dispatcher-type's default: megatron/training/arguments.py, core_dev_r0.15.0),
    alltoall, and flex with the DeepEP backend (--moe-flex-dispatcher-backend's default, or --moe-enable-deepep):
    ``_DeepepManager`` pads its routing map only under moe_router_padding_for_quantization (``_pad_routing_map``),
    so its permuted tokens reach ``TEGroupedMLP.forward``'s ``Fp8Padding`` unaligned. The flex dispatcher's HybridEP
    backend pads in its dispatch (``_HybridEPManager.dispatch`` ``pad_multiple`` whenever fp8 or fp4) and NCCL EP in
    its receive buffer (``_NCCLEPManager`` ``alignment``, d98e8a64dd), so TE's ``Fp8Padding`` finds the counts
    aligned and copies nothing (moefp837; docs/model.md#fp8-expert-padding)."""
    dispatcher = args.get("--moe-token-dispatcher-type") or "allgather"
    backend = "deepep" if "--moe-enable-deepep" in args else (args.get("--moe-flex-dispatcher-backend") or "deepep")
    return ("--fp8-format" in args and moe and "--moe-grouped-gemm" in args
            and "--moe-use-legacy-grouped-gemm" not in args
            and (dispatcher != "flex" or backend == "deepep")
            and "--moe-router-padding-for-quantization" not in args and "--moe-router-padding-for-fp8" not in args)


#: Megatron-LM's on/off flags (argparse ``action='store_true'``, megatron/training/arguments.py): they take no value.
#: Megatron-LM's FSDP switches: no Megatron-Core DDP with them. --use-torch-fsdp2 is read as zero fsdp
#: (_torch_fsdp2); --use-megatron-fsdp is not read (StrategyFile.unused says so).
_MEG_FSDP = ("--use-torch-fsdp2", "--use-megatron-fsdp")
#: The switches read for strategy.moe_fp8_padding and strategy.loss_impl are store_true too (arguments.py,
#: core_v0.15.0: --moe-grouped-gemm, --moe-use-legacy-grouped-gemm, --moe-router-padding-for-quantization (alias
#: --moe-router-padding-for-fp8), --cross-entropy-loss-fusion): ``--cross-entropy-loss-fusion=false`` was read as on.
#: NVIDIA/Megatron-LM's other ``--no-*`` switches (noflags39): the store_false flags of megatron/training/arguments.py
#: at core_r0.8.0, core_v0.13.1, core_v0.15.0 and d98e8a64dd (--no-persist-layer-norm: store_true, dest
#: no_persist_layer_norm), and those d98e8a64dd generates from a dataclass bool defaulting True (argument_utils.py
#: ArgumentGroupFactory._build_argparse_kwargs_from_field: ``--no-X`` and ``--disable-X``, store_false):
#: TransformerConfig's fp8_wgrad, clone_scatter_output_in_embedding and tp_comm_* (megatron/core/
#: model_parallel_config.py, transformer_config.py) and the logger, checkpoint, tokenizer and distributed-init
#: configs' (megatron/training/config/). They change nothing the reader prices: checkpoint, logging, data, tokenizer
#: and initialisation switches; Megatron-FSDP's --no-gradient-reduce-div-fusion (read only by megatron_fsdp/
#: param_and_grad_buffer.py L4754 at d98e8a64dd; the reader does not price --use-megatron-fsdp); the local
#: (non-Transformer-Engine) path's --no-masked-softmax-fusion (core/fusions/fused_softmax.py) and
#: --no-persist-layer-norm (core/fusions/fused_layer_norm.py, Apex); --no-pin-cpu-grads/-params (the optimizer's CPU
#: offload, not read). The read ones are in _MEG_SWITCH and _MEG_STORE_TRUE; those that change what the model prices
#: but are not read are named by _store_false_not_read. Any other ``--no-*`` is not Megatron-LM's: named as not used,
#: as another unknown flag is.
_MEG_NO_KNOWN = frozenset({
    "--no-barrier-with-level-1-timing", "--no-ckpt-fully-parallel-save", "--no-ckpt-load-validate-sharding-integrity",
    "--no-clone-scatter-output-in-embedding", "--no-create-attention-mask-in-dataloader", "--no-data-sharding",
    "--no-flight-recorder-dump-on-timeout", "--no-flight-recorder-extra-dump-on-exec",
    "--no-flight-recorder-include-only-active", "--no-gradient-reduce-div-fusion", "--no-initialization",
    "--no-load-optim", "--no-load-rng", "--no-log-learnig-rate-to-tensorboard", "--no-log-loss-scale-to-tensorboard",
    "--no-manual-gc-eval", "--no-masked-softmax-fusion", "--no-mmap-bin-files", "--no-one-logger",
    "--no-persist-layer-norm", "--no-pin-cpu-grads", "--no-pin-cpu-params", "--no-save-optim", "--no-save-rng",
    "--no-save-tokenizer-assets", "--no-strict-fsdp-dtensor-load",
    "--no-tokenizer-sentencepiece-ignore-extra-whitespaces",
    "--no-use-layer-wise-param-layout", "--no-use-tokenizer-model-from-checkpoint-args",
    # dest scatter_gather_tensors_in_pipeline (arguments.py L2639 at core_v0.15.0), read nowhere else in megatron/:
    # Megatron-Core sends whole tensors either way (strategy pp_scatter_gather false, its default)
    "--no-scatter-gather-tensors-in-pipeline",
    # noflags40: read by _eager_activation (strategy eager_activation) and _tp_comm_parts (strategy tp_comm_overlap_ag
    # / _rs, tp_comm_bulk_dgrad / _wgrad); --no-fp8-wgrad and the split parts named by _store_false_not_read
    "--no-bias-gelu-fusion", "--no-bias-swiglu-fusion", "--no-fp8-wgrad", "--no-tp-comm-bulk-dgrad",
    "--no-tp-comm-bulk-wgrad", "--no-tp-comm-overlap-ag", "--no-tp-comm-overlap-rs", "--no-tp-comm-split-ag",
    "--no-tp-comm-split-rs"})
#: The same Transformer Engine user-buffer parts under the spelling of core_r0.8.0 to core_v0.15.0 (store_false
#: --disable-tp-comm-overlap-ag / -rs, --disable-tp-comm-split-ag / -rs, --disable-tp-comm-bulk-dgrad / -wgrad,
#: megatron/training/arguments.py L2094-2109, L2254-2258 at core_v0.15.0): read as their --no-* forms are
#: (_tp_comm_parts; the split parts named by _store_false_not_read). review39: listed as unknown flags, without why
_MEG_TP_COMM_PARTS = ("bulk-dgrad", "bulk-wgrad", "overlap-ag", "overlap-rs", "split-ag", "split-rs")
_MEG_DISABLE_TP_COMM = frozenset(f"--disable-tp-comm-{part}" for part in _MEG_TP_COMM_PARTS)
#: A switch and its ``--no-`` form that one Megatron-LM release defines both (argparse keeps the last, no
#: contradiction): --ckpt-fully-parallel-save with --no-ckpt-fully-parallel-save (core_r0.8.0 to core_v0.15.0),
#: --yarn-correction-range-round-to-int with its --no- form (d98e8a64dd)
_MEG_BOTH_WAYS = frozenset({"--ckpt-fully-parallel-save", "--yarn-correction-range-round-to-int"})
_MEG_STORE_TRUE = frozenset(_MEG_SWITCH) | set(_MEG_FSDP) | {"--torch-fsdp2-no-reshard-after-forward",  # store_false
                                                             "--moe-grouped-gemm", "--moe-use-legacy-grouped-gemm",
                                            "--moe-router-padding-for-quantization", "--moe-router-padding-for-fp8",
                                            "--cross-entropy-loss-fusion",
                                            # store_true: strategy moe_permute_fusion
                                            "--moe-permute-fusion",
                                            # store_true, TransformerConfig.moe_enable_deepep (deprecated): the flex
                                            # dispatcher's deepep backend (_flex_dispatcher_sms)
                                            "--moe-enable-deepep",
                                            # strategy overlap_p2p_comm (_overlap_p2p_comm): store_true from
                                            # f9283c5a8a (2023-05-31), store_false --no-... from 4eeff55d1f
                                            "--overlap-p2p-communication", "--no-overlap-p2p-communication",
                                            # store_false, dest bias_dropout_fusion (arguments.py at 24bad8e677):
                                            # strategy eager_bias_dropout_add
                                            "--no-bias-dropout-fusion",
                                            # store_false, dest check_for_nan_in_loss_and_grad: strategy
                                            # check_for_nan_in_grad and check_for_nan_in_loss (_nan_check)
                                            "--no-check-for-nan-in-loss-and-grad",
                                            # not in NVIDIA/Megatron-LM's argparse (TransformerConfig
                                            # .fp8_dot_product_attention has no CLI argument: arguments.py at
                                            # d98e8a64 lists it under "no CLI argument exists for these", and no
                                            # tag or branch defines it); forks' launch scripts pass it alone
                                            "--fp8-dot-product-attention",
                                            "--first-last-layers-bf16",  # training.bf16_layers
                                            # fuzz41, store_true (arguments.py L3144 / L3153 at core_v0.15.0;
                                            # generated at d98e8a64dd): _moe_capacity and _delay_wgrad_compute
                                            "--moe-pad-expert-input-to-capacity", "--delay-wgrad-compute",
                                            } | _MEG_NO_KNOWN | _MEG_DISABLE_TP_COMM
_BOOL_WORDS = {"true", "false", "yes", "no", "on", "off", "0", "1"}
#: Megatron-LM's --moe-token-dispatcher-type choices (megatron/training/arguments.py).
_MEG_DISPATCHERS = ("allgather", "alltoall", "alltoall_seq", "flex")


def _switch_without_value(name: str, after: str | None) -> None:
    """Refuse a value given to a Megatron-LM switch: ``--sequence-parallel false`` and ``--fp8-param-gather=false``
    were read as the switch turned on. Megatron's argparse refuses ``--flag=value`` ("ignored explicit argument")
    and a following word ("unrecognized arguments"); a following token that is not a truth word (a script, a
    positional) is left alone. The message names the switch's kind: the ``--no-*`` and ``--disable-*`` switches
    are store_false (megatron/training/arguments.py; argument_utils.py names a store_false bool both ways), the
    others store_true."""
    if after is not None and (after.startswith("=") or after.strip().lower() in _BOOL_WORDS):
        # argparse store_false: the switch turns its feature off (--torch-fsdp2-no-reshard-after-forward too,
        # arguments.py L3218 at d98e8a64dd)
        if name.startswith(("--no-", "--disable-")) or name == "--torch-fsdp2-no-reshard-after-forward":
            allowed = (f"{name} alone to turn off what it names, or leave it out to keep that on "
                       "(argparse store_false)")
        else:
            allowed = f"{name} alone to turn it on, or leave it out to keep it off (argparse store_true)"
        raise InputError(f"a switch takes no value, got {after[:40]!r}", where=name, allowed=allowed)


#: Where Megatron-LM sets the defaults its reader fills (StrategyFile.default), at NVIDIA/Megatron-LM@d98e8a64dd
_MEG_AT = "NVIDIA/Megatron-LM@d98e8a64dd"
_MEG_DISPATCHER = (f"{_MEG_AT} megatron/core/transformer/transformer_config.py L891: moe_token_dispatcher_type "
                   "= \"allgather\"")
_MEG_PERMUTE_FUSION = f"{_MEG_AT} megatron/core/transformer/transformer_config.py L941: moe_permute_fusion = False"
_MEG_FP8_PADDING = (f"{_MEG_AT} megatron/core/transformer/transformer_config.py L771: "
                    "moe_router_padding_for_quantization = False (the grouped experts pad the fp8 tokens)")
_MEG_DDP = (f"{_MEG_AT} megatron/training/training.py get_model L2484-2490: DP = DDP unless --use-torch-fsdp2 or "
            "--use-megatron-fsdp")
_MEG_OVERLAP_GRAD_REDUCE = f"{_MEG_AT} megatron/training/arguments.py L3121: --overlap-grad-reduce store_true"
_MEG_FP32_REDUCE = (f"{_MEG_AT} megatron/training/arguments.py validate_args L1204-1217: --bf16 without "
                    "--grad-reduce-in-bf16 sets accumulate_allreduce_grads_in_fp32")


def _negations_agree(given: set[str]) -> None:
    """Refuse a switch given with its negation (``--overlap-grad-reduce --no-overlap-grad-reduce``, ``--align-grad-
    reduce --disable-align-grad-reduce``), naming both. No Megatron-LM release defines both forms, bar those in
    _MEG_BOTH_WAYS (megatron/training/arguments.py at core_r0.8.0 to core_v0.19.0 and d98e8a64dd: a store_true ``--X``
    or a store_false ``--no-X`` / ``--disable-X``, never the pair), so its argparse refuses the launch at whichever it
    has not ("unrecognized arguments"); the reader kept the switch on without a word (noflags39)."""
    for neg in sorted(given):
        for prefix in ("--no-", "--disable-"):
            base = "--" + neg[len(prefix):]
            if neg.startswith(prefix) and base in given and base not in _MEG_BOTH_WAYS:
                if neg in _MEG_STORE_TRUE:
                    has, allowed = f"Megatron-LM has {neg}, not {base}", f"{neg} to turn it off, or neither"
                elif base in _MEG_STORE_TRUE:
                    has, allowed = f"Megatron-LM has {base}, not {neg}", f"{base} to turn it on, or neither"
                else:
                    has, allowed = "Megatron-LM defines at most one of them", f"one of {base} or {neg}"
                raise InputError(f"a switch and its negation given together contradict ({has}: its argparse refuses "
                                 "the other as an unrecognized argument)", where=f"{base} and {neg}", allowed=allowed)


def _eager_activation(args: dict[str, str | None], model_flags: Sequence[str], out: StrategyFile) -> None:
    """Strategy eager_activation where the launch runs the MLP's activation eagerly (docs/model.md#eager-activation):
    NVIDIA/Megatron-LM@d98e8a64dd --no-bias-swiglu-fusion / --no-bias-gelu-fusion (store_false, arguments.py
    L2892-2898) set TransformerConfig.bias_activation_fusion, the first with --swiglu, the second without
    (argument_utils.py L314-319); the other one changes nothing, nor --no-bias-gelu-fusion under --disable-bias-linear
    (validate_args turns bias_gelu_fusion off there itself, arguments.py L1605-1606: the ATen GeLU layer_impl prices
    already): silent there, as the switches that change nothing priced are."""
    swiglu = "--swiglu" in model_flags
    flag = "--no-bias-swiglu-fusion" if swiglu else "--no-bias-gelu-fusion"
    if flag in args and (swiglu or "--disable-bias-linear" not in model_flags):
        out.strategy["eager_activation"] = True
        out.fields["eager_activation"] = flag


def _tp_comm_parts(args: dict[str, str | None], out: StrategyFile) -> None:
    """The parts of --tp-comm-overlap's userbuffers overlap a launch switches off (docs/model.md#tp-comm-parts):
    store_false ModelParallelConfig.tp_comm_overlap_ag / _rs / tp_comm_bulk_dgrad / _wgrad (default True; generated
    --no-X / --disable-X at NVIDIA/Megatron-LM@d98e8a64dd, argument_utils.py L189-196; --disable-X at core_r0.8.0 to
    core_v0.15.0, arguments.py L2094-2109), which Megatron-Core hands Transformer Engine as ub_overlap_ag,
    ub_overlap_rs, ub_bulk_dgrad and ub_bulk_wgrad (megatron/core/extensions/transformer_engine.py L1192-1200,
    L1458-1466). Read with --tp-comm-overlap only: without it Megatron-Core reads none of them ("Don't care if
    tp_comm_overlap is False", model_parallel_config.py L271-289), and they change nothing."""
    if "--tp-comm-overlap" not in args:
        return
    for part in TP_COMM_PARTS:
        for way in ("no", "disable"):
            name = f"--{way}-{part.replace('_', '-')}"
            if name in args:
                out.strategy[part] = False
                out.fields[part] = name


def _store_false_not_read(args: dict[str, str | None], out: StrategyFile) -> None:
    """Name the Megatron-LM ``--no-*`` switches (_MEG_NO_KNOWN) the reader does not apply, where they might be read as
    changing what the model prices. NVIDIA/Megatron-LM@d98e8a64dd: --no-fp8-wgrad (TransformerConfig.fp8_wgrad) reaches
    Transformer Engine only as DelayedScaling's ``override_linear_precision=(False, False, not fp8_wgrad)``
    (megatron/core/fp8_utils.py L775 / L808; the current-scaling, block and MXFP8 recipes do not take it), an argument
    Transformer Engine 2.0 removed (NVIDIA/TransformerEngine 544dd14b4; its recipes are pydantic dataclasses, which
    drop an unknown keyword) and Megatron-LM's pinned TE (4329ff84, version 2.17.1, pyproject.toml) does not read: a
    TE 1.x run's is strategy fp8_wgrad false (docs/model.md#fp8-wgrad). --no-tp-comm-split-ag / -rs (and
    --disable-*): Megatron-Core reads tp_comm_split_* only for Transformer Engine < 1.5 or where its config has no
    tp_comm_overlap_ag / _rs attribute (extensions/transformer_engine.py L1192-1200, L1462-1466), which
    ModelParallelConfig always has (model_parallel_config.py L281-289): nothing changes (docs/model.md#tp-comm-parts).
    The read switches are in _MEG_SWITCH, --no-bias-swiglu-fusion / --no-bias-gelu-fusion in
    :func:`_eager_activation`, the other tp-comm parts in :func:`_tp_comm_parts`."""
    if "--no-fp8-wgrad" in args and "--fp8-format" in args:
        out.unused.append("--no-fp8-wgrad (not read: Transformer Engine >= 2.0 ignores it, Megatron-Core passes it "
                          "only to DelayedScaling's removed override_linear_precision; for a Transformer Engine 1.x "
                          "delayed-scaling run set strategy fp8_wgrad false)")
    for name in (f"--{way}-tp-comm-split-{part}" for part in ("ag", "rs") for way in ("no", "disable")):
        if name in args and "--tp-comm-overlap" in args:
            out.unused.append(f"{name} (changes nothing with Transformer Engine >= 1.5: Megatron-Core passes "
                              "tp_comm_overlap_ag / _rs instead)")


def _megatron(text: str, out: StrategyFile) -> None:
    bad = _CONTROL.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise InputError(f"control character 0x{ord(bad.group()):02x} on line {line}",
                         allowed="a text file of Megatron-LM flags (a launch script)")
    # fuzz35: a bidirectional control or invisible format character, which the YAML, JSON and TOML readers refuse in
    # a string, made "--tensor-model\u200b-parallel-size 8" a flag Megatron-LM has not (warned as not used, tp 1
    # priced) and reordered what a terminal shows of the script; refused wherever it is, as a control character is
    fmt = files.refused_character(text)
    if fmt is not None:
        raise files.character_refusal(fmt, False).at(f"line {text.count(chr(10), 0, text.find(fmt)) + 1}")
    tokens = _megatron_tokens(text, out)
    if not any(t.startswith("--") for t in tokens):
        # review17f: the reason was in out.unused, never shown ("torchrun pretrain_gpt.py \ " + newline: a blank
        # after the backslash ends the command, and every flag line after it is not passed)
        why = next((u for u in out.unused if "bash does not pass" in u), None)
        raise InputError("no Megatron-LM flag in the file" + (f" that bash passes to the launch: {why}" if why else ""),
                         allowed="flags such as --tensor-model-parallel-size 8 --micro-batch-size 1")
    args: dict[str, str | None] = {}
    model_flags: list[str] = []
    passed: set[str] = set()  # every flag name the launch passes (_negations_agree)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        blank = next((c for c in tok if c.isspace()), None)  # shlex splits on ASCII blanks only
        if blank is not None and "--" in tok:
            # a no-break space pasted from a document: "--tensor-model-parallel-size\u00a02" was warned as
            # "--tensor-model-parallel-size 2" not used (the space shown as an ordinary one), or, leading, skipped as a
            # positional without a word; argparse refuses it as one unrecognized argument
            shown = tok[:60].replace(blank, f"\\u{ord(blank):04x}")
            out.unused.append(f"{shown} (a U+{ord(blank):04X} space inside: one word to the shell, not a flag and its "
                              "value)")
            i += 1
            continue
        if not tok.startswith("--"):
            if _TYPOGRAPHIC_FLAG.match(tok):  # a flag pasted from a document: no shell passes it as one
                out.unused.append(f"{tok[:40]} (a typographic dash, not '--': not a flag)")
            elif tok.startswith("-") and "-" + tok.partition("=")[0].replace("_", "-") in (
                    *_MEG_INT, *_MEG_KNOWN_VALUE, *_MEG_STORE_TRUE, *_MEG_MODEL):
                # round 16: "-tensor-model-parallel-size 4" (one dash) was passed over as a positional word without a
                # word; Megatron-LM's argparse has no such option (it refuses the launch)
                out.unused.append(f"{tok[:40]} (one dash: not the flag -{tok.partition('=')[0][:40]})")
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        name = name.replace("_", "-")
        value: str | None = inline if eq else None
        if name in _MEG_STORE_TRUE:  # argparse store_true: takes no value, consumes no token
            _switch_without_value(name, f"={inline}" if eq else (tokens[i + 1] if i + 1 < len(tokens) else None))
        elif name in ("--recompute-modules", "--cp-comm-type", "--hierarchical-context-parallel-sizes") and not eq:
            # nargs='*' / '+': every word up to the next flag
            words = []
            while i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                words.append(tokens[i + 1])
                i += 1
            value = " ".join(words)
        elif not eq and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
            i += 1
        i += 1
        if name in _MEG_INT and value is None:
            # review18b: "--micro-batch-size --tensor-model-parallel-size 4 ... --micro-batch-size 2" read micro-batch 2
            # with a note; argparse refuses the launch at the first ("expected one argument"), whatever comes later
            raise InputError("expected a count, got no value", where=name,
                             allowed="an integer from 0 to 999999999, or a $VARIABLE (not expanded)")
        if name in _MEG_INT or name in _MEG_KNOWN_VALUE or name in _MEG_STORE_TRUE:
            if name in args and args[name] != value:  # round 16b: "--tensor-model-parallel-size 2 ... 4" was read as
                # 4 without a word (a script that sets a flag and sets it again later); argparse keeps the last
                out.unused.append(f"{name} {str(args[name])[:40]} (given again later as {str(value)[:40]}: argparse "
                                  "keeps the last, as read here)")
            args[name] = value
        elif name in _MEG_MODEL:
            model_flags.append(name)
        elif name.startswith("--no-") and not name.startswith(_MEG_HARMLESS_PREFIXES):
            # noflags39: "--no-" was a harmless prefix, so "--overlap-grad-reduce --no-overlap-grad-reduce" kept the
            # overlap on without a word; a --no-* switch Megatron-LM has not is named as another unknown flag is
            shown = name if value is None else f"{name} {value[:40]}"
            out.unused.append(f"{shown[:80]} (not a Megatron-LM switch, core_r0.8.0 to d98e8a64dd: its argparse "
                              "refuses it as an unrecognized argument)")
        elif not name.startswith(_MEG_HARMLESS_PREFIXES):
            out.unused.append(name if value is None else f"{name} {value[:40]}")
        passed.add(name)
    _negations_agree(passed)
    _store_false_not_read(args, out)
    if model_flags:
        out.unused.append(f"model flags ({', '.join(model_flags[:6])}{', ...' if len(model_flags) > 6 else ''}): "
                          "describe the model with --model")

    def number(name: str) -> int | None:
        if name not in args:
            return None
        v = args[name]
        if v is not None and _unexpanded(v):
            out.unused.append(f"{name} {v[:40]} (not a number: a shell variable is not expanded)")
            return None
        # what Megatron's argparse (type=int) reads; a negative or 10-digit count would not start a real job
        if v is None or not re.fullmatch(r"\+?[0-9]{1,9}", v):
            got = "no value" if v is None else repr(v[:40])
            raise InputError(f"expected a count, got {got}", where=name,
                             allowed="an integer from 0 to 999999999, or a $VARIABLE (not expanded)")
        return int(v)

    for name, (where, key) in _MEG_INT.items():
        if name in args and (n := number(name)) is not None:
            getattr(out, where)[key] = n
            # an error on strategy.ep names --expert-model-parallel-size (training.micro_batch --micro-batch-size)
            (out.fields if where == "strategy" else out.training_fields)[key] = name
    for name in ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"):
        # round 21: 0 was priced as an empty edge stage; Megatron-Core refuses it (NVIDIA/Megatron-LM@d98e8a64dd
        # megatron/core/transformer/transformer_config.py L2304 / L2323 "num_layers_in_first_pipeline_stage must
        # be larger than 0"); a stage without layers is written with --pipeline-model-parallel-layout
        if out.strategy.get(_MEG_INT[name][1]) == 0 and out.fields.get(_MEG_INT[name][1]) == name:
            raise InputError("0 layers (Megatron-Core raises: num_layers_in_first/last_pipeline_stage must be larger "
                             "than 0)", where=name, allowed="1 or more layers, or leave the flag out; an empty stage "
                             "is written with --pipeline-model-parallel-layout")
    if "--bf16" in args and "--fp16" in args:  # Megatron's validate_args asserts against both
        raise InputError("--bf16 and --fp16 both given", where="--fp16", allowed="one of them")
    for name, (where, key, switched) in _MEG_SWITCH.items():
        if name in args:
            getattr(out, where)[key] = switched
            if where == "strategy":
                out.fields[key] = name
    _eager_activation(args, model_flags, out)
    _tp_comm_parts(args, out)
    if "--no-bias-dropout-fusion" in args:
        # megatron/training/arguments.py at 24bad8e677: store_false, dest bias_dropout_fusion: Megatron-Core's eager
        # bias-dropout-add (strategy eager_bias_dropout_add, docs/model.md#eager-layer-ops), priced for the linear
        # biases Megatron-LM adds unless --disable-bias-linear
        if "--disable-bias-linear" in model_flags:
            out.unused.append("--no-bias-dropout-fusion with --disable-bias-linear (no bias reaches the add; the "
                              "separate dropout pass of a model with dropout is not priced)")
        else:
            out.strategy["eager_bias_dropout_add"] = True
            out.fields["eager_bias_dropout_add"] = "--no-bias-dropout-fusion"
    if "--no-async-tensor-model-parallel-allreduce" in args and "--sequence-parallel" in args:
        # Megatron's sequence-parallel backward launches each reduce-scatter with async_op=True before the
        # weight-gradient GEMM whatever this flag says (validate_args turns the all-reduce flag off with it;
        # megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward, core_r0.5.0)
        del out.strategy["tp_async_allreduce"]
        out.unused.append("--no-async-tensor-model-parallel-allreduce with --sequence-parallel (Megatron's "
                          "sequence-parallel reduce-scatters run under the weight-gradient GEMMs regardless)")
    if ("--bf16" in args and "--grad-reduce-in-bf16" not in args and "--accumulate-allreduce-grads-in-fp32" not in args
            and "--use-torch-fsdp2" not in args):  # torch FSDP2 reduces in the parameters' dtype (_torch_fsdp2)
        # the data-parallel gradient reduction dtype: Megatron-LM's validate_args sets
        # accumulate_allreduce_grads_in_fp32 for --bf16 unless --grad-reduce-in-bf16 (megatron/training/arguments.py;
        # forced at core_r0.8.0), and DDP reduces the fp32 main-grad buffer (grad_reduce_in_fp32)
        out.default("training", "grad_bytes_per_param", 4.0, _MEG_FP32_REDUCE)
    if "--recompute-method" in args and args["--recompute-method"] not in ("block", "uniform") and not (
            args["--recompute-method"] and _unexpanded(args["--recompute-method"])):
        # round 17: warned "not used" and priced as full recompute of every layer. Megatron-LM's argparse takes
        # choices ('uniform', 'block') (the flag is generated from TransformerConfig.recompute_method, Optional[Literal[
        # 'uniform', 'block']], by megatron/training/argument_utils.py L151-154; TransformerConfig raises on any other
        # value too, transformer_config.py L1908-1912, at d98e8a64dd): no such job starts
        shown = "no value" if args["--recompute-method"] is None else repr(str(args["--recompute-method"])[:40])
        raise InputError(f"unknown recompute method: {shown}", where="--recompute-method",
                         allowed="block or uniform (Megatron-LM's choices)")
    gran = args.get("--recompute-granularity")
    if "--recompute-granularity" in args:  # given without a value (the next token a flag) was dropped silently
        if gran not in ("full", "selective"):
            shown = "no value" if gran is None else repr(gran[:40])
            raise InputError(f"unknown recompute granularity: {shown}", where="--recompute-granularity",
                             allowed="full or selective")
        if gran == "full" and "--recompute-activations" in args:
            # round 16: priced as full recompute; Megatron-LM's validate_args sets recompute_granularity = 'selective'
            # whenever --recompute-activations is given, after parsing (megatron/training/arguments.py L607-608 at
            # d98e8a64dd; since bbab79f869, 2022-05-16)
            out.unused.append("--recompute-granularity full (with --recompute-activations Megatron-LM sets the "
                              "granularity to selective)")
            gran = "selective"
        partial = [f for f in ("--recompute-method", "--recompute-num-layers") if f in args]
        if gran == "selective" and partial:
            # round 16: dropped without a word; validate_args asserts "recompute method is not yet supported for
            # selective recomputing granularity" (arguments.py L1425-1428 at d98e8a64dd) and Megatron-Core's
            # TransformerConfig raises "When using recompute_granularity: selective recompute_num_layers must be
            # None" (transformer_config.py L1926-1932 at d98e8a64dd, since b8f09a5288)
            _refuse_selective_partial(partial, "--recompute-activations" in args)
        missing = [f for f in ("--recompute-method", "--recompute-num-layers") if f not in args]
        if gran == "full" and missing:
            # Megatron-Core's TransformerConfig raises for full recompute without a method ("recompute_method must
            # be block or uniform") or without a layer count ("recompute_num_layers must be between 1 and
            # num_layers_per_pipeline_rank"): transformer_config.py L1908-1925 at d98e8a64dd. Priced as every
            # layer before, a run Megatron would not start
            raise InputError(f"--recompute-granularity full without {' and '.join(missing)} (Megatron-Core refuses "
                             "full recompute without a method and a layer count)", where="--recompute-granularity",
                             allowed="--recompute-method block|uniform and --recompute-num-layers N beside it "
                                     "(uniform 1 recomputes every layer), or --recompute-granularity selective")
        out.strategy["recompute"] = gran
        out.fields["recompute"] = "--recompute-granularity"
        method = args.get("--recompute-method")
        n_rec = number("--recompute-num-layers") if gran == "full" and method is not None else None
        if method == "uniform" and n_rec == 0:
            # round 17: priced as full recompute of every layer. Megatron-Core's uniform method checkpoints chunks
            # of recompute_num_layers layers and advances by that count (megatron/core/recompute.py L158-166 at
            # d98e8a64dd: layer_idx += recompute_num_layers), so 0 never leaves the first chunk: no step ends
            raise InputError("--recompute-method uniform with --recompute-num-layers 0 (Megatron-Core's uniform "
                             "loop advances by the chunk size: 0 never ends)", where="--recompute-num-layers",
                             allowed="a chunk of 1 layer or more with uniform (1: every layer), or --recompute-method "
                                     "block --recompute-num-layers 0 (no layer recomputed)")
        if method in ("block", "uniform") and n_rec is not None and not (method == "uniform" and n_rec == 1):
            out.strategy["recompute_layers"] = n_rec  # block: first N layers per chunk; uniform: chunks of N
            out.strategy["recompute_method"] = method
            out.fields["recompute_layers"] = "--recompute-num-layers"  # a refusal names the flag written
        elif method == "uniform" and n_rec == 1:
            out.unused.append("--recompute-method uniform --recompute-num-layers 1 (checkpoints every layer: "
                              "full recompute, as modelled)")
        elif gran == "full" and method is not None:
            layers = args.get("--recompute-num-layers")
            out.unused.append(f"--recompute-method {args['--recompute-method']} --recompute-num-layers {layers} "
                              "(partial full recompute is modelled as full recompute of every layer)")
    elif "--recompute-activations" in args and (
            partial := [f for f in ("--recompute-method", "--recompute-num-layers") if f in args]):
        _refuse_selective_partial(partial, True)
    elif given := [f"{f} {args[f]}" for f in ("--recompute-method", "--recompute-num-layers") if f in args]:
        # round 17: dropped without a word. With no granularity Megatron-Core recomputes nothing and reads neither
        # (TransformerConfig checks them under ``recompute_granularity is not None``, transformer_config.py
        # L1901-1932 at d98e8a64dd; recompute.py is reached only with a granularity): priced without recompute
        out.unused.append(f"{' '.join(given)[:80]} (no --recompute-granularity: Megatron-LM recomputes nothing; "
                          "give --recompute-granularity full beside them)")
    _recompute_modules(args, out)
    if "--fp8-recipe" in args and args["--fp8-recipe"] is None:  # argparse: "expected one argument" (fuzz24: the
        # flag without its value was dropped without a word, with or without --fp8-format), as --fp4-recipe below
        raise InputError("unknown fp8 recipe: no value", where="--fp8-recipe",
                         allowed="a recipe name after the flag, e.g. delayed, tensorwise, mxfp8 or blockwise")
    # fuzz25: "--fp8-recipe current" (the spec's alias of tensorwise, not a Megatron word) was priced as delayed
    # scaling with a warning; Megatron-LM's argparse refuses it (choices from TransformerConfig.fp8_recipe)
    _choice(args, "--fp8-recipe", "fp8 recipe", _MEG_FP8_RECIPES)
    if "--fp8-format" in args:
        if args["--fp8-format"] not in ("e4m3", "hybrid"):  # Megatron's argparse choices (arguments.py)
            shown = "no value" if args["--fp8-format"] is None else repr(str(args["--fp8-format"])[:40])
            raise InputError(f"unknown fp8 format: {shown}", where="--fp8-format", allowed="e4m3 or hybrid")
        out.training["precision"] = "fp8"
        # round 21: a refusal named "training.precision" to a launch that wrote --fp8-format / --fp8-recipe
        out.training_fields["precision"] = "--fp8-format"
        recipe = args.get("--fp8-recipe")  # Megatron-Core's default: delayed (TransformerConfig.fp8_recipe)
        if recipe in ("delayed", "tensorwise", "mxfp8", "blockwise"):
            out.training["fp8_recipe"] = recipe
            out.training_fields["fp8_recipe"] = "--fp8-recipe"
        elif recipe is not None:
            out.unused.append(f"--fp8-recipe {str(recipe)[:40]} (FP8 casts priced as delayed scaling: the model "
                              "prices delayed, tensorwise, mxfp8 and blockwise)")
        if "--fp8-dot-product-attention" in args:  # TransformerConfig.fp8_dot_product_attention -> TE fp8_dpa
            out.training["fp8_attention"] = True
    elif args.get("--fp8-recipe") is not None:
        out.unused.append("--fp8-recipe without --fp8-format (Megatron trains without FP8)")
    if "--fp8-dot-product-attention" in args and "--fp8-format" not in args:
        out.unused.append("--fp8-dot-product-attention without --fp8-format (Megatron trains without FP8)")
    if "--fp4-format" in args:  # Megatron-LM arguments.py: --fp4-format choices e2m1, --fp4-recipe nvfp4
        if args["--fp4-format"] != "e2m1":
            shown = "no value" if args["--fp4-format"] is None else repr(str(args["--fp4-format"])[:40])
            raise InputError(f"unknown fp4 format: {shown}", where="--fp4-format", allowed="e2m1")
        if "--fp8-format" in args:  # Megatron-Bridge MixedPrecisionConfig: "fp4 and fp8 cannot be used simultaneously"
            raise InputError("--fp4-format and --fp8-format both given", where="--fp4-format",
                             allowed="one of them")
        out.training["precision"] = "fp4"  # Transformer Engine NVFP4BlockScaling (docs/model.md#nvfp4)
        out.training_fields["precision"] = "--fp4-format"
        if "--fp4-recipe" in args and args["--fp4-recipe"] is None:  # argparse: "expected one argument"
            raise InputError("unknown fp4 recipe: no value", where="--fp4-recipe", allowed="nvfp4")
        if args.get("--fp4-recipe") not in (None, "nvfp4"):
            out.unused.append(f"--fp4-recipe {str(args['--fp4-recipe'])[:40]} (priced as nvfp4, the one FP4 recipe)")
    elif "--fp4-recipe" in args:  # was silently dropped, where --fp8-recipe without --fp8-format is reported
        out.unused.append("--fp4-recipe without --fp4-format (Megatron trains without FP4)")
    if "--first-last-layers-bf16" in args:  # defaults 1 and 1 (Megatron-LM arguments.py)
        start, end = number("--num-layers-at-start-in-bf16"), number("--num-layers-at-end-in-bf16")
        if "--fp8-format" in args or "--fp4-format" in args:
            out.training["bf16_layers"] = (1 if start is None else start) + (1 if end is None else end)
            counts = [n for n in ("--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16") if n in args]
            out.training_fields["bf16_layers"] = " + ".join(counts) or "--first-last-layers-bf16"
        else:
            out.unused.append("--first-last-layers-bf16 without --fp8-format or --fp4-format (every layer is BF16)")
    else:  # Megatron-LM reads the counts only under --first-last-layers-bf16 (arguments.py); they were dropped silently
        counts = [n for n in ("--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16") if n in args]
        if counts:
            out.unused.append(f"{' and '.join(counts)} without --first-last-layers-bf16 (every layer in the run's "
                              "precision)")
    _choice_flags(args)
    _attention_backend(args, out)
    _megatron_ddp(args, number, out)  # after every precision flag: its bucket is in the gradient dtype
    if _moe_fp8_padding(args, "--num-experts" in model_flags):
        out.default("strategy", "moe_fp8_padding", True, _MEG_FP8_PADDING)
    # TE's fused permute kernels only with --moe-permute-fusion (store_true; TransformerConfig.moe_permute_fusion
    # defaults to False: transformer_config.py L941 at d98e8a64dd, arguments.py L3139 at core_v0.15.0): an MoE launch
    # (--num-experts, or any --moe-* flag where the model comes from --model) without it runs the unfused path
    # (strategy moe_permute_fusion, docs/model.md#moe-permute-fusion)
    # review17f: a model --moe-* flag (--moe-router-topk, --moe-ffn-hidden-size: model_flags, not args) or an expert
    # parallel size marks an MoE launch too; "--expert-model-parallel-size 8 --moe-router-topk 2" was priced with the
    # fused kernels (the strategy's default) that Megatron-Core runs only with the switch
    if "--num-experts" in model_flags or any(a.startswith("--moe-") for a in (*args, *model_flags)) or args.get(
            "--expert-model-parallel-size", "1") not in ("1", "+1"):
        if "--moe-permute-fusion" in args:
            out.strategy["moe_permute_fusion"] = True
        else:
            out.default("strategy", "moe_permute_fusion", False, _MEG_PERMUTE_FUSION)
    # the flex dispatcher (DeepEP / HybridEP) moves tokens hierarchically (strategy moe_flex_dispatcher,
    # docs/model.md#ep-hierarchical); --moe-enable-deepep requires it (TransformerConfig.__post_init__ @002255075c).
    # Read whether or not the file has --num-experts: the model comes from --model (a launch without the model flags
    # dropped flex without a word; a dense model's flex is warned as not priced). Megatron's argparse refuses any
    # other value (choices allgather, alltoall, flex; alltoall_seq in releases before core_r0.13)
    if "--moe-token-dispatcher-type" in args:
        kind = args["--moe-token-dispatcher-type"]
        if kind not in _MEG_DISPATCHERS:
            shown = "no value" if kind is None else repr(kind[:40])
            raise InputError(f"unknown token dispatcher: {shown}", where="--moe-token-dispatcher-type",
                             allowed=", ".join(_MEG_DISPATCHERS))
        if kind == "flex":
            out.strategy["moe_flex_dispatcher"] = True
            out.fields["moe_flex_dispatcher"] = "--moe-token-dispatcher-type"
    # the allgather dispatcher (strategy moe_allgather_dispatcher, docs/model.md#ep-allgather): named, or Megatron's
    # default (TransformerConfig.moe_token_dispatcher_type = "allgather", NVIDIA/Megatron-LM@d98e8a64dd
    # megatron/core/transformer/transformer_config.py line 891) where the file builds an MoE model (--num-experts)
    if args.get("--moe-token-dispatcher-type") == "allgather":
        out.strategy["moe_allgather_dispatcher"] = True
        out.fields["moe_allgather_dispatcher"] = "--moe-token-dispatcher-type"
    elif "--moe-token-dispatcher-type" not in args and "--num-experts" in model_flags:
        # not a choice the file wrote: marked (out.default), so that the engine does not warn that it is unpriced
        # where it does nothing (job._warn_unpriced_fields); a refusal names the flag that built the MoE model
        out.default("strategy", "moe_allgather_dispatcher", True, _MEG_DISPATCHER)
        out.fields["moe_allgather_dispatcher"] = "--num-experts"
    if "--moe-router-dtype" in args:  # TransformerConfig.moe_router_dtype Literal fp32, fp64 (d98e8a64dd line 811)
        rd = args["--moe-router-dtype"]
        if rd not in ("fp32", "fp64"):
            shown = "no value" if rd is None else repr(rd[:40])
            raise InputError(f"unknown router dtype: {shown}", where="--moe-router-dtype", allowed="fp32 or fp64")
        out.training["moe_router_dtype"] = rd
        out.training_fields["moe_router_dtype"] = "--moe-router-dtype"
    _shared_expert_overlap_dispatcher(args, "--moe-shared-expert-intermediate-size" in model_flags, out)
    _flex_dispatcher_sms(args, number, out)
    _moe_capacity(args, out)
    _delay_wgrad_compute(args)
    _optimizer_instances(args, number, out)
    _loss_impl(args, out)
    _cp_comm_type(args, out)
    opt = args.get("--optimizer")
    if opt is not None and opt != "adam":
        out.unused.append(f"--optimizer {opt[:40]} (optimizer state is modelled as Adam's 12 bytes per parameter)")
    if "--pipeline-model-parallel-layout" in args:
        _pipeline_layout(args, out, tokens)
    virtual: dict[str, int | None] = {k: number(k) for k in ("--virtual-pipeline-model-parallel-size",
                                                             "--num-virtual-stages-per-pipeline-rank",
                                                             "--num-layers-per-virtual-pipeline-stage") if k in args}
    for name, n in virtual.items():
        # Megatron-LM (megatron/training/arguments.py, validate_args) divides the stage's layers by the layers per
        # virtual stage and reads 1 virtual stage as "not interleaved"; 0 would not start a job: refused, not ignored
        if n == 0:
            what = "layers per virtual stage" if "layers" in name else "virtual stages per rank (1: not interleaved)"
            raise InputError("expected at least 1, got 0", where=name,
                             allowed=f"an integer >= 1 of {what}, or leave the flag out")
    _virtual_stage_flags_agree(virtual, args)
    vpp = next((virtual[k] for k in ("--virtual-pipeline-model-parallel-size", "--num-virtual-stages-per-pipeline-rank")
                if k in virtual), None)
    per_stage = virtual.get("--num-layers-per-virtual-pipeline-stage")
    if per_stage is not None and vpp is None:
        layers_text = _launch_value(tokens, "--num-layers")
        pp = out.strategy.get("pp", 1)
        # ASCII digits: str.isdigit() is true for '²', which int() refuses (a traceback)
        if (layers_text and layers_text.isascii() and layers_text.isdigit() and per_stage > 0
                and int(layers_text) % (pp * per_stage) == 0):
            vpp = int(layers_text) // (pp * per_stage)
        else:
            out.unused.append(f"--num-layers-per-virtual-pipeline-stage {per_stage} (needs --num-layers divisible "
                              "by pp x layers per virtual stage; give --schedule interleaved:V)")
    if vpp is not None and vpp > 1:
        out.strategy["schedule"] = f"interleaved:{vpp}"
        out.fields["schedule"] = next(iter(virtual))
    _overlap_p2p_comm(args, out)


def _overlap_p2p_comm(args: dict[str, str | None], out: StrategyFile) -> None:
    """strategy.overlap_p2p_comm (docs/model.md#pp-comm-overlap) from a launch with an interleaved schedule:
    Megatron-LM's --overlap-p2p-communication came as a store_true switch at f9283c5a8a (2023-05-31) and became the
    default at 4eeff55d1f (2023-10-12, "Make overlap_p2p_comm the default": --no-overlap-p2p-communication,
    store_false, dest overlap_p2p_comm; megatron/training/arguments.py lines 3118-3120 at d98e8a64dd), which
    validate_args sets False without virtual stages (lines 1010-1012). Read as today's Megatron-LM: on with an
    interleaved schedule unless --no-overlap-p2p-communication; without one the switch is noted, not priced."""
    interleaved = str(out.strategy.get("schedule", "1f1b")).startswith("interleaved")
    if "--no-overlap-p2p-communication" in args:
        return
    if interleaved and int(out.strategy.get("pp", 1)) > 1:
        out.strategy["overlap_p2p_comm"] = True
        out.fields["overlap_p2p_comm"] = ("--overlap-p2p-communication" if "--overlap-p2p-communication" in args
                                          else out.fields.get("schedule", "schedule"))
    elif "--overlap-p2p-communication" in args:
        out.unused.append("--overlap-p2p-communication (Megatron-LM sets it False without an interleaved schedule)")


def _launch_value(tokens: list[str], name: str) -> str | None:
    """The value of flag ``name`` as argparse keeps it (the last one given; ``--name V`` or ``--name=V``), for a flag
    the reader does not price (a model flag) but checks a priced one against; None where not given."""
    value = None
    for j, tok in enumerate(tokens):
        flag, eq, inline = tok.partition("=")
        if flag.replace("_", "-") == name:
            value = inline if eq else (tokens[j + 1] if j + 1 < len(tokens) else None)
    return value


def _pipeline_layout(args: dict[str, str | None], out: StrategyFile, tokens: list[str]) -> None:
    """--pipeline-model-parallel-layout as strategy.stage_layers (:func:`megatron_layout_stages`) and, with V >= 2
    virtual stages per rank, schedule interleaved:V (Megatron-LM's validate_args derives the virtual stages from the
    layout, megatron/training/arguments.py lines 941-951 at d98e8a64dd, and asserts no
    --num-layers-per-virtual-pipeline-stage nor --num-virtual-stages-per-pipeline-rank beside it, lines 928-939)."""
    flag = "--pipeline-model-parallel-layout"
    text = args.get(flag)
    if not text:
        raise InputError("no layout given", where=flag, allowed="a layout such as 'Et*3|(tt|)*6,t|tL'")
    others = [f for f in ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
                          "--virtual-pipeline-model-parallel-size", "--decoder-first-pipeline-num-layers",
                          "--decoder-last-pipeline-num-layers") if f in args]
    if others:
        raise InputError(f"{flag} with {others[0]} (the layout places every layer and gives the virtual stages)",
                         where=flag, allowed=f"the layout alone, without {others[0]}")
    if _unexpanded(text):  # as number() says of a count: the reader does not expand a non-flag variable
        out.unused.append(f"{flag} {text[:40]} (not a layout: a shell variable is not expanded; the balanced split "
                          "is priced)")
        return
    pp = int(out.strategy.get("pp", 1))
    counts, v = megatron_layout_stages(text, pp, flag)
    # validate_layer_layout (pipeline_parallel_layer_layout.py lines 106-114 at d98e8a64dd) against the launch's own
    # flags: the t letters are --num-layers, the m letters --mtp-num-layers (none without the flag)
    given = {k: _launch_value(tokens, k) for k in ("--num-layers", "--mtp-num-layers")}
    plain = {k: int(x) for k, x in given.items() if x is not None and re.fullmatch(r"\+?[0-9]{1,9}", x)}
    n_t, n_m = sum(counts), _layout_text(text, flag).count("m")
    if "--num-layers" in plain and plain["--num-layers"] != n_t:
        raise InputError(f"the layout holds {n_t} decoder layers (t) but --num-layers is {plain['--num-layers']} "
                         "(Megatron asserts them equal)", where=flag,
                         allowed=f"a layout of {plain['--num-layers']} t letters, or --num-layers {n_t}")
    mtp_known = "--mtp-num-layers" in plain or given["--mtp-num-layers"] is None  # not a $VARIABLE
    want = plain.get("--mtp-num-layers", 0)
    if mtp_known and n_m != want:
        raise InputError(f"the layout holds {n_m} MTP layers (m) but --mtp-num-layers is "
                         f"{want if '--mtp-num-layers' in plain else 'not given'} (Megatron asserts them equal)",
                         where=flag, allowed=f"a layout of {want} m letters, or --mtp-num-layers {n_m}")
    if len(counts) == 1:
        # one stage (pp 1, no virtual stages): Megatron runs it (validate_args sets no virtual stages); every layer on
        # the one rank is what the model prices without a split, and strategy.stage_layers needs pp >= 2
        return
    if pp <= 1:
        # round 18: a launch without --pipeline-model-parallel-size (Megatron's default 1) was refused as
        # "stage_layers (4 counts) with pp 1", words the launch never wrote
        pp_text = args.get("--pipeline-model-parallel-size")
        why = ("no --pipeline-model-parallel-size: Megatron's default 1" if pp_text is None else
               f"--pipeline-model-parallel-size {pp_text[:40]} not expanded" if _unexpanded(pp_text) else
               f"--pipeline-model-parallel-size {pp_text[:40]}")
        raise InputError(f"{len(counts)} stages for pipeline size 1 ({why}): the layout's stages are the pipeline's "
                         "stages, pp x V of them", where=flag,
                         allowed="--pipeline-model-parallel-size P >= 2 in the launch, the stages a multiple of P "
                                 "(a --pp given on the command line does not re-read the layout)")
    out.strategy["stage_layers"] = counts
    out.fields["stage_layers"] = flag
    if v > 1:
        out.strategy["schedule"] = f"interleaved:{v}"
        out.fields["schedule"] = flag


def _virtual_stage_flags_agree(virtual: Mapping[str, int | None], args: dict[str, str | None]) -> None:
    """Refuse the virtual-stage flags Megatron-LM refuses together (round 16: the reader took one and dropped the
    other without a word). NVIDIA/Megatron-LM megatron/training/arguments.py validate_args at d98e8a64dd (L928-939,
    and since core_r0.12.0 L439-440): "No more than one of the following arguments can be set at the same time:
    --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank" (interleaved:4 was priced for
    ``--num-layers-per-virtual-pipeline-stage 2 --num-virtual-stages-per-pipeline-rank 4`` whatever the layers
    gave); and with --num-layers-per-virtual-pipeline-stage, "please use --num-virtual-stages-per-pipeline-rank to
    specify virtual pipeline parallel degree when enable uneven pipeline parallelism" (L955-956: it asserts
    --decoder-first/last-pipeline-num-layers unset). --virtual-pipeline-model-parallel-size (Megatron-LM's flag
    from dd88906264 to dcef906978, 2020-12 to 2021-02; Megatron-Bridge / NeMo's config field) with
    --num-virtual-stages-per-pipeline-rank, both the virtual stages per rank, must give the same count."""
    per_stage, per_rank = "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"
    if per_stage in virtual and per_rank in virtual:
        raise InputError(f"{per_stage} {virtual[per_stage]} and {per_rank} {virtual[per_rank]} both given (Megatron-LM "
                         "asserts no more than one of them)", where=f"{per_stage}, {per_rank}",
                         allowed="one of them (virtual stages per rank, or layers per virtual stage)")
    old = "--virtual-pipeline-model-parallel-size"
    if old in virtual and per_rank in virtual and virtual[old] != virtual[per_rank]:
        raise InputError(f"{old} {virtual[old]} and {per_rank} {virtual[per_rank]}: two different counts of virtual "
                         "stages per rank", where=f"{old}, {per_rank}", allowed="one of them, or both the same count")
    if per_stage in virtual:
        uneven = [f for f in ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers") if f in args]
        if uneven:
            raise InputError(f"{per_stage} with {' and '.join(uneven)} (Megatron-LM asserts: 'please use {per_rank} to "
                             "specify virtual pipeline parallel degree when enable uneven pipeline parallelism')",
                             where=per_stage, allowed=f"{per_rank} V with uneven first/last stages, or leave the "
                                                      f"{'flag' if len(uneven) == 1 else 'flags'} out")


def _shared_expert_overlap_dispatcher(args: dict[str, str | None], shared: bool, out: StrategyFile) -> None:
    """--moe-shared-expert-overlap runs only beside the alltoall or flex dispatcher: Megatron-Core raises
    "moe_shared_expert_overlap only works with alltoall or flex token dispatcher" for a model with shared experts
    (NVIDIA/Megatron-LM@d98e8a64dd megatron/core/transformer/transformer_config.py lines 1813-1826; alltoall alone at
    core_r0.10.0-core_r0.12.0), and --moe-token-dispatcher-type defaults to allgather (megatron/training/arguments.py
    at core_v0.15.0 0d7e02bd26 line 3133). A launch naming the shared experts' size
    (``shared``: --moe-shared-expert-intermediate-size) there is refused as Megatron refuses it; one without (the
    model from
    --model) prices no overlap, named as not used (Megatron would refuse it for a model with shared experts and
    ignore it for one without)."""
    if not out.strategy.get("moe_shared_expert_overlap"):
        return
    kind = args.get("--moe-token-dispatcher-type") or "allgather"
    if kind in ("alltoall", "flex"):
        return
    shown = f"--moe-token-dispatcher-type {kind}" if "--moe-token-dispatcher-type" in args else \
        "the default dispatcher, allgather"
    if shared:
        raise InputError(f"--moe-shared-expert-overlap with {shown}: Megatron-Core runs the shared experts beside "
                         "the alltoall or flex dispatcher only ('moe_shared_expert_overlap only works with alltoall "
                         "or flex token dispatcher')", where="--moe-shared-expert-overlap",
                         allowed="--moe-token-dispatcher-type alltoall or flex, or leave --moe-shared-expert-overlap "
                                 "out")
    del out.strategy["moe_shared_expert_overlap"]
    out.fields.pop("moe_shared_expert_overlap", None)
    out.unused.append(f"--moe-shared-expert-overlap with {shown} (Megatron-Core runs it beside the alltoall or flex "
                      "dispatcher only, and refuses it for a model with shared experts)")


#: Megatron-Core's flex dispatcher backends (TransformerConfig.moe_flex_dispatcher_backend, Literal['deepep',
#: 'hybridep', 'ncclep'], default deepep: megatron/core/transformer/transformer_config.py L898 @d98e8a64dd) and its
#: SM-count flags there (L964-975): ``moe_flex_dispatcher_num_sms`` "for all backends", and the deprecated
#: per-backend ``moe_deepep_num_sms`` / ``moe_hybridep_num_sms``, both routed to it in __post_init__ (L1792-1811)
_MEG_FLEX_SMS_UNIFIED = "--moe-flex-dispatcher-num-sms"
_MEG_FLEX_SMS_DEPRECATED = ("--moe-deepep-num-sms", "--moe-hybridep-num-sms")


def _flex_dispatcher_sms(args: dict[str, str | None], number: Any, out: StrategyFile) -> None:
    """The SMs the flex dispatcher's own dispatch/combine kernels run on -> strategy.ep_dispatch_sms
    (docs/model.md#contention, "EP dispatch kernels"), as NVIDIA/Megatron-LM d98e8a64dd reads its flags: they are
    generated from TransformerConfig by ArgumentGroupFactory (megatron/training/arguments.py L2373-2374; type int)
    and megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__ (L1792-1811) routes the
    deprecated ``--moe-deepep-num-sms`` and ``--moe-hybridep-num-sms`` to ``moe_flex_dispatcher_num_sms`` whatever
    the backend, an explicit ``--moe-flex-dispatcher-num-sms`` taking precedence (the others are then named as not
    used), and raises ValueError ("Conflicting deprecated SM-count knobs") on the two deprecated ones with different
    counts and no unified flag: refused here at both flags. The one count sizes every backend
    (megatron/core/transformer/moe/token_dispatcher.py L1157-1158 hybridep, L1287-1292 deepep). Older Megatron-Core
    (002255075c) sized each backend by its own flag only; that reading is not kept. Read when the flex dispatcher
    runs (--moe-token-dispatcher-type flex). The backend goes to strategy.moe_flex_backend (deepep, Megatron-Core's
    default, or hybridep: their bytes per token and their own SM counts differ, docs/model.md#ep-hierarchical); the
    ncclep backend (NCCL EP through Transformer Engine, whose kernels this model does not read) is named as not used,
    priced as DeepEP, and its count named as not used. The deprecated --moe-enable-deepep sets deepep, as
    TransformerConfig.__post_init__ does, and is refused where it raises (without flex, with hybridep). The bound by
    the accelerator's SM count is the engine's (job.check_ep_dispatch_sms), named at the flag through out.fields.
    Without a count the engine prices the backend's own default (job.flex_default_sms: DeepEP 20, HybridEP 24 in one
    NVLink domain, 8 across)."""
    given = [f for f in (_MEG_FLEX_SMS_UNIFIED, *_MEG_FLEX_SMS_DEPRECATED) if f in args]
    switch = "--moe-enable-deepep" in args
    if "--moe-flex-dispatcher-backend" not in args and not given and not switch:
        return
    backend = args.get("--moe-flex-dispatcher-backend", "deepep")
    if backend not in ("deepep", "hybridep", "ncclep"):  # argparse choices of the Literal
        shown = "no value" if backend is None else repr(backend[:40])
        raise InputError(f"unknown flex dispatcher backend: {shown}", where="--moe-flex-dispatcher-backend",
                         allowed="deepep, hybridep or ncclep (Megatron-Core moe_flex_dispatcher_backend)")
    flex = out.strategy.get("moe_flex_dispatcher", False)
    if switch:
        # the deprecated switch: TransformerConfig.__post_init__ (d98e8a64dd L1743-1752, 002255075c L1447-1456) raises
        # without the flex dispatcher and with hybridep named, and otherwise sets the backend to deepep (ncclep too)
        if not flex:
            raise InputError("--moe-enable-deepep without --moe-token-dispatcher-type flex (Megatron-Core raises "
                             "'DeepEP backend is only supported with flex token dispatcher')",
                             where="--moe-enable-deepep", allowed="--moe-token-dispatcher-type flex with it, or "
                                                                 "leave it out")
        if backend == "hybridep":
            raise InputError("--moe-enable-deepep with --moe-flex-dispatcher-backend hybridep (Megatron-Core raises "
                             "'Only one backend is supported for flex token dispatcher')", where="--moe-enable-deepep",
                             allowed="one backend: --moe-flex-dispatcher-backend deepep or hybridep "
                                     "(--moe-enable-deepep is the deprecated spelling of deepep)")
        backend = "deepep"
        out.strategy["moe_flex_backend"] = backend
        out.fields["moe_flex_backend"] = "--moe-enable-deepep"
    counts: dict[str, int] = {}
    for flag in given:
        n = number(flag)  # a count (refused otherwise) or None for a $VARIABLE (named as not used)
        if n == 0:
            raise InputError("expected at least 1 SM, got 0", where=flag,
                             allowed="a positive number of SMs, at most the accelerator's, or leave the flag out")
        if n is not None:
            counts[flag] = n
    if not flex:
        if "--moe-flex-dispatcher-backend" in args:
            out.unused.append(f"--moe-flex-dispatcher-backend {backend} (read with --moe-token-dispatcher-type flex)")
        out.unused.extend(f"{f} {counts[f]} (read with --moe-token-dispatcher-type flex)" for f in counts)
        return
    if backend == "ncclep":  # NCCL EP through Transformer Engine: the model prices DeepEP / HybridEP kernels
        out.unused.append("--moe-flex-dispatcher-backend ncclep (priced as the DeepEP dispatcher)")
        out.unused.extend(f"{f} {counts[f]} (the SMs of DeepEP / HybridEP kernels)" for f in counts)
        return
    if "--moe-flex-dispatcher-backend" in args:
        out.strategy["moe_flex_backend"] = backend
        out.fields["moe_flex_backend"] = "--moe-flex-dispatcher-backend"
    deprecated = {f: counts[f] for f in _MEG_FLEX_SMS_DEPRECATED if f in counts}
    if _MEG_FLEX_SMS_UNIFIED in given:  # a $VARIABLE too: Megatron-Core checks the others only when it is None
        chosen: str | None = _MEG_FLEX_SMS_UNIFIED if _MEG_FLEX_SMS_UNIFIED in counts else None
        out.unused.extend(f"{f} {n} ({_MEG_FLEX_SMS_UNIFIED} takes precedence)" for f, n in deprecated.items())
    elif len(set(deprecated.values())) > 1:
        shown = " and ".join(f"{f} {n}" for f, n in deprecated.items())
        raise InputError(f"two different SM counts, {shown}: both flags are deprecated and set the one "
                         f"{_MEG_FLEX_SMS_UNIFIED} of every backend (Megatron-Core TransformerConfig raises "
                         "'Conflicting deprecated SM-count knobs')", where=", ".join(deprecated),
                         allowed=f"one {_MEG_FLEX_SMS_UNIFIED} N, or the same count on both flags")
    else:
        chosen = next(iter(deprecated), None)
    if chosen is not None:
        out.strategy["ep_dispatch_sms"] = counts[chosen]
        out.fields["ep_dispatch_sms"] = chosen


#: Megatron-Core --recompute-modules the activation model prices (strategy.recompute_modules); its others
#: (gdn_norm_out, gdp_in_proj, gdp_qkv, mhc) are named as not used.
_MEG_RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "moe_act", "moe", "layernorm", "mlp", "shared_experts")
#: Every module Megatron-Core's TransformerConfig takes in recompute_modules (allowed_modules, transformer_config.py
#: L1943-1961 at d98e8a64dd); it asserts against any other ("Invalid choices for recompute_modules")
_MEG_RECOMPUTE_MODULES_ALL = (*_MEG_RECOMPUTE_MODULES, "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc")


def _refuse_selective_partial(partial: Sequence[str], activations: bool) -> None:
    """Megatron refuses --recompute-method / --recompute-num-layers with selective recompute (validate_args asserts
    "recompute method is not yet supported for selective recomputing granularity", arguments.py L1425-1428, and
    TransformerConfig raises on recompute_num_layers with selective, transformer_config.py L1926-1932, at
    d98e8a64dd); ``activations``: the granularity is selective because --recompute-activations was given."""
    raise InputError(f"{' and '.join(partial)} with selective recompute" + (
        " (--recompute-activations sets the granularity to selective)" if activations else ""), where=partial[0],
        allowed=f"{' and '.join(partial)} with --recompute-granularity full (without --recompute-activations), or "
                "leave it out")


def _recompute_modules(args: dict[str, str | None], out: StrategyFile) -> None:
    """Megatron-LM's ``--recompute-modules M ...`` (nargs='*', read with --recompute-granularity selective;
    megatron/training/arguments.py) -> strategy.recompute_modules. The flag was listed as not used with its first
    word only: ``--recompute-modules core_attn moe_act`` warned "--recompute-modules core_attn" and moe_act was
    skipped as a positional."""
    if "--recompute-modules" not in args:
        return
    words = str(args["--recompute-modules"] or "").split()
    listed = next((w for w in words if "," in w), None)
    if listed is not None:  # one name to argparse, "Invalid choices for recompute_modules" to Megatron-Core; it was
        # warned as not used with "(the activation memory prices core_attn, ..., moe)", naming the very modules given
        raise InputError(f"{listed[:60]!r} is one module name to Megatron-LM, which refuses it (the modules "
                         "are separate words, not comma-separated)",
                         where="--recompute-modules", allowed="space-separated module names, e.g. --recompute-modules "
                                                              "core_attn moe_act")
    shown = " ".join(words)[:60] or "(no module)"
    if out.strategy.get("recompute") == "selective" and not words:
        # selective with the flag and no word: argparse's nargs='*' gives [] (arguments.py before 639c08ab82,
        # 2026-01-29, e.g. core_r0.15.0), which TransformerConfig.__post_init__ keeps (only None becomes
        # ["core_attn"]) and no layer finds a module in: nothing is recomputed. It was warned "not used" and priced
        # as the default core_attn. (From 639c08ab82 the flag is generated from TransformerConfig with nargs='+', and
        # argparse refuses it without a word: no such job starts.)
        out.strategy["recompute"] = "none"
        out.fields["recompute"] = "--recompute-granularity selective --recompute-modules"
        return
    if out.strategy.get("recompute") != "selective" or not words:
        out.unused.append(f"--recompute-modules {shown} (read with --recompute-granularity selective and at least "
                          "one module)")
        return
    invalid = next((w for w in words if w not in _MEG_RECOMPUTE_MODULES_ALL and "$" not in w and "`" not in w), None)
    if invalid is not None:  # round 17: warned "not used" and priced as the modules given beside it (or core_attn)
        raise InputError(f"unknown module {invalid[:40]!r} (Megatron-Core asserts \"Invalid choices for "
                         "recompute_modules\", transformer_config.py L1943-1961 at d98e8a64dd)",
                         where="--recompute-modules", allowed=", ".join(_MEG_RECOMPUTE_MODULES_ALL))
    priced = [w for w in dict.fromkeys(words) if w in _MEG_RECOMPUTE_MODULES]
    other = [w for w in dict.fromkeys(words) if w not in _MEG_RECOMPUTE_MODULES]
    if priced:
        out.strategy["recompute_modules"] = ",".join(priced)
    if other:
        out.unused.append(f"--recompute-modules {' '.join(other)[:60]} (the activation memory prices "
                          f"{', '.join(_MEG_RECOMPUTE_MODULES)})")


def _megatron_ddp(args: dict[str, str | None], number: Any, out: StrategyFile) -> None:
    """Megatron-LM's own data-parallel wrapper (megatron/training/training.py get_model: Megatron-Core DDP unless
    --use-torch-fsdp2 or --use-megatron-fsdp): ``megatron_ddp``, whose default buckets the engine prices
    (dp_comm.megatron_bucket_elements); --overlap-grad-reduce is off by default there (arguments.py
    ``default=False``), so its absence turns ``overlap`` off; --ddp-bucket-size N elements -> bucket_size N x the
    gradient bytes (the engine divides by them again)."""
    if "--fp8-param-gather" in args and not any(k in args for k in ("--use-distributed-optimizer", *_MEG_FSDP)):
        # fuzz37: refused by the spec's rule at zero 0, "give zero too", though the launch gives its data-parallel
        # wrapper by these flags and Megatron-LM stops it (the file is judged alone where it does not write zero)
        raise InputError("given without --use-distributed-optimizer, --use-torch-fsdp2 or --use-megatron-fsdp: "
                         "Megatron-LM refuses the launch (\"--fp8-param-gather only supported with distributed "
                         "optimizer, torch fsdp2, megatron fsdp, or inference mode\", arguments.py validate_args "
                         "L1095-1097 at d98e8a64dd)",
                         where="--fp8-param-gather",
                         allowed="--fp8-param-gather with --use-distributed-optimizer (zero 1) or --use-torch-fsdp2 "
                                 "(zero fsdp), or leave it out")
    _wgrad_deferral_limit_alone(args, out)
    if "--torch-fsdp2-no-reshard-after-forward" in args and "--use-torch-fsdp2" not in args:
        out.unused.append("--torch-fsdp2-no-reshard-after-forward without --use-torch-fsdp2 (Megatron-LM reads it only "
                          "for torch FSDP2: training.py get_megatron_ddp_config)")
    if "--use-torch-fsdp2" in args:
        _torch_fsdp2(args, out)
        return
    fsdp = [k for k in _MEG_FSDP if k in args]
    if fsdp:  # was dropped without a word: the launch was priced as DDP with replicated parameters
        ignored = [k for k in ("--ddp-bucket-size", "--ddp-num-buckets") if k in args]
        out.unused.append(f"{' '.join(fsdp)} ({ZERO_NOT_READ}: give --zero fsdp, or --zero hsdp with "
                          "strategy.shard_group, to price sharded parameters"
                          + (f"; {', '.join(ignored)} not used with it" if ignored else "") + ")")
        return
    out.default("strategy", "megatron_ddp", True, _MEG_DDP)
    _nan_check(args, out)
    if "--overlap-grad-reduce" not in args:
        out.default("strategy", "overlap", False, _MEG_OVERLAP_GRAD_REDUCE)
    if "--ddp-bucket-size" in args and (n := number("--ddp-bucket-size")) is not None:
        if n == 0:
            raise InputError("expected at least 1, got 0", where="--ddp-bucket-size",
                             allowed="gradient elements per bucket, e.g. 40000000, or leave the flag out")
        out.strategy["bucket_size"] = _bucket_bytes(n, _grad_bytes(out), "--ddp-bucket-size")
    if args.get("--ddp-num-buckets") is not None:
        out.unused.append(f"--ddp-num-buckets {str(args['--ddp-num-buckets'])[:40]} (bucket = parameters / N; give "
                          "--ddp-bucket-size instead)")


_MEG_NAN_CHECK = (f"{_MEG_AT} megatron/training/arguments.py L2872-2874: --no-check-for-nan-in-loss-and-grad "
                  "store_false (default on), training.py L2636: DDP check_for_nan_in_grad = "
                  "args.check_for_nan_in_loss_and_grad (f2e5db402c: arguments.py L1016, training.py L450)")
_MEG_NAN_LOSS = (f"{_MEG_AT} megatron/training/arguments.py L2872-2874: --no-check-for-nan-in-loss-and-grad "
                 "store_false (default on); pretrain_gpt.py L263-277: loss_func validate_result(loss, torch.isnan) and "
                 "(loss, torch.isinf) each micro-batch under args.check_for_nan_in_loss_and_grad (f2e5db402c: "
                 "pretrain_gpt.py L136-142, assert not loss[0].isnan())")


def _nan_check(args: dict[str, str | None], out: StrategyFile) -> None:
    """Megatron-LM's NaN checks (docs/model.md#nan-check): the DDP's per-bucket gradient check (strategy
    ``check_for_nan_in_grad``) and the loss function's per-micro-batch check (strategy ``check_for_nan_in_loss``).
    One argument drives both: ``check_for_nan_in_loss_and_grad`` defaults on (``--no-check-for-nan-in-loss-and-grad``,
    store_false, arguments.py L2872-2874 at d98e8a64dd, L1016 at f2e5db402c); get_model hands it to the DDP config
    (training.py L2636; L450 at f2e5db402c) and pretrain_gpt.py's loss_func tests the loss under it (L263-277; L136-142
    at f2e5db402c). validate_args turns it off under --fp16 without --loss-scale (dynamic loss scaling, whose NaNs are
    the scaler's signal: arguments.py L1196-1203 at d98e8a64dd)."""
    if "--no-check-for-nan-in-loss-and-grad" in args:
        for name in ("check_for_nan_in_grad", "check_for_nan_in_loss"):
            out.strategy[name] = False
            out.fields[name] = "--no-check-for-nan-in-loss-and-grad"
        return
    if "--fp16" in args and "--loss-scale" not in args:
        return
    out.default("strategy", "check_for_nan_in_grad", True, _MEG_NAN_CHECK)
    out.default("strategy", "check_for_nan_in_loss", True, _MEG_NAN_LOSS)


_MEG_TORCH_FSDP2 = (f"{_MEG_AT} megatron/training/training.py get_model L2484-2486 (--use-torch-fsdp2: DP = "
                    "TorchFullyShardedDataParallel) and megatron/core/distributed/torch_fully_sharded_data_parallel.py "
                    "(fully_shard on each TransformerLayer, the embedding and the output layer over the DP x CP group)")
#: Megatron-LM's validate_args asserts on --use-torch-fsdp2 (megatron/training/arguments.py L1031-1047 at d98e8a64dd;
#: --overlap-param-gather at L1024-1027) beside these flags of the same launch: the flag, and what Megatron says
_MEG_TORCH_FSDP2_CONFLICTS = (
    ("--use-distributed-optimizer", "\"--use-torch-fsdp2 is not supported with MCore's distributed optimizer\""),
    ("--use-megatron-fsdp", "\"Cannot be used together with use_torch_fsdp2\" (megatron/training/config/"
                            "common_config.py L93)"),
    ("--fp16", "\"--use-torch-fsdp2 not supported with fp16 yet\""),
    # L1024-1027: "--overlap-param-gather only supported with distributed optimizer, megatron fsdp, or dist_muon"
    ("--overlap-param-gather", "\"--overlap-param-gather only supported with distributed optimizer, megatron fsdp, "
                               "or dist_muon\""),
)


def _torch_fsdp2(args: dict[str, str | None], out: StrategyFile) -> None:
    """Megatron-LM's ``--use-torch-fsdp2`` (store_true, megatron/training/config/common_config.py L95 at d98e8a64dd):
    get_model wraps the model in TorchFullyShardedDataParallel, PyTorch FSDP2's ``fully_shard`` on every
    TransformerLayer, the embedding and the output layer over the data-parallel (x context-parallel) group, full
    sharding: ``zero fsdp`` with ``fsdp_per_param`` (fully_shard is FSDP2's per-parameter sharding, as torchtitan's
    reader sets). ``--torch-fsdp2-no-reshard-after-forward`` (store_false, dest torch_fsdp2_reshard_after_forward,
    arguments.py L3218, "Set to enable FSDP ZeRO-2") -> ``fsdp_reshard_after_forward`` false. Its config
    (TorchFullyShardedDataParallelConfig, training.py get_megatron_ddp_config L2627-2629) holds only
    reshard_after_forward: no fp32 gradient buffer and no mixed-precision policy, so the gradients are reduced in the
    dtype of the parameters (Float16Module's bf16 with --bf16, training.py L2466-2469), not in fp32 as Megatron-Core
    DDP's --bf16 default; the --ddp-* bucket flags are not read by it. The flags Megatron's validate_args refuses
    beside it (_MEG_TORCH_FSDP2_CONFLICTS) are refused here, so a launch Megatron stops is not priced. Before fuzz37
    the flag was named as not used and the launch priced at zero 0 (replicated parameters) unless --zero was given."""
    for flag, said in _MEG_TORCH_FSDP2_CONFLICTS:
        if flag in args and not (flag == "--overlap-param-gather" and args.get("--optimizer") == "dist_muon"):
            raise InputError(f"{flag} with --use-torch-fsdp2: Megatron-LM refuses the launch ({said}, "
                             "arguments.py validate_args at d98e8a64dd)",
                             where="--use-torch-fsdp2", allowed=f"--use-torch-fsdp2 (zero fsdp) without {flag}, or "
                                                                f"{flag} without --use-torch-fsdp2")
    for key, flag, said in (("pp", "--pipeline-model-parallel-size", "pipeline parallelism"),
                            ("ep", "--expert-model-parallel-size", "expert parallelism")):
        if isinstance(out.strategy.get(key), int) and out.strategy[key] > 1 and out.fields.get(key) == flag:
            raise InputError(f"{flag} {out.strategy[key]} with --use-torch-fsdp2: Megatron-LM refuses the launch "
                             f"(\"--use-torch-fsdp2 is not supported with {said}\", arguments.py validate_args "
                             "L1031-1047 at d98e8a64dd)", where="--use-torch-fsdp2",
                             allowed=f"--use-torch-fsdp2 with {flag} 1, or {flag} > 1 without --use-torch-fsdp2")
    out.default("strategy", "zero", "fsdp", _MEG_TORCH_FSDP2)
    out.fields["zero"] = "--use-torch-fsdp2"
    out.default("strategy", "fsdp_per_param", True, _MEG_TORCH_FSDP2)
    if "--torch-fsdp2-no-reshard-after-forward" in args:
        out.strategy["fsdp_reshard_after_forward"] = False
        out.fields["fsdp_reshard_after_forward"] = "--torch-fsdp2-no-reshard-after-forward"
    ignored = [k for k in ("--ddp-bucket-size", "--ddp-num-buckets") if k in args]
    if ignored:
        out.unused.append(f"{', '.join(ignored)} (Megatron-Core DDP's buckets; TorchFullyShardedDataParallel reads "
                          "neither: FSDP2 reduces each unit's gradients after its backward)")


def _wgrad_deferral_limit_alone(args: dict[str, str | None], out: StrategyFile) -> None:
    """--wgrad-deferral-limit without --defer-embedding-wgrad-compute: "invalid" to Megatron-Core (NVIDIA/Megatron-LM@
    d98e8a64dd megatron/core/model_parallel_config.py L415-419) and not used. Where Megatron-Core refuses the flag
    itself (pp 1, --no-gradient-accumulation-fusion: L545-553) is the strategy's check, the flags read into
    strategy defer_embedding_wgrad, pp and grad_accumulation_fusion (engine.job._check_defer_embedding_wgrad, which
    names the flags); ux38: this reader refused them with a second copy of that rule."""
    if "--defer-embedding-wgrad-compute" not in args:
        if "--wgrad-deferral-limit" in args:
            out.strategy.pop("wgrad_deferral_limit", None)
            out.fields.pop("wgrad_deferral_limit", None)
            out.unused.append("--wgrad-deferral-limit without --defer-embedding-wgrad-compute (Megatron-Core reads it "
                              "only with that flag: model_parallel_config.py L415-419)")
        return


def _moe_capacity(args: dict[str, str | None], out: StrategyFile) -> None:
    """--moe-expert-capacity-factor C with --moe-pad-expert-input-to-capacity -> training.moe_pad_to_capacity with
    training.moe_rank_imbalance C, Megatron-Core's drop-and-pad dispatch as the model prices it
    (docs/model.md#moe-rank-imbalance, "Drop-and-pad"): TransformerConfig.moe_expert_capacity_factor (Optional[float]:
    argparse type=float, arguments.py L3142 at core_v0.15.0, generated at NVIDIA/Megatron-LM@d98e8a64dd) and
    moe_pad_expert_input_to_capacity ("effective only after the moe_expert_capacity_factor is set",
    transformer_config.py L917-924); the router drops and pads to the capacity (router.py L793-801,
    apply_router_token_dropping). fuzz41: both were warned as not used and the run priced dropless.

    Not priced, said: a factor without the padding (tokens past C x an expert's mean are dropped, the rest run
    dropless: the model prices the dropless router's load, not one capped at C), one below 1 (a capacity under the
    mean: moe_rank_imbalance takes >= 1), a negative one (TransformerConfig.__post_init__ L1836-1838 sets it None:
    dropless, as priced), the padding without a factor under the allgather dispatcher (the router pads only with a
    factor). Refused where Megatron-Core refuses: the padding without a factor under the alltoall or flex dispatcher
    (token_dispatcher.py L446-449, L1040-1042: assert capacity_factor is not None), the padding with the flex
    dispatcher's deepep backend (transformer_config.py L1754-1761), a factor or the padding with ncclep
    (token_dispatcher.py L1555-1556); a factor argparse's float() would not read, or NaN / inf (no capacity)."""
    flag, pad_flag = "--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity"
    pad = pad_flag in args
    if flag not in args and not pad:
        return
    kind = args.get("--moe-token-dispatcher-type") or "allgather"
    backend = "deepep" if "--moe-enable-deepep" in args else args.get("--moe-flex-dispatcher-backend") or "deepep"
    text = args.get(flag)
    factor: float | None = None
    if flag in args:
        if text is None:
            raise InputError("expected a capacity factor, got no value", where=flag,
                             allowed="a number (the capacity factor, e.g. 1.0), or leave the flag out (dropless)")
        if _unexpanded(text):
            out.unused.append(f"{flag} {text[:40]} (not a number: a shell variable is not expanded)")
            return
        try:
            factor = float(text) if text.isascii() else math.nan
        except ValueError:
            factor = math.nan
        if not math.isfinite(factor):
            raise InputError(f"expected a finite capacity factor, got {text[:40]!r}", where=flag,
                             allowed="a number, e.g. 1.0 (each expert takes C x its mean routed tokens), or leave "
                                     "the flag out (dropless)")
        if factor < 0:
            factor = None  # Megatron-Core: no capacity (dropless)
            out.unused.append(f"{flag} {text[:40]} (negative: Megatron-Core reads it as no capacity factor, "
                              "dropless, as priced)")
    if kind == "flex" and backend == "ncclep" and (pad or factor is not None):
        raise InputError("drop and pad with the flex dispatcher's ncclep backend (Megatron-Core raises 'drop and pad "
                         "is not supported yet with the ncclep backend')",
                         where=flag if factor is not None else pad_flag,
                         allowed="another backend (--moe-flex-dispatcher-backend hybridep), or leave out the "
                                 "capacity flags (dropless)")
    if pad and kind == "flex" and backend == "deepep":
        raise InputError("--moe-pad-expert-input-to-capacity with the flex dispatcher's deepep backend (Megatron-Core "
                         "raises 'Flex token dispatcher with deepep backend does not support "
                         "moe_pad_expert_input_to_capacity')", where=pad_flag,
                         allowed="--moe-flex-dispatcher-backend hybridep, the alltoall dispatcher, or leave the "
                                 "padding out")
    if pad and factor is None:
        if kind in ("alltoall", "flex"):
            raise InputError(f"{pad_flag} without a capacity factor (Megatron-Core's {kind} dispatcher asserts one)",
                             where=pad_flag, allowed=f"{flag} C beside it (drop-and-pad at capacity C), or leave "
                                                     "the padding out (dropless)")
        out.unused.append(f"{pad_flag} without {flag} (Megatron-Core pads only to a capacity: dropless, as priced)")
        return
    if factor is None:
        return
    if factor < 1:
        out.unused.append(f"{flag} {factor:g} (a capacity under each expert's mean routed tokens drops the rest: not "
                          "priced, the dropless load is)")
    elif not pad:
        out.unused.append(f"{flag} {factor:g} without {pad_flag} (tokens past the capacity are dropped, the rest run "
                          "dropless: not priced, the dropless router's load is; with the padding it is "
                          "training.moe_pad_to_capacity at moe_rank_imbalance C)")
    else:
        out.training["moe_pad_to_capacity"] = True
        out.training_fields["moe_pad_to_capacity"] = pad_flag
        out.training["moe_rank_imbalance"] = factor
        out.training_fields["moe_rank_imbalance"] = flag


def _delay_wgrad_compute(args: dict[str, str | None]) -> None:
    """--delay-wgrad-compute (store_true, arguments.py L3153 at core_v0.15.0; ModelParallelConfig.delay_wgrad_compute,
    model_parallel_config.py L348 at NVIDIA/Megatron-LM@d98e8a64dd, "Delay the weight gradient computation to improve
    batch-level communication overlapping") is read with --overlap-moe-expert-parallel-comm as strategy
    moe_a2a_overlap, which prices the pair as Megatron-Bridge's moe_a2a_overlap sets them
    (model_parallel_comm._with_moe_a2a_overlap); alone it is refused as TransformerConfig.__post_init__ refuses it
    ("overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute", transformer_config.py
    L3073-3077 at d98e8a64dd, since core_v0.14.0). fuzz41: it was warned as not used beside the overlap it belongs
    to."""
    if "--delay-wgrad-compute" in args and "--overlap-moe-expert-parallel-comm" not in args:
        raise InputError("--delay-wgrad-compute without --overlap-moe-expert-parallel-comm (Megatron-Core asserts "
                         "'overlap_moe_expert_parallel_comm must be enabled when enabling delay_wgrad_compute')",
                         where="--delay-wgrad-compute",
                         allowed="--overlap-moe-expert-parallel-comm beside it (strategy moe_a2a_overlap prices the "
                                 "pair), or leave it out")


def _optimizer_instances(args: dict[str, str | None], number: Any, out: StrategyFile) -> None:
    """--num-distributed-optimizer-instances N (type=int, default 1: arguments.py L3216 at NVIDIA/Megatron-LM@
    d98e8a64dd; DistributedDataParallelConfig.num_distributed_optimizer_instances): Megatron-Core's partial
    distributed optimizer, N instances of dp x cp / N ranks (parallel_state.py L920-929), the gradients
    reduce-scattered inside each and the shard all-reduced across them (param_and_grad_buffer.py start_grad_sync).
    The model prices it as sync hier:G:1 at zero 1 with G = dp / N replicas (specs.training.trainer_sync_refusal,
    docs/model.md), but G needs dp, which the launch does not give (the GPU count is the command's): N > 1 is said
    with the sync to give, not guessed. 1 is the default (one instance over the whole DP domain: nothing to say);
    0 is refused (parallel_state divides by it). fuzz41: any value was warned as not used without why."""
    flag = "--num-distributed-optimizer-instances"
    if flag not in args:
        return
    n = number(flag)  # a count (refused otherwise) or None for a $VARIABLE (named as not used)
    if n == 0:
        raise InputError("expected at least 1 instance, got 0 (Megatron-Core divides the data-parallel ranks by it)",
                         where=flag, allowed="1 (the default: one distributed optimizer over every data-parallel "
                                             "rank) or more, dividing dp x cp")
    if n is None or n == 1:
        return
    out.unused.append(f"{flag} {n} (the partial distributed optimizer, priced as sync hier:G:1 at zero 1 with G = dp "
                      f"/ {n} replicas an instance; the launch does not give dp: give --sync hier:G:1 or --set "
                      "strategy.sync=hier:G:1 beside it)")
