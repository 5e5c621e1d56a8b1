import { createHash } from 'node:crypto';
import { Router } from 'express';
import { z } from 'zod';
import { SCOPES, type Scope } from '../config/index.js';
import { SCOPE_SETTING } from './scopes.js';

/**
 * The OpenAPI 3.1 document of the HTTP API (`GET /openapi.json`), built from the zod schemas of
 * the routes. A module that adds routes describes each with one call, next to the route:
 *
 * ```ts
 * describeRoute({
 *   method: 'get', path: '/v1/events', scope: 'events', summary: 'completion events, oldest first',
 *   query: EventsQuery, responses: { 200: { description: 'a page of events', schema: EventsPage } },
 * });
 * ```
 *
 * The errors a scoped route can answer (401, 403, 404 when the scope is off) are added for it.
 */

/** One route of the document. Paths are written as express writes them (`/v1/x/:id`). */
export interface RouteDoc {
  readonly method: 'get' | 'post' | 'put' | 'delete';
  readonly path: string;
  /** The scope of its token; `undefined`: no token. */
  readonly scope: Scope | undefined;
  readonly summary: string;
  /** The JSON body, as the route validates it. */
  readonly request?: z.ZodType;
  /** Query parameters: an object schema, one parameter per property. */
  readonly query?: z.ZodObject;
  /** Each status it answers; errors may leave out `schema` (the common error body). */
  readonly responses: Readonly<Record<number, ResponseDoc>>;
}

/** One answer of a route: JSON unless `contentType` says otherwise (`text/event-stream`). */
export interface ResponseDoc {
  readonly description: string;
  readonly schema?: z.ZodType;
  readonly contentType?: string;
}

/** The JSON error body of every route (`src/http/errors.ts`). */
export const ErrorBody = z.looseObject({
  error: z.string(),
  code: z.string().optional(),
  scope: z.enum(SCOPES).optional(),
  problems: z
    .array(z.looseObject({ field: z.string(), message: z.string(), index: z.number().optional() }))
    .optional(),
});

const routes = new Map<string, RouteDoc>();

/** Adds a route to the document (a second call for the same method and path replaces it). */
export function describeRoute(doc: RouteDoc): void {
  routes.set(`${doc.method} ${doc.path}`, doc);
}

/** The routes described so far, in the order they were first described. */
export function describedRoutes(): readonly RouteDoc[] {
  return [...routes.values()];
}

/** `GET /openapi.json`, without a token: the document of every route described. */
export function openApiRouter(version: string): Router {
  const router = Router();
  router.get('/openapi.json', (_req, res) => {
    res.set('cache-control', 'no-store').json(openApiDocument(version));
  });
  return router;
}

/** The whole document. */
export function openApiDocument(version: string): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  const paths: Record<string, Record<string, unknown>> = {};
  for (const doc of routes.values()) {
    const path = doc.path.replace(/:(\w+)/g, '{$1}');
    paths[path] = { ...paths[path], [doc.method]: operation(doc, components) };
  }
  const securitySchemes = Object.fromEntries(
    SCOPES.map((scope) => [
      scope,
      { type: 'http', scheme: 'bearer', description: `a token of ${SCOPE_SETTING[scope]}` },
    ]),
  );
  return {
    openapi: '3.1.0',
    info: { title: 'agent-dispatch', version },
    paths,
    components: { schemas: components, securitySchemes },
  };
}

function operation(doc: RouteDoc, components: Record<string, unknown>): Record<string, unknown> {
  const id = `${doc.method}${doc.path.replace(/[^A-Za-z0-9]+(\w)?/g, (_m, c?: string) => (c ?? '').toUpperCase())}`;
  const responses: Record<string, unknown> = {};
  const all = doc.scope
    ? {
        401: { description: 'no token, or an unknown one' },
        403: { description: `a token of another scope than ${doc.scope}` },
        404: { description: `not found, or the route is off (${SCOPE_SETTING[doc.scope]} unset)` },
        ...doc.responses,
      }
    : doc.responses;
  for (const [status, { description, schema, contentType }] of Object.entries(all) as [
    string,
    ResponseDoc,
  ][]) {
    const body = schema ?? (Number(status) >= 400 ? ErrorBody : undefined);
    const type = contentType ?? 'application/json';
    responses[status] = {
      description,
      ...(body && { content: { [type]: { schema: jsonSchema(body, components) } } }),
    };
  }
  const params = [...doc.path.matchAll(/:(\w+)/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const query = Object.entries(doc.query?.shape ?? {}).map(([name, schema]) => ({
    name,
    in: 'query',
    required: !(schema as z.ZodType).safeParse(undefined).success,
    schema: jsonSchema(schema as z.ZodType, components),
  }));
  return {
    operationId: id,
    summary: doc.summary,
    security: doc.scope ? [{ [doc.scope]: [] }] : [],
    ...(params.length + query.length > 0 && { parameters: [...params, ...query] }),
    ...(doc.request && {
      requestBody: {
        required: true,
        content: { 'application/json': { schema: jsonSchema(doc.request, components) } },
      },
    }),
    responses,
  };
}

/**
 * A schema as JSON Schema 2020-12 (OpenAPI 3.1's dialect), its `$defs` moved into the
 * document's components: a `#/$defs/...` reference would otherwise point into the document's root.
 */
function jsonSchema(schema: z.ZodType, components: Record<string, unknown>): unknown {
  const {
    $defs,
    $schema: _dialect,
    ...rest
  } = z.toJSONSchema(schema, {
    io: 'input',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  // Named after their content: two calls may both call a different schema `__schema0`.
  const rename = (name: string) =>
    `json${createHash('sha256')
      .update(JSON.stringify(($defs as Record<string, unknown>)[name]))
      .digest('hex')
      .slice(0, 10)}`;
  const relink = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(relink);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/')
          ? `#/components/schemas/${rename(v.slice('#/$defs/'.length))}`
          : relink(v),
      ]),
    );
  };
  for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, unknown>))
    components[rename(name)] = relink(def);
  return relink(rest);
}
