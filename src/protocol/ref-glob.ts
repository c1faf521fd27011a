import { invalid } from '../errors.js';

/**
 * Name globs for bookmarks and refs (API §6.2, §9): `*` matches any run of characters except
 * `/`, `**` matches any run including `/`, `?` matches one character except `/`; everything else
 * is literal. Characters are code points.
 *
 * Matching simulates the glob's automaton over the name, one code point at a time, with the set of
 * reachable pattern positions: at most (pattern length + 1) states per character, so a match costs
 * O(name × pattern) whatever the glob. (A backtracking regular expression is exponential in the
 * number of `*?` pairs: one request could hold a thread for minutes.)
 */
export interface RefGlob {
  test: (name: string) => boolean;
  /** The literal text before the first wildcard: every match starts with it (narrows range scans). */
  prefix: string;
  /** The automaton's states: a test costs at most this many steps per code point of the name. */
  states: number;
}

export const MAX_GLOB_LENGTH = 256;

const STAR = -1; // `*`: a run without `/`
const GLOBSTAR = -2; // `**`: any run
const ONE = -3; // `?`: one code point other than `/`
const SLASH = 0x2f;

export function compileRefGlob(glob: string): RefGlob {
  if (glob.length === 0 || glob.length > MAX_GLOB_LENGTH) throw invalid(`glob must be 1 to ${MAX_GLOB_LENGTH} characters`);
  // Each token is a code point (literal) or one of the wildcard markers above.
  const tokens: number[] = [];
  let prefix: string | null = null;
  for (let i = 0; i < glob.length; ) {
    const cp = glob.codePointAt(i)!;
    if (cp === 0x2a /* * */ || cp === 0x3f /* ? */) prefix ??= glob.slice(0, i);
    if (cp === 0x2a) {
      let run = 0;
      while (glob[i] === '*') {
        run++;
        i++;
      }
      // Runs of three or more stars mean the same as two.
      tokens.push(run >= 2 ? GLOBSTAR : STAR);
      continue;
    }
    tokens.push(cp === 0x3f ? ONE : cp);
    i += cp > 0xffff ? 2 : 1;
  }
  const accept = tokens.length;
  // Reachable states of the current and next step; `mark` stamps membership without clearing.
  let current = new Int32Array(accept + 1);
  let next = new Int32Array(accept + 1);
  const mark = new Float64Array(accept + 1);
  let stamp = 0;

  /** Adds state `s` and, through wildcards that match the empty run, the states after it. */
  const add = (set: Int32Array, size: number, s: number): number => {
    for (;;) {
      if (mark[s] === stamp) return size;
      mark[s] = stamp;
      set[size++] = s;
      const t = tokens[s];
      if (t !== STAR && t !== GLOBSTAR) return size;
      s++; // `*` and `**` may match nothing
    }
  };

  const test = (name: string): boolean => {
    stamp++;
    let size = add(current, 0, 0);
    for (let i = 0; i < name.length && size > 0; ) {
      const cp = name.codePointAt(i)!;
      i += cp > 0xffff ? 2 : 1;
      stamp++;
      let nextSize = 0;
      for (let k = 0; k < size; k++) {
        const s = current[k]!;
        if (s === accept) continue;
        const t = tokens[s]!;
        if (t === GLOBSTAR || (t === STAR && cp !== SLASH)) nextSize = add(next, nextSize, s);
        else if (t === cp || (t === ONE && cp !== SLASH)) nextSize = add(next, nextSize, s + 1);
      }
      [current, next] = [next, current];
      size = nextSize;
    }
    for (let k = 0; k < size; k++) if (current[k] === accept) return true;
    return false;
  };
  return { test, prefix: prefix ?? glob, states: accept + 1 };
}
