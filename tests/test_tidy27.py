"""tidy27: product follow-ups.

(1) A mistyped plan constraint (``tp=>8``, ``tp=<8``, ``tp==>8``, ``tp=8;pp=1``) was "constraint 'tp=>8' needs an
integer": the regex read the operator '=' and the value '>8', and the message blamed the value. Each malformed form now
gets one line that says what is wrong with the text as written and names the forms plan reads (KEY OP VALUE, the
operators, several separated by commas), exit 2, no traceback.

(2) sensitivity's docs: the claims README's section makes about elasticity 0 beside a gain, and a negative gain.

(4) which key a constraint item names is read by one function (constraints.named_key)."""

from __future__ import annotations

import json

import pytest
from test_hostile_inputs import refused

from scalemodel.specs.constraints import named_key, parse_constraints

PLAN = ("plan", "-m", "gpt-1.7b", "-n", "8", "--top", "1")
#: The forms every operator error names (the operators as plan --help lists them).
FORMS = "KEY OP VALUE with OP one of <=, >=, <, >, =, !="


@pytest.mark.parametrize(("text", "what"), [
    ("tp=>8", "'=>' in 'tp=>8' is not an operator (did you mean tp>=8?)"),
    ("tp=<8", "'=<' in 'tp=<8' is not an operator (did you mean tp<=8?)"),
    ("tp==>8", "'==>' in 'tp==>8' is not an operator"),
    ("tp<=>8", "'<=>' in 'tp<=>8' is not an operator"),
    ("tp>>8", "'>>' in 'tp>>8' is not an operator (did you mean tp>8?)"),
    ("tp=!8", "'=!' in 'tp=!8' is not an operator (did you mean tp!=8?)"),
    ("tp<>8", "'<>' in 'tp<>8' is not an operator (did you mean tp!=8?)"),
    ("tp!8", "'!' in 'tp!8' is not an operator (did you mean tp!=8?)"),
    ("tp= >8", "'= >' in 'tp= >8' is not an operator (did you mean tp>=8?)"),
    ("tp\u22648", "'\u2264' in 'tp\u22648' is not an operator (did you mean tp<=8?)"),
    ("memory=>60GB", "'=>' in 'memory=>60GB' is not an operator (did you mean memory>=60GB?)"),
    ("tp=8;pp=1", "constraint 'tp=8;pp=1' holds more than one operator"),
    ("tp=8=8", "constraint 'tp=8=8' holds more than one operator"),
    ("tp<=8 pp=1", "constraint 'tp<=8 pp=1' holds more than one operator"),
    ("tp=", "constraint 'tp=' has no value"),
    ("tp 8", "constraint 'tp 8' has no operator"),
    ("tp", "constraint 'tp' has no operator"),
    ("=8", "constraint '=8' names no key"),
])
def test_a_malformed_constraint_is_named(cli, text: str, what: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *PLAN, "--constraint", text)  # exit 2, one error line, nothing on stdout, no traceback
    assert line.startswith(f"error: --constraint: {what}; {FORMS}"), line
    assert "several separated by commas" in line and "needs an integer" not in line


def test_the_help_names_the_operators(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("plan", "--help")
    assert r.code == 0
    assert "OP one of <=, >=, <, >, =, !=" in " ".join(r.out.split())


@pytest.mark.parametrize(("text", "parsed"), [
    ("tp<=8", {"tp": [("<=", 8)]}),
    ("tp = 8", {"tp": [("=", 8)]}),
    ("tp==8", {"tp": [("==", 8)]}),
    ("tp!=2", {"tp": [("!=", 2)]}),
    ("tp>=2, pp <4", {"tp": [(">=", 2)], "pp": [("<", 4)]}),
    ("memory<=60 GB", {"memory": [("<=", 60e9)]}),
    ("sync=ssp:2", {"sync": [("=", "ssp:2")]}),
    ("layout=tp-cp-pp-dp", None),
])
def test_well_formed_constraints_read_as_before(text: str, parsed: dict | None) -> None:  # type: ignore[type-arg]
    got = parse_constraints([text])
    if parsed is not None:
        assert dict(got) == parsed
    else:
        assert list(got) == ["layout"] and got["layout"][0][0] == "="


# (2) The sensitivity section (README "What limits a step", docs/model.md#sensitivity): its output block is checked
# by scripts/check_doc_outputs.py; these check the claims its prose makes about the two columns.


def _sensitivity(cli, *args: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    r = cli("sensitivity", "-c", "dgx-h100", *args, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    return {**{p["name"]: p for p in doc["parameters"]}, "notes": doc["notes"]}


def test_an_elasticity_of_zero_beside_a_gain_is_named(cli) -> None:  # type: ignore[no-untyped-def]
    """Llama 2 7B, tp 2 on 16 H100s: the ib-leaf bandwidth is flat within 1% and buys 0.4% at 2x, and the note names
    it (tests/test_tidy26.py). Llama-3 70B, tp 8 pp 4 on 512 H100s, was the case: its NVLink latency was flat because
    NVLS's latency left out the tier's hop; since coll34 it carries it, so the row moves (elasticity < 0) and no note
    names it; ib-core, which no group crosses, is 0 and 0%; the speeds' elasticities less the latencies' sum to
    about 1 (Euler)."""
    small = _sensitivity(cli, "-m", "llama2-7b", "-n", "16", "--tp", "2")
    assert small["ib-leaf bandwidth"]["elasticity"] == 0.0 and small["ib-leaf bandwidth"]["throughput_ratio"] > 1.0
    assert any(n.startswith("ib-leaf bandwidth: the step does not move within 1%") for n in small["notes"])
    s = _sensitivity(cli, "-m", "llama3-70b", "-n", "512", "--tp", "8", "--pp", "4")
    lat = s["nvlink latency"]
    assert lat["elasticity"] < 0.0 and lat["throughput_ratio"] > 1.0
    assert not any("does not move" in n for n in s["notes"]), s["notes"]
    assert s["ib-core bandwidth"]["elasticity"] == 0.0 and s["ib-core bandwidth"]["throughput_ratio"] == 1.0
    params = [p for k, p in s.items() if k != "notes"]
    speeds = sum(p["elasticity"] for p in params if p["unit"] in ("flop_rate", "bandwidth"))
    latencies = sum(p["elasticity"] for p in params if p["unit"] == "time")
    assert speeds - latencies == pytest.approx(1.0, abs=0.02)


def test_twice_the_ib_bandwidth_leaves_the_step_as_nccl_would(cli) -> None:  # type: ignore[no-untyped-def]
    """Llama-3 8B on 64 H100s: 2x ib-leaf bandwidth gave -0.7% (the DP all-reduce turned from NVLS to Tree on a graph
    of 16 channels, Tree's 24 CTAs slowing the backward); NCCL's search holds 8 channels there (each GPU's NVLink
    sends 7 of 48 GB/s, inv27: tests/test_inv27.py), so the all-reduce stays on NVLS and the gain is 1, as pinned to
    NVLS (--algo hierarchical)."""
    auto = _sensitivity(cli, "-m", "llama3-8b", "-n", "64")["ib-leaf bandwidth"]
    assert auto["elasticity"] == 0.0 and auto["throughput_ratio"] == 1.0
    nvls = _sensitivity(cli, "-m", "llama3-8b", "-n", "64", "--algo", "hierarchical")["ib-leaf bandwidth"]
    assert nvls["elasticity"] == 0.0 and nvls["throughput_ratio"] == 1.0


# (4) The same rule written once: which key a constraint item names (commands.common.strategy_constraints split the
# text on its own list of operator characters).


@pytest.mark.parametrize(("text", "key"), [
    ("tp<=8", "tp"), ("mb >= 2", "micro_batch"), ("flex_backend=deepep", "moe_flex_backend"), ("tp", "tp"),
    ("sequence-parallel!=true", "sequence_parallel"), ("virtual_stages", "virtual_stages"),
])
def test_the_key_a_constraint_names_is_the_one_parse_constraints_reads(text: str, key: str) -> None:
    assert named_key(text) == key
    if any(c in text for c in "<>=!"):
        assert list(parse_constraints([text])) == [key]
