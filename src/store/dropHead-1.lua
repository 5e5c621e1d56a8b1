--[[
  Takes a lane of one out of its project's lane heads, if the dispatch is still its head: the
  repair sweep found its record gone or ended (see store/open-index.ts). A lane that moved into
  its list meanwhile, or a head that changed, is left as it is.

  Input:
    KEYS[1] the project's lane heads

    ARGV[1] jobId (the lane's field)
    ARGV[2] dispatchId

  Output: 1 taken out, 0 not the head
]]
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
