"""A real Prometheus scrapes a real parley-server with deploy/prometheus/parley-alerts.yml loaded (scripts/check-deploy).

Usage: prometheus_check.py PROMETHEUS_URL PARLEY_VERSION

Checks, against Prometheus's HTTP API, once the server's first scrapes are in:
- `up{job="parley"}` is 1 and `parley_build_info` names PARLEY_VERSION and a commit (git's hash, `-dirty` when built
  with uncommitted changes, or `unknown` outside a checkout);
- each recording rule returns one series per node with a value in its range (the descriptors' and the disk's ratios
  in (0, 1], the commit p99 a number or absent before any commit);
- no Parley alert fires on a healthy server, and every alert and recording rule was evaluated without error;
- every expression of deploy/grafana/parley.json parses and runs (Grafana's $__rate_interval as 1m, $instance as .*);
- every metric the rules and the dashboard read is one the server exposes or docs/PROTOCOL.md lists.
"""

import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request

PROMETHEUS, VERSION = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(message):
    print(f"check-deploy: Prometheus: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def api(path, **query):
    url = f"{PROMETHEUS}/api/v1/{path}" + ("?" + urllib.parse.urlencode(query) if query else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    if answer.get("status") != "success":
        fail(f"{path} {query}: {answer}")
    return answer["data"]


def instant(expr):
    return api("query", query=expr)["result"]


deadline = time.monotonic() + 60
while True:
    try:
        up = instant('up{job="parley"}')
        rules = api("rules")["groups"]
        evaluated = rules and all(rule.get("lastEvaluation", "").startswith("20") for group in rules
                                  for rule in group["rules"])
        if up and up[0]["value"][1] == "1" and evaluated and instant("parley:process_fds:ratio"):
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        fail("no scrape of the server with the rules evaluated within 60 s")
    time.sleep(0.5)

info = instant("parley_build_info")
if [series["metric"].get("version") for series in info] != [VERSION]:
    fail(f"parley_build_info: {info}")
if not re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", info[0]["metric"].get("commit", "")):
    fail(f"parley_build_info has no commit: {info}")
for name in ("parley:process_fds:ratio", "parley:storage_free:ratio"):
    series = instant(name)
    if len(series) != 1 or not 0 < float(series[0]["value"][1]) <= 1:
        fail(f"{name}: {series}")
for series in instant("parley:writer_commit_seconds:p99_5m"):
    value = series["value"][1]
    if value != "NaN" and not 0 <= float(value) < 60:
        fail(f"parley:writer_commit_seconds:p99_5m: {series}")
for group in rules:
    for rule in group["rules"]:
        if rule.get("health") != "ok":
            fail(f"rule {rule['name']}: {rule.get('health')} {rule.get('lastError')}")
        if rule["type"] == "alerting" and rule.get("state") != "inactive":
            fail(f"alert {rule['name']} is {rule.get('state')} on a healthy server: {rule.get('alerts')}")

dashboard = json.load(open(os.path.join(ROOT, "deploy", "grafana", "parley.json")))
expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
for expr in expressions:
    api("query", query=expr.replace("$__rate_interval", "1m").replace("$instance", ".*"))

exposed = {series["__name__"] for series in api("series", **{"match[]": '{job="parley"}'})}
documented = set(re.findall(r"`((?:parley|process)_[a-z_]+)", open(os.path.join(ROOT, "docs", "PROTOCOL.md")).read()))
rule_text = open(os.path.join(ROOT, "deploy", "prometheus", "parley-alerts.yml")).read()
used = set(re.findall(r"(?<![:\w])((?:parley|process)_[a-z_]+)", rule_text + "\n".join(expressions)))
known = exposed | documented | {name + suffix for name in documented for suffix in ("_bucket", "_sum", "_count")}
unknown = sorted(name for name in used if name not in known)
if unknown:
    fail(f"metrics read by the rules or the dashboard that the server neither exposes nor documents: {unknown}")
alerts = sum(1 for group in rules for rule in group["rules"] if rule["type"] == "alerting")
print(f"check-deploy: a real Prometheus scraped the server: {alerts} alerts and "
      f"{sum(len(g['rules']) for g in rules) - alerts} recording rules evaluated, none firing; "
      f"{len(expressions)} dashboard queries ran; {len(used)} metrics read, all exposed or documented", file=sys.stderr)
