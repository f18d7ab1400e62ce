"""The table of contents at the top of each spec: check it, or rewrite it.

Each `specs/*.md` starts with its `# Title`, then a "Contents" list of its
`##` and `###` headings, linked by the anchors GitHub gives them (the functions
of an "API reference" section on one line). This prints
the specs whose list is missing or stale and exits 1; `--write` rewrites
the lists in place (run it after adding or renaming a heading).

    python tools/spec_toc.py [--write]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = "<!-- contents: made by tools/spec_toc.py -->"
END = "<!-- end of contents -->"


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(text: str) -> list[tuple[int, str]]:
    """The `##` / `###` headings outside code blocks, with their level."""
    found = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"^(#{2,3}) (.+?)\s*$", line)
        if match and not fenced:
            found.append((len(match.group(1)), match.group(2)))
    return found


def contents(text: str) -> str:
    """The contents block of a spec, from its headings (duplicates get GitHub's -1, -2)."""
    seen: dict[str, int] = {}
    lines = [START, "", "Contents", ""]
    reference: list[str] = []  # the functions of an "API reference", on one line
    section = ""
    for level, title in headings(text):
        target = anchor(title)
        if target in seen:
            seen[target] += 1
            target = f"{target}-{seen[target]}"
        else:
            seen[target] = 0
        link = f"[{title.replace('`', '')}](#{target})"
        if level == 2:
            section = title
        if level == 3 and section == "API reference":
            reference.append(link)
            continue
        lines.append(f"{'  ' * (level - 2)}- {link}")
    if reference:
        lines.append("  - " + " · ".join(reference))
    lines += ["", END]
    return "\n".join(lines)


def with_contents(text: str) -> str:
    """`text` with its contents block, right after the title, made fresh."""
    if START in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1]
        text = before.rstrip("\n") + "\n" + after.lstrip("\n")
    title, _, body = text.partition("\n")
    block = contents(text)
    return f"{title}\n\n{block}\n\n{body.lstrip(chr(10))}"


def main(argv: list[str]) -> int:
    write = argv == ["--write"]
    if argv and not write:
        print("usage: python tools/spec_toc.py [--write]", file=sys.stderr)
        return 2
    stale = []
    for spec in sorted((ROOT / "specs").glob("*.md")):
        text = spec.read_text(encoding="utf-8")
        fresh = with_contents(text)
        if fresh != text:
            stale.append(spec.relative_to(ROOT).as_posix())
            if write:
                spec.write_text(fresh, encoding="utf-8")
    for name in stale:
        print(f"{name}: contents {'rewritten' if write else 'missing or stale'}")
    return 0 if write or not stale else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
