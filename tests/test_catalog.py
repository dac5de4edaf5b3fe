"""The built-in hardware catalog (hardware/): every file well-formed, every number sourced.

Expected values are worked out by hand from the datasheets quoted in the reference sheet
(cited in each hardware/*.yaml file) and from the hardware stated by the validation
cases (../shared/validation/cases.yaml), not read back from the files under test.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import load_yaml, validation_cases_path

from scalemodel.engine.job import build_network
from scalemodel.specs.yamlread import FastLoader
from scalemodel.units import parse_quantity

REPO = Path(__file__).resolve().parents[1]
HW = REPO / "hardware"
ACC_DIR = HW / "accelerators"
CLU_DIR = HW / "clusters"
CASES = validation_cases_path()

REQUIRED_ACCELERATORS = {
    "v100-sxm2-32g", "a100-sxm-40g", "a100-sxm-80g", "a100-pcie-80g", "h100-sxm", "h100-pcie", "h800",
    "h200-sxm", "b200", "gb200", "gb300", "mi250x", "mi300x", "mi325x", "mi355x", "tpu-v4", "tpu-v5p", "gaudi3",
}
REQUIRED_CLUSTERS = {
    "dgx-a100", "dgx-a100-40g", "dgx-h100", "hgx-h200", "dgx-b200", "gb200-nvl72", "gb300-nvl72", "mi300x-8",
    "mi325x-8", "mi355x-8", "aws-p4d", "aws-p5", "tpu-v4-pod", "pcie-25gbe",
}
PRECISIONS = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4"}
FAMILIES = {"pascal", "volta", "ampere", "hopper", "blackwell", "cdna2", "cdna3", "cdna4", "tpu", "gaudi"}
TOPOLOGIES = {"switch", "mesh", "torus", "ring", "rail"}
PROTOCOLS = {"nvlink", "pcie", "xgmi", "ici", "rdma", "roce", "efa", "tcp", "dcn"}

ACC_FIELDS = {"kind", "name", "description", "vendor", "family", "peak_flops", "memory", "memory_bandwidth",
              "compute_efficiency", "compute_units", "collective_units", "collective_units_nvls",
              "tdp", "sources", "attention_efficiency", "attention_releases", "memory_reserved", "clock_jitter_cv"}
ACC_NUMERIC = ("peak_flops", "memory", "memory_bandwidth", "tdp")
ACC_UNITS = ("compute_units", "collective_units", "collective_units_nvls")
CLU_FIELDS = {"kind", "name", "description", "accelerator", "gpus_per_node", "max_gpus", "price_per_gpu_hour",
              "node_power", "tiers", "sources", "host_bandwidth", "nccl_tuner", "host_cpu",
              "host_memory"}
CLU_NUMERIC = ("gpus_per_node", "max_gpus", "price_per_gpu_hour", "node_power", "host_bandwidth", "host_memory")
TIER_FIELDS = {"name", "span", "bandwidth", "latency", "efficiency", "oversubscription", "in_network_reduction",
               "topology", "protocol", "sources", "torus_dims", "net_overhead", "full_mesh", "nics_per_node"}
TIER_SOURCED = ("span", "bandwidth", "latency", "efficiency", "oversubscription", "in_network_reduction", "torus_dims",
                "net_overhead", "full_mesh", "nics_per_node")

ACC_FILES = sorted(ACC_DIR.glob("*.yaml"))
CLU_FILES = sorted(CLU_DIR.glob("*.yaml"))
TERA = 1e12


def _load(path: Path) -> dict[str, Any]:
    data = load_yaml(path)  # yaml.safe_load's value (libyaml's parser, once a session)
    assert isinstance(data, dict), f"{path.name}: top level must be a mapping"
    return data


def _acc(name: str) -> dict[str, Any]:
    return _load(ACC_DIR / f"{name}.yaml")


def _clu(name: str) -> dict[str, Any]:
    return _load(CLU_DIR / f"{name}.yaml")


def _unpublished(sources: dict[str, str], field: str) -> bool:
    return str(sources.get(field, "")).lower().startswith("not published")


# ---------------------------------------------------------------- every file


def test_required_names_exist() -> None:
    assert REQUIRED_ACCELERATORS <= {p.stem for p in ACC_FILES}
    assert REQUIRED_CLUSTERS <= {p.stem for p in CLU_FILES}
    assert not list(HW.rglob("*.yml")), "use the .yaml extension"


@pytest.mark.parametrize("path", ACC_FILES + CLU_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_plain_yaml_with_comment_header(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# "), "first line must be a one-line '# ...' comment describing the spec"
    for event in yaml.parse(text, Loader=FastLoader):  # libyaml's events where PyYAML has it
        assert not isinstance(event, yaml.AliasEvent), "no YAML aliases in built-in specs"
        assert getattr(event, "anchor", None) is None, "no YAML anchors in built-in specs"
    assert isinstance(load_yaml(path), dict)


# ---------------------------------------------------------------- accelerators


@pytest.mark.parametrize("path", ACC_FILES, ids=lambda p: p.name.split(".")[0])
def test_accelerator_fields_and_sources(path: Path) -> None:
    d = _load(path)
    assert set(d) <= ACC_FIELDS, f"unknown keys {set(d) - ACC_FIELDS}"
    assert d["kind"] == "accelerator"
    assert d["name"] == path.name.split(".")[0]
    assert isinstance(d["description"], str) and d["description"].strip()
    assert isinstance(d["vendor"], str) and d["vendor"].strip()
    assert d["family"] in FAMILIES
    sources = d["sources"]
    assert isinstance(sources, dict)
    sourced = set(ACC_NUMERIC) | set(ACC_UNITS) | {"memory_reserved", "clock_jitter_cv"}
    assert set(sources) <= sourced, f"sources for unknown fields {set(sources) - sourced}"
    for field in ACC_NUMERIC:
        assert isinstance(sources.get(field), str) and len(sources[field]) > 10, f"{field} needs a source"
    for field in ACC_UNITS:  # SM / CU counts and the collective library's CTAs: optional, always cited
        if field in d:
            assert isinstance(d[field], int) and d[field] > 0, field
            assert isinstance(sources.get(field), str) and len(sources[field]) > 10, f"{field} needs a source"
    if "memory_reserved" in d:  # the driver's slice (docs/model.md#memory-allowance): optional, always cited
        src = sources.get("memory_reserved")
        assert isinstance(src, str) and ("deviceQuery" in src or "torch" in src), "memory_reserved needs CUDA's total"
    if "clock_jitter_cv" in d:  # the clock's swing at the power limit (docs/model.md#jitter): measured or borrowed
        src = sources.get("clock_jitter_cv")
        assert 0 < d["clock_jitter_cv"] < 0.1, "a CV of the compute rate, a fraction"
        assert isinstance(src, str) and ("measured" in src or "borrowed" in src), "clock_jitter_cv needs a source"
    for units in ("collective_units", "collective_units_nvls"):
        if units in d:
            assert "compute_units" in d and d[units] < d["compute_units"], units
    for kernel, curves in (d.get("attention_efficiency") or {}).items():  # fitted or borrowed, always said which
        assert "scripts/fit_attention.py" in curves["source"], kernel
        assert "BORROWED" in curves["source"] or "fitted to" in curves["source"], kernel
        for direction in ("fwd", "bwd"):
            assert 0 < curves[direction]["attn_max"] <= 1, (kernel, direction)
    for release, kernels in (d.get("attention_releases") or {}).items():  # per cuDNN release, each cited
        assert isinstance(release, str) and release.count(".") == 1, release  # quoted in YAML: '9.10', not 9.1
        for kernel, curves in kernels.items():
            assert "scripts/fit_attention.py" in curves["source"] and f"cuDNN {release}" in curves["source"]
            assert "BORROWED" in curves["source"] or "fitted to" in curves["source"], (release, kernel)
    peaks = d["peak_flops"]
    assert peaks and set(peaks) <= PRECISIONS
    for prec, value in peaks.items():
        assert parse_quantity(value, "flop_rate") > 0, prec
    assert parse_quantity(d["memory"], "bytes") > 0
    assert parse_quantity(d["memory_bandwidth"], "bandwidth") > 0
    if "tdp" in d:
        assert parse_quantity(d["tdp"], "power") > 0
    else:
        assert _unpublished(sources, "tdp"), "tdp may only be left out when the source says it is not published"


@pytest.mark.parametrize("path", ACC_FILES, ids=lambda p: p.stem)
def test_accelerator_peaks_are_consistent(path: Path) -> None:
    """Structural facts of every datasheet in the reference: FP16 = BF16 rate, lower precision never slower,
    and on Blackwell FP4 = 2 x FP8 = 4 x BF16 (Blackwell Ultra, gb300 and b300: FP4 = 3 x FP8, its NVFP4 uplift, 15
    against 5 PFLOPS dense per GPU: hardware/SOURCES.md [NV-BWU-BLOG], [VERDA])."""
    doc = _load(path)
    peaks = {k: parse_quantity(v, "flop_rate") for k, v in doc["peak_flops"].items()}
    if "bf16" in peaks and "fp16" in peaks:
        assert peaks["bf16"] == peaks["fp16"]
    order = [p for p in ("fp4", "fp8", "bf16", "tf32") if p in peaks]
    for hi, lo in zip(order[:-1], order[1:], strict=True):
        assert peaks[hi] >= peaks[lo], f"{hi} slower than {lo}"
    if "fp4" in peaks:
        assert peaks["fp4"] == pytest.approx((3 if doc["name"] in ("gb300", "b300") else 2) * peaks["fp8"])
        assert peaks["fp8"] == pytest.approx(2 * peaks["bf16"])


@pytest.mark.parametrize(
    ("name", "precision", "expected"),
    [
        # NVIDIA prints tensor rates with 2:4 sparsity; the catalog holds dense = sparse / 2 (datasheet footnote).
        ("a100-sxm-80g", "bf16", 624 / 2 * TERA),
        ("a100-sxm-80g", "tf32", 312 / 2 * TERA),
        ("h100-sxm", "bf16", 1979 / 2 * TERA),
        ("h100-sxm", "fp8", 3958 / 2 * TERA),
        ("h100-pcie", "bf16", 1513 / 2 * TERA),
        ("b200", "fp4", 18000 / 2 * TERA),
        ("gb200", "bf16", 5000 / 2 * TERA),
        # GB300 NVL72 rack: FP8/FP6 720 PFLOPS with sparsity over 72 GPUs, halved (hardware/SOURCES.md [GB300-NVL72]).
        ("gb300", "fp8", 720e3 / 72 / 2 * TERA),
        # DGX B300: 72 PFLOPS FP8 training with sparsity over 8 GPUs, halved (hardware/SOURCES.md [DGXB300]).
        ("b300", "fp8", 72e3 / 8 / 2 * TERA),
        # ROCm tables are dense already; AMD marketing's sparse FP8 5229.8 halves to the dense 2614.9.
        ("mi300x", "fp8", 5229.8 / 2 * TERA),
        # Vendors that quote dense only.
        ("v100-sxm2-32g", "fp16", 125 * TERA),
        ("tpu-v4", "bf16", 275 * TERA),
        # Google's TPU v3 page: 123 TFLOPS bf16 per chip, 126 PFLOPS per 1024-chip pod (126e3 / 1024 = 123.0).
        ("tpu-v3", "bf16", 126e3 / 1024 * TERA),
        ("gaudi3", "bf16", 1835 * TERA),
    ],
)
def test_peaks_are_dense(name: str, precision: str, expected: float) -> None:
    got = parse_quantity(_acc(name)["peak_flops"][precision], "flop_rate")
    assert got == pytest.approx(expected, rel=1e-3)


def test_memory_values_are_driver_totals() -> None:
    """`memory` is the device total the driver reports (hardware/README.md, Memory capacity), each typed in from its
    log: [NVSMI] nvidia-smi "Total" in MiB, [ROCM-VRAM] rocm-smi "VRAM Total Memory (B)" / rocminfo HIP pool, KiB."""
    names = ("a100-sxm-40g", "a100-sxm-80g", "a100-pcie-80g", "h100-sxm", "h800", "h200-sxm", "mi250x", "mi300x",
             "tpu-v3", "tpu-v4")
    mem = {n: parse_quantity(_acc(n)["memory"], "bytes") for n in names}
    mib = 2**20
    assert mem["a100-sxm-40g"] == 40960 * mib == 40 * 2**30  # "A100-SXM4-40GB ... 40960MiB"
    assert mem["a100-sxm-80g"] == mem["a100-pcie-80g"] == 81920 * mib == 80 * 2**30  # "A100-SXM4-80GB ... 81920MiB"
    assert mem["h100-sxm"] == mem["h800"] == 81559 * mib == 85520809984  # modal-client#2797: "85520809984 bytes"
    assert mem["h200-sxm"] == 143771 * mib
    assert mem["mi300x"] == 205822885888 == 200998912 * 1024 == 192 * 2**30 - 320 * mib  # rocm-smi B, rocminfo KiB
    assert mem["mi250x"] == 2 * 67092480 * 1024 == 2 * (64 * 2**30 - 16 * mib)  # two GCDs, rocminfo KiB each
    assert mem["tpu-v4"] == 32 * 2**30  # no driver total published: Google's 32 GiB as printed
    assert mem["tpu-v3"] == 32 * 2**30 == 34359738368  # Google's TPU v3 page prints "32 GiB" (was read as 32e9)
    bw = parse_quantity(_acc("h100-sxm")["memory_bandwidth"], "bandwidth")
    assert bw == 3.35e12


def test_nvidia_device_total_includes_the_reserve() -> None:
    """nvidia-smi -q's Total less its Reserved is what CUDA can allocate, the deviceQuery total on the same box
    ([NVSMI], thamada/nvidia-smi: H100 81559 - 454 MiB, 85045477376 B; A100 80 GB 81920 - 763 MiB, 85100068864 B;
    within the 1 MiB rounding of nvidia-smi); memory_reserved takes exactly that slice off (hardware/README.md)."""
    for name, reserved, device_query in (("h100-sxm", 454, 85045477376), ("a100-sxm-80g", 763, 85100068864)):
        total = parse_quantity(_acc(name)["memory"], "bytes")
        assert abs(total - reserved * 2**20 - device_query) <= 2**20
        assert 0.004 < reserved * 2**20 / total < 0.01  # the 0.4-0.9 % the README states
        assert total - parse_quantity(_acc(name)["memory_reserved"], "bytes") == device_query


# ---------------------------------------------------------------- clusters


@pytest.mark.parametrize("path", CLU_FILES, ids=lambda p: p.stem)
def test_cluster_fields_and_sources(path: Path) -> None:
    d = _load(path)
    assert set(d) <= CLU_FIELDS, f"unknown keys {set(d) - CLU_FIELDS}"
    assert d["kind"] == "cluster"
    assert d["name"] == path.stem
    assert isinstance(d["description"], str) and d["description"].strip()
    assert (ACC_DIR / f"{d['accelerator']}.yaml").exists(), f"unknown accelerator {d['accelerator']!r}"
    gpn = d["gpus_per_node"]
    assert isinstance(gpn, int) and not isinstance(gpn, bool) and gpn > 0
    sources = d["sources"]
    sourced = set(CLU_NUMERIC) | {"nccl_tuner", "host_cpu"}
    assert set(sources) <= sourced, f"sources for unknown fields {set(sources) - sourced}"
    for field in (*CLU_NUMERIC, "nccl_tuner"):
        if field in d:
            assert isinstance(sources.get(field), str) and len(sources[field]) > 10, f"{field} needs a source"
    # host_cpu (NCCL's LL cap row, docs/model.md#nccl-ll-cap): every built-in cluster says what its host is, or why
    # it names none ("omitted: ...")
    assert isinstance(sources.get("host_cpu"), str) and len(sources["host_cpu"]) > 10, "host_cpu needs a source"
    assert ("host_cpu" in d) != sources["host_cpu"].startswith("omitted:"), sources["host_cpu"]
    if "price_per_gpu_hour" in d:
        assert parse_quantity(d["price_per_gpu_hour"], "price_rate") > 0
    if "node_power" in d:
        assert parse_quantity(d["node_power"], "power") > 0


@pytest.mark.parametrize("path", CLU_FILES, ids=lambda p: p.stem)
def test_cluster_tiers(path: Path) -> None:
    d = _load(path)
    gpn = d["gpus_per_node"]
    tiers = d["tiers"]
    assert isinstance(tiers, list) and tiers
    names = [t["name"] for t in tiers]
    assert len(set(names)) == len(names), "tier names must be unique"
    prev_span = None
    for t in tiers:
        assert set(t) <= TIER_FIELDS, f"{t['name']}: unknown keys {set(t) - TIER_FIELDS}"
        for key in ("span", "bandwidth", "latency", "efficiency", "topology", "protocol"):
            assert key in t, f"{t['name']}: missing {key}"
        span = t["span"]
        assert isinstance(span, int) and not isinstance(span, bool) and span > 0
        assert span % gpn == 0, f"{t['name']}: span {span} is not whole nodes of {gpn}"
        if prev_span is not None:
            assert span > prev_span and span % prev_span == 0, f"{t['name']}: {span} after {prev_span}"
        prev_span = span
        assert parse_quantity(t["bandwidth"], "bandwidth") > 0
        assert parse_quantity(t["latency"], "time") > 0
        assert isinstance(t["efficiency"], (int, float)) and 0 < t["efficiency"] <= 1
        assert float(t.get("oversubscription", 1)) >= 1
        assert isinstance(t.get("in_network_reduction", False), bool)
        assert t["topology"] in TOPOLOGIES and t["protocol"] in PROTOCOLS
        src = t["sources"]
        assert set(src) <= set(TIER_SOURCED), f"{t['name']}: sources for unknown fields"
        for key in TIER_SOURCED:
            if key in t:
                assert isinstance(src.get(key), str) and len(src[key]) > 10, f"{t['name']}: {key} needs a source"
    if "max_gpus" in d:
        assert d["max_gpus"] % gpn == 0 and d["max_gpus"] <= tiers[-1]["span"]


@pytest.mark.parametrize("path", CLU_FILES, ids=lambda p: p.stem)
def test_outer_tiers_are_no_faster(path: Path) -> None:
    """Leaving a tier never gets cheaper: per-GPU line rate does not rise and latency does not fall outwards."""
    tiers = _load(path)["tiers"]
    bws = [parse_quantity(t["bandwidth"], "bandwidth") for t in tiers]
    lats = [parse_quantity(t["latency"], "time") for t in tiers]
    assert bws == sorted(bws, reverse=True)
    assert lats == sorted(lats)


# ---------------------------------------------------------------- against the reference and the cases


def _tier(cluster: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in cluster["tiers"] if t["name"] == name)


def _eff_bw(tier: dict[str, Any]) -> float:
    return parse_quantity(tier["bandwidth"], "bandwidth") * tier["efficiency"] / float(tier.get("oversubscription", 1))


def test_per_direction_link_rates() -> None:
    # Vendors quote NVLink bidirectionally: NVLink3 12 x 50 = 600, NVLink4 18 x 50 = 900, NVLink5 18 x 100 = 1800.
    assert parse_quantity(_tier(_clu("dgx-a100"), "nvlink")["bandwidth"], "bandwidth") == 12 * 50e9 / 2
    assert parse_quantity(_tier(_clu("dgx-h100"), "nvlink")["bandwidth"], "bandwidth") == 18 * 50e9 / 2
    assert parse_quantity(_tier(_clu("gb200-nvl72"), "nvlink")["bandwidth"], "bandwidth") == 18 * 100e9 / 2
    assert parse_quantity(_tier(_clu("gb300-nvl72"), "nvlink")["bandwidth"], "bandwidth") == 18 * 100e9 / 2
    # One NIC per GPU: HDR 200 Gb/s = 25 GB/s, NDR 400 Gb/s = 50 GB/s.
    assert parse_quantity(_tier(_clu("dgx-a100"), "ib-leaf")["bandwidth"], "bandwidth") == 25e9
    assert parse_quantity(_tier(_clu("dgx-h100"), "ib-leaf")["bandwidth"], "bandwidth") == 50e9
    # Shared NICs: p4d 4 x 100 Gb/s per 8 GPUs; commodity one 25 GbE per 8 GPUs.
    assert parse_quantity(_tier(_clu("aws-p4d"), "efa")["bandwidth"], "bandwidth") == 4 * 100e9 / 8 / 8
    assert parse_quantity(_tier(_clu("pcie-25gbe"), "tcp")["bandwidth"], "bandwidth") == 25e9 / 8 / 8
    # Switchless: MI300X 7 peers x 64 GB/s; TPU v4 6 ICI links x 45 GB/s one-way.
    assert parse_quantity(_tier(_clu("mi300x-8"), "xgmi")["bandwidth"], "bandwidth") == 7 * 64e9
    assert parse_quantity(_tier(_clu("tpu-v4-pod"), "ici")["bandwidth"], "bandwidth") == 6 * 45e9


def test_effective_rates_match_published_nccl_numbers() -> None:
    # sjeaugey (nccl-tests#212): H100 NVLink ring collectives reach ~370 GB/s.
    assert _eff_bw(_tier(_clu("dgx-h100"), "nvlink")) == pytest.approx(370e9, rel=0.01)
    # NVIDIA/nccl#1576: a DGX A100's 8 HDR NICs give 8 x 24 = 192 GB/s per node.
    c = _clu("dgx-a100")
    assert c["gpus_per_node"] * _eff_bw(_tier(c, "ib-leaf")) == pytest.approx(8 * 24e9, rel=0.01)
    # nccl-tests#290: NDR 400 Gb/s reaches 46-48 GB/s per NIC.
    assert 46e9 <= _eff_bw(_tier(_clu("dgx-h100"), "ib-leaf")) <= 48e9
    # The mesh is modelled as a mesh, the TPU pod as a torus, commodity Ethernet as TCP.
    assert _tier(_clu("mi300x-8"), "xgmi")["topology"] == "mesh"
    assert _tier(_clu("tpu-v4-pod"), "ici")["topology"] == "torus"
    assert _tier(_clu("pcie-25gbe"), "tcp")["protocol"] == "tcp"


def test_tcp_commodity_is_slow_and_high_latency() -> None:
    c = _clu("pcie-25gbe")
    tcp = _tier(c, "tcp")
    rdma = _tier(_clu("dgx-a100"), "ib-leaf")
    assert tcp["efficiency"] < rdma["efficiency"]
    # kernel-TCP alpha 20-50 us (tens-of-us RTTs, RAMCloud RPC numbers) vs IB 2-5 us (nccl-tests#123).
    assert 20e-6 <= parse_quantity(tcp["latency"], "time") <= 50e-6
    assert 2e-6 <= parse_quantity(rdma["latency"], "time") <= 5e-6
    assert _tier(c, "pcie")["protocol"] == "pcie"


def test_in_network_reduction_only_on_nvswitch_gen3_and_later() -> None:
    nvls = {n: _clu(n)["tiers"][0].get("in_network_reduction", False) for n in REQUIRED_CLUSTERS}
    assert nvls["dgx-h100"] and nvls["hgx-h200"] and nvls["dgx-b200"] and nvls["gb200-nvl72"] and nvls["aws-p5"]
    assert not (nvls["dgx-a100"] or nvls["aws-p4d"] or nvls["mi300x-8"] or nvls["pcie-25gbe"])


def _cases() -> list[dict[str, Any]]:
    if not CASES.exists():
        pytest.skip(f"validation cases not found at {CASES}")
    cases = load_yaml(CASES)
    assert isinstance(cases, list)
    return cases


def test_dgx_a100_describes_selene() -> None:
    selene = [c for c in _cases() if "Selene" in str(c.get("hardware", {}).get("system", ""))]
    assert selene, "expected the Megatron Selene cases"
    c = _clu("dgx-a100")
    acc = _acc(c["accelerator"])
    network = c["tiers"][1:]  # tiers outside the node
    for case in selene:
        hw = case["hardware"]
        assert hw["gpu"] == "A100-SXM4-80GB" and c["accelerator"] == "a100-sxm-80g"
        # the "80GB" board: 80 x 2^30 B, the 81920 MiB nvidia-smi prints ([NVSMI])
        assert parse_quantity(acc["memory"], "bytes") == hw["gpu_mem_GB"] * 2**30
        assert parse_quantity(acc["peak_flops"]["fp16"], "flop_rate") == hw["peak_tflops_16bit"] * TERA
        assert c["gpus_per_node"] == hw["gpus_per_node"]
        node_nic = c["gpus_per_node"] * parse_quantity(network[0]["bandwidth"], "bandwidth")
        assert node_nic == hw["nics_per_node"] * hw["nic_Gbps"] * 1e9 / 8
        levels = re.search(r"(\d)-level fat tree", hw["inter_node_net"])
        assert levels and len(network) == int(levels.group(1))
        assert all(t["protocol"] == "rdma" for t in network)  # HDR InfiniBand
        assert c["tiers"][0]["protocol"] == "nvlink"
    sizes = [case["parallelism"]["gpus"] for case in selene if "gpus" in case.get("parallelism", {})]
    assert sizes and max(sizes) <= c["max_gpus"]  # up to 3072 GPUs (Narayanan 2021 Table 1)


def test_nccl_cases_hardware_is_described() -> None:
    cases = {c["id"]: c for c in _cases()}
    h100 = cases["nt212_h100_guidance"]["hardware"]
    line = re.search(r"(\d+) GB/s line rate", h100["intra_node_link"])
    assert line
    nvlink = _tier(_clu("dgx-h100"), "nvlink")
    assert parse_quantity(nvlink["bandwidth"], "bandwidth") == float(line.group(1)) * 1e9
    assert nvlink["span"] == h100["gpus"]
    a100 = cases["az_nda100v4_allreduce_1node"]["hardware"]
    c = _clu("dgx-a100")
    assert c["tiers"][0]["span"] == a100["gpus"] and a100["nodes"] == 1
    assert a100["gpu"] == "A100-SXM4-80GB" and c["accelerator"] == "a100-sxm-80g"


# ---------------------------------------------------------------- through the specs loader


def _specs() -> Any:
    try:
        import scalemodel.specs as specs

        specs.load_cluster  # noqa: B018
        specs.load_accelerator  # noqa: B018
    except (ImportError, AttributeError):
        pytest.skip("scalemodel.specs.load_cluster/load_accelerator not available yet")
    return specs


@pytest.mark.parametrize("path", ACC_FILES, ids=lambda p: p.stem)
def test_accelerator_loads_through_specs(path: Path) -> None:
    specs = _specs()
    d = _load(path)
    a = specs.load_accelerator(path.stem, overrides=[])
    assert a.name == path.stem
    assert a.memory == parse_quantity(d["memory"], "bytes")
    assert a.memory_bandwidth == parse_quantity(d["memory_bandwidth"], "bandwidth")
    assert dict(a.peak_flops) == {k: parse_quantity(v, "flop_rate") for k, v in d["peak_flops"].items()}


@pytest.mark.parametrize("path", CLU_FILES, ids=lambda p: p.stem)
def test_cluster_loads_through_specs(path: Path) -> None:
    specs = _specs()
    d = _load(path)
    c = specs.load_cluster(path.stem, overrides=[])
    assert c.name == path.stem and c.accelerator.name == d["accelerator"]
    assert c.gpus_per_node == d["gpus_per_node"]
    net = build_network(c)
    assert [t.span for t in net.tiers] == [t["span"] for t in d["tiers"]]
    for got, want in zip(net.tiers, d["tiers"], strict=True):
        assert got.latency == pytest.approx(parse_quantity(want["latency"], "time"))
        assert got.effective_bandwidth == pytest.approx(_eff_bw(want))


def test_gb300_values_equal_their_datasheet_numbers() -> None:
    """GB300 (Blackwell Ultra, GB300 NVL72) against the published figures, each typed in from its source
    (hardware/SOURCES.md): [VERDA] per-GPU dense table, [NV-BWU-BLOG] NVIDIA's Blackwell Ultra blog, [GB300-NVL72]
    the rack page."""
    acc = _acc("gb300")
    peak = {p: parse_quantity(acc["peak_flops"][p], "flop_rate") for p in ("bf16", "fp16", "fp8", "tf32", "fp32")}
    assert peak["bf16"] == peak["fp16"] == pytest.approx(2.5e15)  # [VERDA] FP16/BF16 2.5 PFLOPS dense
    assert peak["fp8"] == pytest.approx(5e15)  # [VERDA] FP8 5 PFLOPS dense = 720 PF sparse / 72 / 2
    assert peak["tf32"] == pytest.approx(1.25e15) and peak["fp32"] == pytest.approx(80e12)  # [VERDA]
    # [NVSMI] nvidia-smi's total (k8s-test-infra qx-gb300.xml, review29b), under [NV-BWU-BLOG]'s 288 GB read as GiB
    assert parse_quantity(acc["memory"], "bytes") == 284208 * 2**20 < 288 * 2**30
    assert parse_quantity(acc["memory_bandwidth"], "bandwidth") == pytest.approx(8e12)  # [NV-BWU-BLOG] 8 TB/s
    assert parse_quantity(acc["tdp"], "power") == pytest.approx(1400.0)  # [NV-BWU-BLOG] 1400 W
    assert acc["compute_units"] == 152  # triton #2768: sm_count 152 on a GB300 ([NV-BWU-BLOG] 160: the full die)
    clu = _clu("gb300-nvl72")
    assert clu["accelerator"] == "gb300" and clu["gpus_per_node"] == 4
    nvl = _tier(clu, "nvlink")
    assert nvl["span"] == 72  # [GB300-NVL72] 72 GPUs, 130 TB/s = 72 x 1.8 TB/s bidirectional
    assert parse_quantity(nvl["bandwidth"], "bandwidth") * 2 * 72 == pytest.approx(129.6e12)
    # [GB300-NVL72] one ConnectX-8 SuperNIC per GPU, 800 Gb/s = 100 GB/s per direction
    assert parse_quantity(_tier(clu, "ib-leaf")["bandwidth"], "bandwidth") == pytest.approx(800e9 / 8)


@pytest.mark.parametrize(
    ("chip, pod, peak_tflops, pod_pflops, hbm_bytes, hbm_gbps, ici_bidi_gbps, allreduce_pod_tbps, nics_gbps, "
     "dcn_pod_tbps"),
    [
        # [GCP-v5e]: 197 TFLOPs bf16, 50.63 PFLOPs per pod; '16 GB' HBM2 (read as 16 GiB, the part's binary
        # capacity); 819 GBps; 400 GBps bidirectional ICI per chip over 4 ports; all-reduce 51.2 TB/s per pod;
        # 2 x 100 Gbps NICs per 8-chip host; DCN 6.4 Tbps per pod
        ("tpu-v5e", "tpu-v5e-multislice", 197, 50.63, 16 * 2**30, 819, 400, 51.2, 2 * 100, 6.4),
        # [GCP-v6e] (docs.cloud.google.com v6e.md.txt): 918 TFLOPs, 234.9 PFLOPs per pod, '32 GB' (read as 32 GiB
        # since ici30, as v5e's 16 GB: the TPU runtime's bytes_limit, 33,550,237,696 B in vllm-project/vllm#16211, is
        # above 32e9, so the part is binary; tests/test_ici30.py checks the capacity itself); HBM 1638 GBps
        # = 1600 GiB/s (1638.4e9 B/s, twice v5e's 819 = 800 GiB/s; revisions print 1638, 1640 and the rounded
        # 1600); ICI 3200 Gbps (= 800 GBps bidirectional), all-reduce 102.4 TB/s; 4 x 200 Gbps NICs, 25.6 Tbps
        # (no DCN tier)
        ("tpu-v6e", "tpu-v6e-pod", 918, 234.9, 32 * 2**30, 1600 * 1.024, 800, 102.4, 4 * 200, 25.6),
    ],
)
def test_tpu_v5e_v6e_values_from_googles_pages(chip: str, pod: str, peak_tflops: float, pod_pflops: float,
                                              hbm_bytes: float, hbm_gbps: float, ici_bidi_gbps: float,
                                              allreduce_pod_tbps: float, nics_gbps: float,
                                              dcn_pod_tbps: float) -> None:
    """TPU v5e and v6e against Google's system-architecture tables (hardware/SOURCES.md [GCP-v5e], [GCP-v6e]), each
    per-chip figure also checked against the same table's per-pod figure / 256 chips."""
    acc = _acc(chip)
    peak = parse_quantity(acc["peak_flops"]["bf16"], "flop_rate")
    assert peak == pytest.approx(peak_tflops * TERA)
    assert peak * 256 == pytest.approx(pod_pflops * 1e15, rel=5e-3)  # the pod figure agrees (v5e: 197.8 x 256)
    assert set(acc["peak_flops"]) == {"bf16"}  # int8 TOPs are no FLOP rate
    assert parse_quantity(acc["memory"], "bytes") == hbm_bytes
    assert parse_quantity(acc["memory_bandwidth"], "bandwidth") == pytest.approx(hbm_gbps * 1e9, rel=1e-3)
    clu = _clu(pod)
    assert clu["accelerator"] == chip and clu["gpus_per_node"] == 8  # 'Chips per host 8'
    ici = _tier(clu, "ici")
    assert ici["span"] == 256 and ici["topology"] == "torus" and ici["torus_dims"] == [16, 16]  # 2D torus, 16x16
    bw = parse_quantity(ici["bandwidth"], "bandwidth")
    assert bw == pytest.approx(ici_bidi_gbps * 1e9 / 2)  # bidirectional / 2 = per direction (catalog convention)
    assert bw * 256 == pytest.approx(allreduce_pod_tbps * 1e12)  # 'All-reduce bandwidth per Pod' / 256
    assert bw / 4 == pytest.approx(ici_bidi_gbps / 8 * 1e9)  # 4 ICI ports per chip: one link, one direction
    # as tpu-v3-pod / tpu-v4-pod: sum over the chip's links, one direction
    assert parse_quantity(_tier(_clu("tpu-v3-pod"), "ici")["bandwidth"], "bandwidth") == 4 * 100e9
    if chip == "tpu-v5e":  # DCN: the host's NICs shared by its 8 chips; the pod figure agrees
        dcn = parse_quantity(_tier(clu, "dcn")["bandwidth"], "bandwidth")
        assert dcn == pytest.approx(nics_gbps * 1e9 / 8 / 8)
        assert dcn * 8 * 256 == pytest.approx(dcn_pod_tbps * 1e12)
        one = _tier(_clu("tpu-v5e-pod"), "ici")  # the one-slice pod: the same ICI tier
        assert {k: v for k, v in one.items() if k != "sources"} == {k: v for k, v in ici.items() if k != "sources"}
    else:
        assert [t["name"] for t in clu["tiers"]] == ["ici"]  # no DCN tier modelled on the v6e pod
        assert nics_gbps * 1e9 * 32 == pytest.approx(dcn_pod_tbps * 1e12)  # 32 hosts x 4 x 200 Gbps
