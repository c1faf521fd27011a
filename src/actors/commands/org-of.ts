import { ServiceError } from '../../errors.js';
import type { OrgRecord } from '../../storage/records.js';
import type { CommandContext } from '../command.js';

/** The org a command acts for, from the org directory; NOT_FOUND when it is gone. */
export function orgOf(ctx: CommandContext, orgId: string): OrgRecord {
  const org = ctx.directory.org(orgId);
  if (!org) throw new ServiceError('NOT_FOUND', 'organization not found');
  return org;
}
