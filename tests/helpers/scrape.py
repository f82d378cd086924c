"""Scrape a /metrics endpoint and look series up by name and labels (prometheus_client's own parser)."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[tuple[str, dict[str, str], float]] = []
        self.types: dict[str, str] = {}
        for fam in text_string_to_metric_families(text):
            self.types[fam.name] = fam.type
            for s in fam.samples:
                self.samples.append((s.name, dict(s.labels), s.value))

    def find(self, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
        want = labels.items()
        return [(lab, v) for n, lab, v in self.samples if n == name and all(lab.get(k) == x for k, x in want)]

    def value(self, name: str, **labels: str) -> float:
        """The one sample matching; 0 when the series is absent (a counter never incremented)."""
        rows = self.find(name, **labels)
        assert len(rows) <= 1, f"{name} {labels}: {len(rows)} series match: {rows}"
        return rows[0][1] if rows else 0.0


def get(url: str, *, user: str | None = None, password: str | None = None, token: str | None = None):
    """(status, headers, body text); never raises on an HTTP error status."""
    req = urllib.request.Request(url)
    if user is not None:
        creds = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {creds}")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def scrape(url: str, **auth: str) -> Scrape:
    status, _, body = get(url, **auth)
    assert status == 200, f"{url}: HTTP {status}: {body[:200]}"
    return Scrape(body)
