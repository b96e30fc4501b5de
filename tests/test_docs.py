"""The front door stays a short manual, and no link in the documentation points nowhere.

A newcomer reads README.md first: it must stay short, say on its first screen how to run the
demo, the compose stack and the tests, and carry no history (issue numbers, dated runs), which
belongs in CHANGELOG.md. Every relative link of README.md and docs/*.md, pictures included,
must reach a file, and a link's #anchor a heading of that file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

#: A markdown link or image: [text](target) or ![alt](target); the target up to a space or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
#: An issue or pull-request reference (#12), not an HTML entity (&#12;) nor part of a word or URL.
ISSUE_REF = re.compile(r"(?<![\w&/#])#\d+\b")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code removed."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def links(path: Path) -> list[str]:
    """Every link target in a page's prose."""
    return [m.group(1) for line in prose_lines(path.read_text()) for m in LINK.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces become hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text.replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a markdown file's headings (repeated headings get -1, -2, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def is_external(target: str) -> bool:
    return re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) is not None


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail to docs/"


def test_the_first_screen_says_how_to_run_the_demo_the_compose_stack_and_the_tests() -> None:
    first_screen = "\n".join(README.read_text().splitlines()[:60])
    for command in ("scripts/demo.sh", "docker compose up", "scripts/test.sh"):
        assert command in first_screen, f"{command!r} is not within the README's first 60 lines"


def test_the_readme_carries_no_issue_numbers_and_no_dated_runs() -> None:
    found = []
    for number, line in enumerate(prose_lines(README.read_text()), 1):
        without_targets = re.sub(r"\]\([^)]*\)", "]", line)
        found += [f"{number}: {m.group(0)}" for m in ISSUE_REF.finditer(without_targets)]
        found += [f"{number}: {m.group(0)}" for m in DATE.finditer(without_targets)]
    assert not found, f"history belongs in CHANGELOG.md: {found}"


def test_the_issue_reference_check_tells_references_from_anchors_and_entities() -> None:
    assert ISSUE_REF.search("fixed in #12.")
    assert ISSUE_REF.search("(#7)")
    for text in ("## A heading", "&#12; an entity", "https://x/issues/#3", "C#12"):
        assert not ISSUE_REF.search(text), text


def test_the_slugs_follow_github() -> None:
    assert slug("Simulator (`python -m simulator`)") == "simulator-python--m-simulator"
    assert slug("6. Known limits of the whole pipeline") == "6-known-limits-of-the-whole-pipeline"
    assert slug("Users and passwords") == "users-and-passwords"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_anchor(page: Path) -> None:
    broken = []
    for target in links(page):
        if is_external(target):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_the_pages_link_the_demo_pictures() -> None:
    targets = {t for page in PAGES for t in links(page)}
    for picture in ("throughput.png", "latency.png", "joined_power.png", "window_aggregates.png"):
        assert any(t.endswith(f"images/{picture}") for t in targets), picture
