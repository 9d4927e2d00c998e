"""stomp.py (a STOMP client nobody here wrote, from PyPI) against a real `ferry serve`.

Each check prints "ok: <name>"; the last line is "every check passed". Run by
crates/stomp/tests/interop.rs (scripts/test installs stomp.py)."""

import argparse
import json
import os
import queue
import random
import sys
import tempfile
import time

import stomp

from broker import Broker

WAIT = 10


class Listener(stomp.ConnectionListener):
    def __init__(self):
        self.messages = queue.Queue()
        self.receipts = queue.Queue()
        self.errors = queue.Queue()
        self.heartbeats = 0

    def on_message(self, frame):
        self.messages.put(frame)

    def on_receipt(self, frame):
        self.receipts.put(frame.headers["receipt-id"])

    def on_error(self, frame):
        self.errors.put(frame)

    def on_heartbeat(self):
        self.heartbeats += 1


class Client:
    """One STOMP 1.2 connection with a listener whose frames the checks wait for."""

    def __init__(self, broker, client_id=None, heartbeats=(0, 0), decode=True):
        self.conn = stomp.Connection12([broker.stomp], heartbeats=heartbeats, auto_decode=decode)
        self.l = Listener()
        self.conn.set_listener("", self.l)
        headers = {"client-id": client_id} if client_id else {}
        self.conn.connect(wait=True, headers=headers)
        self.n = 0

    def receipt(self):
        self.n += 1
        return f"r{self.n}"

    def wait_receipt(self, r):
        got = self.l.receipts.get(timeout=WAIT)
        assert got == r, f"receipt {got}, expected {r}"

    def confirmed(self, call, *args, **kwargs):
        """Calls `call` (a frame-sending method of `conn`) asking for a receipt, and waits for it."""
        r = self.receipt()
        call(*args, receipt=r, **kwargs)
        self.wait_receipt(r)

    def send(self, dest, body, **headers):
        self.confirmed(self.conn.send, dest, body, headers=headers)

    def subscribe(self, dest, sid, ack="auto", **headers):
        self.confirmed(self.conn.subscribe, dest, sid, ack=ack, headers=headers)

    def next(self):
        return self.l.messages.get(timeout=WAIT)

    def by_subscription(self, n):
        """The next `n` messages as sorted (subscription, body) pairs."""
        return sorted((f.headers["subscription"], f.body) for f in [self.next() for _ in range(n)])

    def nothing(self, seconds=0.5):
        try:
            f = self.l.messages.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected message {f.headers} {f.body!r}")

    def close(self):
        r = self.receipt()
        self.conn.disconnect(receipt=r)


def bodies(frames):
    return [f.body for f in frames]


def reader(b, dest, ack="auto", client_id=None, **headers):
    """A new connection subscribed to `dest` as "s"."""
    c = Client(b, client_id=client_id)
    c.subscribe(dest, "s", ack=ack, **headers)
    return c


def check(name):
    def wrap(fn):
        CHECKS.append((name, fn))
        return fn
    return wrap


CHECKS = []


@check("send and receive on a queue and a topic")
def queues_and_topics(b):
    c = Client(b)
    c.subscribe("/queue/basic", "q")
    c.subscribe("/topic/news", "t1")
    c.subscribe("/topic/news", "t2")
    c.send("/queue/basic", "to the queue")
    c.send("/topic/news", "to the topic")
    got = c.by_subscription(3)
    assert got == [("q", "to the queue"), ("t1", "to the topic"), ("t2", "to the topic")], got
    c.nothing()
    c.close()


@check("ack auto: messages are gone once delivered")
def ack_auto(b):
    c = Client(b)
    c.subscribe("/queue/auto", "s", ack="auto")
    for i in range(3):
        c.send("/queue/auto", f"m{i}")
    assert sorted(bodies([c.next() for _ in range(3)])) == ["m0", "m1", "m2"]
    c.close()
    c = reader(b, "/queue/auto")
    c.nothing()
    c.close()


@check("ack client: cumulative, the unacknowledged rest comes back")
def ack_client(b):
    c = Client(b)
    for i in range(3):
        c.send("/queue/cumulative", f"m{i}")
    c.subscribe("/queue/cumulative", "s", ack="client")
    frames = [c.next() for _ in range(3)]
    assert bodies(frames) == ["m0", "m1", "m2"], bodies(frames)
    c.confirmed(c.conn.ack, frames[1].headers["ack"])
    c.close()
    c = reader(b, "/queue/cumulative", ack="client")
    f = c.next()
    assert f.body == "m2" and f.headers["redelivered"] == "true", (f.body, f.headers)
    c.nothing()
    c.conn.ack(f.headers["ack"])
    c.close()


@check("ack client-individual: only the acknowledged one is settled")
def ack_individual(b):
    c = Client(b)
    for i in range(3):
        c.send("/queue/individual", f"m{i}")
    c.subscribe("/queue/individual", "s", ack="client-individual")
    frames = [c.next() for _ in range(3)]
    c.confirmed(c.conn.ack, frames[1].headers["ack"])
    c.close()
    c = reader(b, "/queue/individual", ack="client-individual")
    back = sorted(bodies([c.next(), c.next()]))
    assert back == ["m0", "m2"], back
    c.nothing()
    c.close()


@check("nack: the message is redelivered, flagged")
def nack(b):
    c = Client(b)
    c.send("/queue/nacked", "again")
    c.subscribe("/queue/nacked", "s", ack="client-individual")
    f = c.next()
    assert f.headers["redelivered"] == "false"
    c.conn.nack(f.headers["ack"])
    f = c.next()
    assert f.body == "again" and f.headers["redelivered"] == "true", f.headers
    c.conn.ack(f.headers["ack"])
    c.close()


@check("transactions: aborted sends never arrive, committed ones do")
def transactions(b):
    c = Client(b)
    c.subscribe("/queue/txn", "s")
    t = c.conn.begin()
    c.conn.send("/queue/txn", "aborted 1", transaction=t)
    c.conn.send("/queue/txn", "aborted 2", transaction=t)
    c.confirmed(c.conn.abort, t)
    c.nothing()
    t = c.conn.begin()
    c.conn.send("/queue/txn", "committed 1", transaction=t)
    c.conn.send("/queue/txn", "committed 2", transaction=t)
    c.nothing(0.3)
    c.conn.commit(t)
    assert bodies([c.next(), c.next()]) == ["committed 1", "committed 2"]
    c.close()


@check("a transaction's acks: aborted, the message comes back")
def transactional_ack(b):
    c = Client(b)
    c.send("/queue/txnack", "one")
    c.subscribe("/queue/txnack", "s", ack="client-individual")
    f = c.next()
    t = c.conn.begin()
    c.conn.ack(f.headers["ack"], transaction=t)
    c.confirmed(c.conn.abort, t)
    c.close()
    c = reader(b, "/queue/txnack", ack="client-individual")
    f = c.next()
    assert f.body == "one"
    t = c.conn.begin()
    c.conn.ack(f.headers["ack"], transaction=t)
    c.conn.commit(t)
    c.close()
    c = reader(b, "/queue/txnack")
    c.nothing()
    c.close()


@check("STOMP 1.1 and 1.0 clients are served in their version")
def older_versions(b):
    for cls, version in ((stomp.Connection11, "1.1"), (stomp.Connection10, "1.0")):
        conn = cls([b.stomp])
        l = Listener()
        conn.set_listener("", l)
        conn.connect(wait=True)
        dest = f"/queue/v{version}"
        if version == "1.1":
            conn.subscribe(dest, "s", ack="client")
        else:
            conn.subscribe(dest, ack="client")
        conn.send(dest, f"in {version}", headers={"receipt": "sent"})
        assert l.receipts.get(timeout=WAIT) == "sent"
        f = l.messages.get(timeout=WAIT)
        assert f.body == f"in {version}", f.body
        if version == "1.1":
            conn.ack(f.headers["message-id"], "s", receipt="acked")
        else:
            conn.ack(f.headers["message-id"], receipt="acked")
        assert l.receipts.get(timeout=WAIT) == "acked"
        conn.disconnect()


@check("a selector picks by header")
def selector(b):
    c = Client(b)
    c.subscribe("/queue/selected", "s", selector="region = 'eu'")
    c.send("/queue/selected", "for us", region="us")
    c.send("/queue/selected", "for eu", region="eu")
    f = c.next()
    assert f.body == "for eu" and f.headers["region"] == "eu"
    c.nothing()
    c.close()


@check("wildcard topic subscriptions")
def wildcards(b):
    c = Client(b)
    c.subscribe("/topic/prices.*.fish", "one")
    c.subscribe("/topic/prices.>", "all")
    c.send("/topic/prices.eu.fish", "cod")
    c.send("/topic/prices.eu.meat", "beef")
    frames = [c.next() for _ in range(3)]
    got = sorted((f.headers["subscription"], f.body) for f in frames)
    assert got == [("all", "beef"), ("all", "cod"), ("one", "cod")], got
    # Each MESSAGE names the topic it was published to, not the pattern.
    where = sorted((f.body, f.headers["destination"]) for f in frames)
    assert where == [("beef", "/topic/prices.eu.meat"), ("cod", "/topic/prices.eu.fish"),
                     ("cod", "/topic/prices.eu.fish")], where
    c.nothing()
    c.close()


@check("a durable subscription keeps its backlog across a disconnect and a kill -9")
def durable(b):
    c = Client(b, client_id="durable-reader")
    c.subscribe("/topic/audit", "d", ack="client-individual", **{"durable-subscription-name": "keep"})
    c.close()
    p = Client(b)
    for i in range(3):
        p.send("/topic/audit", f"kept {i}", persistent="true")
    p.close()
    b.restart_after_kill9()
    c = Client(b, client_id="durable-reader")
    c.subscribe("/topic/audit", "d", ack="client-individual", **{"durable-subscription-name": "keep"})
    frames = [c.next() for _ in range(3)]
    assert bodies(frames) == ["kept 0", "kept 1", "kept 2"], bodies(frames)
    for f in frames:
        c.conn.ack(f.headers["ack"])
    c.conn.unsubscribe("d", headers={"durable-subscription-name": "keep"})
    c.close()


@check("a transaction is all or nothing across kill -9 at random points")
def transaction_crash(b):
    rng = random.Random(11)
    committed = set()
    for cycle in range(8):
        c = Client(b)
        t = c.conn.begin()
        for i in range(20):
            c.conn.send("/queue/crashtx", f"{cycle}:{i}", transaction=t)
        r = c.receipt()
        c.conn.commit(t, receipt=r)
        time.sleep(rng.uniform(0, 0.02))
        try:
            if c.l.receipts.get(timeout=0.001) == r:
                committed.add(cycle)
        except queue.Empty:
            pass
        b.restart_after_kill9()
    c = Client(b)
    c.subscribe("/queue/crashtx", "s")
    counts = {}
    try:
        while True:
            f = c.l.messages.get(timeout=1.5)
            cycle = int(f.body.split(":")[0])
            counts[cycle] = counts.get(cycle, 0) + 1
    except queue.Empty:
        pass
    c.close()
    assert all(n == 20 for n in counts.values()), f"a transaction was cut: {counts}"
    assert committed <= set(counts), f"acknowledged commits lost: {committed - set(counts)}"


@check("receipts for every frame that asks")
def receipts(b):
    c = Client(b)
    c.subscribe("/queue/receipts", "s", ack="client")
    c.send("/queue/receipts", "x")
    f = c.next()
    c.confirmed(c.conn.ack, f.headers["ack"])
    t = "t-receipt"
    c.confirmed(c.conn.begin, t)
    c.confirmed(c.conn.commit, t)
    c.confirmed(c.conn.unsubscribe, "s")
    c.close()
    assert c.l.receipts.get(timeout=WAIT) == f"r{c.n}", "DISCONNECT's receipt"


@check("heart-beats from the server")
def heartbeats(b):
    c = Client(b, heartbeats=(1000, 1000))
    time.sleep(3.5)
    assert c.l.heartbeats >= 2, c.l.heartbeats
    assert c.conn.is_connected()
    c.close()


@check("a 2 MB binary body arrives byte-exact")
def binary(b):
    body = random.Random(7).randbytes(2 * 1024 * 1024) + b"\0tail"
    assert b"\0" in body
    c = Client(b, decode=False)
    c.subscribe("/queue/binary", "s")
    c.send("/queue/binary", body)
    f = c.next()
    assert f.body == body, (len(f.body), len(body))
    c.close()


@check("STOMP to the CLI: priority and properties arrive as sent")
def stomp_to_native(b):
    c = Client(b)
    c.send("/queue/crossing", "from stomp", priority="7", region="eu",
           **{"correlation-id": "c-42", "reply-to": "/queue/answers"})
    c.close()
    line = b.cli("recv", "--queue", "crossing", "--json")
    m = json.loads(line)
    assert m["priority"] == 8, m
    props = m["properties"]
    assert props["region"] == "eu" and props["correlation-id"] == "c-42", props
    assert props["reply-to"] == "/queue/answers", props
    assert m["body"] == "from stomp", m


@check("the CLI to STOMP: priority and properties arrive as headers")
def native_to_stomp(b):
    b.cli("queue", "create", "back")
    b.cli("send", "--queue", "back", "--priority", "9", "-p", "region=us", "-p", "n=3", "from the cli")
    c = Client(b)
    c.subscribe("/queue/back", "s")
    f = c.next()
    assert f.body == "from the cli"
    assert f.headers["priority"] == "8", f.headers
    assert f.headers["region"] == "us" and f.headers["n"] == "3", f.headers
    c.close()


@check("shared subscriptions: consumers split a topic's messages, each message once")
def shared_subscriptions(b):
    for durable in (False, True):
        name = "workers-d" if durable else "workers"
        headers = {"ferry-shared": "true", "activemq.prefetchSize": "1"}
        if durable:
            headers["durable-subscription-name"] = name
        else:
            headers["ferry-subscription-name"] = name
        a, c = Client(b), Client(b)
        for x in (a, c):
            x.subscribe("/topic/jobs", "s", ack="client-individual", **headers)
        p = Client(b)
        sent = [f"job {i}" for i in range(20)]
        for body in sent:
            p.send("/topic/jobs", body)
        got = {id(a): [], id(c): []}
        deadline = time.time() + WAIT
        while sum(map(len, got.values())) < len(sent) and time.time() < deadline:
            for x in (a, c):
                try:
                    f = x.l.messages.get(timeout=0.05)
                except queue.Empty:
                    continue
                got[id(x)].append(f.body)
                x.conn.ack(f.headers["ack"])
        everything = got[id(a)] + got[id(c)]
        assert sorted(everything) == sorted(sent), (durable, got)
        assert got[id(a)] and got[id(c)], f"both consumers got some: {got}"
        a.nothing(0.3)
        c.nothing(0.3)
        for x in (a, c, p):
            x.close()


@check("/sender/NAME: a sender's messages from every queue, others' stay")
def by_sender(b):
    alice = Client(b, client_id="alice-sends")
    bob = Client(b, client_id="bob-sends")
    alice.send("/queue/by-sender-1", "a1")
    alice.send("/queue/by-sender-2", "a2", priority="9")
    bob.send("/queue/by-sender-1", "b1")
    r = Client(b)
    r.subscribe("/sender/alice-sends", "s", ack="client-individual")
    first, second = r.next(), r.next()
    assert [first.body, second.body] == ["a2", "a1"], "priority order across queues"
    assert first.headers["ferry-sender"] == "alice-sends"
    assert first.headers["destination"] == "/sender/alice-sends"
    for f in (first, second):
        r.conn.ack(f.headers["ack"])
    r.nothing()
    r.close()
    q = reader(b, "/queue/by-sender-1")
    assert q.next().body == "b1"
    q.nothing()
    for x in (alice, bob, q):
        x.close()


@check("an error: a missing destination with auto-create off is an ERROR frame")
def refused(b):
    off = Broker(b.ferry, tempfile.mkdtemp(), ["--stomp-auto-create", "false"])
    try:
        c = Client(off)
        c.conn.send("/queue/missing", "x", headers={"receipt": "r-missing"})
        e = c.l.errors.get(timeout=WAIT)
        assert "does not exist" in e.headers["message"], e.headers
        assert e.headers.get("receipt-id") == "r-missing", e.headers
    finally:
        off.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--only")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="ferry-stomppy-")
    b = Broker(args.ferry, data, ["--max-body-bytes", str(4 * 1024 * 1024)])
    try:
        for name, fn in CHECKS:
            if args.only and args.only not in name:
                continue
            fn(b)
            print(f"ok: {name}", flush=True)
    finally:
        b.stop()
    print("every check passed")


if __name__ == "__main__":
    main()
