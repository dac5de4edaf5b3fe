"""Lead fixes of round 18, each with a test that fails without it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalemodel.engine import calibrate as cal
from scalemodel.engine.network import build_network
from scalemodel.specs import load_cluster
from scalemodel.specs.nccl_tests import NcclLog, NcclRow


def test_calibrate_fits_the_tier_inside_the_cluster_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """fit_tier prices each trial tier inside the cluster's own Network: aws-p5's generation (NCCL's LL caps), its
    nccl_tuner (aws-ofi-nccl's p5 tables pick the all-reduce algorithm) and its host_cpu (the LL cap's row, the
    per-step overhead's default) are kept; the trial network had kept only the tiers and GPUs per node."""
    net = build_network(load_cluster("aws-p5"))
    assert (net.generation, net.nccl_tuner, net.host_cpu) == ("hopper", "aws-ofi-p5", "amd")  # the premise
    seen: list[Any] = []
    real = cal.collective_time

    def spy(op: str, size: Any, ranks: int, network: Any, **kw: Any) -> Any:
        seen.append(network)
        return real(op, size, ranks, network, **kw)

    monkeypatch.setattr(cal, "collective_time", spy)
    sizes = [2.0 ** k for k in range(20, 31, 2)]
    rows = [NcclRow(size_bytes=s, count=int(s), dtype="int8", time_oop_s=20e-6 + s / 40e9, busbw_oop_Bps=0.0)
            for s in sizes]
    cal.fit_tier(NcclLog(op="allgather", ranks=16, rows=rows), net, cluster_name="aws-p5", ranks=16)
    assert seen, "the fit priced no trial network"
    kept = {(n.generation, n.nccl_tuner, n.host_cpu, n.gpus_per_node) for n in seen}
    assert kept == {("hopper", "aws-ofi-p5", "amd", 8)}
    assert all(np.isfinite(n.tiers[-1].latency) for n in seen)
