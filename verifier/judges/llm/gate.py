"""One endpoint's admission: how many requests may be in flight, and when the next may go.

Every request to an endpoint passes its Gate (the samples of a judge in `grade`;
every request of a batch). A 429 or 503 (with or without Retry-After) pauses the
whole gate, not just the request that got it: no request to that endpoint is sent
until the wait is over, and the number allowed in flight is halved (once per pause).

A batch's gate starts at `initial` and finds the endpoint's pace itself, as TCP
does. While the endpoint keeps up it grows by one for every success (doubling each
round trip), until the first sign that it does not. The signs are a throttle (429,
503, 529) and latency rising: the mean of the last WINDOW answered requests more
than RISE times the lowest such mean seen (a queueing server answers later rather
than refusing). A throttle halves the limit and remembers what was in flight as the
endpoint's known capacity; from there the gate climbs back by half the distance to
it each round trip (of `limit` successes), then, past it, by one a round trip (a
probe for more, as BIC-TCP does). Rising latency holds the limit where it is until
latency falls back. The limit grows only while it is used (at least half of it in
flight in this round trip or the last), and never passes `capacity`
(`--llm-concurrency`), a ceiling, not a pace.
A gate without `initial` starts at its capacity (grade's: one slot per sample).
"""

from __future__ import annotations

import collections
import math
import threading
import time

import attrs

WINDOW = 16  # answered requests per latency mean
RISE = 1.5  # a mean this many times the lowest one is rising latency
RISE_SLACK_S = 0.01  # below this, a difference is noise, not a queue


@attrs.frozen
class GateFigures:
    """What a gate saw: for the batch summary."""

    capacity: int  # the ceiling
    peak_in_flight: int
    throttled: int  # 429/503 answers
    limit: int = 0  # what it allowed in flight at the end
    baseline_latency_s: float | None = None  # the lowest mean latency of WINDOW answers


class Gate:
    def __init__(self, capacity: int, initial: int | None = None) -> None:
        self.capacity = capacity
        self.limit = capacity if initial is None else max(1, min(initial, capacity))
        self.in_flight = 0
        self.peak = 0
        self.throttled = 0
        self.paused_until = 0.0
        self._successes = 0
        self._doubling = self.limit < capacity  # slow start, until the endpoint says enough
        self._known = 0  # what was in flight at the last throttle (0: none yet)
        self._round_peak = 0  # the most in flight this round trip (`limit` answers) and the last
        self._round_answers = 0
        self._last_peak = 0
        self._latencies: collections.deque[float] = collections.deque(maxlen=WINDOW)
        self._baseline = math.inf
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
                    self._round_peak = max(self._round_peak, self.in_flight)
                    return True
                else:
                    self._condition.wait(deadline - now)

    def leave(self) -> None:
        with self._condition:
            self.in_flight -= 1
            self._condition.notify()

    def succeeded(self, latency_s: float | None = None) -> None:
        """A request was answered (after latency_s, while still counted in flight): room for
        more, unless latency rises or the limit is not being used."""
        with self._condition:
            if latency_s is not None and self._rising(latency_s):
                self._doubling = False
                return
            if not self._used() or self.limit >= self.capacity:
                return
            self._successes += 1
            if self._doubling:
                self.limit += 1
            elif self._successes >= self.limit:  # a round trip
                self.limit += max(1, (self._known - self.limit) // 2)
            else:
                return
            self.limit = min(self.limit, self.capacity)
            self._successes = 0
            self._condition.notify_all()

    def throttle(self, wait_s: float) -> None:
        """The endpoint said 429/503: every request waits wait_s, and fewer go at once."""
        with self._condition:
            now = time.monotonic()
            self.throttled += 1
            self._doubling = False
            if now >= self.paused_until:  # the first of its wave
                self._known = self.in_flight + 1  # with the refused request, which has left
                self.limit = max(1, self.limit // 2)
                self._successes = 0
            self.paused_until = max(self.paused_until, now + wait_s)

    def figures(self) -> GateFigures:
        with self._condition:
            baseline = None if math.isinf(self._baseline) else round(self._baseline, 4)
            return GateFigures(self.capacity, self.peak, self.throttled, self.limit, baseline)

    def _used(self) -> bool:
        """Whether at least half the limit was in flight this round trip or the last one
        (answers come in bursts, faster than new requests go: an instant says too little)."""
        self._round_answers += 1
        if self._round_answers >= self.limit:
            self._last_peak, self._round_peak = self._round_peak, self.in_flight
            self._round_answers = 0
        return max(self._round_peak, self._last_peak) * 2 >= self.limit

    def _rising(self, latency_s: float) -> bool:
        """Whether the last WINDOW answers took notably longer than the quickest WINDOW did."""
        self._latencies.append(latency_s)
        if len(self._latencies) < WINDOW:
            return False
        mean = math.fsum(self._latencies) / WINDOW
        self._baseline = min(self._baseline, mean)
        return mean > self._baseline * RISE + RISE_SLACK_S
