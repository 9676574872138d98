"""The figures of a benchmark as data: ``bench/results/<bench>.json``, from which
``python -m bench.report --write`` makes docs/BENCHMARKS.md's tables.

A bench makes one ``Results`` at its start, ``add``s each headline figure once a run
(a figure measured in three runs has three values), and ``write``s the file at its end::

    results = Results("simhash_cost", runs=args.runs)
    for _ in range(args.runs):
        results.add("crawler's SimHash, p50", 0.05, "ms")
    results.add("the package / the crawler, p50", 22.0, "x", baseline="crawler's SimHash, p50")
    results.write()

The file holds the command line, the commit (short hash, and whether the tree had changes),
the machine (cores, memory, CPU model, OS, Python; the load average at the start and the
cores other processes kept busy meanwhile, and ``shared`` when either says the machine was
not the bench's alone), the date, the runs, and for each figure its unit, every run's
value, the median and the spread (lowest and highest), and for a ratio the figure it is
measured against."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from testing.sampling import machine_cpu

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SHARED_LOAD = 0.5  # load average at the start above which the machine counts as shared
SHARED_CORES = 0.25  # cores other processes kept busy during the bench above which it does


def git(*args: str) -> str:
    """What a git command in the project prints (e.g. ``git("show", "HEAD~1:a/b.py")``)."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def commit() -> dict:
    """The short hash of HEAD and whether tracked files differ from it."""
    return {
        "hash": git("rev-parse", "--short", "HEAD").strip(),
        "dirty": bool(git("status", "--porcelain", "-uno").strip()),
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:  # neither psutil nor platform names the model on Linux
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def own_seconds() -> float:
    """CPU seconds of this process, its threads and the children it has waited for."""
    times = psutil.Process().cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def machine() -> dict:
    return {
        "cores": psutil.cpu_count(),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": cpu_model(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def figure(name: str, unit: str, values: list[float], baseline: str | None = None) -> dict:
    """A figure's entry: every run's value, the median and the spread."""
    entry = {"name": name, "unit": unit, "values": values, "median": statistics.median(values)}
    entry |= {"min": min(values), "max": max(values)}
    if baseline:
        entry["baseline"] = baseline
    return entry


class Results:
    """The figures of one bench's run, written to ``bench/results/<bench>.json``; ``runs``:
    how many times the bench repeats its measurement (``--runs``). ``commit`` and
    ``machine`` may be given (a test's); otherwise they are read from git and psutil."""

    def __init__(
        self, bench: str, runs: int = 1, argv: list[str] | None = None, commit=None, machine=None, file: str = ""
    ):
        """``file``: the file's name when a bench keeps more than one (its sizes), else the bench's."""
        self.bench, self.runs = bench, runs
        self.file = file or bench
        self.command = shlex.join(["python", "-m", f"bench.{bench}", *(sys.argv[1:] if argv is None else argv)])
        self.commit, self.machine = commit, machine
        self.values: dict[str, list[float]] = {}
        self.units: dict[str, str] = {}
        self.baselines: dict[str, str] = {}
        self.load = psutil.getloadavg()[0]
        self.started = time.monotonic()
        self.busy, self.own = machine_cpu()[0], own_seconds()

    def add(self, name: str, value: float, unit: str, baseline: str | None = None) -> None:
        """One run's value of the figure ``name``, in ``unit``; ``baseline``: what a ratio
        is measured against (another figure's name, or a few words)."""
        self.values.setdefault(name, []).append(float(f"{value:.6g}"))
        self.units[name] = unit
        if baseline:
            self.baselines[name] = baseline

    def record(self) -> dict:
        wall = max(time.monotonic() - self.started, 1e-9)
        others = max(0.0, (machine_cpu()[0] - self.busy) - (own_seconds() - self.own)) / wall
        shared = {"load_average": round(self.load, 2), "others_cores": round(others, 2)}
        shared["shared"] = self.load > SHARED_LOAD or others > SHARED_CORES
        return {
            "bench": self.bench,
            "command": self.command,
            "commit": self.commit or commit(),
            "machine": (self.machine or machine()) | shared,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "runs": self.runs,
            "figures": [figure(n, self.units[n], v, self.baselines.get(n)) for n, v in self.values.items()],
        }

    def write(self, directory: Path | None = None) -> Path:
        """Write the file (``bench/results`` unless ``directory``, or $BENCH_RESULTS) and say where."""
        directory = Path(directory or os.environ.get("BENCH_RESULTS") or RESULTS)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.file}.json"
        path.write_text(json.dumps(self.record(), indent=1) + "\n")
        print(f"figures written to {path}")
        return path


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())
