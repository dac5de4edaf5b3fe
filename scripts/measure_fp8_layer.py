"""Time one GPT layer with FP8 linears (per-tensor current scaling) against the same layer in BF16, on one GPU.

The FP8 counterpart of the `layer` section of scripts/measure_gpu_kernels.py (same layer: pre-LN, causal flash
attention, GELU MLP of 4h, no dropout, eager PyTorch). Each linear layer runs as Transformer Engine's
tensorwise ("Float8CurrentScaling") recipe does on Hopper, written out in plain torch ops so that every kernel
is visible (unfused: amax, scale-multiply and cast are three kernels where Transformer Engine fuses them): the
input's and the weight's amax, a cast to e4m3 with scale 448 / amax, torch._scaled_mm with
bf16 output; the backward casts the output gradient to e5m2 (57344 / amax), and makes the transposed FP8
copies Hopper's TN-only FP8 GEMMs need (dgrad: W^T; wgrad: X^T and dY^T). Attention, norms and GELU stay in
bf16, as in Transformer Engine's FP8 recipes. Needs torch with CUDA; nothing in the package imports it.

    python scripts/measure_fp8_layer.py --out DIR      # writes DIR/fp8_layer.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812  (PyTorch's own convention)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def quantize(t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor current scaling: scale = fp8 max / amax; returns the fp8 tensor and 1 / scale (fp32)."""
    fmax = 448.0 if dtype == E4M3 else 57344.0
    amax = torch.linalg.vector_norm(t, ord=float("inf")).float().clamp(min=1e-12)   # one reduction kernel
    scale = (fmax / amax).to(t.dtype)                                                # multiply in bf16: no fp32 copy
    return (t * scale).to(dtype), scale.float().reciprocal()


def col_major(t: torch.Tensor) -> torch.Tensor:
    """The same matrix stored column-major (a transposed copy, the kernel Hopper's TN-only FP8 GEMM needs)."""
    return t.t().contiguous().t()


class Fp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        x8, sx = quantize(x2, E4M3)
        w8, sw = quantize(w, E4M3)
        y = torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
        ctx.save_for_backward(x8, sx, w8, sw)
        ctx.shape = shape
        return y.reshape(*shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x8, sx, w8, sw = ctx.saved_tensors
        g2 = gy.reshape(-1, gy.shape[-1])
        g8, sg = quantize(g2, E5M2)
        dx = torch._scaled_mm(g8, col_major(w8), scale_a=sg, scale_b=sw, out_dtype=torch.bfloat16)
        dw = torch._scaled_mm(g8.t().contiguous(), col_major(x8), scale_a=sg, scale_b=sx, out_dtype=torch.bfloat16)
        return dx.reshape(ctx.shape), dw


class Layer(torch.nn.Module):
    def __init__(self, h: int, heads: int, fp8: bool) -> None:
        super().__init__()
        self.h, self.heads, self.fp8 = h, heads, fp8
        self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
        self.w_qkv = torch.nn.Parameter(torch.randn(3 * h, h) * h ** -0.5)
        self.w_proj = torch.nn.Parameter(torch.randn(h, h) * h ** -0.5)
        self.w_fc1 = torch.nn.Parameter(torch.randn(4 * h, h) * h ** -0.5)
        self.w_fc2 = torch.nn.Parameter(torch.randn(h, 4 * h) * (4 * h) ** -0.5)

    def lin(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return Fp8Linear.apply(x, w) if self.fp8 else F.linear(x, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.lin(self.ln1(x), self.w_qkv).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.lin(a.transpose(1, 2).reshape(b, s, h), self.w_proj)
        return x + self.lin(F.gelu(self.lin(self.ln2(x), self.w_fc1)), self.w_fc2)


def timed(fn: Any, reps: int = 7, target_s: float = 0.1) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    iters = max(3, int(target_s / max(start.elapsed_time(end) / 1e3, 1e-6)))
    out = []
    for _ in range(reps):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / 1e3 / iters)
    return statistics.median(out)


def case(dev: torch.device, h: int, heads: int, s: int, b: int) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    row: dict[str, Any] = {"h": h, "heads": heads, "s": s, "b": b}
    torch.manual_seed(0)
    bf = Layer(h, heads, fp8=False).to(dev, torch.bfloat16)
    f8 = Layer(h, heads, fp8=True).to(dev, torch.bfloat16)
    f8.load_state_dict(bf.state_dict())
    x = torch.randn(b, s, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        with torch.no_grad():   # the FP8 layer computes the same function: relative error of its output
            ref, got = bf(x).float(), f8(x).float()
            row["fp8_rel_err"] = float((got - ref).norm() / ref.norm())
        for name, layer in (("bf16", bf), ("fp8", f8)):
            def fwd(layer: Layer = layer) -> Any:
                with torch.no_grad():
                    return layer(x)

            def fwd_bwd(layer: Layer = layer) -> None:
                layer(x).backward(grad)
            row[f"{name}_fwd_ms"] = timed(fwd) * 1e3
            row[f"{name}_fwd_bwd_ms"] = timed(fwd_bwd) * 1e3
    row["gemm_flops_fwd"] = 24.0 * b * s * h * h
    row["attn_flops_fwd"] = 4.0 * b * s * s * h / 2
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for fp8_layer.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("error: torch sees no CUDA device; this script measures a GPU", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "fp8_layer.json")
    dev = torch.device("cuda")
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                              "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": []}
    for h, heads, s, b in ((2048, 16, 2048, 8), (4096, 32, 2048, 4), (8192, 64, 2048, 2), (12288, 96, 2048, 1)):
        try:
            result["rows"].append(case(dev, h, heads, s, b))
        except Exception as exc:
            result["rows"].append({"h": h, "error": repr(exc)[:400]})
        torch.cuda.empty_cache()
        with open(path + ".tmp", "w") as fh:
            json.dump(result, fh, indent=1)
        os.replace(path + ".tmp", path)
    for r in result["rows"]:
        if "error" in r:
            print(r)
            continue
        print(f"h{r['h']} b{r['b']}: bf16 fwd {r['bf16_fwd_ms']:.2f} fwd+bwd {r['bf16_fwd_bwd_ms']:.2f} ms | fp8 fwd "
              f"{r['fp8_fwd_ms']:.2f} fwd+bwd {r['fp8_fwd_bwd_ms']:.2f} ms | speedup "
              f"{r['bf16_fwd_bwd_ms'] / r['fp8_fwd_bwd_ms']:.2f} | rel err {r['fp8_rel_err']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
