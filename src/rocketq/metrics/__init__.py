"""Prometheus exposition of RocketMQ 5.x metric names (prometheus_client) for brokers and NameServers,
fed by counters the hot paths already keep, plus the Python client's opt-in exporter (client.py).

settings.py (the config keys) is imported by the broker's and NameServer's config; everything that needs
prometheus_client loads only when an exporter runs.
"""
