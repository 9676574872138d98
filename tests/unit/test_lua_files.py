"""The frontier's scripts are files of their own (crawler/frontier/lua/), each named after
its verb and opening with its contract, their shared pieces in lua/includes/; the Python
side holds no Lua."""

import re

from crawler.frontier import scripts


def test_each_script_is_a_file_that_opens_with_its_contract():
    for name in scripts.NAMES:
        text = scripts.LUA.joinpath(f"{name}.lua").read_text()
        assert text.startswith(f"-- {name.upper()}: "), f"lua/{name}.lua does not open with its contract"
        for piece in re.findall(r'^--- @include "([a-z_]+)"$', text, re.M):
            assert scripts.LUA.joinpath("includes", f"{piece}.lua").is_file(), (name, piece)


def test_a_script_as_redis_runs_it_has_its_pieces_in_place_once_each():
    pop = scripts.source("pop")
    assert pop.startswith("-- luacheck: push ignore 211 631\nlocal K = {")  # the key names first
    assert "--- @include" not in pop
    assert pop.count("local function settle(") == 1 and pop.count("local function land(") == 1
    assert scripts.POP == pop


def test_the_python_side_holds_no_lua():
    text = scripts.LUA.parent.joinpath("scripts.py").read_text()
    assert "redis.call" not in text
