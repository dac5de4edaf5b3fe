"""Options and helpers of the commands that read only a cluster (collective): no workload, training or
framework specs are imported for them. commands/common.py re-exports all of it."""

from __future__ import annotations

import math
from typing import Any

from scalemodel.commands.args import opt, repeat, switch
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, note_tier_bandwidth, split_overrides
from scalemodel.specs.base import MAX_SPEC_INT
from scalemodel.specs.quantities import outside_range, range_text
from scalemodel.units import parse_quantity

SET = repeat("--set", dest="sets", metavar="PATH=VALUE",
             help="Override any spec field, e.g. cluster.tiers.ib-leaf.bandwidth=100Gbps or model.layers=48 "
                  "(repeatable; roots: cluster, accelerator, model, training, strategy).")
#: ``--set`` of a command that reads a cluster and nothing else (collective): its help names only the roots it reads.
CLUSTER_SET = repeat("--set", dest="sets", metavar="PATH=VALUE",
                     help="Override a field of the cluster or its accelerator, e.g. "
                          "cluster.tiers.ib-leaf.bandwidth=100Gbps or accelerator.memory=80GB (repeatable; roots: "
                          "cluster, accelerator).")
JSON = switch("--json", dest="as_json", help="Print one strictly valid JSON document instead of tables.")
CLUSTER = opt("--cluster", "-c", complete="cluster", help="Built-in cluster name or a cluster YAML file.")


def quantity(text: str, kind: str, option: str) -> float:
    """Parse a CLI quantity; errors name the option."""
    try:
        return parse_quantity(text, kind)
    except InputError as exc:
        raise exc.at(option) from None


def ranged_quantity(text: str, kind: str, option: str) -> float:
    """:func:`quantity` within the physical range of its kind (specs.quantities.RANGES; zero passes, the sign is
    the caller's to check): a huge or tiny value is refused here, naming the option, instead of overflowing to
    inf or nan in a cost model and ending in a generic "not finite" error."""
    return in_range(quantity(text, kind, option), kind, option)


def in_range(x: float, kind: str, option: str) -> float:
    """``x`` if within the physical range of its kind (specs.quantities.RANGES; zero passes), else an InputError
    naming ``option``: :func:`ranged_quantity`'s check, for a number given as one (the Python API's)."""
    why = outside_range(x, kind)
    if why is not None:
        raise InputError(why, where=option, allowed=f"{range_text(kind)} (the physical range of a {kind} quantity)")
    return x


def load_cluster_with(ref: str, sets: list[str] | None, command: str) -> Any:
    """The cluster with the ``--set`` items of a ``command`` that reads nothing else. A model, training or strategy
    item is refused: ``collective --set model.layers=4`` (even ``training.micro_batch=0``) was dropped without a
    word."""
    routed = split_overrides(sets or [])
    for root in ("model", "training", "strategy"):
        if routed[root]:
            shown = getattr(routed[root][0], "shown", root)
            raise InputError(f"{command} reads only the cluster; a {root} field is not used", where=f"--set {shown}",
                             allowed="cluster.<field> or accelerator.<field>, e.g. cluster.tiers.ib.bandwidth=100Gbps")
    cluster = load_cluster(ref, routed["cluster"])
    note_tier_bandwidth(cluster, routed["cluster"])
    return cluster


def comma_list(text: str) -> list[str]:
    """A comma-separated option value (--sync-modes, --factors, --allow; the API's sync_modes / factors given as one
    string) as its items, spaces around each dropped and empty items left out: "bsp, ssp:2" is ['bsp', 'ssp:2']."""
    return [item.strip() for item in text.split(",") if item.strip()]


#: The largest count any command accepts (GPUs, ranks): beyond any machine, and within int64 arithmetic.
MAX_COUNT = 10**8


#: The largest --staleness-kappa taken: efficiency 1/(1 + kappa s) is then below 1e-6 at one step of staleness
#: (fitted kappas are below 1, scalemodel/data/staleness_kappa.json); beyond ~1e307 the product overflows to inf
#: and the efficiency to 0, which no step time can be divided by.
KAPPA_MAX = 1e6


def check_kappa(kappa: float | None, option: str = "--staleness-kappa") -> None:
    """The same range for --staleness-kappa in every command that takes it (stragglers, predict, scale)."""
    if kappa is not None and not (math.isfinite(kappa) and 0 <= kappa <= KAPPA_MAX):
        raise InputError(f"{option} must be a finite number from 0 to {KAPPA_MAX:.0e}, got {kappa:g}", where=option,
                         allowed=f"a number from 0 to {KAPPA_MAX:.0e} (0: no staleness penalty)")


def positive_int(value: int | None, option: str, cap: int = MAX_COUNT) -> None:
    if value is not None and not 1 <= value <= cap:
        raise InputError(f"{option} must be a positive integer up to {cap:.0e}, got {value}", where=option,
                         allowed=f"an integer from 1 to {cap:.0e}")


#: The largest micro-batch, global batch (sequences per step, given or derived as dp x micro-batch) and sequence
#: length any command accepts: TrainingSpec's integer bound (specs.base.MAX_SPEC_INT), the same in every command.
#: ``scale`` capped --seq-len, --micro-batch and --global-batch at MAX_COUNT (1e8), ``plan`` --global-batch too, where
#: predict, memory and sensitivity took 1e9.
MAX_BATCH = MAX_SPEC_INT
#: The training options bounded by MAX_BATCH: TrainingSpec field -> option.
BATCH_OPTIONS = {"micro_batch": "--micro-batch", "global_batch": "--global-batch", "seq_len": "--seq-len"}


def batch_counts(values: dict[str, Any]) -> None:
    """Refuse a --micro-batch, --global-batch or --seq-len (``values``: TrainingSpec field -> the option's value,
    None when not given) outside 1 to :data:`MAX_BATCH`, naming the option."""
    for key, option in BATCH_OPTIONS.items():
        positive_int(values.get(key), option, MAX_BATCH)
