import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { WEBHOOK_EVENT_KINDS } from '../../src/protocol/schemas/webhooks.js';
import { openStorage } from '../../src/storage/database.js';
import { hasPendingDeliveries } from '../../src/storage/webhook-store.js';
import { outboxEvents } from './outbox.js';
import type { EventEnvelope } from '../../src/storage/records.js';
import type { TestServer } from './server.js';

/**
 * A real webhook receiver on loopback, as a customer would write one: it verifies every
 * delivery's signature with the target's secret (HMAC-SHA256 over `<t>.<raw body>`, keyed with
 * the whole `whsec_…` string, timestamp within 5 minutes) and refuses what does not verify with
 * 401. Each path (`/a`, `/b`, …) can stand for a different target with its own secret and
 * behaviour; every request is recorded.
 */
export interface ReceivedDelivery {
  path: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
  verified: boolean;
  /** The status the receiver answered (0 while unanswered, or when it never answers). */
  answered: number;
  at: number;
}

/**
 * What the receiver does with a request: answer a status (with headers, after `delayMs`), never
 * answer, or drop the connection without an answer (`reset`).
 */
export type Behaviour = { status: number; headers?: Record<string, string>; delayMs?: number } | 'hang' | 'reset';

export interface WebhookReceiver {
  /** `http://127.0.0.1:<port><path>` */
  url(path: string): string;
  /** The secret deliveries to `path` must be signed with. */
  setSecret(path: string, secret: string): void;
  /** Decides the answer to each request on `path` (default 200). Called after verification. */
  behave(path: string, fn: (req: ReceivedDelivery, nth: number) => Behaviour): void;
  /** Every request received on `path` (verified or not), in arrival order. */
  received(path: string): ReceivedDelivery[];
  /** Distinct verified deliveries on `path` (first arrival of each delivery id). */
  unique(path: string): ReceivedDelivery[];
  /** Resolves once `pred` holds (checked on every arrival and every 20 ms), rejects after `timeoutMs`. */
  waitFor(pred: () => boolean, timeoutMs?: number, what?: string): Promise<void>;
  close(): Promise<void>;
}

/** The receiver side of the signature check (API §11.3). */
export function verifySignature(secret: string, header: string | undefined, raw: string, now = Date.now()): boolean {
  if (!header) return false;
  const m = /^t=(\d+),sha256=([0-9a-f]{64})$/.exec(header);
  if (!m) return false;
  const t = Number(m[1]);
  if (Math.abs(now / 1000 - t) > 300) return false;
  const expected = createHmac('sha256', secret).update(`${m[1]}.${raw}`).digest();
  return timingSafeEqual(expected, Buffer.from(m[2]!, 'hex'));
}

export interface ReceiverOptions {
  brand?: string;
  /** The receiver's clock, for arrival times and the signature's age (a test's hand-moved clock). */
  now?: () => number;
}

export async function startWebhookReceiver(opts: ReceiverOptions = {}): Promise<WebhookReceiver> {
  const now = opts.now ?? Date.now;
  const signatureHeader = `x-${(opts.brand ?? 'Svc').toLowerCase()}-signature`;
  const secrets = new Map<string, string>();
  const behaviours = new Map<string, (req: ReceivedDelivery, nth: number) => Behaviour>();
  const log = new Map<string, ReceivedDelivery[]>();
  const sockets = new Set<Socket>();
  const hanging = new Set<ServerResponse>();
  const waiters = new Set<() => void>();

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const raw = Buffer.concat(chunks).toString('utf8');
      const secret = secrets.get(path);
      const verified = secret !== undefined && verifySignature(secret, req.headers[signatureHeader] as string | undefined, raw, now());
      let body: unknown = null;
      try {
        body = JSON.parse(raw);
      } catch {
        // recorded as unparsable
      }
      const entry: ReceivedDelivery = { path, headers: req.headers, raw, body, verified, answered: 0, at: now() };
      const list = log.get(path) ?? [];
      log.set(path, list);
      list.push(entry);
      const behaviour: Behaviour = verified ? (behaviours.get(path)?.(entry, list.length) ?? { status: 200 }) : { status: 401 };
      if (behaviour === 'hang') {
        hanging.add(res);
      } else if (behaviour === 'reset') {
        req.socket.destroy();
      } else {
        const answer = (): void => {
          if (res.destroyed) return;
          entry.answered = behaviour.status;
          res.writeHead(behaviour.status, { 'content-type': 'text/plain', ...behaviour.headers }).end('ok');
        };
        if (behaviour.delayMs) {
          hanging.add(res);
          setTimeout(() => {
            hanging.delete(res);
            answer();
          }, behaviour.delayMs);
        } else answer();
      }
      for (const fn of [...waiters]) fn();
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  const receiver: WebhookReceiver = {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    setSecret: (path, secret) => void secrets.set(path, secret),
    behave: (path, fn) => void behaviours.set(path, fn),
    received: (path) => log.get(path) ?? [],
    unique(path) {
      const seen = new Set<string>();
      return receiver.received(path).filter((d) => {
        const id = d.headers[`x-${(opts.brand ?? 'Svc').toLowerCase()}-delivery`] as string;
        if (!d.verified || seen.has(id)) return false;
        seen.add(id);
        return true;
      });
    },
    waitFor(pred, timeoutMs = 5000, what = 'condition') {
      return new Promise((resolve, reject) => {
        const deadline = Date.now() + timeoutMs;
        let done = false;
        const check = (): void => {
          if (done) return;
          const ok = pred();
          if (ok || Date.now() > deadline) {
            done = true;
            clearInterval(timer);
            waiters.delete(check);
            if (ok) resolve();
            else reject(new Error(`webhook receiver: timed out waiting for ${what}`));
            return;
          }
        };
        waiters.add(check);
        const timer = setInterval(check, 20);
        check();
      });
    },
    close() {
      for (const res of hanging) res.destroy();
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}

/**
 * Whether every event written so far has been delivered to `targetIds` for good (read from the
 * data directory: no API lists the outbox). Outbox first: an event still there has no delivery
 * yet; once it is gone, its delivery to a target is in the pending index until it is answered.
 */
export function deliveriesDrained(dataDir: string, targetIds: string[]): boolean {
  const storage = openStorage(dataDir);
  try {
    if (outboxEvents(storage.meta).length) return false;
    return !targetIds.some((targetId) => hasPendingDeliveries(storage.meta, targetId));
  } finally {
    void storage.close();
  }
}

/**
 * Every event the server emits, observed as a customer would: an org-wide target subscribed to
 * every kind, posting to its own receiver. `settled()` waits until every event written so far
 * has been delivered (the outbox is drained and no delivery is pending), so a test can then
 * count events, or their absence, exactly.
 */
export interface EventLog {
  receiver: WebhookReceiver;
  /** Delivered events in arrival order (in event order per repository), optionally of one repository (id or name). */
  events(repo?: string): EventEnvelope[];
  settled(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startEventLog(s: TestServer, opts: { brand?: string } = {}): Promise<EventLog> {
  const receiver = await startWebhookReceiver(opts);
  const path = '/event-log';
  const res = await s.api('POST', `/${s.org}/webhook-targets`, { body: { url: receiver.url(path), name: 'event-log', events: [...WEBHOOK_EVENT_KINDS] } });
  if (res.status !== 201) throw new Error(`event log target: ${res.status} ${res.text}`);
  receiver.setSecret(path, res.json.secret);
  const targetId = res.json.id as string;
  return {
    receiver,
    events(repo) {
      const all = receiver.unique(path).map((d) => d.body as EventEnvelope);
      return repo === undefined ? all : all.filter((e) => e.repository?.id === repo || e.repository?.name === repo);
    },
    // A delivery that timed out on a loaded machine is retried after its backoff: wait for it.
    async settled(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (!deliveriesDrained(s.dataDir, [targetId])) {
        if (Date.now() > deadline) throw new Error('event log: deliveries still pending');
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => receiver.close(),
  };
}
