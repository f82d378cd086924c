"""PySpark auto-registration of the "rocketmq" data source (PySpark discovers top-level pyspark_* modules that
expose ``DefaultSource``)."""

from rocketq.spark.datasource import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
