"""One endpoint's admission: how many requests may be in flight, and when the next may go.

Every request to an endpoint passes its Gate (the samples of one judge in `grade`;
every request of a batch). A 429 or 503 (with or without Retry-After) pauses the
whole gate, not just the request that got it: no request to that endpoint is sent
until the wait is over, and the number allowed in flight is halved (once per pause).
Each run of `limit` successes raises it by one again, up to the capacity: additive
increase, multiplicative decrease, as TCP does, so a throttled endpoint sees the
batch back off as one client.
"""

from __future__ import annotations

import threading
import time

from verifier.named import NamedTuple


class GateFigures(NamedTuple):
    """What a gate saw: for the batch summary."""

    capacity: int
    peak_in_flight: int
    throttled: int  # 429/503 answers


class Gate:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.limit = capacity
        self.in_flight = 0
        self.peak = 0
        self.throttled = 0
        self.paused_until = 0.0
        self._successes = 0
        self._condition = threading.Condition()

    def enter(self, deadline: float) -> bool:
        """Wait for a free slot and the end of any pause; False when the deadline comes first."""
        with self._condition:
            while True:
                now = time.monotonic()
                if now >= deadline or self.paused_until >= deadline:
                    return False
                if now < self.paused_until:
                    self._condition.wait(self.paused_until - now)
                elif self.in_flight < self.limit:
                    self.in_flight += 1
                    self.peak = max(self.peak, self.in_flight)
                    return True
                else:
                    self._condition.wait(deadline - now)

    def leave(self) -> None:
        with self._condition:
            self.in_flight -= 1
            self._condition.notify()

    def succeeded(self) -> None:
        with self._condition:
            self._successes += 1
            if self._successes >= self.limit and self.limit < self.capacity:
                self.limit += 1
                self._successes = 0
                self._condition.notify()

    def throttle(self, wait_s: float) -> None:
        """The endpoint said 429/503: every request waits wait_s, and fewer go at once."""
        with self._condition:
            now = time.monotonic()
            self.throttled += 1
            if now >= self.paused_until:  # the first of its wave
                self.limit = max(1, self.limit // 2)
                self._successes = 0
            self.paused_until = max(self.paused_until, now + wait_s)

    def figures(self) -> GateFigures:
        with self._condition:
            return GateFigures(self.capacity, self.peak, self.throttled)
