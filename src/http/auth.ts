import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import type { Scope, ScopeTokens } from '../config/index.js';

/**
 * Credentials of the HTTP server: a bearer token, HTTP Basic (any user, the token as password) and
 * the dashboard's session cookie. Every comparison is constant-time. The scopes each token grants
 * are in `scopes.ts`.
 */

/** Name of the cookie that `/dashboard?token=` sets. */
export const SESSION_COOKIE = 'agent_dispatch_dashboard';

/**
 * Compares a presented secret with the expected one in constant time. Both sides are hashed first,
 * so the comparison neither leaks the expected length nor throws on a length mismatch.
 */
export function secretsEqual(presented: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(presented), digest(expected));
}

/** The token of an `Authorization: Bearer <token>` header, or `undefined`. */
export function bearerToken(req: Request): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
  return match?.[1];
}

/** The password of an `Authorization: Basic` header (the user name is ignored), or `undefined`. */
export function basicPassword(req: Request): string | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(req.get('authorization') ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

/**
 * The cookie value that stands for `token`. It is derived, not the token itself, so a copied
 * cookie never reveals the token that `start` printed or that other tools use.
 */
export function sessionValue(token: string): string {
  return createHmac('sha256', token)
    .update('agent-dispatch dashboard session v1')
    .digest('base64url');
}

/** The value of one cookie of the request, or `undefined`. Parsed by hand: one cookie, no dependency. */
export function cookieValue(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A `Set-Cookie` value for the dashboard session, scoped to the dashboard's path. */
export function sessionCookie(token: string, path: string, secure: boolean): string {
  const attributes = [`Path=${path}`, 'HttpOnly', 'SameSite=Strict', ...(secure ? ['Secure'] : [])];
  return [`${SESSION_COOKIE}=${sessionValue(token)}`, ...attributes].join('; ');
}

/**
 * The dashboard scopes (`dashboard`, `operator`) of the credentials the request carries: a bearer
 * token, a Basic password or the session cookie, each checked against every token of both
 * scopes. Any one that matches counts: a browser may still send a stale Basic header next to a
 * fresh cookie.
 */
export function dashboardScopes(req: Request, tokens: ScopeTokens): ReadonlySet<Scope> {
  const presented = [bearerToken(req), basicPassword(req)].filter((t) => t !== undefined);
  const cookie = cookieValue(req, SESSION_COOKIE);
  const granted = new Set<Scope>();
  for (const scope of ['dashboard', 'operator'] as const) {
    let match = false;
    for (const token of tokens[scope]) {
      for (const candidate of presented) match = secretsEqual(candidate, token) || match;
      if (cookie !== undefined) match = secretsEqual(cookie, sessionValue(token)) || match;
    }
    if (match) granted.add(scope);
  }
  return granted;
}
