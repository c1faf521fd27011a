import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';

/**
 * One keep-alive HTTP/2 (cleartext) session per peer's internal listener, opened on first use and
 * again after it closed or failed. Every forwarded actor message is one stream on it. node:http2
 * was measured against undici's h2c client on this machine (docs/measurements/
 * 2026-11-27-forwarding.md): lower latency at one in flight and about 3x the rate at 16.
 */
/** How often an open session is pinged. */
const PING_INTERVAL_MS = 1000;

export class PeerSessions {
  private readonly sessions = new Map<string, ClientHttp2Session>();

  /**
   * `deadMs`: a session whose ping is unanswered that long is destroyed, failing its streams
   * (503 to their callers): a stopped or cut-off peer keeps its TCP connection, and a message
   * sent to it would otherwise wait for ever. The lease TTL suits: by then the peer has lost
   * its shards anyway.
   */
  constructor(private readonly deadMs: number) {}

  private session(url: string): ClientHttp2Session {
    const open = this.sessions.get(url);
    if (open && !open.closed && !open.destroyed) return open;
    const session = connect(url);
    const forget = (): void => {
      if (this.sessions.get(url) === session) this.sessions.delete(url);
    };
    session.on('close', forget);
    session.on('goaway', forget);
    // A failed session fails its streams (each caller sees that); the next call opens a new one.
    session.on('error', forget);
    // Idle sessions must not keep a stopping process alive.
    session.unref();
    this.watch(session);
    this.sessions.set(url, session);
    return session;
  }

  private watch(session: ClientHttp2Session): void {
    let answered = Date.now();
    const timer = setInterval(() => {
      if (Date.now() - answered > this.deadMs) {
        session.destroy(new Error('the peer stopped answering pings'));
        return;
      }
      // A session closing (its streams finishing) refuses pings.
      if (!session.connecting && !session.closed && !session.destroyed) session.ping((err) => {
          if (!err) answered = Date.now();
        });
    }, PING_INTERVAL_MS);
    timer.unref();
    session.once('close', () => clearInterval(timer));
  }

  /** POSTs `body` to `path` on the peer; resolves to the answer's status and bytes. */
  post(url: string, path: string, headers: Record<string, string>, body: Uint8Array): Promise<{ status: number; body: Buffer }> {
    return new Promise((resolve, reject) => {
      let stream;
      try {
        stream = this.session(url).request({ [constants.HTTP2_HEADER_METHOD]: 'POST', [constants.HTTP2_HEADER_PATH]: path, ...headers });
      } catch (err) {
        reject(err);
        return;
      }
      let status = 0;
      const parts: Buffer[] = [];
      stream.on('response', (h) => (status = Number(h[constants.HTTP2_HEADER_STATUS])));
      stream.on('data', (d: Buffer) => parts.push(d));
      stream.on('end', () => resolve({ status, body: Buffer.concat(parts) }));
      stream.on('error', reject);
      stream.on('close', () => {
        // Reset before an answer (the peer died or went away mid-stream).
        if (status === 0 || stream.rstCode !== constants.NGHTTP2_NO_ERROR) reject(new Error(`stream closed (${stream.rstCode})`));
      });
      stream.end(body);
    });
  }

  /** Opens a GET of `path` on the peer; the caller reads the answer as a stream. */
  get(url: string, path: string): ClientHttp2Stream {
    return this.session(url).request({ [constants.HTTP2_HEADER_METHOD]: 'GET', [constants.HTTP2_HEADER_PATH]: path });
  }

  close(): void {
    for (const session of this.sessions.values()) session.close();
    this.sessions.clear();
  }
}
