"""Client versions as RocketMQ's metrics label them: MQVersion.getVersionDesc(version), lower case."""

from __future__ import annotations

# MQVersion.Version ordinals of the versions clients commonly report
_NAMES = {
    121: "v3_4_9",
    213: "v4_0_0",
    273: "v4_3_0",
    355: "v4_7_1",
    373: "v4_8_0",
    393: "v4_9_0",
    401: "v4_9_4",
    409: "v4_9_8",
    413: "v5_0_0",
}


def version_desc(version: int | str) -> str:
    try:
        n = int(version)
    except (TypeError, ValueError):
        return str(version).lower()
    return _NAMES.get(n, str(n))
