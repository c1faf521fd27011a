import { readFileSync } from 'node:fs';
import { connect } from 'node:net';

/**
 * HTTP/1.1 over a plain socket, for what fetch will not send: paths that the URL parser would
 * normalize (`/acme/..`), bodies written piece by piece without a Content-Length, and uploads
 * that stop sending as soon as the server answers.
 */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Request body bytes written before the response started to arrive. */
  sentBeforeResponse: number;
}

export interface RawRequest {
  method: string;
  /** The request target as sent (a Buffer for bytes that are not UTF-8 text). */
  path: string | Buffer;
  headers?: Record<string, string>;
  /** A whole body (sent with Content-Length unless headers say otherwise). */
  body?: string | Buffer;
  /** Or: a body streamed chunked, `count` pieces of `size` bytes, stopped when a response arrives. */
  stream?: { count: number; size: number; byte?: number };
  /** Or: declare this Content-Length and send only `partial` bytes of it. */
  declared?: { length: number; partial: number };
  timeoutMs?: number;
}

function parse(raw: Buffer, sent: number): RawResponse | null {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine, ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const body = raw.subarray(end + 4);
  const length = Number(headers['content-length'] ?? NaN);
  if (Number.isFinite(length) && body.length < length) return null;
  return { status: Number(statusLine!.split(' ')[1]), headers, body: body.toString('utf8'), sentBeforeResponse: sent };
}

export function rawRequest(port: number, req: RawRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    // Bytes, decoded once whole: a character split between two reads must not become two U+FFFD.
    let received = Buffer.alloc(0);
    let sent = 0;
    let answered = false;
    let firstByteSent = -1;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response within ${req.timeoutMs ?? 10000} ms: ${JSON.stringify(received.subarray(0, 300).toString('latin1'))}`));
    }, req.timeoutMs ?? 10000);
    const finish = (res: RawResponse): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(res);
    };
    socket.on('data', (d) => {
      if (firstByteSent < 0) firstByteSent = sent;
      answered = true;
      received = Buffer.concat([received, d]);
      const res = parse(received, firstByteSent);
      if (res) finish(res);
    });
    socket.on('error', () => {
      const res = parse(received, firstByteSent);
      if (res) finish(res);
    });
    socket.on('close', () => {
      const res = parse(Buffer.concat([received, Buffer.from('\r\n\r\n')]), firstByteSent);
      clearTimeout(timer);
      if (res) resolve(res);
      else reject(new Error(`connection closed without a response (sent ${sent} bytes)`));
    });
    socket.on('connect', () => {
      const headers: Record<string, string> = { host: `127.0.0.1:${port}`, ...req.headers };
      if (req.body !== undefined && headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) {
        headers['content-length'] = String(Buffer.byteLength(req.body));
      }
      if (req.stream) headers['transfer-encoding'] = 'chunked';
      if (req.declared) headers['content-length'] = String(req.declared.length);
      socket.write(Buffer.concat([Buffer.from(`${req.method} `), Buffer.from(req.path), Buffer.from(` HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`)]));
      if (req.body !== undefined) {
        socket.write(req.body);
        sent += Buffer.byteLength(req.body);
      } else if (req.declared) {
        socket.write(Buffer.alloc(req.declared.partial, 0x20));
        sent += req.declared.partial;
      } else if (req.stream) {
        const { count, size, byte = 0x20 } = req.stream;
        const piece = Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), Buffer.alloc(size, byte), Buffer.from('\r\n')]);
        let i = 0;
        const next = (): void => {
          if (answered || socket.destroyed) return;
          if (i++ >= count) {
            socket.write('0\r\n\r\n');
            return;
          }
          sent += size;
          // Pace the upload so the server's answer can overtake it.
          if (socket.write(piece)) setTimeout(next, 2);
          else socket.once('drain', () => setTimeout(next, 2));
        };
        next();
      }
    });
  });
}

export interface RawExchange {
  /** The complete responses, in the order they arrived. */
  responses: RawResponse[];
  /** The server closed the connection (after the responses above). */
  closed: boolean;
}

/** Splits a byte stream into complete responses (each framed by its Content-Length). */
function parseAll(raw: Buffer): RawResponse[] {
  const responses: RawResponse[] = [];
  for (let rest = raw; ; ) {
    const res = parse(rest, 0);
    if (!res) return responses;
    const length = Number(res.headers['content-length']);
    const start = rest.indexOf('\r\n\r\n') + 4;
    res.body = rest.subarray(start, start + length).toString('utf8');
    responses.push(res);
    rest = rest.subarray(start + length);
  }
}

/** One kept connection written to byte for byte: pipelined requests, odd framing. */
export interface RawConnection {
  /** One write: on loopback the server reads it in one go unless it has stopped reading. */
  write(bytes: string | Buffer): void;
  /** Resolves once the server has taken everything written so far off its socket. */
  serverRead(): Promise<void>;
  /** Collects responses until `expect` of them arrived or the server closed the connection. */
  collect(expect?: number, timeoutMs?: number): Promise<RawExchange>;
}

export function rawConnection(port: number): Promise<RawConnection> {
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  let received = Buffer.alloc(0);
  let closed = false;
  let changed: () => void = () => undefined;
  socket.on('data', (d) => {
    received = Buffer.concat([received, d]);
    changed();
  });
  const onClose = (): void => {
    closed = true;
    changed();
  };
  // A reset after the last response is a close like any other here.
  socket.on('error', onClose);
  socket.on('close', onClose);
  const connection: RawConnection = {
    write: (bytes) => void socket.write(bytes),
    serverRead: () => serverRead(port, socket.localPort!),
    collect(expect, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error(`neither ${expect ?? 'all'} responses nor a close within ${timeoutMs} ms: ${JSON.stringify(received.subarray(0, 300).toString('latin1'))}`));
        }, timeoutMs);
        changed = () => {
          const responses = parseAll(received);
          if (!closed && (expect === undefined || responses.length < expect)) return;
          clearTimeout(timer);
          socket.destroy();
          resolve({ responses, closed });
        };
        changed();
      });
    },
  };
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve(connection));
    socket.once('error', reject);
  });
}

/** Writes `bytes` on a new connection in one write and collects what comes back. */
export async function rawExchange(port: number, bytes: string | Buffer, opts: { expect?: number; timeoutMs?: number } = {}): Promise<RawExchange> {
  const connection = await rawConnection(port);
  connection.write(bytes);
  return connection.collect(opts.expect, opts.timeoutMs);
}

/** The queues of one loopback TCP socket, from /proc/net/tcp. */
function tcpQueues(localPort: number, remotePort: number): { tx: number; rx: number } | null {
  const address = (p: number): string => `0100007F:${p.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[1] !== address(localPort) || f[2] !== address(remotePort)) continue;
    const [tx, rx] = f[4]!.split(':').map((h) => parseInt(h, 16));
    return { tx: tx!, rx: rx! };
  }
  return null;
}

/**
 * Resolves once the server has taken every byte sent from `clientPort` off its socket: the
 * client's bytes are acknowledged and the server's receive queue is empty. Nothing else shows from
 * outside that the server has read a request it has not answered yet.
 */
async function serverRead(serverPort: number, clientPort: number): Promise<void> {
  for (;;) {
    const client = tcpQueues(clientPort, serverPort);
    const server = tcpQueues(serverPort, clientPort);
    if (!client || !server) throw new Error(`no loopback connection from port ${clientPort} in /proc/net/tcp`);
    if (client.tx === 0 && server.rx === 0) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}
