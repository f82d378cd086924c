"""Request processors, one module per area; each exposes ``register(server, controller)``."""
