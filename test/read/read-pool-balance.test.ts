import t from 'tap';
import { Piscina } from 'piscina';
import { balanceReads, TASKS_PER_READ_THREAD } from '../../src/actors/read-pool.js';

/**
 * The read pool's choice of thread: the least busy one, except that a task naming a repository
 * goes to that repository's thread whenever that thread has at most one task more than the least
 * busy, so a repository's clones meet the reachable sets their thread keeps.
 */
type Balancer = ReturnType<typeof balanceReads>;
type Worker = Parameters<Balancer>[1][number];
type Task = Parameters<Balancer>[0];

const worker = (id: number, currentUsage: number): Worker => ({ id, currentUsage, isRunningAbortableTask: false }) as unknown as Worker;
const task = (affinity?: string): Task => ({ taskId: 1, [Piscina.queueOptionsSymbol]: affinity === undefined ? null : { affinity } }) as unknown as Task;

t.test('read pool - a task without affinity goes to the least busy thread', async (t) => {
  const balance = balanceReads(3);
  t.equal(balance(task(), [worker(1, 2), worker(2, 1), worker(3, 3)])?.id, 2);
  t.equal(balance(task(), [worker(1, TASKS_PER_READ_THREAD), worker(2, TASKS_PER_READ_THREAD)]), null, 'none when every thread is full');
});

t.test('read pool - a repository\'s tasks go to one thread while it is at most one task busier, and spread beyond', async (t) => {
  const balance = balanceReads(2);
  const idle = [worker(7, 0), worker(8, 0)];
  const home = balance(task('repo_a'), idle)!.id;
  for (let i = 0; i < 5; i++) t.equal(balance(task('repo_a'), [worker(8, 0), worker(7, 0)])?.id, home, 'the same thread, whatever the order the pool lists them in');
  const other = home === 7 ? 8 : 7;
  t.equal(balance(task('repo_a'), [worker(home, 1), worker(other, 0)])?.id, home, 'one task more at home (the last clone still finishing) keeps the home thread');
  t.equal(balance(task('repo_a'), [worker(home, 2), worker(other, 0)])?.id, other, 'two more yield to an idle thread');
  const homes = new Set(Array.from({ length: 16 }, (_, i) => balance(task(`repo_${i}`), idle)!.id));
  t.same([...homes].sort(), [7, 8], 'repositories are spread over the threads');
});

t.test('read pool - no preference until every thread is up', async (t) => {
  const balance = balanceReads(2);
  for (let i = 0; i < 16; i++) t.equal(balance(task(`repo_${i}`), [worker(9, 0)])?.id, 9);
});
