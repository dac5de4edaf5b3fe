#!/usr/bin/env python3
"""Write scalemodel/data/validation_residuals.json: the signed speed error of every published run that
scripts/validate_training.py compares, with the family keys prediction intervals are matched on
(scalemodel/engine/intervals.py). Re-run after any change to the model or the validation cases:

    python scripts/build_residuals.py            # write the file
    python scripts/build_residuals.py --check    # exit 1 when the committed file is stale
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from generated_file import write_or_check  # scripts/, beside this file

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "scalemodel" / "data" / "validation_residuals.json"
#: validation variant -> the catalog family (AcceleratorSpec.family) a prediction's interval is matched on
#: (engine.intervals.generation_of); a variant missing here stops the build (it used to keep its own lower-cased name,
#: which no family matches: B300 / GB300 until review19b, TPU v5e until the lead's tpu21 merge)
GENERATION = {"A100": "ampere", "A100 40GB": "ampere", "H100": "hopper", "H100 96GB": "hopper", "H800": "hopper",
              "H200": "hopper", "B200": "blackwell", "GB200": "blackwell", "B300": "blackwell", "GB300": "blackwell",
              "V100": "volta", "P100": "pascal",
              "TPU v4": "tpu", "TPU v5p": "tpu", "TPU v5e": "tpu", "TPU v6e": "tpu", "TPU7x": "tpu",
              "MI300X": "cdna3", "MI325X": "cdna3",
              "MI355X": "cdna4", "MI350X": "cdna4", "MI250X": "cdna2", "Gaudi": "gaudi"}


def _validator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("validate_training", HERE / "validate_training.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_training"] = mod
    spec.loader.exec_module(mod)
    return mod


def build() -> str:
    v = _validator()
    results, _not_expressed, _n = v.validate_all()
    gpus: dict[str, int] = {}
    for path in (v.CASES, v.NEW_CASES):
        if path is not None and Path(path).is_file():
            for case in v.read_yaml(path) or []:
                par = case.get("parallelism") or {}
                if "gpus" in par:
                    gpus[case["id"]] = int(par["gpus"])
    cases = []
    for r in results:
        fam = r.families
        variant = fam["accelerator"]
        if variant not in GENERATION:
            raise SystemExit(f"build_residuals: accelerator {variant!r} of {r.id} has no catalog family in GENERATION")
        cases.append({
            "id": r.id, "speed_error": round(float(r.speed_error), 6),
            "generation": GENERATION[variant], "precision": fam["precision"],
            "parallelism": fam["parallelism"], "model": fam["model"],
            "gpus": gpus.get(r.id.split(" ")[0]),
        })
    doc = {"source": "scripts/validate_training.py (python scripts/build_residuals.py regenerates this file)",
           "speed_error": "predicted speed / measured speed - 1 (+ = the model predicts a faster run)",
           "cases": cases}
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    text = build()
    return write_or_check(OUT, text, argv, script="build_residuals.py",
                          summary=f"{text.count('speed_error') - 1} cases")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
