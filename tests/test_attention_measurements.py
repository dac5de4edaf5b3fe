"""hardware/measurements/attention.yaml (published fused-attention kernel throughput) and scripts/validate_attention.py.

The file: every point names a transcribed source with a stated FLOP convention, a catalog accelerator, and a
shape and throughput in range. The script: its model TFLOP/s for two points equal values computed here by hand
from the formula in cost.compute.flash_core_time's docstring (time = max(sum 2 M N K / (peak x eff(M, N, K)),
bytes / (bandwidth x memory)), eff = gemm_max x prod d / (d + d0)) with the accelerator YAML's own numbers,
and the FlashAttention benchmark FLOP count (4 b h s^2 d forward, halved when causal; forward + backward 3.5x),
against the step model's 3 forward times for forward + backward.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, load_yaml

from scalemodel.cost import compute
from scalemodel.specs import load_accelerator

sys.path.insert(0, str(ROOT / "scripts"))
import validate_attention as va  # noqa: E402

DOC = load_yaml(ROOT / "hardware" / "measurements" / "attention.yaml")
SOURCES, POINTS = DOC["sources"], DOC["points"]
KERNELS = {"fa1", "fa2", "fa3", "cudnn", "triton", "xformers", "aiter"}
#: ROCm/aiter's asm v3 FMHA table (op_tests/cpp/mha/README.md @630f0140): MI300X and MI355X, bf16, head dim 128, GQA
AITER = "AITER-MHA-V3"
#: NVIDIA/cudnn-frontend's Blackwell sweeps: batch 1, 128 query / 8 KV heads, head dim 128, causal, bf16
BLACKWELL = {"CUDNN-B200-9.10", "CUDNN-B200-9.13", "CUDNN-GB200-9.17"}
#: NVIDIA/cudnn-frontend's paired GB300 / GB200 sweeps at cuDNN 9.22 (fb682ce7): the same shapes on both GPUs
PAIRED = {"CUDNN-GB300-9.22": "gb300", "CUDNN-GB200-9.22": "gb200"}
#: NVIDIA/cudnn-frontend's sliding-window (gpt_oss) sweeps and the same-release llama3.1 twins of the 9.19 ones, all
#: recorded, not fitted (docs/model.md#window-calls); counted in the cudnn-frontend FLOP convention
WINDOWED = {"CUDNN-SWA-9.22", "CUDNN-SWA-9.19"}
CUDNN_FE = WINDOWED | {"CUDNN-919"}


def _one(**match: object) -> dict:
    rows = [p for p in POINTS if all(p.get(k) == v for k, v in match.items())]
    assert len(rows) == 1, match
    return rows[0]


def test_file_header_and_sources() -> None:
    assert DOC["kind"] == "measurements" and DOC["what"] == "attention"
    for key, s in SOURCES.items():
        assert {"cite", "read", "status"} <= set(s), key
    used = {p["src"] for p in POINTS}
    # published figures, NVIDIA/cudnn-frontend's Blackwell SDPA sweeps (CSV artifacts), and scalemodel's own H200 run
    # (SM-H200, status measured: its raw JSON is in the repository)
    assert used == {"FA2-A100", "FA2-H100", "FA3-FWD", "FA3-BWD", "SM-H200", AITER} | BLACKWELL | set(PAIRED) | CUDNN_FE
    for key in used - {"SM-H200"}:
        s = SOURCES[key]
        assert s["status"] == "transcribed"
        assert s["flops"] in DOC["flop_conventions"] and s["flops"] in va.CONVENTIONS
        if key == "FA3-BWD":  # the paper's Figure 6 is in no repository: its panel transcriptions, caption in `cite`
            assert s["url"].startswith("https://subtext.edge.nugit.net/image/") and "Figure 6" in s["cite"]
            assert "without causal mask" in s["cite"]
            continue
        # a fixed commit of a public repository, not a moving branch
        assert re.match(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/", s["url"]), key
    own = SOURCES["SM-H200"]
    assert own["status"] == "measured" and own["flops"] in va.CONVENTIONS
    assert (ROOT / own["file"]).is_file() and (ROOT / own["file2"]).is_file()
    # sources that were reached but not used carry no points
    assert all(SOURCES[k]["status"] not in ("transcribed", "measured") for k in set(SOURCES) - used)


def test_points_fields_and_units() -> None:
    # 273 transcribed + 36 of FA3-BWD (3 kernels x 2 head dims x 6 lengths, bwd, no mask)
    # + 96 of our H200 run (2 kernels x 2 head dims x 2 masks x 6 lengths x fwd, fwd+bwd) + the
    # Blackwell sweeps at s 512-32768: B200 2 runs x 2 kernels x 7 lengths x fwd, bwd; GB200 cuDNN 7 lengths x fwd, bwd;
    # the paired cuDNN 9.22 sweeps, 45 rows a GPU: llama3.1 2 masks x 5 lengths x fwd, bwd; qwen35 5 x fwd; ltx2 and
    # wan22 5 x fwd, bwd each
    # + the sliding-window sweeps (9.22: 2 GPUs x 5 lengths x fwd, bwd; 9.19: 3 GPUs x 5 x fwd, bwd) and the 9.19
    # twins (3 GPUs x 2 masks x 5 lengths x fwd, bwd)
    # + ROCm/aiter's asm v3 table: 2 GPUs x 2 masks x 47 shapes (3 batches x 3 head layouts x 5 lengths + 2 at
    # s 16384) x fwd, bwd
    assert len(POINTS) == 273 + 36 + 96 + 56 + 14 + 2 * 45 + 20 + 30 + 60 + 2 * 2 * 47 * 2
    assert sum(p["src"] == "SM-H200" for p in POINTS) == 96
    assert {src: sum(p["src"] == src for p in POINTS) for src in PAIRED} == {src: 45 for src in PAIRED}
    # recorded, not fitted: the whole GB200 cuDNN 9.17 sweep (a later release than the training stacks) and the GB200
    # half of the 9.22 pairs (the denominators of gb300's ratio fit), nothing else; the B200 sweeps' times include a
    # per-call host latency (fitted beside the curve by scripts/fit_attention.py)
    assert {(p["src"], p["s"]) for p in POINTS if p.get("fit") is False} == {
        ("CUDNN-GB200-9.17", n) for n in (512, 1024, 2048, 4096, 8192, 16384, 32768)} | {
        (p["src"], p["s"]) for p in POINTS if p["src"] in {"CUDNN-GB200-9.22"} | CUDNN_FE}
    assert all(p.get("fit") is False for p in POINTS if p["src"] in CUDNN_FE)
    # a window only on the causal points of the window sweeps
    assert {p["src"] for p in POINTS if "window" in p} == WINDOWED
    assert all(p["causal"] and p["window"] in (128, 1024) for p in POINTS if p["src"] in WINDOWED)
    assert all(p.get("fit") is False for p in POINTS if p["src"] == "CUDNN-GB200-9.22")
    # fitted by time ratio to its GB200 twin, not by level (scripts/fit_attention.py RATIO_FITS)
    assert {k for k, s in SOURCES.items() if s.get("level") == "ratio"} == {"CUDNN-GB300-9.22"}
    assert {k for k, s in SOURCES.items() if s.get("per_call_latency")} == {"CUDNN-B200-9.10", "CUDNN-B200-9.13"}
    seen = set()
    peaks = {}
    for p in POINTS:
        assert set(va.KEYS) <= set(p), p
        assert p["src"] in SOURCES
        assert p["kernel"] in KERNELS and p["dir"] in va.MODEL_CALLS and isinstance(p["causal"], bool)
        assert p["dtype"] == ("bf16" if p["src"] in {"SM-H200", AITER} | BLACKWELL | set(PAIRED) | CUDNN_FE
                              else "fp16")
        if p["src"] in CUDNN_FE:
            assert SOURCES[p["src"]]["flops"] == "cudnn-frontend" and p["kernel"] == "cudnn"
            assert p["acc"] in ("gb200", "gb300", "h200-sxm") and p["dir"] in ("fwd", "bwd")
            # the benchmark's count (benchmark_single_sdpa.py flops()): score entries w (w + 1) / 2 + (s - w) w with a
            # window, s (s + 1) / 2 causal, s^2 without mask; 2 b h N (d + d) forward, 2 b h N (3 d + 2 d) backward
            s, w = p["s"], p.get("window")
            n = (w * (w + 1) // 2 + (s - w) * w) if w else (s * (s + 1) // 2 if p["causal"] else s * s)
            f = 2.0 * p["b"] * p["h"] * n * (5 * p["d"] if p["dir"] == "bwd" else 2 * p["d"])
            assert f / (p["ms"] * 1e-3) / 1e12 == pytest.approx(p["tflops"], rel=0.01, abs=1.0), p
            assert va.source_flops(p, "cudnn-frontend") == pytest.approx(f, rel=1e-12)
        elif p["src"] in PAIRED:
            assert p["acc"] == PAIRED[p["src"]] and p["kernel"] == "cudnn" and p["dir"] in ("fwd", "bwd")
            assert (p["h"], p.get("h_kv"), p["d"]) in ((64, 8, 128), (32, 2, 256), (32, None, 128), (40, None, 128))
            # time and TFLOP/s agree in the fa-benchmark count, batch and causal halving included
            f = 4.0 * p["b"] * p["h"] * p["s"] ** 2 * p["d"] * (0.5 if p["causal"] else 1.0)
            f *= 2.5 if p["dir"] == "bwd" else 1.0
            assert f / (p["ms"] * 1e-3) / 1e12 == pytest.approx(p["tflops"], rel=0.01, abs=1.0), p
        elif p["src"] == AITER:
            assert p["acc"] in ("mi300x", "mi355x") and p["kernel"] == "aiter" and p["dir"] in ("fwd", "bwd")
            assert p["d"] == 128 and (p["h"], p["h_kv"]) in ((32, 8), (64, 8), (64, 4)) and p["b"] in (1, 4, 8)
            assert p["s"] in (1024, 2048, 4096, 8192, 10240) or (p["s"] == 16384 and p["b"] == 1 and p["h"] == 64)
        elif p["src"] in BLACKWELL:
            assert (p["b"], p["h"], p["h_kv"], p["d"], p["causal"]) == (1, 128, 8, 128, True)
            assert p["s"] in (512, 1024, 2048, 4096, 8192, 16384, 32768)
            # the CSV's time and TFLOP/s agree in the fa-benchmark count (times printed to 1 us, TFLOP/s to 0.001 or 1)
            f = 4.0 * p["h"] * p["s"] ** 2 * p["d"] / 2 * (2.5 if p["dir"] == "bwd" else 1.0)
            assert f / (p["ms"] * 1e-3) / 1e12 == pytest.approx(p["tflops"], rel=0.03, abs=1.0), p
        else:
            assert p["d"] in (64, 128, 256) and p["s"] in (512, 1024, 2048, 4096, 8192, 16384)
            # the sources' sizing: 16k tokens per batch, hidden 2048
            assert p["b"] * p["s"] == 16384 and p["h"] * p["d"] == 2048
        if p["acc"] not in peaks:
            peaks[p["acc"]] = load_accelerator(p["acc"], overrides=[]).peak("fp16") / 1e12
        # reported TFLOP/s counts only the FLOPs done (causal halved): below the dense peak, above 5 % of it
        # (the B200 sweeps' smallest calls, at their per-call latency: above 1 %; a 128-key window: 4-8 %)
        floor = 0.01 if SOURCES[p["src"]].get("per_call_latency") else (0.02 if p.get("window") else 0.05)
        assert floor * peaks[p["acc"]] < p["tflops"] < peaks[p["acc"]], p
        key = (p["src"], p["acc"], p["panel"], p["kernel"], p["s"], p["dir"])
        assert key not in seen, key
        seen.add(key)
        # only the uncaptioned lower row of the H100 FA2 figure has inferred labels
        assert (p.get("labels") == "inferred") == (p["src"] == "FA2-H100" and p["panel"].startswith("lower"))


def _catalog(name: str) -> dict:
    return load_yaml(ROOT / "hardware" / "accelerators" / f"{name}.yaml")


def _num(text: str) -> float:
    """'989.4 TFLOP/s' -> 989.4e12, '3.35 TB/s' -> 3.35e12."""
    value, unit = text.split()
    assert unit in ("TFLOP/s", "TB/s")
    return float(value) * 1e12


def test_hand_computed_h100_forward_point() -> None:
    """FA3 forward, no mask, head dim 128, s = 16k (FA3-FWD panel (c): 648 TFLOP/s). By hand on the h100-sxm
    YAML: both GEMMs (16384 x 16384 x 128 and 16384 x 128 x 16384) have eff = 0.680 x (16384/16471)^2 x 128/215
    = 0.4006, so the compute term 4 s^2 d b h / (989.4e12 x eff) = 5.55 ms is far above the memory term
    4 s d x 2 B x b h / (3.35e12 x 0.88) = 91 us; the forward FLOPs 4 s^2 d b h over it = peak x eff = 396.3.
    (gemm_max 0.72 -> 0.669 with Hopper's own in-layer factor, 0.893 -> 0.833: 419.6 -> 389.9, error -35.2 % ->
    -39.8 %; 0.669 -> 0.671 with that factor refitted with the guide's cores on the cuDNN curve, 0.833 -> 0.835:
    391.1, -39.6 %; 0.671 -> 0.687 with each guide row's memory-bound ops priced as its own modules move them,
    0.835 -> 0.855: 400.4, -38.2 %; 0.687 -> 0.680 with the guide's cores on h100-sxm's cuDNN backward fitted to
    FA3-BWD instead of borrowed, 0.855 -> 0.847: 396.3, -38.8 %.)"""
    y = _catalog("h100-sxm")
    ce = y["compute_efficiency"]
    peak, bw = _num(y["peak_flops"]["fp16"]), _num(y["memory_bandwidth"])
    s, d, bh = 16384, 128, 1 * 16
    eff = ce["gemm_max"] * (s / (s + ce["gemm_half_dim"])) ** 2 * (d / (d + ce["gemm_half_dim"]))
    t_compute = 4.0 * s * s * d * bh / (peak * eff)
    t_memory = 4.0 * s * d * 2.0 * bh / (bw * ce["memory"])
    assert t_memory < t_compute
    expected = 4.0 * s * s * d * bh / t_compute / 1e12
    assert expected == pytest.approx(989.4 * 0.680 * (16384 / 16471) ** 2 * 128 / 215)
    assert expected == pytest.approx(396.3, abs=0.1)
    p = _one(src="FA3-FWD", kernel="fa3", causal=False, d=128, s=16384)
    assert p["tflops"] == 648
    (row,) = va.evaluate(SOURCES, [p])
    assert row["model_tflops"] == pytest.approx(expected, rel=1e-9)
    assert row["error"] == pytest.approx(expected / 648 - 1, rel=1e-9)
    assert row["error"] == pytest.approx(-0.388, abs=1e-3)


def test_hand_computed_a100_causal_forward_backward_point() -> None:
    """FA2 forward + backward, causal, head dim 128, s = 16k (FA2-A100 panel (d): 189 TFLOP/s). The a100-sxm-80g
    YAML has no compute_efficiency: the ampere default 0.757 / 96 / 0.85 (its comment; cost.compute._A100). The
    source counts 3.5 x (4 s^2 d b h / 2) FLOPs. The model: a causal query attends k = (s + 1) / 2 = 8192.5 keys
    (sum of min(i + 1, s) over the s queries, / s), both GEMMs (s x k x d, s x d x k) at eff = 0.757 x s/(s + 96)
    x k/(k + 96) x d/(d + 96); forward 4 s k d b h / (312e12 x eff), backward 2.5 x that (the kernel recomputes
    Q K^T): model TFLOP/s = 3.5 x 2 s^2 d b h / (3.5 x 4 s k d b h / (peak eff)) = s / (2k) x peak x eff
    = 16384/16385 x 312 x 0.757 x (16384/16480) x (8192.5/8288.5) x 128/224 = 132.6 (131.4 at the default's
    0.75 before Korthikanti's layer was priced with Megatron-LM's own memory-bound ops)."""
    y = _catalog("a100-sxm-80g")
    assert "compute_efficiency" not in y
    peak = _num(y["peak_flops"]["fp16"])
    s, d, bh = 16384, 128, 16
    k = sum(min(i + 1, s) for i in range(s)) / s
    assert k == 8192.5
    eff = 0.757 * (s / (s + 96.0)) * (k / (k + 96.0)) * (d / (d + 96.0))
    t_model = 3.5 * 4.0 * s * k * d * bh / (peak * eff)
    expected = 3.5 * (4.0 * s * s * d * bh / 2.0) / t_model / 1e12
    assert expected == pytest.approx(132.6, abs=0.1)
    p = _one(src="FA2-A100", kernel="fa2", causal=True, d=128, s=16384)
    assert p["tflops"] == 189
    (row,) = va.evaluate(SOURCES, [p])
    assert row["model_tflops"] == pytest.approx(expected, rel=1e-9)
    assert row["error"] == pytest.approx(132.6 / 189 - 1, abs=1e-3)


def test_causal_ratio_by_hand() -> None:
    """t_causal / t_full at the same shape = (F/2 / 616) / (F / 648) = 0.5 x 648 / 616 (FA3 forward, d 128, 16k)."""
    pair = [_one(src="FA3-FWD", kernel="fa3", causal=c, d=128, s=16384) for c in (False, True)]
    (q,) = va.causal_ratios(va.evaluate(SOURCES, pair))
    assert q["ratio"] == pytest.approx(0.5 * 648 / 616)


def test_json_output_strictly_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert va.main(["--json"]) == 0
    out = capsys.readouterr().out

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-finite number {name} in JSON")

    doc = json.loads(out, parse_constant=no_constants)
    assert len(doc["points"]) == len(POINTS)
    assert {g["acc"] for g in doc["groups"]} == {"a100-sxm-80g", "h100-sxm", "h200-sxm", "b200", "gb200", "gb300",
                                                "mi300x", "mi355x"}
    assert doc["causal_ratio_groups"] and doc["direction_ratios"]


def test_bad_input_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources: {X: {flops: fa-benchmark}}\npoints:\n"
                   " - {src: X, acc: h100-sxm, kernel: fa2, dir: sideways, causal: false, dtype: fp16,"
                   " b: 1, h: 1, d: 64, s: 512, tflops: 1}\n", encoding="utf-8")
    assert va.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "dir 'sideways'" in err


def test_paired_gb300_gb200_sweeps_twin_every_shape_and_measure_the_speedup() -> None:
    """Every GB300 row of the cuDNN 9.22 pairs has a GB200 row of the same shape and direction; the GB300 / GB200
    speed ratios, computed here from the transcribed TFLOP/s, are the ones the source's text states (forward 1.12-1.26,
    median about 1.18; backward 1.05-1.22, median about 1.09): faster everywhere, the forward more than the backward,
    as Blackwell Ultra's doubled SFU exponential rate (the forward's softmax) would have it."""
    def shape(p: dict) -> tuple:
        return (p["dir"], p["causal"], p["b"], p["h"], p.get("h_kv"), p["d"], p["s"])

    gb200 = {shape(p): p for p in POINTS if p["src"] == "CUDNN-GB200-9.22"}
    gb300 = [p for p in POINTS if p["src"] == "CUDNN-GB300-9.22"]
    assert {shape(p) for p in gb300} == set(gb200)
    speed = {d: sorted(p["tflops"] / gb200[shape(p)]["tflops"] for p in gb300 if p["dir"] == d) for d in ("fwd", "bwd")}
    assert len(speed["fwd"]) == 25 and len(speed["bwd"]) == 20
    assert 1.11 < speed["fwd"][0] and speed["fwd"][-1] < 1.27 and 1.16 < speed["fwd"][12] < 1.20
    assert 1.04 < speed["bwd"][0] and speed["bwd"][-1] < 1.23 and 1.07 < (speed["bwd"][9] + speed["bwd"][10]) / 2 < 1.11



def test_aiter_points_as_published_and_the_mi300x_curve_by_hand() -> None:
    # values copied from ROCm/aiter op_tests/cpp/mha/README.md @630f0140 (the table's MI300X / MI355X columns)
    row = dict(src=AITER, b=8, h=64, h_kv=8, s=8192, causal=False)
    assert _one(acc="mi300x", dir="fwd", **row)["tflops"] == 577.45
    assert _one(acc="mi300x", dir="bwd", **row)["tflops"] == 537.04  # BWD-a16
    assert _one(acc="mi355x", dir="fwd", **row)["tflops"] == 1322.77
    assert _one(acc="mi355x", dir="bwd", **row)["tflops"] == 1182.59
    assert _one(src=AITER, acc="mi300x", dir="fwd", b=1, h=32, h_kv=8, s=1024, causal=True)["tflops"] == 130.62
    # the catalog's mi300x aiter curve by hand: eff = attn_max k/(k + seq_half) d/(d + head_half), k = s without mask,
    # TFLOP/s = eff x the 1307.4 TFLOP/s dense BF16 peak; it prices that published shape within 6 %
    cat = _catalog("mi300x")
    peak = _num(cat["peak_flops"]["bf16"]) / 1e12
    for direction, measured in (("fwd", 577.45), ("bwd", 537.04)):
        c = cat["attention_efficiency"]["aiter"][direction]
        eff = c["attn_max"] * 8192 / (8192 + c["seq_half"]) * 128 / (128 + c["head_half"])
        assert eff * peak == pytest.approx(measured, rel=0.06), direction
    # mi325x takes mi300x's curve whole (same gfx942 die and peak; scripts/fit_attention.py KERNEL_DONORS)
    assert _catalog("mi325x")["attention_efficiency"]["aiter"]["fwd"] == cat["attention_efficiency"]["aiter"]["fwd"]


def _fa_rate(src: str, kernel: str, direction: str, causal: bool, d: int, s: int) -> float:
    return float(_one(src=src, kernel=kernel, dir=direction, causal=causal, d=d, s=s)["tflops"])


@pytest.mark.parametrize("s", [512, 1024, 2048])
def test_fa3_backward_figure_is_unmasked_by_the_fa2_readme(s: int) -> None:
    """FA3-BWD's mask from the measurements alone, beside the paper's caption ('Backward, without causal mask'): at
    one shape (d 128) the forward + backward rate in the fa-benchmark count is 3.5 / (1 / r_fwd + 2.5 / r_bwd).
    FA2's backward of FA3-BWD with its unmasked forward of FA3-FWD panel (c) gives 234.6 / 280.6 / 308.3 TFLOP/s
    at s 512 / 1k / 2k, within 4-6 % under the FA2 README's unmasked H100 figure (FA2-H100 (b): 248 / 294 / 320,
    another FlashAttention-2 build); with the masked forward of panel (d) it gives 206.9 / 260.0 / 293.0 against
    the README's masked 163 / 221 / 265, 11-27 % over: the backward figure is the unmasked one."""
    bwd = _fa_rate("FA3-BWD", "fa2", "bwd", False, 128, s)
    for causal, lo, hi in ((False, -0.06, -0.03), (True, 0.10, 0.28)):
        fwd = _fa_rate("FA3-FWD", "fa2", "fwd", causal, 128, s)
        combined = 3.5 / (1.0 / fwd + 2.5 / bwd)
        readme = _fa_rate("FA2-H100", "fa2", "fwd+bwd", causal, 128, s)
        assert lo < combined / readme - 1.0 < hi, (causal, combined, readme)


def test_hand_computed_h100_cudnn_backward_point() -> None:
    """cuDNN backward, no mask, d 128, s 2048 (FA3-BWD panel (b): 465 TFLOP/s). h100-sxm's fitted cuDNN backward
    (0.663 / 357 / 28): eff = 0.663 x 2048/2405 x 128/156 = 0.46325, so the backward (2.5 x 4 s^2 d b h FLOPs,
    compute-bound) runs at 989.4 x 0.46325 = 458.3 TFLOP/s, -1.4 %. The backward it replaced, borrowed from h200-sxm's
    ratio (0.578 / 609 / 29): 0.578 x 2048/2657 x 128/157 = 0.36324, 359.4 TFLOP/s, -22.7 %."""
    c = _catalog("h100-sxm")["attention_efficiency"]["cudnn"]
    assert c["bwd"] == {"attn_max": 0.663, "seq_half": 357, "head_half": 28}
    s, d, b, h = 2048, 128, 8, 16
    eff = 0.663 * s / (s + 357) * d / (d + 28)
    assert eff == pytest.approx(0.46325, abs=1e-5)
    p = _one(src="FA3-BWD", kernel="cudnn", dir="bwd", causal=False, d=d, s=s)
    assert (p["tflops"], p["b"], p["h"]) == (465, b, h)
    flops = 2.5 * 4.0 * b * h * s * s * d
    t = compute.flash_kernel_time(s, s, d, d, b * h, peak_flops=989.4e12, memory_bandwidth=3.35e12,
                                  flop_ratio=2.5, **c["bwd"])
    assert float(t) == pytest.approx(flops / (989.4e12 * eff), rel=1e-9)
    assert flops / float(t) / 1e12 / 465 - 1.0 == pytest.approx(-0.0144, abs=5e-4)
    old = 0.578 * s / (s + 609) * d / (d + 29)
    assert 989.4 * old / 465 - 1.0 == pytest.approx(-0.227, abs=1e-3)
