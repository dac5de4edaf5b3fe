"""The fused attention core priced on the kernel that runs (cost.compute.flash_kernel_time, accelerator
``attention_efficiency``, training.attention_kernel; scripts/fit_attention.py; docs/model.md#attention-kernel)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, load_yaml, script_module

from scalemodel.cost import transformer
from scalemodel.cost.compute import (
    FLASH_BACKWARD_FLOP_RATIO,
    flash_kernel_time,
    layer_compute_time,
    layer_eltwise_bytes,
    memory_time,
)
from scalemodel.engine.job import build_job
from scalemodel.errors import InputError
from scalemodel.specs import load_accelerator, load_cluster, load_workload, notices
from scalemodel.specs.frameworks import read_strategy_file
from scalemodel.specs.training import TrainingSpec

ATTENTION = ROOT / "hardware" / "measurements" / "attention.yaml"
PEAK_16 = {"a100-sxm-80g": 312e12, "h100-sxm": 989.4e12, "h200-sxm": 989.4e12,  # the YAMLs' fp16/bf16 peaks
           "b200": 2250e12, "gb200": 2500e12, "gb300": 2500e12}


def _catalog(name: str) -> dict:  # type: ignore[type-arg]
    return load_yaml(ROOT / "hardware" / "accelerators" / f"{name}.yaml")  # type: ignore[no-any-return]


def _hand_time(p: dict, fwd: dict, bwd: dict, peak: float) -> float:  # type: ignore[type-arg]
    """The formula of docs/model.md#attention-kernel written out again: F = 2 s k (2 d) b h FLOPs forward,
    2.5 F backward, each over peak x attn_max x k/(k + k0) x d/(d + d0); k = (s + 1)/2 when causal."""
    s, d, bh = p["s"], p["d"], p["b"] * p["h"]
    k = (s + 1) / 2 if p["causal"] else s
    flops = 2.0 * s * k * 2 * d * bh

    def eff(c: dict) -> float:  # type: ignore[type-arg]
        return c["attn_max"] * k / (k + c["seq_half"]) * d / (d + c["head_half"])

    t = 0.0
    if p["dir"] in ("fwd", "fwd+bwd"):
        t += flops / (peak * eff(fwd))
    if p["dir"] in ("bwd", "fwd+bwd"):
        t += 2.5 * flops / (peak * eff(bwd))
    return t


def _measured_time(p: dict) -> float:  # type: ignore[type-arg]
    """fa-benchmark FLOPs (forward 4 b h s^2 d, halved when causal; fwd+bwd 3.5x) / the point's TFLOP/s."""
    f = 4.0 * p["b"] * p["h"] * p["s"] ** 2 * p["d"] * (0.5 if p["causal"] else 1.0)
    return f * {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}[p["dir"]] / (p["tflops"] * 1e12)


@pytest.mark.parametrize(("acc", "kernel"), [("a100-sxm-80g", "fa1"), ("a100-sxm-80g", "fa2"),
                                             ("a100-sxm-80g", "triton"), ("a100-sxm-80g", "xformers"),
                                             ("h100-sxm", "cudnn"), ("h100-sxm", "fa1"), ("h100-sxm", "fa2"),
                                             ("h100-sxm", "fa3"), ("h100-sxm", "triton"), ("h200-sxm", "cudnn"),
                                             ("h200-sxm", "fa2")])
def test_catalog_curves_reproduce_their_points_within_the_stated_rms(acc: str, kernel: str) -> None:
    """Every fitted curve, as rounded into the catalog, reproduces the attention.yaml points it was fitted on within
    the rms of ln(time) its source states (+0.005 for the rounding), and no point is off by more than 35 % (points
    marked ``fit: false`` are recorded, not fitted, and left out). A backward fitted to bwd and fwd+bwd points together
    (h100-sxm fa2: FA3-BWD and FA2-H100) states one rms over both, 'bwd/fwd+bwd'."""
    c = _catalog(acc)["attention_efficiency"][kernel]
    stated = {which: float(v) for v, which in re.findall(r"([0-9.]+) (bwd/fwd\+bwd|fwd\+bwd|bwd|fwd)\b",
                                                         c["source"].split("rms ln(t)")[1])}
    pts = [p for p in load_yaml(ATTENTION)["points"]
           if p["acc"] == acc and p["kernel"] == kernel and p.get("fit", True)]
    groups = {d: [p for p in pts if p["dir"] == d] for d in ("fwd", "bwd", "fwd+bwd")}
    if "bwd/fwd+bwd" in stated:
        groups = {"fwd": groups["fwd"], "bwd/fwd+bwd": groups["bwd"] + groups["fwd+bwd"]}
    assert set(stated) == {k for k, g in groups.items() if g}
    for which, rms in stated.items():
        group = groups[which]
        r = np.array([math.log(_hand_time(p, c["fwd"], c["bwd"], PEAK_16[acc]) / _measured_time(p)) for p in group])
        assert float(np.sqrt(np.mean(r**2))) <= rms + 0.005
        assert float(np.max(np.abs(np.exp(r) - 1))) < 0.35
        assert rms < 0.13


def test_fit_script_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    """The catalog's attention_efficiency blocks are the fit's output (scripts/fit_attention.py --check)."""
    assert script_module("fit_attention").main(["--check"]) == 0
    assert "all catalog attention curves match the fits" in capsys.readouterr().out


def test_hand_computed_h200_cudnn_causal_forward_backward_point() -> None:
    """H200 cuDNN, forward + backward, causal, d 128, s 2048, b 8, h 16 (SM-H200: 368.3 TFLOP/s). From h200-sxm.yaml
    (fwd 0.853 / 213 / 51, bwd 0.687 / 609 / 29): k = 2049/2 = 1024.5; eff_fwd = 0.853 x 1024.5/1237.5 x 128/179
    = 0.50498, eff_bwd = 0.687 x 1024.5/1633.5 x 128/157 = 0.35129; F = 2 x 2048 x 1024.5 x 256 x 128 = 1.37506e11;
    t = F/(989.4e12 x 0.50498) + 2.5 F/(989.4e12 x 0.35129) = 1.2643 ms; the benchmark counts
    3.5 x 4 x 128 x 2048^2 x 128 / 2 FLOPs: 380.5 TFLOP/s, +3.3 % over the measured 368.3."""
    c = _catalog("h200-sxm")["attention_efficiency"]["cudnn"]
    assert c["fwd"] == {"attn_max": 0.853, "seq_half": 213, "head_half": 51}
    assert c["bwd"] == {"attn_max": 0.687, "seq_half": 609, "head_half": 29}
    kw = dict(peak_flops=989.4e12, memory_bandwidth=4.8e12, memory_efficiency=0.85, elem_bytes=2.0)
    t = (flash_kernel_time(2048, 1024.5, 128, 128, 128, **kw, **c["fwd"])
         + flash_kernel_time(2048, 1024.5, 128, 128, 128, **kw, **c["bwd"], flop_ratio=2.5))
    assert float(t) == pytest.approx(1.2643e-3, rel=1e-4)
    va = script_module("validate_attention")
    sources, points = va.load(ATTENTION)
    (p,) = [p for p in points if p["src"] == "SM-H200" and p["kernel"] == "cudnn" and p["dir"] == "fwd+bwd"
            and p["causal"] and p["d"] == 128 and p["s"] == 2048]
    (row,) = va.evaluate(sources, [p])
    assert row["kernel_tflops"] == pytest.approx(380.48, abs=0.05)
    assert row["kernel_error"] == pytest.approx(380.48 / 368.3 - 1, abs=2e-4)


def test_hand_computed_b200_cudnn_causal_points() -> None:
    """B200 cuDNN, causal, d 128, s 8192, b 1, 128 heads (CUDNN-B200-9.10: forward 1211.140, backward 945.440
    TFLOP/s). From b200.yaml (fwd 0.955 / 1049 / 51, bwd 0.686 / 1402 / 29), peak 2250 TFLOP/s: k = 8193/2 = 4096.5;
    eff_fwd = 0.955 x 4096.5/5145.5 x 128/179 = 0.54368, eff_bwd = 0.686 x 4096.5/5498.5 x 128/157 = 0.41668; in
    the benchmark's count (forward 4 h s^2 d / 2, backward 2.5x) the model's TFLOP/s = s/(2k) x peak x eff:
    forward 1223.1 (+1.0 %), backward 937.4 (-0.8 %): the kernel alone, the sweep's per-call latency (fitted beside
    the curve, not in the catalog) is a few % of these calls."""
    c = _catalog("b200")["attention_efficiency"]["cudnn"]
    assert c["fwd"] == {"attn_max": 0.955, "seq_half": 1049, "head_half": 51}
    assert c["bwd"] == {"attn_max": 0.686, "seq_half": 1402, "head_half": 29}
    va = script_module("validate_attention")
    sources, points = va.load(ATTENTION)
    for direction, measured, expected in (("fwd", 1211.14, 1223.14), ("bwd", 945.44, 937.42)):
        (p,) = [p for p in points if p["src"] == "CUDNN-B200-9.10" and p["kernel"] == "cudnn"
                and p["dir"] == direction and p["s"] == 8192]
        assert p["tflops"] == measured
        (row,) = va.evaluate(sources, [p])
        assert row["kernel_tflops"] == pytest.approx(expected, abs=0.05)


def test_layer_prices_the_core_on_the_kernel_curves() -> None:
    """layer_compute_time with the kernel's curves: forward core = t_fwd of the kernel (no score-matrix traffic);
    backward = 2 x (forward - core) + t_bwd. Checked against flash_kernel_time on the layer's own core shape."""
    sh = transformer.shape(layers=1, hidden=4096, heads=32, vocab=32000)
    fwd = {"attn_max": 0.853, "seq_half": 213.0, "head_half": 51.0}
    bwd = {"attn_max": 0.687, "seq_half": 609.0, "head_half": 29.0}
    kw = dict(micro_batch=2, seq_len=4096, peak_flops=989.4e12, memory_bandwidth=4.8e12, gemm_max=0.644,
              gemm_half_dim=23.0, memory_efficiency=0.85, tp=2, flash_attention=True)
    lt = layer_compute_time(sh, **kw, attention_fwd=fwd, attention_bwd=bwd)
    keys = (4096 + 1) / 2  # causal: (s + 1) / 2 keys per query
    core_args = (4096, keys, 128, 128, 2 * 32 / 2)
    akw = dict(peak_flops=989.4e12, memory_bandwidth=4.8e12, memory_efficiency=0.85, elem_bytes=2.0)
    t_f = float(flash_kernel_time(*core_args, **akw, **fwd))
    t_b = float(flash_kernel_time(*core_args, **akw, **bwd, flop_ratio=FLASH_BACKWARD_FLOP_RATIO))
    assert float(lt.attention_core) == pytest.approx(t_f, rel=1e-12)
    # the memory-bound ops' own backward (layer_eltwise_bytes, megatron_te), not 2 x their forward
    mem_b = float(memory_time(2 * 4096 * layer_eltwise_bytes(sh, tp=2)[1], memory_bandwidth=4.8e12,
                              memory_efficiency=0.85))
    gemm_mem = float(lt.forward) - t_f - float(lt.forward_memory)
    assert float(lt.backward) == pytest.approx(2.0 * gemm_mem + mem_b + t_b, rel=1e-12)
    # without curves: the GEMM-curve pricing, backward 2.5 x the core
    old = layer_compute_time(sh, **kw)
    assert float(old.backward) == pytest.approx(2.0 * float(old.forward - old.forward_memory) + mem_b
                                                + 0.5 * float(old.attention_core), rel=1e-12)


def test_context_parallel_core_runs_at_one_calls_keys() -> None:
    """cp 2, causal, s 8192, b 1, 32 heads of 128, tp 1, curves of a slow-rising kernel (fwd 1.0 / 1953 / 51, bwd
    0.753 / 2360 / 29, peak 2250 TFLOP/s). FLOPs over the rank's 4096 queries x (8192 + 1)/2 = 4096.5 keys: F = 2 x
    4096 x 4096.5 x 256 x 32 = 2.74911e11. Transformer Engine's ring calls the kernel per step over the local 4096
    tokens or half KV blocks, so its efficiency is read at (4096 + 1)/2 = 2048.5 keys: eff_fwd = 2048.5/4001.5 x
    128/179 = 0.36608 (0.48423 at 4096.5), eff_bwd = 0.753 x 2048.5/4408.5 x 128/157 = 0.28527; t_fwd =
    F/(2250e12 x 0.36608) = 0.33376 ms, t_bwd = 2.5 F/(2250e12 x 0.28527) = 1.07078 ms. Without cp the call keys are
    the FLOP keys."""
    sh = transformer.shape(layers=1, hidden=4096, heads=32, vocab=32000)
    fwd = {"attn_max": 1.0, "seq_half": 1953.0, "head_half": 51.0}
    bwd = {"attn_max": 0.753, "seq_half": 2360.0, "head_half": 29.0}
    kw = dict(micro_batch=1, seq_len=8192, peak_flops=2250e12, memory_bandwidth=7.7e12, gemm_max=0.648,
              gemm_half_dim=113.0, memory_efficiency=0.85, tp=1, flash_attention=True, attention_fwd=fwd,
              attention_bwd=bwd)
    lt = layer_compute_time(sh, **kw, cp=2)
    # + the ring's bookkeeping outside the kernel on rank cp - 1 (megatron_te, the default layer_impl;
    # docs/model.md#cp-ring-bytes): zeros e O + two merges 2 x 3e O, O = 4096 x 32 x 128, e 2: 234,881,024 B
    ring = 7 * 2 * 4096 * 32 * 128 / (7.7e12 * 0.85)
    assert float(lt.attention_core) == pytest.approx(0.33376e-3 + ring, rel=1e-4)
    other = layer_compute_time(sh, **kw, cp=2, layer_impl="torchtitan")  # not Transformer Engine's ring
    assert float(other.attention_core) == pytest.approx(0.33376e-3, rel=1e-4)
    # the backward core alone: halving the backward curve's attn_max doubles it and moves nothing else, so the
    # difference is one more core backward (the rest of the backward, memory-bound bytes by layer_impl, cancels)
    slow = layer_compute_time(sh, **{**kw, "attention_bwd": {**bwd, "attn_max": 0.753 / 2}}, cp=2)
    assert float(slow.backward - lt.backward) == pytest.approx(1.07078e-3, rel=1e-4)
    one = layer_compute_time(sh, **kw)  # cp 1: 8192 queries x 4096.5 keys at 4096.5
    assert float(one.attention_core) == pytest.approx(2 * 2.74911e11 / (2250e12 * 0.48423), rel=1e-4)


@pytest.mark.parametrize("name", ["a100-sxm-80g", "a100-sxm-40g", "h100-sxm", "h100-pcie", "h200-sxm", "h800", "b200",
                                  "gb200", "gb300"])
def test_attention_efficiency_never_reaches_the_peak(name: str) -> None:
    """eff = attn_max k/(k+k0) d/(d+d0) < attn_max <= 1 for every catalog curve, so a core never takes less than its
    FLOPs at peak (the physics property tests' premise)."""
    acc = load_accelerator(name, overrides=[])
    assert acc.attention_efficiency
    for kernel, c in acc.attention_efficiency.items():
        for curve, ratio in ((c.fwd, 1.0), (c.bwd, 2.5)):
            assert 0 < curve.attn_max <= 1, kernel
            for s in (1, 128, 2048, 131072):
                for d in (32, 128, 576):
                    t = float(flash_kernel_time(s, s, d, d, 1, peak_flops=1e15, memory_bandwidth=1e12,
                                                attn_max=curve.attn_max, seq_half=curve.seq_half,
                                                head_half=curve.head_half, flop_ratio=ratio))
                    assert t >= ratio * 2 * s * s * 2 * d / 1e15


def _job(cluster: str, kernel: str = "auto"):  # type: ignore[no-untyped-def]
    return build_job(load_cluster(cluster, []), load_workload("gpt3-175b", []),
                     TrainingSpec(global_batch=64, attention_kernel=kernel))  # type: ignore[arg-type]


def test_auto_resolves_by_family() -> None:
    """auto: Transformer Engine's choice, cuDNN on Hopper and Blackwell, FlashAttention-2 on Ampere; gemm where no
    curve (a TPU)."""
    assert _job("dgx-h100").attention_kernel == "cudnn"
    assert _job("dgx-a100").attention_kernel == "fa2"
    assert _job("dgx-a100-40g").attention_kernel == "fa2"  # borrowed from a100-sxm-80g
    b = _job("dgx-b200")  # NVIDIA/cudnn-frontend's B200 SDPA sweeps (attention.yaml CUDNN-B200-*)
    assert b.attention_kernel == "cudnn"
    assert b.attention_fwd == {"attn_max": 0.955, "seq_half": 1049.0, "head_half": 51.0}
    assert _job("gb200-nvl72").attention_kernel == "cudnn"
    assert _job("gb300-nvl72").attention_kernel == "cudnn"  # ratio-fitted to gb200's (b200's) curve, cuDNN 9.22 pairs
    assert _job("tpu-v5p-pod").attention_kernel == "gemm" and _job("tpu-v5p-pod").attention_fwd is None
    h = _job("dgx-h100", "fa3")
    assert h.attention_kernel == "fa3" and h.attention_fwd == {"attn_max": 0.934, "seq_half": 346.0, "head_half": 51.0}
    assert _job("dgx-h100", "gemm").attention_fwd is None


def test_a_kernel_without_a_curve_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no fitted cudnn attention curve for a100-sxm-80g"):
        _job("dgx-a100", "cudnn")


def test_unknown_kernel_exits_2_with_one_line(cli) -> None:  # type: ignore[no-untyped-def]
    base = ("predict", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "8")
    r = cli(*base, "--set", "training.attention_kernel=fa9")
    assert r.code == 2 and r.out == "" and r.err.count("\n") == 1
    assert r.err.startswith("error: --set training.attention_kernel") and "'fa9'" in r.err and "'cudnn'" in r.err
    r = cli(*base, "--set", "training.attention_kernel=fa3")
    assert r.code == 2 and r.err.count("\n") == 1 and "no fitted fa3 attention curve for a100-sxm-80g" in r.err
    assert cli(*base, "--set", "training.attention_kernel=xformers").code == 0


def test_kernel_moves_the_step(cli) -> None:  # type: ignore[no-untyped-def]
    """Same run on H100, cuDNN against FlashAttention-2: cuDNN's curve is faster, so the step is shorter."""
    import json

    def step(kernel: str) -> float:
        r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--json", "--set",
                f"training.attention_kernel={kernel}")
        assert r.code == 0, r.err
        return float(json.loads(r.out)["step_time_s"])

    assert step("cudnn") < step("fa2")
    assert step("auto") == step("cudnn")


@pytest.mark.parametrize(("value", "training", "strategy"), [
    ("fused", {"attention_kernel": "cudnn"}, {}), ("flash", {"attention_kernel": "fa2"}, {}),
    ("auto", {}, {}), ("unfused", {}, {"flash_attention": False}),
    ("local", {}, {"flash_attention": False})])
def test_megatron_attention_backend(tmp_path: Path, value: str, training: dict, strategy: dict) -> None:  # type: ignore[type-arg]
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --pipeline-model-parallel-size 2 --attention-backend {value}\n")
    notices.clear()
    sf = read_strategy_file(f)
    assert sf.training == training
    assert {k: v for k, v in sf.strategy.items() if k == "flash_attention"} == strategy
    assert not any("attention-backend" in u for u in sf.unused)


def test_megatron_unknown_attention_backend_exits_2(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --attention-backend sdpa\n")
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8", "--strategy", str(f))
    assert r.code == 2 and r.err.count("\n") == 1 and "unknown attention backend: 'sdpa'" in r.err


@pytest.fixture(scope="module")
def attention_fits() -> dict[tuple[str, str], dict[str, Any]]:
    """scripts/fit_attention.py's curve fits of the measured points, made once for both kernels' test below (~3 s of
    CPU each time; the test reads them)."""
    fa = script_module("fit_attention")
    return fa.fit(fa.load_points())  # type: ignore[no-any-return]


@pytest.mark.parametrize("kernel", ["cudnn", "fa2"])
def test_b200_curves_reproduce_the_sweeps_with_their_per_call_latency(
        kernel: str, attention_fits: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The B200 sweeps (CUDNN-B200-9.10, -9.13) time each call from its host launch: per point, the catalog curve's
    kernel time (the formula written out again, _hand_time) plus the latency scripts/fit_attention.py fitted for that
    source and direction reproduces the measured time within the rms its source states (+0.005 for the rounding), no
    point off by more than 35 %; the latencies are 10 us to 1 ms (a host launch through torch's Python path)."""
    f = attention_fits[("b200", kernel)]
    c = _catalog("b200")["attention_efficiency"][kernel]
    stated = {which: float(v) for v, which in re.findall(r"([0-9.]+) (bwd|fwd)\b", c["source"].split("rms ln(t)")[1])}
    for which, lat in (("fwd", f["lat_fwd"]), ("bwd", f["lat_fb"])):
        assert set(lat) == {"CUDNN-B200-9.10", "CUDNN-B200-9.13"}
        assert all(1e-5 <= v <= 1e-3 for v in lat.values()), lat
        pts = [p for p in f["points"] if p["dir"] == which]
        r = np.array([math.log((_hand_time(p, c["fwd"], c["bwd"], PEAK_16["b200"]) + lat[p["src"]])
                               / _measured_time(p)) for p in pts])
        assert float(np.sqrt(np.mean(r**2))) <= stated[which] + 0.005
        assert float(np.max(np.abs(np.exp(r) - 1))) < 0.35


def test_gb300_cudnn_curve_carries_the_measured_speedup_over_gb200() -> None:
    """gb300's cuDNN curve is gb200's times the GB300 / GB200 time ratio that NVIDIA/cudnn-frontend measured on the
    same shapes at cuDNN 9.22 (attention.yaml CUDNN-GB300-9.22 / CUDNN-GB200-9.22; scripts/fit_attention.py
    RATIO_FITS). Both GPUs have the same 16-bit peak and the same FLOPs per shape, so the priced time ratio is the
    efficiency ratio, eff = attn_max k/(k + seq_half) d/(d + head_half), written out here with the YAMLs' numbers
    (k = s without mask, (s + 1)/2 causal); it follows the measured ratio within 10 % at every pair and within 2 %
    in the median, forward and backward."""
    def eff(c: dict, s: int, causal: bool, d: int) -> float:  # type: ignore[type-arg]
        k = (s + 1) / 2 if causal else s
        return c["attn_max"] * k / (k + c["seq_half"]) * d / (d + c["head_half"])

    new, old = _catalog("gb300")["attention_efficiency"]["cudnn"], _catalog("gb200")["attention_efficiency"]["cudnn"]
    assert PEAK_16["gb300"] == PEAK_16["gb200"]
    pts = load_yaml(ATTENTION)["points"]
    twin = {(p["dir"], p["causal"], p["b"], p["h"], p["d"], p["s"]): p for p in pts if p["src"] == "CUDNN-GB200-9.22"}
    for direction in ("fwd", "bwd"):
        err = []
        for p in (q for q in pts if q["src"] == "CUDNN-GB300-9.22" and q["dir"] == direction):
            measured = twin[(p["dir"], p["causal"], p["b"], p["h"], p["d"], p["s"])]["tflops"] / p["tflops"]
            priced = eff(old[direction], p["s"], p["causal"], p["d"]) / eff(new[direction], p["s"], p["causal"], p["d"])
            err.append(priced / measured - 1.0)
        assert err and max(abs(e) for e in err) < 0.10, direction
        assert abs(float(np.median(err))) < 0.02, direction
    # the forward gains more than the backward at a training shape (s 4096 causal, d 128): the softmax's exponentials
    # are the forward's larger share (Blackwell Ultra doubles the SFU exponential rate, [VERDA])
    gain = {d: eff(new[d], 4096, True, 128) / eff(old[d], 4096, True, 128) for d in ("fwd", "bwd")}
    assert 1.15 < gain["fwd"] < 1.30 and 1.03 < gain["bwd"] < 1.12



def test_ratio_fits_match_the_measurement_file() -> None:
    """scripts/fit_attention.py RATIO_FITS and attention.yaml agree: the points of a ratio-fitted accelerator and
    kernel come from sources marked ``level: ratio`` (scripts/validate_attention.py keeps them out of the in-sample
    figures), and their pairs are recorded ``fit: false`` on the paired accelerator."""
    fa = script_module("fit_attention")
    doc = load_yaml(ATTENTION)
    for (acc, kernel), (pacc, psrc) in fa.RATIO_FITS.items():
        srcs = {p["src"] for p in doc["points"] if p["acc"] == acc and p["kernel"] == kernel and p.get("fit", True)}
        assert srcs and all(doc["sources"][s].get("level") == "ratio" for s in srcs)
        paired = [p for p in doc["points"] if p["src"] == psrc]
        assert paired and all(p["acc"] == pacc and p.get("fit") is False for p in paired)
