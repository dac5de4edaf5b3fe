"""Hostile-input round 20: `calibrate runs` files that repeat a run, and training / nccl-tests logs saved as UTF-16.

Each case is one finding of a 1,896-case corpus run one process per case (calibrate runs YAML/CSV files and logs,
nccl-tests logs, hand-edited calibration blocks, framework strategy files, sweeps, --set, plan, scale, collective,
stragglers, environment); the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from test_hostile_inputs import LOG, accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

RUN = ("- {{name: {name}, cluster: dgx-a100, model: gpt-1.7b, gpus: {gpus}, tp: 2, global_batch: 64, micro_batch: 1, "
       "{measure}}}\n")
MEGATRON = "".join(f" iteration {i:8d}/ 1000 | elapsed time per iteration (ms): {1000 + i} |\n" for i in range(1, 32))
CSV_HEAD = "cluster,model,gpus,tp,global_batch,micro_batch,step_time\n"


def _calibrate(cli, runs: Path, *more: str):  # type: ignore[no-untyped-def]
    return ("calibrate", "runs", str(runs), "--factors", "compute", *more)


# --- a run given twice --------------------------------------------------------------------------------------------
# Two runs of one name were fitted and written as two rows of one name (the residual table, the overlay's
# calibration block); two runs of one configuration were fitted as two, and leave-one-out predicted each from its twin
# (a band as narrow as the in-sample one); one log given to two runs was one measurement counted for two
# configurations. All exited 0 without a word.

def test_runs_repeated_name_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="a", gpus=16, measure="step_time: 1.2 s")
                 + RUN.format(name="a", gpus=32, measure="step_time: 0.8 s"))
    line = refused(cli, *_calibrate(cli, f), inputs=(f,))
    assert line.startswith(f"error: {f}: run 2 (line 2): name: name 'a' is also run 1 (line 1)'s; "), line


@pytest.mark.parametrize("second", ["1.2 s", "9 s"])  # the same measurement twice, or two that disagree
def test_runs_repeated_configuration_is_refused(cli, tmp_path: Path, second: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.csv"
    f.write_text(CSV_HEAD + "dgx-a100,gpt-1.7b,16,2,64,1,1.2 s\ndgx-a100,gpt-1.7b,32,2,64,1,0.8 s\n"
                 f"dgx-a100,gpt-1.7b,16,2,64,1,{second}\n")
    line = refused(cli, *_calibrate(cli, f), inputs=(f,))
    assert line.startswith(f"error: {f}: row 3: same cluster, model, GPUs, training and strategy as row 1 "), line
    assert "the median of repeated measurements" in line, line


def test_runs_differing_in_one_field_are_two_runs_of_two_labels(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # unnamed, they were both labelled "dgx-a100 gpt-1.7b 16" in the table and the overlay's residual rows
    f = tmp_path / "runs.csv"
    f.write_text(CSV_HEAD + "dgx-a100,gpt-1.7b,16,2,64,1,1.2 s\ndgx-a100,gpt-1.7b,16,4,64,1,1.5 s\n")
    doc = accepted(cli, *_calibrate(cli, f))
    assert [(r["name"], r["measured_s"]) for r in doc["runs"]] == [("dgx-a100 gpt-1.7b 16", 1.2),
                                                                    ("dgx-a100 gpt-1.7b 16 (row 2)", 1.5)]


def test_runs_sharing_one_log_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "t.log").write_text(MEGATRON)
    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="a", gpus=16, measure="log: t.log")
                 + RUN.format(name="b", gpus=32, measure="log: ./t.log"))
    refused(cli, *_calibrate(cli, f), inputs=(f,), match=f"run 2 (line 2): log: '{tmp_path}/t.log' is also run 1 "
                                                         "(line 1)'s log (one log is one run's measurement); ")


# review20e: the name was compared, not the label the rows show. A run named as an earlier unnamed run's default label
# (cluster, model, GPUs), or two names alike in their first 80 characters (a label's length), were two rows of one
# label again; a cluster file given by two spellings of its path (or a link to it) was two configurations.

def test_runs_name_repeating_an_unnamed_runs_label_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="null", gpus=16, measure="step_time: 1.2 s")
                 + RUN.format(name="dgx-a100 gpt-1.7b 16", gpus=32, measure="step_time: 0.8 s"))
    line = refused(cli, *_calibrate(cli, f), inputs=(f,))
    assert line.startswith(f"error: {f}: run 2 (line 2): name: name 'dgx-a100 gpt-1.7b 16' is also run 1 (line 1)'s "
                           "label (a run's label is its name's first 80 characters"), line


def test_runs_names_alike_in_their_first_80_characters_are_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="x" * 80 + "a", gpus=16, measure="step_time: 1.2 s")
                 + RUN.format(name="x" * 80 + "b", gpus=32, measure="step_time: 0.8 s"))
    line = refused(cli, *_calibrate(cli, f), inputs=(f,))
    assert line.startswith(f"error: {f}: run 2 (line 2): name: name '{'x' * 60}' is also run 1 (line 1)'s label "), line


def test_unnamed_run_after_a_run_named_as_its_label_gets_its_number(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="dgx-a100 gpt-1.7b 16", gpus=32, measure="step_time: 0.8 s")
                 + RUN.format(name="null", gpus=16, measure="step_time: 1.2 s"))
    doc = accepted(cli, *_calibrate(cli, f))
    assert [r["name"] for r in doc["runs"]] == ["dgx-a100 gpt-1.7b 16", "dgx-a100 gpt-1.7b 16 (run 2 (line 2))"]


@pytest.mark.parametrize("second", ["absolute", "link"])
def test_runs_repeated_configuration_through_another_path_is_refused(cli, tmp_path: Path, second: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "c").mkdir()
    (tmp_path / "runs").mkdir()
    cluster = tmp_path / "c" / "a100.yaml"
    cluster.write_text(Path(__file__).parent.parent.joinpath("hardware", "clusters", "dgx-a100.yaml").read_text())
    other = cluster
    if second == "link":
        other = tmp_path / "c" / "link.yaml"
        other.symlink_to(cluster)
    f = tmp_path / "runs" / "runs.csv"
    f.write_text(CSV_HEAD.replace("step_time", "step_time,name") + f"../c/a100.yaml,gpt-1.7b,16,2,64,1,1.2 s,a\n"
                 f"{other},gpt-1.7b,16,2,64,1,1.3 s,b\n")
    line = refused(cli, *_calibrate(cli, f), inputs=(f,))
    assert line.startswith(f"error: {f}: row 2: same cluster, model, GPUs, training and strategy as row 1 "), line


# --- logs saved as UTF-16 -----------------------------------------------------------------------------------------
# Windows PowerShell 5.1's `>` and Tee-Object write UTF-16LE with a byte-order mark. Such a training log was refused
# as "no iteration-speed line found", an nccl-tests log as "no nccl-tests data rows found": every line was there,
# every other byte NUL, and the message said nothing of the encoding.



@pytest.mark.parametrize("bom, codec", [(codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")])
def test_utf16_training_log_reads_as_its_utf8_twin(cli, tmp_path: Path, bom: bytes, codec: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "t.log").write_bytes(bom + MEGATRON.encode(codec))
    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="a", gpus=16, measure="log: t.log"))
    doc = accepted(cli, *_calibrate(cli, f))
    # steps 11..31 kept after the default warm-up of 10: median 1021 ms, computed by hand
    assert doc["runs"][0]["measured_s"] == pytest.approx(1.021, rel=1e-12)


def test_utf16_log_without_a_byte_order_mark_says_so(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "t.log").write_bytes(MEGATRON.encode("utf-16-le"))
    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="a", gpus=16, measure="log: t.log"))
    refused(cli, *_calibrate(cli, f), match="no iteration-speed line found (the file holds NUL bytes: UTF-16 text "
                                            "without a byte-order mark, or not text)")


def test_utf16_nccl_log_fits_as_its_utf8_twin(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "nccl.log"
    f.write_bytes(codecs.BOM_UTF16_LE + LOG.read_text().encode("utf-16-le"))
    assert accepted(cli, "calibrate", str(f), "-c", "dgx-a100")["fit"] == accepted(
        cli, "calibrate", str(LOG), "-c", "dgx-a100")["fit"]


def test_binary_nccl_log_says_it_is_not_text(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "nccl.log"
    f.write_bytes(bytes(range(256)) * 64)
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", match="no nccl-tests data rows found (the file holds NUL")


# --- stdout that cannot write Unicode -----------------------------------------------------------------------------
# Under PYTHONIOENCODING=ascii `scale` (its table's arrows) and `calibrate runs` (a run named in Chinese) computed the
# result and then died in a UnicodeEncodeError traceback (exit 1) while printing it.

@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_text_output_to_a_non_utf8_stdout_is_printed(monkeypatch, tmp_path: Path, encoding: str) -> None:  # type: ignore[no-untyped-def]
    import io
    import sys

    from scalemodel.cli import main

    f = tmp_path / "runs.yaml"
    f.write_text(RUN.format(name="运行", gpus=16, measure="step_time: 1.2 s"))
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding)
    monkeypatch.setattr(sys, "stdout", out)
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "runs", str(f), "--factors", "compute"])
    out.flush()
    assert exc.value.code == 0
    text = raw.getvalue().decode(encoding)
    assert "??" in text and "1.2 s" in text  # the name as '??', the measured step as written


# --- a spec, runs or strategy file saved as UTF-16 ----------------------------------------------------------------
# "not UTF-8 text (byte 0xff on line 1)" named a byte, not the encoding the file is in.

@pytest.mark.parametrize("name, argv", [
    ("runs.yaml", ("calibrate", "runs", "{f}")),
    ("runs.csv", ("calibrate", "runs", "{f}")),
    ("ds.json", ("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64", "--strategy", "{f}")),
])
def test_utf16_input_file_is_named_as_utf16(cli, tmp_path: Path, name: str, argv: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / name
    f.write_bytes("x: 1\n".encode("utf-16"))  # with its byte-order mark, as Python and PowerShell write it
    line = refused(cli, *(a.format(f=f) for a in argv), inputs=(f,))
    assert "UTF-16 text (it starts with a UTF-16 byte-order mark); a UTF-8 text " in line, line
    assert line.endswith("(save it as UTF-8)"), line


# review20e: the '?' that made a table printable made data lossy. `sweep --csv > out.csv` wrote a strategy label in
# Chinese as '????' and `hardware show h800-8` its sources' '§' as '?', exit 0 (before round 20, a traceback): a CSV
# on stdout goes out as UTF-8 bytes (the bytes of `--out FILE.csv`), the YAML with YAML's escapes.

def _main_on(monkeypatch, encoding: str, argv: list[str]) -> bytes:  # type: ignore[no-untyped-def]
    import io
    import sys

    from scalemodel.cli import main

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding)
    monkeypatch.setattr(sys, "stdout", out)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out.flush()
    assert exc.value.code == 0
    return raw.getvalue()


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_sweep_csv_on_a_non_utf8_stdout_is_the_out_files_bytes(monkeypatch, tmp_path: Path, encoding: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "sweep.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: [gpt-1.7b]\nclusters: [dgx-a100]\ngpus: [8]\n"
                 "strategies: [{label: 数据并行, tp: 1}]\ntraining: {global_batch: 64}\n", encoding="utf-8")
    _main_on(monkeypatch, "utf-8", ["sweep", str(f), "-j", "1", "--out", str(tmp_path / "out.csv")])
    got = _main_on(monkeypatch, encoding, ["sweep", str(f), "-j", "1", "--csv"])
    assert "数据并行".encode() in got

    def rows(data: bytes) -> list[list[str]]:  # without the point's elapsed_s and cpu_s, which differ run to run
        table = [line.split(",") for line in data.decode("utf-8").splitlines()]
        keep = [i for i, c in enumerate(table[0]) if c not in ("elapsed_s", "cpu_s")]
        return [[r[i] for i in keep] for r in table]

    assert rows(got) == rows((tmp_path / "out.csv").read_bytes())


def test_hardware_show_on_an_ascii_stdout_keeps_every_value(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import yaml

    utf8, ascii_ = (_main_on(monkeypatch, e, ["hardware", "show", "h800-8"]).decode(e) for e in ("utf-8", "ascii"))
    assert "§3.1" in utf8  # the spec's sources cite sections
    assert yaml.safe_load(ascii_.split("\n", 1)[1]) == yaml.safe_load(utf8.split("\n", 1)[1])
