/**
 * Loads a page in headless Debian chromium and reports what happened, over the DevTools protocol
 * on `--remote-debugging-pipe` (fd 3 in, fd 4 out, NUL-separated JSON): no port, no WebSocket
 * client, no extra dependency.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';

export const CHROMIUM = '/usr/bin/chromium';

export interface PageReport {
  /** console.error/assert calls, uncaught exceptions and error log entries. */
  errors: string[];
  /** Every URL the page requested. */
  requests: string[];
  /** Result of `probe` evaluated once `readyExpression` was truthy. */
  probe: unknown;
}

interface CdpMessage {
  id?: number;
  method?: string;
  sessionId?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { message: string };
}

class CdpPipe {
  private nextId = 0;
  private buffer = '';
  private readonly pending = new Map<number, { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  private readonly listeners: Array<(m: CdpMessage) => void> = [];

  constructor(
    private readonly input: Writable,
    output: Readable,
  ) {
    output.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString('utf8');
      let end: number;
      while ((end = this.buffer.indexOf('\0')) >= 0) {
        const message = JSON.parse(this.buffer.slice(0, end)) as CdpMessage;
        this.buffer = this.buffer.slice(end + 1);
        this.dispatch(message);
      }
    });
  }

  private dispatch(message: CdpMessage): void {
    if (message.id !== undefined) {
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error) waiter?.reject(new Error(message.error.message));
      else waiter?.resolve(message.result ?? {});
      return;
    }
    for (const listener of this.listeners) listener(message);
  }

  on(listener: (m: CdpMessage) => void): void {
    this.listeners.push(listener);
  }

  send(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<Record<string, unknown>> {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.input.write(`${JSON.stringify({ id, method, params, sessionId })}\0`);
    });
  }
}

function describeConsoleArgs(args: unknown): string {
  if (!Array.isArray(args)) return '';
  return args
    // A primitive arrives as its value, anything else as its description.
    .map((a: { value?: unknown; description?: string }) => (a.value === undefined ? (a.description ?? '') : typeof a.value === 'string' ? a.value : JSON.stringify(a.value)))
    .join(' ');
}

/**
 * Opens `file` and waits until `readyExpression` evaluates truthy (or `timeoutMs`), then returns
 * the value of `probe`. Throws when chromium is not installed: a missing browser must fail the
 * test, never skip it.
 */
export async function loadPage(file: string, readyExpression: string, probe: string, timeoutMs = 30_000): Promise<PageReport> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} not found: install it with \`apt-get install -y chromium\``);
  }
  const profile = await mkdtemp(join(os.tmpdir(), 'bench-chromium-'));
  const child = spawn(
    CHROMIUM,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--remote-debugging-pipe',
      `--user-data-dir=${profile}`,
      'about:blank',
    ],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const cdp = new CdpPipe(child.stdio[3] as Writable, child.stdio[4] as Readable);
  const report: PageReport = { errors: [], requests: [], probe: undefined };
  let sessionId = '';
  const loaded = new Promise<void>((resolve) =>
    cdp.on((m) => {
      if (m.sessionId !== sessionId) return;
      const p = m.params ?? {};
      if (m.method === 'Page.loadEventFired') resolve();
      else if (m.method === 'Runtime.consoleAPICalled' && (p['type'] === 'error' || p['type'] === 'assert')) {
        report.errors.push(`console.${String(p['type'])}: ${describeConsoleArgs(p['args'])}`);
      } else if (m.method === 'Runtime.exceptionThrown') {
        const details = p['exceptionDetails'] as { text?: string; exception?: { description?: string } } | undefined;
        report.errors.push(`exception: ${details?.exception?.description ?? details?.text ?? 'unknown'}`);
      } else if (m.method === 'Log.entryAdded') {
        const entry = p['entry'] as { level?: string; text?: string; url?: string } | undefined;
        if (entry?.level === 'error') report.errors.push(`log: ${entry.text ?? ''} ${entry.url ?? ''}`.trim());
      } else if (m.method === 'Network.requestWillBeSent') {
        const request = p['request'] as { url?: string } | undefined;
        if (request?.url) report.requests.push(request.url);
      }
    }),
  );
  const deadline = Date.now() + timeoutMs;
  const withTimeout = async <T>(promise: Promise<T>, what: string): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<T>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`chromium: timed out waiting for ${what}; stderr: ${stderr.slice(-2000)}`)),
        Math.max(0, deadline - Date.now()),
      );
    });
    try {
      return await Promise.race([promise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    const { targetId } = (await withTimeout(cdp.send('Target.createTarget', { url: 'about:blank' }), 'a page')) as { targetId: string };
    ({ sessionId } = (await cdp.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string });
    for (const domain of ['Runtime', 'Log', 'Page', 'Network']) await cdp.send(`${domain}.enable`, {}, sessionId);
    await cdp.send('Page.navigate', { url: pathToFileURL(file).href }, sessionId);
    await withTimeout(loaded, 'the load event');
    const evaluate = async (expression: string): Promise<unknown> => {
      const res = (await cdp.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, sessionId)) as {
        result?: { value?: unknown };
        exceptionDetails?: { text?: string };
      };
      if (res.exceptionDetails) throw new Error(`evaluate failed: ${res.exceptionDetails.text ?? expression}`);
      return res.result?.value;
    };
    while (!(await evaluate(readyExpression))) {
      if (Date.now() > deadline) throw new Error(`chromium: "${readyExpression}" never became true`);
      await new Promise((r) => setTimeout(r, 100));
    }
    report.probe = await evaluate(probe);
    await cdp.send('Browser.close').catch(() => undefined);
    return report;
  } finally {
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
    clearTimeout(killer);
    // Chromium's helper processes may still be writing to the profile after the browser exits:
    // rm retries on the ENOTEMPTY/EBUSY that race gives.
    await rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }
}
