"""The collective library's SM share with and without NVLink SHARP (docs/model.md#contention): NCCL runs 16 NVLS
channels on an 8-GPU NVSwitch Hopper node, and with NVLS off (NCCL_NVLS_ENABLE=0, a tier's in_network_reduction
false) the ring channels of its topology search, walked here by hand from NCCL's constants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalemodel.cost import nccl
from scalemodel.cost.placement import place
from scalemodel.engine.job import build_job, collective_share
from scalemodel.engine.network import build_network
from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec, load_accelerator, load_cluster, load_workload


def ring_channels(links: int, link_bw: float, speeds: tuple[float, ...], max_search: int = 16) -> int:
    """NCCL's ring channels on one NVSwitch node (v2.21.5-v2.27.7 src/graph/search.cc ``ncclTopoCompute``,
    ``ncclTopoDupChannels``; connect.cc ``ncclTopoPostset``), each channel taking ``speed`` of the GPU's NVLink
    bandwidth ``bw = links x link_bw`` each way. Pass 1 starts at the first speed not above ``bw`` and keeps the
    solution of the largest nChannels x speed (a tie keeps the earlier, faster one), stopping once that reaches
    ``bw`` or the next speed is not above 0.49 of the kept one's; ncclTopoDupChannels then doubles the channels
    unless ``speed < 25`` or (sm > 80) ``speed < 50`` with more than 4 channels; ncclTopoPostset doubles again.
    review26b: the walk before took the first speed that fits and doubled at speed >= 50 only, which gives an H800
    (8 links) 8 channels where NCCL logs 16."""
    bw = links * link_bw
    i = next(j for j, s in enumerate(speeds) if s <= bw)
    best_n, best_s = 0, 0.0
    while True:
        n = min(math.floor(bw / speeds[i]), max_search)
        if n * speeds[i] > best_n * best_s:
            best_n, best_s = n, speeds[i]
        if best_n * best_s >= bw or i + 1 == len(speeds) or (best_n and speeds[i + 1] / best_s <= 0.49):
            break
        i += 1
    dup = not (best_s < 25.0 or (best_s < 50.0 and best_n > 4))
    return (2 * best_n if dup else best_n) * 2


SM90_SPEEDS = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SM100_SPEEDS = (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)


def test_hopper_ring_channels_by_hand() -> None:
    # 18 NVLink4 links x SM90_NVLINK_BW 20.6 GB/s = 370.8 GB/s -> 6 channels at 60 -> 12 -> 24
    assert ring_channels(18, 20.6, SM90_SPEEDS) == 24
    # the same walk against what NCCL logs or states elsewhere: an H800's 8 links (164.8 GB/s: 2 at 60, 3 at 50,
    # 4 at 40 kept; 4 channels are not "more than 4", so doubled) -> 16, its '16 coll channels' (NVIDIA/nccl #892);
    # B200's 18 NVLink5 links x 40.0 -> 8 at 90 -> 32 (b200.yaml); v2.18's SM90_NVLINK_BW 20.0 -> 6 at 60 -> 24
    assert ring_channels(8, 20.6, SM90_SPEEDS) == 16 == load_accelerator("h800").collective_units
    assert ring_channels(18, 40.0, SM100_SPEEDS) == 32 == load_accelerator("b200").collective_units
    assert ring_channels(18, 20.0, (60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0)) == 24
    for name in ("h100-sxm", "h200-sxm"):
        acc = load_accelerator(name)
        assert acc.collective_units == 24 and acc.collective_units_nvls == 16 and acc.compute_units == 132


@pytest.mark.parametrize(("name", "nvls", "expected"), [
    ("h100-sxm", True, 16 / 132),   # NVLS on: 16 channels
    ("h100-sxm", False, 24 / 132),  # NVLS off: 24 ring channels
    ("h200-sxm", False, 24 / 132),
    ("b200", True, 32 / 148),       # no NVLS count stated: collective_units both ways
    ("b200", False, 32 / 148),
    ("h800", False, 16 / 132),
])
def test_share_follows_nvls(name: str, nvls: bool, expected: float) -> None:
    assert collective_share(load_accelerator(name), nvls) == pytest.approx(expected, rel=1e-12)


def test_job_reads_nvls_from_the_nvlink_tier() -> None:
    on = load_cluster("dgx-h100")
    off = load_cluster("dgx-h100", ["tiers.nvlink.in_network_reduction=false"])
    assert nccl.nvls_on(build_network(on).tiers) and not nccl.nvls_on(build_network(off).tiers)
    wl, tr = load_workload("llama3-8b"), TrainingSpec(global_batch=64, micro_batch=1, precision="bf16")
    # nvlsshare26: with NVLS on the ring collectives keep 24 channels (collective_share), the NVLS all-reduce 16
    assert build_job(on, wl, tr).collective_share_nvls == pytest.approx(16 / 132, rel=1e-12)
    assert build_job(on, wl, tr).collective_share == pytest.approx(24 / 132, rel=1e-12)
    assert build_job(off, wl, tr).collective_share_nvls == pytest.approx(24 / 132, rel=1e-12)
    assert build_job(off, wl, tr).collective_share == pytest.approx(24 / 132, rel=1e-12)
    # the network tier of a PCIe or network-only node never runs NVLS
    assert not nccl.nvls_on(build_network(load_cluster("dgx-h100", ["tiers.nvlink.protocol=pcie"])).tiers)


def test_nvls_units_need_compute_units() -> None:
    with pytest.raises(InputError, match="collective_units_nvls: 200 is more than the chip's compute_units 132"):
        load_cluster("dgx-h100", ["accelerator.collective_units_nvls=200"])


def test_nvls_pricing_and_sm_share_key_on_one_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    # review26b: nvls_on was a fourth copy of the condition the NVLS all-reduce, inr_applies and the NVLS
    # reduce-scatter / all-gather each spelled inline; a change to one would leave the SM share and the prices
    # disagreeing on whether a run has NVLS. One helper: switching it off switches every NVLS price off.
    pl = place(8, 1, build_network(load_cluster("dgx-h100")))  # one NVSwitch node, NVLS on
    S = np.array(1e9)
    assert bool(nccl.inr_applies(pl)) and bool(nccl.nvls_gather_applies(pl))
    assert np.isfinite(nccl.nccl_inr_allreduce_time(S, pl))
    monkeypatch.setattr(nccl, "nvls_on", lambda tiers: False)
    assert not bool(nccl.inr_applies(pl)) and not bool(nccl.nvls_gather_applies(pl))
    assert not np.isfinite(nccl.nccl_inr_allreduce_time(S, pl))
    assert not np.isfinite(nccl.nccl_nvls_gather_time("allgather", S, pl))


@pytest.mark.parametrize("item", ["cluster.accelerator.collective_units=null",
                                  "cluster.accelerator.collective_units=0"])
def test_nvls_units_without_ring_units_are_refused(cli, item: str) -> None:  # type: ignore[no-untyped-def]
    # review26b: collective_units null / 0 says "collectives take no compute units", yet dgx-h100 (NVLS on) kept
    # charging collective_units_nvls' 16 SMs (and none with NVLS off) without a word
    res = cli("predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--set", item)
    line = res.err.strip()
    assert res.code == 2 and len(line.splitlines()) == 1, res.err
    assert line.startswith("error: --set cluster.accelerator.collective_units: accelerator.collective_units_nvls: "
                           "16 without collective_units"), line
    assert line.endswith("; collective_units (the channels NCCL runs with NVLS off) too, or collective_units_nvls "
                         "0 or null"), line
