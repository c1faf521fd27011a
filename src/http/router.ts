import { invalid, ServiceError } from '../errors.js';
import { RESERVED_ORG_SLUGS, RESERVED_REPO_NAMES } from '../protocol/names.js';
import type { Method, RouteDef } from './route.js';

/**
 * Matches request paths against the route table (data, not code). Literal segments win over
 * parameters position by position, so `/{org}/repos` is chosen over `/{org}/{repo}`, and a
 * parameter with a literal suffix (`{repo}.git`) over a bare one. A path that matches a pattern
 * under another method gives 405 with the pattern's methods in `Allow`.
 */
type Segment = { literal: string } | { param: string; suffix: string };

interface Pattern {
  segments: Segment[];
  score: number;
  routes: Map<Method, RouteDef>;
}

/**
 * No name or id the API serves is longer (bookmark names are at most 255 bytes). A longer
 * parameter names nothing, and as part of a storage key it would not even fit LMDB's.
 */
export const MAX_PARAM_BYTES = 1024;

export interface Match {
  route: RouteDef;
  params: Record<string, string>;
}

/**
 * Recent matches kept per method: clients read the same few paths again and again, and a hit
 * skips splitting, decoding and walking the patterns. Bounded by the paths' total length.
 */
const RECENT_PATH_CHARS = 1024 * 1024;

export class Router {
  private readonly bySize = new Map<number, Pattern[]>();
  private readonly recent = new Map<string, Map<string, Match>>();
  private recentChars = 0;

  constructor(routes: RouteDef[]) {
    const patterns = new Map<string, Pattern>();
    for (const route of routes) {
      let pattern = patterns.get(route.path);
      if (!pattern) {
        const parts = route.path.split('/').slice(1);
        const segments = parts.map((p): Segment => {
          const close = p.indexOf('}');
          return p.startsWith('{') ? { param: p.slice(1, close), suffix: p.slice(close + 1) } : { literal: p };
        });
        // Earlier literal segments weigh more: the most specific pattern sorts first.
        const score = segments.reduce((s, seg, i) => s + ('literal' in seg ? 2 ** (16 - i) : seg.suffix ? 2 ** (15 - i) : 0), 0);
        pattern = { segments, score, routes: new Map() };
        patterns.set(route.path, pattern);
        const list = this.bySize.get(segments.length) ?? [];
        list.push(pattern);
        this.bySize.set(segments.length, list);
      }
      if (pattern.routes.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`);
      pattern.routes.set(route.method, route);
    }
    for (const list of this.bySize.values()) list.sort((a, b) => b.score - a.score);
  }

  /**
   * Throws NOT_FOUND / METHOD_NOT_ALLOWED / INVALID_REQUEST (bad percent-encoding, an over-long
   * segment). A match is shared by every request for the same path: it is frozen. `recentKey`
   * names the path among the recent matches: the whole URL as uWS made it, which V8 compares in
   * place where a slice of it is compared in its runtime. Every caller of one router must key the
   * same way: a path of one request can be the URL of another (`/v1/acme` is the path of
   * `/v1/v1/acme`), and a match cached under it would answer for the other.
   */
  match(method: string, path: string, recentKey: string): Match {
    let byPath = this.recent.get(method);
    const hit = byPath?.get(recentKey);
    if (hit) return hit;
    const found = this.find(method, path);
    Object.freeze(found.params);
    if (this.recentChars + recentKey.length > RECENT_PATH_CHARS) {
      this.recent.clear();
      this.recentChars = 0;
      byPath = undefined;
    }
    if (!byPath) this.recent.set(method, (byPath = new Map<string, Match>()));
    byPath.set(recentKey, Object.freeze(found));
    this.recentChars += recentKey.length;
    return found;
  }

  private find(method: string, path: string): Match {
    const raw = path.split('/').slice(1);
    if (raw.length && raw[raw.length - 1] === '') raw.pop(); // tolerate one trailing slash
    const candidates = this.bySize.get(raw.length);
    let allowedBy: Pattern | undefined;
    if (candidates) {
      const segments = raw.map(decodeSegment);
      for (const pattern of candidates) {
        const params: Record<string, string> = {};
        let ok = true;
        for (let i = 0; i < segments.length; i++) {
          const seg = pattern.segments[i]!;
          if ('literal' in seg) {
            // Literal segments compare against the raw segment: an encoded `repos` is a name.
            if (raw[i] !== seg.literal) { ok = false; break; }
          } else if (seg.suffix) {
            // The suffix is literal too: it compares against the raw segment.
            if (!raw[i]!.endsWith(seg.suffix) || raw[i]!.length === seg.suffix.length) { ok = false; break; }
            params[seg.param] = decodeSegment(raw[i]!.slice(0, -seg.suffix.length));
          } else {
            if (segments[i] === '') { ok = false; break; }
            params[seg.param] = segments[i]!;
          }
        }
        if (!ok) continue;
        const route = pattern.routes.get(method as Method);
        // A reserved name in a parameter belongs to the literal route that matched first
        // (`DELETE /{org}/repos` is that route's wrong method, not a repository named "repos").
        if (route && !(allowedBy && bindsReservedName(params))) return { route, params };
        // A less specific pattern may serve this method (a bookmark named `merge` under
        // `/bookmarks/{bookmark}`); 405 only when none does.
        allowedBy ??= pattern;
      }
    }
    if (allowedBy) throw new ServiceError('METHOD_NOT_ALLOWED', `method ${method} is not allowed here`, { allow: [...allowedBy.routes.keys()] });
    throw new ServiceError('NOT_FOUND', 'no such route');
  }
}

function decodeSegment(segment: string): string {
  let decoded: string;
  try {
    decoded = segment.includes('%') ? decodeURIComponent(segment) : segment;
  } catch {
    throw invalid('malformed percent-encoding in the path');
  }
  if (decoded.length > MAX_PARAM_BYTES / 3 && Buffer.byteLength(decoded) > MAX_PARAM_BYTES) {
    throw invalid(`a path segment is longer than ${MAX_PARAM_BYTES} bytes`);
  }
  return decoded;
}

function bindsReservedName(params: Record<string, string>): boolean {
  return (params.repo !== undefined && RESERVED_REPO_NAMES.has(params.repo.toLowerCase())) || (params.org !== undefined && RESERVED_ORG_SLUGS.has(params.org));
}
