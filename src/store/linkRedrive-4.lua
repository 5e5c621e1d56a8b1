--[[
  Links dead letter `fromId` to `toId`, the follow-up that redrives it: the old record names the
  new one (`redrivenTo`) and leaves the dead letters, its prompt is deleted (the new follow-up has
  it), and the new record names the old one (`redriveOf`). Each record is written only while it
  exists: an HSET on a record that expired meanwhile would make it again, without its TTL, for
  ever. HSET keeps the TTL of a record that exists.

  Input:
    KEYS[1] the old record
    KEYS[2] the shard's dead letters
    KEYS[3] the old record's prompt
    KEYS[4] the new record

    ARGV[1] fromId
    ARGV[2] toId

  Output: {old linked (1/0), new linked (1/0)}
]]
local fromKey, deadLettersKey, promptKey, toKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local fromId, toId = ARGV[1], ARGV[2]

-- A key of another type (a hand edit) fails the call before its first write, naming the key.
--- @include "includes/wrong-type"
local wrong = wrongType({{fromKey, 'hash'}, {deadLettersKey, 'zset'}, {toKey, 'hash'}})
if wrong then return redis.error_reply(wrong) end
local linked = {0, 0}
if redis.call('EXISTS', fromKey) == 1 then
  redis.call('HSET', fromKey, 'redrivenTo', toId)
  linked[1] = 1
end
redis.call('ZREM', deadLettersKey, fromId)
redis.call('DEL', promptKey)
if redis.call('EXISTS', toKey) == 1 then
  redis.call('HSET', toKey, 'redriveOf', fromId)
  linked[2] = 1
end
return linked
