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


def _predict_warnings(cli: Any, *args: str) -> list[str]:
    r = cli("predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", *args)
    assert r.code == 0, r.err
    return [line for line in r.err.splitlines() if line.startswith("warning:")]


def test_reader_default_permute_fusion_is_not_warned_about(tmp_path: Any, cli: Any) -> None:
    """A dense launch with --moe-router-dtype (fuzz18's open case): Megatron-LM's reader fills moe_permute_fusion
    false, Megatron's default for a launch without --moe-permute-fusion, and marks it a default; the warning that the
    field is not priced named a field the launch never wrote. The router-dtype warning still says what the launch
    did write, and a moe_permute_fusion the user sets is still warned about."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 "
                      "--global-batch-size 512 --bf16 --moe-router-dtype fp32\n")
    warned = _predict_warnings(cli, "--strategy", str(script))
    assert not any("moe_permute_fusion" in w for w in warned), warned
    assert any("moe_router_dtype = fp32 is not priced" in w for w in warned), warned
    written = _predict_warnings(cli, "--set", "strategy.moe_permute_fusion=false")
    assert any("strategy.moe_permute_fusion = false is not priced: the model has no MoE layers" in w
               for w in written), written
