export { startPoller, POLL_SCHEDULER_ID } from './role.js';
