--[[
  Registers a follow-up: its record, its place in its lane, and its entry in the open index
  (scored by its enqueue time) until FINISH. The producer runs it in the same MULTI as BullMQ's
  job add.

  The prompt goes under its own key, so that every field of the record stays short enough for
  Redis to keep the record as a listpack. The digest outlives the prompt (FINISH deletes that),
  so a conflict is seen until the record expires; a record written before digests were stored
  has none and counts as the same.

  Input:
    KEYS[1] record
    KEYS[2] lane
    KEYS[3] open index
    KEYS[4] prompt

    ARGV[1] dispatchId
    ARGV[2] projectId
    ARGV[3] jobId
    ARGV[4] prompt
    ARGV[5] idempotency key ('' = none)
    ARGV[6] meta as JSON ('' = none)
    ARGV[7] digest of the content, computed by the producer
    ARGV[8] W3C traceparent of the producer's span ('' = not traced)

  Output:
    1  registered
    0  this id exists with the same digest (deduplicated)
    -1 this id exists with another digest: the key was used for a different follow-up
]]
local recordKey, laneKey, openKey, promptKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local dispatchId, digest, traceparent = ARGV[1], ARGV[7], ARGV[8]

if redis.call('EXISTS', recordKey) == 1 then
  local stored = redis.call('HGET', recordKey, 'digest')
  if stored and stored ~= digest then return -1 end
  return 0
end
--- @include "includes/now"
local fields = {'projectId', ARGV[2], 'jobId', ARGV[3], 'key', ARGV[5], 'meta', ARGV[6], 'digest', digest, 'state', 'queued', 'enqueuedAt', now, 'attempts', 0,
  'polls', 0}
-- In the same HSET: a traced follow-up costs no command more than an untraced one.
if traceparent and traceparent ~= '' then
  fields[#fields + 1] = 'traceparent'
  fields[#fields + 1] = traceparent
end
redis.call('HSET', recordKey, unpack(fields))
redis.call('SET', promptKey, ARGV[4])
redis.call('RPUSH', laneKey, dispatchId)
redis.call('ZADD', openKey, now, dispatchId)
return 1
