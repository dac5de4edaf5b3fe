"""Review of the fuzz21 merge (round 21's refusals): a rule across two fields names the ``--set`` item that made the
conflict, not the built-in file's line of the field the user never wrote."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, load_yaml, script_module
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.cost import transformer
from scalemodel.engine.job import published_params_tolerance, transformer_shape

NANO = ["predict", "-c", "dgx-h100", "-m", "nemotron-3-nano", "-n", "16", "--ep", "8"]


def test_set_pattern_without_m_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    # nemotron-3-nano's file states the Mamba widths; the --set removed every M: the error was
    # ".../nemotron-3-nano.yaml:25: hybrid.mamba: ...", a line the user did not write
    line = refused(cli, *NANO, "--set", "model.hybrid.pattern=" + "*E" * 26)
    assert line == ("error: --set model.hybrid.pattern: hybrid.mamba: set but hybrid.pattern has no M layer; M for "
                    "each Mamba-2 layer, or no mamba block")


def test_set_pattern_without_e_names_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    # the moe / E rule is the same rule across two fields (was located at the file's moe line)
    line = refused(cli, *NANO, "--set", "model.hybrid.pattern=" + "M*" * 26)
    assert line.startswith("error: --set model.hybrid.pattern: moe: moe is set but hybrid.pattern has no E layer; ")


def test_set_of_the_named_field_itself_is_still_named(cli) -> None:  # type: ignore[no-untyped-def]
    # --set of the rule's own field: that item, as before (no second item shown)
    line = refused(cli, *NANO, "--set", "model.hybrid.pattern=" + "*-" * 26, "--set", "model.moe=null")
    assert line.startswith("error: --set model.hybrid.pattern: hybrid.mamba: set but hybrid.pattern has no M layer")


#: rows whose stated count leaves out the embeddings, and so is checked against the shape's layers alone (why)
WITHOUT_EMBEDDINGS = {f"dgxc25_h100_llama31_405b_7l_{p}_32": "the 7-layer 405B proxy's 22.5 B is its layers' 22.55 B "
                      "(7 x 3.22 B), without the 1.65 B of untied GPT-2-vocabulary embeddings" for p in ("bf16", "fp8")}


def test_validation_rows_shapes_give_their_stated_params() -> None:
    # the round-21 params check (engine.job.published_params_tolerance: 5 %, or the written rounding) over the rows:
    # each row's shape gives its stated count. palm_540b_tpuv4_6144 priced heads of hidden / heads = 384, 567.6 B
    # (+5.1 %), where PaLM's heads are 256 wide (540.3 B against Table 1's 540.35 B)
    mod = script_module("validate_training")
    off, seen = [], set()
    for case in load_yaml(ROOT / "validation" / "training_cases.yaml"):
        m = case.get("model") or {}
        stated = m.get("params") or (m["params_B"] * 1e9 if "params_B" in m else None)
        if not stated or not {"layers", "hidden", "heads", "seq_len"} <= m.keys():
            continue
        w, _ = mod.case_workload(case)
        if w is None:
            continue
        derived = float(transformer.param_count(transformer_shape(w)))
        if case["id"] in WITHOUT_EMBEDDINGS:
            seen.add(case["id"])
            derived -= w.vocab * w.hidden * (1 if w.tied_embeddings else 2)
        if abs(derived / stated - 1) > published_params_tolerance(float(stated)):
            off.append((case["id"], stated, derived))
    assert off == [] and seen == set(WITHOUT_EMBEDDINGS)


def _params_warnings(cli, tmp_path: Path, text: str) -> list[str]:  # type: ignore[no-untyped-def]
    f = tmp_path / "w.yaml"
    f.write_text("kind: transformer\nextends: llama3-8b\nname: variant\n" + text)
    doc = accepted(cli, "predict", "-c", "dgx-h100", "-m", str(f), "-n", "8")
    return [w for w in doc["warnings"] if w.startswith("model.params ")]


def test_reshaping_extends_drops_the_inherited_count(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # layers 16 over llama3-8b: 16 x 218.1 M + 2 x 128256 x 4096 + 4096 = 4.54 B, not the base's 8.03 B, which the
    # file never stated: warned "model.params 8.03e+09 is not the 4.54e+09 parameters ..." (a --set is not)
    assert _params_warnings(cli, tmp_path, "layers: 16\n") == []
    shown = accepted(cli, "hardware", "show", str(tmp_path / "w.yaml"))["spec"]
    assert shown["params"] is None and "params" not in shown["sources"] and shown["layers"] == 16


def test_extends_keeps_the_count_where_the_shape_stays(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a longer sequence changes no weight: llama3-8b's published 8.03e9 still applies and is kept
    assert _params_warnings(cli, tmp_path, "seq_len: 16384\n") == []
    assert accepted(cli, "hardware", "show", str(tmp_path / "w.yaml"))["spec"]["params"] == 8.03e9


def test_extends_with_its_own_wrong_count_is_still_warned(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert len(_params_warnings(cli, tmp_path, "layers: 16\nparams: 1e9\n")) == 1
