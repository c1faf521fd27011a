/**
 * One full clone as `clone-isolation` sends it: what git sends for `git clone` of one branch
 * (protocol v2 `fetch`, `want` the tip, `done`, no progress) on its own connection, the whole
 * answer read and dropped, so the server does all of a clone's work while the client does not
 * run `index-pack` on the cores the server shares.
 */
import { request } from 'node:http';

function pktLine(line: string): string {
  return `${(Buffer.byteLength(line) + 5).toString(16).padStart(4, '0')}${line}\n`;
}

/** What git sends for a clone of one branch at `tip`, without progress. */
export function cloneBody(tip: string): string {
  return [pktLine('command=fetch'), pktLine('object-format=sha1'), '0001', pktLine('thin-pack'), pktLine('ofs-delta'), pktLine('no-progress'), pktLine(`want ${tip}`), pktLine('done'), '0000'].join('');
}

export interface CloneOutcome {
  bytes: number;
  ms: number;
  /** Why it is not a complete answer, or null. */
  problem: string | null;
}

/** One clone's request and its whole answer, read and dropped (the last bytes kept: a complete answer ends with a flush). */
export function cloneOnce(url: URL, token: string, body: string): Promise<CloneOutcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/x-git-upload-pack-request',
          accept: 'application/x-git-upload-pack-result',
          'git-protocol': 'version=2',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let bytes = 0;
        let tail = '';
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          tail = (tail + chunk.toString('latin1', Math.max(0, chunk.length - 4))).slice(-4);
        });
        res.on('end', () => {
          const problem = res.statusCode !== 200 ? `status ${res.statusCode}` : tail !== '0000' ? 'the answer does not end with a flush' : null;
          resolve({ bytes, ms: performance.now() - started, problem });
        });
        res.on('error', (err) => resolve({ bytes, ms: performance.now() - started, problem: String(err) }));
      },
    );
    req.on('error', (err) => resolve({ bytes: 0, ms: performance.now() - started, problem: String(err) }));
    req.end(body);
  });
}
