/**
 * The analytics document of a repository (API §10) and the pure arithmetic on it: summing
 * per-commit results into the summary and contributors, keeping the newest history, and the
 * windowed views (24h/1w/1m) that are recomputed from `history` on read.
 *
 * Every count is a sum over commits, so an incremental update adds the new commits to the stored
 * totals and yields exactly what a rebuild over the whole history would.
 */
export const DOCUMENT_VERSION = 2;
export const HISTORY_LIMIT = 1000;

export type CountMap = Record<string, number>;

export interface LineCounts {
  totalLines: number;
  aiLines: number;
  humanLines: number;
  providers: CountMap;
  models: CountMap;
}

export interface ContributorCounts extends LineCounts {
  commitCount: number;
}

export interface HistoryItem {
  /** The commit's author time (ISO-8601 UTC, milliseconds). */
  date: string;
  sha: string;
  /** The contributor key: the author's email, or name when there is none. */
  author: string;
  message: string;
  added: number;
  removed: number;
  aiLines: number;
  providers: CountMap;
  models: CountMap;
}

export interface AnalyticsMeta {
  lastAttempt: string;
  lastSuccess: string;
  lastError: string;
}

export interface AnalyticsDocument {
  version: number;
  summary: LineCounts & { updated: string };
  contributors: Record<string, ContributorCounts>;
  /** Newest first by `date`; ties keep topological order (children first). */
  history: HistoryItem[];
  _meta: AnalyticsMeta;
}

export type Period = '24h' | '1w' | '1m' | 'all';
export const PERIODS: readonly Period[] = ['24h', '1w', '1m', 'all'];

const WINDOW_MS: Record<Exclude<Period, 'all'>, number> = {
  '24h': 24 * 3600_000,
  '1w': 7 * 24 * 3600_000,
  '1m': 30 * 24 * 3600_000,
};

const emptyCounts = (): LineCounts => ({ totalLines: 0, aiLines: 0, humanLines: 0, providers: {}, models: {} });

export function emptyDocument(): AnalyticsDocument {
  return {
    version: DOCUMENT_VERSION,
    summary: { ...emptyCounts(), updated: '' },
    contributors: {},
    history: [],
    _meta: { lastAttempt: '', lastSuccess: '', lastError: '' },
  };
}

/**
 * The entry of `key` in a map keyed by commit data (authors, models): own properties only, and
 * created as one, so a name such as `__proto__` or `constructor` is an ordinary key.
 */
export function ownEntry<T>(map: Record<string, T>, key: string, make: () => T): T {
  if (Object.hasOwn(map, key)) return map[key]!;
  const value = make();
  Object.defineProperty(map, key, { value, enumerable: true, writable: true, configurable: true });
  return value;
}

export function addCount(map: CountMap, key: string, n: number): void {
  ownEntry(map, key, () => 0);
  map[key]! += n;
}

function addMap(into: CountMap, from: CountMap): void {
  for (const [k, v] of Object.entries(from)) addCount(into, k, v);
}

function addCommit(counts: LineCounts, item: HistoryItem): void {
  counts.totalLines += item.added;
  counts.aiLines += item.aiLines;
  counts.humanLines += item.added - item.aiLines;
  addMap(counts.providers, item.providers);
  addMap(counts.models, item.models);
}

const newestFirst = (a: HistoryItem, b: HistoryItem): number => (a.date < b.date ? 1 : a.date > b.date ? -1 : 0);

/**
 * Adds commits (non-merge, in topological order, children first) to the document's totals and
 * history. New commits go before stored ones of the same date: none of them can be an ancestor
 * of a stored commit.
 */
export function addCommits(doc: AnalyticsDocument, items: readonly HistoryItem[]): void {
  for (const item of items) {
    addCommit(doc.summary, item);
    const contributor = ownEntry(doc.contributors, item.author, () => ({ ...emptyCounts(), commitCount: 0 }));
    addCommit(contributor, item);
    contributor.commitCount++;
  }
  // Array.prototype.sort is stable: equal dates keep the order given.
  doc.history = [...items, ...doc.history].sort(newestFirst).slice(0, HISTORY_LIMIT);
}

/** The document as a period shows it: `all` is the stored document, other periods sum `history`. */
export function windowed(doc: AnalyticsDocument, period: Period, now: number): AnalyticsDocument {
  if (period === 'all') return doc;
  const since = new Date(now - WINDOW_MS[period]).toISOString();
  const history = doc.history.filter((h) => h.date >= since);
  const view: AnalyticsDocument = {
    version: doc.version,
    summary: { ...emptyCounts(), updated: doc.summary.updated },
    contributors: {},
    history: [],
    _meta: doc._meta,
  };
  addCommits(view, history);
  return view;
}
