-- luacheck for the frontier's scripts as Redis runs them (crawler/frontier/scripts.py
-- assembles each: tests/integration/test_lua.py checks them): Redis's Lua 5.1 and the
-- globals it gives a script
std = "lua51"
read_globals = {"redis", "ARGV", "KEYS", "struct", "cjson", "cmsgpack", "bit"}
max_line_length = 120
