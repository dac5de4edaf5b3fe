"""The in-layer GEMM factor implied by each published per-layer timing (hardware/measurements/layer_timing.yaml).

scalemodel prices a layer's GEMMs on the accelerator's isolated-GEMM curve (microbenchmark fit) times an in-layer
factor: IN_LAYER_GEMM_FACTOR = 0.901, fitted on Korthikanti et al. 2022 Table 4 (A100), and per family where a
layer timing of that family exists (scalemodel.cost.compute.IN_LAYER_GEMM_FACTORS: Hopper from the Transformer
Engine guide's H100 rows, BF16 and FP8, each fused core on its kernel's fitted curve; Blackwell borrows Hopper's
BF16 one as it is, its cores priced on its own fitted cuDNN curve, and carries over Hopper's FP8 relation to the
FP8 / BF16 kernel ratio Transformer Engine measured: blackwell_fp8_factor). This script re-derives them and computes the
factor each other source implies:

1. The model time of every point is scalemodel's own layer pricing, as engine/layer_compute.py prices a layer:
   ``scalemodel.cost.compute.layer_compute_time`` with the point's causal mask (a fused core over the keys the mask
   leaves, its backward 2.5 x its forward FLOPs), the fused core on the fitted attention curves of the kernel the
   point ran (layer_timing.yaml ``kernel``: cudnn for Transformer Engine's attention on Hopper, fa2 for PyTorch
   SDPA's flash backend; the accelerator's ``attention_efficiency``, resolved as engine/job.py does, passed as
   engine/layer_compute.py passes them: ``attention_fwd`` / ``attention_bwd``; unfused cores on the GEMM curve; with
   ``core="gemm"`` every core on the GEMM curve, the pricing of families without attention curves),
   backward = LayerTime.backward + LayerTime.recompute, with the accelerator's peak, memory bandwidth, GEMM
   half-dimension d0 and memory fraction, plus the source's tensor-parallel all-reduces on the critical path:
   ``ar x 2(t-1)/t x b s h 2 B / busbw(message)``.
   fwd+bwd points compare against forward + backward.
2. For each source and precision, gemm_max is scanned (0.30-1.00, step 0.0005) for the least squares of
   ln(model / measured) over its points, as the A100 fit does; per point, the gemm_max that reproduces it.
3. Implied factor = that gemm_max / the accelerator's isolated-GEMM gemm_max: the microbenchmark fit of
   ``scripts/fit_compute_curves.run()`` (where it fits none, the catalog's gemm_max / its in-layer factor).

fp8 points: the GEMMs run on the fp8 peak and fp8 curve (the scanned one); the attention core stays on the BF16
peak, on its kernel's curve (with the core on the GEMM curve: on the same source's BF16 in-layer fit, the catalog's
BF16 curve once that fit is applied), as the step model prices an fp8 run (engine/job.py _bf16_gemms); Transformer
Engine's quantization casts are added as the step model adds them (cost.compute.fp8_quantize_bytes at the source's
``fp8_recipe``, memory-bound; the weights are cast on every call, as in a loop that sets no
``is_first_microbatch``), corrected for the modules the point names (``te_modules``, :func:`te_module_cast_bytes`):
fp8_quantize_bytes prices Megatron-Core's layer spec, whose norm is fused into the QKV / FC1 linears and whose
activation runs outside Transformer Engine.

Last, the GEMM kernels of one layer as profiled in the layer (FUSER-TE-NSYS: nsys kernel times of the GPT-3 layer's
forward on 8 x H100 SXM) against the model's GEMM time on the isolated and on the in-layer curve: whether the
shortfall the factor stands for is in the GEMMs at all.

Usage: python scripts/fit_in_layer_factor.py [--json]
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from repo_yaml import read_yaml  # noqa: E402

from scalemodel.cost.compute import (  # noqa: E402
    IN_LAYER_GEMM_FACTOR,
    _fp8_tensor_bytes,
    fp8_quantize_bytes,
    gemm_time,
    in_layer_gemm_factor,
    layer_compute_time,
    memory_time,
)
from scalemodel.cost.transformer import shape  # noqa: E402
from scalemodel.engine.job import _attention_kernel  # noqa: E402
from scalemodel.errors import InputError  # noqa: E402
from scalemodel.specs import load_accelerator  # noqa: E402

LAYER = ROOT / "hardware" / "measurements" / "layer_timing.yaml"
NCCL = ROOT / "hardware" / "measurements" / "nccl.yaml"
GRID = np.arange(0.30, 1.0, 0.0005)
REFERENCE = "KORTHIKANTI-T4"
#: accelerators whose catalog curves are fitted to scalemodel's own power-limited sweep (gemm.yaml SM-H200), i.e. on
#: the sustained basis; Transformer Engine's H100 rows are re-read on each (scalemodel.cost.compute
#: IN_LAYER_GEMM_FACTORS_BY_ACCELERATOR)
SUSTAINED_BASIS = ("h200-sxm",)


def load(path: Path = LAYER) -> dict[str, Any]:
    """layer_timing.yaml (a deep copy of its one parse, scripts/repo_yaml.py), or another file as yaml.safe_load
    reads it."""
    if Path(path).resolve() == LAYER.resolve():
        return read_yaml(path)  # type: ignore[no-any-return]
    return yaml.safe_load(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _group(prec: str) -> str:
    return "fp8" if prec == "fp8" else "16bit"


@functools.cache
def _microbenchmark_fits() -> dict[tuple[str, str], dict[str, Any]]:
    """scripts/fit_compute_curves.run(): the isolated-GEMM fits, (accelerator, group) -> fit."""
    import fit_compute_curves as fit  # scripts/; imported here because it prints its fits as it runs

    with contextlib.redirect_stdout(io.StringIO()):
        return fit.run()


def isolated_curve(acc: str, prec: str) -> dict[str, float]:
    """The accelerator's isolated-GEMM curve: gemm_max of the microbenchmark fit (scripts/fit_compute_curves.py;
    where it fits none, the catalog's gemm_max / the in-layer factor it was built with), with the d0 and memory
    fraction the step model prices it with (the catalog's; A100, which has no catalog curve: the fit's)."""
    f = _microbenchmark_fits().get((acc, _group(prec)))
    if acc == "a100-sxm-80g":  # no catalog curve (family default): the microbenchmark fit itself
        assert f is not None
        return {"gemm_max": float(f["gemm_max"]), "gemm_half_dim": float(f["gemm_half_dim"]),
                "memory": float(f["memory"])}
    a = load_accelerator(acc, overrides=[])
    ce = a.compute_efficiency
    if ce is None:
        raise SystemExit(f"error: {acc}: no compute_efficiency in the catalog; fit it first")
    gm, d0 = ce.gemm(prec)
    iso = float(f["gemm_max"]) if f is not None else gm / in_layer_gemm_factor(a.family, prec, a.name)
    return {"gemm_max": iso, "gemm_half_dim": d0, "memory": float(ce.memory)}


def busbw(src: dict[str, Any], msg_bytes: float) -> float:
    """All-reduce bus bandwidth (B/s) for a message: the source's fixed value, or the nccl.yaml case it names
    interpolated log-log in message size."""
    if "allreduce_busbw_GBps" in src:
        return float(src["allreduce_busbw_GBps"]) * 1e9
    case = next(c for c in read_yaml(NCCL) if c["id"] == src["allreduce_busbw_from"])
    x = np.log(np.asarray(case["measured"]["msg_bytes"], dtype=float))
    y = np.log(np.asarray(case["measured"]["busbw_GBps"], dtype=float))
    return float(np.exp(np.interp(np.log(msg_bytes), x, y))) * 1e9


def comm_time(p: dict[str, Any], src: dict[str, Any]) -> float:
    """Critical-path tensor-parallel communication of the timed pass: ar all-reduces of b*s*h 2-byte elements."""
    if not p["ar"] or p["tp"] <= 1:
        return 0.0
    msg = p["micro_batch"] * p["seq"] * p["hidden"] * 2.0
    return p["ar"] * 2.0 * (p["tp"] - 1) / p["tp"] * msg / busbw(src, msg)


def te_module_cast_bytes(p: dict[str, Any], recipe: str, transpose_copy: bool, eb: float = 2.0) -> tuple[float, float]:
    """HBM bytes (forward, backward) by which an fp8 point's Transformer Engine modules (``te_modules``) quantize
    differently from the Megatron-Core layer spec that ``cost.compute.fp8_quantize_bytes`` prices (the norm fused
    into the QKV and FC1 linears, the activation outside Transformer Engine, its output cast by FC2's linear).

    * ``unfused`` (te.LayerNorm + te.Linear, GELU in PyTorch): the norms write 16-bit outputs and te.Linear casts
      them (cast + transpose), so the QKV and FC1 inputs (T h each) cost the unfused cast, not the fused norm's:
      + 2 T h x (from_norm=False - from_norm=True bytes per element; 3 under delayed scaling with the transpose).
    * ``fused`` (te.LayerNormMLP, also inside te.TransformerLayer): the GELU writes FC2's FP8 input itself and the
      backward's dGELU writes FC1's FP8 output gradient itself (TransformerEngine pytorch/module/layernorm_mlp.py:
      forward ``activation_func(fc1_out, fc2_input_quantizer)``, which csrc/extensions/activation.cpp
      ``activation_helper`` computes directly into the Float8 output, row- and column-wise in one kernel; backward
      ``dbias_dact_quantize_func``, dGELU + bias gradient + quantize in one kernel): neither the 16-bit write of the
      activation (of its gradient) nor the cast's 16-bit read of it happens, - 2 eb T f / t bytes each way.
    Other values (or none): no correction."""
    mods = p.get("te_modules")
    T, t = p["micro_batch"] * p["seq"], p["tp"]
    if mods == "unfused":
        per = (_fp8_tensor_bytes(recipe, 1.0, 1.0, from_norm=False, transpose_copy=transpose_copy, eb=eb)
               - _fp8_tensor_bytes(recipe, 1.0, 1.0, from_norm=True, transpose_copy=transpose_copy, eb=eb))
        return 2.0 * T * p["hidden"] / t * float(per), 0.0
    if mods == "fused":
        d = -2.0 * eb * T * p["ffn"] / t
        return d, d
    return 0.0, 0.0


def attention_curves(p: dict[str, Any], acc: str) -> dict[str, Any]:
    """``layer_compute_time`` keywords of a flash point's fused core on the fitted curves of the kernel it ran
    (the point's ``kernel``), resolved from ``acc``'s ``attention_efficiency`` by the step model's own route
    (engine/job.py ``_attention_kernel``, the Job fields engine/layer_compute.py passes on); {} for an unfused core."""
    if not p["flash"]:
        return {}
    if "kernel" not in p:
        raise SystemExit(f"error: layer_timing.yaml {p['src']} {p['row']!r}: flash point without kernel; "
                         f"name the fused kernel that ran (cudnn, fa2, ...)")
    try:
        # the point's own precision: the step model's check_attention_precision reads it beside the kernel
        training = SimpleNamespace(attention_kernel=p["kernel"], precision=p["prec"])
        job = _attention_kernel(training, load_accelerator(acc, overrides=[]))
    except InputError as e:
        raise SystemExit(f"error: layer_timing.yaml {p['src']} {p['row']!r}: {e}") from None
    return {"attention_fwd": job["attention_fwd"], "attention_bwd": job["attention_bwd"]}


#: The implementation whose memory-bound ops each layer timing ran (``layer_compute_time``'s ``layer_impl``:
#: cost.compute.layer_eltwise_bytes), so that a point's norms, residuals, dropout, activation and layout copies are
#: priced as its own code moves them and the fitted factor absorbs none of them: Korthikanti et al. 2022 ran
#: Megatron-LM's megatron/model (megatron_legacy); Transformer Engine's TransformerLayer (FUSER-TE, and TE-GS-PT's
#: 'TE TransformerLayer' row) and LayerNormLinear + LayerNormMLP ('TE Fused') are Megatron-Core's TE fusions
#: (megatron_te); TE-GS-PT's 'Baseline PyTorch' (torch.nn modules) and 'TE Unfused' rows (te.LayerNorm and te.Linear
#: with the GELU, dropouts and residual adds in PyTorch: eager, whose norm backward re-reads dy and x for the gains
#: where TE's does not, 2 e x per norm more than TE's own) and our SM-H200 GPTLayer run eager PyTorch (eager).
LAYER_IMPL = {"KORTHIKANTI-T4": "megatron_legacy", "FUSER-TE": "megatron_te", "FUSER-TE-LATER": "megatron_te",
              "TE-GS-PT": "eager", "SM-H200": "eager", "SM-H200-LAYER": "eager"}
#: TE-GS-PT rows whose modules are Transformer Engine's fused ones
TE_FUSED_ROWS = ("TE Fused", "TE TransformerLayer")
#: Layer timings that ran without dropout (their sources' ``what`` / ``rows``): SM-H200's GPTLayer ('no dropout') and
#: TE-GS-PT's TransformerLayer row ('dropouts 0'); the others keep dropout 0.1 (Megatron-LM's default, TE's guide,
#: te.TransformerLayer's defaults in FUSER-TE).
NO_DROPOUT = ("SM-H200", "SM-H200-LAYER")


def point_impl(p: dict[str, Any]) -> tuple[str, bool]:
    """(layer_impl, dropout) of a layer timing (:data:`LAYER_IMPL`, :data:`NO_DROPOUT`)."""
    impl = "megatron_te" if str(p["row"]).startswith(TE_FUSED_ROWS) else LAYER_IMPL.get(p["src"], "megatron_te")
    dropout = p["src"] not in NO_DROPOUT and not str(p["row"]).startswith("TE TransformerLayer")
    return impl, dropout


def model_time(p: dict[str, Any], src: dict[str, Any], gemm_max: Any, acc: str | None = None,
               core_gemm_max: float | None = None, curve_acc: str | None = None, core: str = "kernel") -> np.ndarray:
    """Model time (s) of point p for each gemm_max (array): scalemodel's layer pricing + the source's comm.

    As the step model prices a layer (engine/layer_compute.py ``_compute_per_microbatch``): ``layer_compute_time`` with
    the point's causal mask (a fused core over the keys the mask leaves, its backward 2.5 x its forward),
    backward = ``LayerTime.backward`` + ``LayerTime.recompute``; an fp8 point adds Transformer Engine's
    quantization casts (``fp8_quantize_bytes`` at the source's ``fp8_recipe``, transposed copies on all but
    Blackwell, the weights cast on every call: the timed loop sets no ``is_first_microbatch``; corrected for the
    point's ``te_modules`` by :func:`te_module_cast_bytes`) and prices the
    core at BF16 on ``core_gemm_max`` (default: the catalog's BF16 in-layer gemm_max).

    ``core``: ``"kernel"`` (default) prices a flash point's fused core on the fitted curves of the kernel it ran
    (:func:`attention_curves`, the point's ``kernel``: cuDNN for Transformer Engine's attention on Hopper, fa2 for
    PyTorch SDPA's flash backend), at the core's peak (BF16 for an fp8 point), as the step model prices a core
    whose kernel has a curve; ``"gemm"`` keeps it on the GEMM curve (``core_gemm_max``), as the step model prices
    it on accelerators without attention curves (Blackwell, TPU, AMD, Volta): the basis of the factors they use.

    ``curve_acc`` prices the GEMMs and the core on another accelerator's curves (its GEMM half-dimension d0, its
    BF16 curve for an fp8 row's core, its attention-kernel curves) while the peaks, memory bandwidth and memory
    fraction stay those of ``acc``, the card that ran the layer: how Transformer Engine's H100 rows read on the
    H200 curve fitted to our own power-limited sweep (the same GH100 die at the same 700 W; see hardware/README.md,
    sustained and burst)."""
    name = acc or p["acc"]
    a = load_accelerator(name, overrides=[])
    iso = dict(isolated_curve(name, p["prec"]))
    if curve_acc is not None:
        iso["gemm_half_dim"] = isolated_curve(curve_acc, p["prec"])["gemm_half_dim"]
    impl, dropout = point_impl(p)
    # learned positions (none of the timed layers applies RoPE), biases (the shape's default), the point's dropout
    sh = shape(layers=1, hidden=p["hidden"], heads=p["heads"], vocab=32000, ffn_hidden=p["ffn"], causal=p["causal"],
               position_embeddings=p["seq"], dropout=dropout)
    kw: dict[str, Any] = dict(micro_batch=p["micro_batch"], seq_len=p["seq"], tp=p["tp"], layer_impl=impl,
                              sequence_parallel=p["sp"], recompute=p["recompute"], flash_attention=p["flash"],
                              peak_flops=a.peak(p["prec"]), memory_bandwidth=a.memory_bandwidth,
                              gemm_max=np.asarray(gemm_max, dtype=float), gemm_half_dim=iso["gemm_half_dim"],
                              memory_efficiency=iso["memory"])
    if core == "kernel":
        kw.update(attention_curves(p, curve_acc or name))
    elif core != "gemm":
        raise ValueError(f"core {core!r}: kernel or gemm")
    cast_f = cast_b = 0.0
    if p["prec"] == "fp8":  # the core stays in BF16 on the BF16 in-layer curve (engine/job.py _bf16_gemms)
        ce = load_accelerator(curve_acc or name, overrides=[]).compute_efficiency
        assert ce is not None
        gm16, d016 = ce.gemm("bf16")
        kw.update(core_peak_flops=a.peak("bf16"), core_gemm_max=gm16 if core_gemm_max is None else core_gemm_max,
                  core_gemm_half_dim=d016)
        f, b, w = fp8_quantize_bytes(sh, micro_batch=p["micro_batch"], seq_len=p["seq"], recipe=src["fp8_recipe"],
                                     transpose_copy=a.family != "blackwell", tp=p["tp"],
                                     sequence_parallel=p["sp"])
        df, db = te_module_cast_bytes(p, src["fp8_recipe"], a.family != "blackwell")
        mem = dict(memory_bandwidth=a.memory_bandwidth, memory_efficiency=iso["memory"])
        cast_f, cast_b = float(memory_time(f + w + df, **mem)), float(memory_time(b + db, **mem))
    lt = layer_compute_time(sh, **kw)
    fwd = lt.forward + cast_f
    bwd = lt.backward + cast_b + lt.recompute + (cast_f if p["recompute"] == "full" else 0.0)
    t = {"fwd": fwd, "bwd": bwd, "fwd+bwd": fwd + bwd}[p["measured"]]
    return np.asarray(t, dtype=float) + comm_time(p, src)


def best_gemm_max(pts: list[dict[str, Any]], src: dict[str, Any], acc: str | None = None,
                  core_gemm_max: float | None = None, curve_acc: str | None = None, core: str = "kernel") -> float:
    """gemm_max on GRID minimising sum ln(model/measured)^2 over pts; NaN when even gemm_max 1 is too slow."""
    meas = np.array([p["ms"] * 1e-3 for p in pts])
    pred = np.stack([model_time(p, src, GRID, acc, core_gemm_max, curve_acc, core) for p in pts], axis=-1)
    sse = np.sum(np.log(pred / meas) ** 2, axis=-1)
    i = int(np.argmin(sse))
    return float("nan") if i == len(GRID) - 1 else float(GRID[i])


def run(doc: dict[str, Any] | None = None, core: str = "kernel",
        sources: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """One row per (source, precision, accelerator) fit, with its points. The 16-bit groups are fitted first: an
    fp8 group's BF16 attention core runs on its source's own 16-bit in-layer fit on the same accelerator where
    there is one (what the step model does once that fit is the catalog's BF16 curve), else on the catalog's
    (with ``core`` "kernel", the default, only an unfused core is on a GEMM curve; fp8 rows' cores are all fused).
    ``core`` as :func:`model_time`; ``sources`` restricts the fit to those sources."""
    doc = doc or load()
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in doc["points"]:
        if p.get("fit", True) and (sources is None or p["src"] in sources):
            groups.setdefault((p["src"], _group(p["prec"])), []).append(p)
    bf16_fit: dict[tuple[str, str, str | None], float] = {}
    for (name, group), pts in sorted(groups.items(), key=lambda kv: kv[0][1] == "fp8"):
        src = doc["sources"][name]
        # (card that ran it, curve it is priced on); TE-GS-PT: SKU not stated, PCIe as a bound; and its H100 rows on
        # the H200 curve of our own power-limited sweep (SUSTAINED_BASIS): the factor that curve is built with
        accs: list[tuple[str, str | None]] = [(pts[0]["acc"], None)]
        if name == "TE-GS-PT":
            accs += [("h100-pcie", None)] + [(pts[0]["acc"], c) for c in SUSTAINED_BASIS]
        for acc, curve in accs:
            iso = isolated_curve(curve or acc, pts[0]["prec"])["gemm_max"]
            core_gm = bf16_fit.get((name, acc, curve)) if group == "fp8" else None
            core_gm = core_gm if core_gm is not None and np.isfinite(core_gm) else None
            gm = best_gemm_max(pts, src, acc, core_gm, curve, core)
            if group == "16bit":
                bf16_fit[(name, acc, curve)] = gm
            per_point = []
            for p in pts:
                single = best_gemm_max([p], src, acc, core_gm, curve, core)
                t = (float(model_time(p, src, gm, acc, core_gm, curve, core)[()]) if np.isfinite(gm)
                     else float("nan"))
                per_point.append({"row": p["row"], "measured_ms": p["ms"], "model_ms": 1e3 * t,
                                  "gemm_max": single, "factor": single / iso,
                                  "comm_ms": 1e3 * comm_time(p, src)})
            rows.append({"source": name, "acc": curve or acc, "ran_on": acc, "group": group,
                         "isolated_gemm_max": iso, "gemm_max": gm,
                         "factor": gm / iso, "core_gemm_max": core_gm, "core": core,
                         "status": src.get("status", ""),
                         "points": per_point})
    return rows


#: FUSER-TE-NSYS: the per-GPU forward GEMMs of the GPT-3 layer at t 8, b 1, s 2048 (T x N x K, N or K split by 8)
GPT3_TP8_GEMMS = ((2048, 3 * 12288 // 8, 12288), (2048, 12288, 12288 // 8), (2048, 4 * 12288 // 8, 12288),
                  (2048, 12288, 4 * 12288 // 8))


def gemm_kernels(doc: dict[str, Any] | None = None) -> dict[str, float]:
    """FUSER-TE-NSYS: the measured forward GEMM kernel sum against the model's GEMM time on H100 SXM's isolated
    curve and on its in-layer (catalog, Hopper BF16 factor) curve, seconds."""
    doc = doc or load()
    measured = sum(doc["sources"]["FUSER-TE-NSYS"]["gemm_kernels_ns"]) * 1e-9
    a = load_accelerator("h100-sxm", overrides=[])
    iso = isolated_curve("h100-sxm", "bf16")
    out = {"measured": measured, "flops": float(sum(2.0 * m * n * k for m, n, k in GPT3_TP8_GEMMS))}
    factor = in_layer_gemm_factor("hopper", "bf16")
    for key, gm in (("isolated", iso["gemm_max"]), ("in_layer", iso["gemm_max"] * factor)):
        out[key] = float(sum(gemm_time(m, n, k, peak_flops=a.peak("bf16"), memory_bandwidth=a.memory_bandwidth,
                                       gemm_max=gm, gemm_half_dim=iso["gemm_half_dim"],
                                       memory_efficiency=iso["memory"]) for m, n, k in GPT3_TP8_GEMMS))
    return out


#: Transformer Engine's GEMM profiling guide (hardware/measurements/gemm.yaml TE-GEMMPROF-B300, ``fp8_in_layer``): the
#: pre-quantized per-layer sums of the 12 GEMMs of its 5B config's layer, BF16 (torch.matmul) over FP8 current scaling
#: (tex.generic_gemm, per-tensor E4M3), ms: the FP8 / BF16 kernel ratio each generation measured with the same tool
TE_KERNEL_RATIO = {"hopper": 31.968 / 16.785, "blackwell": 13.102 / 6.812}  # H200 NVL; B300 SXM6 AC
#: its layer: M = 31 x 512 tokens, hidden 4096, intermediate 16384; fprop, dgrad and wgrad (m, n, k) of QKV, attn out,
#: MLP up, MLP down
_TM, _TH, _TF = 15872, 4096, 16384
TE_LAYER_GEMMS = tuple((m, n, k) for m, n, k in (
    (_TM, 3 * _TH, _TH), (_TM, _TH, _TH), (_TM, _TF, _TH), (_TM, _TH, _TF),  # fprop
    (_TM, _TH, 3 * _TH), (_TM, _TH, _TH), (_TM, _TH, _TF), (_TM, _TF, _TH),  # dgrad
    (3 * _TH, _TH, _TM), (_TH, _TH, _TM), (_TF, _TH, _TM), (_TH, _TF, _TM)))  # wgrad


def te_layer_gemm_ratio(acc: str, basis: str) -> float:
    """BF16 / FP8 time of TE_LAYER_GEMMS on the accelerator's curves: ``basis`` 'isolated' (:func:`isolated_curve`)
    or 'in_layer' (the catalog's curves)."""
    a = load_accelerator(acc, overrides=[])
    ce = a.compute_efficiency
    if ce is None:
        raise SystemExit(f"error: {acc}: no compute_efficiency in the catalog; fit it first")
    t = {}
    for prec in ("bf16", "fp8"):
        iso = isolated_curve(acc, prec)
        gm, d0 = ce.gemm(prec) if basis == "in_layer" else (iso["gemm_max"], iso["gemm_half_dim"])
        t[prec] = sum(float(gemm_time(m, n, k, peak_flops=a.peak(prec), memory_bandwidth=a.memory_bandwidth,
                                      gemm_max=gm, gemm_half_dim=d0, memory_efficiency=ce.memory,
                                      elem_bytes=1.0 if prec == "fp8" else 2.0)) for m, n, k in TE_LAYER_GEMMS)
    return t["bf16"] / t["fp8"]


def blackwell_fp8_factor(donor: str = "h100-sxm", part: str = "b200") -> dict[str, float]:
    """Blackwell's FP8 in-layer factor (scalemodel.cost.compute.BLACKWELL_FP8_IN_LAYER_GEMM_FACTOR): Hopper's in-layer
    FP8 / BF16 ratio at TE_LAYER_GEMMS (``donor``, the part whose layer timing gave Hopper's factors) over Hopper's
    TE kernel ratio, carried to Blackwell's kernel ratio: target = in-layer(donor) x TE_KERNEL_RATIO blackwell /
    hopper; factor = the Blackwell BF16 factor x target / ``part``'s isolated ratio (its fp8 curve bounded to the
    B300 kernel ratio, scripts/fit_compute_curves.py FP8_OVER_16BIT)."""
    r_hopper = te_layer_gemm_ratio(donor, "in_layer")
    target = r_hopper * TE_KERNEL_RATIO["blackwell"] / TE_KERNEL_RATIO["hopper"]
    r_iso = te_layer_gemm_ratio(part, "isolated")
    return {"hopper_in_layer": r_hopper, "hopper_isolated": te_layer_gemm_ratio(donor, "isolated"),
            "target": target, "blackwell_isolated": r_iso,
            "factor": in_layer_gemm_factor("blackwell", "bf16") * target / r_iso}


#: sources refitted with the attention core on the GEMM curve: the basis of the factors of families whose core the
#: step model keeps on the GEMM curve (HOPPER_GEMM_CORE_IN_LAYER_GEMM_FACTOR; Blackwell's until its cuDNN curves)
GEMM_CORE_SOURCES = ("TE-GS-PT",)


def main(argv: list[str]) -> int:
    rows = run()
    gemm_core = run(core="gemm", sources=GEMM_CORE_SOURCES)
    if "--json" in argv:
        clean = json.loads(json.dumps(rows + gemm_core), parse_constant=lambda c: None)  # NaN -> null: strict JSON
        print(json.dumps(clean, indent=1, allow_nan=False))
        return 0
    print(f"In-layer GEMM factor implied by published per-layer timings (catalog: IN_LAYER_GEMM_FACTOR "
          f"{IN_LAYER_GEMM_FACTOR}; hopper {in_layer_gemm_factor('hopper', 'bf16')} BF16, "
          f"{in_layer_gemm_factor('hopper', 'fp8')} FP8 (fused cores on their kernel's curve); blackwell "
          f"{in_layer_gemm_factor('blackwell', 'bf16')} BF16 (borrowed, core on its cuDNN curve), "
          f"{in_layer_gemm_factor('blackwell', 'fp8')} FP8 (Hopper's relation to TE's kernel ratio, below))\n")
    for r in rows + gemm_core:
        if r is gemm_core[0]:
            print("\nWith the fused core on the GEMM curve (families without an attention-kernel curve):")
        on = r["acc"] if r["ran_on"] == r["acc"] else f"{r['ran_on']}, priced on the {r['acc']} curve,"
        if not np.isfinite(r["gemm_max"]):  # best_gemm_max's NaN: slower than measured even at gemm_max 1
            print(f"{r['source']} on {on} ({r['group']}): no in-layer factor: even at gemm_max 1 this card is "
                  f"slower than the measured rows, so they did not run on it")
            continue
        print(f"{r['source']} on {on} ({r['group']}): isolated gemm_max {r['isolated_gemm_max']:.3f}, "
              f"in-layer fit {r['gemm_max']:.4f} -> factor {r['factor']:.3f}"
              + (f" (BF16 core at gemm_max {r['core_gemm_max']:.4f})" if r["core_gemm_max"] else ""))
        for p in r["points"]:
            print(f"    {p['row']:34s} measured {p['measured_ms']:8.3f} ms  model {p['model_ms']:8.3f} ms "
                  f"({100 * (p['model_ms'] / p['measured_ms'] - 1):+5.1f} %)  comm {p['comm_ms']:5.3f} ms  "
                  f"alone: factor {p['factor']:.3f}")
    g = gemm_kernels()
    print(f"\nFUSER-TE-NSYS (GPT-3 layer forward, t 8, H100 SXM): the 4 GEMM kernels sum to "
          f"{1e3 * g['measured']:.3f} ms ({g['flops'] / g['measured'] / 1e12:.0f} TFLOP/s); model "
          f"{1e3 * g['isolated']:.3f} ms on the isolated curve, "
          f"{1e3 * g['in_layer']:.3f} ms on the in-layer (catalog) curve: in-layer GEMMs run "
          f"{g['isolated'] / g['measured']:.3f} x the isolated curve's speed")
    b = blackwell_fp8_factor()
    print(f"\nBlackwell FP8 (TE-GEMMPROF-B300 fp8_in_layer): at TE's 12 layer GEMMs h100-sxm's FP8 / BF16 ratio is "
          f"{b['hopper_isolated']:.3f} isolated, {b['hopper_in_layer']:.3f} in-layer against TE's H200 NVL kernels "
          f"{TE_KERNEL_RATIO['hopper']:.3f}; carried to the B300's {TE_KERNEL_RATIO['blackwell']:.3f}: "
          f"{b['target']:.3f}; b200's bounded isolated curves {b['blackwell_isolated']:.3f} -> factor "
          f"{b['factor']:.3f} (catalog {in_layer_gemm_factor('blackwell', 'fp8')})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
