/**
 * The agent table (API §10): which commit authors are coding agents, and under which provider key
 * their lines are counted. Operators extend or replace it with a JSON file (`REPOHOST_AGENT_TABLE`):
 *
 *   {"include_defaults": true,                       // optional, default true
 *    "agents": [{"provider": "claude",                // required; normalized like every provider key
 *                "model": "claude-sonnet-4-5",        // optional: model counted for its lines
 *                "emails": ["bot@example.com"],       // exact addresses (case-insensitive)
 *                "email_domains": ["anthropic.com"],  // the domain or any subdomain of it
 *                "names": ["Claude"],                 // exact names, also GitHub noreply logins
 *                "name_patterns": ["\\(aider\\)$"]}]} // case-insensitive regular expressions
 *
 * A bare array is read as `agents` with the defaults included. The file's entries are tried first.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface AgentEntry {
  provider: string;
  model?: string;
  emails?: string[];
  email_domains?: string[];
  names?: string[];
  name_patterns?: string[];
}

export interface AgentMatch {
  provider: string;
  model: string | null;
}

export interface AuthorIdentity {
  name: string;
  email: string | null;
}

/**
 * Common agent identities. Domains are only listed where the address is the agent's own (GitHub
 * bot accounts commit as `<id>+<login>@users.noreply.github.com`, matched through `names`).
 */
export const DEFAULT_AGENTS: readonly AgentEntry[] = [
  { provider: 'claude', email_domains: ['anthropic.com'], names: ['claude', 'claude code', 'claude[bot]'] },
  { provider: 'codex', email_domains: ['openai.com'], names: ['codex', 'openai codex', 'chatgpt-codex-connector[bot]'] },
  { provider: 'cursor', email_domains: ['cursor.com', 'cursor.sh'], names: ['cursor agent', 'cursoragent', 'cursor[bot]'] },
  { provider: 'copilot', names: ['copilot', 'github copilot', 'copilot-swe-agent', 'copilot-swe-agent[bot]'] },
  { provider: 'gemini', names: ['gemini', 'gemini cli', 'gemini-cli', 'gemini-code-assist[bot]'] },
  { provider: 'devin', email_domains: ['devin.ai'], names: ['devin', 'devin ai', 'devin-ai-integration[bot]'] },
  // aider appends " (aider)" to the author's name and co-authors as "aider (<model>)".
  { provider: 'aider', email_domains: ['aider.chat'], names: ['aider'], name_patterns: ['\\(aider\\)$', '^aider \\('] },
  { provider: 'opencode', email_domains: ['opencode.ai'], names: ['opencode', 'opencode-agent[bot]'] },
];

/** Spellings of the same provider, keyed by their letters and digits only (lower case). */
const PROVIDER_ALIASES: Readonly<Record<string, string>> = {
  claude: 'claude',
  claudecode: 'claude',
  claudeai: 'claude',
  anthropic: 'claude',
  codex: 'codex',
  openai: 'codex',
  openaicodex: 'codex',
  codexcli: 'codex',
  copilot: 'copilot',
  githubcopilot: 'copilot',
  copilotagent: 'copilot',
  copilotsweagent: 'copilot',
  gemini: 'gemini',
  google: 'gemini',
  googlegemini: 'gemini',
  geminicli: 'gemini',
  geminicodeassist: 'gemini',
  cursor: 'cursor',
  cursoragent: 'cursor',
  devin: 'devin',
  devinai: 'devin',
  opencode: 'opencode',
  aider: 'aider',
  aiderchat: 'aider',
};

/**
 * `claude_code`, `claudeCode`, `Claude Code` and `claude` are one key: `claude`. Providers not
 * known here keep a snake-case key (`Some Agent` → `some_agent`).
 */
export function normalizeProvider(raw: string): string {
  const trimmed = raw.trim();
  const alias = PROVIDER_ALIASES[trimmed.toLowerCase().replace(/[^a-z0-9]+/g, '')];
  if (alias) return alias;
  const key = trimmed
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  return key === '' ? 'unknown' : key;
}

/** The provider a bare model name implies (an `AI-Model:` trailer without `AI-Provider:`). */
export function providerOfModel(model: string): string {
  const m = model.trim().toLowerCase();
  if (m.startsWith('claude')) return 'claude';
  if (/^(gpt|o[1-9]|codex|chatgpt)/.test(m)) return 'codex';
  if (m.startsWith('gemini')) return 'gemini';
  return 'unknown';
}

interface CompiledEntry {
  match: AgentMatch;
  emails: Set<string>;
  domains: string[];
  names: Set<string>;
  patterns: RegExp[];
}

const GITHUB_NOREPLY = /^(?:\d+\+)?([^@]+)@users\.noreply\.github\.com$/;

export class AgentTable {
  readonly #entries: CompiledEntry[];
  /** Changes whenever the effective table changes (cached per-commit results depend on it). */
  readonly fingerprint: string;

  constructor(entries: readonly AgentEntry[]) {
    this.#entries = entries.map((e, i) => compileEntry(e, `agents[${i}]`));
    this.fingerprint = createHash('sha256').update(JSON.stringify(entries)).digest('hex').slice(0, 16);
  }

  static defaults(): AgentTable {
    return new AgentTable(DEFAULT_AGENTS);
  }

  /** Parses a table file's text; throws with the reason when it is not a valid table. */
  static parse(text: string, source = 'agent table'): AgentTable {
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (err) {
      throw new Error(`${source}: not valid JSON (${(err as Error).message})`);
    }
    let agents: unknown;
    let includeDefaults = true;
    if (Array.isArray(doc)) agents = doc;
    else if (doc !== null && typeof doc === 'object') {
      const obj = doc as Record<string, unknown>;
      const unknown = Object.keys(obj).filter((k) => k !== 'agents' && k !== 'include_defaults');
      if (unknown.length > 0) throw new Error(`${source}: unknown field ${unknown[0]}`);
      agents = obj.agents ?? [];
      if (obj.include_defaults !== undefined) {
        if (typeof obj.include_defaults !== 'boolean') throw new Error(`${source}: include_defaults must be a boolean`);
        includeDefaults = obj.include_defaults;
      }
    } else throw new Error(`${source}: expected an object or an array`);
    if (!Array.isArray(agents)) throw new Error(`${source}: agents must be an array`);
    const entries = agents.map((a, i) => checkEntry(a, `${source}: agents[${i}]`));
    return new AgentTable(includeDefaults ? [...entries, ...DEFAULT_AGENTS] : entries);
  }

  /** The built-in table, or the file's when a path is given. */
  static load(path: string): AgentTable {
    if (!path) return AgentTable.defaults();
    return AgentTable.parse(readFileSync(path, 'utf8'), path);
  }

  /** The first entry that recognizes the author, or null for a human. */
  match(author: AuthorIdentity): AgentMatch | null {
    const email = (author.email ?? '').trim().toLowerCase();
    const name = author.name.trim().toLowerCase();
    const at = email.lastIndexOf('@');
    const domain = at >= 0 ? email.slice(at + 1) : '';
    const login = GITHUB_NOREPLY.exec(email)?.[1] ?? null;
    for (const entry of this.#entries) {
      if (email !== '' && entry.emails.has(email)) return entry.match;
      if (domain !== '' && entry.domains.some((d) => domain === d || domain.endsWith(`.${d}`))) return entry.match;
      if (name !== '' && entry.names.has(name)) return entry.match;
      if (login !== null && entry.names.has(login)) return entry.match;
      if (name !== '' && entry.patterns.some((p) => p.test(author.name.trim()))) return entry.match;
    }
    return null;
  }
}

function compileEntry(entry: AgentEntry, where: string): CompiledEntry {
  const lower = (xs: string[] | undefined): string[] => (xs ?? []).map((x) => x.trim().toLowerCase()).filter((x) => x !== '');
  return {
    match: { provider: normalizeProvider(entry.provider), model: entry.model?.trim() || null },
    emails: new Set(lower(entry.emails)),
    domains: lower(entry.email_domains).map((d) => d.replace(/^@/, '')),
    names: new Set(lower(entry.names)),
    patterns: (entry.name_patterns ?? []).map((p) => {
      try {
        return new RegExp(p, 'i');
      } catch (err) {
        throw new Error(`${where}: invalid name pattern ${JSON.stringify(p)} (${(err as Error).message})`);
      }
    }),
  };
}

const STRING_LISTS = ['emails', 'email_domains', 'names', 'name_patterns'] as const;

function checkEntry(value: unknown, where: string): AgentEntry {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`${where}: expected an object`);
  const obj = value as Record<string, unknown>;
  const known = new Set<string>(['provider', 'model', ...STRING_LISTS]);
  const unknown = Object.keys(obj).filter((k) => !known.has(k));
  if (unknown.length > 0) throw new Error(`${where}: unknown field ${unknown[0]}`);
  if (typeof obj.provider !== 'string' || obj.provider.trim() === '') throw new Error(`${where}: provider must be a non-empty string`);
  if (obj.model !== undefined && typeof obj.model !== 'string') throw new Error(`${where}: model must be a string`);
  const entry: AgentEntry = { provider: obj.provider };
  if (typeof obj.model === 'string') entry.model = obj.model;
  for (const field of STRING_LISTS) {
    const list = obj[field];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.some((x) => typeof x !== 'string')) throw new Error(`${where}: ${field} must be an array of strings`);
    entry[field] = list as string[];
  }
  if (STRING_LISTS.every((f) => (entry[f] ?? []).length === 0)) throw new Error(`${where}: give at least one of ${STRING_LISTS.join(', ')}`);
  // Compile once here so that a bad pattern is reported with the file's location.
  compileEntry(entry, where);
  return entry;
}
