"""Output that reads well where it is shown: tables within 80 columns when piped (numbers and words never
broken), plots for a slide (plain tick labels, legends outside the data), the catalog listing workloads
and scenarios, memory defaulting its cluster like predict."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT

from scalemodel.report.output import print_table

COMMANDS = [
    ("plan", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024"),
    ("plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "16", "--allow", "compression", "-k", "2"),  # "bucket 500 MB"
    ("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8"),
    ("scale",),
    ("hardware", "list"),
    ("sensitivity", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8"),
    ("stragglers", "-n", "1024"),
    ("collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "2048", "--cluster", "dgx-h100"),
    ("memory", "--tp", "8", "--pp", "8"),
    # a longer header (SP, seq 4,096): it wrapped within the 55-column table, "seq" on one line and 4,096 below
    ("memory", "-m", "llama3-8b", "-n", "64", "--strategy", str(ROOT / "tests/data/frameworks/strategy.yaml")),
    ("calibrate", str(ROOT / "tests/data/nccl/synthetic_current.log"), "-c", "dgx-a100"),
]
#: a line holding nothing but a unit or the tail of a number: a quantity broken across lines
BROKEN = re.compile(r"^[\s│┃|]*(s|ms|us|GB|GiB|MB|TB/s|GB/s|%|\d[\d,.]*)[\s│┃|]*$")


@pytest.mark.parametrize("args", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_tables_fit_80_columns_when_piped(cli, monkeypatch, args) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(*args)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert max(len(x) for x in lines) <= 80
    assert not [x for x in lines if BROKEN.match(x)]


def test_plan_quantities_are_whole_at_80_columns(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.units import format_quantity as fq

    args = ("plan", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024")
    doc = json.loads(cli(*args, "--json").out)
    monkeypatch.setenv("COLUMNS", "80")
    out = cli(*args).out
    assert len(doc["ranked"]) == 5  # plan's --top default (scalemodel/api.py plan(top=5)): an empty list passed
    for p in doc["ranked"]:
        assert fq(p["step_time_s"], "time") in out
        assert fq(p["memory_per_gpu_bytes"], "bytes") in out


def test_choices_that_did_not_matter_read_as_the_table_does(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """README's plan (GPT-3 175B on 4096 A100s): the bucket sizes that did not matter print as the table's
    settings do ("bucket 2 GB | default | 500 MB"), not as raw floats of bytes (2000000000.0)."""
    from scalemodel.units import format_quantity as fq

    args = ("plan", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "4096")
    doc = json.loads(cli(*args, "--json").out)
    buckets = [p["did_not_matter"]["bucket_bytes"] for p in doc["ranked"] if "bucket_bytes" in p["did_not_matter"]]
    assert buckets, "no bucket size is among the choices that did not matter any more: pick another plan"
    monkeypatch.setenv("COLUMNS", "1000")
    out = cli(*args).out
    assert not re.search(r"\d{7,}", out)  # no bytes as a bare number
    for vals in buckets:
        assert "bucket " + " | ".join("default" if v is None else fq(v, "bytes") for v in vals) in out


def test_print_table_layouts() -> None:
    """Boxed when it fits; borderless when only that fits; one block per row when nothing fits."""
    from rich.console import Console
    from rich.table import Table

    def table(n: int) -> Table:
        t = Table(title="T")
        for i in range(n):
            t.add_column(f"column-{i}", justify="right" if i % 2 else "left")
        t.add_row(*[f"value-{i} words" for i in range(n)])
        return t

    for n, marker in ((3, "┃"), (6, "─"), (12, "column-11: value-11 words")):
        c = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        print_table(c, table(n))
        text = c.export_text()
        assert max(len(x) for x in text.splitlines()) <= 80
        assert marker in text, (n, text)
        for i in range(n):
            assert f"value-{i}" in text  # no word broken


def test_plot_is_readable_on_a_slide() -> None:
    """Plain tick labels (no 4x10^-1 mathtext) and every legend outside its panel's data area."""
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    from scalemodel.engine.scaling import sweep
    from scalemodel.report.plot import scaling_figure
    from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

    res = sweep(load_cluster("dgx-a100"), load_workload("gpt-1.7b"), TrainingSpec(global_batch=64, micro_batch=1),
                StrategySpec(tp=2), [8, 16, 32, 64], "weak")
    fig = scaling_figure(res.payload(), plt)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            labels = [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
            assert labels and not [x for x in labels if "$" in x or "times" in x or "^" in x], labels
            legend = ax.get_legend()
            if legend is not None:
                box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
                assert box.y1 <= area.y0 + 1, "legend overlaps the data area"
        assert sum(ax.get_legend() is not None for ax in fig.axes) == 2
    finally:
        plt.close(fig)


def test_catalog_lists_workloads_and_scenarios(cli) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(cli("hardware", "list", "--json").out)
    names = {w["name"] for w in doc["workloads"]}
    assert {"gpt3-175b", "llama3-70b", "resnet50"} <= names
    assert "default" in {s["name"] for s in doc["scenarios"]}
    out = cli("hardware", "list").out
    assert "Workloads" in out and "Scenarios" in out and "llama3-70b" in out


def test_memory_defaults_like_predict(cli) -> None:  # type: ignore[no-untyped-def]
    mem = json.loads(cli("memory", "--tp", "8", "--pp", "8", "--json").out)
    pred = json.loads(cli("predict", "--tp", "8", "--pp", "8", "--json").out)
    assert mem["inputs"]["cluster"] == pred["inputs"]["cluster"] == "dgx-h100"
    assert mem["inputs"]["model"] == pred["inputs"]["model"]
    assert mem["per_gpu_bytes"]["total"] == pred["memory"]["per_gpu_bytes"]


def test_hardware_show_is_plain_text(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli("hardware", "show", "dgx-a100").out
    assert "\\x" not in out and "\\u" not in out


def test_names_print_verbatim_not_as_emoji(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A name holding an emoji code (``:fire:``) prints as typed: the console reads no emoji codes."""
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("predict", "-m", "gpt3-175b", "-c", "dgx-a100", "-n", "1024", "--tp", "8", "--pp", "8",
            "--set", 'model.name="gpt:fire:"')
    assert r.code == 0, r.err
    assert r.out.startswith("gpt:fire: on 1024 x dgx-a100")


@pytest.mark.parametrize("width", [20, 24, 27, 31, 40])
def test_a_wrapped_number_keeps_its_unit(monkeypatch, capsys, width: int) -> None:  # type: ignore[no-untyped-def]
    """A line or a table cell wraps between words but never between a number and its unit, nor the headers'
    "seq" and its length (README: numbers are never broken): plan's settings at 80 columns printed "bucket 500"
    over "MB", and check's header "seq" over "2,048"."""
    from rich.table import Table

    from scalemodel.report.output import new_console

    monkeypatch.setenv("COLUMNS", str(width))
    console = new_console()
    text = "mb 1, ZeRO-1, topk:0.001 gradients, bucket 500 MB, step 12.3 ms at 2.5 TB/s, seq 2,048"
    console.print(text)
    t = Table()
    t.add_column("settings")
    t.add_column("n", justify="right")
    t.add_row(text, "1")
    print_table(console, t)
    out = capsys.readouterr().out
    assert "\ue000" not in out
    for whole in ("500 MB", "12.3 ms", "2.5 TB/s", "seq 2,048"):
        assert out.count(whole) == 2, (whole, out)


def test_custom_plans_say_so(cli) -> None:  # type: ignore[no-untyped-def]
    """README: plans outside what mainstream frameworks run "are labelled custom". The label was rich markup
    ("[custom]" read as a style tag) and printed as nothing: "#1 : compression topk:0.001 ..."."""
    r = cli("plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "16", "--allow", "compression", "-k", "2", "--json")
    assert json.loads(r.out)["ranked"][0]["custom"], "the best plan is no longer custom: pick another case"
    out = " ".join(cli("plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "16", "--allow", "compression",
                       "-k", "2").out.split())
    assert "#1 [custom]: compression" in out and out.count("[custom]") >= 3  # two table rows and the notes
