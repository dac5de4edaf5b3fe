"""MoE cross-row audit (issue 13, moe30): every MoE comparison's signed speed error against its features.

Nothing here is fitted or priced: the script reads the validator's own rows (scripts/validate_training.py
``validate_all``: the prediction, its StrategySpec and TrainingSpec) and the case file's model block, and tabulates

- ``source``: the row's table (mb25xx / mb26xx Megatron-Bridge perf tables, mcrec26, dgxc2505, nemo*, others);
- ``dispatcher``: flex ``hybridep`` / ``deepep``, ``allgather``, else ``alltoall`` (the strategy the validator priced);
- ``drop_pad``: drop-and-pad at a capacity factor (training ``moe_rank_imbalance`` set by the validator) or dropless;
- ``host_sync``: the validator gave the row the per-MoE-layer host floor (strategy ``moe_layer_host_s`` > 0);
- ``ep``, ``etp`` and ``domains``: how many tier-0 (NVLink) domains the EP group's ``ep x etp`` consecutive ranks
  cover, ``ceil(ep etp / G)`` with ``G`` the cluster's innermost tier span (Megatron-Core orders the expert ranks
  etp-ep-dp-pp, so an EP group is ``ep etp`` consecutive ranks; ``domains`` > 1: the dispatch crosses the scale-out);
- ``local_experts``: routed experts a rank holds, ``E / ep`` (grouped 1-4, 5-8, 9+);
- ``tok_per_expert``: tokens each routed expert receives per micro-batch,
  ``micro_batch x seq / (tp cp) x ep etp x top_k / experts`` (each rank holds ``mb s / (tp cp)`` tokens after
  sequence parallelism; the ``ep etp`` ranks of the expert group route ``top_k`` copies of each over ``experts``);
- ``gap_ms``: the measured step less the predicted one, over the MoE layer passes one rank runs a step,
  ``(t_meas - t_pred) / (m x L_moe / pp)`` (``m`` micro-batches, ``L_moe`` MoE layers; ``t_meas = t_pred (1 +
  speed_error)``): what an unpriced per-MoE-layer cost would have to be to close the row (a diagnostic, not a cost:
  the whole gap is put on the MoE layers), beside ``host_ms``, the per-layer host floor the row was priced with;
- ``syncs`` and ``refill_ms`` (moe31): the host synchronisations a MoE layer pass makes (the dispatcher's, once a
  forward and once more where the MoE block is recomputed; the GPT-OSS activation's ``torch.tensor`` copy where the
  expert path runs it eagerly, once more where ``moe_act`` is recomputed; 0 without the host floor) and the most
  their queue refill can expose at the published per-call costs
  (:func:`scalemodel.engine.host_floor.refill_bound_us`, docs/model.md#host-refill), against ``gap_ms``;
- precision family, the row's ``dominant`` non-compute term and its share, experts / top-k, shared experts, MTP
  layers, pp / vp, recompute;
- (moe40) the settings the validator priced that the MoE rounds had not tabulated: the FP8 recipe, the 1F1B EP
  all-to-all overlap (``moe_a2a_overlap``), the shared experts' overlap, permute fusion, the experts' FP8 padding
  copies, the router dtype, the routing law, which part of the MoE block the backward recomputes
  (``moe_recompute``: full / block / act / none), the grouped-GEMM path (Transformer Engine's per-expert cuBLAS
  calls under Megatron-Core, else the layer implementation), and the predicted step's shares by part (``shares``).
  ``--within`` fits the signed speed error on each 0/1 or numeric feature with one intercept per source, alone and
  beside the host floor and log2 local experts (:func:`within_source`), the three DGX Cloud GB200 DeepSeek-V3 rows
  set aside.

``speed_error`` follows the validator: positive = the model predicts a faster run than measured (for an ``iter s``
row the time error is ``measured / predicted - 1`` of the opposite sign). The headline is the median of the signed
speed error and of its magnitude by each feature's value.
Run: ``python scripts/moe_audit.py [--rows] [--json] [--within]``.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_training as vt  # noqa: E402
from repo_yaml import read_yaml  # noqa: E402

from scalemodel.engine.host_floor import refill_bound_us  # noqa: E402
from scalemodel.engine.job import transformer_shape  # noqa: E402
from scalemodel.engine.predict import predict  # noqa: E402

#: the features the headline groups by (categorical, or binned below)
FEATURES = ("source_kind", "dispatcher", "drop_pad", "host_sync", "domains_gt1", "ep_bin", "local_bin", "tok_bin",
            "precision", "fp8_recipe", "a2a_overlap", "shared_overlap", "permute_fusion", "fp8_padding",
            "router_dtype", "routing", "moe_recompute", "grouped_gemm",
            "accelerator", "dominant", "share_bin", "topk_bin", "shared", "mtp", "vp", "recompute")


def source_kind(src: str) -> str:
    """The recipe family of a source key (mb25xx / mb26xx / mcrec26 / dgxc2505 / nemo* / other)."""
    if src.startswith("mb25"):
        return "mb25xx"
    if src.startswith("mb26"):
        return "mb26xx"
    if src.startswith("nemo"):
        return "nemo*"
    if src in ("mcrec26", "dgxc2505"):
        return src
    return "other"


def tokens_per_expert(mb: int, seq: int, tp: int, cp: int, ep: int, etp: int, top_k: int, experts: int) -> float:
    """Tokens one routed expert receives per micro-batch: ``mb s / (tp cp) x ep etp x k / E`` (module docstring)."""
    return mb * seq / (tp * cp) * ep * etp * top_k / experts


def ep_domains(ep: int, etp: int, domain: int) -> int:
    """Tier-0 domains an EP group of ``ep x etp`` consecutive ranks covers (at least 1)."""
    return max(1, math.ceil(ep * etp / domain))


def local_bin(local_experts: int) -> str:
    """Routed experts a rank holds, ``E / ep``, in the three groups the headline reads: 1-4, 5-8, 9+."""
    return "1-4" if local_experts <= 4 else "5-8" if local_experts <= 8 else "9+"


def host_syncs(host_floor: bool, recompute: str, modules: str, glu_clamp: bool) -> tuple[int, int]:
    """(synchronisations, expert-path forwards) of one MoE layer pass (module docstring, ``syncs``): the dropless
    dispatcher's wait once a forward (token_dispatcher.py ``_maybe_dtoh_and_synchronize``; HybridEP's host metadata,
    DeepEP's host counts: docs/model.md#host-issue-order) and again in a recomputed MoE block (selective ``moe``, or
    full recompute), plus the eager GPT-OSS activation's copy (``glu_clamp``) once a forward and again under
    ``moe_act``; (0, 0) for a row without the host floor (a fixed capacity or a graphed dispatch: no wait)."""
    if not host_floor:
        return 0, 0
    mods = set(modules.split(",")) if modules else set()
    block = int(recompute == "full" or "moe" in mods)
    act = int(glu_clamp) * (1 + int("moe_act" in mods))
    return 1 + block + act, 1 + block


def moe_recompute(recompute: str, modules: str) -> str:
    """Which parts of the MoE block the backward repeats (moe40): ``full`` (the whole layer), ``block`` (selective
    ``moe``: router, dispatch, experts, combine), ``act`` (``moe_act``: the experts' activation only), else none."""
    if recompute == "full":
        return "full"
    mods = set(modules.split(",")) if modules else set()
    return "block" if "moe" in mods else "act" if "moe_act" in mods else "none"


def _bin(x: float, edges: tuple[float, ...]) -> str:
    for lo, hi in zip(edges, edges[1:], strict=False):
        if lo <= x < hi:
            return f"[{lo:g},{hi:g})"
    return f">={edges[-1]:g}"


def audit_rows() -> list[dict[str, Any]]:
    """One dict of features per MoE comparison the validator predicts."""
    results, _, _ = vt.validate_all()
    cases = {c["id"]: c for c in read_yaml(vt.NEW_CASES)}
    rows = []
    for r in results:
        if r.families.get("model") != "MoE" or r.strategy is None:
            continue
        case, st, tr = cases[r.id], r.strategy, r.training
        moe = case["model"]["moe"]
        experts, top_k = int(moe["experts"]), int(moe["top_k"])
        cname = r.settings["cluster"]
        cluster = vt.load_cluster(cname, vt.cluster_overrides(case, cname))
        domain = int(cluster.tiers[0].span) if cluster.tiers[0].span else cluster.gpus_per_node
        etp = int(st.etp or 1)
        ep = int(st.ep)
        tok = tokens_per_expert(int(tr.micro_batch), int(tr.seq_len), int(st.tp), int(st.cp), ep, etp, top_k,
                                experts)
        dispatcher = (str(st.moe_flex_backend) if st.moe_flex_dispatcher
                      else "allgather" if st.moe_allgather_dispatcher else "alltoall")
        vp = int(str(st.schedule).split(":")[1]) if str(st.schedule).startswith("interleaved:") else 1
        doms = ep_domains(ep, etp, domain)
        wl = vt.case_workload(case)[0]
        p = predict(cluster, wl, int(case["parallelism"]["gpus"]), tr, st)  # the validator's own prediction again
        micro = tr.global_batch // (int(st.dp) * tr.micro_batch)
        passes = micro * float(transformer_shape(wl).moe_layers) / int(st.pp)
        gap = p.step_time_s * r.speed_error / passes
        syncs, forwards = host_syncs(st.moe_layer_host_s > 0, str(st.recompute), str(st.recompute_modules or ""),
                                     bool(st.eager_glu_clamp))
        rows.append({
            "id": r.id, "speed_error": r.speed_error, "metric": r.metric,
            "source": r.families["source"], "source_kind": source_kind(r.families["source"]),
            "accelerator": r.families["accelerator"], "precision": r.families["precision"],
            "dispatcher": dispatcher,
            "drop_pad": "drop-and-pad" if tr.moe_rank_imbalance is not None else "dropless",
            "host_sync": "host floor" if st.moe_layer_host_s > 0 else "none",
            "ep": ep, "etp": etp, "domain": domain, "domains": doms, "domains_gt1": "multi" if doms > 1 else "one",
            "ep_bin": _bin(ep, (1, 8, 16, 32, 64)),
            "local_experts": experts // ep, "local_bin": local_bin(experts // ep),
            "step_s": p.step_time_s, "gap_ms": gap * 1e3, "host_ms": st.moe_layer_host_s * 1e3,
            "syncs": syncs,
            "refill_ms": float(refill_bound_us(experts // ep, syncs, forwards)) * 1e-3 if syncs else 0.0,
            "tok_per_expert": tok, "tok_bin": _bin(tok, (0, 512, 1024, 2048, 4096, 8192)),
            "dominant": r.dominant, "share": r.dominant_share, "share_bin": _bin(r.dominant_share, (0, 0.1, 0.2, 0.3)),
            "experts": experts, "top_k": top_k, "topk_bin": f"E{'>=128' if experts >= 128 else '<128'} k{top_k}",
            "shared": "shared" if int(moe.get("shared_experts", 0) or 0) else "no shared",
            "mtp": "mtp" if vt.case_mtp_layers(case) else "no mtp",
            "pp": int(st.pp), "vp": "vp>1" if vp > 1 else "vp1",
            "recompute": str(st.recompute) + (f":{st.recompute_modules}" if st.recompute_modules else ""),
            # moe40: the remaining settings the brief names, as the validator priced them
            "fp8_recipe": (str(tr.fp8_recipe or "delayed") if str(tr.precision).startswith("fp8")
                           else str(tr.precision)),
            "a2a_overlap": "a2a overlap" if st.moe_a2a_overlap else "no a2a overlap",
            "shared_overlap": ("no shared" if not int(moe.get("shared_experts", 0) or 0)
                               else "overlap" if st.moe_shared_expert_overlap else "serial"),
            "permute_fusion": "fused" if st.moe_permute_fusion else "unfused",
            "fp8_padding": "pads" if st.moe_fp8_padding else "no pad copies",
            "router_dtype": str(tr.moe_router_dtype or "bf16/params"),
            "routing": str(tr.moe_routing),
            "moe_recompute": moe_recompute(str(st.recompute), str(st.recompute_modules or "")),
            "dispatch_sms": int(st.ep_dispatch_sms or 0),
            "shares": {k: v / p.step_time_s for k, v in p.breakdown_s.items() if v},
            "tokens_per_rank": int(tr.micro_batch) * int(tr.seq_len) / (int(st.tp) * int(st.cp)),
            "grouped_gemm": "TE per-expert cuBLAS" if str(st.layer_impl).startswith("megatron") else str(st.layer_impl),
        })
    return rows


def headline(rows: list[dict[str, Any]]) -> list[tuple[str, str, int, float, float, int, int]]:
    """(feature, value, n, median signed speed error, median |error|, rows > +15 %, rows < -15 %) per group."""
    out = []
    for f in FEATURES:
        groups: dict[str, list[float]] = {}
        for row in rows:
            key = row[f] if f != "recompute" else str(row[f]).split(":")[0]
            groups.setdefault(str(key), []).append(row["speed_error"])
        for key, errs in sorted(groups.items()):
            out.append((f, key, len(errs), statistics.median(errs), statistics.median(abs(e) for e in errs),
                        sum(e > 0.15 for e in errs), sum(e < -0.15 for e in errs)))
    return out


def cross(rows: list[dict[str, Any]], a: str, b: str) -> list[tuple[str, str, int, float]]:
    """(value of ``a``, value of ``b``, n, median signed speed error) for each pair present."""
    groups: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        groups.setdefault((str(row[a]), str(row[b])), []).append(row["speed_error"])
    return [(ka, kb, len(e), statistics.median(e)) for (ka, kb), e in sorted(groups.items())]


#: the DGX Cloud GB200 DeepSeek-V3 BF16 rows (+86-89 %): set aside in the within-source fit, where their source's
#: intercept could not absorb them (moe30: the unfused MLA core on sm100 and NeMo 25.04 on Grace, not an MoE term)
DGXC_GB200_DSV3 = frozenset(f"dgxc2505_gb200_dsv3_bf16_{n}" for n in (128, 256, 512))

#: 0/1 or numeric regressors of the within-source fit (moe40): the value a row's feature is read as
REGRESSORS: dict[str, Any] = {
    "host floor": lambda r: float(r["host_sync"] == "host floor"),
    "log2 local experts": lambda r: math.log2(r["local_experts"]),
    "log2 tokens per expert": lambda r: math.log2(r["tok_per_expert"]),
    "a2a overlap": lambda r: float(r["a2a_overlap"] == "a2a overlap"),
    "fp32 router": lambda r: float(r["router_dtype"] == "fp32"),
    "unfused permute": lambda r: float(r["permute_fusion"] == "unfused"),
    "shared experts": lambda r: float(r["shared"] == "shared"),
    "shared overlap": lambda r: float(r["shared_overlap"] == "overlap"),
    "MoE recompute": lambda r: float(r["moe_recompute"] != "none"),
    "fp8 / fp4": lambda r: float(r["precision"] != "16-bit"),
    "flex dispatcher": lambda r: float(r["dispatcher"] in ("hybridep", "deepep")),
    "EP over > 1 domain": lambda r: float(r["domains"] > 1),
    "exposed ep_comm share": lambda r: float(r["shares"].get("ep_comm", 0.0)),
    "drop-and-pad": lambda r: float(r["drop_pad"] == "drop-and-pad"),
}


def within_source(rows: list[dict[str, Any]], names: tuple[str, ...]) -> tuple[list[float], list[float], int]:
    """Least squares of the signed speed error on the named regressors with one intercept per source (the
    source's own level removed from both sides, so a feature that only tells sources apart carries nothing):
    (coefficients, their t statistics, rows). Plain OLS, homoscedastic standard errors; a description of the
    residual, not a fit used anywhere."""
    sources = sorted({r["source"] for r in rows})
    x = np.array([[REGRESSORS[n](r) for n in names] + [float(r["source"] == s) for s in sources] for r in rows])
    y = np.array([r["speed_error"] for r in rows])
    beta = np.linalg.lstsq(x, y, rcond=None)[0]
    resid = y - x @ beta
    dof = max(len(y) - np.linalg.matrix_rank(x), 1)
    cov = float(resid @ resid) / dof * np.linalg.pinv(x.T @ x)
    k = len(names)
    return ([float(b) for b in beta[:k]],
            [float(beta[i] / math.sqrt(cov[i, i])) if cov[i, i] > 0 else math.nan for i in range(k)], len(y))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rows = audit_rows()
    if "--json" in args:
        print(json.dumps({"rows": rows, "headline": headline(rows)}, indent=1))
        return 0
    if "--rows" in args:
        cols = ("id", "speed_error", "dispatcher", "drop_pad", "host_sync", "ep", "etp", "domains", "local_experts",
                "tok_per_expert", "gap_ms", "host_ms", "syncs", "refill_ms",
                "precision", "fp8_recipe", "dominant", "share", "experts", "top_k", "shared", "shared_overlap", "mtp",
                "pp", "vp", "recompute", "moe_recompute", "a2a_overlap", "permute_fusion", "router_dtype")
        print("| " + " | ".join(cols) + " |")
        for row in sorted(rows, key=lambda x: -x["speed_error"]):
            cells = [f"{row[c]:+.1%}" if c == "speed_error" else f"{row[c]:.2f}" if c == "share"
                     else f"{row[c]:.0f}" if c == "tok_per_expert"
                     else f"{row[c]:.2f}" if c in ("gap_ms", "host_ms", "refill_ms") else str(row[c]) for c in cols]
            print("| " + " | ".join(cells) + " |")
        print()
    errs = [r["speed_error"] for r in rows]
    print(f"{len(rows)} MoE rows: median signed speed error {statistics.median(errs):+.1%}, "
          f"median |error| {statistics.median(abs(e) for e in errs):.1%}, "
          f"{sum(e > 0.15 for e in errs)} beyond +15 %, {sum(e < -0.15 for e in errs)} beyond -15 %")
    print("| feature | value | n | median speed error | median abs | > +15 % | < -15 % |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for f, key, n, med, mabs, hi, lo in headline(rows):
        print(f"| {f} | {key} | {n} | {med:+.1%} | {mabs:.1%} | {hi} | {lo} |")
    if "--within" in args:
        kept = [r for r in rows if r["id"] not in DGXC_GB200_DSV3]
        base = ("host floor", "log2 local experts")
        print(f"\nWithin source ({len(kept)} rows, the three DGX Cloud GB200 DeepSeek-V3 rows left out): points of "
              "speed error per unit, t; alone, and beside host floor + log2 local experts")
        print("| regressor | alone | t | with host floor + log2 local experts | t |\n|---|---:|---:|---:|---:|")
        for name in REGRESSORS:
            b1, t1, _ = within_source(kept, (name,))
            if name in base:
                b2, t2, _ = within_source(kept, base)
                i = base.index(name)
                print(f"| {name} | {b1[0]:+.1%} | {t1[0]:+.1f} | {b2[i]:+.1%} | {t2[i]:+.1f} |")
            else:
                b2, t2, _ = within_source(kept, (*base, name))
                print(f"| {name} | {b1[0]:+.1%} | {t1[0]:+.1f} | {b2[2]:+.1%} | {t2[2]:+.1f} |")
    for a, b in (("host_sync", "local_bin"), ("host_sync", "dispatcher"), ("host_sync", "vp")):
        print(f"\n| {a} | {b} | n | median speed error |\n|---|---|---:|---:|")
        for ka, kb, n, med in cross(rows, a, b):
            print(f"| {ka} | {kb} | {n} | {med:+.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
