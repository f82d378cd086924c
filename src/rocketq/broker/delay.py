"""Delay levels: turning a message with DELAY into a SCHEDULE_TOPIC_XXXX message and back."""

from __future__ import annotations

from rocketq.protocol.properties import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
)


class DelayLevels:
    __slots__ = ("levels_ms", "max_level")

    def __init__(self, levels_ms: list[int]) -> None:
        self.levels_ms = levels_ms
        self.max_level = len(levels_ms)

    def delay_ms(self, level: int) -> int:
        return self.levels_ms[min(max(level, 1), self.max_level) - 1]

    def redirect(
        self, props: dict[str, str], topic: str, queue_id: int, now_ms: int
    ) -> tuple[str, int, int] | None:
        """If props carry DELAY > 0: move the message to the schedule topic (level clamped to the max);
        returns (topic, queue_id, tags_code = delivery time), else None."""
        raw = props.get(PROPERTY_DELAY_TIME_LEVEL)
        if not raw:
            return None
        try:
            level = int(raw)
        except ValueError:
            return None
        if level <= 0:
            return None
        if level > self.max_level:
            level = self.max_level
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[PROPERTY_REAL_TOPIC] = topic
        props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
        return SCHEDULE_TOPIC, level - 1, now_ms + self.levels_ms[level - 1]
