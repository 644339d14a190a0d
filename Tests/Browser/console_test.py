#!/usr/bin/env python3
"""The web console and the chat page in a real browser, against a real server (docs/CONSOLE.md).

Run by scripts/browser-test, which starts `parley-server` on a free port with a temporary data directory and passes:

    PARLEY_BASE_URL        http://127.0.0.1:PORT
    PARLEY_APP_ID          the default app's App ID
    PARLEY_AUTH_KEY        its Auth Key
    PARLEY_API_KEY         its REST API key
    PARLEY_CLI_BIN         the `parley` terminal client (bob's side of every chat)
    PARLEY_WORK_DIR        a temporary folder (the CLI's HOME, so its profiles stay there)
    PARLEY_SCREENSHOT_DIR  where the screenshots of every page go

Headless Chromium (`/usr/bin/chromium`, `/usr/bin/chromedriver`) through Selenium 4. Every wait has a timeout
(WebDriverWait, polled); nothing sleeps to synchronise. The whole run is bounded by an alarm. Any failure prints what
was expected, saves a screenshot and the browser's console log, and exits 1.
"""

import json
import os
import signal
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["PARLEY_BASE_URL"].rstrip("/")
APP_ID = os.environ["PARLEY_APP_ID"]
AUTH_KEY = os.environ["PARLEY_AUTH_KEY"]
API_KEY = os.environ["PARLEY_API_KEY"]
CLI = os.environ["PARLEY_CLI_BIN"]
WORK = os.environ["PARLEY_WORK_DIR"]
SHOTS = os.environ.get("PARLEY_SCREENSHOT_DIR", os.path.join(WORK, "screenshots"))
CHROMIUM = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("PARLEY_CHROMEDRIVER", "/usr/bin/chromedriver")
TOTAL_SECONDS = int(os.environ.get("PARLEY_BROWSER_TEST_TIMEOUT", "150"))
WAIT = 15  # seconds, the default for one condition

CHAT = f"{BASE}/console/chat.html"
CONSOLE = f"{BASE}/console/"
XSS = "<img src=x onerror=alert(1)>"


class CheckFailed(Exception):
    pass


class Run:
    """Counts the checks; the failure message names what was expected."""

    def __init__(self):
        self.checks = 0
        self.scenario = "setup"

    def check(self, condition, message):
        self.checks += 1
        if not condition:
            raise CheckFailed(message)


run = Run()
driver = None
bob_chat = None


def log(text):
    print(text, flush=True)


# MARK: Helpers: REST, CLI, waits


def rest(method, path, api_key=None, token=None, body=None):
    """Calls the API from Python (urllib). Returns (status, decoded JSON or None)."""
    headers = {"Accept": "application/json"}
    if api_key:
        headers["X-Parley-Api-Key"] = api_key
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        return error.code, (json.loads(text) if text else None)


def cli_env():
    return {
        **os.environ,
        "HOME": os.path.join(WORK, "cli-home"),
        "PARLEY_SERVER": BASE,
        "PARLEY_APP_ID": APP_ID,
        "PARLEY_AUTH_KEY": AUTH_KEY,
    }


def cli(*args, profile, timeout=30):
    """Runs `parley ARGS --profile PROFILE`; fails the run on a non-zero exit."""
    command = [CLI, *args, "--profile", profile]
    result = subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise CheckFailed(
            f"`parley {' '.join(args)} --profile {profile}` exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def wait_until(condition, what, timeout=WAIT):
    """Polls `condition` (no argument) until it returns something truthy; fails with `what` after `timeout`."""
    run.checks += 1
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(WebDriverException,)).until(
            lambda _: condition()
        )
    except TimeoutException:
        raise CheckFailed(f"timed out after {timeout} s waiting for: {what}") from None


def el(css):
    return driver.find_element(By.CSS_SELECTOR, css)


def els(css):
    return driver.find_elements(By.CSS_SELECTOR, css)


def visible(css):
    found = els(css)
    return found[0] if found and found[0].is_displayed() else None


def js(script, *args):
    return driver.execute_script(script, *args)


def screenshot(name):
    """Saves the page (the window grown to the page's height, so long pages are whole)."""
    os.makedirs(SHOTS, exist_ok=True)
    height, inner, outer = js(
        "return [Math.max(document.documentElement.scrollHeight, document.body.scrollHeight), innerHeight, outerHeight]"
    )
    resized = height > inner
    if resized:
        driver.set_window_size(1400, min(height + (outer - inner), 4000))
    path = os.path.join(SHOTS, f"{name}.png")
    driver.save_screenshot(path)
    if resized:
        driver.set_window_size(1400, 900)
    log(f"    screenshot {path}")


def no_alert():
    try:
        text = driver.switch_to.alert.text
    except NoAlertPresentException:
        return True
    raise CheckFailed(f"an alert() ran in the page: {text!r} (script injection)")


# MARK: Helpers: the chat page


def chat_login(uid):
    driver.get(CHAT)
    wait_until(lambda: visible("#login-uid"), "the chat sign-in form")
    el("#login-app-id").clear()
    el("#login-app-id").send_keys(APP_ID)
    el("#login-uid").send_keys(uid)
    el("#login-auth-key").send_keys(AUTH_KEY)
    el("#login-key-submit").click()
    wait_for_connected()


def wait_for_connected():
    wait_until(lambda: visible("#chat"), "the chat page after sign-in")
    wait_until(
        lambda: el("#connection").get_attribute("data-status") == "connected",
        "the chat page's WebSocket to be connected and caught up (#connection[data-status=connected])",
    )


def conversation_button(conversation_id):
    found = els(f'.conv[data-id="{conversation_id}"]')
    return found[0] if found else None


def shown_messages():
    """[(id, sender, text)] of the stored messages in the open conversation, in page order."""
    return js(
        """return Array.from(document.querySelectorAll('#message-list .msg[data-id]')).map(m =>
            [m.dataset.id, m.dataset.sender, m.querySelector('.msg-text').textContent]);"""
    )


def texts_of(sender):
    return [text for (_, who, text) in shown_messages() if who == sender]


def wait_for_text(sender, text, what=None):
    return wait_until(
        lambda: text in texts_of(sender), what or f"{sender}'s message {text!r} in the open conversation"
    )


def seq_shown(text):
    """The sequence number of the shown message with this text."""
    return int(
        js(
            """return Array.from(document.querySelectorAll('#message-list .msg[data-id]'))
                .find(m => m.querySelector('.msg-text').textContent === arguments[0]).dataset.seq;""",
            text,
        )
    )


def alice_token():
    return json.loads(js("return localStorage.getItem('parley.chat.session')"))["token"]


def history(conversation_id, token):
    status, page = rest("GET", f"/v1/conversations/{conversation_id}/messages?limit=200", token=token)
    run.check(status == 200, f"GET messages answered {status}: {page}")
    return page["messages"]


def bob_chat_output():
    with open(os.path.join(WORK, "bob-chat.out"), encoding="utf-8", errors="replace") as handle:
        return handle.read()


def bob_chat_says(line):
    bob_chat.stdin.write(line + "\n")
    bob_chat.stdin.flush()


# MARK: Scenarios


def scenario_live_message():
    """Bob (CLI) writes to alice: the conversation appears with its unread count; opened, the next message arrives live."""
    cli("login", "bob", profile="bob")
    cli("login", "bob", profile="bobchat")
    chat_login("alice")
    screenshot("chat-01-signed-in")
    js("window.__noReload = 'still here'")

    cli("send", "alice", "Hello Alice, this is Bob", profile="bob")
    conversations = rest("GET", "/v1/conversations?limit=50", api_key=API_KEY)[1]["conversations"]
    direct = [c for c in conversations if c["type"] == "direct"]
    run.check(len(direct) == 1, f"expected one direct conversation, the API lists {conversations}")
    state["conversation"] = cid = direct[0]["id"]
    wait_until(lambda: conversation_button(cid), "bob's conversation in alice's list, live")
    wait_until(
        lambda: conversation_button(cid).get_attribute("data-unread") == "1",
        "an unread count of 1 on bob's conversation",
    )
    wait_until(
        lambda: "Hello Alice, this is Bob" in conversation_button(cid).find_element(By.CSS_SELECTOR, ".conv-preview").text,
        "the message as the conversation's preview",
    )
    screenshot("chat-02-unread")

    conversation_button(cid).click()
    wait_for_text("bob", "Hello Alice, this is Bob")
    wait_until(
        lambda: conversation_button(cid).get_attribute("data-unread") == "0",
        "the unread count back to 0 once alice reads the conversation",
    )
    cli("send", "alice", "A second one, live", profile="bob")
    wait_for_text("bob", "A second one, live", "bob's second message, live in the open conversation")
    run.check(js("return window.__noReload") == "still here", "the page reloaded: messages must arrive live")
    run.check(
        js("return location.hash") == f"#c={cid}", f"the open conversation is in the URL: {js('return location.hash')}"
    )


def scenario_send_from_page():
    """Alice sends from the page; bob's `parley history` shows it once."""
    cid = state["conversation"]
    box = el("#composer-input")
    box.send_keys("Hi Bob, from the browser")
    box.send_keys(Keys.ENTER)
    wait_for_text("alice", "Hi Bob, from the browser", "alice's message stored (acknowledged) and shown")
    wait_until(lambda: not els("#message-list .msg.pending"), "no message left pending")
    output = cli("history", "alice", profile="bob")
    run.check(
        output.count("alice: Hi Bob, from the browser") == 1,
        f"bob's `parley history alice` shows alice's message once:\n{output}",
    )
    messages = history(cid, alice_token())
    mine = [m for m in messages if m["sender"] == "alice"]
    run.check(len(mine) == 1 and mine[0].get("clientMessageId"), f"one message from alice, with a clientMessageId: {mine}")
    state["alice_message"] = mine[0]

    # Its receipt, as bob's devices report them: nothing yet ("Sent"), then delivered (a receipt over REST).
    seq = mine[0]["seq"]

    def status_of(seq):
        return js("const m = document.querySelector(`#message-list .msg[data-seq='${arguments[0]}']`); return m && m.dataset.status;", seq)

    run.check(status_of(seq) == "sent" and el("#last-receipt").text == "Sent", f"alice's message only sent: {status_of(seq)}")
    status, issued = rest("POST", "/v1/users/bob/auth-tokens", api_key=API_KEY, body={})
    run.check(status in (200, 201), f"issuing bob a token: {status} {issued}")
    state["bob_token"] = issued["authToken"]
    status, _ = rest("POST", f"/v1/conversations/{cid}/receipts", token=state["bob_token"], body={"deliveredSeq": seq})
    run.check(status == 200, f"bob's delivered receipt: {status}")
    wait_until(lambda: status_of(seq) == "delivered", "alice's message marked delivered to bob (data-status=delivered)")
    wait_until(lambda: el("#last-receipt").text == "Delivered", "'Delivered' under alice's last message")


def scenario_xss():
    """A message with HTML from bob is shown as text: no element is made from it, no script runs."""
    cid = state["conversation"]
    images_before = js("return document.images.length")
    cli("send", "alice", XSS, profile="bob")
    wait_for_text("bob", XSS, "bob's HTML message, shown as literal text")
    no_alert()
    run.check(js("return document.querySelectorAll('#message-list img').length") == 0, "an <img> was created in the messages")
    run.check(js("return document.images.length") == images_before, "an <img> was created somewhere in the page")
    preview = conversation_button(cid).find_element(By.CSS_SELECTOR, ".conv-preview").text
    run.check(XSS in preview, f"the preview shows the HTML as text: {preview!r}")
    screenshot("chat-03-xss-as-text")


def scenario_files():
    """Bob sends a photo: alice's page shows it as a file with its name, size and pixels; clicked, it opens."""
    cid = state["conversation"]
    png = bytes([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]) + b"IHDR"
    png += (640).to_bytes(4, "big") + (480).to_bytes(4, "big") + bytes([8, 6, 0, 0, 0]) + bytes(2000)
    name = "<img src=x onerror=alert(2)> cat.png"
    request = urllib.request.Request(
        f"{BASE}/v1/conversations/{cid}/attachments?name={urllib.parse.quote(name)}",
        data=png,
        method="POST",
        headers={"Authorization": f"Bearer {state['bob_token']}", "Content-Type": "image/png"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        run.check(response.status == 201, f"bob's upload: {response.status}")
        attachment = json.loads(response.read().decode())
    status, sent = rest(
        "POST",
        f"/v1/conversations/{cid}/messages",
        token=state["bob_token"],
        body={"parts": [{"type": "text", "text": "our cat"}, {"type": "file", "file": {"id": attachment["id"]}}]},
    )
    run.check(status == 201, f"bob's message with the file: {status} {sent}")
    wait_for_text("bob", "our cat", "bob's caption, live")
    chip_css = f'#message-list .file-chip[data-file="{attachment["id"]}"]'
    wait_until(lambda: els(chip_css), "the photo as a file button under bob's caption")
    label = el(chip_css).text
    run.check(
        name in label and "2.0 KB" in label and "640×480" in label, f"the file's name as text, size and pixels: {label!r}"
    )
    no_alert()
    run.check(
        js("return document.querySelectorAll('#message-list img').length") == 0, "an <img> was made from the file name"
    )
    screenshot("chat-04-file")
    before = driver.current_window_handle
    handles = set(driver.window_handles)
    el(chip_css).click()
    wait_until(lambda: len(driver.window_handles) == len(handles) + 1, "a new tab for the file")
    tab = (set(driver.window_handles) - handles).pop()
    driver.switch_to.window(tab)
    wait_until(lambda: "/v1/files/" in driver.current_url, f"the tab at the file's signed link: {driver.current_url}")
    run.check("signature=" in driver.current_url, f"the link is signed: {driver.current_url}")
    driver.close()
    driver.switch_to.window(before)


def scenario_typing_receipts_presence():
    """Bob chats from the terminal: presence, typing both ways, receipts both ways."""
    global bob_chat
    cid = state["conversation"]
    output_path = os.path.join(WORK, "bob-chat.out")
    bob_chat = subprocess.Popen(
        [CLI, "chat", "alice", "--profile", "bobchat"],
        env=cli_env(),
        stdin=subprocess.PIPE,
        stdout=open(output_path, "w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_until(lambda: "* connection: connected" in bob_chat_output(), "bob's `parley chat` to connect")

    # Presence: bob is online.
    wait_until(lambda: el("#head-sub").get_attribute("data-presence") == "online", "bob shown online in alice's header")
    wait_until(
        lambda: "online" in (conversation_button(cid).find_element(By.CSS_SELECTOR, ".presence-dot").get_attribute("class")),
        "bob's presence dot green in alice's list",
    )

    # Receipt, bob → alice: alice writes; bob's terminal shows it and marks it read; alice sees "Read".
    box = el("#composer-input")
    box.send_keys("Are you there, Bob?")
    box.send_keys(Keys.ENTER)
    wait_for_text("alice", "Are you there, Bob?")
    wait_until(lambda: "alice: Are you there, Bob?" in bob_chat_output(), "bob's terminal to show alice's message")
    seq = seq_shown("Are you there, Bob?")
    wait_until(
        lambda: js(
            "const m = document.querySelector(`#message-list .msg[data-seq='${arguments[0]}']`); return m && m.dataset.status;",
            seq,
        ) == "read",
        f"alice's message #{seq} marked read by bob (data-status=read)",
    )
    wait_until(
        lambda: visible("#last-receipt") and el("#last-receipt").text == "Read", "the 'Read' receipt under alice's last message"
    )

    # Typing, bob → alice.
    bob_chat_says("/typing")
    wait_until(lambda: "bob" in (el("#typing").get_attribute("data-uids") or "").split(","), "bob's typing indicator on alice's page")
    run.check("bob is typing" in el("#typing").text, f"typing text: {el('#typing').text!r}")
    run.check(
        "typing" in conversation_button(cid).find_element(By.CSS_SELECTOR, ".conv-preview").text,
        "the conversation's preview says typing",
    )
    screenshot("chat-04-typing-and-read")
    bob_chat_says("/stoptyping")
    wait_until(lambda: (el("#typing").get_attribute("data-uids") or "") == "", "bob's typing indicator off")

    # Typing, alice → bob.
    box.send_keys("I am typ")
    wait_until(lambda: "* alice is typing…" in bob_chat_output(), "bob's terminal to show that alice is typing")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    wait_until(lambda: "* alice stopped typing" in bob_chat_output(), "bob's terminal to show that alice stopped typing")

    # Receipts, alice → bob. With no conversation open, bob's message is delivered, not read; opened, it is read.
    def receipt_in_bob_terminal(kind, seq):
        for line in bob_chat_output().splitlines():
            if f"{kind} alice up to #" in line and int(line.rsplit("#", 1)[1]) >= seq:
                return True
        return False

    js("location.hash = ''")
    wait_until(lambda: visible("#pane-empty"), "no conversation open")
    sent_before = bob_chat_output().count("(sent #")
    bob_chat_says("Delivered, not read yet")
    wait_until(lambda: bob_chat_output().count("(sent #") > sent_before, "bob's terminal to send")
    seq = int(bob_chat_output().rsplit("(sent #", 1)[1].split(")", 1)[0])
    wait_until(lambda: receipt_in_bob_terminal("delivered to", seq), f"bob's terminal to show #{seq} delivered to alice")
    wait_until(lambda: conversation_button(cid).get_attribute("data-unread") == "1", "1 unread on alice's side")
    run.check(not receipt_in_bob_terminal("read by", seq), f"#{seq} read by alice before she opened the conversation")
    conversation_button(cid).click()
    wait_for_text("bob", "Delivered, not read yet")
    wait_until(lambda: receipt_in_bob_terminal("read by", seq), f"bob's terminal to show alice read up to #{seq}")

    # And a message that arrives while the conversation is open and visible is read at once.
    bob_chat_says("Sent from bob's terminal")
    wait_for_text("bob", "Sent from bob's terminal")
    seq = seq_shown("Sent from bob's terminal")
    wait_until(lambda: receipt_in_bob_terminal("read by", seq), f"bob's terminal to show alice read up to #{seq}")


def scenario_reload():
    """Reload: nothing lost, nothing twice; a message sent while the page is closed arrives through the resume."""
    cid = state["conversation"]
    token = alice_token()
    before = shown_messages()
    ids = [m[0] for m in before]
    run.check(len(ids) == len(set(ids)), f"a message shown twice before the reload: {before}")
    stored = [m["id"] for m in history(cid, token)]
    run.check(ids == stored, f"the page shows {ids}, the history has {stored}")

    driver.refresh()
    wait_for_connected()
    wait_until(lambda: shown_messages() and [m[0] for m in shown_messages()] == stored, "the same messages after the reload")
    after = shown_messages()
    run.check(after == before, f"the reload changed what is shown:\nbefore {before}\nafter {after}")
    run.check(texts_of("bob").count(XSS) == 1, "the HTML message once, as text, after the reload")
    delivered = js("return window.parleyChat.client.deliveredIds")
    run.check(len(delivered) == len(set(delivered)), f"an event delivered twice after the reload: {delivered}")
    cursors = json.loads(js("return localStorage.getItem('parley.chat.cursors')"))
    run.check(cursors["established"] and cid in cursors["conversations"], f"positions saved for the resume: {cursors}")
    screenshot("chat-05-after-reload")

    # Closed page: bob writes; the page comes back and resumes from its saved positions.
    driver.get("about:blank")
    out = cli("send", "alice", "While you were away", profile="bob")
    seq = int(out.split("#", 1)[1].split(" ", 1)[0])
    driver.get(f"{CHAT}#c={cid}")
    wait_for_connected()
    wait_for_text("bob", "While you were away", "the message sent while the page was closed")
    run.check(texts_of("bob").count("While you were away") == 1, "the away message shown once")
    wait_until(
        lambda: f"{cid}:{seq}" in js("return window.parleyChat.client.deliveredIds"),
        f"the resume replay to deliver event {cid}:{seq} (sent while the page was closed)",
    )
    delivered = js("return window.parleyChat.client.deliveredIds")
    run.check(delivered.count(f"{cid}:{seq}") == 1, f"the away event delivered once: {delivered}")
    ids = [m[0] for m in shown_messages()]
    run.check(len(ids) == len(set(ids)), "a message shown twice after coming back")

    # A send repeated after a reload (its ack lost) is stored once: put alice's first message back in the outbox.
    message = state["alice_message"]
    js(
        """localStorage.setItem('parley.chat.outbox', JSON.stringify({uid: 'alice', items: [{clientMessageId: arguments[0],
            conversationId: arguments[1], text: arguments[2], createdAt: Date.now(), state: 'sending'}]}));""",
        message["clientMessageId"],
        cid,
        "Hi Bob, from the browser",
    )
    driver.refresh()
    wait_for_connected()
    wait_until(
        lambda: json.loads(js("return localStorage.getItem('parley.chat.outbox')"))["items"] == [],
        "the repeated send acknowledged (outbox empty)",
    )
    wait_until(lambda: "While you were away" in texts_of("bob"), "the conversation after the second reload")
    run.check(texts_of("alice").count("Hi Bob, from the browser") == 1, "alice's repeated message shown once")
    stored = [m for m in history(cid, alice_token()) if m["parts"] and m["parts"][0].get("text") == "Hi Bob, from the browser"]
    run.check(
        [m["id"] for m in stored] == [message["id"]], f"the repeated clientMessageId stored a second message: {stored}"
    )


def network(offline):
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )


def scenario_reconnect():
    """A dropped connection retries with backoff while the network is down, then resumes: what bob sent meanwhile
    arrives once, and what alice wrote meanwhile (the outbox) is sent once."""
    cid = state["conversation"]
    first = js("return window.parleyChat.client.connectionId")
    network(offline=True)
    js("window.parleyChat.client.ws.close(4000, 'the test drops the connection')")
    wait_until(lambda: el("#connection").get_attribute("data-status") == "reconnecting", "the page to notice the drop")
    wait_until(
        lambda: "1006" in (el("#connection").get_attribute("title") or ""),
        "a reconnection attempt refused while offline (then backing off)",
    )
    out = cli("send", "alice", "Sent during the outage", profile="bob")
    seq = int(out.split("#", 1)[1].split(" ", 1)[0])
    box = el("#composer-input")
    box.send_keys("Written while offline")
    box.send_keys(Keys.ENTER)
    wait_until(lambda: els("#message-list .msg.pending"), "alice's message waiting in the outbox while offline")
    run.check(
        json.loads(js("return localStorage.getItem('parley.chat.outbox')"))["items"][0]["text"] == "Written while offline",
        "the waiting message saved in the outbox",
    )
    screenshot("chat-06-offline")
    network(offline=False)
    wait_for_connected()
    run.check(js("return window.parleyChat.client.connectionId") != first, "a new connection after the drop")
    wait_for_text("bob", "Sent during the outage", "bob's message from the outage, after the reconnection (no reload)")
    wait_until(
        lambda: f"{cid}:{seq}" in js("return window.parleyChat.client.deliveredIds"),
        "the resume to replay bob's outage message",
    )
    wait_until(lambda: not els("#message-list .msg.pending"), "the outbox sent after the reconnection")
    wait_for_text("alice", "Written while offline")
    run.check(texts_of("bob").count("Sent during the outage") == 1, "bob's outage message shown once")
    run.check(texts_of("alice").count("Written while offline") == 1, "alice's offline message shown once")
    output = cli("history", "alice", profile="bob")
    run.check(output.count("alice: Written while offline") == 1, f"bob's history has alice's offline message once:\n{output}")


def scenario_older_pages():
    """History pages backwards: the newest 50 first, then "Load older" brings the rest, in order, once each."""
    cid = state["conversation"]
    statuses = [
        rest(
            "POST",
            f"/v1/conversations/{cid}/messages",
            token=state["bob_token"],
            body={"clientMessageId": f"bulk-{number}", "parts": [{"type": "text", "text": f"Bulk message {number}"}]},
        )[0]
        for number in range(1, 56)
    ]
    run.check(statuses == [201] * 55, f"bob's 55 messages over REST: {statuses}")
    wait_for_text("bob", "Bulk message 55", "the 55th bulk message, live")
    driver.refresh()
    wait_for_connected()
    wait_for_text("bob", "Bulk message 55", "the conversation after the reload")
    stored = [m["id"] for m in history(cid, alice_token())]
    run.check(len(stored) > 50, f"more than one page of history: {len(stored)}")
    shown = [m[0] for m in shown_messages()]
    run.check(shown == stored[-50:], f"the first page is the newest 50 messages: shown {len(shown)}")
    wait_until(lambda: visible("#load-older"), "the 'Load older messages' button")
    el("#load-older").click()
    wait_until(lambda: [m[0] for m in shown_messages()] == stored, "every message, in order, after loading the older page")
    wait_until(lambda: not visible("#load-older"), "no older page left")


def scenario_console():
    """The operator console: a wrong key, sign-in, live counts, users, conversations, reports, origins, key rotation."""
    chat_window = driver.current_window_handle
    driver.switch_to.new_window("tab")
    driver.get(CONSOLE)
    wait_until(lambda: visible("#signin-api-key"), "the console's sign-in form")

    # A wrong key shows the API's error.
    el("#signin-app-id").send_keys(APP_ID)
    el("#signin-api-key").send_keys("rk_" + "0" * 40)
    el("#signin-submit").click()
    wait_until(lambda: els("#signin-error .alert"), "an error for a wrong key")
    error = el("#signin-error .alert")
    run.check(
        error.get_attribute("data-error-code") == "ERR_API_KEY_INVALID" and "ERR_API_KEY_INVALID" in error.text,
        f"the error shows ERR_API_KEY_INVALID: {error.text!r}",
    )
    screenshot("console-01-wrong-key")

    el("#signin-api-key").clear()
    el("#signin-api-key").send_keys(API_KEY)
    el("#signin-submit").click()
    wait_until(lambda: visible("#stat-users") and el("#stat-users").text.isdigit(), "the overview's figures")
    session = json.loads(js("return sessionStorage.getItem('parley.console.session')"))
    run.check(session["apiKey"] == API_KEY, "the key in sessionStorage")
    run.check(
        API_KEY not in js("return JSON.stringify(Object.assign({}, localStorage))"), "the REST API key in localStorage"
    )

    # Live connections: alice's page and bob's terminal; the overview follows GET /v1/app.
    def matches_api():
        stats = rest("GET", "/v1/app", api_key=API_KEY)[1]["stats"]
        shown = el("#stat-liveConnections").text
        return stats["liveConnections"] if shown == str(stats["liveConnections"]) else None

    # Exactly two: a page left for another (the back/forward cache) must not keep a socket open.
    live = wait_until(
        lambda: matches_api() == 2 and 2,
        "the overview's live connections to equal GET /v1/app's: 2 (alice's page and bob's terminal)",
        timeout=20,
    )
    app = rest("GET", "/v1/app", api_key=API_KEY)[1]
    run.check(el("#overview-app-name").text == app["name"], "the app's name")
    run.check(el("#stat-users").text == str(app["stats"]["users"]), "the user count")
    screenshot("console-02-overview")
    bob_chat_says("/quit")
    bob_chat.wait(timeout=15)
    wait_until(
        lambda: el("#stat-liveConnections").text == str(live - 1) and matches_api() == live - 1,
        f"the overview to refresh to {live - 1} live connections once bob's terminal leaves",
        timeout=20,
    )

    # Allowed origins.
    el("#origin-input").send_keys("https://chat.example.com")
    el("#origin-add").click()
    el("#origins-save").click()
    wait_until(
        lambda: rest("GET", "/v1/app", api_key=API_KEY)[1]["allowedOrigins"] == ["https://chat.example.com"],
        "PATCH /v1/app to store the origin",
    )
    wait_until(lambda: els('#origins-list li[data-origin="https://chat.example.com"]'), "the origin listed")

    # Users: exactly GET /v1/users, page by page (60 more users make two pages).
    statuses = [
        rest("POST", "/v1/users", api_key=API_KEY, body={"uid": f"user-{number:03}", "name": f"User {number}"})[0]
        for number in range(1, 61)
    ]
    run.check(statuses == [201] * 60, f"creating 60 users: {statuses}")
    status, first_page = rest("GET", "/v1/users?limit=50", api_key=API_KEY)
    run.check(first_page.get("nextCursor"), f"GET /v1/users has a second page: {first_page}")
    status, second_page = rest("GET", f"/v1/users?limit=50&cursor={urllib.parse.quote(first_page['nextCursor'])}", api_key=API_KEY)
    pages = [[u["uid"] for u in first_page["users"]], [u["uid"] for u in second_page["users"]]]
    driver.get(CONSOLE + "#/users")

    def users_shown():
        return [row.get_attribute("data-uid") for row in els("#users-table tbody tr")]

    wait_until(lambda: users_shown() == pages[0], f"the Users page to list GET /v1/users's first page {pages[0]}")
    screenshot("console-03-users")
    el("#pager-next").click()
    wait_until(lambda: users_shown() == pages[1], f"the second page {pages[1]}")
    run.check(el("#pager-next").get_attribute("disabled") is not None, "no third page")
    el("#pager-previous").click()
    wait_until(lambda: users_shown() == pages[0], "the first page again")

    # Finding users: exactly what GET /v1/search/users finds, and the directory setting saved with PATCH /v1/app.
    status, found = rest("GET", "/v1/search/users?q=user%201&limit=50", api_key=API_KEY)
    expected = [u["uid"] for u in found["users"]]
    run.check(status == 200 and "user-001" in expected and len(expected) < 50, f"the API finds User 1: {found}")
    el("#users-search").send_keys("User 1")
    el("#users-search-go").click()
    wait_until(lambda: users_shown() == expected, f"the search to show {expected}")
    screenshot("console-03b-user-search")
    el("#users-search").clear()
    el("#users-search").send_keys("zzzz")
    el("#users-search-go").click()
    wait_until(lambda: users_shown() == [] and "zzzz" in el("#users-body").text, "no user found for zzzz")
    wait_until(lambda: el("#user-directory").is_enabled(), "the directory setting to load")
    run.check(el("#user-directory").get_attribute("value") == "everyone", "the default directory is everyone")
    Select(el("#user-directory")).select_by_value("contacts")
    wait_until(lambda: "Saved" in el("#directory-message").text, "the directory setting to be saved")
    status, app = rest("GET", "/v1/app", api_key=API_KEY)
    run.check(app.get("userDirectory") == "contacts", f"GET /v1/app shows the new setting: {app.get('userDirectory')}")
    Select(el("#user-directory")).select_by_value("everyone")
    wait_until(lambda: rest("GET", "/v1/app", api_key=API_KEY)[1].get("userDirectory") == "everyone", "back to everyone")
    # Deleting a user: the setting is saved; a user created for it is found, deleted after the confirmation, and gone.
    wait_until(lambda: el("#deleted-user-messages").is_enabled(), "the deleted users' messages setting to load")
    run.check(el("#deleted-user-messages").get_attribute("value") == "tombstone", "tombstones by default")
    Select(el("#deleted-user-messages")).select_by_value("erase")
    wait_until(lambda: "Saved" in el("#deleted-user-messages-message").text, "the deleted users' messages setting saved")
    run.check(rest("GET", "/v1/app", api_key=API_KEY)[1].get("deletedUserMessages") == "erase", "GET /v1/app shows erase")
    status, _ = rest("POST", "/v1/users", api_key=API_KEY, body={"uid": "delete-me", "name": "Delete Me"})
    run.check(status == 201, f"a user to delete: {status}")
    el("#users-search").clear()
    el("#users-search").send_keys("delete-me")
    el("#users-search-go").click()
    wait_until(lambda: users_shown() == ["delete-me"], "the user to delete found")
    # Export first: every page of GET /v1/users/{uid}/export in one JSON file (the user has none of either yet).
    el('#users-table tr[data-uid="delete-me"] [data-action="export-user"]').click()
    wait_until(lambda: els("#export-link"), "the export's link")
    link = el("#export-link")
    run.check(
        link.get_attribute("download") == "parley-export-delete-me.json" and link.get_attribute("data-messages") == "0",
        f"the export of delete-me: {link.get_attribute('download')} {link.get_attribute('data-messages')}",
    )
    run.check(link.get_attribute("href").startswith("blob:"), "the export is a file made in the page")
    el('#users-table tr[data-uid="delete-me"] [data-action="delete-user"]').click()
    wait_until(lambda: visible("#dialog-confirm"), "the deletion's confirmation")
    el("#dialog-confirm").click()
    wait_until(lambda: "delete-me was deleted" in el("#users-notice").text, "the deletion's notice")
    run.check(rest("GET", "/v1/users/delete-me", api_key=API_KEY)[0] == 404, "the deleted user is gone")
    Select(el("#deleted-user-messages")).select_by_value("tombstone")
    wait_until(lambda: rest("GET", "/v1/app", api_key=API_KEY)[1].get("deletedUserMessages") == "tombstone", "back to tombstone")
    el("#users-search").clear()
    el("#users-search-go").click()
    wait_until(lambda: users_shown() == pages[0], "every user again with an empty search")

    # Conversations: exactly GET /v1/conversations, then one of them.
    cli("login", "carol", profile="carol")
    group = cli("group", "create", "Book club", "alice", "bob", profile="carol").strip().split()[-1]
    cli("send", "--conversation", group, "Welcome to the book club", profile="carol")
    driver.get(CONSOLE + "#/conversations")
    expected = [c["id"] for c in rest("GET", "/v1/conversations?limit=50", api_key=API_KEY)[1]["conversations"]]
    wait_until(lambda: len(els("#conversations-table tbody tr")) == len(expected), "the conversations table")
    shown = [row.get_attribute("data-id") for row in els("#conversations-table tbody tr")]
    run.check(shown == expected, f"the Conversations page lists {shown}, GET /v1/conversations {expected}")
    cid = state["conversation"]
    wait_until(lambda: "alice" in el(f'#conversations-table tr[data-id="{cid}"] .who-names').text, "the direct conversation's participants")
    screenshot("console-04-conversations")
    el(f'#conversations-table tr[data-id="{cid}"]').click()
    wait_until(lambda: len(els("#messages-log .log-item")) == 50, "the conversation's newest 50 messages")
    el("#messages-older").click()
    expected = [m["id"] for m in history(cid, alice_token_from_chat(chat_window))]
    wait_until(
        lambda: [e.get_attribute("data-id") for e in els("#messages-log .log-item")] == expected,
        "every message of the conversation after 'Load older messages'",
    )
    texts = [e.text for e in els("#messages-log .log-text")]
    run.check(XSS in texts and not els("#messages-log img"), f"the HTML message as text in the console: {texts}")
    participants = [row.get_attribute("data-uid") for row in els("#participants-table tbody tr")]
    run.check(sorted(participants) == ["alice", "bob"], f"participants {participants}")
    screenshot("console-05-conversation")

    # Pins: the operator pins the newest message from the card; GET .../pins lists it (no pinnedBy: the app); alice's
    # chat, open on the conversation, gets conversationMessage.pinned and shows the message in its pinned bar and marked
    # in the list; unpinning takes both away.
    console_window = driver.current_window_handle
    newest_id = els("#messages-log .log-item")[-1].get_attribute("data-id")
    pin_button = f'#messages-log .log-item[data-id="{newest_id}"] [data-action="pin"]'
    driver.switch_to.window(chat_window)
    js("location.hash = arguments[0]", "#c=" + urllib.parse.quote(cid))
    wait_until(lambda: els(f'.msg[data-id="{newest_id}"]'), "alice's chat open on the conversation")
    driver.switch_to.window(console_window)
    el(pin_button).click()
    wait_until(lambda: "pinned by the app" in el(f'#messages-log .log-item[data-id="{newest_id}"]').text, "the pin badge")
    pins = rest("GET", f"/v1/conversations/{cid}/pins", api_key=API_KEY)[1]["messages"]
    run.check([m["id"] for m in pins] == [newest_id] and "pinnedBy" not in pins[0]["pin"], f"GET .../pins: {pins}")
    driver.switch_to.window(chat_window)
    wait_until(lambda: visible("#pinned") and el("#pinned").get_attribute("data-count") == "1", "the chat's pinned bar")
    pinned_text = el("#pinned .pinned-text").text
    run.check(pinned_text and pinned_text in el(f'.msg[data-id="{newest_id}"] .msg-text').text, f"the pinned bar shows {pinned_text!r}")
    run.check(els(f'.msg[data-id="{newest_id}"] .msg-pin'), "the pinned message is marked in the chat")
    screenshot("console-05a-chat-pinned")
    driver.switch_to.window(console_window)
    el(pin_button).click()
    wait_until(lambda: "pinned by" not in el(f'#messages-log .log-item[data-id="{newest_id}"]').text, "the badge gone")
    run.check(rest("GET", f"/v1/conversations/{cid}/pins", api_key=API_KEY)[1]["messages"] == [], "no pin left")
    driver.switch_to.window(chat_window)
    wait_until(lambda: not visible("#pinned") and not els(".msg .msg-pin"), "the chat's pin gone")

    # A system message of the app (REST API key): alice's chat shows it as the app's note, not as anyone's message.
    status, notice = rest(
        "POST", f"/v1/conversations/{cid}/messages", api_key=API_KEY, body={"parts": [{"type": "text", "text": "Maintenance tonight"}]}
    )
    run.check(status == 201 and notice.get("system") is True and notice.get("sender") == "", f"a system message: {status} {notice}")
    wait_until(lambda: els(f'.msg-system[data-id="{notice["id"]}"]'), "the system message in alice's chat")
    run.check("Maintenance tonight" in el(f'.msg-system[data-id="{notice["id"]}"]').text, "the system message's text")
    run.check(not els(f'.msg[data-id="{notice["id"]}"]'), "the system message is not shown as a user's message")
    driver.switch_to.window(console_window)

    # Search: exactly what GET /v1/search/messages finds (once the indexer filed the messages), the matches marked, the
    # HTML message's words as text; a result links to its conversation.
    def api_search(query):
        return rest("GET", f"/v1/search/messages?{urllib.parse.urlencode(query)}&limit=25", api_key=API_KEY)[1]

    wait_until(lambda: api_search({"q": "book clu"}).get("results"), "the search index to file the book club's message")
    wait_until(lambda: api_search({"q": "onerror"}).get("results"), "the search index to file the HTML message")
    driver.get(CONSOLE + "#/search")
    wait_until(lambda: visible("#search-q"), "the Search page")
    el("#search-q").send_keys("book clu")
    el("#search-go").click()
    expected = [r["message"]["id"] for r in api_search({"q": "book clu"})["results"]]

    def results_shown():
        return [e.get_attribute("data-id") for e in els("#search-results .search-result")]

    wait_until(lambda: results_shown() == expected, f"the search results {expected}")
    marks = [e.text for e in els("#search-results mark")]
    run.check(marks == ["book", "club"], f"the matches are marked: {marks}")
    screenshot("console-05b-search")
    el("#search-q").clear()
    el("#search-q").send_keys("onerror")
    Select(el("#search-order")).select_by_value("relevance")
    el("#search-go").click()
    expected = [r["message"]["id"] for r in api_search({"q": "onerror", "order": "relevance"})["results"]]
    wait_until(lambda: results_shown() == expected and expected, f"the HTML message found {expected}")
    run.check(not els("#search-results img") and XSS in el("#search-results").text, "the HTML message's words as text")
    el("#search-q").clear()
    el("#search-q").send_keys("nothingmatchesthis")
    el("#search-go").click()
    wait_until(lambda: "No message found." in el("#search-body").text, "nothing found")
    el("#search-q").clear()
    el("#search-q").send_keys("club")
    el("#search-sender").send_keys("carol")
    el("#search-go").click()
    wait_until(lambda: len(results_shown()) == 1, "the sender filter")
    el("#search-results .search-result a").click()
    wait_until(lambda: group in driver.current_url and visible("#messages-log"), "the result's conversation")

    # Reports: alice reports bob's HTML message (direct), carol his message in her group and bob himself. The
    # operator resolves the first with a note, bans bob from the group and deletes his message from the second's
    # card, and dismisses the third.
    cli("login", "alice", profile="alice")
    xss_seq = [m for m in history(cid, alice_token_from_chat(chat_window)) if m["parts"] and m["parts"][0].get("text") == XSS][0]["seq"]
    spam_seq = int(cli("send", "--conversation", group, "Cheap followers at spam.example", profile="bob").split("#", 1)[1].split(" ", 1)[0])
    cli("report", "message", "bob", f"#{xss_seq}", "--reason", "spam", "--details", "HTML again", profile="alice")
    cli("report", "message", group, "--conversation", f"#{spam_seq}", "--reason", "spam", profile="carol")
    cli("report", "user", "bob", "--reason", "harassment", profile="carol")
    driver.get(CONSOLE + "#/reports")
    wait_until(lambda: len(els("#reports-list .report")) == 3, "the three open reports")
    reports = rest("GET", "/v1/reports?state=open", api_key=API_KEY)[1]["reports"]
    shown = [r.get_attribute("data-id") for r in els("#reports-list .report")]
    run.check(shown == [r["id"] for r in reports], f"the Reports page lists {shown}, GET /v1/reports {reports}")
    xss_report, group_report, user_report = reports
    run.check(
        xss_report.get("messageId") and group_report.get("conversationId") == group and not user_report.get("messageId"),
        f"the reports, oldest first: {reports}",
    )

    def report_card(report):
        return el(f'.report[data-id="{report["id"]}"]')

    def resolved(report_id):
        return [r for r in rest("GET", "/v1/reports?state=resolved", api_key=API_KEY)[1]["reports"] if r["id"] == report_id]

    run.check(XSS in report_card(xss_report).find_element(By.CSS_SELECTOR, ".quote").text, "the reported message's copy, as text")
    run.check(
        not report_card(xss_report).find_elements(By.CSS_SELECTOR, 'button[data-action="ban"]')
        and not report_card(user_report).find_elements(By.CSS_SELECTOR, 'button[data-action="ban"]'),
        "a group ban offered for a report outside a group",
    )
    screenshot("console-07-reports")

    report_card(xss_report).find_element(By.CSS_SELECTOR, "input").send_keys("Warned bob")
    report_card(xss_report).find_element(By.CSS_SELECTOR, 'button[data-action="resolve"]').click()
    wait_until(
        lambda: [r.get("resolution") for r in resolved(xss_report["id"])] == ["Warned bob"],
        "PATCH /v1/reports/{id} to resolve the report with its note",
    )
    wait_until(lambda: len(els("#reports-list .report")) == 2, "the resolved report to leave the open list")

    report_card(group_report).find_element(By.CSS_SELECTOR, 'button[data-action="ban"]').click()
    wait_until(lambda: visible("#dialog-input"), "the ban dialog")
    run.check(el("#dialog-input").get_attribute("value") == "Spam", "the ban's reason filled in from the report")
    el("#dialog-confirm").click()
    wait_until(
        lambda: [(b["uid"], b.get("reason")) for b in rest("GET", f"/v1/conversations/{group}/bans", api_key=API_KEY)[1]["bans"]]
        == [("bob", "Spam")],
        "bob banned from the group, with the reason (PUT .../bans/bob)",
    )
    wait_until(lambda: "bob is banned from" in el("#reports-message").text, "the ban confirmed on the page")
    report_card(group_report).find_element(By.CSS_SELECTOR, 'button[data-action="delete-message"]').click()
    wait_until(lambda: visible("#dialog-confirm"), "the deletion's confirmation")
    el("#dialog-confirm").click()
    wait_until(
        lambda: [
            m.get("deletedAt")
            for m in rest("GET", f"/v1/conversations/{group}/messages?limit=200", api_key=API_KEY)[1]["messages"]
            if m["id"] == group_report["messageId"]
        ][0],
        "the reported group message deleted (a tombstone)",
    )
    report_card(user_report).find_element(By.CSS_SELECTOR, 'button[data-action="dismiss"]').click()
    wait_until(lambda: resolved(user_report["id"]), "the user report dismissed (resolved)")
    wait_until(lambda: len(els("#reports-list .report")) == 1, "the dismissed report to leave the open list")
    el('.filters [data-state="resolved"]').click()
    wait_until(
        lambda: sorted(r.get_attribute("data-id") for r in els("#reports-list .report")) == sorted([xss_report["id"], user_report["id"]]),
        "the Resolved filter to list the two resolved reports",
    )

    # A group's page: the ban is listed; mute a participant.
    driver.get(CONSOLE + f"#/conversations/{group}")
    wait_until(lambda: els('#bans-table tr[data-uid="bob"]'), "bob listed in the group's bans")
    run.check(not els('#participants-table tr[data-uid="bob"]'), "bob, banned, is no longer a participant")
    [b for b in els('#participants-table tr[data-uid="alice"] button') if b.text == "Mute"][0].click()
    wait_until(
        lambda: [p.get("muted") for p in rest("GET", f"/v1/conversations/{group}/participants", api_key=API_KEY)[1]["participants"] if p["uid"] == "alice"] == [True],
        "alice muted in the group (PUT .../mute)",
    )
    wait_until(lambda: [b.text for b in els('#participants-table tr[data-uid="alice"] button')][:1] == ["Unmute"], "the Unmute button")
    screenshot("console-06-group")

    # Keys: rotate; the old key is refused at once, the new one works, the console goes on with it.
    driver.get(CONSOLE + "#/keys")
    wait_until(lambda: visible("#rotate-keys"), "the Keys page")
    el("#rotate-keys").click()
    wait_until(lambda: visible("#dialog-confirm"), "the rotation's confirmation")
    screenshot("console-08-rotate-confirm")
    el("#dialog-confirm").click()
    wait_until(lambda: visible("#new-rest-api-key"), "the new keys, shown once")
    new_key = el("#new-rest-api-key").get_attribute("value")
    new_auth_key = el("#new-auth-key").get_attribute("value")
    run.check(new_key.startswith("rk_") and new_key != API_KEY, f"a new REST API key: {new_key!r}")
    run.check(new_auth_key.startswith("ak_") and new_auth_key != AUTH_KEY, "a new Auth Key")
    status, body = rest("GET", "/v1/app", api_key=API_KEY)
    run.check(
        status == 401 and body["error"]["code"] == "ERR_API_KEY_INVALID", f"the old key still works: {status} {body}"
    )
    run.check(rest("GET", "/v1/app", api_key=new_key)[0] == 200, "the new key is refused")
    state["api_key"] = new_key
    status, body = rest("POST", "/v1/login", body={"appId": APP_ID, "uid": "dave", "authKey": AUTH_KEY})
    run.check(status == 401 and body["error"]["code"] == "ERR_AUTH_KEY_INVALID", f"the old Auth Key still works: {status}")
    screenshot("console-09-new-keys")
    driver.get(CONSOLE + "#/overview")
    wait_until(lambda: visible("#stat-users") and el("#stat-users").text.isdigit(), "the overview with the new key")
    run.check(not els("#banner .alert"), "the console refused after the rotation")

    # Sign out forgets the key.
    el("#signout").click()
    wait_until(lambda: visible("#signin-api-key"), "the sign-in form after signing out")
    run.check(js("return sessionStorage.getItem('parley.console.session')") is None, "the key left in sessionStorage")
    driver.close()
    driver.switch_to.window(chat_window)


def alice_token_from_chat(chat_window):
    current = driver.current_window_handle
    driver.switch_to.window(chat_window)
    token = alice_token()
    driver.switch_to.window(current)
    return token


def scenario_chat_screens():
    """The chat page's look: the conversation list with a group, and the sign-in screen."""
    driver.refresh()
    wait_for_connected()
    wait_until(lambda: len(els(".conv")) == 2, "alice's two conversations (bob, and carol's group)")
    wait_for_text("bob", "Bulk message 55")
    run.check(
        js("const s = document.getElementById('messages'); return s.scrollHeight - s.scrollTop - s.clientHeight < 2"),
        "the open conversation scrolled to its newest message",
    )
    screenshot("chat-07-conversation")
    group = [e.get_attribute("data-id") for e in els(".conv") if e.get_attribute("data-id") != state["conversation"]][0]
    conversation_button(group).click()
    wait_for_text("carol", "Welcome to the book club")
    wait_until(lambda: conversation_button(group).get_attribute("data-unread") == "0", "the group read")
    screenshot("chat-08-group")

    # A one-to-one conversation with a uid: an unknown one is refused with the API's error; carol's opens.
    el("#new-chat-uid").send_keys("nobody-here")
    el("#new-chat-submit").click()
    wait_until(
        lambda: els("#new-chat-error .alert") and el("#new-chat-error .alert").get_attribute("data-error-code") == "ERR_UID_NOT_FOUND",
        "ERR_UID_NOT_FOUND for an unknown uid",
    )
    el("#new-chat-uid").clear()
    el("#new-chat-uid").send_keys("carol")
    el("#new-chat-submit").click()
    wait_until(lambda: el("#head-title").text == "carol" and js("return window.parleyChat.openConversationId") not in (None, group, state["conversation"]), "the new conversation with carol, open")
    run.check(not els("#new-chat-error .alert"), "the error cleared")
    el("#composer-input").send_keys("Hi Carol, a new chat")
    el("#composer-input").send_keys(Keys.ENTER)
    wait_for_text("alice", "Hi Carol, a new chat")
    output = cli("history", "alice", profile="carol")
    run.check("alice: Hi Carol, a new chat" in output, f"carol's `parley history alice` shows it:\n{output}")
    screenshot("chat-09-new-chat")

    el("#logout").click()
    wait_until(lambda: visible("#login-uid"), "the sign-in form after signing out")
    run.check(js("return localStorage.getItem('parley.chat.session')") is None, "the token left in localStorage")
    run.check(js("return localStorage.getItem('parley.chat.cursors')") is None, "the positions left in localStorage")
    screenshot("chat-10-sign-in")

    # Signing in with an auth token (issued by the app's server) instead of the Auth Key.
    status, issued = rest("POST", "/v1/users/carol/auth-tokens", api_key=state["api_key"], body={})
    run.check(status in (200, 201), f"issuing carol a token with the new REST API key: {status} {issued}")
    el("#tab-token").click()
    el("#login-token").send_keys("pt_" + "0" * 64)
    el("#login-token-submit").click()
    wait_until(
        lambda: els("#login-error .alert") and el("#login-error .alert").get_attribute("data-error-code") == "ERR_AUTH_TOKEN_INVALID",
        "ERR_AUTH_TOKEN_INVALID for an unknown token",
    )
    el("#login-token").clear()
    el("#login-token").send_keys(issued["authToken"])
    el("#login-token-submit").click()
    wait_for_connected()
    run.check(el("#me-uid").text == "carol", f"signed in as carol: {el('#me-uid').text!r}")
    wait_until(lambda: len(els(".conv")) == 2, "carol's conversations (the group, and alice)")


state = {}

SCENARIOS = [
    ("chat: a message from the CLI arrives live, with its unread count", scenario_live_message),
    ("chat: a message from the page reaches the CLI once", scenario_send_from_page),
    ("chat: HTML in a message is shown as text", scenario_xss),
    ("chat: a photo shows as a file that opens through its link", scenario_files),
    ("chat: presence, typing and receipts both ways", scenario_typing_receipts_presence),
    ("chat: reload and resume, nothing lost or twice", scenario_reload),
    ("chat: a dropped connection reconnects with backoff and catches up", scenario_reconnect),
    ("chat: history pages backwards", scenario_older_pages),
    ("console: sign-in, live counts, lists, reports, origins, key rotation", scenario_console),
    ("chat: screens and sign-out", scenario_chat_screens),
]


def main():
    global driver
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(CheckFailed(f"the run took over {TOTAL_SECONDS} s")))
    signal.alarm(TOTAL_SECONDS)
    started = time.monotonic()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900",
                     "--disable-gpu", "--no-first-run", "--lang=en-US"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    failed = None
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        driver.set_page_load_timeout(20)
        driver.set_script_timeout(10)
        for name, scenario in SCENARIOS:
            run.scenario = name
            checks_before = run.checks
            scenario_started = time.monotonic()
            scenario()
            log(f"PASS  {name}  ({run.checks - checks_before} checks, {time.monotonic() - scenario_started:.1f} s)")
        # Refused requests the scenarios make on purpose (a wrong key, the old key) are logged as network errors;
        # anything else at SEVERE (a script error, a CSP violation) fails the run.
        # So are the reconnection attempts refused while the test holds the network down.
        severe = [
            e
            for e in driver.get_log("browser")
            if e["level"] == "SEVERE" and e.get("source") != "network" and "ERR_INTERNET_DISCONNECTED" not in e["message"]
        ]
        run.scenario = "the browser's console"
        run.check(not severe, f"errors in the browser's console: {severe}")
    except BaseException as error:  # noqa: BLE001 - every failure is reported the same way
        failed = error
        details = traceback.format_exc()
    finally:
        signal.alarm(0)
        if failed is not None:
            log(f"\nFAIL  {run.scenario}")
            log(f"      {failed}" if isinstance(failed, CheckFailed) else details)
            if driver is not None:
                try:
                    screenshot("FAILURE")
                    for entry in driver.get_log("browser"):
                        log(f"      browser: {entry['level']} {entry['message']}")
                except Exception:  # noqa: BLE001
                    pass
        if bob_chat is not None and bob_chat.poll() is None:
            bob_chat.kill()
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001
                pass
    elapsed = time.monotonic() - started
    if failed is not None:
        log(f"\nbrowser test FAILED after {elapsed:.1f} s ({run.checks} checks passed before the failure)")
        return 1
    log(f"\nbrowser test passed: {len(SCENARIOS)} scenarios, {run.checks} checks, {elapsed:.1f} s; screenshots in {SHOTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
