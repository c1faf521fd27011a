/**
 * Ed25519 signature checks on worker threads of their own. A token not in the verified-token
 * cache costs one check: libsodium's, about 52 µs of a core here (OpenSSL's, through Node's
 * crypto, took 106–109 µs). The front end's one thread sets the rate of fresh-token reads, so it
 * checks everything but the signature itself (token-verifier.ts), and the signatures gathered
 * during one turn of the event loop (every request parsed in it) go out together, split between
 * the threads by how many each still has, so one thread hop serves many tokens. Handing a check
 * over costs the front end 3–5 µs; checked inline, the front end's time per fresh-token read more
 * than doubled for the same total (docs/measurements/2026-11-28-fresh-token-libsodium.md).
 *
 * Threads of its own, at low priority like the read pool's, so a flood of new tokens does not
 * take the cores from cached reads and writes. Not the read pool itself: Piscina takes one task
 * per token, and a long diff there would hold the checks queued behind it. Earlier figures:
 * docs/measurements/2026-11-25-fresh-token-reads.md.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ServiceError } from '../../errors.js';
import { log } from '../../log.js';
import { packBatch, PUBLIC_KEY_BYTES, SIGNATURE_CHARS, type SignatureCheck, type SignatureResults } from './signature-batch.js';

interface Job extends SignatureCheck {
  resolve(valid: boolean): void;
  reject(err: unknown): void;
}

interface Thread {
  worker: Worker;
  batches: Map<number, Job[]>;
  /** Signatures sent and not yet answered. */
  load: number;
}

/** A batch this large takes a thread about 0.9 ms; larger ones would hold the first answers back. */
const MAX_BATCH = 16;

/** One thread per core, at most 4: beyond that the front end and the actors lose their cores. */
const SIGNATURE_THREADS = Math.min(4, availableParallelism());

export class SignaturePool {
  private readonly threads: Thread[] = [];
  private queue: Job[] = [];
  private scheduled = false;
  private nextId = 0;
  private closed = false;
  /** Signatures checked and batches sent since start (the operator's metrics). */
  readonly stats = { verified: 0, batches: 0 };

  /** Threads start as checks ask for them (`grow`): a server that sees few new tokens runs one. */
  constructor(private readonly size = SIGNATURE_THREADS) {}

  /**
   * Whether `signature` (base64url) is a valid Ed25519 signature of `signingInput` (ASCII) by
   * `publicKey` (its 32 raw bytes). A key or signature of another size verifies nothing.
   */
  verify(publicKey: Uint8Array, signingInput: string, signature: string): Promise<boolean> {
    if (this.closed) return Promise.reject(new ServiceError('UNAVAILABLE', 'server is shutting down', undefined, { retryAfter: 1 }));
    if (publicKey.length !== PUBLIC_KEY_BYTES || signature.length !== SIGNATURE_CHARS) return Promise.resolve(false);
    return new Promise((resolve, reject) => {
      this.queue.push({ publicKey, signingInput, signature, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      // After the poll phase: every request uWS parsed in this turn has queued its check by then.
      setImmediate(() => this.flush());
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const threads = this.threads.splice(0);
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }

  private flush(): void {
    this.scheduled = false;
    const jobs = this.queue;
    this.queue = [];
    if (this.closed) return this.fail(jobs);
    this.grow();
    const size = Math.min(MAX_BATCH, Math.ceil(jobs.length / this.threads.length));
    for (let i = 0; i < jobs.length; i += size) {
      let thread = this.threads[0]!;
      for (const t of this.threads) if (t.load < thread.load) thread = t;
      this.send(thread, jobs.slice(i, i + size));
    }
  }

  /** Starts the first thread with the first checks, and another while every thread has checks unanswered. */
  private grow(): void {
    if (this.threads.length < this.size && this.threads.every((t) => t.load > 0)) this.threads.push(this.spawn(this.threads.length));
  }

  private send(thread: Thread, jobs: Job[]): void {
    const id = ++this.nextId;
    thread.batches.set(id, jobs);
    thread.load += jobs.length;
    this.stats.batches++;
    const batch = packBatch(id, jobs);
    thread.worker.postMessage(batch, [batch.data.buffer, batch.ends.buffer]);
  }

  private spawn(slot: number): Thread {
    const thread: Thread = { worker: new Worker(new URL('./signature-worker.js', import.meta.url)), batches: new Map(), load: 0 };
    thread.worker.on('message', ({ id, ok }: SignatureResults) => {
      const jobs = thread.batches.get(id);
      if (!jobs) return;
      thread.batches.delete(id);
      thread.load -= jobs.length;
      this.stats.verified += jobs.length;
      jobs.forEach((job, i) => job.resolve(ok[i] === 1));
    });
    thread.worker.on('error', (err) => log.error('signature worker failed', { error: err.message }));
    thread.worker.on('exit', (code) => {
      const lost = [...thread.batches.values()].flat();
      thread.batches.clear();
      this.fail(lost);
      if (this.closed) return;
      log.error('signature worker exited; restarting', { code });
      this.threads[slot] = this.spawn(slot);
    });
    return thread;
  }

  /** Checks a thread took with it (or that came after close) are answered 503: the client may retry. */
  private fail(jobs: Job[]): void {
    if (jobs.length === 0) return;
    const err = new ServiceError('UNAVAILABLE', 'token verification was interrupted, retry', undefined, { retryAfter: 1 });
    for (const job of jobs) job.reject(err);
  }
}
