"""`scalemodel sweep`: a grid through the same engine entry points as `plan` and `predict`, on local
processes or a Dask cluster, written as one tidy table (CSV, JSON lines, Parquet)."""

from __future__ import annotations

import csv
import gc
import io
import json
from pathlib import Path

import pytest
from conftest import load_yaml

from scalemodel.engine.grid import COLUMNS, run_grid
from scalemodel.specs.sweep import load_sweep

SWEEP = """\
kind: sweep
name: small
models: [gpt-1.7b]
clusters: [dgx-a100]
gpus: [8, 16, 20000]
strategies: [best, {label: tp2, tp: 2}]
training: {global_batch: 64}
"""
VOLATILE = ("elapsed_s", "cpu_s")


def _stable(rows: list[dict]) -> list[dict]:  # type: ignore[type-arg]
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    p = tmp_path / "small.yaml"
    p.write_text(SWEEP)
    return p


def test_rows_equal_plan_and_predict(cli, sweep_file: Path) -> None:  # type: ignore[no-untyped-def]
    """Each point is what `scalemodel plan --top 1` / `scalemodel predict` say for it (one route)."""
    r = cli("sweep", str(sweep_file), "--json", "--workers", "1")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    rows = doc["rows"]
    assert doc["columns"] == list(COLUMNS) and len(rows) == 6
    assert [(x["gpus"], x["strategy"]) for x in rows] == [(8, "best"), (8, "tp2"), (16, "best"), (16, "tp2"),
                                                          (20000, "best"), (20000, "tp2")]
    for row in rows[:4]:
        if row["strategy"] == "best":
            p = cli("plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", str(row["gpus"]), "--global-batch", "64",
                    "--top", "1", "--json")
            ref = json.loads(p.out)["ranked"][0]
            assert row["step_time_s"] == ref["step_time_s"]
            assert row["candidates_evaluated"] == json.loads(p.out)["candidates_evaluated"]
            assert {k: row[k] for k in ("tp", "pp", "dp", "micro_batch")} == {
                k: ref["strategy"][k] for k in ("tp", "pp", "dp", "micro_batch")}
        else:
            p = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", str(row["gpus"]), "--global-batch", "64",
                    "--tp", "2", "--json")
            ref = json.loads(p.out)
            assert row["step_time_s"] == ref["step_time_s"]
            assert row["tokens_per_s"] == ref["throughput"]["tokens_per_s"]
            assert row["memory_per_gpu_bytes"] == ref["memory"]["per_gpu_bytes"]
        assert row["status"] == "ok"
        assert sum(row[f"{k}_s"] for k in ("compute",) if f"{k}_s" in row) > 0
    # a point the cluster cannot hold is a row with the reason, not the end of the study
    for row in rows[4:]:
        assert row["status"] == "error" and "16000" in row["message"] and row["step_time_s"] is None
    assert doc["errors"] == 2


def test_process_pool_gives_the_same_rows(sweep_file: Path) -> None:
    spec, models, clusters = load_sweep(sweep_file)
    one = run_grid(spec, models, clusters, workers=1)
    two = run_grid(spec, models, clusters, workers=2)
    assert two.backend == "local processes" and two.workers == 2
    assert _stable(two.rows) == _stable(one.rows)
    assert one.points_per_cpu_s > 0


def test_tables_written(cli, sweep_file: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    csv_path, jl_path = tmp_path / "t.csv", tmp_path / "t.jsonl"
    r = cli("sweep", str(sweep_file), "-j", "1", "--out", str(csv_path), "--out", str(jl_path))
    assert r.code == 0, r.err
    table = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert list(table[0]) == list(COLUMNS) and len(table) == 6
    lines = [json.loads(x) for x in jl_path.read_text().splitlines()]
    assert [x["point"] for x in lines] == list(range(6))
    assert float(table[1]["step_time_s"]) == lines[1]["step_time_s"]
    pq = tmp_path / "t.parquet"
    r = cli("sweep", str(sweep_file), "-j", "1", "--out", str(pq))
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        assert r.code == 2 and "pyarrow" in r.err and not pq.exists()
    else:
        assert r.code == 0 and parquet.read_table(pq).num_rows == 6
    # never over an input, never an unknown format; both refused before the work
    r = cli("sweep", str(sweep_file), "-j", "1", "--out", str(sweep_file.with_suffix(".csv")), "--out",
            str(tmp_path / "x.xlsx"))
    assert r.code == 2 and ".csv, .jsonl or .parquet" in r.err
    sweep_csv = tmp_path / "in.csv"
    sweep_csv.write_text(SWEEP)
    r = cli("sweep", str(sweep_csv), "-j", "1", "--out", str(sweep_csv))
    assert r.code == 2 and "input" in r.err and sweep_csv.read_text() == SWEEP


def test_bad_sweep_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text(SWEEP.replace("gpus:", "gpu:"))
    r = cli("sweep", str(bad))
    assert r.code == 2 and r.err.startswith("error: ") and "gpu" in r.err
    bad.write_text(SWEEP.replace("gpt-1.7b", "gpt-1.7c"))
    r = cli("sweep", str(bad))
    assert r.code == 2 and "gpt-1.7b" in r.err  # suggests the nearest name
    bad.write_text(SWEEP.replace("{label: tp2, tp: 2}", "{tp: 0}"))
    r = cli("sweep", str(bad))
    assert r.code == 2 and "tp" in r.err


def test_schema_validates_the_example(cli) -> None:  # type: ignore[no-untyped-def]
    import jsonschema

    r = cli("schema", "sweep")
    schema = json.loads(r.out)
    root = Path(__file__).resolve().parents[1]
    example = load_yaml(root / "examples" / "sweeps" / "capacity.yaml")
    jsonschema.validate(example, schema)
    assert json.loads((root / "schemas" / "sweep.schema.json").read_text()) == schema
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**example, "strategies": ["fastest"]}, schema)


def test_dask_cluster(cli, sweep_file: Path) -> None:  # type: ignore[no-untyped-def]
    """The same grid on a Dask cluster the test starts itself (one in-process worker)."""
    distributed = pytest.importorskip("distributed")
    # the file, as the CLI passes it: a row's error names the sweep file's field (sweep.yaml: strategies[1].dp)
    local = run_grid(*load_sweep(sweep_file), workers=1, inputs={"file": str(sweep_file)})
    # a Client an earlier test left half-built (an unreachable scheduler) closes in its __del__, which must not run
    # in another thread while the LocalCluster starts its loop (a CI run hung in LoopRunner.start): collect it here
    gc.collect()
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        r = cli("sweep", str(sweep_file), "--scheduler", cluster.scheduler_address, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["backend"].startswith("dask ")
    assert _stable(doc["rows"]) == _stable(json.loads(json.dumps(local.rows)))


def test_unreachable_scheduler(cli, sweep_file: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("distributed")
    monkeypatch.setattr("scalemodel.engine.grid.CONNECT_TIMEOUT_S", 1)
    r = cli("sweep", str(sweep_file), "--scheduler", "tcp://127.0.0.1:9")
    assert r.code == 2 and r.err.startswith("error: --scheduler")


UNPRICED = """\
kind: sweep
name: unpriced
models: [gpt-1.7b]
clusters: [dgx-a100]
gpus: [8, 16]
strategies: [{label: flex, moe_flex_dispatcher: true}, {label: tp2, tp: 2}]
training: {global_batch: 64}
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_points_warnings_reach_the_json_once_with_its_label(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                              workers: str) -> None:
    """A warning raised while a point is priced (here a strategy field the dense model gives nothing to act on)
    reaches the sweep's `warnings` once, named by the first point that raised it, whether the points ran in
    this process or in a pool of processes (where it used to be lost)."""
    p = tmp_path / "unpriced.yaml"
    p.write_text(UNPRICED)
    r = cli("sweep", str(p), "--json", "--workers", workers)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [(x["gpus"], x["strategy"], x["status"]) for x in doc["rows"]] == [
        (8, "flex", "ok"), (8, "tp2", "ok"), (16, "flex", "ok"), (16, "tp2", "ok")]
    flex = [w for w in doc["warnings"] if "moe_flex_dispatcher" in w]
    assert flex == ["sweep point 0 (gpt-1.7b, dgx-a100, 8 GPUs, flex) (and 1 other point): "
                    "strategy.moe_flex_dispatcher is not priced: the model has no MoE layers"]
    assert all(set(x) == set(COLUMNS) for x in doc["rows"])  # the warnings travel with a row, not as a column
    spec, models, clusters = load_sweep(p)
    assert [w for w in run_grid(spec, models, clusters, workers=int(workers)).warnings
            if "moe_flex_dispatcher" in w] == flex  # the library's result carries them too
    text = cli("sweep", str(p), "--workers", workers)  # the table: the same line once on stderr
    assert text.code == 0 and [ln for ln in text.err.splitlines() if "moe_flex_dispatcher" in ln] == [
        "warning: " + flex[0]]


def test_new_columns_come_last_so_earlier_ones_keep_their_positions() -> None:
    """A reader that takes the CSV's columns by index: the round-19 columns came after every earlier one
    (candidates_priced, then interval_source; interval_source had been inserted before candidates_evaluated,
    moving the four search columns one place)."""
    head = COLUMNS.index("out_of_distribution")
    assert COLUMNS[head + 1:] == ("candidates_evaluated", "elapsed_s", "cpu_s", "candidates_priced",
                                  "interval_source")
