import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Seals credentials at rest (upstream tokens and passwords, webhook signing secrets) with
 * AES-256-GCM under a server key kept in `<data>/secret.key` (created on first start, mode 0600).
 * A sealed value is `v1.<iv>.<tag>.<ciphertext>` in base64url. The nodes of a cluster share one
 * key (REPOHOST_SECRET_KEY), installed into each data directory by `install` before any thread
 * opens it: replicated records and the org directory's targets are sealed on one node and opened
 * on another.
 */
export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  /**
   * Makes `shared` (base64 of 32 bytes) the data directory's key. A directory that already holds
   * another key is refused: what it sealed could no longer be opened.
   */
  static install(dataDir: string, shared: string): void {
    const key = Buffer.from(shared.trim(), 'base64');
    if (key.length !== 32) throw new Error('setting REPOHOST_SECRET_KEY must be the base64 of 32 bytes (like `<data>/secret.key`)');
    const file = join(dataDir, 'secret.key');
    if (existsSync(file)) {
      if (!SecretBox.forDataDir(dataDir).key.equals(key)) {
        throw new Error(`${file} holds another key than REPOHOST_SECRET_KEY: set it to that file's content, or start on an empty data directory`);
      }
      return;
    }
    writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600 });
  }

  static forDataDir(dataDir: string): SecretBox {
    const file = join(dataDir, 'secret.key');
    if (!existsSync(file)) {
      try {
        writeFileSync(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    chmodSync(file, 0o600);
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte key`);
    return new SecretBox(key);
  }

  /** Names the key without revealing it: nodes compare it to find out whether they share one. */
  fingerprint(): string {
    return createHmac('sha256', this.key).update('repohost secret-key fingerprint').digest('base64url');
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
  }

  open(sealed: string): string {
    const [version, iv, tag, data] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || data === undefined) throw new Error('unrecognized sealed value');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
  }
}
