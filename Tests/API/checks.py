"""Schemathesis checks of Parley's REST API beyond the document's conformance (loaded with SCHEMATHESIS_HOOKS).

- `parley_no_server_error`: no answer is a 5xx, but the documented 501 `ERR_NOT_IMPLEMENTED` for a method the
  document does not declare at that path (TRACE, or any method the API does not have): an HTTP server may not know a
  method, and says so.
- `parley_nothing_crosses`: no answer, whatever its status, carries a marker only another app's data or another user's
  private conversation holds (api_test.py plants them: random words no generator can produce, in message texts, names,
  descriptions and metadata, and names them in PARLEY_API_TEST_FORBIDDEN, one per line).
- Generated strings past a field's byte limit (`x-parley-max-bytes` in the document: the server counts UTF-8 bytes,
  JSON Schema's `maxLength` counts characters) are dropped before they are sent, so that every string sent is one the
  document allows.
"""

import os

import schemathesis

FORBIDDEN = [line for line in os.environ.get("PARLEY_API_TEST_FORBIDDEN", "").splitlines() if line]


def _declared_methods(case):
    """The methods the document declares at the case's path."""
    operation = case.operation
    paths = operation.schema.raw_schema.get("paths", {})
    item = paths.get(operation.path, {})
    return {method.upper() for method in item if method in {"get", "put", "post", "delete", "patch", "head", "options"}}


@schemathesis.check
def parley_no_server_error(ctx, response, case):
    status = response.status_code
    if status < 500:
        return None
    if status == 501:
        try:
            code = response.json().get("error", {}).get("code")
        except Exception:
            code = None
        if code == "ERR_NOT_IMPLEMENTED" and case.method.upper() not in _declared_methods(case):
            return None
    raise AssertionError(f"{case.method} {case.path} answered {status}: {response.text[:300]}")


@schemathesis.check
def parley_nothing_crosses(ctx, response, case):
    text = response.text or ""
    for marker in FORBIDDEN:
        if marker in text:
            raise AssertionError(
                f"{case.method} {case.formatted_path} answered {response.status_code} with data of another app or "
                f"another user's private conversation (marker {marker!r}): {text[:300]}"
            )
    return None


def _resolved(node, root):
    """`node`, or what its local `$ref` (`#/...`) points to."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if not (isinstance(ref, str) and ref.startswith("#/")):
        return node
    target = root
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, dict) else {}
    return target


def _within_bytes(value, schema, root, depth=0):
    """Whether every string of `value` is within the byte limit its schema declares."""
    schema = _resolved(schema, root)
    if depth > 12 or not isinstance(schema, dict):
        return True
    if isinstance(value, str):
        limit = schema.get("x-parley-max-bytes")
        return limit is None or len(value.encode("utf-8", "surrogatepass")) <= limit
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []) or []:
            if not _within_bytes(value, sub, root, depth + 1):
                return False
    if isinstance(value, dict):
        properties = schema.get("properties", {}) or {}
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            sub = properties.get(name, extra if isinstance(extra, dict) else None)
            if sub is not None and not _within_bytes(item, sub, root, depth + 1):
                return False
    if isinstance(value, list):
        items = schema.get("items")
        for item in value:
            if not _within_bytes(item, items, root, depth + 1):
                return False
    return True


def _parameters_within_bytes(ctx, values, location):
    if not values:
        return True
    operation = ctx.operation
    root = operation.schema.raw_schema
    shared = root.get("paths", {}).get(operation.path, {}).get("parameters", [])
    for parameter in operation.definition.raw.get("parameters", []) + shared:
        parameter = _resolved(parameter, root)
        if not isinstance(parameter, dict) or parameter.get("in") != location:
            continue
        name = parameter.get("name")
        if name in values and not _within_bytes(values[name], parameter.get("schema", {}), root):
            return False
    return True


@schemathesis.hook
def filter_path_parameters(ctx, path_parameters):
    return _parameters_within_bytes(ctx, path_parameters, "path")


@schemathesis.hook
def filter_query(ctx, query):
    return _parameters_within_bytes(ctx, query, "query")


@schemathesis.hook
def filter_body(ctx, body):
    operation = ctx.operation
    root = operation.schema.raw_schema
    content = _resolved(operation.definition.raw.get("requestBody", {}), root)
    schema = content.get("content", {}).get("application/json", {}).get("schema")
    return schema is None or _within_bytes(body, schema, root)
