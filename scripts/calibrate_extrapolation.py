#!/usr/bin/env python3
"""Extrapolation study for `calibrate runs` (docs/model.md#calibrate-runs): fit the factors on the smaller
half of a published scaling series, predict the larger half, and compare with the uncalibrated model.

Series: Narayanan et al. 2021 Table 1 (``../shared/validation/cases.yaml``, ids ``nar21_t1_*``: GPT 1.7B on
32 A100 to 1T on 3072), each run built exactly as ``scripts/validate_training.py`` builds it (full
recompute, fp16, the paper's micro-batch, its interleaving rule, no fused attention). The measured
figure is hardware TFLOP/s per GPU; the measured step time is the run's hardware FLOPs per step /
(TFLOP/s x GPUs). The fit sees only the runs on the fewest GPUs (``--train`` of them, default half).

    python scripts/calibrate_extrapolation.py [--train N] [--factors compute,overhead_s] [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_training as vt  # noqa: E402  (the validator's case rules, reused as they are)

from scalemodel.engine.calibrate_runs import fit_runs, predict_with_fit  # noqa: E402
from scalemodel.engine.predict import predict  # noqa: E402
from scalemodel.specs import StrategySpec, TrainingSpec  # noqa: E402
from scalemodel.specs.loader import builtin_path  # noqa: E402
from scalemodel.specs.runs import MeasuredRun  # noqa: E402


def nar21_runs() -> list[MeasuredRun]:
    cases = [c for c in yaml.safe_load(Path(vt.CASES).read_text()) if c["id"].startswith("nar21_t1_")]
    cluster_name = "dgx-a100"
    cluster = vt.load_cluster(cluster_name)
    path = builtin_path("cluster", cluster_name)
    assert path is not None
    out = []
    for case in cases:
        par = case["parallelism"]
        wl = vt.workload(case)
        mb, dp, gb = par.get("microbatch", 1), par["dp"], par["global_batch_seqs"]
        if "interleaved_stages_per_device" in par:
            schedule = f"interleaved:{par['interleaved_stages_per_device']}"
        elif par.get("interleaved"):
            schedule = vt.interleave(wl.layers, par["pp"], gb // (dp * mb))
        else:
            schedule = "1f1b"
        tr = TrainingSpec(global_batch=gb, micro_batch=mb, precision="fp16")
        st = StrategySpec(tp=par["tp"], pp=par["pp"], dp=dp, recompute="full", schedule=schedule,
                          flash_attention=False)
        p = predict(cluster, wl, par["gpus"], tr, st)
        measured = p.flops["hardware_flops_per_step"] / (case["measured"]["tflops_per_gpu"] * 1e12 * par["gpus"])
        out.append(MeasuredRun(case["id"], cluster_name, path, cluster, wl, par["gpus"], tr, st, measured, None))
    return sorted(out, key=lambda r: r.gpus)


def main(argv: list[str]) -> int:
    runs = nar21_runs()
    n_train = int(argv[argv.index("--train") + 1]) if "--train" in argv else len(runs) // 2
    train, test = runs[:n_train], runs[n_train:]
    only = argv[argv.index("--factors") + 1].split(",") if "--factors" in argv else None
    fit = fit_runs(train, source="nar21 smaller half", only=only)
    plain = [predict(r.cluster, r.workload, r.gpus, r.training, r.strategy).step_time_s for r in test]
    fitted = predict_with_fit(fit, test)
    rows = [{"case": r.label, "gpus": r.gpus, "measured_s": r.step_time_s, "uncalibrated_error": a / r.step_time_s - 1,
             "calibrated_error": b / r.step_time_s - 1} for r, a, b in zip(test, plain, fitted, strict=True)]

    def summary(key: str) -> dict[str, float]:
        errs = [abs(x[key]) for x in rows]
        return {"median": statistics.median(errs), "worst": max(errs)}

    doc = {"train": [r.label for r in train], "factors": [
        {"name": f.name, "value": f.value, "ci": f.ci, "determined": f.determined} for f in fit.factors],
        "warnings": fit.warnings, "test": rows,
        "uncalibrated": summary("uncalibrated_error"), "calibrated": summary("calibrated_error")}
    if "--json" in argv:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"fit on {len(train)} runs ({train[0].gpus}-{train[-1].gpus} GPUs), predict {len(test)} "
          f"({test[0].gpus}-{test[-1].gpus} GPUs)")
    for f in fit.factors:
        ci = "not fitted" if not f.determined else ("no interval" if f.ci is None else
                                                     f"[{f.ci[0]:.3g}, {f.ci[1]:.3g}]")
        print(f"  {f.name:20s} {f.value:8.4g}  {ci}")
    for w in fit.warnings:
        print(f"  warning: {w}")
    print(f"{'case':22s} {'GPUs':>5s} {'uncalibrated':>13s} {'calibrated':>11s}")
    for x in rows:
        print(f"{x['case']:22s} {x['gpus']:5d} {x['uncalibrated_error']:+13.1%} {x['calibrated_error']:+11.1%}")
    for key in ("uncalibrated", "calibrated"):
        s = doc[key]
        print(f"{key}: median |error| {s['median']:.1%}, worst {s['worst']:.1%}")  # type: ignore[index]
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
