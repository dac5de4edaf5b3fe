"""Hostile-input round 6: framework launch files, nccl-tests and training logs, runs files, ``~USER`` paths.

Each case is one finding of the round-6 fuzz pass (a traceback, a wrong value accepted silently, a
misleading message or a negative zero in the output); the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_inputs import BIG, LOG, accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

NOUSER = "~no-such-user-round6"


@pytest.mark.parametrize("args", [
    ["predict", "-c", f"{NOUSER}/c.yaml", "-m", "gpt-1.7b", "-n", "8"],
    ["predict", "-c", "dgx-h100", "-m", f"{NOUSER}/config.json", "-n", "8"],
    ["memory", "-c", "dgx-h100", "-m", NOUSER, "-n", "8"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", f"{NOUSER}/megatron.sh"],
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set", f"cluster.accelerator={NOUSER}/a.yaml"],
])
def test_unknown_user_in_a_path_is_one_line(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """``~USER`` of a user that does not exist: Path.expanduser raised RuntimeError (a traceback)."""
    refused(cli, *args, "--json", match="no such user")


def test_unknown_user_in_files_that_name_other_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"kind: sweep\nmodels: ['{NOUSER}/m.yaml']\nclusters: [dgx-h100]\ngpus: [8]\n")
    refused(cli, "sweep", str(sweep), "-j", "1", "--json", inputs=(sweep,), match="no such user")
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"- {{cluster: '{NOUSER}/c.yaml', model: gpt-1.7b, gpus: 8, step_time: 1 s}}\n")
    refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,), match="no such user")
    scenario = tmp_path / "cap.yaml"
    scenario.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [16]\n"
                        "assertions: {max_step_time: 100s}\n")
    refused(cli, "check", str(scenario), "--set", f"model={NOUSER}/m.yaml", "--json", inputs=(scenario,),
            match="no such user")


@pytest.mark.parametrize("extra", [["-n", "8,16", "--micro-batch", "100000000"],
                                   ["-n", "16,32", "--micro-batch", "100000000", "--mode", "strong"]])
def test_scale_global_batch_beyond_a_spec_is_one_line(cli, extra: list[str]) -> None:  # type: ignore[no-untyped-def]
    """The derived global batch (dp x micro-batch, grown with N in weak mode) past 1e9: was a SpecError traceback
    from the TrainingSpec copy of each point."""
    refused(cli, "scale", "-c", "dgx-h100", "-m", "gpt-1.7b", *extra, "--json", match="--global-batch")


def test_scale_from_a_strategy_file_with_a_huge_micro_batch(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "megatron.sh"
    f.write_text("--micro-batch-size 99999999\n")
    refused(cli, "scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64,128", "--strategy", str(f), "--json",
            inputs=(f,), match="at most 1e+09 sequences")


def test_nccl_log_rank_line_with_a_5000_digit_rank(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``#  Rank 999...9 Group 0 Pid ...``: int() of 5000 digits raised ValueError (a traceback); the line is not a
    rank line (ranks are small integers), so the other seven ranks and every data row are read as before."""
    from scalemodel.specs.nccl_tests import parse_nccl_tests

    text = LOG.read_text().replace("Rank  7 Group", f"Rank  {BIG} Group")
    log = parse_nccl_tests(text)
    assert log.ranks == 7 and len(log.rows) == len(parse_nccl_tests(LOG.read_text()).rows)
    f = tmp_path / "a.log"
    f.write_text(text)
    r = cli("calibrate", str(f), "-c", "dgx-a100", "--json")
    assert "Traceback" not in r.err and r.code in (0, 1), r.err
    assert json.loads(r.out)["inputs"]["ranks"] == 7  # the ranks the log lists


@pytest.mark.parametrize("line", [
    f" iteration {BIG}/ 100 | elapsed time per iteration (ms): 500.0 |",
    f"epoch=0/micro_step=1/global_step={BIG}, RunningAvgSamplesPerSec=1, CurrSamplesPerSec=100.0, x",
    f"step: {BIG}  loss: 1  memory: 1  tps: 1000  tflops: 1  mfu: 1%",
])
def test_training_log_step_number_of_5000_digits(tmp_path: Path, line: str) -> None:
    """A logged step of 5000 digits: int() raised ValueError (a traceback out of ``calibrate runs``); such a line
    is not an iteration line and the log is read from its other lines."""
    from scalemodel.specs.train_logs import read_train_log

    good = {"iteration": " iteration {i}/ 100 | elapsed time per iteration (ms): 500.0 |",
            "global_step": "epoch=0/micro_step={i}/global_step={i}, RunningAvgSamplesPerSec=1, "
                           "CurrSamplesPerSec=100.0, x",
            "step:": "step: {i}  loss: 1  memory: 1  tps: 1000  tflops: 1  mfu: 1%"}
    template = next(t for k, t in good.items() if k in line)
    f = tmp_path / "train.log"
    f.write_text("".join(template.format(i=i) + "\n" for i in range(1, 21)) + line + "\n")
    speed = read_train_log(f)
    assert speed.lines_used == 10 and speed.lines_dropped == 10


@pytest.mark.parametrize("measurement, match", [
    ("step_time: 1e-320 s", "shorter than any training step"),  # a subnormal: the fit's residuals were not finite
    ("step_time: 1e-12 s", "at least 1e-06 s"),
    ("log: tiny.log", "tiny.log: a step time of"),  # Megatron prints ms: 1e-320 ms
])
def test_runs_with_an_impossibly_short_step(cli, tmp_path: Path, measurement: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """A step time of a subnormal number of seconds reached least_squares, whose ValueError ("Residuals are not
    finite in the initial point") was a traceback."""
    (tmp_path / "tiny.log").write_text("".join(f" iteration {i}/ 100 | elapsed time per iteration (ms): 1e-320 |\n"
                                               for i in range(1, 30)))
    f = tmp_path / "runs.yaml"
    f.write_text("".join(f"- {{cluster: dgx-h100, model: gpt-1.7b, gpus: {n}, {measurement}, global_batch: 64}}\n"
                         for n in (8, 16, 32)))
    refused(cli, "calibrate", "runs", str(f), "--json", inputs=(f,), match=match)


def test_runs_csv_cell_over_the_csv_field_limit(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A 200 000-character cell (the file is within the 256 KiB limit): csv.Error was a traceback."""
    f = tmp_path / "runs.csv"
    f.write_text("cluster,model,gpus,step_time\ndgx-h100,gpt-1.7b,8," + "1" * 200_000 + "\n")
    refused(cli, "calibrate", "runs", str(f), "--json", inputs=(f,), match="malformed CSV on line 2")


def _with_in_place_time(value: str) -> str:
    """The synthetic log with every data row's in-place time (the 10th column) replaced."""
    out = []
    for line in LOG.read_text().splitlines():
        toks = line.split()
        if len(toks) == 13 and toks[0].isdigit():
            toks[9] = value
            line = " ".join(toks)
        out.append(line)
    return "\n".join(out) + "\n"


def test_nccl_log_in_place_time_zero_is_not_measured() -> None:
    """An in-place time of 0 was averaged with the out-of-place one: every row's time halved, the fit silently
    wrong. It now counts as not measured, so each row's time is its out-of-place time (read from the text)."""
    from scalemodel.specs.nccl_tests import parse_nccl_tests

    log = parse_nccl_tests(_with_in_place_time("0"))
    expected = [float(line.split()[5]) * 1e-6 for line in LOG.read_text().splitlines()
                if len(line.split()) == 13 and line.split()[0].isdigit()]
    assert [r.time_s for r in log.rows] == expected


def test_nccl_log_negative_in_place_times_are_no_rows(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A negative in-place time was averaged in (a fit to partly negative times, exit 0 or 1); the rows are
    skipped as a negative out-of-place time's are."""
    f = tmp_path / "a.log"
    f.write_text(_with_in_place_time("-55.0"))
    # fuzz28: a log whose rows were all skipped says so (was "no nccl-tests data rows")
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--json", inputs=(f,), match="no data row can be fitted")


def test_nccl_log_of_two_collectives_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """all_reduce_perf and all_gather_perf output in one file: every row was fitted as all-reduce (exit 0)."""
    f = tmp_path / "both.log"
    f.write_text(LOG.read_text() + LOG.read_text().replace("all_reduce_perf", "all_gather_perf"))
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--json", inputs=(f,), match="all_gather, all_reduce")
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--op", "allreduce", "--json", inputs=(f,),
            match="one *_perf test per log")
    f.write_text(LOG.read_text() + LOG.read_text())  # the same test twice (a rerun appended): still one collective
    r = cli("calibrate", str(f), "-c", "dgx-a100", "--json")
    assert r.code in (0, 1) and "Traceback" not in r.err, r.err


@pytest.mark.parametrize("flags, match", [
    ("--tensor-model-parallel-size -2", "'-2'"),
    ("--micro-batch-size -1", "--micro-batch-size: expected a count"),
    ("--tensor-model-parallel-size 9999999999", "'9999999999'"),
    ("--seq-length 1099511627776", "--seq-length"),
    ("--tensor-model-parallel-size 0x2", "'0x2'"),
    ("--tensor-model-parallel-size= --micro-batch-size 1", "got ''"),
    ("--micro-batch-size 1 --global-batch-size", "got no value"),
])
def test_megatron_counts_out_of_range_are_refused(cli, tmp_path: Path, flags: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """A negative, 10-digit or non-integer count was dropped with the warning "not a number: a shell variable is not
    expanded" and the job predicted without it (exit 0); Megatron itself would not start."""
    f = tmp_path / "launch.sh"
    f.write_text(f"torchrun pretrain_gpt.py {flags}\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f), "--json",
            inputs=(f,), match=match)


def test_megatron_shell_variables_are_still_warned_about(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "launch.sh"
    f.write_text('torchrun pretrain_gpt.py --tensor-model-parallel-size "$TP" --micro-batch-size `echo 1` '
                 "--pipeline-model-parallel-size +2\n")
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", str(f))
    # issue 13: Megatron-Core DDP, and no --overlap-grad-reduce (Megatron's default: off); nancheck37: its NaN check on
    assert out["inputs"]["strategy_file"]["strategy"] == {"pp": 2, "megatron_ddp": True, "overlap": False,
                                                          "check_for_nan_in_grad": True,
                                                          "check_for_nan_in_loss": True}
    assert sum("shell variable is not expanded" in u for u in out["inputs"]["strategy_file"]["unused"]) == 2


@pytest.mark.parametrize("degrees", ["data_parallel_shard_degree = 0", "data_parallel_shard_degree = -5",
                                     "data_parallel_replicate_degree = true"])
def test_torchtitan_data_parallel_degrees_outside_the_rule(cli, tmp_path: Path, degrees: str) -> None:  # type: ignore[no-untyped-def]
    """Shard 0 or -5 (torchtitan: -1 or >= 1) and a boolean replicate degree were read as 'no sharding' and 1."""
    f = tmp_path / "job.toml"
    f.write_text(f"[parallelism]\n{degrees}\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--strategy", str(f), "--json",
            inputs=(f,), match="shard >= 1 or -1")


@pytest.mark.parametrize("text, match", [
    ("[parallelism\ntensor_parallel_degree = 2\n", "malformed TOML"),
    ("[training]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "arrays or inline tables nested too deeply"),
])
def test_torchtitan_toml_parse_errors_name_the_file_once(cli, tmp_path: Path, text: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """A malformed TOML named its path twice ("F: F: malformed TOML"); a deeply nested one was the generic
    "input out of range: maximum recursion depth exceeded" with no file named."""
    f = tmp_path / "job.toml"
    f.write_text(text)
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama2-7b", "-n", "64", "--strategy", str(f), "--json",
                   inputs=(f,), match=match)
    assert line.startswith(f"error: --strategy: {f}: {match}") and line.count(str(f)) == 1, line


def _negative_zeros(doc: object, path: str = "") -> list[str]:
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _negative_zeros(v, f"{path}.{k}")]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _negative_zeros(v, f"{path}[{i}]")]
    return [path] if isinstance(doc, float) and doc == 0 and str(doc).startswith("-") else []


@pytest.mark.parametrize("args", [
    ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--straggler-cv", "-0"],
    ["sensitivity", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--straggler-cv", "-0"],
    ["stragglers", "-n", "64", "--cv", "-0"],
    ["memory", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--fragmentation", "-0"],
])
def test_negative_zero_options_do_not_reach_the_json(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """``--straggler-cv -0`` passes ``>= 0`` and was echoed (and, in sensitivity, varied) as -0.0."""
    assert not _negative_zeros(accepted(cli, *args))


@pytest.mark.parametrize("args, match", [
    (["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "\u0661\u0666"], "is not an integer"),
    (["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--straggler-cv", "\u0660.\u0661"], "is not a number"),
    (["memory", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--set", "model.layers=\u0663"], "layers"),
    (["memory", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--set", "model.hidden=\uff12\uff13\uff10\uff14"],
     "hidden"),
    (["memory", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--set", "accelerator.memory=\u0668\u0660 GB"],
     "accelerator.memory"),
])
def test_digits_of_other_scripts_are_not_numbers(cli, args: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    """int()/float() and the regex \\d read Arabic-Indic and fullwidth digits: -n "\u0661\u0666" ran 16 GPUs and
    model.layers="\u0663" gave 3 layers, where "8,\u00b2" and ssp:\u0663 were already refused."""
    refused(cli, *args, "--json", match=match)


def test_ascii_numbers_still_read(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "memory", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "16", "--set", "model.layers=12",
                   "--set", "accelerator.memory= 80 GB", "--set", "model.hidden=' 2304 '")
    assert out["inputs"]["gpus"] == 16


@pytest.mark.parametrize("extra, match", [
    (["--tolerance", "nan"], "--tolerance"),  # refused as nan in the nccl-tests form; ignored here (exit 0)
    (["--tolerance", "0.01"], "--tolerance"),
    (["--algo", "tree"], "--algo"),
    (["--force"], "--force"),
])
def test_runs_form_refuses_the_nccl_form_options(cli, tmp_path: Path, extra: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text("- {cluster: dgx-h100, model: gpt-1.7b, gpus: 8, step_time: 1 s}\n")
    refused(cli, "calibrate", "runs", str(f), *extra, "--json", inputs=(f,), match=match)


def test_nccl_form_refuses_the_runs_form_mode(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "calibrate", str(LOG), "-c", "dgx-a100", "--mode", "weak", "--json", inputs=(LOG,), match="--mode")


def test_nccl_log_with_more_rows_than_any_sweep(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Short data rows up to the 64 MiB limit are over a million: parsing, fitting and echoing 200 000 of them took
    5 s of CPU (a full-size file well over the 20 s hang guard). A log holds at most MAX_ROWS data rows."""
    import time

    from scalemodel.specs.nccl_tests import MAX_ROWS, parse_nccl_tests

    def rows(n: int) -> str:
        return "# all_reduce_perf\n" + "".join(f"{1024 * (1 + i % 20)} {256 * (1 + i % 20)} float sum -1 50.0 1 1 0 "
                                               "49.0 1 1 0\n" for i in range(n))

    assert len(parse_nccl_tests(rows(MAX_ROWS)).rows) == MAX_ROWS
    f = tmp_path / "long.log"
    f.write_text(rows(MAX_ROWS * 10))
    t0 = time.process_time()
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--ranks", "8", "--json", inputs=(f,), match="data rows")
    assert time.process_time() - t0 < 2.0
    entry = {"size": 1024, "count": 256, "type": "float", "out_of_place": {"time": 50.0, "bus_bw": 1.0}}
    f.write_text(json.dumps({"devices": [{}] * 8, "results": [entry] * (MAX_ROWS + 1)}))
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--json", inputs=(f,), match=f"more than {MAX_ROWS:,}")


def test_nccl_log_line_of_blanks_is_read_in_linear_time(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The rank-line pattern began with ``#?\\s*``, so a search tried every blank of a line and scanned the blanks
    after it: a 300 KB line of spaces took 70 s of CPU, a 64 MiB log would not finish."""
    import time

    f = tmp_path / "a.log"
    f.write_text(LOG.read_text().replace("# Using devices", "# Using devices" + " " * 100_000 + "x"))
    t0 = time.process_time()
    r = cli("calibrate", str(f), "-c", "dgx-a100", "--json")
    assert time.process_time() - t0 < 3.0
    assert r.code in (0, 1) and json.loads(r.out)["inputs"]["ranks"] == 8, r.err


@pytest.mark.parametrize("line, good, value", [
    ("iteration 1/ 1 |" * 8000, " iteration {i}/ 100 | elapsed time per iteration (ms): 500.0 |", 0.5),
    ("step: 1 " * 8000, "step: {i}  loss: 1  memory: 1  tps: 1000  tflops: 1  mfu: 1%", 1000.0),
])
def test_training_log_lines_are_read_in_linear_time(tmp_path: Path, line: str, good: str, value: float) -> None:
    """One pattern "step ... .*? speed" was retried from each step-like word of a line without the speed: a
    320 KB line took 20 s of CPU (a 64 MiB log would not finish)."""
    import time

    from scalemodel.specs.train_logs import read_train_log

    f = tmp_path / "train.log"
    f.write_text(line + "\n" + "".join(good.format(i=i) + "\n" for i in range(1, 21)))
    t0 = time.process_time()
    assert read_train_log(f).value == value
    assert time.process_time() - t0 < 1.0


@pytest.mark.parametrize("args", [
    ["collective", "-c", "dgx-h100", "-n", "8", "--size", " " * 30_000 + "x"],
    ["memory", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set", 'accelerator.memory="' + " " * 30_000 + 'x"'],
])
def test_quantity_with_a_long_run_of_blanks_is_refused_at_once(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """The quantity pattern began "\\s*\\$?\\s*": a run of n blanks before a non-number was tried in n^2 ways (20 KB:
    4 s of CPU; a 60 KB --size or a 256 KiB spec value did not finish)."""
    import time

    t0 = time.process_time()
    refused(cli, *args, "--json", match="cannot read")
    assert time.process_time() - t0 < 1.0


def test_constraint_with_a_long_run_of_blanks_is_refused_at_once(cli) -> None:  # type: ignore[no-untyped-def]
    """"(\\S.*?)\\s*$" retried the blanks after every character of the value: 20 KB took 0.9 s of CPU, a 120 KB
    --constraint over 30 s."""
    import time

    t0 = time.process_time()
    refused(cli, "plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--constraint", "tp<=8" + " " * 60_000 + "x",
            "--json", match="--constraint")
    assert time.process_time() - t0 < 1.0
    out = accepted(cli, "plan", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--constraint", " tp <= 2 , pp=1 ")
    assert all(p["strategy"]["tp"] <= 2 and p["strategy"]["pp"] == 1 for p in out["ranked"])


def test_strategy_file_of_blank_lines_is_refused_at_once(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The torchtitan sniff "^\\s*\\[(training|...)\\]" (re.M) crossed every following newline from every line start:
    250 000 blank lines (under the 256 KiB limit) did not finish in 20 s."""
    import time

    f = tmp_path / "job.cfg"
    f.write_text("\n" * 100_000)
    t0 = time.process_time()
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match="not a strategy file")
    assert time.process_time() - t0 < 1.0
    f.write_text("\n" * 1000 + "  [parallelism]\ntensor_parallel_degree = 2\n")  # still read as torchtitan
    assert accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy",
                    str(f))["inputs"]["strategy_file"]["format"] == "torchtitan"


def test_deepspeed_zero_gradient_accumulation_steps(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """gradient_accumulation_steps 0 was echoed as the file's setting and then ignored (falsy) for the global batch."""
    f = tmp_path / "ds.json"
    f.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 0}))
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match="gradient_accumulation_steps: expected at least 1")


@pytest.mark.parametrize("config", [{}, {"hidden_size": 512}])
def test_config_json_without_the_sniffed_keys_names_hf_keys(cli, tmp_path: Path, config: dict) -> None:  # type: ignore[no-untyped-def, type-arg]
    """A config.json with none of the keys that mark a HuggingFace config was validated as a workload spec:
    "name: missing required field; ... `scalemodel schema`" for a file that has no name field to add. Read as a
    HuggingFace config, the missing layer count is the one line (no model_type warning before it)."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    refused(cli, "memory", "-c", "dgx-h100", "-m", str(d), "-n", "8", "--json", match="num_hidden_layers")


def test_calibrate_ranks_one_is_named(cli) -> None:  # type: ignore[no-untyped-def]
    """--ranks 1 passed the positive check and then read as 'not given': "cannot tell how many ranks the log used;
    pass --ranks N", for a run that had passed --ranks."""
    refused(cli, "calibrate", str(LOG), "-c", "dgx-a100", "--ranks", "1", "--json", inputs=(LOG,),
            match="--ranks: a collective needs at least 2 ranks")


@pytest.mark.parametrize("words", [["runs"], ["nccl-tests"], ["a.log", "b.log", "c.log"]])
def test_calibrate_wrong_words_are_named_before_the_cluster(cli, words: list[str]) -> None:  # type: ignore[no-untyped-def]
    """`calibrate runs` (no FILE) or three words said "missing --cluster", which would not have helped."""
    refused(cli, "calibrate", *words, "--json", match="expected `nccl-tests LOG` or `runs FILE`")


def test_megatron_recompute_granularity_without_a_value(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--recompute-granularity --micro-batch-size 1``: the flag took no value and was dropped (no recompute)."""
    f = tmp_path / "launch.sh"
    f.write_text("--recompute-granularity --micro-batch-size 1\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match="--recompute-granularity: unknown recompute granularity: no value")


@pytest.mark.parametrize("ranks", ["16384", "7"])
def test_calibrate_ranks_that_contradict_the_log(cli, ranks: str) -> None:  # type: ignore[no-untyped-def]
    """--ranks is "Ranks in the log when it does not say"; given against a log that lists its 8 ranks it won, and
    the tier was fitted to a ring of 16384 (exit 1, residuals +191% .. +139854%)."""
    refused(cli, "calibrate", str(LOG), "-c", "dgx-a100", "--ranks", ranks, "--json", inputs=(LOG,),
            match="but the log lists 8 ranks")
    r = cli("calibrate", str(LOG), "-c", "dgx-a100", "--ranks", "8", "--json")
    assert r.code == 0, r.err


@pytest.mark.parametrize("flags", ["--fp8-format bogus", "--fp8-format --micro-batch-size 1"])
def test_megatron_fp8_format_outside_its_choices(cli, tmp_path: Path, flags: str) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM's --fp8-format takes e4m3 or hybrid (megatron/training/arguments.py); any value, or none, had
    set fp8 precision."""
    f = tmp_path / "launch.sh"
    f.write_text(f"--micro-batch-size 1 {flags}\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match="--fp8-format: unknown fp8 format")
    f.write_text("--micro-batch-size 1 --fp8-format hybrid\n")
    assert accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy",
                    str(f))["inputs"]["strategy_file"]["training"]["precision"] == "fp8"


@pytest.mark.parametrize("config, match", [
    ({"train_micro_batch_size_per_gpu": 1, "bf16": True}, "bf16: expected a mapping"),
    ({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "fp16": {"enabled": True}}, "both enabled"),
])
def test_deepspeed_precision_sections(cli, tmp_path: Path, config: dict, match: str) -> None:  # type: ignore[no-untyped-def, type-arg]
    """``"bf16": true`` (not a section) was ignored, so the run kept the default precision; bf16 and fp16 both
    enabled (DeepSpeed refuses it) silently became fp16."""
    f = tmp_path / "ds.json"
    f.write_text(json.dumps(config))
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match=match)


def test_megatron_bf16_and_fp16_both(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Megatron-LM asserts against --bf16 with --fp16; the later switch in the table (fp16) silently won."""
    f = tmp_path / "launch.sh"
    f.write_text("--micro-batch-size 1 --bf16 --fp16\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match="--bf16 and --fp16 both given")


@pytest.mark.parametrize("text", ["strategy: [1]\n", "training: 5\n", "strategy: {tp: 2}\ntraining: [null]\n"])
def test_strategy_yaml_sections_that_are_not_mappings(cli, tmp_path: Path, text: str) -> None:  # type: ignore[no-untyped-def]
    """``strategy: [1]`` was reported only as a setting 'not used' (a warning) and the job ran without it."""
    f = tmp_path / "strategy.yaml"
    f.write_text(text)
    refused(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match="expected a mapping")
    f.write_text("strategy: {tp: 2}\ntraining:\n")  # an empty section is no setting
    assert accepted(cli, "predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--strategy",
                    str(f))["inputs"]["strategy_file"]["strategy"] == {"tp": 2}
