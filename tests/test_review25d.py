"""review25d: a spec built, copied or assigned in Python (``StrategySpec(tp=-1)``, ``spec.model_copy(update=...)``,
``msgspec.structs.replace(spec, ...)``, ``spec.tp = -1``) refuses a bad value as the Python API's other routes do
(docs/api.md: "Bad input raises scalemodel.InputError, whose str() is the CLI's one-line message"); it raised the
spec layer's SpecError, a ValueError but no InputError, whose text had no "(got ...)" and no allowed part. The spec
classes are exported as ``scalemodel.StrategySpec`` / ``TrainingSpec`` / ``ClusterSpec`` and are what
``scalemodel.strategy_spec`` / ``training_spec`` return."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import scalemodel
from scalemodel.errors import InputError

TP = "tp: Input should be greater than 0 (got -1); an integer from 1 to 1e+09"


@pytest.mark.parametrize("make", [
    lambda st: scalemodel.StrategySpec(tp=-1),
    lambda st: st.model_copy(update={"tp": -1}),
    lambda st: msgspec.structs.replace(st, tp=-1),
    lambda st: setattr(st, "tp", -1),
], ids=["built", "model_copy", "replace", "assigned"])
def test_a_spec_made_in_python_refuses_as_input_error(make: Callable[[Any], Any]) -> None:
    st = scalemodel.strategy_spec(tp=8)
    with pytest.raises(InputError) as exc:
        make(st)
    assert str(exc.value) == TP
    assert st.tp == 8  # a refused assignment leaves the spec as it was


def test_a_training_rule_across_fields_keeps_its_message() -> None:
    tr = scalemodel.training_spec(global_batch=64)
    with pytest.raises(InputError) as exc:
        tr.model_copy(update={"global_batch": 0})
    assert str(exc.value).startswith("global_batch: ") and "; " in str(exc.value), str(exc.value)


def test_valid_copies_still_work() -> None:
    st = scalemodel.strategy_spec(tp=8)
    assert st.model_copy(update={"tp": 4}).tp == 4 and msgspec.structs.replace(st, pp=2).pp == 2
    st.tp = 2
    assert st.tp == 2


# --- a spec's name in a table's header line ------------------------------------------------------------------------
# The headers of predict, memory, plan, scale, sensitivity, check and hardware show printed the cluster's, model's
# and scenario's names through rich's markup: a cluster named "[red]mine" was said as "mine" (the fuzz25 defect of
# the output paths, in the names). Names print as written.

def _named(tmp_path: Path) -> tuple[Path, Path]:
    cluster = tmp_path / "c.yaml"
    cluster.write_text('kind: cluster\nextends: dgx-h100\nname: "[red]mine"\n')
    model = tmp_path / "m.yaml"
    model.write_text('kind: transformer\nextends: gpt-1.7b\nname: "[b]m"\n')
    return cluster, model


@pytest.mark.parametrize("args, shown", [
    (["predict", "-n", "8"], "[b]m on 8 x [red]mine: "),
    (["memory", "-n", "8"], "[b]m on 8 x "),
    (["sensitivity", "-n", "8"], "[b]m on 8 x [red]mine: "),
    (["scale", "-n", "8,16"], "[b]m on [red]mine, weak scaling"),
    (["plan", "-n", "8", "--global-batch", "8"], "[b]m on 8 x [red]mine, global batch 8"),
], ids=["predict", "memory", "sensitivity", "scale", "plan"])
def test_headers_print_the_names_as_written(cli, tmp_path: Path, args: list[str], shown: str) -> None:  # type: ignore[no-untyped-def]
    cluster, model = _named(tmp_path)
    r = cli(*args, "-c", str(cluster), "-m", str(model))
    assert r.code == 0, r.err
    assert " ".join(r.out.split()).startswith(shown), r.out[:300]


def test_hardware_show_prints_the_name_as_written(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _ = _named(tmp_path)
    r = cli("hardware", "show", str(cluster))
    assert r.code == 0 and r.out.splitlines()[0] == "cluster [red]mine", r.out[:200]


def test_sweep_prints_its_names_and_labels_as_written(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """sweep's summary line and table: a sweep named "[i]s" was said as "sweep s", a strategy label "[red]a" as
    "a" in its row."""
    cluster, model = _named(tmp_path)
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f'kind: sweep\nname: "[i]s"\nmodels: [{model}]\nclusters: [{cluster}]\ngpus: [8]\n'
                     'strategies: [{tp: 1, label: "[red]a"}]\n')
    r = cli("sweep", str(sweep))
    assert r.code == 0, r.err
    assert r.out.startswith("sweep [i]s: 1 points"), r.out[:200]
    assert any(line.split()[-1:] == ["[red]a"] or " [red]a " in line for line in r.out.splitlines()), r.out


def test_calibrate_runs_prints_the_run_names_as_written(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """calibrate runs' residual table: a run named "[red]r1" printed as "r1"."""
    log = tmp_path / "l.log"
    log.write_text("".join(f" iteration {i}/ 1000 | consumed samples: 64 | elapsed time per iteration (ms): 1500.0 |\n"
                           for i in range(1, 30)))
    runs = tmp_path / "runs.yaml"
    runs.write_text(f'- name: "[red]r1"\n  cluster: dgx-h100\n  model: gpt-1.7b\n  gpus: 16\n  global_batch: 64\n'
                    f"  log: {log}\n")
    r = cli("calibrate", "runs", str(runs), "--factors", "overhead_s")
    assert r.code == 0, r.err
    assert "[red]r1" in r.out, r.out  # the run column (no other line names the run)
