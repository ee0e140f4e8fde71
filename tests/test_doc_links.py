"""Every relative link in the repository's Markdown leads to a file in the repository
(issue 30: the multilang README linked outside it)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_stay_inside_the_repository() -> None:
    broken = []
    for doc in REPO.rglob("*.md"):
        if any(part in (".venv", "node_modules", ".git") or part.startswith(".") for part in
               doc.relative_to(REPO).parts[:-1]):
            continue
        for target in LINK.findall(doc.read_text(errors="replace")):
            if re.match(r"^[a-z]+:", target):
                continue  # a URL
            path = (doc.parent / target).resolve()
            if not path.is_relative_to(REPO) or not path.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target}")
    assert not broken, "\n".join(broken)
