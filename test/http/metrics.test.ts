import t from 'tap';
import { serverForFile } from '../helpers/server.js';
import { metricValue } from '../helpers/metrics-text.js';

/** The operator listener (API §13): Prometheus text on its own port, never on the API port. */
const s = await serverForFile(t, { workers: 2 });

t.test('metrics - requests and latency per route, mailbox depth per worker, batches, LMDB commit/flush, queue wait and the LMDB write-lock, page and sync totals', async (t) => {
  const token = await s.token();
  for (let i = 0; i < 3; i++) t.equal((await s.api('GET', '/whoami', { token })).status, 200);
  t.equal((await s.api('GET', '/acme/nope', { token })).status, 404);
  t.equal((await s.api('GET', '/acme/x/y/z/w/v', { token })).status, 404);
  const created = await Promise.all(Array.from({ length: 30 }, (_, i) => s.api('POST', '/acme/repos', { token, body: { name: `m${i}` } })));
  t.ok(created.every((r) => r.status === 201));

  const res = await fetch(s.metricsUrl!);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/plain/);
  const text = await res.text();
  t.equal(metricValue(text, 'repohost_http_requests_total', { route: '/whoami', method: 'GET', status: '200' }), 3);
  t.equal(metricValue(text, 'repohost_http_requests_total', { route: '/{org}/{repo}', method: 'GET', status: '404' }), 1);
  t.equal(metricValue(text, 'repohost_http_requests_total', { route: 'unmatched', status: '404' }), 1);
  t.equal(metricValue(text, 'repohost_http_requests_total', { route: '/{org}/repos', method: 'POST', status: '201' }), 30);
  t.equal(metricValue(text, 'repohost_http_request_duration_seconds_count', { route: '/whoami', method: 'GET' }), 3);
  t.ok(metricValue(text, 'repohost_http_request_duration_seconds_bucket', { route: '/whoami', method: 'GET', le: '+Inf' }) === 3, 'latency histogram per route');
  t.equal(metricValue(text, 'repohost_mailbox_depth', { worker: '0' }), 0);
  t.equal(metricValue(text, 'repohost_mailbox_depth', { worker: '1' }), 0);
  t.ok(Number.isNaN(metricValue(text, 'repohost_mailbox_depth', { worker: '2' })), 'one gauge per worker of --workers 2');
  // A create is a saga of three commands (reserve, initialise, confirm: actors/repo-saga.ts).
  t.equal(metricValue(text, 'repohost_actor_batch_size_sum'), 90, 'every command counted in a batch');
  t.ok(metricValue(text, 'repohost_actor_batch_size_count') >= 1);
  t.ok(metricValue(text, 'repohost_lmdb_commit_seconds_count') >= 1);
  t.equal(metricValue(text, 'repohost_lmdb_commit_seconds_count'), metricValue(text, 'repohost_actor_batch_size_count'), 'one commit per batch');
  t.equal(metricValue(text, 'repohost_lmdb_flush_seconds_count'), metricValue(text, 'repohost_actor_batch_size_count'));
  t.equal(metricValue(text, 'repohost_actor_queue_wait_seconds_count'), 90, 'queue wait per message');
  t.ok(metricValue(text, 'repohost_process_process_resident_memory_bytes') > 0, 'process metrics');

  const lmdb = (name: string): number => metricValue(text, `repohost_lmdb_${name}_total`);
  t.ok(lmdb('transactions') >= metricValue(text, 'repohost_actor_batch_size_count'), "LMDB's own count of write transactions, every writer of the process");
  t.ok(lmdb('pages_written') > lmdb('transactions'), 'pages written by commits');
  for (const name of ['write_lock_held_seconds', 'sync_seconds']) t.ok(lmdb(name) > 0, `${name} accumulates`);
  for (const name of ['write_lock_wait_seconds', 'page_write_seconds']) t.ok(lmdb(name) >= 0, `${name} is reported`);

  t.equal((await fetch(s.metricsUrl!.replace('/metrics', '/other'))).status, 404);
  t.equal((await fetch(`${s.url}/metrics`)).status, 404, 'not served on the API port');
});
