-- A key of another type than its script expects (a hand edit) fails the call before its first
-- write. `expected` is a list of {key, type} pairs (type as TYPE names it); the answer is the
-- error naming the first such key, or nil when each is absent or of its type.
local function wrongType(expected)
  for _, pair in ipairs(expected) do
    local found = redis.call('TYPE', pair[1])['ok']
    if found ~= 'none' and found ~= pair[2] then
      return 'WRONGTYPE ' .. pair[1] .. ' holds a ' .. found .. ' where a ' .. pair[2] .. ' belongs'
    end
  end
  return nil
end
