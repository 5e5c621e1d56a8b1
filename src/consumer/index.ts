export { startConsumer, type ConsumerOptions, type ConsumerRole } from './worker.js';
