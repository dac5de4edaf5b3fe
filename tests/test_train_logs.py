"""Training logs as measurements (`calibrate runs`, a run with `log: FILE`): synthetic snippets written in
the published line formats (Megatron-LM training_log, DeepSpeed ThroughputTimer, torchtitan
MetricsProcessor.log), with the medians worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scalemodel.errors import InputError
from scalemodel.specs.train_logs import read_train_log


def megatron_line(it: int, ms: float, total: int = 5000, gb: int = 64) -> str:
    # the field layout of Megatron-LM's training_log (format strings as printed), with a timestamp prefix
    return (f" [2025-08-01 07:19:37] iteration {it:8d}/{total:8d} | consumed samples: {it * gb:12d} |"
            f" elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 118.7 |"
            f" learning rate: {6.976744e-08:.6E} | global batch size: {gb:5d} | lm loss: {10.43863:.6E} |"
            f" loss scale: 1.0 | grad norm: 26.203 | number of skipped iterations:   0 |"
            f" number of nan iterations:   0 |")


MEGATRON = "\n".join([
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 10770.37 | max allocated: 15754.88 | reserved: 16334.0",
    megatron_line(10, 19138.8), megatron_line(20, 12936.1), megatron_line(30, 12940.0), megatron_line(40, 12950.5),
    megatron_line(50, 12931.2), megatron_line(60, 13000.0),
    " validation loss at iteration 60 | lm loss value: 9.1E+00 | lm loss PPL: 9.0E+03 |",
])


def deepspeed_line(step: int, curr: float) -> str:
    return (f"[2023-11-07 01:55:23,714] [INFO] [timer.py:260:stop] epoch=0/micro_step={4 * step}/global_step={step}, "
            f"RunningAvgSamplesPerSec=25.025771473496132, CurrSamplesPerSec={curr}, MemAllocated=4.32GB, "
            "MaxMemAllocated=38.49GB")


DEEPSPEED = "\n".join([
    "[2023-11-07 01:55:23,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=4, lr=[4.998e-05], "
    "mom=[(0.9, 0.95)]",
    deepspeed_line(10, 20.1), deepspeed_line(20, 25.704280480541442), deepspeed_line(30, 25.6),
    deepspeed_line(40, 25.9),
])


def titan_line(step: int, tps: int) -> str:
    # torchtitan colours each field (ANSI escapes) and groups thousands in tps
    return (f"[rank0]:[titan] 2025-01-01 12:00:00,000 - root - INFO - \x1b[31mstep: {step:2}  "
            f"\x1b[32mloss: {7.1234:7.4f}  \x1b[38;2;180;60;0mgrad_norm: {1.2345:7.4f}  "
            f"\x1b[36mmemory: {30.25:5.2f}GiB({38.17:.2f}%)  \x1b[34mtps: {tps:,}  "
            f"\x1b[36mtflops: {123.45:,.2f}  \x1b[35mmfu: {39.57:.2f}%\x1b[39m")


TITAN = "\n".join([titan_line(1, 812), titan_line(10, 5311), titan_line(20, 5432), titan_line(30, 5440),
                   "[rank0]:[titan] 2025-01-01 12:00:05,000 - root - INFO - validate step: 30  loss:  7.0000  "
                   "memory: 30.25GiB(38.17%)  tps: 99,999",
                   titan_line(40, 5420)])


def test_megatron_median_after_warmup(tmp_path: Path) -> None:
    (tmp_path / "m.log").write_text(MEGATRON)
    got = read_train_log(tmp_path / "m.log")
    # step 10 is warm-up; the median of 12936.1, 12940.0, 12950.5, 12931.2, 13000.0 ms is 12940.0 ms
    assert (got.format, got.quantity, got.lines_used, got.lines_dropped) == ("megatron", "step_time_s", 5, 1)
    assert got.value == pytest.approx(12.940, rel=1e-12)
    # with no warm-up the six values' median is (12940.0 + 12950.5) / 2
    assert read_train_log(tmp_path / "m.log", warmup_steps=0).value == pytest.approx(12.94525, rel=1e-12)


def test_deepspeed_and_torchtitan_medians(tmp_path: Path) -> None:
    (tmp_path / "d.log").write_text(DEEPSPEED)
    d = read_train_log(tmp_path / "d.log")
    assert (d.format, d.quantity, d.lines_used) == ("deepspeed", "samples_per_s", 3)
    assert d.value == pytest.approx(25.704280480541442)
    (tmp_path / "t.log").write_text(TITAN)
    t = read_train_log(tmp_path / "t.log")
    # steps 1 and 10 are warm-up, the validation line is not a training step: median(5432, 5440, 5420)
    assert (t.format, t.quantity, t.lines_used, t.lines_dropped) == ("torchtitan", "tokens_per_s_per_gpu", 3, 2)
    assert t.value == 5432.0


def test_runs_from_logs_are_fitted_as_their_medians(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "m.log").write_text(MEGATRON)
    (tmp_path / "logs" / "d.log").write_text(DEEPSPEED)
    (tmp_path / "logs" / "t.log").write_text(TITAN)
    runs = [
        {"name": "megatron", "cluster": "dgx-a100", "model": "gpt-7.5b", "gpus": 32, "tp": 4, "global_batch": 64,
         "log": "logs/m.log"},
        {"name": "deepspeed", "cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 16, "global_batch": 256,
         "micro_batch": 4, "log": "logs/d.log"},
        {"name": "titan", "cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "micro_batch": 2,
         "log": "logs/t.log", "warmup_steps": 15},
    ]
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(runs))
    r = cli("calibrate", "runs", str(path), "--factors", "compute", "--json")
    assert r.code == 0, r.err
    rows = {x["name"]: x for x in json.loads(r.out)["runs"]}
    assert rows["megatron"]["measured_s"] == pytest.approx(12.940, rel=1e-12)
    assert rows["deepspeed"]["measured_s"] == pytest.approx(256 / 25.704280480541442, rel=1e-9)
    # torchtitan: 5432 tokens/s per GPU x 8 GPUs; a step is 64 sequences x 2048 tokens (gpt-1.7b)
    assert rows["titan"]["measured_s"] == pytest.approx(64 * 2048 / (5432 * 8), rel=1e-9)
    assert rows["titan"]["log"]["format"] == "torchtitan" and rows["titan"]["log"]["lines_used"] == 3


@pytest.mark.parametrize(("row", "where", "what"), [
    ({"log": "none.log"}, "run 1 (line 1): log", "none.log"),
    ({"log": "empty.log"}, "run 1 (line 1): log", "no iteration-speed line"),
    ({"log": "m.log", "warmup_steps": 100}, "run 1 (line 1): log", "none after step 100"),
    ({"log": "m.log", "step_time": 1.0}, "run 1 (line 1)", "exactly one of step_time, tokens_per_s, log"),
    ({"log": "m.log", "warmup_steps": -1}, "run 1 (line 1): warmup_steps", "not a step count"),
    ({"step_time": 1.0, "warmup_steps": 5}, "run 1 (line 1): warmup_steps", "without a log"),
    ({"log": "d.log", "global_batch": None}, "run 1 (line 1): global_batch", "needs the global batch"),
])
def test_bad_logs_are_one_line_errors(tmp_path: Path, cli, row: dict, where: str, what: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "m.log").write_text(MEGATRON)
    (tmp_path / "d.log").write_text(DEEPSPEED)
    (tmp_path / "empty.log").write_text("nothing to see\n")
    base = {"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "global_batch": 64}
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump([{k: v for k, v in {**base, **row}.items() if v is not None}]))
    r = cli("calibrate", "runs", str(path))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert r.err.startswith(f"error: {path}: {where}") and what in r.err, r.err


def test_nan_speed_is_refused(tmp_path: Path) -> None:
    (tmp_path / "n.log").write_text(megatron_line(20, 1.0).replace("1.0 |", "nan |", 1))
    with pytest.raises(InputError, match="line 1"):
        read_train_log(tmp_path / "n.log")


def test_csv_runs_name_logs_too(tmp_path: Path) -> None:
    from scalemodel.specs.runs import read_runs

    (tmp_path / "m.log").write_text(MEGATRON)
    (tmp_path / "runs.csv").write_text("name,cluster,model,gpus,tp,global_batch,log,warmup_steps,step_time\n"
                                       "a,dgx-a100,gpt-7.5b,32,4,64,m.log,25,\n"
                                       "b,dgx-a100,gpt-7.5b,64,4,64,,,13.5 s\n")  # another configuration: one run each
    a, b = read_runs(tmp_path / "runs.csv")
    # warm-up 25 drops steps 10 and 20: median(12940.0, 12950.5, 12931.2, 13000.0) = (12940.0 + 12950.5) / 2
    assert a.step_time_s == pytest.approx(12.94525, rel=1e-12) and a.log is not None and a.log.lines_dropped == 2
    assert b.step_time_s == 13.5 and b.log is None
