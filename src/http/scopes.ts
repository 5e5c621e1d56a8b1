import type { Express, Request, RequestHandler, Response } from 'express';
import { SCOPES, type Scope, type ScopeTokens } from '../config/index.js';
import { bearerToken, secretsEqual } from './auth.js';
import { sendError } from './errors.js';

/**
 * Scoped tokens of the HTTP API. Each scope has its own setting, a comma-separated list so a
 * token can be rotated (add the new one, roll out, remove the old one):
 *
 * | scope | setting | grants |
 * | --- | --- | --- |
 * | `intake` | `INTAKE_TOKEN` | enqueue, create, status of a follow-up |
 * | `events` | `EVENTS_TOKEN` | reading events over HTTP |
 * | `operator` | `OPERATOR_TOKEN` | cancel, project controls, redrive, webhooks, the pages' buttons |
 * | `dashboard` | `DASHBOARD_TOKEN` | the pages, read-only |
 *
 * No token or an unknown one is a 401; a known token of another scope a 403 naming the scope
 * needed; a scope without any token is off (404 naming its setting). A token listed in two
 * settings has both scopes.
 */

export { SCOPES, type Scope, type ScopeTokens } from '../config/index.js';

/** The setting that lists each scope's tokens. */
export const SCOPE_SETTING: Readonly<Record<Scope, string>> = {
  intake: 'INTAKE_TOKEN',
  events: 'EVENTS_TOKEN',
  operator: 'OPERATOR_TOKEN',
  dashboard: 'DASHBOARD_TOKEN',
};

/** Where {@link installScopes} keeps the tokens: the app's locals, shared by every router. */
const TOKENS_LOCAL = 'agentDispatchScopeTokens';

/** Where {@link requireScope} records the scopes of the request's token, for later handlers. */
const GRANTED_LOCAL = 'scopes';

/**
 * Every scope `presented` belongs to. Each configured token is compared, in constant time, and
 * all of them are, so the time taken does not tell which list (or which entry) matched.
 */
export function scopesOf(presented: string, tokens: ScopeTokens): ReadonlySet<Scope> {
  const granted = new Set<Scope>();
  for (const scope of SCOPES) {
    let match = false;
    for (const token of tokens[scope]) match = secretsEqual(presented, token) || match;
    if (match) granted.add(scope);
  }
  return granted;
}

/** Makes the tokens of each scope known to {@link requireScope}; `createApp` calls it first. */
export function installScopes(app: Express, tokens: ScopeTokens): void {
  app.locals[TOKENS_LOCAL] = tokens;
}

/** The tokens {@link installScopes} gave the request's app. */
export function tokensOf(req: Request): ScopeTokens {
  const tokens = req.app.locals[TOKENS_LOCAL] as ScopeTokens | undefined;
  // A router mounted on an app that never installed them is a wiring mistake, not a client's.
  if (!tokens) throw new Error('requireScope: installScopes(app, config.tokens) was not called');
  return tokens;
}

/** The scopes a previous {@link requireScope} (or the dashboard login) granted this request. */
export function grantedScopes(res: Response): ReadonlySet<Scope> {
  const granted: unknown = res.locals[GRANTED_LOCAL];
  return granted instanceof Set ? (granted as ReadonlySet<Scope>) : new Set();
}

/** Records the scopes of the request's token; see {@link grantedScopes}. */
export function grantScopes(res: Response, scopes: ReadonlySet<Scope>): void {
  res.locals[GRANTED_LOCAL] = scopes;
}

/**
 * Lets a request through with `Authorization: Bearer <one of tokens>`, or with none when the list
 * is empty (the route is open): `/metrics` behind `METRICS_TOKEN`. 401 naming `setting` otherwise.
 */
export function requireListedToken(tokens: readonly string[], setting: string): RequestHandler {
  return (req, res, next) => {
    if (tokens.length === 0) return next();
    const presented = bearerToken(req);
    let match = false;
    for (const token of tokens)
      match = (presented !== undefined && secretsEqual(presented, token)) || match;
    if (match) return next();
    res.set('www-authenticate', 'Bearer realm="agent-dispatch"');
    sendError(res, 401, `needs Authorization: Bearer <${setting}>`, { code: 'unauthenticated' });
  };
}

/**
 * Express middleware that lets a request through only with `Authorization: Bearer <token>` of
 * `scope`. Mount it before the route's handler (and before a body parser, so an unauthenticated
 * body is never read):
 *
 * ```ts
 * router.get('/v1/events', requireScope('events'), async (req, res) => { ... });
 * router.use('/v1/webhooks', requireScope('operator'));
 * ```
 *
 * Answers 404 when the scope has no token (the route is off, the answer names the setting), 401
 * without a bearer token or with an unknown one, 403 naming the scope needed for a token of
 * another scope. The handler can read the token's scopes with {@link grantedScopes}. The app must
 * have been given the tokens with {@link installScopes} (`createApp` does).
 */
export function requireScope(scope: Scope): RequestHandler {
  const setting = SCOPE_SETTING[scope];
  return (req, res, next) => {
    const tokens = tokensOf(req);
    if (tokens[scope].length === 0)
      return sendError(res, 404, `this route is off: set ${setting} to use it`, {
        code: 'scope_off',
        scope,
      });
    const presented = bearerToken(req);
    res.set('www-authenticate', `Bearer realm="agent-dispatch", scope="${scope}"`);
    if (presented === undefined)
      return sendError(res, 401, `missing Authorization: Bearer <${setting}>`, {
        code: 'unauthenticated',
        scope,
      });
    const granted = scopesOf(presented, tokens);
    if (granted.size === 0)
      return sendError(res, 401, 'unknown bearer token', { code: 'unauthenticated', scope });
    if (!granted.has(scope))
      return sendError(res, 403, `this route needs the ${scope} scope (a token of ${setting})`, {
        code: 'forbidden',
        scope,
      });
    res.removeHeader('www-authenticate');
    grantScopes(res, granted);
    next();
  };
}
