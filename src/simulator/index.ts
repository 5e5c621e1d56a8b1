/**
 * The bundled agent-API simulator: a real HTTP server for both endpoints of the vendor's OpenAPI
 * document, with a sliding send limit, a job lifecycle and injectable faults. Used by tests,
 * benchmarks, demos (`agent-dispatch simulate`) and `start` when no API key is set.
 */
export { startSimulator } from './server.js';
export { UNKNOWN_STATUS } from './endpoints.js';
export {
  NO_FAULTS,
  SIMULATOR_DEFAULTS,
  type Delivery,
  type Faults,
  type RunEnding,
  type RecordedRequest,
  type Simulator,
  type SimulatorOptions,
} from './options.js';
