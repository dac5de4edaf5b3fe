"""What ux20b fixed from the expert-user pass's leftovers (each test says what was wrong)."""

from __future__ import annotations

import json
from typing import Any

import yaml
from conftest import ROOT

#: One strategy, given to memory and to predict alike.
STRATEGY = ("-m", "gpt3-175b", "-c", "dgx-h100", "-n", "1024", "--tp", "4", "--pp", "8", "--global-batch", "1024",
            "--schedule", "interleaved:2", "--zero", "1")


def _header(out: str) -> str:
    """The words above the table (the header may wrap at the terminal's width)."""
    return " ".join(out.split("┏")[0].split())


def test_memory_header_is_predicts(cli: Any) -> None:
    """memory wrote "dp 32 tp 4 pp 8 cp 1 ep 1" where predict writes "DP 32 x TP 4 x PP 8 x CP 1 (EP 1)", and left out
    the schedule and the global batch it was given: the same strategy read as two in two commands' headers."""
    mem = _header(cli("memory", *STRATEGY).out)
    pred = _header(cli("predict", *STRATEGY).out)
    # 1024 GPUs / (tp 4 x pp 8) = dp 32
    layout = ("DP 32 x TP 4 x PP 8 x CP 1 (EP 1), micro-batch 1, global batch 1024, interleaved:2, ZeRO 1, "
              "recompute none")
    assert layout in mem and layout in pred
    assert "dp 32 tp 4" not in mem
    # the same words up to the rank order, which memory does not price (predict: "..., sync bsp, rank order ...")
    assert pred.split(": ", 1)[1].startswith(mem.split(": ", 1)[1].split(", seq")[0])


SMALL = ("-m", "gpt-1.7b", "-c", "pcie-25gbe", "-n", "16")


def _predict(cli: Any, *args: str) -> dict[str, Any]:
    r = cli("predict", *SMALL, *args, "--json")
    assert r.code == 0, r.err
    doc: dict[str, Any] = json.loads(r.out)
    return doc


def test_fp16_cast_of_16_bit_gradients_says_it_changes_nothing(cli: Any) -> None:
    """fp16 compression on bf16 gradients sends min(2, 2) = 2 bytes per element, as none does: the same step time,
    and no word of why. With 32-bit gradients it halves the wire, and no such note is given."""
    none, fp16 = _predict(cli), _predict(cli, "--compression", "fp16")
    assert fp16["step_time_s"] == none["step_time_s"]
    assert any("compression fp16 changes nothing here" in n and "already 16-bit" in n for n in fp16["notes"])
    assert not any("changes nothing" in n for n in none["notes"])
    wide = _predict(cli, "--compression", "fp16", "--set", "training.grad_bytes_per_param=4")
    assert not any("changes nothing" in n for n in wide["notes"])
    # plan, with the cast pinned, warns the same words (every plan was priced as compression none)
    r = cli("plan", *SMALL, "--set", "strategy.compression=fp16", "-k", "1")
    assert r.code == 0 and "compression fp16 changes nothing here" in " ".join(r.err.split())


def test_topk_slower_than_none_says_why(cli: Any) -> None:
    """top-k at density 0.1 on 16 GPUs over 25 GbE priced 7.8 s against 3.3 s without compression, and said nothing.
    bf16 values with int32 indices: c = (2 + 4)/2 = 3 bytes sent per value byte; each rank receives
    (dp-1) rho c = 15 x 0.1 x 3 = 4.5 gradients' bytes against the ring's 2(dp-1)/dp = 30/16 = 1.875, break-even
    density 2/(dp c) = 2/48 = 0.0417 (docs/model.md#compression)."""
    none, topk = _predict(cli), _predict(cli, "--compression", "topk:0.1")
    assert topk["step_time_s"] > none["step_time_s"]
    note = next(n for n in topk["notes"] if n.startswith("compression topk:0.1 is slower than none"))
    assert "= 4.5 x the gradient" in note and "2(dp-1)/dp = 1.88 x" in note and "below density 0.0417" in note
    # below the break-even the bytes are fewer, and the note names top-k's own cost: 64 H100s, density 0.01 under
    # 2/(64 x 3) = 0.0104, on dgx-h100, where the selection and decode outweigh the bytes saved
    fast = ("-c", "dgx-h100", "-n", "64")
    base = json.loads(cli("predict", "-m", "gpt-1.7b", *fast, "--json").out)
    near = json.loads(cli("predict", "-m", "gpt-1.7b", *fast, "--compression", "topk:0.01", "--json").out)
    assert near["step_time_s"] > base["step_time_s"]
    note = next(n for n in near["notes"] if n.startswith("compression topk:0.01 is slower than none"))
    assert "break-even 0.0104 at dp 64" in note and "selection reads the gradient 3 times" in note
    # a top-k that is faster (density 0.001 on 25 GbE) gets no such note
    assert not any("slower than none" in n for n in _predict(cli, "--compression", "topk:0.001")["notes"])


def test_plan_strategy_twins_name_their_units(cli: Any, tmp_path: Any) -> None:
    """plan's JSON strategy gives dispatch_overhead (the strategy file's field) beside dispatch_overhead_s with no
    word of the former's unit; the contract is the file's field (README: written as a strategy YAML, a plan prices
    the same step), so README says its unit, and the round trip holds: a plan's strategy with dynamic assignment,
    written back as a file, prices the same step, reading a bare dispatch_overhead as seconds."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "its dispatch overhead in `dispatch_overhead`, in seconds" in readme
    assert "`bucket_bytes` and `dispatch_overhead_s`" in readme
    args = ("-m", "gpt-1.7b", "-c", "dgx-h100", "-n", "8")
    r = cli("plan", *args, "--set", "strategy.assignment=dynamic", "--set", "strategy.dispatch_overhead=2ms",
            "--allow", "dynamic-assignment", "-k", "1", "--json")
    assert r.code == 0, r.err
    plan = json.loads(r.out)["ranked"][0]
    s = plan["strategy"]
    assert s["dispatch_overhead"] == s["dispatch_overhead_s"] == 0.002  # 2 ms, in seconds under both keys
    path = tmp_path / "strategy.yaml"
    path.write_text(yaml.safe_dump(s), encoding="utf-8")
    again = _predict_on(cli, args, "--strategy", str(path))
    assert again["step_time_s"] == plan["step_time_s"]


def _predict_on(cli: Any, args: tuple[str, ...], *more: str) -> dict[str, Any]:
    r = cli("predict", *args, *more, "--json")
    assert r.code == 0, r.err
    doc: dict[str, Any] = json.loads(r.out)
    return doc


def test_hardware_show_wraps_to_the_width(cli: Any, monkeypatch: Any) -> None:
    """`hardware show` printed its YAML at PyYAML's width 110, which folds a line only once past it: lines of up to
    226 columns where every table keeps to COLUMNS / 80 when piped. Each line is now within the width unless it is
    one word (a URL: never broken), and the text still loads back to the spec --json gives."""
    names = sorted(p.stem for folder in ("accelerators", "clusters")
                   for p in (ROOT / "hardware" / folder).glob("*.yaml"))
    assert len(names) > 10
    for width in (80, 100):
        monkeypatch.setenv("COLUMNS", str(width))
        for name in names:
            r = cli("hardware", "show", name)
            assert r.code == 0, (name, r.err)
            lines = r.out.rstrip("\n").splitlines()
            long = [x for x in lines if len(x) > width and len(x.strip().split()) > 1]
            assert not long, (name, width, long[:2])
            body = [x for x in lines[1:] if not x.startswith("# ")]
            spec = json.loads(cli("hardware", "show", name, "--json").out)["spec"]
            assert yaml.safe_load("\n".join(body)) == spec, name
