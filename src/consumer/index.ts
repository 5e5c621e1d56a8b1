export { startConsumer } from './worker.js';
