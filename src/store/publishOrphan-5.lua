--[[
  Publishes the event of a BullMQ job that has no dispatch record (a payload that cannot be read,
  or a record lost). The marker makes a rerun for the same job publish nothing more.

  Nothing is published while the record exists (it was registered again meanwhile: the same key
  gives the same id, and that registration has its own job and its own event), nor, when asked,
  once the job itself is gone: a worker may still hold a job whose enqueue Redis lost in a crash
  (the producer was refused, and its retry registers the follow-up anew). An event for it would
  be a second event for that follow-up.

  Input:
    KEYS[1] orphan marker
    KEYS[2] events stream
    KEYS[3] the dispatch record
    KEYS[4] the BullMQ job hash (checked only when ARGV[3] is 1)
    KEYS[5] the dispatch's prompt: deleted with the publication (a record deleted by hand leaves
            its prompt behind)

    ARGV[1] retentionMs (the marker's lifetime)
    ARGV[2] stream MAXLEN (approximate)
    ARGV[3] 1: publish only if the job hash exists
    ARGV[4...] the stream entry's field/value pairs

  Output: 1 published, 0 published before, -1 the record exists, -2 the job is gone
]]
local markerKey, streamKey, recordKey, jobKey, promptKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
  KEYS[5]
local retentionMs, maxLen, requireJob = tonumber(ARGV[1]), ARGV[2], ARGV[3] == '1'

if redis.call('EXISTS', recordKey) == 1 then return -1 end
if requireJob and redis.call('EXISTS', jobKey) == 0 then return -2 end
if not redis.call('SET', markerKey, '1', 'NX', 'PX', retentionMs) then return 0 end
redis.call('XADD', streamKey, 'MAXLEN', '~', maxLen, '*', unpack(ARGV, 4))
redis.call('DEL', promptKey)
return 1
