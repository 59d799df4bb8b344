"""Every frame field a page, a view or a script reads is one the schema has.

The reads are found statically and walked through the JSON Schema generated from
:mod:`scheduler.frame_schema`, so a read of a field nobody produces (a typo, a field renamed
or dropped in the core) fails here rather than showing ``undefined`` or ``–`` in a browser:

* JavaScript (``static/js``): property chains off the live data (the ``msg``/``message`` a
  ``TwinLive`` handler receives), followed through local aliases (``var util = msg.util``),
  ``forEach``/``map`` callbacks and the first parameter of same-file functions handed a chain.
* Templates: attributes of the context variables the page views fill from a frame row.
* Python (``twin/``): ``frame[...]`` / ``placement[...]`` subscripts and ``.get(...)`` reads,
  whatever the name or attribute (``live.frame``, ``self.placement``) they hang off.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from scheduler.schema_json import json_schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json_schema()
DEFS = SCHEMA["$defs"]
LIVE_DATA = {"anyOf": [{"$ref": "#/$defs/PublishedFrame"}, {"$ref": "#/$defs/Snapshot"},
                       {"$ref": "#/$defs/PendingSnapshot"},
                       {"$ref": "#/$defs/PublishedLostFrame"}]}
"""What a ``TwinLive`` handler of ``data``/``frame``/``snapshot`` receives."""

ANY = "*"
"""A dynamic key or index (``x[name]``, ``x[i]``, a ``forEach`` element)."""
ARRAY_MEMBERS = {"length", "slice", "forEach", "map", "filter", "some", "every", "reverse",
                 "concat", "indexOf", "join", "sort", "push", "reduce", "find", "includes"}
STRING_MEMBERS = {"length", "slice", "replace", "toFixed", "split", "toLowerCase"}


# ----------------------------------------------------------------- walking the schema
def _branches(node: dict) -> list[dict]:
    """``node`` with ``$ref`` resolved and unions flattened (null branches dropped)."""
    if "$ref" in node:
        return _branches(DEFS[node["$ref"].rsplit("/", 1)[1]])
    if "anyOf" in node:
        return [b for part in node["anyOf"] for b in _branches(part)]
    return [node]


def _types(node: dict) -> set[str]:
    t = node.get("type", [])
    return set(t if isinstance(t, list) else [t])


def step(node: dict, key: str) -> dict | None:
    """The schema of ``node[key]`` (``key`` may be :data:`ANY`), or None if no branch has it."""
    found = []
    for b in _branches(node):
        kinds = _types(b)
        if "object" in kinds:
            props, extra = b.get("properties", {}), b.get("additionalProperties", True)
            if key == ANY:
                found += list(props.values()) + ([extra] if isinstance(extra, dict) else [])
            elif key in props:
                found.append(props[key])
            elif isinstance(extra, dict):
                found.append(extra)
        if "array" in kinds and key == ANY:
            found += list(b.get("prefixItems", [])) + (
                [b["items"]] if isinstance(b.get("items"), dict) else [])
    return {"anyOf": found} if found else None


def missing(node: dict, path: list[str]) -> str | None:
    """The first part of ``path`` that ``node`` does not have (``None``: all there)."""
    for i, key in enumerate(path):
        kinds = set().union(*(_types(b) for b in _branches(node)))
        if key in ARRAY_MEMBERS and "array" in kinds or key in STRING_MEMBERS and "string" in kinds:
            return None  # a method or ``length`` of the value, not a field
        nxt = step(node, key)
        if nxt is None:
            return ".".join(path[: i + 1])
        node = nxt
    return None


# ----------------------------------------------------------------- JavaScript
_CHAIN = r"(?:\s*(?:\.[A-Za-z_$][\w$]*(?![\w$]|\s*\()|\[[^\[\]]*\]))*"
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")


def _parts(chain: str, after: str = "") -> list[tuple[str, bool]]:
    """``.a["b"][i].c`` followed by ``after`` (``"(..."``) as ``[("a", False), ("b", False),
    ("*", False), ("c", True)]`` (True: the part is called)."""
    out = []
    for m in re.finditer(r"\.([A-Za-z_$][\w$]*)|\[\s*(?:\"([^\"]*)\"|'([^']*)'|([^\]]*))\s*\]",
                         chain):
        name = m.group(1) or m.group(2) or m.group(3)
        key = ANY if name is None else name
        out.append((key, (chain[m.end():] + after).lstrip().startswith("(")))
    return out


def _field_path(parts: list[tuple[str, bool]]) -> list[str]:
    """The parts up to the first call (a method is not a field; its receiver is)."""
    path = []
    for key, called in parts:
        if called:
            break
        path.append(key)
    return path


def _block_end(text: str, i: int) -> int:
    """Where the block that position ``i`` lies in closes."""
    depth = 0
    while i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth < 0:
            return i
        i += 1
    return len(text)


def _body(text: str, i: int) -> tuple[int, int]:
    """The body of the function whose parameter list starts before ``i``."""
    open_ = text.index("{", i)
    return open_, _block_end(text, open_ + 1)


def _without_other_handlers(text: str) -> str:
    """The script without ``TwinLive.on("ack"|"error"|"status", ...)`` handlers: their
    argument is not the live data."""
    while True:
        m = re.search(r"TwinLive\.on\(\s*\"(?:ack|error|status)\"\s*,\s*function\s*\([^)]*\)\s*\{",
                      text)
        if not m:
            return text
        text = text[: m.start()] + text[_block_end(text, m.end()) + 1:]


_END = r"\s*(?:\|\|\s*(?:\[\]|\{\})\s*)?\)?\s*(?=[;,\n)])"
"""A chain that is the whole expression (``x.a``, ``x.a || {}``), not part of arithmetic."""


_COPY = r"(?:\s*\|\|\s*\[\]\s*\)\s*(?:\.(?:slice|reverse|concat|sort)\(\s*\))+)?"
"""A copy of an array (``(msg.events || []).slice().reverse()``): the same elements."""


class Aliases:
    """Names bound to paths of the live data, each over a span of the script (a function's
    parameter may be bound to several: a helper drawing link and rack maps alike)."""

    def __init__(self, text: str):
        self.text = text
        self.spans: dict[tuple[str, int], tuple[int, list[list[str]]]] = {
            ("msg", 0): (len(text), [[]]), ("message", 0): (len(text), [[]])}

    def resolve(self, name: str, pos: int) -> list[list[str]]:
        inside = [(a, paths) for (n, a), (b, paths) in self.spans.items()
                  if n == name and a <= pos < b]
        return max(inside, key=lambda x: x[0])[1] if inside else []

    def add(self, name: str, path: list[str], start: int, end: int) -> bool:
        _, paths = self.spans.setdefault((name, start), (end, []))
        if path in paths:
            return False
        paths.append(path)
        return True

    def chains(self):
        """``(match, paths)`` of each chain off a bound name, where the name is bound."""
        names = "|".join(sorted({re.escape(n) for n, _ in self.spans}, key=len, reverse=True))
        for m in re.finditer(rf"(?<![\w$.])({names})({_CHAIN})", self.text):
            parts = _field_path(_parts(m.group(2), self.text[m.end():m.end() + 1]))
            bases = self.resolve(m.group(1), m.start())
            if bases:
                yield m, [base + parts for base in bases]


def js_reads(text: str) -> list[tuple[str, list[list[str]]]]:
    """``(where, paths)`` of every live-data read in a script: the paths (from the data's
    root) it may read, one per binding of the name it starts from."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", _without_other_handlers(text), flags=re.S)
    aliases = Aliases(text)
    functions = {m.group(1): ([p.strip() for p in m.group(2).split(",")], m.end())
                 for m in re.finditer(r"function\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)", text)}
    changed = True
    while changed:
        changed = False
        for m, paths in list(aliases.chains()):
            before, after = text[: m.start()], text[m.end():]
            bind = re.search(r"(?:var\s+|[;{\s])([A-Za-z_$][\w$]*)\s*=\s*\(?\s*$", before)
            each = re.match(r"\s*(?:\|\|\s*(?:\[\]|\{\})\s*\)?)?\s*\.\s*(?:forEach|map|filter|"
                            r"some|every|find)\s*\(\s*function\s*\(\s*([A-Za-z_$][\w$]*)", after)
            call = re.search(r"(?<![\w$.])([A-Za-z_$][\w$]*)\s*\(\s*$", before)
            for path in paths:
                if bind and re.match(_COPY + _END, after):  # var x = msg.a || {};
                    changed |= aliases.add(bind.group(1), path, m.start(),
                                           _block_end(text, m.start()))
                if each and not before.rstrip().endswith("Object.keys("):  # a.forEach(fn (x)
                    changed |= aliases.add(each.group(1), path + [ANY],
                                           *_body(text, m.end() + each.end()))
                if call and call.group(1) in functions and re.match(_END, after):  # draw(a)
                    params, at = functions[call.group(1)]
                    if params[0]:
                        changed |= aliases.add(params[0], path, *_body(text, at))
    out = []
    for m, paths in aliases.chains():
        line = text.count("\n", 0, m.start()) + 1
        out.append((f"line {line}: {m.group(0).strip()}", paths))
    return out


def gaps(node: dict, reads) -> list[str]:
    """Reads none of whose paths ``node`` has, with what is missing."""
    out = []
    for where, paths in reads:
        misses = [missing(node, p) for p in paths]
        if all(misses):
            out.append(f"{where}: no {misses[0]}")
    return out


SCRIPTS = sorted((ROOT / "static" / "js").glob("*.js"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_live_field_a_script_reads_is_in_the_schema(script):
    assert gaps(LIVE_DATA, js_reads(script.read_text())) == []


def test_the_scripts_read_the_live_data_at_all():
    reads = {tuple(p) for s in SCRIPTS for _, paths in js_reads(s.read_text()) for p in paths}
    assert {("util", "allocated"), ("heatmaps", "links"), ("mirror", "telemetry", "gpus"),
            ("sources", ANY, "age_s"), ("events", ANY, "kind")} <= reads


def test_a_script_reading_an_unknown_field_fails():
    planted = ("TwinLive.on(\"data\", function (msg) {\n  var util = msg.util || {};\n"
               "  show(util.allocated, msg.power.it_mw, util.gpus_borrowed);\n});\n")
    assert gaps(LIVE_DATA, js_reads(planted)) == [
        "line 3: util.gpus_borrowed: no util.gpus_borrowed"]


# ----------------------------------------------------------------- templates
TEMPLATE_ROWS = {
    "twin/job.html": {"running": "RunningJob", "queued": "QueuedJob", "held": "HeldJob",
                      "placed": "PlacedJob"},
    "twin/tenant.html": {"row": "TenantUse", "queued": {"type": "array",
                                                          "items": {"$ref": "#/$defs/QueuedJob"}}},
}
"""Context variables the page views fill from a frame or placement row, by template."""


def template_reads(text: str, context: dict) -> list[tuple[str, list[str]]]:
    roots = {name: ({"$ref": f"#/$defs/{t}"} if isinstance(t, str) else t)
             for name, t in context.items()}
    loops = {}
    for m in re.finditer(r"\{%\s*for\s+([\w, ]+?)\s+in\s+([\w.]+)", text):
        var, seq = m.group(1).split(",")[0].strip(), m.group(2).split(".")
        if seq[0] in roots:
            loops[var] = (seq[0], seq[1:] + [ANY])
    out = []
    for m in re.finditer(r"(?<![\w.])([A-Za-z_]\w*)((?:\.\w+)+)", text):
        var, path = m.group(1), m.group(2).strip(".").split(".")
        if var in roots:
            out.append((var, path))
        elif var in loops:
            out.append((loops[var][0], loops[var][1] + path))
    return [(f"{{{{ {var}.{'.'.join(path)} }}}}", var, path) for var, path in out]


@pytest.mark.parametrize("template", sorted(TEMPLATE_ROWS))
def test_every_frame_field_a_page_reads_is_in_the_schema(template):
    context = TEMPLATE_ROWS[template]
    roots = {name: ({"$ref": f"#/$defs/{t}"} if isinstance(t, str) else t)
             for name, t in context.items()}
    text = (ROOT / "templates" / template).read_text()
    reads = template_reads(text, context)
    assert reads, f"{template} reads none of {sorted(context)}: the mapping is stale"
    bad = [f"{where}: no {gap}" for where, var, path in reads
           if (gap := missing(roots[var], [p for p in path if not p.isdigit()]))]
    assert bad == []


def test_a_page_reading_an_unknown_field_fails():
    text = "{% for q in queued %}{{ q.wait_h }} {{ q.eta_h }}{% endfor %}{{ row.used_gpus }}"
    context = TEMPLATE_ROWS["twin/tenant.html"]
    roots = {n: ({"$ref": f"#/$defs/{t}"} if isinstance(t, str) else t)
             for n, t in context.items()}
    bad = [gap for _, var, path in template_reads(text, context)
           if (gap := missing(roots[var], path))]
    assert bad == ["*.eta_h"]


# ----------------------------------------------------------------- Python views
FRAME_NAMES = {"frame": {"anyOf": [{"$ref": "#/$defs/StoredFrame"},
                                   {"$ref": "#/$defs/LostFrame"}]},
               "placement": {"$ref": "#/$defs/LivePlacement"}}
"""Names (variables or attributes) that hold a stored frame or a placement in ``twin/``, and
their schema: a frame the driver hands ``live_state_write`` may be a ``LostFrame``."""


def _holder(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name) and node.id in FRAME_NAMES:
        return node.id
    if isinstance(node, ast.Attribute) and node.attr in FRAME_NAMES:
        return node.attr
    return None


def python_reads(source: str) -> list[tuple[int, str, list[str]]]:
    """``(line, holder, path)`` of each constant-key read off a frame or placement:
    ``frame["a"]["b"]``, ``frame.get("a")``, ``frame["a"].get("b")``."""
    out = []

    def chain(node) -> tuple[str, list[str]] | None:
        if (holder := _holder(node)) is not None:
            return holder, []
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            inner = chain(node.value)
            return None if inner is None else (inner[0], inner[1] + [node.slice.value])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            inner = chain(node.func.value)
            return None if inner is None else (inner[0], inner[1] + [node.args[0].value])
        return None

    for node in ast.walk(ast.parse(source)):
        found = chain(node)
        if found and found[1]:
            out.append((node.lineno, *found))
    return out


MODULES = sorted(p for p in (ROOT / "twin").rglob("*.py") if "migrations" not in p.parts)


def test_every_frame_field_the_web_code_reads_is_in_the_schema():
    bad = []
    for module in MODULES:
        for line, holder, path in python_reads(module.read_text()):
            gap = missing(FRAME_NAMES[holder], path)
            if gap:
                bad.append(f"{module.relative_to(ROOT)}:{line}: {holder} has no {gap}")
    assert bad == []


def test_a_view_reading_an_unknown_field_fails():
    source = "def view(live, placement):\n    return live.frame['util']['gpus_lent'], " \
             "placement.get('jobs'), placement['heat']['links']\n"
    assert [(h, p) for _, h, p in python_reads(source)
            if missing(FRAME_NAMES[h], p)] == [("frame", ["util", "gpus_lent"])]
    assert missing(FRAME_NAMES["frame"], ["lost"]) is None
    assert missing(FRAME_NAMES["placement"], ["jobs", "x", "gpu_runs_inferred"]) == (
        "jobs.x.gpu_runs_inferred")
