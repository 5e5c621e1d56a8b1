export { startPoller, POLL_SCHEDULER_ID, type PollerOptions, type PollerRole } from './role.js';
