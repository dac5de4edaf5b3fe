"""hostdata36: host_memory of the cloud, AMD, Grace and TPU clusters from their published figures.

Section: docs/model.md#host-memory.

Checked independently of the catalog loader: each value is written here from the figure its source prints and the
unit it prints it in (AWS's "Memory (GiB) 1,152" and "Instance Memory (TiB) 2", Azure's "Memory: GiB 1850", Google's
"1,872 GB", "DRAM per host 512 GiB" and "RAM (GB) (4-chip VM) 448", the MLPerf system descriptions' "3.0 TB",
"960GB" and "1024 GB"), and the YAML's source string must quote that figure; the capacity the memory report compares
against is that byte count; every built-in cluster is either in docs/model.md's host-memory table or in its
"Left out" list.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import load_yaml

from scalemodel.specs import load_cluster

ROOT = Path(__file__).resolve().parents[1]
GIB, TIB = 2**30, 2**40

# cluster: (bytes from the printed figure and unit, the text the source string must quote)
PRINTED = {
    "aws-p4d": (1152 * GIB, "1,152"),
    "aws-p5": (2 * TIB, "Instance Memory (TiB) 2"),
    "gcp-a3-high": (1872e9, "1,872 GB"),
    "mi300x-8": (1850 * GIB, "Memory: GiB 1850"),
    "mi350x-8": (3.0e12, "host_memory_capacity: 3.0 TB"),
    "gb200-nvl72": (2 * 480e9, "Up to 480GB LPDDR5X"),
    "gb300-nvl72": (960e9, "host_memory_capacity: 960GB"),
    "gaudi2-8": (1024e9, "host_memory_capacity: 1024 GB"),
    "tpu-v5e-pod": (512 * GIB, "DRAM per host 512 GiB"),
    "tpu-v5e-multislice": (512 * GIB, "DRAM per host 512 GiB"),
    "tpu-v5p-pod": (448e9, "RAM (GB) (4-chip VM) 448"),
    "tpu-v5p-multislice": (448e9, "RAM (GB) (4-chip VM) 448"),
}


@pytest.mark.parametrize("name", sorted(PRINTED))
def test_value_is_the_printed_figure(name: str) -> None:
    expected, quote = PRINTED[name]
    assert load_cluster(name).host_memory == pytest.approx(expected, rel=1e-12)
    source = load_yaml(ROOT / "hardware" / "clusters" / f"{name}.yaml")["sources"]["host_memory"]
    assert quote in source


def test_cloud_capacity_is_the_instance_memory(cli: Any) -> None:
    """p5.48xlarge gives no GPU-host link rate, so offload needs --set cluster.host_bandwidth; the capacity it is then
    checked against is the instance's 2 TiB. Llama 2 7B ZeRO-2 optimizer offload on 8 GPUs, one micro-batch: each
    rank keeps 12 + 4 + 2 bytes a parameter of its P / 8 partition and one 16-bit buffer of the 32000 x 4096
    embedding (DeepSpeed's allocations, docs/model.md#host-memory)."""
    h, f, v, layers = 4096, 11008, 32000, 32
    p = layers * (4 * h * h + 3 * h * f + 2 * h) + 2 * v * h + h
    res = cli("memory", "--json", "-m", "llama2-7b", "-c", "aws-p5", "-n", "8", "--zero", "2",
              "--set", "strategy.offload_states=optimizer", "--set", "cluster.host_bandwidth=64GB/s")
    assert res.code == 0, res.err
    host = json.loads(res.out)["host_memory"]
    assert host["capacity_bytes"] == 2 * TIB and host["fits"] is True
    assert host["bytes_per_node"] == pytest.approx(8 * (p / 8 * 18 + v * h * 2), rel=1e-9)


def test_grace_tray_holds_960_gb(cli: Any) -> None:
    """Llama 3 70B with its states and parameters on the host (ZeRO-3, 20 bytes a parameter of the node's shards):
    one 4-GPU GB200 tray would hold 20 P = ~1.4 TB, more than its 2 x 480 GB; two trays hold 10 P = ~0.7 TB each."""
    args = ("-m", "llama3-70b", "-c", "gb200-nvl72", "--zero", "3", "--set", "strategy.offload_states=optimizer+params")
    one = json.loads(cli("memory", "--json", "-n", "4", *args).out)
    two = json.loads(cli("memory", "--json", "-n", "8", *args).out)
    params = one["params_per_gpu"]
    assert one["host_memory"]["bytes_per_node"] == pytest.approx(20.0 * params, rel=1e-9)
    assert one["host_memory"]["capacity_bytes"] == 960e9 and one["host_memory"]["fits"] is False
    assert two["host_memory"]["bytes_per_node"] == pytest.approx(10.0 * params, rel=1e-9)
    assert two["host_memory"]["fits"] is True


def test_every_cluster_is_listed_or_left_out() -> None:
    """docs/model.md#host-memory: a cluster with host_memory is a row of the table, one without is named in the
    'Left out' paragraph, so the open list stays the catalog's."""
    text = (ROOT / "docs" / "model.md").read_text()
    section = text[text.index('<a id="host-memory"></a>'):]
    section = section[:section.index("**Bytes.**")]
    table = "\n".join(line for line in section.splitlines() if line.startswith("| "))
    left = section[section.index("Left out"):]
    for path in sorted((ROOT / "hardware" / "clusters").glob("*.yaml")):
        name = path.stem
        named = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
        if load_cluster(name).host_memory is None:
            assert named.search(left) or name in ("dgx-1-p100", "dgx-1-v100", "dgx-2"), name
        else:
            assert named.search(table), name
