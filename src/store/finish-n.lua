--[[
  Ends dispatches: marks each done, publishes its one event, stops tracking it and releases its
  lane, all at once, so a crash cannot leave an event without its release or the reverse. Running
  it a second time for the same dispatch does nothing: exactly one event. The ends asked for at
  about the same time go in one call (see store/finish.ts), each as if it ran alone, in the
  order given; the tracked set and the open index get one ZREM each per call (see
  includes/per-call.lua).
  The record keeps what the event says (type, reason, the last agent job and its status) for
  `retentionMs`, so `status` answers after the end, and the id of its event (`eventId`); only the
  prompt is deleted, but a dead letter's (undeliverable or timed out), which is kept for a redrive
  for ARGV[4] and listed in the shard's dead letters (`<prefix>:deadletters`, by end time). A budget slot the
  dispatch had reserved while queued (`r:<id>`, see acquire-n.lua) is given back (a reservation
  exists only in state `queued`).

  An operator's cancel is this script with expected state `queued`: ACQUIRE moves a dispatch out
  of `queued` atomically too, so of a cancel and an ACQUIRE racing exactly one wins.

  Input:
    KEYS[1] tracked set
    KEYS[2] events stream
    KEYS[3] open index
    then six keys per dispatch, the i-th's from KEYS[4 + 6 (i - 1)]:
      record
      its project's lane heads (a lane of one; see includes/lane.lua)
      its lane (a lane of two or more)
      its project's budget
      its prompt
      its project's creation log (BUDGET_SCOPE=split): a creation's reservation is in one of the
        two logs, and the caller (a producer's cancel) may not know BUDGET_SCOPE

    ARGV[1] how many dispatches (n)
    ARGV[2] retentionMs
    ARGV[3] stream MAXLEN (approximate)
    ARGV[4] how long a dead letter (undeliverable, timed out) keeps its prompt, ms (0: deleted)
    then, for each dispatch in turn:
      its id
      expected state ('' = any but done)
      finishedAt
      event type
      reason
      agent job as JSON ('' = keep the stored one)
      last status ('' = keep)
      jobId (the lane's field in its lane heads)
      how many arguments follow: the stream entry's field/value pairs

  Output: for each dispatch, {1, next dispatchId of the lane or '', stream entry id}, or
  {0, '', '', the state found ('' = no record)} when nothing changed, or an error reply
  `ITEM <key> <why>` (a key of the wrong type): it wrote nothing (see includes/per-call.lua)
]]
local trackedKey, streamKey, openKey = KEYS[1], KEYS[2], KEYS[3]
local n, retentionMs, maxLen = tonumber(ARGV[1]), ARGV[2], ARGV[3]
-- How long a dead letter keeps its prompt for a redrive (see store/followup-views.ts); 0: not.
local deadLetterMs = tonumber(ARGV[4]) or 0

--- @include "includes/lane"
--- @include "includes/per-call"
--- @include "includes/open-counts"
local countsKey = shardKeyOf(trackedKey, 'tracked', 'counts:open')
local deadLettersKey = shardKeyOf(trackedKey, 'tracked', 'deadletters')
local DEAD = {['followup.undeliverable'] = true, ['followup.timed_out'] = true}

-- A follow-up chained to a creation that ended with no job to send to: no redrive can send it
-- (there is no job), so it is no dead letter.
local function noJobToRedrive(recordKey)
  local chained = redis.call('HMGET', recordKey, 'after', 'target')
  return chained[1] and not chained[2]
end

-- A creation that made a job writes it onto the next record of its lane (the follow-ups chained
-- to it), and each of those hands it on to the next when it ends: one record written per end,
-- whatever the lane's length, and each finds the job however long it waits (the creation's
-- record expires after `retentionMs`). Records share the ended one's prefix (and hash tag).
-- The next record is not among the checked keys: one of another type is left as it is (pcall),
-- so that nothing can fail after the event is written.
local function handOnTarget(recordKey, dispatchId, nextId)
  if not nextId then return end
  local made = redis.call('HMGET', recordKey, 'kind', 'after', 'target')
  if not made[3] or (made[1] ~= 'create' and not made[2]) then return end
  local nextKey = string.sub(recordKey, 1, #recordKey - #dispatchId) .. nextId
  local theirs = redis.pcall('HMGET', nextKey, 'after', 'target')
  if type(theirs) ~= 'table' or theirs.err or not theirs[1] or theirs[2] then return end
  redis.pcall('HSET', nextKey, 'target', made[3])
end

local function finish(k, a)
  local recordKey, headsKey, laneKey, budgetKey, promptKey, createKey =
    KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5]
  local dispatchId, expected, jobId = ARGV[a], ARGV[a + 1], ARGV[a + 7]
  local entryFrom, entryTo = a + 9, a + 8 + tonumber(ARGV[a + 8])

  local stored = callOn('HMGET', recordKey, 'state', 'projectId')
  local state = stored[1]
  if not state or state == 'done' then return {0, '', '', state or ''} end
  if expected ~= '' and expected ~= state then return {0, '', '', state} end
  -- Every key it writes is read or checked before the first write: a failure writes nothing. The
  -- lane's head is read here (a read of the wrong type fails as a check would); the lane list is
  -- written only when the head is not this dispatch's own field in the lane heads.
  local head = callOn('HGET', headsKey, jobId)
  if not head then
    head = callOn('LINDEX', laneKey, 0)
  elseif head ~= dispatchId then
    expectType(laneKey, 'list')
  end
  if state == 'queued' then
    expectType(budgetKey, 'zset')
    expectType(createKey, 'zset')
  end
  if DEAD[ARGV[a + 3]] then expectType(deadLettersKey, 'zset') end
  local fields = {'state', 'done', 'finishedAt', ARGV[a + 2], 'type', ARGV[a + 3], 'reason',
    ARGV[a + 4]}
  if ARGV[a + 5] ~= '' then table.insert(fields, 'job'); table.insert(fields, ARGV[a + 5]) end
  if ARGV[a + 6] ~= '' then
    table.insert(fields, 'lastStatus'); table.insert(fields, ARGV[a + 6])
  end
  -- The event is the first write: XADD can fail where no type check sees it (a stream whose last
  -- ID is the largest there is), and the follow-up must not end without its event.
  local entry = callOn('XADD', streamKey, 'MAXLEN', '~', maxLen, '*',
    unpack(ARGV, entryFrom, entryTo))
  table.insert(fields, 'eventId'); table.insert(fields, entry)
  redis.call('HSET', recordKey, unpack(fields))
  countMove(countsKey, stored[2], state, 'done')
  -- A dead letter keeps its prompt for a redrive, for a bounded time; any other end deletes it.
  if deadLetterMs > 0 and DEAD[ARGV[a + 3]] and not noJobToRedrive(recordKey)
    and redis.call('PEXPIRE', promptKey, math.min(deadLetterMs, tonumber(retentionMs))) == 1 then
    local finishedAt = tonumber(ARGV[a + 2])
    redis.call('ZADD', deadLettersKey, finishedAt, dispatchId)
    redis.call('ZREMRANGEBYSCORE', deadLettersKey, '-inf', '(' .. (finishedAt - deadLetterMs))
  else
    redis.call('DEL', promptKey)
  end
  redis.call('PEXPIRE', recordKey, retentionMs)
  later('ZREM', trackedKey, dispatchId)
  later('ZREM', openKey, dispatchId)
  -- A reservation is held only while queued: ACQUIRE drops it before it moves a dispatch on.
  if state == 'queued' then
    redis.call('ZREM', budgetKey, 'r:' .. dispatchId)
    redis.call('ZREM', createKey, 'r:' .. dispatchId)
  end
  -- The lane goes on without it: from the head, the next one takes its turn; from behind (a
  -- cancel of a follow-up still waiting), the head stays. Either way the head after it is
  -- answered.
  local nextId = head
  if nextId == dispatchId then
    nextId = laneAdvance(headsKey, laneKey, jobId)
  else
    redis.call('LREM', laneKey, 1, dispatchId)
  end
  handOnTarget(recordKey, dispatchId, nextId)
  return {1, nextId or '', entry}
end

-- Where each dispatch's arguments start: each has a stream entry of its own length.
local starts, a = {}, 5
for i = 1, n do
  starts[i] = a
  a = a + 9 + tonumber(ARGV[a + 8])
end
return eachItem(n, function(i)
  return finish(4 + 6 * (i - 1), starts[i])
end, {{trackedKey, 'zset'}, {openKey, 'zset'}, {countsKey, 'hash'}})
