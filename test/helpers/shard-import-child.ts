import { openStorage } from '../../src/storage/database.js';
import { K, Ranges } from '../../src/storage/keys.js';
import { importShardCopy } from '../../src/storage/replica-position.js';

/**
 * A process that imports a shard copy (`node shard-import-child.js <dataDir> <shard> <file>`) and,
 * once the copy is partly written (the marker set, some chunks in), prints `half` and stops between
 * two of the import's transactions, for the test to kill it there (shard-transfer.test.ts).
 */
const [dataDir, shardText, file] = process.argv.slice(2) as [string, string, string];
const shard = Number(shardText);
const storage = openStorage(dataDir);

function holdWhenHalfWritten(): void {
  const marked = storage.meta.get(K.shardImporting(shard)) !== undefined;
  const someChunks = [...storage.chunks.getKeys({ ...Ranges.shard(shard), limit: 1 })].length > 0;
  if (!marked || !someChunks) {
    setImmediate(holdWhenHalfWritten);
    return;
  }
  process.stdout.write('half\n');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
}

setImmediate(holdWhenHalfWritten);
await importShardCopy(storage, shard, file);
process.stdout.write('whole\n');
