"""Broker-side half messages (transactional messages and the Spark exactly-once sink)."""
