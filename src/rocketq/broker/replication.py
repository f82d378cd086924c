"""Replication inside the broker: the HAService built from broker.conf, the master address a slave learns
from the NameServer, and SYNC_MASTER's answers to sends.

A SYNC_MASTER send is answered once enough slaves acknowledged its bytes (ha/service.py says how many) and,
under SYNC_FLUSH, once its fdatasync round is done too; both waits run at the same time and the answer
carries the replica's status when it is not OK, else the flush's (RocketMQ's handleDiskFlushAndHA):
SEND_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE. The message is stored on the master
in every one of these cases.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import TYPE_CHECKING, Any

from rocketq.ha import SLAVE_NOT_AVAILABLE, HAConfig, HAService
from rocketq.ha.auth import Credentials, MasterAuth
from rocketq.protocol.codes import ResponseCode
from rocketq.remoting.channel import DeferredReply

from .config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger(__name__)

_SUCCESS = ResponseCode.SUCCESS
_FLUSH_DISK_TIMEOUT = ResponseCode.FLUSH_DISK_TIMEOUT
_FLUSH_SLAVE_TIMEOUT = ResponseCode.FLUSH_SLAVE_TIMEOUT
_SLAVE_NOT_AVAILABLE = ResponseCode.SLAVE_NOT_AVAILABLE


def ha_config_of(cfg: BrokerConfig) -> HAConfig:
    return HAConfig(
        heartbeat_s=cfg["haSendHeartbeatInterval"] / 1000.0,
        housekeeping_s=cfg["haHousekeepingInterval"] / 1000.0,
        batch=cfg["haTransferBatchSize"],
        max_gap=cfg["haMaxGapNotInSync"],
    )


def credentials_of(cfg: BrokerConfig) -> Credentials | None:
    if not cfg["aclEnable"]:
        return None
    try:
        return Credentials.parse(cfg["innerClientAuthenticationCredentials"])
    except ValueError as exc:
        raise ConfigError(f"{cfg.source or 'config'}: {exc}") from None


def _master_auth(ctl: BrokerContext) -> MasterAuth | None:
    hook = ctl.server.rpc_hook
    acl = getattr(hook, "acl", None)
    if not ctl.cfg["aclEnable"] or acl is None:
        return None
    from .acl import _addr_matches

    def is_white(ip: str) -> bool:
        acl.maybe_reload()
        return any(_addr_matches(p, ip) for p in acl.global_white)

    def account(access_key: str) -> tuple[str, bool] | None:
        acc = acl.accounts.get(access_key)
        return (acc.secret_key, acc.admin) if acc is not None else None

    return MasterAuth(is_white, account)


class Replication:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl
        cfg = ctl.cfg
        self.cfg = cfg
        self.ha = HAService(
            ctl.store,
            cfg["brokerRole"],
            ha_config_of(cfg),
            slave_timeout_s=cfg["slaveTimeout"] / 1000.0,
            in_sync_replicas=cfg["inSyncReplicas"],
            min_in_sync_replicas=cfg["minInSyncReplicas"],
            all_ack_in_sync=cfg["allAckInSyncStateSet"],
            master_auth=_master_auth(ctl),
            credentials=credentials_of(cfg),
        )
        self.acks = SyncMasterAcks(ctl, self.ha) if self.ha.sync_master else None

    @property
    def is_slave(self) -> bool:
        return self.ha.is_slave

    async def start(self, listen: bool = True) -> None:
        """Masters bind the HA port (brokerIP2 if set, else where the broker listens); a slave connects to
        haMasterAddress, or to the address the NameServer names once it has registered."""
        cfg = self.cfg
        ha = self.ha
        if ha.is_slave:
            await ha.start("", 0)
            if cfg["haMasterAddress"]:
                ha.update_master(cfg["haMasterAddress"], None, pin=True)
            return
        if not listen:
            return
        host = cfg["brokerIP2"] if "brokerIP2" in cfg.explicit and cfg["brokerIP2"] else self.ctl.bind_host
        port = 0 if self.ctl.ha_any_port else cfg.ha_listen_port
        try:
            await ha.start(host, port)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on the HA port {host}:{port} "
                          f"(haListenPort): {exc.strerror or exc}") from None  # fmt: skip
        cfg.values["haListenPort"] = ha.port  # what was bound
        advertised = cfg["brokerIP2"] or cfg["brokerIP1"]
        self.ctl.namesrv.ha_server_addr = f"{advertised}:{ha.port}"
        log.info("HA: %s listening on %s:%d", cfg["brokerRole"], host, ha.port)

    async def close(self) -> None:
        await self.ha.close()

    def install_arrival_listener(self, hold_listener) -> None:
        """The store's arrival listener: held pulls, and on a master with slaves connected, the HA stream
        too (a master without slaves pays nothing per message for replication)."""
        store = self.ctl.store
        store.set_arrival_listener(hold_listener)
        server = self.ha.server
        if server is None:
            return
        notify = server.notify

        def on_arrival(topic: str, queue_id: int, max_offset: int) -> None:
            hold_listener(topic, queue_id, max_offset)
            notify()

        def on_connections(any_slave: bool) -> None:
            store.set_arrival_listener(on_arrival if any_slave else hold_listener)

        server.on_connections = on_connections

    def on_registered(self, answers: list[dict[str, str]]) -> None:
        """A slave learns its master from the register-broker answers (haServerAddr, masterAddr)."""
        if not self.ha.is_slave:
            return
        for ext in answers:
            ha_addr = ext.get("haServerAddr") or None
            master = ext.get("masterAddr") or None
            if ha_addr or master:
                self.ha.update_master(ha_addr, master)
                return

    def runtime_info(self) -> dict[str, str]:
        """Keys added to GET_BROKER_RUNTIME_INFO (brokerStatus)."""
        ha = self.ha
        out = {"brokerRole": self.cfg["brokerRole"], "brokerId": str(self.cfg["brokerId"])}
        if ha.server is not None:
            st = ha.server.status()
            out["haListenPort"] = str(ha.port)
            out["haSlaveNum"] = str(len(st["haConnectionInfo"]))
            out["haInSyncSlaveNum"] = str(st["inSyncSlaveNums"])
            if st["haConnectionInfo"]:
                out["haSlaveAckOffset"] = str(max(c["slaveAckOffset"] for c in st["haConnectionInfo"]))
                out["haSlaveLagBytes"] = str(min(c["diff"] for c in st["haConnectionInfo"]))
        if ha.client is not None:
            info = ha.client.info()
            out["haMasterAddr"] = info["masterAddr"]
            out["haState"] = info["state"]
            out["haLastError"] = info["lastError"]
        return out


class SyncMasterAcks:
    """Answers SYNC_MASTER sends (see the module docstring)."""

    def __init__(self, ctl: BrokerContext, ha: HAService) -> None:
        self.ctl = ctl
        self.ha = ha

    def enough_replicas(self) -> bool:
        return self.ha.enough_replicas()

    def respond(self, request, result, queue_id: int, strings: tuple) -> Any:
        """A stored PutMessageResult's answer (single or batch)."""
        ids = result.msg_ids
        msg_id = ids[0] if len(ids) == 1 else ",".join(ids)
        end = result.wrote_offset + result.wrote_bytes
        return self._answer(
            request, msg_id, queue_id, result.queue_offset, result.msg_num or 1, end, result.flush_offset,
            result.flush_future, strings,
        )  # fmt: skip

    def respond_plain(self, request, msg_id: str, queue_id: int, queue_offset: int, strings: tuple) -> Any:
        """put_plain's (msgId, queue offset) answer: its record ends at the log's appended end now."""
        end = self.ctl.store.commit_log.appended_end
        return self._answer(request, msg_id, queue_id, queue_offset, 1, end, 0, None, strings)

    def _answer(self, request, msg_id, queue_id, queue_offset, msg_num, end, flush_offset, flush_future,
                strings) -> DeferredReply:  # fmt: skip
        pending = _Pending(self.ctl, request, msg_id, queue_id, queue_offset, msg_num, strings)
        pending.waiting = 2  # a guard until every wait is registered (a wait may end at once), + the replica
        if self.ha.wait_replicated(end, pending.replicated) == SLAVE_NOT_AVAILABLE:
            pending.replica_code = _SLAVE_NOT_AVAILABLE
            pending.waiting -= 1
        if flush_offset:
            assert self.ctl.flush_waiter is not None  # a flush offset is only asked for under SYNC_FLUSH
            pending.waiting += 1
            self.ctl.flush_waiter.add(flush_offset, pending.flushed)
        elif flush_future is not None:
            pending.waiting += 1
            loop = self.ctl.loop

            def flushed(f) -> None:
                ok = f.exception() is None and bool(f.result())
                loop.call_soon_threadsafe(pending.flushed, ok)

            flush_future.add_done_callback(flushed)
        pending._done()  # the guard
        return pending.reply


class _Pending:
    """One send waiting for its replica (and flush) outcome."""

    __slots__ = (
        "ctl", "flush_ok", "msg_id", "msg_num", "queue_id", "queue_offset", "replica_code", "reply",
        "request", "strings", "waiting",
    )  # fmt: skip

    def __init__(self, ctl, request, msg_id, queue_id, queue_offset, msg_num, strings) -> None:
        self.ctl = ctl
        self.request = request
        self.msg_id = msg_id
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.msg_num = msg_num
        self.strings = strings
        self.replica_code = _SUCCESS
        self.flush_ok = True
        self.waiting = 0
        self.reply = DeferredReply()

    def code(self) -> int:
        if self.replica_code != _SUCCESS:
            return self.replica_code
        return _SUCCESS if self.flush_ok else _FLUSH_DISK_TIMEOUT

    def replicated(self, ok: bool) -> None:
        if not ok:
            self.replica_code = _FLUSH_SLAVE_TIMEOUT
        self._done()

    def flushed(self, ok: bool) -> None:
        if not ok:
            self.flush_ok = False
        self._done()

    def _done(self) -> None:
        self.waiting -= 1
        if self.waiting:
            return
        from .processors.send import send_ok_response

        if not self.reply.cancelled:
            self.ctl.stats.put += self.msg_num
            self.reply.resolve(
                send_ok_response(
                    self.request, self.code(), self.msg_id, self.queue_id, self.queue_offset, self.strings
                )
            )


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


_PHYS_AT = struct.Struct(">q")  # a record's PHYSICALOFFSET, at byte 28


class SlaveRead:
    """suggestWhichBrokerId of a pull answer (RocketMQ's PullMessageProcessor), for slaveReadEnable=true or a
    slave. A pull whose last message lies more than accessMessageInMemoryMaxRatio of the machine's memory
    behind the log's end reads from disk: the master then suggests the group's whichBrokerWhenConsumeSlowly
    (broker.conf's whichBrokerWhenConsumeSlowly for groups that keep the default 1), the slave that is not
    lagging sends the client back to the group's brokerId (0, the master). A slave with slaveReadEnable=false
    answers PULL_RETRY_IMMEDIATELY with no messages and suggests the master."""

    def __init__(self, cfg: BrokerConfig) -> None:
        self.slave = cfg["brokerRole"] == "SLAVE"
        self.read_enable = cfg["slaveReadEnable"]
        self.default_slow_id = cfg["whichBrokerWhenConsumeSlowly"]
        self.memory_limit = int(_physical_memory() * cfg["accessMessageInMemoryMaxRatio"] / 100)

    def suggest(self, code: int, result, group_cfg, store) -> tuple[int, str]:
        """(response code, suggestWhichBrokerId) for a pull answer."""
        if not self.read_enable:
            if self.slave:
                result.release()
                return int(ResponseCode.PULL_RETRY_IMMEDIATELY), "0"
            return code, "0"
        slow = False
        if result.buffers:
            last = result.buffers[-1]
            slow = store.max_phy_offset - _PHYS_AT.unpack_from(last, 28)[0] > self.memory_limit
        if slow:
            which = getattr(group_cfg, "which_broker_when_consume_slowly", 1)
            return code, str(self.default_slow_id if which == 1 else which)
        return code, str(getattr(group_cfg, "broker_id", 0))
