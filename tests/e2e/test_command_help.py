"""Each command of the project lists its own options beside -h (before Scrapy's global
options, where a user reads first), and a wrong action names what was wrong."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.commands import ScrapyCommand
from scrapy.settings import Settings
from scrapy.utils.misc import load_object

from testing.workers import clean_env

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("archive", "crawl", "demo", "frontier", "recrawl", "seed", "serve", "submit", "urlstore")


def _option_strings(command: ScrapyCommand) -> set[str]:
    command.settings = Settings()
    parser = argparse.ArgumentParser(add_help=False)
    command.add_options(parser)
    return {s for action in parser._actions for s in action.option_strings}


def _scrapy(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60
    )


class _Bare(ScrapyCommand):
    """A command with Scrapy's global options only."""

    def short_desc(self) -> str:
        return ""

    def run(self, args, opts) -> None:
        pass


@pytest.mark.parametrize("name", COMMANDS)
def test_help_lists_the_commands_own_options_before_the_global_ones(name):
    command = load_object(f"crawler.commands.{name}.Command")()
    own = _option_strings(command) - _option_strings(_Bare())
    assert own, f"scrapy {name} defines no options of its own"
    out = _scrapy(name, "-h")
    assert out.returncode == 0, out.stderr
    first = out.stdout.split("Global Options", 1)[0]
    missing = sorted(o for o in own if o not in first)
    assert not missing, f"scrapy {name} -h does not list {missing} beside -h:\n{out.stdout}"


def test_an_unknown_action_is_one_line_naming_what_was_wrong():
    out = _scrapy("frontier", "bogus")
    assert out.returncode == 2
    assert "error: unknown action 'bogus': expected stats (the default), clear, pause, resume or drop" in out.stderr, (
        out.stderr
    )


def test_each_commands_help_says_what_a_newcomer_looks_for():
    """crawl -h names the broad spider and its -a arguments; frontier -h its actions; seed -h
    that it takes URLs as well as files; archive -h the time --at takes; serve -h the token."""
    from crawler.spiders.broad import ARGUMENTS

    def own(name: str) -> str:
        out = _scrapy(name, "-h")
        assert out.returncode == 0, out.stderr
        return " ".join(out.stdout.split("Global Options", 1)[0].split())  # (lines wrapped: words only)

    crawl = own("crawl")
    assert "scrapy crawl [options] broad" in crawl and all(f"-a {name}=" in crawl for name in ARGUMENTS), crawl
    frontier = own("frontier")
    assert all(
        f"{action}:" in frontier for action in ("pause [--host H]", "resume [--host H]", "drop --host H --yes")
    ), frontier
    assert "scrapy seed [options] FILE|URL [FILE|URL ...]" in own("seed")
    assert "--at TIME get: the capture nearest this time (UTC): 20261126" in own("archive")
    assert "SERVE_TOKEN" in own("serve")
