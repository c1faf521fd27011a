import { startTestServer, type StartOptions, type TestServer } from '../helpers/server.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/** A server and a loopback receiver for the webhook tests, with small helpers over both. */
export interface Env {
  s: TestServer;
  rx: WebhookReceiver;
  close(): Promise<void>;
}

export async function startEnv(opts: StartOptions & { brand?: string } = {}): Promise<Env> {
  const env = { ...opts.env };
  if (opts.brand) env.REPOHOST_BRAND = opts.brand;
  const [s, rx] = await Promise.all([startTestServer({ ...opts, env }), startWebhookReceiver({ brand: opts.brand })]);
  return {
    s,
    rx,
    async close() {
      await rx.close();
      await s.stop();
      s.cleanup();
    },
  };
}

export interface CreatedTarget {
  id: string;
  secret: string;
  path: string;
  body: any;
}

let pathSeq = 0;

/** Creates a target posting to a fresh receiver path whose secret the receiver then checks. */
export async function createTarget(e: Env, fields: Record<string, unknown> = {}, path = `/t${++pathSeq}`): Promise<CreatedTarget> {
  const res = await e.s.api('POST', '/acme/webhook-targets', { body: { url: e.rx.url(path), ...fields } });
  if (res.status !== 201) throw new Error(`create target: ${res.status} ${res.text}`);
  e.rx.setSecret(path, res.json.secret);
  return { id: res.json.id, secret: res.json.secret, path, body: res.json };
}

export async function createRepo(e: Env, name: string, fields: Record<string, unknown> = {}): Promise<any> {
  const res = await e.s.api('POST', '/acme/repos', { body: { name, ...fields } });
  if (res.status !== 201) throw new Error(`create repo ${name}: ${res.status} ${res.text}`);
  return res.json;
}

export async function deliveries(e: Env, targetId: string, query = ''): Promise<any[]> {
  const res = await e.s.api('GET', `/acme/webhook-targets/${targetId}/deliveries${query}`);
  if (res.status !== 200) throw new Error(`deliveries: ${res.status} ${res.text}`);
  return res.json.deliveries;
}

/** Polls the target's delivery log until `pred` holds for it (newest first). */
export async function waitForLog(e: Env, targetId: string, pred: (log: any[]) => boolean, timeoutMs = 5000): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const log = await deliveries(e, targetId, '?limit=100');
    if (pred(log)) return log;
    if (Date.now() > deadline) throw new Error(`delivery log never matched: ${JSON.stringify(log)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
