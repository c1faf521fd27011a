import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { defineCommand } from '../../src/actors/command.js';
import { Mailboxes } from '../../src/actors/mailbox.js';
import { actorSettings } from '../../src/actors/settings.js';
import { shardOf } from '../../src/actors/shard-map.js';
import { loadConfig } from '../../src/config.js';
import { ServiceError } from '../../src/errors.js';
import type { ActorReplyMsg, ActorRequestMsg } from '../../src/protocol/messages.js';
import { compileResponses } from '../../src/protocol/serializers.js';
import { openStorage } from '../../src/storage/database.js';
import { encodeKey } from '../../src/storage/keys.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import { SecretBox } from '../../src/storage/secret-box.js';
import { recordingStorage, WriteRecorder } from '../../src/storage/write-recorder.js';
import type { CommittedWrites, WriteSink } from '../../src/storage/write-set.js';

/**
 * The mailbox with recorded writes: a batch's write sets hold what its committed commands wrote and
 * nothing of a command that failed (its child transaction rolled back); the replies wait for the
 * sink, and the commands of a shard whose writes it refused are answered 503.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-mailbox-write-sets-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
compileResponses();

interface Input {
  key: string;
  fail?: boolean;
}

const keyOf = (actor: string, key: string): [number, string, string] => [shardOf(actor), 'test', key];

const put = defineCommand<Input>('test.put', (input, ctx) => {
  ctx.storage.meta.putSync(keyOf(input.key.split('/')[0]!, input.key), { key: input.key });
  ctx.storage.objects.putSync(keyOf(input.key.split('/')[0]!, input.key), Buffer.from(input.key));
  if (input.fail) throw new ServiceError('BRANCH_EXISTS', 'refused after writing');
  return { status: 201, body: { success: true }, schema: 'success' };
});

function setup(sink: WriteSink) {
  const dir = join(work, String(Math.random()).slice(2));
  const raw = openStorage(dir);
  t.teardown(() => raw.close());
  const storage = recordingStorage(raw, new WriteRecorder(sink));
  const settings = actorSettings(loadConfig({ REPOHOST_DATA: dir }));
  const mailboxes = new Mailboxes(storage, new LmdbOrgDirectory(raw), SecretBox.forDataDir(dir), settings, new Map([[put.name, put]]));
  const send = (actor: string, input: Input): Promise<ActorReplyMsg> => {
    const req = { actor, command: put.name, payload: Buffer.from(JSON.stringify({ ...input, key: `${actor}/${input.key}` })), principal: { orgId: 'o', keyId: '' }, traceId: 't' } as unknown as ActorRequestMsg;
    return mailboxes.deliver(req);
  };
  return { raw, send };
}

t.test('a failed command of a batch leaves nothing in its write set', async (t) => {
  const committed: CommittedWrites[] = [];
  const { raw, send } = setup((w) => void committed.push(w));
  const actor = 'repo:one';
  // Delivered together: one drain, one batch.
  const replies = await Promise.all([send(actor, { key: 'a' }), send(actor, { key: 'b', fail: true }), send(actor, { key: 'c' })]);
  t.same(
    replies.map((r) => r.status),
    [201, 409, 201],
  );
  t.equal(replies[0].batchSize, 3, 'one batch');
  t.equal(committed.length, 1);
  const ops = committed[0]!.shards.flatMap((s) => s.ops.map((op) => `${s.shard} ${op.db} ${Buffer.from(op.key).toString('hex')}`));
  const expected = ['a', 'c'].flatMap((k) => ['meta', 'objects'].map((db) => `${shardOf(actor)} ${db} ${Buffer.from(encodeKey(keyOf(actor, `${actor}/${k}`))).toString('hex')}`));
  t.same(ops, expected, 'the ops of the two committed commands, in order');
  t.equal(raw.meta.get(keyOf(actor, `${actor}/b`)), undefined, 'the failed command wrote nothing');
});

t.test('replies wait for the sink; a refused shard’s commands are answered 503', async (t) => {
  let release!: (refused: readonly number[]) => void;
  const { send } = setup(() => new Promise((resolve) => (release = resolve)));
  // Two actors on different shards.
  const actors = ['repo:one', 'repo:two'];
  t.not(shardOf(actors[0]!), shardOf(actors[1]!));
  let answered = false;
  const replies = Promise.all(actors.map((a) => send(a, { key: 'x' }))).then((r) => {
    answered = true;
    return r;
  });
  await new Promise((r) => setTimeout(r, 50));
  t.notOk(answered, 'no reply before the sink has the writes replicated');
  release([shardOf(actors[1]!)]);
  t.same(
    (await replies).map((r) => r.status),
    [201, 503],
  );
});
