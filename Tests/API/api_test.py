"""Property-based tests of the REST API from its OpenAPI document (schemathesis), against a running server.

scripts/api-test starts the server and runs this with PARLEY_BASE_URL, PARLEY_APP_ID, PARLEY_AUTH_KEY,
PARLEY_API_KEY, PARLEY_SERVER_BIN, PARLEY_DATA_DIR and PARLEY_WORK_DIR. It

1. plants data the runs must never see: a second app with its users, a group, messages and a file; and, in the first
   app, a direct conversation and a group between other users (alice, the user the runs act as, is in neither). Each
   holds random marker words (texts, names, descriptions, metadata) that no generator produces;
2. gives the runs real identifiers to draw from (schemathesis dictionaries, half of the draws): the first app's own
   conversations, messages, users, files, webhooks, reports, devices and tokens, and the planted ones of the private
   conversations and of the other app, which every operation must refuse;
3. runs `st run` twice, as alice (her auth token) and as the app's server (its REST API key), every operation with
   PARLEY_API_TEST_EXAMPLES examples (default 10) from a fixed seed, checking that no answer is a 5xx (but the
   documented 501 for methods the API does not have), every status, header, content type and body conforms to the
   document, and no answer carries a marker (Tests/API/checks.py);
4. checks afterwards, with each app's own key, that the planted data is all still there as it was.

Left out of the runs, each tested in the Swift suites: `POST /v1/app/keys` (it rotates the key the API-key run uses)
and `DELETE /v1/me/session` (it revokes the token the user run uses).

Exit status 0 when both runs and the final checks pass.
"""

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ["PARLEY_BASE_URL"]
APP = os.environ["PARLEY_APP_ID"]
AUTH_KEY = os.environ["PARLEY_AUTH_KEY"]
API_KEY = os.environ["PARLEY_API_KEY"]
SERVER_BIN = os.environ["PARLEY_SERVER_BIN"]
DATA_DIR = os.environ["PARLEY_DATA_DIR"]
WORK = os.environ["PARLEY_WORK_DIR"]
EXAMPLES = int(os.environ.get("PARLEY_API_TEST_EXAMPLES", "10"))
SEED = os.environ.get("PARLEY_API_TEST_SEED", "47")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCUMENT = os.path.join(ROOT, "Sources", "ParleyAPI", "openapi.yaml")


def fail(message):
    print(f"api-test: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def request(method, path, body=None, token=None, api_key=None, raw=None, content_type="application/json"):
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if raw is not None:
        data = raw
        headers["Content-Type"] = content_type
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if api_key:
        headers["X-Parley-Api-Key"] = api_key
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            text = response.read()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        text = error.read()
        return error.code, (json.loads(text) if text else None)


def expect(status, answer, wanted, what):
    if status not in wanted:
        fail(f"{what}: {status} {answer}")
    return answer


def login(app, auth_key, uid, name):
    status, answer = request("POST", "/v1/login", {"appId": app, "uid": uid, "authKey": auth_key, "name": name})
    return expect(status, answer, {200, 201}, f"login {uid}")["authToken"]


def marker(kind):
    """A word no generator produces, and no other data holds."""
    return f"zq{kind}{secrets.token_hex(8)}"


def conversation(token, body):
    status, answer = request("POST", "/v1/conversations", body, token=token)
    return expect(status, answer, {200, 201}, f"create conversation {body}")["id"]


def send(token, conversation_id, text, metadata=None):
    body = {"parts": [{"type": "text", "text": text}]}
    if metadata is not None:
        body["metadata"] = metadata
    status, answer = request("POST", f"/v1/conversations/{conversation_id}/messages", body, token=token)
    return expect(status, answer, {201}, f"send to {conversation_id}")["id"]


def upload(token, conversation_id, name, content):
    status, answer = request(
        "POST", f"/v1/conversations/{conversation_id}/attachments?name={name}", token=token, raw=content,
        content_type="text/plain"
    )
    return expect(status, answer, {201}, f"upload to {conversation_id}")["id"]


def create_other_app():
    """A second app in the same data directory, made by `parley-server apps create` while the server runs."""
    output = subprocess.run(
        [SERVER_BIN, "apps", "create", "--data-dir", DATA_DIR, "api-test-other"], capture_output=True, text=True,
        timeout=60
    )
    if output.returncode != 0:
        fail(f"apps create: {output.stderr}")
    keys = {}
    for line in output.stdout.splitlines():
        for label, key in (("App ID:", "app"), ("Auth Key:", "auth"), ("REST API Key:", "api")):
            if line.strip().startswith(label):
                keys[key] = line.split(":", 1)[1].split()[0]
    if len(keys) != 3:
        fail(f"apps create printed no keys: {output.stdout}")
    return keys


def plant():
    """The data the runs act on, and the data they must never see (with its markers)."""
    forbidden = []
    ids = {key: [] for key in ("conversationId", "messageId", "uid", "appId", "attachmentId", "webhookId", "reportId",
                                "deviceId", "tokenId", "key")}

    # The first app: alice's own world.
    alice = login(APP, AUTH_KEY, "alice", "Alice")
    bob = login(APP, AUTH_KEY, "bob", "Bob")
    carol = login(APP, AUTH_KEY, "carol", "Carol")
    dave = login(APP, AUTH_KEY, "dave", "Dave")
    group = conversation(alice, {"type": "group", "participants": ["bob", "carol"], "name": "Alice's group"})
    direct = conversation(alice, {"type": "direct", "participants": ["bob"]})
    own = [send(alice, group, "hello group"), send(bob, group, "hi alice"), send(alice, direct, "hello bob")]
    file_id = upload(alice, group, "notes.txt", b"alice's notes")
    status, answer = request("PUT", "/v1/me/devices/api-test-device", {"platform": "apns", "token": "ab" * 32, "environment": "sandbox"},
                             token=alice)
    expect(status, answer, {200, 201, 204}, "register a device")
    status, answer = request("POST", "/v1/reports", {"uid": "dave", "reason": "spam"}, token=alice)
    report = expect(status, answer, {200, 201}, "report")
    status, answer = request("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/hook", "events": ["conversationMessage.sent"]},
                             api_key=API_KEY)
    webhook = expect(status, answer, {200, 201}, "webhook")
    status, answer = request("POST", "/v1/users/dave/auth-tokens", {}, api_key=API_KEY)
    token_answer = expect(status, answer, {200, 201}, "auth token")
    ids["conversationId"] += [group, direct]
    ids["messageId"] += own
    ids["uid"] += ["alice", "bob", "carol", "dave"]
    ids["appId"] += [APP]
    ids["attachmentId"] += [file_id]
    ids["webhookId"] += [webhook["endpoint"]["id"]]
    ids["reportId"] += [report["id"]]
    ids["deviceId"] += ["api-test-device"]
    ids["tokenId"] += [token_answer["token"]["id"]]
    ids["key"] += ["👍", "+1"]

    # The first app, without alice: a direct conversation and a group between others.
    private_words = [marker("private") for _ in range(4)]
    private_direct = conversation(bob, {"type": "direct", "participants": ["carol"]})
    private_group = conversation(
        carol, {"type": "group", "participants": ["dave"], "name": private_words[0], "description": private_words[1]}
    )
    private_messages = [
        send(bob, private_direct, f"secret {private_words[2]}"),
        send(dave, private_group, f"secret {private_words[3]}", metadata={"note": private_words[3]}),
    ]
    ids["conversationId"] += [private_direct, private_group]
    ids["messageId"] += private_messages

    # The other app: everything in it is out of reach.
    other = create_other_app()
    other_words = [marker("otherapp") for _ in range(5)]
    erin = login(other["app"], other["auth"], "erin", other_words[0])
    login(other["app"], other["auth"], "alice", other_words[1])
    other_group = conversation(erin, {"type": "group", "participants": ["alice"], "name": other_words[2]})
    other_messages = [send(erin, other_group, f"other {other_words[3]}", metadata={"note": other_words[4]})]
    other_file = upload(erin, other_group, "other.txt", other_words[3].encode())
    ids["conversationId"] += [other_group]
    ids["messageId"] += other_messages
    ids["uid"] += ["erin"]
    ids["appId"] += [other["app"]]
    ids["attachmentId"] += [other_file]

    planted = {
        "alice": alice,
        "private": {"direct": private_direct, "group": private_group, "messages": private_messages},
        "other": {"keys": other, "group": other_group, "messages": other_messages, "file": other_file},
    }
    return alice, ids, private_words, other_words, planted


def write_config(ids, excluded):
    """schemathesis.toml: the identifiers to draw from, half of the draws."""
    lines = [f"seed = {SEED}", "", "[dictionaries]"]
    for name, values in ids.items():
        values = [value for value in values if value]
        if values:
            lines.append(f"{name} = {{ values = {json.dumps(values, ensure_ascii=False)} }}")
    lines += ["", "[parameters]"]
    for name, values in ids.items():
        if any(values):
            lines.append(f'"path.{name}" = {{ dictionary = "{name}", probability = 0.5 }}')
    path = os.path.join(WORK, f"schemathesis-{excluded}.toml")
    with open(path, "w") as file:
        file.write("\n".join(lines) + "\n")
    return path


def run(name, header, excluded_operation, forbidden, ids):
    config = write_config(ids, name)
    environment = dict(os.environ)
    environment["SCHEMATHESIS_HOOKS"] = "checks"
    environment["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__)) + os.pathsep + environment.get(
        "PYTHONPATH", "")
    environment["PARLEY_API_TEST_FORBIDDEN"] = "\n".join(forbidden)
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", config, "run", DOCUMENT, "--url", BASE, "-H", header,
        "--max-examples", str(EXAMPLES), "--workers", "1", "--no-color",
        "--checks", "parley_no_server_error,parley_nothing_crosses,status_code_conformance,content_type_conformance,"
        "response_headers_conformance,response_schema_conformance",
        "--exclude-operation-id", excluded_operation,
        "--request-timeout", "30", "--suppress-health-check", "all",
    ]
    started = time.monotonic()
    print(f"api-test: {name}: st run, {EXAMPLES} examples per operation, seed {SEED}", file=sys.stderr, flush=True)
    result = subprocess.run(command, env=environment, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    log = os.path.join(WORK, f"st-{name}.txt")
    with open(log, "w") as file:
        file.write(result.stdout + result.stderr)
    summary = [line for line in result.stdout.splitlines() if line.strip()][-12:]
    print("\n".join(f"    {line}" for line in summary), file=sys.stderr)
    print(f"api-test: {name}: exit {result.returncode} in {elapsed:.0f} s (full output: {log})", file=sys.stderr)
    if result.returncode != 0:
        print(result.stdout[-20000:], file=sys.stderr)
        fail(f"the {name} run found failures")


def verify_other_app(planted):
    """The other app's data is all there, as planted: no run reached into it."""
    other = planted["other"]
    erin = login(other["keys"]["app"], other["keys"]["auth"], "erin", None)
    status, answer = request("GET", f"/v1/conversations/{other['group']}/messages", token=erin)
    page = expect(status, answer, {200}, "the other app's messages")
    found = {message["id"]: message for message in page["messages"]}
    for message_id in other["messages"]:
        if message_id not in found or found[message_id].get("deletedAt") or found[message_id].get("editedAt"):
            fail(f"the other app's message {message_id} changed: {page}")
    status, answer = request("GET", f"/v1/conversations/{other['group']}/attachments/{other['file']}", token=erin)
    expect(status, answer, {200}, "the other app's file")


def verify_private(planted):
    """The private conversations alice is not in are as planted: the user run changed none of them."""
    private = planted["private"]
    found = {}
    for conversation_id in (private["direct"], private["group"]):
        status, answer = request("GET", f"/v1/conversations/{conversation_id}/messages", api_key=API_KEY)
        page = expect(status, answer, {200}, "a private conversation's messages")
        found.update({message["id"]: message for message in page["messages"]})
        status, answer = request("GET", f"/v1/conversations/{conversation_id}", api_key=API_KEY)
        conversation = expect(status, answer, {200}, "a private conversation")
        uids = {participant["uid"] for participant in conversation.get("participants", [])}
        if "alice" in uids:
            fail(f"alice got into a private conversation: {conversation}")
    for message_id in private["messages"]:
        if message_id not in found or found[message_id].get("deletedAt") or found[message_id].get("editedAt"):
            fail(f"the private message {message_id} changed: {found.get(message_id)}")


def main():
    alice, ids, private_words, other_words, planted = plant()
    print(f"api-test: planted {sum(len(v) for v in ids.values())} identifiers, "
          f"{len(private_words) + len(other_words)} markers", file=sys.stderr)
    run("user", f"Authorization: Bearer {alice}", "logout", private_words + other_words, ids)
    verify_private(planted)
    verify_other_app(planted)
    # The app's server may change anything of its own app (delete users, their messages): only the other app is out
    # of its reach.
    run("api-key", f"X-Parley-Api-Key: {API_KEY}", "rotateAppKeys", other_words, ids)
    verify_other_app(planted)
    print("api-test: both runs passed; the planted data is intact", file=sys.stderr)


if __name__ == "__main__":
    main()
