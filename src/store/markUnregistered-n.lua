--[[
  Sets the orphan marker of each dispatch id that has no record: the producer's MULTI added its
  BullMQ job, but REGISTER failed, so nothing was accepted. A worker that takes such a job before
  the producer removes it finds no record and, seeing the marker, ends it without an event (see
  publishOrphan-10.lua). An id whose record exists (registered before, the same key) is left as
  it is, its job with it.

  Input (n ids; i from 1 to n):
    KEYS[2i - 1] record of the i-th id
    KEYS[2i]     its orphan marker

    ARGV[1] lifetime of a marker in ms (the dispatch retention)

  Output: the indexes (from 1) of the ids marked
]]
local markerMs = ARGV[1]
local marked = {}
for i = 1, #KEYS / 2 do
  if redis.call('EXISTS', KEYS[2 * i - 1]) == 0 then
    redis.call('SET', KEYS[2 * i], '1', 'NX', 'PX', markerMs)
    marked[#marked + 1] = i
  end
end
return marked
