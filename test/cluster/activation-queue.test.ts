import t from 'tap';
import { ActivationQueue, ActivationUrgency } from '../../src/cluster/replica/activation-queue.js';

/** Queues activations behind a full queue and records the order in which they start. */
async function order(queue: ActivationQueue, slots: number, waiting: Array<[number, ActivationUrgency]>, before?: () => void): Promise<number[]> {
  const started: number[] = [];
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const holders = Array.from({ length: slots }, (_, i) => queue.run(1000 + i, ActivationUrgency.Placed, () => held));
  const queued = waiting.map(([shard, urgency]) => queue.run(shard, urgency, async () => void started.push(shard)));
  before?.();
  release();
  await Promise.all([...holders, ...queued]);
  return started;
}

t.test('with every slot taken, waiting activations start most urgent first, then in arrival order', async (t) => {
  const queue = new ActivationQueue(2);
  const started = await order(queue, 2, [
    [1, ActivationUrgency.Placed],
    [2, ActivationUrgency.Promoted],
    [3, ActivationUrgency.Placed],
    [4, ActivationUrgency.Promoted],
  ]);
  t.same(started, [2, 4, 1, 3]);
});

t.test('a shard a request waits for jumps the queue', async (t) => {
  const queue = new ActivationQueue(1);
  const started = await order(
    queue,
    1,
    [
      [1, ActivationUrgency.Promoted],
      [2, ActivationUrgency.Placed],
      [3, ActivationUrgency.Placed],
    ],
    () => queue.demand(3),
  );
  t.same(started, [3, 1, 2]);
});

t.test('no more than the limit run at once, and a failed step frees its slot', async (t) => {
  const queue = new ActivationQueue(3);
  let running = 0;
  let most = 0;
  const steps = Array.from({ length: 20 }, (_, shard) =>
    queue.run(shard, ActivationUrgency.Placed, async () => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 2));
      running--;
      if (shard % 5 === 0) throw new Error('log unreachable');
    }),
  );
  const results = await Promise.allSettled(steps);
  t.equal(most, 3);
  t.equal(results.filter((r) => r.status === 'rejected').length, 4);
});
