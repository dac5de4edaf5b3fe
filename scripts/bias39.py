"""Residual analysis of the validation (bias39): which per-row features carry the signed speed error.

Runs the validator's own predictions (scripts/validate_training.py, its rule set unchanged), keeps each row's
prediction (the term breakdown ``predict --json`` prints), its workload, strategy and the accelerator's curve, derives
features per row and prints:

1. every numeric feature's association with the speed error: Spearman rho and an OLS slope per standard deviation of
   the feature (error points per SD), over all rows and after removing each accelerator family's and each source's
   mean from both (within-family / within-source: a feature that only separates families or sources does not hold
   there), with n;
2. tertiles of the strongest features (mean, median speed error, n);
3. the categorical features (framework / layer implementation, precision, dominant term, accelerator);
4. a joint OLS of the error on the standardised features with source fixed effects;
5. the strongest features within each accelerator family, precision and model family (source means removed);
6. the dense rows: the kernels-per-ms and HBM-bound features in natural units (a per-kernel time; a fraction by which
   memory-bound time would be short), leaving one source out, and per source;
7. the MoE rows' joint fit;
8. the step's share not bound by peak FLOP/s in natural units (error = x (1 - F));
9. that share split jointly into its HBM, network-bandwidth, latency, host and jitter + straggler parts.

The speed error is clipped at +-50 % for the statistics (the nanotron 80B row at +192 % and the MLPerf GB200 8B row
at +106 % would otherwise set every slope); the mean unclipped is printed beside. No constant of the model is
fitted here: this is a diagnosis (validation/README.md, "Residual analysis (bias39)").

Usage: python scripts/bias39.py [--rows]   (--rows also prints every row's features)
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_training as vt  # noqa: E402

from scalemodel.engine.job import build_job, grid_from_strategy  # noqa: E402
from scalemodel.engine.sensitivity import hardware_parameters  # noqa: E402
from scalemodel.engine.step import evaluate  # noqa: E402

CLIP = 0.5
#: kernels a Megatron-Core Transformer Engine layer launches per micro-batch at TP 1, forward + backward (about 12 +
#: 22; docs/model.md "Per-kernel fixed cost", host_overhead.yaml); full recompute adds the forward again, selective
#: the core's few. Used only to form the kernels-per-second feature (a per-kernel cost would scale with it).
KERNELS_PER_LAYER = 34
KERNELS_RECOMPUTE = {"full": 12, "selective": 3}

_captured: dict[str, Any] = {}
_last: dict[str, Any] = {}


def _capture() -> None:
    """Wrap the validator's predict and _result so each row keeps its prediction and inputs."""
    predict, result = vt.predict, vt._result

    def predict_kept(cluster: Any, wl: Any, gpus: int, tr: Any, st: Any) -> Any:
        p = predict(cluster, wl, gpus, tr, st)
        _last.update(cluster=cluster, wl=wl, gpus=gpus, tr=tr, st=st, p=p)
        return p

    def result_kept(cid: str, metric: str, measured: float, pred: float, p: Any, *a: Any, **k: Any) -> Any:
        if _last.get("p") is p:
            _captured[cid] = dict(_last)
        return result(cid, metric, measured, pred, p, *a, **k)

    vt.predict, vt._result = predict_kept, result_kept


def _eff(d: float, d0: float) -> float:
    return d / (d + d0)


def elasticities(c: dict[str, Any]) -> dict[str, float]:
    """d ln step / d ln p of the row's predicted step for the peak FLOP/s, the memory bandwidth and every network
    tier's bandwidth together (the sensitivity command's perturbations, scalemodel.engine.sensitivity): the share of
    the step each resource bounds. A mechanism missing from one resource's terms would leave an error that grows
    with that share."""
    job = c["job"]
    grid = grid_from_strategy(c["st"], c["tr"], int(c["gpus"]), job)
    sync = c["st"].sync
    step = float(evaluate(job, grid, sync=sync).step_time.flat[0])
    up = math.exp(0.05)
    out = {"step_check": step / c["p"].step_time_s - 1.0}
    params = hardware_parameters(job)
    for key, names in (("peak", ("peak FLOP/s",)), ("hbm", ("memory bandwidth",)),
                       ("net", tuple(q.name for q in params if q.group == "network" and q.name.endswith("bandwidth"))),
                       ("lat", tuple(q.name for q in params if q.group == "network" and q.name.endswith("latency")))):
        j = job
        for q in params:
            if q.name in names:
                j = q.apply(j, up)[0]
        t = float(evaluate(j, grid, sync=sync).step_time.flat[0])
        # latencies: + d ln step / d ln latency (a longer latency slows the step); bandwidths and peaks: the minus
        out[key] = (1 if key == "lat" else -1) * (math.log(t) - math.log(step)) / math.log(up)
    return out


def features(r: Any, c: dict[str, Any]) -> dict[str, Any]:
    """The derived features of one row (numbers and labels)."""
    wl, st, tr, p, job = c["wl"], c["st"], c["tr"], c["p"], c["job"]
    s = r.settings
    tp, pp, cp, ep, dp = (int(s.get(k) or 1) for k in ("tp", "pp", "cp", "ep", "dp"))
    mb, gb = int(s.get("micro_batch") or 1), int(s.get("global_batch") or 1)
    gpus = int(c["gpus"])
    seq = wl.seq_len
    h, a = wl.hidden, wl.heads
    d = wl.head_dim or h // a
    g = wl.kv_heads or a
    f = wl.ffn_hidden or 4 * h
    T = mb * seq / cp  # rows of every layer GEMM (sequence parallelism gathers them before the GEMM)
    d0 = job.gemm_half_dim
    dense = [(T, (a + 2 * g) * d / tp, h), (T, h, a * d / tp),
             (T, (2 if wl.gated_mlp else 1) * f / tp, h), (T, h, f / tp)]
    gemm_flops = [2 * m * n * k for m, n, k in dense]
    moe = wl.moe
    moe_frac = 0.0
    if moe is not None:
        fe = moe.ffn_hidden or f
        etp = int(s.get("etp") or 1)
        rows = max(ep * etp * T * moe.top_k / (moe.experts * tp), 1.0)  # tokens per local expert (docs/model.md)
        ex = [(rows, (2 if wl.gated_mlp else 1) * fe / etp, h), (rows, h, fe / etp)]
        local = moe.experts / ep
        moe_layers = (wl.layers - moe.first_dense) / max(moe.every, 1)
        moe_frac = moe_layers / wl.layers
        ex_flops = [2 * m * n * k * local for m, n, k in ex]
        # the MLP of an MoE layer is its experts: replace the dense MLP GEMMs by the mix
        dense_mlp = gemm_flops[2:]
        gemm_flops = gemm_flops[:2] + [x * (1 - moe_frac) for x in dense_mlp] + [x * moe_frac for x in ex_flops]
        dense = dense[:2] + dense[2:] + ex
    shapes = dense
    eff = [_eff(m, d0) * _eff(n, d0) * _eff(k, d0) for m, n, k in shapes]
    wsum = sum(gemm_flops)
    curve_pos = sum(w * e for w, e in zip(gemm_flops, eff, strict=True)) / wsum if wsum else 1.0
    min_dim = min(min(sh) for sh in shapes)
    keys = seq / 2 if wl.causal else seq
    if wl.sliding_window:
        keys = min(keys, wl.sliding_window)
    attn = 4 * T * keys * a * d / tp  # the core's forward FLOPs per layer and micro-batch
    attn_share = attn / (attn + wsum / 1.0)
    logits = 2 * T * h * wl.vocab / tp
    layer_flops = attn + wsum
    vocab_share = logits / (logits + layer_flops * wl.layers / pp)
    v = int(getattr(st, "virtual_stages", 1) or 1)
    m_count = max(gb / (dp * mb), 1.0)
    layers_rank = wl.layers / pp
    rec = str(s.get("recompute") or "none")
    k_layer = KERNELS_PER_LAYER + KERNELS_RECOMPUTE.get(rec, 0)
    kernels = layers_rank * m_count * k_layer
    step = p.step_time_s
    b = p.breakdown_s
    tok_gpu = gb * seq / gpus
    el = elasticities(c)
    impl = getattr(st, "layer_impl", None) or getattr(tr, "layer_impl", None) or "?"
    if "TPU" in r.families["accelerator"]:
        impl = "xla"
    return {
        "speed_error": r.speed_error,
        "log_tokens_per_gpu_step": math.log10(tok_gpu),
        "log_step_s": math.log10(step),
        "log_gemm_m_tokens": math.log10(T),
        "gemm_curve_position": curve_pos,
        "log_min_gemm_dim": math.log10(min_dim),
        "attention_flop_share": attn_share,
        "vocab_flop_share": vocab_share,
        "layers_per_rank": layers_rank,
        "log_microbatches": math.log10(m_count),
        "kernels_per_ms": kernels / (step * 1e3),
        # over the measured step (predicted step x (1 + speed error)): the predicted step sits in the denominator of
        # kernels_per_ms, so a row predicted too fast has it too high by construction; this one has no such coupling
        "kernels_per_ms_measured": kernels / (step * (1.0 + r.speed_error) * 1e3),
        "log_seq_len": math.log10(seq),
        "compute_share": b["compute"] / step,
        "dominant_share": r.dominant_share,
        "bubble_share": b.get("bubble", 0.0) / step,
        "comm_share": sum(b.get(k, 0.0) for k in ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm",
                                                  "embed_comm")) / step,
        "optimizer_share": b.get("optimizer", 0.0) / step,
        "log_hidden": math.log10(h),
        "flops_bound_share": el["peak"],  # -d ln step / d ln peak FLOP/s
        "hbm_bound_share": el["hbm"],  # -d ln step / d ln memory bandwidth
        "network_bound_share": el["net"],  # -d ln step / d ln (every tier's bandwidth)
        "latency_bound_share": el["lat"],  # d ln step / d ln (every tier's latency)
        "host_share": b.get("host", 0.0) / step,
        "jitter_straggler_share": (b.get("jitter", 0.0) + b.get("straggler", 0.0)) / step,
        "step_check": el["step_check"],
        "log_gpus": math.log10(gpus),
        "moe_layer_share": moe_frac,
        "tp": tp, "pp": pp, "v": v,
        "framework": str(impl),
        "precision": r.families["precision"],
        "dominant": r.dominant,
        "accelerator": r.families["accelerator"],
        "source": r.families["source"],
        "model": r.families["model"],
        "parallelism": r.families["parallelism"],
    }


NUMERIC = ("log_tokens_per_gpu_step", "log_step_s", "log_gemm_m_tokens", "gemm_curve_position", "log_min_gemm_dim",
           "attention_flop_share", "vocab_flop_share", "layers_per_rank", "log_microbatches", "kernels_per_ms",
           "kernels_per_ms_measured",
           "log_seq_len", "compute_share", "dominant_share", "bubble_share", "comm_share", "optimizer_share",
           "log_hidden", "log_gpus", "moe_layer_share", "flops_bound_share", "hbm_bound_share",
           "network_bound_share", "latency_bound_share", "host_share", "jitter_straggler_share")
CATEGORICAL = ("framework", "precision", "dominant", "accelerator", "model", "parallelism")


def demean(values: np.ndarray, groups: list[str]) -> np.ndarray:
    out = values.astype(float).copy()
    for gname in set(groups):
        idx = [i for i, x in enumerate(groups) if x == gname]
        out[idx] -= out[idx].mean()
    return out


def slope_per_sd(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """OLS slope of y on x scaled to one SD of x, and its two-sided p."""
    if np.std(x) == 0:
        return 0.0, 1.0
    res = sps.linregress(x, y)
    return float(res.slope * np.std(x)), float(res.pvalue)


def association(rows: list[dict[str, Any]], y: np.ndarray) -> list[tuple]:
    acc = [r["accelerator"] for r in rows]
    src = [r["source"] for r in rows]
    out = []
    for name in NUMERIC:
        x = np.array([r[name] for r in rows], dtype=float)
        rho, prho = sps.spearmanr(x, y)
        b_all, p_all = slope_per_sd(x, y)
        b_acc, p_acc = slope_per_sd(demean(x, acc), demean(y, acc))
        b_src, p_src = slope_per_sd(demean(x, src), demean(y, src))
        out.append((name, len(x), float(rho), float(prho), b_all, p_all, b_acc, p_acc, b_src, p_src))
    return out


def tertiles(rows: list[dict[str, Any]], y: np.ndarray, name: str) -> list[tuple]:
    x = np.array([r[name] for r in rows], dtype=float)
    cuts = np.quantile(x, [1 / 3, 2 / 3])
    out = []
    for lo, hi, label in ((-np.inf, cuts[0], "low"), (cuts[0], cuts[1], "mid"), (cuts[1], np.inf, "high")):
        sel = (x > lo) & (x <= hi) if label != "low" else x <= hi
        ys = y[sel]
        out.append((label, float(x[sel].min()) if sel.any() else float("nan"),
                    float(x[sel].max()) if sel.any() else float("nan"), int(sel.sum()),
                    float(ys.mean()) if sel.any() else float("nan"),
                    float(np.median(ys)) if sel.any() else float("nan")))
    return out


def joint_ols(rows: list[dict[str, Any]], y: np.ndarray, names: tuple[str, ...]) -> list[tuple]:
    """OLS of y (demeaned by source) on standardised features (demeaned by source): coefficient per SD, t."""
    src = [r["source"] for r in rows]
    cols = []
    for name in names:
        x = np.array([r[name] for r in rows], dtype=float)
        x = demean(x, src)
        sd = x.std()
        cols.append(x / sd if sd > 0 else x)
    X = np.column_stack(cols)
    yy = demean(y, src)
    beta, *_ = np.linalg.lstsq(X, yy, rcond=None)
    resid = yy - X @ beta
    dof = len(yy) - X.shape[1] - len(set(src))
    s2 = float(resid @ resid) / max(dof, 1)
    cov = s2 * np.linalg.pinv(X.T @ X)
    se = np.sqrt(np.diag(cov))
    r2 = 1 - float(resid @ resid) / float(yy @ yy)
    return [(n, float(b), float(b / e) if e > 0 else float("nan")) for n, b, e in zip(names, beta, se, strict=True)] \
        + [("R2 within source", r2, float(dof))]


def collect() -> tuple[list[dict[str, Any]], int]:
    _capture()
    results, _listed, n_orig = vt.validate_all()
    rows = []
    for r in results[n_orig:]:
        c = _captured.get(r.id)
        if c is None:
            continue
        c["job"] = build_job(c["cluster"], c["wl"], c["tr"])
        row = features(r, c)
        row["id"] = r.id
        rows.append(row)
    return rows, len(results)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rows, n_all = collect()
    raw = np.array([r["speed_error"] for r in rows])
    y = np.clip(raw, -CLIP, CLIP)
    print(f"bias39 residual analysis: {len(rows)} rows of training_cases.yaml with their prediction kept "
          f"({n_all} comparisons in all; the 15 cases.yaml rows carry no strategy and are left out)")
    chk = max(abs(r["step_check"]) for r in rows)
    print(f"elasticities re-evaluate each row's strategy: largest step difference from the validator's {chk:.2e}")
    print(f"speed error: mean {raw.mean():+.2%} (clipped at +-{CLIP:.0%}: {y.mean():+.2%}), "
          f"median {np.median(raw):+.2%}")
    print("\n1. numeric features against the speed error (clipped). slope = error points per SD of the feature; "
          "within-acc / within-src: both demeaned by accelerator family / by source")
    print(f"  {'feature':<26} {'n':>4} {'rho':>6} {'p':>7} {'all/SD':>7} {'p':>7} {'acc/SD':>7} {'p':>7} "
          f"{'src/SD':>7} {'p':>7}")
    assoc = association(rows, y)
    for name, n, rho, prho, b_all, p_all, b_acc, p_acc, b_src, p_src in sorted(assoc, key=lambda t: -abs(t[8])):
        print(f"  {name:<26} {n:>4} {rho:>+6.2f} {prho:>7.1e} {b_all:>+7.2%} {p_all:>7.1e} {b_acc:>+7.2%} "
              f"{p_acc:>7.1e} {b_src:>+7.2%} {p_src:>7.1e}")
    top = [t[0] for t in sorted(assoc, key=lambda t: -abs(t[8]))[:6]]
    print("\n2. tertiles of the six features strongest within source (mean / median speed error, clipped)")
    for name in top:
        for label, lo, hi, n, mean, med in tertiles(rows, y, name):
            print(f"  {name:<26} {label:<5} [{lo:>9.4g}, {hi:>9.4g}] n {n:>3}  mean {mean:>+7.2%}  "
                  f"median {med:>+7.2%}")
    print("\n3. categorical features (n, mean, median speed error, clipped)")
    for key in CATEGORICAL:
        groups: dict[str, list[float]] = {}
        for r, e in zip(rows, y, strict=True):
            groups.setdefault(str(r[key]), []).append(float(e))
        for gname, es in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print(f"  {key:<12} {gname:<22} n {len(es):>3}  mean {statistics.fmean(es):>+7.2%}  "
                  f"median {statistics.median(es):>+7.2%}")
    print("\n4. joint OLS within source (coefficient = error points per SD; t)")
    joint = ("log_tokens_per_gpu_step", "gemm_curve_position", "attention_flop_share", "vocab_flop_share",
             "kernels_per_ms_measured", "hbm_bound_share", "network_bound_share", "moe_layer_share", "log_step_s")
    for name, b, t in joint_ols(rows, y, joint):
        print(f"  {name:<26} {b:>+8.3f} {t:>+7.2f}")
    print("\n5. within-family checks of the kernels-per-ms and curve-position features (slope per SD, n, p)")
    for key in ("accelerator", "precision", "model"):
        vals = sorted({r[key] for r in rows})
        for val in vals:
            sel = [i for i, r in enumerate(rows) if r[key] == val]
            if len(sel) < 12:
                continue
            sub = [rows[i] for i in sel]
            ys = y[sel]
            out = []
            for name in ("kernels_per_ms_measured", "gemm_curve_position", "flops_bound_share", "hbm_bound_share"):
                x = np.array([r[name] for r in sub], dtype=float)
                b, pv = slope_per_sd(demean(x, [r["source"] for r in sub]), demean(ys, [r["source"] for r in sub]))
                out.append(f"{name} {b:+.2%} (p {pv:.1e})")
            print(f"  {key}={val:<14} n {len(sel):>3}: " + "; ".join(out))
    print("\n6. dense rows: the kernels-per-ms and HBM-bound features against those they move with (within source)")
    dense = [r for r in rows if r["model"] == "dense"]
    yd = np.clip(np.array([r["speed_error"] for r in dense]), -CLIP, CLIP)
    for name, b, t in joint_ols(dense, yd, ("kernels_per_ms_measured", "hbm_bound_share", "network_bound_share",
                                            "log_hidden", "gemm_curve_position", "log_step_s")):
        print(f"  {name:<26} {b:>+8.3f} {t:>+7.2f}")
    src = [r["source"] for r in dense]
    # error = tau x kernels / step: d(error) / d(kernels per ms) = tau / 1 ms (printed in us); error = x x the step's
    # HBM-bound share for memory-bound time priced (1 + x) too short: the slope is x itself
    for name, scale, unit, what in (("kernels_per_ms_measured", 1e3, "us", "a missing per-kernel cost"),
                                    ("hbm_bound_share", 1.0, "", "memory-bound time priced short by that fraction")):
        x = demean(np.array([r[name] for r in dense]), src)
        res = sps.linregress(x, demean(yd, src))
        print(f"  {name}: slope {res.slope * scale:.3g} {unit} (+- {res.stderr * scale:.2g}), n {len(dense)}, within "
              f"source; read as {what}")
        loo = []
        for s_out in sorted(set(src)):
            keep = [i for i, s_ in enumerate(src) if s_ != s_out]
            xs = demean(np.array([dense[i][name] for i in keep]), [src[i] for i in keep])
            ys = demean(yd[keep], [src[i] for i in keep])
            loo.append((float(sps.linregress(xs, ys).slope * scale), s_out))
        lo, hi = min(loo), max(loo)
        print(f"    leave one source out: {lo[0]:.3g} (without {lo[1]}) .. {hi[0]:.3g} (without {hi[1]})")
        by_src: dict[str, list[int]] = {}
        for i, s_ in enumerate(src):
            by_src.setdefault(s_, []).append(i)
        print(f"    per source (n >= 6): slope {unit}, p, range of the feature, mean error")
        for s_, idx in sorted(by_src.items(), key=lambda kv: -len(kv[1])):
            xs = np.array([dense[i][name] for i in idx])
            if len(idx) < 6 or np.ptp(xs) == 0:
                continue
            rr = sps.linregress(xs, yd[idx])
            print(f"      {s_:<16} n {len(idx):>3}  {rr.slope * scale:>+9.3g} (p {rr.pvalue:.1e})  "
                  f"{xs.min():.3g}..{xs.max():.3g}  mean error {yd[idx].mean():+.2%}")
    gpu = [r for r in rows if "TPU" not in r["accelerator"]]
    kpm = np.array([r["kernels_per_ms_measured"] for r in gpu])
    print(f"  GPU rows: mean kernels per ms {kpm.mean():.2f} (n {len(gpu)}); a per-kernel cost tau adds about "
          f"tau x that to the step: {kpm.mean() * 1.8e-3:.2%} at 1.8 us (H200, graph replay), "
          f"{kpm.mean() * 7.0e-3:.2%} at 7.0 us (H100 with launch) of the mean (docs/model.md, Per-kernel fixed cost)")
    print("\n7. MoE rows: the routed-expert GEMM rows per local expert and the curve position (within source)")
    moe = [r for r in rows if r["model"] == "MoE"]
    ym = np.clip(np.array([r["speed_error"] for r in moe]), -CLIP, CLIP)
    for name, b, t in joint_ols(moe, ym, ("gemm_curve_position", "kernels_per_ms_measured", "hbm_bound_share",
                                          "network_bound_share", "log_step_s")):
        print(f"  {name:<26} {b:>+8.3f} {t:>+7.2f}")
    print("\n8. the step's share not bound by peak FLOP/s (1 - flops_bound_share) in natural units, within source: "
          "error = x (1 - F) reads as the non-FLOP time priced short by x")
    for label, sub in (("all", rows), ("dense", [r for r in rows if r["model"] == "dense"]),
                       ("MoE", [r for r in rows if r["model"] == "MoE"]),
                       ("GPU dense", [r for r in rows if r["model"] == "dense" and "TPU" not in r["accelerator"]])):
        ys = np.clip(np.array([r["speed_error"] for r in sub]), -CLIP, CLIP)
        grp = [r["source"] for r in sub]
        xs = demean(1.0 - np.array([r["flops_bound_share"] for r in sub]), grp)
        rr = sps.linregress(xs, demean(ys, grp))
        share = 1.0 - np.mean([r["flops_bound_share"] for r in sub])
        print(f"  {label:<10} n {len(sub):>3}  x {rr.slope:+.3f} (+- {rr.stderr:.3f}, p {rr.pvalue:.1e}); "
              f"mean non-FLOP share {share:.3f}: x times it {rr.slope * share:+.2%} of the mean error {ys.mean():+.2%}")
    print("\n9. the non-FLOP share split (natural units, jointly, within source): error = sum of x_k x share_k")
    parts = ("hbm_bound_share", "network_bound_share", "latency_bound_share", "host_share", "jitter_straggler_share")
    for label, sub in (("all", rows), ("dense", [r for r in rows if r["model"] == "dense"]),
                       ("MoE", [r for r in rows if r["model"] == "MoE"])):
        ys = np.clip(np.array([r["speed_error"] for r in sub]), -CLIP, CLIP)
        grp = [r["source"] for r in sub]
        X = np.column_stack([demean(np.array([r[k] for r in sub]), grp) for k in parts])
        yy = demean(ys, grp)
        beta, *_ = np.linalg.lstsq(X, yy, rcond=None)
        resid = yy - X @ beta
        dof = max(len(yy) - X.shape[1] - len(set(grp)), 1)
        se = np.sqrt(np.diag(float(resid @ resid) / dof * np.linalg.pinv(X.T @ X)))
        means = [float(np.mean([r[k] for r in sub])) for k in parts]
        print(f"  {label:<6} n {len(sub):>3}: " + "; ".join(
            f"{k.replace('_share', '')} x {b:+.2f} +- {e:.2f} (mean share {m:.3f})"
            for k, b, e, m in zip(parts, beta, se, means, strict=True)))
    if "--rows" in args:
        print("\nrows:")
        for r in rows:
            print("  " + r["id"] + " " + " ".join(f"{k}={r[k]:.4g}" if isinstance(r[k], float) else f"{k}={r[k]}"
                                                  for k in ("speed_error", *NUMERIC, "framework")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
