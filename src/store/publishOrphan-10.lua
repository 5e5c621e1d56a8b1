--[[
  Publishes the event of a BullMQ job that has no dispatch record (a payload that cannot be read,
  or a record lost). The marker makes a rerun for the same job publish nothing more.

  Nothing is published while the record exists (it was registered again meanwhile: the same key
  gives the same id, and that registration has its own job and its own event), nor, when asked,
  once the job itself is gone: a worker may still hold a job whose enqueue Redis lost in a crash
  (the producer was refused, and its retry registers the follow-up anew). An event for it would
  be a second event for that follow-up.

  With its event the follow-up leaves the open dispatches (the open index, its lane heads as a
  lane of one, the tracked set) and, if it was still in one of them, its project's open count
  (includes/open-counts.lua) goes down by one, so that the count moves exactly once with it. The
  record that said its state is gone: the count taken is the one its place says, queued when it
  was not tracked, else sent (or sending, when no sent one is counted: the tracked set holds both).
  The project is ARGV[5], or the `p` of the dispatch's own BullMQ job (KEYS[8]); with neither, no
  count moves.

  Input:
    KEYS[1] orphan marker
    KEYS[2] events stream
    KEYS[3] the dispatch record
    KEYS[4] the BullMQ job hash (checked only when ARGV[3] is 1)
    KEYS[5] the dispatch's prompt: deleted with the publication (a record deleted by hand leaves
            its prompt behind)
    KEYS[6] open index
    KEYS[7] tracked set
    KEYS[8] the BullMQ job hash named by the dispatch id (its payload names the project)
    KEYS[9] its project's lane heads (read only when ARGV[6] is not '')
    KEYS[10] its lane (a lane of two or more; read only when ARGV[6] is not '')

    ARGV[1] retentionMs (the marker's lifetime)
    ARGV[2] stream MAXLEN (approximate)
    ARGV[3] 1: publish only if the job hash exists
    ARGV[4] the dispatch id
    ARGV[5] the project id ('' = unknown: read from KEYS[8])
    ARGV[6] its agent job id, the lane's field ('' = unknown)
    ARGV[7...] the stream entry's field/value pairs

  A lane of two or more that it heads lets its next follow-up go on: the answer names that one,
  for the caller to wake (it may be parked, waiting for its lane).

  Output: 1 published (or the id of the lane's next follow-up, published), 0 published before,
  -1 the record exists, -2 the job is gone
]]
local markerKey, streamKey, recordKey, jobKey, promptKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
  KEYS[5]
local openKey, trackedKey, ownJobKey, headsKey, laneKey = KEYS[6], KEYS[7], KEYS[8], KEYS[9],
  KEYS[10]
local retentionMs, maxLen, requireJob = tonumber(ARGV[1]), ARGV[2], ARGV[3] == '1'
local dispatchId, jobId = ARGV[4], ARGV[6]

if redis.call('EXISTS', recordKey) == 1 then return -1 end
if requireJob and redis.call('EXISTS', jobKey) == 0 then return -2 end
--- @include "includes/open-counts"
local countsKey = shardKeyOf(trackedKey, 'tracked', 'counts:open')
-- A key of another type (a hand edit) fails the call before its first write, naming the key.
local shared = {{countsKey, 'hash'}, {openKey, 'zset'}, {trackedKey, 'zset'},
  {streamKey, 'stream'}}
if jobId ~= '' then
  shared[5], shared[6] = {headsKey, 'hash'}, {laneKey, 'list'}
end
--- @include "includes/wrong-type"
local wrong = wrongType(shared)
if wrong then return redis.error_reply(wrong) end
if not redis.call('SET', markerKey, '1', 'NX', 'PX', retentionMs) then return 0 end
redis.call('XADD', streamKey, 'MAXLEN', '~', maxLen, '*', unpack(ARGV, 7))
redis.call('DEL', promptKey)

local projectId = ARGV[5]
if projectId == '' and redis.call('TYPE', ownJobKey)['ok'] == 'hash' then
  local ok, data = pcall(cjson.decode, redis.call('HGET', ownJobKey, 'data') or '')
  if ok and type(data) == 'table' and type(data.p) == 'string' then projectId = data.p end
end
local wasTracked = redis.call('ZREM', trackedKey, dispatchId) == 1
local left = redis.call('ZREM', openKey, dispatchId) == 1 or wasTracked
if jobId ~= '' and redis.call('HGET', headsKey, jobId) == dispatchId then
  left = redis.call('HDEL', headsKey, jobId) == 1 or left
end
local published = 1
if jobId ~= '' and redis.call('LINDEX', laneKey, 0) == dispatchId then
  redis.call('LPOP', laneKey)
  published = redis.call('LINDEX', laneKey, 0) or 1
end
if projectId == '' or not left then return published end
for _, class in ipairs(wasTracked and {'t', 's'} or {'q'}) do
  if (tonumber(redis.call('HGET', countsKey, class .. ':' .. projectId)) or 0) > 0 then
    countAdd(countsKey, class .. ':' .. projectId, -1)
    break
  end
end
return published
