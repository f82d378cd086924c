"""Spark connector: the "rocketmq" data source for PySpark (batch + streaming, read + write).

Needs the optional extra: ``pip install rocketq[spark]``. Registered automatically through the top-level
``pyspark_rocketmq`` module, or explicitly::

    from rocketq.spark import register
    register(spark)
    spark.read.format("rocketmq").option("nameserver", "127.0.0.1:9876").option("subscribe", "T").load()
"""

from __future__ import annotations

from typing import Any

__all__ = ["RocketMQDataSource", "register"]


def register(spark: Any) -> None:
    """Register format("rocketmq") on a SparkSession (idempotent)."""
    from .datasource import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)


def __getattr__(name: str) -> Any:
    if name == "RocketMQDataSource":
        from .datasource import RocketMQDataSource

        return RocketMQDataSource
    raise AttributeError(name)
