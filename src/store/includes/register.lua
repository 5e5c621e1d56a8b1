-- The body of REGISTER and of REGISTER with the backlog check: see register-n.lua.
local openKey, projectsKey, recordPrefix = KEYS[1], KEYS[2], ARGV[1]
local idsFrom, namesFrom = #recordPrefix + 1, #ARGV[2] + 1
local n, markerMs = tonumber(ARGV[3]), ARGV[4]
-- The next of the keys that follow-ups with a claim token have (two each, in order).
local claimKeysAt = 4 * n + 3
--- @include "includes/now"
--- @include "includes/lane-join"
-- The shard's counts of open follow-ups (see includes/open-counts.lua, left out: this script's
-- source goes with every producer MULTI), from the open index's key `<prefix>:open`.
local countsKey, queuedBy = string.sub(openKey, 1, -5) .. 'counts:open', {}
-- Written as text once: Redis formats a Lua number with printf each time it is passed.
local nowText = tostring(now)
-- An orphan marker's key: `<prefix>:orphan:<dispatch id>`, from the open index's key.
local orphanPrefix = string.sub(openKey, 1, -5) .. 'orphan:'

-- Commands that take many keys or members take them a thousand at a time (Lua's unpack has a
-- limit, and a batch has none); their integer replies are summed.
local CHUNK = 1000
local function inChunks(command, key, items, width)
  local total = 0
  for first = 1, #items, CHUNK * width do
    local last = math.min(first + CHUNK * width - 1, #items)
    local reply
    if key then
      reply = redis.call(command, key, unpack(items, first, last))
    else
      reply = redis.call(command, unpack(items, first, last))
    end
    if type(reply) == 'number' then total = total + reply end
  end
  return total
end

-- One EXISTS for the whole batch: when none of its records exists (the usual case), no record
-- needs a look of its own. Records registered earlier in this batch are known by their digests.
local records, lanes = {}, {}
for i = 1, n do records[i], lanes[i] = KEYS[4 * i - 1], KEYS[4 * i + 1] end
local anyExisted = inChunks('EXISTS', nil, records, 1) > 0
-- And one for the lane lists: most lanes are of one (a field), so usually none needs a look.
local anyLane = inChunks('EXISTS', nil, lanes, 1) > 0

-- A key the call writes of another type (a hand edit) fails the call before its first write. A
-- prompt needs no check (MSET replaces any type), nor a marker (SET NX and DEL never fail), nor a
-- record or lane list when none of the batch's exists.
local function wrongType()
  local kinds = {[countsKey] = 'hash', [openKey] = 'zset', [projectsKey] = 'zset'}
  for i = 1, n do
    kinds[KEYS[4 * i]] = 'hash'
    if anyExisted then kinds[records[i]] = 'hash' end
    if anyLane then kinds[lanes[i]] = 'list' end
  end
  for at = 4 * n + 3, #KEYS, 2 do kinds[KEYS[at]] = 'set' end
  for key, kind in pairs(kinds) do
    local found = redis.call('TYPE', key)['ok']
    if found ~= 'none' and found ~= kind then
      return 'WRONGTYPE ' .. key .. ' holds a ' .. found .. ' where a ' .. kind .. ' belongs'
    end
  end
end
local typeError = wrongType()
if typeError then
  -- Each new follow-up's orphan marker: the job the same MULTI adds ends without an event.
  for i = 1, n do
    local recordKey = KEYS[4 * i - 1]
    if redis.call('EXISTS', recordKey) == 0 then
      redis.call('SET', orphanPrefix .. string.sub(recordKey, idsFrom), '1', 'NX', 'PX', markerMs)
    end
  end
  return redis.error_reply(typeError)
end

local registered = {}

-- The answer for a record that exists: 0 the same content, -1 another.
local function existing(recordKey, digest)
  local stored = registered[recordKey]
  if stored == nil then stored = redis.call('HGET', recordKey, 'digest') end
  if stored and stored ~= '' and stored ~= digest then return -1 end
  return 0
end

local function addIfAny(fields, name, value)
  if value ~= '' then
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
end

local refusal = backlogRefusal(countsKey, records, anyExisted, idsFrom, markerMs)
if refusal then return refusal end

-- Whether the record under `after` holds another digest than the batch's creation of that id:
-- that creation was refused for its key, maybe in an earlier call of the batch.
local function otherCreation(after, digest)
  if digest == '' then return false end
  local stored = redis.pcall('HGET', recordPrefix .. after, 'digest')
  return type(stored) == 'string' and stored ~= '' and stored ~= digest
end

local answers, opened, prompts, projects, fresh = {}, {}, {}, {}, {}
-- The creations of this call refused for a key conflict: the follow-ups chained to them are
-- refused too (answer -3; their job add ends on its orphan marker), not joined to the lane of
-- the creation that holds the key.
local refusedCreations = {}
for i = 1, n do
  local recordKey, headsKey, laneKey, promptKey =
    KEYS[4 * i - 1], KEYS[4 * i], KEYS[4 * i + 1], KEYS[4 * i + 2]
  -- Follow-up i's arguments are ARGV[a + 2] to ARGV[a + 11].
  local a = 10 * i - 2
  local dispatchId = string.sub(recordKey, idsFrom)
  local digest, traceparent, token = ARGV[a + 7], ARGV[a + 8], ARGV[a + 9]
  local releasedKey, markerKey
  if token ~= '' then
    releasedKey, markerKey = KEYS[claimKeysAt], KEYS[claimKeysAt + 1]
    claimKeysAt = claimKeysAt + 2
  end
  local kind = ARGV[a + 11]
  -- A chained follow-up's creation, and that creation's digest when it is of the same batch.
  local after, afterDigest = string.match(kind, '^a(%S+) ?(%S*)$')
  -- A record that exists answers as it is (a retry of one registered before): only a new one is
  -- refused for its creation, and only a new one gets an orphan marker.
  if registered[recordKey] ~= nil or (anyExisted and redis.call('EXISTS', recordKey) == 1) then
    answers[i] = existing(recordKey, digest)
    if answers[i] == -1 and kind == 'c' then refusedCreations[dispatchId] = true end
  elseif after and (refusedCreations[after] or otherCreation(after, afterDigest)) then
    redis.call('SET', orphanPrefix .. dispatchId, '1', 'NX', 'PX', markerMs)
    answers[i] = -3
  elseif releasedKey and redis.call('SISMEMBER', releasedKey, token) == 1 then
    redis.call('SET', markerKey, '1', 'NX', 'PX', markerMs)
    answers[i] = -2
  else
    local fields = {'projectId', ARGV[a + 2], 'jobId', ARGV[a + 3], 'state', 'queued',
      'enqueuedAt', nowText}
    -- Only the fields that hold something, in the same HSET: every reader takes a missing key,
    -- meta, digest or traceparent for none, and a missing count (attempts, polls) for 0.
    addIfAny(fields, 'key', ARGV[a + 5])
    addIfAny(fields, 'meta', ARGV[a + 6])
    addIfAny(fields, 'digest', digest)
    addIfAny(fields, 'traceparent', traceparent)
    -- The deadline as epoch ms; a ttl counts from this script's time, the fleet's one clock.
    local deadline = ARGV[a + 10]
    if string.sub(deadline, 1, 1) == '+' then
      deadline = string.format('%d', now + tonumber(string.sub(deadline, 2)))
    end
    addIfAny(fields, 'expiresAt', deadline)
    -- A creation (`c`), or a follow-up chained to one (`a` and the creation's dispatch id).
    if kind == 'c' then addIfAny(fields, 'kind', 'create') end
    if after then
      addIfAny(fields, 'after', after)
      -- The job its creation made, if known: it then outlives the creation's record.
      local made = redis.pcall('HGET', recordPrefix .. after, 'target')
      if type(made) == 'string' then addIfAny(fields, 'target', made) end
    end
    redis.call('HSET', recordKey, unpack(fields))
    prompts[#prompts + 1] = promptKey
    prompts[#prompts + 1] = ARGV[a + 4]
    local alone, moved = laneJoin(headsKey, laneKey, ARGV[a + 3], dispatchId)
    if alone then
      projects[headsKey] = true
    else
      opened[#opened + 1] = nowText
      opened[#opened + 1] = dispatchId
      if moved then
        -- Not among the checked keys: one of another type counts as enqueued now.
        local since = redis.pcall('HGET', recordPrefix .. moved, 'enqueuedAt')
        if type(since) ~= 'string' then since = nowText end
        redis.call('ZADD', openKey, since, moved)
      end
    end
    registered[recordKey] = digest
    fresh[#fresh + 1] = i
    queuedBy[ARGV[a + 2]] = (queuedBy[ARGV[a + 2]] or 0) + 1
    answers[i] = 1
  end
end
-- One MSET of the new records' prompts, and one ZADD of those in a lane of two or more: they are
-- open from the same time.
inChunks('MSET', nil, prompts, 2)
inChunks('ZADD', openKey, opened, 2)
-- And one ZADD of the projects that have a new lane of one.
local named = {}
for headsKey in pairs(projects) do
  named[#named + 1] = 0
  named[#named + 1] = string.sub(headsKey, namesFrom)
end
inChunks('ZADD', projectsKey, named, 2)
for projectId, count in pairs(queuedBy) do
  redis.call('HINCRBY', countsKey, 'q:' .. projectId, count)
end
-- A new record voids its id's orphan marker (left by a refused send of the same key, or by the
-- event of an earlier record lost): answered 2, since that send's job may have ended already.
local markers = {}
for k, i in ipairs(fresh) do markers[k] = orphanPrefix .. string.sub(KEYS[4 * i - 1], idsFrom) end
if inChunks('EXISTS', nil, markers, 1) > 0 then
  for k, i in ipairs(fresh) do
    if redis.call('DEL', markers[k]) == 1 then answers[i] = 2 end
  end
end
return answers
