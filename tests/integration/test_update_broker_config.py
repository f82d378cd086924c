"""mqadmin updateBrokerConfig on a real standalone: applied at once, saved into the broker.conf it was
started with (so a restart keeps it), refused for keys that need a restart and for bad values."""

from __future__ import annotations

from tests.helpers.procs import start_rocketq
from tests.interop.standalone import BROKER_BOOT_MARK, mqadmin, mqadmin_ok, start_standalone


def _config(namesrv: str, broker: str) -> dict[str, str]:
    out = mqadmin_ok(namesrv, "getBrokerConfig", "-b", broker)
    pairs = (line.partition(" = ") for line in out.splitlines() if " = " in line)
    return {k.strip(): v.strip() for k, _, v in pairs}


def test_update_broker_config_applies_saves_and_survives_a_restart(tmp_path) -> None:
    sa = start_standalone(tmp_path / "sa", {"syncFlushTimeout": "5000"})
    conf = sa.home / "broker.conf"
    try:
        out = mqadmin_ok(
            sa.namesrv, "updateBrokerConfig", "-b", sa.broker, "-k", "syncFlushTimeout", "-v", "1234"
        )
        assert out == f"update broker config success, {sa.broker}\n"
        assert _config(sa.namesrv, sa.broker)["syncFlushTimeout"] == "1234"
        # -c: every broker of the cluster
        out = mqadmin_ok(
            sa.namesrv, "updateBrokerConfig", "-c", "DefaultCluster", "-k", "region", "-v", "east"
        )
        assert out == f"update broker config success, {sa.broker}\n"
        text = conf.read_text()
        assert "syncFlushTimeout=1234\n" in text and "syncFlushTimeout=5000" not in text
        assert text.endswith("region=east\n")
        assert "mapedFileSizeCommitLog=" in text  # the rest of the file is still there
        # a key that needs a restart, and a bad value: refused, nothing changed or saved
        code, _ = mqadmin(sa.namesrv, "updateBrokerConfig", "-b", sa.broker, "-k", "brokerName", "-v", "z")
        assert code != 0
        code, _ = mqadmin(
            sa.namesrv, "updateBrokerConfig", "-b", sa.broker, "-k", "maxMessageSize", "-v", "lots"
        )
        assert code != 0
        huge = "r" * 20_000  # bounded: it would be saved into broker.conf
        code, _ = mqadmin(sa.namesrv, "updateBrokerConfig", "-b", sa.broker, "-k", "region", "-v", huge)
        assert code != 0
        assert conf.read_text() == text
        assert _config(sa.namesrv, sa.broker)["brokerName"] == "broker-a"
    finally:
        assert sa.stop() == 0
    # the same command line again, on the saved file
    proc = start_rocketq(sa.proc.args, boot_line=BROKER_BOOT_MARK, port=sa.proc.port, timeout=60.0)
    try:
        cfg = _config(proc.addr, sa.broker)
        assert (cfg["syncFlushTimeout"], cfg["region"]) == ("1234", "east")
    finally:
        proc.stop()
