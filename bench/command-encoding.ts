/**
 * `node dist/bench/command-encoding.js [--rounds 9] [--iterations 20000]`: what a command input
 * costs on its way to an actor and back out of the envelope, as JSON inside the `ActorRequest`'s
 * `payload` (what the server does) and as a typed protobuf message in its place. The input is
 * the agent-fleet scenario's apply-ops: three 2 KiB UTF-8 files, a message, one bookmark; the
 * files' stored values travel in the envelope's `blobs`, the same for both, and the ops name them.
 *
 * One operation = the front end's encode (input → bytes of the envelope) plus the actor's decode
 * (bytes → an input it can read). The typed variant builds its message from the input as the
 * front end would, and reads the decoded message as it is (no conversion back), which favours it.
 * Rounds alternate the two variants on the same thread; the medians and the fastest rounds of
 * CPU time per operation are printed.
 */
import { parseArgs } from 'node:util';
import protobuf from 'protobufjs';
import { agentFileContent } from './agent-files.js';
import { decodeRequest, encodeRequest, type PrincipalMsg } from '../src/protocol/messages.js';
import { prepareObject } from '../src/storage/git-object-store.js';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, iterations: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 9);
const ITERATIONS = Number(values.iterations ?? 20_000);

/** The apply-ops input as a message of its own: what "typed command inputs" would mean. */
const { root } = protobuf.parse(`
syntax = "proto3";
message EncodedRef { uint32 index = 1; string oid = 2; }
message WriteOp { string path = 1; string mode = 4; string blob_oid = 5; EncodedRef encoded = 6; }
message DeleteOp { string path = 1; }
message RenameOp { string from = 1; string to = 2; }
message SetMetadataOp { string path = 1; map<string, string> set = 2; repeated string unset = 3; }
message Op { oneof kind { WriteOp write = 1; DeleteOp delete = 2; RenameOp rename = 3; SetMetadataOp set_metadata = 4; } }
message Person { string name = 1; string email = 2; bool has_email = 3; string date = 4; }
message BookmarkMove { string name = 1; bool allow_backwards = 2; bool create = 3; string expected_change_id = 4; }
message ChangeWrite {
  string repo_id = 1;
  oneof target { string change_id = 2; string base_change_id = 3; }
  string expected_commit_oid = 4;
  optional string message = 5;
  Person author = 6;
  Person committer = 7;
  repeated Person authors = 8;
  repeated Op ops = 9;
  string list_key = 10;
  repeated BookmarkMove bookmarks = 11;
  string provider = 12;
  string model = 13;
}
`);
const ChangeWrite = root.lookupType('ChangeWrite');

interface WriteInput {
  repo_id: string;
  base_change_id: string;
  message: string;
  ops: Array<{ op: 'write'; path: string; mode: null; encoded: { index: number; oid: string } }>;
  list_key: 'ops';
  bookmarks: Array<{ name: string }>;
}

const objects = [0, 1, 2].map((f) => prepareObject('blob', Buffer.from(agentFileContent(17, 42, f, 2048))));

const input: WriteInput = {
  repo_id: 'repo_01JD8Y1N7W0Q3K5Z2C4V6B8M9X',
  base_change_id: 'zxywzyrouovswrxtvlnxytmomkspqvur',
  message: 'bench agent 17 write 42',
  ops: objects.map((o, f) => ({ op: 'write', path: `agents/17/file-${f}.txt`, mode: null, encoded: { index: f, oid: o.oid } })),
  list_key: 'ops',
  bookmarks: [{ name: 'agent-17' }],
};

const principal: PrincipalMsg = {
  orgId: 'org_01JD8Y1N7W0Q3K5Z2C4V6B8M9X',
  orgSlug: 'bench',
  keyId: 'key_01JD8Y1N7W0Q3K5Z2C4V6B8M9X',
  keyName: 'bench',
  permissions: ['git:read', 'git:write', 'repo:read'],
  authors: [],
  restricted: false,
  allowedRepoIds: [],
};

const envelope = (payload: Uint8Array): Uint8Array =>
  encodeRequest({ actor: `repo:${input.repo_id}`, command: 'apply-ops', payload, principal, traceId: '0123456789abcdef0123456789abcdef', blobs: objects.map((o) => o.value) });

function viaJson(): number {
  const bytes = envelope(Buffer.from(JSON.stringify(input)));
  const req = decodeRequest(bytes);
  const decoded = JSON.parse(Buffer.from(req.payload).toString('utf8')) as WriteInput;
  return bytes.length + decoded.ops.length;
}

function viaMessage(): number {
  const message = {
    repoId: input.repo_id,
    baseChangeId: input.base_change_id,
    message: input.message,
    ops: input.ops.map((op) => ({ write: { path: op.path, mode: op.mode ?? '', encoded: op.encoded } })),
    listKey: input.list_key,
    bookmarks: input.bookmarks,
  };
  const bytes = envelope(ChangeWrite.encode(message).finish());
  const req = decodeRequest(bytes);
  const decoded = ChangeWrite.decode(req.payload) as unknown as { ops: unknown[] };
  return bytes.length + decoded.ops.length;
}

/** CPU microseconds per operation (user + system): on a shared machine, wall time counts the waits for a core. */
function round(fn: () => number): number {
  let sink = 0;
  const start = process.cpuUsage();
  for (let i = 0; i < ITERATIONS; i++) sink += fn();
  const used = process.cpuUsage(start);
  if (sink === 0) throw new Error('nothing was encoded');
  return (used.user + used.system) / ITERATIONS;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// Warm both paths up before anything is timed (JIT, protobufjs's generated code).
round(viaJson);
round(viaMessage);
const json: number[] = [];
const typed: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  json.push(round(viaJson));
  typed.push(round(viaMessage));
}
const size = (payload: Uint8Array): number => envelope(payload).length;
const jsonBytes = size(Buffer.from(JSON.stringify(input)));
const typedBytes = size(ChangeWrite.encode({ repoId: input.repo_id, baseChangeId: input.base_change_id, message: input.message, ops: input.ops.map((op) => ({ write: { path: op.path, encoded: op.encoded } })), listKey: input.list_key, bookmarks: input.bookmarks }).finish());
console.log(
  JSON.stringify(
    {
      node: process.version,
      rounds: ROUNDS,
      iterations: ITERATIONS,
      jsonMicrosMedian: Number(median(json).toFixed(2)),
      typedMicrosMedian: Number(median(typed).toFixed(2)),
      jsonMicrosFastest: Number(Math.min(...json).toFixed(2)),
      typedMicrosFastest: Number(Math.min(...typed).toFixed(2)),
      jsonEnvelopeBytes: jsonBytes,
      typedEnvelopeBytes: typedBytes,
      jsonRounds: json.map((x) => Number(x.toFixed(2))),
      typedRounds: typed.map((x) => Number(x.toFixed(2))),
    },
    null,
    2,
  ),
);
