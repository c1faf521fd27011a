import { BroadcastChannel } from 'node:worker_threads';

/**
 * Which shards' outboxes a committed batch wrote to, told to the webhook actor in its own thread,
 * so that it drains those at once instead of probing all 256 outboxes at every poll (about 2 ms
 * each time; it still does, once a second, in case a signal was missed). A hint only: the
 * outboxes themselves are the truth.
 */
const CHANNEL = 'repohost:webhook-outbox';

/** Shards written to by the batch under way in this thread (taken at its commit). */
const written = new Set<number>();
let sender: BroadcastChannel | null = null;

/** Notes, inside a command, that an event went to `shard`'s outbox. */
export function noteOutboxEvent(shard: number): void {
  written.add(shard);
}

/** At a batch's commit: the shards its events went to (and forgets them), or null for none. */
export function takeOutboxEvents(): number[] | null {
  if (!written.size) return null;
  const shards = [...written];
  written.clear();
  return shards;
}

/** Once a batch is answered: tells the webhook actor which outboxes it wrote to. */
export function announceOutboxEvents(shards: number[]): void {
  if (!sender) {
    sender = new BroadcastChannel(CHANNEL);
    sender.unref();
  }
  sender.postMessage(shards);
}

/** Calls `listener` with the shards of each announcement; returns the unsubscribe. */
export function onOutboxEvents(listener: (shards: number[]) => void): () => void {
  const receiver = new BroadcastChannel(CHANNEL);
  receiver.unref();
  receiver.onmessage = (message) => listener((message as { data: number[] }).data);
  return () => receiver.close();
}
