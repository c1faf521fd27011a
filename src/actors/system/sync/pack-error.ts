/**
 * A packfile that cannot be read: malformed, over a limit, or failing its checksum. The message
 * describes the problem in our words (sizes and counts at most), never with bytes of the pack, so
 * whoever received the pack can show it to its client as is.
 */
export class PackError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PackError';
  }
}
