"""The import graph of crawler/, drawn from the code: no room (a folder of crawler/, or a
module at its top) imports a room that imports it back, directly or not, and imports
inside functions are only the few whose place is forced (an import that installs a
reactor, or a costly one a command needs only when it runs)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# module -> the crawler modules it may import inside a function, and why
LATE = {
    "crawler.spiders.broad": {  # the spider module is loaded before Scrapy installs its reactor
        "crawler.frontier.connection",
        "crawler.seeds.files",
        "crawler.seeds.ingest",
    },
    "crawler.commands.serve": {"crawler.serve.app", "crawler.serve.server"},  # aiohttp: 0.2 s at every command's start
    "crawler.urlstore.backends": {"crawler.urlstore.cassandra"},  # the driver installs a reactor
    "crawler.page.process": {"crawler.page.reader"},  # a page process's warm-up call, before its first page
}


def _modules():
    for path in sorted((ROOT / "crawler").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        yield name.removesuffix(".__init__"), ast.parse(path.read_text())


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _imports(tree):
    """(imported crawler module, inside a function) of every import in ``tree``."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside |= {id(n) for n in ast.walk(node) if n is not node}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name.startswith("crawler.") and (ROOT / (name.replace(".", "/") + ".py")).exists():
                yield name, id(node) in inside


def test_no_room_imports_a_room_that_imports_it_back():
    graph: dict[str, set[str]] = {}
    for module, tree in _modules():
        for target, _ in _imports(tree):
            if _room(target) != _room(module):
                graph.setdefault(_room(module), set()).add(_room(target))

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, {*seen, n})) for n in graph.get(start, ()))

    circles = sorted((a, b) for a, targets in graph.items() for b in targets if reaches(b, a))
    assert not circles, f"rooms that import each other (directly or not): {circles}"


def test_imports_inside_functions_are_only_those_whose_place_is_forced():
    late = sorted(
        (module, target)
        for module, tree in _modules()
        for target, inside in _imports(tree)
        if inside and target not in LATE.get(module, ())
    )
    assert not late, f"crawler imports inside functions (put them at the top, or say why here): {late}"
