/**
 * The webhook receiver (`webhook-receiver.ts`) in its own process, as the orchestrator drives it:
 * started with the number of targets, asked for snapshots over IPC.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { FromReceiver, ReceiverSnapshot, ToReceiver } from './webhook-receiver.js';

const RECEIVER_ENTRY = fileURLToPath(new URL('./webhook-receiver.js', import.meta.url));

export class ReceiverProcess {
  private waiting: ((s: ReceiverSnapshot) => void) | null = null;

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {
    child.on('message', (m: FromReceiver) => {
      if (m.type === 'snapshot' && this.waiting) {
        const w = this.waiting;
        this.waiting = null;
        w(m.snapshot);
      }
    });
  }

  static start(targets: number): Promise<ReceiverProcess> {
    const child = fork(RECEIVER_ENTRY, [String(targets)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    return new Promise((resolve, reject) => {
      child.once('message', (m: FromReceiver) => {
        if (m.type === 'listening') resolve(new ReceiverProcess(child, m.port));
      });
      child.once('exit', (code) => reject(new Error(`webhook receiver exited with code ${code}`)));
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  snapshot(ids: boolean): Promise<ReceiverSnapshot> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.child.send({ type: 'snapshot', ids } satisfies ToReceiver);
    });
  }

  stop(): void {
    this.child.kill('SIGTERM');
  }
}
