/**
 * What an agent writes. Deterministic, so verification can recompute the exact bytes of an
 * agent's last acknowledged write and compare them with what the server serves.
 */

export function agentFilePath(agent: number, file: number): string {
  return `agents/a${agent}/file-${file}.txt`;
}

const FILLER = 'the quick brown fox jumps over the lazy dog 0123456789\n';

/** `bytes` of UTF-8 text (ASCII only, so bytes = characters) that differs for every write. */
export function agentFileContent(agent: number, seq: number, file: number, bytes: number): string {
  const head = `agent ${agent} write ${seq} file ${file}\n`;
  if (head.length >= bytes) return head.slice(0, bytes);
  const fill = bytes - head.length;
  return head + FILLER.repeat(Math.ceil(fill / FILLER.length)).slice(0, fill);
}
