"""GET_BROKER_HA_STATUS (907, RocketMQ 5's mqadmin haStatus): the broker's replication state as
HARuntimeInfo JSON — a master's slaves (address, acknowledged offset, lag in bytes and time, in sync or not),
or a slave's link to its master."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.remoting import Channel

if TYPE_CHECKING:
    from ..context import BrokerContext


class HAStatusProcessor:
    def __init__(self, ctl: BrokerContext) -> None:
        self.ctl = ctl

    def register(self, server) -> None:
        server.register_processor(RequestCode.GET_BROKER_HA_STATUS, self.ha_status)

    def ha_status(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        rep = self.ctl.replication
        if rep is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "replication is not started")
        info = rep.ha.runtime_info()
        sync = self.ctl.slave_sync
        if sync is not None:
            info["metadataSyncedAt"] = int(sync.synced_at * 1000)
            info["metadataSyncError"] = sync.last_error
        return request.response(ResponseCode.SUCCESS, None, None, orjson.dumps(info))
