"""`scalemodel scale`: a weak or strong scaling sweep with the lost efficiency attributed to its causes.

With no arguments (or only output/mode options) it runs the built-in default scenario
(examples/scenarios/default.yaml). ``--scenario FILE`` starts from another scenario; explicit flags
override the scenario's fields (``--gpus`` included). When ``--cluster`` or ``--model`` is given
without ``--scenario``, the flags alone describe the job (like ``predict``).
"""

from __future__ import annotations

import re
from typing import Any

from scalemodel.commands import common as o
from scalemodel.commands.args import Command, opt, pair, switch
from scalemodel.commands.plan import file_fields, pin_file_settings
from scalemodel.engine.job import PIN_CHECKS, Job, build_job
from scalemodel.engine.planner import RECOMPUTE_SWITCHES, pins
from scalemodel.engine.scaling import sweep
from scalemodel.errors import InputError
from scalemodel.report.plot import check_plot_path
from scalemodel.report.scale import render_scale
from scalemodel.specs import (
    ClusterSpec,
    StrategySpec,
    TrainingSpec,
    Workload,
    load_cluster,
    load_scenario,
    load_workload,
    note_tier_bandwidth,
    split_overrides,
)
from scalemodel.specs.base import MAX_GPUS, Spec, digit_grouping
from scalemodel.specs.constraints import merge_constraints, normalize_constraints
from scalemodel.specs.loader import apply_overrides, validate
from scalemodel.specs.scenario import gpus_not_increasing

DEFAULT_GPUS = [128, 256, 512, 1024, 2048]


def parse_gpus(text: str) -> list[int]:
    # blanks around a count are dropped, not inside one: "8 16" was read as 816 GPUs (round 15); an empty count
    # ("8,,16") was skipped without a word
    parts = [x.strip() for x in text.split(",")]
    if len(parts) > 1 and not parts[-1]:
        parts.pop()  # one trailing comma: "8,16,"
    if not text.strip():
        raise InputError("no GPU count given", where="--gpus",
                         allowed="comma-separated integers, e.g. 128,256,512,1024,2048")
    if any(not x for x in parts):
        raise InputError(f"an empty GPU count in {text[:80]!r} (two commas in a row, or one at the start)",
                         where="--gpus", allowed="comma-separated integers, e.g. 128,256,512,1024,2048")
    # ASCII digits only: int() reads "6_4" as 64, and other scripts' digits; digits grouped by thousands (1_024) are
    # read without the '_'
    grouped = next((x for x in parts if digit_grouping(x, "") is not None), None)
    if grouped is not None or not all(re.fullmatch(r"[+-]?[0-9]{1,30}", x.replace("_", "")) for x in parts):
        blank = next((x for x in parts if len(x.split()) > 1), None)
        odd = next((i for i, x in enumerate(parts) if not re.fullmatch(r"[+-]?[0-9]{1,30}", x.replace("_", ""))), 0)
        which = "" if len(parts) == 1 else f" (count {odd + 1} of {len(parts)})"
        long = re.fullmatch(r"[+-]?[0-9]+", parts[odd].replace("_", "")) is not None
        shown = parts[odd] if len(parts[odd]) <= 40 else parts[odd][:37] + "..."
        # fuzz39: "cannot read GPU counts '8,2**70'" named no count and, past 30 digits, not the bound
        why = (f": '_' groups digits only by thousands, as in 1_024 (write {grouped.replace('_', '')[:40]})"
               if grouped else f": {blank[:40]!r} has a blank inside (counts are separated by commas)" if blank
               else f": {shown!r}{which} has {len(parts[odd].lstrip('+-'))} digits, outside 1 to {MAX_GPUS:.0e}" if long
               else f": {shown!r}{which} is not an integer (digits only, no expression)")
        raise InputError(f"cannot read GPU counts {text[:80]!r}{why}", where="--gpus",
                         allowed=f"comma-separated integers from 1 to {MAX_GPUS:.0e}, e.g. 128,256,512,1024,2048")
    values = [int(x.replace("_", "")) for x in parts]
    bad = next(((i, v) for i, v in enumerate(values) if not 0 < v <= MAX_GPUS), None)
    if bad is not None:
        # fuzz39: "GPU counts must be positive integers, got '8,1180591620717411303424'" named neither the bound nor
        # the count past it (predict's -n says both: options.positive_int)
        i, v = bad
        which = "" if len(values) == 1 else f" (count {i + 1} of {len(values)})"
        why = "not positive" if v <= 0 else f"past {MAX_GPUS:.0e}, the most GPUs a spec holds"
        raise InputError(f"GPU count {v}{which} is {why}", where="--gpus",
                         allowed=f"comma-separated integers from 1 to {MAX_GPUS:.0e}, e.g. 128,256,512,1024,2048")
    check_increasing(values, "--gpus")
    return values


def check_increasing(counts: list[int], where: str) -> None:
    """A sweep's GPU counts rise: the first is the baseline of every scaling efficiency and loss attribution, so a
    count below it gave an efficiency above 1 and negative attributions (a loss read backwards)."""
    said = gpus_not_increasing(counts)
    if said is not None:
        raise InputError(said[0], where=where, allowed=said[1])


def resolve_specs(*, scenario: str | None, cluster: str | None, model: str | None, gpus: str | None,
                  mode: str | None, best: bool | None, sets: list[str] | None, training: dict[str, Any],
                  strategy: dict[str, Any], strategy_file: o.StrategyFile | None = None) -> dict[str, Any]:
    """Specs for the sweep: scenario (explicit or the default) or flags, then the --strategy file,
    then flags, then --set (a field given by both a flag and --set refused)."""
    routed = split_overrides(sets or [])
    o.check_flags_against_sets(training, strategy, sets)
    use_scenario = scenario is not None or (cluster is None and model is None)
    # an empty -c / -m / --scenario is a name given, refused by the loader as predict refuses it (fuzz26: `scale -c ''`
    # ran dgx-h100 and `-m ''` gpt3-175b, the defaults of an option left out)
    scen = load_scenario(scenario if scenario is not None else "default") if use_scenario else None

    def dump(m: Spec) -> dict[str, Any]:
        return m.model_dump(exclude={"sources"}) if "sources" in type(m).model_fields else m.model_dump()

    if scen is not None and cluster is None:
        cl = validate(ClusterSpec, apply_overrides(dump(scen.cluster), routed["cluster"], model=ClusterSpec),
                      prefix=["cluster"])
    else:
        cl = load_cluster(cluster if cluster is not None else "dgx-h100", routed["cluster"])
    note_tier_bandwidth(cl, routed["cluster"])  # as predict, plan and memory say it (build_specs): scale did not
    if scen is not None and model is None:
        wl = validate(Workload, apply_overrides(dump(scen.model), routed["model"], model=Workload), prefix=["model"])
    else:
        wl = load_workload(model if model is not None else "gpt3-175b", routed["model"])
    tr_base = scen.training.model_dump(exclude_unset=True) if scen is not None else {}
    st_base = scen.strategy.model_dump(exclude_unset=True) if scen is not None else {}
    counts = parse_gpus(gpus) if gpus is not None else (list(scen.gpus) if scen is not None else DEFAULT_GPUS)
    tr_given, st_given = o.with_strategy_file(strategy_file, training, strategy, counts[0])
    tr_raw = apply_overrides({**tr_base, **tr_given}, routed["training"], model=TrainingSpec)
    st_raw = apply_overrides({**st_base, **st_given}, routed["strategy"], model=StrategySpec)
    where = scenario or "default"
    # --zero 3 over a Megatron-Core DDP launch names the option, as predict's build_specs does (scale was refused at
    # the reader's own strategy.megatron_ddp field)
    o.check_launch_zero(strategy_file, st_raw, strategy, sets)
    tr = o.validate_written(TrainingSpec, "training", tr_raw, training, strategy_file, sets,
                            (where, tuple(tr_base)) if scen is not None else None)
    scen_st = (where, tuple(st_base)) if scen is not None else None
    try:
        st = o.validate_written(StrategySpec, "strategy", st_raw, strategy, strategy_file, sets, scen_st)
    except InputError as exc:
        # --best searches recompute where it is given nowhere: a pinned recompute_layers / recompute_modules is
        # validated at the mode it runs under, which the search keeps to (engine.planner.pins), as plan does
        # (commands.plan._build_specs). fuzz39: scale --best --set strategy.recompute_modules=core_attn was refused
        # "add recompute: selective", where plan ranks selective plans
        # The refused field is the rule's marker (InputError.needs_recompute), plan's route too; review39: this read
        # it from where the refusal pointed, the string match tidy39 took out of plan
        searched = best if best is not None else (scen.best if scen is not None else False)
        if not (searched and "recompute" not in st_raw and exc.needs_recompute in st_raw):
            raise
        needed = RECOMPUTE_SWITCHES[exc.needs_recompute][0]
        try:
            st = o.validate_written(StrategySpec, "strategy", {**st_raw, "recompute": needed.label}, strategy,
                                    strategy_file, sets, scen_st)
        except InputError:
            raise exc from None
    o.check_file_trainer(strategy_file, st, strategy, sets)
    o.check_seq_len(wl, tr)
    o.check_training_fits(cl, wl, tr, training, strategy_file, sets,
                          (where, tuple(tr_base)) if scen is not None else None)
    return {"scenario": scen.name if scen is not None else None, "cluster": cl, "model": wl, "training": tr,
            "scenario_strategy": (scenario or "default", tuple(st_base)) if scen is not None else None,
            "scenario_training": (scenario or "default", tuple(tr_base)) if scen is not None else None,
            "strategy": st, "gpus": counts, "mode": mode or (scen.mode if scen is not None else "weak"),
            "best": best if best is not None else (scen.best if scen is not None else False)}


def _best_pins(st: StrategySpec, tr: TrainingSpec, flags: dict[str, Any], micro_batch: int | None,
               sets: list[str] | None, sf: o.StrategyFile | None, job: Job) -> dict[str, Any]:
    """With --best, the strategy the command line gives is pinned as plan pins it (engine.planner.pins): the
    strategy flags, --set strategy.X and training.micro_batch, and the --strategy file's axes and its fixed settings
    (commands.plan.pin_file_settings: ep_dispatch_sms, megatron_ddp, layer_impl, ..., each as --set strategy.X pins
    it; they were dropped, and every point searched at the defaults); a flag or --set on a field replaces the
    file's. A scenario's own strategy is what --best replaces. Without this every point searched all of them
    (--tp 8 was ignored)."""
    names = [k for k, v in flags.items() if v is not None and k != "dp"]  # dp: re-derived at every point
    names += o.set_keys(sets, "strategy")
    file_fixed = pin_file_settings(sf, names, who="scale --best")
    written = {k: f"--strategy: {sf.path}: {sf.field_name(k)}" for k in file_fixed} if sf is not None else {}
    cons, fixed, _sync = pins(st, [*names, *file_fixed], written)  # the sync mode is pinned above, as --sync
    for key, rule in PIN_CHECKS:  # plan's checks of its pinned fields (engine.planner.run), at the same pins: fuzz39,
        if key in (*names, *file_fixed):  # a first_stage_layers 33 of 32 was "no feasible strategy for 8 GPUs"
            try:
                rule(job, st)
            except InputError as exc:
                raise InputError(exc.what, where=written.get(key, f"--set strategy.{key}"),
                                 allowed=exc.allowed) from None
    out: dict[str, Any] = {}
    constraints = normalize_constraints(cons, where="--best")
    micro_set = micro_batch is not None or "micro_batch" in o.set_keys(sets, "training")
    replaced = [*names, *(["virtual_stages"] if "schedule" in names else []), *(["micro_batch"] if micro_set else [])]
    texts = o.strategy_constraints(sf, replaced, reported=file_fields(sf))
    if micro_set and not any(t.startswith("micro_batch=") for t in texts):
        texts.append(f"micro_batch={tr.micro_batch}")
    merge_constraints(constraints, texts, where="--strategy")
    if constraints:
        out["constraints"] = constraints
    if fixed:
        out["fixed"] = fixed
    if written:  # the search's refusal of a file's field names the file's flag (engine.planner.search)
        out["written"] = written
    return out


def scale(*, cluster: str | None, model: str | None, gpus: str | None, mode: str | None, scenario: str | None,
          best: bool | None, objective: str | None, tp: int | None, pp: int | None, cp: int | None, ep: int | None,
          micro_batch: int | None, global_batch: int | None, seq_len: int | None, sequence_parallel: bool | None,
          straggler_cv: float | None, staleness_kappa: float | None, critical_batch: str | None, as_csv: bool,
          plot: str | None, strategy_file: str | None, sets: list[str] | None, as_json: bool, **flags: Any) -> None:
    """Scaling sweep: step time, throughput, TFLOP/s per GPU and efficiency per point, and why it falls."""
    if as_json and as_csv:
        raise InputError("--json and --csv both given", where="--csv", allowed="one output format")
    if mode is not None and mode not in ("weak", "strong"):
        raise InputError(f"unknown scaling mode {mode!r}", where="--mode", allowed="weak or strong")
    for name, value in (("--tp", tp), ("--pp", pp), ("--cp", cp), ("--ep", ep)):
        o.positive_int(value, name)
    o.batch_counts({"micro_batch": micro_batch, "global_batch": global_batch, "seq_len": seq_len})
    o.check_kappa(staleness_kappa)
    if plot is not None:
        check_plot_path(plot, "--plot")  # fail before the sweep on a bad extension
    training, strategy = o.split_flags(
        micro_batch=micro_batch, global_batch=global_batch, seq_len=seq_len, critical_batch=critical_batch,
        tp=tp, pp=pp, cp=cp, ep=ep, **flags)
    strategy["sequence_parallel"] = sequence_parallel  # a --/--no- pair here: False is an explicit choice
    sf = o.read_strategy(strategy_file)
    o.check_straggler_cv_against_sets(straggler_cv, sets)
    spec = resolve_specs(scenario=scenario, cluster=cluster, model=model, gpus=gpus, mode=mode, best=best,
                         sets=sets, training=training, strategy=strategy, strategy_file=sf)
    cl, wl, tr, st = spec["cluster"], spec["model"], spec["training"], spec["strategy"]
    # the counts' origin: the scenario's field, named by its file (was "scenario gpus", or "--gpus" for a strategy
    # that does not divide them, an option never given)
    # (-c and -m without --gpus or a scenario: the default counts, said as --gpus's default, not 'default: gpus',
    # which names the built-in scenario 'default' that neither -c nor -m left in use)
    gpus_at = "--gpus" if gpus is not None else (
        f"{scenario or 'default'}: gpus" if spec["scenario"] is not None
        else f"--gpus (not given: the default {','.join(map(str, DEFAULT_GPUS))})")
    cl.require_gpus(max(spec["gpus"]), gpus_at)
    inputs: dict[str, Any] = {
        "scenario": spec["scenario"], "cluster": cl.name, "model": wl.name, "gpus": spec["gpus"],
        "mode": spec["mode"], "best": spec["best"], "seq_len": tr.seq_len or getattr(wl, "seq_len", None),
        "training": tr.model_dump(mode="json"),
        "strategy": st.model_dump(mode="json"), "set": list(sets or []), "straggler_cv": straggler_cv,
        "objective": objective, "strategy_file": sf.echo() if sf else None}
    search: dict[str, Any] = {}
    if objective is not None:
        if not spec["best"]:
            raise InputError("--objective only applies with --best", where="--objective",
                             allowed="add --best, or drop --objective")
        search["objective"] = objective
    if spec["best"] and st.sync != "bsp":
        search["sync_modes"] = (st.sync,)
    if spec["best"]:
        search.update(_best_pins(st, tr, strategy, micro_batch, sets, sf, build_job(cl, wl, tr)))
    try:
        result = sweep(cl, wl, tr, st, spec["gpus"], spec["mode"], best=spec["best"], straggler_cv=straggler_cv,
                       kappa=staleness_kappa, search=search or None, inputs=inputs,
                       origin=o.strategy_origin(sf, strategy, sets,
                                                gpus=gpus_at,
                                                scenario=spec["scenario_strategy"]))
    except InputError as exc:  # the batch bound names the option; a scenario, --strategy file or --set may hold it
        key = {"--micro-batch": "micro_batch", "--global-batch": "global_batch"}.get(exc.where)
        where = key and o.written_at("training", key, training, sf, sets, spec["scenario_training"])
        if not where or where == exc.where:
            raise
        raise InputError(exc.what, where=where, allowed=exc.allowed) from None
    render_scale(result, as_json=as_json, as_csv=as_csv, plot=plot)


COMMAND = Command("scale", scale, (
    o.CLUSTER.but(help="Built-in cluster name or a cluster YAML file (default: the scenario's; see --scenario)."),
    o.MODEL.but(help=o.MODEL.help[:-1] + " (default: the scenario's; see --scenario)."),
    opt("--gpus", "-n", help="Comma-separated GPU counts (default: the scenario's, else 128,256,512,1024,2048)."),
    opt("--mode", help="weak (per-replica batch fixed, global batch grows) or strong (global batch fixed); "
                       "default: the scenario's, else weak."),
    opt("--scenario", complete="scenario", help="Scenario YAML (or built-in name) to start from; flags override it. "
                                                "Default: the built-in 'default' when neither --cluster nor --model "
                                                "is given (else dgx-h100 and gpt3-175b stand in for the one missing)."),
    pair("--best", help="Search the best strategy at each point (planner), not a fixed one."),
    opt("--objective", help="Planner objective with --best: throughput | time-to-train | cost."),
    o.TP, o.PP, o.CP, o.EP, o.MICRO_BATCH,
    o.GLOBAL_BATCH.but(help="Sequences per step at the FIRST point (weak mode grows it with N); default: the "
                            "scenario's, else dp x micro-batch."),
    o.SEQ_LEN, o.ZERO, o.RECOMPUTE, pair("--sequence-parallel", help=o.SEQ_PAR.help),
    o.SCHEDULE, o.PRECISION, o.OVERLAP, o.COMPRESSION, o.DP_COMM, o.SYNC, o.ALGO, o.STRAGGLER_CV, o.ASSIGNMENT,
    o.DISPATCH_OVERHEAD, o.FLASH, o.LAYOUT, o.KAPPA, o.WORK_CV, o.TRAIN_TOKENS,
    opt("--critical-batch", help="Gradient noise scale B_noise in sequences: adds statistical efficiency "
                                 "and time to target."),
    switch("--csv", dest="as_csv", help="Print one CSV row per point."),
    opt("--plot", help="Write efficiency/throughput curves to FILE.png or FILE.svg (needs matplotlib)."),
    o.STRATEGY_FILE, o.SET, o.JSON))
