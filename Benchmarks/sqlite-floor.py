#!/usr/bin/env python3
"""The storage floor under one stored message: SQLite alone, no server (docs/BENCHMARKS.md, "The floor").

Writes what a writer writes for a message to a group, in one of seven layouts (`--layout`), with the store's settings
(WAL, synchronous=NORMAL, 16,000-page checkpoints on the same connection, a 4 MiB page cache), on a database that
already holds `--prefill` messages (1,000,000 by default: on a small database the hot leaves of every room fit the
cache and any layout looks cheap). `--per-transaction` messages per transaction, each to a random one of
`--conversations` conversations of 5 members, from a random member, with a 400-byte body.

Layouts:
  today           SQLiteStore's schema: `events` clustered by (conversation, seq) with its client-message-id and
                  message-id indexes; the conversation's row and the sender's participant row updated per message.
  today-deferred  the same tables; the conversation and sender rows updated once per `--flush-every` messages (about
                  once a second at 2,000 messages a second), for the ones touched since.
  log             an append-only log (rowid order) with one (conversation, seq) index and the client-message-id
                  index; bookkeeping deferred as above.
  log-hashed      the log, its client-message-id index on a 64-bit hash of (sender, client message id) instead of
                  the text: (conversation, hash), a compact index; bookkeeping deferred.
  log-lean        the log with the (conversation, seq) index only; client message ids checked in memory over a window
                  of recent ones (older retries would be looked up in the log); bookkeeping deferred.
  log-ordered     the log with the (conversation, seq) index, a message-id index and a client-message-id index led by
                  the id, both ids time-ordered (the server's clock; the device's, off by up to 2 s): each index
                  appends at its right edge as the log does; bookkeeping deferred.
  log-filed       what SQLiteStore does: the log with the (conversation, seq) index; message ids and client message
                  ids (time-ordered) in tables of their own, filed from the log every 256 messages; the tail's client
                  ids checked in memory, the filed ones with a read of their table; bookkeeping deferred.

Prints the process's CPU per message, user and system; what Python's own calls cost (the same statements with the same
parameters as `SELECT`s on an in-memory database), which the floor is without; and the bytes the process wrote per
message (WAL frames and checkpoints, from /proc/self/io), in 4 KiB pages.

    python3 Benchmarks/sqlite-floor.py --layout today --per-transaction 1
    for layout in today today-deferred log log-hashed log-lean log-ordered log-filed; do
        for per in 1 10 100; do python3 Benchmarks/sqlite-floor.py --layout $layout --per-transaction $per; done
    done
"""

import argparse
import collections
import hashlib
import os
import random
import resource
import sqlite3
import tempfile
import time

TODAY = """
CREATE TABLE conversations (
    pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, last_seq INTEGER NOT NULL, message_count INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL);
CREATE TABLE participants (
    conversation_pk INTEGER NOT NULL, uid TEXT NOT NULL, delivered_seq INTEGER NOT NULL DEFAULT 0,
    read_seq INTEGER NOT NULL DEFAULT 0, read_message_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation_pk, uid)) WITHOUT ROWID;
CREATE INDEX participants_by_user ON participants(uid, conversation_pk);
CREATE TABLE events (
    conversation_pk INTEGER NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, actor TEXT,
    created_at INTEGER NOT NULL, client_message_id TEXT, message_index INTEGER, message_id TEXT, thread_seq INTEGER,
    body BLOB NOT NULL, PRIMARY KEY (conversation_pk, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX events_by_client_message
    ON events(conversation_pk, actor, client_message_id) WHERE client_message_id IS NOT NULL;
CREATE INDEX events_by_message ON events(conversation_pk, message_id) WHERE message_id IS NOT NULL;
"""

# The conversations and participants tables are today's in every layout; the log replaces `events`.
LOG = TODAY.split("CREATE TABLE events")[0] + """
CREATE TABLE log (
    position INTEGER PRIMARY KEY, conversation_pk INTEGER NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL,
    actor TEXT, created_at INTEGER NOT NULL, client_message_id TEXT, client_hash INTEGER, message_id TEXT,
    thread_seq INTEGER, body BLOB NOT NULL);
CREATE UNIQUE INDEX log_by_conversation ON log(conversation_pk, seq);
"""
LOG_CLIENT_INDEX = """
CREATE UNIQUE INDEX log_by_client_message
    ON log(conversation_pk, actor, client_message_id) WHERE client_message_id IS NOT NULL;
"""

LOG_CLIENT_HASH_INDEX = """
CREATE UNIQUE INDEX log_by_client_hash ON log(conversation_pk, client_hash) WHERE client_hash IS NOT NULL;
"""

# Time-ordered ids (a message id made by the server from its clock; a client message id made by the SDK from the
# device's, UUIDv7-like): each index takes its new entries at its right edge, as the log does, whatever the room.
LOG_ORDERED_INDEXES = """
CREATE UNIQUE INDEX log_by_message ON log(message_id) WHERE message_id IS NOT NULL;
CREATE UNIQUE INDEX log_by_client_message
    ON log(client_message_id, conversation_pk, actor) WHERE client_message_id IS NOT NULL;
"""

# What SQLiteStore keeps (schema v14): the log with its (conversation, seq) index; message ids and client message ids in
# tables of their own, filed from the log every `--file-every` messages (SQLiteStore.logIndexInterval).
LOG_FILED_TABLES = """
CREATE TABLE message_ids (
    message_id TEXT NOT NULL, conversation_pk INTEGER NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (message_id, conversation_pk, seq)) WITHOUT ROWID;
CREATE TABLE client_message_ids (
    client_message_id TEXT NOT NULL, conversation_pk INTEGER NOT NULL, actor TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (client_message_id, conversation_pk, actor)) WITHOUT ROWID;
CREATE TABLE log_state (id INTEGER PRIMARY KEY CHECK (id = 1), indexed_through INTEGER NOT NULL);
INSERT INTO log_state VALUES (1, 0);
"""

FILE_TAIL = [
    "INSERT OR IGNORE INTO message_ids SELECT message_id, conversation_pk, seq FROM log "
    "WHERE position > (SELECT indexed_through FROM log_state) AND message_id IS NOT NULL ORDER BY message_id",
    "INSERT OR IGNORE INTO client_message_ids SELECT client_message_id, conversation_pk, actor, seq FROM log "
    "WHERE position > (SELECT indexed_through FROM log_state) AND client_message_id IS NOT NULL ORDER BY position",
    "UPDATE log_state SET indexed_through = (SELECT max(position) FROM log)",
]

LAYOUTS = ["today", "today-deferred", "log", "log-hashed", "log-lean", "log-ordered", "log-filed"]


def client_hash(sender, client_id):
    """A 64-bit hash of who sent a client message id and the id (signed, as SQLite's integers are)."""
    digest = hashlib.blake2b(f"{sender}\0{client_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def written():
    """Bytes this process has passed to write(2) so far."""
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


class Messages:
    """Where the next message goes and what it says, the same sequence for the measured run and the calls' run."""

    def __init__(self, conversations, body_bytes, seed, ordered=False):
        self.random = random.Random(seed)
        self.ordered = ordered
        # Each device's clock is off by up to two seconds either way.
        self.skews = {}
        self.conversations = conversations
        self.seqs = [0] * (conversations + 1)
        self.body = os.urandom(body_bytes)
        self.index = 0

    def next(self):
        pk = self.random.randint(1, self.conversations)
        self.seqs[pk] += 1
        self.index += 1
        sender = f"u{pk}_{self.random.randint(0, 4)}"
        now = 1_700_000_000_000 + self.index
        if self.ordered:
            skew = self.skews.setdefault(sender, self.random.randint(-2000, 2000))
            client_id = f"{now + skew:012x}-{self.random.getrandbits(64):016x}"
            message_id = f"m_{now:012x}{self.random.getrandbits(40):010x}"
        else:
            client_id = f"cm_{self.random.getrandbits(64):016x}"
            message_id = f"m_{self.random.getrandbits(64):020d}"
        return pk, self.seqs[pk], sender, now, client_id, message_id


class Writer:
    """What the layout writes per message, through `execute` (the database's, or the calls' stand-in)."""

    def __init__(self, layout, flush_every, window, file_every=256):
        self.layout = layout
        self.file_every = file_every
        self.since_filing = 0
        self.flush_every = flush_every
        self.conversations = {}
        self.senders = {}
        self.since_flush = 0
        self.recent = collections.OrderedDict()
        self.window = window

    def message(self, execute, pk, seq, sender, now, client_id, message_id, body):
        if self.layout == "today":
            execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pk, seq, "message.sent", sender, now, client_id, seq, message_id, None, body),
            )
            execute(
                "UPDATE conversations SET last_seq = ?, last_activity_at = ?, message_count = ? WHERE pk = ?",
                (seq, now, seq, pk),
            )
            execute(
                "UPDATE participants SET delivered_seq = ?, read_seq = ?, read_message_count = ? "
                "WHERE conversation_pk = ? AND uid = ?",
                (seq, seq, seq, pk, sender),
            )
            return
        if self.layout == "today-deferred":
            execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pk, seq, "message.sent", sender, now, client_id, seq, message_id, None, body),
            )
        else:
            if self.layout == "log-filed":
                # The tail's client ids in memory, the filed ones looked up in their table (a read, no write).
                key = (pk, sender, client_id)
                if key in self.recent:
                    raise RuntimeError("a duplicate client message id")
                execute(
                    "SELECT seq FROM client_message_ids WHERE client_message_id = ? AND conversation_pk = ? "
                    "AND actor = ?",
                    (client_id, pk, sender),
                )
                self.recent[key] = seq
            if self.layout == "log-lean":
                key = (pk, sender, client_id)
                if key in self.recent:
                    raise RuntimeError("a duplicate client message id")
                self.recent[key] = seq
                if len(self.recent) > self.window:
                    self.recent.popitem(last=False)
            hashed = client_hash(sender, client_id) if self.layout == "log-hashed" else None
            message = message_id if self.layout in ("log-ordered", "log-filed") else None
            execute(
                "INSERT INTO log (conversation_pk, seq, name, actor, created_at, client_message_id, client_hash, "
                "message_id, thread_seq, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (pk, seq, "message.sent", sender, now, client_id, hashed, message, None, body),
            )
        if self.layout == "log-filed":
            self.since_filing += 1
            if self.since_filing >= self.file_every:
                for statement in FILE_TAIL:
                    execute(statement, ())
                self.recent.clear()
                self.since_filing = 0
        self.conversations[pk] = (seq, now)
        self.senders[(pk, sender)] = seq
        self.since_flush += 1
        if self.since_flush >= self.flush_every:
            self.flush(execute)

    def flush(self, execute):
        for pk, (seq, now) in self.conversations.items():
            execute(
                "UPDATE conversations SET last_seq = ?, last_activity_at = ?, message_count = ? WHERE pk = ?",
                (seq, now, seq, pk),
            )
        for (pk, sender), seq in self.senders.items():
            execute(
                "UPDATE participants SET delivered_seq = ?, read_seq = ?, read_message_count = ? "
                "WHERE conversation_pk = ? AND uid = ?",
                (seq, seq, seq, pk, sender),
            )
        self.conversations.clear()
        self.senders.clear()
        self.since_flush = 0


def prefill(db, layout, messages, count, body_bytes):
    """`messages` messages to random conversations, in large transactions, with the rows they leave behind."""
    source = Messages(count, body_bytes, seed=1, ordered=layout in ("log-ordered", "log-filed"))
    chunk = 20_000
    for start in range(0, messages, chunk):
        rows = [source.next() for _ in range(min(chunk, messages - start))]
        db.execute("BEGIN")
        if layout.startswith("today"):
            db.executemany(
                "INSERT INTO events VALUES (?, ?, 'message.sent', ?, ?, ?, ?, ?, NULL, ?)",
                ((pk, seq, sender, now, client, seq, message, source.body) for pk, seq, sender, now, client, message in rows),
            )
        else:
            hashed = layout == "log-hashed"
            ordered = layout in ("log-ordered", "log-filed")
            db.executemany(
                "INSERT INTO log (conversation_pk, seq, name, actor, created_at, client_message_id, client_hash, "
                "message_id, thread_seq, body) VALUES (?, ?, 'message.sent', ?, ?, ?, ?, ?, NULL, ?)",
                (
                    (
                        pk, seq, sender, now, client, client_hash(sender, client) if hashed else None,
                        message if ordered else None, source.body,
                    )
                    for pk, seq, sender, now, client, message in rows
                ),
            )
        db.execute("COMMIT")
    db.execute("BEGIN")
    db.executemany(
        "UPDATE conversations SET last_seq = ?, message_count = ? WHERE pk = ?",
        ((seq, seq, pk) for pk, seq in enumerate(source.seqs) if pk > 0),
    )
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return source.seqs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", choices=LAYOUTS, default="today")
    parser.add_argument("--per-transaction", type=int, default=1)
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--prefill", type=int, default=1_000_000, help="messages already stored")
    parser.add_argument("--messages", type=int, default=20000, help="measured, after as many to warm up")
    parser.add_argument("--body-bytes", type=int, default=400, help="a message event's JSON")
    parser.add_argument("--cache-kib", type=int, default=4096, help="the page cache (the writer's: 4 MiB)")
    parser.add_argument("--flush-every", type=int, default=2000, help="deferred bookkeeping: messages per flush")
    parser.add_argument("--window", type=int, default=100_000, help="log-lean: client message ids kept in memory")
    options = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="sqlite-floor-")
    path = os.path.join(directory, "floor.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA wal_autocheckpoint = 16000")
    db.execute(f"PRAGMA cache_size = -{options.cache_kib}")
    layout = options.layout
    extra = {
        "log": LOG_CLIENT_INDEX,
        "log-hashed": LOG_CLIENT_HASH_INDEX,
        "log-ordered": LOG_ORDERED_INDEXES,
        "log-filed": LOG_FILED_TABLES,
    }.get(layout, "")
    db.executescript(TODAY if layout.startswith("today") else LOG + extra)
    count = options.conversations
    db.execute("BEGIN")
    for pk in range(1, count + 1):
        db.execute("INSERT INTO conversations VALUES (?, ?, 0, 0, 0)", (pk, f"c_{pk:08d}"))
        for member in range(5):
            db.execute("INSERT INTO participants (conversation_pk, uid) VALUES (?, ?)", (pk, f"u{pk}_{member}"))
    db.execute("COMMIT")
    filled = time.perf_counter()
    seqs = prefill(db, layout, options.prefill, count, options.body_bytes)
    if layout == "log-filed":
        db.execute("BEGIN")
        for statement in FILE_TAIL:
            db.execute(statement)
        db.execute("COMMIT")
    filled = time.perf_counter() - filled
    per = max(options.per_transaction, 1)

    def store(execute, source, writer, messages):
        for start in range(0, messages, per):
            execute("BEGIN IMMEDIATE", ())
            for _ in range(start, min(start + per, messages)):
                pk, seq, sender, now, client, message = source.next()
                writer.message(execute, pk, seq, sender, now, client, message, source.body)
            execute("COMMIT", ())

    def on_disk(sql, parameters):
        db.execute(sql, parameters)

    memory = sqlite3.connect(":memory:", isolation_level=None)
    selects = {}

    def calls_only(sql, parameters):
        if not parameters:
            memory.execute("SELECT 1")
            return
        count = len(parameters)
        if count not in selects:
            selects[count] = "SELECT " + ", ".join("?" * count)
        memory.execute(selects[count], parameters)

    def messages_after_prefill(seed):
        source = Messages(count, options.body_bytes, seed, ordered=layout in ("log-ordered", "log-filed"))
        source.index = options.prefill
        source.seqs = list(seqs)
        return source

    source = messages_after_prefill(seed=2)
    writer = Writer(layout, options.flush_every, options.window)
    store(on_disk, source, writer, options.messages)  # warm: the cache and the WAL at their working size
    user0, system0 = cpu()
    written0 = written()
    wall0 = time.perf_counter()
    store(on_disk, source, writer, options.messages)
    wall1 = time.perf_counter()
    user1, system1 = cpu()
    written1 = written()
    calls_source = messages_after_prefill(seed=3)
    calls_writer = Writer(layout, options.flush_every, options.window)
    store(calls_only, calls_source, calls_writer, options.messages)
    user2, system2 = cpu()
    db.close()
    for name in os.listdir(directory):
        os.remove(os.path.join(directory, name))
    os.rmdir(directory)

    def per_message(seconds):
        return seconds / options.messages * 1e6

    total = per_message((user1 - user0) + (system1 - system0))
    python = per_message((user2 - user1) + (system2 - system1))
    pages = (written1 - written0) / options.messages / 4096
    print(
        f"sqlite-floor: layout={layout} per_transaction={per} conversations={count} prefill={options.prefill} "
        f"messages={options.messages} cpu/msg={total:.1f}us (user {per_message(user1 - user0):.1f}, "
        f"system {per_message(system1 - system0):.1f}) python_calls/msg={python:.1f}us "
        f"floor/msg={total - python:.1f}us written_pages/msg={pages:.1f} wall/msg={per_message(wall1 - wall0):.1f}us "
        f"prefill_s={filled:.0f}"
    )


if __name__ == "__main__":
    main()
