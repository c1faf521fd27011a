import t from 'tap';
import { prepareWriteOps, type ChangeWriteInput, type WriteOpInput } from '../../src/actors/commands/apply-ops.js';
import { isServiceError } from '../../src/errors.js';
import { prepareObject } from '../../src/storage/git-object-store.js';

/**
 * A write's contents reach the repository's actor as stored values beside its input
 * (ActorRequest.blobs), named by index from the ops. A message whose ops name a value it does not
 * hold (a sender that dropped them, a wrong index, an object that is not a blob) is refused before
 * anything is stored, never written as an empty or foreign file.
 */
const input = (ops: WriteOpInput[]): ChangeWriteInput => ({ repo_id: 'repo_1', ops, list_key: 'ops', base_change_id: 'z'.repeat(32) });

const blob = prepareObject('blob', Buffer.from('hello\n'));
const tree = prepareObject('tree', Buffer.alloc(0));
const write = (index: number, oid: string): WriteOpInput => ({ op: 'write', path: `f${index}`, encoded: { index, oid } });

t.test('each op finds its value by index; other ops find none', async (t) => {
  const prepared = prepareWriteOps(input([{ op: 'delete', path: 'x' }, write(1, blob.oid)]), [tree.value, blob.value]);
  t.equal(prepared[0], undefined, 'a delete carries no content');
  t.equal(prepared[1]!.oid, blob.oid);
  t.ok(prepared[1]!.value.equals(blob.value), 'the value as the front end encoded it');
});

t.test('a message without the values its ops name is refused whole', async (t) => {
  const refused = (ops: WriteOpInput[], blobs: Uint8Array[], why: string): void => {
    let error: unknown = null;
    try {
      prepareWriteOps(input(ops), blobs);
    } catch (err) {
      error = err;
    }
    t.ok(isServiceError(error) && error.code === 'INTERNAL_ERROR' && /holds no such blob/.test(error.message), why);
  };
  refused([write(0, blob.oid)], [], 'no values at all (a sender that does not know them)');
  refused([write(1, blob.oid)], [blob.value], 'an index past the values');
  refused([write(0, 'not an oid')], [blob.value], 'a malformed oid');
  refused([write(0, tree.oid)], [tree.value], 'a value that is not a blob');
});
