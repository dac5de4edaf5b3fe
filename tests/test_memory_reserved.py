"""The driver-reserved slice (accelerator ``memory_reserved``): nvidia-smi's "Total" (the catalog's ``memory``)
includes a slice the driver keeps, which no CUDA allocation can use (nvidia-smi -q "FB Memory Usage": Reserved); the
model's capacity is what the runtime can allocate, cudaMemGetInfo's total (docs/model.md#memory-allowance). Expected
values are the published totals CUDA itself reports, read from the logs, not from the model."""
from __future__ import annotations

import json

import pytest

# CUDA's own device total (deviceQuery totalGlobalMem / torch total_memory), bytes, as published:
# H100 SXM: thamada/nvidia-smi@03fbe6e6 nvsim/H100SXMx8_smi.py (driver 565.57.01, nvidia-smi Total 81559 MiB, Reserved
# 454 MiB); A100 SXM 80 GB: thamada/nvidia-smi@b09ef139 gls/A100SXMx4_smi.py (driver 555.42.02, 81920 MiB, Reserved
# 763 MiB); H200: scalemodel's own run, hardware/measurements/raw/gpu_kernels_h200_2026-12-04_run1.json
# device.memory_bytes (driver 580.159.04); A100 SXM 40 GB: bottlerocket-os/bottlerocket#3873 deviceQuery.
CUDA_TOTAL = {"dgx-h100": 85045477376, "dgx-a100": 85100068864, "hgx-h200": 150109880320,
              "dgx-a100-40g": 42298834944}


@pytest.mark.parametrize("cluster", sorted(CUDA_TOTAL))
def test_capacity_is_what_cuda_can_allocate(cli, cluster: str) -> None:  # type: ignore[no-untyped-def]
    """memory's capacity_bytes is CUDA's total, not nvidia-smi's (which is 0.5-0.9 % more: 454 MiB on H100)."""
    doc = json.loads(cli("memory", "-c", cluster, "-m", "llama3-8b", "-n", "8", "--tp", "8", "--json").out)
    assert doc["capacity_bytes"] == CUDA_TOTAL[cluster]


def test_reserve_not_below_memory(cli) -> None:  # type: ignore[no-untyped-def]
    """A reserve as large as the memory is refused with the field named, exit 2 (no capacity of zero priced)."""
    r = cli("memory", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--tp", "8",
            "--set", "accelerator.memory_reserved=90GB")
    assert r.code == 2 and "memory_reserved" in r.err and "Traceback" not in r.err
