import { workerData } from 'node:worker_threads';
import { openStorage } from '../storage/database.js';
import { serverStorage } from '../storage/server-storage.js';
import { SecretBox } from '../storage/secret-box.js';
import { openOrgDirectory } from '../cluster/org-directory/open-org-directory.js';
import { decodeRequest, encodeReply } from '../protocol/messages.js';
import { compileResponses } from '../protocol/serializers.js';
import { setLogLevel } from '../log.js';
import type { Command } from './command.js';
import { Mailboxes, ThreadExit } from './mailbox.js';
import type { ActorSettings } from './settings.js';
import { claimWriterSlot } from './writer-activity.js';

/**
 * Piscina worker entry: hosts the mailboxes of the shards this thread owns. The set of commands
 * comes from a module named in workerData (`commands`), so the runtime itself knows no command.
 */
interface WorkerData {
  settings: ActorSettings;
  commandsModule: string;
  writerActivity: SharedArrayBuffer;
}

const data = workerData as WorkerData;
claimWriterSlot(data.writerActivity);
setLogLevel(data.settings.logLevel);
const storage = serverStorage(openStorage(data.settings.dataDir));
const secrets = SecretBox.forDataDir(data.settings.dataDir);
const { directory } = await openOrgDirectory(storage, data.settings.orgDirectory);
const { commands } = (await import(data.commandsModule)) as { commands: Command[] };
compileResponses();
const mailboxes = new Mailboxes(storage, directory, secrets, data.settings, new Map(commands.map((c) => [c.name, c])));

// Ending the thread inside an open write transaction would strand LMDB's write lock (see
// ThreadExit); an exit requested during a batch unwinds the transaction first.
const exitThread = process.exit.bind(process);
process.exit = ((code?: number | string | null) => {
  if (mailboxes.inTransaction) throw new ThreadExit(Number(code ?? 0));
  return exitThread(code ?? undefined);
});

export default async function handle(task: { bytes: Uint8Array }): Promise<Uint8Array> {
  const reply = await mailboxes.deliver(decodeRequest(task.bytes));
  return encodeReply(reply);
}
