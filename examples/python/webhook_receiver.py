#!/usr/bin/env python3
"""A webhook receiver for agent-dispatch, with Python's standard library only.

It verifies each delivery by the Standard Webhooks specification (the signature in constant time,
the timestamp within a tolerance) and prints each event as one JSON line on stdout:

    {"webhook_id": "msg_...", "type": "followup.completed", "dispatchId": "...", "duplicate": false}

Deliveries are at least once: a webhook-id seen before is printed with "duplicate": true, and
answered 2xx again so that the sender stops retrying it.

Usage:
    WEBHOOK_SECRET=whsec_... python3 webhook_receiver.py [--host 127.0.0.1] [--port 8080]
                                                        [--tolerance 300]
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class InvalidWebhook(Exception):
    """A request that is not a valid delivery: the message says why (never the secret)."""


def secret_key(secret):
    """The HMAC key of a secret: the base64-decoded part after whsec_."""
    if not secret.startswith("whsec_"):
        raise ValueError("WEBHOOK_SECRET: expected whsec_ followed by base64")
    return base64.b64decode(secret[len("whsec_"):])


def verify(key, headers, body, tolerance, now=None):
    """Checks one delivery; raises InvalidWebhook unless it is signed with key and recent."""
    webhook_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not webhook_id or not timestamp or not signatures:
        raise InvalidWebhook("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        sent_at = int(timestamp)
    except ValueError:
        raise InvalidWebhook("webhook-timestamp is not Unix seconds")
    if abs((now or time.time()) - sent_at) > tolerance:
        raise InvalidWebhook("webhook-timestamp is outside the tolerance")
    signed = webhook_id.encode() + b"." + timestamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    for part in signatures.split(" "):
        version, _, mac = part.partition(",")
        # compare_digest takes the same time whatever the first differing byte.
        if version == "v1" and hmac.compare_digest(mac.encode(), expected):
            return webhook_id
    raise InvalidWebhook("no valid v1 signature")


def handler_for(key, tolerance):
    seen = set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                webhook_id = verify(key, self.headers, body, tolerance)
                event = json.loads(body)
            except (InvalidWebhook, ValueError) as err:
                print(f"rejected: {err}", file=sys.stderr, flush=True)
                self.send_response(401)
                self.end_headers()
                return
            line = {
                "webhook_id": webhook_id,
                "type": event.get("type"),
                "dispatchId": event.get("dispatchId"),
                "duplicate": webhook_id in seen,
            }
            seen.add(webhook_id)
            print(json.dumps(line), flush=True)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass  # One line per event on stdout is the output; no access log.

    return Handler


def main():
    parser = argparse.ArgumentParser(description="Verifies and prints agent-dispatch webhooks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--tolerance", type=int, default=300, help="seconds of clock skew allowed")
    args = parser.parse_args()
    secret = os.environ.get("WEBHOOK_SECRET", "")
    try:
        key = secret_key(secret)
    except ValueError as err:
        print(f"webhook_receiver: {err}", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer((args.host, args.port), handler_for(key, args.tolerance))
    host, port = server.server_address[:2]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on http://{host}:{port}/", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
