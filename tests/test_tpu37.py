"""tpu37: the TPU slices' ICI and DCN figures against Google's tables, and what a DCN all-reduce can cost at most.

Checked for the TPU FSDP rows beyond 15 % (mtv5e23 64B / 128B at 16-32 slices, maxtext_v5p_128b_2x512, mttier25 v6e
Llama 2 70B and Llama 3.1 405B); validation/README.md "tpu37" has the reading. Hand values, each from its source:

* Google's TPU pages (hardware/SOURCES.md [GCP-v5e], [GCP-v5p], [GCP-v6e]): v5e 'Per-host NIC configuration 2 x 100
  Gbps NIC', 'Chips per host 8', 'Data center network bandwidth per Pod 6.4 Tbps', 'All-reduce bandwidth per Pod 51.2
  TB/s'; v6e 4 x 200 Gbps, 8 chips a host, 25.6 Tbps, 102.4 TB/s; v5p 'Data center network (DCN) bandwidth per chip
  (Gbps) 50'; the v6e slice table: 16x16 = 256 chips on 32 hosts (64 ct6e-standard-4t VMs of 4 chips).
* The scaling book (jax-ml/scaling-book@04d8de58 tpus.md): ICI one-way bandwidth a link v5e 5e10, v5p and v6e 1e11
  B/s; 4 links a chip on the v5e / v6e 2D torus, 6 on the v5p 3D torus; DCN 'around 2.5e10 bytes / second per host'
  (a v5p host: 2x2x1 = 4 chips).
"""

from __future__ import annotations

import pytest
from conftest import script_module, training_cases

from scalemodel.engine.predict import predict
from scalemodel.specs import load_cluster


def _tier(cluster: str, name: str):  # type: ignore[no-untyped-def]
    return next(t for t in load_cluster(cluster).tiers if t.name == name)


@pytest.mark.parametrize(("cluster", "per_chip", "per_pod"), [
    ("tpu-v5e-multislice", 2 * 100e9 / 8 / 8, 6.4e12 / 8 / 256),  # 2 x 100 Gb/s for 8 chips; 6.4 Tb/s for 256
    ("tpu-v6e-multislice", 4 * 200e9 / 8 / 8, 25.6e12 / 8 / 256),  # 4 x 200 Gb/s for 8 chips; 25.6 Tb/s for 256
    ("tpu-v5p-multislice", 50e9 / 8, 2.5e10 / 4),  # 50 Gb/s a chip; the book's 2.5e10 B/s a host of 4 chips
])
def test_dcn_per_chip_is_googles_figure(cluster: str, per_chip: float, per_pod: float) -> None:
    """The DCN tier carries each chip's share of its host's NICs, in bytes a second, and the second published figure
    (per pod, or the scaling book's per host) gives the same share."""
    dcn = _tier(cluster, "dcn")
    assert dcn.bandwidth == pytest.approx(per_chip, rel=1e-12)
    assert per_pod == pytest.approx(per_chip, rel=1e-12)


@pytest.mark.parametrize(("cluster", "links", "link_one_way", "pod_all_reduce"), [
    ("tpu-v5e-pod", 4, 5e10, 51.2e12),
    ("tpu-v6e-pod", 4, 1e11, 102.4e12),
    ("tpu-v6e-multislice", 4, 1e11, 102.4e12),
    ("tpu-v5p-pod", 6, 1e11, None),
])
def test_ici_is_the_links_one_way_sum(cluster: str, links: int, link_one_way: float,
                                      pod_all_reduce: float | None) -> None:
    """ICI per chip and direction = links x the book's one-way rate a link (v6e: 4 x 100 GB/s, not the 3584 Gbps
    revisions' 448 GB/s, ici30); Google's all-reduce bandwidth per 256-chip pod / 256 agrees on v5e and v6e."""
    ici = _tier(cluster, "ici")
    assert ici.bandwidth == pytest.approx(links * link_one_way, rel=1e-12)
    if pod_all_reduce is not None:
        assert ici.bandwidth == pytest.approx(pod_all_reduce / 256, rel=1e-12)


CLUSTER_OF = {"TPU v4": "tpu-v4-pod", "TPU v5e": "tpu-v5e-pod", "TPU v5p": "tpu-v5p-pod", "TPU v6e": "tpu-v6e-pod"}


def test_tpu_rows_state_the_hosts_chips() -> None:
    """Every TPU row's chips_per_host is its catalog slice's gpus_per_node (v6e 8 since tpu37: the rows had the
    4-chip VM's count); the v6e slice table's 256 chips on 32 hosts is 8 a host."""
    rows = [c for c in training_cases().values() if c["hardware"].get("gpu") in CLUSTER_OF]
    assert len(rows) >= 40
    for c in rows:
        want = load_cluster(CLUSTER_OF[c["hardware"]["gpu"]]).gpus_per_node
        assert c["hardware"]["chips_per_host"] == want, c["id"]
    assert 256 // 32 == load_cluster("tpu-v6e-pod").gpus_per_node


def _step(rid: str) -> float:
    vt = script_module("validate_training")
    case = training_cases()[rid]
    r = vt.predict_new_case(case)
    cluster = vt.load_cluster(r.settings["cluster"], vt.cluster_overrides(case, r.settings["cluster"]))
    return float(predict(cluster, vt.case_workload(case)[0], int(case["parallelism"]["gpus"]), r.training,
                         r.strategy).step_time_s)


def _measured_step(rid: str) -> float:
    """pdb x seq x MaxText's FLOPs a token / its TFLOP/s a chip (the README's figure)."""
    c = training_cases()[rid]
    return float(c["parallelism"]["per_device_batch"] * c["model"]["seq_len"]
                 * c["measured"]["framework_flops_per_token"] / (c["measured"]["tflops_per_gpu"] * 1e12))


def _ring_all_reduce_s(shard_bytes: float, slices: int) -> float:
    """A ring all-reduce of a chip's gradient shard over the slices at the DCN tier's price by hand: 25 Gb/s a chip
    (2 x 100 Gb/s for 8 chips) x 0.62 (the tier's stand-in efficiency), 35 us a ring step, 2 (n - 1) steps."""
    return 2 * (slices - 1) / slices * shard_bytes / (25e9 / 8 * 0.62) + 2 * (slices - 1) * 35e-6


def test_v5e_64b_slice_growth_exceeds_an_exposed_fp32_all_reduce() -> None:
    """64B (FSDP 256 a slice): a chip's shard is 64.761e9 / 256 parameters; all-reduced in fp32 over 32 slices, fully
    exposed, that is 2 x 31/32 x 1.012 GB / 1.9375 GB/s + 62 x 35 us = 1.014 s. The README's steps grow by 2.67 s
    from 1 to 32 slices (13.94 -> 16.61 s), so no reading of Google's DCN rate prices the loss; the model's step
    grows by at most that exposed all-reduce (it hides it under the backward: 8 ms)."""
    shard = 64.761e9 / 256 * 4
    bound = _ring_all_reduce_s(shard, 32)
    assert bound == pytest.approx(1.014, abs=1e-3)
    grown = _measured_step("mtv5e23_v5e_64b_32x256") - _measured_step("mtv5e23_v5e_64b_1x256")
    assert grown == pytest.approx(2.67, abs=0.01)
    assert grown > 2.5 * bound
    model = _step("mtv5e23_v5e_64b_32x256") - _step("mtv5e23_v5e_64b_1x256")
    assert 0 <= model <= bound


def test_v5e_128b_two_slices_hide_their_all_reduce() -> None:
    """128B (FSDP 16 x TP 16): the shard is 129.2e9 / 256 parameters, 1.01 GB in bf16; a 2-slice ring moves it once,
    0.52 s at the tier's price. The README prints 110 TFLOP/s a chip for 1 and 2 slices alike (the same step), so the
    run hid it; the model hides it too (its 2-slice step within 0.1 % of its 1-slice one)."""
    c1, c2 = (training_cases()[f"mtv5e23_v5e_128b_{n}x256"] for n in (1, 2))
    assert c1["measured"]["tflops_per_gpu"] == c2["measured"]["tflops_per_gpu"]
    assert _ring_all_reduce_s(129.2e9 / 256 * 2, 2) == pytest.approx(0.521, abs=1e-3)
    s1, s2 = _step("mtv5e23_v5e_128b_1x256"), _step("mtv5e23_v5e_128b_2x256")
    assert 0 <= s2 - s1 < 1e-3 * s1
