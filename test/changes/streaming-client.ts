/**
 * A client for bodies that are too large to build in memory: the body is a generator of pieces
 * sent with chunked transfer encoding (no Content-Length), so the server cannot know its size in
 * advance. Resolves with the response as soon as the server answers — also when it answers
 * early (413) and stops reading.
 */
import { request } from 'node:http';

export interface StreamedResponse {
  /** 0 when the connection ended without a readable answer (see `error`). */
  status: number;
  error?: string;
  json: any;
  text: string;
  /** Bytes of the body the client managed to send before the response ended. */
  sent: number;
}

export function streamRequest(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: AsyncIterable<Buffer> | Iterable<Buffer>,
): Promise<StreamedResponse> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    // A declared length is sent as is (and the body may stop short of it); otherwise chunked.
    const framing = headers['content-length'] ? {} : { 'transfer-encoding': 'chunked' };
    const req = request(url, { method, headers: { ...headers, ...framing } }, (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, json, text, sent });
      });
      res.on('error', reject);
    });
    // A server that answers early and closes while the body is still coming may reset the
    // connection before its answer is read (the client's kernel drops it): the caller then gets
    // status 0 and checks the server's own record of the answer (its metrics).
    req.on('error', (err) => {
      if (!answered) setTimeout(() => answered || resolve({ status: 0, error: err.message, json: undefined, text: '', sent }), 1000);
    });
    req.flushHeaders();
    void (async () => {
      try {
        for await (const piece of body) {
          if (answered || req.destroyed) return;
          sent += piece.length;
          if (!req.write(piece)) {
            await new Promise<void>((resolve) => {
              const done = (): void => {
                req.off('drain', done).off('close', done);
                resolve();
              };
              req.on('drain', done).on('close', done);
            });
          }
        }
        if (!answered && !req.destroyed && !headers['content-length']) req.end();
      } catch (err) {
        if (!answered) reject(err);
      }
    })();
  });
}
