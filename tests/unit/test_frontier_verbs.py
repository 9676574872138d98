"""The single and the sharded frontier both satisfy the frontier's verbs
(crawler/frontier/verbs.py): every verb there, with every parameter it names.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/integration/test_frontier_verbs.py."""

import inspect

import pytest

from crawler.frontier.frontier import Frontier
from crawler.frontier.shards import ShardedFrontier
from crawler.frontier.verbs import FrontierVerbs

VERBS = [
    name
    for name, value in vars(FrontierVerbs).items()
    if callable(value) and not name.startswith("_") and name not in ("__init__",)
]


def test_the_interface_names_the_verbs_components_use():
    assert {"put", "get", "ack", "renew", "give_back", "slot", "end", "fail", "stats", "clear"} <= set(VERBS)


@pytest.mark.parametrize("cls", [Frontier, ShardedFrontier])
@pytest.mark.parametrize("verb", VERBS)
def test_each_frontier_takes_every_parameter_of_each_verb(cls, verb):
    implementation = getattr(cls, verb, None)
    assert callable(implementation), f"{cls.__name__} has no {verb}"
    wanted = inspect.signature(getattr(FrontierVerbs, verb)).parameters
    given = inspect.signature(implementation).parameters
    open_kwargs = any(p.kind is p.VAR_KEYWORD for p in given.values())
    open_args = any(p.kind is p.VAR_POSITIONAL for p in given.values())
    for name, p in wanted.items():
        if p.kind is p.VAR_POSITIONAL:
            assert open_args, f"{cls.__name__}.{verb} takes no *{name}"
        elif p.kind is p.VAR_KEYWORD:
            assert open_kwargs or any(q.kind is q.KEYWORD_ONLY for q in given.values()), f"{cls.__name__}.{verb}"
        else:
            assert name in given or open_kwargs or open_args, f"{cls.__name__}.{verb} does not take {name}"
            if name in given and p.default is not p.empty:
                assert given[name].default is not given[name].empty, f"{cls.__name__}.{verb}: {name} is required"
