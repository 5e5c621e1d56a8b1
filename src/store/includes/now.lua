-- Redis's clock, read at the start: defines the local `now` (see includes/clock.lua).
--- @include "includes/clock"
local now = clockNow()
