"""The validator's stated-NIC override touches network tiers only (it cut NVL72's NVLink to the NIC rate)."""
from conftest import script_module

from scalemodel.specs import load_cluster


def _case(nic_gbps: float, nics: int, gpn: int) -> dict:
    return {"hardware": {"nic_Gbps": nic_gbps, "nics_per_node": nics, "gpus_per_node": gpn}}


def test_nvl72_rack_nvlink_tier_is_not_a_nic_tier() -> None:
    vt = script_module("validate_training")
    cluster = load_cluster("gb200-nvl72")
    nvlink = [t.name for t in cluster.tiers if t.protocol == "nvlink"]
    assert any(t.span > cluster.gpus_per_node for t in cluster.tiers if t.name in nvlink)  # the case this guards
    # a tray of 4 GPUs with 4 x 200 Gb/s NICs: 25 GB/s per GPU, half the catalog's 400 Gb/s per GPU
    out = vt._nic_overrides(_case(200, 4, 4), cluster)
    assert out, "a slower stated NIC must override the network tiers"
    named = {item.split(".")[1] for item in out}
    assert not named & set(nvlink)
    network = {t.name for t in cluster.tiers if t.span > cluster.gpus_per_node and t.protocol != "nvlink"}
    assert named == network
    assert all(item.endswith("=200 Gbit/s") for item in out)  # 200 Gb/s x 4 NICs / 4 GPUs per GPU


def test_stated_nics_equal_to_the_catalog_override_nothing() -> None:
    vt = script_module("validate_training")
    assert vt._nic_overrides(_case(400, 4, 4), load_cluster("gb200-nvl72")) == []
