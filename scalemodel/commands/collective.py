"""`scalemodel collective`: time, algbw and busbw of one collective per algorithm, for one size or a sweep."""

from __future__ import annotations

import math

from scalemodel.commands.args import Command, integer, opt
from scalemodel.commands.options import CLUSTER, CLUSTER_SET, JSON, load_cluster_with, positive_int, ranged_quantity
from scalemodel.engine.collective import collective as run
from scalemodel.errors import InputError
from scalemodel.report.collective import render_collective

#: The most message sizes one --sizes sweep prices (nccl-tests' -b 8 -e 8G -f 2 is 31).
MAX_SIZES = 200


def parse_sizes(text: str) -> list[float]:
    """``"1KiB:8GiB"`` -> 1 KiB, 2 KiB, ... 8 GiB (factor 2, as nccl-tests ``-f 2``); ``"a:b:f"`` sets the factor."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise InputError(f"cannot read {text!r} as a size sweep", where="--sizes", allowed="MIN:MAX or MIN:MAX:FACTOR")
    lo = ranged_quantity(parts[0], "bytes", "--sizes")
    hi = ranged_quantity(parts[1], "bytes", "--sizes")
    # ASCII digits: str.isdigit() is true for '²', which float() refuses (a traceback)
    plain = len(parts) == 3 and parts[2].isascii() and parts[2].replace(".", "", 1).isdigit()
    factor = float(parts[2]) if plain else 2.0
    if len(parts) == 3 and not plain:
        raise InputError(f"bad factor {parts[2]!r}", where="--sizes", allowed="a number > 1")
    if not (0 < lo <= hi) or factor <= 1:
        raise InputError(f"sweep {text!r} must have 0 < MIN <= MAX and factor > 1", where="--sizes",
                         allowed="e.g. 1KiB:8GiB")
    # MIN:MAX:1.0000001 stopped at 200 sizes a millionth apart without a word, MAX never reached
    count = math.floor(math.log(hi / lo) / math.log(factor) * (1 + 1e-12)) + 1
    if count > MAX_SIZES:
        raise InputError(f"sweep {text!r} has {count:,} sizes", where="--sizes",
                         allowed=f"at most {MAX_SIZES}: a larger FACTOR or a narrower MIN:MAX, e.g. 1KiB:8GiB (x2)")
    out: list[float] = []
    s = lo
    while s <= hi * (1 + 1e-12) and len(out) < MAX_SIZES:
        out.append(s)
        s *= factor
    return out


def collective(*, cluster: str, gpus: int, op: str, size: str | None, sizes: str | None, algo: str, stride: int,
               dtype_bytes: int, sets: list[str] | None, as_json: bool) -> None:
    """Predict one collective's time, algbw and busbw for every algorithm, and the best (nccl-tests style)."""
    positive_int(gpus, "--gpus")
    positive_int(stride, "--stride")
    positive_int(dtype_bytes, "--dtype-bytes")
    if size is not None and sizes is not None:
        raise InputError("give --size or --sizes, not both", where="--size", allowed="one of them")
    # fuzz35: `size or "1GiB"` took --size '' for the default
    size_list = parse_sizes(sizes) if sizes is not None else [
        ranged_quantity("1GiB" if size is None else size, "bytes", "--size")]
    spec = load_cluster_with(cluster, sets, "collective")
    result = run(spec, op, size_list, gpus, algo=algo, stride=stride, dtype_bytes=dtype_bytes, sets=sets)
    render_collective(result, as_json=as_json)


COMMAND = Command("collective", collective, (
    CLUSTER.but(required=True),
    opt("--gpus", "-n", type=integer, required=True, help="Ranks in the collective."),
    opt("--op", default="allreduce", help="allreduce|reducescatter|allgather|alltoall|broadcast|reduce|sendrecv"),
    opt("--size", help="Message size as nccl-tests counts it (default 1GiB)."),
    opt("--sizes", help="Sweep MIN:MAX[:FACTOR] (x2 steps unless FACTOR is given), e.g. 1KiB:8GiB."),
    opt("--algo", default="auto", help=(
        "ring|tree|rhd|rd|direct|hierarchical|auto. auto picks the fastest of what NCCL implements "
        "(ring, tree; hierarchical = NVLS/CollNet only where a tier declares in-network reduction; "
        "direct for alltoall/sendrecv; all algorithms on TPU/ICI clusters); rhd, rd, direct and "
        "hierarchical can always be named explicitly.")),
    opt("--stride", type=integer, default=1, help="Spacing of the group's ranks in GPU order."),
    opt("--dtype-bytes", type=integer, default=2, help="Element size in bytes."),
    CLUSTER_SET, JSON))
