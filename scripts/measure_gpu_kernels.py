"""Measure one GPU's GEMM, fused-attention, memory-bound-kernel and single-layer throughput (PyTorch, CUDA).

A calibration source for the compute curves (hardware/measurements/gemm.yaml and friends), never a
training-run measurement. Run it on the GPU to be described:

    python scripts/measure_gpu_kernels.py --out DIR        # writes DIR/gpu_kernels.json, prints a summary

Needs torch with CUDA; nothing in the package or its tests imports it. What is measured and how:

- GEMMs, bf16 (F.linear: y = x w^T, the layout of a training linear layer) and fp8 e4m3 with per-tensor
  scales (torch._scaled_mm, bf16 output: the call Transformer Engine's and torchao's FP8 linears reduce to),
  square sizes 256-16384 and transformer-layer shapes (tokens x {3h, h, 4h} x {h, 4h}). Inputs are drawn
  from N(0, 1) (never zeros: zeros run faster on Hopper), several input sets rotate so that small problems
  are not served from L2, and the timed calls are replayed from a CUDA graph (no host launch gaps): the
  kernel's own throughput, as cuBLASLt benchmarks report it. TFLOP/s = 2 m n k / median time.
- Sustained GEMM: 8192^3 bf16 (and fp8) back to back for a fixed wall time, TFLOP/s per window, with the
  SM clock and power nvidia-smi reads meanwhile: how far a long run falls below a short one.
- Fused attention (F.scaled_dot_product_attention with the flash and cuDNN backends), bf16, the
  FlashAttention benchmark's setup (batch = 16384 / s, hidden 2048, head dim 64 and 128, s = 512-16384,
  causal and not), forward and forward + backward, FLOPs in that benchmark's convention (4 b h s^2 d,
  halved when causal; backward 2.5x the forward).
- Memory-bound kernels (copy, add, GELU, LayerNorm, RMSNorm, softmax, bf16->fp8 cast, fused AdamW) at
  1 MiB-2 GiB: effective bandwidth = bytes read + written (counted per kernel below) / median time.
- One GPT layer (pre-LN, causal flash attention, GELU MLP of 4h, no dropout), bf16, eager PyTorch, forward
  and forward + backward, with its GEMM and attention FLOPs: the in-layer factor's numerator on this GPU.
Every section is timed with CUDA events, after warm-up, as the median of several repeats; each section
writes its results as soon as it ends, so a run cut short still returns what it measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812  (PyTorch's own convention)

RESULTS: dict[str, Any] = {}
OUT_PATH = ""


def save() -> None:
    """Write everything measured so far (atomically: a temporary file, then a rename)."""
    tmp = OUT_PATH + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(RESULTS, fh, indent=1)
    os.replace(tmp, OUT_PATH)


def smi(query: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # nvidia-smi missing or hung: record why, the timings do not depend on it
        return f"unavailable: {exc}"


def time_calls(calls: list[Callable[[], Any]], target_s: float = 0.03, reps: int = 5,
               graph: bool = True) -> tuple[float, float, int]:
    """Median and min seconds per call of `calls` run round-robin; graph replay when `graph`."""
    for c in calls * 2:
        c()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for c in calls:
        c()
    end.record()
    torch.cuda.synchronize()
    per = max(start.elapsed_time(end) / 1e3 / len(calls), 1e-7)
    iters = int(min(max(target_s / per, 5), 400))
    iters = max(len(calls), iters - iters % len(calls))
    runner: Callable[[], Any]
    if graph:
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for c in calls:
                    c()
            torch.cuda.current_stream().wait_stream(stream)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(iters):
                    calls[i % len(calls)]()
            runner = g.replay
        except Exception:  # a kernel that cannot be captured: time it eagerly instead
            graph = False
    if not graph:
        def runner() -> None:
            for i in range(iters):
                calls[i % len(calls)]()
    runner()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start.record()
        runner()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / iters)
    return statistics.median(times), min(times), iters


def n_sets(bytes_per_set: float) -> int:
    """Input sets to rotate so that the working set is several times the 50-60 MB L2."""
    return int(min(16, max(1, math.ceil(400e6 / bytes_per_set))))


def gemm_shapes() -> list[tuple[int, int, int, str]]:
    shapes = [(s, s, s, "square") for s in (256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)]
    for tokens in (1024, 4096, 16384):
        for h in (2048, 4096, 5120, 8192, 12288):
            shapes += [(tokens, 3 * h, h, "qkv"), (tokens, h, h, "proj"), (tokens, 4 * h, h, "fc1"),
                       (tokens, h, 4 * h, "fc2")]
    shapes += [(tokens, 4096, 4096, "skinny") for tokens in (128, 256, 512)]
    return shapes


def measure_gemm(dev: torch.device, deadline: float) -> None:
    rows: list[dict[str, Any]] = []
    RESULTS["gemm"] = rows
    fp8_ok = hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")
    for prec in ("bf16", "fp8"):
        if prec == "fp8" and not fp8_ok:
            RESULTS["gemm_fp8_error"] = "torch has no _scaled_mm / float8_e4m3fn"
            continue
        for m, n, k, kind in gemm_shapes():
            if time.time() > deadline:
                RESULTS.setdefault("cut_short", []).append(f"gemm {prec} from {m}x{n}x{k}")
                break
            try:
                elem = 2 if prec == "bf16" else 1
                sets = n_sets((m * k + n * k) * elem + m * n * 2)
                calls: list[Callable[[], Any]] = []
                keep = []
                for _ in range(sets):
                    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
                    if prec == "bf16":
                        keep.append((x, w))
                        calls.append(lambda x=x, w=w: F.linear(x, w))
                    else:
                        x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
                        one = torch.ones((), device=dev, dtype=torch.float32)
                        keep.append((x8, w8, one))
                        calls.append(lambda x8=x8, w8=w8, one=one: torch._scaled_mm(
                            x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                    del x, w
                med, best, iters = time_calls(calls)
                flops = 2.0 * m * n * k
                rows.append({"prec": prec, "m": m, "n": n, "k": k, "kind": kind, "ms": med * 1e3,
                             "ms_min": best * 1e3, "tflops": flops / med / 1e12, "iters": iters,
                             "input_sets": sets})
                del calls, keep
            except Exception as exc:
                rows.append({"prec": prec, "m": m, "n": n, "k": k, "kind": kind, "error": repr(exc)[:300]})
            torch.cuda.empty_cache()
        save()


def measure_sustained(dev: torch.device, seconds: float) -> None:
    out: dict[str, Any] = {}
    RESULTS["sustained"] = out
    for prec in ("bf16", "fp8"):
        size = 8192
        a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
        b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
        if prec == "bf16":
            def step(a: torch.Tensor = a, b: torch.Tensor = b) -> Any:
                return F.linear(a, b)
        else:
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev, dtype=torch.float32)

            def step(a: torch.Tensor = a8, b: torch.Tensor = b8, one: torch.Tensor = one) -> Any:
                return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        log = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                                "--format=csv,noheader", "-lms", "500"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        windows = []
        t_end = time.time() + seconds
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        while time.time() < t_end:
            start.record()
            for _ in range(40):
                step()
            end.record()
            end.synchronize()
            windows.append(40 * 2.0 * size ** 3 / (start.elapsed_time(end) / 1e3) / 1e12)
        log.terminate()
        try:
            smi_lines = log.communicate(timeout=5)[0].strip().splitlines()
        except Exception:
            smi_lines = []
        out[prec] = {"size": size, "seconds": seconds, "tflops_windows": windows, "smi": smi_lines}
        save()


def attention_case(dev: torch.device, name: str, backend: Any, d: int, s: int, causal: bool) -> dict[str, Any]:
    """One FlashAttention-benchmark point: batch 16384 / s, hidden 2048 (heads = 2048 / d)."""
    from torch.nn.attention import sdpa_kernel
    b, heads = 16384 // s, 2048 // d
    q, k, v = (torch.randn(b, heads, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad = torch.randn(b, heads, s, d, device=dev, dtype=torch.bfloat16)
    fwd_flops = 4.0 * b * heads * s * s * d / (2 if causal else 1)

    def fwd() -> Any:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fwd_bwd() -> None:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(grad)
    with sdpa_kernel(backend):
        with torch.no_grad():
            t_f, _, _ = time_calls([fwd], target_s=0.05, graph=False)
        t_fb, _, _ = time_calls([fwd_bwd], target_s=0.05, graph=False)
    return {"kernel": name, "causal": causal, "b": b, "h": heads, "d": d, "s": s,
            "fwd_ms": t_f * 1e3, "fwd_bwd_ms": t_fb * 1e3, "fwd_tflops": fwd_flops / t_f / 1e12,
            "bwd_tflops": 2.5 * fwd_flops / max(t_fb - t_f, 1e-9) / 1e12,
            "fwd_bwd_tflops": 3.5 * fwd_flops / t_fb / 1e12}


def measure_attention(dev: torch.device, deadline: float) -> None:
    from torch.nn.attention import SDPBackend
    rows: list[dict[str, Any]] = []
    RESULTS["attention"] = rows
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for name, backend in backends.items():
        for d in (64, 128):
            for causal in (False, True):
                for s in (512, 1024, 2048, 4096, 8192, 16384):
                    if time.time() > deadline:
                        RESULTS.setdefault("cut_short", []).append(f"attention {name} d{d} s{s}")
                        break
                    try:
                        rows.append(attention_case(dev, name, backend, d, s, causal))
                    except Exception as exc:
                        rows.append({"kernel": name, "causal": causal, "d": d, "s": s, "error": repr(exc)[:300]})
                    torch.cuda.empty_cache()
        save()


def measure_memory(dev: torch.device, deadline: float) -> None:
    rows: list[dict[str, Any]] = []
    RESULTS["memory_kernels"] = rows
    width = 4096
    for mib in (1, 4, 16, 64, 256, 1024, 2048):
        if time.time() > deadline:
            RESULTS.setdefault("cut_short", []).append(f"memory from {mib} MiB")
            break
        n = mib * 2 ** 20 // 2          # bf16 elements of one tensor
        rows_ = n // width
        sets = n_sets(4 * n * 2)
        xs = [torch.randn(rows_, width, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
        ys = [torch.randn(rows_, width, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
        w = torch.randn(width, device=dev, dtype=torch.bfloat16)
        bias = torch.randn(width, device=dev, dtype=torch.bfloat16)
        # name -> (calls, bytes moved per call)
        kernels: dict[str, tuple[list[Callable[[], Any]], float]] = {
            "copy": ([lambda x=x, y=y: y.copy_(x) for x, y in zip(xs, ys, strict=True)], 2 * n * 2),
            "add": ([lambda x=x, y=y: x + y for x, y in zip(xs, ys, strict=True)], 3 * n * 2),
            "gelu": ([lambda x=x: F.gelu(x) for x in xs], 2 * n * 2),
            "layer_norm": ([lambda x=x, w=w, bias=bias: F.layer_norm(x, (width,), w, bias) for x in xs], 2 * n * 2),
            "rms_norm": ([lambda x=x, w=w: F.rms_norm(x, (width,), w) for x in xs], 2 * n * 2),
            "softmax": ([lambda x=x: torch.softmax(x, -1) for x in xs], 2 * n * 2),
            "cast_fp8": ([lambda x=x: x.to(torch.float8_e4m3fn) for x in xs], n * 3),
        }
        for name, (calls, nbytes) in kernels.items():
            try:
                med, best, iters = time_calls(calls, target_s=0.02)
                rows.append({"kernel": name, "mib": mib, "rows": rows_, "width": width, "bytes": nbytes,
                             "ms": med * 1e3, "ms_min": best * 1e3, "tb_s": nbytes / med / 1e12})
            except Exception as exc:
                rows.append({"kernel": name, "mib": mib, "error": repr(exc)[:300]})
        del xs, ys, kernels
        torch.cuda.empty_cache()
        save()
    # fused AdamW over fp32 parameters: reads p, g, m, v and writes p, m, v = 28 bytes per parameter
    for mparams in (16, 128, 512):
        try:
            p = torch.randn(mparams * 2 ** 20, device=dev, dtype=torch.float32, requires_grad=True)
            p.grad = torch.randn_like(p)
            opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
            med, best, iters = time_calls([opt.step], target_s=0.02, graph=False)
            nbytes = 28.0 * p.numel()
            rows.append({"kernel": "adamw_fused_fp32", "params": p.numel(), "bytes": nbytes, "ms": med * 1e3,
                         "ms_min": best * 1e3, "tb_s": nbytes / med / 1e12})
            del p, opt
        except Exception as exc:
            rows.append({"kernel": "adamw_fused_fp32", "params": mparams * 2 ** 20, "error": repr(exc)[:300]})
        torch.cuda.empty_cache()
    save()


class GPTLayer(torch.nn.Module):
    """Pre-LN GPT layer: LN, QKV, causal flash attention, projection, residual; LN, fc1, GELU, fc2, residual."""

    def __init__(self, h: int, heads: int) -> None:
        super().__init__()
        self.h, self.heads = h, heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
        self.qkv, self.proj = torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h)
        self.fc1, self.fc2 = torch.nn.Linear(h, 4 * h), torch.nn.Linear(4 * h, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def layer_case(dev: torch.device, h: int, heads: int, s: int, b: int, attention: str) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    layer = GPTLayer(h, heads).to(dev, torch.bfloat16)
    x = torch.randn(b, s, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def fwd() -> Any:
        return layer(x)

    def fwd_bwd() -> None:
        layer.zero_grad(set_to_none=True)   # a fresh gradient each step, not an accumulating add per parameter
        x.grad = None
        layer(x).backward(grad)
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[attention]
    with sdpa_kernel(backend):
        with torch.no_grad():
            t_f, _, _ = time_calls([fwd], target_s=0.05, graph=False)
        t_fb, _, _ = time_calls([fwd_bwd], target_s=0.05, graph=False)
    gemm = 24.0 * b * s * h * h                  # forward GEMM FLOPs: QKV 6, proj 2, fc1 8, fc2 8 (x bsh^2)
    attn = 4.0 * b * s * s * h / 2               # forward attention core, causal (benchmark convention)
    return {"h": h, "heads": heads, "s": s, "b": b, "attention": attention,
            "fwd_ms": t_f * 1e3, "fwd_bwd_ms": t_fb * 1e3,
            "gemm_flops_fwd": gemm, "attn_flops_fwd": attn,
            "fwd_bwd_tflops": (3 * gemm + 3.5 * attn) / t_fb / 1e12}   # backward: 2x GEMMs, 2.5x the core


def measure_layer(dev: torch.device, deadline: float) -> None:
    rows: list[dict[str, Any]] = []
    RESULTS["layer"] = rows
    for attention in ("flash", "cudnn"):
        for h, heads, s, b in ((2048, 16, 2048, 8), (4096, 32, 2048, 4), (8192, 64, 2048, 2), (12288, 96, 2048, 1)):
            if time.time() > deadline:
                RESULTS.setdefault("cut_short", []).append(f"layer {attention} h{h}")
                break
            try:
                rows.append(layer_case(dev, h, heads, s, b, attention))
            except Exception as exc:
                rows.append({"h": h, "attention": attention, "error": repr(exc)[:300]})
            torch.cuda.empty_cache()
            save()


def main() -> int:
    global OUT_PATH
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for gpu_kernels.json")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the whole run (default 300)")
    parser.add_argument("--sections", default="gemm,sustained,attention,memory,layer",
                        help="comma-separated subset of gemm,sustained,attention,memory,layer (default all)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("error: torch sees no CUDA device; this script measures a GPU", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    OUT_PATH = os.path.join(args.out, "gpu_kernels.json")
    t0 = time.time()
    dev = torch.device("cuda")
    prop = torch.cuda.get_device_properties(dev)
    RESULTS["device"] = {"name": prop.name, "sms": prop.multi_processor_count, "memory_bytes": prop.total_memory,
                         "capability": f"{prop.major}.{prop.minor}", "torch": torch.__version__,
                         "cuda": torch.version.cuda, "cublas_lt": True,
                         "smi_before": smi("name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu"),
                         "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    save()
    budget = args.budget
    steps: list[tuple[str, Callable[[], None]]] = [
        ("gemm", lambda: measure_gemm(dev, t0 + 0.40 * budget)),
        ("sustained", lambda: measure_sustained(dev, 0.04 * budget)),
        ("attention", lambda: measure_attention(dev, t0 + 0.72 * budget)),
        ("memory", lambda: measure_memory(dev, t0 + 0.85 * budget)),
        ("layer", lambda: measure_layer(dev, t0 + 0.97 * budget)),
    ]
    wanted = set(args.sections.split(","))
    for name, fn in steps:
        if name not in wanted:
            continue
        ts = time.time()
        try:
            fn()
        except Exception as exc:
            RESULTS.setdefault("errors", {})[name] = repr(exc)[:500]
        RESULTS.setdefault("section_seconds", {})[name] = round(time.time() - ts, 1)
        save()
        print(f"{name}: {time.time() - ts:.1f} s", flush=True)
    RESULTS["device"]["smi_after"] = smi("clocks.sm,power.draw,temperature.gpu")
    save()
    for r in RESULTS.get("gemm", []):
        if "tflops" in r and (r["kind"] == "square" or r["m"] == 16384):
            print(f"gemm {r['prec']} {r['m']}x{r['n']}x{r['k']} {r['tflops']:.0f} TFLOP/s")
    for prec, s in RESULTS.get("sustained", {}).items():
        w = s["tflops_windows"]
        print(f"sustained {prec}: first {w[0]:.0f} median {statistics.median(w):.0f} last {w[-1]:.0f} TFLOP/s")
    for r in RESULTS.get("attention", []):
        if "fwd_tflops" in r and r["s"] in (2048, 16384):
            print(f"attn {r['kernel']} d{r['d']} causal={r['causal']} s{r['s']}: fwd {r['fwd_tflops']:.0f} "
                  f"fwd+bwd {r['fwd_bwd_tflops']:.0f}")
    for r in RESULTS.get("memory_kernels", []):
        if "tb_s" in r and r.get("mib") in (64, 2048, None):
            print(f"mem {r['kernel']} {r.get('mib', '')}MiB {r['tb_s']:.2f} TB/s")
    for r in RESULTS.get("layer", []):
        if "fwd_bwd_ms" in r:
            print(f"layer {r.get('attention', 'flash')} h{r['h']} b{r['b']}: "
                  f"fwd {r['fwd_ms']:.2f} ms fwd+bwd {r['fwd_bwd_ms']:.2f} ms "
                  f"{r['fwd_bwd_tflops']:.0f} TFLOP/s")
    print("errors:", RESULTS.get("errors"), "cut:", RESULTS.get("cut_short"), f"total {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
