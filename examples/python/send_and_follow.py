#!/usr/bin/env python3
"""Send follow-ups to agent-dispatch over HTTP, follow their status, read their events over SSE.

Standard library only (Python 3.8+). The three calls a service in another language needs:

- ``POST /v1/followups`` with ``INTAKE_TOKEN``: enqueue follow-ups (one request for the batch);
- ``GET /v1/followups/<dispatchId>`` with ``INTAKE_TOKEN``: a follow-up's state;
- ``GET /v1/events/stream`` with ``EVENTS_TOKEN``: completion events as server-sent events,
  resumed after a dropped connection with ``Last-Event-ID`` (the cursor).

Usage::

    AGENT_DISPATCH_URL=http://127.0.0.1:3000 INTAKE_TOKEN=... EVENTS_TOKEN=... \\
      python3 send_and_follow.py --project docs-site --job JOB_ID --prompt "Fix the typo" --prompt "Add a test"

It prints one line per step (``sent``, ``status``, ``event``) and exits 0 once every follow-up
it sent has its completion event, 1 when that takes longer than ``--timeout`` seconds.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


class Client:
    """The intake and the events of one agent-dispatch server."""

    def __init__(self, base_url, intake_token, events_token, timeout=30.0):
        self.base_url = base_url.rstrip("/")
        self.intake_token = intake_token
        self.events_token = events_token
        self.timeout = timeout

    def _request(self, method, path, token, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + token)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as err:
            # Every error answer is JSON: {"error": "...", ...details}; 503 and 429 may be retried.
            detail = err.read().decode("utf-8", "replace")
            raise RuntimeError("%s %s answered %d: %s" % (method, path, err.code, detail)) from None

    def send(self, followups):
        """Enqueues follow-ups in one request; returns [{"dispatchId", "deduplicated"}, ...]."""
        return self._request("POST", "/v1/followups", self.intake_token, {"followups": followups})["results"]

    def status(self, dispatch_id):
        """The follow-up's state: queued, sending, sent, unsettled or done (then with its type)."""
        return self._request("GET", "/v1/followups/" + urllib.parse.quote(dispatch_id, safe=""), self.intake_token)

    def events(self, project=None, last_event_id=None):
        """Yields (cursor, event) for every event after last_event_id, live, reconnecting as needed.

        The cursor is the SSE ``id:``; keep the last one to resume later, exactly where you stopped.
        On each heartbeat it yields (cursor, None), so that a caller can check its own deadline.
        """
        query = urllib.parse.urlencode({"project": project} if project else {})
        while True:
            request = urllib.request.Request(self.base_url + "/v1/events/stream?" + query)
            request.add_header("Authorization", "Bearer " + self.events_token)
            request.add_header("Accept", "text/event-stream")
            if last_event_id:
                request.add_header("Last-Event-ID", last_event_id)
            try:
                # The server sends a heartbeat every 15 s, so a read that waits longer means a dead link.
                with urllib.request.urlopen(request, timeout=60) as response:
                    for cursor, data in _server_sent_events(response):
                        last_event_id = cursor or last_event_id
                        yield last_event_id, None if data is None else json.loads(data)
            except urllib.error.HTTPError as err:
                # A 4xx does not heal by retrying: a wrong token (401), a bad cursor (400), or one the
                # stream was trimmed past (410; its body's "next" goes on from the oldest kept).
                if err.code < 500:
                    sys.exit("events: HTTP %d: %s" % (err.code, err.read().decode("utf-8", "replace")))
                print("events: %s; reconnecting after %s" % (err, last_event_id), file=sys.stderr)
                time.sleep(1)
            except (OSError, urllib.error.URLError) as err:
                print("events: %s; reconnecting after %s" % (err, last_event_id), file=sys.stderr)
                time.sleep(1)


def _server_sent_events(response):
    """Yields (id, data) per frame of a text/event-stream; data is None for an id-only frame or
    a comment (the heartbeat)."""
    event_id, data = None, None
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if event_id is not None or data is not None:
                yield event_id, data
            event_id, data = None, None
        elif line.startswith(":"):
            yield None, None  # a comment: the heartbeat
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event_id = value
            elif field == "data":
                data = value if data is None else data + "\n" + value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", required=True)
    parser.add_argument("--job", required=True, help="the agent job the follow-ups go to")
    parser.add_argument("--prompt", action="append", required=True, help="repeat for several")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    client = Client(
        os.environ.get("AGENT_DISPATCH_URL", "http://127.0.0.1:3000"),
        os.environ["INTAKE_TOKEN"],
        os.environ["EVENTS_TOKEN"],
    )
    deadline = time.monotonic() + args.timeout

    results = client.send([{"projectId": args.project, "jobId": args.job, "prompt": p} for p in args.prompt])
    pending = [r["dispatchId"] for r in results]
    for dispatch_id in pending:
        print("sent", dispatch_id)

    # Follow each one's state until it is done (the event says the same; this is for a dashboard).
    for dispatch_id in pending:
        last = None
        while time.monotonic() < deadline:
            state = client.status(dispatch_id)
            if state["state"] != last:
                last = state["state"]
                print("status", dispatch_id, last, state.get("type") or "")
            if last == "done":
                break
            time.sleep(0.5)

    # The events of this project, from the oldest kept: ours are among them.
    waiting = set(pending)
    for cursor, event in client.events(project=args.project):
        if event is not None and event["dispatchId"] in waiting:
            waiting.discard(event["dispatchId"])
            print("event", event["type"], event["dispatchId"], "cursor=" + cursor)
        if not waiting:
            count = len(pending)
            print("done: %d %s, each with its event" % (count, "follow-up" if count == 1 else "follow-ups"))
            return 0
        if time.monotonic() > deadline:
            break
    print("timed out waiting for events of %s" % ", ".join(sorted(waiting)), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
