"""Producer and consumer registries fed by heartbeats: who is online, on which channel, subscribed to what.

Membership changes of a consumer group (join, leave, channel closed, expired) are reported through
``on_consumer_ids_changed(group)`` so the broker can push NOTIFY_CONSUMER_IDS_CHANGED.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketq.remoting import Channel

from .subscription import SubscriptionData

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ClientChannelInfo:
    channel: Channel
    client_id: str
    language: str
    version: int
    last_update: float = field(default_factory=time.monotonic)

    def to_connection(self) -> dict[str, Any]:
        return {
            "clientAddr": self.channel.remote_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[int, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update: float = field(default_factory=time.monotonic)

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]

    def find_subscription(self, topic: str) -> SubscriptionData | None:
        return self.subscriptions.get(topic)


class ClientManager:
    def __init__(self, expire_s: float = 120.0) -> None:
        self.expire_s = expire_s
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[int, ClientChannelInfo]] = {}
        self.on_consumer_ids_changed: Callable[[str], None] | None = None

    # -- consumers ---------------------------------------------------------------------------
    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: list[SubscriptionData],
        notify: bool,
    ) -> bool:
        """Returns True when the group's membership changed."""
        cgi = self.consumers.get(group)
        if cgi is None:
            cgi = self.consumers[group] = ConsumerGroupInfo(group)
        cgi.consume_type = consume_type
        cgi.message_model = message_model
        cgi.consume_from_where = consume_from_where
        old = cgi.channels.get(info.channel.id)
        changed = old is None or old.client_id != info.client_id
        if old is None:
            cgi.channels[info.channel.id] = info
        else:
            old.last_update = info.last_update
            old.client_id = info.client_id
        # a heartbeat carries the complete subscription: replace, keep newer versions
        new_subs: dict[str, SubscriptionData] = {}
        for sd in subscriptions:
            prev = cgi.subscriptions.get(sd.topic)
            if prev is not None and prev.sub_version > sd.sub_version and prev.sub_string == sd.sub_string:
                sd = prev
            new_subs[sd.topic] = sd
        cgi.subscriptions = new_subs
        cgi.last_update = time.monotonic()
        if changed and notify:
            self._notify(group)
        return changed

    def unregister_consumer(self, group: str, channel: Channel, notify: bool = True) -> bool:
        cgi = self.consumers.get(group)
        if cgi is None or cgi.channels.pop(channel.id, None) is None:
            return False
        if not cgi.channels:
            del self.consumers[group]
        if notify:
            self._notify(group)
        return True

    def get_consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumers.get(group)

    def groups_subscribing(self, topic: str) -> set[str]:
        return {g for g, cgi in self.consumers.items() if topic in cgi.subscriptions}

    # -- producers ---------------------------------------------------------------------------
    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        chans = self.producers.setdefault(group, {})
        old = chans.get(info.channel.id)
        if old is None:
            chans[info.channel.id] = info
        else:
            old.last_update = info.last_update

    def unregister_producer(self, group: str, channel: Channel) -> None:
        chans = self.producers.get(group)
        if chans is not None:
            chans.pop(channel.id, None)
            if not chans:
                del self.producers[group]

    def producer_channel(self, group: str, accept: Callable[[Channel], bool] | None = None) -> Channel | None:
        for info in (self.producers.get(group) or {}).values():
            if not info.channel.closed and (accept is None or accept(info.channel)):
                return info.channel
        return None

    def producer_channel_by_client_id(
        self, client_id: str, accept: Callable[[Channel], bool] | None = None
    ) -> Channel | None:
        for chans in self.producers.values():
            for info in chans.values():
                ch = info.channel
                if info.client_id == client_id and not ch.closed and (accept is None or accept(ch)):
                    return ch
        return None

    # -- housekeeping ------------------------------------------------------------------------
    def channel_closed(self, channel: Channel) -> None:
        for group in list(self.producers):
            self.unregister_producer(group, channel)
        for group in list(self.consumers):
            self.unregister_consumer(group, channel)

    def scan_expired(self) -> None:
        deadline = time.monotonic() - self.expire_s
        for group, chans in list(self.producers.items()):
            for cid, info in list(chans.items()):
                if info.last_update < deadline or info.channel.closed:
                    del chans[cid]
                    if not info.channel.closed:
                        log.info("producer %s of %s expired; closing its channel", info.client_id, group)
                        info.channel.close()
            if not chans:
                del self.producers[group]
        for group, cgi in list(self.consumers.items()):
            expired = [
                cid
                for cid, info in cgi.channels.items()
                if info.last_update < deadline or info.channel.closed
            ]
            for cid in expired:
                info = cgi.channels.pop(cid)
                if not info.channel.closed:
                    log.info("consumer %s of %s expired; closing its channel", info.client_id, group)
                    info.channel.close()
            if expired:
                if not cgi.channels:
                    del self.consumers[group]
                self._notify(group)

    def _notify(self, group: str) -> None:
        if self.on_consumer_ids_changed is not None:
            try:
                self.on_consumer_ids_changed(group)
            except Exception:
                log.exception("consumer ids changed callback failed")
