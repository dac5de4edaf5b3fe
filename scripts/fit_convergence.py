"""Read validation/convergence.yaml and print what each convergence default rests on (issue 14).

- compression: the accuracy change of top-k with error feedback at each published point (DGC reference
  reproduction), its mean and standard error per model; the step model charges no extra steps where the
  mean change is not below zero by more than two standard errors.
- staleness: the status of every source (no numeric point is transcribed: kappa stays the placeholder).
- critical batch: Kaplan's default B_crit(L(N)) for the given non-embedding parameter counts.

Run: PYTHONPATH=$PWD python scripts/fit_convergence.py [path/to/convergence.yaml]
Nothing here reads or targets the source document's numbers.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import yaml

from scalemodel.cost import efficiency

ROOT = Path(__file__).resolve().parents[1]


def accuracy_deltas(point: dict[str, Any]) -> list[float]:
    """Top-1 change (points) of each run against the dense baseline."""
    return [float(t) - float(point["baseline_top1"]) for t in point["top1"]]


def mean_and_stderr(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else ROOT / "validation" / "convergence.yaml"
    data = yaml.safe_load(path.read_text())
    print("compression (top-1 change vs dense, points)")
    for p in data["compression"]["points"]:
        d = accuracy_deltas(p)
        mean, se = mean_and_stderr(d)
        lossless = mean > -2 * se
        print(f"  {p['model']:<10} {p['scheme']} density {p['density']:g} EF={p['error_feedback']}: "
              f"{', '.join(f'{x:+.1f}' for x in d)}  mean {mean:+.2f} +- {se:.2f} -> "
              f"{'no step-count cost' if lossless else 'accuracy loss'}")
    print("staleness")
    st = data["staleness"]
    for s in st["sources"]:
        print(f"  {s['id']:<9} {s['status']}")
    print(f"  default kappa {st['default_kappa']} ({st['default_status']})")
    print("critical batch (Kaplan default, tokens and 2048-token sequences)")
    for n in (1.53e9, 3.87e10):
        b = float(efficiency.default_critical_batch_tokens(n))
        print(f"  N = {n:.3g} non-embedding: L = {float(efficiency.kaplan_loss(n)):.3f} nats, "
              f"B_crit = {b:.3g} tokens = {b / 2048:.0f} sequences")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
