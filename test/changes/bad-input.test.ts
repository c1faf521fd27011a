import t from 'tap';
import { ROOT, applyOps, startWithRepo, write, type ApiResult } from './helpers.js';
import { streamRequest, type StreamedResponse } from './streaming-client.js';

const UNKNOWN_CHANGE = 'k'.repeat(32);
const UNKNOWN_OID = 'a'.repeat(40);
const MiB = 1024 * 1024;

/** How many answers with `status` the server counted for a route (its Prometheus metrics). */
async function answered(metricsUrl: string, route: string, status: number): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const line = text.split('\n').find((l) => l.startsWith('repohost_http_requests_total{') && l.includes(`route="${route}"`) && l.includes(`status="${status}"`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

t.test('changes - bad input is refused with 4xx naming what is wrong, never a 5xx', async (t) => {
  const f = await startWithRepo(t, 'bad');
  const statuses: number[] = [];
  const check = (res: ApiResult | StreamedResponse, status: number, code: string, what: string): void => {
    statuses.push(res.status);
    t.equal(res.status, status, `${what}: ${res.text.slice(0, 300)}`);
    t.equal(res.json?.error?.code, code, what);
  };
  const first = await applyOps(f, { base_change_id: ROOT, ops: [write('a.txt', 'a\n'), write('dir/b.txt', 'b\n')] });
  t.equal(first.status, 201, first.text);
  const id = first.json.change.id as string;
  const oid = first.json.change.current_commit_oid as string;

  t.test('path rules name the op index', async (t) => {
    const bad = ['../x', 'a/../../x', '/abs', 'a//b', 'a/', '.git/config', 'sub/.GIT/hooks', 'a\u0000b', './a', 'x'.repeat(4097), ''];
    for (const path of bad) {
      const res = await applyOps(f, { change_id: id, ops: [write('ok.txt', 'fine'), write(path, 'evil')] });
      check(res, 400, 'INVALID_REQUEST', `write ${JSON.stringify(path.slice(0, 20))}`);
      t.match(res.json.error.message, /^ops\[1\]: /);
      t.equal(res.json.error.details.op_index, 1);
    }
    check(await applyOps(f, { change_id: id, ops: [{ op: 'rename', from: 'a.txt', to: '../a.txt' }] }), 400, 'INVALID_REQUEST', 'rename to ../');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'delete', path: '/etc/passwd' }] }), 400, 'INVALID_REQUEST', 'delete /abs');
    const files = await f.s.api('POST', `${f.base}/changes`, { body: { base_change_id: id, files: [{ path: '.git/config', content: 'eA==' }] } });
    check(files, 400, 'INVALID_REQUEST', 'files with .git');
    t.match(files.json.error.message, /^files\[0\]: /);
    check(await applyOps(f, { change_id: id, ops: [write('a.txt/under-a-file', 'x')] }), 400, 'INVALID_REQUEST', 'a file where a directory is needed');
  });

  t.test('change ids and commit oids', async () => {
    check(await f.s.api('GET', `${f.base}/changes/not-a-change-id`), 400, 'INVALID_REQUEST', 'GET a malformed id');
    check(await f.s.api('GET', `${f.base}/changes/${'a'.repeat(32)}`), 400, 'INVALID_REQUEST', 'GET a hex id');
    check(await f.s.api('GET', `${f.base}/changes/${UNKNOWN_CHANGE}`), 404, 'CHANGE_NOT_FOUND', 'GET an unknown change');
    check(await f.s.api('GET', `${f.base}/changes/${UNKNOWN_CHANGE}/evolution`), 404, 'CHANGE_NOT_FOUND', 'evolution of an unknown change');
    check(await f.s.api('PATCH', `${f.base}/changes/zzz`, { body: { message: 'x' } }), 400, 'INVALID_REQUEST', 'PATCH a malformed id');
    check(await f.s.api('PATCH', `${f.base}/changes/${UNKNOWN_CHANGE}`, { body: { message: 'x' } }), 404, 'CHANGE_NOT_FOUND', 'PATCH an unknown change');
    check(await f.s.api('PATCH', `${f.base}/changes/${ROOT}`, { body: { message: 'x' } }), 400, 'INVALID_REQUEST', 'PATCH the virtual root');
    check(await applyOps(f, { change_id: ROOT, ops: [] }), 400, 'INVALID_REQUEST', 'evolve the virtual root');
    check(await applyOps(f, { base_change_id: 'nope', ops: [] }), 400, 'INVALID_REQUEST', 'malformed base_change_id');
    check(await applyOps(f, { base_change_id: UNKNOWN_CHANGE, ops: [] }), 404, 'CHANGE_NOT_FOUND', 'unknown base_change_id');
    check(await applyOps(f, { change_id: UNKNOWN_CHANGE, ops: [] }), 404, 'CHANGE_NOT_FOUND', 'unknown change_id');
    check(await applyOps(f, { ops: [] }), 400, 'INVALID_REQUEST', 'neither change_id nor base_change_id');
    check(await applyOps(f, { change_id: id, base_change_id: ROOT, ops: [] }), 400, 'INVALID_REQUEST', 'both change_id and base_change_id');
    check(await applyOps(f, { base_change_id: ROOT, expected_commit_oid: oid, ops: [] }), 400, 'INVALID_REQUEST', 'a guard on a create');
    check(await applyOps(f, { change_id: id, expected_commit_oid: UNKNOWN_OID, ops: [] }), 404, 'COMMIT_NOT_FOUND', 'a guard naming no commit');
    check(await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { base_commit_oid: UNKNOWN_OID, message: 'x' } }), 404, 'COMMIT_NOT_FOUND', 'PATCH guard naming no commit');
    check(await applyOps(f, { change_id: id, expected_commit_oid: 'xyz', ops: [] }), 400, 'INVALID_REQUEST', 'malformed guard');
  });

  t.test('missing files and blobs', async (t) => {
    const del = await applyOps(f, { change_id: id, ops: [write('x.txt', 'x'), { op: 'delete', path: 'missing.txt' }] });
    check(del, 404, 'FILE_NOT_FOUND', 'delete a missing path');
    t.equal(del.json.error.details.op_index, 1);
    check(await applyOps(f, { change_id: id, ops: [{ op: 'rename', from: 'missing.txt', to: 'b.txt' }] }), 404, 'FILE_NOT_FOUND', 'rename a missing path');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'set_metadata', path: 'missing.txt', metadata: { k: 'v' } }] }), 404, 'FILE_NOT_FOUND', 'metadata of a missing path');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'big.bin', blob_oid: UNKNOWN_OID }] }), 404, 'NOT_FOUND', 'an unknown blob_oid');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'big.bin', blob_oid: oid }] }), 404, 'NOT_FOUND', 'a blob_oid that is a commit');
    const after = await f.s.api('GET', `${f.base}/changes/${id}`);
    t.equal(after.json.current_commit_oid, oid, 'failed writes changed nothing');
  });

  t.test('body shape', async () => {
    check(await applyOps(f, { change_id: id, ops: [], colour: 'blue' }), 400, 'INVALID_REQUEST', 'an unknown body field');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'a', content: 'x', from: 'b' }] }), 400, 'INVALID_REQUEST', 'a field of another op');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'a' }] }), 400, 'INVALID_REQUEST', 'a write without content');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'a', content: 'x', blob_oid: UNKNOWN_OID }] }), 400, 'INVALID_REQUEST', 'content and blob_oid');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'chmod', path: 'a' }] }), 400, 'INVALID_REQUEST', 'an unknown op');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'a', content: 'not base64!', encoding: 'base64' }] }), 400, 'INVALID_REQUEST', 'invalid base64');
    check(await applyOps(f, { change_id: id, ops: [{ op: 'write', path: 'a', content: 'x', mode: '100664' }] }), 400, 'INVALID_REQUEST', 'a mode git refuses');
    check(await f.s.api('POST', `${f.base}/apply-ops`, { raw: '{"change_id": ', headers: { 'content-type': 'application/json' } }), 400, 'INVALID_REQUEST', 'malformed JSON');
    check(await f.s.api('POST', `${f.base}/apply-ops`, { raw: '[1,2]', headers: { 'content-type': 'application/json' } }), 400, 'INVALID_REQUEST', 'a JSON array');
    check(await f.s.api('POST', `${f.base}/apply-ops`, { raw: 'change_id=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 400, 'INVALID_REQUEST', 'not JSON');
    const streamedBad = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/json' }, [Buffer.from('{"change_id": "'), Buffer.from(id), Buffer.from('", "ops": [}')]);
    check(streamedBad, 400, 'INVALID_REQUEST', 'malformed JSON, streamed');
    check(
      await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { files: [{ path: 'a.txt', content: 'eA==' }], resolutions: [{ path: 'a.txt', take: 'source' }] } }),
      400,
      'INVALID_REQUEST',
      'files and resolutions together',
    );
    check(await f.s.api('PATCH', `${f.base}/changes/${id}`, { body: { resolutions: [{ path: 'a.txt', take: 'source' }] } }), 400, 'INVALID_REQUEST', 'resolutions on a clean change');
    check(await f.s.api('POST', `${f.base}/changes`, { body: { files: [] } }), 400, 'INVALID_REQUEST', 'a create without base_change_id');
    check(await f.s.api('POST', `${f.base}/changes`, { body: { base_change_id: id, files: [{ path: 'a', action: 'delete', content: 'eA==' }] } }), 400, 'INVALID_REQUEST', 'a delete with content');
    check(await applyOps(f, { change_id: id, ops: [], author: { name: 'A', email: 'a@x', date: 'yesterday' } }), 400, 'INVALID_REQUEST', 'a bad author date');
  });

  t.test('a body that breaks its schema inside an op names the op, small or streamed', async (t) => {
    const token = await f.s.token();
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ op: 'chmod', path: 'a' }, /"op" must be one of "write", "delete", "rename", "set_metadata"/],
      [{ op: 'write', path: 'a' }, /exactly one of "content" or "blob_oid"/],
      [{ op: 'write', path: 'a', content: 'x', blob_oid: UNKNOWN_OID }, /exactly one of "content" or "blob_oid"/],
      [{ op: 'delete', path: 'a', content: 'x' }, /"content" is not allowed for delete/],
      [{ op: 'write', path: 'a', content: 'x', mode: '100664' }, /"mode" must be one of/],
      [{ op: 'set_metadata', path: 'a' }, /"metadata" is required/],
    ];
    for (const [op, rule] of cases) {
      const body = { change_id: id, ops: [write('ok.txt', 'x'), op] };
      const small = await applyOps(f, body);
      check(small, 400, 'INVALID_REQUEST', JSON.stringify(op));
      t.match(small.json.error.message, /^ops\[1\]: /);
      t.match(small.json.error.message, rule);
      t.equal(small.json.error.details.op_index, 1);
      // Past 256 KiB the body is parsed as a stream; it meets the same schema.
      const padded = Buffer.from(JSON.stringify({ ...body, message: 'm'.repeat(300 * 1024) }));
      const streamed = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, [padded]);
      check(streamed, 400, 'INVALID_REQUEST', `${JSON.stringify(op)}, streamed`);
      t.equal(streamed.json.error.message, small.json.error.message);
      t.equal(streamed.json.error.details.op_index, 1);
    }
    const files = await f.s.api('POST', `${f.base}/changes`, { body: { base_change_id: id, files: [{ path: 'a', content: 'eA==' }, { path: 'b', action: 'delete', content: 'eA==' }] } });
    check(files, 400, 'INVALID_REQUEST', 'a files delete with content');
    t.match(files.json.error.message, /^files\[1\]: a delete takes only "path"/);
    t.equal(files.json.error.details.op_index, 1);
  });

  t.test('an author date must be an RFC 3339 date-time that exists', async (t) => {
    for (const date of ['yesterday', '2024-02-30T04:05:06Z', '2024-02-03T04:05:06', '2024-02-03T24:00:00Z', '2024-02-03T04:05:06+25:00']) {
      const res = await applyOps(f, { base_change_id: id, ops: [], author: { name: 'A', email: 'a@x', date } });
      check(res, 400, 'INVALID_REQUEST', `author date ${date}`);
      t.match(res.json.error.message, /"author\.date" must be a date-time with an offset/);
    }
    const dated = await applyOps(f, { base_change_id: id, ops: [], author: { name: 'A', email: 'a@x', date: '2024-02-29T23:59:59.5+01:00' } });
    t.equal(dated.status, 201, dated.text);
    t.equal(dated.json.change.authored_at, '2024-02-29T22:59:59.000Z');
  });

  t.test('truncated or malformed streamed bodies are 400, chunked or declared over 256 KiB', async () => {
    const token = await f.s.token();
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const filler = 'x'.repeat(300 * 1024);
    const whole = JSON.stringify({ change_id: id, message: 'm', ops: [{ op: 'write', path: 'big.txt', content: filler }] });
    const bodies: Array<[string, string]> = [
      ['cut inside a key', whole.slice(0, 40)],
      ['cut inside a content', whole.slice(0, 200 * 1024)],
      ['cut after a value', `{"change_id":"${id}","ops":[{"op":"delete","path":"a.txt"}`],
      ['cut after a comma', `{"change_id":"${id}","ops":[`],
      ['a bad escape', `{"change_id":"${id}","message":"\\q${filler}"}`],
      ['a bare word', `{"change_id":"${id}","ops":tru`],
      ['trailing garbage', `${whole}}`],
    ];
    for (const [what, body] of bodies) {
      for (const route of [`${f.base}/apply-ops`, `${f.base}/changes`]) {
        const piece = Buffer.from(body);
        const chunked = await streamRequest(`${f.s.url}/v1${route}`, 'POST', headers, [piece]);
        check(chunked, 400, 'INVALID_REQUEST', `${what}, chunked, ${route}`);
        if (piece.length > 256 * 1024) {
          const declared = await streamRequest(`${f.s.url}/v1${route}`, 'POST', { ...headers, 'content-length': String(piece.length) }, [piece]);
          check(declared, 400, 'INVALID_REQUEST', `${what}, declared ${piece.length} bytes, ${route}`);
        }
      }
    }
  });

  t.test('bodies are taken exactly as sent or refused: invalid UTF-8, lone surrogates, __proto__ keys', async (t) => {
    const token = await f.s.token();
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const big = 'y'.repeat(300 * 1024);
    const raw = (text: string): Buffer => Buffer.from(text);
    const withBytes = (before: string, bytes: number[], after: string): Buffer => Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]);
    const cases: Array<[string, Buffer]> = [
      ['invalid UTF-8 in a content', withBytes(`{"change_id":"${id}","ops":[{"op":"write","path":"u.txt","content":"a`, [0xff, 0xfe], '"}]}')],
      ['invalid UTF-8 in a message', withBytes(`{"change_id":"${id}","message":"`, [0xc3, 0x28], '","ops":[]}')],
      ['a lone high surrogate in a content', raw(`{"change_id":"${id}","ops":[{"op":"write","path":"u.txt","content":"a\\ud800b"}]}`)],
      ['a lone low surrogate in a path', raw(`{"change_id":"${id}","ops":[{"op":"write","path":"u\\udc00.txt","content":"x"}]}`)],
      ['a lone surrogate in a metadata key', raw(`{"change_id":"${id}","ops":[{"op":"set_metadata","path":"a.txt","metadata":{"k\\ud800":"v"}}]}`)],
      ['a __proto__ metadata key', raw(`{"change_id":"${id}","ops":[{"op":"set_metadata","path":"a.txt","metadata":{"__proto__":"v"}}]}`)],
    ];
    for (const [what, body] of cases) {
      const small = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { ...headers, 'content-length': String(body.length) }, [body]);
      check(small, 400, 'INVALID_REQUEST', `${what}, small body`);
      // The same body made large with a long message in front: the streamed parser reads it.
      const padded = Buffer.concat([Buffer.from(`{"message":"${big}",`), body.subarray(1)]);
      const streamed = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', headers, [padded]);
      check(streamed, 400, 'INVALID_REQUEST', `${what}, streamed body`);
    }
    // A surrogate pair split between the parser's pieces and batches is one character, kept whole.
    const emoji = '🎉'.repeat(70_000);
    const pair = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', headers, [raw(JSON.stringify({ base_change_id: id, ops: [{ op: 'write', path: 'emoji.txt', content: emoji }] }))]);
    t.equal(pair.status, 201, pair.text.slice(0, 300));
    const stored = await f.s.api('GET', `${f.base}/content?path=emoji.txt&change_id=${pair.json.change.id}`, { headers: { accept: 'application/octet-stream' } });
    t.equal(stored.text, emoji, 'the emoji content is byte-exact');
    const repoTags = await f.s.api('PATCH', f.base, { raw: '{"tags":{"__proto__":"x"}}', headers: { 'content-type': 'application/json' } });
    check(repoTags, 400, 'INVALID_REQUEST', 'a __proto__ tag key');
    const lone = await f.s.api('PATCH', f.base, { raw: '{"tags":{"k":"\\udfff"}}', headers: { 'content-type': 'application/json' } });
    check(lone, 400, 'INVALID_REQUEST', 'a lone surrogate in a tag value');
    const latin = await f.s.api('PATCH', f.base, { raw: Buffer.from([0x7b, 0x22, 0x74, 0x61, 0x67, 0x73, 0x22, 0x3a, 0x7b, 0x22, 0x6b, 0x22, 0x3a, 0x22, 0xe9, 0x22, 0x7d, 0x7d]), headers: { 'content-type': 'application/json' } });
    check(latin, 400, 'INVALID_REQUEST', 'a Latin-1 byte in a small body');
    // Nesting deeper than the call stack goes, with what must be refused beside it.
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    const deepProto = await f.s.api('PATCH', f.base, { raw: `{"x":${deep},"tags":{"__proto__":"x"}}`, headers: { 'content-type': 'application/json' } });
    check(deepProto, 400, 'INVALID_REQUEST', 'a __proto__ key beside deep nesting');
    const deepLone = await f.s.api('PATCH', f.base, { raw: `{"x":${deep},"tags":{"k":"\\udfff"}}`, headers: { 'content-type': 'application/json' } });
    check(deepLone, 400, 'INVALID_REQUEST', 'a lone surrogate beside deep nesting');
    const after = await f.s.api('GET', f.base);
    t.same(after.json.tags, {}, 'no tag was stored');
  });

  t.test('10,001 ops are refused, with or without a declared length', async (t) => {
    const ops = Array.from({ length: 10_001 }, (_, i) => ({ op: 'delete', path: `f${i}` }));
    check(await applyOps(f, { change_id: id, ops }), 400, 'INVALID_REQUEST', '10,001 ops');
    const body = Buffer.from(JSON.stringify({ change_id: id, ops }));
    const pieces = Array.from({ length: Math.ceil(body.length / 65536) }, (_, i) => body.subarray(i * 65536, (i + 1) * 65536));
    const streamed = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { authorization: `Bearer ${await f.s.token()}`, 'content-type': 'application/json' }, pieces);
    check(streamed, 400, 'INVALID_REQUEST', '10,001 ops, streamed');
    t.match(streamed.json.error.message, /10000/);
    check(await applyOps(f, { change_id: id, ops: ops.slice(0, 10_000).map((op, i) => (i === 0 ? write('ok.txt', 'x') : op)) }), 404, 'FILE_NOT_FOUND', '10,000 ops pass the limit');
  });

  t.test('over-limit bodies are refused while they stream in', async (t) => {
    const token = await f.s.token();
    // Up to 2 GiB of content would follow; the server must answer after a little over 512 MiB.
    async function* endless(): AsyncGenerator<Buffer> {
      yield Buffer.from(`{"change_id":"${id}","ops":[{"op":"write","path":"huge.txt","content":"`);
      const piece = Buffer.alloc(4 * MiB, 'x');
      for (let i = 0; i < 512; i++) yield piece;
      yield Buffer.from('"}]}');
    }
    const metrics = f.s.metricsUrl!;
    const earlier = await answered(metrics, '/{org}/{repo}/apply-ops', 413);
    const res = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, endless());
    if (res.status === 0) {
      // The answer was lost to the connection reset; the server's own count shows what it said.
      statuses.push(413);
      t.equal(await answered(metrics, '/{org}/{repo}/apply-ops', 413), earlier + 1, `the server answered 413 (client saw: ${res.error})`);
    } else check(res, 413, 'PAYLOAD_TOO_LARGE', 'a 2 GiB content without a declared length');
    t.ok(res.sent > 512 * MiB && res.sent < 1024 * MiB, `answered after ${Math.round(res.sent / MiB)} MiB of 2048`);

    const declared = await streamRequest(`${f.s.url}/v1${f.base}/apply-ops`, 'POST', { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': String(701 * MiB) }, []);
    check(declared, 413, 'PAYLOAD_TOO_LARGE', 'a declared length over 700 MiB');

    const blob = await streamRequest(`${f.s.url}/v1${f.base}/blobs`, 'POST', { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' }, (function* () {
      const piece = Buffer.alloc(4 * MiB, 1);
      for (let i = 0; i < 200; i++) yield piece;
    })());
    if (blob.status === 0) {
      statuses.push(413);
      t.equal(await answered(metrics, '/{org}/{repo}/blobs', 413), 1, `the server answered 413 (client saw: ${blob.error})`);
    } else check(blob, 413, 'PAYLOAD_TOO_LARGE', 'an 800 MiB blob upload');
    t.ok(blob.sent < 800 * MiB, `the blob upload was answered after ${Math.round(blob.sent / MiB)} MiB of 800`);
    check(await f.s.api('POST', `${f.base}/blobs`, { raw: 'abc', headers: { 'content-type': 'application/json' } }), 400, 'INVALID_REQUEST', 'a blob that is not octet-stream');

    const after = await f.s.api('GET', `${f.base}/changes/${id}`);
    t.equal(after.json.current_commit_oid, oid, 'nothing was written');
  });

  t.test('no response was a 5xx', async (t) => {
    t.ok(statuses.length > 40);
    t.same(statuses.filter((s) => s >= 500), []);
  });
});

t.test('apply-ops - metadata on a path too long for its storage key is a 400 naming the op; the file itself can be written', async (t) => {
  const f = await startWithRepo(t, 'long-paths');
  const long = `dir/${'a'.repeat(2500)}`;
  const written = await applyOps(f, { base_change_id: ROOT, ops: [write(long, 'x')] });
  t.equal(written.status, 201, 'a 2,504-byte path is a valid path');
  const id = written.json.change.id as string;
  const refused = await applyOps(f, { change_id: id, ops: [{ op: 'set_metadata', path: 'dir', metadata: {} }, { op: 'set_metadata', path: long, metadata: { k: 'v' } }] });
  t.equal(refused.status, 400, refused.text);
  t.equal(refused.json.error.code, 'INVALID_REQUEST');
  t.match(refused.json.error.message, /^ops\[1\]: metadata can be set only on paths of at most \d+ bytes/);
  t.equal(refused.json.error.details.op_index, 1);
  const shorter = `dir/${'b'.repeat(1800)}`;
  const set = await applyOps(f, { change_id: id, ops: [write(shorter, 'y'), { op: 'set_metadata', path: shorter, metadata: { k: 'v' } }] });
  t.equal(set.status, 200, set.text);
  const read = await f.s.api('GET', `${f.base}/content?change_id=${id}&path=${encodeURIComponent(shorter)}`);
  t.same(read.json.metadata, { k: 'v' });
});
