/**
 * JSON-lines logger on stdout. Fields are passed through `redact` so that no credential-looking
 * value (tokens, passwords, secrets, private keys) is ever written, whatever a caller logs.
 */
const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
export type LogLevel = keyof typeof LEVELS;

let threshold: number = LEVELS[(process.env.LOG_LEVEL as LogLevel) ?? 'info'] ?? LEVELS.info;

export function setLogLevel(level: string): void {
  threshold = LEVELS[level as LogLevel] ?? LEVELS.info;
}

const SECRET_KEY = /pass(word)?|secret|token|authorization|private|credential/i;

function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack };
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? '[redacted]' : redact(v, depth + 1);
  return out;
}

function write(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
  if (LEVELS[level] < threshold) return;
  const line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...(redact(fields ?? {}) as object) });
  process.stdout.write(line + '\n');
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>): void => write('debug', msg, fields),
  info: (msg: string, fields?: Record<string, unknown>): void => write('info', msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>): void => write('warn', msg, fields),
  error: (msg: string, fields?: Record<string, unknown>): void => write('error', msg, fields),
};
