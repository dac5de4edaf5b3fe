"""Input errors fuzz34 left (ux34), each against the contract of test_hostile_inputs.py: exit 2, one ``error:`` line
naming the file / field / option, what was wrong and what is allowed, nothing on stdout, no input changed.

1. A YAML key that is not text (``~``, ``null``, ``5``, ``0x10``, ``true``) was "None: unknown key None" at the
   line of the mapping holding it, and an integer key was shown as ``[5]``, a list index: now the key's own line, the
   key spelled as the file wrote it, and that keys are text (specs/base.KeyNotText, specs/loader._along).
2. Bidirectional controls and invisible format characters (U+061C, U+200B-U+200F, U+202A-U+202E, U+2060-U+2064,
   U+2066-U+2069, U+FEFF inside a value), raw or escaped, reached names and labels, so a terminal showed reversed
   text: now refused in every spec string with the code point named (specs/files.refused_character); accented and
   CJK names are read as before.
3. An unknown option on a command with required arguments was "the following arguments are required", and on
   ``schema`` it took the next word as its value: the unknown option is now said first, with the closest valid
   option (commands/args._unknown_option).

Every case below fails on the code before ux34, but the two guards that pass on both (accented and CJK names are
names; -n8, --opt=value and a value starting with '-' are known option forms).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

CLUSTER = "kind: cluster\nname: c\nextends: dgx-h100\n"
WORKLOAD = "kind: transformer\nname: w\nlayers: 2\nhidden: 256\nheads: 4\nvocab: 1000\nseq_len: 128\n"
ACCELERATOR = "kind: accelerator\nname: a\nextends: b200\n"
PREDICT = ("predict", "-m", "gpt-1.7b", "-n", "8", "--json")


def _validate(name: str) -> tuple[str, ...]:
    return ("hardware", "validate", name)


# --- 1. keys that are not text --------------------------------------------------------------------------------------
# (file name, file text, command, expected substring of the error line after "error: <file>")

KEYS = [
    ("c.yaml", CLUSTER + "~: 1\n", _validate, ":4: ~: key ~ is the null value, not text; keys are text; known keys: "),
    ("c.yaml", CLUSTER + "null: 1\n", _validate, ":4: null: key null is the null value, not text; keys are text"),
    ("c.yaml", CLUSTER + "5: 1\n", _validate, ":4: 5: key 5 is a number, not text; keys are text; known keys: "),
    ("c.yaml", CLUSTER + "0x10: 1\n", _validate, ":4: 0x10: key 0x10 is a number, not text"),
    ("c.yaml", CLUSTER + "true: 1\n", _validate, ":4: true: key true is a boolean, not text"),
    ("c.yaml", CLUSTER + "sources:\n  name: x\n  5: y\n", _validate,
     ":6: sources.5: key 5 is a number, not text; keys are text (quote one YAML reads as a number"),
    ("a.yaml", ACCELERATOR + "peak_flops:\n  bf16: 1 PFLOP/s\n  8: 1 PFLOP/s\n", _validate,
     ":6: peak_flops.8: key 8 is a number, not text; keys are text: one of "),
    ("w.yaml", WORKLOAD + "~: 3\n", lambda f: ("predict", "-m", f, "-c", "dgx-h100", "-n", "8"),
     ":8: ~: key ~ is the null value, not text; keys are text; known keys: "),
]


@pytest.mark.parametrize(("name", "text", "command", "said"), KEYS)
def test_a_key_that_is_not_text_is_named_as_written_at_its_line(cli, tmp_path: Path, name: str, text: str,  # type: ignore[no-untyped-def]
                                                                 command, said: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    line = refused(cli, *command(str(f)), inputs=(f,), match=f"error: {f}{said}")
    assert "None" not in line and "[" not in line.split(";")[0], line  # not Python's None, not a list index


# --- 2. bidirectional and invisible format characters ---------------------------------------------------------------

BIDI = "(\\u202e, a bidirectional control: it reorders the text a terminal shows after it)"
FORMATS = [
    ("c.yaml", 'kind: cluster\nname: "c\u202egnp.x"\nextends: dgx-h100\n', f":2: name: character U+202E {BIDI} is not "
     "allowed in a string; text without bidirectional controls, invisible format characters or line separators "
     "(U+061C"),
    ("c.yaml", 'kind: cluster\nname: "c\\u202ex"\nextends: dgx-h100\n',
     f":2: name: character U+202E {BIDI} (written as an escape) is not allowed"),
    ("c.yaml", "kind: cluster\nname: c\u2066x\u2069\nextends: dgx-h100\n", ":2: name: character U+2066 (\\u2066, a "
     "bidirectional control"),
    ("c.yaml", "kind: cluster\nname: c\u200bx\nextends: dgx-h100\n", ":2: name: character U+200B (\\u200b, an "
     "invisible format character) is not allowed"),
    ("c.yaml", "kind: cluster\nname: c\u200fx\nextends: dgx-h100\n", ":2: name: character U+200F (\\u200f, a "
     "bidirectional control"),
    ("c.yaml", "kind: cluster\nname: c\ufeffx\nextends: dgx-h100\n", ":2: name: character U+FEFF (\\ufeff, an "
     "invisible format character)"),
    ("c.yaml", CLUSTER + "tiers:\n  - {name: \"nv\u202dlink\", span: 8, bandwidth: 450 GB/s}\n",
     ":5: tiers[0].name: character U+202D"),
    ("c.json", '{"kind": "cluster", "name": "c\\u202ex", "extends": "dgx-h100"}',
     ":1: name: character U+202E " + BIDI + " (written as an escape)"),
    ("c.json", '{"kind": "cluster", "name": "c\u202ax", "extends": "dgx-h100"}', ":1: name: character U+202A"),
]


@pytest.mark.parametrize(("name", "text", "said"), FORMATS)
def test_a_format_character_in_a_name_is_refused_with_its_code_point(cli, tmp_path: Path, name: str, text: str,  # type: ignore[no-untyped-def]
                                                                     said: str) -> None:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    line = refused(cli, *_validate(str(f)), inputs=(f,), match=f"error: {f}{said}")
    assert not any(c in line for c in "\u202a\u202d\u202e\u2066\u2069\u200b\u200f\ufeff"), ascii(line)  # named only


def test_a_format_character_given_with_set_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *PREDICT, "-c", "dgx-h100", "--set", "cluster.name=c\u202ex",
            match="error: --set cluster.name: character U+202E (\\u202e, a bidirectional control")


@pytest.mark.parametrize("name", ["Zoë-Müller", "東京-h100", "Ελλάδα", "naïve café"])
def test_letters_of_any_script_are_still_names(cli, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text(f"kind: cluster\nname: {name}\nextends: dgx-h100\n", encoding="utf-8")
    r = cli(*_validate(str(f)))
    assert r.code == 0 and f"({name})" in r.out, (r.code, r.out, r.err)


# --- 3. an unknown option before a missing argument -----------------------------------------------------------------
# (argv, expected substring of the error line): exit 2, the unknown option named, the closest valid one offered

OPTIONS = [
    (("collective", "--nope"), "error: scalemodel collective: No such option: --nope (Possible options: --op)"),
    (("collective", "--cluter", "dgx-h100"), "No such option: --cluter (Possible options: --cluster)"),
    (("calibrate", "--nope"), "error: scalemodel calibrate: No such option: --nope"),
    (("check", "--nope"), "error: scalemodel check: No such option: --nope; see `scalemodel check --help`"),
    (("sweep", "--nope"), "error: scalemodel sweep: No such option: --nope"),
    (("schema", "--nope"), "error: scalemodel schema: No such option: --nope"),
    (("schema", "--nope", "x"), "error: scalemodel schema: No such option: --nope"),  # not "invalid choice: 'x'"
    (("check", "--jsno"), "No such option: --jsno (Possible options: --json)"),
    (("stragglers", "--nope"), "error: scalemodel stragglers: No such option: --nope"),
    (("stragglers", "--worker", "8"), "No such option: --worker (Possible options: --workers"),
    (("stragglers", "--nope=3"), "No such option: --nope;"),
]


@pytest.mark.parametrize(("argv", "said"), OPTIONS)
def test_an_unknown_option_is_said_before_a_missing_argument(cli, argv: tuple[str, ...], said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *argv, match=said)
    assert "required" not in line, line


@pytest.mark.parametrize("argv", [("stragglers", "-n8", "--json"), ("stragglers", "--workers=8", "--json"),
                                  ("stragglers", "-n", "8", "--mean", "-1s", "--json")])
def test_known_option_forms_are_not_unknown(cli, argv: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    """A short option with its value glued on (-n8), --opt=value and a value that starts with '-' stay known."""
    r = cli(*argv)
    assert "No such option" not in r.err, r.err
