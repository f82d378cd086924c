"""rocketmq_rpc_latency: time from a request's processor starting to its response, per request and
response code, as RocketMQ's RemotingMetricsManager records it (milliseconds; buckets 1, 3, 5, 7, 10, 100,
1000, 2000, 3000 ms).

It rides on the remoting server's RPC hook (the hook every request passes through before its processor
and again with its response, also when the response comes later: a SYNC_FLUSH send, a held pull), chained
after the ACL hook when there is one, so only accepted requests are timed. It is installed only when the
exporter runs with ``enableRemotingMetrics=true``; otherwise the remoting path is unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting.hook import RPCHook

BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
_BOUNDS_NS = tuple(int(b * 1_000_000) for b in BUCKETS_MS)
# requests whose response never came (connection closed, handler failed): forgotten after this long
_STALE_NS = 120 * 1_000_000_000
_MAX_PENDING = 100_000
_PULL = int(RequestCode.PULL_MESSAGE)
# a pull answered this much later than it arrived was held for new messages (is_long_polling=true); the
# processor itself answers in microseconds
_HELD_NS = 100 * 1_000_000


def _names(enum: Any) -> dict[int, str]:
    return {int(m): m.name.lower() for m in enum}


REQUEST_NAMES = _names(RequestCode)
RESPONSE_NAMES = _names(ResponseCode)


class _Series:
    __slots__ = ("buckets", "sum_ns")

    def __init__(self) -> None:
        self.buckets = [0] * (len(_BOUNDS_NS) + 1)
        self.sum_ns = 0


class RpcLatency(RPCHook):
    """Times requests between do_before_request and do_after_response (loop thread only)."""

    def __init__(self, inner: RPCHook | None = None) -> None:
        self.inner = inner  # the ACL hook, run first (it may refuse the request)
        self._started: dict[int, int] = {}
        self.series: dict[tuple[int, int, bool], _Series] = {}

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        inner = self.inner
        if inner is not None:
            inner.do_before_request(remote_addr, request)
        started = self._started
        if len(started) >= _MAX_PENDING:
            self._forget_stale()
        started[id(request)] = time.perf_counter_ns()

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        t0 = self._started.pop(id(request), None)
        inner = self.inner
        if inner is not None:
            inner.do_after_response(remote_addr, request, response)
        if t0 is None:
            return
        elapsed = time.perf_counter_ns() - t0
        code = request.code
        key = (code, -1 if response is None else response.code, code == _PULL and elapsed > _HELD_NS)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = _Series()
        s.sum_ns += elapsed
        i = 0
        for bound in _BOUNDS_NS:
            if elapsed <= bound:
                break
            i += 1
        s.buckets[i] += 1

    def _forget_stale(self) -> None:
        cutoff = time.perf_counter_ns() - _STALE_NS
        started = self._started
        for key in [k for k, t in started.items() if t < cutoff]:
            del started[key]
        if len(started) >= _MAX_PENDING:  # all recent: a flood of unanswered requests; start over
            started.clear()

    # -- exposition (scrape thread) ----------------------------------------------------------
    def snapshot(self) -> list[tuple[tuple[int, int, bool], list[int], int]]:
        return [(k, list(s.buckets), s.sum_ns) for k, s in list(self.series.items())]

    @staticmethod
    def families(
        snap: list[tuple[tuple[int, int, bool], list[int], int]], labels: dict[str, str]
    ) -> Iterator[HistogramMetricFamily]:
        names = [*labels, "protocol_type", "request_code", "response_code", "is_long_polling", "result"]
        fam = HistogramMetricFamily("rocketmq_rpc_latency", "Rpc latency (milliseconds)", labels=names)
        base = list(labels.values())
        for (code, rcode, long_polling), buckets, sum_ns in snap:
            cumulative = []
            total = 0
            for bound, n in zip((*BUCKETS_MS, float("inf")), buckets, strict=True):
                total += n
                cumulative.append((floatToGoString(bound), total))
            fam.add_metric(
                [
                    *base,
                    "remoting",
                    REQUEST_NAMES.get(code, str(code)),
                    "oneway" if rcode == -1 else RESPONSE_NAMES.get(rcode, str(rcode)),
                    "true" if long_polling else "false",
                    "oneway" if rcode == -1 else "success",
                ],
                cumulative,
                sum_ns / 1_000_000,
            )
        yield fam
