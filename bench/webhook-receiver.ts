/**
 * Webhook receiver child process for the `webhooks` scenario. Target i posts to `/t/<i>`. It
 * answers 200 at once, de-duplicates by the delivery id header (delivery is at-least-once), keeps
 * the change ids it saw per target and the lag from the event's `occurred_at` to arrival.
 * The orchestrator asks for a snapshot over IPC.
 */
import http from 'node:http';
import { createHistogram, encodeHistogram } from './histogram.js';

export type ToReceiver = { type: 'snapshot'; ids: boolean };

export interface ReceiverSnapshot {
  received: number;
  duplicates: number;
  perTarget: number[];
  /** Distinct change ids per target (only when asked: it can be large). */
  changeIds: string[][] | null;
  /** Lag from `occurred_at` to arrival, µs, encoded HDR histogram. */
  lag: string;
  firstAt: number | null;
  lastAt: number | null;
  /** Deliveries per whole second since the first one (for the peak rate). */
  perSecond: number[];
}

export type FromReceiver = { type: 'listening'; port: number } | { type: 'snapshot'; snapshot: ReceiverSnapshot };

const targets = Number(process.argv[2] ?? '10');
const seenDeliveries = new Set<string>();
const changeIds: Set<string>[] = Array.from({ length: targets }, () => new Set());
const perTarget: number[] = new Array<number>(targets).fill(0);
const perSecond: number[] = [];
const lag = createHistogram();
let received = 0;
let duplicates = 0;
let firstAt: number | null = null;
let lastAt: number | null = null;

function header(req: http.IncomingMessage, suffix: string): string | undefined {
  // The brand word in header names is configurable (X-{Brand}-Delivery): match on the suffix.
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith('x-') && name.endsWith(suffix) && typeof value === 'string') return value;
  }
  return undefined;
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    const now = Date.now();
    const match = /^\/t\/(\d+)$/.exec(req.url ?? '');
    const target = match ? Number(match[1]) : -1;
    if (target < 0 || target >= targets) return;
    const delivery = header(req, '-delivery') ?? `${target}:${received}`;
    if (seenDeliveries.has(delivery)) {
      duplicates++;
      return;
    }
    seenDeliveries.add(delivery);
    received++;
    perTarget[target] = (perTarget[target] ?? 0) + 1;
    firstAt ??= now;
    lastAt = now;
    const second = Math.floor((now - firstAt) / 1000);
    while (perSecond.length <= second) perSecond.push(0);
    perSecond[second] = (perSecond[second] ?? 0) + 1;
    try {
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        occurred_at?: string;
        data?: { change?: { id?: string } };
      };
      const id = event.data?.change?.id;
      if (typeof id === 'string') changeIds[target]?.add(id);
      const occurred = Date.parse(event.occurred_at ?? '');
      if (Number.isFinite(occurred)) lag.recordValue(Math.max(1, Math.round((now - occurred) * 1000)));
    } catch {
      // A body that is not an event is still a delivery; verification will miss its change id.
    }
  });
});
server.keepAliveTimeout = 60_000;

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.send?.({ type: 'listening', port } satisfies FromReceiver);
});

process.on('message', (message: ToReceiver) => {
  if (message.type !== 'snapshot') return;
  const snapshot: ReceiverSnapshot = {
    received,
    duplicates,
    perTarget: [...perTarget],
    changeIds: message.ids ? changeIds.map((s) => [...s]) : null,
    lag: encodeHistogram(lag),
    firstAt,
    lastAt,
    perSecond: [...perSecond],
  };
  process.send?.({ type: 'snapshot', snapshot } satisfies FromReceiver);
});

process.on('disconnect', () => process.exit(0));
