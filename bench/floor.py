"""Diagnostic variants of this checkout's broker, and a bare RocketMQ-protocol client: what bounds a send's
round trip once the store, the send processor or the producer is taken away (bench/peer_pair.py systems
``rocketq%nostore``, ``rocketq%floor`` and the ``+bare`` client).

- ``nostore``: the send processor answers SEND_OK after the header decode and the topic and queue checks,
  without storing anything (no CommitLog, ConsumeQueue or index work).
- ``floor``: the connection answers every SEND_MESSAGE_V2 right after the frame decode, before any
  processor: this broker's remoting layer (event loop, frame decode, response encode, socket) on its own.
- ``BareSendClient``: sends one prebuilt SEND_MESSAGE_V2 frame (only the opaque changes) and matches the
  answers by opaque: a client without the producer's work (Message, message id, queue choice, SendResult).

A variant is this checkout's src/ copied and a few lines inserted at named anchors; an anchor that is not
found fails the build, so a variant cannot drift silently from the code it is measured against. Nothing
here is used by the broker itself.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
from typing import Any

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")

# A fixed offsetMsgId (127.0.0.1:10911, offset 0): the producer only copies it into SendResult
_MSG_ID = "7F00000100002A9F0000000000000000"

_NOSTORE = (
    "rocketq/broker/processors/send.py",
    "    def _send_one(self, channel: Channel, request: RemotingCommand, h: SendMessageRequestHeader):\n",
    f"""        # bench/floor.py nostore: answer without storing
        self._floor_offset = getattr(self, "_floor_offset", -1) + 1
        offset, strings = self._floor_offset, self._ok_strings
        return send_ok_response(request, _SUCCESS, "{_MSG_ID}", h.queue_id, offset, strings)
""",
)

_FLOOR = (
    "rocketq/remoting/channel.py",
    "    def _dispatch(self, request: RemotingCommand) -> None:\n",
    f"""        if request.code == 310:  # bench/floor.py floor: answer right after the frame decode
            from rocketq.broker.processors.send import _SUCCESS, send_ok_response

            v2 = getattr(request, "v2", None)
            qid = int(v2.e) if v2 is not None and v2.e else 0
            self._floor_offset = getattr(self, "_floor_offset", -1) + 1
            strings = ("DefaultRegion", "true", b'"DefaultRegion"', b'"true"')
            answer = send_ok_response(request, _SUCCESS, "{_MSG_ID}", qid, self._floor_offset, strings)
            self._reply(request, answer)
            return
""",
)

VARIANTS: dict[str, tuple[tuple[str, str, str], ...]] = {"nostore": (_NOSTORE,), "floor": (_FLOOR,)}


def build_variant(name: str, dest: str) -> str:
    """Copy this checkout's src/ to dest/src and apply variant ``name``; returns dest (a tree for
    PYTHONPATH=dest/src). KeyError for an unknown variant, ValueError for an anchor not found once."""
    edits = VARIANTS[name]
    shutil.copytree(SRC, os.path.join(dest, "src"), ignore=shutil.ignore_patterns("__pycache__"))
    for rel, anchor, insert in edits:
        path = os.path.join(dest, "src", rel)
        with open(path) as f:
            text = f.read()
        if text.count(anchor) != 1:
            raise ValueError(f"variant {name}: anchor not found once in {rel}: {anchor.strip()!r}")
        with open(path, "w") as f:
            f.write(text.replace(anchor, anchor + insert))
    return dest


_HEAD = struct.Struct(">Ii")  # frame length, header length (its top byte is the serialize type)


def _field(header: bytes, key: bytes) -> int:
    """An integer field of a JSON response header, found by search (this client's answers only)."""
    i = header.index(key) + len(key)
    return int(header[i : header.index(b",", i)])


class _Answers(asyncio.Protocol):
    """Matches each answer to its request by opaque; the opaque is found in the JSON header by search."""

    def __init__(self, waiters: dict[int, asyncio.Future[int]]) -> None:
        self.waiters = waiters
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 8:
            size, hlen = _HEAD.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            header = bytes(buf[pos + 8 : pos + 8 + (hlen & 0xFFFFFF)])
            fut = self.waiters.pop(_field(header, b'"opaque":'), None)
            if fut is not None and not fut.done():
                fut.set_result(_field(header, b'"code":'))
            pos += 4 + size
        del buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in self.waiters.values():
            if not fut.done():
                fut.set_exception(ConnectionError("broker closed the connection"))


class BareSendClient:
    """The peers benchmark's client interface (connect / prepare / publish / close) on one connection to the
    broker. ``prepare`` creates the topic as the rocketq client does and encodes one header per queue with a
    placeholder opaque; a publish fills in the opaque and the length, round-robin over the queues, with the
    payload it is given as the body: no per-send encoding beyond that."""

    _MARK = b"987654321"

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.waiters: dict[int, asyncio.Future[int]] = {}
        self.opaque = 0
        self.turn = 0
        self.headers: list[tuple[bytes, bytes]] = []

    async def connect(self, role: str) -> None:
        host, _, port = self.args["broker"].rpartition(":")
        loop = asyncio.get_running_loop()
        self.transport, _ = await loop.create_connection(lambda: _Answers(self.waiters), host, int(port))

    async def prepare(self, topic: str) -> None:
        from bench.peers.sys_rocketq import QUEUES, RocketqClient

        from rocketq.protocol.frame import RemotingCommand

        await RocketqClient(self.args).prepare(topic)
        for q in range(QUEUES):
            ext = {  # SendMessageRequestHeaderV2's short names, as the rocketq producer fills them
                "a": "bench-bare", "b": topic, "c": "TBW102", "d": "4", "e": str(q), "f": "0", "g": "0",
                "h": "0", "i": "UNIQ_KEY\x017F0000010000000000000000000000\x02WAIT\x01true", "j": "0",
                "k": "false", "m": "false",
            }  # fmt: skip
            header = RemotingCommand(310, opaque=int(self._MARK), ext_fields=ext).encode_header()
            assert header.count(self._MARK) == 1
            pre, _, post = header.partition(self._MARK)
            self.headers.append((pre, post))

    async def publish(self, topic: str, body: bytes) -> None:
        self.opaque = op = self.opaque + 1
        self.turn = t = (self.turn + 1) % len(self.headers)
        pre, post = self.headers[t]
        header = pre + str(op).encode() + post
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiters[op] = fut
        self.transport.writelines([_HEAD.pack(4 + len(header) + len(body), len(header)) + header, body])
        code = await fut
        if code != 0:
            raise RuntimeError(f"send answered code {code}")

    async def close(self) -> None:
        self.transport.close()
