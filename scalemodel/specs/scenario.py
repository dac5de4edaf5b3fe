"""A scenario: cluster + workload + training + strategy (+ the assertions `scalemodel check` verifies)."""


from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from scalemodel.specs.base import MAX_GPUS, Before, Spec, builtin_ref, field_error
from scalemodel.specs.cluster import ClusterSpec
from scalemodel.specs.training import StrategySpec, TrainingSpec
from scalemodel.specs.workload import Workload
from scalemodel.units import parse_quantity


def _time(v: Any) -> Any:
    return None if v is None else parse_quantity(v, "time")


def _money(v: Any) -> Any:
    return None if v is None else parse_quantity(v, "money")


def _limit(description: str) -> Meta:
    return Meta(extra_json_schema={"x-schema": {
        "anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}, {"type": "null"}],
        "description": description}})


def gpus_not_increasing(counts: list[int]) -> tuple[str, str] | None:
    """(what, allowed) where a sweep's GPU counts do not rise (the first is the baseline of every scaling efficiency
    and loss attribution, so a count below it gave an efficiency above 1), naming the first count at fault; None
    where they rise. fuzz39: ``--gpus 8,8,8,...`` (300 counts) printed the whole list and the error was cut at 300
    characters before it said what was allowed."""
    at = next((i for i, (a, b) in enumerate(zip(counts, counts[1:], strict=False)) if b <= a), None)
    if at is None:
        return None
    shown = ",".join(str(n) for n in counts)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    ok = ",".join(str(n) for n in sorted(set(counts)))
    return (f"GPU counts must increase (the first is the baseline of every efficiency), got {shown}: count {at + 2} "
            f"({counts[at + 1]}) is not above count {at + 1} ({counts[at]})",
            "strictly increasing counts, e.g. " + (ok if len(ok) <= 80 else ok[:77] + "..."))


class Assertions(Spec, kw_only=True):
    """Capacity-plan guards checked by ``scalemodel check``. Each is optional.

    Time limits accept units ("2s", "30 days"), cost "5e6" or "$5e6"; a bare number is seconds / USD.
    """

    min_scaling_efficiency: Annotated[Annotated[float, Meta(gt=0, le=1.5)] | None, Meta(
        description="per-GPU throughput at `at` GPUs relative to the first count in gpus")] = None
    at: Annotated[Annotated[int, Meta(gt=0)] | None, Meta(
        description="GPU count min_scaling_efficiency refers to (default: the largest)")] = None
    max_step_time: Annotated[Annotated[float, Meta(gt=0)] | None, Before(_time),
                             _limit("seconds, or a time with a unit (2s, 500 ms)")] = None
    min_mfu: Annotated[float, Meta(gt=0, le=1)] | None = None
    min_tokens_per_s: Annotated[float, Meta(gt=0)] | None = None
    must_fit_memory: bool | None = None
    max_cost_usd: Annotated[Annotated[float, Meta(gt=0)] | None, Before(_money),
                            _limit("USD (needs training.train_tokens and cluster.price_per_gpu_hour)")] = None
    max_time_to_train: Annotated[Annotated[float, Meta(gt=0)] | None, Before(_time),
                                 _limit("seconds, or a time with a unit (30 days); needs training.train_tokens")] = None


def _gpus(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    if isinstance(v, str):
        # blanks around a count are dropped, not inside one: "8 16" was read as 816 GPUs (round 15)
        parts = [x.strip() for x in v.split(",")]
        if len(parts) > 1 and not parts[-1]:
            parts.pop()  # one trailing comma
        if not all(x.isascii() and x.isdigit() and len(x) <= 9 for x in parts):
            blank = " (counts are separated by commas, not blanks)" if any(len(x.split()) > 1 for x in parts) else ""
            raise ValueError(f"cannot read GPU counts {v[:60]!r}{blank}; comma-separated integers, e.g. 128,256")
        return [int(x) for x in parts]
    return v


class ScenarioSpec(Spec, kw_only=True):
    kind: Literal["scenario"] = "scenario"
    name: str = "scenario"
    description: str = ""
    cluster: Annotated[ClusterSpec, builtin_ref("cluster")]
    model: Annotated[Workload, builtin_ref("workload")]
    # each count typed with its range: the allowed text of a refused entry said "an integer from -1e+09 to 1e+09"
    gpus: Annotated[list[Annotated[int, Meta(gt=0, le=MAX_GPUS)]], Before(_gpus), Meta(
        min_length=1, description="GPU count, or a list of counts for a sweep")]
    mode: Literal["weak", "strong"] = "weak"
    training: TrainingSpec = msgspec.field(default_factory=TrainingSpec)
    strategy: StrategySpec = msgspec.field(default_factory=StrategySpec)
    best: Annotated[bool, Meta(description="search the best strategy at each point (planner)")] = False
    assertions: Assertions | None = None

    def _check(self) -> None:
        if any(not 0 < g <= MAX_GPUS for g in self.gpus):
            raise field_error("gpus", f"GPU counts must be positive integers up to {MAX_GPUS:.0e}",
                              f"a GPU count or a list of counts, each from 1 to {MAX_GPUS:.0e}")
        said = gpus_not_increasing(self.gpus)
        if said is not None:
            raise field_error("gpus", *said)
