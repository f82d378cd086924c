"""asyncio transport for the RocketMQ 4.x remoting protocol (server, client, hooks)."""

from .channel import Channel, Handler
from .client import RemotingClient, split_addr
from .errors import RemotingConnectError, RemotingError, RemotingSendRequestError, RemotingTimeoutError
from .hook import RPCHook
from .loop import install_event_loop_policy, new_event_loop, run, uvloop_enabled
from .server import RemotingServer

__all__ = [
    "Channel",
    "Handler",
    "RPCHook",
    "RemotingClient",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingTimeoutError",
    "install_event_loop_policy",
    "new_event_loop",
    "run",
    "split_addr",
    "uvloop_enabled",
]
