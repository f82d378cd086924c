"""Broker -> NameServer calls: REGISTER_BROKER (103) to every NameServer, UNREGISTER_BROKER (104)."""

from __future__ import annotations

import asyncio
import logging

from rocketq.protocol.codes import RequestCode, ResponseCode
from rocketq.protocol.frame import RemotingCommand
from rocketq.protocol.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader
from rocketq.protocol.route import RegisterBrokerBody, TopicConfigSerializeWrapper, body_crc32
from rocketq.remoting import RemotingClient

from .config import BrokerConfig

log = logging.getLogger(__name__)

COMPRESS_OVER_TOPICS = 1000


class NamesrvApi:
    def __init__(self, cfg: BrokerConfig, client: RemotingClient) -> None:
        self.cfg = cfg
        self.client = client
        self.timeout_s = cfg["registerBrokerTimeoutMills"] / 1000.0
        self.ha_server_addr = ""  # brokerIP2:haListenPort, set once the HA port is bound
        # the ext fields of the last round's SUCCESS answers (haServerAddr, masterAddr: a slave's master)
        self.last_results: list[dict[str, str]] = []

    @property
    def addrs(self) -> list[str]:
        return self.cfg.namesrv_addrs()

    async def register_all(self, wrapper: TopicConfigSerializeWrapper, broker_addr: str) -> int:
        """Register with every NameServer in parallel; returns how many accepted."""
        addrs = self.addrs
        if not addrs:
            return 0
        cfg = self.cfg
        compressed = cfg["compressedRegister"] or len(wrapper.topic_config_table) > COMPRESS_OVER_TOPICS
        body = RegisterBrokerBody(wrapper, []).encode_body(compressed)
        header = RegisterBrokerRequestHeader(
            broker_name=cfg["brokerName"],
            broker_addr=broker_addr,
            cluster_name=cfg["brokerClusterName"],
            ha_server_addr=self.ha_server_addr
            or f"{cfg['brokerIP2'] or cfg['brokerIP1']}:{cfg.ha_listen_port}",
            broker_id=cfg["brokerId"],
            compressed=compressed,
            body_crc32=body_crc32(body),
        ).to_ext()

        answers: list[dict[str, str]] = []

        async def one(addr: str) -> bool:
            req = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
            try:
                resp = await self.client.invoke(addr, req, self.timeout_s)
            except Exception as exc:
                log.warning("register broker to name server %s failed: %s", addr, exc)
                return False
            if resp.code != ResponseCode.SUCCESS:
                log.warning("register broker to name server %s refused: %s %s", addr, resp.code, resp.remark)
                return False
            answers.append(dict(resp.ext_fields))
            return True

        results = await asyncio.gather(*(one(a) for a in addrs))
        self.last_results = answers
        return sum(results)

    async def unregister_all(self, broker_addr: str) -> None:
        cfg = self.cfg
        header = UnregisterBrokerRequestHeader(
            broker_name=cfg["brokerName"],
            broker_addr=broker_addr,
            cluster_name=cfg["brokerClusterName"],
            broker_id=cfg["brokerId"],
        ).to_ext()

        async def one(addr: str) -> None:
            req = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
            try:
                await self.client.invoke(addr, req, min(self.timeout_s, 3.0))
            except Exception as exc:
                log.warning("unregister broker from name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in self.addrs))
