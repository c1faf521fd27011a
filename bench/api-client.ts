/**
 * The orchestrator's HTTP client for set-up and verification (never for load: that is the
 * generator's job, in its own process). Thin: JSON in, `{status, body}` out; callers decide what a
 * status means, because "404 → scenario not available" is a legitimate outcome for sync.
 */
import { Agent, request } from 'undici';

export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
  text: string;
}

export class ApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly text: string,
  ) {
    super(`${method} ${path} → ${status} ${text.slice(0, 300)}`);
  }
}

export class ApiClient {
  // Well under uWS's 10 s idle timeout: reusing a connection the server is closing at that very
  // moment fails with "other side closed".
  private readonly dispatcher = new Agent({ connections: 32, keepAliveTimeout: 4_000 });

  constructor(
    readonly baseUrl: string,
    readonly org: string,
    private token: string,
  ) {}

  setToken(token: string): void {
    this.token = token;
  }

  async call<T = unknown>(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
    accept = 'application/json',
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const send = async (): Promise<{ statusCode: number; contentType: string; text: string }> => {
      const res = await request(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        dispatcher: this.dispatcher,
        headersTimeout: 60_000,
        bodyTimeout: 60_000,
      });
      return { statusCode: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text: await res.body.text() };
    };
    let res: { statusCode: number; contentType: string; text: string };
    try {
      res = await send();
    } catch (err) {
      // A GET is safe to repeat once after a dropped connection; anything else reports where it failed.
      if (method !== 'GET') throw new Error(`${method} ${path}: ${err instanceof Error ? err.message : String(err)}`);
      try {
        res = await send();
      } catch (again) {
        throw new Error(`${method} ${path}: ${again instanceof Error ? again.message : String(again)}`);
      }
    }
    const text = res.text;
    let parsed: unknown = text;
    if (res.contentType.includes('json') && text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return { status: res.statusCode, body: parsed as T, text };
  }

  /** Like `call`, but any status other than `expect` throws with the response in the message. */
  async expect<T = unknown>(
    expect: number,
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<T> {
    const res = await this.call<T>(method, path, body);
    if (res.status !== expect) throw new ApiError(method, path, res.status, res.text);
    return res.body;
  }

  /** `/v1/{org}/{repo}` + suffix, with the repo name encoded. */
  repoPath(repo: string, suffix = ''): string {
    return `/v1/${this.org}/${encodeURIComponent(repo)}${suffix}`;
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}

/** Runs `fn` over `items` with at most `limit` at a time (set-up and verification fan-out). */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  async function worker(): Promise<void> {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i] as T, i);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
