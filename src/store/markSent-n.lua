--[[
  Records that a send happened (state `sent`) or may have happened (`unsettled`) and starts
  tracking it. The send time is the intent's time: the job may have started any time after it.
  Only for the attempt that holds the intent (its token): a late answer of an earlier attempt
  changes nothing. A definite answer turns `unsettled` (marked by a rerun on this attempt's
  behalf, or by its own crash handling) into `sent`; run twice, it finds its own state and does
  nothing more.

  The answers a worker records at about the same time go in one call (see store/mark-sent.ts),
  each as if it ran alone, in the order given; the tracked set gets one ZADD per call (see
  includes/per-call.lua).

  Input:
    KEYS[1] tracked set
    KEYS[1 + i] the record of the i-th dispatch

    ARGV[1] how many dispatches (n)
    then ten arguments per dispatch, the i-th's from ARGV[2 + 10 (i - 1)]:
      dispatchId
      new state: sent or unsettled
      agent job as JSON ('' = none)
      its status
      seenActive (1/0)
      the first read's wait, stored as the last wait (`pollDelayMs`)
      attemptToken
      when, by Redis's clock, the first read falls due (the worker knows that clock from
        ACQUIRE's `now`); 0 = the next argument's ms from TIME
      a creation's new job id, its `target` from now on ('' = none: a follow-up)
      how long after now the first read falls due, ms

  Output: for each dispatch
    1  recorded, or already so
    0  the record had moved on (another state)
    -1 another attempt holds it
    or an error reply `ITEM <key> <why>` (a key of the wrong type): it wrote nothing (its one
    write comes after the read that would raise; see includes/per-call.lua)
]]
local trackedKey = KEYS[1]
local n = tonumber(ARGV[1])

--- @include "includes/clock"
--- @include "includes/per-call"
--- @include "includes/open-counts"
local countsKey = shardKeyOf(trackedKey, 'tracked', 'counts:open')

local function mark(recordKey, a)
  local dispatchId, newState, token = ARGV[a], ARGV[a + 1], ARGV[a + 6]
  -- One read of the fields it decides on.
  local stored = callOn('HMGET', recordKey, 'state', 'attemptToken', 'sendingAt', 'seenActive',
    'projectId')
  local state = stored[1]
  if state ~= 'sending' and state ~= 'unsettled' and state ~= 'sent' then return 0 end
  if (stored[2] or '') ~= token then return -1 end
  if state == newState then return 1 end
  if state ~= 'sending' and not (state == 'unsettled' and newState == 'sent') then return 0 end
  local at, firstInMs = tonumber(ARGV[a + 7]), tonumber(ARGV[a + 9])
  if at <= 0 or not stored[3] then
    local now = clockNow()
    if at <= 0 then at = now + firstInMs end
    stored[3] = stored[3] or now
  end
  local sentAt = stored[3]
  -- The poller may have seen the job active while the request was in flight: keep that.
  local seenActive = ARGV[a + 4]
  if stored[4] == '1' then seenActive = '1' end
  local fields = {'state', newState, 'sentAt', sentAt, 'job', ARGV[a + 2], 'lastStatus',
    ARGV[a + 3], 'seenActive', seenActive, 'pollDelayMs', ARGV[a + 5]}
  -- An answer that shows the run active is a read of it, now (the first read's time less its
  -- wait): the end of a run over before the first read is then known as after any read's.
  if ARGV[a + 3] == 'active' then
    fields[#fields + 1] = 'activeAt'
    fields[#fields + 1] = at - firstInMs
  end
  redis.call('HSET', recordKey, unpack(fields))
  if ARGV[a + 8] ~= '' then redis.call('HSET', recordKey, 'target', ARGV[a + 8]) end
  countMove(countsKey, stored[5], state, newState)
  later('ZADD', trackedKey, at, dispatchId)
  return 1
end

return eachItem(n, function(i)
  return mark(KEYS[i + 1], 2 + 10 * (i - 1))
end, {{trackedKey, 'zset'}, {countsKey, 'hash'}})
