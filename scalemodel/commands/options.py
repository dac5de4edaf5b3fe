"""Options and helpers of the commands that read only a cluster (collective): no workload, training or
framework specs are imported for them. commands/common.py re-exports all of it."""

from __future__ import annotations

from typing import Any

from scalemodel.commands.args import opt, repeat, switch
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, split_overrides
from scalemodel.specs.quantities import outside_range, range_text
from scalemodel.units import parse_quantity

SET = repeat("--set", dest="sets", metavar="PATH=VALUE",
             help="Override any spec field, e.g. cluster.tiers.ib.bandwidth=100Gbps or model.layers=48 "
                  "(repeatable; roots: cluster, accelerator, model, training, strategy).")
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
    x = quantity(text, kind, option)
    why = outside_range(x, kind)
    if why is not None:
        raise InputError(why, where=option, allowed=f"{range_text(kind)} (the physical range of a {kind} quantity)")
    return x


def load_cluster_with(ref: str, sets: list[str] | None) -> Any:
    return load_cluster(ref, split_overrides(sets or [])["cluster"])


#: The largest count any command accepts (GPUs, ranks): beyond any machine, and within int64 arithmetic.
MAX_COUNT = 10**8


def positive_int(value: int | None, option: str) -> None:
    if value is not None and not 1 <= value <= MAX_COUNT:
        raise InputError(f"{option} must be a positive integer up to {MAX_COUNT:.0e}, got {value}", where=option,
                         allowed=f"an integer from 1 to {MAX_COUNT:.0e}")
