"""ici30: TPU v6e ICI bandwidth and allocatable HBM against Google's and the TPU runtime's published figures.

ICI: Google's v6e page prints 'Inter-chip interconnect (ICI) bandwidth 3200 Gbps' in some revisions and 3584 Gbps in
others, but every revision prints 'All-reduce bandwidth per Pod 102.4 TB/s' for 256 chips (v5e's column: 1600 Gbps and
51.2 TB/s, the same per-chip-per-direction reading), Trillium's announcement doubles v5e's ICI, and the scaling book
gives 1e11 B/s one-way a link x 4 links. So 400 GB/s per chip per direction, not 448.

HBM: the TPU runtime's allocatable total on one v6e, torch_xla get_memory_info()['bytes_limit'] = 33550237696 B
(vllm-project/vllm#16211's usage record), is the capacity; the catalog states 32 GiB less it as memory_reserved.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, load_yaml
from test_review30a import _captured

from scalemodel.units import parse_quantity

HW = ROOT / "hardware"
BYTES_LIMIT_V6E = 33_550_237_696  # vllm-project/vllm#16211, 'gpu_memory_per_device' of the v6e usage record
POD_CHIPS = 256


def _ici_bytes(cluster: str) -> float:
    tier = load_yaml(HW / "clusters" / f"{cluster}.yaml")["tiers"][0]
    assert tier["name"] == "ici"
    return parse_quantity(tier["bandwidth"], "bandwidth")


@pytest.mark.parametrize("cluster", ["tpu-v6e-pod", "tpu-v6e-multislice"])
def test_v6e_ici_is_the_pod_allreduce_bandwidth_per_chip(cluster: str) -> None:
    """102.4 TB/s per pod / 256 chips = 400 GB/s = 3200 Gbps / 8; the 3584 Gbps revisions (448 GB/s) would make the
    same table's pod figure 114.7 TB/s. Twice v5e's 51.2 TB/s / 256 ('doubled ICI bandwidth')."""
    assert _ici_bytes(cluster) == pytest.approx(102.4e12 / POD_CHIPS, rel=1e-12)
    assert _ici_bytes(cluster) == pytest.approx(3200e9 / 8, rel=1e-12)
    assert _ici_bytes(cluster) == pytest.approx(2 * 51.2e12 / POD_CHIPS, rel=1e-12)
    assert _ici_bytes(cluster) == pytest.approx(2 * _ici_bytes("tpu-v5e-pod"), rel=1e-12)


def test_v6e_capacity_is_the_runtime_bytes_limit() -> None:
    """32 GiB of HBM less the slice the TPU runtime keeps = the bytes_limit a program can allocate."""
    acc = load_yaml(HW / "accelerators" / "tpu-v6e.yaml")
    memory = parse_quantity(acc["memory"], "bytes")
    reserved = parse_quantity(acc["memory_reserved"], "bytes")
    assert memory == 32 * 2**30
    assert memory - reserved == BYTES_LIMIT_V6E


def test_70b_v6e_row_fits_the_runtime_capacity() -> None:
    """The mttier25 Llama 3.1 70B row's memory (32.7 GB a chip, review30a) was flagged oom against the printed 32 GB;
    it is under the 33.55 GB the runtime lets a program allocate."""
    predict, args = _captured("mttier25_v6e_llama31_70b_256")
    mem = predict(*args).memory
    assert mem["capacity_bytes"] == BYTES_LIMIT_V6E
    assert 32e9 < mem["per_gpu_bytes"] < BYTES_LIMIT_V6E
    assert mem["fits"]
