--[[
  Reads a page of the lanes of one (see includes/lane.lua), project after project in the order of
  their names, for a walk of the open dispatches (store/open-index.ts). Changes nothing but
  the lane projects set: a project whose lane heads are empty is dropped from it here, atomically,
  so a REGISTER that makes it a lane of one again names it again.

  A lane whose record was enqueued after ARGV[5] is passed over here, by one HGET of its record,
  so that a walk that wants only the older ones (the repair sweep) does not read the records of
  the young ones again; a lane whose record is gone is answered, one whose record is not a hash
  passed over.

  A walk that goes on where a page ended sees every lane of one that was there all along at least
  once (HSCAN's promise, and projects come in the order of their names); one made or ended
  meanwhile may be seen or not.

  Input:
    KEYS[1] lane projects (sorted set: each project as its lane heads key without ARGV[1])

    ARGV[1] key prefix of lane heads
    ARGV[2] the project to go on with ('' = the first)
    ARGV[3] HSCAN cursor in it ('0' = from its start)
    ARGV[4] about how many lanes to answer; the page ends sooner once it has looked at four times
            as many, or made that many HSCAN calls
    ARGV[5] enqueued by: a lane whose record was enqueued later is passed over
    ARGV[6] key prefix of records (a record's key is it and the dispatch id)

  Output: {the project to go on with ('' = none left: the walk is over), HSCAN cursor in it,
    {project name, agent job id, dispatch id, ...}}
]]
local projectsKey = KEYS[1]
local headsPrefix, project, cursor, want = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local enqueuedBy, recordPrefix = tonumber(ARGV[5]), ARGV[6]

local function after(name)
  local from = '-'
  if name ~= '' then from = '(' .. name end
  return redis.call('ZRANGE', projectsKey, from, '+', 'BYLEX', 'LIMIT', 0, 1)[1] or ''
end

if project == '' then project, cursor = after(''), '0' end
local page, answered, looked, calls = {}, 0, 0, 0
while project ~= '' and answered < want and looked < 4 * want and calls < want do
  calls = calls + 1
  local headsKey = headsPrefix .. project
  -- COUNT is a hint: a small hash (a listpack) answers whole, a larger one about as asked.
  local reply = redis.call('HSCAN', headsKey, cursor, 'COUNT', want - answered)
  local flat = reply[2]
  for i = 1, #flat, 2 do
    looked = looked + 1
    -- A record that is not a hash (a hand edit) is passed over: nothing of it can be read.
    local since = redis.pcall('HGET', recordPrefix .. flat[i + 1], 'enqueuedAt')
    if type(since) ~= 'table' and (not since or tonumber(since) <= enqueuedBy) then
      answered = answered + 1
      page[#page + 1] = project
      page[#page + 1] = flat[i]
      page[#page + 1] = flat[i + 1]
    end
  end
  if reply[1] == '0' then
    if redis.call('EXISTS', headsKey) == 0 then redis.call('ZREM', projectsKey, project) end
    project, cursor = after(project), '0'
  else
    cursor = reply[1]
  end
end
return {project, cursor, page}
