/** The fixed prose of RELIABILITY.md; the figures come from the run. */

/** One category of issue 7. */
export interface Category {
  readonly number: number;
  readonly title: string;
  /** How the drill works and what it checks. */
  readonly method: string;
}

const BOOKS = [
  'The books of every traffic drill: each accepted follow-up has exactly one event on the stream',
  '(none lost, none twice, none for a dispatch nobody accepted); the simulator received no prompt',
  "twice (`simulator.deliveries`); every event that reports a run's outcome (`completed`, `failed`,",
  '`archived`) is for a prompt the simulator did receive, and is the outcome the simulator gave that',
  'run (fixed by the prompt); deliveries to each agent job kept their enqueue order; the namespace',
  'ends idle (nothing tracked, no job pending); every role process is still alive at the end and',
  'exits 0 on SIGTERM.',
].join('\n');

export const CATEGORIES: readonly Category[] = [
  {
    number: 1,
    title: 'Worker crashes',
    method: [
      'Two `agent-dispatch worker` processes and one poller work against the simulator (answers take',
      '0.1–0.5 s, runs 0.3–0.8 s). The follow-ups go in in waves; at a random moment 0.1–1 s after each wave, one of',
      'the two workers, picked at random, gets SIGKILL and a new one is started at once; the other',
      'worker keeps running. `STALLED_TIMEOUT=2s` lets a live worker take over the dead one’s jobs',
      'quickly; a rerun that finds its dispatch `sending` never resends it but leaves it to the poller,',
      "which settles it from the job's status: a run seen `active` after the send means delivered (the",
      "event is the run's outcome); a job never seen active within `ACTIVE_GRACE` ends `undeliverable`",
      'with reason `ambiguous`. Most of those were killed before the API processed them (compare',
      '"accepted" and "deliveries"): without `AMBIGUOUS_RESEND` they end with that event, unsent, by',
      'design.',
      '',
      BOOKS,
    ].join('\n'),
  },
  {
    number: 2,
    title: 'Poller crashes',
    method: [
      'The same drill with two `agent-dispatch poller` processes, one of them SIGKILLed at random after',
      'each wave and restarted, while two workers run undisturbed. A poller killed during its tick',
      'holds the tick lock until it expires (2 s here) and its tick job fails as stalled; the next tick',
      'reads the same due set, and the FINISH script makes a second publication of an event a no-op.',
      '',
      BOOKS,
    ].join('\n'),
  },
  {
    number: 3,
    title: 'Redis restarts',
    method: [
      'A private `redis-server` (AOF on, `appendfsync everysec`, `noeviction`) serves two workers and a',
      'poller that are never restarted, while a producer in the test sends one follow-up every few',
      'milliseconds, each with its own idempotency key. The server is stopped several times at a random',
      'moment, alternately with SIGTERM and SIGKILL, kept down for 0.3–1.5 s and started again on the',
      'same port and data. Sends made while it is down must reject quickly (the producer connection has',
      'no offline queue): they are counted, were not accepted, and are retried with the same key once',
      'Redis is back; a retry that answers `deduplicated` shows Redis had stored the first try after all,',
      'and the books put that follow-up where it was first enqueued. The books cover every send that',
      'resolved plus every retried one. Around each stop a canary writes INCRs as fast as it can and',
      'remembers the highest value Redis acknowledged; after the restart the counter must be at least',
      'that high (see the section on `everysec` below). A second drill puts a proxy between one',
      'worker and Redis that drops the reply of the first ACQUIRE script and cuts the connection, as a',
      'restart right after Redis ran the script would: ioredis resends the command on reconnect, and',
      'the follow-up must still be sent exactly once.',
      '',
      BOOKS,
    ].join('\n'),
  },
  {
    number: 4,
    title: 'Agent-API faults',
    method: [
      'The simulator injects, per request: 30 % 5xx (500/502/503, not processed), 5 % HTML 502 pages,',
      '10 % timeouts after processing (no answer; `SEND_TIMEOUT=1s`), 5 % connection resets after',
      'processing, 5 % malformed JSON in 200 answers, 10 % unknown status values (`queued_v3`) on reads.',
      'Every 0.5 s a chaos tick changes the rest: 429 bursts on a random project with or without',
      '`Retry-After`, as JSON or plain text; slow bodies (two chunks 300 ms or 1.5 s apart); phases where',
      'every answer is slower than `SEND_TIMEOUT` (sends abandoned before the API processed them). Two',
      'workers and a poller, `SEND_ATTEMPTS=6`, once with `AMBIGUOUS_RESEND=false` and once with `true`.',
      'Promise 3 is checked on the simulator’s own record: without the opt-in no prompt arrives twice,',
      "and every prompt that did arrive ends as its run's outcome or as `undeliverable` with reason",
      '`ambiguous` (never as a send failure); with the opt-in a prompt may arrive twice only if its first',
      'delivery got no answer (timeout or reset) and the poller never saw the run, which is the risk the',
      'operator accepts. A second drill makes the status reads of one agent job hang (a gateway in',
      'front of the simulator never answers them) and measures how long the events of other jobs take.',
      '',
      BOOKS,
    ].join('\n'),
  },
  {
    number: 5,
    title: 'Bad input',
    method: [
      'fast-check generates follow-ups around every rule (ids and keys: empty, blank, 200/201',
      'characters, control characters, lone surrogates, wrong types; prompts: empty, around',
      '`PROMPT_MAX_BYTES` in 1-, 2-, 3- and 4-byte characters, lone surrogates; `meta`: JSON objects',
      'around 4096 bytes, arrays, strings, `NaN`, functions, dates; unknown fields; missing fields; not an',
      'object at all). An oracle written in the test from the contract decides validity, independently',
      'of the producer’s schema: ids and keys are 1–200 characters (code points) of well-formed Unicode',
      'without control characters and not blank; the prompt is well-formed, 1 character to',
      '`PROMPT_MAX_BYTES` UTF-8 bytes; `meta` is a plain JSON object of at most 4096 bytes; no other',
      'field. Entry points: `send()` and `sendMany()` in process, `agent-dispatch enqueue --file` with',
      'generated NDJSON files (plus broken JSON, blank lines and 1 MiB lines), and `POST /v1/followups`',
      'over real HTTP (`startHttpServer` as `serve` wires it) with single follow-ups, bare and wrapped',
      'batches and broken bodies, plus a body over the limit (413), a batch over 1000, a wrong content',
      'type (415) and a wrong token (401). Every invalid input must be refused with an error naming',
      'exactly the fields the oracle names (and, for an oversized prompt, the byte limit); a batch is',
      'all or nothing; every valid input is accepted. Then Redis is audited: exactly one dispatch record',
      'and one BullMQ job per accepted dispatch and nothing else, each record holding exactly what was',
      'sent. "Lost" counts valid inputs refused, "duplicated" invalid inputs enqueued.',
    ].join('\n'),
  },
  {
    number: 6,
    title: 'Poison jobs',
    method: [
      'Jobs written straight into the dispatch queue with a bare BullMQ `Queue.add` (3 attempts each),',
      'bypassing the producer, with one `agent-dispatch worker` running: payloads the consumer cannot',
      'read, a payload whose record is missing, records it must not send, and a replay for a dispatch',
      'that already ended. Each must end with exactly one `followup.undeliverable` event naming the',
      'reason (the replay: no new event, its dispatch already has one), its job must complete after a',
      'single run (no retry, no stall: no crash loop), and the worker must still be up and exit 0.',
    ].join('\n'),
  },
  {
    number: 7,
    title: 'The key stays secret',
    method: [
      'With a random `AGENT_API_KEY`, `INTAKE_TOKEN` and `DASHBOARD_TOKEN`, two workers, a poller,',
      '`serve` and `start` run as CLI processes at `LOG_LEVEL=debug`, plus one-shot `enqueue` and',
      '`status`, through the API faults of category 4, a worker SIGKILL and a Redis SIGKILL. The API',
      'sits behind a test gateway that answers one request in ten itself with an error whose body',
      'repeats the `Authorization` header (plain text 502, JSON 429, HTML 503). Follow-ups come in',
      'through the producer, both intakes (with bad bodies and a wrong token too) and the CLI. Then the',
      'three secrets, as they are and in base64, are searched for in every line every process wrote',
      '(stdout and stderr), in every key of the Redis and its value read by type (`SCAN`, then',
      '`GET`/`HGETALL`/`LRANGE`/`SMEMBERS`/`ZRANGE`/`XRANGE`: BullMQ’s keys, the records, the',
      'events stream), in the dashboard (its page, the `?token=` redirect, `/dashboard/api/queues` in',
      'every status, job details, workers, Redis stats) and `/metrics`, `/healthz`, `/readyz` of both',
      'servers, and in every error message the test saw (producer errors during the outage, intake',
      'error answers).',
    ].join('\n'),
  },
];

/** What the columns of a figures table count. */
export const LEGEND = [
  '"Tried": follow-ups (or generated inputs) put through the drill. "Lost": accepted follow-ups',
  'without a terminal event, or valid inputs refused. "Duplicated": prompts the API received twice',
  'plus events published twice (for bad input: invalid inputs that reached Redis). "Leaked": places',
  'a secret was found in. With `AMBIGUOUS_RESEND=true` the duplicates are resends of sends left in',
  'doubt whose first delivery the poller never saw: the risk that setting accepts (category 4).',
].join('\n');

export const AOF_BOUND = [
  '## What Redis with `appendfsync everysec` can lose',
  '',
  'Redis appends every write to its AOF buffer and `write(2)`s that buffer to the kernel in',
  '`beforeSleep`, before it sends the replies of the same event-loop turn (`flushAppendOnlyFile`',
  'runs before `handleClientsWithPendingWrites`). So when only the `redis-server` process dies',
  '(SIGKILL, a crash, an OOM kill), an acknowledged write is already in the kernel’s page cache and',
  'survives: the canary of category 3 found no acknowledged INCR missing after any SIGKILL or SIGTERM',
  'restart. What `everysec` leaves unprotected is the page cache itself: the background `fsync`',
  'runs once a second, so a machine crash (power loss, kernel panic, a VM killed by its host) loses',
  'the writes of up to about the last second. One exception tightens both statements: when an',
  '`fsync` is still running (a slow or busy disk), Redis postpones the `write(2)` for up to 2 s while',
  'still sending replies, so then up to 2 s of acknowledged writes sit in Redis’s own memory, where',
  'even a process kill loses them, and a machine crash can lose up to about 2 s (Redis counts the',
  'postponements that reached 2 s in `INFO persistence`, `aof_delayed_fsync`). For agent-dispatch a',
  'lost write is a `send` that answered but whose dispatch is gone; a producer that must survive a',
  'machine crash too needs `appendfsync always` (every write fsynced before its reply) or a replica',
  'and `WAIT`.',
].join('\n');

export const HOW_TO_RUN = [
  '## Running it',
  '',
  '`npm run test:faults` runs the suite at the CI size (about six minutes on a 2-core machine);',
  '`FAULTS_SCALE=full npm run test:faults` runs the sizes of issue 7. The suite needs',
  '`redis-server` on the PATH (or a Redis from testcontainers or `REDIS_URL`, as the main suite) and',
  'starts its own private `redis-server` for the drills that restart Redis and scan all of it. It',
  'writes this file at the end of a run that covered all seven categories; `FAULTS_REPORT=path`',
  'writes it elsewhere. Each test records its figures before asserting on them, so a failed drill',
  'still shows its numbers here.',
].join('\n');
