"""The "rocketmq" PySpark data source (Python Data Source API, PySpark 4.x)."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .arrow_decode import DDL, DDL_NO_PROPERTIES
from .options import SourceOptions
from .sink import RocketMQBatchWriter, RocketMQStreamWriter, SinkError, SinkOptions
from .source import RocketMQBatchReader, RocketMQStreamReader


class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq").option("nameserver", ns).option("subscribe", "T").load()``.

    Options are documented in docs/spark.md. Options are validated here (analysis time), never in tasks."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
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
        return RocketMQBatchWriter(SinkOptions.parse(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        return RocketMQStreamWriter(SinkOptions.parse(dict(self.options), schema))
