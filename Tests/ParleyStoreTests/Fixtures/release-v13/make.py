#!/usr/bin/env python3
"""Makes the release-v13 fixtures: databases written by the release server of commit 3b38d04.

    python3 make.py --server /tmp/release-3b38d04/parley-server                       # sqlite/
    python3 make.py --server BIN --postgres-url postgres://USER:PASSWORD@HOST:PORT/DB  # postgres/
    scripts/with-postgres python3 make.py --server BIN --postgres-url-from-env         # postgres/, throwaway server

It creates an app with the binary's own `apps create`, starts the binary on a free port of 127.0.0.1 (SQLite in a
fresh temporary data directory, or a fresh database made for the run in the PostgreSQL server of the URL, dropped
afterwards), drives the REST API to make deterministic content (see `populate`), reads everything back through the
same API (`read_back`, which becomes expected.json), stops the server with SIGTERM and writes:

- sqlite/parley.sqlite (checkpointed into one file, no -wal/-shm) and sqlite/expected.json; or
- postgres/data.sql (INSERT and setval lines of `pg_dump --data-only --inserts --column-inserts`, one statement a line,
  schema_migrations left out), postgres/schema-version.txt and postgres/expected.json.

Then it checks its own output: the SQLite file (migrations, events) and, for PostgreSQL, that data.sql loads line by
line into a database the release binary migrated and dumps back identically; in both variants the release server
started on the result reads back the same expected.json. Outputs are written only when every check passed.

Python's standard library only. Every request, command and wait has a timeout, the whole run a deadline
(--deadline), and the server is killed on any failure: no process is left running.
"""

import argparse
import copy
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELEASE_COMMIT = "3b38d04"
SQLITE_LAST_MIGRATION = "v13: removed attachments, app file limits"
REQUEST_TIMEOUT = 10  # seconds, every HTTP request
COMMAND_TIMEOUT = 120  # seconds, every command (apps create, pg_dump, psql)
START_TIMEOUT = 60  # seconds until the server listens and is ready
STOP_TIMEOUT = 20  # seconds the server may take to stop after SIGTERM (it promises ~6)
# clientMessageIds: UUIDs made from the message's label, the same on every run.
CLIENT_MESSAGE_NAMESPACE = uuid.UUID("8d3c5f7e-2a41-4c8e-9f1b-5b0d1e13a713")
USERS = [("alice", "Alice Anders"), ("bob", "Bob Brown"), ("carol", "Carol Chen")]


class Failure(Exception):
    pass


def log(message):
    print(f"make.py: {message}", file=sys.stderr, flush=True)


def client_message_id(label):
    return str(uuid.uuid5(CLIENT_MESSAGE_NAMESPACE, f"release-v13/{label}"))


# --------------------------------------------------------------------------------------------------------------------
# The server process


def child_environment(extra=None):
    """The environment without PARLEY_* variables (a config file or a data directory of the caller's would change
    what the server does), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env.update(extra or {})
    return env


class Server:
    def __init__(self, binary, data_dir, env, log_path):
        self.binary = binary
        self.data_dir = data_dir
        self.env = env
        self.log_path = log_path
        self.process = None
        self.base = None

    def start(self):
        args = [self.binary, "serve", "--hostname", "127.0.0.1", "--port", "0", "--data-dir", str(self.data_dir),
                "--no-console", "--log-level", "info"]
        self.log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT,
                                        env=self.env, start_new_session=True)
        log(f"started the server (pid {self.process.pid}), log {self.log_path}")
        deadline = time.monotonic() + START_TIMEOUT
        pattern = re.compile(rb"Parley listening on (http://127\.0\.0\.1:\d+)")
        while self.base is None:
            if self.process.poll() is not None:
                raise Failure(f"the server exited with {self.process.returncode} while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise Failure(f"the server did not listen within {START_TIMEOUT} s:\n{self.log_tail()}")
            match = pattern.search(Path(self.log_path).read_bytes())
            if match:
                self.base = match.group(1).decode()
            else:
                time.sleep(0.1)
        while True:
            try:
                status, _ = http(self.base, "GET", "/health/ready", expect=None)
                if status == 200:
                    break
            except Failure:
                pass
            if self.process.poll() is not None:
                raise Failure(f"the server exited with {self.process.returncode} while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise Failure(f"the server was not ready within {START_TIMEOUT} s:\n{self.log_tail()}")
            time.sleep(0.1)
        log(f"server ready at {self.base}")
        return self.base

    def stop(self):
        """SIGTERM, then wait; a server that does not stop in time is killed and the run fails."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure(f"the server did not stop within {STOP_TIMEOUT} s of SIGTERM (killed):\n{self.log_tail()}")
        finally:
            self.log_file.close()
        if code != 0:
            raise Failure(f"the server exited with {code} after SIGTERM:\n{self.log_tail()}")
        log("server stopped (SIGTERM, exit 0)")

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            log(f"killing the server (pid {self.process.pid})")
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def log_tail(self, lines=40):
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def run(args, env=None, timeout=COMMAND_TIMEOUT, input_text=None):
    """Runs a command to its end (bounded), failing with its output when it fails."""
    try:
        done = subprocess.run(args, env=env, input=input_text, capture_output=True, text=True, timeout=timeout,
                              stdin=None if input_text is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Failure(f"{args[0]} did not finish within {timeout} s")
    if done.returncode != 0:
        raise Failure(f"{' '.join(args[:3])} ... exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def create_app(binary, data_dir, env):
    out = run([binary, "apps", "create", "--data-dir", str(data_dir), "release-v13 fixture"], env=env)
    keys = {}
    for label, field in (("App ID", "id"), ("Auth Key", "authKey"), ("REST API Key", "restAPIKey")):
        match = re.search(rf"^\s*{re.escape(label)}:\s+(\S+)", out, re.MULTILINE)
        if not match:
            raise Failure(f"`apps create` printed no {label}:\n{out}")
        keys[field] = match.group(1)
    log(f"created app {keys['id']}")
    return keys


# --------------------------------------------------------------------------------------------------------------------
# HTTP

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy of the environment


def http(base, method, path, token=None, api_key=None, body=None, data=None, content_type=None, expect=(200,)):
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if api_key:
        headers["X-Parley-Api-Key"] = api_key
    if body is not None:
        data = json.dumps(body).encode()
        content_type = "application/json"
    if content_type:
        headers["Content-Type"] = content_type
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with OPENER.open(request, timeout=REQUEST_TIMEOUT) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    except (urllib.error.URLError, OSError) as error:
        raise Failure(f"{method} {path}: {error}")
    if expect is not None and status not in expect:
        raise Failure(f"{method} {path}: HTTP {status}, expected {expect}: {raw[:500]!r}")
    if not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


class API:
    def __init__(self, base, app):
        self.base = base
        self.app = app
        self.tokens = {}

    def user(self, uid, method, path, body=None, expect=(200,), **kw):
        return http(self.base, method, path, token=self.tokens[uid], body=body, expect=expect, **kw)[1]

    def server(self, method, path, body=None, expect=(200,), **kw):
        return http(self.base, method, path, api_key=self.app["restAPIKey"], body=body, expect=expect, **kw)[1]


def q(value):
    return urllib.parse.quote(value, safe="")


# --------------------------------------------------------------------------------------------------------------------
# Content


def fixture_png(width=48, height=48):
    """A deterministic RGB PNG of a few KB (a gradient with pseudo-random noise, so that it does not compress away)."""
    state = 20261129
    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter: none
        for x in range(width):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            noise = state >> 24
            rows += bytes(((x * 5 + noise) & 255, (y * 5 + noise) & 255, ((x + y) * 3 + noise) & 255))

    def chunk(kind, payload):
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b""))


# The group's messages in order: (label, sender, text, mentions, reply-to label). "FILE" marks the message that
# carries the attachment. Sending reads a conversation up to the message for its sender, so: bob sends nothing after
# g15 (he then marks the group read up to g16, a middle message), carol nothing after g20 (the mentions of her in
# g22 and g27 stay unread; those of g12 and g18 she read past by sending g20); alice sends last.
GROUP_SCRIPT = [
    ("g01", "alice", "Welcome to the release v13 fixture group!", None, None),
    ("g02", "bob", "Hi all", None, None),
    ("g03", "carol", "Hello @alice", ["alice"], None),
    ("g04", "alice", "Thread starter: what shall we migrate first?", None, None),
    ("g05", "bob", "Morning", None, None),
    ("g06", "carol", "Coffee first", None, None),
    ("g07", "bob", "Line one\nline two: \u00fcn\u00efc\u00f6d\u00e9 \u2713, 'single' and \"double\" quotes, a \\ backslash",
     None, None),
    ("g08", "alice", "This text will be edited", None, None),
    ("g09", "carol", "Noted.", None, None),
    ("g10", "alice", "This message will be deleted", None, None),
    ("g11", "bob", "Events first", None, "g04"),
    ("g12", "bob", "@carol are you there?", ["carol"], None),
    ("g13", "alice", "Another plain message", None, None),
    ("g14", "alice", "Then the attachments", None, "g04"),
    ("g15", "bob", "My last message in the group for today", None, None),
    ("g16", "alice", "Middle of the group (bob reads up to here)", None, None),
    ("g17", "carol", "Back for a moment", None, None),
    ("g18", "alice", "@carol please review the plan", ["carol"], None),
    ("g19", "alice", "The plan is in the wiki", None, None),
    ("g20", "carol", "Going offline now", None, None),
    ("g21", "alice", "Status: schema draft done", None, None),
    ("g22", "alice", "@bob @carol standup in 5", ["bob", "carol"], None),
    ("g23", "alice", "Standup notes follow", None, None),
    ("g24", "alice", "FILE", None, None),
    ("g25", "alice", "That diagram is the current schema", None, None),
    ("g26", "alice", "Numbers: 1, 2, 3 \u2014 and an emoji \U0001F680", None, None),
    ("g27", "alice", "@carol one more thing (dave is not in this group)", ["carol", "dave"], None),
    ("g28", "alice", "Almost done", None, None),
    ("g29", "alice", "Last but one", None, None),
    ("g30", "alice", "Last message of the group", None, None),
]
EDIT = ("g08", "alice", "This text was edited (v2)")
DELETE = ("g10", "alice")
# (label, uid, key, add/remove), in order.
REACTIONS = [
    ("g01", "alice", "\U0001F44D", "add"),
    ("g01", "bob", "\U0001F44D", "add"),
    ("g01", "carol", "\U0001F44D", "add"),
    ("g01", "carol", "\u2764\ufe0f", "add"),
    ("g01", "bob", "\U0001F389", "add"),
    ("g04", "bob", "\U0001F602", "add"),
    ("g04", "carol", "\U0001F602", "add"),
    ("g04", "alice", "ack", "add"),
    ("g07", "alice", "+1", "add"),
    ("g10", "bob", "\U0001F440", "add"),  # goes with g10's deletion
    ("g24", "bob", "\u2764\ufe0f", "add"),
    ("g24", "carol", "\U0001F44D", "add"),
    ("g01", "carol", "\u2764\ufe0f", "remove"),
]
DIRECT_SCRIPT = [
    ("d1", "alice", "Hi Bob, a private question"),
    ("d2", "bob", "Sure, go ahead"),
    ("d3", "alice", "Can you check the migration tomorrow?"),
    ("d4", "bob", "Will do"),
    ("d5", "alice", "Thanks!"),
]
DIRECT_REACTIONS = [("d5", "bob", "\U0001F44D", "add")]
ATTACHMENT_NAME = "schema-diagram.png"


def populate(api):
    """Makes the content. Returns what was sent, by label (used only to check what the server read back)."""
    for uid, name in USERS:
        api.server("POST", "/v1/users", {"uid": uid, "name": name}, expect=(201,))
        issued = api.server("POST", f"/v1/users/{uid}/auth-tokens", {}, expect=(201,))
        api.tokens[uid] = issued["authToken"]
    group = api.user("alice", "POST", "/v1/conversations",
                     {"type": "group", "participants": ["bob", "carol"], "name": "Release v13 fixture group",
                      "description": "Every kind of row a migration must keep"}, expect=(201,))
    direct = api.user("alice", "POST", "/v1/conversations", {"type": "direct", "participants": ["bob"]},
                      expect=(201,))
    sent = {}
    png = fixture_png()
    attachment = None

    def send(conversation, label, sender, text, mentions=None, reply_to=None):
        nonlocal attachment
        body = {"clientMessageId": client_message_id(label), "parts": [{"type": "text", "text": text}]}
        if text == "FILE":
            attachment = api.user(sender, "POST",
                                  f"/v1/conversations/{q(conversation)}/attachments?name={q(ATTACHMENT_NAME)}",
                                  data=png, content_type="image/png", expect=(201,))
            body["parts"] = [{"type": "text", "text": "Here is the schema diagram"},
                             {"type": "file", "file": {"id": attachment["id"]}}]
        if mentions:
            body["mentions"] = mentions
        if reply_to:
            body["replyTo"] = sent[reply_to]["id"]
        message = api.user(sender, "POST", f"/v1/conversations/{q(conversation)}/messages", body, expect=(201,))
        sent[label] = {"id": message["id"], "seq": message["seq"], "conversationId": conversation,
                       "sender": sender, "clientMessageId": body["clientMessageId"], "request": body}

    for label, sender, text, mentions, reply_to in GROUP_SCRIPT:
        send(group["id"], label, sender, text, mentions, reply_to)
    for label, sender, text in DIRECT_SCRIPT:
        send(direct["id"], label, sender, text)

    def react(label, uid, key, action):
        m = sent[label]
        path = f"/v1/conversations/{q(m['conversationId'])}/messages/{q(m['id'])}/reactions/{q(key)}"
        api.user(uid, "PUT" if action == "add" else "DELETE", path)

    for reaction in REACTIONS + DIRECT_REACTIONS:
        react(*reaction)
    label, uid, text = EDIT
    m = sent[label]
    api.user(uid, "PATCH", f"/v1/conversations/{q(m['conversationId'])}/messages/{q(m['id'])}",
             {"parts": [{"type": "text", "text": text}]})
    label, uid = DELETE
    m = sent[label]
    api.user(uid, "DELETE", f"/v1/conversations/{q(m['conversationId'])}/messages/{q(m['id'])}")

    # Receipts, after every other change. Bob: the group delivered to its end, read up to g16; the direct
    # conversation read to its end. Carol marks nothing. Alice's positions are what sending gave her.
    last_group = api.server("GET", f"/v1/conversations/{q(group['id'])}")["lastSeq"]
    api.user("bob", "POST", f"/v1/conversations/{q(group['id'])}/receipts",
             {"deliveredSeq": last_group, "readSeq": sent["g16"]["seq"]})
    last_direct = api.server("GET", f"/v1/conversations/{q(direct['id'])}")["lastSeq"]
    api.user("bob", "POST", f"/v1/conversations/{q(direct['id'])}/receipts",
             {"deliveredSeq": last_direct, "readSeq": last_direct})
    return {"group": group["id"], "direct": direct["id"], "sent": sent, "attachment": attachment,
            "png_sha256": hashlib.sha256(png).hexdigest(), "png_size": len(png)}


# --------------------------------------------------------------------------------------------------------------------
# Reading back (expected.json)


def pages(fetch, key):
    items, cursor = [], None
    for _ in range(1000):
        page = fetch(cursor)
        items.extend(page[key])
        cursor = page.get("nextCursor")
        if not cursor:
            return items, page
    raise Failure("more than 1000 pages")


def history(api, conversation, uid=None):
    def fetch(cursor):
        path = f"/v1/conversations/{q(conversation)}/messages?limit=200" + (f"&cursor={q(cursor)}" if cursor else "")
        return api.user(uid, "GET", path) if uid else api.server("GET", path)

    messages, _ = pages(fetch, "messages")
    return sorted(messages, key=lambda m: m["seq"])


def without_reacted(message):
    m = copy.deepcopy(message)
    for r in m.get("reactions", []):
        r.pop("reacted", None)
    return m


def read_back(api, made, download=True):
    uids = [uid for uid, _ in USERS]
    app = api.server("GET", "/v1/app")
    users, _ = pages(lambda c: api.server("GET", "/v1/users?limit=200" + (f"&cursor={q(c)}" if c else "")), "users")
    expected = {
        "release": RELEASE_COMMIT,
        "app": {"id": app["appId"], "name": app["name"], "authKey": api.app["authKey"],
                "restAPIKey": api.app["restAPIKey"]},
        "users": [{"uid": u["uid"], "name": u["name"]} for u in users],
        "conversations": [],
        "unread": {},
        "unreadMentions": {},
        "attachments": [],
    }
    file_messages = {}
    for conversation_id in (made["group"], made["direct"]):
        conversation = api.server("GET", f"/v1/conversations/{q(conversation_id)}")
        participants = api.server("GET", f"/v1/conversations/{q(conversation_id)}/participants")["participants"]
        by_server = history(api, conversation_id)
        # Who gave each reaction: the REST API shows counts and whether the reader gave it, so read as each user.
        as_user = {uid: {m["id"]: m for m in history(api, conversation_id, uid)}
                   for uid in uids if any(p["uid"] == uid for p in participants)}
        events, _ = pages(lambda c, cid=conversation_id: api.user(
            "alice", "GET", f"/v1/conversations/{q(cid)}/events?limit=200&after={c or 0}"), "events")
        messages = []
        for m in by_server:
            single = api.server("GET", f"/v1/conversations/{q(conversation_id)}/messages/{q(m['id'])}")
            if single != m:
                raise Failure(f"GET message {m['id']} differs from its history entry:\n{single}\n{m}")
            for uid, seen in as_user.items():
                if without_reacted(seen[m["id"]]) != without_reacted(m):
                    raise Failure(f"{uid}'s history differs from the server's for {m['id']}")
            reactions = {}
            for r in m.get("reactions", []):
                givers = sorted(uid for uid, seen in as_user.items()
                                if any(x["key"] == r["key"] and x["reacted"] for x in seen[m["id"]].get("reactions", [])))
                if len(givers) != r["count"]:
                    raise Failure(f"reaction {r['key']} of {m['id']}: count {r['count']}, givers {givers}")
                reactions[r["key"]] = givers
            texts = [p["text"] for p in m["parts"] if p["type"] == "text"]
            attachment_ids = [p["file"]["id"] for p in m["parts"] if p["type"] == "file"]
            for a in attachment_ids:
                file_messages[a] = (conversation_id, m["id"])
            entry = {
                "id": m["id"],
                "seq": m["seq"],
                "sender": m["sender"],
                "clientMessageId": m.get("clientMessageId"),
                "sentAt": m["sentAt"],
                "text": "\n".join(texts) if texts else None,
                "parts": m["parts"],
                "deleted": "deletedAt" in m,
                "deletedAt": m.get("deletedAt"),
                "deletedBy": m.get("deletedBy"),
                "editedAt": m.get("editedAt"),
                "replyTo": m.get("replyTo"),
                "replyCount": m.get("replyCount", 0),
                "lastReplyAt": m.get("lastReplyAt"),
                "mentions": m.get("mentions", []),
                "attachments": attachment_ids,
                "reactions": reactions,
            }
            messages.append(entry)
        threads = {}
        for entry in messages:
            if entry["replyCount"] or any(x["replyTo"] == entry["id"] for x in messages):
                replies, page = pages(lambda c, mid=entry["id"]: api.user(
                    "alice", "GET", f"/v1/conversations/{q(conversation_id)}/messages/{q(mid)}/replies?limit=200"
                    + (f"&cursor={q(c)}" if c else "")), "messages")
                threads[entry["id"]] = [r["id"] for r in sorted(replies, key=lambda r: r["seq"])]
        expected["conversations"].append({
            "id": conversation["id"],
            "type": conversation["type"],
            "name": conversation.get("name"),
            "description": conversation.get("description"),
            "createdBy": conversation["createdBy"],
            "createdAt": conversation["createdAt"],
            "lastSeq": conversation["lastSeq"],
            "participantCount": conversation["participantCount"],
            "participants": sorted(({"uid": p["uid"], "role": p["role"], "joinedAt": p["joinedAt"],
                                     "deliveredSeq": p["deliveredSeq"], "readSeq": p["readSeq"]}
                                    for p in participants), key=lambda p: p["uid"]),
            "messages": messages,
            "threads": threads,
            "events": [{"seq": e["seq"], "name": e["name"]} for e in sorted(events, key=lambda e: e["seq"])],
        })
    for uid in uids:
        unread = api.user(uid, "GET", "/v1/me/unread")
        expected["unread"][uid] = {
            "total": unread["total"],
            "conversations": {c["conversationId"]: {"unread": c["unread"], "readSeq": c["readSeq"],
                                                    "lastSeq": c["lastSeq"]} for c in unread["conversations"]},
        }
        mentions, _ = pages(lambda c, u=uid: api.user(
            u, "GET", "/v1/me/mentions?limit=200" + (f"&cursor={q(c)}" if c else "")), "messages")
        expected["unreadMentions"][uid] = [m["id"] for m in mentions]
    for attachment_id, (conversation_id, message_id) in sorted(file_messages.items()):
        link = api.server("GET", f"/v1/conversations/{q(conversation_id)}/attachments/{q(attachment_id)}")
        a = link["attachment"]
        if download:
            status, raw = http(api.base, "GET", link["url"], expect=(200,))
            if not isinstance(raw, bytes) or hashlib.sha256(raw).hexdigest() != a["sha256"]:
                raise Failure(f"the bytes of {attachment_id} do not match its sha256")
        expected["attachments"].append({
            "id": a["id"], "conversationId": a["conversationId"], "uploader": a["uploader"], "name": a["name"],
            "contentType": a["contentType"], "size": a["size"], "sha256": a["sha256"], "width": a.get("width"),
            "height": a.get("height"), "createdAt": a["createdAt"], "messageId": message_id,
        })
    expected["counts"] = counts(expected)
    return expected


def counts(expected):
    messages = [m for c in expected["conversations"] for m in c["messages"]]
    return {
        "conversations": len(expected["conversations"]),
        "messages": len(messages),
        "deletedMessages": sum(m["deleted"] for m in messages),
        "editedMessages": sum(m["editedAt"] is not None for m in messages),
        "replies": sum(m["replyTo"] is not None for m in messages),
        "messagesWithMentions": sum(bool(m["mentions"]) for m in messages),
        "reactions": sum(len(uids) for m in messages for uids in m["reactions"].values()),
        "attachments": len(expected["attachments"]),
        "participants": sum(len(c["participants"]) for c in expected["conversations"]),
        "unreadMentions": sum(len(v) for v in expected["unreadMentions"].values()),
    }


def check_against_sent(expected, made):
    """What the server read back must be what was sent (a mistake of this script or of the server stops the run)."""
    by_id = {m["id"]: m for c in expected["conversations"] for m in c["messages"]}
    if len(by_id) != len(made["sent"]):
        raise Failure(f"history holds {len(by_id)} messages, {len(made['sent'])} were sent")
    for label, s in made["sent"].items():
        m = by_id.get(s["id"])
        if m is None or m["seq"] != s["seq"] or m["sender"] != s["sender"]:
            raise Failure(f"message {label} ({s['id']}) is not in history as sent")
        if m["clientMessageId"] != s["clientMessageId"]:
            raise Failure(f"message {label}: clientMessageId {m['clientMessageId']!r}, sent {s['clientMessageId']!r}")
    group = expected["conversations"][0]
    by_uid = {p["uid"]: p for p in group["participants"]}
    if by_uid["bob"]["readSeq"] != made["sent"]["g16"]["seq"]:
        raise Failure(f"bob's read position in the group is {by_uid['bob']['readSeq']}, not g16")
    if not expected["unread"]["carol"]["total"] or not expected["unreadMentions"]["carol"]:
        raise Failure("carol has no unread messages or mentions")
    a = expected["attachments"]
    if len(a) != 1 or a[0]["sha256"] != made["png_sha256"] or a[0]["size"] != made["png_size"]:
        raise Failure(f"the attachment read back is not the one uploaded: {a}")


def comparable(expected):
    """expected.json without what a second reading may change (nothing, so far)."""
    return json.loads(json.dumps(expected))


def write_json(path, value):
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------------------------------
# SQLite


def sqlite_checkpoint(path):
    db = sqlite3.connect(path, timeout=10)
    try:
        busy, log_frames, checkpointed = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise Failure("wal_checkpoint(TRUNCATE) was blocked")
        if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            raise Failure("integrity_check failed")
    finally:
        db.close()
    for suffix in ("-wal", "-shm"):
        leftover = Path(str(path) + suffix)
        if leftover.exists():
            if suffix == "-wal" and leftover.stat().st_size != 0:
                raise Failure(f"{leftover} is not empty after the checkpoint")
            leftover.unlink()


def sqlite_check(path, expected):
    # immutable: a read that makes no -wal or -shm file beside it (the file has no WAL content once checkpointed).
    db = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        migrations = [r[0] for r in db.execute("SELECT identifier FROM grdb_migrations")]
        if not migrations or migrations[-1] != SQLITE_LAST_MIGRATION:
            raise Failure(f"grdb_migrations ends with {migrations[-1:]}, not {SQLITE_LAST_MIGRATION!r}")
        ids = {r[0] for r in db.execute("SELECT message_id FROM events WHERE name = 'conversationMessage.sent'")}
        want = {m["id"] for c in expected["conversations"] for m in c["messages"]}
        if ids != want:
            raise Failure(f"the events table's sent messages differ from expected.json: {sorted(ids ^ want)}")
        return migrations
    finally:
        db.close()


def make_sqlite(args, work):
    data_dir = work / "data"
    data_dir.mkdir()
    env = child_environment()
    app = create_app(args.server, data_dir, env)
    server = Server(args.server, data_dir, env, work / "server.log")
    try:
        api = API(server.start(), app)
        made = populate(api)
        expected = read_back(api, made)
        check_against_sent(expected, made)
        server.stop()
    finally:
        server.kill()
    database = data_dir / "parley.sqlite"
    sqlite_checkpoint(database)
    expected["database"] = "sqlite"
    migrations = sqlite_check(database, expected)
    expected["schema"] = {"grdbMigrations": migrations}

    # The release server, started on a copy of the file alone (no blobs), reads back the same.
    verify_dir = work / "verify"
    verify_dir.mkdir()
    shutil.copyfile(database, verify_dir / "parley.sqlite")
    server = Server(args.server, verify_dir, env, work / "verify.log")
    try:
        api2 = API(server.start(), app)
        api2.tokens = api.tokens
        again = read_back(api2, made, download=False)
        server.stop()
    finally:
        server.kill()
    again["database"], again["schema"] = expected["database"], expected["schema"]
    if comparable(again) != comparable(expected):
        raise Failure("the release server on the checkpointed file reads back something else")

    out = HERE / "sqlite"
    out.mkdir(exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(str(out / "parley.sqlite") + suffix).unlink(missing_ok=True)
    shutil.copyfile(database, out / "parley.sqlite")
    write_json(out / "expected.json", expected)
    sqlite_check(out / "parley.sqlite", expected)
    for suffix in ("-wal", "-shm"):
        if Path(str(out / "parley.sqlite") + suffix).exists():
            raise Failure(f"parley.sqlite{suffix} was left in {out}")
    log(f"wrote {out / 'parley.sqlite'} ({(out / 'parley.sqlite').stat().st_size} bytes) and expected.json")
    log(f"counts: {json.dumps(expected['counts'])}")


# --------------------------------------------------------------------------------------------------------------------
# PostgreSQL


def postgres_tool(name):
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p)])
    if candidates:
        return candidates[-1]
    found = shutil.which(name)
    if found:
        return found
    raise Failure(f"no {name} (looked in /usr/lib/postgresql/*/bin and PATH)")


def with_database(url, name):
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def psql(url, sql, env):
    return run([postgres_tool("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-d", url, "-c", sql], env=env)


def split_literal_line_breaks(statement):
    """pg_dump writes a string literal as it is, line breaks included (conversations.direct_key is "uid1\\nuid2").
    Rewrites every literal that holds a line break as an escape string (E'...\\n...'), which is the same value on one
    line; anything else that spans lines fails."""
    out, i, n = [], 0, len(statement)
    while i < n:
        c = statement[i]
        if c == "'":
            j, value = i + 1, []
            while True:
                if j >= n:
                    raise Failure(f"unterminated literal in: {statement[:200]}")
                if statement[j] == "'":
                    if j + 1 < n and statement[j + 1] == "'":
                        value.append("'")
                        j += 2
                        continue
                    break
                value.append(statement[j])
                j += 1
            text = "".join(value)
            if "\n" in text or "\r" in text:
                if i > 0 and (statement[i - 1].isalnum() or statement[i - 1] == "_"):
                    raise Failure(f"a prefixed literal holds a line break: {statement[:200]}")
                escaped = (text.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n").replace("\r", "\\r"))
                out.append(f"E'{escaped}'")
            else:
                out.append(statement[i:j + 1])
            i = j + 1
        elif c == '"':
            j = statement.index('"', i + 1)
            while j + 1 < n and statement[j + 1] == '"':
                j = statement.index('"', j + 2)
            out.append(statement[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    result = "".join(out)
    if "\n" in result or "\r" in result:
        raise Failure(f"a statement spans lines outside string literals: {statement[:300]}")
    return result


def dump_statements(url, env):
    """The data of the database as (INSERT and setval lines, schema version), one statement a line."""
    dump = run([postgres_tool("pg_dump"), "--data-only", "--inserts", "--column-inserts", "--encoding=UTF8",
                "--no-password", "-d", url], env=env)
    lines = dump.split("\n")
    statements, versions, rewritten, i = [], [], 0, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("INSERT INTO "):
            statement = line
            while not statement_complete(statement):
                i += 1
                if i >= len(lines):
                    raise Failure(f"the dump ends inside an INSERT: {statement[:300]}")
                statement += "\n" + lines[i]
            if "\n" in statement or "\r" in statement:
                statement = split_literal_line_breaks(statement)
                rewritten += 1
            match = re.match(r"INSERT INTO (?:public\.)?schema_migrations \(version, [^)]*\) VALUES \((\d+), ", statement)
            if match:
                versions.append(int(match.group(1)))
            elif statement.startswith("INSERT INTO public.schema_migrations") or \
                    statement.startswith("INSERT INTO schema_migrations"):
                raise Failure(f"an unexpected schema_migrations row: {statement}")
            else:
                statements.append(statement)
        elif line.startswith("SELECT pg_catalog.setval("):
            if not line.endswith(");"):
                raise Failure(f"a setval that spans lines: {line}")
            statements.append(line)
        elif line.startswith(("COPY ", "\\.")):
            raise Failure(f"the dump has COPY data, not INSERTs: {line}")
        i += 1
    if not versions:
        raise Failure("no schema_migrations rows in the dump")
    for s in statements:
        if "\n" in s or "\r" in s or not s.endswith(";"):
            raise Failure(f"not one statement on one line: {s[:300]}")
    return statements, max(versions), rewritten


def statement_complete(text):
    """Whether the text is a whole statement: ends with ';' outside any quote."""
    in_single = in_double = False
    i = 0
    while i < len(text):
        c = text[i]
        if in_single:
            if c == "'":
                if i + 1 < len(text) and text[i + 1] == "'":
                    i += 1
                else:
                    in_single = False
        elif in_double:
            if c == '"':
                in_double = False
        elif c == "'":
            in_single = True
        elif c == '"':
            in_double = True
        i += 1
    return not in_single and not in_double and text.rstrip().endswith(";")


def make_postgres(args, work, url):
    pg_env = child_environment({"PGCONNECT_TIMEOUT": "10"})
    suffix = f"{os.getpid()}_{int(time.time())}"
    names = {"main": f"parley_fixture_v13_{suffix}", "verify": f"parley_fixture_v13_{suffix}_verify"}
    created = []
    try:
        for key in ("main", "verify"):
            psql(url, f'CREATE DATABASE "{names[key]}"', pg_env)
            created.append(names[key])
        main_url, verify_url = with_database(url, names["main"]), with_database(url, names["verify"])
        log(f"made the databases {names['main']} and {names['verify']}")
        data_dir = work / "data"
        data_dir.mkdir()
        env = child_environment({"PARLEY_DATABASE_URL": main_url})
        app = create_app(args.server, data_dir, env)
        server = Server(args.server, data_dir, env, work / "server.log")
        try:
            api = API(server.start(), app)
            made = populate(api)
            expected = read_back(api, made)
            check_against_sent(expected, made)
            server.stop()
        finally:
            server.kill()
        statements, version, rewritten = dump_statements(main_url, pg_env)
        log(f"{len(statements)} statements, schema version {version}; {rewritten} multi-line INSERT(s) put on one "
            "line by writing their line breaks as E'' escapes")
        expected["database"] = "postgres"
        expected["schema"] = {"schemaMigrationsVersion": version}
        sent_in_db = psql(main_url, "SELECT count(*) FROM events WHERE name = 'conversationMessage.sent'", pg_env)
        if int(sent_in_db.strip()) != expected["counts"]["messages"]:
            raise Failure(f"the events table has {sent_in_db.strip()} sent messages")

        # Load the statements, one line at a time as a test would, into a database the release binary migrated
        # (`apps list` migrates and adds no app), with no trigger disabled; it must dump back the same lines.
        verify_env = child_environment({"PARLEY_DATABASE_URL": verify_url})
        run([args.server, "apps", "list", "--data-dir", str(work / "verify-data")], env=verify_env)
        if psql(verify_url, "SELECT count(*) FROM apps", pg_env).strip() != "0":
            raise Failure("`apps list` made an app")
        psql(verify_url, "DELETE FROM deployment", pg_env)  # migration 14 made one; the dump has the original
        data_sql = "\n".join(statements) + "\n"
        (work / "data.sql").write_text(data_sql, encoding="utf-8")
        run([postgres_tool("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", verify_url, "-f",
             str(work / "data.sql")], env=pg_env)
        reloaded, reloaded_version, _ = dump_statements(verify_url, pg_env)
        if reloaded != statements or reloaded_version != version:
            diff = [s for s in statements if s not in reloaded] + [s for s in reloaded if s not in statements]
            raise Failure("data.sql loaded and dumped again differs:\n" + "\n".join(diff[:10]))
        outbox = psql(verify_url, "SELECT count(*) FROM webhook_outbox", pg_env).strip()
        if outbox != "0":
            raise Failure(f"loading made {outbox} webhook_outbox rows")
        server = Server(args.server, data_dir, verify_env, work / "verify.log")
        try:
            api2 = API(server.start(), app)
            api2.tokens = api.tokens
            again = read_back(api2, made, download=False)
            server.stop()
        finally:
            server.kill()
        again["database"], again["schema"] = expected["database"], expected["schema"]
        if comparable(again) != comparable(expected):
            raise Failure("the release server on the reloaded data reads back something else")
        log("data.sql loads line by line into a migrated database and reads back the same")

        out = HERE / "postgres"
        out.mkdir(exist_ok=True)
        (out / "data.sql").write_text(data_sql, encoding="utf-8")
        (out / "schema-version.txt").write_text(f"{version}\n", encoding="utf-8")
        write_json(out / "expected.json", expected)
        log(f"wrote {out / 'data.sql'} ({(out / 'data.sql').stat().st_size} bytes), schema-version.txt, expected.json")
        log(f"counts: {json.dumps(expected['counts'])}")
    finally:
        for name in created:
            try:
                psql(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', pg_env)
            except Failure as error:
                log(f"could not drop {name}: {error}")


# --------------------------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="the release binary (parley-server of 3b38d04)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--postgres-url", help="make postgres/ in a new database of this PostgreSQL server")
    group.add_argument("--postgres-url-from-env", action="store_true",
                       help="the same with PARLEY_TEST_DATABASE_URL (scripts/with-postgres)")
    parser.add_argument("--deadline", type=int, default=600, help="seconds the whole run may take (default 600)")
    parser.add_argument("--keep-work", action="store_true", help="keep the temporary folder (logs, data)")
    args = parser.parse_args()
    args.server = str(Path(args.server).resolve())
    if not os.access(args.server, os.X_OK):
        parser.error(f"{args.server} is not an executable")
    url = args.postgres_url
    if args.postgres_url_from_env:
        url = os.environ.get("PARLEY_TEST_DATABASE_URL")
        if not url:
            parser.error("PARLEY_TEST_DATABASE_URL is not set (run under scripts/with-postgres)")

    def stop(signum, _frame):
        raise Failure(f"stopped by signal {signum}" if signum != signal.SIGALRM else
                      f"the run took longer than {args.deadline} s")

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(signum, stop)
    signal.alarm(args.deadline)
    work = Path(tempfile.mkdtemp(prefix="parley-release-v13."))
    try:
        if url:
            make_postgres(args, work, url)
        else:
            make_sqlite(args, work)
    except Failure as error:
        log(f"FAILED: {error}")
        log(f"work folder: {work}" if args.keep_work else "run with --keep-work to keep the logs")
        return 1
    finally:
        signal.alarm(0)
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
