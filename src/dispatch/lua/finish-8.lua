--[[
  Ends a dispatch: marks it done, publishes its one event, stops tracking it and releases its lane,
  all at once, so a crash cannot leave an event without its release or the reverse. Running it a
  second time for the same dispatch does nothing: exactly one event.
  The record keeps what the event says (type, reason, the last agent job and its status) for
  `retentionMs`, so `status` answers after the end; only the prompt is deleted. A budget slot the
  dispatch had reserved while queued (`r:<id>`, see acquire-10.lua) is given back (a reservation
  exists only in state `queued`).

  An operator's cancel is this script with expected state `queued`: ACQUIRE moves a dispatch out
  of `queued` atomically too, so of a cancel and an ACQUIRE racing exactly one wins.

  Input:
    KEYS[1] record
    KEYS[2] the project's lane heads (a lane of one; see includes/lane.lua)
    KEYS[3] lane (a lane of two or more)
    KEYS[4] tracked set
    KEYS[5] events stream
    KEYS[6] open index
    KEYS[7] the project's budget
    KEYS[8] prompt

    ARGV[1] dispatchId
    ARGV[2] expected state ('' = any but done)
    ARGV[3] finishedAt
    ARGV[4] event type
    ARGV[5] reason
    ARGV[6] retentionMs
    ARGV[7] stream MAXLEN (approximate)
    ARGV[8] agent job as JSON ('' = keep the stored one)
    ARGV[9] last status ('' = keep)
    ARGV[10] jobId (the lane's field in KEYS[2])
    ARGV[11...] the stream entry's field/value pairs

  Output: {1, next dispatchId of the lane or '', stream entry id}, or {0, '', '', the state found
  ('' = no record)} when nothing changed
]]
local recordKey, headsKey, laneKey, trackedKey, streamKey, openKey, budgetKey, promptKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local dispatchId, expected, jobId = ARGV[1], ARGV[2], ARGV[10]

local state = redis.call('HGET', recordKey, 'state')
if not state or state == 'done' then return {0, '', '', state or ''} end
if expected ~= '' and expected ~= state then return {0, '', '', state} end
local fields = {'state', 'done', 'finishedAt', ARGV[3], 'type', ARGV[4], 'reason', ARGV[5]}
if ARGV[8] ~= '' then table.insert(fields, 'job'); table.insert(fields, ARGV[8]) end
if ARGV[9] ~= '' then table.insert(fields, 'lastStatus'); table.insert(fields, ARGV[9]) end
redis.call('HSET', recordKey, unpack(fields))
-- A record written before prompts had their own key holds its prompt in the record.
if redis.call('DEL', promptKey) == 0 then redis.call('HDEL', recordKey, 'prompt') end
redis.call('PEXPIRE', recordKey, ARGV[6])
redis.call('ZREM', trackedKey, dispatchId)
redis.call('ZREM', openKey, dispatchId)
-- A reservation is held only while queued: ACQUIRE drops it before it moves a dispatch on.
if state == 'queued' then redis.call('ZREM', budgetKey, 'r:' .. dispatchId) end
-- The lane goes on without it: from the head, the next one takes its turn; from behind (a cancel
-- of a follow-up still waiting), the head stays. Either way the head after it is answered.
--- @include "includes/lane"
local nextId = laneHead(headsKey, laneKey, jobId)
if nextId == dispatchId then
  nextId = laneAdvance(headsKey, laneKey, jobId)
else
  redis.call('LREM', laneKey, 1, dispatchId)
end
local entry = redis.call('XADD', streamKey, 'MAXLEN', '~', ARGV[7], '*', unpack(ARGV, 11))
return {1, nextId or '', entry}
