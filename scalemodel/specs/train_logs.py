"""Read a training log's per-iteration speed (``calibrate runs``: a run given as ``log: FILE``).

Three formats are recognised, by their own log lines (the first that matches any line wins, in this order):

* **Megatron-LM** (``megatron/training/training.py``, ``training_log``; also Megatron-DeepSpeed and NeMo's
  Megatron trainer): ``iteration  N/ M | ... | elapsed time per iteration (ms): X | ...``, X the mean
  wall time of the iterations since the previous line, in milliseconds (an optional ``[date time]``
  prefix is allowed).
* **DeepSpeed** (``deepspeed/utils/timer.py``, ``ThroughputTimer.stop``):
  ``epoch=E/micro_step=U/global_step=N, RunningAvgSamplesPerSec=A, CurrSamplesPerSec=X, ...``; X is
  samples per second of the whole job over the last optimizer step, whose samples are the global batch
  (the engine builds the timer with ``batch_size=train_batch_size()``, DeepSpeed >= 0.9), so the step time
  is global_batch / X.
* **torchtitan** (``torchtitan/components/metrics.py``, ``MetricsProcessor.log``):
  ``step: N  loss: ...  memory: ...  tps: X  tflops: ...  mfu: ...%`` (``wps:`` in 2024 versions), X the
  tokens per second per GPU since the previous line (``ntokens / (time x non-data-parallel size)``), so the
  whole job runs X x GPUs tokens per second. ANSI colour codes are stripped; ``validate step:`` lines are
  not training steps.

Lines that report a step <= ``warmup_steps`` (default :data:`DEFAULT_WARMUP`) are dropped (start-up,
compilation, allocator warm-up); the measurement is the median of what the remaining lines report.
The file is read through :mod:`scalemodel.specs.files` (a regular file of at most
:data:`~scalemodel.specs.files.MAX_LOG_BYTES`) as UTF-8, or UTF-16 after a UTF-16 byte-order mark; undecodable
bytes become U+FFFD.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from scalemodel.errors import InputError
from scalemodel.specs import files

#: Logged steps at or below this are warm-up and dropped, unless a run says otherwise (``warmup_steps``).
DEFAULT_WARMUP = 10

#: a sign is read (fuzz25): "elapsed time per iteration (ms): -1500.0" was passed over as no speed line at all ("no
#: iteration-speed line found" of a log of nothing but speed lines); read, it is refused as not positive
_NUM = r"(-?[0-9][0-9,]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|-?nan|-?inf)"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: a number whose commas group thousands (torchtitan logs tps with ``:,``): 1,234 and 12,345.6, not 1,2,3,4
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")
# Each format is (name, quantity, the step's pattern, the speed's pattern matched where the first step match ends):
# one pattern "step ... .*? speed" was retried from every step-like word of a line that lacks the speed, which is
# quadratic (a 320 KB line of "iteration 1/ 1 |" took 20 s of CPU).
FORMATS: tuple[tuple[str, str, re.Pattern[str], re.Pattern[str]], ...] = (
    ("megatron", "step_time_s", re.compile(r"\biteration\s+(\d{1,15})\s*/\s*\d+\s*\|"),
     re.compile(r".*?elapsed time per iteration \(ms\):\s*" + _NUM)),
    ("deepspeed", "samples_per_s", re.compile(r"global_step=(\d{1,15}),\s*RunningAvgSamplesPerSec=[^,]*,"),
     re.compile(r"\s*CurrSamplesPerSec=" + _NUM)),
    ("torchtitan", "tokens_per_s_per_gpu", re.compile(r"(?<!validate )\bstep:\s*(\d{1,15})\s"),
     re.compile(r".*?\b(?:tps|wps):\s*" + _NUM)),
)
ALLOWED = ("a Megatron-LM ('iteration N/ M | ... elapsed time per iteration (ms): X'), DeepSpeed "
           "('global_step=N, RunningAvgSamplesPerSec=.., CurrSamplesPerSec=X') or torchtitan "
           "('step: N ... tps: X') training log")


@dataclass(frozen=True)
class LogSpeed:
    """What a training log says: its format, the quantity (``step_time_s``, ``samples_per_s`` of the whole
    job, or ``tokens_per_s_per_gpu``), the median after warm-up, and how many lines it is the median of."""

    path: str
    format: str
    quantity: str
    value: float
    lines_used: int
    lines_dropped: int


def read_train_log(path: str | Path, *, warmup_steps: int = DEFAULT_WARMUP) -> LogSpeed:
    """The median per-iteration speed of a training log (module docstring)."""
    name = str(path)
    text = files.read_log(path, limit=files.MAX_LOG_BYTES, what="training log")
    lines = text.splitlines()
    for fmt, quantity, step_pattern, speed_pattern in FORMATS:
        found: list[tuple[int, float]] = []
        for i, raw in enumerate(lines, start=1):
            line = _ANSI.sub("", raw) if "\x1b" in raw else raw
            at = step_pattern.search(line)
            m = speed_pattern.match(line, at.end()) if at is not None else None
            if at is None or m is None:
                continue
            text_value = m.group(1)
            digits = text_value.rstrip(",")  # DeepSpeed's "CurrSamplesPerSec=100, MemAllocated=..."
            if "," in digits and not _GROUPED.fullmatch(digits):
                # round 16: "1,2,3,4" was read as 1234 (the commas dropped); a comma groups thousands only, as
                # torchtitan's f"{tps:,}" writes them
                raise InputError(f"{digits[:40]!r} is not a number (a comma groups thousands, e.g. 12,345.6)",
                                 where=f"{name}: line {i}", allowed=f"a {quantity} written as the framework logs it")
            value = float(digits.replace(",", ""))
            if not (math.isfinite(value) and value > 0):
                shown = m.group(1) if len(m.group(1)) <= 40 else f"{m.group(1)[:40]}... ({len(m.group(1))} characters)"
                raise InputError(f"{shown!r} is not a positive finite {quantity}", where=f"{name}: line {i}",
                                 allowed="a log of iterations that ran (no negative, nan or zero speeds)")
            found.append((int(at.group(1)), value))
        if not found:
            continue
        kept = [v for step, v in found if step > warmup_steps]
        if not kept:
            last = max(step for step, _ in found)
            raise InputError(f"{len(found)} {fmt} lines, none after step {warmup_steps} (the last reports step "
                             f"{last})", where=name, allowed="a longer log, or a smaller warmup_steps for this run")
        value = statistics.median(kept)
        if quantity == "step_time_s":
            value /= 1000.0  # Megatron prints milliseconds
        return LogSpeed(name, fmt, quantity, float(value), len(kept), len(found) - len(kept))
    raise InputError("no iteration-speed line found" + files.nul_note(text), where=name, allowed=ALLOWED)
