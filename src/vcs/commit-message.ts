/**
 * Commit messages = the change's description + the trailers the server manages
 * (`Co-authored-by:` for every author after the first, `AI-Provider:`, `AI-Model:`).
 *
 * Layout (chosen so that `parseCommitMessage(composeCommitMessage(x))` returns `x` exactly,
 * trailing newlines included, and every message passes `git fsck --strict`):
 * - no trailers: the message is the description, byte for byte (`""` is an empty message, as jj
 *   writes it);
 * - empty description with trailers: the message is the trailer block alone, one trailer per line,
 *   ending in a newline — git's trailer parser reads it as trailers and the description stays `""`;
 * - otherwise: the description, a newline if it lacks one, a blank line, then the trailer block;
 *   the block ends with a newline exactly when the description did (that is the one bit the
 *   layout would otherwise lose).
 */

export interface CoAuthor {
  name: string;
  /** null when the author has no email (written as `Co-authored-by: Name`). */
  email: string | null;
}

export interface CommitMessageParts {
  description: string;
  coAuthors: CoAuthor[];
  aiProvider: string | null;
  aiModel: string | null;
}

const TRAILER_LINE = /^([A-Za-z0-9][A-Za-z0-9-]*):[ \t]*(.*)$/;
const MANAGED = new Set(['co-authored-by', 'ai-provider', 'ai-model']);

/** Trailer values are single lines; anything that would break the block is flattened. */
function oneLine(value: string): string {
  return value.replace(/[\r\n]+/g, ' ').trim();
}

function coAuthorTrailer(author: CoAuthor): string {
  const name = oneLine(author.name).replace(/[<>]/g, '');
  const email = author.email ? oneLine(author.email).replace(/[<>]/g, '') : '';
  return email === '' ? `Co-authored-by: ${name}` : `Co-authored-by: ${name} <${email}>`;
}

export function composeCommitMessage(parts: CommitMessageParts): string {
  const trailers = parts.coAuthors.map(coAuthorTrailer);
  if (parts.aiProvider) trailers.push(`AI-Provider: ${oneLine(parts.aiProvider)}`);
  if (parts.aiModel) trailers.push(`AI-Model: ${oneLine(parts.aiModel)}`);
  const { description } = parts;
  if (trailers.length === 0) return description;
  if (description === '') return `${trailers.join('\n')}\n`;
  const endsWithNewline = description.endsWith('\n');
  return `${description}${endsWithNewline ? '' : '\n'}\n${trailers.join('\n')}${endsWithNewline ? '\n' : ''}`;
}

function parseCoAuthor(value: string): CoAuthor {
  const m = /^(.*?)\s*<([^>]*)>\s*$/.exec(value);
  if (!m) return { name: value.trim(), email: null };
  return { name: m[1]!.trim(), email: m[2]!.trim() === '' ? null : m[2]!.trim() };
}

/**
 * Splits a commit message into the description and the managed trailers. Trailers are read
 * only from the last paragraph, and only when every line of it is a `Key: value` trailer (git's
 * convention); other trailers (e.g. `Signed-off-by:`) stay in the description.
 */
export function parseCommitMessage(message: string): CommitMessageParts {
  const result: CommitMessageParts = { description: message, coAuthors: [], aiProvider: null, aiModel: null };
  const endsWithNewline = message.endsWith('\n');
  const body = endsWithNewline ? message.slice(0, -1) : message;
  const lastBlank = body.lastIndexOf('\n\n');
  const blockStart = lastBlank < 0 ? 0 : lastBlank + 2;
  const lines = body.slice(blockStart).split('\n');
  if (lines.length === 0 || lines.some((line) => !TRAILER_LINE.test(line))) return result;
  const kept: string[] = [];
  for (const line of lines) {
    const [, key, value] = TRAILER_LINE.exec(line)!;
    const lower = key!.toLowerCase();
    if (!MANAGED.has(lower)) kept.push(line);
    else if (lower === 'co-authored-by') result.coAuthors.push(parseCoAuthor(value!));
    else if (lower === 'ai-provider') result.aiProvider = value!.trim();
    else result.aiModel = value!.trim();
  }
  if (kept.length === lines.length) return result;
  if (kept.length > 0) {
    // Foreign trailers share the paragraph: keep them where they were, drop only ours.
    result.description = `${body.slice(0, blockStart)}${kept.join('\n')}${endsWithNewline ? '\n' : ''}`;
    return result;
  }
  if (blockStart === 0) {
    result.description = '';
    return result;
  }
  // `before` is the description plus the newline the layout added before the blank line.
  const before = body.slice(0, blockStart - 1);
  result.description = endsWithNewline ? before : before.slice(0, -1);
  return result;
}
