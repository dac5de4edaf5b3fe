"""Hostile input, round 36 (fuzz36): what this round's fuzzing found in what session 35 added (strategy offload_states,
plan --allow offload, training.moe_routing cyclic, strategy.moe_shared_expert_stream, strategy.fp8_param_gather,
algorithms.tree_depth, the DeepSpeed config's offload keys) and in the spec fields no earlier round had fuzzed. The CLI
contract is test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong and
what is allowed, nothing on stdout, no input changed.

The corpus is scripts/fuzz36.py (in-process, each case under a 30 s wall alarm, checked for exit 0/1/2, one ``error:``
line on exit 2 and nothing on stdout then, no traceback, strict JSON under ``json.loads(parse_constant=raise)`` with no
non-finite float, no nan / inf word in a table, no input changed); its last line counts the cases and findings.
At 5a1b9212+: 6,580 cases in 14 sections (offload 464, plan --allow offload 62, MoE routing / shared-expert stream
322, fp8_param_gather 205, tree depths 872, DeepSpeed offload keys 220, torchtitan offload 194, the 53 unfuzzed spec
fields 2,179, check assertions 29, generic workload 190, YAML structure 78, sweep / scenario / runs files 250,
Megatron flags 15, random valid combinations 1,500), 0 contract breaks; the same without --json (the tables) 6,116,
and 5,500 more random combinations (seeds 37, 39): none. The negative numbers seen in --json are signed by design
(speed-error ranges, residuals, elasticities, loss attributions that are gains). The findings below came from
reading what the corpus accepted or said, not from a contract break. Findings, each fixed where the input is read:

1. a DeepSpeed ``zero_optimization.offload_optimizer.ratio`` outside [0, 1] (2, 1.5, -0.5) or not a JSON
   number ("0.3") was priced as the whole optimizer offloaded, without a word; DeepSpeed's config refuses the first
   (offload_config.py L99 at deepspeedai/DeepSpeed@edaa7221: ``ratio: float = Field(1.0, ge=0.0, le=1.0)``) and
   reads the string as 0.3, a partial offload this model does not price;
2. a JSON decimal beyond a 64-bit float (1e999) was read as inf and a nonzero one below it (1e-999) as 0 (Python's
   json), so a config.json or DeepSpeed config was refused for a value it does not hold ("hidden_size: expected an
   integer, got 'inf'", "num_hidden_layers: ... got '0.0'") or, where the key is not read, passed as 0: refused as
   written at its key and line, as YAML's are since fuzz34 (loader._json_float);
3. the same in a torchtitan TOML (tomllib): ``tensor_parallel_degree = 1e999`` was "expected a count, got 'inf'";
   now refused as written at its line and key (torchtitan_config._toml_float); TOML's own inf / nan are unchanged;
4. ``plan --allow offload --constraint offload_states!=none`` was "unknown constraint key 'offload_states'", though
   plan searches that column and the other searched columns (cp_comm_type, moe_flex_backend) are constraint keys: the
   error now says what plan does with it and how to pin it (constraints._PINNED_BY_SET).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, script_module
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.specs.loader import load_json

DENSE = ("-m", "llama3-8b", "-c", "dgx-h100", "-n", "16")


def _ds(tmp_path: Path, offload: str) -> Path:
    f = tmp_path / "ds.json"
    f.write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                 f'"zero_optimization": {{"stage": 3, "offload_optimizer": {offload}}}}}')
    return f


# --- 1. DeepSpeed offload_optimizer.ratio ----------------------------------------------------------------------------

@pytest.mark.parametrize(("ratio", "said"), [("2", "2 is not"), ("1.5", "1.5 is not"), ("-0.5", "-0.5 is not"),
                                             ('"0.3"', "'0.3' is not"), ("true", "True is not"), ("[]", "[] is not")])
def test_an_offload_ratio_deepspeed_refuses_or_reads_as_partial_is_refused(cli, tmp_path: Path, ratio: str,  # type: ignore[no-untyped-def]
                                                                           said: str) -> None:
    f = _ds(tmp_path, f'{{"device": "cpu", "ratio": {ratio}}}')
    line = refused(cli, "predict", *DENSE, "--strategy", str(f), "--json", inputs=(f,),
                   match="zero_optimization.offload_optimizer.ratio: ")
    assert said in line and "a JSON number from 0 to 1" in line, line


@pytest.mark.parametrize(("ratio", "offloaded"), [("1", "optimizer"), ("1.0", "optimizer"), ("0.5", "none"),
                                                  ("0", "none")])
def test_an_offload_ratio_in_range_is_read_as_before(cli, tmp_path: Path, ratio: str, offloaded: str) -> None:  # type: ignore[no-untyped-def]
    """1 offloads every state (DeepSpeed's default); below 1 is ZeRO-Offload++'s partial offload, named as not
    modelled and left unset (deepspeed_config._offload_states)."""
    f = _ds(tmp_path, f'{{"device": "cpu", "ratio": {ratio}}}')
    r = cli("predict", *DENSE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err

    assert json.loads(r.out)["strategy"]["offload_states"] == offloaded
    assert ("partial optimizer offload" in r.err) == (offloaded == "none"), r.err


# --- 2. JSON decimals beyond a 64-bit float --------------------------------------------------------------------------

HF_LLAMA = ROOT / "tests" / "data" / "hf" / "Llama-2-7b-hf" / "config.json"


@pytest.mark.parametrize(("key", "text", "said"), [
    ("hidden_size", "1e999", "hidden_size: 1e999 is beyond"), ("num_hidden_layers", "2e-400", "num_hidden_layers: "
                                                                                               "2e-400 is below"),
    ("max_position_embeddings", "-1E+999", "max_position_embeddings: -1E+999 is beyond"),
    ("rms_norm_eps", "1e-999", "rms_norm_eps: 1e-999 is below")])
def test_a_json_decimal_beyond_a_float_is_refused_as_written_at_its_key(cli, tmp_path: Path, key: str, text: str,  # type: ignore[no-untyped-def]
                                                                        said: str) -> None:
    """As YAML's (fuzz34): 1e999 was read as inf and 2e-400 as 0, refused as "got 'inf'" / "got '0.0'", values the
    file does not hold, and a nonzero rms_norm_eps written 1e-999 was read as 0 without a word."""
    src = HF_LLAMA.read_text()
    before = f'"{key}": {json.loads(src)[key]}'
    assert before in src
    f = tmp_path / "config.json"
    f.write_text(src.replace(before, f'"{key}": {text}'))
    line = refused(cli, "predict", "-m", str(f), "-c", "dgx-h100", "-n", "8", "--json", inputs=(f,))
    assert f"config.json:{src[:src.index(before)].count(chr(10)) + 1}: {said} the range of a number (a 64-bit float)" \
        in line, line


def test_a_deepspeed_decimal_below_a_float_is_refused_as_written(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ds.json"
    f.write_text('{"train_micro_batch_size_per_gpu": 1e-999}')
    refused(cli, "predict", *DENSE, "--strategy", str(f), "--json", inputs=(f,),
            match="ds.json:1: train_micro_batch_size_per_gpu: 1e-999 is below the range of a number")


@pytest.mark.parametrize(("text", "value"), [("1.7e308", 1.7e308), ("5e-324", 5e-324), ("0.0e-999", 0.0),
                                             ("-0.0", 0.0), ("0e400", 0.0), ("1e9", 1e9)])
def test_json_decimals_a_float_holds_are_read(text: str, value: float) -> None:
    assert load_json(f'{{"x": {text}}}', "f.json") == {"x": value}


# --- 3. TOML decimals beyond a 64-bit float --------------------------------------------------------------------------

def _titan(tmp_path: Path, tp: str) -> Path:
    f = tmp_path / "job.toml"
    f.write_text(f"[training]\nlocal_batch_size = 1\n[parallelism]\ndata_parallel_shard_degree = 8\n"
                 f"tensor_parallel_degree = {tp}\n")
    return f


@pytest.mark.parametrize(("text", "said"), [("1e999", "1e999 is beyond"), ("-1e999", "-1e999 is beyond"),
                                            ("1e-999", "1e-999 is below"), ("1_0e9_99", "1_0e9_99 is beyond")])
def test_a_toml_decimal_beyond_a_float_is_refused_as_written_at_its_line(cli, tmp_path: Path, text: str,  # type: ignore[no-untyped-def]
                                                                         said: str) -> None:
    """tomllib read 1e999 as inf and 1e-999 as 0: "tensor_parallel_degree: expected a count, got 'inf'"."""
    f = _titan(tmp_path, text)
    refused(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--strategy", str(f), "--json",
            inputs=(f,), match=f"job.toml:5: tensor_parallel_degree: {said} the range of a number (a 64-bit float)")


@pytest.mark.parametrize(("text", "said"), [("inf", "got 'inf'"), ("nan", "got 'nan'"), ("0.0e-999", "got '0.0'"),
                                            ("2.0", None)])
def test_toml_floats_a_float_holds_keep_their_own_errors(cli, tmp_path: Path, text: str, said: str | None) -> None:  # type: ignore[no-untyped-def]
    """TOML's own inf / nan and a decimal zero are read as before (the degree's check says what it got)."""
    f = _titan(tmp_path, text)
    r = cli("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--strategy", str(f), "--json")
    if said is None:
        assert r.code == 2 and "tensor_parallel_degree" in r.err and "range of a number" not in r.err, r.err
    else:
        assert r.code == 2 and said in r.err, r.err



# --- 4. offload_states as a --constraint ------------------------------------------------------------------------------

@pytest.mark.parametrize("constraint", ["offload_states!=none", "offload_states=optimizer", "offload=optimizer+params"])
def test_offload_states_as_a_constraint_says_how_plan_searches_and_pins_it(cli, constraint: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "plan", *DENSE, "-k", "1", "--allow", "offload", "--constraint", constraint, "--json",
                   match=f"--constraint: {constraint.split('!')[0].split('=')[0]} is not a constraint key: plan "
                         "--allow offload searches none, optimizer and optimizer+params")
    assert "--set strategy.offload_states=VALUE pins it" in line, line


def test_the_pin_the_constraint_error_names_is_accepted(cli) -> None:  # type: ignore[no-untyped-def]
    """What the error says to do works: plan with offload_states pinned (and a zero it runs with) ranks only it."""
    doc = accepted(cli, "plan", *DENSE, "-k", "2", "--set", "strategy.offload_states=optimizer", "--set",
                   "strategy.zero=3")
    assert doc["ranked"] and {r["strategy"]["offload_states"] for r in doc["ranked"]} == {"optimizer"}


# --- guards: the session-35 fields under generated strategy files, and a slice of the round's corpus ----------------

_VALUE = hs.one_of(hs.sampled_from(["none", "optimizer", "optimizer+params", "cyclic", "random", "true", "false", "",
                                    "1e999", "1e-999", ".nan", "-.inf", "null", "\u202e", "optimizer\u200b",
                                    "x" * 300]),
                   hs.booleans(), hs.none(), hs.integers(-2**70, 2**70),
                   hs.floats(allow_nan=True, allow_infinity=True), hs.lists(hs.integers(0, 3), max_size=3),
                   hs.dictionaries(hs.sampled_from(["device", "a"]), hs.sampled_from(["cpu", 1]), max_size=2))
_FIELDS = hs.sampled_from([("strategy", "offload_states"), ("strategy", "moe_shared_expert_stream"),
                           ("strategy", "fp8_param_gather"), ("training", "moe_routing"),
                           ("strategy", "fsdp_defer_grad_sync"), ("strategy", "zero"), ("training", "precision"),
                           ("training", "optimizer"), ("strategy", "ep")])


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(items=hs.lists(hs.tuples(_FIELDS, _VALUE), min_size=1, max_size=5, unique_by=lambda t: t[0]),
       command=hs.sampled_from(["predict", "memory"]))
def test_generated_strategy_files_keep_the_contract(cli, tmp_path_factory: pytest.TempPathFactory,  # type: ignore[no-untyped-def]
                                                    items: list, command: str) -> None:  # type: ignore[type-arg]
    """A strategy file (JSON, a subset of YAML) of the session-35 fields with any value: exit 0 with strict JSON, or
    exit 2 with one error line and nothing on stdout; never a traceback; the file unchanged."""
    doc: dict = {"strategy": {}, "training": {}}  # type: ignore[type-arg]
    for (section, field), value in items:
        doc[section][field] = value
    text = json.dumps(doc, allow_nan=True)  # NaN / Infinity tokens are hostile input too
    f = tmp_path_factory.mktemp("gen") / "s.yaml"
    f.write_text(text)
    r = cli(command, "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "16", "--strategy", str(f), "--json")
    assert "Traceback" not in r.err and r.code in (0, 2), (r.code, r.err[-300:])
    if r.code == 2:
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and r.out == "", r.err
    else:
        json.loads(r.out, parse_constant=_no_constant)
    assert f.read_text() == text


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in --json output")


@pytest.mark.parametrize("section", ["deepspeed", "torchtitan", "megatron", "check"])
def test_the_round_corpus_sections_find_nothing(section: str, tmp_path: Path) -> None:
    """scripts/fuzz36.py's smaller sections (~480 cases, a few CPU seconds) as a regression guard: each case's
    contract is checked by its run_case (exit 0/1/2, one error line, strict JSON, no input changed)."""
    fuzz = script_module("fuzz36")
    found = [(argv, finding) for _label, argv, inputs in fuzz.SECTIONS[section](tmp_path)
             for finding in [fuzz.run_case(argv, inputs)[0]] if finding]
    assert not found, found[:3]
