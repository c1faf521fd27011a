import { invalid } from '../errors.js';

/**
 * Name globs for bookmarks and refs (API §6.2, §9): `*` matches any run of characters except
 * `/`, `**` matches any run including `/`, `?` matches one character except `/`; everything else
 * is literal. Compiled once per request into an anchored regular expression.
 */
export interface RefGlob {
  test(name: string): boolean;
  /** The literal text before the first wildcard: every match starts with it (narrows range scans). */
  prefix: string;
}

const MAX_GLOB_LENGTH = 1024;

export function compileRefGlob(glob: string): RefGlob {
  if (glob.length === 0 || glob.length > MAX_GLOB_LENGTH) throw invalid(`glob must be 1 to ${MAX_GLOB_LENGTH} characters`);
  let source = '';
  let prefix: string | null = null;
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === '*' || ch === '?') prefix ??= glob.slice(0, i);
    if (ch === '*') {
      if (glob[i + 1] === '*') {
        // Runs of three or more stars mean the same as two.
        while (glob[i + 1] === '*') i++;
        source += '.*';
      } else source += '[^/]*';
    } else if (ch === '?') source += '[^/]';
    else source += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  const re = new RegExp(`^${source}$`, 'su');
  return { test: (name) => re.test(name), prefix: prefix ?? glob };
}
