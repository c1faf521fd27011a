import type { Command } from '../command.js';
import { createRepo, deleteRepo, updateRepo } from './repos.js';

/** Every command the actors understand; the worker loads this module by default. */
export const commands: Command<any>[] = [createRepo, updateRepo, deleteRepo];
