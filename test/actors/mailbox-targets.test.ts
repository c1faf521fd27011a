import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { defineCommand, type Command } from '../../src/actors/command.js';
import { createTarget } from '../../src/actors/commands/webhooks.js';
import { Mailboxes } from '../../src/actors/mailbox.js';
import { actorSettings } from '../../src/actors/settings.js';
import { loadConfig } from '../../src/config.js';
import { ServiceError } from '../../src/errors.js';
import type { ActorReplyMsg, ActorRequestMsg } from '../../src/protocol/messages.js';
import { compileResponses } from '../../src/protocol/serializers.js';
import { openStorage } from '../../src/storage/database.js';
import { LmdbOrgDirectory } from '../../src/storage/lmdb-org-directory.js';
import type { OrgRecord } from '../../src/storage/records.js';
import { SecretBox } from '../../src/storage/secret-box.js';
import { outboxEvents } from '../helpers/outbox.js';

/**
 * A batch asks once whether an org has webhook targets and keeps the answer for its other commands
 * (batch.ts). Events go to the outbox only for an org with targets, so an answer kept past a change
 * of the targets inside the same batch would lose events: a target created by one command of the
 * batch, or a deletion rolled back with its command, must be seen by the commands after it.
 */
const work = mkdtempSync(join(tmpdir(), 'repohost-mailbox-targets-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
compileResponses();

const org: OrgRecord = { id: 'org_targets', slug: 'acme', name: 'Acme' } as OrgRecord;
const other: OrgRecord = { id: 'org_other', slug: 'other', name: 'Other' } as OrgRecord;
const ACTOR = `org:${org.id}`;

/**
 * Emits an event numbered `n` of the org (or of `other`); `removeTarget` first deletes that target,
 * `fail` then throws.
 */
interface EmitInput {
  n: number;
  other?: boolean;
  removeTarget?: string;
  fail?: boolean;
}

const emit = defineCommand<EmitInput>('test.emit', (input, ctx) => {
  if (input.removeTarget) ctx.directory.removeTarget(org.id, input.removeTarget);
  ctx.mutation.emit('repo.updated', input.other ? other : org, null, { n: input.n });
  if (input.fail) throw new ServiceError('BRANCH_EXISTS', 'refused after emitting');
  return { status: 201, body: { success: true }, schema: 'success' };
});

/** The directory, counting how often a batch asks it whether an org has targets. */
class CountingDirectory extends LmdbOrgDirectory {
  asked = 0;

  override mayHaveTargets(orgId: string): boolean {
    this.asked++;
    return super.mayHaveTargets(orgId);
  }
}

function setup() {
  const dir = join(work, String(Math.random()).slice(2));
  const storage = openStorage(dir);
  t.teardown(() => storage.close());
  const settings = actorSettings(loadConfig({ REPOHOST_DATA: dir }));
  const commands = new Map<string, Command>([
    [emit.name, emit],
    [createTarget.name, createTarget],
  ]);
  const directory = new CountingDirectory(storage);
  const mailboxes = new Mailboxes(storage, directory, SecretBox.forDataDir(dir), settings, commands);
  const send = (command: string, input: object): Promise<ActorReplyMsg> => {
    const req = { actor: ACTOR, command, payload: Buffer.from(JSON.stringify(input)), principal: { orgId: org.id, keyId: '' }, traceId: 't' } as unknown as ActorRequestMsg;
    return mailboxes.deliver(req);
  };
  const kept = (): number[] => outboxEvents(storage.meta).map((e) => (e.data as { n: number }).n);
  return { send, kept, directory };
}

const targetInput = { org_id: org.id, allowed_repo_ids: null, url: 'https://hooks.example/x', name: 'x', events: ['*'], repo_ids: null };

t.test('a batch asks the directory once per org, and again after a target is written', async (t) => {
  const { send, directory } = setup();
  const replies = await Promise.all([send(emit.name, { n: 1 }), send(emit.name, { n: 2, other: true }), send(emit.name, { n: 3 }), send(emit.name, { n: 4, other: true })]);
  t.equal(replies[0].batchSize, 4, 'one batch');
  t.equal(directory.asked, 2, 'four events of two orgs, one question each');
  directory.asked = 0;
  const next = await Promise.all([send(emit.name, { n: 5 }), send(createTarget.name, targetInput), send(emit.name, { n: 6 }), send(emit.name, { n: 7 })]);
  t.equal(next[0].batchSize, 4, 'one batch');
  t.equal(directory.asked, 2, 'asked again after the target was created, then no more');
});

t.test('a target created in a batch hears the events of the commands after it', async (t) => {
  const { send, kept } = setup();
  // Delivered together: one drain, one batch.
  const replies = await Promise.all([send(emit.name, { n: 1 }), send(createTarget.name, targetInput), send(emit.name, { n: 2 })]);
  t.same(
    replies.map((r) => r.status),
    [201, 201, 201],
  );
  t.equal(replies[0].batchSize, 3, 'one batch');
  t.same(kept(), [2], 'the event before the target is not kept, the one after it is');
});

t.test('a target deletion rolled back with its command still has the events after it kept', async (t) => {
  const { send, kept } = setup();
  const created = await send(createTarget.name, targetInput);
  const targetId = (JSON.parse(Buffer.from(created.body).toString('utf8')) as { id: string }).id;
  // The first command is the first to ask, after its deletion: no targets, it hears.
  const replies = await Promise.all([send(emit.name, { n: 1, removeTarget: targetId, fail: true }), send(emit.name, { n: 2 })]);
  t.same(
    replies.map((r) => r.status),
    [409, 201],
  );
  t.equal(replies[0].batchSize, 2, 'one batch');
  t.same(kept(), [2], 'the rolled-back command kept nothing, the one after it was kept');
});
