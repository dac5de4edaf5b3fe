"""scripts/validate_collectives.py on a measurement file of the user's: the bad-input contract of
test_hostile_inputs.py (one ``error: <file>: <field>: <what>; <allowed>`` line, exit 2, nothing on stdout, never a
traceback or a hang), the CLI's bounded reader and strict YAML 1.2 loader, and strictly valid ``--json``.

Before this, the script read the file with ``Path.read_text`` and ``yaml.safe_load`` and indexed it unchecked: each
case below was a traceback (KeyError, TypeError, AttributeError, ZeroDivisionError, statistics.StatisticsError), a
silent wrong reading (``ranks: yes`` read as 1, a duplicate key's second value winning, a NaN bandwidth printed as a
nan error), or a read that never ended (a FIFO, /dev/zero).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, script_module
from test_hostile_inputs import no_hang  # noqa: F401 (autouse guard: a case that blocks fails after 20 s)

SCRIPT = ROOT / "scripts" / "validate_collectives.py"
NCCL = ROOT / "hardware" / "measurements" / "nccl.yaml"

CASE = """\
- id: my_case
  kind: collective
  cluster: dgx-h100
  ranks: 8
  collective: {op: all_reduce, dtype: float32}
  measured:
    msg_bytes: [1048576, 8589934592]
    busbw_GBps: [40.0, 400.0]
"""


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = script_module("validate_collectives").main(["validate_collectives.py", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _refused(capsys: pytest.CaptureFixture[str], f: Path | str, match: str, *flags: str) -> str:
    code, out, err = _run(capsys, str(f), *flags)
    lines = err.strip().splitlines()
    assert code == 2, (code, out[-300:], err[-300:])
    assert len(lines) == 1 and lines[0].startswith(f"error: {f}"), err
    assert "; " in lines[0], lines[0]  # what is allowed follows the problem
    assert match in lines[0], lines[0]
    assert out == ""
    return lines[0]


def _file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "nccl.yaml"
    f.write_text(text)
    return f


def test_the_sample_case_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The base of the edits below is a good case: each refusal is the edit's, not the base's."""
    code, out, err = _run(capsys, str(_file(tmp_path, CASE)), "--json")
    assert code == 0 and err == "", err
    doc = json.loads(out)
    assert [p["size_bytes"] for p in doc["points"]] == [1048576.0, 8589934592.0]
    # measured time = bytes x 2(p-1)/p / busbw, by hand: 2^20 x 1.75 / 40e9 and 2^33 x 1.75 / 400e9
    assert doc["points"][0]["measured_s"] == pytest.approx(2**20 * 1.75 / 40e9, rel=1e-12)
    assert doc["points"][1]["measured_s"] == pytest.approx(2**33 * 1.75 / 400e9, rel=1e-12)


@pytest.mark.parametrize("text, match", [
    ("a: 1\n", "top level: a dict; a YAML list of cases"),  # was TypeError: iterating a dict's keys, str indices
    ("hello\n", "top level: a str; a YAML list of cases"),
    ("", "top level: empty; a YAML list of cases"),  # was TypeError: 'NoneType' object is not iterable
    ("- 3\n", "cases[0]: int 3 is not a case; a mapping"),  # was AttributeError: 'int' has no attribute 'get'
    ("- {id: x, kind: note}\n", "no collective case to compare"),  # was statistics.StatisticsError (no points)
])
def test_a_file_that_is_not_a_list_of_cases_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       text: str, match: str) -> None:
    _refused(capsys, _file(tmp_path, text), match)


@pytest.mark.parametrize("edit, match", [
    # fields missing or of the wrong type: KeyError / TypeError / AttributeError tracebacks before
    (("  ranks: 8\n", ""), "cases[0] (my_case): ranks: missing; an integer from 2 to 1e+08"),
    (("ranks: 8", "ranks: 8.5"), "ranks: 8.5; an integer from 2"),  # int(8.5) = 8 silently
    (("ranks: 8", "ranks: '8'"), "ranks: '8'; an integer from 2"),
    (("ranks: 8", "ranks: 1"), "ranks: 1; an integer from 2"),  # ZeroDivisionError: the time of 1 rank is 0
    (("ranks: 8", "ranks: -8"), "ranks: -8; an integer from 2"),
    (("ranks: 8", "ranks: yes"), "ranks: 'yes'; an integer from 2"),  # YAML 1.1 read yes as true = 1 rank
    (("id: my_case", "id: [my_case]"), "id: ['my_case']; a string"),
    (("  measured:\n    msg_bytes: [1048576, 8589934592]\n    busbw_GBps: [40.0, 400.0]\n", ""),
     "measured: missing; a mapping"),
    (("collective: {op: all_reduce, dtype: float32}", "collective: [all_reduce]"), "collective.op: ['all_reduce']"),
    (("dtype: float32}", "algorithm: NVSL}"), "collective.algorithm: 'NVSL'; one of Tree, Ring"),  # silently auto
    (("cluster: dgx-h100", "cluster: [dgx-h100]"), "cluster: ['dgx-h100']; a built-in cluster name"),
    (("msg_bytes: [1048576, 8589934592]", "msg_bytes: 1048576"), "measured.msg_bytes: 1048576; a non-empty list"),
    (("msg_bytes: [1048576, 8589934592]", "msg_bytes: []"), "measured.msg_bytes: []; a non-empty list"),
    (("msg_bytes: [1048576, 8589934592]", "msg_bytes: [1 MiB, 8589934592]"), "msg_bytes[0]: '1 MiB' is not usable"),
    (("busbw_GBps: [40.0, 400.0]", "busbw_GBps: [40.0]"), "1 values for 2 msg_bytes"),  # ValueError from zip strict
    (("    busbw_GBps: [40.0, 400.0]\n", ""), "measured.busbw_GBps: missing"),  # silently no points before
    # numbers not finite, not positive or out of range: nan/inf errors printed, ZeroDivisionError, negative times
    (("40.0,", ".nan,"), "busbw_GBps[0]: nan is not usable; a number from 1e-06 to 1e+06 (GB/s)"),
    (("40.0,", ".inf,"), "busbw_GBps[0]: inf is not usable"),
    (("40.0,", "-40.0,"), "busbw_GBps[0]: -40.0 is not usable"),
    (("40.0,", "0,"), "busbw_GBps[0]: 0 is not usable"),  # ZeroDivisionError
    (("40.0,", "1e-320,"), "busbw_GBps[0]: 1e-320 is not usable"),  # a time of inf
    (("[1048576,", "[-1048576,"), "msg_bytes[0]: -1048576 is not usable; a number from 1 to 1.1259e+15 (bytes)"),
    (("[1048576,", "[0,"), "msg_bytes[0]: 0 is not usable"),  # ZeroDivisionError: measured time 0
    (("[1048576,", "[.inf,"), "msg_bytes[0]: inf is not usable"),
    (("[1048576,", "[" + "9" * 5000 + ","), "integer with 5000 digits"),  # int() of 5000 digits: ValueError
    # strict YAML: the second value of a duplicate key silently won
    (("  ranks: 8\n", "  ranks: 8\n  ranks: 16\n"), "duplicate key 'ranks'"),
])
def test_a_bad_case_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           edit: tuple[str, str], match: str) -> None:
    assert edit[0] in CASE
    f = _file(tmp_path, CASE.replace(*edit))
    for flags in ([], ["--json"]):
        _refused(capsys, f, match, *flags)


@pytest.mark.parametrize("measured, match", [
    ("{peak_busbw_GBps: .inf}", "measured.peak_busbw_GBps: inf is not usable; a number from 1e-06"),
    ("{peak_busbw_GBps: -215}", "measured.peak_busbw_GBps: -215 is not usable"),
    ("{peak_busbw_GBps: yes}", "measured.peak_busbw_GBps: 'yes' is not usable"),
    ("{latency_us: -6}", "measured.latency_us: -6 is not usable; a number from 0.001 to 1e+09 (microseconds)"),
    ("{latency_us: 6, msg_bytes_range: []}", "measured.msg_bytes_range: []; a non-empty list"),
    ("{latency_us: 6, msg_bytes_range: [.nan]}", "msg_bytes_range[0]: nan is not usable"),
    ("{busbw: 3}", "measured: no measurement (busbw); msg_bytes + busbw_GBps"),  # silently no points before
])
def test_a_bad_peak_or_latency_case_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               measured: str, match: str) -> None:
    text = CASE[:CASE.index("  measured:")] + f"  measured: {measured}\n"
    _refused(capsys, _file(tmp_path, text), match)


@pytest.mark.parametrize("cluster, match", [
    ("nope", "cluster 'nope': cluster: unknown built-in cluster 'nope'; built-in clusters: "),
    ("'dgx-h100|cluster.tiers.1.bandwidth=-1'", "tiers.1.bandwidth: Input should be greater than 0"),
    ("'dgx-h100|cluster.bogus=1'", "bogus"),
    ("'|ring'", "cluster: '|ring'; a built-in cluster name"),
])
def test_an_unknown_or_bad_cluster_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              cluster: str, match: str) -> None:
    _refused(capsys, _file(tmp_path, CASE.replace("cluster: dgx-h100", f"cluster: {cluster}")), match)


def test_more_ranks_than_the_cluster_has_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, _file(tmp_path, CASE.replace("ranks: 8", "ranks: 99999999")),
             "ranks: 99999999 GPUs: more GPUs than the cluster has")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "oversized", "missing"])
def test_files_it_cannot_read_whole_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                kind: str) -> None:
    """A FIFO or /dev/zero was read with Path.read_text: the script blocked (or filled memory) for ever."""
    f = tmp_path / "nccl.yaml"
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", f)
    elif kind == "directory":
        f.mkdir()
    elif kind == "oversized":
        f.write_text(CASE + "# " + "x" * (256 * 2**10) + "\n")
    match = {"fifo": "is a FIFO (named pipe), not a regular file", "dev-zero": "is a character device",
             "directory": "is a directory", "oversized": "larger than the 256 KiB limit",
             "missing": "measurement file not found"}[kind]
    _refused(capsys, f, match)


def test_a_fifo_does_not_hang_the_script(tmp_path: Path) -> None:
    """The script as a user runs it (its own process, with a timeout): one line, exit 2, no traceback."""
    f = tmp_path / "nccl.yaml"
    os.mkfifo(f)
    r = subprocess.run([sys.executable, str(SCRIPT), str(f), "--json"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout[-300:], r.stderr[-300:])
    assert r.stderr.strip().splitlines() == [f"error: {f}: is a FIFO (named pipe), not a regular file; "
                                             f"a measurement file (a regular file)"]


@pytest.mark.parametrize("args, match", [
    (["--family"], "--family ''"),  # IndexError before
    (["--family", "bogus"], "--family 'bogus'"),
    (["--bogus"], "--bogus not understood"),  # read as a file name before
    ([str(NCCL), str(NCCL)], "not understood"),  # the second file was silently ignored
])
def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str], args: list[str], match: str) -> None:
    code, out, err = _run(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, (code, err)
    assert lines[0].startswith("error: arguments: ") and match in lines[0] and "; usage: " in lines[0], lines[0]


def _strict_json(text: str) -> dict:  # type: ignore[type-arg]
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)  # type: ignore[no-any-return]


@pytest.mark.parametrize("path", [None, NCCL])
def test_the_published_files_still_validate(capsys: pytest.CaptureFixture[str], path: Path | None) -> None:
    """The built-in measurement files pass every check; the text and the strictly valid --json agree row by row
    (the text output of both files was compared byte for byte before and after the checks were added)."""
    args = [] if path is None else [str(path)]
    code, text, err = _run(capsys, *args)
    assert code == 0 and err == "", err
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0 and err == "", err
    doc = _strict_json(out)
    rows = [line for line in text.splitlines()[1:] if line and not line.startswith(("family", "\n"))]
    rows = rows[:len(doc["points"])]
    assert len(doc["points"]) > 0
    for line, p in zip(rows, doc["points"], strict=True):
        assert line.split()[0] == p["case"] and line.split()[-1] == f"{p['error']:+.1%}", (line, p)
        assert math.isfinite(p["error"]) and p["measured_s"] > 0 and p["predicted_s"] > 0
    assert f"{doc['all']['points']} points: median |error| {doc['all']['median_abs_error']:.1%}" in text
