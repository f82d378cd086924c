"""Order-event generator: the seeds' ordered-message example (created -> paid -> shipped -> completed).

Every event of one order goes to the same queue (selected by order number), so per-order order holds.
Event times are synthetic and increase monotonically from --start-ms (default: now), --step-ms apart.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from rocketq import Message, Producer

STATUSES = ("created", "paid", "shipped", "completed")


def events(orders: int, first_order: int, start_ms: int, step_ms: int, seed: int):
    """(order_no, body dict) in send order: orders interleave, each order's events stay in sequence."""
    rnd = random.Random(seed)
    # how far each order gets (most complete; some stop early)
    depth = {o: rnd.choice((1, 2, 3, 4, 4, 4, 4)) for o in range(first_order, first_order + orders)}
    stage = dict.fromkeys(depth, 0)
    amount = {o: round(rnd.uniform(5, 500), 2) for o in depth}
    pending = list(depth)
    t = start_ms
    while pending:
        o = pending[rnd.randrange(len(pending))]
        status = STATUSES[stage[o]]
        stage[o] += 1
        if stage[o] >= depth[o]:
            pending.remove(o)
        yield o, {"orderId": f"O-{o:08d}", "status": status, "amount": amount[o], "eventTime": t}
        t += step_ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rocketq pipeline orders-gen", description=__doc__)
    ap.add_argument("--namesrv", "-n", default="127.0.0.1:9876")
    ap.add_argument("--topic", default="orders")
    ap.add_argument("--orders", type=int, default=1000)
    ap.add_argument("--first-order", type=int, default=1)
    ap.add_argument("--start-ms", type=int, default=None, help="event time of the first event")
    ap.add_argument("--step-ms", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    start = a.start_ms if a.start_ms is not None else int(time.time() * 1000)
    n = 0
    last_t = start
    with Producer("ORDERS_GEN_PG", namesrv=a.namesrv) as p:
        queues = sorted(p.fetch_publish_message_queues(a.topic), key=lambda q: (q.broker_name, q.queue_id))
        pending: dict[int, list[Message]] = {}
        for o, ev in events(a.orders, a.first_order, start, a.step_ms, a.seed):
            qi = o % len(queues)
            msg = Message(a.topic, json.dumps(ev).encode(), tags=ev["status"], keys=[ev["orderId"]])
            batch = pending.setdefault(qi, [])
            batch.append(msg)
            last_t = ev["eventTime"]
            n += 1
            if len(batch) >= 64:  # one batch = one queue, consecutive offsets: per-order order holds
                p.send(batch, queue=queues[qi])
                pending[qi] = []
        for qi, batch in pending.items():
            if batch:
                p.send(batch, queue=queues[qi])
    print(f"sent {n} order events to {a.topic} (event time {start} .. {last_t})")
    return 0
