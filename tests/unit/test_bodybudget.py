"""Back-pressure on big bodies (crawler/page/budget.py): the budget on plain values, and a
real worker crawling a loopback site of 8 MB pages whose resident memory stays bounded.

Here: the unit tests (pure: no service, no process); the others of this subject:
tests/e2e/test_bodybudget.py."""

import gc
import threading

from twisted.internet import task
from twisted.internet.defer import CancelledError

from crawler.page.budget import BodyBudget

MB = 2**20


class Response:
    """Stands for a Scrapy response: a body, garbage once dropped."""

    def __init__(self, size: int):
        self.body = b"x" * size


def test_big_bodies_wait_for_room_in_turn_and_small_ones_never_wait():
    clock = task.Clock()
    budget = BodyBudget(20 * MB, MB, max_wait=30, clock=clock)
    first, second = budget.reserve(10 * MB), budget.reserve(10 * MB)
    assert first.called and second.called and budget.held == 20 * MB
    third, fourth = budget.reserve(8 * MB), budget.reserve(MB)
    assert not third.called and not fourth.called  # in turn: the small one waits behind
    assert not budget.big(MB - 1)  # below the size: never budgeted
    response = Response(10 * MB)
    budget.hold(response, first.result)  # the first body's response holds its bytes...
    budget.hold(response)  # (once)
    assert budget.held == 20 * MB
    del response  # ... until it is gone
    gc.collect()
    assert third.called and fourth.called and budget.held == 19 * MB
    second.result.release()
    second.result.release()  # a charge is released once
    assert budget.held == 9 * MB


def test_one_body_larger_than_the_budget_goes_in_alone():
    budget = BodyBudget(4 * MB, MB, max_wait=30, clock=task.Clock())
    alone = budget.reserve(9 * MB)
    assert alone.called
    after = budget.reserve(MB)
    assert not after.called
    alone.result.release()
    assert after.called and budget.held == MB


def test_a_wait_is_bounded_and_a_cancelled_one_gives_its_place_up():
    clock = task.Clock()
    budget = BodyBudget(4 * MB, MB, max_wait=30, clock=clock)
    held = budget.reserve(4 * MB)
    cancelled, waiting = budget.reserve(2 * MB), budget.reserve(2 * MB)
    cancelled.addErrback(lambda f: f.trap(CancelledError))
    cancelled.cancel()
    assert budget._waiting and budget._waiting[0][1] is waiting
    clock.advance(30)  # waited out: let in over the budget
    assert waiting.called and budget.held == 6 * MB
    held.result.release()
    waiting.result.release()
    assert budget.held == 0


def test_a_body_freed_in_another_thread_is_released_in_the_budgets_own():
    budget = BodyBudget(4 * MB, MB, max_wait=30, clock=task.Clock())
    charge = budget.reserve(4 * MB).result
    waiting = budget.reserve(2 * MB)
    calls = []
    from twisted.internet import reactor

    original = reactor.callFromThread
    reactor.callFromThread = lambda fn, *args: calls.append((fn, args))
    try:
        thread = threading.Thread(target=charge.release)
        thread.start()
        thread.join()
    finally:
        reactor.callFromThread = original
    assert budget.held == 4 * MB and not waiting.called  # not from that thread...
    for fn, args in calls:
        fn(*args)  # ... but from the reactor's
    assert waiting.called and budget.held == 2 * MB
