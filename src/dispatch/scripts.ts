/**
 * The Lua scripts behind every multi-key change of a dispatch. Each runs atomically, so a state
 * change and what must go with it (a budget entry, a lane release, the stream entry) happen
 * together or not at all. Times come from Redis (`TIME`), one clock for the whole fleet.
 *
 * Every key a script touches is passed in KEYS, so a `{hash-tag}` prefix keeps them in one slot.
 */

const NOW = `local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * KEYS: record, lane, open. ARGV: dispatchId, projectId, jobId, prompt, key, meta, digest (of the
 * content, computed by the producer). → 1 new, 0 exists with the same digest, -1 exists with
 * another: the idempotency key was used for a different follow-up. The digest outlives the prompt
 * (FINISH deletes that), so a conflict is seen until the record expires; a record written before
 * digests were stored has none and counts as the same. A new dispatch joins the open index
 * (scored by its enqueue time) until FINISH.
 */
export const REGISTER = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  local digest = redis.call('HGET', KEYS[1], 'digest')
  if digest and digest ~= ARGV[7] then return -1 end
  return 0
end
${NOW}
redis.call('HSET', KEYS[1], 'projectId', ARGV[2], 'jobId', ARGV[3], 'prompt', ARGV[4],
  'key', ARGV[5], 'meta', ARGV[6], 'digest', ARGV[7], 'state', 'queued', 'enqueuedAt', now,
  'attempts', 0, 'polls', 0)
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], now, ARGV[1])
return 1`;

/**
 * Decides whether a queued dispatch may be sent now, and if so records the intent and spends one
 * unit of the project's budget in the same step.
 * KEYS: record, lane, budget, park, tracked, authPause. ARGV: dispatchId, max, windowMs,
 * toleranceMs, firstPollMs, attemptToken.
 *
 * A dispatch is tracked from the moment its intent is recorded: if its worker dies mid-send, the
 * poller has already been watching the job, and whether it turned active settles the send.
 * → {verdict, n, text, probe}: go (n = attempt, text = prompt; probe = 1 when it is the fleet's
 *   probe of a rejected key), blocked, auth_paused (n = next probe time), parked (n = until),
 *   over (n = until), missing, sending (n = when that attempt started, text = its token), or the
 *   record's state when not queued.
 *
 * The attempt token makes it safe to run twice: ioredis resends a command whose reply was lost
 * with its connection, and the worker retries it on a connection error. The attempt that holds
 * the intent gets `go` again, with the same attempt number and no budget spent; any other gets
 * `sending`.
 *
 * While the key is rejected (see AUTH_PAUSE), every send waits for the probe time; the first
 * ACQUIRE that would send once it has come is the probe, and it moves the next probe time
 * ahead by a backoff that doubles up to `maxBackoffMs`, so exactly one send of the fleet tries
 * the key per backoff.
 *
 * The budget is a sliding-window log: one entry per send, scored by its time, so no window of
 * `windowMs`, wherever it starts, holds more than `max` entries. A dispatch that finds no room
 * reserves the earliest slot that keeps that true (an entry `r:<id>` in the future) and waits for
 * it; waking, it spends exactly that slot. So a backlog is woken once per slot, in order, instead
 * of all at once every time a slot frees. A reservation woken later than `toleranceMs` (a worker
 * was busy, or a 429 parked the project meanwhile) is dropped and taken again.
 */
export const ACQUIRE = `
local function keepAtLeast(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'missing', 0, ''} end
if state == 'sending' then
  local holder = redis.call('HGET', KEYS[1], 'attemptToken') or ''
  if ARGV[6] ~= '' and holder == ARGV[6] then
    return {'go', tonumber(redis.call('HGET', KEYS[1], 'attempts')), redis.call('HGET', KEYS[1], 'prompt') or ''}
  end
  return {state, tonumber(redis.call('HGET', KEYS[1], 'sendingAt') or '0'), holder}
end
if state ~= 'queued' then return {state, 0, ''} end
if redis.call('LINDEX', KEYS[2], 0) ~= ARGV[1] then return {'blocked', 0, ''} end
${NOW}
local probeAt = tonumber(redis.call('HGET', KEYS[6], 'probeAt') or '0')
if probeAt > now then return {'auth_paused', probeAt, ''} end
local parked = tonumber(redis.call('GET', KEYS[4]) or '0')
if parked > now then return {'parked', parked, ''} end
local max, window, tolerance = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
local slot = now
local reservation = 'r:' .. ARGV[1]
local reserved = redis.call('ZSCORE', KEYS[3], reservation)
if reserved then
  reserved = tonumber(reserved)
  if reserved > now then return {'over', reserved, ''} end
  redis.call('ZREM', KEYS[3], reservation)
  if now - reserved > tolerance then reserved = nil else slot = reserved end
end
if not reserved then
  local n = redis.call('ZCARD', KEYS[3])
  local last = now
  if n > 0 then
    last = tonumber(redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2])
    if last > slot then slot = last end
  end
  if n >= max then
    local pivot = tonumber(redis.call('ZRANGE', KEYS[3], n - max, n - max, 'WITHSCORES')[2]) + window
    if pivot > slot then slot = pivot end
    -- Pace a backlog: a reservation comes at least window/max after the latest entry, so a
    -- window's reservations do not all fall due in the same instant (they would mirror the first
    -- window's burst and wake together). The rate stays max per window.
    local paced = last + math.ceil(window / max)
    if paced > slot then slot = paced end
  end
  if slot > now then
    redis.call('ZADD', KEYS[3], slot, reservation)
    keepAtLeast(KEYS[3], slot - now + window + 60000)
    return {'over', slot, ''}
  end
end
local attempt = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('ZADD', KEYS[3], slot, ARGV[1] .. ':' .. attempt)
keepAtLeast(KEYS[3], window + 60000)
redis.call('HSET', KEYS[1], 'state', 'sending', 'sendingAt', now, 'seenActive', '0', 'resend', '0',
  'attemptToken', ARGV[6])
redis.call('ZADD', KEYS[5], now + tonumber(ARGV[5]), ARGV[1])
local probe = 0
if probeAt > 0 then
  probe = 1
  local pause = redis.call('HMGET', KEYS[6], 'backoffMs', 'maxBackoffMs')
  local backoff = math.min(2 * tonumber(pause[1]), tonumber(pause[2]))
  redis.call('HSET', KEYS[6], 'probeAt', now + backoff, 'backoffMs', backoff)
end
return {'go', attempt, redis.call('HGET', KEYS[1], 'prompt') or '', probe}`;

/**
 * Records that a send happened (state `sent`) or may have happened (`unsettled`) and starts
 * tracking it. The send time is the intent's time: the job may have started any time after it.
 * Only for the attempt that holds the intent (its token): a late answer of an earlier attempt
 * changes nothing. A definite answer turns `unsettled` (marked by a rerun on this attempt's
 * behalf, or by its own crash handling) into `sent`; run twice, it finds its own state and does
 * nothing more.
 * KEYS: record, tracked. ARGV: dispatchId, newState, jobJson, status, seenActive, firstDelayMs,
 * attemptToken.
 * → 1 (recorded, or already so), 0 when the record had moved on (another state), -1 when another
 *   attempt holds it.
 */
export const MARK_SENT = `
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'sending' and state ~= 'unsettled' and state ~= 'sent' then return 0 end
if (redis.call('HGET', KEYS[1], 'attemptToken') or '') ~= ARGV[7] then return -1 end
if state == ARGV[2] then return 1 end
if state ~= 'sending' and not (state == 'unsettled' and ARGV[2] == 'sent') then return 0 end
${NOW}
local sentAt = redis.call('HGET', KEYS[1], 'sendingAt') or now
-- The poller may have seen the job active while the request was in flight: keep that.
local seenActive = ARGV[5]
if redis.call('HGET', KEYS[1], 'seenActive') == '1' then seenActive = '1' end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'sentAt', sentAt, 'job', ARGV[3], 'lastStatus', ARGV[4],
  'seenActive', seenActive, 'pollDelayMs', ARGV[6])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[1])
return 1`;

/**
 * Puts a dispatch whose send certainly did not go through back to `queued`, from `sending` (a
 * failed attempt) or `unsettled` (an operator-approved resend). `refund` gives the budget entry
 * back when the request never left; `parkMs` parks the whole project (after a 429).
 * A failed attempt stops being tracked: its BullMQ job retries it. A resend stays tracked and is
 * marked, so the poller adds its new BullMQ job again if it died before adding it.
 * Only for the attempt that holds the intent (its token).
 * KEYS: record, budget, park, tracked. ARGV: dispatchId, attempt, refund, parkMs, attemptToken.
 * → the park deadline (0 when not parked), -1 when the record was in another state, or -2 when
 *   another attempt holds it.
 */
export const REQUEUE = `
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'sending' and state ~= 'unsettled' then return -1 end
if (redis.call('HGET', KEYS[1], 'attemptToken') or '') ~= ARGV[5] then return -2 end
redis.call('HSET', KEYS[1], 'state', 'queued')
if state == 'sending' then
  redis.call('ZREM', KEYS[4], ARGV[1])
else
  redis.call('HSET', KEYS[1], 'resend', '1')
end
if ARGV[3] == '1' then redis.call('ZREM', KEYS[2], ARGV[1] .. ':' .. ARGV[2]) end
local parkMs = tonumber(ARGV[4])
if parkMs <= 0 then return 0 end
${NOW}
local untilMs = now + parkMs
local current = tonumber(redis.call('GET', KEYS[3]) or '0')
if untilMs > current then
  redis.call('SET', KEYS[3], untilMs, 'PX', parkMs + 1000)
  return untilMs
end
return current`;

/**
 * Pauses every send of the fleet after the agent API rejected the key (401/403) or redirected
 * (3xx: `AGENT_API_URL` is wrong). Only the first rejection starts the pause (its caller logs it,
 * once for the fleet); later ones find it on and change nothing. The first probe comes
 * `firstBackoffMs` after the start. It stays until a probe gets another answer (no TTL: a
 * rejected key stays rejected however long nobody sends).
 * KEYS: authPause. ARGV: httpStatus, firstBackoffMs, maxBackoffMs. → {started (1/0), probeAt}.
 */
export const AUTH_PAUSE = `
local probeAt = redis.call('HGET', KEYS[1], 'probeAt')
if probeAt then return {0, tonumber(probeAt)} end
${NOW}
local first = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'since', now, 'httpStatus', ARGV[1], 'probeAt', now + first,
  'backoffMs', first, 'maxBackoffMs', ARGV[3])
return {1, now + first}`;

/**
 * Claims the probe of a paused fleet for a status read (the poller's probe), as ACQUIRE does for
 * a send: when the probe time has come, moves the next one ahead by the doubled backoff.
 * KEYS: authPause. → -1 not paused, 0 paused and not yet time, 1 this caller probes.
 */
export const CLAIM_PROBE = `
local probeAt = tonumber(redis.call('HGET', KEYS[1], 'probeAt') or '0')
if probeAt == 0 then return -1 end
${NOW}
if probeAt > now then return 0 end
local pause = redis.call('HMGET', KEYS[1], 'backoffMs', 'maxBackoffMs')
local backoff = math.min(2 * tonumber(pause[1]), tonumber(pause[2]))
redis.call('HSET', KEYS[1], 'probeAt', now + backoff, 'backoffMs', backoff)
return 1`;

/**
 * Ends a dispatch: marks it done, publishes its one event, stops tracking it and releases its lane,
 * all at once, so a crash cannot leave an event without its release or the reverse. Running it a
 * second time for the same dispatch does nothing: exactly one event.
 * The record keeps what the event says (type, reason, the last agent job and its status) for
 * `retentionMs`, so `status` answers after the end; only the prompt is deleted.
 * KEYS: record, lane, tracked, stream, open. ARGV: dispatchId, expectedState ('' = any), finishedAt,
 * type, reason, retentionMs, maxLen, jobJson ('' = keep), lastStatus ('' = keep), then the
 * stream entry's field/value pairs.
 * → {1, nextDispatchId or '', entryId} or {0, '', ''}.
 */
export const FINISH = `
local state = redis.call('HGET', KEYS[1], 'state')
if not state or state == 'done' then return {0, '', ''} end
if ARGV[2] ~= '' and ARGV[2] ~= state then return {0, '', ''} end
redis.call('HSET', KEYS[1], 'state', 'done', 'finishedAt', ARGV[3], 'type', ARGV[4], 'reason', ARGV[5])
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'job', ARGV[8]) end
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'lastStatus', ARGV[9]) end
redis.call('HDEL', KEYS[1], 'prompt')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
if redis.call('LINDEX', KEYS[2], 0) == ARGV[1] then
  redis.call('LPOP', KEYS[2])
else
  redis.call('LREM', KEYS[2], 1, ARGV[1])
end
local entry = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', unpack(ARGV, 10))
local nextId = redis.call('LINDEX', KEYS[2], 0) or ''
return {1, nextId, entry}`;

/**
 * Moves a tracked dispatch's next status read `delayMs` ahead and stores what the read saw.
 * KEYS: record, tracked. ARGV: dispatchId, delayMs, then field/value pairs for the record.
 * → 1, or 0 when it is no longer tracked (another poller finished it).
 */
export const RESCHEDULE = `
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
${NOW}
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[2]), ARGV[1])
-- The poller decided from a snapshot read before its GET; meanwhile MARK_SENT may have set
-- seenActive from the send's answer. Seen active is a fact once true: never take it back.
local seenActive = redis.call('HGET', KEYS[1], 'seenActive')
if #ARGV > 2 then redis.call('HSET', KEYS[1], unpack(ARGV, 3)) end
if seenActive == '1' then redis.call('HSET', KEYS[1], 'seenActive', '1') end
return 1`;

/**
 * Claims the tracked dispatches due now, oldest first: each is moved `leaseMs` ahead, so a read
 * still in flight at the next tick is not started twice, and one whose poller died is due again
 * once the lease lapses. Acting on a read moves it again (reschedule) or removes it (finish).
 * KEYS: tracked. ARGV: limit, leaseMs. → {now, id...}.
 */
export const DUE = `
${NOW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local leased = now + tonumber(ARGV[2])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], 'XX', leased, id) end
table.insert(ids, 1, now)
return ids`;

/**
 * Names the BullMQ job that now carries a queued dispatch (record field `bullJobId`; absent = the
 * dispatch id), if the record still names `expected` (compare and set, so two sweeps or a rerun
 * cannot both replace the same job). `expected` '' = any: the poller's resend, which also runs
 * while the resend is pending; a repair (`expected` given) leaves a pending resend to the resend.
 * KEYS: record. ARGV: dispatchId, expected, bullJobId. → 1 set, 0 not.
 */
export const CARRY = `
if redis.call('HGET', KEYS[1], 'state') ~= 'queued' then return 0 end
if ARGV[2] ~= '' then
  if redis.call('HGET', KEYS[1], 'resend') == '1' then return 0 end
  if (redis.call('HGET', KEYS[1], 'bullJobId') or ARGV[1]) ~= ARGV[2] then return 0 end
  redis.call('HINCRBY', KEYS[1], 'repairs', 1)
end
redis.call('HSET', KEYS[1], 'bullJobId', ARGV[3])
return 1`;

/** KEYS: record, lane. ARGV: dispatchId. → 1 when it is queued and at the head of its lane. */
export const IS_NEXT = `
if redis.call('HGET', KEYS[1], 'state') ~= 'queued' then return 0 end
if redis.call('LINDEX', KEYS[2], 0) == ARGV[1] then return 1 end
return 0`;

/**
 * Publishes the event of a BullMQ job that has no dispatch record (a payload this version cannot
 * read). The marker makes a rerun of the same job publish nothing more.
 * KEYS: marker, stream. ARGV: retentionMs, maxLen, then the entry's field/value pairs. → 1 or 0.
 */
export const ORPHAN = `
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', tonumber(ARGV[1])) then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
return 1`;
