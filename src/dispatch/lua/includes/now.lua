-- Redis's clock in epoch milliseconds, one clock for the whole fleet: defines the local `now`.
local redisTime = redis.call('TIME')
local now = tonumber(redisTime[1]) * 1000 + math.floor(tonumber(redisTime[2]) / 1000)
