"""The docs hold together: the README leads in under 200 lines, every relative link of the
docs reaches a file, and every decision record says its status."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_readme_leads_in_under_200_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: the rest belongs in docs/OPERATIONS.md"


def test_every_relative_link_of_the_docs_reaches_a_file():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if not target.startswith(("http://", "https://", "mailto:")) and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_every_decision_record_says_its_status():
    records = sorted((ROOT / "docs" / "decisions").glob("[0-9]*.md"))
    assert records
    missing = [r.name for r in records if not re.search(r"^\*\*Status:\*\* \S", r.read_text(), re.M)]
    assert not missing, missing
