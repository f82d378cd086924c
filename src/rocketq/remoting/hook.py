"""RPC hooks: called around every request a client sends or a server processes (ACL signing/checks)."""

from __future__ import annotations

from rocketq.protocol.frame import RemotingCommand


class RPCHook:
    """Override either method. Client side: before sending / after the response arrived.
    Server side: before the processor runs (raise to reject) / after it produced a response."""

    def do_before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        pass

    def do_after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        pass
