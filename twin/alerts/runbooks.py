"""The runbooks of the shipped alert rules: ``docs/runbooks.md``, cut into sections.

The file is plain Markdown kept to a few forms, so it reads well on GitHub and here: a
``## rule-name`` heading per rule (its anchor, as GitHub makes it), paragraphs, ``-`` and
``1.`` lists, and ``code`` spans.  This renders exactly those forms, escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_ITEM = re.compile(r"^\s*(?:-|\d+\.)\s+(.*)$")


@dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    html: SafeString


def runbook_path() -> Path:
    return Path(settings.BASE_DIR) / "docs" / "runbooks.md"


def _inline(text: str) -> str:
    return _BOLD.sub(r"<strong>\1</strong>", _CODE.sub(r"<code>\1</code>", escape(text)))


def _blocks(lines: list[str]) -> str:
    out, para, items, ordered = [], [], [], False

    def flush():
        nonlocal para, items
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
        if items:
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{_inline(i)}</li>" for i in items)
                       + f"</{tag}>")
        para, items = [], []

    for line in lines:
        m = _ITEM.match(line)
        if not line.strip():
            flush()
        elif m:
            if para:
                flush()
            ordered = not line.lstrip().startswith("-")
            items.append(m.group(1))
        elif items and line.startswith("  "):
            items[-1] += " " + line.strip()
        else:
            if items:
                flush()
            para.append(line.strip())
    flush()
    return "\n".join(out)


def runbook_sections(path: Path | None = None) -> list[Section] | None:
    """The ``## `` sections of the runbooks file (the text before the first is the
    introduction, anchor ``""``); ``None`` when the file is missing."""
    path = path or runbook_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    sections, title, lines = [], "", []
    for line in text.splitlines():
        if line.startswith("## "):
            sections.append((title, lines))
            title, lines = line[3:].strip(), []
        elif not line.startswith("# "):
            lines.append(line)
    sections.append((title, lines))
    return [Section(re.sub(r"[^a-z0-9_-]+", "-", t.lower()).strip("-"), t,
                    mark_safe(_blocks(body)))  # noqa: S308 (every piece escaped above)
            for t, body in sections if t or any(x.strip() for x in body)]
