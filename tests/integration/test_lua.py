"""The frontier's Lua scripts, as Redis runs them (crawler/frontier/scripts.py assembles each
from crawler/frontier/lua/), pass luacheck (Debian's lua-check) with the project's
.luacheckrc: Redis's Lua 5.1, its globals, no unused variable, no shadowing, no global set.
Without luacheck skipped, or failed in CI."""

import shutil
import subprocess

import pytest

from crawler.frontier import scripts
from testing.services import require_service
from testing.workers import ROOT


@pytest.mark.parametrize("name", scripts.NAMES)
def test_each_script_passes_luacheck(name):
    luacheck = shutil.which("luacheck")
    if luacheck is None:
        require_service("luacheck", "no luacheck: `apt-get install lua-check`")
    out = subprocess.run(
        [luacheck, "--config", str(ROOT / ".luacheckrc"), "--no-color", "--filename", f"{name}.lua", "-"],
        input=scripts.source(name),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
