"""Shipped data pipelines (`rocketq pipeline ...`)."""
