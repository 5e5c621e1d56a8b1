--[[
  Names the BullMQ job that now carries a queued dispatch (record field `bullJobId`; absent = the
  dispatch id), if the record still names `expected` (compare and set, so two sweeps or a rerun
  cannot both replace the same job). `expected` '' = any: the poller's resend, which also runs
  while the resend is pending; a repair (`expected` given) leaves a pending resend to the resend.

  Input:
    KEYS[1] record

    ARGV[1] dispatchId
    ARGV[2] expected bullJobId ('' = any)
    ARGV[3] new bullJobId

  Output: 1 set, 0 not
]]
local recordKey = KEYS[1]
local dispatchId, expected, bullJobId = ARGV[1], ARGV[2], ARGV[3]

if redis.call('HGET', recordKey, 'state') ~= 'queued' then return 0 end
if expected ~= '' then
  if redis.call('HGET', recordKey, 'resend') == '1' then return 0 end
  if (redis.call('HGET', recordKey, 'bullJobId') or dispatchId) ~= expected then return 0 end
  redis.call('HINCRBY', recordKey, 'repairs', 1)
end
redis.call('HSET', recordKey, 'bullJobId', bullJobId)
return 1
