"""Review of ringlat17 / nvls17 / calibrate's 'hidden' latency (review17e).

calibrate reports a fitted latency as hidden when taking it down to 1 ns moves no modelled time by 2 %. That
holds for two different reasons, and the message must say the one that applies: the rest of the model already
takes longer than the smallest measured message (the dgx-h100 2 x 8 test log, 10 us small messages under the
ring's per-step network overhead), or the log has no small message at all (a bandwidth sweep from 256 MiB up,
generated here from the model itself with a realistic 3.5 us IB hop: the model meets every size, yet its fitted
latency was said to lie under a model 'already taking longer than the measured small messages').
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from test_calibrate import SIZES
from test_calibrate_checks import _h100_16_log, hosts_log

from scalemodel.cost.collectives import collective_time
from scalemodel.engine.calibrate import calibrate, parse_nccl_tests
from scalemodel.engine.network import build_network
from scalemodel.specs import load_cluster


def _large_only_log(cluster: str, hosts: int, lat: float, smallest: float) -> str:
    """A log made by the model on ``cluster`` (its first network tier at ``lat``), rows from ``smallest`` up."""
    net = build_network(load_cluster(cluster))
    # the cluster's network as given (generation, tuner, host: NCCL's LL caps), as calibrate prices its trial tiers
    net = replace(net, tiers=tuple(replace(t, latency=lat) if k == 1 else t for k, t in enumerate(net.tiers)))
    t = collective_time("allreduce", SIZES, hosts * 8, net, algorithm="ring", dtype_bytes=1)
    keep = []
    for line in hosts_log(hosts, 8, t).splitlines():
        head = line.split()[0] if line.split() else ""
        if head.isdigit() and float(head) < smallest:
            continue
        keep.append(line)
    return "\n".join(keep)


def test_hidden_by_large_sizes_says_so() -> None:
    """dgx-a100 4 x 8 from 256 MiB, IB hop 3.5 us: 6 crossing steps x 3.5 us = 21 us against >= 2.6 ms a size
    (256 MiB x 2 x 31/32 over ~190 GB/s), under 1 %: hidden, and the model meets every measured time, so the
    message names the log's smallest size, not a model that takes longer than the small messages."""
    res = calibrate(parse_nccl_tests(_large_only_log("dgx-a100", 4, 3.5e-6, 2.0**28)), load_cluster("dgx-a100"),
                    source="x.log")
    assert res.fit.at_bound == {"latency_s": "hidden"}
    assert max(abs(r["error"]) for r in res.fit.residuals) < 0.01
    (msg,) = [p for p in res.problems if p.startswith("bound:")]
    assert "already takes longer" not in msg and "already taking longer" not in msg
    assert "smallest message (256 MiB)" in msg


def test_hidden_under_overhead_still_says_longer() -> None:
    """The dgx-h100 2 x 8 test log (10 us small messages, below 30 ring steps of any latency): the model at the
    fit is far above the 1 KiB message, and the message says so with that size."""
    res = calibrate(parse_nccl_tests(_h100_16_log()), load_cluster("dgx-h100"), source="x.log")
    (msg,) = [p for p in res.problems if p.startswith("bound:")]
    assert "already takes longer than the measured smallest message (1 KiB" in msg
    assert "net_overhead" in msg


def test_realistic_fit_not_hidden() -> None:
    """Logs from 1 KiB (and from 16 MiB) made by the model at 3.5 us on dgx-h100 2 x 8 and dgx-a100 4 x 8: the
    latency is determined, not hidden."""
    for cluster, hosts in (("dgx-h100", 2), ("dgx-a100", 4)):
        for smallest in (2.0**10, 2.0**24):
            res = calibrate(parse_nccl_tests(_large_only_log(cluster, hosts, 3.5e-6, smallest)), load_cluster(cluster),
                            source="x.log")
            assert not res.fit.at_bound, (cluster, smallest, res.fit.at_bound)
            assert not res.problems


# --- aws-ofi-nccl's p5 region tuner at 1 and 2 ranks a node (nvls17 modelled 8 only) ---------------------------

def _tuner_pick(op: str, size: float, ranks: int, stride: int) -> tuple[str, str] | None:
    from scalemodel.cost import nccl
    from scalemodel.cost.placement import place

    pl = place(ranks, stride, build_network(load_cluster("aws-p5")))
    pick, choices = nccl.tuner_plugin_choice(op, np.array(size), pl)
    return choices[int(pick)] if int(pick) >= 0 else None


def test_p5_tuner_one_rank_a_node() -> None:
    """aws-ofi-nccl v1.16.3 region_init_internal_p5_p5e, nRanks == nNodes (a tp-8 job's data-parallel group), read
    by hand. All-reduce: Tree LL128 left of (0,16)-(2367488,16)-(9999360,64)...; Ring LL128 up to the line
    (4736000,2)-(269484032,128), at 8 ranks x = 4736000 + 6/126 x 264748032 = 17.34 MB, at 16 ranks 34.15 MB; Ring
    Simple beyond. All-gather: Ring Simple right of (4194304,2)-(8589934592,2048), at 8 ranks 29.37 MB; reduce-scatter
    right of (8388608,2)-(4294967296,1024), at 8 ranks 33.55 MB; NCCL's own choice left of them."""
    MiB = 2.0**20
    assert _tuner_pick("allreduce", 8 * MiB, 8, 8) == ("ring", "ll128")
    assert _tuner_pick("allreduce", 17.0e6, 8, 8) == ("ring", "ll128")
    assert _tuner_pick("allreduce", 17.7e6, 8, 8) == ("ring", "simple")
    assert _tuner_pick("allreduce", 1 * MiB, 16, 8) == ("tree", "ll128")
    assert _tuner_pick("allreduce", 4 * MiB, 16, 8) == ("ring", "ll128")
    assert _tuner_pick("allreduce", 33.5e6, 16, 8) == ("ring", "ll128")
    assert _tuner_pick("allreduce", 34.8e6, 16, 8) == ("ring", "simple")
    assert _tuner_pick("allgather", 29.0e6, 8, 8) is None
    assert _tuner_pick("allgather", 29.8e6, 8, 8) == ("ring", "simple")
    assert _tuner_pick("reducescatter", 33.0e6, 8, 8) is None
    assert _tuner_pick("reducescatter", 34.0e6, 8, 8) == ("ring", "simple")
    # two nodes: handed back to NCCL ("regions are not well defined")
    assert _tuner_pick("allreduce", 64 * MiB, 2, 8) is None


def test_p5_tuner_two_ranks_a_node() -> None:
    """nRanks == 2 nNodes (a tp-4 job's data-parallel group), 4 nodes = 8 ranks, read by hand: Tree LL128 left of
    the edge (1314816,4)-(1051648,8) (1 MiB = 1048576 < 1051648 at 8 ranks); Ring LL128 between it and
    (19736576,4)-(41842688,8) (41.8 MB at 8 ranks); Ring Simple right of (275775488,8) at 8 ranks; the 4-rank edge
    regions (Tree LL128 82-269 MB, Tree Simple above) need 2 nodes, which fall back."""
    MiB = 2.0**20
    assert _tuner_pick("allreduce", 1 * MiB, 8, 4) == ("tree", "ll128")
    assert _tuner_pick("allreduce", 16 * MiB, 8, 4) == ("ring", "ll128")
    assert _tuner_pick("allreduce", 512 * MiB, 8, 4) == ("ring", "simple")
    assert _tuner_pick("allgather", 512 * MiB, 8, 4) is None  # no 2-ranks-a-node all-gather table
    # 4 ranks a node: no table at all
    assert _tuner_pick("allreduce", 16 * MiB, 16, 2) is None
