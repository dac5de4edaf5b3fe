"""CPU time of `calibrate runs` with its leave-one-out band, printed (never asserted).

    python benchmarks/calibrate_runs.py            # best of 3, pinned to one core
    python benchmarks/calibrate_runs.py --repeat 5

The case is the 8 synthetic runs of tests/test_calibrate_runs.py (the step model at known factors, 1 % noise) on
dgx-a100, every factor fitted, each run also predicted by a refit without it (engine/calibrate_runs.py, m + 1 fits):
the figure docs/model.md#calibrated-intervals quotes. Printed: CPU seconds of ``fit_runs`` (best and all runs), the
``evaluate`` calls it made, and the band's method (leave-one-out).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scalemodel.engine.calibrate_runs as cr  # noqa: E402
from scalemodel.specs.runs import read_runs  # noqa: E402
from tests.test_calibrate_runs import RUNS, synthetic  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    path = synthetic(Path(tempfile.mkdtemp()), RUNS)
    calls = [0]
    real = cr.evaluate

    def counted(*a: Any, **kw: Any) -> Any:
        calls[0] += 1
        return real(*a, **kw)

    cr.evaluate = counted  # type: ignore[assignment]
    times = []
    for _ in range(args.repeat):
        calls[0] = 0
        t0 = time.process_time()
        fit = cr.fit_runs(read_runs(path), source=str(path))
        times.append(time.process_time() - t0)
    print(f"calibrate runs, {len(RUNS)} runs + {fit.calibration['method']} band: {min(times):.2f} s CPU best "
          f"({', '.join(f'{t:.2f}' for t in times)}), {calls[0]} evaluate calls")


if __name__ == "__main__":
    main()
