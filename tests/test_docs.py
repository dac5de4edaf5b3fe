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

ROOT = Path(__file__).resolve().parents[1]
MODEL_MD = ROOT / "docs" / "model.md"
CHECKED = ("scalemodel", "scripts", "benchmarks")
#: Reference notes kept outside the repository (in the project's shared folder).
PRIVATE_NOTES = ("collectives.md", "hardware_and_formats.md", "sync_stragglers_ps.md", "peers_and_formulas.md")
_CHAIN = re.compile(r"§[\w.]+\s*(?:,|-|–|/|and)?\s*$")  # a preceding "§x, " / "§x-" of a range or list
_YEAR = re.compile(r"^(1[89]|20)\d\d[a-z]?$")
_ARXIV_ID = re.compile(r"^\d{4}\.\d{4,5}(v\d+)?$")
_NOTE_NUMBER = re.compile(r"\b(?:[Rr]eference|[Rr]ef)\.?\s+§?\d")


def _repo_markdown() -> set[str]:
    """Repository-relative paths of every markdown file in the checkout."""
    return {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.md") if ".git" not in p.parts}


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
