import { arr, obj, str, stringMap, type JsonSchema } from './common.js';

/** Content shapes (API §7): a file or symlink with base64 bytes, or a flat directory listing. */

const int: JsonSchema = { type: 'integer' };

export const contentFile: JsonSchema = obj(
  {
    type: { type: 'string', enum: ['file', 'symlink', 'submodule'] },
    name: str(),
    path: str(),
    sha: str(),
    size: int,
    mode: str(),
    encoding: { type: 'string', enum: ['base64'] },
    content: str(),
    is_conflicted: { type: 'boolean' },
    metadata: stringMap,
  },
  ['type', 'name', 'path', 'sha', 'size', 'mode', 'encoding', 'content', 'is_conflicted'],
);

const contentEntry: JsonSchema = obj(
  {
    type: { type: 'string', enum: ['file', 'dir', 'symlink', 'submodule'] },
    name: str(),
    path: str(),
    sha: str(),
    size: int,
    mode: str(),
    metadata: stringMap,
  },
  ['type', 'name', 'path', 'sha'],
);

export const contentDir: JsonSchema = obj(
  {
    type: { type: 'string', enum: ['dir'] },
    name: str(),
    path: str(),
    sha: str(),
    child_count: int,
    entries: arr(contentEntry),
    truncated: { type: 'boolean' },
    metadata: stringMap,
  },
  ['type', 'name', 'path', 'sha', 'child_count', 'entries', 'truncated'],
);

export const responses = { contentFile, contentDir };
