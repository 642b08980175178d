"""Schemathesis hooks of the contract check (scripts/contract.sh, SCHEMATHESIS_HOOKS=contract_hooks).

Every generated Desk webhook is signed with the webhook secret the gateway checks (CONTRACT_WEBHOOK_SECRET), so the
generated events get past the signature to the inbox and the processor: odd shapes, strings and numbers in every
field of an event, which must be stored and then applied or set aside, never answered 5xx or retried forever.
"""
import hashlib
import hmac
import json
import os

import schemathesis
from schemathesis.core import NOT_SET

SECRET = os.environ.get("CONTRACT_WEBHOOK_SECRET", "").encode()


@schemathesis.hook
def before_call(context, case, kwargs):
    if not SECRET or case.operation.path != "/v1/webhooks/desk":
        return
    body = case.body
    if body is NOT_SET:
        raw = b""
    elif isinstance(body, (bytes, bytearray)):
        raw = bytes(body)
    else:
        raw = json.dumps(body).encode()
    # Sent as these exact bytes, so the signature covers what the gateway reads.
    kwargs["data"] = raw
    kwargs["json"] = None
    headers = dict(case.headers or {})
    headers["x-hub-signature"] = "sha1=" + hmac.new(SECRET, raw, hashlib.sha1).hexdigest()
    headers.setdefault("Content-Type", "application/json")
    case.headers = headers
