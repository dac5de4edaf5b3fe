"""Review 15a: findings in the session's merged work (97f869d..aff7ee0) — training.cudnn_release on the nearest held
release, the flex dispatcher's default SMs, torchtitan's default etp, the one training-checks loop.

Each block is one finding; the contract is test_hostile_inputs.py's (bad input: one line, exit 2, no traceback).
"""

from __future__ import annotations

import pytest
from conftest import load_yaml
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

GPT_B200 = ["-c", "dgx-b200", "-m", "gpt-1.7b", "-n", "8"]


# --- a release priced on another held curve is not said to be priced where nothing prices it ---------------------
# training.cudnn_release = 9.21.1 with flash_attention off got two warnings that contradict each other: "the cudnn
# attention core is priced on the 9.19 curve" (raised where the job was built) and "is not priced: flash_attention is
# off" (raised where the strategy was read). Without a fused kernel the core runs as two GEMMs (cost.compute), so
# only the second is true.

_PRICED_ON = ("training.cudnn_release = 9.21.1: b200 holds no curve of that release; the cudnn attention core is "
              "priced on the 9.19 curve (the nearest release held at or below it)")
_UNFUSED = ("training.cudnn_release = 9.21.1 is not priced: flash_attention is off (the attention core runs as two "
            "GEMMs, not a fused kernel)")


@pytest.mark.parametrize("command, off", [
    ("predict", ["--no-flash-attention"]),
    ("memory", ["--no-flash-attention"]),
    ("plan", ["--top", "1", "--set", "strategy.flash_attention=false"]),
])
def test_release_curve_is_not_named_where_flash_attention_is_off(cli, command: str, off: list[str]) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, command, *GPT_B200, *off, "--set", "training.cudnn_release='9.21.1'")
    assert _UNFUSED in got["warnings"], got["warnings"]
    assert not any("is priced on the 9.19 curve" in w for w in got["warnings"]), got["warnings"]


@pytest.mark.parametrize("command, extra", [("predict", []), ("memory", []), ("plan", ["--top", "1"]),
                                            ("scale", [])])
def test_release_curve_is_named_once_where_the_fused_kernel_runs(cli, command: str, extra: list[str]) -> None:  # type: ignore[no-untyped-def]
    """With flash_attention on (the default, and plan's unpinned candidates) the warning stays: once in the --json
    document's warnings and once on stderr."""
    r = cli(command, *GPT_B200, *extra, "--set", "training.cudnn_release='9.21.1'", "--json")
    assert r.code == 0, r.err
    import json
    assert json.loads(r.out)["warnings"].count(_PRICED_ON) == 1
    assert r.err.count(_PRICED_ON) == 1, r.err
    assert "is not priced" not in r.err, r.err


# --- the "quote it" hint where quoting now finds a curve ---------------------------------------------------------
# Every well-formed release at or above the earliest held one is now priced (on the nearest held at or below it), but
# the hint for a bare YAML number (9.20 reads as 9.2) was still given only where the quoted text is itself a held
# key. A bare 9.20 (NeMo 26.04's cuDNN 9.20.0) on b200, or 9.20 / 9.21 on gb300 (which holds 9.19 and 9.22), was
# refused as "no attention curve for cuDNN 9.2 ... all later" with no word that quoting it makes it valid.

@pytest.mark.parametrize("cluster, bare", [("dgx-b200", "9.20"), ("gb300-nvl72", "9.20"), ("dgx-b200", "9.10")])
def test_a_bare_release_that_quoting_would_price_gets_the_hint(cli, cluster: str, bare: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", cluster, "-m", "gpt-1.7b", "-n", "8", "--set",
                   f"training.cudnn_release={bare}")
    assert f"(a bare {bare} reads as {bare[:-1]}: quote it)" in line, line
    # and quoted it is priced
    accepted(cli, "predict", "-c", cluster, "-m", "gpt-1.7b", "-n", "8", "--set", f"training.cudnn_release='{bare}'")


@pytest.mark.parametrize("cluster, quoted", [
    ("dgx-b200", "9.5"),      # 9.50 would be later than every curve held: no hint (round 14b's case)
    ("dgx-b200", "0.0"),
    ("gb300-nvl72", "9.1"),   # 9.10 is below gb300's earliest curve (9.19): quoting it would be refused as well
    ("dgx-b200", "9.13.1"),   # not a bare number's text at all
])
def test_no_hint_where_quoting_finds_no_curve(cli, cluster: str, quoted: str) -> None:  # type: ignore[no-untyped-def]
    if quoted == "9.13.1":  # priced on 9.13, not refused: nothing to hint at
        accepted(cli, "predict", "-c", cluster, "-m", "gpt-1.7b", "-n", "8", "--set",
                 f"training.cudnn_release='{quoted}'")
        return
    line = refused(cli, "predict", "-c", cluster, "-m", "gpt-1.7b", "-n", "8", "--set",
                   f"training.cudnn_release='{quoted}'")
    assert "quote it" not in line, line


# --- a release text ending in a line break ---------------------------------------------------------------------
# The field's pattern ends in ``$``, which Python's re (msgspec's patterns) matches before a final newline: a quoted
# "9.19\n" in a YAML file passed as release 9.19 (priced, and echoed with its newline), "9.21.1\n" too (its warning
# read "9.21.1 :"). Before 01b3de5 such text was refused only because no held key equalled it.

_NOT_FORM = "String is not of the allowed form (got '{}\\n')"


@pytest.mark.parametrize("text", ["9.19", "9.21.1", "10.0"])
def test_a_release_ending_in_a_newline_is_refused_in_each_file(cli, tmp_path, text: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(f'kind: strategy\ncudnn_release: "{text}\\n"\n')
    refused(cli, "predict", *GPT_B200, "--strategy", str(f), inputs=(f,),
            match=f"error: --strategy: {f}: training.cudnn_release: " + _NOT_FORM.format(text))
    scen = tmp_path / "scen.yaml"
    scen.write_text("kind: scenario\nname: s\ncluster: dgx-b200\nmodel: gpt-1.7b\ngpus: [8]\n"
                    f'training: {{global_batch: 8, cudnn_release: "{text}\\n"}}\n')
    line = refused(cli, "check", str(scen), inputs=(scen,))
    assert "training.cudnn_release" in line and _NOT_FORM.format(text) in line, line
    runs = tmp_path / "runs.yaml"
    runs.write_text(f'- {{cluster: dgx-b200, model: gpt-1.7b, gpus: 8, step_time: 1.0, cudnn_release: "{text}\\n"}}\n')
    line = refused(cli, "calibrate", "runs", str(runs), inputs=(runs,))
    assert "cudnn_release" in line and _NOT_FORM.format(text) in line, line


# --- an unexpanded --moe-flex-dispatcher-num-sms still takes precedence ------------------------------------------
# Megatron-LM d98e8a64dd TransformerConfig.__post_init__ (transformer_config.py L1792-1811) checks the two deprecated
# SM flags for a conflict only when moe_flex_dispatcher_num_sms is None. A launch that sets it from the shell
# ($SMS, which the reader cannot expand) and leaves both deprecated flags at different counts runs; the reader
# refused it as "two different SM counts", the unified flag counted only when its value was a number.

def test_an_unexpanded_unified_sm_flag_overrides_conflicting_deprecated_ones(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from test_hostile_inputs_round14c import MOE, _launch
    f = _launch(tmp_path, "--moe-deepep-num-sms 20 --moe-hybridep-num-sms 32 --moe-flex-dispatcher-num-sms $SMS")
    r = cli("predict", *MOE, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    import json
    assert json.loads(r.out)["strategy"]["ep_dispatch_sms"] is None  # the count is the shell's: not known here
    assert "--moe-flex-dispatcher-num-sms $SMS (not a number: a shell variable is not expanded)" in r.err, r.err
    assert "--moe-deepep-num-sms 20 (--moe-flex-dispatcher-num-sms takes precedence)" in r.err, r.err
    assert "--moe-hybridep-num-sms 32 (--moe-flex-dispatcher-num-sms takes precedence)" in r.err, r.err
    # without it the same two counts are Megatron-Core's ValueError, refused as before
    g = _launch(tmp_path, "--moe-deepep-num-sms 20 --moe-hybridep-num-sms 32")
    refused(cli, "predict", *MOE, "--strategy", str(g), inputs=(g,), match="two different SM counts")


# --- checked and fine: hostile forms of the new surfaces (kept as regressions) -----------------------------------

@pytest.mark.parametrize("flags, sms, unused", [
    # argparse keeps the last of a repeated flag; the = form is the same flag
    ("--moe-deepep-num-sms 20 --moe-deepep-num-sms 30", 30, None),
    ("--moe-deepep-num-sms=24 --moe-hybridep-num-sms=24", 24, None),
    # one deprecated count unexpanded: the other is the only one known (Megatron-Core would compare the two)
    ("--moe-deepep-num-sms $N --moe-hybridep-num-sms 24", 24, "--moe-deepep-num-sms $N"),
    # ncclep: priced as DeepEP / HybridEP, its count named as not used, the default prices it
    ("--moe-flex-dispatcher-backend ncclep --moe-deepep-num-sms 20", None, "--moe-deepep-num-sms 20 (the SMs of"),
])
def test_sm_flag_combinations(cli, tmp_path, flags: str, sms: int | None, unused: str | None) -> None:  # type: ignore[no-untyped-def]
    from test_hostile_inputs_round14c import MOE, _launch
    r = cli("predict", *MOE, "--strategy", str(_launch(tmp_path, flags)), "--json")
    assert r.code == 0, r.err
    import json
    assert json.loads(r.out)["strategy"]["ep_dispatch_sms"] == sms
    if unused:
        assert unused in r.err, r.err


@pytest.mark.parametrize("body, etp", [
    ("expert_parallel_degree = 8\ntensor_parallel_degree = 4", 1),   # torchtitan's default, not tp 4
    ("expert_parallel_degree = 8", 1),
    ("expert_parallel_degree = 1\ntensor_parallel_degree = 2", None),  # ep 1: nothing set (a dense run's file)
    ("tensor_parallel_degree = 2", None),
])
def test_titan_without_the_etp_key(cli, tmp_path, body: str, etp: int | None) -> None:  # type: ignore[no-untyped-def]
    from test_hostile_inputs_round14c import MOE, _titan
    assert accepted(cli, "predict", *MOE, "--strategy", str(_titan(tmp_path, body)))["strategy"]["etp"] == etp


def test_a_release_below_every_held_one_in_a_sweep_names_the_file_and_field(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "sw.yaml"
    f.write_text("kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [gb300-nvl72]\ngpus: [8]\n"
                 "strategies: [{label: a}]\ntraining: {global_batch: 8, cudnn_release: '9.17'}\n")
    r = cli("sweep", str(f), "--json")
    import json
    rows = json.loads(r.out)["rows"]
    assert [row["status"] for row in rows] == ["error"], rows
    assert (f"{f}: training.cudnn_release: no attention curve for cuDNN 9.17 on gb300 (releases held: 9.19, 9.22, "
            "all later)") in rows[0]["message"], rows[0]


# --- the mcore26 DeepSeek-V3 rows' FLOP per token ----------------------------------------------------------------
# Their model.note inferred mtp_depth 1 from "260.7 GFLOP per token on every DeepSeek-V3 row"; the BF16 row's
# measured figures give 857e12 / 3298 = 259.9 (the integer TFLOP/s leaves +-0.06 %), the H100 row's 260.6. The
# inference holds (all far above the w/o-MTP 249.1); the range the note states now covers every row.

def test_mcore26_dsv3_notes_state_the_flop_per_token_of_every_row() -> None:
    import re
    from pathlib import Path

    cases = load_yaml(Path(__file__).resolve().parents[1] / "validation" / "training_cases.yaml")
    rows = [c for c in cases if c["id"].startswith("mcore26_") and "dsv3" in c["id"]]
    assert len(rows) == 4
    for c in rows:
        m = c["measured"]
        per_token = m["tflops_per_gpu"] * 1e3 / m["tokens_per_s_per_gpu"]  # GFLOP a token
        stated = re.search(r"is ([0-9.]+)(?:-([0-9.]+))? GFLOP per token on every DeepSeek-V3 row", c["model"]["note"])
        assert stated, c["model"]["note"]
        low, high = float(stated[1]), float(stated[2] or stated[1])
        assert low - 0.05 <= per_token <= high + 0.05, (c["id"], per_token, stated[0])
        assert per_token > 249.1 + 5  # the MTP-trained count, not the w/o-MTP row's


# --- the flex dispatcher's default SMs only where the EP all-to-all hides under compute --------------------------

def test_flex_default_sms_price_nothing_without_the_a2a_overlap() -> None:
    """MCORE_FLEX_DEFAULT_SMS charges the hidden EP time (step._with_free_windows, hidden_ep); with moe_a2a_overlap
    off nothing is hidden, so no dispatcher SM count, the default 20 or any other, changes the flex step."""
    from test_ep_dispatch_contention import _run
    steps = {sms: float(_run(sms, overlap=False, flex=True)[2].step_time[0]) for sms in (None, 0, 20, 100)}
    assert len(set(steps.values())) == 1, steps


# --- the HybridEP default with a count set -------------------------------------------------------------------------
# review15a found the note on a hybridep launch without an SM flag ("priced as DeepEP's 20") wrong once --set gave a
# count; after the merge with flexbackend there is no note at all: HybridEP's own default (24 SMs in one NVLink domain,
# 8 across) is priced (strategy.moe_flex_backend), and a count given with --set is priced as given.

def test_hybridep_default_note_holds_with_a_count_set(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from test_hostile_inputs_round14c import MOE, _launch
    f = _launch(tmp_path, "--global-batch-size 512 --moe-flex-dispatcher-backend hybridep")
    r = cli("predict", *MOE, "--strategy", str(f), "--set", "strategy.ep_dispatch_sms=32", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["strategy"]["ep_dispatch_sms"] == 32
    assert "is priced as DeepEP's 20" not in r.err, r.err
    assert "hybridep without an SM count" not in r.err, r.err
