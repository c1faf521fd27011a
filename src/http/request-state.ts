/** Per-request bookkeeping of a uWS response: whether the client aborted, and who to tell. */
export class RequestState {
  aborted = false;
  finished = false;
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
}
