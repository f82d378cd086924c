"""rocketq: Apache RocketMQ's messaging model, wire-compatible, built in Python."""

__version__ = "0.1.0"
