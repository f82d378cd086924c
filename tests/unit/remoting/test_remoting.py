"""RemotingServer / RemotingClient over real TCP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import Awaitable, Callable

import pytest

from rocketq.protocol.codes import FLAG_ONEWAY, ResponseCode, SerializeType
from rocketq.protocol.frame import FrameDecoder, RemotingCommand
from rocketq.remoting import (
    Channel,
    RemotingClient,
    RemotingConnectError,
    RemotingServer,
    RemotingTimeoutError,
    RPCHook,
    run,
)

SLOW, FAST, BOOM, ECHO, CLOSE_ME = 1001, 1002, 1003, 1004, 1005


def _server(**kw: object) -> RemotingServer:
    server = RemotingServer(**kw)  # type: ignore[arg-type]

    async def slow(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(float(req.ext_fields.get("sleep", "1.0")))
        return req.response(ResponseCode.SUCCESS, "slow")

    def fast(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, "fast", ext_fields={"n": req.ext_fields.get("n", "")})

    async def boom(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        raise ValueError("kaboom 42")

    def echo(ch: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.response(ResponseCode.SUCCESS, body=req.body)

    def close_me(ch: Channel, req: RemotingCommand) -> None:
        ch.close()

    server.register_processor(SLOW, slow)
    server.register_processor(FAST, fast)
    server.register_processor(BOOM, boom)
    server.register_processor(ECHO, echo)
    server.register_processor(CLOSE_ME, close_me)
    return server


def _fast(i: int) -> RemotingCommand:
    return RemotingCommand.request(FAST, {"n": str(i)})


def arun(fn: Callable[[], Awaitable[None]]) -> None:
    run(asyncio.wait_for(fn(), 20))  # type: ignore[arg-type]


async def _raw_connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def _read_command(reader: asyncio.StreamReader, timeout: float = 2.0) -> RemotingCommand:
    dec = FrameDecoder()
    while True:
        data = await asyncio.wait_for(reader.read(65536), timeout)
        if not data:
            raise EOFError
        cmds = dec.feed(data)
        if cmds:
            return cmds[0]


def test_slow_handler_does_not_delay_fast_one_on_same_connection() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            slow = asyncio.ensure_future(
                client.invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "1.0"}), 5)
            )
            await asyncio.sleep(0.05)
            t0 = time.monotonic()
            fast = await client.invoke(server.address, RemotingCommand.request(FAST, {"n": "7"}), 5)
            elapsed = time.monotonic() - t0
            assert fast.remark == "fast" and fast.ext_fields["n"] == "7"
            assert elapsed < 0.5, elapsed
            assert not slow.done()
            assert (await slow).remark == "slow"
            assert len(server.channels) == 1  # both went over one shared connection

    arun(body)


def test_many_concurrent_requests_get_their_own_responses() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            reqs = [
                client.invoke(server.address, RemotingCommand.request(FAST, {"n": str(i)}))
                for i in range(500)
            ]
            resps = await asyncio.gather(*reqs)
            assert [r.ext_fields["n"] for r in resps] == [str(i) for i in range(500)]
            assert len(server.channels) == 1  # concurrent connects were deduplicated

    arun(body)


def test_oneway_is_never_answered() -> None:
    async def body() -> None:
        seen: list[int] = []

        async with _server() as server:

            def record(ch: Channel, req: RemotingCommand) -> RemotingCommand:
                seen.append(req.opaque)
                return req.response(ResponseCode.SUCCESS, "should not be sent")

            server.register_processor(2000, record)
            reader, writer = await _raw_connect(server.port)
            oneway = RemotingCommand(2000, opaque=11, flag=FLAG_ONEWAY)
            unknown_oneway = RemotingCommand(4321, opaque=12, flag=FLAG_ONEWAY)
            boom_oneway = RemotingCommand(BOOM, opaque=13, flag=FLAG_ONEWAY)
            normal = RemotingCommand(FAST, opaque=14)
            writer.write(oneway.encode() + unknown_oneway.encode() + boom_oneway.encode() + normal.encode())
            resp = await _read_command(reader)
            assert resp.opaque == 14 and resp.remark == "fast"
            assert seen == [11]
            writer.close()

            # and via the client API
            async with RemotingClient() as client:
                await client.invoke_oneway(server.address, RemotingCommand.request(2000))
                await asyncio.sleep(0.1)
                assert len(seen) == 2

    arun(body)


def test_unknown_code_gets_request_code_not_supported() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            resp = await client.invoke(server.address, RemotingCommand.request(4321))
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
            assert "4321" in (resp.remark or "")

    arun(body)


def test_default_processor_handles_unregistered_codes() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            server.register_default_processor(lambda ch, req: req.response(ResponseCode.SUCCESS, "dflt"))
            resp = await client.invoke(server.address, RemotingCommand.request(4321))
            assert (resp.code, resp.remark) == (0, "dflt")

    arun(body)


def test_handler_exception_becomes_system_error_and_server_survives() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:

            def sync_boom(ch: Channel, req: RemotingCommand) -> RemotingCommand:
                raise RuntimeError("sync failure")

            server.register_processor(2001, sync_boom)
            resp = await client.invoke(server.address, RemotingCommand.request(BOOM))
            assert resp.code == ResponseCode.SYSTEM_ERROR == 1
            assert "kaboom 42" in (resp.remark or "")
            resp = await client.invoke(server.address, RemotingCommand.request(2001))
            assert (resp.code, resp.remark) == (1, "sync failure")
            resp = await client.invoke(server.address, RemotingCommand.request(FAST))
            assert resp.code == 0

    arun(body)


def test_sync_handler_may_return_an_awaitable_slow_path() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:

            async def later(req: RemotingCommand) -> RemotingCommand:
                await asyncio.sleep(0.05)
                return req.response(ResponseCode.SUCCESS, "later")

            server.register_processor(2002, lambda ch, req: later(req))
            resp = await client.invoke(server.address, RemotingCommand.request(2002))
            assert resp.remark == "later"

    arun(body)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", -5) + b"xxxx",  # negative length
        struct.pack(">i", 64 * 1024 * 1024),  # over the frame limit
        struct.pack(">ii", 12, 100) + b"abcdefgh",  # header length beyond the frame
        struct.pack(">ii", 8, 4) + b"{{{{",  # invalid JSON header
        struct.pack(">ii", 8, (7 << 24) | 4) + b"abcd",  # unknown serialize type
    ],
)
def test_garbage_closes_only_that_connection(garbage: bytes) -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            assert (await client.invoke(server.address, RemotingCommand.request(FAST))).code == 0
            reader, writer = await _raw_connect(server.port)
            writer.write(garbage)
            data = await asyncio.wait_for(reader.read(), 2)
            assert data == b""  # the server closed the connection without answering
            writer.close()
            resp = await client.invoke(server.address, RemotingCommand.request(FAST))
            assert resp.code == 0
            assert len(server.channels) == 1

    arun(body)


def test_max_frame_size_is_enforced() -> None:
    async def body() -> None:
        async with _server(max_frame_size=1024) as server, RemotingClient() as client:
            ok = await client.invoke(server.address, RemotingCommand.request(ECHO, body=b"x" * 100))
            assert ok.body == b"x" * 100
            with pytest.raises(RemotingConnectError):
                await client.invoke(server.address, RemotingCommand.request(ECHO, body=b"x" * 2000), 2)
            # the client reconnects for the next call
            ok = await client.invoke(server.address, RemotingCommand.request(ECHO, body=b"y"))
            assert ok.body == b"y"

    arun(body)


def test_idle_connections_are_closed() -> None:
    async def body() -> None:
        closed: list[Channel] = []
        async with _server(idle_timeout_s=0.6) as server, RemotingClient() as client:
            server.on_channel_close(closed.append)
            await client.invoke(server.address, RemotingCommand.request(FAST))
            ch = await client.get_channel(server.address)
            # an active connection stays open across several idle periods
            for _ in range(5):
                await asyncio.sleep(0.1)
                await client.invoke(server.address, RemotingCommand.request(FAST))
            assert not ch.closed
            await asyncio.sleep(1.5)
            assert ch.closed
            assert len(closed) == 1 and not server.channels

    arun(body)


def test_on_channel_close_fires_when_client_goes_away() -> None:
    async def body() -> None:
        closed = asyncio.Event()
        seen: list[str] = []

        async def on_close(ch: Channel) -> None:
            seen.append(ch.remote_addr)
            closed.set()

        async with _server() as server:
            server.on_channel_close(on_close)
            client = RemotingClient()
            await client.invoke(server.address, RemotingCommand.request(FAST))
            local = (await client.get_channel(server.address)).local_addr
            await client.close()
            await asyncio.wait_for(closed.wait(), 2)
            assert seen == [local]

    arun(body)


def test_server_invokes_client_on_its_channel() -> None:
    async def body() -> None:
        channels: list[Channel] = []
        got_oneway = asyncio.Event()

        async with _server() as server, RemotingClient() as client:

            def hello(ch: Channel, req: RemotingCommand) -> RemotingCommand:
                channels.append(ch)
                return req.response(ResponseCode.SUCCESS)

            server.register_processor(34, hello)

            def check_tx(ch: Channel, req: RemotingCommand) -> None:
                assert req.is_oneway
                got_oneway.set()

            async def push_reply(ch: Channel, req: RemotingCommand) -> RemotingCommand:
                return req.response(ResponseCode.SUCCESS, "pushed:" + req.ext_fields["x"])

            client.register_processor(39, check_tx)
            client.register_processor(326, push_reply)
            await client.invoke(server.address, RemotingCommand.request(34))
            (ch,) = channels
            resp = await ch.invoke(RemotingCommand.request(326, {"x": "1"}), 2)
            assert (resp.code, resp.remark) == (0, "pushed:1")
            ch.invoke_oneway(RemotingCommand.request(39))
            await asyncio.wait_for(got_oneway.wait(), 2)
            resp = await ch.invoke(RemotingCommand.request(40), 2)  # no processor on the client
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            # client requests keep working while the server talks to the client
            assert (await client.invoke(server.address, RemotingCommand.request(FAST))).code == 0

    arun(body)


def test_timeout_and_late_response_is_dropped() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            t0 = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "1.0"}), 0.1)
            assert time.monotonic() - t0 < 0.7
            ch = await client.get_channel(server.address)
            assert ch.pending_count == 0
            await asyncio.sleep(1.0)  # the late response arrives and is ignored
            resp = await client.invoke(server.address, RemotingCommand.request(FAST, {"n": "x"}))
            assert resp.ext_fields["n"] == "x"
            assert not ch.closed

    arun(body)


def test_connection_lost_fails_all_pending() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            pending = [
                asyncio.ensure_future(
                    client.invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "5"}), 5)
                )
                for _ in range(3)
            ]
            await asyncio.sleep(0.05)
            t0 = time.monotonic()
            with pytest.raises(RemotingConnectError):
                await client.invoke(server.address, RemotingCommand.request(CLOSE_ME), 5)
            results = await asyncio.gather(*pending, return_exceptions=True)
            assert all(isinstance(r, RemotingConnectError) for r in results), results
            assert time.monotonic() - t0 < 1.0

    arun(body)


def test_connect_refused_then_reconnect_after_server_restart() -> None:
    async def body() -> None:
        server = _server()
        await server.start()
        port = server.port
        client = RemotingClient(connect_timeout_s=1)
        try:
            assert (await client.invoke(server.address, RemotingCommand.request(FAST))).code == 0
            await server.close()
            await asyncio.sleep(0.05)
            with pytest.raises(RemotingConnectError):
                await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(FAST), 1)
            server = _server(port=port)
            await server.start()
            resp = await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(FAST, {"n": "again"}))
            assert resp.ext_fields["n"] == "again"
        finally:
            await client.close()
            await server.close()

    arun(body)


def test_connect_to_closed_port_is_connect_error() -> None:
    async def body() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        async with RemotingClient() as client:
            results = await asyncio.gather(
                *(client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(FAST), 1) for _ in range(5)),
                return_exceptions=True,
            )
            assert all(isinstance(r, RemotingConnectError) for r in results)
            with pytest.raises(RemotingConnectError):
                await client.invoke("no-port", RemotingCommand.request(FAST))

    arun(body)


def test_rpc_hooks_run_on_both_sides() -> None:
    class Recorder(RPCHook):
        def __init__(self) -> None:
            self.calls: list[tuple[str, int, int | None]] = []

        def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
            if request.ext_fields.get("deny"):
                raise PermissionError("denied by hook")
            request.ext_fields["signed"] = "yes"
            self.calls.append(("before", request.code, None))

        def do_after_response(
            self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
        ) -> None:
            self.calls.append(("after", request.code, response.code if response else None))

    async def body() -> None:
        server_hook, client_hook = Recorder(), Recorder()
        server = _server(rpc_hook=server_hook)
        server.register_processor(2003, lambda ch, req: req.response(0, req.ext_fields.get("signed")))
        async with server, RemotingClient(client_hook) as client:
            resp = await client.invoke(server.address, RemotingCommand.request(2003))
            assert resp.remark == "yes"
            assert client_hook.calls == [("before", 2003, None), ("after", 2003, 0)]
            assert server_hook.calls == [("before", 2003, None), ("after", 2003, 0)]
            server.rpc_hook = None
            denier = Recorder()
            server.rpc_hook = denier
            raw = RemotingClient()
            resp = await raw.invoke(server.address, RemotingCommand.request(FAST, {"deny": "1"}))
            assert (resp.code, resp.remark) == (1, "denied by hook")
            await raw.close()

    arun(body)


def test_binary_serialize_type_answered_in_kind_and_zero_copy_bodies() -> None:
    async def body() -> None:
        async with _server() as server:
            blob = bytearray(b"0123456789" * 10)
            view = memoryview(blob)
            server.register_processor(
                2004, lambda ch, req: req.response(0, body=[view[0:10], view[50:60], b"!"])
            )
            reader, writer = await _raw_connect(server.port)
            req = RemotingCommand(ECHO, opaque=5, body=b"abc", serialize_type=SerializeType.ROCKETMQ)
            req.ext_fields = {"k": "v"}
            writer.write(req.encode())
            resp = await _read_command(reader)
            assert resp.serialize_type == SerializeType.ROCKETMQ and resp.body == b"abc" and resp.opaque == 5
            writer.write(RemotingCommand(2004, opaque=6).encode())
            resp = await _read_command(reader)
            assert resp.body == b"0123456789" + b"0123456789" + b"!"
            writer.close()

    arun(body)


def test_many_clients_in_parallel() -> None:
    async def body() -> None:
        async with _server() as server:
            clients = [RemotingClient() for _ in range(50)]
            resps = await asyncio.gather(
                *(
                    c.invoke(server.address, RemotingCommand.request(FAST, {"n": str(i)}))
                    for i, c in enumerate(clients)
                )
            )
            assert [r.ext_fields["n"] for r in resps] == [str(i) for i in range(50)]
            assert len(server.channels) == 50
            await asyncio.gather(*(c.close() for c in clients))

    arun(body)


def test_server_close_is_graceful_for_in_flight_handlers() -> None:
    async def body() -> None:
        server = _server()
        await server.start()
        async with RemotingClient() as client:
            fut = asyncio.ensure_future(
                client.invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "0.2"}), 3)
            )
            await asyncio.sleep(0.05)
            await server.close(grace_s=2)
            assert (await fut).remark == "slow"

    arun(body)


def test_mixed_timeouts_on_one_connection_each_expire_on_time() -> None:
    async def body() -> None:
        async with _server() as server, RemotingClient() as client:

            async def timed(timeout: float) -> float:
                t0 = time.monotonic()
                with pytest.raises(RemotingTimeoutError):
                    req = RemotingCommand.request(SLOW, {"sleep": "3"})
                    await client.invoke(server.address, req, timeout)
                return time.monotonic() - t0

            await client.get_channel(server.address)
            long_one = asyncio.ensure_future(timed(1.2))
            await asyncio.sleep(0.01)
            short = await timed(0.1)  # armed earlier than the pending long one
            assert 0.09 <= short < 0.8, short
            assert 1.19 <= await long_one < 2.0
            # and the other order
            short_f = asyncio.ensure_future(timed(0.1))
            long_f = asyncio.ensure_future(timed(0.6))
            s, lo = await asyncio.gather(short_f, long_f)
            assert 0.09 <= s < 0.45 and 0.59 <= lo < 1.2, (s, lo)
            assert (await client.invoke(server.address, _fast(1))).code == 0

    arun(body)


def test_error_responses_to_binary_header_requests_use_json() -> None:
    async def body() -> None:
        async with _server() as server:
            reader, writer = await _raw_connect(server.port)
            writer.write(RemotingCommand(4321, opaque=9, serialize_type=SerializeType.ROCKETMQ).encode())
            resp = await _read_command(reader)
            assert (resp.opaque, resp.code, resp.serialize_type) == (9, 3, SerializeType.JSON)
            writer.close()

    arun(body)


def test_too_many_held_requests_on_one_connection_get_system_busy() -> None:
    async def body() -> None:
        async with _server(max_tasks_per_channel=2) as server, RemotingClient() as client:
            slow = [
                asyncio.ensure_future(
                    client.invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "0.3"}))
                )
                for _ in range(2)
            ]
            await asyncio.sleep(0.05)
            resp = await client.invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "0.3"}))
            assert resp.code == ResponseCode.SYSTEM_BUSY and "too many" in (resp.remark or "")
            assert (await client.invoke(server.address, _fast(3))).code == 0  # inline handlers still served
            assert [r.code for r in await asyncio.gather(*slow)] == [0, 0]

    arun(body)


def test_peer_that_does_not_read_cannot_grow_server_buffers() -> None:
    async def body() -> None:
        async with _server() as server:
            reader, writer = await _raw_connect(server.port)
            frame = RemotingCommand(ECHO, body=b"z" * 65536).encode()
            for _ in range(500):  # 32 MiB of echo requests; we never read the responses
                writer.write(frame)
            await asyncio.sleep(1.0)
            (ch,) = server.channels
            buffered = ch._transport.get_write_buffer_size()  # type: ignore[union-attr]
            assert buffered < 8 * 1024 * 1024, buffered
            # reading resumes once the peer drains its responses
            dec, got = FrameDecoder(), 0
            while got < 500:
                data = await asyncio.wait_for(reader.read(1 << 20), 5)
                assert data
                for resp in dec.feed(data):
                    assert resp.code == 0 and len(resp.body) == 65536
                    got += 1
            writer.close()

    arun(body)


def test_oneways_queued_in_this_loop_turn_are_sent_before_close() -> None:
    async def body() -> None:
        seen: list[str] = []
        async with _server() as server:
            server.register_processor(2005, lambda ch, req: seen.append(req.ext_fields["i"]))
            client = RemotingClient()
            ch = await client.get_channel(server.address)
            slow = [
                asyncio.ensure_future(client.invoke(server.address, RemotingCommand.request(SLOW), 5))
                for _ in range(2)
            ]
            await asyncio.sleep(0.05)  # requests in flight: later writes are coalesced
            for i in range(3):
                ch.invoke_oneway(RemotingCommand.request(2005, {"i": str(i)}))
            await client.close()
            for f in slow:
                with pytest.raises(RemotingConnectError):
                    await f
            await asyncio.sleep(0.2)
            assert seen == ["0", "1", "2"]

    arun(body)


def test_sync_handler_may_return_a_future_answered_later() -> None:
    """A plain future (no Task): answered when resolved, in any order, errors become SYSTEM_ERROR, held
    futures count against max_tasks_per_channel and a later inline request is not delayed by them."""

    async def body() -> None:
        async with _server(max_tasks_per_channel=3) as server, RemotingClient() as client:
            loop = asyncio.get_running_loop()
            held: dict[str, asyncio.Future] = {}

            def deferred(ch: Channel, req: RemotingCommand) -> asyncio.Future:
                fut = loop.create_future()
                held[req.ext_fields["n"]] = (fut, req)
                return fut

            server.register_processor(2003, deferred)
            calls = [
                asyncio.ensure_future(client.invoke(server.address, RemotingCommand.request(2003, {"n": n})))
                for n in ("a", "b", "c")
            ]
            await asyncio.sleep(0.05)
            assert sorted(held) == ["a", "b", "c"]
            busy = await client.invoke(server.address, RemotingCommand.request(2003, {"n": "d"}))
            assert busy.code == ResponseCode.SYSTEM_BUSY
            assert (await client.invoke(server.address, _fast(1))).remark == "fast"
            fut, req = held["c"]
            fut.set_result(req.response(ResponseCode.SUCCESS, "c"))
            fut, req = held["a"]
            fut.set_result(req.response(ResponseCode.SUCCESS, "a"))
            held["b"][0].set_exception(RuntimeError("disk gone"))
            results = await asyncio.gather(*calls)
            assert [r.remark for r in results[::2]] == ["a", "c"]
            assert results[1].code == ResponseCode.SYSTEM_ERROR and "disk gone" in results[1].remark

    arun(body)


class _RecordingTransport:
    """Records each send the channel makes (write or writelines) as the frames it carried."""

    def __init__(self) -> None:
        self.sends: list[list[RemotingCommand]] = []
        self.closed = False

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 1)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.sends.append(FrameDecoder().feed(data))

    def writelines(self, parts: list[bytes]) -> None:
        self.write(b"".join(parts))


def _channel_with_recorded_hooks() -> tuple[Channel, _RecordingTransport, list[str]]:
    """A server-side channel on a recording transport; its burst hooks log "begin" / "end" to the list."""
    server = _server()
    runs: list[str] = []
    server.set_burst_hooks(lambda: runs.append("begin"), lambda: runs.append("end"))
    ch = Channel(server._dispatcher)
    transport = _RecordingTransport()
    ch.connection_made(transport)  # type: ignore[arg-type]
    return ch, transport, runs


def test_pipelined_requests_in_one_read_are_answered_in_chunks_in_order() -> None:
    """40 requests in one read: handled 16 per loop turn and answered in order, 16 per send (the client can
    start on the first answers while the rest are handled), not one send each nor one for all; a read that
    arrives meanwhile waits behind them; the burst hooks wrap each run."""

    async def body() -> None:
        ch, transport, runs = _channel_with_recorded_hooks()
        data = b"".join(
            RemotingCommand(FAST, opaque=i + 1, ext_fields={"n": str(i)}).encode() for i in range(42)
        )
        ch.data_received(data[: len(data) * 40 // 42])
        assert [len(s) for s in transport.sends] == [16]  # the rest waits for the next loop turns
        ch.data_received(data[len(data) * 40 // 42 :])  # queued behind the 24 not handled yet
        for _ in range(5):
            await asyncio.sleep(0)
        assert [len(s) for s in transport.sends] == [16, 16, 10]
        answers = [c for s in transport.sends for c in s]
        assert [c.opaque for c in answers] == list(range(1, 43))
        assert [c.ext_fields["n"] for c in answers] == [str(i) for i in range(42)]
        assert runs == ["begin", "end"] * 3

    arun(body)


def test_a_runs_answers_leave_after_its_end_hook_and_not_at_all_when_it_fails() -> None:
    """The store writes a staged run of records in the end hook (ASYNC_FLUSH with pwrite): no answer of the
    run may leave before it, and when it reports failure none leaves and the connection closes."""

    async def body() -> None:
        server = _server()
        transport = _RecordingTransport()
        seen_at_end: list[int] = []
        outcome = [True]

        def end() -> bool:
            seen_at_end.append(sum(len(s) for s in transport.sends))
            return outcome[0]

        server.set_burst_hooks(lambda: None, end)
        ch = Channel(server._dispatcher)
        ch.connection_made(transport)  # type: ignore[arg-type]
        run = b"".join(RemotingCommand(FAST, opaque=i + 1).encode() for i in range(16))
        ch.data_received(run)
        assert seen_at_end == [0] and [len(s) for s in transport.sends] == [16]
        outcome[0] = False
        ch.data_received(run)
        assert seen_at_end == [0, 16] and [len(s) for s in transport.sends] == [16]
        assert transport.closed and ch.closed

    arun(body)


def test_reads_that_split_frames_are_answered_and_a_read_without_a_whole_frame_runs_no_hooks() -> None:
    """Frames crossing read boundaries: a read holding no whole frame handles nothing (the store's burst
    hooks do not run for it); two frames completed by one read are handled as a burst."""

    async def body() -> None:
        ch, transport, runs = _channel_with_recorded_hooks()
        frames = [RemotingCommand(FAST, opaque=i + 1, body=b"z" * 3000).encode() for i in range(3)]
        data = b"".join(frames)
        cut = len(frames[0]) + 100  # the first frame and the head of the second
        for chunk in (data[:1000], data[1000:cut]):
            ch.data_received(chunk)
        assert [[c.opaque for c in s] for s in transport.sends] == [[1]] and runs == []
        ch.data_received(data[cut : cut + 50])
        assert len(transport.sends) == 1 and runs == []
        ch.data_received(data[cut + 50 :])  # completes the second and holds the third
        assert [[c.opaque for c in s] for s in transport.sends] == [[1], [2, 3]]
        assert runs == ["begin", "end"]

    arun(body)


def _later_future(req: RemotingCommand) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, fut.set_result, req.response(ResponseCode.SUCCESS, "future"))
    return fut


def test_deferred_replies_are_answered_when_resolved_and_waited_for_on_close() -> None:
    """A handler may return a DeferredReply (a SYNC_FLUSH send): resolved later on the loop it answers at
    once (flush_deferred), resolved before the handler returned it answers inline, and a server closing
    with one pending waits for it within its grace period instead of failing."""
    from rocketq.remoting.channel import DeferredReply, flush_deferred

    DEFER, INLINE = 1101, 1102

    async def body() -> None:
        server = _server()
        loop = asyncio.get_running_loop()

        def defer(ch: Channel, req: RemotingCommand) -> DeferredReply:
            d = DeferredReply()

            def later() -> None:
                d.resolve(req.response(ResponseCode.SUCCESS, "later"))
                flush_deferred()

            loop.call_later(float(req.ext_fields["after"]), later)
            return d

        def inline(ch: Channel, req: RemotingCommand) -> DeferredReply:
            d = DeferredReply()
            d.resolve(req.response(ResponseCode.SUCCESS, "inline"))
            return d

        server.register_processor(DEFER, defer)
        server.register_processor(INLINE, inline)
        async with server, RemotingClient() as client:
            r = await client.invoke(server.address, RemotingCommand.request(DEFER, {"after": "0.05"}), 5)
            assert r.remark == "later"
            r = await client.invoke(server.address, RemotingCommand.request(INLINE, {}), 5)
            assert r.remark == "inline"
            pending = asyncio.ensure_future(
                client.invoke(server.address, RemotingCommand.request(DEFER, {"after": "0.2"}), 5)
            )
            await asyncio.sleep(0.05)
            await server.close(grace_s=2.0)  # must not raise on the pending DeferredReply
            assert (await pending).remark == "later"

        # answers coalesced without a flush_deferred() call (as on an ASYNC_FLUSH broker) leave at the end of
        # their loop turn and leave no channel behind in the registry
        from rocketq.remoting import channel as channel_module

        async with _server() as server2, RemotingClient() as client2:
            server2.register_processor(DEFER, lambda ch, req: _later_future(req))
            r = await client2.invoke(server2.address, RemotingCommand.request(DEFER, {}), 5)
            assert r.remark == "future"
            await asyncio.sleep(0)
            assert not channel_module._coalescing

    arun(body)


def test_start_invoke_writes_at_once_and_reports_answers_timeouts_and_closes() -> None:
    """start_invoke: the request leaves before the caller's loop turn ends (a pull sent ahead while the
    previous answer is decoded), after requests coalesced earlier in that turn; its answer, a timeout
    (RemotingTimeoutError) and a closed connection (RemotingConnectError) reach the awaiting caller."""

    async def body() -> None:
        async with _server() as server, RemotingClient() as client:
            await client.invoke(server.address, _fast(0), 5)  # connected
            ch = client._channels[server.address]
            writes: list[int] = []

            class Spy:  # the real transport, with its writes counted
                def __init__(self, t: object) -> None:
                    self.t = t

                def __getattr__(self, name: str) -> object:
                    return getattr(self.t, name)

                def writelines(self, parts: list) -> None:
                    writes.append(len(parts))
                    self.t.writelines(parts)  # type: ignore[attr-defined]

            ch._transport = Spy(ch._transport)  # type: ignore[assignment]
            coalesced = [asyncio.ensure_future(client.invoke(server.address, _fast(i), 5)) for i in (1, 2)]
            await asyncio.sleep(0)  # both issued in one turn: waiting in the coalescing queue
            early = client.start_invoke(server.address, _fast(3), 5)
            assert writes, "start_invoke must write before the turn ends"
            assert (await early).ext_fields["n"] == "3"
            assert [r.ext_fields["n"] for r in await asyncio.gather(*coalesced)] == ["1", "2"]
            slow = client.start_invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "2"}), 0.1)
            with pytest.raises(RemotingTimeoutError):
                await slow
            doomed = client.start_invoke(server.address, RemotingCommand.request(SLOW, {"sleep": "2"}), 5)
            await asyncio.sleep(0.05)
            ch.close()
            with pytest.raises(RemotingConnectError):
                await doomed

    arun(body)


def test_requests_coalesced_in_one_turn_leave_every_16_frames() -> None:
    """Requests issued by many tasks in one loop turn are coalesced, but leave at least every 32 buffers
    (16 frames with a body: the peer starts on the first ones while the rest are being issued), in order; a
    lone request leaves at once."""

    async def body() -> None:
        ch = Channel(_server()._dispatcher, coalesce_writes=True)
        transport = _RecordingTransport()
        ch.connection_made(transport)  # type: ignore[arg-type]

        async def one(i: int) -> None:
            req = RemotingCommand.request(ECHO, {"n": str(i)})
            req.body = b"x" * 100
            with contextlib.suppress(RemotingTimeoutError):
                await ch.invoke(req, 0.2)

        tasks = [asyncio.ensure_future(one(i)) for i in range(40)]
        await asyncio.sleep(0)  # every task issued its request in this turn
        assert [len(s) for s in transport.sends] == [1, 16, 16]  # the first alone, then full chunks
        await asyncio.sleep(0)
        assert [len(s) for s in transport.sends] == [1, 16, 16, 7]  # the rest at the end of the turn
        sent = [c.ext_fields["n"] for s in transport.sends for c in s]
        assert sent == [str(i) for i in range(40)]
        await asyncio.gather(*tasks)

    arun(body)
