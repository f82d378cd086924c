"""Master-slave replication over the HA port (RocketMQ's classic HA protocol): ha/frames.py (wire), master.py,
slave.py, waiter.py (SYNC_MASTER acknowledgements), auth.py (rocketq's optional handshake), service.py (what
the broker drives). The store stays network-free: slaves write through MessageStore.replica_appender()."""

from .master import HAConfig
from .service import SLAVE_NOT_AVAILABLE, HAService

__all__ = ["SLAVE_NOT_AVAILABLE", "HAConfig", "HAService"]
