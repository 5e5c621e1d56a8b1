import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small OTLP/HTTP trace receiver of the tests' own (JSON protocol: the processes under test run
 * with OTEL_EXPORTER_OTLP_PROTOCOL=http/json): it keeps every span it is sent, flattened with its
 * resource's attributes, and answers 200 as a collector does.
 */

/** OTLP's span kinds (the `kind` field of a span in OTLP/JSON). */
export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

/** One received span; ids are hex, attribute values as OTLP/JSON carries them, made plain. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Readonly<Record<string, unknown>>;
  /** `status.code`: 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
  readonly resource: Readonly<Record<string, unknown>>;
}

export interface OtlpReceiver {
  /** The base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds `/v1/traces`). */
  readonly url: string;
  readonly spans: readonly ReceivedSpan[];
  /** Export requests received (any path), whether or not they held spans. */
  readonly requests: number;
  close(): Promise<void>;
}

interface OtlpAttribute {
  key: string;
  value: Record<string, unknown>;
}

/** `{stringValue: "x"}` → "x", `{intValue: "3"}` → 3, and so on. */
function plain(value: Record<string, unknown> | undefined): unknown {
  if (!value) return undefined;
  if ('stringValue' in value) return value['stringValue'];
  if ('intValue' in value) return Number(value['intValue']);
  if ('doubleValue' in value) return value['doubleValue'];
  if ('boolValue' in value) return value['boolValue'];
  if ('arrayValue' in value) {
    const values = (value['arrayValue'] as { values?: Record<string, unknown>[] }).values ?? [];
    return values.map(plain);
  }
  return value;
}

function attributesOf(list: OtlpAttribute[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, plain(a.value)]));
}

function spansOf(body: unknown): ReceivedSpan[] {
  type Body = {
    resourceSpans?: {
      resource?: { attributes?: OtlpAttribute[] };
      scopeSpans?: {
        spans?: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: OtlpAttribute[];
          status?: { code?: number };
        }[];
      }[];
    }[];
  };
  return ((body as Body).resourceSpans ?? []).flatMap((rs) => {
    const resource = attributesOf(rs.resource?.attributes);
    return (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
        kind: s.kind,
        attributes: attributesOf(s.attributes),
        statusCode: s.status?.code ?? 0,
        resource,
      })),
    );
  });
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Starts a receiver on a free loopback port. A body that is not OTLP/JSON fails loudly (400). */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    bodyOf(req).then(
      (text) => {
        try {
          if (req.url !== '/v1/traces') throw new Error(`unexpected path ${req.url ?? ''}`);
          spans.push(...spansOf(JSON.parse(text)));
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } catch (err) {
          res.writeHead(400).end(String(err));
        }
      },
      () => res.writeHead(400).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
