"""hostmem36: host memory capacity for optimizer / parameter offload (cluster host_memory; docs/model.md#host-memory).

Section: docs/model.md#host-memory.

Checked independently of the code under test: the host bytes of one small ZeRO-Offload job (Llama 2 7B, ZeRO 2, 8
GPUs, 4 micro-batches) by hand from DeepSpeed's host allocations read at deepspeedai/DeepSpeed@edaa7221 (fp32
master 4, Adam m and v 8, fp32 gradient 4, 16-bit copy-back buffer 2 and accumulator 2 bytes per parameter of the
partition, and one 16-bit buffer of the largest parameter, the 32000 x 4096 embedding); Llama 3.1 405B with its
states on the host of one DGX H100 (2 TB, the BasePOD datasheet) refused in memory, predict and plan; a cluster
without host_memory reported as not checked; host_memory values that are no node's DRAM refused with exit 2 naming
the field; and the planner's offload candidates filtered by the capacity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.engine.step import Infeasible
from scalemodel.specs import load_cluster, load_workload
from scalemodel.specs.training import TrainingSpec

ROOT = Path(__file__).resolve().parents[1]

# Llama 2 7B by hand (examples/workloads/llama2-7b.yaml: 32 layers, h 4096, 32 heads = KV heads, SwiGLU f 11008,
# V 32000 untied): per layer 4 h^2 attention + 3 h f MLP + 2 h norms; embedding and output 2 V h; final norm h
H, F, V, LAYERS = 4096, 11008, 32000, 32
P_7B = LAYERS * (4 * H * H + 3 * H * F + 2 * H) + 2 * V * H + H


def _memory_json(cli: Any, *args: str) -> dict[str, Any]:
    res = cli("memory", "--json", *args)
    assert res.code == 0, res.err
    return json.loads(res.out)


def test_seven_b_zero_offload_host_bytes_by_hand(cli: Any) -> None:
    """ZeRO-Offload (stage 2, offload_optimizer cpu) of Llama 2 7B on one 8-GPU node, global batch 32 (m = 4):
    each rank's partition n = P / 8 keeps 12 (master, m, v) + 4 (fp32 gradient) + 2 (copy-back buffer) + 2
    (accumulator, m > 1) bytes a parameter, plus V h 16-bit elements (temp_grad_buffer_for_cpu_offload); the node
    holds 8 ranks' worth."""
    assert P_7B == 6_738_415_616  # the 6.74 B of the model card
    d = _memory_json(cli, "-m", "llama2-7b", "-c", "dgx-h100", "-n", "8", "--zero", "2", "--global-batch", "32",
                     "--set", "strategy.offload_states=optimizer")
    assert d["num_microbatches"] == 4 and d["inputs"]["optimizer_bytes_per_param"] == 12
    per_rank = P_7B / 8 * (12 + 4 + 2 + 2) + V * H * 2
    host = d["host_memory"]
    assert host["bytes_per_node"] == pytest.approx(8 * per_rank, rel=1e-9)
    assert host["capacity_bytes"] == 2e12 and host["fits"] is True  # [DGXH100]: 2 TB of DDR5 system memory
    assert d["feasible"] and d["infeasible_reason"] is None
    # one micro-batch: no accumulator (copy_grads_in_partition accumulates only with more than one backward)
    d1 = _memory_json(cli, "-m", "llama2-7b", "-c", "dgx-h100", "-n", "8", "--zero", "2",
                      "--set", "strategy.offload_states=optimizer")
    assert d1["host_memory"]["bytes_per_node"] == pytest.approx(8 * (P_7B / 8 * 18 + V * H * 2), rel=1e-9)
    # no offload: no host section (the GPU keeps the states)
    assert "host_memory" not in _memory_json(cli, "-m", "llama2-7b", "-c", "dgx-h100", "-n", "8", "--zero", "2")


def test_405b_on_one_node_does_not_fit_host_memory(cli: Any) -> None:
    """Llama 3.1 405B, ZeRO-3 with parameters and optimizer on the host of one DGX H100: 8 ranks x P / 8 x (12 +
    4 fp32 gradient + 2 gradient-partition buffer + 2 16-bit parameter partition) = 20 P bytes, about 8.1 TB, four
    times the node's 2 TB: memory marks it, predict refuses it with the host reason, not the GPU's."""
    d = _memory_json(cli, "-m", "llama3-405b", "-c", "dgx-h100", "-n", "8", "--zero", "3",
                     "--set", "strategy.offload_states=optimizer+params")
    params = d["params_per_gpu"]  # the whole model at pp 1, before sharding
    assert params > 4.0e11
    assert d["host_memory"]["bytes_per_node"] == pytest.approx(20.0 * params, rel=1e-9)
    assert d["host_memory"]["fits"] is False and not d["feasible"]
    assert d["infeasible_reason"] == Infeasible.HOST_OUT_OF_MEMORY.text
    text = cli("memory", "-m", "llama3-405b", "-c", "dgx-h100", "-n", "8", "--zero", "3",
               "--set", "strategy.offload_states=optimizer+params")
    assert "does NOT fit (host memory)" in " ".join(text.out.split())
    res = cli("predict", "--json", "-m", "llama3-405b", "-c", "dgx-h100", "-n", "8", "--zero", "3",
              "--set", "strategy.offload_states=optimizer+params")
    out = json.loads(res.out)
    assert out["infeasible_reason"] == Infeasible.HOST_OUT_OF_MEMORY.text
    assert out["infeasible_detail"].startswith("8.117 TB of model states per node") and "2 TB" in out[
        "infeasible_detail"]


def test_unknown_host_memory_is_said(cli: Any) -> None:
    """hgx-h200 (OEM servers: no published host memory) gives a host link but no capacity: the bytes are reported,
    the capacity and the verdict are null, and the text says it is not checked (not silently 'fits')."""
    args = ("-m", "llama2-7b", "-c", "hgx-h200", "-n", "8", "--zero", "3", "--set",
            "strategy.offload_states=optimizer+params")
    d = _memory_json(cli, *args)
    assert d["host_memory"]["capacity_bytes"] is None and d["host_memory"]["fits"] is None
    assert d["host_memory"]["bytes_per_node"] > 0 and d["feasible"]
    text = " ".join(cli("memory", *args).out.split())
    assert "gives no host_memory" in text and "NOT checked" in text
    res = cli("predict", "--json", *args)  # predict prices it and warns that the fit is not checked
    assert res.code == 0 and any("gives no host_memory" in w and "not checked" in w
                                 for w in json.loads(res.out)["warnings"])
    # given on the command line, it is checked
    small = _memory_json(cli, *args, "--set", "cluster.host_memory=64GB")
    assert small["host_memory"]["fits"] is False and small["infeasible_reason"] == Infeasible.HOST_OUT_OF_MEMORY.text


@pytest.mark.parametrize("value", ["-2 TB", "5 EB", "2 TB/s", "2048", "fast"])
def test_nonsense_host_memory_exits_2_naming_the_field(cli: Any, tmp_path: Path, value: str) -> None:
    """A negative size, one past any node (5 EB), a rate, a bare 2048 (2 KB: a wrong unit) or a word: exit 2, one
    error naming host_memory, no traceback."""
    text = (ROOT / "hardware/clusters/dgx-h100.yaml").read_text()
    text = text.replace("host_memory: 2 TB\n", f"host_memory: {value}\n")
    assert f"host_memory: {value}\n" in text
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    res = cli("memory", "-m", "llama2-7b", "-c", str(path), "-n", "8")
    assert res.code == 2
    assert "host_memory" in res.err and "Traceback" not in res.err


def test_planner_filters_offload_candidates_by_host_memory() -> None:
    """70B on 8 H100s fits only with host offload (tests/test_offload35.py). With 2 TB every offload mode fits the
    host (at most 20 bytes a parameter, 1.4 TB); with 1.2 TB only FSDP / HSDP's parameters and optimizer on the
    host do (12 + 4 = 16 bytes a parameter, 1.13 TB: its fp32 shard is the master); with 1 TB none, and plan
    finds nothing, counting the candidates host_out_of_memory."""
    job = build_job(load_cluster("dgx-h100"), load_workload("llama3-70b"), TrainingSpec(global_batch=64))
    assert job.host_memory == 2e12
    opened = planner.search(job, 8, 64, top=3, allow=("offload",))
    assert opened.ranked and not opened.infeasible_by_reason.get("host_out_of_memory", 0)
    mid = planner.search(msgspec.structs.replace(job, host_memory=1.2e12), 8, 64, top=50, allow=("offload",))
    assert mid.ranked and mid.infeasible_by_reason.get("host_out_of_memory", 0) > 0
    assert {c.strategy["zero"] for c in mid.ranked} <= {"fsdp", "hsdp"}
    assert {c.strategy["offload_states"] for c in mid.ranked} == {"optimizer+params"}
    none = planner.search(msgspec.structs.replace(job, host_memory=1.0e12), 8, 64, top=3, allow=("offload",))
    assert not none.ranked and none.infeasible_by_reason.get("host_out_of_memory", 0) > 0
