#!/usr/bin/env python3
"""Extrapolation study for `calibrate runs` (docs/model.md#calibrate-runs): for every published scaling
series in the validation data, fit the factors on the smaller half (fewest GPUs), predict the larger half,
and compare with the uncalibrated model on the same points.

Cases and their configurations are exactly those of ``scripts/validate_training.py`` (its rules, reused as
they are: ``../shared/validation/cases.yaml`` for Narayanan 2021 Table 1, ``validation/training_cases.yaml``
for the rest); a case the validator lists as not expressible is not used. A **series** is either

* *same model*: one source's runs of one model on one hardware (cluster, NIC overrides and precision equal)
  by one submitter (MLPerf prints several submitters' runs under one source: :func:`submitter`) at two or more
  GPU counts (NeMo GPT-3 175B 128/512, MPT-70B 256/512, MT-NLG 2240/2800/3360, Nemotron-4 768/1536/2304), or
* *model grows with GPUs*: one source's (one submitter's) table on one hardware with three or more GPU counts
  whose model size never shrinks as the GPU count grows (Narayanan 2021 Table 1, Megatron-LM 2024 H100 table,
  MaxText v5p, Megatron-Bridge 25.11 per system), a weak-scaling table.

  Model size is the total parameter count (all experts, without MTP modules: the size the sources publish,
  ``cost.transformer.param_count``). It is the one size that compares across the models of a mixed table:
  it is what a table's GPU count is chosen for (the weights, gradients and optimizer states must fit), and it
  depends on neither the sequence length nor the routing. Model FLOPs per sequence, the earlier measure, does
  not compare: it scales with the sequence length, which differs between the models of one table
  (Megatron-Bridge 25.11: Llama 8192, DeepSeek-V3 and Qwen3 4096), and with the *active* parameters of an MoE
  model (DeepSeek-V3, 671B with 37B active, does 18x fewer FLOPs per sequence than Llama 3.1 405B but has
  1.7x its parameters; Qwen3-30B-A3B fewer than Llama 3 8B). With it a larger MoE run on more GPUs read as a
  shrinking model and dropped its whole table from the study. Within one model (Narayanan, Megatron-LM 2024,
  MaxText: same sequence length, dense) the two orders agree. Runs at one GPU count are ordered by size.

Each run's measured step time is derived from what the source printed, with the model's own tokens or
FLOPs per step (the quantity compared is the source's): tokens/s/GPU -> B s / (x GPUs); iteration time as
is; model (hardware) TFLOP/s/GPU -> model (hardware) FLOPs per step / (x 1e12 GPUs). The fit sees the
floor(n/2) runs on the fewest GPUs (at least one); the rest are predicted. Fits compared:

* ``compute``: the GEMM factor of the runs' precision alone (``compute``, or ``compute:fp8`` for fp8
  runs; one parameter: possible with one run);
* ``overhead``: the per-step overhead alone;
* ``default``: what ``calibrate runs`` fits without ``--factors``: of every factor (compute, bandwidth per
  tier, overlap, overhead), the ones the runs identify (docs/model.md#calibrate-runs: at most max(1, m - 1) of
  them, none nearly collinear with those before it, none with a 95 % interval wider than a factor 2), as a
  user would get it. (Until calib27 this column was ``all``: every factor, underdetermined with fewer runs than
  factors: worst 604 % on Megatron-Bridge H100, 1104 % on nanotron 80B.)

Errors are in step time: predicted / measured - 1. Also printed per series: the parts whose share of the
step grew most between the largest training run and the largest predicted run (the default fit).

    python scripts/calibrate_extrapolation.py [--json]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_training as vt  # noqa: E402  (the validator's case rules, reused as they are)

from scalemodel.cost.transformer import param_count  # noqa: E402
from scalemodel.engine.calibrate_runs import GREW_SHARE, fit_runs, predict_with_fit, predictions_with_fit  # noqa: E402
from scalemodel.engine.job import transformer_shape  # noqa: E402
from scalemodel.engine.parts import BREAKDOWN_KEYS  # noqa: E402
from scalemodel.engine.predict import predict  # noqa: E402
from scalemodel.specs import StrategySpec, TrainingSpec  # noqa: E402
from scalemodel.specs.loader import builtin_path  # noqa: E402
from scalemodel.specs.runs import MeasuredRun  # noqa: E402

FITS = {"compute": ["compute"], "overhead": ["overhead_s"], "default": None}


@dataclass
class Case:
    run: MeasuredRun
    source: str
    hardware: str     # cluster name + overrides + precision
    model_key: str    # the case's model fields
    params: float     # total parameters (all experts, no MTP): the model size the series rule compares
    submitter: str = ""  # who ran it, where one source prints several submitters' runs (:func:`submitter`)
    validator_step: float | None = None  # the validator's predicted step (new cases): the rebuilt run must price it


#: The MLCommons results repositories lay each submission out as <submitter>/results/<system>/<benchmark>/
#: (mlcommons/training_results_v5.1 @441d65f4, e.g. University-of-Florida/results/hpg.dgxb200x8.n1/llama31_8b/), the
#: path every MLPerf row's source string cites. A joint submission names its directory with '+' (training_results_v3.1
#: Azure+NVIDIA/results/ND_H100_v5_n1344_pytorch/), so '+' belongs to the name (data40: it had read "NVIDIA").
SUBMITTER_PATH = re.compile(r"([\w.+-]+)/results/")


def submitter(case: dict[str, Any]) -> str:
    """The submitter of a row whose source prints several submitters' runs: an MLPerf row's results directory
    (:data:`SUBMITTER_PATH`, read from its ``source`` string); "" for every other row, whose source is one
    publisher's. hardware.system is no key: it names the node count (e.g. "1 NVIDIA DGX B200 node", "2 ... nodes")."""
    found = SUBMITTER_PATH.search(str(case.get("source", "")))
    return found.group(1) if found else ""


def model_size(workload: Any) -> float:
    """Total parameters of a transformer workload, all experts, without MTP modules (the series rule's size)."""
    return float(param_count(transformer_shape(workload)))


def nar21_cases() -> list[Case]:
    """Narayanan 2021 Table 1 as scripts/validate_training.py builds it (full recompute, fp16, the paper's
    micro-batch and interleaving rule, no fused attention); measured = hardware TFLOP/s per GPU."""
    if vt.CASES is None:
        return []
    cases = [c for c in vt.read_yaml(vt.CASES) if c["id"].startswith("nar21_t1_")]
    name = "dgx-a100"
    cluster = vt.load_cluster(name)
    path = builtin_path("cluster", name)
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
        run = MeasuredRun(case["id"], name, Path(path), cluster, wl, par["gpus"], tr, st, measured, None)
        out.append(Case(run, "nar21", f"{name} fp16", model_key(wl), model_size(wl)))
    return out


def model_key(wl: Any) -> str:
    """One model's identity in a series: the built workload's fields without its name. The recorded model block
    was compared before, and a row's free-text note (which names its run, as the nanotron25 rows' do) made every
    run of one model its own model, so no series formed."""
    return msgspec.json.encode(msgspec.structs.replace(wl, name="")).decode()


def new_cases() -> list[Case]:
    """The compared cases of validation/training_cases.yaml, rebuilt from the validator's chosen settings (each
    predicted run checked in :func:`study` to give the validator's own prediction)."""
    if not vt.NEW_CASES.is_file():
        return []
    # the validator's own results of every row (validate_all, cached: one pricing of the case files shared with the
    # validator's other callers, the test suite's among them), the rows of training_cases.yaml after the original ones
    results, _listed, n_original = vt.validate_all()
    by_id = {c["id"]: c for c in vt.read_yaml(vt.NEW_CASES)}
    out = []
    for res in results[n_original:]:
        case = by_id[res.id]
        s = res.settings
        overrides = vt.cluster_overrides(case, s["cluster"])
        cluster = vt.load_cluster(s["cluster"], overrides)
        wl, _ = vt.case_workload(case)
        assert wl is not None
        gpus = int(case["parallelism"]["gpus"])
        tr, st = res.training, res.strategy  # exactly the training and strategy the validator predicted
        # the measured step from the validator's own prediction, not a second pricing of the row (~20 s of CPU for
        # every row): iter s is a step; every other metric here is a rate inversely proportional to the step, so
        # measured step = predicted step x predicted rate / measured rate (study checks the rebuilt runs price
        # res.step_s again)
        assert res.metric in ("iter s", "tokens/s/GPU", "model TFLOP/s/GPU", "hw TFLOP/s/GPU", "TFLOP/s/GPU"), res.id
        measured = res.measured if res.metric == "iter s" else res.step_s * res.predicted / res.measured
        path = builtin_path("cluster", s["cluster"])
        assert path is not None
        run = MeasuredRun(res.id, s["cluster"], Path(path), cluster, wl, gpus, tr, st, float(measured), None)
        out.append(Case(run, res.families["source"], f"{s['cluster']} {' '.join(overrides)} {s['precision']}",
                        model_key(wl), model_size(wl), submitter(case), res.step_s))
    return out


def series(cases: list[Case]) -> list[tuple[str, str, list[Case]]]:
    """(name, kind, cases sorted by GPUs) for every series (module docstring): one source's, one submitter's, on one
    hardware. A "model grows" series of a named submitter carries its name."""
    groups: dict[tuple[str, str, str], list[Case]] = {}
    for c in cases:
        groups.setdefault((c.source, c.submitter, c.hardware), []).append(c)
    out = []
    for (source, who, hardware), group in groups.items():
        group = sorted(group, key=lambda c: (c.run.gpus, c.params))
        models: dict[str, list[Case]] = {}
        for c in group:
            models.setdefault(c.model_key, []).append(c)
        for same in models.values():
            if len({c.run.gpus for c in same}) >= 2:
                label = same[0].run.label.rsplit("_", 1)[0]
                out.append((f"{label} ({'/'.join(str(c.run.gpus) for c in same)})", "same model", same))
        grows = all(b.params >= a.params for a, b in zip(group, group[1:], strict=False))
        if len(models) > 1 and len({c.run.gpus for c in group}) >= 3 and grows:
            out.append((f"{' '.join(filter(None, (source, who)))} {hardware.split()[0]} "
                        f"({group[0].run.gpus}-{group[-1].run.gpus})",
                        "model grows with GPUs", group))
    return out


def study(name: str, kind: str, group: list[Case]) -> dict[str, Any]:
    runs = [c.run for c in group]
    n_train = max(1, len(runs) // 2)
    train, test = runs[:n_train], runs[n_train:]
    measured = [r.step_time_s for r in test]
    assert all(m is not None for m in measured)
    plain = [predict(r.cluster, r.workload, r.gpus, r.training, r.strategy).step_time_s for r in test]
    for c, p in zip(group[n_train:], plain, strict=True):  # the validator's own case, rebuilt
        assert c.validator_step is None or abs(p / c.validator_step - 1) < 1e-9, (c.run.label, p, c.validator_step)
    doc: dict[str, Any] = {"series": name, "kind": kind, "train": [(r.label, r.gpus) for r in train],
                           "test": [(r.label, r.gpus) for r in test],
                           "errors": {"uncalibrated": [p / m - 1 for p, m in zip(plain, measured, strict=True)]},
                           "factors": {}, "warnings": {}}
    fp8 = all(r.training.precision == "fp8" for r in train)
    for key, only in FITS.items():
        if key == "compute" and fp8:
            only = ["compute:fp8"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's covariance warnings on underdetermined fits
            fit = fit_runs(train, source=name, only=only)
        got = predict_with_fit(fit, test)
        doc["errors"][key] = [p / m - 1 for p, m in zip(got, measured, strict=True)]  # type: ignore[operator]
        doc["factors"][key] = {f.name: f.value for f in fit.factors if f.determined}
        doc["warnings"][key] = fit.warnings
        if key == "default":  # each run its own configuration (batch, layout, model), not a sweep's rule
            doc["grew"] = _grew(fit, train[-1], test[-1])
    doc["summary"] = {k: {"median": statistics.median(abs(e) for e in v), "worst": max(abs(e) for e in v)}
                      for k, v in doc["errors"].items()}
    return doc


def _grew(fit: Any, a: MeasuredRun, b: MeasuredRun) -> list[str]:
    """Parts whose share of the fitted step grew most from run ``a`` to run ``b`` (each its own configuration)."""
    ra, rb = predictions_with_fit(fit, [a, b])
    sa = {k: float(ra.breakdown[k].ravel()[0]) for k in BREAKDOWN_KEYS}
    sb = {k: float(rb.breakdown[k].ravel()[0]) for k in BREAKDOWN_KEYS}
    ta, tb = sum(sa.values()), sum(sb.values())
    change = sorted(((sb[k] / tb - sa[k] / ta, k) for k in BREAKDOWN_KEYS), reverse=True)
    return [f"{k} {sa[k] / ta:.0%}->{sb[k] / tb:.0%}" for d, k in change[:2] if d >= GREW_SHARE]


def main(argv: list[str]) -> int:
    all_cases = nar21_cases() + new_cases()
    docs = [study(name, kind, group) for name, kind, group in series(all_cases)]
    pooled = {k: [e for d in docs for e in d["errors"][k]] for k in ("uncalibrated", *FITS)}
    overall = {k: {"n": len(v), "median": statistics.median(abs(e) for e in v), "worst": max(abs(e) for e in v)}
               for k, v in pooled.items()}
    if "--json" in argv:
        print(json.dumps({"series": docs, "overall": overall}, indent=1, allow_nan=False))
        return 0
    cols = ("uncalibrated", *FITS)
    print("median / worst |step-time error| on the larger half, fitted on the smaller half")
    print(f"{'series':<44} {'kind':<10} {'fit on':>10} {'predict':>15}  "
          + "  ".join(f"{c:>13}" for c in cols) + "  grew most (largest fit -> largest predicted run)")
    def gpus(xs: list[tuple[str, int]]) -> str:
        return "/".join(str(g) for _, g in xs) if len(xs) <= 2 else f"{xs[0][1]}-{xs[-1][1]}"

    for d in docs:
        tr, te = gpus(d["train"]), gpus(d["test"])
        cells = "  ".join(f"{d['summary'][c]['median']:>5.1%} /{d['summary'][c]['worst']:>6.1%}" for c in cols)
        kind = "same" if d["kind"] == "same model" else "grows"
        print(f"{d['series']:<44} {kind:<10} {tr:>10} {te:>15}  {cells}  {', '.join(d['grew']) or 'none'}")
    cells = "  ".join(f"{overall[c]['median']:>5.1%} /{overall[c]['worst']:>6.1%}" for c in cols)
    print(f"{'all series (' + str(overall['uncalibrated']['n']) + ' predicted runs)':<44} {'':<10} {'':>10} {'':>15}  "
          f"{cells}")
    if "--errors" in argv:
        for d in docs:
            print(d["series"], {k: [f"{e:+.1%}" for e in v] for k, v in d["errors"].items()}, d["factors"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
