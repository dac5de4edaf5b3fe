"""Capacity checks for CI: a scenario plus assertions, each verified against the step model.

A capacity file is a :class:`~scalemodel.specs.ScenarioSpec` (cluster, model, gpus, mode, training,
strategy, best) with an ``assertions:`` block. The scenario is evaluated at every GPU count with
:func:`scalemodel.engine.scaling.sweep` (the same sweep `scalemodel scale` prints, so the two always
agree); then

- ``min_scaling_efficiency`` (+ ``at``, default the largest count) compares the scaling efficiency
  at ``at`` GPUs: per-GPU throughput relative to the first count in ``gpus``,
  E = (X_at / at) / (X_0 / N_0), weak or strong as the scenario's ``mode`` says;
- every single-size assertion (``max_step_time``, ``min_mfu``, ``min_tokens_per_s``,
  ``max_time_to_train``, ``max_cost_usd``) is checked at the largest GPU count; ``must_fit_memory`` at every
  count (the tightest is reported: a strong scenario's smallest count holds the most per GPU);
- time to train = train_tokens / (tokens/s x sync statistical efficiency), or, when
  ``training.critical_batch`` is set, the sweep's time to target (the larger weak-scaling batch
  needs more samples, McCandlish et al. 2018); cost = time to train x N x price per GPU-second.

An assertion that cannot be computed (cost without a price or without train_tokens, an efficiency
with one GPU count, ``at`` not among the counts) is an :class:`~scalemodel.errors.InputError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalemodel.engine.divisors import divisors
from scalemodel.engine.intervals import runs_phrase
from scalemodel.engine.job import held_gpus, scenario_training_fits
from scalemodel.engine.scaling import sweep
from scalemodel.engine.step import Infeasible
from scalemodel.errors import InputError, Origin
from scalemodel.specs import ScenarioSpec, note_tier_bandwidth, notices, scenario_cluster_items
from scalemodel.specs.hf import seq_len_note
from scalemodel.specs.loader import load_scenario_spec

#: Assertion name -> (unit, comparison). Order = display order.
ASSERTIONS: dict[str, tuple[str, str]] = {
    "min_scaling_efficiency": ("fraction", ">="),
    "max_step_time": ("s", "<="),
    "min_mfu": ("fraction", ">="),
    "min_tokens_per_s": ("tokens/s", ">="),
    "must_fit_memory": ("bytes", "<="),
    "max_time_to_train": ("s", "<="),
    "max_cost_usd": ("USD", "<="),
}


@dataclass
class Verdict:
    name: str
    limit: float
    value: float
    passed: bool
    at_gpus: int
    unit: str
    comparison: str  # ">=" or "<=": value must be ... limit

    def payload(self) -> dict[str, Any]:
        return {"name": self.name, "limit": self.limit, "value": self.value, "passed": self.passed,
                "at_gpus": self.at_gpus, "unit": self.unit, "comparison": self.comparison}


@dataclass
class CheckResult:
    inputs: dict[str, Any]
    name: str
    mode: str
    largest_gpus: int
    reference_gpus: int
    verdicts: list[Verdict]
    points: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def payload(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "passed": self.passed,
                "assertions": [v.payload() for v in self.verdicts],
                "points": self.points, "notes": self.notes}


# --- loading ---------------------------------------------------------------------------------------

def load_capacity(ref: str | Path, overrides: list[str] | None = None) -> tuple[Any, str]:
    """Read a capacity file as a ScenarioSpec (see :func:`scalemodel.specs.loader.load_scenario_spec`)."""
    return load_scenario_spec(str(ref), ScenarioSpec, overrides or [])  # type: ignore[no-any-return]


# --- evaluation ------------------------------------------------------------------------------------

def _active(assertions: Any) -> dict[str, Any]:
    if assertions is None:
        return {}
    out = {k: getattr(assertions, k) for k in ASSERTIONS if getattr(assertions, k) is not None}
    if out.get("must_fit_memory") is False:
        del out["must_fit_memory"]
    return out


#: The scale options the sweep's errors name, and the scenario fields that hold those values in a check.
_SCENARIO_FIELDS = {"--global-batch": "training.global_batch", "--gpus": "gpus",
                    "--micro-batch": "training.micro_batch"}


def _refuse_segment_split(scenario: Any, strategy: dict[str, Any], reason: str, prefix: str,
                          set_names: list[str]) -> None:
    """A pipeline depth that contradicts the model's hybrid '|' segments is the strategy's pp (or schedule), not the
    GPU count: the segments are the stages, pp x v of them (Megatron-LM validate_args at d98e8a64, engine.step
    _split_ok), whatever the GPUs. It was refused under "gpus:", a field no GPU count could mend."""
    hybrid = getattr(scenario.model, "hybrid", None)
    segments = hybrid.pattern.count("|") + 1 if hybrid is not None else 1
    if segments < 2 or reason not in (Infeasible.LAYERS_NOT_DIVISIBLE.text, Infeasible.INTERLEAVE_INVALID.text):
        return
    pp = int(strategy.get("pp", 1))
    schedule = str(strategy.get("schedule", "1f1b"))
    v = int(schedule.split(":", 1)[1]) if schedule.startswith("interleaved:") and schedule[12:].isdigit() else 1
    if pp <= 1 or pp * v == segments:
        return  # another cause (first/last stage layers, micro-batches): the general message says it
    name = "schedule" if v > 1 and segments % pp == 0 else "pp"
    where = f"--set strategy.{name}" if name in set_names else f"{prefix}strategy.{name}"
    fits = [f"pp {q} with interleaved:{segments // q}" if q < segments else f"pp {q} with 1f1b"
            for q in divisors(segments).tolist() if q >= 2]
    raise InputError(f"pp {pp}{f' x v {v}' if v > 1 else ''} = {pp * v} pipeline stages, but the model's hybrid "
                     f"pattern has {segments} '|' segments, which are the stages (Megatron-LM runs pp x v = "
                     f"segments)", where=where,
                     allowed=f"pp x v = {segments}: {', '.join(fits[:6])}{', ...' if len(fits) > 6 else ''}"
                             f" (or pp 1), or a pattern of pp x v segments")


def _scenario_sweep(scenario: Any, source: str, sets: list[str] | None, straggler_cv: float | None = None, *,
                    check_only: bool = False) -> tuple[Any, list[str]]:
    """The scenario's sweep (scaling.sweep) with its refusals named at the scenario's fields or the --set items that
    wrote them; ``check_only``: every point's strategy checks (job.grid_from_strategy), nothing priced. Returns the
    result and the strategy fields --set."""
    prefix = f"{source}: " if source else ""
    # the strategy's fields are the file's (or a --set item's): an ep the file sets was refused as "--ep: --ep 4"
    set_names = [key.split(".")[1] for key in (item.split("=", 1)[0].strip() for item in sets or ())
                 if key.startswith("strategy.")]
    try:
        origin = Origin(f"{prefix}strategy.", f"{prefix}gpus", tuple((k, f"--set strategy.{k}") for k in set_names))
        result = sweep(scenario.cluster, scenario.model, scenario.training, scenario.strategy, list(scenario.gpus),
                       scenario.mode, best=scenario.best, straggler_cv=straggler_cv, origin=origin,
                       check_only=check_only)
    except InputError as exc:  # the sweep names scale's options; here the values are the scenario's fields
        field = _SCENARIO_FIELDS.get(exc.where)
        if field is None and exc.where.startswith("training."):  # the engine's refusal of a training field (fp4 off
            # Blackwell, bf16_layers over the layers) was "training.precision: ...", the scenario file unnamed
            if any(item.split("=", 1)[0].strip() == exc.where for item in sets or ()):
                raise InputError(exc.what, where=f"--set {exc.where}", allowed=exc.allowed) from None
            field = exc.where
        if field is None:
            raise
        raise InputError(exc.what, where=prefix + field, allowed=exc.allowed) from None
    return result, set_names


def scenario_strategy_fits(scenario: Any, source: str, sets: list[str] | None = None) -> None:
    """``hardware validate`` of a scenario: the strategy refusals ``check`` makes before pricing (the ones predict
    makes: job.grid_from_strategy, e.g. moe_allgather_dispatcher with moe_a2a_overlap, sequence_parallel false for
    an MoE model at tp > 1, degrees that do not divide the GPU counts), at every GPU count of the scenario, named as
    check names them. Not run: what only the step model finds (a candidate infeasible at a count, out of memory),
    which needs pricing, and a ``best: true`` scenario's strategy, which plan's search picks."""
    scenario.cluster.require_gpus(max(scenario.gpus), f"{source}: gpus" if source else "gpus")
    _scenario_sweep(scenario, source, sets, check_only=True)


def run_check(scenario: Any, *, source: str = "", straggler_cv: float | None = None,
              inputs: dict[str, Any] | None = None, pessimistic: bool = False,
              sets: list[str] | None = None) -> CheckResult:
    """Evaluate the scenario's assertions. Raises InputError when one cannot be computed.

    ``source`` (the file) prefixes error locations. ``pessimistic`` checks the step time, MFU,
    throughput, time to train and cost at the slow end of the prediction interval
    (engine/intervals.py) instead of the point prediction.
    """
    prefix = f"{source}: " if source else ""
    where = prefix + "assertions"

    a = scenario.assertions
    active = _active(a)
    at = a.at if a is not None else None
    if not active:
        raise InputError("the scenario has no assertions to check", where=where,
                         allowed="an assertions: block with e.g. max_step_time: 2s, min_mfu: 0.35, "
                                 "min_scaling_efficiency: 0.7 (+ at: N), must_fit_memory: true, max_cost_usd: 5e6")
    gpus = list(scenario.gpus)
    largest = max(gpus)
    scenario.cluster.require_gpus(largest, f"{prefix}gpus")
    if at is not None and "min_scaling_efficiency" not in active:
        raise InputError("'at' only applies to min_scaling_efficiency", where=f"{where}.at",
                         allowed="add min_scaling_efficiency, or remove at (other assertions use the largest count)")
    if "min_scaling_efficiency" in active:
        if len(gpus) < 2:
            raise InputError(f"needs at least two GPU counts in gpus, got {gpus}",
                             where=f"{where}.min_scaling_efficiency",
                             allowed="gpus: [128, 2048] (efficiency is relative to the first count)")
        target = at if at is not None else largest
        if target not in gpus:
            raise InputError(f"at: {target} is not one of the scenario's GPU counts {gpus}", where=f"{where}.at",
                             allowed=f"one of {', '.join(map(str, gpus[1:]))}")
        if target == gpus[0]:
            raise InputError(f"at: {target} is the reference (first) count, where efficiency is 1 by definition",
                             where=f"{where}.at", allowed=f"one of {', '.join(map(str, gpus[1:]))}")
    else:
        target = largest
    training = scenario.training
    price = float(scenario.cluster.price_per_gpu_hour or 0.0)  # USD per GPU-second internally
    needs_tokens = [k for k in ("max_time_to_train", "max_cost_usd") if k in active]
    if needs_tokens and not (training.train_tokens or training.train_samples):
        raise InputError("needs the amount of training: training.train_tokens is not set",
                         where=f"{where}.{needs_tokens[0]}",
                         allowed="set training.train_tokens (e.g. 300B) in the scenario, "
                                 "or --set training.train_tokens=300B")
    if "max_cost_usd" in active and price <= 0:
        # a price of 0 (--set cluster.price_per_gpu_hour=0) was reported as "has no price_per_gpu_hour"
        has = "no price_per_gpu_hour" if scenario.cluster.price_per_gpu_hour is None else "a price_per_gpu_hour of 0"
        raise InputError(f"the cluster {scenario.cluster.name!r} has {has}, so cost cannot be computed",
                         where=f"{where}.max_cost_usd",
                         allowed="set cluster.price_per_gpu_hour (e.g. cluster: {extends: dgx-h100, "
                                 "price_per_gpu_hour: 2.5 USD/h}) or --set cluster.price_per_gpu_hour=2.5USD/h")

    scenario_training_fits(scenario, source, sets)  # what hardware validate of the scenario runs too
    result, set_names = _scenario_sweep(scenario, source, sets, straggler_cv)
    by_gpus = {p.gpus: p for p in result.points}
    big = by_gpus[largest]
    pred = big.prediction
    # the documented default critical batch prices nothing here (the time to train is train_tokens over the
    # throughput unless the scenario gives training.critical_batch, and check prints no statistical efficiency), so
    # scale's note on it, "critical batch 1830 sequences: the documented default ...", was noise on every check
    notes = [n for n in result.notes if n != result.default_critical_batch_note]
    for p in result.points:
        reason = p.prediction.infeasible_reason
        # memory alone is reported (must_fit_memory, or a note); any other reason is a strategy that cannot run. It
        # was let through whenever the strategy also overflowed memory: heads that tp or the a2a group does not
        # divide, at 118 GB on an 80 GB part, passed max_step_time with exit 0
        if reason is not None and reason != Infeasible.OUT_OF_MEMORY.text:
            _refuse_segment_split(scenario, p.prediction.strategy, reason, prefix, set_names)
            raise InputError(f"the strategy is invalid at {p.gpus} GPUs: {reason}", where=prefix + "gpus",
                             allowed="change the strategy, the GPU counts or the global batch")

    # the time to target only where the scenario gives its critical batch (module docstring): the documented
    # default B_noise (Kaplan's WebText2-era fit) made a weak scenario's time to train and cost those of more tokens
    # than train_tokens (x (1 + B/B_noise) / (1 + b0/B_noise), +37 % for Llama 3 70B at 256 -> 1024 sequences), so
    # check disagreed with predict's time to train for the same job
    explicit = training.critical_batch is not None
    time_to_train = (big.time_to_target_s if explicit and big.time_to_target_s is not None
                     else pred.time_to_train_s)
    slow = 1.0  # the slow end of the interval, as a factor on the step time
    if pessimistic:
        if pred.interval is None:
            raise InputError("no prediction interval is available (no validation residuals shipped)",
                             where="--pessimistic", allowed="check without --pessimistic")
        slow = max(1.0 + pred.interval["speed_error_range"][1], 1.0)
        # on a calibrated cluster, as predict's line: which of the calibration's errors, or why the published runs'
        # (a size 4x beyond the runs read "18 published runs" on the user's own overlay without a reason)
        basis = f": {pred.interval['basis']}" if pred.interval.get("calibration") is not None else ""
        notes.append(f"--pessimistic: times x {slow:.3f} and rates / {slow:.3f}, the slow end of the interval "
                     f"({' '.join(pred.interval['family'].values()) or 'all runs'}, "
                     f"{runs_phrase(pred.interval)}{basis})")
    values: dict[str, tuple[float, float, int]] = {}  # name -> (value, limit, at_gpus)
    for name, limit in active.items():
        if name == "min_scaling_efficiency":
            values[name] = (by_gpus[target].scaling_efficiency, float(limit), target)
        elif name == "max_step_time":
            values[name] = (pred.step_time_s * slow, float(limit), largest)
        elif name == "min_mfu":
            values[name] = (pred.flops["mfu"] / slow, float(limit), largest)
        elif name == "min_tokens_per_s":
            values[name] = (pred.throughput["tokens_per_s"] / slow, float(limit), largest)
        elif name == "must_fit_memory":
            # every count, not only the largest (a strong scenario's smallest count holds the most per GPU, and the
            # note below promised "add must_fit_memory: true to fail on it" for a count that did not fit): the
            # tightest point is reported, the largest count among equals
            tight = max(result.points, key=lambda p: (p.prediction.memory["per_gpu_bytes"]
                                                      / p.prediction.memory["capacity_bytes"], p.gpus))
            values[name] = (tight.prediction.memory["per_gpu_bytes"], tight.prediction.memory["capacity_bytes"],
                            tight.gpus)
        elif name in ("max_time_to_train", "max_cost_usd"):
            if time_to_train is None:
                raise InputError("time to train cannot be computed (zero throughput)", where=f"{where}.{name}",
                                 allowed="a job with a positive throughput, or leave this assertion out")
            # the GPUs held: backup:B's replicas run beside the largest count (job.held_gpus; review26f)
            st = pred.strategy
            held = held_gpus(st["sync"], largest, st["tp"] * st["pp"] * st["cp"])
            value = time_to_train * slow if name == "max_time_to_train" else time_to_train * slow * held * price
            values[name] = (value, float(limit), largest)
    verdicts = []
    for name, (value, limit, n) in values.items():
        unit, cmp = ASSERTIONS[name]
        passed = value >= limit if cmp == ">=" else value <= limit
        if name == "must_fit_memory":
            passed = all(bool(p.prediction.memory["fits"]) for p in result.points)
        verdicts.append(Verdict(name=name, limit=limit, value=float(value), passed=bool(passed), at_gpus=n,
                                unit=unit, comparison=cmp))
    if "must_fit_memory" not in active:
        unfit = [p.gpus for p in result.points if not p.prediction.memory["fits"]]
        if unfit:
            notes.append(f"the strategy does not fit in memory at {', '.join(map(str, unfit))} GPUs "
                         "(add must_fit_memory: true to fail on it)")
    points = [{"gpus": p.gpus, "global_batch": p.global_batch, "step_time_s": p.prediction.step_time_s,
               "tokens_per_s": p.prediction.throughput["tokens_per_s"],
               "tokens_per_s_per_gpu": p.prediction.throughput["tokens_per_s_per_gpu"],
               "scaling_efficiency": p.scaling_efficiency, "mfu": p.prediction.flops["mfu"],
               "memory_per_gpu_bytes": p.prediction.memory["per_gpu_bytes"], "fits": p.prediction.memory["fits"],
               "strategy": p.prediction.strategy,
               # an infeasible point's band is null, as predict's, but for the largest under --pessimistic: its
               # verdicts read that band's slow end (an out-of-memory point is checked, its memory reported)
               "interval": pred.interval if pessimistic and p.gpus == largest else p.prediction.reported_interval}
              for p in result.points]
    return CheckResult(inputs=inputs or {}, name=scenario.name, mode=scenario.mode, largest_gpus=largest,
                       reference_gpus=gpus[0], verdicts=verdicts, points=points, notes=notes)


def check_file(ref: str | Path, overrides: list[str] | None = None, *,
               straggler_cv: float | None = None, pessimistic: bool = False) -> CheckResult:
    """Load a capacity file and check it (the engine behind `scalemodel check`)."""
    spec, path = load_capacity(ref, overrides)
    note_tier_bandwidth(spec.cluster, scenario_cluster_items(overrides or []))  # as predict's --set says it
    note = seq_len_note(spec.model, spec.training.seq_len, "training.seq_len")
    if note:
        notices.warn(note)
    inputs = {"file": str(ref), "set": list(overrides or []), "scenario": spec.name, "cluster": spec.cluster.name,
              "model": spec.model.name, "gpus": list(spec.gpus), "mode": spec.mode, "best": spec.best,
              "seq_len": spec.training.seq_len or getattr(spec.model, "seq_len", None),
              "training": spec.training.model_dump(mode="json"), "strategy": spec.strategy.model_dump(mode="json"),
              "assertions": spec.assertions.model_dump(mode="json", exclude_none=True) if spec.assertions else {},
              "pessimistic": pessimistic}
    return run_check(spec, source=str(path), straggler_cv=straggler_cv, inputs=inputs, pessimistic=pessimistic,
                     sets=overrides)
