--[[
  Decides whether a queued dispatch may be sent now, and if so records the intent and spends one
  unit of the project's budget in the same step.

  A dispatch is tracked from the moment its intent is recorded: if its worker dies mid-send, the
  poller has already been watching the job, and whether it turned active settles the send.

  The attempt token makes it safe to run twice: ioredis resends a command whose reply was lost
  with its connection, and the worker retries it on a connection error. The attempt that holds
  the intent gets `go` again, with the same attempt number and no budget spent; any other gets
  `sending`.

  While the key is rejected (see pauseSends-1.lua), every send waits for the probe time; the first
  ACQUIRE that would send once it has come is the probe, and it moves the next probe time ahead by
  a backoff that doubles up to `maxBackoffMs`, so exactly one send of the fleet tries the key per
  backoff.

  The budget is a sliding-window log: one entry per send, scored by its time, so no window of
  `windowMs`, wherever it starts, holds more than `max` entries. A dispatch that finds no room
  reserves the earliest slot that keeps that true (an entry `r:<id>` in the future) and waits for
  it; waking, it spends exactly that slot. So a backlog is woken once per slot, in order, instead
  of all at once every time a slot frees. A reservation woken later than `toleranceMs` (a worker
  was busy, or a 429 parked the project meanwhile) is dropped and taken again.

  An operator's controls of the project (its controls key, see projectPause-3.lua and
  projectLimit-3.lua) are read here, so every worker honours them from its next ACQUIRE: a paused
  project answers `paused` before anything is spent; a project limit replaces the dispatch's max,
  windowMs and toleranceMs. The log keeps entries for the longer of the two windows, so the
  default holds again at once when a limit is cleared; only the entries inside the window in
  force are counted against it.

  The ACQUIREs a worker asks for at about the same time go in one call (see store/acquire.ts),
  each as if it ran alone, in the order given. What no ACQUIRE writes is read once per call: the
  send pause, and each project's controls and park. The tracked set gets one ZADD per call (see
  includes/per-call.lua). An item's error (a key of the wrong type, a limit, park or log entry out of
  range) is its own answer, raised before its first write (includes/acquire-reads.lua).

  A reservation is looked up in the log only when the record says it holds one (its field
  `reserved`, written with the reservation and dropped when it is spent): most ACQUIREs never
  reserved, and skip the ZSCORE.

  With ORG_RATE_LIMIT, a send granted by its project's budget also needs a slot of the
  organization's (this shard's share of it): see includes/org.lua. Waiting for one, it answers
  `over` and spends nothing of its project's budget.

  Input:
    KEYS[1] tracked set
    KEYS[2] send pause
    KEYS[3] the org budget log (this shard's), KEYS[4] its holders (a project's one reservation)
    then seven keys per dispatch, the i-th's from KEYS[5 + 7 (i - 1)]:
      record
      its project's lane heads (a lane of one; see includes/lane.lua)
      its lane (a lane of two or more)
      its project's budget (with BUDGET_SCOPE=split, a creation's: its project's creation log)
      its project's park
      its project's controls
      its prompt

    ARGV[1] how many dispatches (n)
    ARGV[2] the prefix of every record key (a lane head's record is that prefix and its id)
    ARGV[3] largest prompt that may be sent, in bytes (PROMPT_MAX_BYTES; 0 = no limit)
    ARGV[4..6] the org budget's max (0: no org limit), windowMs and toleranceMs
    then seven arguments per dispatch, the i-th's from ARGV[7 + 7 (i - 1)]:
      dispatchId
      max sends per window (the default: SEND_RATE_LIMIT; a creation's when split: CREATE_RATE_LIMIT)
      windowMs (the default's, margin included)
      toleranceMs (the default's)
      firstPollMs
      attemptToken
      jobId (the lane's field in its lane heads)

  Output: for each dispatch, {verdict, n, text, probe, now}
    go          n = attempt, text = prompt, probe = 1 when it is the fleet's probe of a rejected key,
                now = Redis's time, then by when (Redis's time) the request must be written: later,
                it could arrive outside the budget's margin, and the worker gives the grant back;
                then the agent job to send to ('' = create one: a creation, see
                dispatch/creation.ts; a chained follow-up's is its creation's new job)
    no_job      a follow-up chained to a creation that ended without a job: nothing is spent
    blocked     another dispatch heads the lane (heads with no record are dropped first)
    invalid     n = the prompt's size in bytes: empty, or over ARGV[3]; nothing is spent
    expired     n = its deadline (the record's `expiresAt`), passed: it must not be sent; nothing
                is spent (FINISH gives back a slot it reserved)
    auth_paused n = next probe time
    paused      the operator paused the project
    parked      n = until, or its deadline when that comes first (it then wakes to end expired)
    over        n = until (the reserved slot), or its deadline when that comes first
    missing     no record
    sending     n = when that attempt started, text = its token
    <state>     the record's state when not queued
    or an error reply `ITEM <key> <why>`: this dispatch wrote nothing (includes/per-call.lua); the
    org's keys broken, every dispatch of the call answers it
]]
local trackedKey, pauseKey = KEYS[1], KEYS[2]
local n, recordPrefix, promptMaxBytes = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])

--- @include "includes/lane"
--- @include "includes/now"
--- @include "includes/per-call"
--- @include "includes/acquire-reads"
--- @include "includes/open-counts"
local countsKey = shardKeyOf(trackedKey, 'tracked', 'counts:open')
--- @include "includes/org"

local function acquire(k, a)
  local recordKey, headsKey, laneKey, budgetKey, parkKey, controlsKey, promptKey =
    KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]
  local dispatchId, token, jobId = ARGV[a], ARGV[a + 5], ARGV[a + 6]
  local max, window, tolerance = checkedRate(recordKey, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
  local keepFor = window
  local firstPollMs = tonumber(ARGV[a + 4])

  -- One read of the fields it decides on; the prompt once it is known to be queued or held.
  local stored = callOn('HMGET', recordKey, 'state', 'attemptToken', 'attempts', 'sendingAt',
    'reserved', 'projectId', 'expiresAt', 'kind', 'after', 'target')
  local state = stored[1]
  if not state then return {'missing', 0, ''} end
  if state == 'sending' then
    local holder = stored[2] or ''
    if token ~= '' and holder == token then
      -- Checked as a fresh ACQUIRE checks it: an attempt that is no number would end the reply
      -- there, and the worker would send without an attempt or a prompt.
      local attempt = numberIn(recordKey, 'attempts', stored[3] or '', 1, MAX_SENDS, true)
      -- Its slot is at least a tolerance before the intent: written by then, it is within margin.
      -- (An intent stored later than now counts from now: the deadline is never later.)
      local controls = readControls(controlsKey)
      local since = tonumber(stored[4]) or now
      if not (since <= now) then since = now end
      local writeBy = since + math.min(controls[2] and controls[4] or tolerance,
        orgMax > 0 and orgTolerance or math.huge)
      local to = stored[8] == 'create' and '' or stored[10] or jobId
      return {'go', attempt, redis.call('GET', promptKey) or '', 0, now, writeBy, to}
    end
    return {state, tonumber(stored[4] or '0'), holder}
  end
  if state ~= 'queued' then return {state, 0, ''} end
  -- Everything below that could raise is read and checked here, before the first write.
  local attempts = numberIn(recordKey, 'attempts', stored[3] or '0', 0, MAX_SENDS, true)
  -- Read now, not only when it may go: its GET fails a key of the wrong type before any write.
  local text = callOn('GET', promptKey) or ''
  -- The log's latest entry, as read before any write of the log (false once it is written).
  local top = checkBudget(budgetKey)
  orgCheck()
  local controls, parked, pause = readControls(controlsKey), readPark(parkKey), readPause(pauseKey)
  -- A lane head whose record is gone (deleted by hand, or lost with a Redis crash) would block its
  -- agent job for ever: it is dropped, and the next head takes its turn. Records share the lane's
  -- prefix (and hash tag), so the head's record key is built from ARGV[2].
  local drops, head = laneWalk(recordPrefix, headsKey, laneKey, jobId, dispatchId)
  -- Where the prompt goes: '' creates a job (a creation); a follow-up chained to a creation goes
  -- to the job it created, read when its turn has come (the creation then ended), or has none.
  -- The FINISH of the one before it in the lane (the creation, or a chained follow-up that learned
  -- the job), or a REGISTER after the creation ended, wrote that job onto the chained record, which
  -- outlives the creation's (DISPATCH_RETENTION); a creation's record gone is `creation_expired`.
  local to, noJob = jobId, 'no_job'
  if stored[8] == 'create' then to = '' end
  if stored[9] and head == dispatchId then
    to = stored[10]
    if not to then
      local creation = callOn('HMGET', recordPrefix .. stored[9], 'state', 'target')
      to = creation[2]
      if not creation[1] then noJob = 'creation_expired' end
    end
  end
  for _ = 1, drops do laneAdvance(headsKey, laneKey, jobId) end
  if head ~= dispatchId then return {'blocked', 0, ''} end
  -- Its turn has come: past its deadline, it ends expired (the worker's FINISH), never sent.
  local deadline = tonumber(stored[7] or '')
  if deadline and deadline <= now then return {'expired', deadline, ''} end
  if not to then return {noJob, 0, ''} end
  -- A wait ends by the deadline at the latest, so that it ends expired on time.
  local function by(untilMs)
    if deadline and deadline < untilMs then return deadline end
    return untilMs
  end
  -- The worker checks the prompt it reads here before any budget unit is spent on it: one lost or
  -- empty, or over a PROMPT_MAX_BYTES lowered since, ends undeliverable unsent.
  if #text == 0 or (promptMaxBytes > 0 and #text > promptMaxBytes) then
    return {'invalid', #text, ''}
  end
  -- The log lives until its latest entry (a send or a reservation, possibly in the future) is
  -- `keepFor` old, and a minute more. This script knows that entry: no PTTL needed to extend it.
  -- (Rounded up: an entry written by hand may have a fractional score.)
  local function keepUntil(latest)
    redis.call('PEXPIRE', budgetKey, math.ceil(latest - now + keepFor + 60000))
  end
  if pause[1] > now then return {'auth_paused', pause[1], ''} end
  if controls[1] == '1' then return {'paused', 0, ''} end
  if controls[2] then
    max, window, tolerance = controls[2], controls[3], controls[4]
    if window > keepFor then keepFor = window end
  end
  if parked > now then return {'parked', by(parked), ''} end
  redis.call('ZREMRANGEBYSCORE', budgetKey, '-inf', now - keepFor)
  local slot = now
  -- The log's latest entry, when known: it sets how long the log must live (keepUntil).
  local latest = nil
  local reservation = 'r:' .. dispatchId
  -- The log inside the window: how many entries (reservations included), and the latest entry
  -- (`now` when none is inside it).
  local n, last = nil, nil
  local function look()
    n = redis.call('ZCOUNT', budgetKey, '(' .. (now - window), '+inf')
    last = now
    if n > 0 then
      last = top or tonumber(redis.call('ZRANGE', budgetKey, -1, -1, 'WITHSCORES')[2])
    end
  end
  -- The record says whether it holds a reservation (its field `reserved`), so most ACQUIREs skip
  -- the ZSCORE.
  local hinted = stored[5] ~= false
  local reserved = hinted and redis.call('ZSCORE', budgetKey, reservation)
  if reserved then
    reserved = tonumber(reserved)
    if reserved > now then return {'over', by(reserved), ''} end
    redis.call('ZREM', budgetKey, reservation)
    n, top = nil, false -- the log lost an entry: looked at again if it is needed
    if now - reserved > tolerance then reserved = nil else slot = reserved end
  end
  if not reserved then
    if not n then look() end
    if last > slot then slot = last end
    -- ZRANGE -1 is the log's latest entry; with n = 0, no entry is later than now - window.
    latest = last
    if n >= max then
      -- Entries are sorted by time, so the `n` inside the window are the last `n` of the `total`.
      local total = redis.call('ZCARD', budgetKey)
      local pivot = tonumber(redis.call('ZRANGE', budgetKey, total - max, total - max,
        'WITHSCORES')[2]) + window
      if pivot > slot then slot = pivot end
      -- Pace a backlog: a reservation comes at least window/max after the latest entry, so a
      -- window's reservations do not all fall due in the same instant (they would mirror the first
      -- window's burst and wake together). The rate stays max per window.
      local paced = last + math.ceil(window / max)
      if paced > slot then slot = paced end
    end
    if slot > now then
      -- A slot after its deadline is not reserved (it would hold back the slots behind it): it
      -- wakes at its deadline and ends expired, unless a slot freed meanwhile.
      if deadline and deadline < slot then return {'over', deadline, ''} end
      redis.call('ZADD', budgetKey, slot, reservation)
      if not hinted then redis.call('HSET', recordKey, 'reserved', '1') end
      keepUntil(slot) -- slot is at least `last`: the new latest entry
      return {'over', slot, ''}
    end
  end
  -- Granted by its project: it also needs the org's slot, or waits for it (nothing spent).
  local orgSlot = nil
  if orgMax > 0 then
    local untilMs
    orgSlot, untilMs = orgTake(dispatchId, stored[6] or '', deadline)
    if not orgSlot then
      -- Its project's turn stays held for it until then, so that its project and org slots come
      -- due together: a sibling taking the project's turn meanwhile would push this one to a
      -- later project slot, its org slot would pass unused, and so on for ever.
      if not (deadline and deadline < untilMs) then
        local held = math.max(untilMs, slot)
        redis.call('ZADD', budgetKey, held, reservation)
        if not hinted then redis.call('HSET', recordKey, 'reserved', '1') end
        local newest = tonumber(redis.call('ZRANGE', budgetKey, -1, -1, 'WITHSCORES')[2])
        keepUntil(math.max(newest or held, held))
      end
      return {'over', by(untilMs), ''}
    end
  end
  -- A woken reservation did not look at the log: later reservations may be in it.
  if not latest then
    latest = tonumber(redis.call('ZRANGE', budgetKey, -1, -1, 'WITHSCORES')[2] or '0')
  end
  -- The attempt count was read with the state: one HSET writes it with the intent.
  local attempt = attempts + 1
  redis.call('ZADD', budgetKey, slot, dispatchId .. ':' .. attempt)
  keepUntil(math.max(latest, slot))
  local writeBy = slot + 2 * tolerance
  if orgSlot then
    orgSpend(dispatchId .. ':' .. attempt, orgSlot)
    writeBy = math.min(writeBy, orgSlot + 2 * orgTolerance)
  end
  redis.call('HSET', recordKey, 'state', 'sending', 'sendingAt', now, 'seenActive', '0',
    'resend', '0', 'attemptToken', token, 'attempts', attempt)
  if stored[9] then redis.call('HSET', recordKey, 'target', to) end
  if hinted then redis.call('HDEL', recordKey, 'reserved') end
  countMove(countsKey, stored[6], 'queued', 'sending')
  later('ZADD', trackedKey, now + firstPollMs, dispatchId)
  local probe = 0
  if pause[1] > 0 then
    probe = 1
    local backoff = math.min(2 * pause[2], pause[3])
    pause[1], pause[2] = now + backoff, backoff
    redis.call('HSET', pauseKey, 'probeAt', pause[1], 'backoffMs', backoff)
  end
  -- `now` too: the worker schedules the first status read by this clock (MARK_SENT). The budget
  -- counts this send at `slot`, the API at its arrival: the window's margin (twice the tolerance,
  -- see dispatch/budget.ts) covers the time between, so the request must be written by then.
  return {'go', attempt, text, probe, now, writeBy, to}
end

-- The org's keys are shared by every item: one of the wrong type fails them all, naming it.
local shared = {{trackedKey, 'zset'}, {countsKey, 'hash'}}
if orgMax > 0 then
  shared[3], shared[4] = {orgKey, 'zset'}, {orgHoldersKey, 'hash'}
end
return eachItem(n, function(i)
  return acquire(5 + 7 * (i - 1), 7 + 7 * (i - 1))
end, shared)
