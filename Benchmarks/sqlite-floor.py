#!/usr/bin/env python3
"""The storage floor under one stored message: SQLite alone, no server (docs/BENCHMARKS.md, "The floor").

Writes what the command writer writes for a message to a group, on the tables and indexes it touches
(SQLiteStore's schema: `events` with its client-message-id and message-id indexes, `conversations`, `participants`),
with the store's settings (WAL, synchronous=NORMAL, 16,000-page checkpoints on the same connection): one event
insert, the conversation's position, the sender's read position, `--per-transaction` messages per transaction, each
to a random one of `--conversations` conversations of 5 members. Prints the process's CPU per message, user and
system, and what Python's own calls cost (the same statements as `SELECT`s on an in-memory database), which the
floor is without.

    python3 Benchmarks/sqlite-floor.py --per-transaction 1
"""

import argparse
import os
import random
import resource
import sqlite3
import tempfile
import time

SCHEMA = """
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


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-transaction", type=int, default=1)
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=20000, help="measured, after as many to warm up")
    parser.add_argument("--body-bytes", type=int, default=400, help="a message event's JSON")
    parser.add_argument("--cache-kib", type=int, default=4096, help="the page cache (the writer's: 4 MiB)")
    options = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="sqlite-floor-")
    path = os.path.join(directory, "floor.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA wal_autocheckpoint = 16000")
    db.execute(f"PRAGMA cache_size = -{options.cache_kib}")
    db.executescript(SCHEMA)
    count = options.conversations
    db.execute("BEGIN")
    for pk in range(1, count + 1):
        db.execute("INSERT INTO conversations VALUES (?, ?, 0, 0, 0)", (pk, f"c_{pk:08d}"))
        for member in range(5):
            db.execute("INSERT INTO participants (conversation_pk, uid) VALUES (?, ?)", (pk, f"u{pk}_{member}"))
    db.execute("COMMIT")
    seqs = [0] * (count + 1)
    body = os.urandom(options.body_bytes)
    per = max(options.per_transaction, 1)

    def store(messages):
        for start in range(0, messages, per):
            db.execute("BEGIN IMMEDIATE")
            for index in range(start, min(start + per, messages)):
                pk = random.randint(1, count)
                seqs[pk] += 1
                seq = seqs[pk]
                sender = f"u{pk}_{random.randint(0, 4)}"
                now = 1_700_000_000_000 + index
                db.execute(
                    "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (pk, seq, "message.sent", sender, now, f"cm_{random.getrandbits(64):016x}", seq,
                     f"m_{random.getrandbits(64):020d}", None, body),
                )
                db.execute(
                    "UPDATE conversations SET last_seq = ?, last_activity_at = ?, message_count = ? WHERE pk = ?",
                    (seq, now, seq, pk),
                )
                db.execute(
                    "UPDATE participants SET delivered_seq = ?, read_seq = ?, read_message_count = ? "
                    "WHERE conversation_pk = ? AND uid = ?",
                    (seq, seq, seq, pk, sender),
                )
            db.execute("COMMIT")

    def calls(messages):
        memory = sqlite3.connect(":memory:", isolation_level=None)
        for start in range(0, messages, per):
            memory.execute("SELECT 1")
            for index in range(start, min(start + per, messages)):
                pk = random.randint(1, count)
                sender = f"u{pk}_{random.randint(0, 4)}"
                memory.execute(
                    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?",
                    (pk, index, "message.sent", sender, index, f"cm_{random.getrandbits(64):016x}", index,
                     f"m_{random.getrandbits(64):020d}", None, body),
                )
                memory.execute("SELECT ?, ?, ?, ?", (index, index, index, pk))
                memory.execute("SELECT ?, ?, ?, ?, ?", (index, index, index, pk, sender))
            memory.execute("SELECT 1")

    store(options.messages)  # warm: the tables and the WAL at their working size
    user0, system0 = cpu()
    wall0 = time.perf_counter()
    store(options.messages)
    wall1 = time.perf_counter()
    user1, system1 = cpu()
    calls(options.messages)
    user2, system2 = cpu()
    db.close()
    for name in os.listdir(directory):
        os.remove(os.path.join(directory, name))
    os.rmdir(directory)

    def per_message(seconds):
        return seconds / options.messages * 1e6

    total = per_message((user1 - user0) + (system1 - system0))
    python = per_message((user2 - user1) + (system2 - system1))
    print(
        f"sqlite-floor: per_transaction={per} conversations={count} messages={options.messages} "
        f"cpu/msg={total:.1f}us (user {per_message(user1 - user0):.1f}, system {per_message(system1 - system0):.1f}) "
        f"python_calls/msg={python:.1f}us floor/msg={total - python:.1f}us wall/msg={per_message(wall1 - wall0):.1f}us"
    )


if __name__ == "__main__":
    main()
