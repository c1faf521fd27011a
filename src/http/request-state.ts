import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { ServiceError } from '../errors.js';

/**
 * Per-request bookkeeping of a uWS response: whether the client aborted, whether the response is
 * written, whether reading the connection is paused, and who to tell of an abort.
 */
export class RequestState {
  aborted = false;
  finished = false;
  /**
   * True while uWS's request callback runs: uWS corks the socket for it, so a response written
   * then needs no `cork` of its own (a call into uWS and back into JS per response). Set by the
   * callback itself; false anywhere else, where a response corks.
   */
  inCallback = false;
  private paused = false;
  private listeners: Array<() => void> = [];

  onAbort(listener: () => void): void {
    if (this.aborted) listener();
    else this.listeners.push(listener);
  }

  abort(): void {
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = [];
    for (const l of listeners) l();
  }

  /**
   * Stops uWS reading the connection: for back-pressure on a body, and once the request is read
   * while its response is still to come. uWS closes a connection on which it parses a request
   * while the previous response is pending, so a pipelined request is left unread (in the
   * kernel) until the response is written, which resumes reading (`send`, `sendStream`). A paused
   * socket is not polled at all, so a client that leaves meanwhile is noticed only then: nothing
   * here cancels work on an abort anyway.
   */
  pauseReading(res: HttpResponse): void {
    if (this.paused || this.aborted || this.finished) return;
    this.paused = true;
    res.pause();
  }

  resumeReading(res: HttpResponse): void {
    if (!this.paused || this.aborted) return;
    this.paused = false;
    res.resume();
  }

  /**
   * Resolves once uWS has parsed everything it has read of the connection so far, and only if the
   * client is still there. A pipelined request read together with this one makes uWS close the
   * connection while parsing it, right after this request's callbacks ran: a command sent to an
   * actor before then would be applied with nobody to answer. I/O callbacks finish before
   * `setImmediate` callbacks run.
   */
  connectionSettled(): Promise<void> {
    return new Promise((resolve, reject) => {
      setImmediate(() => (this.aborted ? reject(clientGone()) : resolve()));
    });
  }
}

export const clientGone = (): ServiceError => new ServiceError('INVALID_REQUEST', 'client went away');
