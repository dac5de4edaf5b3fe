"""review32c: a review of tpu32 (broadcast / reduce / Bruck's all-to-all priced on a torus) and valid32 (the
``framework:`` fields of validation/training_cases.yaml and their checks).

tpu32: (1) every link count tpu32's tests assert, recounted here by hand on 4 x 4 (and its 16 x 16 figures);
(2) physics: on 4 x 4, 4 x 4 x 4, 16 x 16 (and 4 x 3) every algorithm row of ``scalemodel collective`` costs at least
what ANY schedule needs: the bytes a node must take in or put out over its ``2n`` links, for an all-to-all the bytes
that must cross the torus's bisection, and the farthest rank's hops; ``best`` is the table's minimum.

valid32: the refusal paths of ``check_row`` that gave a traceback or let a bad value through (one ``error:`` line,
exit 2): a row that is not a mapping, a key repeated in a mapping (YAML keeps the last silently), an infinite number,
an empty list of names.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import script_module

import scalemodel.api as api
from scalemodel.cost import topology as T
from scalemodel.errors import InputError

ALPHA = 0.75e-6  # the clusters below: a v5e ICI hop (hardware/clusters/tpu-v5e-pod.yaml)
BW, EFF = 200e9, 0.80  # the tier's per-chip bandwidth (sum over its 2n links) and efficiency


def _cluster(dims: tuple[int, ...]) -> dict:
    p = int(np.prod(dims))
    return {"extends": "tpu-v5e-pod", "max_gpus": p, "gpus_per_node": 4, "tiers": [
        {"name": "ici", "span": p, "bandwidth": "200 GB/s", "latency": "0.75 us", "efficiency": EFF,
         "in_network_reduction": False, "topology": "torus", "torus_dims": list(dims), "protocol": "ici"}]}


# --- (1) the counts by hand on 4 x 4 (ranks r = x + 4 y; dimension-ordered routes, the raw direction on a tie) ------

def test_bruck_rounds_on_4x4_by_hand() -> None:
    """Round k sends the 8 blocks with bit k set 2^k ranks ahead. k=0: +1 in x, x=3 wraps to x=0 and carries one hop
    in y: 2 hops, every link one message. k=1: +2 in x (a tie: x=0,1 go +, x=2,3 go - and carry +1 in y): 3 hops, the
    +x link out of x=1 (from x=0 and x=1) and the -x link out of x=2 carry 2. k=2: +1 in y, 1 hop, 1 message. k=3: +2
    in y (a tie), 2 hops, 2 messages on the +y link out of y=1. Time 8 alpha + (1 + 2 + 1 + 2) x 8 (S/16) / B."""
    assert T.bruck_loads((4, 4)) == ((2, 1, 8), (3, 2, 8), (1, 1, 8), (2, 2, 8))
    S, B = float(1 << 30), 4e10
    assert float(T.torus_bruck(S, (4, 4), ALPHA, B)) == pytest.approx(8 * ALPHA + 3 * S / B, rel=1e-12)


def test_chain_on_4x4_by_hand() -> None:
    """Broadcast 0 -> .. -> 15: 15 chain edges of one hop, the three r -> r + 1 with x = 3 one more (the carry into
    y): H = 18; no two edges share a directed link: E = 1. Reduce: NCCL's ring runs the same direction, from the
    rank after the root to the root (src/device/reduce.h: ``prevRank == root`` sends, the root receives last):
    1 -> .. -> 15 (14 edges, 3 carries) then 15 -> 0, the x and the y wraparound links: H = 19 (tpu32 ran it back,
    15 -> .. -> 0: 18, the direction NCCL does not use). 16 x 16: 255 + 15 = 270, the reduce 254 + 15 + 2 = 271;
    4 x 4 x 4: 63 + 15 + 3 = 81, the reduce 62 + 15 + 3 + 3 = 83."""
    assert T.chain_loads((4, 4)) == (18, 1)
    assert T.chain_loads((4, 4), True) == (19, 1)
    assert T.chain_loads((16, 16)) == (270, 1)
    assert T.chain_loads((16, 16), True) == (271, 1)
    assert T.chain_loads((4, 4, 4), True) == (83, 1)


def test_tree_sweeps_on_4x4_by_hand() -> None:
    """NCCL's tree on 16 ranks (0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 14; even r -> r +- 1) and its mirror 15 - r
    (trees.cc ncclGetDtree: even nranks mirror). Deepest path: 1 -> 2 (1 hop) -> 4 (2 in x, 1 in y) -> 8 (1) -> 0
    (2) = 7 hops. Down sweep: the +x links out of (0,1), (1,1), (0,3), (1,3) carry 4 -> 2 and 4 -> 6 (and 12 -> 10,
    14) in tree 1; the mirror puts 2 on (2,2)-x, (2,0)-x, (3,2)-x, (3,0)-x; with tree 1's 10 -> 9 on (2,2)-x and the
    mirror of it on (1,1)+x, the busiest link passes 3. Up sweep: every tree-1 link carries 1, the mirror adds 1 on
    the +x links out of x=1 and the -x links out of x=2: 2. Both sweeps on (2,2)-x: 3 + 2 = 5."""
    assert T.tree_loads((4, 4), "down") == (3, 7)
    assert T.tree_loads((4, 4), "up") == (2, 7)
    assert T.tree_loads((4, 4)) == (5, 7)


def test_rhd_broadcast_and_reduce_on_4x4_and_16x16_by_hand() -> None:
    """4 x 4 broadcast: scatter masks 8, 4, 2, 1 = 2, 1, 2, 1 hops, one message each of S/2, S/4, S/8, S/16; the
    rd all-gather's partners r ^ 1, 2, 4, 8 = 1, 2, 1, 2 hops, 1, 2, 1, 2 messages of S/16, S/8, S/4, S/2 on the
    busiest link: 12 alpha + (15/16 + 25/16) S/B. Reduce: the halving reduce-scatter 1, 2, 1, 2 hops with 1, 2, 1, 2
    messages of S/2, S/4, S/8, S/16 (5/4 S/B), the binomial gather the same reversed: 12 alpha + 5/2 S/B.
    16 x 16: hops 2 x (1 + 2 + 4 + 8) x 2 = 60; broadcast 255/256 + (85 + 1360)/256 = 1700/256 S/B; reduce
    2 x (2 + 1/8) = 17/4 S/B."""
    S, B = float(1 << 30), 4e10
    for dims, hops, bcast, red in (((4, 4), 12, 2.5, 2.5), ((16, 16), 60, 1700 / 256, 4.25)):
        for op, coef in (("broadcast", bcast), ("reduce", red)):
            got = T.torus_scatter_gather(S, dims, ALPHA, B, op=op)
            assert got is not None
            assert float(got) == pytest.approx(hops * ALPHA + coef * S / B, rel=1e-12)


# --- (2) no row beats what any schedule needs; best is the minimum ---------------------------------------------------

#: Fraction of S a node must take in (all-reduce, all-gather, reduce-scatter, all-to-all: nccl-tests sizes) or, for
#: broadcast the non-root nodes / for reduce the root, receive: the only way in is the node's 2n links.
NODE_BYTES = {"allreduce": lambda p: 2 * (p - 1) / p, "reducescatter": lambda p: (p - 1) / p,
              "allgather": lambda p: (p - 1) / p, "alltoall": lambda p: (p - 1) / p,
              "broadcast": lambda p: 1.0, "reduce": lambda p: 1.0}


def _lower_bound(op: str, S: float, dims: tuple[int, ...]) -> float:
    """The least time of ``op`` under any schedule on the torus: max of (a) a node's bytes over its 2n links,
    (b) for an all-to-all, the p/2 x p/2 blocks of S/p that must cross a bisection cutting the largest (even)
    extent d in two, over its 2 p/d links each way (the forward and the wrap-around link of each of its p/d rings):
    d S / 8 / B_link (gathered data can be forwarded once and copied, so the other collectives have no such bound),
    (c) the farthest node's hops, sum(d // 2), at alpha each."""
    p, n = int(np.prod(dims)), len(dims)
    b_link = BW * EFF / (2 * n)
    d = max(dims)
    assert d % 2 == 0 and d > 2
    inject = NODE_BYTES[op](p) * S / (2 * n * b_link)
    bisection = (p / 2) * (p / 2) * (S / p) / (2 * p / d * b_link) if op == "alltoall" else 0.0
    return max(inject, bisection, sum(x // 2 for x in dims) * ALPHA)


@pytest.mark.parametrize("dims", [(4, 4), (4, 4, 4), (16, 16), (4, 3)])
@pytest.mark.parametrize("op", list(NODE_BYTES))
@pytest.mark.parametrize("S", [0.0, 1024.0, float(1 << 20), float(1 << 30)])
def test_no_algorithm_beats_any_schedules_bound_and_best_is_the_minimum(dims: tuple[int, ...], op: str,
                                                                        S: float) -> None:
    row = api.collective(_cluster(dims), op, S, int(np.prod(dims))).rows[0]
    times = {a["algorithm"]: a["time_s"] for a in row["algorithms"]}
    bound = _lower_bound(op, S, dims)
    for algo, t in times.items():
        assert t >= bound * (1 - 1e-12), (algo, t, bound)
    # off powers of two, rhd / rd (Bruck's all-to-all excepted) keep their switch price and auto does not weigh them
    # (topology.torus_unpriced): on 4 x 3 the table lists rhd's broadcast of 1 GiB below the pick (reported)
    pow2 = all(d & (d - 1) == 0 for d in dims)
    unpriced = set() if pow2 or op == "alltoall" else {"rhd"} if op in ("broadcast", "reduce") else {"rhd", "rd"}
    assert times[row["best"]] == min(t for a, t in times.items() if a not in unpriced)


def test_the_bounds_are_tight_where_a_schedule_meets_them() -> None:
    """The bound is not slack by construction: the rotated ring all-gather and the direct all-to-all of 1 GiB on
    4 x 4 meet it (a node's bytes over its four links; the bisection's S/2 per B_link)."""
    for op, algo in (("allgather", "ring"), ("alltoall", "direct")):
        row = api.collective(_cluster((4, 4)), op, float(1 << 30), 16).rows[0]
        t = next(a["time_s"] for a in row["algorithms"] if a["algorithm"] == algo)
        assert t == pytest.approx(_lower_bound(op, float(1 << 30), (4, 4)), rel=2e-3)


# --- valid32: the field checks' refusals -----------------------------------------------------------------------------

def _row(**extra: object) -> dict:
    return {"id": "x_h100_row", "kind": "llm_training", **extra}


def test_an_infinite_number_is_refused() -> None:
    """``main_grad_bytes: .inf`` passed (inf > 0); the bytes of a gradient element must be finite."""
    vt = script_module("validate_training")
    for key in ("main_grad_bytes", "bucket_cap_mb", "moe_capacity_factor", "optimizer_bytes_per_param"):
        with pytest.raises(InputError, match=rf"row x_h100_row: framework.{key} = inf; allowed: .*finite"):
            vt.check_row(_row(framework={key: float("inf")}))


def test_an_empty_list_of_names_is_refused_as_the_integer_lists() -> None:
    vt = script_module("validate_training")
    for key in ("nvfp4_disable", "stage_layers"):
        with pytest.raises(InputError, match=rf"framework.{key} = \[\]; allowed: a list of .*, one or more"):
            vt.check_row(_row(framework={key: []}))
    with pytest.raises(InputError, match=r"framework.stage_layers = 5; allowed: a list of positive integers"):
        vt.check_row(_row(framework={"stage_layers": 5}))


@pytest.mark.parametrize(("text", "message"), [
    ("- 5\n", "row 5 is not a mapping; allowed: a list of rows"),
    ("- [1, 2]\n", "row [1, 2] is not a mapping; allowed: a list of rows"),
    ("id: x\n", "row 'id' is not a mapping; allowed: a list of rows"),
    # a key repeated in a mapping: refused by the reader the validator reads through (tests/test_struct33.py)
    ("- id: x_h100_row\n  kind: llm_training\n  framework:\n    main_grad_bytes: .inf\n",
     "row x_h100_row: framework.main_grad_bytes = inf; allowed: a positive int or a positive finite float"),
])
def test_main_refuses_with_one_error_line(tmp_path, monkeypatch, capsys, text: str,  # type: ignore[no-untyped-def]
                                          message: str) -> None:
    """Before review32c a row that is not a mapping raised AttributeError (a traceback), and a repeated key was
    read as its last value (a second ``framework:`` dropped the first's fields unread)."""
    vt = script_module("validate_training")
    (tmp_path / "training_cases.yaml").write_text(text)
    # the file under test, no original cases, and the module's cached run left untouched
    for name, value in (("NEW_CASES", tmp_path / "training_cases.yaml"), ("CASES", None),
                        ("validate_all", vt.validate_all.__wrapped__)):
        monkeypatch.setattr(vt, name, value)
    code = vt.main(["--json"])
    out, err = capsys.readouterr()
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert err.startswith(f"error: training_cases.yaml: {message}")


def test_the_file_repeats_no_key() -> None:
    """struct33: the file is read through the CLI's strict reader, which refuses a key given twice in a mapping."""
    vt = script_module("validate_training")
    assert vt.read_yaml(vt.NEW_CASES)
