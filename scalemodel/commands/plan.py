"""`scalemodel plan`: search every valid parallelisation of a model on N GPUs and rank them."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from scalemodel.choices import FlexBackend, Zero, parse_sync
from scalemodel.commands import common as o
from scalemodel.commands.args import Command, integer, number, opt, repeat, switch
from scalemodel.commands.options import comma_list
from scalemodel.engine.planner import (
    ALLOW,
    MAX_CANDIDATES,
    OBJECTIVES,
    PIN_AXES,
    PIN_FIXED,
    RECOMPUTE_SWITCHES,
    ZERO_SWITCHES,
)
from scalemodel.engine.planner import plan as run
from scalemodel.errors import InputError
from scalemodel.report.plan import LazyProgress, render_plan
from scalemodel.specs import notices
from scalemodel.specs.constraints import OPERATORS, OPS, merge_constraints, parse_constraints
from scalemodel.units import format_quantity

#: The most ranked strategies plan prints: each is priced and explained in full, about 10 ms of CPU apiece.
MAX_TOP = 500


def plan(*, cluster: str, model: str, gpus: int, global_batch: int | None, seq_len: int | None,
         precision: str | None, top: int, objective: str, constraint: list[str] | None, sync_modes: str,
         straggler_cv: float | None, train_tokens: str | None, allow: str, pareto: bool, sets: list[str] | None,
         strategy_file: str | None, as_json: bool, max_candidates: float = MAX_CANDIDATES) -> None:
    """Rank every strategy: parallel degrees, exchanges, micro-batch, schedule, ZeRO/FSDP, recompute, SP, DP comm."""
    o.positive_int(gpus, "--gpus")
    if not max_candidates >= 1:  # NaN, 0 and negatives: a limit no space meets (inf: no limit)
        raise InputError(f"--max-candidates {max_candidates:g} is no limit a search can meet", where="--max-candidates",
                         allowed=f"a number of candidates >= 1 (default {MAX_CANDIDATES:.0e}), or inf for no limit")
    o.batch_counts({"global_batch": global_batch, "seq_len": seq_len})
    o.positive_int(top, "--top")
    if top > MAX_TOP:  # each ranked row is priced and explained in full (about 10 ms): -k 1000000 ran for hours
        raise InputError(f"--top {top:,} would price and print {top:,} strategies in full (about 10 ms each)",
                         where="--top", allowed=f"an integer from 1 to {MAX_TOP:,} (for a table of many "
                                                "strategies, `scalemodel sweep` with fixed strategies)")
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}", where="--objective", allowed=" | ".join(OBJECTIVES))
    sf = _read_strategy(strategy_file)
    # the file's axes and the --constraint items each named as given (all were "--constraint")
    constraints = parse_constraints(constraint or [])
    set_st = o.set_keys(sets, "strategy")
    # a --set strategy.X (training.micro_batch) replaces the file's value of that axis, as a --constraint on it does:
    # both were kept, and --set strategy.tp=4 over a file's tp 2 left no candidate
    replaced = [*(constraint or []), *set_st, *(["virtual_stages"] if "schedule" in set_st else []),
                *(["micro_batch"] if "micro_batch" in o.set_keys(sets, "training") else [])]
    file_pins = o.strategy_constraints(sf, replaced, reported=file_fields(sf))
    if sf is not None:
        merge_constraints(constraints, file_pins, where=f"--strategy: {sf.path}")
    modes = _sync_modes(sync_modes, sf, file_pins)
    training = {"global_batch": global_batch, "seq_len": seq_len, "precision": precision,
                "train_tokens": train_tokens}
    o.check_straggler_cv_against_sets(straggler_cv, sets)
    allowed = _allowed_searches(allow)
    options = training
    if sf is not None:  # the planner searches micro-batches; a file's micro-batch is pinned as a constraint
        training = {**{k: v for k, v in sf.training.items() if k != "micro_batch"},
                    **{k: v for k, v in training.items() if v is not None}}
    # every --set strategy.X pins its axis (or is refused by the engine): never silently ignored; the file's
    # settings that are no search axis (ep_dispatch_sms, megatron_ddp, fp8_param_gather, ...) are pinned as --set
    # pins them, --set on top
    file_fixed = pin_file_settings(sf, set_st)
    pinned = [*set_st, *file_fixed]
    written = {k: f"--strategy: {sf.path}: {sf.field_name(k)}" for k in file_fixed} if sf is not None else {}
    # the file's strategy (its axes too, as predict validates them: fp8_param_gather needs the file's zero 1) with
    # --set on top, each refusal naming the file's field; its training was merged above
    strategy_view = replace(sf, training={}, training_fields={}, gradient_accumulation=None) if sf else None
    cl, wl, tr, st = _build_specs(pinned, sf, constraints.get("zero", []), cluster=cluster, model=model, sets=sets,
                                  training=training, strategy_file=strategy_view,
                                  training_from=(options, sf) if sf is not None else None)
    pinned = _warn_moe_pins_without_moe(wl, st, pinned, constraints)
    # --set training.micro_batch pins the micro-batch, as a strategy file's does (it was searched over, unsaid)
    if "micro_batch" in o.set_keys(sets, "training"):
        merge_constraints(constraints, [f"micro_batch={tr.micro_batch}"], where="--set")
    bar = LazyProgress("searching strategies")  # stderr only, so --json stays clean
    try:
        result = run(cl, wl, gpus, tr, objective=objective, top=top, constraints=constraints, sync_modes=modes,
                     straggler_cv=straggler_cv, progress=bar, allow=allowed, strategy=st, pinned=pinned,
                     pareto=pareto, written=written, max_candidates=max_candidates,
                     echo={"constraints": list(constraint or []), "set": list(sets or []),
                           "strategy_file": sf.echo() if sf else None})
    finally:
        bar.close()
    render_plan(result, as_json=as_json)


#: The ZeRO stages plan validates a pinned offload_states (or another switch that needs a stage) at when zero is not
#: given (:func:`_build_specs`), in order.
SEARCHED_ZEROS = ("1", "2", "3", "fsdp", "hsdp")


def _build_specs(pinned: list[str], sf: Any, zero_pairs: list[Any], **kw: Any) -> tuple[Any, Any, Any, Any]:
    """:func:`_build_zero_specs`; a pinned recompute field refused for the recompute mode it needs (InputError.
    needs_recompute names it; engine.planner.RECOMPUTE_SWITCHES: recompute_layers, recompute_method uniform need full,
    recompute_modules selective) where
    recompute is pinned nowhere is validated at that mode, which the search then keeps to (engine.planner.pins, and
    says so). ux38b: it was refused "add recompute: full", though plan searches recompute. Where that mode refuses
    too (another field), or recompute is pinned, the first refusal stands."""
    try:
        return _build_zero_specs(pinned, sf, zero_pairs, **kw)
    except InputError as exc:
        # the refused field, marked by the rule that names recompute (InputError.needs_recompute), not read from
        # where it was written (tidy39: exc.where was compared with "--set strategy.X" and the file's own name)
        mode = RECOMPUTE_SWITCHES[exc.needs_recompute][0] if exc.needs_recompute in pinned else None
        if mode is None or "recompute" in pinned or (sf is not None and "recompute" in sf.strategy):
            raise
        try:
            with notices.collecting() as seen:
                specs = o.build_specs(strategy={"recompute": mode.label}, **kw)
        except InputError:
            raise exc from None
        for line in seen:
            notices.warn(line)
        return specs


def _build_zero_specs(pinned: list[str], sf: Any, zero_pairs: list[Any], **kw: Any) -> tuple[Any, Any, Any, Any]:
    """common.build_specs for plan. A pinned offload_states with zero given nowhere (plan searches zero) is validated
    at the first searched stage that runs it (SEARCHED_ZEROS: optimizer at zero 1, optimizer+params at zero 3) rather
    than at zero 0, which refused it ("give zero too", ux36); the search itself counts the stages that cannot run it
    state_offload_invalid (engine.planner.pins), so only zero 1, 2, 3 (optimizer) or 3, fsdp, hsdp
    (optimizer+params) are ranked. The returned StrategySpec's zero is never read as a pin (zero is not pinned). Where
    no stage validates, the refusal is the one at zero 0 (the one predict gives).

    fuzz37: ``--constraint zero=1`` (``zero_pairs``, the constraints on zero) that leaves one stage gives zero as
    --set strategy.zero does: a pinned switch that needs a stage (fp8_param_gather, ...) is validated at it; it was
    refused "give zero too (--set strategy.zero)" beside it. A refusal at zero 0 names the constraint too.

    ux37: a pinned switch that runs at some stages only (engine.planner.ZERO_SWITCHES: fp8_param_gather,
    fsdp_per_param, ...) refused at zero 0 while the constraints leave several stages is validated at the first of
    them that runs it (:func:`_first_stage_that_runs`), as offload_states above, and the search keeps to the stages
    that run it (engine.planner.pins adds the zero constraint; planner.run says which). It was refused "give zero
    too" though several stages run it and plan searches zero."""
    unpinned = "zero" not in pinned and not (sf is not None and "zero" in sf.strategy)
    try:
        return _build_searched(pinned, unpinned, **kw)
    except InputError as exc:
        if not (unpinned and exc.needs_zero and exc.allowed.endswith(")")):  # ")": validate_written named the options
            raise
        left = [z for z in Zero if all(OPS[op](int(z), v) for op, v in zero_pairs)]
        if len(left) > 1:  # ux37: validated at the first stage left that runs the switch; the search keeps to those
            specs, tried = _first_stage_that_runs(left, **kw)  # (engine.planner.pins, ZERO_SWITCHES), says so
            if specs is not None:
                return specs
            _refuse_pins_without_a_stage(left, exc, tried)
        if not zero_pairs or len(left) != 1:
            raise InputError(exc.what, where=exc.where, allowed=f"{exc.allowed[:-1]}, or --constraint zero=VALUE)",
                             also=exc.also) from None
    try:  # the constraint's one stage, given as --zero would give it (plan has no --zero: named as the constraint)
        return o.build_specs(strategy={"zero": left[0].label}, **kw)
    except InputError as exc:
        if not exc.where.startswith("--zero"):
            raise
        raise InputError(_plan_options(exc.what), where=f"--constraint zero={left[0].label}"
                         f"{exc.where[len('--zero'):]}", allowed=_plan_options(exc.allowed), also=exc.also) from None


def _plan_options(text: str) -> str:
    """``text``, a refusal built for a command with ``--zero``, with each ``--zero VALUE`` it advises named as plan's
    own option, ``--constraint zero=VALUE`` (plan has no --zero). ux37: ``plan --strategy run.sh --constraint
    zero=fsdp`` over a Megatron-DDP launch advised "--use-megatron-fsdp in it with --zero fsdp" (common.
    check_launch_zero), an option plan refuses; "--zero or --set strategy.zero" names no value and is left as it is
    (plan's hint is written by _build_specs)."""
    return re.sub(r"--zero (?!or\b)([0-9a-z]+)", r"--constraint zero=\1", text)


def _read_strategy(strategy_file: str | None) -> Any:
    """common.read_strategy, its warnings in plan's options (:func:`_plan_options`). ux38: a Megatron-LM launch with
    --use-megatron-fsdp (not read: StrategyFile.zero_not_read) was said "not used (FSDP is not read from the flags:
    give --zero fsdp, or --zero hsdp with ...)", an option plan refuses; plan's is --constraint zero=fsdp, which
    keeps its search (every ZeRO stage otherwise) to the sharded parameters the launch runs."""
    seen: list[str] = []
    try:
        with notices.collecting() as seen:
            return o.read_strategy(strategy_file)
    finally:  # said also where the file is refused, as before
        for line in seen:
            notices.warn(_plan_options(line))


def _first_stage_that_runs(left: list[Zero], **kw: Any
                           ) -> tuple[tuple[Any, Any, Any, Any] | None, dict[str, InputError]]:
    """(common.build_specs at the first of SEARCHED_ZEROS among ``left`` (the stages the constraints leave) that
    validates, its warnings said, or None where none does (the refusal at zero 0 stands); each stage tried before it
    and its refusal, in SEARCHED_ZEROS' order: every stage of ``left`` but zero 0 where none validates, which
    :func:`_refuse_pins_without_a_stage` reads instead of validating them again)."""
    refused: dict[str, InputError] = {}
    for zero in SEARCHED_ZEROS:
        if Zero.parse(zero) not in left:
            continue
        try:
            with notices.collecting() as seen:
                specs = o.build_specs(strategy={"zero": zero}, **kw)
        except InputError as exc:
            refused[zero] = exc
            continue
        for line in seen:
            notices.warn(line)
        return specs, refused
    return None, refused


def _refuse_pins_without_a_stage(left: list[Zero], at_zero0: InputError, tried: dict[str, InputError]) -> None:
    """Refuse pinned switches no ZeRO stage runs together, where two or more are refused across the stages ``left``
    (fuzz38: ``--set strategy.bucket_fragments=true --set strategy.fsdp_per_param=true``, zero 1 / 2 against fsdp /
    hsdp, was refused at zero 0 with "give zero too (--set strategy.zero, or --constraint zero=VALUE)", advice no
    stage could take). Returns where one field alone is refused at every stage (its own refusal stands).

    ux38b: another option refused at the stages that run the pinned switch (``--precision fp4`` on dgx-h100 beside
    ``bucket_fragments``, which runs at zero 1 and 2 only, where --precision refuses FP4 on Hopper) was "give zero
    too" as well: that option's refusal is named first, with its reason and what it allows, and the stages the pin
    itself refuses after it.

    ``tried``: each searched stage of ``left`` and its refusal, as :func:`_first_stage_that_runs` found them (none of
    them validated); tidy39: each was validated here a second time."""
    refused: dict[str, list[str]] = {}
    why: dict[str, InputError] = {}
    pins = "|".join((*ZERO_SWITCHES, "offload_states"))
    if Zero.parse("0") in left:
        refused[at_zero0.where], why[at_zero0.where] = ["0"], at_zero0
    for zero, exc in tried.items():
        # the stage tried is given as predict's --zero (build_specs), an option plan has not: such a refusal belongs
        # to the pinned field its text names ("--zero: --strategy: s.yaml: strategy.fp8_param_gather: true needs
        # ..." at zero 3 is the pin refused at zero 0, not another option)
        named = re.match(rf"(.*?\b(?:{pins})): ", exc.what) if exc.where == "--zero" else None
        field = named.group(1) if named else exc.where
        refused.setdefault(field, []).append(zero)
        why.setdefault(field, exc)
    switches = [w for w in refused if re.search(rf"\b(?:{pins})$", w)]
    others = [w for w in refused if w not in switches]
    if len(refused) < 2 or not switches:
        return  # one field refused everywhere, or no pinned switch among the refusals: the refusal at zero 0 stands

    def stages(zs: list[str]) -> str:
        return zs[0] if len(zs) == 1 else ", ".join(zs[:-1]) + " and " + zs[-1]

    if others:  # ux38b: an option other than the pins is refused where the pins run
        said = "; ".join([*(f"at zero {stages(refused[w])}, {w}: {why[w].what}" for w in others),
                          *(f"at zero {stages(refused[w])}, {w}" for w in switches)])
        raise InputError(f"no ZeRO stage plan searches takes the pinned {' and '.join(switches)} with "
                         f"{' and '.join(others)}: refused {said}", where=others[0],
                         allowed=f"{why[others[0]].allowed} ({others[0]}), or leave out "
                                 f"{' and '.join(switches)}") from None
    said = "; ".join(f"at zero {stages(zs)}, {where}" for where, zs in refused.items())
    raise InputError(f"no ZeRO stage plan searches runs every pinned switch: refused {said}",
                     where=next(iter(refused)), allowed="pin only switches one stage runs (drop one --set, or set "
                                                        "it to its default), or --constraint zero=VALUE for the "
                                                        "stage you mean, to see its refusal") from None


def _build_searched(pinned: list[str], unpinned: bool, **kw: Any) -> tuple[Any, Any, Any, Any]:
    """common.build_specs at zero 0, or for a pinned offload_states at the first searched stage that runs it."""
    if "offload_states" in pinned and unpinned:
        specs, _ = _first_stage_that_runs(list(Zero), **kw)
        if specs is not None:
            return specs
    return o.build_specs(strategy={}, **kw)


def _sync_modes(sync_modes: str, sf: Any, file_pins: list[str]) -> list[str]:
    """--sync-modes as a list, each a sync mode; a --strategy file's pinned sync must be among them."""
    modes = comma_list(sync_modes)
    if not modes:
        raise InputError("no sync mode given", where="--sync-modes", allowed="e.g. bsp or bsp,asp,ssp:2")
    for m in modes:
        try:
            parse_sync(m)
        except InputError as exc:
            raise InputError(exc.what, where="--sync-modes", allowed=exc.allowed) from None
    pinned_sync = next((t.partition("=")[2] for t in file_pins if t.startswith("sync=")), None)
    if sf is not None and pinned_sync is not None:
        label = parse_sync(pinned_sync).label()
        if label not in {parse_sync(m).label() for m in modes}:  # was "--constraint sync: the sync constraint ..."
            raise InputError(f"sync {label} is not among the searched sync modes ({', '.join(modes)})",
                             where=f"--strategy: {sf.path}: {sf.field_name('sync')}",
                             allowed=f"--sync-modes {','.join([*modes, label])} (plan searches only --sync-modes), "
                                     "or --constraint sync=... to pin another")
    return modes


def _allowed_searches(allow: str) -> list[str]:
    """--allow as a list, each one of the planner's opt-in searches (ALLOW)."""
    allowed = comma_list(allow)
    if allow and not allowed:  # "--allow ,," opened nothing without a word (as --sync-modes refuses its empty list)
        raise InputError(f"no search named in {allow[:40]!r}", where="--allow", allowed=" | ".join(ALLOW))
    for a in allowed:
        if a not in ALLOW:
            raise InputError(f"unknown --allow {a!r}", where="--allow", allowed=" | ".join(ALLOW))
    return allowed


def file_fields(sf: Any) -> set[str]:
    """The --strategy file's fields that plan (and ``scale --best``) reports itself (:func:`pin_file_settings`) or
    uses as given (its training settings, micro-batch aside): left out of strategy_constraints' "not pinned as
    given" warning, which named them all although plan used the training ones."""
    if sf is None:
        return set()
    return set(sf.strategy) | {k for k in sf.training if k != "micro_batch"}


def pin_file_settings(sf: Any, set_st: list[str], who: str = "plan") -> list[str]:
    """The --strategy file's fields that plan (and ``scale --best`` at each point; ``who`` names the command in the
    warnings) pins as fixed parameters of every candidate (PIN_FIXED: what the framework runs, e.g.
    --moe-flex-dispatcher-num-sms, --use-distributed-optimizer's megatron_ddp, --fp8-param-gather), exactly as
    ``--set strategy.X`` pins them (engine.planner.pins); a ``--set`` (with scale, a flag) on the same field
    replaces the file's. They were dropped with "not pinned as given", and plans were ranked at the defaults.
    The file's search axes that strategy_constraints does not pin (overlap, bucket_size, compression, dp_comm,
    assignment) stay searched, and a field plan cannot pin (refused on --set) is ranked at its default: both are
    said."""
    if sf is None:
        return []
    fixed, searched, unpinnable = [], [], []
    for key in sf.strategy:
        if key in set_st or key in o.PINNABLE or key == "schedule":
            continue  # --set replaces it; an axis pinned as a constraint (strategy_constraints)
        value = sf.strategy[key]
        # a null bucket_size is the framework's default (a plan's own --json strategy writes it so, and was a
        # TypeError traceback here read back by plan --strategy: consist38)
        shown = (("default" if value is None else format_quantity(value, "bytes")) if key == "bucket_size"
                 else str(value).lower() if isinstance(value, bool) else value)
        named = f"{key} {shown}" + ("" if sf.field_name(key) == f"strategy.{key}" else f" ({sf.field_name(key)})")
        if key in PIN_FIXED:
            fixed.append(key)
        elif key in PIN_AXES:
            searched.append(named)
        else:
            unpinnable.append(named)
    if searched:
        notices.warn(f"{sf.path}: {who} searches {', '.join(searched)}: the file's "
                     f"{'value is' if len(searched) == 1 else 'values are'} not pinned; pin with --set strategy.K=V "
                     "or --constraint")
    if unpinnable:
        notices.warn(f"{sf.path}: {who} cannot pin {', '.join(unpinnable)} (as --set strategy.K is refused): the "
                     "plans are ranked at its default")
    return fixed


#: Strategy fields that act only on MoE layers, as predict warns of them on a model without (engine.job
#: _warn_unpriced_fields).
_MOE_ONLY = ("moe_flex_dispatcher", "moe_a2a_overlap", "ep_dispatch_sms", "moe_layer_host_s", "moe_flex_backend",
             "moe_shared_expert_overlap", "moe_shared_expert_stream", "moe_allgather_dispatcher")


def _warn_moe_pins_without_moe(wl: Any, st: Any, pinned: list[str], constraints: dict[str, Any]) -> list[str]:
    """A warning for an MoE dispatch setting plan was given (--set, --constraint, the --strategy file's axes) on a
    model without MoE layers: predict warns "is not priced: the model has no MoE layers", plan ranked the rows with
    the flag on (--constraint moe_flex_dispatcher=true on llama3-8b) without a word (round 15). ``pinned`` is
    returned without etp there: predict prices a dense model's etp as unset, and plan with it pinned ranked no
    plan, every candidate expert_parallel_invalid (ux38)."""
    moe = getattr(wl, "kind", "") == "transformer" and wl.moe is not None and int(wl.moe.experts) > 0
    if moe:
        return pinned
    shown = {"moe_layer_host_s": lambda v: f" = {v:g} s", "ep_dispatch_sms": lambda v: f" = {v}",
             "moe_flex_backend": lambda v: f" = {v}"}  # as predict's
    given = [f"strategy.{k}{shown.get(k, lambda v: '')(getattr(st, k))}" for k in dict.fromkeys(pinned)
             if k in _MOE_ONLY and getattr(st, k, None) not in (None, False, 0, 0.0, FlexBackend.DEEPEP.label)]
    given += [f"constraint {k}=true" for k in ("moe_flex_dispatcher", "moe_a2a_overlap")
              if ("=", True) in constraints.get(k, []) or ("==", True) in constraints.get(k, [])]
    # a backend other than DeepEP (round 15b: --constraint moe_flex_backend=hybridep on llama3-8b was taken silently)
    given += [f"constraint moe_flex_backend={FlexBackend.of(v).label}"
              for op, v in constraints.get("moe_flex_backend", [])
              if op in ("=", "==") and int(v) != FlexBackend.DEEPEP]
    for g in given:
        notices.warn(f"{g} is not priced: the model has no MoE layers")
    if "etp" in pinned and getattr(st, "etp", None) is not None:  # predict's words (job._grid_from_strategy)
        notices.warn(f"strategy.etp = {st.etp} is not priced: the model has no MoE layers (expert tensor parallelism "
                     "applies to experts only)")
    return [k for k in pinned if k != "etp"]


COMMAND = Command("plan", plan, (
    o.CLUSTER.but(default="dgx-h100"), o.MODEL.but(default="gpt3-175b"),
    opt("--gpus", "-n", type=integer, default=1024, help="Number of GPUs."),
    o.GLOBAL_BATCH.but(help="Sequences (samples) per step (default: one per GPU, = --gpus; with --objective "
                            "time-to-train and no --global-batch, searched from 1/8 to 8 x that)."),
    o.SEQ_LEN, o.PRECISION,
    opt("--top", "-k", type=integer, default=5, help="How many of the best strategies to show."),
    opt("--objective", default="throughput",
        help="throughput | time-to-train (throughput x statistical efficiency) | cost."),
    repeat("--constraint", metavar="KEY<=V",
           help=f"Restrict the search: KEY OP VALUE with OP one of {OPERATORS} (repeatable, or comma-separated): "
                "tp<=8, pp=1, zero<=1, memory<=60GB, "
                "schedule=1f1b, recompute=none, micro_batch>=2, algorithm=ring, sp=true, cp_comm_type=a2a, "
                "moe_flex_dispatcher=true, moe_flex_backend=hybridep."),
    opt("--sync-modes", default="bsp",
        help="Comma-separated sync modes to search: bsp,asp,ssp:S,local:H,backup:B,hier:G."),
    o.STRAGGLER_CV, o.TRAIN_TOKENS,
    opt("--allow", default="", help="Also search (comma-separated): " + ", ".join(ALLOW) + ". custom-collectives, "
                                    "compression, parameter-server and dynamic-assignment open what mainstream "
                                    "frameworks do not run (such plans are labelled custom); cp-exchanges and "
                                    "moe-dispatch search the CP exchange (cp_comm_type) and the MoE dispatch "
                                    "(flex dispatcher and its backend, all-to-all overlap), each pinned to its "
                                    "default otherwise (a --constraint or --set on one also opens it); offload "
                                    "searches the model states' host offload (offload_states none, optimizer, "
                                    "optimizer+params) where the cluster gives host_bandwidth; micro-batches searches "
                                    "every micro-batch dividing B / dp, not only the powers of two (Megatron runs "
                                    "any; a batch with odd factors multiplies the candidates); expert-tp searches "
                                    "an MoE model's expert tensor parallelism (etp: tp, as Megatron defaults, and "
                                    "every divisor of tp below it; torchtitan 1 or tp) with ep folded over tp x cp x "
                                    "dp (Megatron-Core's expert grid), otherwise etp = tp and ep dividing dp "
                                    "(1.3-2.3x the search time); all opens every one."),
    opt("--max-candidates", type=number, default=MAX_CANDIDATES,
         help=f"Refuse a search space larger than this (default {MAX_CANDIDATES:.0e}; inf: no limit), counted before "
              "any candidate is priced: outer candidates (parallel layout, micro-batch, schedule, ZeRO, recompute, SP, "
              "sync mode) x data-parallel communication choices. Measured, a search costs 11-35 ns of CPU a "
              "candidate with the 72 mainstream communication choices and 0.5-5 ns with --allow's ~1,100 (the "
              "slowest measured search the default takes ran 24 s; GPT-3 175B on 4096 dgx-a100, 98e6 candidates, "
              "1.0 s: benchmarks/bench.py --throughput); time-to-train without --global-batch searches 7 batches "
              "and --pareto 2 more searches, each within the limit. --allow all multiplies the communication "
              "choices about 15x."),
    switch("--pareto", help="Also print the front of step throughput vs time to target vs cost (the "
                            "'impossible triangle'); most useful with several --sync-modes."),
    o.SET, o.STRATEGY_FILE.but(
        help="Strategy and training settings from a file: a scalemodel strategy YAML, a DeepSpeed config JSON, "
             "Megatron-LM flags (a launch script) or a torchtitan TOML. Its parallel layout is pinned as constraints "
             "and its framework settings as --set strategy.X pins them; its overlap, bucket size, compression, "
             "dp_comm and assignment stay searched; --set and --constraint override it."),
    o.JSON))
