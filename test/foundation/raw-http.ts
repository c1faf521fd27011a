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
  path: string;
  headers?: Record<string, string>;
  /** A whole body (sent with Content-Length unless headers say otherwise). */
  body?: string | Buffer;
  /** Or: a body streamed chunked, `count` pieces of `size` bytes, stopped when a response arrives. */
  stream?: { count: number; size: number; byte?: number };
  /** Or: declare this Content-Length and send only `partial` bytes of it. */
  declared?: { length: number; partial: number };
  timeoutMs?: number;
}

function parse(raw: string, sent: number): RawResponse | null {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const body = raw.slice(end + 4);
  const length = Number(headers['content-length'] ?? NaN);
  if (Number.isFinite(length) && Buffer.byteLength(body) < length) return null;
  return { status: Number(statusLine!.split(' ')[1]), headers, body, sentBeforeResponse: sent };
}

export function rawRequest(port: number, req: RawRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let sent = 0;
    let answered = false;
    let firstByteSent = -1;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response within ${req.timeoutMs ?? 10000} ms: ${JSON.stringify(received.slice(0, 300))}`));
    }, req.timeoutMs ?? 10000);
    const finish = (res: RawResponse): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(res);
    };
    socket.on('data', (d) => {
      if (firstByteSent < 0) firstByteSent = sent;
      answered = true;
      received += d.toString('utf8');
      const res = parse(received, firstByteSent);
      if (res) finish(res);
    });
    socket.on('error', () => {
      const res = parse(received, firstByteSent);
      if (res) finish(res);
    });
    socket.on('close', () => {
      const res = parse(received + '\r\n\r\n', firstByteSent);
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
      socket.write(`${req.method} ${req.path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`);
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
