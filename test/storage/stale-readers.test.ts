import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { settledReaderLag } from '../helpers/metrics-text.js';
import { serverForFile } from '../helpers/server.js';

/**
 * A process that dies inside an LMDB read transaction leaves its snapshot in the reader table,
 * where it keeps every later write from reusing the pages it frees (the file grows instead) until
 * something clears the slot. The server clears such slots while it runs.
 */
const s = await serverForFile(t);
const LMDB = fileURLToPath(import.meta.resolve('lmdb'));

const WRITES = 30;
const write = async (t: Test, i: number): Promise<void> => {
  const res = await s.api('POST', '/acme/writes/apply-ops', { body: { base_change_id: 'z'.repeat(32), ops: [{ op: 'write', path: `f${i}.txt`, content: `${i}` }] } });
  if (res.status !== 201) t.fail(`write ${i}: ${res.status} ${res.text}`);
};

t.test('a reader killed inside its snapshot stops pinning it', async (t) => {
  // Writes first: every thread of the server that opens the environment (LMDB then clears such
  // slots too) is started before the reader dies.
  t.equal((await s.api('POST', '/acme/repos', { body: { name: 'writes' } })).status, 201);
  for (let i = 0; i < WRITES; i++) await write(t, i);
  const reader = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { open } from ${JSON.stringify(LMDB)};
       const root = open({ path: ${JSON.stringify(join(s.dataDir, 'db'))}, maxDbs: 8 });
       root.useReadTransaction();
       root.get('x');
       console.log('reading');
       setInterval(() => {}, 1000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await once(reader.stdout, 'data');
  reader.kill('SIGKILL');
  await once(reader, 'exit');
  for (let i = WRITES; i < 2 * WRITES; i++) await write(t, i);
  const seen = await settledReaderLag(s, WRITES / 3);
  t.ok(seen < WRITES / 3, `the dead reader's snapshot no longer counts (lag ${seen} after ${WRITES} writes)`);
  t.ok(s.logs.some((line) => line.includes('cleared the read snapshots of processes that died')), 'the server says it cleared it');
});
