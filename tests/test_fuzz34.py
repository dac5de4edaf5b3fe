"""Hostile input, round 34 (fuzz34): what this round's fuzzing found beyond rounds 6-33. The CLI contract is
test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong and what is
allowed, nothing on stdout, no input changed.

The corpus (in-process, each case under a 20 s CPU / 60 s wall guard, checked for exit 0/1/2, one ``error:`` line
on exit 2, nothing on stdout then, no traceback, strict JSON under ``json.loads(parse_constant=raise)``, no NaN /
inf in any output, no input changed): 280 spec files (a cluster, a workload, a capacity plan and a sweep, each with
73 YAML features: !!python/object, !!python/name and !!binary / !!timestamp / !!set / !!omap / local / %TAG tags,
complex, null, integer and boolean keys, merge keys (a scalar, a list, itself), recursive aliases, an
alias bomb of 10**8 nodes, an undefined alias, several documents, %YAML 9.9, a BOM, CRLF, CR, NEL and U+2028 line
ends, tabs, empty / comment-only / null / scalar / list documents, 5,000-deep flow lists, 3,000-deep mappings,
200 KB lines, 20,000 keys, Latin-1, UTF-16, NUL, an escaped ESC and a lone surrogate, homoglyph keys); 334
``--set`` assignments over predict, memory and sensitivity (and 40 of them over plan and scale, 14 over
collective): 1e308 bandwidths, 1e-308 and 5e-324 latencies, 0 and 2**63 GPUs per node, layers 1e9, seq 1, hidden
1e9, hex, tags, anchors, 10,000-character names, lists and mappings for numbers, unknown roots, indexes 99 and -1;
49 output paths for calibrate --out, sweep -o and scale --plot (the input through ./, //, /./, ../, a hard link, a
symlink, a folder symlink; the built-in catalog files the command read; a FIFO and a symlink to one, /dev/stdout,
/dev/null, /dev/full, /proc/self/fd/1, a read-only folder and file, a missing folder, a path through a file, 300-
character names, 3,000-deep paths, NUL, a lone surrogate, '-', '', ~nouser; a sweep's YAML model named .csv and -o
at it with 1 and 2 workers); 80 sweep / scale / plan size cases (2,000 GPU counts as `best`, 1,000 repeated models
or strategies, 2**63 and 1e6 GPUs, -j 0 / 1e5 / -1, unreachable and 1,000-character schedulers, 100,000 --gpus
counts, ranges, -k 1e6, every --constraint / --allow / --sync-modes form); 113 calibrate cases (nccl-tests logs of
one row, two rows, one row five times, reversed, each time / size column at -51, 0, 1e-320, 1e308, nan, inf, -0,
1e400, 1.5 in one row and in all, constant times, 480,000 rows, every option at its extremes; runs files with one
run, the same run three times, equal step times, step_time / tokens_per_s of every type and magnitude, 12 hostile
CSVs, logs that are /dev/zero, the runs file itself, /etc/passwd, warmup_steps 1e9 and -1); 368 FIFO / stdin /
device / folder / link-loop / '-' / '' / NUL paths as every file argument of every command, stragglers options and
--samples files, collective options, schema kinds and hardware subcommands; 198 sensitivity / predict / memory
option extremes, check --set on every assertion, and 28 strategy files (YAML tags, anchors, merge keys, duplicate
keys in YAML and JSON, NaN, 1e400, 100,000-deep JSON, TOML and Megatron flags at 0 / 1e400 / twice); 126
command-line forms (abbreviated and repeated options, --opt=value, '--', full-width and Arabic-Indic digits,
5,000 --set options, ill-formed --set paths, unit spellings); 462 spec-file values (each numeric field of a
workload, a cluster, its tiers and a capacity plan at 22 hostile values); 19 outputs scanned for negative numbers
and -0. 2,029 cases in all. Findings, each fixed at the spec layer where the value is read and tested below:

1. a decimal beyond a 64-bit float (``1e400``) was read as inf, and a nonzero one below it (``1e-400``) as 0, in
   every YAML input (spec files, --set, --samples, runs CSV cells): the refusal quoted a value the user did not
   write, "layers: Input should be a finite number (got inf)", "latency: Input should be greater than 0 (got
   0.0)"; the same for a quantity string ('1e-400 s', '1e-320 ns') that rounds to 0;
2. an nccl-tests log whose rows all repeat one message size was fitted (``5 sizes``, latency "not determined"):
   one size gives one time, which no pair of latency and bandwidth is determined by;
3. an nccl-tests data row whose size is a number but not an integer (1.5, 1e400) was dropped without the warning
   every other unread data row gets;
4. a runs file's ``warmup_steps: 1e9`` (a whole number, as spec integers take it) was "'1000000000.0' is not a
   step count", and the bound (1e9) was not said.

Accepted on purpose (not findings): `sweep` of 2,000 `best` points runs for its documented budget (specs/sweep.py
POINT_CPU_S); ``--help`` wins over ``--json`` (help text, exit 0); a ``--samples`` file of one step time is an
empirical distribution with cv 0 (cost/stragglers.py, ddof 1 documented); a read-only existing output file is
replaced by the atomic rename (as ``sed -i`` does; root in this sandbox cannot test the permission either way).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)
from test_train_logs import megatron_line

from scalemodel.errors import InputError
from scalemodel.specs import yamlread
from scalemodel.units import parse_quantity

LOG = ROOT / "tests" / "data" / "nccl" / "synthetic_current.log"
LLAMA = (ROOT / "examples" / "workloads" / "llama2-7b.yaml").read_text()
RUN = ("-m", "llama2-7b", "-c", "dgx-h100", "-n", "8", "--json")


# --- 1. decimals a 64-bit float cannot hold ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "said"), [
    ("1e400", "1e400 is beyond"), ("-1e400", "-1e400 is beyond"), ("1.5e309", "1.5e309 is beyond"),
    ("1e-400", "1e-400 is below"), ("-2.5e-999", "-2.5e-999 is below"), ("2e-324", "2e-324 is below")])
def test_a_decimal_outside_the_float_range_is_refused_as_written(text: str, said: str) -> None:
    with pytest.raises(InputError, match=f"^f.yaml: x: {said} the range of a number"):
        yamlread.load(f"x: {text}\n", "f.yaml")


@pytest.mark.parametrize(("text", "value"), [
    ("1.7e308", 1.7e308), ("5e-324", 5e-324), ("0.0e-999", 0.0), ("-0.0", 0.0), ("0e400", 0.0), (".inf", float("inf")),
    ("1e9", 1e9)])
def test_decimals_a_float_holds_are_read(text: str, value: float) -> None:
    assert yamlread.load(f"x: {text}\n", "f.yaml")[0] == {"x": value}


SPEC_CASES = [  # (file text, argv after the file, what the line says)
    (LLAMA.replace("layers: 32", "layers: 1e400"), "layers: 1e400 is beyond the range of a number (a 64-bit float)"),
    (LLAMA.replace("layers: 32", "layers: 1e-400"), "layers: 1e-400 is below the range of a number"),
    (LLAMA.replace("hidden: 4096", "hidden: -1e999"), "hidden: -1e999 is beyond the range"),
]


@pytest.mark.parametrize(("text", "said"), SPEC_CASES)
def test_a_spec_file_decimal_beyond_a_float_names_its_line_and_value(cli: Any, tmp_path: Path, text: str,
                                                                     said: str) -> None:
    assert text != LLAMA
    path = tmp_path / "w.yaml"
    path.write_text(text)
    line = refused(cli, "memory", "-m", str(path), "-c", "dgx-h100", "-n", "8", "--json", inputs=(path,))
    assert f"w.yaml:{4 if 'layers' in said else 5}: {said}" in line, line
    assert "(got inf)" not in line and "(got 0" not in line, line
    assert "a number of magnitude 0 or 5e-324 to 1.79e308" in line, line


@pytest.mark.parametrize(("argv", "said"), [
    (("predict", *RUN, "--set", "cluster.tiers.0.latency=1e-400"),
     "--set cluster.tiers.0.latency: 1e-400 is below the range of a number"),
    (("predict", *RUN, "--set", "cluster.tiers.0.bandwidth=-1e400"),
     "--set cluster.tiers.0.bandwidth: -1e400 is beyond the range of a number"),
    (("predict", *RUN, "--set", "training.train_tokens=1e400"),
     "--set training.train_tokens: 1e400 is beyond the range of a number"),
    (("memory", *RUN, "--set", "model.layers=1e400"), "--set model.layers: 1e400 is beyond the range"),
    (("predict", *RUN, "--set", "cluster.tiers.0.efficiency=1e-400"),
     "--set cluster.tiers.0.efficiency: 1e-400 is below the range"),
    # quantity strings: the number and its unit (1e-320 ns is 1e-329 s)
    (("predict", *RUN, "--set", "cluster.tiers.0.latency=1e-400 s"), "'1e-400 s' is too small (below the float range"),
    (("predict", *RUN, "--set", "cluster.tiers.0.latency=1e-320 ns"), "'1e-320 ns' is too small"),
    (("stragglers", "-n", "8", "--json", "--mean", "1e-400s"), "--mean: '1e-400s' is too small"),
    (("predict", *RUN, "--train-tokens", "1e-400"), "--train-tokens: '1e-400' is too small"),
])
def test_set_and_option_decimals_beyond_a_float_are_named(cli: Any, argv: tuple[str, ...], said: str) -> None:
    line = refused(cli, *argv)
    assert said in line, line
    assert "should be greater than" not in line and "(got inf)" not in line, line


@pytest.mark.parametrize(("value", "kind", "si"), [
    ("0 s", "time", 0.0), ("0.000e-500 s", "time", 0.0), ("5e-324", "time", 5e-324), ("1e-300 ns", "time", 1e-309),
    (5e-324, "bytes", 5e-324)])
def test_quantities_that_are_zero_or_hold_in_a_float_are_read(value: Any, kind: str, si: float) -> None:
    assert parse_quantity(value, kind) == si


def test_a_samples_file_and_a_runs_csv_cell_read_yaml_decimals_alike(cli: Any, tmp_path: Path) -> None:
    samples = tmp_path / "s.yaml"
    samples.write_text("- 1e-400\n- 1\n")
    line = refused(cli, "stragglers", "-n", "8", "--json", "--samples", str(samples), inputs=(samples,))
    assert "s.yaml:1: [0]: 1e-400 is below the range of a number" in line, line
    runs = tmp_path / "runs.csv"
    runs.write_text("cluster,model,gpus,global_batch,tokens_per_s\ndgx-a100,gpt-1.7b,8,64,1e400\n")
    line = refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,))
    assert "runs.csv: row 1: tokens_per_s: 1e400 is beyond the range of a number" in line, line


# --- 2 and 3. nccl-tests logs: one message size repeated, a size that is not an integer ----------------------------

def _log(tmp_path: Path, keep: Any) -> Path:
    lines = LOG.read_text().splitlines()
    head = [s for s in lines if s.startswith("#")]
    rows = [s for s in lines if s.strip() and not s.startswith("#")]
    path = tmp_path / "a.log"
    path.write_text("\n".join(head + keep(rows)) + "\n")
    return path


@pytest.mark.parametrize("copies", [2, 5])
def test_a_log_of_one_message_size_repeated_is_refused(cli: Any, tmp_path: Path, copies: int) -> None:
    """A log cut to one row and copied: one size's time is met by a latency and a bandwidth along a whole line, so
    the fit of both is not determined; it was fitted and shown as '5 sizes' (exit 0)."""
    path = _log(tmp_path, lambda rows: [rows[10]] * copies)
    line = refused(cli, "calibrate", str(path), "-c", "dgx-a100", "--json", inputs=(path,))
    assert line.startswith(f"error: {path}: need at least two rows with size > 0 to fit latency and bandwidth, at "
                           f"two sizes or more: its {copies} rows are all at 1048576 bytes; an nccl-tests log of a "
                           "size sweep"), line


def test_two_sizes_still_fit(cli: Any, tmp_path: Path) -> None:
    """Fitted from all three rows, each row's time the mean of the log's out-of-place and in-place times, read off
    the two rows by hand (synthetic_current.log: 1 MiB 68.97 / 68.28 us, 2 MiB 85.72 / 84.87 us; ux37)."""
    path = _log(tmp_path, lambda rows: [rows[10], rows[10], rows[11]])
    r = cli("calibrate", str(path), "-c", "dgx-a100", "--json")
    assert r.code == 0, r.err
    fit = json.loads(r.out)["fit"]
    assert fit["rows_used"] == 3
    assert [row["size_bytes"] for row in fit["residuals"]] == [1048576, 1048576, 2097152]
    assert [row["measured_s"] for row in fit["residuals"]] == pytest.approx([68.625e-6, 68.625e-6, 85.295e-6],
                                                                           rel=1e-12)


@pytest.mark.parametrize("size", ["1.5", "1e400", "32768.0", "-1.5"])
def test_a_row_whose_size_is_not_an_integer_is_warned(cli: Any, tmp_path: Path, size: str) -> None:
    def swap(rows: list[str]) -> list[str]:
        bad = rows[5].split()
        bad[0] = size
        return [*rows[:5], "  ".join(bad), *rows[6:]]

    path = _log(tmp_path, swap)
    r = cli("calibrate", str(path), "-c", "dgx-a100", "--json")
    assert r.code == 0, r.err
    lineno = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if s.startswith(size + " "))
    assert r.err.strip() == (f"warning: {path}: 1 data row(s) not fitted: line {lineno} (a time that is not a "
                             "positive finite number of microseconds, a size or count that is not a whole number, "
                             "or missing columns); the fit uses the other 23 rows"), r.err


# --- 4. a runs file's warmup_steps ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "ok"), [("1e9", True), ("1000000000", True), ("10.0", True), ("1000000001", False),
                                          ("1.5", False), ("-1", False), ("true", False)])
def test_warmup_steps_takes_a_whole_number_up_to_its_bound(cli: Any, tmp_path: Path, value: str, ok: bool) -> None:
    (tmp_path / "m.log").write_text("\n".join(megatron_line(i, 1000.0) for i in range(1, 31)))
    runs = tmp_path / "runs.yaml"
    runs.write_text("- {cluster: dgx-a100, model: gpt-1.7b, gpus: 8, global_batch: 64, log: m.log, "
                    f"warmup_steps: {value}}}\n")
    if ok:  # read: the log's steps are all at or below a warm-up this large (none after it), or 20 are kept
        r = cli("calibrate", "runs", str(runs), "--json")
        assert "(line 1): warmup_steps:" not in r.err, r.err  # not refused as a field
        assert r.code == 0 if value == "10.0" else "none after step 1000000000" in r.err, r.err
        return
    line = refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,))
    assert line.endswith(f"run 1 (line 1): warmup_steps: {value!r} is not a step count; a whole number from 0 to "
                         "1e+09 (logged steps up to it are dropped)".replace("'true'", "'True'")), line
