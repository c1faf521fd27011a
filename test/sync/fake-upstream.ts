import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import { createDeflate } from 'node:zlib';
import { createHash } from 'node:crypto';
import { once } from 'node:events';

/**
 * Upstreams that misbehave on purpose, on loopback, for the tests of what a sync accepts: a
 * hand-written smart-HTTP server whose answers each test writes itself (the real git server is
 * test/helpers/git-server.ts), and a TCP front for any server that drops connections left idle
 * for a while, answering the next request on one with a reset, as a load balancer or NAT that has
 * forgotten the connection does.
 */

/** What one repository path (`/<name>.git`) answers; a missing handler answers 404. */
export interface FakeRepo {
  discovery?: (res: ServerResponse, service: string) => void | Promise<void>;
  uploadPack?: (res: ServerResponse, body: Buffer) => void | Promise<void>;
  receivePack?: (res: ServerResponse, body: Buffer) => void | Promise<void>;
}

export interface FakeUpstream {
  url(name: string): string;
  set(name: string, repo: FakeRepo): void;
  close(): Promise<void>;
}

export function pkt(payload: string | Buffer): Buffer {
  const data = typeof payload === 'string' ? Buffer.from(payload) : payload;
  return Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0')), data]);
}

export const FLUSH = Buffer.from('0000');

/** A ref advertisement of `service` listing `refs` (name → oid) with `caps`. */
export function advertisement(service: string, refs: Record<string, string>, caps: string[]): Buffer {
  const lines = [pkt(`# service=${service}\n`), FLUSH];
  Object.entries(refs).forEach(([name, oid], i) => lines.push(pkt(i === 0 ? `${oid} ${name}\0${caps.join(' ')}\n` : `${oid} ${name}\n`)));
  lines.push(FLUSH);
  return Buffer.concat(lines);
}

export function answerAdvertisement(res: ServerResponse, service: string, refs: Record<string, string>, caps: string[]): void {
  res.writeHead(200, { 'content-type': `application/x-${service}-advertisement` }).end(advertisement(service, refs, caps));
}

export function answerResult(res: ServerResponse, service: string, body: Buffer): void {
  res.writeHead(200, { 'content-type': `application/x-${service}-result` }).end(body);
}

/** Writes `chunk` again and again, as fast as the client reads, until `total` bytes or the client goes away. */
export async function writeRepeatedly(res: ServerResponse, chunk: Buffer, total = Infinity): Promise<void> {
  let open = true;
  const closed = new Promise<void>((resolve) => res.once('close', resolve)).then(() => (open = false));
  for (let sent = 0; sent < total && open; sent += chunk.length) {
    if (!res.write(sent + chunk.length <= total ? chunk : chunk.subarray(0, total - sent))) await Promise.race([once(res, 'drain'), closed]);
  }
  if (open) res.end();
}

/** A pack with one blob entry declaring `declared` bytes whose data is `deflated`. */
export function packWithBlob(declared: number, deflated: Buffer): Buffer {
  const bytes: number[] = [];
  let byte = (3 << 4) | (declared % 16);
  let rest = Math.floor(declared / 16);
  while (rest > 0) {
    bytes.push(byte | 0x80);
    byte = rest % 128;
    rest = Math.floor(rest / 128);
  }
  bytes.push(byte);
  const header = Buffer.alloc(12);
  header.write('PACK', 0, 'latin1');
  header.writeUInt32BE(2, 4);
  header.writeUInt32BE(1, 8);
  const body = Buffer.concat([header, Buffer.from(bytes), deflated]);
  return Buffer.concat([body, createHash('sha1').update(body).digest()]);
}

/** `size` zero bytes deflated, without ever holding them. */
export async function deflatedZeros(size: number): Promise<Buffer> {
  const deflate = createDeflate();
  const out: Buffer[] = [];
  deflate.on('data', (d: Buffer) => out.push(d));
  const zeros = Buffer.alloc(1024 * 1024);
  for (let left = size; left > 0; left -= zeros.length) {
    if (!deflate.write(left >= zeros.length ? zeros : zeros.subarray(0, left))) await new Promise((r) => deflate.once('drain', r));
  }
  await new Promise<void>((resolve) => deflate.end(resolve));
  return Buffer.concat(out);
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of req) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

export async function startFakeUpstream(): Promise<FakeUpstream> {
  const repos = new Map<string, FakeRepo>();
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const m = /^\/([^/]+)\.git\/(info\/refs|git-upload-pack|git-receive-pack)$/.exec(url.pathname);
      const repo = m ? repos.get(m[1]!) : undefined;
      const body = await bodyOf(req);
      const handler = m?.[2] === 'info/refs' ? repo?.discovery : m?.[2] === 'git-upload-pack' ? repo?.uploadPack : repo?.receivePack;
      if (!handler) return void res.writeHead(404).end();
      if (m![2] === 'info/refs') await (handler as NonNullable<FakeRepo['discovery']>)(res, url.searchParams.get('service') ?? '');
      else await (handler as NonNullable<FakeRepo['uploadPack']>)(res, body);
    })().catch(() => res.destroy());
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}.git`,
    set: (name, repo) => void repos.set(name, repo),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export interface IdleResetFront {
  /** `http://127.0.0.1:<port>`: the target server's paths, through the front. */
  url: string;
  /** Connections reset because a request came after they had been idle too long. */
  resets: number;
  close(): Promise<void>;
}

/** A TCP front for `targetPort` that resets a connection whose next bytes come after `idleMs` of silence. */
export async function startIdleResetFront(targetPort: number, idleMs: number): Promise<IdleResetFront> {
  const sockets = new Set<Socket>();
  const front: IdleResetFront = { url: '', resets: 0, close: async () => undefined };
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    let last = Date.now();
    client.on('data', (data) => {
      if (Date.now() - last > idleMs) {
        front.resets++;
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      last = Date.now();
      upstream.write(data);
    });
    upstream.on('data', (data) => {
      last = Date.now();
      client.write(data);
    });
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', drop).on('error', drop);
    upstream.on('close', drop).on('error', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  front.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  front.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
  return front;
}
