"""The settings table (crawler/config/settings.py) is the one source of every setting:
its defaults, its checks and docs/OPERATIONS.md's and docs/SETTINGS.md's tables come from it, and
the code reads no setting that is not in it (nor one of Scrapy's), with no default of
its own."""

import ast
import importlib
from pathlib import Path

from scrapy.settings import Settings, default_settings

from crawler.config import settings as table
from crawler.config.validation import SCRAPY_REDIS_SETTINGS, problems

ROOT = Path(__file__).resolve().parents[2]
GETTERS = {"get", "getint", "getfloat", "getbool", "getlist", "getdict", "getdictorlist", "getwithbase", "getpriority"}
SCRAPY = {n for n in dir(default_settings) if n.isupper()} | {"SETTINGS_MODULE"}  # (set by Scrapy at start)


def _reads():
    """(setting name, file:line, has a default of its own) of every settings read in the
    crawler's code: ``<x>.get("NAME")``, ``getint``... and ``settings["NAME"]``."""
    for path in sorted((ROOT / "crawler").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            name, own_default = None, False
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in GETTERS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                name, own_default = node.args[0].value, len(node.args) > 1 or bool(node.keywords)
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                if isinstance(node.slice.value, str) and "settings" in ast.unparse(node.value):
                    name = node.slice.value
            if name and name.isupper() and "_" in name or name in ("SCHEDULER", "EXTENSIONS"):
                yield name, f"{path.relative_to(ROOT)}:{node.lineno}", own_default


def test_the_readme_and_the_settings_page_show_the_table():
    for path, expected in table.tables().items():
        assert table.current(path) == expected, f"{path.name}: run python -m crawler.config.settings --write"


def test_every_row_has_a_rule_a_meaning_and_a_default_that_passes_it():
    names = [s.name for s in table.TABLE]
    assert len(names) == len(set(names)), "a setting twice in the table"
    for s in table.TABLE:
        assert hasattr(s.rule, "problem") and s.doc.strip(), s.name
    assert problems(Settings(table.defaults(environ={}))) == []


def test_the_code_reads_only_settings_of_the_table_or_scrapys():
    unknown = sorted(
        (name, where)
        for name, where, _ in _reads()
        if name not in table.BY_NAME and name not in SCRAPY and name not in SCRAPY_REDIS_SETTINGS
    )
    assert not unknown, f"settings read but not in the table: {unknown}"


def test_the_profiles_set_only_settings_of_the_table():
    for module in ("settings.base", "settings.local", "settings.distributed"):
        names = {n for n in dir(importlib.import_module(module)) if n.isupper()}
        assert names <= set(table.BY_NAME), f"{module} sets {sorted(names - set(table.BY_NAME))} outside the table"


def test_every_setting_of_the_table_is_read_or_is_scrapys():
    read = {name for name, _, _ in _reads()}
    text = "\n".join(p.read_text() for p in (ROOT / "crawler").rglob("*.py") if p.name != "settings.py")
    unread = [s.name for s in table.TABLE if s.name not in read and s.name not in SCRAPY and f'"{s.name}"' not in text]
    assert not unread, f"settings in the table that nothing reads: {unread}"


def test_no_default_is_written_again_in_code():
    again = sorted((name, where) for name, where, own in _reads() if own and name in table.BY_NAME)
    assert not again, f"defaults written again where a setting is read (the table has them): {again}"
