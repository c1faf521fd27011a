/**
 * The first step of `npm run build` (`prebuild`): the code of the protobuf messages (the actor
 * messages, the write sets), generated from src/protocol/<name>.proto by protobufjs's own tools.
 * pbjs writes reflection-free static code (encode and decode only) where the compiled sources
 * run, dist/src/protocol/generated/; pbts writes its declarations beside the sources, for tsc.
 * Neither is committed. Each is skipped while both are newer than its .proto and this file.
 */
import { mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const { pbjs, pbts } = require('protobufjs-cli');

const root = fileURLToPath(new URL('..', import.meta.url));

const mtime = (path) => {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
};

const run = (tool, args) => new Promise((resolve, reject) => tool.main(args, (err) => (err ? reject(err) : resolve())));

for (const name of ['actor', 'write-set']) {
  const proto = `${root}src/protocol/${name}.proto`;
  const code = `${root}dist/src/protocol/generated/${name}.js`;
  const types = `${root}src/protocol/generated/${name}.d.ts`;
  const inputs = Math.max(mtime(proto), mtime(fileURLToPath(import.meta.url)));
  if (Math.min(mtime(code), mtime(types)) <= inputs) {
    for (const path of [code, types]) mkdirSync(path.slice(0, path.lastIndexOf('/')), { recursive: true });
    // --force-message: nested fields are typed as the message classes, which plain objects with
    // every field satisfy; no conversion, verification or delimited helpers are used.
    // -r: each file its own root; with the shared default one, the module loaded last replaces
    // the other's `repohost` namespace, which encode() looks its nested types up in.
    await run(pbjs, ['-t', 'static-module', '-w', 'es6', '-r', name, '--force-message', '--no-convert', '--no-verify', '--no-delimited', '-o', code, proto]);
    await run(pbts, ['--no-comments', '-o', types, code]);
  }
}
