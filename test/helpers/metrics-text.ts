/** Reads values out of Prometheus text exposition. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const pair of (m[2] ?? '').slice(1, -1).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) have[pair[1]!] = pair[2]!;
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) {
      total += Number(m[3]);
      found = true;
    }
  }
  return found ? total : NaN;
}

/** Write transactions since the oldest open LMDB read snapshot began, from a server's metrics. */
export async function scrapedReaderLag(server: { metrics(): Promise<string> }): Promise<number> {
  return metricValue(await server.metrics(), 'repohost_lmdb_oldest_reader_lag_transactions');
}

/**
 * The reader lag once it fell under `below`, or the last one seen after 3 s. Threads end their
 * short snapshots on their next turn, which a loaded machine can delay; a snapshot that is held
 * for good keeps the lag up the whole time.
 */
export async function settledReaderLag(server: { metrics(): Promise<string> }, below: number): Promise<number> {
  let seen = await scrapedReaderLag(server);
  for (let i = 0; i < 30 && !(seen < below); i++) {
    await new Promise((r) => setTimeout(r, 100));
    seen = await scrapedReaderLag(server);
  }
  return seen;
}
