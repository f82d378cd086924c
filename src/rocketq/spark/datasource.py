"""The "rocketmq" PySpark data source (Python Data Source API, PySpark 4.x)."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .arrow_decode import DDL, DDL_NO_PROPERTIES
from .brokerio import RocketMQSourceError, get_io
from .options import SourceOptions
from .sink import RocketMQBatchWriter, RocketMQStreamWriter, SinkError, SinkOptions
from .source import RocketMQBatchReader, RocketMQStreamReader


class TopicNotFoundError(RocketMQSourceError):
    """A topic named by the options that no NameServer knows (raised when the query is analysed)."""


def require_topics(namesrv: str | None, topics: list[str]) -> None:
    missing = get_io(namesrv).missing_topics(topics) if namesrv and topics else []
    if missing:
        raise TopicNotFoundError(
            f"topic {', '.join(missing)} does not exist on the NameServer {namesrv}: create it first "
            f"(rocketq admin updateTopic -n {namesrv} -c DefaultCluster -t {missing[0]}); "
            "subscribePattern reads topics as they are created"
        )


def _named_topics(options: dict[str, str]) -> list[str]:
    """The topics the ``topic`` / ``subscribe`` options name (reads and the sink's target)."""
    names: list[str] = []
    for key in ("topic", "subscribe"):
        names += [t.strip() for t in (options.get(key) or "").split(",") if t.strip()]
    return names


class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq").option("nameserver", ns).option("subscribe", "T").load()``.

    Options are documented in docs/spark.md. Options are validated here (analysis time), never in tasks."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        # called when the query is analysed (load()), in batch and streaming: a topic that does not exist is
        # one clear error here, not an empty result or a failed task
        opts = {k.lower(): v for k, v in self.options.items()}
        require_topics(
            opts.get("nameserver") or opts.get("namesrv") or opts.get("namesrvaddr"), _named_topics(opts)
        )
        # includeProperties=false drops the map column (cheaper bulk reads, like Kafka's includeHeaders)
        include = str(self.options.get("includeProperties", "true")).strip().lower() != "false"
        return DDL if include else DDL_NO_PROPERTIES

    def reader(self, schema: StructType) -> RocketMQBatchReader:
        return RocketMQBatchReader(SourceOptions.parse(dict(self.options), streaming=False))

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:
        return RocketMQStreamReader(SourceOptions.parse(dict(self.options), streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQBatchWriter:
        if overwrite:
            raise SinkError("RocketMQ topics are append-only: use mode('append')")
        o = SinkOptions.parse(dict(self.options), schema)
        require_topics(o.namesrv, [o.topic] if o.topic else [])
        return RocketMQBatchWriter(o)

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        o = SinkOptions.parse(dict(self.options), schema)
        require_topics(o.namesrv, [o.topic] if o.topic else [])
        return RocketMQStreamWriter(o)
