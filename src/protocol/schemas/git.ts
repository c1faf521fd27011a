import { arr, nullable, obj, str } from './common.js';

/** A push's outcome per ref, as the receive-pack route reports it to git (API §14). */
export const gitPush = obj({ refs: arr(obj({ ref: str(), error: nullable(str()) })) });

export const responses = { gitPush };
