"""docs/BENCHMARKS.md's recorded figures: one table per file of ``bench/results/`` (written
by bench/results.py), between the markers below. ``python -m bench.report --write``
rewrites them; ``python -m bench.report`` prints them; tests/unit/test_bench_report.py
checks that the page shows what the files hold."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.results import RESULTS, ROOT, load
from crawler.config import settings

DOC = ROOT / "docs" / "BENCHMARKS.md"
BEGIN = "<!-- recorded figures: python -m bench.report --write -->"
END = "<!-- end of the recorded figures -->"


def number(value: float) -> str:
    if value == int(value) and abs(value) >= 1:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def with_unit(value: float, unit: str) -> str:
    return f"{number(value)} {unit}".strip()


def machine_line(m: dict) -> str:
    line = f"{m['cores']} cores, {m['ram_gib']:g} GiB, {m['cpu']}, {m['os']}, Python {m['python']}"
    if m.get("shared"):
        line += (
            f"; shared with other work (load {m['load_average']:g} at the start, "
            f"{m['others_cores']:g} cores busy with other processes)"
        )
    return line


def table(result: dict) -> str:
    commit = result["commit"]
    lines = [
        f"### `{result['command']}`",
        "",
        f"Commit {commit['hash']}{' with changes' if commit['dirty'] else ''}, {result['date']}, "
        f"{result['runs']} run{'s' if result['runs'] != 1 else ''}; {machine_line(result['machine'])}.",
        "",
        "| figure | median | spread (lowest - highest) | runs | against |",
        "|---|---|---|---|---|",
    ]
    for f in result["figures"]:
        spread = f"{number(f['min'])} - {with_unit(f['max'], f['unit'])}" if len(f["values"]) > 1 else "-"
        against = f.get("baseline", "")
        lines.append(
            f"| {f['name']} | {with_unit(f['median'], f['unit'])} | {spread} | {len(f['values'])} | {against} |"
        )
    return "\n".join(lines)


def tables(directory: Path = RESULTS) -> str:
    """The tables of every results file in ``directory``, by bench name."""
    results = [load(path) for path in sorted(Path(directory).glob("*.json"))]
    return "\n\n".join(table(r) for r in results) or "(no figures recorded yet)"


def current(path: Path = DOC) -> str | None:
    return settings.current(path, BEGIN, END)


def write(path: Path = DOC) -> None:
    settings.write_between(path, tables(), BEGIN, END)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(tables())
