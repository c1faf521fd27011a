import { invalid } from '../errors.js';

/** Naming rules of the API, checked at the front door (API §1, §4.2, §6.1). */

export const ORG_SLUG = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;
export const RESERVED_ORG_SLUGS = new Set(['whoami', 'healthz', 'metrics', 'v1', 'api']);
export const RESERVED_REPO_NAMES = new Set(['repos', 'api-keys', 'webhook-targets', 'sync-runs']);

export function checkOrgSlug(slug: string): void {
  if (slug.length < 1 || slug.length > 64 || !ORG_SLUG.test(slug)) {
    throw invalid('org slug must be 1-64 lowercase letters, digits and inner hyphens');
  }
  if (RESERVED_ORG_SLUGS.has(slug)) throw invalid(`org slug "${slug}" is reserved`);
}

export function checkRepoName(name: string): void {
  if (name.length < 1 || name.length > 100) throw invalid('repository name must be 1 to 100 characters');
  if (name.includes('/')) throw invalid('repository name must be a single path segment (no "/")');
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw invalid('repository name may contain only letters, digits, ".", "-" and "_"');
  if (name === '.' || name === '..') throw invalid('repository name must not be "." or ".."');
  if (name.toLowerCase().endsWith('.git')) throw invalid('repository name must not end with ".git"');
  if (RESERVED_REPO_NAMES.has(name.toLowerCase())) throw invalid(`repository name "${name}" is reserved`);
}

/** git check-ref-format rules for a branch name (API §6.1). */
export function checkBookmarkName(name: string): void {
  const problem = bookmarkNameProblem(name);
  if (problem) throw invalid(`invalid bookmark name: ${problem}`);
}

export function bookmarkNameProblem(name: string): string | null {
  if (name.length === 0) return 'must not be empty';
  if (Buffer.byteLength(name) > 255) return 'must be at most 255 bytes';
  if (name.startsWith('-')) return 'must not start with "-"';
  if (name.startsWith('/') || name.endsWith('/')) return 'must not start or end with "/"';
  if (name.includes('..')) return 'must not contain ".."';
  if (name.includes('//')) return 'must not contain "//"';
  if (name.includes('@{')) return 'must not contain "@{"';
  if (name === '@') return 'must not be "@"';
  // git refuses it as a branch name: refs/heads/HEAD would shadow the symbolic ref.
  if (name === 'HEAD') return 'must not be "HEAD"';
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name)) return 'must not contain spaces, control characters or any of ~^:?*[\\';
  if (name.endsWith('.')) return 'must not end with "."';
  for (const part of name.split('/')) {
    if (part.startsWith('.')) return 'no path component may start with "."';
    if (part.endsWith('.lock')) return 'no path component may end with ".lock"';
  }
  return null;
}

/** Tag keys of repositories and signing keys (API §4.2): `$` is reserved for filter operators. */
export function checkTagKeys(tags: Record<string, unknown>): void {
  for (const key of Object.keys(tags)) {
    if (key === '__proto__') throw invalid('tag key "__proto__" is not allowed');
    if (key.startsWith('$')) throw invalid(`tag key "${key}" must not start with "$" (reserved for filter operators)`);
  }
}
