"""The benchmarks' figures as data (bench/results.py) and docs/BENCHMARKS.md's tables made
from them (bench/report.py): the page shows what the committed files hold, and a file
written by a bench reads back as it was recorded."""

from bench import report
from bench.results import Results, load

MACHINE = {"cores": 2, "ram_gib": 24.0, "cpu": "a CPU", "os": "Linux 6", "python": "3.12.3"}


def test_the_benchmarks_page_shows_the_recorded_figures():
    assert report.current() == report.tables(), "docs/BENCHMARKS.md: run python -m bench.report --write"


def test_a_results_file_reads_back_as_recorded(tmp_path):
    results = Results(
        "example", runs=3, argv=["--runs", "3"], commit={"hash": "abc1234", "dirty": True}, machine=MACHINE
    )
    for value in (2.0, 1.0, 4.0):
        results.add("pages/s", value, "pages/s")
    results.add("ours / theirs", 1.5, "x", baseline="their pages/s")
    path = results.write(tmp_path)
    assert path == tmp_path / "example.json"

    got = load(path)
    assert got["command"] == "python -m bench.example --runs 3"
    assert got["commit"] == {"hash": "abc1234", "dirty": True}
    assert got["runs"] == 3 and got["machine"]["cores"] == 2 and "shared" in got["machine"]
    rate, ratio = got["figures"]
    assert rate == {
        "name": "pages/s",
        "unit": "pages/s",
        "values": [2.0, 1.0, 4.0],
        "median": 2.0,
        "min": 1.0,
        "max": 4.0,
    }
    assert ratio["baseline"] == "their pages/s" and ratio["values"] == [1.5]

    text = report.tables(tmp_path)
    assert "### `python -m bench.example --runs 3`" in text
    assert "Commit abc1234 with changes" in text
    assert "| pages/s | 2 pages/s | 1 - 4 pages/s | 3 |  |" in text
    assert "| ours / theirs | 1.5 x | - | 1 | their pages/s |" in text
