--[[
  Ends a dispatch: marks it done, publishes its one event, stops tracking it and releases its lane,
  all at once, so a crash cannot leave an event without its release or the reverse. Running it a
  second time for the same dispatch does nothing: exactly one event.
  The record keeps what the event says (type, reason, the last agent job and its status) for
  `retentionMs`, so `status` answers after the end; only the prompt is deleted. A budget slot the
  dispatch had reserved while queued (`r:<id>`, see acquire-8.lua) is given back (a reservation
  exists only in state `queued`).

  An operator's cancel is this script with expected state `queued`: ACQUIRE moves a dispatch out
  of `queued` atomically too, so of a cancel and an ACQUIRE racing exactly one wins.

  Input:
    KEYS[1] record
    KEYS[2] lane
    KEYS[3] tracked set
    KEYS[4] events stream
    KEYS[5] open index
    KEYS[6] the project's budget
    KEYS[7] prompt

    ARGV[1] dispatchId
    ARGV[2] expected state ('' = any but done)
    ARGV[3] finishedAt
    ARGV[4] event type
    ARGV[5] reason
    ARGV[6] retentionMs
    ARGV[7] stream MAXLEN (approximate)
    ARGV[8] agent job as JSON ('' = keep the stored one)
    ARGV[9] last status ('' = keep)
    ARGV[10...] the stream entry's field/value pairs

  Output: {1, next dispatchId of the lane or '', stream entry id}, or {0, '', '', the state found
  ('' = no record)} when nothing changed
]]
local recordKey, laneKey, trackedKey, streamKey, openKey, budgetKey, promptKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local dispatchId, expected = ARGV[1], ARGV[2]

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
-- From the head on: the lane's head is found at once (what LINDEX + LPOP did, in one command).
redis.call('LREM', laneKey, 1, dispatchId)
local entry = redis.call('XADD', streamKey, 'MAXLEN', '~', ARGV[7], '*', unpack(ARGV, 10))
local nextId = redis.call('LINDEX', laneKey, 0) or ''
return {1, nextId, entry}
