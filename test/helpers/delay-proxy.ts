import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy that delays every chunk in both directions by `delayMs` plus up to `jitterMs`
 * (uniform), keeping each direction's byte order: latency injection between a node and an engine
 * where the kernel's netem is not available. The delay can be changed while connections are open.
 */
export interface DelayProxy {
  host: string;
  port: number;
  /** `host:port` to give the client instead of the target's. */
  address: string;
  setDelay(delayMs: number, jitterMs?: number): void;
  /** Closes the listener and every proxied connection. */
  stop(): Promise<void>;
}

export async function startDelayProxy(o: { targetHost: string; targetPort: number; listenHost?: string; port?: number; delayMs?: number; jitterMs?: number }): Promise<DelayProxy> {
  let delayMs = o.delayMs ?? 0;
  let jitterMs = o.jitterMs ?? 0;
  const sockets = new Set<Socket>();

  /** Forwards `from` to `to`, each chunk when its delay is over, never before the chunk ahead of it. */
  const pipeDelayed = (from: Socket, to: Socket): void => {
    const queue: Array<{ due: number; chunk: Buffer | null }> = [];
    let timer: NodeJS.Timeout | null = null;
    const drain = (): void => {
      timer = null;
      while (queue.length > 0 && queue[0]!.due <= Date.now()) {
        const { chunk } = queue.shift()!;
        if (to.destroyed) return;
        if (chunk) to.write(chunk);
        else to.end();
      }
      if (queue.length > 0) timer = setTimeout(drain, queue[0]!.due - Date.now());
    };
    const push = (chunk: Buffer | null): void => {
      queue.push({ due: Date.now() + delayMs + Math.random() * jitterMs, chunk });
      if (!timer) timer = setTimeout(drain, queue[0]!.due - Date.now());
    };
    from.on('data', (chunk: Buffer) => push(chunk));
    from.on('end', () => push(null));
    from.on('close', () => timer && clearTimeout(timer));
  };

  const server = createServer((client) => {
    const upstream = connect(o.targetPort, o.targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      s.on('close', () => {
        sockets.delete(s);
        (s === client ? upstream : client).destroy();
      });
    }
    pipeDelayed(client, upstream);
    pipeDelayed(upstream, client);
  });
  const host = o.listenHost ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    host,
    port,
    address: `${host}:${port}`,
    setDelay(d, j = 0) {
      delayMs = d;
      jitterMs = j;
    },
    stop() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
