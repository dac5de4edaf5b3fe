"""The routed experts' weight-gradient GEMM writes into Megatron-Core's fp32 ``main_grad`` (docs/model.md#moe-checks,
round moecomp25): checked against the HBM roofline at the validation rows' smallest per-expert row counts.

Transformer Engine's ``GroupedLinear`` backward with ``fuse_wgrad_accumulation`` (Megatron-Core passes
``gradient_accumulation_fusion``) hands the grouped wgrad GEMM the parameters' ``main_grad`` buffers as its outputs
with ``accumulate`` set after the first micro-batch (NVIDIA/TransformerEngine release_v2.9 @70f536662a
transformer_engine/pytorch/module/grouped_linear.py lines 336-341, 384-385, 412-426; the same at release_v2.14
@366798ef8a lines 387-391, 432-433, 468-481): cuBLAS reads and writes an ``N x K`` fp32 output (``2 g`` bytes an
element, g = 4) where the forward GEMM writes an ``M x N`` activation. The step model prices the backward's GEMMs as
twice the forward's (``compute.layer_compute_time``), i.e. the wgrad at the forward's roofline time. That stands only
while the GEMM's compute time exceeds the wgrad's own bytes at the HBM roofline, ``(M N + M K) e + 2 g N K``:
an expert of few rows reduces over few rows per weight element it accumulates. The two validation rows with the
fewest rows an expert are within it, each computed here by hand from the catalog's curve (gemm_time's
``gemm_max x m/(m+d0) x n/(n+d0) x k/(k+d0)``) and datasheet bandwidths:

* mb2511_b200_dsv3_mtp_fp8mx: 1,101 rows an expert (EP 32, MBS 1, tile-padded), DeepSeek-V3's FC2 (7168 x 2048),
  B200 FP8 curve 0.580 x the MXFP8 rate 0.951, d0 366, 4500 TFLOP/s; HBM 7.7 TB/s x 0.85: 21.50 us of compute
  against 19.49 us of wgrad bytes (0.91);
* mb2604_h100_gpt_oss_120b_bf16: 1,106 rows (EP 8, MBS 1), GPT-OSS's FC2 (2880 x 2880), H100 BF16 0.680, d0 87,
  989.4 TFLOP/s; HBM 3.35 TB/s x 0.88: 31.22 us against 26.83 us (0.86).

So no validation row's expert wgrad is bound by the main_grad traffic under the roofline, and the model is unchanged;
a faster curve or fewer rows an expert (M below about 4 x peak x eff / (HBM x memory efficiency), about 1,000 on both
cards) would make it bind, and this test then says the wgrad needs its own bytes."""

from __future__ import annotations

import pytest

from scalemodel.cost import compute
from scalemodel.specs import load_accelerator


def _wgrad_bytes_s(m: float, n: float, k: float, elem_bytes: float, grad_bytes: float, hbm: float,
                   memory_efficiency: float) -> float:
    """HBM seconds of one expert's wgrad GEMM accumulating into main_grad: read the M x N output gradient and the
    M x K input (e bytes each) and read + write the N x K main_grad (g bytes each)."""
    return ((m * n + m * k) * elem_bytes + 2.0 * grad_bytes * n * k) / (hbm * memory_efficiency)


@pytest.mark.parametrize(("acc", "prec", "rate", "m", "n", "k", "eb", "want_compute_us", "want_bytes_us"), [
    ("b200", "fp8", 0.951, 1101.0, 7168.0, 2048.0, 1.0, 21.50, 19.49),  # B200 DeepSeek-V3 MXFP8, FC2
    ("h100-sxm", "bf16", 1.0, 1106.0, 2880.0, 2880.0, 2.0, 31.22, 26.83),  # H100 GPT-OSS 120B BF16, FC2
])
def test_smallest_expert_wgrad_stays_compute_bound_with_fp32_main_grad(
        acc: str, prec: str, rate: float, m: float, n: float, k: float, eb: float,
        want_compute_us: float, want_bytes_us: float) -> None:
    a = load_accelerator(acc, overrides=[])
    gmax, d0 = a.compute_efficiency.gemm(prec)
    peak, hbm, me = a.peak(prec), a.memory_bandwidth, a.compute_efficiency.memory
    # the catalog values the hand figures in the docstring use
    assert (gmax, d0, peak, hbm, me) == {"b200": (0.580, 366.0, 4500e12, 7.7e12, 0.85),
                                         "h100-sxm": (0.680, 87.0, 989.4e12, 3.35e12, 0.88)}[acc]
    eff = gmax * rate * m / (m + d0) * n / (n + d0) * k / (k + d0)
    by_hand = 2.0 * m * n * k / (peak * eff)
    priced = float(compute.gemm_time(m, n, k, peak_flops=peak, memory_bandwidth=hbm, gemm_max=gmax * rate,
                                     gemm_half_dim=d0, memory_efficiency=me, elem_bytes=eb))
    assert priced == pytest.approx(by_hand, rel=1e-9)  # compute-bound forward: the price the wgrad takes
    assert by_hand * 1e6 == pytest.approx(want_compute_us, abs=0.01)
    wgrad = _wgrad_bytes_s(m, n, k, eb, 4.0, hbm, me)
    assert wgrad * 1e6 == pytest.approx(want_bytes_us, abs=0.01)
    assert wgrad < priced  # the fp32 main_grad read-modify-write does not bind at the roofline


def test_wgrad_bytes_bind_below_the_crossover_rows() -> None:
    """The same FC2 on B200 at 512 rows an expert: the main_grad bytes (2 x 4 x 7168 x 2048 = 117.4 MB, 17.9 us, plus
    the inputs' 4.7 MB: 18.66 us at 7.7 TB/s x 0.85) exceed the compute (2 x 512 x 7168 x 2048 / (4500e12 x 0.5516 x
    512/878 x 7168/7534 x 2048/2414) = 12.87 us): the check above can fail, the crossover is near 1,000 rows. The
    compute side is the catalog's (gemm_time at the B200 FP8 curve), so a catalog change that moves the crossover
    past these rows fails here (review25b: the test used to recompute its own literals only)."""
    m, n, k = 512.0, 7168.0, 2048.0
    a = load_accelerator("b200", overrides=[])
    gmax, d0 = a.compute_efficiency.gemm("fp8")
    peak, hbm, me = a.peak("fp8"), a.memory_bandwidth, a.compute_efficiency.memory
    compute_s = float(compute.gemm_time(m, n, k, peak_flops=peak, memory_bandwidth=hbm, gemm_max=gmax * 0.951,
                                        gemm_half_dim=d0, memory_efficiency=me, elem_bytes=1.0))
    assert compute_s * 1e6 == pytest.approx(12.87, abs=0.01)
    wgrad = _wgrad_bytes_s(m, n, k, 1.0, 4.0, hbm, me)
    assert wgrad * 1e6 == pytest.approx(18.66, abs=0.01)
    assert wgrad > compute_s
