--[[
  Publishes the event of a BullMQ job that has no dispatch record (a payload this version cannot
  read, or a record lost). The marker makes a rerun for the same job publish nothing more.

  Input:
    KEYS[1] orphan marker
    KEYS[2] events stream

    ARGV[1] retentionMs (the marker's lifetime)
    ARGV[2] stream MAXLEN (approximate)
    ARGV[3...] the stream entry's field/value pairs

  Output: 1 published, 0 published before
]]
local markerKey, streamKey = KEYS[1], KEYS[2]
local retentionMs, maxLen = tonumber(ARGV[1]), ARGV[2]

if not redis.call('SET', markerKey, '1', 'NX', 'PX', retentionMs) then return 0 end
redis.call('XADD', streamKey, 'MAXLEN', '~', maxLen, '*', unpack(ARGV, 3))
return 1
