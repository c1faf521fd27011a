/**
 * A minimal HTTP/1.1 keep-alive client connection for the load generator: one request in flight,
 * no pipelining (like wrk). Why not undici: on this 2-core machine undici's `dispatch` tops out
 * near 45k req/s against a uWS hello world while a plain socket with this parser reaches ~89k, and
 * the generator shares the cores with the server — every cycle it spends is one the server lacks.
 * It understands what a server can answer: Content-Length, chunked transfer coding, bodiless
 * statuses and `Connection: close` (then it reconnects on the next request).
 */
import net from 'node:net';

export interface HttpResponse {
  status: number;
  /** Only when the request asked for it: most benchmark responses are counted, not read. */
  body: Buffer | undefined;
}

export type ResponseCallback = (err: Error | null, res: HttpResponse | undefined) => void;

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

const enum State {
  Idle,
  Head,
  Body,
  BodyUntilClose,
  ChunkSize,
  ChunkData,
  ChunkDataEnd,
  Trailers,
}

export class HttpConnection {
  private socket: net.Socket | null = null;
  private connected = false;
  private state = State.Idle;
  private buffer: Buffer | null = null;
  private status = 0;
  private remaining = 0;
  private keepBody = false;
  private bodyParts: Buffer[] = [];
  private closeAfter = false;
  private pending: Buffer | Buffer[] | null = null;
  private callback: ResponseCallback | null = null;
  /** performance.now() of the current send, for the caller's timeout sweep. */
  sentAt = 0;

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  get busy(): boolean {
    return this.callback !== null;
  }

  send(request: Buffer | Buffer[], keepBody: boolean, sentAt: number, cb: ResponseCallback): void {
    if (this.callback) throw new Error('HttpConnection: one request at a time');
    this.callback = cb;
    this.keepBody = keepBody;
    this.sentAt = sentAt;
    this.state = State.Head;
    if (!this.socket) this.connect();
    if (this.connected) this.write(request);
    else this.pending = request;
  }

  /** Connects ahead of the first request, so connection set-up is not timed as a request. */
  open(): Promise<void> {
    if (!this.socket) this.connect();
    if (this.connected) return Promise.resolve();
    const socket = this.socket as net.Socket;
    return new Promise((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('error', reject);
    });
  }

  /** Fails the in-flight request and drops the socket (used for timeouts and shutdown). */
  abort(reason: Error): void {
    this.fail(reason);
  }

  close(): void {
    this.socket?.destroy();
    this.socket = null;
    this.connected = false;
  }

  private connect(): void {
    const socket = net.connect(this.port, this.host);
    socket.setNoDelay(true);
    this.socket = socket;
    this.buffer = null;
    socket.on('connect', () => {
      this.connected = true;
      if (this.pending) {
        const req = this.pending;
        this.pending = null;
        this.write(req);
      }
    });
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.onSocketGone(socket, err));
    socket.on('close', () => this.onSocketGone(socket, new Error('connection closed by server')));
  }

  private write(request: Buffer | Buffer[]): void {
    const socket = this.socket;
    if (!socket) return;
    if (Buffer.isBuffer(request)) {
      socket.write(request);
    } else {
      socket.cork();
      for (const part of request) socket.write(part);
      socket.uncork();
    }
  }

  private onSocketGone(socket: net.Socket, err: Error): void {
    if (socket !== this.socket) return;
    if (this.state === State.BodyUntilClose && this.callback) {
      this.socket = null;
      this.connected = false;
      this.finish();
      return;
    }
    this.fail(err);
  }

  private fail(err: Error): void {
    this.close();
    this.pending = null;
    this.state = State.Idle;
    this.bodyParts = [];
    const cb = this.callback;
    this.callback = null;
    if (cb) cb(err, undefined);
  }

  private onData(chunk: Buffer): void {
    const buf = this.buffer ? Buffer.concat([this.buffer, chunk]) : chunk;
    this.buffer = null;
    let off = 0;
    while (off < buf.length) {
      if (this.state === State.Idle) {
        this.fail(new Error('unexpected data from server between responses'));
        return;
      }
      const next = this.step(buf, off);
      if (next < 0) {
        // Need more bytes: keep the unparsed tail for the next chunk.
        this.buffer = off === 0 ? buf : buf.subarray(off);
        return;
      }
      off = next;
    }
  }

  /** Parses from `off`; returns the new offset, or -1 when more input is needed. */
  private step(buf: Buffer, off: number): number {
    switch (this.state) {
      case State.Head: {
        const end = buf.indexOf(HEAD_END, off);
        if (end < 0) return -1;
        this.parseHead(buf.toString('latin1', off, end));
        const next = end + 4;
        // parseHead() moved the state on: a bodiless response is complete already.
        if ((this.state as State) === State.Idle) this.finish();
        return next;
      }
      case State.Body: {
        const take = Math.min(this.remaining, buf.length - off);
        if (this.keepBody) this.bodyParts.push(buf.subarray(off, off + take));
        this.remaining -= take;
        if (this.remaining === 0) {
          this.state = State.Idle;
          this.finish();
        }
        return off + take;
      }
      case State.BodyUntilClose: {
        if (this.keepBody) this.bodyParts.push(buf.subarray(off));
        return buf.length;
      }
      case State.ChunkSize: {
        const end = buf.indexOf(CRLF, off);
        if (end < 0) return -1;
        const line = buf.toString('latin1', off, end);
        const size = parseInt(line, 16);
        if (Number.isNaN(size)) {
          this.fail(new Error(`bad chunk size line ${JSON.stringify(line)}`));
          return buf.length;
        }
        this.remaining = size;
        this.state = size === 0 ? State.Trailers : State.ChunkData;
        return end + 2;
      }
      case State.ChunkData: {
        const take = Math.min(this.remaining, buf.length - off);
        if (this.keepBody) this.bodyParts.push(buf.subarray(off, off + take));
        this.remaining -= take;
        if (this.remaining === 0) this.state = State.ChunkDataEnd;
        return off + take;
      }
      case State.ChunkDataEnd: {
        if (buf.length - off < 2) return -1;
        this.state = State.ChunkSize;
        return off + 2;
      }
      case State.Trailers: {
        const end = buf.indexOf(CRLF, off);
        if (end < 0) return -1;
        if (end === off) {
          this.state = State.Idle;
          this.finish();
        }
        return end + 2;
      }
      case State.Idle:
        return buf.length;
    }
  }

  private parseHead(head: string): void {
    // "HTTP/1.1 200 OK"
    this.status = parseInt(head.slice(9, 12), 10);
    let contentLength = -1;
    let chunked = false;
    this.closeAfter = false;
    let lineStart = head.indexOf('\r\n') + 2;
    while (lineStart > 1 && lineStart < head.length) {
      let lineEnd = head.indexOf('\r\n', lineStart);
      if (lineEnd < 0) lineEnd = head.length;
      const colon = head.indexOf(':', lineStart);
      if (colon > 0 && colon < lineEnd) {
        const name = head.slice(lineStart, colon).toLowerCase();
        if (name === 'content-length') {
          contentLength = parseInt(head.slice(colon + 1, lineEnd).trim(), 10);
        } else if (name === 'transfer-encoding') {
          chunked = head.slice(colon + 1, lineEnd).toLowerCase().includes('chunked');
        } else if (name === 'connection') {
          this.closeAfter = head.slice(colon + 1, lineEnd).toLowerCase().includes('close');
        }
      }
      lineStart = lineEnd + 2;
    }
    this.bodyParts = [];
    if (this.status < 200) {
      // An interim response (100 Continue): the real one follows.
      this.state = State.Head;
    } else if (this.status === 204 || this.status === 304) {
      this.state = State.Idle;
    } else if (chunked) {
      this.state = State.ChunkSize;
    } else if (contentLength >= 0) {
      this.remaining = contentLength;
      this.state = contentLength === 0 ? State.Idle : State.Body;
    } else {
      this.state = State.BodyUntilClose;
    }
  }

  private finish(): void {
    this.state = State.Idle;
    const cb = this.callback;
    this.callback = null;
    const body = this.keepBody ? Buffer.concat(this.bodyParts) : undefined;
    this.bodyParts = [];
    if (this.closeAfter) this.close();
    if (cb) cb(null, { status: this.status, body });
  }
}

/** Serializes a request head once; the body (if any) is written beside it without copying. */
export function buildRequest(
  method: string,
  path: string,
  host: string,
  headers: Readonly<Record<string, string>>,
  body?: Buffer,
): Buffer | Buffer[] {
  let head = `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  if (body) head += `Content-Length: ${body.length}\r\n`;
  else if (method !== 'GET' && method !== 'HEAD') head += 'Content-Length: 0\r\n';
  head += '\r\n';
  const headBuf = Buffer.from(head, 'latin1');
  return body ? [headBuf, body] : headBuf;
}
