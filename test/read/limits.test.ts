import t from 'tap';
import { ROOT, applyOps, startWithRepo } from '../changes/helpers.js';
import { writeOp } from './read-helpers.js';

const name = (i: number): string => `files/f${String(i).padStart(5, '0')}.txt`;

t.test('limits', async (t) => {
  const f = await startWithRepo(t, 'wide');
  const write = async (body: Record<string, unknown>): Promise<string> => {
    const res = await applyOps(f, body);
    if (res.status >= 300) throw new Error(res.text);
    return res.json.change.id as string;
  };
  const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, k) => from + k);
  // An explicit mode: without one, apply-ops looks each path up in its (large) directory.
  let clock = Date.now();
  const first = await write({ base_change_id: ROOT, ops: range(0, 5025).map((i) => writeOp(name(i), `file ${i}\n`, '100644')), bookmarks: [{ name: 'main', create: true }] });
  const wide = await write({ base_change_id: first, ops: range(5025, 10_050).map((i) => writeOp(name(i), `file ${i}\n`, '100644')) });
  const edited = await write({ base_change_id: wide, ops: range(0, 3000).map((i) => writeOp(name(i * 3), `file ${i * 3}\nedited\n`, '100644')) });
  t.comment(`setup: 13,050 file writes in ${Date.now() - clock} ms`);
  clock = Date.now();

  t.test('content: a listing stops at 10,000 rows with truncated, child_count is complete', async (t) => {
    const res = await f.s.api('GET', `${f.base}/content?change_id=${wide}&path=files`);
    t.equal(res.status, 200);
    t.equal(res.json.child_count, 10_050);
    t.equal(res.json.entries.length, 10_000);
    t.equal(res.json.truncated, true);
    t.equal(res.json.entries[9999].path, name(9999));
    const root = await f.s.api('GET', `${f.base}/content?change_id=${wide}&depth=2`);
    t.equal(root.json.entries.length, 10_000, 'deeper rows count against the same limit');
    t.equal(root.json.entries[0].path, 'files');
    t.equal(root.json.truncated, true);
  });

  t.test('diff: hunks for 3,000 entries, file_limit after, rows stop at 10,000 with truncated', async (t) => {
    const res = await f.s.api('GET', `${f.base}/diff?base_change_id=${ROOT}&head_change_id=${wide}`);
    t.equal(res.status, 200);
    const { stats, entries, truncated } = res.json;
    t.equal(stats.entries, 10_050, 'stats count every entry');
    t.equal(entries.length, 10_000);
    t.equal(truncated, true);
    t.equal(stats.additions, 3000, 'lines are counted for the entries with hunks');
    t.match(entries[2999], { path: name(2999), omitted_reason: null, hunks: [{ lines: [{ kind: 'added', text: 'file 2999' }] }] });
    t.strictSame(entries[3000], { path: name(3000), status: 'added', old_path: null, size_bytes: 10, is_conflicted: false, omitted_reason: 'file_limit', hunks: null });
    t.equal(entries[9999].omitted_reason, 'file_limit');
    const patch = await f.s.api('GET', `${f.base}/diff?base_change_id=${ROOT}&head_change_id=${wide}`, { headers: { accept: 'text/plain' } });
    t.equal(patch.text.split('\ndiff --git ').length, 10_050, 'the patch has no entry limit');
  });

  // How fast small reads stay while diffs run is measured by `bench/diff-isolation`; what is
  // checked here is the behaviour behind it: a diff is computed off the front end's thread, so
  // reads keep being answered while it runs. A diff computed on that thread would hold every
  // read back until it finished.
  t.test('small reads are answered while a 3,000-file diff is computed', async (t) => {
    const token = await f.s.token();
    const headers = { authorization: `Bearer ${token}` };
    const answeredPerRound: number[] = [];
    for (let round = 0; round < 3; round++) {
      let diffDone = false;
      const diff = fetch(`${f.s.url}/v1${f.base}/diff?base_change_id=${wide}&head_change_id=${edited}`, { headers }).then(async (res) => {
        const body = (await res.json()) as { stats: { entries: number } };
        diffDone = true;
        return { status: res.status, entries: body.stats.entries };
      });
      let answered = 0;
      while (!diffDone) {
        const res = await fetch(`${f.s.url}/v1${f.base}`, { headers });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`GET repo: ${res.status}`);
        if (!diffDone) answered++;
      }
      const result = await diff;
      t.equal(result.status, 200);
      t.equal(result.entries, 3000);
      answeredPerRound.push(answered);
    }
    // A diff on the front end's thread would let at most one read through per round. How many
    // more fit depends on the machine's load and on how warm the diff's caches are, so the rounds
    // are judged together.
    const total = answeredPerRound.reduce((a, b) => a + b, 0);
    t.ok(total > answeredPerRound.length, `${answeredPerRound.join(' + ')} reads answered while the diffs ran`);
  });
});
