"""Bad or extreme input anywhere on the command line: one `error:` line on stderr and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOG = str(ROOT / "tests" / "data" / "nccl" / "synthetic_current.log")


@pytest.mark.parametrize("args", [
    ("predict", "--gpus", "abc"),                      # click type error
    ("predict", "--bogus"),                            # unknown option
    ("collective", "--gpus", "8"),                     # missing required option
    ("schema", "bogus"),                               # bad choice
    ("calibrate", LOG, "--cluster", "dgx-a100", "--op", "bogus"),
    ("calibrate", LOG, "--cluster", "dgx-a100", "--out", "/nonexistent/dir/x.yaml"),
    ("collective", "--cluster", "dgx-h100", "--gpus", "64", "--size", "1e307B"),  # result overflows
    ("collective", "--cluster", "dgx-h100", "--gpus", "64", "--size", "1e307B", "--json"),
    ("predict", "--model", "llama2-7b", "--gpus", "99999999999999999999999"),
    ("predict", "--model", "llama2-7b", "--gpus", "64", "--sync", "hier:3"),
    ("predict", "--model", "mixtral-8x7b", "--gpus", "64", "--ep", "3"),
    ("predict", "--model", "llama2-7b", "--gpus", "64", "--pp", "8", "--schedule", "interleaved"),
    ("predict", "--model", "llama2-7b", "--gpus", "64", "--dp-comm", "ps:0"),
])
def test_one_line_error_and_exit_2(cli, args) -> None:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    assert "Traceback" not in r.err


def test_deeply_nested_yaml_is_an_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    deep = tmp_path / "deep.yaml"
    deep.write_text("x: " + "{a: " * 2000 + "1" + "}" * 2000)
    r = cli("hardware", "validate", str(deep))
    assert r.code == 2 and r.err.startswith("error: ") and "deep" in r.err


def test_single_gpu_collective_prints_no_warnings(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("collective", "--cluster", "dgx-h100", "--gpus", "1", "--size", "1GiB")
    assert r.code == 0 and r.err == ""


def test_group_without_subcommand_shows_help(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("hardware")
    assert r.code == 0 and "validate" in r.out
