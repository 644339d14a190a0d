#!/usr/bin/env python3
"""Writes the seed corpora under Fuzz/Corpus (docs/RELIABILITY.md): inputs taken from the tests and the protocol's
documented examples, one file per input, named by the SHA-1 of its bytes as libFuzzer names what it finds. Run it
again after adding a seed here; scripts/fuzz never writes into Fuzz/Corpus."""
import hashlib, os, re, struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus")


def write(target, inputs):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    for data in inputs:
        data = data.encode() if isinstance(data, str) else data
        with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)


def swift_raw_strings(path):
    """The #"..."# literals of a test file that interpolate nothing."""
    text = open(os.path.join(os.path.dirname(ROOT), "..", path)).read()
    return [s for s in re.findall(r'#"(.*?)"#', text) if "\\#(" not in s]


def masked(opcode, payload, fin=True, key=b"\x01\x02\x03\x04", rsv=0):
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def length_prefixed(*texts, width=2):
    """Strings as FuzzInput.string reads them: a big-endian length, then the bytes."""
    out = b""
    for t in texts:
        b = t.encode()
        out += len(b).to_bytes(width, "big") + b
    return out


write("client-frame", swift_raw_strings("Tests/ParleyProtocolTests/ClientFrameDecodingTests.swift") + [
    '{"type":"connect","protocolVersion":1}',
    '{"type":"send","ref":"r-17","conversationId":"c_9x","clientMessageId":"6F1C","parts":[{"type":"text","text":"Hi"}]}',
    '{"type":"ping","id":"p1"}',
])

write("utf8", [b"", b"plain ascii text of more than eight bytes", "héllo wörld €😀".encode(), b"\xc0\xaf",
               b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"12345678\xe2\x82\xac", b"\xff"])

ws = [
    masked(1, b"hello"),
    masked(1, b"hel", fin=False) + masked(9, b"ping") + masked(0, b"lo"),
    masked(2, bytes(range(200))),
    masked(8, struct.pack(">H", 1000) + b"bye"),
    masked(10, b""),
    b"\x81\x05hello",  # not masked
    masked(1, b"x", rsv=0x40),
    masked(0, b"orphan"),
    masked(9, b"p" * 126),
    masked(1, b"a", fin=False) + masked(1, b"b"),
    masked(1, b"\xff\xfe"),
]
write("websocket-frames", [bytes([i]) + f for i, f in enumerate(ws)])

http = [
    b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /v1/users HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\n{\"a\"}",
    b"POST /v1/users HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    b"GET /v1/ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
    b"BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /v1/conversations/c_1/attachments HTTP/1.1\r\nHost: a\r\nContent-Length: 700\r\n\r\n" + b"x" * 700,
    b"POST /v1/users HTTP/1.1\r\nHost: a\r\nContent-Length: 9999\r\n\r\n",
    b"GET /" + b"a" * 300 + b" HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /v1/x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
    b"GET /x HTTP/1.0\r\n\r\n",
    b"GET /x\x01 HTTP/1.1\r\nHost: a\r\n\r\n",
]
write("http-request", [bytes([i * 7]) + r for i, r in enumerate(http)])

upgrade = b"GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
write("upgrade-request", [
    upgrade + b"\r\n",
    upgrade + b"Authorization: Bearer abc.def\r\n\r\n",
    upgrade.replace(b"/v1/ws", b"/v1/ws?token=x") + b"\r\n" + masked(1, b"{}"),
    upgrade.replace(b"/v1/ws", b"/v1/other") + b"\r\n",
    upgrade + b"Content-Length: 3\r\n\r\nabc",
    upgrade.replace(b"13", b"8") + b"\r\n",
    upgrade + b"Authorization: a\r\nAuthorization: b\r\n\r\n",
    upgrade[:40],
])

write("sigv4", [
    "https://bucket.s3.us-east-1.amazonaws.com/app_1/att_1?x-id=PutObject",
    "http://127.0.0.1:9000/parley/a%20b/c~d?b=2&a=1&a=",
    "https://h/ü/😀?q=%zz",
    "key with spaces/and+plus",
    "/",
    "s3://x/y?list-type=2&prefix=app_1/&continuation-token=abc%3D%3D",
])

write("nats-protocol", [bytes([i * 5]) + m for i, m in enumerate([
    b'INFO {"server_id":"x","version":"2.10.0","max_payload":1048576,"headers":true,"connect_urls":["127.0.0.1:4222"]}\r\n',
    b"MSG parley.app.c 1 5\r\nhello\r\n",
    b"MSG a.b 12 reply.to 0\r\n\r\nPING\r\nPONG\r\n",
    b"HMSG a.b 2 22 27\r\nNATS/1.0\r\nA: 1\r\nB: 2\r\n\r\nhello\r\n",
    b"HMSG a 3 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
    b"+OK\r\n-ERR 'Authorization Violation'\r\n",
    b"MSG a 1 99999999999\r\n",
    b"PING\r\n" * 3,
])])

write("search-query", [
    length_prefixed("hello world", "Hello, World! How are you?", "p1.2.3"),
    length_prefixed('"exact phrase" pre', "an exact phrase and a preview", "r20"),
    length_prefixed("café naïve", "Café au lait, naïvely", "p-1.0.9223372036854775807"),
    length_prefixed("😀 emoji", "emoji 😀 everywhere " * 20, "r0"),
    length_prefixed("OR NOT * : - ( )", "operators are words", "x"),
    length_prefixed(" ".join(["w%d" % i for i in range(20)]), "w1 w2 w3", "p1..2"),
])

wire = [bytes(range(256)), bytes([0xFF] * 64), b"\x03\x02\x01" + "text with \"quotes\" and \\ and \u0001".encode(),
        bytes(i * 37 % 256 for i in range(512)), b"\x00" * 32]
write("wire-json", wire)


# The dictionaries: the protocol's keywords, as libFuzzer reads them (Fuzz/Dictionaries/<target>.dict).
def dictionary(target, words):
    def escape(word):
        data = word.encode() if isinstance(word, str) else word
        out = ""
        for b in data:
            if b == 0x5C:
                out += "\\\\"
            elif b == 0x22:
                out += '\\"'
            elif 0x20 <= b < 0x7F:
                out += chr(b)
            else:
                out += "\\x%02x" % b
        return '"' + out + '"'

    folder = os.path.join(os.path.dirname(ROOT), "Dictionaries")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, target + ".dict"), "w") as f:
        f.write("# libFuzzer dictionary for the %s target (docs/RELIABILITY.md); written by Fuzz/seeds.py\n" % target)
        for word in words:
            f.write(escape(word) + "\n")


dictionary("client-frame", ["{", "}", "[", "]", ":", ",", "true", "false", "null", "\\u0000", "\\ud83d\\ude00",
                            "\\ud800", '\\"', "1e308", "-0", "0.5", "1E2", "9223372036854775808"] + ['"%s"' % k for k in [
    "type", "connect", "protocolVersion", "token", "resume", "send", "ref", "conversationId", "clientMessageId",
    "parts", "text", "data", "file", "name", "metadata", "alert", "replyTo", "silent", "typing", "isTyping",
    "receipt", "deliveredSeq", "readSeq", "ping", "id", "edit", "delete", "messageId", "reaction", "key", "add"]])
dictionary("utf8", [b"\xc2\x80", b"\xdf\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xef\xbf\xbf",
                    b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xc0\x80", b"\xe0\x80\x80",
                    b"\x80", b"\xff", b"abcdefgh"])
dictionary("websocket-frames", [b"\x81", b"\x01", b"\x80", b"\x82", b"\x88", b"\x89", b"\x8a", b"\x00", b"\x85",
                                b"\xfe\x00\x80", b"\xff\x00\x00\x00\x00\x00\x01\x00\x00", b"\x03\xe8",
                                b"\x01\x02\x03\x04", b"\xc1", b"\x8b"])
dictionary("http-request", ["GET ", "POST ", "PUT ", "DELETE ", "PATCH ", "HEAD ", "OPTIONS ", "CONNECT ",
                            " HTTP/1.1", " HTTP/1.0", " HTTP/2.0", "\r\n", "\r\n\r\n", "\n", "\r", "Host: a",
                            "Content-Length: ", "Transfer-Encoding: chunked", "Connection: close",
                            "Connection: keep-alive", "Connection: Upgrade", "Upgrade: websocket", "Upgrade: h2c",
                            "Expect: 100-continue", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                            "Sec-WebSocket-Version: 13", "/v1/ws", "/v1/conversations/c/attachments", "0\r\n\r\n",
                            "ff\r\n", ";ext=1", "Trailer: x"])
dictionary("upgrade-request", ["GET /v1/ws", " HTTP/1.1", "\r\n", "\r\n\r\n", "Host: a", "Upgrade: websocket",
                               "Connection: Upgrade", "Connection: keep-alive, upgrade", "Sec-WebSocket-Key: ",
                               "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13", "Authorization: Bearer ",
                               "Content-Length: 0", "Transfer-Encoding: chunked", "?token=", " \t", ":", "\t"])
dictionary("sigv4", ["https://", "http://", "s3://", "%", "%2F", "%zz", "?", "&", "=", "/", "//", "#", "@", ":", "~",
                     "+", "..", "[::1]", "x-id=PutObject", " "])
dictionary("nats-protocol", ["INFO ", "MSG ", "HMSG ", "PING", "PONG", "+OK", "-ERR ", "\r\n", "NATS/1.0",
                             "NATS/1.0 503", '{"max_payload":', '"headers":true', '"connect_urls":[', " 0",
                             " 9223372036854775807", "18446744073709551616", "\t"])
dictionary("search-query", ['"', " ", b"\x00\x05", b"\x00\x20", "OR", "NOT", "*", ":", "-", "(", ")", "p", "r", ".",
                            "é", "ß", "İ", "😀", "\u0301", "ﬁ", "\t", "\u3000"])
dictionary("wire-json", [b"\x00", b"\x01", b"\x02", b"\x03", b"\x07", b"\xff", '"', "\\", b"\x7f",
                         "\u2028".encode(), "😀".encode(), b"\x7f\xf0\x00\x00\x00\x00\x00\x00"])

# The config file: a first byte (even: JSON, odd: YAML), then the file (README.md, "Configuration").
write("config-file", [
    b"\x01" + b"# parley.yaml\nport: 8080\ndata-dir: /var/lib/parley\nlog-format: json\nmetrics-port: 9464\ntrusted-proxy: [127.0.0.1]\n",
    b"\x00" + b'{"port": 8080, "hostname": "0.0.0.0", "console": false, "webhook-timeout-seconds": 2.5}',
    b"\x00" + b'{"port": "eighty"}',
    b"\x01" + b"port: 8080\nprot: 8081\n",
    b"\x01" + b"- a\n- b\n",
    b"\x00" + b'{"trusted-proxy": ["10.0.0.1", "10.0.0.2"], "max-file-bytes": 1e3}',
    b"\x01" + b"anchor: &a [1, 2]\nport: *a\n",
    b"\x00" + b"",
])
dictionary("config-file", ["{", "}", "[", "]", ":", ",", "\n", "- ", "&a ", "*a", "!!int ", "!!str ", "---", "...",
                           '"port"', '"hostname"', '"console"', '"trusted-proxy"', '"max-file-bytes"',
                           '"webhook-timeout-seconds"', '"database-url"', "port: ", "true", "false", "null", "~",
                           "1e309", "-1", "9223372036854775808", "0x1F"])
