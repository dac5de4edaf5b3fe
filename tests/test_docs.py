"""Citations in the code point at things a user has: docs/model.md sections or primary sources.

Two rules (issue 12):
- no file under scalemodel/ (nor scripts/, benchmarks/) cites a section (``§``) of a note that is not
  in the repository, names one of the project's private reference notes, or cites "reference N.N";
- every docs/model.md section (anchor) cited anywhere in the code or tests exists in docs/model.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

MODEL_MD = ROOT / "docs" / "model.md"
CHECKED = ("scalemodel", "scripts", "benchmarks")
#: Reference notes kept outside the repository (in the project's shared folder).
PRIVATE_NOTES = ("collectives.md", "hardware_and_formats.md", "sync_stragglers_ps.md", "peers_and_formulas.md")
_CHAIN = re.compile(r"§[\w.]+\s*(?:,|-|–|/|and)?\s*$")  # a preceding "§x, " / "§x-" of a range or list
_YEAR = re.compile(r"^(1[89]|20)\d\d[a-z]?$")
_ARXIV_ID = re.compile(r"^\d{4}\.\d{4,5}(v\d+)?$")
_NOTE_NUMBER = re.compile(r"\b(?:[Rr]eference|[Rr]ef)\.?\s+§?\d")


def _repo_markdown() -> set[str]:
    """Repository-relative paths of every markdown file in the checkout: not under a hidden folder (.git, CI's
    .ci-venv with the installed package's copies) or an installed or built tree."""
    out = set()
    for p in ROOT.rglob("*.md"):
        parts = p.relative_to(ROOT).parts[:-1]
        if not any(d.startswith(".") or d in ("site-packages", "build", "dist") for d in parts):
            out.add(p.relative_to(ROOT).as_posix())
    return out


def _md_in_repo(name: str, repo_md: set[str]) -> bool:
    return any(path == name or path.endswith("/" + name) for path in repo_md)


def citation_problems(line: str, repo_md: set[str]) -> list[str]:
    """What is wrong with the citations on one line of source ([] when nothing is)."""
    problems = []
    for note in PRIVATE_NOTES:
        if note in line and not _md_in_repo(note, repo_md):
            problems.append(f"names {note}, a note not in the repository")
    if "shared/reference" in line:
        problems.append("points into the shared reference folder, outside the repository")
    if _NOTE_NUMBER.search(line):
        problems.append("cites a numbered section of 'the reference'")
    for match in re.finditer("§", line):
        prefix = line[:match.start()].rstrip()
        while (chain := _CHAIN.search(prefix)) is not None:
            prefix = prefix[:chain.start()].rstrip()
        last = re.search(r"(\S+)$", prefix)
        token = last.group(1).strip("([{,;:)]}'\"`") if last else ""
        if token.endswith(".md"):
            if not _md_in_repo(token, repo_md):
                problems.append(f"cites a section of {token}, which is not in the repository")
        elif not (_YEAR.match(token) or _ARXIV_ID.match(token) or "arXiv" in token or token == "paper"
                  or (token[:1].isupper() and token.lower() not in ("reference", "ref", "see"))):
            problems.append(f"§ after {token or 'nothing'!r} names no source (a paper, its year, or a file here)")
    return problems


def _source_lines(dirs: tuple[str, ...]) -> list[tuple[str, int, str]]:
    out = []
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*.py")):
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                out.append((path.relative_to(ROOT).as_posix(), i, line))
    return out


def test_no_citation_of_notes_outside_the_repository() -> None:
    repo_md = _repo_markdown()
    bad = [f"{f}:{i}: {p}" for f, i, line in _source_lines(CHECKED) for p in citation_problems(line, repo_md)]
    assert not bad, "citations of material the user does not have:\n" + "\n".join(bad)


@pytest.mark.parametrize("line", [
    "    hop on top of a ~6 us base; hardware_and_formats.md §3.2). Other pairs add",
    "#: Tree all-reduce bandwidth factors (tuning.cc; §1.5): x0.92 for every protocol",
    "    nodes takes NCCL's x1.4 latency plateau once S >= 64 (§1.6).",
    "Reference: ../shared/reference/sync_stragglers_ps.md section 1.",
    '    """efficiency = 1/(1 + kappa * staleness) (heuristic of reference 2.3)."""',
    "        # Parameter server over the outermost tier (BytePS analysis, reference §4.1).",
    "    Quantisation (see notes.md §5.1, all-reducible)",
])
def test_checker_flags_private_citations(line: str) -> None:
    assert citation_problems(line, _repo_markdown())


@pytest.mark.parametrize("line", [
    "    ``T = 2(p-1) alpha`` (Patarasuk & Yuan 2009; Thakur et al. 2005 §4).",
    "**Activations** per layer, after Korthikanti et al. 2022 [arXiv:2205.05198] §4 / Table 2,",
    "factor 1 + (p-1)/(p v): Narayanan et al., SC'21 (arXiv 2104.04473) §2.2; Megatron-LM",
    "schedule: 1F1B min(m, p) [Narayanan et al. 2021 §2.2; Korthikanti §4.2.3], interleaved",
    "- DP (ZeRO paper §7, Rajbhandari et al. 2020): gradients of the stage's parameters",
    "    (tuning.cc; docs/model.md#nccl)",
])
def test_checker_accepts_primary_sources(line: str) -> None:
    assert citation_problems(line, _repo_markdown()) == []


def _github_slug(heading: str) -> str:
    """GitHub's anchor for a markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def model_md_anchors() -> set[str]:
    text = MODEL_MD.read_text(encoding="utf-8")
    explicit = set(re.findall(r'<a id="([^"]+)"></a>', text))
    headings = {_github_slug(h) for h in re.findall(r"^#{1,6}\s+(.+)$", text, flags=re.M)}
    return explicit | headings


def test_every_cited_model_md_anchor_exists() -> None:
    anchors = model_md_anchors()
    cited = re.compile(r"docs/model\.md#([A-Za-z0-9_-]+)")
    missing = [f"{f}:{i}: #{m}" for f, i, line in _source_lines((*CHECKED, "tests"))
               for m in cited.findall(line) if m not in anchors]
    assert not missing, "docs/model.md has no such section:\n" + "\n".join(missing)
    assert len({m for _, _, line in _source_lines(CHECKED) for m in cited.findall(line)}) >= 10


def test_model_md_internal_links_resolve_and_anchors_are_unique() -> None:
    text = MODEL_MD.read_text(encoding="utf-8")
    ids = re.findall(r'<a id="([^"]+)"></a>', text)
    assert len(ids) == len(set(ids)), "duplicate anchors in docs/model.md"
    anchors = model_md_anchors()
    broken = sorted({link for link in re.findall(r"\]\(#([^)]+)\)", text) if link not in anchors})
    assert not broken, f"docs/model.md links to missing sections: {broken}"


def test_model_md_has_a_section_per_breakdown_term() -> None:
    from scalemodel.engine.step import BREAKDOWN_KEYS

    anchors = model_md_anchors()
    missing = [k for k in BREAKDOWN_KEYS if k.replace("_", "-") not in anchors]
    assert not missing, f"breakdown terms without a docs/model.md section: {missing}"


#: Folders whose specs and notes users receive: their citations must resolve to what users have.
SHIPPED = ("hardware", "examples")
_TAG = re.compile(r"\[([A-Z][A-Za-z0-9.+-]*)\]")


def test_shipped_specs_cite_primary_sources() -> None:
    """hardware/ and examples/ cite no private reference note (issue 16); every [KEY] resolves in
    hardware/SOURCES.md to a primary source."""
    sources = (ROOT / "hardware" / "SOURCES.md").read_text()
    keys = set(re.findall(r"^\| `\[([^\]]+)\]` \| \S", sources, flags=re.M))
    problems = []
    for folder in SHIPPED:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".yaml", ".md") or path.name == "SOURCES.md":
                continue
            text = path.read_text()
            for note in (*PRIVATE_NOTES, "/work/shared", "ref §", "reference §"):
                if note in text:
                    problems.append(f"{path.relative_to(ROOT)}: cites {note}")
            if path.suffix == ".yaml":
                problems += [f"{path.relative_to(ROOT)}: [{t}] not in hardware/SOURCES.md"
                             for t in sorted(set(_TAG.findall(text)) - keys)]
    assert not problems, "\n".join(problems)


# --- the pages users copy from: README.md, docs/api.md, docs/calibration.md, docs/ci.md -----------------------------

USER_DOCS = ("README.md", "docs/api.md", "docs/calibration.md", "docs/ci.md")
#: Flags of other programs that the pages quote (Megatron-LM, huggingface-cli, benchmarks/bench.py).
FOREIGN_FLAGS = {"--bf16", "--decoder-first", "--grad-reduce-in-bf16", "--use-distributed-optimizer",
                 "--use-tp-pp-dp-mapping", "--local-dir", "--latency", "--scale-only",
                 # benchmarks/bench.py --throughput and benchmarks/instructions.py --plan (README Speed)
                 "--throughput", "--plan",
                 # Megatron-LM launch flags the README's `plan --strategy` paragraph names (read from a launch file)
                 "--ddp-bucket-size", "--decoder-first-pipeline-num-layers", "--fp8-param-gather",
                 "--moe-flex-dispatcher-num-sms", "--moe-shared-expert-overlap", "--overlap-grad-reduce",
                 "--overlap-param-gather", "--tp-comm-overlap", "--pipeline-model-parallel-layout", "--num-layers",
                 "--recompute-num-layers",
                 # Megatron-LM choice flags README's --strategy paragraph names (refused outside argparse's choices)
                 "--transformer-impl", "--data-parallel-sharding-strategy", "--fp8-recipe"}
#: Top-level folders of the repository: a backquoted path starting with one must exist.
_REPO_DIRS = ("scalemodel", "scripts", "tests", "docs", "examples", "hardware", "benchmarks", "validation", "schemas")


def _commands() -> dict[str, object]:
    """'predict' -> its Command, 'hardware show' -> the subcommand's, for every command and subcommand."""
    from scalemodel.cli import root

    out: dict[str, object] = {}
    for cmd in root().subcommands:
        out[cmd.name] = cmd
        for sub in cmd.subcommands:
            out[f"{cmd.name} {sub.name}"] = sub
    return out


def _flags(cmd: object) -> set[str]:
    return {f for o in cmd.options for f in o.option_strings()}  # type: ignore[attr-defined]


def _command_lines(text: str) -> list[str]:
    """Every `scalemodel ...` invocation a page shows: in a code span, or a line of a code block."""
    spans = re.findall(r"`(scalemodel [^`]+)`", text)
    block_lines = [ln.strip() for ln in text.splitlines() if re.match(r"\s*(- run: |- )?scalemodel \w", ln)]
    return spans + [re.sub(r"^(- run: |- )", "", ln) for ln in block_lines]


def test_user_docs_name_commands_and_options_that_exist() -> None:
    """Each `scalemodel CMD ... --flag` shown names a command and flags it has; every other --flag the pages
    name belongs to some command (or to another program, listed)."""
    commands = _commands()
    everything = {f for c in commands.values() for f in _flags(c)} | {"--version", "--install-completion",
                                                                      "--show-completion", "--help"}
    problems = []
    for doc in USER_DOCS:
        text = (ROOT / doc).read_text(encoding="utf-8")
        for line in _command_lines(text):
            words = line.replace("\\|", "|").split()
            name = words[1] if len(words) > 1 else ""
            if name.startswith("-"):
                continue  # scalemodel --version, --install-completion
            if name not in commands:
                problems.append(f"{doc}: `{line}`: no command {name!r}")
                continue
            sub = f"{name} {words[2]}" if len(words) > 2 and f"{name} {words[2]}" in commands else name
            own = _flags(commands[sub]) | {"--help"}  # type: ignore[arg-type]
            problems += [f"{doc}: `{line}`: {sub} has no option {f}"
                         for f in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line) if f not in own]
        for f in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)) - everything - FOREIGN_FLAGS):
            problems.append(f"{doc}: {f} is an option of no command")
    assert not problems, "\n".join(problems)


def test_every_command_says_what_it_answers_in_one_line() -> None:
    # the commands of DESIGN.md's CLI contract, written out (testaudit37: an empty registry passed the loop)
    assert {"predict", "plan", "scale", "check", "calibrate", "collective", "hardware", "memory", "schema",
            "sensitivity", "stragglers", "sweep"} <= set(_commands())
    for name, cmd in _commands().items():
        summary = cmd.summary  # type: ignore[attr-defined]
        assert summary and summary.endswith(".") and len(summary) <= 120, (name, summary)


def test_user_docs_paths_links_and_anchors_exist() -> None:
    """A repository path a page quotes exists; a markdown link resolves, its #anchor too (GitHub's slugs or an
    explicit <a id>); so does every model.md anchor that any of the repository's markdown names."""
    anchors = model_md_anchors()
    problems = []
    for rel in sorted(_repo_markdown()):
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        problems += [f"{rel}: docs/model.md has no #{a}" for a in re.findall(r"model\.md#([A-Za-z0-9_-]+)", text)
                     if a not in anchors]
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file) if file else path
            if not dest.exists():
                problems.append(f"{rel}: link to {target}: no such file")
            elif anchor and dest.suffix == ".md":
                t = dest.read_text(encoding="utf-8")
                ids = set(re.findall(r'<a id="([^"]+)"></a>', t)) | {_github_slug(h) for h in
                                                                    re.findall(r"^#{1,6}\s+(.+)$", t, flags=re.M)}
                if anchor not in ids:
                    problems.append(f"{rel}: link to {target}: no such anchor")
    for doc in USER_DOCS:
        for quoted in re.findall(r"`([^`\s]+)`", (ROOT / doc).read_text(encoding="utf-8")):
            p = quoted.split("#")[0].rstrip(".,;:")
            if p.split("/")[0] in _REPO_DIRS and "/" in p and not any(c in p for c in "*<>{$"):
                if not (ROOT / p).exists():
                    problems.append(f"{doc}: `{quoted}` does not exist")
    assert not problems, "\n".join(problems)


def test_api_md_table_names_real_parameters() -> None:
    """docs/api.md's table: each function exists and takes the parameters it is shown with, by those names."""
    import inspect

    import scalemodel

    rows = re.findall(r"^\| `(\w+)\(([^`]*)\)` \|", (ROOT / "docs" / "api.md").read_text(), flags=re.M)
    assert len(rows) >= 10
    for name, params in rows:
        sig = inspect.signature(getattr(scalemodel, name))
        for p in (x.strip().split("=")[0] for x in params.split(",")):
            if p in ("*", "") or p.startswith("**"):
                continue
            assert p in sig.parameters, f"docs/api.md: {name}() has no parameter {p!r}; it has {list(sig.parameters)}"


def test_readme_quickstart_numbers_are_what_scale_prints(cli) -> None:  # type: ignore[no-untyped-def]
    """README's Quickstart quotes `scalemodel scale` with no arguments: TFLOP/s per GPU at the first and the last
    point (one decimal) and the fall between them (whole percent)."""
    import json

    m = re.search(r"TFLOP/s per GPU falls from\s+([\d.]+) to ([\d.]+) \(-(\d+)%", (ROOT / "README.md").read_text())
    assert m, "README's Quickstart no longer quotes the default study's TFLOP/s per GPU"
    r = cli("scale", "--json")
    assert r.code == 0, r.err
    points = json.loads(r.out)["points"]
    first, last = points[0]["tflops_per_gpu"], points[-1]["tflops_per_gpu"]
    assert (m.group(1), m.group(2), m.group(3)) == (f"{first:.1f}", f"{last:.1f}", f"{(1 - last / first) * 100:.0f}")


def test_calibration_md_predict_at_example_is_what_the_command_prints(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """docs/calibration.md section 4 quotes `calibrate runs one-run.yaml --factors compute --predict-at 1024` on
    the first run of its section 1: the quoted text is what the command prints."""
    text = (ROOT / "docs" / "calibration.md").read_text()
    first_run = re.search(r"```yaml\n(- name:.*?)\n- name:", text, flags=re.S)
    command = re.search(r"`scalemodel (calibrate runs one-run\.yaml [^`]+)`", text)
    quoted = re.search(r"\n\n    (From the largest measured run.*?); \.\.\.\n", text, flags=re.S)
    assert first_run and command and quoted
    (tmp_path / "one-run.yaml").write_text(first_run.group(1) + "\n")
    args = command.group(1).split()
    args[args.index("one-run.yaml")] = str(tmp_path / "one-run.yaml")
    r = cli(*args)
    assert r.code == 0, r.err
    assert " ".join(quoted.group(1).split()) in " ".join(r.out.split())


@pytest.mark.parametrize("doc", ["README.md", "docs/ci.md"])
def test_the_capacity_file_shown_passes(cli, tmp_path: Path, doc: str) -> None:  # type: ignore[no-untyped-def]
    """The capacity.yaml a page shows is said to pass (exit 0); so it does, with ci.md's commented-out
    assertions switched on too (and the price they say max_cost_usd needs)."""
    block = re.search(r"```yaml\n(# capacity\.yaml.*?)```", (ROOT / doc).read_text(), flags=re.S)
    assert block, f"{doc} no longer shows a capacity.yaml"
    path = tmp_path / "capacity.yaml"
    path.write_text(block.group(1))
    r = cli("check", str(path))
    assert r.code == 0, r.out + r.err
    optional = re.findall(r"^  # (\w+: \S+)", block.group(1), flags=re.M)
    if optional:
        path.write_text(block.group(1) + "".join(f"  {line}\n" for line in optional))
        r = cli("check", str(path), "--set", "cluster.price_per_gpu_hour=2.5 USD/h")
        assert r.code == 0 and f"all {5 + len(optional)} assertions hold" in r.out, r.out + r.err
