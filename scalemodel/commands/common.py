"""Options and helpers shared by the commands (argument parsing and spec resolution; no engine imports)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from scalemodel.choices import SYNC_ALLOWED, Algorithm, Recompute, Zero, zero_label
from scalemodel.commands.args import integer, number, opt, pair, switch
from scalemodel.commands.options import CLUSTER as CLUSTER  # re-exported: commands use them as common.X
from scalemodel.commands.options import JSON as JSON
from scalemodel.commands.options import MAX_BATCH as MAX_BATCH
from scalemodel.commands.options import MAX_COUNT as MAX_COUNT
from scalemodel.commands.options import SET as SET
from scalemodel.commands.options import batch_counts as batch_counts
from scalemodel.commands.options import check_kappa as check_kappa
from scalemodel.commands.options import load_cluster_with as load_cluster_with
from scalemodel.commands.options import positive_int as positive_int
from scalemodel.commands.options import quantity as quantity
from scalemodel.engine.job import (
    check_moe_rank_imbalance,
    run_training_checks,
    transformer_shape,
    warn_published_params,
)
from scalemodel.errors import InputError, Origin, sub_path
from scalemodel.specs import (
    StrategySpec,
    TrainingSpec,
    load_cluster,
    load_workload,
    note_tier_bandwidth,
    notices,
    split_overrides,
)
from scalemodel.specs.base import MAX_SPEC_INT
from scalemodel.specs.constraints import named_key
from scalemodel.specs.hf import seq_len_note
from scalemodel.specs.loader import apply_overrides, validate
from scalemodel.specs.training import ZERO_NOT_READ, check_derived_batch

if TYPE_CHECKING:
    from scalemodel.specs.strategy_file import StrategyFile

MODEL = opt("--model", "-m", complete="workload",
            help="Built-in workload, a YAML file, a HuggingFace config.json or a model folder holding one.")


# --- strategy / training options shared by predict, scale and memory ---------------------------

STRATEGY_FILE = opt(
    "--strategy", dest="strategy_file", metavar="FILE",
    help="Strategy and training settings from a file: a scalemodel strategy YAML, a DeepSpeed config JSON, "
         "Megatron-LM flags (a launch script) or a torchtitan TOML; explicit flags override it.")
TP = opt("--tp", type=integer, help="Tensor-parallel degree (default: 1).")
PP = opt("--pp", type=integer, help="Pipeline-parallel degree (default: 1).")
CP = opt("--cp", type=integer, help="Context-parallel degree (default: 1).")
EP = opt("--ep", type=integer, help="Expert-parallel degree, carved out of DP (default: 1).")
DP = opt("--dp", type=integer, help="Data-parallel degree (default: gpus / (tp pp cp)).")
MICRO_BATCH = opt("--micro-batch", type=integer, help="Sequences per micro-batch (default: 1).")
GLOBAL_BATCH = opt("--global-batch", type=integer, help="Sequences (samples) per step (default: the --strategy "
                   "file's, else dp x micro-batch, one micro-batch per step).")
SEQ_LEN = opt("--seq-len", type=integer, help="Sequence length (default: the model's).")
ZERO = opt("--zero", help="ZeRO stage 0|1|2|3, fsdp, or hsdp (FSDP sharded within a node, replicated across; "
                                 "--set strategy.shard_group=S shards over S replicas); default: 0.")
RECOMPUTE = opt("--recompute", help=f"Activation recomputation: {' | '.join(Recompute.labels())} (default: none).")
SEQ_PAR = switch("--sequence-parallel", help="Megatron sequence parallelism (default: off, except an MoE model at "
                                              "tp > 1 under layer_impl megatron_te, which Megatron-Core trains only "
                                              "with it).")
SCHEDULE = opt("--schedule", help="Pipeline schedule: 1f1b | interleaved:V (V virtual stages, >= 2) | gpipe | zb "
                                  "(default: 1f1b).")
PRECISION = opt("--precision", help="fp32 | tf32 | bf16 | fp16 | fp8 | fp4 (NVFP4, Blackwell); default: bf16.")
OVERLAP = pair("--overlap", help="Overlap DP communication with the backward pass (default: on).")
COMPRESSION = opt("--compression", help="Gradient compression: none | fp16 | int8 | topk:F (F: the fraction of "
                                        "entries sent, 0 < F <= 1, e.g. topk:0.01); default: none.")
DP_COMM = opt("--dp-comm", help=(
    "allreduce | ps:K[:dedicated|:colocated]: K parameter servers, dedicated machines (default) or on the GPU "
    "machines; default: allreduce."))
SYNC = opt("--sync", help=f"Synchronisation: {SYNC_ALLOWED}. B backup workers, S the staleness bound in steps, H "
                          "the averaging period in steps, G the workers of a synchronous group (asynchronous across "
                          "groups); default: bsp.")
ALGO = opt("--algo", help=f"DP collective's algorithm: {'|'.join(Algorithm.labels())} (default: auto, NCCL's "
                           "choice).")
STRAGGLER_CV = opt("--straggler-cv", type=number,
                   help="Per-worker step-time coefficient of variation, a fraction (0.05 = 5%; default: the "
                        "cluster's).")
ASSIGNMENT = opt("--assignment", help="static (equal shares) | dynamic (work queue) assignment of micro-batches "
                                      "(default: static).")
DISPATCH_OVERHEAD = opt(
    "--dispatch-overhead", help="Cost per dynamically assigned micro-batch, a time (1ms; a bare number is seconds); "
                                "default 1.02ms, one Ray task round trip.")
WORK_CV = opt("--work-cv", type=number,
              help="CV of one micro-batch's compute time (variable lengths), a fraction; drives load imbalance "
                   "(default: 0).")
FLASH = pair("--flash-attention", help="Fused attention (default on): no s x s scores in memory.")
LAYOUT = opt("--layout",
             help="Rank order, innermost first: tp-cp-dp-pp (default, PP outermost) | tp-cp-pp-dp (PP inside DP).")
KAPPA = opt(  # its range is check_kappa's, as stragglers' (argparse said "-1 is not >= 0; see --help", fuzz24)
    "--staleness-kappa", type=number,
    help="Convergence sensitivity to staleness: efficiency = 1/(1 + kappa x staleness); default: fitted for "
    "training.optimizer and the model family (scalemodel/data/staleness_kappa.json), else a documented fallback.")
TRAIN_TOKENS = opt("--train-tokens", help="Tokens to train, a count (300B = 3e11; default: none, no time to train).")

#: The strategy and training options of predict and sensitivity, in their --help order.
STEP_OPTIONS = (TP, PP, CP, EP, DP, STRATEGY_FILE, MICRO_BATCH, GLOBAL_BATCH, SEQ_LEN, ZERO, RECOMPUTE, SEQ_PAR,
                SCHEDULE, PRECISION, OVERLAP, COMPRESSION, DP_COMM, SYNC, ALGO, STRAGGLER_CV, ASSIGNMENT,
                DISPATCH_OVERHEAD, FLASH, LAYOUT)


TRAINING_FLAGS = ("micro_batch", "global_batch", "seq_len", "precision", "train_tokens", "critical_batch", "work_cv")
STRATEGY_FLAGS = {"dp": "dp", "tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "zero": "zero", "recompute": "recompute",
                  "sequence_parallel": "sequence_parallel", "schedule": "schedule", "overlap": "overlap",
                  "compression": "compression", "dp_comm": "dp_comm", "sync": "sync", "algo": "algorithm",
                  "assignment": "assignment", "dispatch_overhead": "dispatch_overhead",
                  "flash_attention": "flash_attention", "layout": "layout"}


def split_flags(**flags: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Route command-line values to the training and strategy specs (None = not given).

    A plain ``--sequence-parallel`` switch that is off means "not given", so a scenario's or
    ``--set``'s value stands.
    """
    unknown = set(flags) - set(TRAINING_FLAGS) - set(STRATEGY_FLAGS)
    if unknown:
        raise TypeError(f"not a training or strategy flag: {sorted(unknown)}")
    training = {k: flags[k] for k in TRAINING_FLAGS if k in flags}
    strategy = {STRATEGY_FLAGS[k]: v for k, v in flags.items() if k in STRATEGY_FLAGS}
    if strategy.get("sequence_parallel") is False:
        strategy["sequence_parallel"] = None
    return training, strategy


def spec_inputs(cluster: Any, workload: Any, training: Any, strategy: Any, sets: list[str] | None,
                **extra: Any) -> dict[str, Any]:
    """The ``inputs`` echo of a JSON result: resolved names, the specs as used, and the overrides."""
    return {"cluster": cluster.name, "model": workload.name, "model_kind": workload.kind,
            "seq_len": training.seq_len or getattr(workload, "seq_len", None), **extra,
            "training": training.model_dump(mode="json"),
            "strategy": strategy.model_dump(mode="json"), "set": list(sets or [])}


def read_strategy(ref: str | None) -> StrategyFile | None:
    """The ``--strategy FILE`` of a command, or None."""
    if ref is None:
        return None
    try:
        from scalemodel.specs.frameworks import read_strategy_file  # --strategy only (its formats' parsers, ~2 ms)
        return read_strategy_file(ref)
    except InputError as exc:
        raise exc.at("--strategy") from None


def with_strategy_file(sf: StrategyFile | None, training: dict[str, Any], strategy: dict[str, Any],
                       gpus: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's settings with the given flags (not None) on top; DeepSpeed's gradient accumulation
    turned into a global batch micro x steps x dp at ``gpus`` GPUs."""
    tr = {k: v for k, v in training.items() if v is not None}
    st = {k: v for k, v in strategy.items() if v is not None}
    if sf is None:
        return tr, st
    tr, st = {**sf.training, **tr}, {**sf.strategy, **st}
    if gpus and "global_batch" not in tr and sf.gradient_accumulation:
        model_parallel = int(st.get("tp", 1)) * int(st.get("pp", 1)) * int(st.get("cp", 1))
        dp = int(st.get("dp") or max(gpus // max(model_parallel, 1), 1))
        micro = int(tr.get("micro_batch", 1))
        tr["global_batch"] = micro * sf.gradient_accumulation * dp
        if tr["global_batch"] > MAX_SPEC_INT:  # was refused as "training.global_batch", a field no file or option set
            raise InputError(f"{micro} x {sf.gradient_accumulation} x dp {dp} = {tr['global_batch']} sequences per "
                             f"step is beyond the largest global batch ({MAX_SPEC_INT:.0e})",
                             where=f"--strategy: {sf.path}: gradient_accumulation_steps",
                             allowed="train_micro_batch_size_per_gpu x gradient_accumulation_steps x dp of at most "
                                     f"{MAX_SPEC_INT:.0e}, or train_batch_size")
    return tr, st


#: StrategySpec/TrainingSpec fields a planner constraint can pin, and the constraint key for each.
PINNABLE = {"dp": "dp", "tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "zero": "zero", "recompute": "recompute",
             "sequence_parallel": "sequence_parallel", "algorithm": "algorithm", "micro_batch": "micro_batch",
             "sync": "sync", "layout": "layout", "cp_comm_type": "cp_comm_type", "cp_a2a_size": "cp_a2a_size",
             "moe_flex_dispatcher": "moe_flex_dispatcher", "moe_a2a_overlap": "moe_a2a_overlap",
             "moe_flex_backend": "moe_flex_backend"}


def set_keys(sets: list[str] | None, section: str) -> list[str]:
    """The top-level keys that ``--set section.KEY[.sub]=value`` items name (``tp`` of ``strategy.tp=8``)."""
    return [item.split("=", 1)[0].split(".", 1)[0].strip() for item in split_overrides(sets or [])[section]]


def check_flags_against_sets(training: dict[str, Any], strategy: dict[str, Any], sets: list[str] | None) -> None:
    """Refuse a field written both by its option and by ``--set`` (``--tp 4 --set strategy.tp=8``): neither is
    documented to win, and the ``--set`` one was taken without a word. ``training`` / ``strategy``: the options' own
    values (None: not given)."""
    for section, given in (("training", training), ("strategy", strategy)):
        for item in split_overrides(sets or [])[section]:
            key = item.split("=", 1)[0].split(".", 1)[0].strip()
            if given.get(key) is None:
                continue
            flag = written_at(section, key, given, None, None)
            value = str(item).split("=", 1)[1].strip() if "=" in item else ""
            if given[key] is False and flag:  # scale's --no-sequence-parallel (its --/--no- pair)
                flag = "--no-" + flag.removeprefix("--")
            shown = flag if isinstance(given[key], bool) else f"{flag} {given[key]}"  # a switch: no value
            raise InputError(f"{shown} and --set {getattr(item, 'shown', item)}={value} both set "
                             f"{section}.{key}", where=f"--set {section}.{key}",
                             allowed=f"one of them ({flag} or --set {section}.{key})")


def check_straggler_cv_against_sets(straggler_cv: float | None, sets: list[str] | None) -> None:
    """Refuse ``--straggler-cv`` beside ``--set cluster.variability.cv`` (or the whole ``variability``): the option
    is that field ("default: the cluster's"), and it was taken over the ``--set`` without a word
    (:func:`check_flags_against_sets` for the training and strategy options)."""
    if straggler_cv is None:
        return
    for item in sets or []:  # check's --set also takes assertions.X, which split_overrides refuses: read the path
        path, _, value = str(item).partition("=")
        if path.strip() in ("cluster.variability", "cluster.variability.cv"):
            raise InputError(f"--straggler-cv {straggler_cv:g} and --set {path.strip()}={value.strip()} both set the "
                             "cluster's variability.cv", where=f"--set {path.strip()}",
                             allowed=f"one of them (--straggler-cv or --set {path.strip()})")


def strategy_constraints(sf: StrategyFile | None, given: list[str] | None, reported: Collection[str] = ()) -> list[str]:
    """The ``--strategy`` file's axes as planner constraints (``tp=8``), except the keys that a
    ``--constraint`` already restricts; what the planner cannot pin is warned about, except the fields in
    ``reported`` (plan and scale --best pin or report them themselves: commands.plan.pin_file_settings)."""
    if sf is None:
        return []
    # each key as parse_constraints reads it: an alias (--constraint flex_backend=deepep, mb=2) kept the file's pin
    # beside it, refused as "no moe_flex_backend meets moe_flex_backend=deepep, moe_flex_backend=hybridep together"
    constrained = {named_key(c) for text in (given or []) for c in text.split(",")}
    out, unpinned = [], []
    for key, value in {**sf.strategy, **sf.training}.items():
        if key == "schedule":
            kind, _, v = str(value).partition(":")
            if "schedule" not in constrained:
                out.append(f"schedule={kind}")
            if v and "virtual_stages" not in constrained:
                out.append(f"virtual_stages={v}")
        elif key in PINNABLE:
            if value is None:  # unset (sequence_parallel: null, dp: null): not pinned, the planner searches it, as
                continue  # engine.planner.pins does for --set (was refused: "bad value")
            if key == "zero":  # constraints compare ZeRO codes; the planner searches 0-3, fsdp and hsdp (ux37: fsdp
                # was pinned as ZeRO-3, so a torchtitan file's FSDP2 switches, fsdp_per_param, were ranked at zero 3,
                # where predict refuses them; with planner.pins' ZERO_SWITCHES no plan was left)
                value = Zero.parse(value, "--strategy").label
            if isinstance(value, float) and value.is_integer():  # YAML's 2.0 (or 2e0), read by the spec as 2: was
                value = int(value)  # refused by plan alone as "constraint 'tp=2.0' needs an integer" (fuzz28)
            if PINNABLE[key] not in constrained:
                out.append(f"{PINNABLE[key]}={str(value).lower() if isinstance(value, bool) else value}")
        elif key not in TRAINING_FLAGS and key not in reported:
            unpinned.append(key)
    if sf.gradient_accumulation is not None:
        unpinned.append(f"gradient_accumulation_steps {sf.gradient_accumulation} (the global batch depends on the "
                        "dp the planner picks; give --global-batch)")
    if unpinned:
        notices.warn(f"{sf.path}: plan pins the axes it searches; not pinned as given: {', '.join(unpinned)}")
    return out


def build_specs(*, cluster: str, model: str, sets: list[str] | None, training: dict[str, Any],
                strategy: dict[str, Any], strategy_file: StrategyFile | None = None,
                gpus: int | None = None, training_from: tuple[dict[str, Any], StrategyFile] | None = None,
                ) -> tuple[Any, Any, Any, Any]:
    """Cluster, workload, TrainingSpec and StrategySpec from CLI values plus --set overrides.

    Values left as None keep the ``--strategy`` file's values, then the spec defaults;
    ``--set training.x=...`` and ``--set strategy.x=...`` apply on top of the flags, a field written by both refused
    (:func:`check_flags_against_sets`). ``training_from``: (the
    options' own training values, the file) when ``training`` already holds a --strategy file's training values
    (plan merges them itself), so that a refusal names the file's field, not an option never given.
    """
    routed = split_overrides(sets or [])
    tr_opts, tr_file = training_from if training_from is not None else (training, strategy_file)
    check_flags_against_sets(tr_opts, strategy, sets)
    batch_counts(tr_opts)
    cl = load_cluster(cluster, routed["cluster"])
    note_tier_bandwidth(cl, routed["cluster"])
    wl = load_workload(model, routed["model"])
    if not routed["model"]:
        warn_published_params(wl)
    tr_given, st_given = with_strategy_file(strategy_file, training, strategy, gpus)
    tr_raw = apply_overrides(tr_given, routed["training"], model=TrainingSpec)
    st_raw = apply_overrides(st_given, routed["strategy"], model=StrategySpec)
    tr = validate_written(TrainingSpec, "training", tr_raw, tr_opts, tr_file, sets)
    check_launch_zero(strategy_file, st_raw, strategy, sets)
    st = validate_written(StrategySpec, "strategy", st_raw, strategy, strategy_file, sets)
    check_file_trainer(strategy_file, st, strategy, sets)
    check_seq_len(wl, tr)
    check_training_fits(cl, wl, tr, tr_opts, tr_file, sets)
    if gpus and tr.moe_rank_imbalance is not None and getattr(wl, "kind", "") == "transformer":
        _check_rank_imbalance_at_ep(wl, tr, st, tr_opts, tr_file, sets)
    if gpus:
        check_derived_batch(tr, st, gpus, written_at("training", "micro_batch", tr_opts, tr_file, sets))
    if strategy_file is not None and gpus and strategy.get("dp") is None and "dp" not in set_keys(sets, "strategy"):
        check_file_dp(strategy_file, st, gpus)
    return cl, wl, tr, st


def written_at(section: str, key: str, given: dict[str, Any], sf: StrategyFile | None, sets: list[str] | None,
               scenario: tuple[str, Any] | None = None) -> str | None:
    """Where the command line wrote field ``key`` of ``section`` (strategy or training), or None for a default.

    The precedence is build_specs' and scale's: ``--set section.K`` (refused beside the option ``--K``:
    :func:`check_flags_against_sets`), the option ``--K``, the ``--strategy`` file, a scenario's section.
    ``given``: the options' values (None: not given); ``scenario``: (its name as given, its section's keys)."""
    if key in set_keys(sets, section):
        return f"--set {section}.{key}"
    if given.get(key) is not None:
        flags = STRATEGY_FLAGS if section == "strategy" else {k: k for k in TRAINING_FLAGS}
        return next((f"--{k.replace('_', '-')}" for k, v in flags.items() if v == key), f"{section}.{key}")
    from_file = (sf.strategy if section == "strategy" else sf.training) if sf is not None else {}
    if sf is not None and key in from_file:
        name = sf.field_name(key) if section == "strategy" else sf.training_fields.get(key, f"training.{key}")
        return f"--strategy: {sf.path}: {name}"
    if scenario is not None and key in scenario[1]:
        return f"--scenario: {scenario[0]}: {section}.{key}"
    return None


def strategy_origin(sf: StrategyFile | None, strategy: dict[str, Any], sets: list[str] | None, *,
                    gpus: str = "--gpus", scenario: tuple[str, Any] | None = None) -> Origin | None:
    """Where each strategy field of a command line was written (:func:`written_at`), for the engine's errors
    (errors.Origin), or None when every value is an option's or a default (the engine then names the options, --tp,
    --ep, ...). An ``ep`` that a --strategy file set was refused as ``--ep: --ep 4 x etp 1 ...``, naming an option
    the user never gave."""
    keys = set(set_keys(sets, "strategy")) | (set(sf.strategy) if sf is not None else set()) | (
        set(scenario[1]) if scenario is not None else set())
    if not keys:
        return None
    named = {k: w for k in sorted(keys | {k for k, v in strategy.items() if v is not None})
             if (w := written_at("strategy", k, strategy, sf, sets, scenario)) is not None}
    # a framework default the file's reader filled (StrategyFile.default), where the file's value is the one taken
    # (written_at's precedence: no --set, no option over it)
    defaults = frozenset(k for k in named if sf is not None and sf.is_default("strategy", k) and k in sf.strategy
                         and k not in set_keys(sets, "strategy") and strategy.get(k) is None)
    return Origin("strategy.", gpus, tuple(named.items()), defaults)


def validate_written(model: Any, section: str, raw: dict[str, Any], given: dict[str, Any], sf: StrategyFile | None,
                     sets: list[str] | None, scenario: tuple[str, Any] | None = None) -> Any:
    """``validate(model, raw, prefix=[section])`` whose refusal of a field names where it was written
    (:func:`written_at`): ``--zero bogus`` was refused as "strategy.zero: ...", and ``--set strategy.tp=0`` as
    "strategy.tp: ..." where a --set cluster item is named "--set cluster....". A rule across two fields (the error's
    ``also``: specs.base field_error's) written in two places names both (:func:`_across`)."""
    try:
        return validate(model, raw, prefix=[section])
    except InputError as err:
        exc, also = _zero_not_read(_zero_options_named(err, given), sf), err.also[:1]
    key = exc.where[len(section) + 1:].split(".")[0].split("[")[0] if exc.where.startswith(f"{section}.") else ""
    where = written_at(section, key, given, sf, sets, scenario) if key else None
    other = written_at(section, str(also[0]), given, sf, sets, scenario) if also and also[0] != key else None
    if (where is None or where == exc.where) and other is None:
        raise exc
    # a framework default the file's reader filled (torchtitan's FSDP2 fsdp_per_param) refused for a value given
    # beside the file (--zero 3) was named as if the file wrote it (fuzz24): say it is the framework's default
    what = exc.what
    if sf is not None and sf.is_default(section, key) and (where or "").startswith("--strategy: "):
        what = f"{what}, where {key} is {sf.format}'s own default (the file does not write it)"
    # the field's sub-path too: --set training.module_precision.attention_proj=BF16 was refused as
    # "--set training.module_precision: ..." without the module it named
    here = (where or exc.where) + sub_path(exc.where, f"{section}.{key}")
    if other is not None and other != where:
        here, what = _across(here, what, other, f"{section}.{also[0]}")
    raise InputError(what, where=here, allowed=exc.allowed, needs_zero=exc.needs_zero,
                     needs_recompute=exc.needs_recompute) from None


def _zero_options_named(err: InputError, given: dict[str, Any]) -> InputError:
    """``err``, a refusal at zero 0 (InputError.needs_zero: its allowed text ends with the spec's "give zero too",
    specs.training.ZERO_UNSET_HINT), naming how this command line gives it: ``--zero`` where the command has that
    option (``given`` holds its key: predict, memory, scale), and ``--set strategy.zero`` (every one; plan has no
    --zero). A file's own refusal (a scenario, a runs file) names the field alone, as the file writes it."""
    if not err.needs_zero:
        return err
    ways = ("--zero or " if "zero" in given else "") + "--set strategy.zero"
    return InputError(err.what, where=err.where, allowed=f"{err.allowed} ({ways})", also=err.also, needs_zero=True)


def _zero_not_read(err: InputError, sf: StrategyFile | None) -> InputError:
    """``err``, a refusal at zero 0 (InputError.needs_zero: specs.training.ZERO_UNSET_HINT), naming the --strategy
    file's ZeRO settings that are not read (StrategyFile.zero_not_read): a Megatron-LM launch with --use-torch-fsdp2
    and --fp8-param-gather was refused "got zero '0', the default", the FSDP flag's "not used" warning dropped with
    the error (ux36)."""
    unread = sf.zero_not_read() if sf is not None else []
    if not unread or not err.needs_zero:
        return err
    flags = ", ".join(u.split(" (")[0] for u in unread)
    return InputError(f"{err.what}; {flags} in {sf.path if sf else ''} not used ({ZERO_NOT_READ})", where=err.where,
                      allowed=err.allowed, also=err.also, needs_zero=True)


def _typed(where: str) -> bool:
    """Whether :func:`written_at`'s ``where`` is the command line's own (an option or --set), not a file's field."""
    return where.startswith("--") and not where.startswith(("--strategy: ", "--scenario: "))


def _across(here: str, what: str, other: str, field: str) -> tuple[str, str]:
    """The location and message of a refusal at ``here`` by a rule across two fields whose other one, ``field``, was
    written at ``other``. fuzz28: ``--strategy f.yaml --zero 3`` over the file's ``megatron_ddp: true`` was refused
    at the file's field alone ("--strategy: f.yaml: strategy.megatron_ddp: ... got zero '3'"), the option that made
    the conflict unnamed; it is named first, as fuzz27 named a --set item over a built-in file's field. A field on the
    command line over the other one in a file names the file's field after the message."""
    if _typed(other) and not _typed(here):
        return other, f"{here}: {what}"
    return here, what if _typed(other) else f"{what}, {field} from {other}"


def _check_rank_imbalance_at_ep(wl: Any, tr: Any, st: Any, given: dict[str, Any], sf: StrategyFile | None,
                                sets: list[str] | None) -> None:
    """engine.job.check_moe_rank_imbalance at the one strategy's ep, named where the factor was written (the
    engine's own check names the field alone)."""
    sh = transformer_shape(wl)
    try:
        check_moe_rank_imbalance(tr.moe_rank_imbalance, float(sh.moe_experts), float(sh.moe_top_k),
                                 None if getattr(tr, "moe_pad_to_capacity", False) else int(st.ep or 1))
    except InputError as exc:
        where = written_at("training", "moe_rank_imbalance", given, sf, sets)
        raise InputError(exc.what, where=where or exc.where, allowed=exc.allowed) from None


def check_training_fits(cl: Any, wl: Any, tr: Any, given: dict[str, Any], sf: StrategyFile | None,
                        sets: list[str] | None, scenario: tuple[str, Any] | None = None) -> None:
    """The engine's refusals of a training setting the cluster or the model cannot take (engine.job.training_checks:
    precision fp4 off Blackwell, a precision the accelerator has no peak for, more bf16_layers than layers, a cuDNN
    release or an attention kernel the accelerator holds no curve for, a module_precision module the model lacks or
    mxfp8 off Blackwell), checked here to name where the setting was written (:func:`written_at`): they were
    "training.precision: ..." to a user who gave --precision fp4, --set training.precision=fp4 or a launch script's
    --fp4-format e2m1 ("precision: ..." for fp8 on an A100), and "training.bf16_layers: ..." for
    --num-layers-at-start-in-bf16."""
    def located(key: str, exc: InputError) -> str | None:
        where = written_at("training", key, given, sf, sets, scenario)
        if where is None or where == exc.where:
            return None
        return where + sub_path(exc.where, f"training.{key}")

    run_training_checks(cl, wl, tr, located)


#: The trainer flags a framework file rules out: the job runs on that file's framework (a DeepSpeed config on
#: DeepSpeed's engine, a torchtitan TOML on torchtitan's trainer); a Megatron-LM launch sets megatron_ddp, which the
#: spec's one-trainer rule already holds against the others.
_FILE_EXCLUDES = {"deepspeed": ("DeepSpeed config", "DeepSpeed's engine", ("megatron_ddp", "nanotron_trainer")),
                  "torchtitan": ("torchtitan TOML", "torchtitan's trainer",
                                 ("megatron_ddp", "deepspeed_pipeline", "nanotron_trainer"))}


def check_file_trainer(sf: StrategyFile | None, st: Any, given: dict[str, Any], sets: list[str] | None) -> None:
    """Refuse another framework's trainer flag over a framework file (round 17): ``--strategy ds_config.json --set
    strategy.nanotron_trainer=true`` was priced as nanotron's trainer under DeepSpeed's ZeRO settings, a job neither
    framework runs (nanotron reads no DeepSpeed config; torchtitan builds its own FSDP2 / DDP and pipeline)."""
    if sf is None or sf.format not in _FILE_EXCLUDES:
        return
    kind, engine, excluded = _FILE_EXCLUDES[sf.format]
    for name in excluded:
        if getattr(st, name, False):
            where = written_at("strategy", name, given, sf, sets) or f"strategy.{name}"
            raise InputError(f"true with a {kind} (--strategy {sf.path}): the job runs on {engine}, not on the trainer "
                             f"{name} names", where=where,
                             allowed=f"false with a {kind}; or describe the run with that framework's own file or a "
                                     "scalemodel strategy YAML")


def check_launch_zero(sf: StrategyFile | None, st_raw: dict[str, Any], given: dict[str, Any],
                      sets: list[str] | None) -> None:
    """Refuse a ZeRO stage above 1 given over a Megatron-LM launch that runs Megatron-Core's DDP, naming the option
    (review19a): ``--strategy run.sh --zero 3`` was refused as "strategy.megatron_ddp: true needs ... zero 0 or 1",
    a field the user never wrote (the reader fills it from the launch, which names neither --use-torch-fsdp2 nor
    --use-megatron-fsdp)."""
    if sf is None or sf.format != "megatron" or st_raw.get("megatron_ddp") is not True:
        return
    if "megatron_ddp" in set_keys(sets, "strategy") or "zero" not in st_raw:
        return
    where = written_at("strategy", "zero", given, sf, sets)
    try:
        zero = Zero.parse(st_raw["zero"], where or "strategy.zero")
    except InputError:
        return  # a bad value: the spec's own check says what is allowed
    if where is None or where.startswith("--strategy") or zero <= Zero.OPTIMIZER:
        return
    raise InputError(f"{zero_label(zero.label, ' ')} over the Megatron-LM launch {sf.path}: it runs Megatron-Core's "
                     "DDP (it names neither --use-torch-fsdp2 nor --use-megatron-fsdp), whose distributed optimizer "
                     "shards the optimizer states only", where=where,
                     allowed="zero 0 or 1 with this launch; for sharded parameters, --use-torch-fsdp2 in the "
                             "launch (read as zero fsdp), --use-megatron-fsdp in it with --zero fsdp, or --set "
                             "strategy.megatron_ddp=false")


def check_file_dp(sf: StrategyFile, st: Any, gpus: int) -> None:
    """Refuse a data-parallel degree from the ``--strategy`` file (not --dp, not --set) that does not fit
    ``gpus``, naming the file's field: the engine's refusal said "--dp: ... or leave --dp out" to a user who never
    gave --dp (a torchtitan replicate 2 x shard 4 at 64 GPUs)."""
    if "dp" not in sf.strategy or st.dp is None or st.dp * st.tp * st.pp * st.cp == gpus:
        return
    product = st.dp * st.tp * st.pp * st.cp
    raise InputError(f"dp {st.dp} x tp {st.tp} x pp {st.pp} x cp {st.cp} = {product} but --gpus is {gpus}",
                     where=f"--strategy: {sf.path}: {sf.field_name('dp')}",
                     allowed=f"--gpus {product}, or a data-parallel degree of --gpus / (tp pp cp) in the file")


def check_seq_len(workload: Any, training: Any) -> None:
    """Warn when the training sequence length is a HuggingFace config's context length, or is given for a
    generic workload, whose cost is per sample (flops_per_sample, activation_bytes_per_sample): not used."""
    if getattr(workload, "kind", "transformer") != "transformer" and training.seq_len is not None:
        notices.warn(f"sequence length {training.seq_len:,} is not used: {workload.name} is a generic workload, "
                     "priced per sample (flops_per_sample, activation_bytes_per_sample), not per token")
        return
    note = seq_len_note(workload, training.seq_len)
    if note:
        notices.warn(note)


def one_job(*, cluster: str, model: str, gpus: int, strategy_file: str | None, sets: list[str] | None,
            flags: dict[str, Any], **echo: Any) -> tuple[Any, Any, Any, Any, dict[str, Any], Any]:
    """Cluster, workload, TrainingSpec, StrategySpec, the JSON ``inputs`` echo and the strategy's
    :func:`strategy_origin` of a command that prices one strategy on ``gpus`` GPUs (predict, sensitivity): flags,
    the ``--strategy`` file and ``--set``."""
    positive_int(gpus, "--gpus")
    check_straggler_cv_against_sets(echo.get("straggler_cv"), sets)
    training, strategy = split_flags(**flags)
    sf = read_strategy(strategy_file)
    cl, wl, tr, st = build_specs(cluster=cluster, model=model, sets=sets, training=training,
                                 strategy=strategy, strategy_file=sf, gpus=gpus)
    cl.require_gpus(gpus)
    inputs = spec_inputs(cl, wl, tr, st, sets, gpus=gpus, strategy_file=sf.echo() if sf else None, **echo)
    return cl, wl, tr, st, inputs, strategy_origin(sf, strategy, sets)
