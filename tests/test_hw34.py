"""hw34: catalog hygiene. (a) GB300's values against NVIDIA's published figures, each number written here by hand
from the datasheet or blog (hardware/SOURCES.md [GB300-NVL72], [NV-BWU-BLOG], [VERDA]; [NVSMI] for the device total),
not read back from the catalog. (b) Issue 13's rule over every accelerator YAML: "Where no measurement is published,
the YAML says the curve is borrowed and from which accelerator": every value has a source, and every curve (GEMM,
memory fraction, FP8 GEMM, each attention kernel and cuDNN release) rests on this part's own points in
hardware/measurements/ or names the catalog accelerator it is borrowed from. (c) validation/sources.yaml holds an
entry for every source prefix of validation/training_cases.yaml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import load_yaml

from scalemodel.specs import load_accelerator, load_cluster

ROOT = Path(__file__).resolve().parents[1]
ACC_DIR = ROOT / "hardware" / "accelerators"
MEAS = ROOT / "hardware" / "measurements"
NAMES = sorted(p.stem for p in ACC_DIR.glob("*.yaml"))
IDENTITY = {"kind", "name", "description", "vendor", "family", "sources"}
CURVES = {"compute_efficiency", "attention_efficiency", "attention_releases"}
DONOR = re.compile("|".join(rf"(?<![\w-]){re.escape(n)}(?![\w-])" for n in NAMES))
GIB = 2**30
MIB = 2**20


# (a) GB300 against the datasheet -------------------------------------------------------------------------------------

def test_gb300_dense_peaks_are_the_datasheet_figures() -> None:
    peak = load_accelerator("gb300").peak_flops
    # [GB300-NVL72]: FP8/FP6 720 PFLOPS with 2:4 sparsity for 72 GPUs; dense is half
    assert peak["fp8"] == pytest.approx(720e15 / 72 / 2, rel=1e-12)            # 5000 TFLOP/s
    # [GB300-NVL72]: FP4 1,080 PFLOPS dense for 72 GPUs; [NV-BWU-BLOG]: "15 PetaFLOPS dense NVFP4" a GPU
    assert peak["fp4"] == pytest.approx(1080e15 / 72, rel=1e-12)
    assert peak["fp4"] == pytest.approx(15e15, rel=1e-12)
    # [VERDA] dense rack aggregate FP16/BF16 180 PFLOPS / 72, and its per-GPU 2.5 PFLOPS; TF32 1.25 PFLOPS
    assert peak["bf16"] == peak["fp16"] == pytest.approx(180e15 / 72, rel=1e-12)
    assert peak["tf32"] == pytest.approx(1.25e15, rel=1e-12)


def test_gb300_differs_from_gb200_in_fp4_only_among_the_training_peaks() -> None:
    gb300, gb200 = load_accelerator("gb300").peak_flops, load_accelerator("gb200").peak_flops
    for p in ("bf16", "fp16", "fp8", "tf32"):  # same dense BF16 / FP8 / TF32 ([NV-BW-TABLE] / [GB300-NVL72])
        assert gb300[p] == gb200[p]
    assert gb300["fp4"] / gb200["fp4"] == pytest.approx(15.0 / 10.0, rel=1e-12)  # "1.5x dense FP4"


def test_gb300_memory_bandwidth_tdp_and_nvlink_are_the_datasheet_figures() -> None:
    acc = load_accelerator("gb300")
    assert acc.memory_bandwidth == pytest.approx(576e12 / 72, rel=1e-12)   # [GB300-NVL72] 576 TB/s for 72 GPUs
    assert acc.tdp == pytest.approx(1400.0)                                  # [NV-BWU-BLOG] 1,400 W a GPU
    # the device total nvidia-smi prints for a GB300 ([NVSMI] qx-gb300.xml: 284208 MiB), under the 288 GB of
    # HBM3e the blog quotes, read as 8 stacks x 36 GiB
    assert acc.memory == 284208 * MIB
    assert 0.95 * 8 * 36 * GIB < acc.memory < 8 * 36 * GIB
    nvlink = load_cluster("gb300-nvl72").tiers[0]
    assert nvlink.span == 72
    assert nvlink.bandwidth == pytest.approx(1.8e12 / 2, rel=1e-12)          # NVLink 5: 1.8 TB/s both ways a GPU
    assert nvlink.bandwidth == pytest.approx(130e12 / 72 / 2, rel=0.01)      # 130 TB/s for the rack


# (b) the borrowed-curve rule over every accelerator YAML ----------------------------------------------------------

def _doc(name: str) -> tuple[dict[str, Any], str]:
    text = (ACC_DIR / f"{name}.yaml").read_text()
    return load_yaml(ACC_DIR / f"{name}.yaml"), text


def _points(file: str) -> list[dict[str, Any]]:
    """Every point of a measurements file (a list of mappings with an ``acc`` key, wherever it sits)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "acc" in node:
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(load_yaml(MEAS / file))
    return found


GEMM = _points("gemm.yaml")
MEMORY = {p["acc"] for p in _points("memory_bandwidth.yaml")}
ATTENTION = {p["acc"] for p in _points("attention.yaml")}


def _donor_after_borrowed(text: str) -> str | None:
    """The catalog accelerator a 'borrowed ... from X' names (the first after the word, within the clause)."""
    m = re.search(r"borrowed[^;.]{0,40}?\bfrom\b", text, re.I)
    if m is None:
        return None
    d = DONOR.search(text, m.end(), m.end() + 40)
    return d.group(0) if d else None


def _curve_sources(doc: dict[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    ce = doc.get("compute_efficiency")
    if ce:
        out.append(("compute_efficiency", ce.get("source", "")))
        if "fp8" in ce:
            out.append(("compute_efficiency.fp8", ce["fp8"].get("source", "")))
    for k, v in (doc.get("attention_efficiency") or {}).items():
        out.append((f"attention_efficiency.{k}", v.get("source", "")))
    for r, kernels in (doc.get("attention_releases") or {}).items():
        for k, v in kernels.items():
            out.append((f"attention_releases.{r}.{k}", v.get("source", "")))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_value_and_curve_has_a_source(name: str) -> None:
    doc, _ = _doc(name)
    for key in doc:
        if key not in IDENTITY | CURVES:
            assert str(doc["sources"].get(key, "")).strip(), f"{name}: {key} has no sources entry"
    for where, src in _curve_sources(doc):
        assert src.strip(), f"{name}: {where} has no source"


@pytest.mark.parametrize("name", NAMES)
def test_a_part_without_a_gemm_curve_says_which_curve_it_borrows(name: str) -> None:
    doc, text = _doc(name)
    if doc.get("compute_efficiency") or name == "a100-sxm-80g":  # a100-sxm-80g's curve is the family default
        return
    comment = " ".join(line for line in text.splitlines() if line.startswith("# compute_efficiency:"))
    # the family default is the A100 curve (a100-sxm-80g, fitted to Korthikanti et al. 2022 Table 4)
    assert "borrowed" in comment.lower() and "a100" in comment.lower(), f"{name}: {comment!r}"


@pytest.mark.parametrize("name", NAMES)
def test_a_gemm_curve_without_this_parts_points_names_its_donor(name: str) -> None:
    doc, _ = _doc(name)
    ce = doc.get("compute_efficiency")
    if not ce:
        return
    precs = {p["prec"] for p in GEMM if p["acc"] == name}
    if not precs & {"bf16", "fp16"}:
        donor = _donor_after_borrowed(ce["source"])
        assert donor and donor != name, f"{name}: 16-bit curve without points names no donor"
    if "fp8" in ce and "fp8" not in precs:
        donor = _donor_after_borrowed(ce["fp8"]["source"]) or _donor_after_borrowed(ce["source"])
        assert donor and donor != name, f"{name}: fp8 curve without points names no donor"


@pytest.mark.parametrize("name", NAMES)
def test_a_memory_fraction_without_this_parts_points_names_its_donor(name: str) -> None:
    doc, _ = _doc(name)
    ce = doc.get("compute_efficiency")
    if not ce or name in MEMORY:
        return
    src = ce["source"]
    if not {p["prec"] for p in GEMM if p["acc"] == name}:  # the whole curve borrowed: its donor checked above
        return
    clauses = [src[m.start():m.start() + 400] for m in re.finditer(r"\bmemory\b", src)]
    assert any(re.search(r"borrow|kept", c, re.I) and DONOR.search(c) for c in clauses), \
        f"{name}: memory {ce['memory']} without a BabelStream point names no donor"


@pytest.mark.parametrize("name", NAMES)
def test_attention_curves_rest_on_this_parts_points_or_name_their_donor(name: str) -> None:
    doc, text = _doc(name)
    if not doc.get("attention_efficiency"):
        assert name not in ATTENTION, f"{name}: attention.yaml holds its points but it has no curve"
        assert "# attention_efficiency: none" in text, f"{name}: no curve and no word on how the core is priced"
        return
    for where, src in _curve_sources(doc):
        if not where.startswith("attention"):
            continue
        if re.search(r"\bBORROWED\b", src.split("(")[0]):
            donor = _donor_after_borrowed(src)
            assert donor and donor != name, f"{name}: {where} is borrowed from no named accelerator"
            kernel = where.rsplit(".", 1)[1]
            held = load_accelerator(donor)
            assert kernel in (held.attention_efficiency or {}) or any(
                kernel in c for c in (held.attention_releases or {}).values()), f"{name}: {donor} holds no {kernel}"
        else:
            assert "fitted to" in src and name in ATTENTION, f"{name}: {where} neither fitted here nor borrowed"


# (c) validation/sources.yaml covers every source ---------------------------------------------------------------------

def test_sources_yaml_has_an_entry_for_every_case_source() -> None:
    ids = re.findall(r"^- id: (\S+)", (ROOT / "validation" / "training_cases.yaml").read_text(), re.M)
    prefixes = {i.split("_")[0] for i in ids}
    listed = set(load_yaml(ROOT / "validation" / "sources.yaml")["sources"])
    assert prefixes - listed == set()
    assert {"fsdpaws22", "mttier25"} <= listed
