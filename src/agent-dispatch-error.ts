/**
 * The base of every error agent-dispatch throws: callers branch on its class (`instanceof`) or on
 * its stable `code`, never on the message. `cause` is kept where there is one. This module imports
 * nothing, so every folder may extend it without an import cycle; `src/errors.ts` lists them all.
 */
export abstract class AgentDispatchError extends Error {
  /** Stable, snake_case, unique to its class (docs/errors.md). */
  abstract readonly code: string;
}
